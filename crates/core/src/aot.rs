//! An AOTInductor package (`.pt2`, written by `torch._inductor.aoti_compile_and_package`),
//! Load, run, metadata. A compiled program takes tensors and returns tensors, flat,
//! in the order its pytree specs (`in_spec`, `out_spec` in the metadata) flatten them.
use crate::aot_inputs::{self, Actual, InputChecks, Layout};
use crate::device;
use crate::error::bail_code;
use crate::error::{describe, fail, trim_libtorch, Code};
use crate::ffi::{self, AotiHandle};
use anyhow::Result;
use std::io::Read;
use tch::Device;

pub struct AotModule {
    handle: AotiHandle,
    device: Device,
    path: String,
    /// None only when the package has no generated source and the user turned on the compiled
    /// checks (`AOTI_RUNTIME_CHECK_INPUTS=1`) instead.
    inputs: Option<InputChecks>,
}

/// Loads a package after checking that `path` is a file that starts like a zip archive.
pub fn load(path: &str, device: Device) -> Result<AotModule> {
    let what = format!("cannot load AOTInductor package from '{path}'");
    let mut magic = [0u8; 4];
    let read = std::fs::File::open(path).and_then(|mut f| {
        if f.metadata()?.is_dir() {
            return Err(std::io::Error::other("it is a directory"));
        }
        f.read_exact(&mut magic)
    });
    read.map_err(|e| fail(Code::ModelLoadError, format!("{what}: {e}")))?;
    if &magic != b"PK\x03\x04" {
        bail_code!(
            Code::ModelLoadError,
            "{what}: not a .pt2 package (a zip archive from torch._inductor.aoti_compile_and_package)"
        );
    }
    let inputs =
        input_checks(path).map_err(|e| fail(Code::ModelLoadError, format!("{what}: {}", describe(&e).1)))?;
    let index = match device {
        Device::Cuda(i) => i as i32,
        _ => -1,
    };
    // The weights' pages of the package's .so that the loader copied stay mapped: given back
    // after the load (crate::aot_pages says why), CPU only (a CUDA load copies them to the device
    // the same way, but keeps host pages of its own that this has not been measured on). Loads
    // take turns: while dlopen maps a library, glibc first reserves its whole length as one
    // read-only file mapping, then maps the segments over it and relocates them; a release that
    // read smaps in that moment would discard relocated pages of another load's library (seen:
    // workers loading at once, a call through an unrelocated pointer).
    static LOADS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let turn = LOADS.lock().unwrap_or_else(|p| p.into_inner());
    let before = matches!(device, Device::Cpu).then(crate::aot_pages::mapped);
    let loaded = ffi::aoti_load(path, index);
    if let (Some(before), Ok(_)) = (&before, &loaded) {
        let (_, mapped) = crate::aot_pages::release_new_file_pages(before);
        // The extracted package is not read again on CPU (crate::aot_extraction says why).
        crate::aot_extraction::remove(&mapped);
    }
    drop(turn);
    let handle = loaded.map_err(|e| {
        let message = trim_libtorch(&e.to_string());
        let code = match device {
            Device::Cuda(_) => crate::error::classify(&message).unwrap_or(Code::ModelLoadError),
            _ => Code::ModelLoadError,
        };
        fail(code, format!("{what}: {message}"))
    })?;
    Ok(AotModule {
        handle,
        device,
        path: path.to_string(),
        inputs,
    })
}

/// The package's input checks, read from its generated wrapper (see `aot_inputs`). Without a
/// wrapper nothing would stop a wrong shape from reading out of bounds — Python's runner checks
/// nothing — unless the user turned on the compiled program's own checks, which read
/// `AOTI_RUNTIME_CHECK_INPUTS` once, at the program's first run.
pub(crate) fn input_checks(path: &str) -> Result<Option<InputChecks>> {
    match aot_inputs::package_sources(path)? {
        Some(sources) => Ok(Some(InputChecks::read(&sources)?)),
        None if std::env::var("AOTI_RUNTIME_CHECK_INPUTS")
            .is_ok_and(|v| !v.is_empty() && !v.starts_with('0')) =>
        {
            Ok(None)
        }
        None => bail_code!(
            Code::ModelLoadError,
            "the package holds no generated wrapper source (data/aotinductor/model/*.wrapper.cpp), \
             which torch-node reads the input checks from; set AOTI_RUNTIME_CHECK_INPUTS=1 to run \
             it with the compiled checks instead"
        ),
    }
}

/// AOTInductor's name of a dtype: ours, except for the complex kinds (which have no JS name).
fn aoti_dtype_name(kind: tch::Kind) -> String {
    match kind {
        tch::Kind::ComplexHalf => "complex32".into(),
        tch::Kind::ComplexFloat => "complex64".into(),
        tch::Kind::ComplexDouble => "complex128".into(),
        k => crate::dtype::name(k),
    }
}

impl AotModule {
    pub fn device(&self) -> Device {
        self.device
    }

    /// Gives back the memory of the constants named (original FQNs) that the program never
    /// reads (see `aot_pages::release_unread_constants`); returns the bytes given back. CPU
    /// only: a CUDA program's constants are device memory.
    pub fn release_unread_constants(&self, names: &[String]) -> Result<usize> {
        match self.device {
            Device::Cpu => crate::aot_pages::release_unread_constants(&self.handle, names),
            _ => Ok(0),
        }
    }

    pub fn metadata(&self) -> Result<Vec<(String, String)>> {
        ffi::aoti_metadata(&self.handle)
    }

    /// Runs the program under no-grad. Inputs must be on the package's device and pass the
    /// package's input checks; the runner checks their count.
    pub fn run(&self, inputs: Vec<tch::Tensor>) -> Result<Vec<tch::Tensor>> {
        for (i, t) in inputs.iter().enumerate() {
            if t.device() != self.device {
                bail_code!(
                    Code::DeviceMismatch,
                    "forward(): input {i} is on {}, the package runs on {}",
                    device::name(t.device()),
                    device::name(self.device)
                );
            }
        }
        let inputs = inputs
            .iter()
            .enumerate()
            .map(|(i, t)| self.laid_out(i, t))
            .collect::<Result<Vec<_>>>()?;
        self.check_inputs(&inputs)?;
        let _guard = tch::no_grad_guard();
        ffi::aoti_run(&self.handle, &inputs).map_err(|e| {
            let message = trim_libtorch(&e.to_string());
            let code = crate::error::classify(&message).unwrap_or(Code::ForwardError);
            fail(code, format!("forward() of '{}': {message}", self.path))
        })
    }

    /// Input `i` in the memory layout the program was compiled for: where the package fixes every
    /// stride (channels-last, say), a tensor with other strides is copied into those; elsewhere
    /// the program takes dense row-major, and views are made dense. Views are copied, never refused.
    fn laid_out(&self, i: usize, t: &tch::Tensor) -> Result<tch::Tensor> {
        let (sizes, strides) = (t.size(), t.stride());
        let layout = match &self.inputs {
            Some(checks) => checks.layout(i, &sizes, &strides),
            None => Layout::Dense,
        };
        Ok(match layout {
            Layout::AsGiven => t.shallow_clone(),
            Layout::Dense => t.f_contiguous()?,
            Layout::Strided(wanted) => {
                let mut out = tch::Tensor::f_empty_strided(&sizes, &wanted, (t.kind(), t.device()))?;
                out.f_copy_(t)?;
                out
            }
        })
    }

    fn check_inputs(&self, inputs: &[tch::Tensor]) -> Result<()> {
        let Some(checks) = self.inputs.as_ref().filter(|c| c.len() == inputs.len()) else {
            return Ok(());
        };
        let shapes: Vec<(Vec<i64>, Vec<i64>, String)> = inputs
            .iter()
            .map(|t| (t.size(), t.stride(), aoti_dtype_name(t.kind())))
            .collect();
        let actual: Vec<Actual> = shapes
            .iter()
            .map(|(sizes, strides, dtype)| Actual {
                sizes,
                strides,
                dtype,
            })
            .collect();
        checks.check(&actual).map_err(|e| {
            let (code, message) = describe(&e);
            fail(code, format!("forward() of '{}': {message}", self.path))
        })
    }
}
