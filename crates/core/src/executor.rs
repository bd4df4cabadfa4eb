//! torch-node's own compute threads. Every libtorch call that can be long — module loads,
//! `forward`/`runMethod`, `.pt2` runs, image decoding — runs here, never on libuv's pool and,
//! for sync calls, not on the calling JS thread either (it waits).
//!
//! Why: libtorch's intra-op parallelism is libgomp, and each OS thread that enters a parallel
//! region becomes the master of an OpenMP team of its own. Once libgomp manages more threads
//! than there are CPUs it throttles its spin-wait and every parallel region pays a futex
//! wake-up: measured, a loop of async forwards on libuv's 4 workers ran 1.6× slower than the
//! same forwards on one thread, and libuv's pool (shared with `fs`, `dns.lookup`, `zlib`,
//! `crypto`) was starved for a second. So the number of threads entering libtorch is fixed
//! (`instances`), each with a fixed number of intra-op threads, and the JS threads themselves
//! get one intra-op thread (`init_js_thread`) for the tensor methods they run directly.
//!
//! No N-API here: work is a boxed closure; how results reach JS is the addon's business (its
//! `task` module).
use std::cell::Cell;
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};

pub type Job = Box<dyn FnOnce() + Send>;

/// The settings and counters `stats()` reports.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stats {
    /// Threads that run work concurrently (one OpenMP team each).
    pub instances: usize,
    /// Intra-op threads of each instance.
    pub threads: usize,
    /// Work waiting for an instance.
    pub queued: usize,
    /// Work running now.
    pub running: usize,
    /// Work finished since the process started.
    pub completed: u64,
}

struct State {
    jobs: VecDeque<Job>,
    instances: usize,
    /// None: cores ÷ instances (at least 1).
    threads: Option<usize>,
    /// Bumped whenever `threads` changes: each instance re-applies it before its next job.
    generation: u64,
    alive: usize,
    running: usize,
    completed: u64,
    /// Set inside C's `exit()` (`drain_at_exit`): no job starts any more.
    exiting: bool,
}

struct Executor {
    state: Mutex<State>,
    work_ready: Condvar,
    /// Notified when a job ends while the process exits.
    job_ended: Condvar,
}

static EXECUTOR: OnceLock<Executor> = OnceLock::new();
/// The default intra-op threads before instances divide them (`default_threads`), read before
/// any JS thread was set to one.
static CORES: OnceLock<TeamDefault> = OnceLock::new();
/// Runs first on each instance thread (the glue installs libtorch's per-thread warning handler).
static ON_START: OnceLock<fn()> = OnceLock::new();

/// Sets what each instance thread runs as it starts (once; later calls are ignored).
pub fn on_thread_start(hook: fn()) {
    let _ = ON_START.set(hook);
}

thread_local! {
    /// Set on executor threads: a sync call made from one runs inline (it would otherwise wait
    /// for itself with one instance).
    static ON_EXECUTOR: Cell<bool> = const { Cell::new(false) };
}

fn executor() -> &'static Executor {
    EXECUTOR.get_or_init(|| {
        crate::ffi::runtime::at_exit(drain_at_exit);
        new_executor()
    })
}

fn new_executor() -> Executor {
    Executor {
        state: Mutex::new(State {
            jobs: VecDeque::new(),
            instances: instances_from_env().unwrap_or(1),
            threads: None,
            generation: 0,
            alive: 0,
            running: 0,
            completed: 0,
            exiting: false,
        }),
        work_ready: Condvar::new(),
        job_ended: Condvar::new(),
    }
}

/// The longest `exit()` waits for the jobs running (`drain_at_exit`).
const EXIT_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Runs inside C's `exit()` (`process.exit()`, an uncaught exception, the end of `main`), before
/// libtorch's static destructors, which it registered earlier: no queued job starts any more,
/// and the running ones get up to `EXIT_WAIT` to end. A job still inside libtorch while its
/// globals are destroyed fails, and the `.pt2` runtime prints the failed call's line (seen:
/// `process.exit()` during a generation step). Queued jobs are left as they are: dropping them
/// could release JS handles of an environment that is gone.
extern "C" fn drain_at_exit() {
    drain_for_exit();
}

/// What `drain_at_exit` does, for the main thread's JS `exit` event (index.js), which comes
/// before C's `exit()`: libtorch's function-local statics first used after the executor started
/// (the ATen ops a `.pt2` program calls) registered their destructors after `drain_at_exit` and
/// so run before it, under a step still running (seen: every `process.exit()` mid-step on a
/// loaded machine printed the failed call of `mm_out`). Idempotent.
pub fn drain_for_exit() {
    let Some(exec) = EXECUTOR.get() else { return };
    let mut state = lock();
    state.exiting = true;
    let deadline = std::time::Instant::now() + EXIT_WAIT;
    while state.running > 0 {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            break;
        }
        state = exec
            .job_ended
            .wait_timeout(state, left)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
}

/// `TORCH_NODE_INSTANCES`, when it holds a positive integer.
fn instances_from_env() -> Option<usize> {
    std::env::var("TORCH_NODE_INSTANCES")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| (1..=MAX_INSTANCES).contains(n))
}

pub const MAX_INSTANCES: usize = 256;

fn lock() -> MutexGuard<'static, State> {
    executor().state.lock().unwrap_or_else(|p| p.into_inner())
}

/// Where the default team size comes from (`default_threads`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefaultFrom {
    /// libtorch's own default (the cores it counts, within the affinity mask).
    Libtorch,
    /// The cgroup CPU quota, lower than the affinity mask's cores (`cgroup::usable`).
    Quota,
    /// The user's `OMP_NUM_THREADS`, which libtorch's default already is.
    OmpNumThreads,
}

impl DefaultFrom {
    /// The name `torch.cpu.limits()` reports.
    pub fn name(self) -> &'static str {
        match self {
            DefaultFrom::Libtorch => "libtorch",
            DefaultFrom::Quota => "quota",
            DefaultFrom::OmpNumThreads => "OMP_NUM_THREADS",
        }
    }
}

/// The executor's default intra-op threads (divided by the instances) and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TeamDefault {
    /// Intra-op threads, before `instances` divide them.
    pub threads: usize,
    /// What set them.
    pub from: DefaultFrom,
    /// libtorch's own default, read before anything changed it.
    pub libtorch: usize,
}

/// The default team size: libtorch's default (`OMP_NUM_THREADS` where the user set it, else the
/// cores libtorch counts) capped by the cores the cgroup quota leaves (`usable`), except where
/// the user set `OMP_NUM_THREADS`: an explicit setting wins. `setNumThreads` wins over both.
pub fn default_threads(libtorch: usize, omp_num_threads: bool, usable: usize) -> TeamDefault {
    let libtorch = libtorch.max(1);
    if omp_num_threads {
        return TeamDefault {
            threads: libtorch,
            from: DefaultFrom::OmpNumThreads,
            libtorch,
        };
    }
    if usable.max(1) < libtorch {
        return TeamDefault {
            threads: usable.max(1),
            from: DefaultFrom::Quota,
            libtorch,
        };
    }
    TeamDefault {
        threads: libtorch,
        from: DefaultFrom::Libtorch,
        libtorch,
    }
}

/// Whether `OMP_NUM_THREADS` holds a count libgomp takes (its first entry, a positive integer).
fn omp_num_threads_set() -> bool {
    std::env::var("OMP_NUM_THREADS").is_ok_and(|v| {
        let first = v.split(',').next().unwrap_or_default().trim();
        first.parse::<usize>().is_ok_and(|n| n > 0)
    })
}

/// The executor's default team size and why, decided once as the addon loads.
pub fn team_default() -> TeamDefault {
    *CORES.get_or_init(|| {
        let usable = crate::cgroup::usable().usable;
        default_threads(tch::get_num_threads() as usize, omp_num_threads_set(), usable)
    })
}

fn cores() -> usize {
    team_default().threads
}

/// Runs on each JS thread as the addon loads: decides the default team size (once per process,
/// before changing anything: `team_default`) and gives this thread one intra-op thread, so that
/// tensor methods called from JS never start an OpenMP team beside the executor's.
pub fn init_js_thread() {
    cores();
    tch::set_num_threads(1);
}

impl State {
    fn threads_per_instance(&self) -> usize {
        self.threads.unwrap_or_else(|| (cores() / self.instances).max(1))
    }

    fn stats(&self) -> Stats {
        Stats {
            instances: self.instances,
            threads: self.threads_per_instance(),
            queued: self.jobs.len(),
            running: self.running,
            completed: self.completed,
        }
    }
}

/// Starts instances up to the configured count (threads beyond it retire when idle).
fn grow(state: &mut State) {
    while state.alive < state.instances {
        state.alive += 1;
        let spawned = std::thread::Builder::new()
            .name("torch-node".into())
            .spawn(instance);
        if spawned.is_err() {
            state.alive -= 1;
            break;
        }
    }
}

fn instance() {
    ON_EXECUTOR.with(|f| f.set(true));
    if let Some(hook) = ON_START.get() {
        hook();
    }
    let exec = executor();
    let mut applied: Option<u64> = None;
    let mut state = lock();
    loop {
        if state.alive > state.instances {
            state.alive -= 1;
            // Another instance may now be the one to pick up queued work.
            exec.work_ready.notify_one();
            return;
        }
        let next = if state.exiting {
            None
        } else {
            state.jobs.pop_front()
        };
        let Some(work) = next else {
            state = exec.work_ready.wait(state).unwrap_or_else(|p| p.into_inner());
            continue;
        };
        state.running += 1;
        let settings = (state.generation, state.threads_per_instance());
        drop(state);
        if applied != Some(settings.0) {
            // Per thread in libtorch (OpenMP's and MKL's thread counts are thread-local).
            tch::set_num_threads(settings.1 as i32);
            applied = Some(settings.0);
        }
        // Work reports its own errors; a panic that escapes it must not kill the instance.
        let _ = catch_unwind(AssertUnwindSafe(work));
        state = lock();
        state.running -= 1;
        state.completed += 1;
        if state.exiting {
            exec.job_ended.notify_all();
        }
    }
}

/// Queues work for the next free instance.
pub fn submit(work: Job) {
    let mut state = lock();
    grow(&mut state);
    state.jobs.push_back(work);
    drop(state);
    executor().work_ready.notify_one();
}

/// Runs `f` on an instance and waits for its result (the calling thread blocks).
pub fn run_sync<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    if ON_EXECUTOR.with(Cell::get) {
        return f();
    }
    let slot = Arc::new((Mutex::new(None), Condvar::new()));
    let filled = slot.clone();
    submit(Box::new(move || {
        // A panic is caught here so the waiter always gets an answer.
        let out = catch_unwind(AssertUnwindSafe(f));
        *filled.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(out);
        filled.1.notify_one();
    }));
    let mut out = slot.0.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        match out.take() {
            Some(Ok(v)) => return v,
            Some(Err(panic)) => std::panic::resume_unwind(panic),
            None => out = slot.1.wait(out).unwrap_or_else(|p| p.into_inner()),
        }
    }
}

/// Sets how many calls run at once (each on its own thread); more threads start at once,
/// surplus ones stop when they are idle.
pub fn set_instances(n: usize) {
    let mut state = lock();
    state.instances = n.clamp(1, MAX_INSTANCES);
    state.generation += 1;
    grow(&mut state);
    drop(state);
    executor().work_ready.notify_all();
}

/// Sets the intra-op threads of each instance (None: cores ÷ instances), applied before each
/// instance's next call.
pub fn set_threads(n: Option<usize>) {
    let mut state = lock();
    state.threads = n.map(|n| n.max(1));
    state.generation += 1;
}

pub fn stats() -> Stats {
    lock().stats()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    // One test: the executor is process-global, and cargo runs tests in parallel.
    #[test]
    fn the_quota_caps_the_default_unless_the_user_set_omp_num_threads() {
        let d = |threads, from, libtorch| TeamDefault {
            threads,
            from,
            libtorch,
        };
        assert_eq!(default_threads(64, false, 2), d(2, DefaultFrom::Quota, 64));
        assert_eq!(default_threads(2, false, 2), d(2, DefaultFrom::Libtorch, 2));
        assert_eq!(default_threads(2, false, 64), d(2, DefaultFrom::Libtorch, 2));
        assert_eq!(default_threads(8, true, 2), d(8, DefaultFrom::OmpNumThreads, 8));
        assert_eq!(default_threads(0, false, 0), d(1, DefaultFrom::Libtorch, 1));
    }

    #[test]
    fn runs_work_on_its_instances_in_order_and_survives_panics() {
        let caller = std::thread::current().id();
        let ran_on = run_sync(|| std::thread::current().id());
        assert_ne!(ran_on, caller, "sync work runs on an instance, not the caller");
        assert_eq!(run_sync(|| run_sync(|| 7)), 7, "a nested sync call runs inline");

        let boom = std::panic::catch_unwind(|| run_sync(|| panic!("boom")));
        assert!(boom.is_err(), "a panic reaches the waiter");
        assert_eq!(run_sync(|| 1 + 1), 2, "and the instance lives on");

        // One instance: FIFO.
        set_instances(1);
        let (tx, rx) = mpsc::channel();
        for i in 0..20 {
            let tx = tx.clone();
            submit(Box::new(move || tx.send(i).unwrap()));
        }
        let order: Vec<i32> = (0..20)
            .map(|_| rx.recv_timeout(Duration::from_secs(10)).unwrap())
            .collect();
        assert_eq!(order, (0..20).collect::<Vec<_>>());

        // Two instances run two calls at once: each waits for the other to start.
        set_instances(2);
        let gate = Arc::new(std::sync::Barrier::new(2));
        let (tx, rx) = mpsc::channel();
        for _ in 0..2 {
            let (gate, tx) = (gate.clone(), tx.clone());
            submit(Box::new(move || {
                gate.wait();
                tx.send(()).unwrap();
            }));
        }
        for _ in 0..2 {
            rx.recv_timeout(Duration::from_secs(10))
                .expect("both ran concurrently");
        }
        set_threads(Some(3));
        assert_eq!(stats().threads, 3);
        set_threads(None);
        assert_eq!(stats().threads, (cores() / 2).max(1));
        set_instances(1);
        assert_eq!(stats().instances, 1);
    }
}
