//! Element-wise math, comparisons and reductions, with broadcasting; the second operand may be
//! a tensor or a JS number (a 0-dim tensor in libtorch's type promotion, exactly like a Python
//! scalar: `intTensor.add(2)` stays int, `intTensor.add(2.5)` becomes float). In-place versions
//! (suffix `_`) write into this tensor's storage and return it (index.js returns `this`).
use super::ops::ValuesIndices;
use super::JsTensor;
use crate::error::bail_code;
use crate::error::{guard, Code, Result};
use crate::napi::convert::{Dim, Dims, Flag, Num, Operand, ReadOpt};
use crate::napi::outcome::Outcome;
use napi::bindgen_prelude::*;
use napi_derive::napi;
use tch::{TchError, Tensor};
use torch_core::ffi;

type Binary = fn(&Tensor, &Tensor) -> std::result::Result<Tensor, TchError>;
type InPlace = fn(&mut Tensor, &Tensor) -> std::result::Result<Tensor, TchError>;
type Unary = fn(&Tensor) -> std::result::Result<Tensor, TchError>;
/// What `max`/`min` give: a tensor, or values and indices along a dim.
type Extreme = Either<JsTensor, ValuesIndices>;
type Over = fn(&Tensor, &[i64], bool) -> std::result::Result<Tensor, TchError>;

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

    /// A reduction over `dim` (`over`, keeping reduced dims with `keepdim`) or all elements.
    fn reduce(
        &self,
        dim: Option<Dims>,
        keepdim: Option<Flag>,
        name: &str,
        over: Over,
        all: Unary,
    ) -> Result<JsTensor> {
        guard(|| {
            let t = self.get()?;
            let keepdim = keepdim.read(&format!("{name}: keepdim"))?.unwrap_or(false);
            Ok(JsTensor::new(
                match Dims::or_all(dim, t.dim(), &format!("{name}: dim"))? {
                    Some(d) => over(&t, d.as_slice(), keepdim)?,
                    None => all(&t)?,
                },
            ))
        })
    }
}

/// Declares the element-wise methods in one `#[napi]` impl, a line and a doc comment each:
/// `binary` ones take one operand (`add(other)`), `unary` ones none (`exp()`), `in_place` ones
/// one operand and return this tensor (`add_(other)`).
macro_rules! element_wise {
    (
        binary { $($(#[$bdoc:meta])* $bname:ident => $bop:ident;)* }
        unary { $($(#[$udoc:meta])* $uname:ident => $uop:ident;)* }
        in_place { $($(#[$idoc:meta])* $iname:ident $ijs:literal => $iop:ident;)* }
    ) => {
        #[napi]
        impl JsTensor {
            $(
                $(#[$bdoc])*
                #[napi]
                pub fn $bname(&self, other: Operand) -> Outcome<JsTensor> {
                    self.binary(other, concat!(stringify!($bname), ": other"), |a, b| a.$bop(b)).into()
                }
            )*
            $(
                $(#[$udoc])*
                #[napi]
                pub fn $uname(&self) -> Outcome<JsTensor> {
                    self.unary(|t| t.$uop()).into()
                }
            )*
            $(
                $(#[$idoc])*
                #[napi(js_name = $ijs, ts_return_type = "this")]
                pub fn $iname<'t>(&self, this: This<'t>, other: Operand) -> Outcome<This<'t>> {
                    chain(this, self.in_place(other, concat!($ijs, ": other"), |a, b| a.$iop(b))).into()
                }
            )*
        }
    };
}

element_wise! {
    binary {
        /// `this + other`, broadcasting.
        add => f_add;
        /// `this - other`.
        sub => f_sub;
        /// `this * other`, element-wise.
        mul => f_mul;
        /// `this / other` (true division: integer inputs give float results).
        div => f_div;
        /// Element-wise `==`, a bool tensor.
        eq => f_eq_tensor;
        /// Element-wise `!=`.
        ne => f_ne_tensor;
        /// Element-wise `<`.
        lt => f_lt_tensor;
        /// Element-wise `<=`.
        le => f_le_tensor;
        /// Element-wise `>`.
        gt => f_gt_tensor;
        /// Element-wise `>=`.
        ge => f_ge_tensor;
    }
    unary {
        /// e^x.
        exp => f_exp;
        /// Natural logarithm.
        log => f_log;
        /// Square root.
        sqrt => f_sqrt;
        /// Absolute value.
        abs => f_abs;
        /// Negation.
        neg => f_neg;
        /// max(x, 0).
        relu => f_relu;
        /// 1 / (1 + e^-x).
        sigmoid => f_sigmoid;
        /// Hyperbolic tangent.
        tanh => f_tanh;
        /// Rounds half to even, as PyTorch does.
        round => f_round;
        /// Rounds down.
        floor => f_floor;
        /// Rounds up.
        ceil => f_ceil;
    }
    in_place {
        /// In place: `this += other`. Returns this tensor.
        add_ "add_" => f_add_;
        /// In place: `this -= other`.
        sub_ "sub_" => f_sub_;
        /// In place: `this *= other`.
        mul_ "mul_" => f_mul_;
        /// In place: `this /= other` (the tensor must be floating).
        div_ "div_" => f_div_;
    }
}

#[napi]
impl JsTensor {
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
        let over = |t: &Tensor, d: &[i64], k| t.f_sum_dim_intlist(d, k, None);
        self.reduce(dim, keepdim, "sum", over, |t| t.f_sum(None)).into()
    }

    /// The mean of all elements, or over `dim` (floating tensors).
    #[napi]
    pub fn mean(&self, dim: Option<Dims>, keepdim: Option<Flag>) -> Outcome<JsTensor> {
        let over = |t: &Tensor, d: &[i64], k| t.f_mean_dim(d, k, None);
        self.reduce(dim, keepdim, "mean", over, |t| t.f_mean(None)).into()
    }

    /// `max()`: the largest element. `max(dim, keepdim?)`: `{values, indices}` along `dim`.
    /// `max(other)`: the element-wise maximum with a tensor.
    #[napi(ts_return_type = "Tensor | ValuesIndices")]
    pub fn max(&self, dim_or_other: Option<Operand>, keepdim: Option<Flag>) -> Outcome<Extreme> {
        self.extreme(dim_or_other, keepdim, true).into()
    }

    /// `min()`, `min(dim, keepdim?)`, `min(other)`: as `max`.
    #[napi(ts_return_type = "Tensor | ValuesIndices")]
    pub fn min(&self, dim_or_other: Option<Operand>, keepdim: Option<Flag>) -> Outcome<Extreme> {
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
                let d = torch_core::args::dim(dim, t.dim(), &format!("{name}: dim"))?;
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
