//! Sharing memory with JS, both ways, without copying.
//!
//! In: `fromBuffer` makes a tensor over a TypedArray's memory. The tensor holds a napi
//! reference to the array; libtorch calls our release function when the last tensor using that
//! storage dies — views, outputs that alias it, tensors held by async work — on whatever
//! thread that happens (torch-node's executor, or inside GC). JS references may only be deleted
//! on the JS thread, outside GC, so the release is queued to that thread (`crate::napi::queue`).
//!
//! Out: `asTypedArray` makes an external ArrayBuffer over a tensor's memory; its finalizer
//! owns a handle to the tensor, so the storage outlives `dispose()` while JS can still see it.
use super::data::bytes;
use super::JsTensor;
use crate::error::bail_code;
use crate::error::{guard, Code};
use crate::napi::convert::{BufferData, FromBufferOptions, Raw, Read, Shape};
use crate::napi::js;
use crate::napi::options::js_options;
use crate::napi::outcome::{js_result, Outcome};
use crate::napi::queue::{self, JsQueue};
use napi::sys;
use napi_derive::napi;
use std::ffi::c_void;
use std::ptr;
use std::sync::Arc;
use tch::{Device, Kind, Tensor};
use torch_core::{dtype, ffi};

/// A reference keeping lent JS memory alive, and the JS thread's queue that will delete it.
struct Lent {
    reference: sys::napi_ref,
    queue: Arc<JsQueue>,
}

// SAFETY: the reference is only used on its JS thread (the queue's work runs there).
unsafe impl Send for Lent {}

/// libtorch's storage deleter for lent memory: may run on any thread, even inside GC; JS
/// references may only be deleted on the JS thread, outside GC, so the deletion is queued.
/// Once that thread is tearing down, the work is dropped: its references go with it.
extern "C" fn release_lent(ctx: *mut c_void) {
    // SAFETY: `ctx` is the `Box<Lent>` that `lend` gave libtorch with this deleter.
    let lent = unsafe { Box::from_raw(ctx as *mut Lent) };
    let queue = lent.queue.clone();
    queue.post(Box::new(move |env| {
        // SAFETY: on the reference's own JS thread, outside GC.
        unsafe { sys::napi_delete_reference(env, lent.reference) };
    }));
}

fn contiguous_strides(shape: &[i64]) -> Vec<i64> {
    let mut strides = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1].max(1);
    }
    strides
}

/// A tensor over `shape` elements of `kind` at `view.bytes[byte_offset..]`, sharing the memory.
fn lend(
    env: sys::napi_env,
    array: sys::napi_value,
    view: &js::TypedArrayView,
    shape: &[i64],
    kind: Kind,
    byte_offset: usize,
) -> anyhow::Result<Tensor> {
    let elem = kind.elt_size_in_bytes();
    let numel = torch_core::args::check_numel(shape, "fromBuffer: shape")?;
    let need = usize::try_from(numel)
        .ok()
        .and_then(|n| n.checked_mul(elem))
        .ok_or_else(|| {
            crate::error::fail(
                Code::ShapeMismatch,
                format!(
                    "fromBuffer: shape {shape:?} of {} is larger than any buffer",
                    dtype::name(kind)
                ),
            )
        })?;
    let have = view.bytes.len().saturating_sub(byte_offset);
    if byte_offset > view.bytes.len() || need > have {
        bail_code!(Code::ShapeMismatch, "fromBuffer: shape {shape:?} of {} needs {need} bytes, but the buffer has {have} from byteOffset {byte_offset}", dtype::name(kind));
    }
    // SAFETY: `byte_offset <= view.bytes.len()` was checked just above, so the pointer stays inside
    // `view.bytes` or one past its end.
    let data = unsafe { view.bytes.as_ptr().add(byte_offset) } as *mut c_void;
    // An empty view's pointer is a placeholder that is never read.
    if need > 0 && !(data as usize).is_multiple_of(elem) {
        bail_code!(
            Code::InvalidArg,
            "fromBuffer: byteOffset {byte_offset} leaves the data misaligned for {} ({elem}-byte elements)",
            dtype::name(kind)
        );
    }
    let Some(queue) = queue::current() else {
        anyhow::bail!("fromBuffer: the addon was not initialised on this thread");
    };
    let mut reference = ptr::null_mut();
    // SAFETY: plain N-API call on the JS thread that owns `env` (this `fromBuffer` call's); `array` is the
    // TypedArray the export received. The reference (count 1) keeps the array, and so its buffer, alive until
    // `release_lent` has it deleted.
    if unsafe { sys::napi_create_reference(env, array, 1, &mut reference) } != sys::Status::napi_ok {
        anyhow::bail!("fromBuffer: cannot reference the buffer");
    }
    let ctx = Box::into_raw(Box::new(Lent { reference, queue })) as *mut c_void;
    // SAFETY: `data` starts `need` in-bounds bytes (contiguous strides span exactly those), aligned for
    // `kind` when `need > 0` (both checked above); the reference in `ctx` keeps the buffer alive until
    // `release_lent(ctx)`, resizable buffers were refused, and `fromBuffer`'s doc forbids detaching it.
    match unsafe { ffi::from_blob(data, shape, &contiguous_strides(shape), kind, release_lent, ctx) } {
        Ok(t) => Ok(t),
        Err(e) => {
            // libtorch never took the deleter: drop the reference here, on the JS thread.
            // SAFETY: on failure the shim never calls `release` (its deleter is armed only once the
            // tensor exists), so `ctx` is still our box, reclaimed once; its reference is deleted on
            // its own JS thread, outside GC.
            let lent = unsafe { Box::from_raw(ctx as *mut Lent) };
            unsafe { sys::napi_delete_reference(env, lent.reference) };
            Err(e)
        }
    }
}

js_options! {
    /// Options of `fromBuffer`; any other key is refused (`InvalidArg`).
    pub struct FromBufferBag as JsFromBufferOptions "FromBufferOptions" {
        /// The element type (default: the TypedArray's own; float32 for a bare ArrayBuffer).
        dtype "dtype": Kind as "DType",
        /// Bytes to skip at the start of the memory (a multiple of the dtype's size).
        byte_offset "byteOffset": u64 as "number",
    }
}

/// A tensor over a TypedArray's (or an ArrayBuffer's / SharedArrayBuffer's) memory, without
/// copying: writes on either side are seen by the other. The memory stays alive while any
/// tensor that may alias it lives. `dtype` defaults to the array's own (float32 for a bare
/// ArrayBuffer or SharedArrayBuffer); `byteOffset` skips bytes. Do not transfer or detach
/// the buffer while tensors use it.
#[napi]
pub fn from_buffer(data: BufferData, shape: Shape, options: Option<FromBufferOptions>) -> Outcome<JsTensor> {
    guard(|| {
        let Raw { env: raw, val: data } = data.raw();
        if !js::is_typed_array(raw, data)? {
            bail_code!(
                Code::InvalidArg,
                "fromBuffer: data: expected a TypedArray, ArrayBuffer or SharedArrayBuffer, got {}",
                js::describe(raw, data)
            );
        }
        // Everything that may run JS (getters, Proxy traps) comes before the memory is looked
        // at: JS could detach or shrink the buffer.
        let shape = shape.read("fromBuffer: shape")?;
        let o = FromBufferBag::read(raw, options.map(|o| o.raw().val), "fromBuffer: options")?;
        let byte_offset = usize::try_from(o.byte_offset.unwrap_or(0))?;
        refuse_resizable(raw, js::typed_array_buffer(raw, data)?)?;
        let lent = js::with_typed_array(raw, data, |view| {
            let kind = match (o.dtype, view.type_name) {
                (Some(k), _) => k,
                (None, "Uint16Array") => bail_code!(Code::InvalidArg, "fromBuffer: a Uint16Array holds float16 or bfloat16 bits; pass {{dtype: 'float16'}} or {{dtype: 'bfloat16'}}"),
                (None, name) => dtype::from_typed_array(name).ok_or_else(|| crate::error::fail(Code::InvalidArg, format!("fromBuffer: {name} has no dtype; pass options.dtype")))?,
            };
            lend(raw, data, view, &shape, kind, byte_offset)
        })?;
        Ok(JsTensor::borrowed(lent.expect("checked: a TypedArray")))
    }).into()
}

/// A resizable ArrayBuffer can shrink under the tensor (`resize(0)` decommits its pages):
/// refused. A growable SharedArrayBuffer only grows, in place, so it is fine.
fn refuse_resizable(env: sys::napi_env, buffer: sys::napi_value) -> anyhow::Result<()> {
    if js::property(env, buffer, "resizable")?.is_some_and(|r| js::boolean(env, r).unwrap_or(false)) {
        bail_code!(
            Code::InvalidArg,
            "fromBuffer: the buffer is a resizable ArrayBuffer, which could shrink under the tensor; copy it with torch.tensor(array) or use a fixed-length buffer"
        );
    }
    Ok(())
}

unsafe extern "C" fn drop_tensor(_env: sys::napi_env, _data: *mut c_void, hint: *mut c_void) {
    // SAFETY: `hint` is the `owner` box that `external_buffer` gave N-API with this finalizer, which Node
    // calls once, when the buffer is collected.
    drop(Box::from_raw(hint as *mut Tensor));
}

/// An external ArrayBuffer over `t`'s memory; None when V8 refuses external buffers.
fn external_buffer(env: sys::napi_env, t: &Tensor) -> Option<sys::napi_value> {
    let nbytes = t.numel() * t.kind().elt_size_in_bytes();
    // Node 20 refuses an ArrayBuffer over 4 GiB only after running the finalizer it was given,
    // which would free `owner` twice: such tensors are copied there (and fail as a copy does).
    if nbytes > u32::MAX as usize && js::node_major(env) < 22 {
        return None;
    }
    // A model or an in-place op could otherwise `resize_` the storage to a new block and free
    // the one this array points at.
    ffi::pin_storage(t);
    let owner = Box::into_raw(Box::new(t.shallow_clone()));
    let mut buffer = ptr::null_mut();
    // SAFETY: plain N-API call on the JS thread that owns `env`; `t` is a non-empty contiguous CPU tensor
    // (`lend_out` checks), so `data_ptr()` addresses `nbytes` bytes of its storage, which `owner` (freed only
    // by `drop_tensor`) keeps alive and `pin_storage` keeps in place.
    let status = unsafe {
        sys::napi_create_external_arraybuffer(
            env,
            t.data_ptr(),
            nbytes,
            Some(drop_tensor),
            owner as *mut c_void,
            &mut buffer,
        )
    };
    if status == sys::Status::napi_ok {
        Some(buffer)
    } else {
        // SAFETY: N-API failed before attaching `drop_tensor` (sandboxed V8, pending exception), so `owner`
        // is still our box, reclaimed once. (The one refusal that runs the finalizer first, Node 20's
        // over 4 GiB, is not attempted: see above.)
        drop(unsafe { Box::from_raw(owner) });
        None
    }
}

#[napi]
impl JsTensor {
    /// A TypedArray over this tensor's own memory (no copy): writes on either side are seen
    /// by the other, and the memory stays alive while the array does, even after `dispose()`.
    /// Copies instead (like `toTypedArray`) when aliasing is impossible: a CUDA tensor, a
    /// non-contiguous view, an empty tensor, a runtime that refuses external buffers, or over
    /// 4 GiB on Node 20.
    #[napi(ts_return_type = "TensorTypedArray")]
    pub fn as_typed_array(&self) -> Outcome<LentArray> {
        guard(|| Ok(LentArray(self.get()?.shallow_clone()))).into()
    }
}

js_result!(
    /// `asTypedArray()`'s answer: the tensor whose memory the array views (or copies).
    LentArray(Tensor) as "TensorTypedArray",
    |env, t| lend_out(env, &t)
);

/// A TypedArray over `t`'s memory, or a copy where aliasing is impossible.
fn lend_out(env: sys::napi_env, t: &Tensor) -> anyhow::Result<sys::napi_value> {
    let Some(name) = dtype::typed_array_name(t.kind()) else {
        bail_code!(
            Code::DTypeMismatch,
            "asTypedArray: dtype {} has no TypedArray",
            dtype::name(t.kind())
        );
    };
    let shareable = t.device() == Device::Cpu && t.is_contiguous() && t.numel() > 0;
    Ok(match shareable.then(|| external_buffer(env, t)).flatten() {
        Some(buffer) => js::typed_array_over(env, name, buffer, t.numel())?,
        None => js::new_typed_array(env, name, &bytes(t)?)?,
    })
}
