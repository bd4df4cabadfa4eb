//! The JS `ScriptModule` class: a TorchScript module loaded from a `.pt` file or its bytes.
//! Its work (load, calls) runs on the executor through `crate::napi::task`; the module itself is
//! the core's (`torch_core::torchscript`).

use crate::error::bail_code;
use crate::error::{guard, Code, Result};
use crate::ivalue::{from_js, to_js, Output, TensorRecord};
use crate::napi::convert::{self, Inputs, ModuleOptions, Read, ReadOpt, Str};
use crate::napi::js::{self, Env as RawEnv, Val};
use crate::napi::lifecycle::{self, ModuleSlot};
use crate::napi::options::{js_options, OptionValue};
use crate::napi::outcome::Outcome;
use crate::napi::task::{abort_flag, split_call_options, AbortFlag, Promise};
use crate::tensor::JsTensor;
use napi::bindgen_prelude::*;
use napi_derive::napi;
use std::sync::RwLock;
use tch::Device;
use torch_core::archive::Limits;
use torch_core::device;
use torch_core::ivalue::value::Value;
use torch_core::torchscript::Module;
use torch_core::torchscript::{self as core, LoadOptions, Source};

js_options! {
    /// Options for loading a module.
    pub struct LoadBag as JsModuleOptions "ModuleOptions" {
        /// Device to load parameters onto: `'cpu'` (default), `'cuda'`, `'cuda:N'`.
        device "device": Device as "Device",
        /// The most bytes of tensor data the file may declare (default 16 GiB): checked, with every
        /// storage record against its declared size, before libtorch reads the file.
        max_bytes "maxBytes": u64 as "number",
        /// Prepares the module for inference: `torch.jit.freeze` (parameters become constants) and
        /// `torch.jit.optimize_for_inference` (conv/batch-norm folding, oneDNN prepacked weights),
        /// as in Python. Same outputs to float rounding; a frozen module cannot `to()`, `train()` or
        /// `save()`, and has no `parameters()`. `'fuse'`: freezing and oneDNN Graph fusion instead
        /// (faster on CPU; needs `example`: the fusion happens during the warm-up calls).
        optimize "optimize": Optimize as "boolean | 'fuse'",
        /// Converts conv weights and 4-D inputs to the channels-last memory format (faster oneDNN
        /// convolutions on CPU); outputs may come back channels-last (same values and shape).
        channels_last "channelsLast": bool as "boolean",
        /// `'float32'` (default) or `'bfloat16'`: floating weights converted to bf16, floating
        /// inputs cast in, bf16 outputs cast back to float32. About 3 significant digits; on a CPU
        /// only where it computes bf16 natively (AVX512-BF16 or AMX: see
        /// `torch.cpu.capabilities()`), else `DeviceUnavailable`.
        dtype "dtype": Bf16 as "'float32' | 'bfloat16'",
        /// Runs `forward(...example)` this many times at load (default 2 when `example` is given):
        /// TorchScript optimizes a method's graph after its first calls, which are slow.
        warmup "warmup": i64 as "number",
        /// The inputs of one `forward` call (a Tensor, or an array of inputs) for `warmup`.
        example "example": Val as "Tensor | IValue[]",
        /// `ScriptModule.load` only: aborting rejects the promise with code `Aborted` — at once if
        /// the load has not started; a load already running finishes and its module is dropped.
        signal "signal": Val as "AbortSignal",
    }
}

/// `optimize`: `false`, `true` or `'fuse'`.
#[derive(PartialEq)]
pub enum Optimize {
    Off,
    On,
    Fuse,
}

impl OptionValue for Optimize {
    fn read(env: RawEnv, v: Val, what: &str) -> anyhow::Result<Self> {
        if js::type_of(env, v)? == napi::sys::ValueType::napi_string {
            return match js::string(env, v)?.as_str() {
                "fuse" => Ok(Optimize::Fuse),
                other => bail_code!(
                    Code::InvalidArg,
                    "{what}: expected true, false or 'fuse', got '{other}'"
                ),
            };
        }
        Ok(match bool::read(env, v, what)? {
            true => Optimize::On,
            false => Optimize::Off,
        })
    }
}

/// `dtype`: whether `'bfloat16'` (rather than `'float32'`) was asked for.
pub struct Bf16(bool);

impl OptionValue for Bf16 {
    fn read(env: RawEnv, v: Val, what: &str) -> anyhow::Result<Self> {
        match String::read(env, v, what)?.as_str() {
            "float32" => Ok(Bf16(false)),
            "bfloat16" => Ok(Bf16(true)),
            other => bail_code!(
                Code::InvalidArg,
                "{what}: expected 'float32' or 'bfloat16', got '{other}'"
            ),
        }
    }
}

/// One argument of a TorchScript method.
#[napi(object)]
pub struct MethodArg {
    /// The argument's name in the Python source (`x`, `input_ids`; traced modules: as traced).
    pub name: String,
    /// TorchScript's annotation: `Tensor`, `int`, `float`, `List[Tensor]`, `Dict[str, Tensor]`, ...
    pub r#type: String,
    /// Whether the argument has a default value (it may be left out).
    pub has_default: bool,
}

/// A TorchScript method's signature (`ScriptModule.signature()`).
#[napi(object)]
pub struct MethodSignature {
    /// The method's name.
    pub name: String,
    /// Its arguments after `self`, in order.
    pub args: Vec<MethodArg>,
    /// Its return type's annotation (`Tensor`, `Tuple[Tensor, Tensor]`, `Dict[str, Tensor]`, ...).
    pub returns: String,
}

/// A TorchScript module (from `torch.jit.trace` or `torch.jit.script` + `torch.jit.save`).
#[napi(js_name = "ScriptModule")]
pub struct JsScriptModule {
    slot: ModuleSlot<RwLock<Module>>,
}

fn read_source(env: RawEnv, v: Val) -> anyhow::Result<Source> {
    js::source(env, v, "source", "a .pt file's")
}

/// Reads load options; `signal` only where `with_signal` (`ScriptModule.load`).
fn load_options(
    env: RawEnv,
    options: Option<Val>,
    with_signal: bool,
) -> anyhow::Result<(LoadOptions, Option<Val>)> {
    let except: &[&str] = if with_signal { &[] } else { &["signal"] };
    let o = LoadBag::read_except(env, options, "options", except)?;
    let mut out = LoadOptions {
        device: o.device.unwrap_or(Device::Cpu),
        limits: Limits::default(),
        prepare: Default::default(),
        warmup: 0,
        example: Vec::new(),
    };
    if let Some(n) = o.max_bytes {
        out.limits.max_bytes = n;
    }
    out.prepare.optimize = o.optimize == Some(Optimize::On);
    out.prepare.fuse = o.optimize == Some(Optimize::Fuse);
    out.prepare.channels_last = o.channels_last.unwrap_or(false);
    out.prepare.bf16 = o.dtype.is_some_and(|d| d.0);
    if let Some(e) = o.example {
        out.example = match js::is_array(env, e)? {
            true => inputs(env, e)?,
            false => values(env, &[e])?,
        };
        out.warmup = 2;
    }
    if let Some(n) = o.warmup {
        if !(0..=1000).contains(&n) {
            bail_code!(
                Code::InvalidArg,
                "options.warmup: expected 0 to 1000 calls, got {n}"
            );
        }
        if n > 0 && out.example.is_empty() {
            bail_code!(
                Code::InvalidArg,
                "options.warmup: needs options.example, the inputs of one forward call"
            );
        }
        out.warmup = n as usize;
    }
    if out.prepare.fuse && out.warmup == 0 {
        bail_code!(
            Code::InvalidArg,
            "options.optimize 'fuse': needs options.example and warm-up calls (the fusion happens during them)"
        );
    }
    Ok((out, o.signal))
}

/// Reads a call's inputs (a JS array of them).
fn inputs(env: RawEnv, list: Val) -> anyhow::Result<Vec<Value>> {
    let items = js::elements(env, list)?;
    values(env, &items)
}

fn values(env: RawEnv, items: &[Val]) -> anyhow::Result<Vec<Value>> {
    items
        .iter()
        .enumerate()
        .map(|(i, v)| from_js(env, *v, &format!("input {i}")))
        .collect()
}

/// An async call's inputs and its `AbortSignal`: a last argument `{signal}` holding an
/// AbortSignal is the call's options, not an input.
fn inputs_and_signal(env: &Env, list: Val) -> anyhow::Result<(Vec<Value>, AbortFlag)> {
    let mut items = js::elements(env.raw(), list)?;
    let abort = split_call_options(env, &mut items)?;
    Ok((values(env.raw(), &items)?, abort))
}

impl JsScriptModule {
    pub fn from_module(m: Module) -> JsScriptModule {
        JsScriptModule {
            slot: ModuleSlot::new("ScriptModule", RwLock::new(m)),
        }
    }

    fn call_task(&self, env: Env, method: String, list: Inputs) -> Result<Promise> {
        let what = method.clone();
        self.slot.call(
            env.raw(),
            &what,
            || inputs_and_signal(&env, list.raw().val),
            move |module, args| core::call(module, &method, args),
            to_js,
        )
    }

    fn call_sync(&self, env: &Env, method: &str, list: Inputs) -> Result<Output> {
        let method = method.to_string();
        self.slot
            .call_sync(
                || inputs(env.raw(), list.raw().val),
                move |module, args| core::call(module, &method, args),
            )
            .map(Output)
    }

    fn read<T>(&self, f: impl FnOnce(&Module) -> anyhow::Result<T>) -> Result<T> {
        guard(|| f(&self.slot.get()?.read().unwrap_or_else(|p| p.into_inner())))
    }

    fn write(&self, f: impl FnOnce(&mut Module) -> anyhow::Result<()>) -> Result<()> {
        guard(|| f(&mut self.slot.get()?.write().unwrap_or_else(|p| p.into_inner())))
    }
}

#[napi]
impl JsScriptModule {
    /// @internal Loads a module synchronously: what `new ScriptModule(source, options)` runs
    /// (index.js; a native constructor could only fail by throwing from native code, see
    /// `crate::napi::outcome`).
    #[napi(js_name = "_open", skip_typescript)]
    pub fn open(
        env: Env,
        source: convert::Source,
        options: Option<ModuleOptions>,
    ) -> Outcome<JsScriptModule> {
        lifecycle::open(
            || {
                let src = read_source(env.raw(), source.raw().val)?;
                let (options, _) = load_options(env.raw(), options.map(|o| o.raw().val), false)?;
                Ok((src, options))
            },
            |(src, options)| core::load(&src, &options),
            JsScriptModule::from_module,
        )
    }

    /// Loads a module on torch-node's executor threads, without blocking the event loop.
    #[napi(ts_return_type = "Promise<ScriptModule>")]
    pub fn load(env: Env, source: convert::Source, options: Option<ModuleOptions>) -> Outcome<Promise> {
        let (raw, options) = (env.raw(), options.map(|o| o.raw().val));
        lifecycle::load(
            raw,
            || {
                let (opts, signal) = load_options(raw, options, true)?;
                let abort = signal.map(|s| abort_flag(&env, s)).transpose()?;
                Ok(((read_source(raw, source.raw().val)?, opts), abort))
            },
            |(source, options)| core::load(&source, &options),
            JsScriptModule::from_module,
        )
    }

    /// Runs `forward` on torch-node's executor threads (see `torch.setInstances`); resolves to its output (a Tensor, number,
    /// string, array, object, Map or null). Numbers follow the method's schema (int or float).
    /// A last argument `{signal}` (an AbortSignal) is the call's options, not an input:
    /// aborting rejects with code `Aborted` (a call already running finishes first).
    #[napi(
        ts_generic_types = "T extends IValue = Tensor",
        ts_args_type = "...inputs: IValue[] | [...IValue[], CallOptions]",
        ts_return_type = "Promise<T>"
    )]
    pub fn forward(&self, env: Env, inputs: Inputs) -> Outcome<Promise> {
        self.call_task(env, "forward".to_string(), inputs).into()
    }

    /// Runs `forward` and returns its output; the calling thread waits while an executor thread
    /// runs it (so libtorch's thread teams stay the executor's).
    #[napi(
        ts_generic_types = "T extends IValue = Tensor",
        ts_args_type = "...inputs: IValue[]",
        ts_return_type = "T"
    )]
    pub fn forward_sync(&self, env: Env, inputs: Inputs) -> Outcome<Output> {
        self.call_sync(&env, "forward", inputs).into()
    }

    /// Runs another method (one exported with `@torch.jit.export`) on the executor; takes a
    /// last `{signal}` argument as `forward` does.
    #[napi(
        ts_generic_types = "T extends IValue = Tensor",
        ts_args_type = "name: string, ...inputs: IValue[] | [...IValue[], CallOptions]",
        ts_return_type = "Promise<T>"
    )]
    pub fn run_method(&self, env: Env, name: Str, inputs: Inputs) -> Outcome<Promise> {
        Outcome::of(|| {
            let name = guard(|| name.read("method name"))?;
            self.call_task(env, name, inputs)
        })
    }

    /// Runs another method; the calling thread waits for the executor.
    #[napi(
        ts_generic_types = "T extends IValue = Tensor",
        ts_args_type = "name: string, ...inputs: IValue[]",
        ts_return_type = "T"
    )]
    pub fn run_method_sync(&self, env: Env, name: Str, inputs: Inputs) -> Outcome<Output> {
        Outcome::of(|| {
            let name = guard(|| name.read("method name"))?;
            self.call_sync(&env, &name, inputs)
        })
    }

    /// A method's declared signature (default `forward`): its arguments after `self`, with
    /// TorchScript's type annotations, and its return type, e.g.
    /// `{name: 'forward', args: [{name: 'x', type: 'Tensor', hasDefault: false}], returns: 'Tensor'}`.
    /// Unknown methods: `MethodNotFound`.
    #[napi]
    pub fn signature(&self, method: Option<Str>) -> Outcome<MethodSignature> {
        Outcome::of(|| {
            let name = guard(|| method.read("signature: method"))?.unwrap_or_else(|| "forward".to_string());
            let schema = self.read(|m| m.schema(&name))?;
            Ok(MethodSignature {
                name,
                args: schema
                    .args
                    .into_iter()
                    .map(|a| MethodArg {
                        name: a.name,
                        r#type: a.type_str,
                        has_default: a.has_default,
                    })
                    .collect(),
                returns: schema.returns,
            })
        })
    }

    /// The module's methods: `forward` and every `@torch.jit.export`ed one.
    #[napi]
    pub fn method_names(&self) -> Outcome<Vec<String>> {
        self.read(|m| m.method_names()).into()
    }

    /// Parameters by qualified name (`{'fc.weight': Tensor, ...}`), in registration order.
    /// The tensors share memory with the module.
    #[napi(ts_return_type = "Record<string, Tensor>")]
    pub fn named_parameters(&self) -> Outcome<TensorRecord> {
        self.read(|m| Ok(TensorRecord(m.named_parameters()?))).into()
    }

    /// The parameters, in registration order.
    #[napi]
    pub fn parameters(&self) -> Outcome<Vec<JsTensor>> {
        self.read(|m| {
            Ok(m.named_parameters()?
                .into_iter()
                .map(|(_, t)| JsTensor::new(t))
                .collect())
        })
        .into()
    }

    /// The total number of parameter elements.
    #[napi]
    pub fn num_parameters(&self) -> Outcome<i64> {
        self.read(|m| Ok(m.named_parameters()?.iter().map(|(_, t)| t.numel() as i64).sum()))
            .into()
    }

    /// Moves parameters and buffers to a device (`'cpu'`, `'cuda'`, `'cuda:N'`); inputs must
    /// then be on that device too. Waits for calls in flight to finish.
    #[napi]
    pub fn to(&self, device: crate::napi::convert::Device) -> Outcome<()> {
        Outcome::of(|| {
            let device = guard(|| device.read("to: device"))?;
            self.write(|m| m.to_device(device))
        })
    }

    /// Inference mode for dropout and batch norm (modules saved from `model.eval()` already are).
    #[napi]
    pub fn eval(&self) -> Outcome<()> {
        self.write(|m| m.set_training(false)).into()
    }

    /// Training mode for dropout and batch norm.
    #[napi]
    pub fn train(&self) -> Outcome<()> {
        self.write(|m| m.set_training(true)).into()
    }

    /// Whether the module is in training mode.
    #[napi(getter)]
    pub fn is_training(&self) -> Outcome<bool> {
        self.read(|m| Ok(m.is_training())).into()
    }

    /// The device the module was loaded on or last moved to.
    #[napi(getter, ts_return_type = "Device")]
    pub fn device(&self) -> Outcome<String> {
        self.read(|m| Ok(device::name(m.device()))).into()
    }

    /// Saves the module as a TorchScript file (loadable from Python with `torch.jit.load`).
    #[napi]
    pub fn save(&self, path: Str) -> Outcome<()> {
        Outcome::of(|| {
            let path = guard(|| path.read("save: path"))?;
            self.read(|m| m.save(&path))
        })
    }

    /// True once `dispose()` has run.
    #[napi(getter)]
    pub fn is_disposed(&self) -> bool {
        self.slot.is_disposed()
    }

    /// Releases the module. Calls already running finish first (they hold their own
    /// reference); later calls throw `Disposed`.
    #[napi]
    pub fn dispose(&self) {
        self.slot.dispose()
    }
}
