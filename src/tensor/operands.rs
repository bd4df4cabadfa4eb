//! Reading tensor-valued arguments (`Tensor`, `Tensor[]`, `Operand`): the tensor a JS value
//! wraps, shared (a shallow clone), or a JS number as PyTorch treats a Python scalar. The
//! argument handles are `crate::napi::convert`'s; the unwrapping is `js::with_wrapped`'s.
use super::JsTensor;
use crate::error::{bail_code, Code};
use crate::napi::convert::{self, Operand, Raw, Read, Tensor, Tensors};
use crate::napi::js::{self, Env, Val};
use anyhow::Result;
use napi::sys::ValueType as Js;
use torch_core::{args, ffi};

/// Runs `f` on the Tensor `v` wraps, borrowed for `f` alone; None when `v` is not a Tensor.
pub fn with_tensor<R>(env: Env, v: Val, f: impl FnOnce(&JsTensor) -> R) -> Option<R> {
    js::with_wrapped(env, v, "Tensor", f)
}

/// The tensor `v` wraps, shared (a shallow clone: same storage), or InvalidArg naming `what`
/// (`Disposed` when it was disposed).
pub fn shared(env: Env, v: Val, what: &str) -> Result<tch::Tensor> {
    match with_tensor(env, v, |t| t.get().map(|t| t.shallow_clone())) {
        Some(t) => t,
        None => bail_code!(
            Code::InvalidArg,
            "{what}: expected a Tensor, got {}",
            js::describe(env, v)
        ),
    }
}

impl Tensor {
    /// The tensor, shared (a shallow clone), or InvalidArg naming `what`.
    pub fn read(&self, what: &str) -> Result<tch::Tensor> {
        let Raw { env, val } = self.raw();
        shared(env, val, what)
    }
}

impl Read for Tensors {
    type Out = Vec<tch::Tensor>;
    fn read(&self, what: &str) -> Result<Vec<tch::Tensor>> {
        let Raw { env, val } = self.raw();
        convert::array_of(env, val, "tensors", what, |item, what| shared(env, item, what))
    }
}

impl Operand {
    /// A tensor, or a JS number/boolean as a wrapped number (type promotion then treats it
    /// exactly as PyTorch treats a Python scalar); a boolean lands on `like`'s device.
    pub fn read(&self, like: &tch::Tensor, what: &str) -> Result<tch::Tensor> {
        let Raw { env, val } = self.raw();
        if let Some(t) = with_tensor(env, val, |t| t.get().map(|t| t.shallow_clone())) {
            return t;
        }
        Ok(match js::type_of(env, val)? {
            Js::napi_number => {
                let x = js::number(env, val)?;
                // A CPU wrapped number may join a CUDA operation, as a Python scalar does.
                ffi::wrapped_number(x, args::is_integral(x))?
            }
            Js::napi_boolean => {
                let b = ffi::wrapped_number(js::boolean(env, val)? as i64 as f64, true)?;
                b.f_to_kind(tch::Kind::Bool)?.f_to_device(like.device())?
            }
            _ => bail_code!(
                Code::InvalidArg,
                "{what}: expected a Tensor or a number, got {}",
                js::describe(env, val)
            ),
        })
    }

    /// The JS number, when the operand is one (for ops with a dedicated scalar form).
    pub fn number(&self) -> Option<f64> {
        let Raw { env, val } = self.raw();
        (js::type_of(env, val).ok()? == Js::napi_number).then(|| js::number(env, val).ok())?
    }
}
