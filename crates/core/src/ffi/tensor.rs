//! Tensors beyond what `tch` wraps: storage facts (offset, size, identity, pinning), tensors
//! over borrowed memory, autograd node names, clones, wrapped numbers, channels-last.
use super::take_string;
use anyhow::{anyhow, Result};
use std::ffi::{c_char, c_int, c_void};
use torch_sys::C_tensor;

extern "C" {
    fn tn_grad_fn_name(t: *const C_tensor) -> *mut c_char;
    fn tn_wrapped_number(value: f64, is_integer: c_int, err: *mut *mut c_char) -> *mut C_tensor;
    fn tn_clone(t: *const C_tensor, err: *mut *mut c_char) -> *mut C_tensor;
    fn tn_channels_last(t: *const C_tensor, err: *mut *mut c_char) -> *mut C_tensor;
    fn tn_storage_offset(t: *const C_tensor) -> i64;
    fn tn_storage_nbytes(t: *const C_tensor) -> i64;
    fn tn_storage_pin(t: *const C_tensor);
    fn tn_storage_id(t: *const C_tensor) -> *const c_void;
    fn tn_from_blob(
        data: *mut c_void,
        sizes: *const i64,
        strides: *const i64,
        ndim: c_int,
        dtype: c_int,
        release: extern "C" fn(*mut c_void),
        ctx: *mut c_void,
        err: *mut *mut c_char,
    ) -> *mut C_tensor;
}

/// The name of the autograd node that produced `t` ("AddBackward0"), if any.
pub fn grad_fn_name(t: &tch::Tensor) -> Option<String> {
    // SAFETY: `t` is borrowed for the call; the name is a malloc'ed string we own.
    unsafe { take_string(tn_grad_fn_name(t.as_ptr())) }
}

/// Where the tensor's view starts in its storage, in elements (`t.storage_offset()`).
pub fn storage_offset(t: &tch::Tensor) -> i64 {
    // SAFETY: `t` is borrowed for the call; a read of its metadata.
    unsafe { tn_storage_offset(t.as_ptr()) }
}

/// The byte size of the tensor's whole storage.
pub fn storage_nbytes(t: &tch::Tensor) -> i64 {
    // SAFETY: `t` is borrowed for the call; a read of its metadata.
    unsafe { tn_storage_nbytes(t.as_ptr()) }
}

/// Makes the tensor's storage non-resizable: its memory block stays where it is for as long
/// as the storage lives (JS arrays lent over it rely on that).
pub fn pin_storage(t: &tch::Tensor) {
    // SAFETY: `t` is borrowed for the call; sets a flag on its storage.
    unsafe { tn_storage_pin(t.as_ptr()) }
}

/// Equal for tensors that share a storage.
pub fn storage_id(t: &tch::Tensor) -> usize {
    // SAFETY: `t` is borrowed for the call; the storage's address, compared only.
    unsafe { tn_storage_id(t.as_ptr()) as usize }
}

/// libtorch's ScalarType numbers (c10/core/ScalarType.h) for the ten dtypes we expose.
pub(super) fn scalar_type(kind: tch::Kind) -> Result<c_int> {
    use tch::Kind::*;
    Ok(match kind {
        Uint8 => 0,
        Int8 => 1,
        Int16 => 2,
        Int => 3,
        Int64 => 4,
        Half => 5,
        Float => 6,
        Double => 7,
        Bool => 11,
        BFloat16 => 15,
        other => return Err(anyhow!("dtype {other:?} is not supported")),
    })
}

/// A CPU tensor over `data`, which it does not own; `release(ctx)` runs once when the last
/// tensor using the storage is freed (possibly on another thread).
///
/// # Safety
/// `data` must stay valid for `sizes`/`strides` of `kind` until `release(ctx)` runs.
pub unsafe fn from_blob(
    data: *mut c_void,
    sizes: &[i64],
    strides: &[i64],
    kind: tch::Kind,
    release: extern "C" fn(*mut c_void),
    ctx: *mut c_void,
) -> Result<tch::Tensor> {
    let dtype = scalar_type(kind)?;
    let n = sizes.len() as c_int;
    // SAFETY: the caller keeps `data` valid until `release(ctx)` (this fn's contract); the size and stride slices live across the call.
    let t = shim!(tn_from_blob(
        data,
        sizes.as_ptr(),
        strides.as_ptr(),
        n,
        dtype,
        release,
        ctx
    ))?;
    // SAFETY: a new tensor handle the shim hands over.
    Ok(tch::Tensor::from_ptr(t))
}

/// A JS number as libtorch's "wrapped number" (what a Python scalar becomes in an operation).
pub fn wrapped_number(value: f64, is_integer: bool) -> Result<tch::Tensor> {
    // SAFETY: no handles in; the result is a new tensor we own.
    let t = shim!(tn_wrapped_number(value, c_int::from(is_integer)))?;
    Ok(unsafe { tch::Tensor::from_ptr(t) })
}

/// `t.clone()` (autograd records CloneBackward0).
pub fn clone(t: &tch::Tensor) -> Result<tch::Tensor> {
    // SAFETY: `t` is borrowed for the call; the result is a new tensor we own.
    let out = shim!(tn_clone(t.as_ptr()))?;
    Ok(unsafe { tch::Tensor::from_ptr(out) })
}

/// The tensor in the channels-last memory format (NHWC strides over the same NCHW shape).
pub fn channels_last(t: &tch::Tensor) -> Result<tch::Tensor> {
    // SAFETY: `t` is borrowed for the call; the result is a new tensor we own.
    let out = shim!(tn_channels_last(t.as_ptr()))?;
    Ok(unsafe { tch::Tensor::from_ptr(out) })
}
