//! `torch.AOTModule`: an AOTInductor package (`.pt2`) from JS, with `ScriptModule`'s
//! conventions: `new AOTModule(path)` or `await AOTModule.load(path)`, `forward(...tensors)` on
//! torch-node's executor (a last `{signal}` aborts) or `forwardSync`, coded errors, `dispose()`.
use crate::error::bail_code;
use crate::error::{guard, Code};
use crate::ivalue::Output;
use crate::napi::convert::{AotModuleOptions, Inputs, Str};
use crate::napi::js::{self, Val};
use crate::napi::lifecycle::{self, ModuleSlot};
use crate::napi::options::js_options;
use crate::napi::outcome::{js_result, Outcome};
use crate::napi::task::{abort_flag, split_call_options, AbortFlag, Promise};
use napi::Env;
use napi_derive::napi;
use torch_core::aot::{self, AotModule};
use torch_core::device;
use torch_core::ivalue::value::Value;

use tch::Device;

js_options! {
    /// Options for loading a `.pt2` package.
    pub struct AotLoad as JsAotModuleOptions "AotModuleOptions" {
        /// `'cpu'` (default) for a package compiled for CPU; `'cuda'`/`'cuda:N'` for a CUDA one.
        device "device": Device as "Device",
        /// `AOTModule.load` only: aborting rejects with code `Aborted` (a load already running
        /// finishes and its module is dropped).
        signal "signal": Val as "AbortSignal",
    }
}

js_result!(
    /// Strings by key as a plain object (`metadata()`).
    StringRecord(Vec<(String, String)>) as "Record<string, string>",
    |env, fields| {
        let fields = fields
            .into_iter()
            .map(|(k, v)| Ok((k, js::new_string(env, &v)?)))
            .collect::<anyhow::Result<Vec<_>>>()?;
        js::new_object(env, fields)
    }
);

/// A compiled `torch.export` program from a `.pt2` package (AOTInductor). Tensors in, tensors
/// out: one output is a Tensor, several an array of them. Each call checks its inputs against
/// what the package's generated code records (dtype, rank, sizes, the range of each dynamic
/// size, sizes shared by inputs) and refuses a mismatch with `DTypeMismatch`/`ShapeMismatch`;
/// a dynamic size of 1 runs, as in Python.
#[napi(js_name = "AOTModule")]
pub struct JsAotModule {
    slot: ModuleSlot<AotModule>,
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
    let except: &[&str] = if with_signal { &[] } else { &["signal"] };
    let o = AotLoad::read_except(raw, options, "options", except)?;
    let abort = o.signal.map(|s| abort_flag(env, s)).transpose()?;
    let dev = o.device.unwrap_or(Device::Cpu);
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
        .map(|(i, &v)| crate::tensor::operands::shared(raw, v, &format!("forward: input {i}")))
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
    fn from_module(m: AotModule) -> JsAotModule {
        JsAotModule {
            slot: ModuleSlot::new("AOTModule", m),
        }
    }
}

#[napi]
impl JsAotModule {
    /// @internal Loads a package synchronously: what `new AOTModule(path, options)` runs (index.js).
    #[napi(js_name = "_open", skip_typescript)]
    pub fn open(env: Env, path: Str, options: Option<AotModuleOptions>) -> Outcome<JsAotModule> {
        lifecycle::open(
            || {
                let (path, dev, _) = load_args(&env, path.raw().val, options.map(|o| o.raw().val), false)?;
                Ok((path, dev))
            },
            |(path, dev)| aot::load(&path, dev),
            JsAotModule::from_module,
        )
    }

    /// Loads a `.pt2` package on the executor (extracting and loading its compiled code).
    // napi-rs types an AsyncTask by its task's JsValue, which it cannot name for a class here.
    #[napi(ts_return_type = "Promise<AOTModule>")]
    pub fn load(env: Env, path: Str, options: Option<AotModuleOptions>) -> Outcome<Promise> {
        lifecycle::load(
            env.raw(),
            || {
                let (path, dev, abort) = load_args(&env, path.raw().val, options.map(|o| o.raw().val), true)?;
                Ok(((path, dev), abort))
            },
            |(path, dev)| aot::load(&path, dev),
            JsAotModule::from_module,
        )
    }

    /// Runs the program on the executor; resolves to its output (a Tensor, or an array
    /// of Tensors). A last argument `{signal}` aborts as in `ScriptModule.forward`.
    #[napi(
        ts_generic_types = "T extends Tensor | Tensor[] = Tensor",
        ts_args_type = "...inputs: Tensor[] | [...Tensor[], CallOptions]",
        ts_return_type = "Promise<T>"
    )]
    pub fn forward(&self, env: Env, inputs: Inputs) -> Outcome<Promise> {
        self.slot
            .call(
                env.raw(),
                "forward",
                || tensors(&env, inputs.raw().val, true),
                |m, inputs| Ok(output(m.run(inputs)?)),
                crate::ivalue::to_js,
            )
            .into()
    }

    /// Runs the program on the executor while the calling thread waits.
    #[napi(
        ts_generic_types = "T extends Tensor | Tensor[] = Tensor",
        ts_args_type = "...inputs: Tensor[]",
        ts_return_type = "T"
    )]
    pub fn forward_sync(&self, env: Env, inputs: Inputs) -> Outcome<Output> {
        self.slot
            .call_sync(
                || Ok(tensors(&env, inputs.raw().val, false)?.0),
                |m, inputs| Ok(Output(output(m.run(inputs)?))),
            )
            .into()
    }

    /// What the package records: AOTInductor's metadata (`AOTI_DEVICE_KEY`, ...) and the pytree
    /// specs of the program's inputs and outputs (`in_spec`, `out_spec`, JSON).
    #[napi(ts_return_type = "Record<string, string>")]
    pub fn metadata(&self) -> Outcome<StringRecord> {
        guard(|| Ok(StringRecord(self.slot.get()?.metadata()?))).into()
    }

    /// The device the package runs on.
    #[napi(getter, ts_return_type = "Device")]
    pub fn device(&self) -> Outcome<String> {
        guard(|| Ok(device::name(self.slot.get()?.device()))).into()
    }

    /// True once `dispose()` has run.
    #[napi(getter)]
    pub fn is_disposed(&self) -> bool {
        self.slot.is_disposed()
    }

    /// Releases the package. Calls already running finish first; later calls throw `Disposed`.
    #[napi]
    pub fn dispose(&self) {
        self.slot.dispose()
    }
}
