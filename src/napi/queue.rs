//! One queue per JS thread (main and each worker) that any thread may post work to; the work
//! runs on that JS thread, outside GC. Two users: libtorch's deleter for lent JS memory (which
//! must delete a JS reference, and may run on any thread, even inside GC) and the executor's
//! completions (which settle promises).
//!
//! It is a threadsafe function, and why it has a `closing` flag: since Node 24.14
//! (nodejs/node #55877) Node holds a threadsafe function's mutex while it runs the remaining
//! finalizers at environment teardown; a finalizer that drops a tensor over lent memory runs
//! libtorch's storage deleter, which would call `napi_call_threadsafe_function` on that same
//! function and deadlock (the process or worker never exits). As napi-rs's `CustomGcHandle`
//! (napi-rs #3357) does, an env cleanup hook — registered after the function, so it runs
//! before the function's own teardown — sets `closing`; `post` checks it under the lock, held
//! across the call, and once closing drops the work instead of calling into JS (the
//! environment frees its references and promises itself as it goes).
//!
//! Keep-alive: the function is unref'd (lent memory must not keep a process alive), and ref'd
//! while completions are outstanding (`expect`/`fulfilled`), as a libuv work request would be.
//!
//! `napi_env` is an opaque handle that Rust never dereferences (see `crate::napi::js`).
#![allow(clippy::not_unsafe_ptr_arg_deref)]
use napi::sys;
use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// Work for the JS thread; gets its env, or is dropped unrun when the thread is tearing down.
pub type Work = Box<dyn FnOnce(sys::napi_env) + Send>;

pub struct JsQueue {
    /// Set once, right after the function is created (its finalizer needs the queue first).
    tsfn: AtomicPtr<sys::napi_threadsafe_function__>,
    closing: Mutex<bool>,
    /// Work of this JS thread that an executor instance is running: the thread's teardown
    /// waits for it (see `Running`).
    running: Mutex<usize>,
    idle: Condvar,
}

// SAFETY: a threadsafe function handle may be used from any thread (that is its purpose);
// `closing` guards its use after teardown.
unsafe impl Send for JsQueue {}
unsafe impl Sync for JsQueue {}

thread_local! {
    static QUEUE: RefCell<Option<Arc<JsQueue>>> = const { RefCell::new(None) };
    /// Completions this JS thread waits for: the function is ref'd while this is above 0.
    static OUTSTANDING: Cell<usize> = const { Cell::new(0) };
}

impl JsQueue {
    /// Queues `work` for the JS thread; false (and `work` dropped) once the thread is closing.
    /// Callable from any thread, inside GC too (`napi_call_threadsafe_function` is allowed there).
    pub fn post(&self, work: Work) -> bool {
        let data = Box::into_raw(Box::new(work)) as *mut c_void;
        let closing = self.closing.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: the function lives until its finalizer, which runs after the cleanup hook
        // has set `closing` (checked under the lock, held across the call).
        let queued = !*closing
            && unsafe {
                sys::napi_call_threadsafe_function(
                    self.tsfn.load(Ordering::Acquire),
                    data,
                    sys::ThreadsafeFunctionCallMode::nonblocking,
                )
            } == sys::Status::napi_ok;
        drop(closing);
        if !queued {
            // SAFETY: not handed to Node, so still ours.
            drop(unsafe { Box::from_raw(data as *mut Work) });
        }
        queued
    }

    /// Whether the JS thread is tearing down (work for it would be dropped).
    pub fn is_closing(&self) -> bool {
        *self.closing.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn close(&self) {
        *self.closing.lock().unwrap_or_else(|p| p.into_inner()) = true;
    }

    /// Marks work of this JS thread as running on an executor instance until the guard drops;
    /// None once the thread is tearing down (the work must then be skipped).
    pub fn running(self: &Arc<Self>) -> Option<Running> {
        let mut n = self.running.lock().unwrap_or_else(|p| p.into_inner());
        if self.is_closing() {
            return None;
        }
        *n += 1;
        Some(Running(self.clone()))
    }

    /// Waits until no work of this thread is running. Why: a running call may read memory this
    /// JS thread lent (a `fromBuffer` input); its ArrayBuffer is freed when the thread's isolate
    /// goes, right after the cleanup hooks. libuv work requests hold a worker's teardown the
    /// same way.
    fn wait_idle(&self) {
        let mut n = self.running.lock().unwrap_or_else(|p| p.into_inner());
        while *n > 0 {
            n = self.idle.wait(n).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// Work of one JS thread running on an instance (see `JsQueue::running`).
pub struct Running(Arc<JsQueue>);

impl Drop for Running {
    fn drop(&mut self) {
        let mut n = self.0.running.lock().unwrap_or_else(|p| p.into_inner());
        *n -= 1;
        if *n == 0 {
            self.0.idle.notify_all();
        }
    }
}

/// This JS thread's queue (None before `init` ran on it).
pub fn current() -> Option<Arc<JsQueue>> {
    QUEUE.with(|q| q.borrow().clone())
}

/// On the JS thread: one more completion will be posted; keeps the event loop alive until it
/// has run (`fulfilled`).
pub fn expect(env: sys::napi_env, queue: &JsQueue) {
    OUTSTANDING.with(|n| {
        if n.get() == 0 {
            // SAFETY: called on the function's own JS thread.
            unsafe { sys::napi_ref_threadsafe_function(env, queue.tsfn.load(Ordering::Acquire)) };
        }
        n.set(n.get() + 1);
    });
}

/// On the JS thread, as an expected completion runs.
pub fn fulfilled(env: sys::napi_env) {
    OUTSTANDING.with(|n| {
        n.set(n.get().saturating_sub(1));
        if n.get() == 0 {
            if let Some(q) = current() {
                // SAFETY: as in `expect`.
                unsafe { sys::napi_unref_threadsafe_function(env, q.tsfn.load(Ordering::Acquire)) };
            }
        }
    });
}

unsafe extern "C" fn run_on_js_thread(
    env: sys::napi_env,
    _cb: sys::napi_value,
    _ctx: *mut c_void,
    data: *mut c_void,
) {
    // SAFETY: `data` is the `Box<Work>` that `post` handed over.
    let work = Box::from_raw(data as *mut Work);
    // A null env: the function is being torn down with items still queued.
    if !env.is_null() {
        work(env);
    }
}

/// Env cleanup hook and the function's finalizer: from now on, nothing calls into it. Each
/// owns one strong count of the queue.
unsafe extern "C" fn close_queue(arg: *mut c_void) {
    // SAFETY: `arg` is one `Arc::into_raw` count, given to this hook or finalizer alone.
    let queue = Arc::from_raw(arg as *const JsQueue);
    queue.close();
    queue.wait_idle();
}

unsafe extern "C" fn close_queue_on_finalize(_env: sys::napi_env, data: *mut c_void, _hint: *mut c_void) {
    close_queue(data);
}

/// Creates this JS thread's queue (once per JS context, at load).
pub fn init(env: sys::napi_env) -> anyhow::Result<()> {
    let mut tsfn = ptr::null_mut();
    let name = crate::napi::js::new_string(env, "torch-node: JS thread queue")?;
    let queue = Arc::new(JsQueue {
        tsfn: AtomicPtr::new(ptr::null_mut()),
        closing: Mutex::new(false),
        running: Mutex::new(0),
        idle: Condvar::new(),
    });
    let finalize_data = Arc::into_raw(queue.clone()) as *mut c_void;
    // SAFETY: plain N-API call on the JS thread; `finalize_data` is one Arc count, released
    // by the finalizer (or below, when creation fails).
    let status = unsafe {
        sys::napi_create_threadsafe_function(
            env,
            ptr::null_mut(),
            ptr::null_mut(),
            name,
            0,
            1,
            finalize_data,
            Some(close_queue_on_finalize),
            ptr::null_mut(),
            Some(run_on_js_thread),
            &mut tsfn,
        )
    };
    if status != sys::Status::napi_ok {
        // SAFETY: Node did not take the finalizer's count.
        drop(unsafe { Arc::from_raw(finalize_data as *const JsQueue) });
        anyhow::bail!("cannot create the JS thread queue (status {status})");
    }
    queue.tsfn.store(tsfn, Ordering::Release);
    // SAFETY: on the function's JS thread.
    unsafe { sys::napi_unref_threadsafe_function(env, tsfn) };
    let hook_data = Arc::into_raw(queue.clone()) as *mut c_void;
    // SAFETY: the hook gets one Arc count, released there (or below, when registration fails).
    if unsafe { sys::napi_add_env_cleanup_hook(env, Some(close_queue), hook_data) } != sys::Status::napi_ok {
        drop(unsafe { Arc::from_raw(hook_data as *const JsQueue) });
        anyhow::bail!("cannot register the JS thread queue's cleanup hook");
    }
    QUEUE.with(|q| *q.borrow_mut() = Some(queue));
    Ok(())
}
