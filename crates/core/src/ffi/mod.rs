//! The one FFI boundary: every call into libtch (`torch_sys`'s `atm_*`, `ati_*`, `atg_*` beyond
//! what `tch` wraps) and into the C++ shim (`src/shim/shim.cpp`) is here, as safe Rust.
//! Two error conventions come in — libtch's thread-local last error ([`check_last_error`]) and
//! the shim's explicit `char** err` (`check`) — and leave as one: `anyhow::Error` with
//! libtorch's message, which callers give a code (`crate::error`) and JS sees in one place
//! (the addon's `Outcome`).
//! By concept (what libtorch has and `tch` does not expose, as safe Rust):
//! - `module_handle`: the TorchScript module handle (`atm_*`), owned and safe;
//! - `script`: what the shim reads and does on TorchScript modules: method names and schemas,
//!   typed containers for arguments, device moves, freezing and optimizing;
//! - `ivalue`: values to and from libtch IValue handles (`ati_*`);
//! - `tensor`: storage facts, tensors over borrowed memory, autograd node names, clones;
//! - `scalar`: the ops with scalar operands that tch's `f_*` functions get wrong on failure;
//! - `aoti`: AOTInductor packages (`.pt2`);
//! - `ops`: torch-node's own ops for the exported programs (`torch_node::rows_linear`,
//!   `rows_linear_int4_runs`, `rows_linear_int4`);
//! - `runtime`: the process: CPU capabilities, oneDNN fusion, `dlopen`, versions, threads,
//!   warnings.
//!
//! Here: the two error conventions, the `shim!` call macro, and [`Callback`], how a shim
//! function calls Rust back once per item it reports.
use anyhow::{anyhow, Result};
use std::any::Any;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use torch_sys::C_tensor;

/// libtch reports C++ exceptions through a thread-local "last error".
pub fn check_last_error() -> Result<()> {
    // SAFETY: takes this thread's last-error slot: null, or a message libtch malloc'ed for us.
    check(unsafe { torch_sys::get_and_reset_last_err() })
}

/// Takes ownership of a malloc'ed C string (None for null).
///
/// # Safety
/// `p` must be null or a NUL-terminated string from `malloc` that nothing else frees.
unsafe fn take_string(p: *mut c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    let s = string_at(p);
    libc::free(p as *mut c_void);
    Some(s)
}

/// The shim's error out-parameter (or libtch's last error): null, or its message, freed here.
fn check(err: *mut c_char) -> Result<()> {
    // SAFETY: `err` is null or a message malloc'ed for this call, freed nowhere else.
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
        $crate::ffi::check(err).map(|()| out)
    }};
}

/// A C string the shim passes, copied.
///
/// # Safety
/// `p` must point to a NUL-terminated string that lives for the call.
unsafe fn string_at(p: *const c_char) -> String {
    CStr::from_ptr(p).to_string_lossy().into_owned()
}

/// A Rust closure a shim function calls back, once per item it reports, through the generic
/// trampoline of its C signature (`Callback::names` and the others below): the shim gets the
/// trampoline and `ctx()`. A panic in the closure is caught at the C++ boundary (nothing may
/// unwind into C++), later items are skipped, and `finish()` resumes the panic in Rust once the
/// shim call has returned.
struct Callback<F> {
    f: F,
    panic: Option<Box<dyn Any + Send>>,
}

impl<F> Callback<F> {
    fn new(f: F) -> Self {
        Callback { f, panic: None }
    }

    /// What the trampoline receives: this callback, borrowed for the shim call.
    fn ctx(&mut self) -> *mut c_void {
        self as *mut Self as *mut c_void
    }

    /// After the shim call: a panic in the closure continues here.
    fn finish(self) {
        if let Some(p) = self.panic {
            resume_unwind(p);
        }
    }

    /// Runs the closure behind `ctx` (inside a trampoline).
    fn invoke(ctx: *mut c_void, call: impl FnOnce(&mut F)) {
        // SAFETY: `ctx` is the `ctx()` of a live `Callback<F>`, which the caller keeps borrowed
        // (and so alive and unaliased) for the shim call that runs this trampoline.
        let cb = unsafe { &mut *(ctx as *mut Self) };
        if cb.panic.is_none() {
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| call(&mut cb.f))) {
                cb.panic = Some(p);
            }
        }
    }
}

/// One trampoline per C callback signature the shim and libtch use (after `ctx`).
macro_rules! trampolines {
    ($($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty),*);)*) => {$(
        impl<F: FnMut($($ty),*)> Callback<F> {
            $(#[$doc])*
            fn $name(&self) -> extern "C" fn(*mut c_void, $($ty),*) {
                extern "C" fn trampoline<F: FnMut($($ty),*)>(ctx: *mut c_void, $($arg: $ty),*) {
                    Callback::<F>::invoke(ctx, |f| f($($arg),*));
                }
                trampoline::<F>
            }
        }
    )*};
}

trampolines! {
    /// `(name)`: method names.
    names(name: *const c_char);
    /// `(key, value)`: string pairs.
    pairs(key: *const c_char, value: *const c_char);
    /// `(name, type, has_default)`: a method's arguments.
    args(name: *const c_char, ty: *const c_char, has_default: c_int);
    /// `(name, kind, number, text)`: CPU capabilities.
    capabilities(name: *const c_char, kind: c_int, number: i64, text: *const c_char);
    /// `(tensor)`: tensors, each a new handle the closure owns.
    tensors(t: *mut C_tensor);
    /// `(name, tensor)`: named tensors, each a new handle the closure owns.
    named_tensors(name: *const c_char, t: *mut C_tensor);
    /// `(name, address, bytes)`: named memory ranges.
    ranges(name: *const c_char, address: usize, bytes: usize);
}

pub mod aoti;
pub mod ivalue;
pub mod module_handle;
pub mod ops;
pub mod runtime;
pub mod scalar;
pub mod script;
pub mod tensor;
pub mod zlib;

pub use crate::ivalue::schema::{MethodSchema, SchemaArg};
pub use aoti::*;
pub use ops::{int4_runs, kernel_calls, rows_linear, rows_linear_int4, rows_linear_int4_runs, KernelCalls};
pub use runtime::*;
pub use script::{dict_has_string_keys, typed_dict, typed_list, Prepare};
use script::{method_names, method_schema, module_is_training, module_prepare, module_to_device};
use tensor::scalar_type;
pub use tensor::*;
