#![deny(clippy::all)]
//! torch-node: PyTorch's C++ runtime (libtorch, through `tch`) for Node.js.
//!
//! Napi-free core: `error`, `dtype`, `device`, `args`, `archive`, `aot`, `aot_inputs`, `repr`,
//! `memory`, `module`, `executor`, `ivalue::value`, `text` (all but `text::js`), and `ffi`
//! (every call into libtch and the C++ shim). The N-API boundary: `napi/`. Glue (`#[napi]`):
//! `tensor`, `script_module`, `aot_module`, `image::js`, `ivalue::js`, `text::js`, and
//! `exports` (the free functions and `init`).
//! See docs/architecture.md.
// `tensor` first: its `#[napi]` struct must expand before any file that names `JsTensor` in an
// export, or the generated typings say `JsTensor` instead of `Tensor`.
pub mod tensor;

pub mod aot;
pub mod aot_inputs;
pub mod aot_module;
pub mod aot_pages;
pub mod archive;
pub mod args;
pub mod causal_lm;
pub mod device;
pub mod dtype;
pub mod error;
pub mod executor;
pub mod exports;
pub mod ffi;
pub mod generate;
pub mod image;
pub mod ivalue;
pub mod library;
pub mod memory;
pub mod module;
pub mod napi;
pub mod repr;
pub mod script_module;
pub mod text;

/// Node reads this at load time. `NAPI_VERSION_EXPERIMENTAL` makes Node run finalizers during
/// GC (not later, from the event loop), so a tensor's native memory is freed as soon as V8
/// collects its JS object — even inside a synchronous loop that never yields, where deferred
/// finalizers pile up gigabytes (see docs/memory.md). Such finalizers may only make
/// "basic" N-API calls, and ours do: napi-rs's class finalizer deletes its reference
/// (`napi_delete_reference`, basic on 20.20, 22, 24 and 26: nodejs/node #55620), a tensor's
/// drop reports memory (`napi_adjust_external_memory`) and queues the release of lent JS
/// memory (`napi_call_threadsafe_function`). Never version 10 on Node 20 (it crashes in
/// `napi_module_register_by_symbol`); the experimental value is accepted on every line.
/// `TORCH_NODE_GC_FINALIZERS=0` opts out (version 8: finalizers deferred to the event loop).
#[no_mangle]
pub extern "C" fn node_api_module_get_api_version_v1() -> i32 {
    const DEFAULT: i32 = 8;
    const EXPERIMENTAL: i32 = i32::MAX;
    if std::env::var("TORCH_NODE_GC_FINALIZERS").is_ok_and(|v| v == "0") {
        DEFAULT
    } else {
        EXPERIMENTAL
    }
}

/// `cargo test` links the unit tests into an executable that Node never loads; these N-API
/// functions, referenced by napi-rs's drop paths but never called by the tests, would
/// otherwise be unresolved there (the addon, a shared library, gets them from node).
#[cfg(test)]
mod napi_test_stubs {
    macro_rules! stubs {
        ($($name:ident),*) => {$(
            #[no_mangle]
            extern "C" fn $name() -> i32 {
                unreachable!(concat!(stringify!($name), " called outside Node"))
            }
        )*};
    }
    stubs!(
        napi_adjust_external_memory,
        napi_call_threadsafe_function,
        napi_delete_reference,
        napi_reference_unref
    );
}
