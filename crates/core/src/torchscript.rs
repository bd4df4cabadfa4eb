//! A loaded TorchScript module: load from a file or bytes, call methods with values
//! checked against their schemas, parameters, device moves. It owns libtch's module handle
//! (a `torch::jit::script::Module*`) directly so the C++ shim can read schemas from it.
use crate::archive;
use crate::error::bail_code;
use crate::error::{fail, Code};
use crate::ffi::ivalue::{from_ivalue, to_ivalue, Owned};
use crate::ffi::module_handle::ModuleHandle;
use crate::ffi::{self, Prepare};
use crate::ivalue::value::{coerce_args, Signature, Value};
use anyhow::{Context, Result};
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::{Arc, Mutex, RwLock};
use tch::Device;

pub struct Module {
    handle: ModuleHandle,
    device: Device,
    /// Schemas are immutable once loaded; reading one costs a C++ round trip and parsing its
    /// annotations, so each method's is read and parsed once.
    signatures: Mutex<HashMap<String, Arc<Signature>>>,
    /// How it was prepared at load ([`LoadOptions`]): bf16 casts floating inputs in and bf16
    /// outputs back to float32, channels-last converts 4-D inputs; a frozen (optimized) module
    /// cannot move, train or be saved.
    prepared: Prepare,
}

fn device_index(device: Device) -> i32 {
    match device {
        Device::Cuda(i) => i as i32,
        _ => -1,
    }
}

impl Module {
    fn from_handle(handle: Result<Option<ModuleHandle>>, device: Device, what: &str) -> Result<Module> {
        let handle = handle.map_err(|e| {
            let message = crate::error::trim_libtorch(&e.to_string());
            let hint = match message.contains("torchvision::") {
                true => " (torchvision's ops are not loaded: call torch.vision.loadOps() first)",
                false => "",
            };
            fail(
                Code::ModelLoadError,
                format!("cannot load TorchScript model from {what}: {message}{hint}"),
            )
        })?;
        let Some(handle) = handle else {
            bail_code!(Code::ModelLoadError, "cannot load TorchScript model from {what}");
        };
        Ok(Module {
            handle,
            device,
            signatures: Mutex::new(HashMap::new()),
            prepared: Prepare::default(),
        })
    }

    /// Loads a `.pt` file written by `torch.jit.save` (traced or scripted), after checking its
    /// records against what its pickle claims (`crate::archive`).
    pub fn load_file(path: &str, device: Device, limits: &archive::Limits) -> Result<Module> {
        let what = format!("'{path}'");
        match std::fs::metadata(path) {
            Err(e) => bail_code!(
                Code::ModelLoadError,
                "cannot load TorchScript model from {what}: {e}"
            ),
            Ok(m) if m.is_dir() => bail_code!(
                Code::ModelLoadError,
                "cannot load TorchScript model from {what}: it is a directory"
            ),
            Ok(_) => {}
        }
        let c_path = CString::new(path).map_err(|_| fail(Code::InvalidArg, "path: contains a NUL byte"))?;
        archive::validate_file(std::path::Path::new(path), limits).map_err(|e| {
            fail(
                Code::ModelLoadError,
                format!("cannot load TorchScript model from {what}: {e}"),
            )
        })?;
        Module::from_handle(
            ModuleHandle::load_file(&c_path, device_index(device)),
            device,
            &what,
        )
    }

    /// Loads a model from the bytes of a `.pt` file (checked as `load_file` checks a file).
    pub fn load_bytes(bytes: &[u8], device: Device, limits: &archive::Limits) -> Result<Module> {
        let what = format!("a buffer of {} bytes", bytes.len());
        if bytes.is_empty() {
            bail_code!(
                Code::ModelLoadError,
                "cannot load TorchScript model from {what}: it is empty"
            );
        }
        archive::validate_bytes(bytes, limits).map_err(|e| {
            fail(
                Code::ModelLoadError,
                format!("cannot load TorchScript model from {what}: {e}"),
            )
        })?;
        Module::from_handle(
            ModuleHandle::load_bytes(bytes, device_index(device)),
            device,
            &what,
        )
    }

    pub fn device(&self) -> Device {
        self.device
    }

    /// Converts, freezes and optimizes the module for inference (see `tn_module_prepare`).
    pub fn prepare(&mut self, how: Prepare) -> Result<()> {
        if how == Prepare::default() {
            return Ok(());
        }
        self.handle.prepare(how).map_err(|e| {
            fail(
                Code::ModelLoadError,
                format!(
                    "cannot optimize the module: {}",
                    crate::error::trim_libtorch(&e.to_string())
                ),
            )
        })?;
        self.prepared = how;
        Ok(())
    }

    fn refuse_if_frozen(&self, what: &str) -> Result<()> {
        if self.prepared.optimize || self.prepared.fuse {
            bail_code!(
                Code::InvalidArg,
                "{what}: the module was loaded with {{optimize: true}}: frozen, with weights prepacked for its device"
            );
        }
        Ok(())
    }

    /// Inputs as the prepared module takes them: bf16, channels-last.
    fn adapt_input(&self, t: tch::Tensor) -> Result<tch::Tensor> {
        let floating = matches!(t.kind(), tch::Kind::Float | tch::Kind::Double | tch::Kind::Half);
        let t = match self.prepared.bf16 && floating {
            true => t.f_to_kind(tch::Kind::BFloat16)?,
            false => t,
        };
        match self.prepared.channels_last && t.dim() == 4 {
            true => ffi::channels_last(&t),
            false => Ok(t),
        }
    }

    /// `forward` and every `@torch.jit.export`ed method.
    pub fn method_names(&self) -> Result<Vec<String>> {
        self.handle.method_names()
    }

    /// A method's declared arguments (without `self`) and return type.
    pub fn schema(&self, method: &str) -> Result<crate::ivalue::schema::MethodSchema> {
        self.signature(method)?;
        self.handle.method_schema(method)
    }

    pub fn signature(&self, method: &str) -> Result<Arc<Signature>> {
        if let Some(s) = self
            .signatures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(method)
        {
            return Ok(s.clone());
        }
        let schema = self.handle.method_schema(method).map_err(|_| {
            let names = self.method_names().unwrap_or_default();
            fail(
                Code::MethodNotFound,
                format!(
                    "the module has no method '{method}'; it has: {}",
                    names.join(", ")
                ),
            )
        })?;
        let signature = Arc::new(Signature::new(method, &schema));
        self.signatures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(method.to_string(), signature.clone());
        Ok(signature)
    }

    /// Runs a method. Under no-grad unless an input tensor requires grad (then autograd
    /// records, so `backward()` reaches the inputs); grad mode is per thread in libtorch, so
    /// the guard is taken here, on whichever thread runs the call.
    pub fn call(&self, method: &str, args: Vec<Value>) -> Result<Value> {
        let args = coerce_args(&*self.signature(method)?, args)?;
        let _guard = (!args.iter().any(requires_grad)).then(tch::no_grad_guard);
        let args = match self.prepared.bf16 || self.prepared.channels_last {
            true => args
                .into_iter()
                .map(|v| map_tensors(v, &|t| self.adapt_input(t)))
                .collect::<Result<Vec<Value>>>()?,
            false => args,
        };
        let owned = args.iter().map(to_ivalue).collect::<Result<Vec<Owned>>>()?;
        let c_name = CString::new(method)?;
        let geometry: Vec<Geometry> = args.iter().flat_map(Geometry::of_inputs).collect();
        // An error raised inside the model that says nothing more specific is a ForwardError.
        let out = self.handle.method(&c_name, &owned).map_err(|e| {
            geometry.iter().for_each(Geometry::restore);
            let message = crate::error::trim_libtorch(&e.to_string());
            let code = crate::error::classify(&message).unwrap_or(Code::ForwardError);
            fail(code, format!("{method}(): {message}"))
        })?;
        let out = from_ivalue(&out)?;
        match self.prepared.bf16 {
            true => map_tensors(out, &|t| match t.kind() {
                tch::Kind::BFloat16 => Ok(t.f_to_kind(tch::Kind::Float)?),
                _ => Ok(t),
            }),
            false => Ok(out),
        }
    }

    pub fn named_parameters(&self) -> Result<Vec<(String, tch::Tensor)>> {
        self.handle.named_parameters()
    }

    pub fn to_device(&mut self, device: Device) -> Result<()> {
        self.refuse_if_frozen("to()")?;
        self.handle.to_device(device_index(device))?;
        self.device = device;
        Ok(())
    }

    pub fn set_training(&mut self, training: bool) -> Result<()> {
        if training {
            self.refuse_if_frozen("train()")?;
        }
        self.handle.set_training(training)
    }

    pub fn is_training(&self) -> bool {
        self.handle.is_training()
    }

    pub fn save(&self, path: &str) -> Result<()> {
        self.refuse_if_frozen("save()")?;
        let c_path = CString::new(path).map_err(|_| fail(Code::InvalidArg, "path: contains a NUL byte"))?;
        self.handle
            .save(&c_path)
            .with_context(|| format!("cannot save the module to '{path}'"))
    }
}

/// An input tensor's sizes, strides and offset before a call. libtorch's `resize_` sets the
/// new sizes *before* it finds that the storage cannot grow (memory borrowed from JS, a storage
/// pinned by `asTypedArray`) and throws, leaving a tensor that claims more elements than its
/// storage holds: reading it reads past the block. After a failed call, inputs whose geometry
/// changed are put back.
struct Geometry {
    tensor: tch::Tensor,
    size: Vec<i64>,
    stride: Vec<i64>,
    offset: i64,
}

impl Geometry {
    fn of_inputs(v: &Value) -> Vec<Geometry> {
        match v {
            Value::Tensor(t) => vec![Geometry {
                tensor: t.shallow_clone(),
                size: t.size(),
                stride: t.stride(),
                offset: ffi::storage_offset(t),
            }],
            Value::List(_, items) | Value::Tuple(items) => {
                items.iter().flat_map(Geometry::of_inputs).collect()
            }
            Value::Dict(_, entries) => entries.iter().flat_map(|(_, v)| Geometry::of_inputs(v)).collect(),
            _ => Vec::new(),
        }
    }

    fn restore(&self) {
        let t = &self.tensor;
        if t.size() != self.size || t.stride() != self.stride || ffi::storage_offset(t) != self.offset {
            let _ =
                t.shallow_clone()
                    .f_as_strided_(self.size.as_slice(), self.stride.as_slice(), self.offset);
        }
    }
}

/// `v` with each tensor in it replaced by `f(tensor)`.
fn map_tensors(v: Value, f: &impl Fn(tch::Tensor) -> Result<tch::Tensor>) -> Result<Value> {
    Ok(match v {
        Value::Tensor(t) => Value::Tensor(f(t)?),
        Value::List(ty, items) => Value::List(
            ty,
            items
                .into_iter()
                .map(|v| map_tensors(v, f))
                .collect::<Result<_>>()?,
        ),
        Value::Tuple(items) => Value::Tuple(
            items
                .into_iter()
                .map(|v| map_tensors(v, f))
                .collect::<Result<_>>()?,
        ),
        Value::Dict(ty, entries) => Value::Dict(
            ty,
            entries
                .into_iter()
                .map(|(k, v)| Ok((k, map_tensors(v, f)?)))
                .collect::<Result<_>>()?,
        ),
        other => other,
    })
}

/// A copy of `v` whose tensors share their data with `v`'s (for calling with the same inputs twice).
fn share(v: &Value) -> Value {
    match v {
        Value::None => Value::None,
        Value::Bool(b) => Value::Bool(*b),
        Value::Int(i) => Value::Int(*i),
        Value::Float(x) => Value::Float(*x),
        Value::Number(x) => Value::Number(*x),
        Value::Str(s) => Value::Str(s.clone()),
        Value::Tensor(t) => Value::Tensor(t.shallow_clone()),
        Value::List(ty, items) => Value::List(ty.clone(), items.iter().map(share).collect()),
        Value::Tuple(items) => Value::Tuple(items.iter().map(share).collect()),
        Value::Dict(ty, entries) => Value::Dict(
            ty.clone(),
            entries.iter().map(|(k, v)| (share(k), share(v))).collect(),
        ),
    }
}

fn requires_grad(v: &Value) -> bool {
    match v {
        Value::Tensor(t) => t.requires_grad(),
        Value::List(_, items) | Value::Tuple(items) => items.iter().any(requires_grad),
        Value::Dict(_, entries) => entries.iter().any(|(_, v)| requires_grad(v)),
        _ => false,
    }
}

pub use crate::args::Source;

/// How to load a module: the device, the limits its archive is checked against, how to prepare
/// it for inference, and the warm-up calls to run before it is handed out.
pub struct LoadOptions {
    pub device: Device,
    pub limits: archive::Limits,
    pub prepare: Prepare,
    /// `forward` runs this many times with `example` at load: TorchScript's profiling executor
    /// optimizes a method's graph after its first calls, which are slow.
    pub warmup: usize,
    pub example: Vec<Value>,
}

pub fn load(source: &Source, options: &LoadOptions) -> anyhow::Result<Module> {
    if options.prepare.bf16 && options.device == Device::Cpu && !ffi::cpu_has_native_bf16() {
        bail_code!(
            Code::DeviceUnavailable,
            "options.dtype 'bfloat16': this CPU has no native bfloat16 (AVX512-BF16 or AMX-BF16); libtorch would emulate it, slower than float32"
        );
    }
    let mut m = match source {
        Source::Path(p) => Module::load_file(p, options.device, &options.limits),
        Source::Bytes(b) => Module::load_bytes(b, options.device, &options.limits),
    }?;
    m.prepare(options.prepare)?;
    let warm_up = |m: &Module| -> anyhow::Result<()> {
        for _ in 0..options.warmup {
            m.call("forward", options.example.iter().map(share).collect())
                .context("options.example: the warm-up call failed")?;
        }
        Ok(())
    };
    if options.prepare.fuse {
        // oneDNN Graph fusion is a process-wide pass of the profiling executor, which optimizes
        // a graph during its first calls: it is on only while this module's warm-up runs, one
        // such warm-up at a time. (A graph of another module optimized at that very moment, on
        // another thread, is fused too: same results to float rounding.)
        static FUSING: Mutex<()> = Mutex::new(());
        let _one = FUSING.lock().unwrap_or_else(|p| p.into_inner());
        ffi::onednn_fusion(true)?;
        let warmed = warm_up(&m);
        ffi::onednn_fusion(false)?;
        warmed?;
    } else {
        warm_up(&m)?;
    }
    Ok(m)
}

/// Runs a method with the module's read lock (mutations such as `to()` wait for running calls).
pub fn call(module: &RwLock<Module>, method: &str, args: Vec<Value>) -> anyhow::Result<Value> {
    let m = module.read().unwrap_or_else(|p| p.into_inner());
    m.call(method, args)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        format!("{}/models/fixtures/{name}", crate::REPO_ROOT)
    }

    #[test]
    fn missing_and_garbage_files_are_model_load_errors() {
        let (code, msg) = crate::error::describe(
            &Module::load_file("/nonexistent.pt", Device::Cpu, &archive::Limits::default())
                .err()
                .unwrap(),
        );
        assert_eq!(code, Code::ModelLoadError);
        assert!(
            msg.starts_with("cannot load TorchScript model from '/nonexistent.pt'"),
            "{msg}"
        );
        let (code, msg) = crate::error::describe(
            &Module::load_bytes(b"not a zip", Device::Cpu, &archive::Limits::default())
                .err()
                .unwrap(),
        );
        assert_eq!(code, Code::ModelLoadError);
        assert!(!msg.contains('\n'), "{msg}");
    }

    #[test]
    fn calls_a_method_with_schema_checked_numbers() {
        let m = Module::load_file(
            &fixture("extra_method.pt"),
            Device::Cpu,
            &archive::Limits::default(),
        )
        .unwrap();
        let mut names = m.method_names().unwrap();
        names.sort();
        assert!(names.contains(&"forward".to_string()) && names.contains(&"add_one".to_string()));
        assert!(matches!(
            m.call("add_one", vec![Value::Number(41.0)]).unwrap(),
            Value::Int(42)
        ));
        let (code, msg) = crate::error::describe(&m.call("add_one", vec![Value::Number(1.5)]).unwrap_err());
        assert_eq!(code, Code::InvalidArg);
        assert!(
            msg.contains("'n' of add_one(): expected int, got number 1.5"),
            "{msg}"
        );
        let (code, _) = crate::error::describe(&m.call("nope", vec![]).unwrap_err());
        assert_eq!(code, Code::MethodNotFound);
    }
}
