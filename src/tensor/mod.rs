//! The JS `Tensor` class: a newtype over `tch::Tensor` (`None` once disposed). Split by verb:
//! `create` (factories), `data` (reading values out), `ops` (math and conversions), `display`.
use crate::error::{guard, Code, Result};
use crate::{bail_code, device, dtype, memory};
use napi_derive::napi;
use tch::Tensor;

/// A tensor: a view (shape, strides, offset, dtype) onto storage owned by libtorch, on the CPU
/// or a CUDA device. Create one with `torch.tensor`, `torch.ones`, ...; free it early with
/// `dispose()` (otherwise the garbage collector frees it).
#[napi(js_name = "Tensor")]
pub struct JsTensor {
    inner: Option<Tensor>,
    bytes: i64,
}

// Declared after the struct: napi-rs's type generator learns `js_name = "Tensor"` when the
// struct's macro expands, and impl blocks expanded before that would be typed as `JsTensor`.
pub mod create;
pub mod data;
pub mod display;
pub mod ops;

impl JsTensor {
    pub fn new(t: Tensor) -> JsTensor {
        let bytes = memory::tensor_bytes(&t);
        memory::track(bytes);
        JsTensor {
            inner: Some(t),
            bytes,
        }
    }

    /// The tensor, or a `Disposed` error.
    pub fn get(&self) -> anyhow::Result<&Tensor> {
        match &self.inner {
            Some(t) => Ok(t),
            None => bail_code!(
                Code::Disposed,
                "this tensor was disposed; it can no longer be used"
            ),
        }
    }

    fn release(&mut self) {
        if self.inner.take().is_some() {
            memory::untrack(self.bytes);
        }
    }
}

impl Drop for JsTensor {
    fn drop(&mut self) {
        self.release();
    }
}

#[napi]
impl JsTensor {
    /// The size of each dimension, e.g. `[1, 3, 224, 224]`.
    #[napi(getter)]
    pub fn shape(&self) -> Result<Vec<i64>> {
        guard(|| Ok(self.get()?.size()))
    }

    /// The element type: `'float32'`, `'int64'`, `'bool'`, ...
    #[napi(getter)]
    pub fn dtype(&self) -> Result<String> {
        guard(|| Ok(dtype::name(self.get()?.kind())))
    }

    /// Where the tensor lives: `'cpu'` or `'cuda:N'`.
    #[napi(getter)]
    pub fn device(&self) -> Result<String> {
        guard(|| Ok(device::name(self.get()?.device())))
    }

    /// The number of dimensions.
    #[napi(getter)]
    pub fn ndim(&self) -> Result<u32> {
        guard(|| Ok(self.get()?.dim() as u32))
    }

    /// Whether autograd records operations on this tensor.
    #[napi(getter)]
    pub fn requires_grad(&self) -> Result<bool> {
        guard(|| Ok(self.get()?.requires_grad()))
    }

    /// The number of elements (the product of the shape).
    #[napi]
    pub fn numel(&self) -> Result<i64> {
        guard(|| Ok(self.get()?.size().iter().product()))
    }

    /// True once `dispose()` has run.
    #[napi(getter)]
    pub fn is_disposed(&self) -> bool {
        self.inner.is_none()
    }

    /// Frees the tensor's memory now instead of at garbage collection. Idempotent; any later
    /// use throws an error with code `Disposed`.
    #[napi]
    pub fn dispose(&mut self) {
        self.release();
    }
}

/// The `Tensor` behind a JS value, or None when it is not one. napi-rs 3 only lets generated
/// argument conversion borrow class instances, so tensors nested in arrays and objects are
/// unwrapped here, checking the class's type tag as the generated code does.
///
/// The reference must not outlive the current call (use it to `shallow_clone` the tensor).
/// `env` and `v` are N-API's opaque handles, checked by N-API itself (see `crate::js`).
#[allow(clippy::not_unsafe_ptr_arg_deref)]
pub fn unwrap_tensor<'a>(env: napi::sys::napi_env, v: napi::sys::napi_value) -> Option<&'a JsTensor> {
    use napi::bindgen_prelude::TypeTag;
    let mut wrapped: *mut std::ffi::c_void = std::ptr::null_mut();
    let status = unsafe { napi::sys::napi_unwrap(env, v, &mut wrapped) };
    if status != napi::sys::Status::napi_ok || wrapped.is_null() {
        return None;
    }
    let tag = <JsTensor as TypeTag>::type_tag();
    unsafe { napi::bindgen_prelude::validate_type_tag(env, v, &tag, "Tensor") }.ok()?;
    Some(unsafe { &*(wrapped as *const JsTensor) })
}
