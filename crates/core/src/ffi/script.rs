//! What the shim reads and does on TorchScript modules (method names and schemas, device moves,
//! freezing and optimizing) and the typed containers TorchScript arguments need.
use super::{string_at, take_string, Callback, MethodSchema, SchemaArg};
use anyhow::Result;
use std::ffi::{c_char, c_int, c_void, CString};
use torch_sys::{CIValue, CModule_};

extern "C" {
    fn tn_method_names(
        m: *mut CModule_,
        cb: extern "C" fn(*mut c_void, *const c_char),
        ctx: *mut c_void,
        err: *mut *mut c_char,
    );
    fn tn_method_schema(
        m: *mut CModule_,
        name: *const c_char,
        arg_cb: extern "C" fn(*mut c_void, *const c_char, *const c_char, c_int),
        ctx: *mut c_void,
        err: *mut *mut c_char,
    ) -> *mut c_char;
    fn tn_typed_list(
        elem_type: *const c_char,
        items: *const *mut CIValue,
        n: c_int,
        err: *mut *mut c_char,
    ) -> *mut CIValue;
    fn tn_typed_dict(
        key_type: *const c_char,
        value_type: *const c_char,
        keys: *const *mut CIValue,
        values: *const *mut CIValue,
        n: c_int,
        err: *mut *mut c_char,
    ) -> *mut CIValue;
    fn tn_dict_has_string_keys(v: *mut CIValue) -> c_int;
    fn tn_module_to_device(m: *mut CModule_, device: c_int, err: *mut *mut c_char);
    fn tn_module_is_training(m: *mut CModule_) -> c_int;
    fn tn_module_prepare(
        m: *mut CModule_,
        bf16: c_int,
        channels_last: c_int,
        optimize: c_int,
        err: *mut *mut c_char,
    );
}

/// # Safety
/// `m` must be a live module handle.
pub(super) unsafe fn method_names(m: *mut CModule_) -> Result<Vec<String>> {
    let mut names: Vec<String> = Vec::new();
    // SAFETY: the shim passes each name as a string that lives for the callback.
    let mut cb = Callback::new(|name| names.push(unsafe { string_at(name) }));
    shim!(tn_method_names(m, cb.names(), cb.ctx()))?;
    cb.finish();
    Ok(names)
}

/// # Safety
/// `m` must be a live module handle.
pub(super) unsafe fn method_schema(m: *mut CModule_, name: &str) -> Result<MethodSchema> {
    let c_name = CString::new(name)?;
    let mut args: Vec<SchemaArg> = Vec::new();
    let mut cb = Callback::new(|name, ty, has_default: c_int| {
        args.push(SchemaArg {
            // SAFETY: the shim passes strings that live for the callback.
            name: unsafe { string_at(name) },
            // SAFETY: as above.
            type_str: unsafe { string_at(ty) },
            has_default: has_default != 0,
        })
    });
    // SAFETY: `m` is live (the caller's contract); `c_name` and `cb` live across the call.
    let ret = shim!(tn_method_schema(m, c_name.as_ptr(), cb.args(), cb.ctx()))?;
    cb.finish();
    let returns = take_string(ret).unwrap_or_default();
    Ok(MethodSchema { args, returns })
}

/// A `List[elem_type]` IValue holding copies of `items` (which stay owned by the caller).
///
/// # Safety
/// Every item must be a live IValue.
pub unsafe fn typed_list(elem_type: &str, items: &[*mut CIValue]) -> Result<*mut CIValue> {
    let ty = CString::new(elem_type)?;
    // SAFETY: the caller guarantees live IValues; the string lives across the call.
    shim!(tn_typed_list(ty.as_ptr(), items.as_ptr(), items.len() as c_int))
}

/// A `Dict[key_type, value_type]` IValue holding copies of the pairs.
///
/// # Safety
/// Every key and value must be a live IValue; `keys.len() == values.len()`.
pub unsafe fn typed_dict(
    key_type: &str,
    value_type: &str,
    keys: &[*mut CIValue],
    values: &[*mut CIValue],
) -> Result<*mut CIValue> {
    let (k, v) = (CString::new(key_type)?, CString::new(value_type)?);
    // SAFETY: the caller guarantees live IValues; the strings live across the call.
    shim!(tn_typed_dict(
        k.as_ptr(),
        v.as_ptr(),
        keys.as_ptr(),
        values.as_ptr(),
        keys.len() as c_int
    ))
}

/// # Safety
/// `v` must be a live IValue.
pub unsafe fn dict_has_string_keys(v: *mut CIValue) -> bool {
    tn_dict_has_string_keys(v) != 0
}

/// Moves a module's parameters and buffers to `device` (-1: CPU, else a CUDA index).
///
/// # Safety
/// `m` must be a live module handle not used by another thread meanwhile.
pub(super) unsafe fn module_to_device(m: *mut CModule_, device: i32) -> Result<()> {
    shim!(tn_module_to_device(m, device))
}

/// # Safety
/// `m` must be a live module handle.
pub(super) unsafe fn module_is_training(m: *mut CModule_) -> bool {
    tn_module_is_training(m) != 0
}

/// How [`module_prepare`] transforms a module (see `tn_module_prepare` in shim.cpp).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Prepare {
    pub bf16: bool,
    pub channels_last: bool,
    /// Freeze + `optimize_for_inference`.
    pub optimize: bool,
    /// Freeze only; the module's graph is then fused by oneDNN Graph during its warm-up calls.
    pub fuse: bool,
}

/// # Safety
/// `m` must be a live module handle that no other thread uses during the call.
pub(super) unsafe fn module_prepare(m: *mut CModule_, how: Prepare) -> Result<()> {
    let level = if how.fuse { 2 } else { how.optimize as c_int };
    shim!(tn_module_prepare(
        m,
        how.bf16 as c_int,
        how.channels_last as c_int,
        level
    ))
}
