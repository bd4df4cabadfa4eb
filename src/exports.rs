//! The free functions of the `torch` namespace (`manualSeed`, the thread and executor
//! settings, `loadLibrary`, `memory`, `libtorchVersion`, `version`), the `cuda`, `cpu` and
//! `libtorch` namespaces, and the per-context initialisation. Glue: each reads its arguments
//! and calls the core.
use crate::error::{self, guard};
use crate::napi::convert::{Arg, Int, Num, Read, ReadOpt, Str};
use crate::napi::outcome::Outcome;
use napi::JsValue;
use napi_derive::napi;
use torch_core::{args, executor, ffi, library, memory};

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
/// Default: the usable cores ÷ instances (`torch.cpu.limits()`: the affinity mask's cores,
/// capped by a container's CPU quota, or `OMP_NUM_THREADS`). Tensor methods called directly from JS run
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
            crate::error::bail_code!(
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
        ffi::set_num_interop_threads(n)
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

/// @internal lib/errors.js's `describe`: how `value` reads in an error message
/// (`napi::js::describe_as`), given the class name JS read for an object (`''`: none).
#[napi(js_name = "_describe", skip_typescript)]
pub fn describe(value: Arg, class: Str) -> String {
    let class = class.read("describe: class").unwrap_or_default();
    let raw = value.raw();
    crate::napi::js::describe_as(raw.env, raw.val, Some(class.as_str()).filter(|c| !c.is_empty()))
}

/// @internal index.js calls it on the main thread's `exit` event: no job starts any more, and
/// the running ones get up to a second to end before C's `exit()` destroys libtorch's statics
/// (`executor::drain_for_exit`).
#[napi(js_name = "_drainAtExit", skip_typescript)]
pub fn drain_at_exit() {
    executor::drain_for_exit();
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
/// it saves load in libtorch (or PyTorch) of that version or newer. The full version is
/// `torch.version`.
#[napi]
pub fn libtorch_version() -> String {
    let (major, minor) = ffi::torch_version();
    format!("{major}.{minor}")
}

/// The version of the libtorch this addon is built against and runs, `'2.13.0'` (Python's
/// `torch.__version__` without its local part such as `+cu130`): 2.11, 2.12 or 2.13, as
/// docs/install.md says.
#[allow(non_upper_case_globals)] // the JS name: napi-rs names a constant after its Rust name
#[napi]
pub const version: &str = ffi::LIBTORCH_VERSION;

/// The libtorch this addon links (`torch.libtorch.version`, `torch.libtorch.missingOps()`).
#[napi(namespace = "libtorch")]
pub mod libtorch {
    /// Its version, `'2.11.0'` (the same as `torch.version`).
    #[allow(non_upper_case_globals)] // the JS name: napi-rs names a constant after its Rust name
    #[napi]
    pub const version: &str = torch_core::ffi::LIBTORCH_VERSION;

    /// The libtorch ops that torch-node's bindings (tch 0.26, written for libtorch 2.13) know and
    /// this libtorch lacks: empty on 2.12 and 2.13; on 2.11, 14 internal ops (`_philox_key_split`,
    /// `_upsample_lanczos2d_aa`, ...) that no torch-node API calls. Calling one fails with an error
    /// naming the op and the version, never a crash.
    #[napi]
    pub fn missing_ops() -> Vec<String> {
        torch_core::ffi::missing_ops()
            .into_iter()
            .map(String::from)
            .collect()
    }
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
        torch_core::device::cuda_device_count() > 0
    }

    /// The number of CUDA devices libtorch sees (0 without CUDA).
    #[napi]
    pub fn device_count() -> u32 {
        torch_core::device::cuda_device_count() as u32
    }
}

/// CPU queries.
#[napi(namespace = "cpu")]
pub mod cpu {
    use crate::napi::js;
    use crate::napi::outcome::{js_result, Outcome};
    use torch_core::ffi::{self, Capability};

    /// libtorch's view of this CPU, as Python's `torch._C._cpu._get_cpu_capability()`: ISA
    /// flags (`avx512_bf16`, `amx_bf16`, `avx2`, ...), cache sizes, core counts, `cpu_name`.
    #[napi(ts_return_type = "Record<string, boolean | number | string>")]
    pub fn capabilities() -> Outcome<Capabilities> {
        crate::error::guard(|| Ok(Capabilities(ffi::cpu_capabilities()?))).into()
    }

    js_result!(
        /// The capability map as a plain object of booleans, numbers and strings.
        Capabilities(Vec<(String, Capability)>) as "Record<string, boolean | number | string>",
        |env, entries| {
            let entries = entries
                .into_iter()
                .map(|(name, value)| {
                    let v = match value {
                        Capability::Flag(b) => js::new_bool(env, b),
                        Capability::Count(n) => js::new_number(env, n as f64),
                        Capability::Text(t) => js::new_string(env, &t),
                    }?;
                    Ok((name, v))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            js::new_object(env, entries)
        }
    );

    /// Whether this CPU computes bfloat16 natively (AVX512-BF16 or AMX-BF16): where it does,
    /// `ScriptModule.load(path, {dtype: 'bfloat16'})` is available.
    #[napi]
    pub fn has_native_bf16() -> bool {
        ffi::cpu_has_native_bf16()
    }

    /// The CPUs this process may use and how the executor's default team size was chosen
    /// (`torch.cpu.limits()`).
    #[napi(object)]
    pub struct CpuLimits {
        /// The cores the process's affinity mask allows (`taskset`, Docker's `--cpuset-cpus`):
        /// what libtorch and Node's `os.availableParallelism()` count.
        pub affinity: u32,
        /// The cgroup CPU quota in CPUs (Docker's `--cpus`, Kubernetes' `limits.cpu`): the
        /// smallest along the process's cgroup path, v2 `cpu.max` or v1 `cpu.cfs_quota_us`;
        /// absent where there is none.
        pub quota: Option<f64>,
        /// The cgroup file that set `quota`.
        pub quota_file: Option<String>,
        /// min(affinity, ⌈quota⌉): the cores worth running threads on.
        pub usable_cores: u32,
        /// libtorch's own default intra-op threads (`OMP_NUM_THREADS`, or the cores it counts).
        pub libtorch_threads: u32,
        /// The executor's default intra-op threads before instances divide them (what
        /// `getNumThreads()` is with one instance and no `setNumThreads`).
        pub default_threads: u32,
        /// What set `defaultThreads`: `'quota'` (`usableCores`, lower than `libtorchThreads`),
        /// `'libtorch'`, or `'OMP_NUM_THREADS'` (the user's, which wins over the quota).
        /// `setNumThreads` wins over all.
        pub default_from: String,
    }

    /// The CPUs this process may use (affinity mask, cgroup quota) and the executor's default
    /// team size they gave, read once as the addon loads: see docs/speed.md#containers.
    #[napi]
    pub fn limits() -> CpuLimits {
        let limit = torch_core::cgroup::usable();
        let team = torch_core::executor::team_default();
        CpuLimits {
            affinity: limit.affinity as u32,
            quota: limit.quota.as_ref().map(|q| q.cpus),
            quota_file: limit.quota.as_ref().map(|q| q.file.clone()),
            usable_cores: limit.usable as u32,
            libtorch_threads: team.libtorch as u32,
            default_threads: team.threads as u32,
            default_from: team.from.name().to_string(),
        }
    }

    /// How often one kernel of torch-node's own ops ran (`torch.cpu.kernelCalls()`).
    #[napi(object)]
    pub struct KernelCalls {
        /// The op an exported program calls: `torch_node::rows_linear` (float and int8 weights)
        /// or `torch_node::rows_linear_int4_runs` (int4).
        pub op: String,
        /// What ran on this CPU: `'avx2'` (torch-node's kernel, chosen where the CPU has AVX2 and
        /// FMA) or `'aten'` (ATen's linear: a CPU without them, or float weights past 16 rows).
        pub kernel: String,
        /// Calls so far in this process.
        pub calls: f64,
        /// Of those, calls with one row (a decode step of one sequence).
        pub one_row: f64,
    }

    /// The calls of torch-node's own ops so far in this process, one entry per kernel: which
    /// path a quantized `CausalLM` program (`manifest.json`'s `kernels`) took on this CPU.
    #[napi]
    pub fn kernel_calls() -> Vec<KernelCalls> {
        ffi::kernel_calls()
            .into_iter()
            .map(|k| KernelCalls {
                op: k.op,
                kernel: k.kernel,
                calls: k.calls as f64,
                one_row: k.one_row as f64,
            })
            .collect()
    }
}

/// Runs once per JS context (main thread and each worker) as the addon loads.
#[napi(module_exports)]
pub fn init(exports: napi::bindgen_prelude::Object, env: napi::Env) -> napi::Result<()> {
    // Tensors report their native bytes to this thread's V8 heap (torch_core::memory).
    memory::set_thread_reporter(
        |env, delta| crate::napi::js::adjust_external_memory(env as napi::sys::napi_env, delta),
        env.raw() as usize,
    );
    {
        use napi::bindgen_prelude::TypeTag;
        crate::napi::js::name_classes(vec![
            (<crate::tensor::JsTensor as TypeTag>::type_tag(), "Tensor"),
            (
                <crate::script_module::JsScriptModule as TypeTag>::type_tag(),
                "ScriptModule",
            ),
            (
                <crate::aot_module::JsAotModule as TypeTag>::type_tag(),
                "AOTModule",
            ),
        ]);
    }
    executor::init_js_thread();
    crate::napi::outcome::init(env.raw(), exports.raw())
        .and_then(|()| crate::napi::queue::init(env.raw()))
        .map(|()| {
            crate::napi::warnings::init_thread(crate::napi::queue::current());
            executor::on_thread_start(|| crate::napi::warnings::init_thread(None));
        })
        .map_err(|e| napi::Error::from_reason(e.to_string()))
}
