//! Work that runs on the libuv thread pool so the event loop keeps turning: loading a module
//! and calling its methods. napi-rs does not catch panics inside `Task::compute`, so every
//! body runs under `catch_panic`; errors travel as values and are turned into coded JS errors
//! on the JS thread.
use super::JsScriptModule;
use crate::error::catch_panic;
use crate::ivalue::js::{coded_error, to_js};
use crate::ivalue::value::Value;
use crate::module::{self, LoadOptions, Module, Source};
use napi::bindgen_prelude::*;
use napi::{Env, Task};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

/// Set when the call's `AbortSignal` aborts (from the JS thread).
pub type AbortFlag = Option<Arc<AtomicBool>>;

pub(crate) fn aborted(flag: &AbortFlag, what: &str) -> anyhow::Result<()> {
    if flag.as_ref().is_some_and(|f| f.load(Ordering::SeqCst)) {
        crate::bail_code!(crate::error::Code::Aborted, "{what}: aborted");
    }
    Ok(())
}

/// Runs a task's work once, on the pool thread, with what the JS thread prepared for it
/// (or the error preparing it), catching panics.
pub(crate) fn run_prepared<P, T>(
    prepared: &mut Option<anyhow::Result<P>>,
    work: impl FnOnce(P) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let prepared = prepared
        .take()
        .unwrap_or_else(|| Err(anyhow::anyhow!("task ran twice")));
    catch_panic(|| prepared.and_then(work))
}

/// `ScriptModule.load(...)`. Argument errors travel inside the task so that the promise
/// rejects with them instead of `load` throwing synchronously.
pub struct LoadTask {
    pub prepared: Option<anyhow::Result<(Source, LoadOptions)>>,
    /// Checked before the work starts and again when it ends (a load in progress cannot be
    /// interrupted; its result is dropped).
    pub abort: AbortFlag,
}

impl Task for LoadTask {
    type Output = anyhow::Result<Module>;
    type JsValue = JsScriptModule;

    fn compute(&mut self) -> napi::Result<Self::Output> {
        Ok(run_prepared(&mut self.prepared, |(source, options)| {
            module::load(&source, &options)
        }))
    }

    fn resolve(&mut self, env: Env, output: Self::Output) -> napi::Result<Self::JsValue> {
        output
            .and_then(|m| aborted(&self.abort, "load").map(|_| m))
            .map(JsScriptModule::from_module)
            .map_err(|e| coded_error(env.raw(), &e))
    }
}

/// A call's module and inputs, or why they could not be read.
pub type PreparedCall = anyhow::Result<(Arc<RwLock<Module>>, Vec<Value>)>;

/// `forward(...)` / `runMethod(...)`: holds its own reference to the module, so disposing the
/// JS object while a call is in flight lets the call finish and frees the module after it.
/// Argument errors travel inside, so the promise rejects with them.
pub struct CallTask {
    pub method: String,
    pub prepared: Option<PreparedCall>,
    /// As for `LoadTask`: a call already running finishes, and its output is dropped.
    pub abort: AbortFlag,
}

/// The value a call resolves to, converted to JS on the JS thread.
pub struct Output(pub Value);

impl TypeName for Output {
    fn type_name() -> &'static str {
        "unknown"
    }
    fn value_type() -> ValueType {
        ValueType::Unknown
    }
}

impl ToNapiValue for Output {
    unsafe fn to_napi_value(env: napi::sys::napi_env, val: Self) -> napi::Result<napi::sys::napi_value> {
        to_js(env, val.0).map_err(|e| coded_error(env, &e))
    }
}

impl Task for CallTask {
    type Output = anyhow::Result<Value>;
    type JsValue = Output;

    fn compute(&mut self) -> napi::Result<Self::Output> {
        let (method, abort) = (&self.method, &self.abort);
        Ok(run_prepared(&mut self.prepared, |(module, args)| {
            aborted(abort, method)?;
            module::call(&module, method, args)
        }))
    }

    fn resolve(&mut self, env: Env, output: Self::Output) -> napi::Result<Self::JsValue> {
        output
            .and_then(|v| aborted(&self.abort, &self.method).map(|_| v))
            .map(Output)
            .map_err(|e| coded_error(env.raw(), &e))
    }
}
