//! `torch.AOTModule`: an AOTInductor package (`.pt2`) from JS, with `ScriptModule`'s
//! conventions: `new AOTModule(path)` or `await AOTModule.load(path)`, `forward(...tensors)` on
//! the libuv pool (a last `{signal}` aborts) or `forwardSync`, coded errors, `dispose()`.
use crate::aot::{self, AotModule};
use crate::convert::{string as string_arg, AotModuleOptions, Inputs, Str};
use crate::error::{guard, Code};
use crate::ivalue::js::coded_error;
use crate::ivalue::value::Value;
use crate::js::{self, Val};
use crate::outcome::Outcome;
use crate::script_module::tasks::{aborted, run_prepared, AbortFlag, Output};
use crate::script_module::{abort_flag, prepare, split_call_options};
use crate::tensor::unwrap_tensor;
use crate::{bail_code, device};
use napi::bindgen_prelude::*;
use napi::{Env, Task};
use napi_derive::napi;
use std::cell::RefCell;
use std::sync::Arc;
use tch::Device;

// Read by `load_args`; this struct declares the keys to TypeScript.
/// Options for loading a `.pt2` package.
#[napi(
    object,
    js_name = "AotModuleOptions",
    object_from_js = false,
    object_to_js = false
)]
pub struct JsAotModuleOptions {
    /// `'cpu'` (default) for a package compiled for CPU; `'cuda'`/`'cuda:N'` for a CUDA one.
    #[napi(ts_type = "Device")]
    pub device: Option<String>,
    /// `AOTModule.load` only: aborting rejects with code `Aborted` (a load already running
    /// finishes and its module is dropped).
    pub signal: Option<AbortSignal>,
}

/// A compiled `torch.export` program from a `.pt2` package (AOTInductor). Tensors in, tensors
/// out: one output is a Tensor, several an array of them. Each call checks its inputs against
/// what the package's generated code records (dtype, rank, sizes, the range of each dynamic
/// size, sizes shared by inputs) and refuses a mismatch with `DTypeMismatch`/`ShapeMismatch`;
/// a dynamic size of 1 runs, as in Python.
#[napi(js_name = "AOTModule")]
pub struct JsAotModule {
    inner: RefCell<Option<Arc<AotModule>>>,
}

/// Reads `(path, device)` and, when `with_signal`, the AbortSignal's flag.
fn load_args(
    env: &Env,
    path: Val,
    options: Option<Val>,
    with_signal: bool,
) -> anyhow::Result<(String, Device, AbortFlag)> {
    let raw = env.raw();
    if js::type_of(raw, path)? != napi::sys::ValueType::napi_string {
        bail_code!(
            Code::InvalidArg,
            "path: expected the path of a .pt2 file, got {}",
            js::describe(raw, path)
        );
    }
    let path = js::string(raw, path)?;
    let (mut dev, mut abort) = (Device::Cpu, None);
    if let Some(o) = options.filter(|o| !js::is_nullish(raw, *o).unwrap_or(true)) {
        if js::type_of(raw, o)? != napi::sys::ValueType::napi_object {
            bail_code!(
                Code::InvalidArg,
                "options: expected an options object, got {}",
                js::describe(raw, o)
            );
        }
        js::check_keys(
            raw,
            o,
            if with_signal {
                &["device", "signal"]
            } else {
                &["device"]
            },
            "options",
        )?;
        if let Some(d) = js::property(raw, o, "device")? {
            dev = device::parse(&string_arg(raw, d, "options.device")?)?;
        }
        if with_signal {
            abort = js::property(raw, o, "signal")?
                .map(|s| abort_flag(env, s))
                .transpose()?;
        }
    }
    Ok((path, dev, abort))
}

/// The input tensors of a call (shared, not copied); with `async_call`, a last `{signal}`.
fn tensors(env: &Env, list: Val, async_call: bool) -> anyhow::Result<(Vec<tch::Tensor>, AbortFlag)> {
    let raw = env.raw();
    let mut items = js::array_from(raw, list)?;
    let abort = if async_call {
        split_call_options(env, &mut items)?
    } else {
        None
    };
    let inputs = items
        .iter()
        .enumerate()
        .map(|(i, &v)| match unwrap_tensor(raw, v) {
            Some(t) => Ok(t.get()?.shallow_clone()),
            None => bail_code!(
                Code::InvalidArg,
                "forward: input {i}: expected a Tensor, got {}",
                js::describe(raw, v)
            ),
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok((inputs, abort))
}

/// One output is the Tensor itself, several an array.
fn output(mut outs: Vec<tch::Tensor>) -> Value {
    match outs.len() {
        1 => Value::Tensor(outs.remove(0)),
        _ => Value::List(None, outs.into_iter().map(Value::Tensor).collect()),
    }
}

impl JsAotModule {
    fn module(&self) -> anyhow::Result<Arc<AotModule>> {
        match &*self.inner.borrow() {
            Some(m) => Ok(m.clone()),
            None => bail_code!(
                Code::Disposed,
                "this AOTModule was disposed; it can no longer be used"
            ),
        }
    }
}

#[napi]
impl JsAotModule {
    /// @internal Loads a package synchronously: what `new AOTModule(path, options)` runs (index.js).
    #[napi(js_name = "_open", skip_typescript)]
    pub fn open(env: Env, path: Str, options: Option<AotModuleOptions>) -> Outcome<JsAotModule> {
        guard(|| {
            let (path, dev, _) = load_args(&env, path.raw().val, options.map(|o| o.raw().val), false)?;
            Ok(JsAotModule {
                inner: RefCell::new(Some(Arc::new(aot::load(&path, dev)?))),
            })
        })
        .into()
    }

    /// Loads a `.pt2` package on the libuv thread pool (extracting and loading its compiled code).
    // napi-rs types an AsyncTask by its task's JsValue, which it cannot name for a class here.
    #[napi(ts_return_type = "Promise<AOTModule>")]
    pub fn load(env: Env, path: Str, options: Option<AotModuleOptions>) -> Outcome<AsyncTask<AotLoadTask>> {
        Outcome::of(|| {
            let (prepared, abort) = prepare(|| {
                let (path, dev, abort) = load_args(&env, path.raw().val, options.map(|o| o.raw().val), true)?;
                Ok(((path, dev), abort))
            })?;
            Ok(AsyncTask::new(AotLoadTask {
                prepared: Some(prepared),
                abort,
            }))
        })
    }

    /// Runs the program on the libuv thread pool; resolves to its output (a Tensor, or an array
    /// of Tensors). A last argument `{signal}` aborts as in `ScriptModule.forward`.
    #[napi(
        ts_generic_types = "T extends Tensor | Tensor[] = Tensor",
        ts_args_type = "...inputs: Tensor[] | [...Tensor[], CallOptions]",
        ts_return_type = "Promise<T>"
    )]
    pub fn forward(&self, env: Env, inputs: Inputs) -> Outcome<AsyncTask<AotCallTask>> {
        Outcome::of(|| {
            let (prepared, abort) = prepare(|| {
                let (inputs, abort) = tensors(&env, inputs.raw().val, true)?;
                Ok(((self.module()?, inputs), abort))
            })?;
            Ok(AsyncTask::new(AotCallTask {
                prepared: Some(prepared),
                abort,
            }))
        })
    }

    /// Runs the program on the calling thread.
    #[napi(
        ts_generic_types = "T extends Tensor | Tensor[] = Tensor",
        ts_args_type = "...inputs: Tensor[]",
        ts_return_type = "T"
    )]
    pub fn forward_sync<'e>(&self, env: &'e Env, inputs: Inputs) -> Outcome<Unknown<'e>> {
        guard(|| {
            let (inputs, _) = tensors(env, inputs.raw().val, false)?;
            let out = output(self.module()?.run(inputs)?);
            Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), crate::ivalue::js::to_js(env.raw(), out)?) })
        })
        .into()
    }

    /// What the package records: AOTInductor's metadata (`AOTI_DEVICE_KEY`, ...) and the pytree
    /// specs of the program's inputs and outputs (`in_spec`, `out_spec`, JSON).
    #[napi(ts_return_type = "Record<string, string>")]
    pub fn metadata<'e>(&self, env: &'e Env) -> Outcome<Unknown<'e>> {
        guard(|| {
            let raw = env.raw();
            let fields = self
                .module()?
                .metadata()?
                .into_iter()
                .map(|(k, v)| Ok((k, js::new_string(raw, &v)?)))
                .collect::<anyhow::Result<Vec<_>>>()?;
            Ok(unsafe { Unknown::from_raw_unchecked(raw, js::new_object(raw, fields)?) })
        })
        .into()
    }

    /// The device the package runs on.
    #[napi(getter, ts_return_type = "Device")]
    pub fn device(&self) -> Outcome<String> {
        guard(|| Ok(device::name(self.module()?.device()))).into()
    }

    /// True once `dispose()` has run.
    #[napi(getter)]
    pub fn is_disposed(&self) -> bool {
        self.inner.borrow().is_none()
    }

    /// Releases the package. Calls already running finish first; later calls throw `Disposed`.
    #[napi]
    pub fn dispose(&self) {
        self.inner.borrow_mut().take();
    }
}

/// `AOTModule.load(...)`; argument errors travel inside so that the promise rejects with them.
pub struct AotLoadTask {
    prepared: Option<anyhow::Result<(String, Device)>>,
    abort: AbortFlag,
}

impl Task for AotLoadTask {
    type Output = anyhow::Result<AotModule>;
    type JsValue = JsAotModule;

    fn compute(&mut self) -> napi::Result<Self::Output> {
        Ok(run_prepared(&mut self.prepared, |(path, dev)| {
            aot::load(&path, dev)
        }))
    }

    fn resolve(&mut self, env: Env, output: Self::Output) -> napi::Result<Self::JsValue> {
        output
            .and_then(|m| aborted(&self.abort, "load").map(|_| m))
            .map(|m| JsAotModule {
                inner: RefCell::new(Some(Arc::new(m))),
            })
            .map_err(|e| coded_error(env.raw(), &e))
    }
}

/// `forward(...)`: holds its own reference to the package, so disposing the JS object while a
/// call is in flight lets the call finish.
pub struct AotCallTask {
    prepared: Option<anyhow::Result<(Arc<AotModule>, Vec<tch::Tensor>)>>,
    abort: AbortFlag,
}

impl Task for AotCallTask {
    type Output = anyhow::Result<Value>;
    type JsValue = Output;

    fn compute(&mut self) -> napi::Result<Self::Output> {
        let abort = &self.abort;
        Ok(run_prepared(&mut self.prepared, |(m, inputs)| {
            aborted(abort, "forward")?;
            Ok(output(m.run(inputs)?))
        }))
    }

    fn resolve(&mut self, env: Env, output: Self::Output) -> napi::Result<Self::JsValue> {
        output
            .and_then(|v| aborted(&self.abort, "forward").map(|_| v))
            .map(Output)
            .map_err(|e| coded_error(env.raw(), &e))
    }
}
