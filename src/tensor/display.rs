//! `toString()`: PyTorch's `repr`, formatted by `torch_core::repr` from the tensor's values.
use super::data::{values, Values};
use super::JsTensor;
use crate::error::guard;
use crate::napi::outcome::Outcome;
use napi_derive::napi;
use tch::{Device, Kind};
use torch_core::repr::{tensor_repr, ReprData, ReprInput};
use torch_core::{device, dtype, ffi};

/// Python's `repr(t)` for a tensor.
pub fn repr(t: &tch::Tensor) -> anyhow::Result<String> {
    torch_core::args::check_numel(&t.size(), "toString")?;
    let kind = t.kind();
    // Integers are read as int64 (exact); floats and bools as `values` widens them for JS.
    let data = if dtype::is_floating(kind) || kind == Kind::Bool {
        match values(t)? {
            Values::Numbers(v) => ReprData::F64(v),
            Values::Bools(v) => ReprData::Bool(v),
        }
    } else {
        let host = super::data::host(t)?;
        ReprData::I64(Vec::<i64>::try_from(
            &host.f_to_kind(Kind::Int64)?.f_reshape([-1])?,
        )?)
    };
    let device_name = device::name(t.device());
    let grad_fn = ffi::grad_fn_name(t);
    Ok(tensor_repr(&ReprInput {
        shape: &t.size(),
        data,
        dtype: &dtype::name(kind),
        device: (t.device() != Device::Cpu).then_some(device_name.as_str()),
        grad_fn: grad_fn.as_deref(),
        requires_grad: t.requires_grad(),
    }))
}

#[napi]
impl JsTensor {
    /// PyTorch's repr, e.g. `tensor([[1., 1.]])`, `tensor([1, 2], dtype=torch.int32)`;
    /// also what `console.log` and `util.inspect` show.
    #[napi]
    pub fn to_string(&self) -> Outcome<String> {
        guard(|| {
            if self.is_disposed() {
                return Ok("tensor(<disposed>)".to_string());
            }
            repr(&*self.get()?)
        })
        .into()
    }
}
