//! Element-wise math, comparisons and reductions, with broadcasting; the second operand may be
//! a tensor or a JS number (a 0-dim tensor in libtorch's type promotion, exactly like a Python
//! scalar: `intTensor.add(2)` stays int, `intTensor.add(2.5)` becomes float). In-place versions
//! (suffix `_`) write into this tensor's storage and return it (index.js returns `this`).
use super::ops::ValuesIndices;
use super::JsTensor;
use crate::error::bail_code;
use crate::error::{guard, Code, Result};
use crate::ffi;
use crate::napi::convert::{Dim, Dims, Flag, Num, Operand, ReadOpt};
use crate::napi::outcome::Outcome;
use napi::bindgen_prelude::*;
use napi_derive::napi;
use tch::{TchError, Tensor};

type Binary = fn(&Tensor, &Tensor) -> std::result::Result<Tensor, TchError>;
type InPlace = fn(&mut Tensor, &Tensor) -> std::result::Result<Tensor, TchError>;
type Unary = fn(&Tensor) -> std::result::Result<Tensor, TchError>;

impl JsTensor {
    fn binary(&self, other: Operand, what: &str, op: Binary) -> Result<JsTensor> {
        guard(|| {
            let t = self.get()?;
            let o = other.read(&t, what)?;
            Ok(JsTensor::new(op(&t, &o)?))
        })
    }

    fn in_place(&self, other: Operand, what: &str, op: InPlace) -> Result<()> {
        guard(|| {
            let mut t = self.get()?.shallow_clone();
            let o = other.read(&t, what)?;
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
    #[napi]
    pub fn add(&self, other: Operand) -> Outcome<JsTensor> {
        self.binary(other, "add: other", |a, b| a.f_add(b)).into()
    }
    /// `this - other`.
    #[napi]
    pub fn sub(&self, other: Operand) -> Outcome<JsTensor> {
        self.binary(other, "sub: other", |a, b| a.f_sub(b)).into()
    }
    /// `this * other`, element-wise.
    #[napi]
    pub fn mul(&self, other: Operand) -> Outcome<JsTensor> {
        self.binary(other, "mul: other", |a, b| a.f_mul(b)).into()
    }
    /// `this / other` (true division: integer inputs give float results).
    #[napi]
    pub fn div(&self, other: Operand) -> Outcome<JsTensor> {
        self.binary(other, "div: other", |a, b| a.f_div(b)).into()
    }
    /// `this ** exponent` (a copy; `pow_` writes in place).
    #[napi]
    pub fn pow(&self, exponent: Operand) -> Outcome<JsTensor> {
        match exponent.number() {
            Some(e) => guard(|| Ok(JsTensor::new(ffi::scalar::pow(&*self.get()?, e, false)?))),
            None => self.binary(exponent, "pow: exponent", |a, b| a.f_pow(b)),
        }
        .into()
    }
    /// Matrix product with PyTorch's `matmul` broadcasting rules.
    #[napi]
    pub fn matmul(&self, other: crate::napi::convert::Tensor) -> Outcome<JsTensor> {
        guard(|| {
            let other = other.read("matmul: other")?;
            Ok(JsTensor::new(self.get()?.f_matmul(&other)?))
        })
        .into()
    }
    /// Element-wise `==`, a bool tensor.
    #[napi]
    pub fn eq(&self, other: Operand) -> Outcome<JsTensor> {
        self.binary(other, "eq: other", |a, b| a.f_eq_tensor(b)).into()
    }
    /// Element-wise `!=`.
    #[napi]
    pub fn ne(&self, other: Operand) -> Outcome<JsTensor> {
        self.binary(other, "ne: other", |a, b| a.f_ne_tensor(b)).into()
    }
    /// Element-wise `<`.
    #[napi]
    pub fn lt(&self, other: Operand) -> Outcome<JsTensor> {
        self.binary(other, "lt: other", |a, b| a.f_lt_tensor(b)).into()
    }
    /// Element-wise `<=`.
    #[napi]
    pub fn le(&self, other: Operand) -> Outcome<JsTensor> {
        self.binary(other, "le: other", |a, b| a.f_le_tensor(b)).into()
    }
    /// Element-wise `>`.
    #[napi]
    pub fn gt(&self, other: Operand) -> Outcome<JsTensor> {
        self.binary(other, "gt: other", |a, b| a.f_gt_tensor(b)).into()
    }
    /// Element-wise `>=`.
    #[napi]
    pub fn ge(&self, other: Operand) -> Outcome<JsTensor> {
        self.binary(other, "ge: other", |a, b| a.f_ge_tensor(b)).into()
    }
    /// Where the bool `condition` holds this element, else `other`'s: PyTorch's
    /// `x.where(condition, y)` (= `torch.where(condition, x, y)`).
    #[napi(js_name = "where")]
    pub fn where_(&self, condition: crate::napi::convert::Tensor, other: Operand) -> Outcome<JsTensor> {
        guard(|| {
            let condition = condition.read("where: condition")?;
            let t = self.get()?;
            let o = other.read(&t, "where: other")?;
            Ok(JsTensor::new(t.f_where_self(&condition, &o)?))
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
    pub fn clamp(&self, min: Option<Num>, max: Option<Num>) -> Outcome<JsTensor> {
        guard(|| {
            let (min, max) = (min.read("clamp: min")?, max.read("clamp: max")?);
            Ok(JsTensor::new(clamp(&*self.get()?, min, max)?))
        })
        .into()
    }

    /// The sum of all elements, or over `dim` (a number or an array), keeping reduced dims
    /// as size 1 with `keepdim`.
    #[napi]
    pub fn sum(&self, dim: Option<Dims>, keepdim: Option<Flag>) -> Outcome<JsTensor> {
        guard(|| {
            let t = self.get()?;
            let keepdim = keepdim.read("sum: keepdim")?.unwrap_or(false);
            Ok(JsTensor::new(match Dims::or_all(dim, t.dim(), "sum: dim")? {
                Some(d) => t.f_sum_dim_intlist(d.as_slice(), keepdim, None)?,
                None => t.f_sum(None)?,
            }))
        })
        .into()
    }

    /// The mean of all elements, or over `dim` (floating tensors).
    #[napi]
    pub fn mean(&self, dim: Option<Dims>, keepdim: Option<Flag>) -> Outcome<JsTensor> {
        guard(|| {
            let t = self.get()?;
            let keepdim = keepdim.read("mean: keepdim")?.unwrap_or(false);
            Ok(JsTensor::new(match Dims::or_all(dim, t.dim(), "mean: dim")? {
                Some(d) => t.f_mean_dim(d.as_slice(), keepdim, None)?,
                None => t.f_mean(None)?,
            }))
        })
        .into()
    }

    /// `max()`: the largest element. `max(dim, keepdim?)`: `{values, indices}` along `dim`.
    /// `max(other)`: the element-wise maximum with a tensor.
    #[napi(ts_return_type = "Tensor | ValuesIndices")]
    pub fn max(
        &self,
        dim_or_other: Option<Operand>,
        keepdim: Option<Flag>,
    ) -> Outcome<Either<JsTensor, ValuesIndices>> {
        self.extreme(dim_or_other, keepdim, true).into()
    }

    /// `min()`, `min(dim, keepdim?)`, `min(other)`: as `max`.
    #[napi(ts_return_type = "Tensor | ValuesIndices")]
    pub fn min(
        &self,
        dim_or_other: Option<Operand>,
        keepdim: Option<Flag>,
    ) -> Outcome<Either<JsTensor, ValuesIndices>> {
        self.extreme(dim_or_other, keepdim, false).into()
    }

    /// Sorted values along `dim` (default: the last) and where they came from.
    #[napi]
    pub fn sort(&self, dim: Option<Dim>, descending: Option<Flag>) -> Outcome<ValuesIndices> {
        guard(|| {
            let t = self.get()?;
            let d = Dim::or(dim, -1.0, t.dim(), "sort: dim")?;
            let descending = descending.read("sort: descending")?.unwrap_or(false);
            let (values, indices) = t.f_sort(d, descending)?;
            Ok(ValuesIndices {
                values: JsTensor::new(values),
                indices: JsTensor::new(indices),
            })
        })
        .into()
    }

    /// In place: `this += other`. Returns this tensor.
    #[napi(js_name = "add_", ts_return_type = "this")]
    pub fn add_<'t>(&self, this: This<'t>, other: Operand) -> Outcome<This<'t>> {
        chain(this, self.in_place(other, "add_: other", |a, b| a.f_add_(b))).into()
    }
    /// In place: `this -= other`.
    #[napi(js_name = "sub_", ts_return_type = "this")]
    pub fn sub_<'t>(&self, this: This<'t>, other: Operand) -> Outcome<This<'t>> {
        chain(this, self.in_place(other, "sub_: other", |a, b| a.f_sub_(b))).into()
    }
    /// In place: `this *= other`.
    #[napi(js_name = "mul_", ts_return_type = "this")]
    pub fn mul_<'t>(&self, this: This<'t>, other: Operand) -> Outcome<This<'t>> {
        chain(this, self.in_place(other, "mul_: other", |a, b| a.f_mul_(b))).into()
    }
    /// In place: `this /= other` (the tensor must be floating).
    #[napi(js_name = "div_", ts_return_type = "this")]
    pub fn div_<'t>(&self, this: This<'t>, other: Operand) -> Outcome<This<'t>> {
        chain(this, self.in_place(other, "div_: other", |a, b| a.f_div_(b))).into()
    }
    /// In place: `this **= exponent`.
    #[napi(js_name = "pow_", ts_return_type = "this")]
    pub fn pow_<'t>(&self, this: This<'t>, exponent: Operand) -> Outcome<This<'t>> {
        Outcome::of(|| {
            // A number goes to `pow_.Scalar`, as in PyTorch: an integer tensor to a negative integer
            // power is an error there, not a silent integer result.
            let done = match exponent.number() {
                Some(e) => guard(|| ffi::scalar::pow(&*self.get()?, e, true).map(drop)),
                None => self.in_place(exponent, "pow_: exponent", |a, b| a.f_pow_tensor_(b)),
            };
            chain(this, done)
        })
    }
    /// In place: `this = other` (broadcast, cast to this dtype), writing through to storage.
    #[napi(js_name = "copy_", ts_return_type = "this")]
    pub fn copy_<'t>(&self, this: This<'t>, src: Operand) -> Outcome<This<'t>> {
        Outcome::of(|| {
            let done = self.in_place(src, "copy_: src", |a, b| {
                a.f_copy_(b)?;
                Ok(a.shallow_clone())
            });
            chain(this, done)
        })
    }
    /// In place: limits values to [min, max].
    #[napi(js_name = "clamp_", ts_return_type = "this")]
    pub fn clamp_<'t>(&self, this: This<'t>, min: Option<Num>, max: Option<Num>) -> Outcome<This<'t>> {
        Outcome::of(|| {
            let done = guard(|| {
                let (min, max) = (min.read("clamp_: min")?, max.read("clamp_: max")?);
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
    #[napi(js_name = "fill_", ts_return_type = "this")]
    pub fn fill_<'t>(&self, this: This<'t>, value: Operand) -> Outcome<This<'t>> {
        Outcome::of(|| {
            let done = match value.number() {
                Some(v) => guard(|| ffi::scalar::fill_(&*self.get()?, v)),
                None => self.in_place(value, "fill_: value", |a, b| a.f_fill_tensor_(b)),
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
        arg: Option<Operand>,
        keepdim: Option<Flag>,
        largest: bool,
    ) -> Result<Either<JsTensor, ValuesIndices>> {
        let name = if largest { "max" } else { "min" };
        guard(|| {
            let t = self.get()?;
            let Some(arg) = arg else {
                let out = if largest { t.f_max()? } else { t.f_min()? };
                return Ok(Either::A(JsTensor::new(out)));
            };
            if let Some(dim) = arg.number() {
                let d = crate::args::dim(dim, t.dim(), &format!("{name}: dim"))?;
                let k = keepdim.read(&format!("{name}: keepdim"))?.unwrap_or(false);
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
            let o = arg.read(&t, &format!("{name}: other"))?;
            Ok(Either::A(JsTensor::new(if largest {
                t.f_maximum(&o)?
            } else {
                t.f_minimum(&o)?
            })))
        })
    }
}
