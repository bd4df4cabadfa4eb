//! Element-wise math, comparisons and reductions, with broadcasting; the second operand may be
//! a tensor or a JS number (a 0-dim tensor in libtorch's type promotion, exactly like a Python
//! scalar: `intTensor.add(2)` stays int, `intTensor.add(2.5)` becomes float). In-place versions
//! (suffix `_`) write into this tensor's storage and return it (index.js returns `this`).
use super::ops::ValuesIndices;
use super::JsTensor;
use crate::error::{guard, Code, Result};
use crate::outcome::Outcome;
use crate::{args, bail_code, ffi, js};
use napi::bindgen_prelude::*;
use napi::JsValue;
use napi_derive::napi;
use tch::{Kind, TchError, Tensor};

type Binary = fn(&Tensor, &Tensor) -> std::result::Result<Tensor, TchError>;
type InPlace = fn(&mut Tensor, &Tensor) -> std::result::Result<Tensor, TchError>;
type Unary = fn(&Tensor) -> std::result::Result<Tensor, TchError>;

/// A tensor, or a JS number/boolean as a wrapped number on `like`'s device (type promotion
/// then treats it exactly as PyTorch treats a Python scalar).
fn operand(env: Env, v: Unknown, like: &Tensor, what: &str) -> anyhow::Result<Tensor> {
    let (raw, v) = (env.raw(), v.raw());
    if let Some(t) = super::unwrap_tensor(raw, v) {
        return Ok(t.get()?.shallow_clone());
    }
    let number = match js::type_of(raw, v)? {
        napi::sys::ValueType::napi_number => js::number(raw, v)?,
        napi::sys::ValueType::napi_boolean => {
            let b = ffi::wrapped_number(js::boolean(raw, v)? as i64 as f64, true)?;
            return Ok(b.f_to_kind(Kind::Bool)?.f_to_device(like.device())?);
        }
        _ => bail_code!(
            Code::InvalidArg,
            "{what}: expected a Tensor or a number, got {}",
            js::describe(raw, v)
        ),
    };
    let integral = crate::args::is_integral(number);
    let t = ffi::wrapped_number(number, integral)?;
    // A CPU wrapped number may join a CUDA operation, as a Python scalar does.
    Ok(t)
}

/// A JS number, when `v` is one (for ops with a dedicated scalar form).
fn number(env: Env, v: &Unknown) -> Option<f64> {
    let raw = env.raw();
    (js::type_of(raw, v.raw()).ok()? == napi::sys::ValueType::napi_number)
        .then(|| js::number(raw, v.raw()).ok())?
}

/// `dim` given as a number or an array of numbers.
fn dims(env: Env, v: Option<Unknown>, ndim: usize, what: &str) -> anyhow::Result<Option<Vec<i64>>> {
    let Some(v) = v else { return Ok(None) };
    let (raw, v) = (env.raw(), v.raw());
    if js::is_nullish(raw, v)? {
        return Ok(None);
    }
    let list = if js::is_array(raw, v)? {
        (0..js::array_len(raw, v)?)
            .map(|i| js::element(raw, v, i))
            .collect::<anyhow::Result<Vec<_>>>()?
    } else {
        vec![v]
    };
    let ds = list
        .into_iter()
        .map(|d| args::dim(super::create::number_arg(raw, d, what)?, ndim, what))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(Some(ds))
}

impl JsTensor {
    fn binary(&self, env: Env, other: Unknown, what: &str, op: Binary) -> Result<JsTensor> {
        guard(|| {
            let t = self.get()?;
            let o = operand(env, other, &t, what)?;
            Ok(JsTensor::new(op(&t, &o)?))
        })
    }

    fn in_place(&self, env: Env, other: Unknown, what: &str, op: InPlace) -> Result<()> {
        guard(|| {
            let mut t = self.get()?.shallow_clone();
            let o = operand(env, other, &t, what)?;
            let _ = op(&mut t, &o)?;
            Ok(())
        })
    }

    fn unary(&self, op: Unary) -> Result<JsTensor> {
        guard(|| Ok(JsTensor::new(op(&*self.get()?)?)))
    }
}

#[napi]
impl JsTensor {
    /// `this + other`, broadcasting.
    #[napi(ts_args_type = "other: Tensor | number")]
    pub fn add(&self, env: Env, other: Unknown) -> Outcome<JsTensor> {
        self.binary(env, other, "add: other", |a, b| a.f_add(b)).into()
    }
    /// `this - other`.
    #[napi(ts_args_type = "other: Tensor | number")]
    pub fn sub(&self, env: Env, other: Unknown) -> Outcome<JsTensor> {
        self.binary(env, other, "sub: other", |a, b| a.f_sub(b)).into()
    }
    /// `this * other`, element-wise.
    #[napi(ts_args_type = "other: Tensor | number")]
    pub fn mul(&self, env: Env, other: Unknown) -> Outcome<JsTensor> {
        self.binary(env, other, "mul: other", |a, b| a.f_mul(b)).into()
    }
    /// `this / other` (true division: integer inputs give float results).
    #[napi(ts_args_type = "other: Tensor | number")]
    pub fn div(&self, env: Env, other: Unknown) -> Outcome<JsTensor> {
        self.binary(env, other, "div: other", |a, b| a.f_div(b)).into()
    }
    /// `this ** exponent` (a copy; `pow_` writes in place).
    #[napi(ts_args_type = "exponent: Tensor | number")]
    pub fn pow(&self, env: Env, exponent: Unknown) -> Outcome<JsTensor> {
        match number(env, &exponent) {
            Some(e) => guard(|| Ok(JsTensor::new(ffi::scalar::pow(&*self.get()?, e, false)?))),
            None => self.binary(env, exponent, "pow: exponent", |a, b| a.f_pow(b)),
        }
        .into()
    }
    /// Matrix product with PyTorch's `matmul` broadcasting rules.
    #[napi]
    pub fn matmul(&self, other: &JsTensor) -> Outcome<JsTensor> {
        guard(|| Ok(JsTensor::new(self.get()?.f_matmul(&*other.get()?)?))).into()
    }
    /// Element-wise `==`, a bool tensor.
    #[napi(ts_args_type = "other: Tensor | number")]
    pub fn eq(&self, env: Env, other: Unknown) -> Outcome<JsTensor> {
        self.binary(env, other, "eq: other", |a, b| a.f_eq_tensor(b))
            .into()
    }
    /// Element-wise `!=`.
    #[napi(ts_args_type = "other: Tensor | number")]
    pub fn ne(&self, env: Env, other: Unknown) -> Outcome<JsTensor> {
        self.binary(env, other, "ne: other", |a, b| a.f_ne_tensor(b))
            .into()
    }
    /// Element-wise `<`.
    #[napi(ts_args_type = "other: Tensor | number")]
    pub fn lt(&self, env: Env, other: Unknown) -> Outcome<JsTensor> {
        self.binary(env, other, "lt: other", |a, b| a.f_lt_tensor(b))
            .into()
    }
    /// Element-wise `<=`.
    #[napi(ts_args_type = "other: Tensor | number")]
    pub fn le(&self, env: Env, other: Unknown) -> Outcome<JsTensor> {
        self.binary(env, other, "le: other", |a, b| a.f_le_tensor(b))
            .into()
    }
    /// Element-wise `>`.
    #[napi(ts_args_type = "other: Tensor | number")]
    pub fn gt(&self, env: Env, other: Unknown) -> Outcome<JsTensor> {
        self.binary(env, other, "gt: other", |a, b| a.f_gt_tensor(b))
            .into()
    }
    /// Element-wise `>=`.
    #[napi(ts_args_type = "other: Tensor | number")]
    pub fn ge(&self, env: Env, other: Unknown) -> Outcome<JsTensor> {
        self.binary(env, other, "ge: other", |a, b| a.f_ge_tensor(b))
            .into()
    }
    /// Where the bool `condition` holds this element, else `other`'s: PyTorch's
    /// `x.where(condition, y)` (= `torch.where(condition, x, y)`).
    #[napi(js_name = "where", ts_args_type = "condition: Tensor, other: Tensor | number")]
    pub fn where_(&self, env: Env, condition: &JsTensor, other: Unknown) -> Outcome<JsTensor> {
        guard(|| {
            let t = self.get()?;
            let o = operand(env, other, &t, "where: other")?;
            Ok(JsTensor::new(t.f_where_self(&*condition.get()?, &o)?))
        })
        .into()
    }

    /// e^x.
    #[napi]
    pub fn exp(&self) -> Outcome<JsTensor> {
        self.unary(|t| t.f_exp()).into()
    }
    /// Natural logarithm.
    #[napi]
    pub fn log(&self) -> Outcome<JsTensor> {
        self.unary(|t| t.f_log()).into()
    }
    /// Square root.
    #[napi]
    pub fn sqrt(&self) -> Outcome<JsTensor> {
        self.unary(|t| t.f_sqrt()).into()
    }
    /// Absolute value.
    #[napi]
    pub fn abs(&self) -> Outcome<JsTensor> {
        self.unary(|t| t.f_abs()).into()
    }
    /// Negation.
    #[napi]
    pub fn neg(&self) -> Outcome<JsTensor> {
        self.unary(|t| t.f_neg()).into()
    }
    /// max(x, 0).
    #[napi]
    pub fn relu(&self) -> Outcome<JsTensor> {
        self.unary(|t| t.f_relu()).into()
    }
    /// 1 / (1 + e^-x).
    #[napi]
    pub fn sigmoid(&self) -> Outcome<JsTensor> {
        self.unary(|t| t.f_sigmoid()).into()
    }
    /// Hyperbolic tangent.
    #[napi]
    pub fn tanh(&self) -> Outcome<JsTensor> {
        self.unary(|t| t.f_tanh()).into()
    }
    /// Rounds half to even, as PyTorch does.
    #[napi]
    pub fn round(&self) -> Outcome<JsTensor> {
        self.unary(|t| t.f_round()).into()
    }
    /// Rounds down.
    #[napi]
    pub fn floor(&self) -> Outcome<JsTensor> {
        self.unary(|t| t.f_floor()).into()
    }
    /// Rounds up.
    #[napi]
    pub fn ceil(&self) -> Outcome<JsTensor> {
        self.unary(|t| t.f_ceil()).into()
    }
    /// Limits values to [min, max]; either bound may be null.
    #[napi]
    pub fn clamp(&self, min: Option<f64>, max: Option<f64>) -> Outcome<JsTensor> {
        guard(|| Ok(JsTensor::new(clamp(&*self.get()?, min, max)?))).into()
    }

    /// The sum of all elements, or over `dim` (a number or an array), keeping reduced dims
    /// as size 1 with `keepdim`.
    #[napi(ts_args_type = "dim?: number | number[] | null, keepdim?: boolean")]
    pub fn sum(&self, env: Env, dim: Option<Unknown>, keepdim: Option<bool>) -> Outcome<JsTensor> {
        guard(|| {
            let t = self.get()?;
            Ok(JsTensor::new(match dims(env, dim, t.dim(), "sum: dim")? {
                Some(d) => t.f_sum_dim_intlist(d.as_slice(), keepdim.unwrap_or(false), None)?,
                None => t.f_sum(None)?,
            }))
        })
        .into()
    }

    /// The mean of all elements, or over `dim` (floating tensors).
    #[napi(ts_args_type = "dim?: number | number[] | null, keepdim?: boolean")]
    pub fn mean(&self, env: Env, dim: Option<Unknown>, keepdim: Option<bool>) -> Outcome<JsTensor> {
        guard(|| {
            let t = self.get()?;
            Ok(JsTensor::new(match dims(env, dim, t.dim(), "mean: dim")? {
                Some(d) => t.f_mean_dim(d.as_slice(), keepdim.unwrap_or(false), None)?,
                None => t.f_mean(None)?,
            }))
        })
        .into()
    }

    /// `max()`: the largest element. `max(dim, keepdim?)`: `{values, indices}` along `dim`.
    /// `max(other)`: the element-wise maximum with a tensor.
    #[napi(
        ts_args_type = "dimOrOther?: number | Tensor, keepdim?: boolean",
        ts_return_type = "Tensor | ValuesIndices"
    )]
    pub fn max(
        &self,
        env: Env,
        dim_or_other: Option<Unknown>,
        keepdim: Option<bool>,
    ) -> Outcome<Either<JsTensor, ValuesIndices>> {
        self.extreme(env, dim_or_other, keepdim, true).into()
    }

    /// `min()`, `min(dim, keepdim?)`, `min(other)`: as `max`.
    #[napi(
        ts_args_type = "dimOrOther?: number | Tensor, keepdim?: boolean",
        ts_return_type = "Tensor | ValuesIndices"
    )]
    pub fn min(
        &self,
        env: Env,
        dim_or_other: Option<Unknown>,
        keepdim: Option<bool>,
    ) -> Outcome<Either<JsTensor, ValuesIndices>> {
        self.extreme(env, dim_or_other, keepdim, false).into()
    }

    /// Sorted values along `dim` (default: the last) and where they came from.
    #[napi]
    pub fn sort(&self, dim: Option<f64>, descending: Option<bool>) -> Outcome<ValuesIndices> {
        guard(|| {
            let t = self.get()?;
            let d = args::dim(dim.unwrap_or(-1.0), t.dim(), "sort: dim")?;
            let (values, indices) = t.f_sort(d, descending.unwrap_or(false))?;
            Ok(ValuesIndices {
                values: JsTensor::new(values),
                indices: JsTensor::new(indices),
            })
        })
        .into()
    }

    /// In place: `this += other`. Returns this tensor.
    #[napi(
        js_name = "add_",
        ts_args_type = "other: Tensor | number",
        ts_return_type = "this"
    )]
    pub fn add_<'t>(&self, this: This<'t>, env: Env, other: Unknown) -> Outcome<This<'t>> {
        chain(this, self.in_place(env, other, "add_: other", |a, b| a.f_add_(b))).into()
    }
    /// In place: `this -= other`.
    #[napi(
        js_name = "sub_",
        ts_args_type = "other: Tensor | number",
        ts_return_type = "this"
    )]
    pub fn sub_<'t>(&self, this: This<'t>, env: Env, other: Unknown) -> Outcome<This<'t>> {
        chain(this, self.in_place(env, other, "sub_: other", |a, b| a.f_sub_(b))).into()
    }
    /// In place: `this *= other`.
    #[napi(
        js_name = "mul_",
        ts_args_type = "other: Tensor | number",
        ts_return_type = "this"
    )]
    pub fn mul_<'t>(&self, this: This<'t>, env: Env, other: Unknown) -> Outcome<This<'t>> {
        chain(this, self.in_place(env, other, "mul_: other", |a, b| a.f_mul_(b))).into()
    }
    /// In place: `this /= other` (the tensor must be floating).
    #[napi(
        js_name = "div_",
        ts_args_type = "other: Tensor | number",
        ts_return_type = "this"
    )]
    pub fn div_<'t>(&self, this: This<'t>, env: Env, other: Unknown) -> Outcome<This<'t>> {
        chain(this, self.in_place(env, other, "div_: other", |a, b| a.f_div_(b))).into()
    }
    /// In place: `this **= exponent`.
    #[napi(
        js_name = "pow_",
        ts_args_type = "exponent: Tensor | number",
        ts_return_type = "this"
    )]
    pub fn pow_<'t>(&self, this: This<'t>, env: Env, exponent: Unknown) -> Outcome<This<'t>> {
        Outcome::of(|| {
            // A number goes to `pow_.Scalar`, as in PyTorch: an integer tensor to a negative integer
            // power is an error there, not a silent integer result.
            let done = match number(env, &exponent) {
                Some(e) => guard(|| ffi::scalar::pow(&*self.get()?, e, true).map(drop)),
                None => self.in_place(env, exponent, "pow_: exponent", |a, b| a.f_pow_tensor_(b)),
            };
            chain(this, done)
        })
    }
    /// In place: `this = other` (broadcast, cast to this dtype), writing through to storage.
    #[napi(
        js_name = "copy_",
        ts_args_type = "src: Tensor | number",
        ts_return_type = "this"
    )]
    pub fn copy_<'t>(&self, this: This<'t>, env: Env, src: Unknown) -> Outcome<This<'t>> {
        Outcome::of(|| {
            let done = self.in_place(env, src, "copy_: src", |a, b| {
                a.f_copy_(b)?;
                Ok(a.shallow_clone())
            });
            chain(this, done)
        })
    }
    /// In place: limits values to [min, max].
    #[napi(js_name = "clamp_", ts_return_type = "this")]
    pub fn clamp_<'t>(&self, this: This<'t>, min: Option<f64>, max: Option<f64>) -> Outcome<This<'t>> {
        Outcome::of(|| {
            let done = guard(|| {
                if min.is_none() && max.is_none() {
                    bail_code!(Code::InvalidArg, "clamp_: give min, max or both");
                }
                let _ = ffi::scalar::clamp(&*self.get()?, min, max, true)?;
                Ok(())
            });
            chain(this, done)
        })
    }
    /// In place: every element becomes `value`.
    #[napi(
        js_name = "fill_",
        ts_args_type = "value: number | boolean",
        ts_return_type = "this"
    )]
    pub fn fill_<'t>(&self, this: This<'t>, env: Env, value: Unknown) -> Outcome<This<'t>> {
        Outcome::of(|| {
            let done = match number(env, &value) {
                Some(v) => guard(|| ffi::scalar::fill_(&*self.get()?, v)),
                None => self.in_place(env, value, "fill_: value", |a, b| a.f_fill_tensor_(b)),
            };
            chain(this, done)
        })
    }
    /// In place: every element becomes 0.
    #[napi(js_name = "zero_", ts_return_type = "this")]
    pub fn zero_<'t>(&self, this: This<'t>) -> Outcome<This<'t>> {
        chain(
            this,
            guard(|| {
                let _ = self.get()?.shallow_clone().f_zero_()?;
                Ok(())
            }),
        )
        .into()
    }
}

/// In-place methods return the tensor itself (`this`), so calls chain: `t.mul_(2).add_(1)`.
pub fn chain<'t>(this: This<'t>, done: Result<()>) -> Result<This<'t>> {
    done.map(|()| this)
}

fn clamp(t: &Tensor, min: Option<f64>, max: Option<f64>) -> anyhow::Result<Tensor> {
    if min.is_none() && max.is_none() {
        bail_code!(Code::InvalidArg, "clamp: give min, max or both");
    }
    ffi::scalar::clamp(t, min, max, false)
}

impl JsTensor {
    fn extreme(
        &self,
        env: Env,
        arg: Option<Unknown>,
        keepdim: Option<bool>,
        largest: bool,
    ) -> Result<Either<JsTensor, ValuesIndices>> {
        let name = if largest { "max" } else { "min" };
        guard(|| {
            let t = self.get()?;
            let raw = env.raw();
            let arg = arg.filter(|a| !js::is_nullish(raw, a.raw()).unwrap_or(true));
            let Some(arg) = arg else {
                let out = if largest { t.f_max()? } else { t.f_min()? };
                return Ok(Either::A(JsTensor::new(out)));
            };
            if js::type_of(raw, arg.raw())? == napi::sys::ValueType::napi_number {
                let d = args::dim(js::number(raw, arg.raw())?, t.dim(), &format!("{name}: dim"))?;
                let k = keepdim.unwrap_or(false);
                let (values, indices) = if largest {
                    t.f_max_dim(d, k)?
                } else {
                    t.f_min_dim(d, k)?
                };
                return Ok(Either::B(ValuesIndices {
                    values: JsTensor::new(values),
                    indices: JsTensor::new(indices),
                }));
            }
            let o = operand(env, arg, &t, &format!("{name}: other"))?;
            Ok(Either::A(JsTensor::new(if largest {
                t.f_maximum(&o)?
            } else {
                t.f_minimum(&o)?
            })))
        })
    }
}
