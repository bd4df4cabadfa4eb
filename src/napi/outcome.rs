//! How exports fail without throwing from native code.
//!
//! Why: when a native callback throws, Node's `CallIntoModule` rethrows the exception
//! (`Isolate::ThrowException`, which allocates a message object and so may collect garbage)
//! *before* it clears `last_exception`. A GC-time finalizer that runs during that collection
//! (this addon's module version is the experimental one, see `lib.rs`) then sees the stale
//! exception, and Node runs JS inside the GC: V8's fatal "AllowJavascriptExecution". That holds
//! on Node 20, 22, 24 and 26 whatever the finalizer does, so the only safe throw is a JS one.
//!
//! So an export returns [`Outcome`]: its value, or — on failure — a frozen sentinel object
//! (`FAILED`, exported as `_failed`) after stashing the error here; the JS wrapper that index.js
//! puts on every export sees the sentinel, takes the error with `_takeError()` and throws it
//! from JS. An exception that the caller's own JS code threw while its arguments were read (a
//! getter, a Proxy trap) is taken off the env at once (no allocation while it is pending) and
//! handed back as is.
//!
//! napi-rs's own conversion of typed parameters would throw from native code too (a string
//! where a number is declared), so exports declare the types of `crate::napi::convert`, whose
//! conversion cannot fail: the body reads them inside its `Outcome`.
//!
//! `napi_env` and `napi_value` are opaque handles that Rust never dereferences (see `crate::napi::js`).
#![allow(clippy::not_unsafe_ptr_arg_deref)]
use crate::error::{Code, Result};
use crate::napi::js::{self, Env, Val};
use napi::bindgen_prelude::{ToNapiValue, TypeName, ValueType};
use napi::sys;
use std::cell::{Cell, RefCell};
use std::ptr;

/// An export's result: `T` on success; on failure the sentinel, with the error stashed.
pub struct Outcome<T>(Result<T>);

impl<T> From<Result<T>> for Outcome<T> {
    fn from(r: Result<T>) -> Self {
        Outcome(r)
    }
}

impl<T> Outcome<T> {
    /// Runs an export body that needs `?` on glue results.
    pub fn of(body: impl FnOnce() -> Result<T>) -> Self {
        Outcome(body())
    }
}

/// A failure waiting for `_takeError()`.
enum Stashed {
    Coded(Code, String),
    /// The exception the caller's own JS code threw, held by a reference.
    Thrown(sys::napi_ref),
}

thread_local! {
    // One per JS thread (main and each worker): each env lives on its own thread.
    static FAILED: Cell<sys::napi_ref> = const { Cell::new(ptr::null_mut()) };
    static LAST: RefCell<Option<Stashed>> = const { RefCell::new(None) };
}

/// Creates this thread's sentinel (a frozen empty object) and puts it on `exports._failed`.
pub fn init(env: Env, exports: Val) -> anyhow::Result<()> {
    let (mut sentinel, mut reference) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: plain N-API calls on the JS thread running this module's init with its `env`; the
    // out-parameters are locals and `c"_failed"` is static. The reference (count 1, never deleted) keeps the
    // sentinel alive as long as this env, whose thread `FAILED` belongs to.
    unsafe {
        check(sys::napi_create_object(env, &mut sentinel))?;
        check(sys::napi_object_freeze(env, sentinel))?;
        check(sys::napi_create_reference(env, sentinel, 1, &mut reference))?;
        check(sys::napi_set_named_property(
            env,
            exports,
            c"_failed".as_ptr(),
            sentinel,
        ))?;
    }
    FAILED.with(|f| f.set(reference));
    Ok(())
}

fn check(status: sys::napi_status) -> anyhow::Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        anyhow::bail!("cannot create the failure sentinel (N-API status {status})")
    }
}

/// Stashes `err` (or the pending JS exception, which wins) and returns the sentinel.
fn fail(env: Env, err: napi::Error<Code>) -> napi::Result<Val> {
    let stashed = match js::take_exception(env) {
        Some(exception) => {
            let mut reference = ptr::null_mut();
            // SAFETY: plain N-API call on the JS thread that owns `env`, with no exception pending:
            // `take_exception` just cleared it and handed us `exception`. A failure leaves `reference` null,
            // which later N-API calls on it refuse with a status.
            unsafe { sys::napi_create_reference(env, exception, 1, &mut reference) };
            Stashed::Thrown(reference)
        }
        None => Stashed::Coded(err.status, err.reason),
    };
    if let Some(Stashed::Thrown(old)) = LAST.with(|l| l.borrow_mut().replace(stashed)) {
        // SAFETY: `old` was created by an earlier `fail` on this JS thread, with its env (`LAST` is
        // thread-local, one env per JS thread); taking it out of `LAST` leaves no other holder, so it is
        // deleted exactly once, on its own thread.
        unsafe { sys::napi_delete_reference(env, old) };
    }
    let mut sentinel = ptr::null_mut();
    // SAFETY: plain N-API call on the JS thread that owns `env`; `FAILED` is this thread's sentinel
    // reference, made by `init` with this env and never deleted (null if `init` never ran, which N-API
    // refuses with a status, checked below).
    let status = unsafe { sys::napi_get_reference_value(env, FAILED.with(Cell::get), &mut sentinel) };
    if status != sys::Status::napi_ok || sentinel.is_null() {
        return Err(napi::Error::from_reason(
            "torch-node: the failure sentinel is missing",
        ));
    }
    Ok(sentinel)
}

/// The reason of the error a [`js_result!`] type returns once it has stashed its real one.
const STASHED: &str = "torch-node: the error is stashed";

/// Stashes a result type's conversion error (see [`js_result!`]); the `Outcome` around it then
/// returns the sentinel.
pub fn stash(env: Env, err: &anyhow::Error) -> napi::Error {
    match fail(env, crate::error::to_js(err)) {
        Ok(_) => napi::Error::from_reason(STASHED),
        Err(e) => e,
    }
}

impl<T: ToNapiValue> ToNapiValue for Outcome<T> {
    unsafe fn to_napi_value(env: Env, val: Self) -> napi::Result<Val> {
        match val.0 {
            // SAFETY: this forwards our own caller's contract unchanged: `env` is the env of the N-API
            // callback that napi-rs is returning from, on its JS thread.
            Ok(v) => match unsafe { T::to_napi_value(env, v) } {
                Ok(out) => Ok(out),
                Err(e) if e.reason == STASHED => sentinel(env),
                Err(e) => fail(env, napi::Error::new(Code::Internal, e.reason.clone())),
            },
            Err(e) => fail(env, e),
        }
    }
}

fn sentinel(env: Env) -> napi::Result<Val> {
    let mut out = ptr::null_mut();
    // SAFETY: the sentinel's reference lives as long as this JS thread.
    let status = unsafe { sys::napi_get_reference_value(env, FAILED.with(Cell::get), &mut out) };
    match status == sys::Status::napi_ok && !out.is_null() {
        true => Ok(out),
        false => Err(napi::Error::from_reason(
            "torch-node: the failure sentinel is missing",
        )),
    }
}

/// A typed export result: a newtype over what the export computed, turned into JS by `build`
/// on the JS thread as the export returns. A failing build (a coded error, or an exception a
/// JS getter threw) is stashed like any export's failure, so the JS wrapper throws it with its
/// code — never a throw from native code. `$ts` is its TypeScript type.
macro_rules! js_result {
    ($(#[$meta:meta])* $name:ident($inner:ty) as $ts:literal, |$env:ident, $value:ident| $build:expr) => {
        $(#[$meta])*
        pub struct $name(pub $inner);

        impl napi::bindgen_prelude::TypeName for $name {
            fn type_name() -> &'static str {
                $ts
            }
            fn value_type() -> napi::bindgen_prelude::ValueType {
                napi::bindgen_prelude::ValueType::Unknown
            }
        }

        impl napi::bindgen_prelude::ToNapiValue for $name {
            unsafe fn to_napi_value(
                $env: napi::sys::napi_env,
                val: Self,
            ) -> napi::Result<napi::sys::napi_value> {
                let $value = val.0;
                // A closure, so that `?` in `$build` ends the build, not this function.
                let build = move || -> anyhow::Result<napi::sys::napi_value> { $build };
                let built = build();
                built.map_err(|e| $crate::napi::outcome::stash($env, &e))
            }
        }
    };
}
pub(crate) use js_result;

impl<T: TypeName> TypeName for Outcome<T> {
    fn type_name() -> &'static str {
        T::type_name()
    }

    fn value_type() -> ValueType {
        T::value_type()
    }
}

/// @internal The failure an export just reported with `_failed`: `[code, message]` for
/// torch-node's own errors, `[null, exception]` for what the caller's JS code threw. Used by
/// the wrappers in index.js only.
#[napi_derive::napi(js_name = "_takeError", skip_typescript)]
pub fn take_error(env: &napi::Env) -> napi::Result<napi::bindgen_prelude::Unknown<'_>> {
    let raw = env.raw();
    let stashed = LAST.with(|l| l.borrow_mut().take());
    let pair = match stashed {
        Some(Stashed::Thrown(reference)) => {
            let mut exception = ptr::null_mut();
            // SAFETY: plain N-API calls on the JS thread that owns `raw` (this export's env); `reference` was
            // created by `fail` on this thread with that env and has just been taken out of `LAST`, so it is
            // read and then deleted exactly once.
            unsafe {
                sys::napi_get_reference_value(raw, reference, &mut exception);
                sys::napi_delete_reference(raw, reference);
            }
            vec![js::null(raw), Ok(exception)]
        }
        Some(Stashed::Coded(code, message)) => {
            vec![js::new_string(raw, code.as_ref()), js::new_string(raw, &message)]
        }
        None => vec![
            js::new_string(raw, Code::Internal.as_ref()),
            js::new_string(raw, "torch-node: no error was recorded for this failure"),
        ],
    };
    let items = pair
        .into_iter()
        .collect::<anyhow::Result<Vec<Val>>>()
        .and_then(|items| js::new_array(raw, items))
        .map_err(|e| napi::Error::from_reason(e.to_string()))?;
    // SAFETY: `items` is the array `new_array` just created with `raw` in this call, a live handle of this
    // env in the callback's scope; the `Unknown` borrows `env`, so it cannot outlive the call.
    Ok(unsafe { napi::bindgen_prelude::Unknown::from_raw_unchecked(raw, items) })
}
