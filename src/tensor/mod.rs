//! The JS `Tensor` class: a newtype over `tch::Tensor` (`None` once disposed). Split by verb:
//! `create` (factories), `data` (reading values out), `ops` (math and conversions), `display`.
use crate::error::{guard, Code, Result};
use crate::{bail_code, device, dtype, memory};
use napi_derive::napi;
use std::cell::{Cell, Ref, RefCell};
use std::rc::{Rc, Weak};
use tch::Tensor;

/// What a JS `Tensor` owns. Shared (`Rc`) so that `torch.tidy` can dispose tensors it saw
/// created, from the JS thread, without holding the JS objects.
pub struct Slot {
    tensor: RefCell<Option<Tensor>>,
    /// Element bytes reported to V8 for this tensor (0 for views and borrowed memory).
    bytes: Cell<i64>,
}

impl Slot {
    /// Frees the tensor (idempotent); true when this call freed it.
    pub fn release(&self) -> bool {
        let freed = self.tensor.borrow_mut().take().is_some();
        if freed {
            memory::untrack(self.bytes.get());
        }
        freed
    }

    fn same(a: &Rc<Slot>, b: &Rc<Slot>) -> bool {
        Rc::ptr_eq(a, b)
    }
}

thread_local! {
    /// Open `torch.tidy` scopes, innermost last: the tensors created inside each.
    static SCOPES: RefCell<Vec<Vec<Weak<Slot>>>> = const { RefCell::new(Vec::new()) };
}

/// Opens a `tidy` scope.
pub fn scope_begin() {
    SCOPES.with(|s| s.borrow_mut().push(Vec::new()));
}

/// Closes the innermost scope: disposes its tensors except `keep`, which move to the
/// enclosing scope (if any). Returns how many it disposed.
pub fn scope_end(keep: &[Rc<Slot>]) -> usize {
    let Some(created) = SCOPES.with(|s| s.borrow_mut().pop()) else {
        return 0;
    };
    let mut disposed = 0;
    let mut kept = Vec::new();
    for slot in created.iter().filter_map(Weak::upgrade) {
        if keep.iter().any(|k| Slot::same(k, &slot)) {
            kept.push(Rc::downgrade(&slot));
        } else if slot.release() {
            disposed += 1;
        }
    }
    SCOPES.with(|s| {
        if let Some(outer) = s.borrow_mut().last_mut() {
            outer.extend(kept);
        }
    });
    disposed
}

/// A tensor: a view (shape, strides, offset, dtype) onto storage owned by libtorch, on the CPU
/// or a CUDA device. Create one with `torch.tensor`, `torch.ones`, ...; free it early with
/// `dispose()` (otherwise the garbage collector frees it).
#[napi(js_name = "Tensor")]
pub struct JsTensor {
    slot: Rc<Slot>,
}

// Declared after the struct: napi-rs's type generator learns `js_name = "Tensor"` when the
// struct's macro expands, and impl blocks expanded before that would be typed as `JsTensor`.
pub mod autograd;
pub mod borrow;
pub mod create;
pub mod data;
pub mod display;
pub mod math;
pub mod ops;
pub mod view;

impl JsTensor {
    /// A tensor with storage of its own: its element bytes are reported to V8.
    pub fn new(t: Tensor) -> JsTensor {
        let bytes = memory::tensor_bytes(&t);
        JsTensor::with_bytes(t, bytes)
    }

    /// A view of another tensor's storage, or of memory borrowed from JS: counted as a live
    /// tensor, but its bytes are already accounted for elsewhere.
    pub fn new_view(t: Tensor) -> JsTensor {
        JsTensor::with_bytes(t, 0)
    }

    fn with_bytes(t: Tensor, bytes: i64) -> JsTensor {
        memory::track(bytes);
        let slot = Rc::new(Slot {
            tensor: RefCell::new(Some(t)),
            bytes: Cell::new(bytes),
        });
        SCOPES.with(|s| {
            if let Some(scope) = s.borrow_mut().last_mut() {
                scope.push(Rc::downgrade(&slot));
            }
        });
        JsTensor { slot }
    }

    /// The tensor, or a `Disposed` error.
    pub fn get(&self) -> anyhow::Result<Ref<'_, Tensor>> {
        match Ref::filter_map(self.slot.tensor.borrow(), Option::as_ref) {
            Ok(t) => Ok(t),
            Err(_) => bail_code!(
                Code::Disposed,
                "this tensor was disposed; it can no longer be used"
            ),
        }
    }

    pub fn slot(&self) -> &Rc<Slot> {
        &self.slot
    }
}

impl Drop for JsTensor {
    fn drop(&mut self) {
        self.slot.release();
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
        self.slot.tensor.borrow().is_none()
    }

    /// Frees the tensor's memory now instead of at garbage collection. Idempotent; any later
    /// use throws an error with code `Disposed`.
    #[napi]
    pub fn dispose(&self) {
        self.slot.release();
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
