//! Conversions and the math a classifier's answer needs: `to`, `cpu`, `cuda`, `softmax`,
//! `logSoftmax`, `argmax`, `topk`.
use super::JsTensor;
use crate::error::bail_code;
use crate::error::{guard, Code, Result};
use crate::napi::convert::{Dim, Flag, Int, Read, ReadOpt, ToTarget};
use crate::napi::js;
use crate::napi::options::js_options;
use crate::napi::outcome::Outcome;
use torch_core::{args, device, dtype};

use napi_derive::napi;
use tch::Device;

/// The values and indices of `topk`, `max(dim)`, `min(dim)`.
#[napi(object, object_from_js = false)]
pub struct ValuesIndices {
    pub values: JsTensor,
    /// int64 positions along the reduced dimension.
    pub indices: JsTensor,
}

js_options! {
    /// `Tensor.to`'s object form: where to move and what to cast to (at least one).
    pub struct ToBag as JsToOptions "ToOptions" {
        /// The device to move to.
        device "device": Device as "Device",
        /// The dtype to cast to.
        dtype "dtype": tch::Kind as "DType",
    }
}

/// Moves or casts: a device (`'cuda'`), a dtype (`'float16'`) or both (`{device, dtype}`).
fn convert(t: &tch::Tensor, dev: Option<Device>, kind: Option<tch::Kind>) -> anyhow::Result<tch::Tensor> {
    let t = match dev {
        Some(d) if d != t.device() => t.f_to_device(d)?,
        _ => t.shallow_clone(),
    };
    Ok(match kind {
        Some(k) if k != t.kind() => t.f_to_kind(k)?,
        _ => t,
    })
}

type ArgReduce = fn(&tch::Tensor, Option<i64>, bool) -> std::result::Result<tch::Tensor, tch::TchError>;
type AlongDim = fn(&tch::Tensor, i64) -> std::result::Result<tch::Tensor, tch::TchError>;

impl JsTensor {
    /// `op` along `dim` (default: the last).
    fn along(&self, dim: Option<Dim>, what: &str, op: AlongDim) -> Result<JsTensor> {
        guard(|| {
            let t = self.get()?;
            let d = Dim::or(dim, -1.0, t.dim(), what)?;
            Ok(JsTensor::new(op(&t, d)?))
        })
    }

    fn arg_extreme(
        &self,
        dim: Option<Dim>,
        keepdim: Option<Flag>,
        name: &str,
        op: ArgReduce,
    ) -> Result<JsTensor> {
        guard(|| {
            let t = self.get()?;
            let d = dim
                .map(|d| d.read(t.dim(), &format!("{name}: dim")))
                .transpose()?;
            let keepdim = keepdim.read(&format!("{name}: keepdim"))?.unwrap_or(false);
            Ok(JsTensor::new(op(&t, d, keepdim)?))
        })
    }
}

#[napi]
impl JsTensor {
    /// A copy on another device and/or with another dtype: `to('cuda')`, `to('float16')`,
    /// `to({device: 'cpu', dtype: 'float32'})`. Returns a tensor sharing memory with this one
    /// when nothing changes, as PyTorch does.
    #[napi]
    pub fn to(&self, target: ToTarget) -> Outcome<JsTensor> {
        guard(|| {
            let crate::napi::convert::Raw { env: raw, val: v } = target.raw();
            let (dev, kind) = if js::type_of(raw, v)? == napi::sys::ValueType::napi_string {
                let s = js::string(raw, v)?;
                if s == "cpu" || s.starts_with("cuda") {
                    (Some(device::parse(&s)?), None)
                } else {
                    (
                        None,
                        Some(dtype::parse(&s).map_err(|_| {
                            crate::error::fail(
                                Code::InvalidArg,
                                format!(
                                    "to: '{s}' is neither a device ('cpu', 'cuda', 'cuda:N') nor a dtype"
                                ),
                            )
                        })?),
                    )
                }
            } else if js::type_of(raw, v)? == napi::sys::ValueType::napi_object && !js::is_array(raw, v)? {
                let o = ToBag::read(raw, Some(v), "to: options")?;
                if o.device.is_none() && o.dtype.is_none() {
                    bail_code!(
                        Code::InvalidArg,
                        "to: the options object names neither a device nor a dtype"
                    );
                }
                (o.device, o.dtype)
            } else {
                bail_code!(
                    Code::InvalidArg,
                    "to: expected a device or dtype string or {{device, dtype}}, got {}",
                    js::describe(raw, v)
                );
            };
            Ok(JsTensor::new(convert(&*self.get()?, dev, kind)?))
        })
        .into()
    }

    /// A copy in CPU memory (this tensor when it already is there).
    #[napi]
    pub fn cpu(&self) -> Outcome<JsTensor> {
        guard(|| Ok(JsTensor::new(convert(&*self.get()?, Some(Device::Cpu), None)?))).into()
    }

    /// A copy on a CUDA device (default `cuda:0`); `DeviceUnavailable` where there is none.
    #[napi]
    pub fn cuda(&self, device: Option<crate::napi::convert::Device>) -> Outcome<JsTensor> {
        guard(|| {
            let d = device
                .read("cuda: device")?
                .map_or_else(|| device::parse("cuda"), Ok)?;
            if d == Device::Cpu {
                bail_code!(Code::InvalidArg, "cuda: expected a CUDA device, got 'cpu'");
            }
            Ok(JsTensor::new(convert(&*self.get()?, Some(d), None)?))
        })
        .into()
    }

    /// Softmax along `dim` (default: the last).
    #[napi]
    pub fn softmax(&self, dim: Option<Dim>) -> Outcome<JsTensor> {
        self.along(dim, "softmax: dim", |t, d| t.f_softmax(d, None))
            .into()
    }

    /// Log-softmax along `dim` (default: the last).
    #[napi]
    pub fn log_softmax(&self, dim: Option<Dim>) -> Outcome<JsTensor> {
        self.along(dim, "logSoftmax: dim", |t, d| t.f_log_softmax(d, None))
            .into()
    }

    /// Index of the largest value: over all elements (flattened), or along `dim`.
    #[napi]
    pub fn argmax(&self, dim: Option<Dim>, keepdim: Option<Flag>) -> Outcome<JsTensor> {
        self.arg_extreme(dim, keepdim, "argmax", |t, d, k| t.f_argmax(d, k))
            .into()
    }

    /// Index of the smallest value: over all elements (flattened), or along `dim`.
    #[napi]
    pub fn argmin(&self, dim: Option<Dim>, keepdim: Option<Flag>) -> Outcome<JsTensor> {
        self.arg_extreme(dim, keepdim, "argmin", |t, d, k| t.f_argmin(d, k))
            .into()
    }

    /// The `k` largest values along `dim` (default: the last), sorted, with their indices.
    #[napi]
    pub fn topk(&self, k: Int, dim: Option<Dim>) -> Outcome<ValuesIndices> {
        guard(|| {
            let t = self.get()?;
            let d = Dim::or(dim, -1.0, t.dim(), "topk: dim")?;
            let k = args::shape(&[k.read("topk: k")? as f64], "topk: k")?[0];
            let size = if t.dim() == 0 { 1 } else { t.size()[d as usize] };
            if k > size {
                bail_code!(
                    Code::InvalidArg,
                    "topk: k ({k}) is larger than dimension {d} (size {size})"
                );
            }
            let (values, indices) = t.f_topk(k, d, true, true)?;
            Ok(ValuesIndices {
                values: JsTensor::new(values),
                indices: JsTensor::new(indices),
            })
        })
        .into()
    }
}
