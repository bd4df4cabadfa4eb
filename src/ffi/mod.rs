//! The one FFI boundary: every call into libtch (`torch_sys`'s `atm_*`, `ati_*`, `atg_*` beyond
//! what `tch` wraps) and into the C++ shim (`src/shim/shim.cpp`) is here, as safe Rust.
//! Two error conventions come in — libtch's thread-local last error ([`check_last_error`]) and
//! the shim's explicit `char** err` (`check`) — and leave as one: `anyhow::Error` with
//! libtorch's message, which callers give a code (`crate::error`) and JS sees in one place
//! (`crate::napi::outcome`).
//! - here: method names and schemas, typed containers for TorchScript arguments, autograd node
//!   names, storage facts, CPU capabilities, AOTInductor, `dlopen` — what libtorch has and `tch`
//!   does not expose;
//! - `module`: the TorchScript module handle (`atm_*`), owned and safe;
//! - `ivalue`: values to and from libtch IValue handles (`ati_*`);
//! - `scalar`: the ops with scalar operands that tch's `f_*` functions get wrong on failure.
use anyhow::{anyhow, Result};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use torch_sys::{CIValue, CModule_, C_tensor};

pub mod ivalue;
pub mod module;
pub mod scalar;

/// libtch reports C++ exceptions through a thread-local "last error".
pub fn check_last_error() -> Result<()> {
    let p = unsafe { torch_sys::get_and_reset_last_err() };
    if p.is_null() {
        return Ok(());
    }
    let msg = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    unsafe { libc::free(p as *mut libc::c_void) };
    Err(anyhow!(msg))
}

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
    fn tn_grad_fn_name(t: *const C_tensor) -> *mut c_char;
    fn tn_module_to_device(m: *mut CModule_, device: c_int, err: *mut *mut c_char);
    fn tn_module_is_training(m: *mut CModule_) -> c_int;
    fn tn_module_prepare(
        m: *mut CModule_,
        bf16: c_int,
        channels_last: c_int,
        optimize: c_int,
        err: *mut *mut c_char,
    );
    fn tn_onednn_fusion(enabled: c_int, err: *mut *mut c_char);
    fn tn_cpu_capabilities(
        cb: extern "C" fn(*mut c_void, *const c_char, c_int, i64, *const c_char),
        ctx: *mut c_void,
        err: *mut *mut c_char,
    );
    fn tn_wrapped_number(value: f64, is_integer: c_int, err: *mut *mut c_char) -> *mut C_tensor;
    fn tn_clone(t: *const C_tensor, err: *mut *mut c_char) -> *mut C_tensor;
    fn tn_channels_last(t: *const C_tensor, err: *mut *mut c_char) -> *mut C_tensor;
    fn tn_dlopen(path: *const c_char, err: *mut *mut c_char) -> *mut c_void;
    fn tn_torch_version(major: *mut c_int, minor: *mut c_int);
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
    fn tn_aoti_metadata(
        m: *mut c_void,
        cb: extern "C" fn(*mut c_void, *const c_char, *const c_char),
        ctx: *mut c_void,
        err: *mut *mut c_char,
    );
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
    fn tn_forward_warnings(cb: extern "C" fn(*const c_char, c_int));
}

/// Where libtorch's warnings go: (message, whether it is a deprecation). Set once.
static ON_WARNING: std::sync::OnceLock<fn(String, bool)> = std::sync::OnceLock::new();

extern "C" fn warning_trampoline(message: *const c_char, deprecation: c_int) {
    // Called from C++: nothing may unwind out of here.
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: libtorch passes a NUL-terminated message that lives for this call.
        let message = unsafe { CStr::from_ptr(message) }.to_string_lossy().into_owned();
        if let Some(handler) = ON_WARNING.get() {
            handler(message, deprecation != 0);
        }
    });
}

/// Sends libtorch's warnings raised on the calling thread to `handler` instead of stderr
/// (libtorch's warning handler is per thread: call this on every thread that runs libtorch).
pub fn forward_warnings(handler: fn(String, bool)) {
    let _ = ON_WARNING.set(handler);
    // SAFETY: installs a static handler on this thread; nothing is freed.
    unsafe { tn_forward_warnings(warning_trampoline) }
}

pub use crate::ivalue::schema::{MethodSchema, SchemaArg};

/// Takes ownership of a malloc'ed C string.
unsafe fn take_string(p: *mut c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    let s = CStr::from_ptr(p).to_string_lossy().into_owned();
    libc::free(p as *mut c_void);
    Some(s)
}

fn check(err: *mut c_char) -> Result<()> {
    match unsafe { take_string(err) } {
        Some(msg) => Err(anyhow!(msg)),
        None => Ok(()),
    }
}

/// Calls a shim function whose last argument is its error out-parameter (every shim function
/// catches C++ exceptions and reports them there) and returns its result or that error, as
/// tch's `unsafe_torch_err!` does for libtch. Callers state in their `// SAFETY:` line (or
/// their `# Safety` section) why the handles they pass are live.
macro_rules! shim {
    ($f:ident($($arg:expr),* $(,)?)) => {{
        let mut err: *mut c_char = std::ptr::null_mut();
        #[allow(unused_unsafe)]
        let out = unsafe { $f($($arg,)* &mut err) };
        check(err).map(|()| out)
    }};
}

extern "C" fn push_name(ctx: *mut c_void, name: *const c_char) {
    let names = unsafe { &mut *(ctx as *mut Vec<String>) };
    names.push(unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned());
}

extern "C" fn push_arg(ctx: *mut c_void, name: *const c_char, ty: *const c_char, def: c_int) {
    let args = unsafe { &mut *(ctx as *mut Vec<SchemaArg>) };
    args.push(SchemaArg {
        name: unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned(),
        type_str: unsafe { CStr::from_ptr(ty) }.to_string_lossy().into_owned(),
        has_default: def != 0,
    });
}

/// # Safety
/// `m` must be a live module handle.
unsafe fn method_names(m: *mut CModule_) -> Result<Vec<String>> {
    let mut names: Vec<String> = Vec::new();
    shim!(tn_method_names(m, push_name, &mut names as *mut _ as *mut c_void))?;
    Ok(names)
}

/// # Safety
/// `m` must be a live module handle.
unsafe fn method_schema(m: *mut CModule_, name: &str) -> Result<MethodSchema> {
    let c_name = CString::new(name)?;
    let mut args: Vec<SchemaArg> = Vec::new();
    let ret = shim!(tn_method_schema(
        m,
        c_name.as_ptr(),
        push_arg,
        &mut args as *mut _ as *mut c_void
    ))?;
    let returns = take_string(ret).unwrap_or_default();
    Ok(MethodSchema { args, returns })
}

/// A `List[elem_type]` IValue holding copies of `items` (which stay owned by the caller).
///
/// # Safety
/// Every item must be a live IValue.
pub unsafe fn typed_list(elem_type: &str, items: &[*mut CIValue]) -> Result<*mut CIValue> {
    let ty = CString::new(elem_type)?;
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

/// The name of the autograd node that produced `t` ("AddBackward0"), if any.
pub fn grad_fn_name(t: &tch::Tensor) -> Option<String> {
    unsafe { take_string(tn_grad_fn_name(t.as_ptr())) }
}

/// Moves a module's parameters and buffers to `device` (-1: CPU, else a CUDA index).
///
/// # Safety
/// `m` must be a live module handle not used by another thread meanwhile.
unsafe fn module_to_device(m: *mut CModule_, device: i32) -> Result<()> {
    shim!(tn_module_to_device(m, device))
}

/// # Safety
/// `m` must be a live module handle.
unsafe fn module_is_training(m: *mut CModule_) -> bool {
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
unsafe fn module_prepare(m: *mut CModule_, how: Prepare) -> Result<()> {
    let level = if how.fuse { 2 } else { how.optimize as c_int };
    shim!(tn_module_prepare(
        m,
        how.bf16 as c_int,
        how.channels_last as c_int,
        level
    ))
}

/// Turns oneDNN Graph fusion on or off for the graphs optimized from now on (process-wide).
pub fn onednn_fusion(enabled: bool) -> Result<()> {
    // SAFETY: a global switch; no handles.
    shim!(tn_onednn_fusion(enabled as c_int))
}

/// One entry of libtorch's CPU capability map.
#[derive(Debug, Clone, PartialEq)]
pub enum Capability {
    Flag(bool),
    Count(i64),
    Text(String),
}

/// libtorch's CPU capability map (ISA flags such as `avx512_bf16`, cache sizes, the CPU name).
pub fn cpu_capabilities() -> Result<Vec<(String, Capability)>> {
    extern "C" fn push(ctx: *mut c_void, name: *const c_char, kind: c_int, number: i64, text: *const c_char) {
        let out = unsafe { &mut *(ctx as *mut Vec<(String, Capability)>) };
        let name = unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned();
        let value = match kind {
            0 => Capability::Flag(number != 0),
            1 => Capability::Count(number),
            _ => Capability::Text(unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned()),
        };
        out.push((name, value));
    }
    let mut out: Vec<(String, Capability)> = Vec::new();
    // SAFETY: `push` receives `out`, which lives across the call.
    shim!(tn_cpu_capabilities(push, &mut out as *mut _ as *mut c_void))?;
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Whether the CPU computes in bfloat16 natively (AVX512-BF16 or AMX-BF16): where it does not,
/// libtorch emulates bf16 and a bf16 model runs slower than float32.
pub fn cpu_has_native_bf16() -> bool {
    cpu_capabilities().is_ok_and(|caps| {
        caps.iter()
            .any(|(k, v)| (k == "avx512_bf16" || k == "amx_bf16") && *v == Capability::Flag(true))
    })
}

/// Where the tensor's view starts in its storage, in elements (`t.storage_offset()`).
pub fn storage_offset(t: &tch::Tensor) -> i64 {
    unsafe { tn_storage_offset(t.as_ptr()) }
}

/// The byte size of the tensor's whole storage.
pub fn storage_nbytes(t: &tch::Tensor) -> i64 {
    unsafe { tn_storage_nbytes(t.as_ptr()) }
}

/// Makes the tensor's storage non-resizable: its memory block stays where it is for as long
/// as the storage lives (JS arrays lent over it rely on that).
pub fn pin_storage(t: &tch::Tensor) {
    unsafe { tn_storage_pin(t.as_ptr()) }
}

/// Equal for tensors that share a storage.
pub fn storage_id(t: &tch::Tensor) -> usize {
    unsafe { tn_storage_id(t.as_ptr()) as usize }
}

/// libtorch's ScalarType numbers (c10/core/ScalarType.h) for the ten dtypes we expose.
fn scalar_type(kind: tch::Kind) -> Result<c_int> {
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
    let t = shim!(tn_from_blob(
        data,
        sizes.as_ptr(),
        strides.as_ptr(),
        n,
        dtype,
        release,
        ctx
    ))?;
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

/// Loads a shared library into the process for good (`RTLD_NOW | RTLD_GLOBAL`): the dynamic
/// loader's message (unresolved symbols named) or a C++ exception from its static initializers
/// becomes the error.
pub fn dlopen(path: &std::path::Path) -> Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = CString::new(path.as_os_str().as_bytes()).map_err(|_| anyhow!("the path contains a NUL byte"))?;
    // SAFETY: a C string that lives across the call.
    shim!(tn_dlopen(c.as_ptr())).map(|_| ())
}

/// Sets libtorch's inter-op thread count (accepted once, before any inter-op work started).
pub fn set_num_interop_threads(n: i32) -> Result<()> {
    // SAFETY: a plain setter; libtorch reports a refusal through its last-error slot.
    unsafe { torch_sys::at_set_num_interop_threads(n) };
    check_last_error()
}

/// libtorch's (major, minor) version, as compiled into the shim.
pub fn torch_version() -> (i32, i32) {
    let (mut major, mut minor) = (0, 0);
    unsafe { tn_torch_version(&mut major, &mut minor) };
    (major, minor)
}

/// A loaded AOTInductor package (`torch::inductor::AOTIModelPackageLoader`), freed on drop.
pub struct AotiHandle(*mut c_void);

// SAFETY: the loader's runner hands each `run` a model instance from its pool under a lock (one
// instance here, so concurrent runs wait for each other); nothing else mutates it after load.
unsafe impl Send for AotiHandle {}
unsafe impl Sync for AotiHandle {}

impl Drop for AotiHandle {
    fn drop(&mut self) {
        unsafe { tn_aoti_free(self.0) };
    }
}

/// Loads a `.pt2` package; `device` is -1 for the package's own (CPU) device, else a CUDA index.
pub fn aoti_load(path: &str, device: i32) -> Result<AotiHandle> {
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
    extern "C" fn push(ctx: *mut c_void, t: *mut C_tensor) {
        let out = unsafe { &mut *(ctx as *mut Vec<tch::Tensor>) };
        out.push(unsafe { tch::Tensor::from_ptr(t) });
    }
    let ptrs: Vec<*mut C_tensor> = inputs.iter().map(|t| t.as_ptr() as *mut C_tensor).collect();
    let mut out: Vec<tch::Tensor> = Vec::new();
    // SAFETY: `m` and the input tensors are live while borrowed; `push` receives `out`, which
    // lives across the call.
    shim!(tn_aoti_run(
        m.0,
        ptrs.as_ptr(),
        ptrs.len() as c_int,
        push,
        &mut out as *mut _ as *mut c_void
    ))?;
    Ok(out)
}

/// A package's metadata, plus `in_spec`/`out_spec` (its pytree call specs), sorted by key.
pub fn aoti_metadata(m: &AotiHandle) -> Result<Vec<(String, String)>> {
    extern "C" fn push(ctx: *mut c_void, k: *const c_char, v: *const c_char) {
        let out = unsafe { &mut *(ctx as *mut Vec<(String, String)>) };
        let s = |p| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
        out.push((s(k), s(v)));
    }
    let mut out: Vec<(String, String)> = Vec::new();
    // SAFETY: `m` is live while borrowed; `push` receives `out`, which lives across the call.
    shim!(tn_aoti_metadata(m.0, push, &mut out as *mut _ as *mut c_void))?;
    out.sort();
    Ok(out)
}
