#![deny(clippy::all)]
//! torch-node: PyTorch's C++ runtime (libtorch, through `tch`) for Node.js — the addon, N-API
//! glue only. Everything that is not N-API is the `torch_core` crate (crates/core: errors,
//! dtypes, devices, values, archive checks, repr, modules, `.pt2`, images, text, generation, the
//! executor, `ffi/` and the C++ shim), which does not depend on napi.
//!
//! Here: `napi/` (the N-API toolkit: raw reads, `Outcome`, typed arguments, option bags, async
//! tasks, the per-thread JS queue), `error` (the core's errors as JS errors), and the glue, one
//! file or folder per JS class or namespace (`#[napi]`): `tensor`, `script_module`,
//! `aot_module`, `causal_lm`, `image`, `ivalue`, `text`, and `exports` (the free functions and
//! `init`). See docs/architecture.md.
// `tensor` first: its `#[napi]` struct must expand before any file that names `JsTensor` in an
// export, or the generated typings say `JsTensor` instead of `Tensor`.
pub mod tensor;

pub mod aot_module;
pub mod causal_lm;
pub mod error;
pub mod exports;
pub mod image;
pub mod ivalue;
pub mod napi;
pub mod script_module;
pub mod speech;
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
