//! Async and sync exports over the executor (`torch_core::executor`): what every class that runs
//! libtorch work shares — reading the `{signal}` call option, the promise, the hand-off to an
//! instance thread, and the result's trip back to the JS thread (`crate::napi::queue`).
//!
//! An async export: its arguments are read on the JS thread (`prepare`), the work runs on an
//! instance, and its result is converted to JS and settles the promise on the JS thread that
//! made it. An `AbortSignal` rejects with `Aborted` at once while the work is still queued (the
//! work is then skipped); work already running finishes and its result is dropped.
//!
//! `napi_env` and `napi_value` are opaque handles that Rust never dereferences (see `crate::napi::js`).
#![allow(clippy::not_unsafe_ptr_arg_deref)]
use crate::error::{catch_panic, Code};
use crate::napi::js::{self, Env as RawEnv, Val};
use crate::napi::queue;
use crate::napi::warnings;
use napi::bindgen_prelude::{Function, ToNapiValue, TypeName, ValueType};
use napi::{sys, Env, JsValue};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use torch_core::executor;

const QUEUED: u8 = 0;
const RUNNING: u8 = 1;
const CANCELLED: u8 = 2;

/// A promise's resolver. Used on its JS thread only; it travels through the executor inside
/// the work's completion.
struct Deferred(sys::napi_deferred);
// SAFETY: only settled on the JS thread that created it (`queue` runs completions there).
unsafe impl Send for Deferred {}

/// One async call's shared state: between the JS thread (the signal's listener, the
/// completion) and the instance that runs it.
pub struct Call {
    aborted: AtomicBool,
    state: AtomicU8,
    deferred: Mutex<Option<Deferred>>,
    /// What `Aborted` names (`forward`, `load`, ...).
    what: OnceLock<String>,
}

impl Call {
    fn new() -> Arc<Call> {
        Arc::new(Call {
            aborted: AtomicBool::new(false),
            state: AtomicU8::new(QUEUED),
            deferred: Mutex::new(None),
            what: OnceLock::new(),
        })
    }

    fn take_deferred(&self) -> Option<Deferred> {
        self.deferred.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    fn aborted_error(&self) -> anyhow::Error {
        let what = self.what.get().map_or("call", String::as_str);
        crate::error::fail(Code::Aborted, format!("{what}: aborted"))
    }
}

/// The call's `AbortSignal` state, when it was given one.
pub type AbortFlag = Option<Arc<Call>>;

/// Listens to `signal` (already aborted: the flag is set): on abort, a call still queued is
/// rejected at once.
pub(crate) fn abort_flag(env: &Env, signal: Val) -> anyhow::Result<Arc<Call>> {
    let raw = env.raw();
    if js::type_of(raw, signal)? != sys::ValueType::napi_object
        || !js::is_instance_of(raw, signal, "AbortSignal")?
    {
        crate::error::bail_code!(
            Code::InvalidArg,
            "options.signal: expected an AbortSignal, got {}",
            js::describe(raw, signal)
        );
    }
    let call = Call::new();
    if let Some(a) = js::property(raw, signal, "aborted")? {
        if js::boolean(raw, a)? {
            call.aborted.store(true, Ordering::SeqCst);
            return Ok(call);
        }
    }
    let on_abort = call.clone();
    let listener: Function<'_, (), ()> = env.create_function_from_closure("onabort", move |ctx| {
        on_abort.aborted.store(true, Ordering::SeqCst);
        let cancelled = on_abort
            .state
            .compare_exchange(QUEUED, CANCELLED, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok();
        if let Some(d) = cancelled.then(|| on_abort.take_deferred()).flatten() {
            settle(ctx.env.raw(), d, Err(on_abort.aborted_error()));
        }
        Ok(())
    })?;
    let once = js::new_object(raw, vec![("once".to_string(), js::new_bool(raw, true)?)])?;
    let event = js::new_string(raw, "abort")?;
    js::call_method(raw, signal, "addEventListener", &[event, listener.raw(), once])?;
    Ok(call)
}

/// Takes a last `{signal}` argument (the call's options) off `items`: its abort state, or None
/// when the last argument is an input.
pub(crate) fn split_call_options(env: &Env, items: &mut Vec<Val>) -> anyhow::Result<AbortFlag> {
    let raw = env.raw();
    let signal = match items.last() {
        Some(&last) if is_call_options(raw, last)? => {
            items.pop();
            js::property(raw, last, "signal")?
        }
        _ => None,
    };
    signal.map(|s| abort_flag(env, s)).transpose()
}

/// A plain object whose only key is `signal`, holding an AbortSignal (which is no TorchScript
/// value, so this cannot shadow a real Dict input).
fn is_call_options(env: RawEnv, v: Val) -> anyhow::Result<bool> {
    if js::type_of(env, v)? != sys::ValueType::napi_object || js::is_array(env, v)? {
        return Ok(false);
    }
    if js::own_keys(env, v)? != ["signal"] {
        return Ok(false);
    }
    match js::property(env, v, "signal")? {
        Some(s) => js::is_instance_of(env, s, "AbortSignal"),
        None => Ok(false),
    }
}

/// Reads an async export's arguments on the JS thread: a JS exception pending from the
/// caller's own getter or Proxy is rethrown at once (no promise is made), any other failure
/// becomes the promise's rejection, a panic is an `Internal` error, and the `{signal}`'s abort
/// state is split off.
pub(crate) fn prepare<P>(
    read: impl FnOnce() -> anyhow::Result<(P, AbortFlag)>,
) -> crate::error::Result<(anyhow::Result<P>, AbortFlag)> {
    match catch_panic(read) {
        Err(e) if js::threw(&e) => Err(crate::error::to_js(&e)),
        Err(e) => Ok((Err(e), None)),
        Ok((p, abort)) => Ok((Ok(p), abort)),
    }
}

/// The promise an async export returns.
pub struct Promise(Val);

impl TypeName for Promise {
    fn type_name() -> &'static str {
        "Promise"
    }
    fn value_type() -> ValueType {
        ValueType::Object
    }
}

impl ToNapiValue for Promise {
    unsafe fn to_napi_value(_env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        Ok(val.0)
    }
}

/// How a finished call's result becomes a JS value, on the JS thread.
pub type Finish<T> = fn(RawEnv, T) -> anyhow::Result<Val>;

/// Runs `work` on an instance with what `prepare` read (or rejects with why it could not be
/// read); the promise settles on this JS thread with `finish`'s value.
pub(crate) fn spawn<P, T>(
    env: RawEnv,
    what: &str,
    (prepared, abort): (anyhow::Result<P>, AbortFlag),
    work: impl FnOnce(P) -> anyhow::Result<T> + Send + 'static,
    finish: Finish<T>,
) -> anyhow::Result<Promise>
where
    P: Send + 'static,
    T: Send + 'static,
{
    let (mut deferred, mut promise) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: plain N-API call on the JS thread.
    if unsafe { sys::napi_create_promise(env, &mut deferred, &mut promise) } != sys::Status::napi_ok {
        anyhow::bail!("{what}: cannot create a promise");
    }
    let deferred = Deferred(deferred);
    let call = abort.unwrap_or_else(Call::new);
    let _ = call.what.set(what.to_string());
    let prepared = match prepared {
        Ok(_) if call.aborted.load(Ordering::SeqCst) => Err(call.aborted_error()),
        other => other,
    };
    let (input, queue) = match (prepared, queue::current()) {
        (Ok(p), Some(q)) => (p, q),
        (Err(e), _) => {
            settle(env, deferred, Err(e));
            return Ok(Promise(promise));
        }
        (Ok(_), None) => anyhow::bail!("{what}: the addon was not initialised on this thread"),
    };
    *call.deferred.lock().unwrap_or_else(|p| p.into_inner()) = Some(deferred);
    queue::expect(env, &queue);
    executor::submit(Box::new(move || {
        // Cancelled while queued (the listener has rejected; only the keep-alive is left), or
        // its JS thread is tearing down (a terminated worker): skipped. While it runs, that
        // thread's teardown waits for it (`running`): the inputs may be its lent memory.
        let running = queue.running();
        let started = running.is_some()
            && call
                .state
                .compare_exchange(QUEUED, RUNNING, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok();
        let origin = Some(queue.clone());
        let out = started.then(|| warnings::with_origin(origin, || catch_panic(|| work(input))));
        // The guard is dropped after the post: on a thread that is closing, `post` drops the
        // completion (and the output it holds) here, and the thread's teardown waits for that.
        queue.post(Box::new(move |env| {
            queue::fulfilled(env);
            let (Some(out), Some(d)) = (out, call.take_deferred()) else {
                return;
            };
            let out = match call.aborted.load(Ordering::SeqCst) {
                true => Err(call.aborted_error()),
                false => out.and_then(|v| finish(env, v)),
            };
            settle(env, d, out);
        }));
        drop(running);
    }));
    Ok(Promise(promise))
}

/// Runs `work` on an instance while the calling thread waits (a sync export).
pub(crate) fn run_sync<T: Send + 'static>(
    work: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> anyhow::Result<T> {
    let origin = queue::current();
    executor::run_sync(move || warnings::with_origin(origin, || catch_panic(work)))
}

/// Resolves or rejects on the JS thread. A JS exception pending from `finish` is the rejection.
fn settle(env: RawEnv, d: Deferred, out: anyhow::Result<Val>) {
    let (status, value) = match out {
        Ok(v) => (true, v),
        Err(e) => (false, error_value(env, &e)),
    };
    // SAFETY: `d` is settled once (it was taken out of its Call), on its own JS thread.
    unsafe {
        match status {
            true => sys::napi_resolve_deferred(env, d.0, value),
            false => sys::napi_reject_deferred(env, d.0, value),
        };
    }
}

/// The JS error for `err`: the pending JS exception, or an Error with `code`.
fn error_value(env: RawEnv, err: &anyhow::Error) -> Val {
    if let Some(exception) = js::take_exception(env) {
        return exception;
    }
    let (code, message) = crate::error::describe(err);
    let mut out = ptr::null_mut();
    if let (Ok(c), Ok(m)) = (js::new_string(env, code.as_ref()), js::new_string(env, &message)) {
        // SAFETY: plain N-API call on the JS thread.
        unsafe { sys::napi_create_error(env, c, m, &mut out) };
    }
    if out.is_null() {
        // No error object could be made (out of memory?): reject with `undefined`, never hang.
        // SAFETY: plain N-API call on the JS thread.
        unsafe { sys::napi_get_undefined(env, &mut out) };
    }
    out
}
