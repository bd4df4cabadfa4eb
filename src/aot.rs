//! An AOTInductor package (`.pt2`, written by `torch._inductor.aoti_compile_and_package`),
//! napi-free: load, run, metadata. A compiled program takes tensors and returns tensors, flat,
//! in the order its pytree specs (`in_spec`, `out_spec` in the metadata) flatten them.
use crate::error::{fail, trim_libtorch, Code};
use crate::ffi::{self, AotiHandle};
use crate::{bail_code, device};
use anyhow::Result;
use std::io::Read;
use tch::Device;

pub struct AotModule {
    handle: AotiHandle,
    device: Device,
    path: String,
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
    // AOTInductor's generated code checks each input's dtype, sizes and strides only when this
    // is set when it first runs (it reads it once): without it, a wrong shape reads out of bounds.
    static CHECK_INPUTS: std::sync::Once = std::sync::Once::new();
    CHECK_INPUTS.call_once(|| std::env::set_var("AOTI_RUNTIME_CHECK_INPUTS", "1"));
    let index = match device {
        Device::Cuda(i) => i as i32,
        _ => -1,
    };
    let handle = ffi::aoti_load(path, index).map_err(|e| {
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
    })
}

impl AotModule {
    pub fn device(&self) -> Device {
        self.device
    }

    pub fn metadata(&self) -> Result<Vec<(String, String)>> {
        ffi::aoti_metadata(&self.handle)
    }

    /// Runs the program under no-grad. Inputs must be on the package's device; the compiled code
    /// checks their count, dtypes and shapes against what it was exported with.
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
        // The program was compiled for the strides it was exported with (dense, row-major);
        // views are made dense here rather than refused.
        let inputs = inputs
            .iter()
            .map(|t| t.f_contiguous())
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let _guard = tch::no_grad_guard();
        ffi::aoti_run(&self.handle, &inputs).map_err(|e| {
            let message = trim_libtorch(&e.to_string());
            let code = crate::error::classify(&message).unwrap_or(Code::ForwardError);
            fail(code, format!("forward() of '{}': {message}", self.path))
        })
    }
}
