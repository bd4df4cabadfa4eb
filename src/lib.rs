#![deny(clippy::all)]
//! torch-node: PyTorch's C++ runtime (libtorch, through `tch`) for Node.js.
//!
//! Napi-free core: `error`, `dtype`, `device`, `args`, `archive`, `aot`, `aot_inputs`, `repr`, `memory`, `module`,
//! `ivalue::value`, and `ffi` (every call into libtch and the C++ shim). Glue (`#[napi]`): `tensor`, `script_module` (with its
//! `tasks`), `ivalue::js`, `js`, and the free functions below.
// `tensor` first: its `#[napi]` struct must expand before any file that names `JsTensor` in an
// export, or the generated typings say `JsTensor` instead of `Tensor`.
pub mod tensor;

pub mod aot;
pub mod aot_inputs;
pub mod aot_module;
pub mod archive;
pub mod args;
pub mod convert;
pub mod device;
pub mod dtype;
pub mod error;
pub mod executor;
pub mod ffi;
pub mod image;
pub mod ivalue;
pub mod js;
pub mod js_queue;
pub mod library;
pub mod memory;
pub mod module;
pub mod outcome;
pub mod repr;
pub mod script_module;
pub mod task;
pub mod warnings;

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

use convert::{Int, Num, Read, ReadOpt, Str};
use error::guard;
use napi::JsValue;
use napi_derive::napi;
use outcome::Outcome;

/// Seeds libtorch's random number generators (CPU and CUDA), as `torch.manual_seed`.
#[napi]
pub fn manual_seed(seed: Int) -> Outcome<()> {
    guard(|| {
        tch::manual_seed(seed.read("seed")?);
        Ok(())
    })
    .into()
}

/// Sets how many intra-op threads (one OpenMP team) each executor instance gives a call:
/// `forward`, `runMethod`, loads and image work run on the executor (see `setInstances`).
/// Default: the cores libtorch sees ÷ instances. Tensor methods called directly from JS run
/// on the calling thread with one thread, so they never add a team beside the executor's.
#[napi]
pub fn set_num_threads(n: Num) -> Outcome<()> {
    guard(|| {
        let n = args::thread_count(n.read("setNumThreads: n")?, "setNumThreads: n")?;
        executor::set_threads(Some(n as usize));
        Ok(())
    })
    .into()
}

/// The intra-op threads each executor instance uses.
#[napi]
pub fn get_num_threads() -> i32 {
    executor::stats().threads as i32
}

/// Sets how many calls run at once: the number of executor instances, each a native thread
/// of torch-node's own (never libuv's pool) with `getNumThreads()` intra-op threads. Default 1
/// (or `TORCH_NODE_INSTANCES`): one call at a time using every core is fastest per request;
/// 2 instances × 1 thread each can serve more requests per second on small models. Keep
/// instances × threads ≤ cores: more makes libgomp throttle every team. Shared by worker threads.
#[napi]
pub fn set_instances(n: Num) -> Outcome<()> {
    guard(|| {
        let n = args::thread_count(n.read("setInstances: n")?, "setInstances: n")? as usize;
        if n > executor::MAX_INSTANCES {
            crate::bail_code!(
                error::Code::InvalidArg,
                "setInstances: n: expected at most {}, got {n}",
                executor::MAX_INSTANCES
            );
        }
        executor::set_instances(n);
        Ok(())
    })
    .into()
}

/// The number of executor instances (calls that run at once).
#[napi]
pub fn get_instances() -> u32 {
    executor::stats().instances as u32
}

/// The executor's settings and load.
#[napi(object)]
pub struct ExecutorStats {
    /// Calls that run at once (`setInstances`).
    pub instances: u32,
    /// Intra-op threads of each instance (`setNumThreads`).
    pub threads: u32,
    /// Calls waiting for a free instance.
    pub queued: u32,
    /// Calls running now.
    pub running: u32,
    /// Calls finished since the process started.
    pub completed: f64,
}

/// What the executor is doing: settings, queued and running calls.
#[napi]
pub fn executor_stats() -> ExecutorStats {
    let s = executor::stats();
    ExecutorStats {
        instances: s.instances as u32,
        threads: s.threads as u32,
        queued: s.queued as u32,
        running: s.running as u32,
        completed: s.completed as f64,
    }
}

/// Sets the number of inter-op threads; libtorch accepts this only once, before any
/// parallel work has started.
#[napi]
pub fn set_num_interop_threads(n: Num) -> Outcome<()> {
    guard(|| {
        let n = args::thread_count(n.read("setNumInteropThreads: n")?, "setNumInteropThreads: n")?;
        unsafe { torch_sys::at_set_num_interop_threads(n) };
        ffi::check_last_error()
    })
    .into()
}

/// Loads a shared library of custom ops into the process (as Python's
/// `torch.ops.load_library`): its `TORCH_LIBRARY` registrations run, and TorchScript modules
/// loaded afterwards can call its ops. Kept loaded; loading the same file again does nothing.
/// Returns whether this call loaded it. Errors: `LibraryLoadError` (a missing file, unresolved
/// symbols — named —, a registration that failed).
#[napi]
pub fn load_library(path: Str) -> Outcome<bool> {
    guard(|| library::load(&path.read("loadLibrary: path")?)).into()
}

/// @internal `torch.vision.loadOps(dir)`: torchvision's ops from its wheel's folder (default:
/// beside the libtorch this process loaded).
#[napi(js_name = "_loadTorchvisionOps", skip_typescript)]
pub fn load_torchvision_ops(dir: Option<Str>) -> Outcome<bool> {
    guard(|| {
        let dir = dir
            .read("vision.loadOps: dir")?
            .map(std::path::PathBuf::from)
            .unwrap_or_else(library::default_torchvision_dir);
        library::load_torchvision(&dir)
    })
    .into()
}

/// The libtorch version this addon was built against, `'major.minor'` (e.g. `'2.13'`): files
/// it saves load in libtorch (or PyTorch) of that version or newer.
#[napi]
pub fn libtorch_version() -> String {
    let (major, minor) = ffi::torch_version();
    format!("{major}.{minor}")
}

/// Live tensors (JS `Tensor` objects not yet disposed or collected) and their element bytes.
#[napi(object)]
pub struct MemoryInfo {
    pub tensors: i64,
    pub bytes: i64,
}

/// How many tensors are alive and how many bytes their elements take.
#[napi]
pub fn memory() -> MemoryInfo {
    let (tensors, bytes) = memory::snapshot();
    MemoryInfo { tensors, bytes }
}

/// CUDA queries.
#[napi(namespace = "cuda")]
pub mod cuda {
    /// Whether libtorch can use a CUDA device here.
    #[napi]
    pub fn is_available() -> bool {
        crate::device::cuda_device_count() > 0
    }

    /// The number of CUDA devices libtorch sees (0 without CUDA).
    #[napi]
    pub fn device_count() -> u32 {
        crate::device::cuda_device_count() as u32
    }
}

/// CPU queries.
#[napi(namespace = "cpu")]
pub mod cpu {
    use crate::ffi::{self, Capability};
    use crate::js;
    use crate::outcome::Outcome;
    use napi::bindgen_prelude::Unknown;

    /// libtorch's view of this CPU, as Python's `torch._C._cpu._get_cpu_capability()`: ISA
    /// flags (`avx512_bf16`, `amx_bf16`, `avx2`, ...), cache sizes, core counts, `cpu_name`.
    #[napi(ts_return_type = "Record<string, boolean | number | string>")]
    pub fn capabilities(env: &napi::Env) -> Outcome<Unknown<'_>> {
        crate::error::guard(|| {
            let raw = env.raw();
            let entries = ffi::cpu_capabilities()?
                .into_iter()
                .map(|(name, value)| {
                    let v = match value {
                        Capability::Flag(b) => js::new_bool(raw, b),
                        Capability::Count(n) => js::new_number(raw, n as f64),
                        Capability::Text(t) => js::new_string(raw, &t),
                    }?;
                    Ok((name, v))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            Ok(unsafe { Unknown::from_raw_unchecked(raw, js::new_object(raw, entries)?) })
        })
        .into()
    }

    /// Whether this CPU computes bfloat16 natively (AVX512-BF16 or AMX-BF16): where it does,
    /// `ScriptModule.load(path, {dtype: 'bfloat16'})` is available.
    #[napi]
    pub fn has_native_bf16() -> bool {
        ffi::cpu_has_native_bf16()
    }
}

/// Runs once per JS context (main thread and each worker) as the addon loads.
#[napi(module_exports)]
pub fn init(exports: napi::bindgen_prelude::Object, env: napi::Env) -> napi::Result<()> {
    memory::set_thread_env(env.raw());
    executor::init_js_thread();
    outcome::init(env.raw(), exports.raw())
        .and_then(|()| js_queue::init(env.raw()))
        .map(|()| {
            warnings::init_thread(js_queue::current());
            executor::on_thread_start(|| warnings::init_thread(None));
        })
        .map_err(|e| napi::Error::from_reason(e.to_string()))
}

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
