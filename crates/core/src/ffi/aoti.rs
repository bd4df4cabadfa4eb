//! AOTInductor packages (`.pt2`): load, run, metadata.
use super::{string_at, Callback};
use anyhow::{anyhow, Result};
use std::ffi::{c_char, c_int, c_void, CString};
use torch_sys::C_tensor;

extern "C" {
    fn tn_aoti_load(path: *const c_char, device: c_int, err: *mut *mut c_char) -> *mut c_void;
    fn tn_aoti_free(m: *mut c_void);
    fn tn_aoti_run(
        m: *mut c_void,
        inputs: *const *mut C_tensor,
        n: c_int,
        cb: extern "C" fn(*mut c_void, *mut C_tensor),
        ctx: *mut c_void,
        err: *mut *mut c_char,
    );
    fn tn_aoti_constants(
        m: *mut c_void,
        cb: extern "C" fn(*mut c_void, *const c_char, usize, usize),
        ctx: *mut c_void,
        err: *mut *mut c_char,
    );
    fn tn_aoti_metadata(
        m: *mut c_void,
        cb: extern "C" fn(*mut c_void, *const c_char, *const c_char),
        ctx: *mut c_void,
        err: *mut *mut c_char,
    );
}

/// A loaded AOTInductor package (`torch::inductor::AOTIModelPackageLoader`), freed on drop.
pub struct AotiHandle(*mut c_void);

// SAFETY: the loader's runner hands each `run` a model instance from its pool under a lock (one
// instance here, so concurrent runs wait for each other); nothing else mutates it after load.
unsafe impl Send for AotiHandle {}
unsafe impl Sync for AotiHandle {}

impl Drop for AotiHandle {
    fn drop(&mut self) {
        // SAFETY: the handle is ours and freed once, here.
        unsafe { tn_aoti_free(self.0) };
    }
}

/// Loads a `.pt2` package; `device` is -1 for the package's own (CPU) device, else a CUDA index.
pub fn aoti_load(path: &str, device: i32) -> Result<AotiHandle> {
    super::ops::register_ops()?;
    let c = CString::new(path).map_err(|_| anyhow!("the path contains a NUL byte"))?;
    // SAFETY: a C string that lives across the call.
    let h = shim!(tn_aoti_load(c.as_ptr(), device))?;
    match h.is_null() {
        true => Err(anyhow!("the AOTInductor loader returned nothing")),
        false => Ok(AotiHandle(h)),
    }
}

/// Runs a loaded package on its inputs (in the order its program flattens them).
pub fn aoti_run(m: &AotiHandle, inputs: &[tch::Tensor]) -> Result<Vec<tch::Tensor>> {
    let ptrs: Vec<*mut C_tensor> = inputs.iter().map(|t| t.as_ptr() as *mut C_tensor).collect();
    let mut out: Vec<tch::Tensor> = Vec::new();
    // SAFETY: each output is a new tensor handle the shim hands over.
    let mut cb = Callback::new(|t| out.push(unsafe { tch::Tensor::from_ptr(t) }));
    // SAFETY: `m` and the input tensors are live while borrowed; `cb` lives across the call.
    shim!(tn_aoti_run(
        m.0,
        ptrs.as_ptr(),
        ptrs.len() as c_int,
        cb.tensors(),
        cb.ctx()
    ))?;
    cb.finish();
    Ok(out)
}

/// A package's metadata, plus `in_spec`/`out_spec` (its pytree call specs), sorted by key.
pub fn aoti_metadata(m: &AotiHandle) -> Result<Vec<(String, String)>> {
    let mut out: Vec<(String, String)> = Vec::new();
    // SAFETY: the shim passes strings that live for the callback.
    let mut cb = Callback::new(|k, v| out.push(unsafe { (string_at(k), string_at(v)) }));
    // SAFETY: `m` is live while borrowed; `cb` lives across the call.
    shim!(tn_aoti_metadata(m.0, cb.pairs(), cb.ctx()))?;
    cb.finish();
    out.sort();
    Ok(out)
}

/// The loaded model's CPU constants: (original FQN, address, bytes), address 0 for one that is
/// not a dense range. The memory is the model's, valid while `m` lives.
pub fn aoti_constants(m: &AotiHandle) -> Result<Vec<(String, usize, usize)>> {
    let mut out: Vec<(String, usize, usize)> = Vec::new();
    // SAFETY: the shim passes names that live for the callback.
    let mut cb = Callback::new(|name, address, bytes| out.push((unsafe { string_at(name) }, address, bytes)));
    // SAFETY: `m` is live while borrowed; `cb` lives across the call.
    shim!(tn_aoti_constants(m.0, cb.ranges(), cb.ctx()))?;
    cb.finish();
    Ok(out)
}
