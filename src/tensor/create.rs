//! Factories: `tensor`, `ones`, `zeros`, `empty`, `full`, `rand`, `randn`, `randint`,
//! `arange`, `linspace`, `eye`. JS numbers have no int/float split, so numeric data becomes
//! float32 (as in tfjs), booleans bool, BigInts int64; a TypedArray keeps its own type.
use super::JsTensor;
use crate::error::bail_code;
use crate::error::{guard, Code, Result};
use crate::napi::convert::{self, FactoryOptions, Int, Num, Read, Scalar, Shape, TensorData, TensorOptions};
use crate::napi::js::{self, Env as RawEnv, Val};
use crate::napi::options::js_options;
use crate::napi::outcome::Outcome;
use anyhow::Context;
use napi::bindgen_prelude::*;
use napi::JsValue;
use napi_derive::napi;
use tch::{Device, Kind, Tensor};
use torch_core::{args, dtype, ffi};

js_options! {
    /// Options accepted by every factory.
    pub struct TensorBag as JsTensorOptions "TensorOptions" {
        /// Element type; default float32 (int64 for `randint` and integral `arange`).
        dtype "dtype": Kind as "DType",
        /// `'cpu'` (default), `'cuda'` or `'cuda:N'`.
        device "device": Device as "Device",
        /// Record operations for autograd (floating dtypes only).
        requires_grad "requiresGrad": bool as "boolean",
        /// `tensor()` only: the shape to view the data as (nested arrays, a flat TypedArray or a
        /// tensor; the element count must match). Other factories refuse it.
        shape "shape": Vec<i64> as "Array<number>",
    }
}

impl TensorBag {
    /// `device`, CPU when left out.
    fn device(&self) -> Device {
        self.device.unwrap_or(Device::Cpu)
    }
}

/// Reads a factory's `options`: an options object, or a boolean meaning `requiresGrad`
/// (torchjs' form `ones(shape, true)`). `shape` is `tensor()`'s alone (`with_shape`).
pub fn options(env: RawEnv, v: Option<Val>, with_shape: bool) -> anyhow::Result<TensorBag> {
    use napi::sys::ValueType as T;
    match v.map(|v| js::type_of(env, v).map(|t| (t, v))).transpose()? {
        Some((T::napi_boolean, v)) => Ok(TensorBag {
            requires_grad: Some(js::boolean(env, v)?),
            ..TensorBag::default()
        }),
        Some((T::napi_object | T::napi_undefined | T::napi_null, _)) | None => {
            let except: &[&str] = if with_shape { &[] } else { &["shape"] };
            TensorBag::read_except(env, v, "options", except)
        }
        Some((_, v)) => bail_code!(
            Code::InvalidArg,
            "options: expected an options object or a boolean, got {}",
            js::describe(env, v)
        ),
    }
}

/// A factory's options: `{dtype, device, requiresGrad}`, or a boolean for `requiresGrad`.
fn factory_options(v: Option<FactoryOptions>) -> anyhow::Result<TensorBag> {
    options_of(v.map(|o| o.raw()), false)
}

/// [`options`] over a typed options argument.
fn options_of(v: Option<convert::Raw>, with_shape: bool) -> anyhow::Result<TensorBag> {
    match v {
        Some(r) => options(r.env, Some(r.val), with_shape),
        None => options(std::ptr::null_mut(), None, with_shape),
    }
}

/// Applies `requiresGrad` and wraps the result.
fn finish(t: Tensor, o: &TensorBag) -> anyhow::Result<JsTensor> {
    let t = if o.requires_grad == Some(true) {
        if !dtype::is_floating(t.kind()) {
            bail_code!(
                Code::DTypeMismatch,
                "requiresGrad: only floating-point tensors can require gradients, not {}",
                dtype::name(t.kind())
            );
        }
        t.f_set_requires_grad(true)?
    } else {
        t
    };
    Ok(JsTensor::new(t))
}

/// A factory over a shape argument: parses shape and options, then calls `make`.
fn from_shape(
    shape: Shape,
    options: Option<FactoryOptions>,
    default_kind: Kind,
    make: impl FnOnce(&[i64], (Kind, Device)) -> anyhow::Result<Tensor>,
) -> Result<JsTensor> {
    guard(|| {
        let shape = shape.read("shape")?;
        let o = factory_options(options)?;
        let t = make(&shape, (o.dtype.unwrap_or(default_kind), o.device()))?;
        finish(t, &o)
    })
}

/// Declares factories over a shape (`ones([2, 3], options)`), float32 unless `dtype`.
macro_rules! shape_factories {
    ($($(#[$doc:meta])* $name:ident => $make:ident;)*) => {$(
        $(#[$doc])*
        #[napi]
        pub fn $name(shape: Shape, options: Option<FactoryOptions>) -> Outcome<JsTensor> {
            from_shape(shape, options, Kind::Float, |s, o| Ok(Tensor::$make(s, o)?)).into()
        }
    )*};
}

shape_factories! {
    /// A tensor filled with ones. `ones([2, 3])`, `ones([2, 3], {dtype: 'int64'})`, `ones([2], true)`.
    ones => f_ones;
    /// A tensor filled with zeros.
    zeros => f_zeros;
    /// A tensor with uninitialized contents (fast; fill it before reading).
    empty => f_empty;
    /// Uniform random numbers in [0, 1) (seed with `manualSeed`).
    rand => f_rand;
    /// Standard normal random numbers.
    randn => f_randn;
}

/// A tensor filled with `value` (float32 for a number, bool for a boolean, unless `dtype`).
#[napi]
pub fn full(shape: Shape, value: Scalar, options: Option<FactoryOptions>) -> Outcome<JsTensor> {
    Outcome::of(|| {
        let (fill, is_bool) = guard(|| value.read("value"))?;
        let default = if is_bool { Kind::Bool } else { Kind::Float };
        from_shape(shape, options, default, |s, o| ffi::scalar::full(s, fill, o))
    })
}

/// Random integers in [low, high), int64 unless `dtype` says otherwise.
#[napi]
pub fn randint(low: Int, high: Int, shape: Shape, options: Option<FactoryOptions>) -> Outcome<JsTensor> {
    Outcome::of(|| {
        let bounds = guard(|| {
            let (lo, hi) = (low.read("low")?, high.read("high")?);
            if lo >= hi {
                bail_code!(
                    Code::InvalidArg,
                    "randint: low ({lo}) must be less than high ({hi})"
                );
            }
            Ok((lo, hi))
        })?;
        from_shape(shape, options, Kind::Int64, |s, o| {
            Ok(Tensor::f_randint_low(bounds.0, bounds.1, s, o)?)
        })
    })
}

/// Optional trailing numbers followed by an optional options object, as in PyTorch's
/// `arange(5, dtype=...)`: `arange(5, {dtype})` and `arange(0, 5, 1, {dtype})` both work.
fn numbers_then_options(
    env: RawEnv,
    rest: &[Option<Unknown>],
    what: &str,
) -> anyhow::Result<(Vec<f64>, Option<Val>)> {
    let (mut numbers, mut options) = (Vec::new(), None);
    for (i, v) in rest.iter().flatten().map(|u| u.raw()).enumerate() {
        if js::is_nullish(env, v)? {
            continue;
        }
        if options.is_some() {
            bail_code!(
                Code::InvalidArg,
                "{what}: the options object must be the last argument"
            );
        }
        if js::type_of(env, v)? == napi::sys::ValueType::napi_number {
            numbers.push(js::number(env, v)?);
        } else if js::type_of(env, v)? == napi::sys::ValueType::napi_object {
            options = Some(v);
        } else {
            bail_code!(
                Code::InvalidArg,
                "{what}: argument {}: expected a number or an options object, got {}",
                i + 2,
                js::describe(env, v)
            );
        }
    }
    Ok((numbers, options))
}

/// `arange(end)`, `arange(start, end, step?)`: values from start (inclusive) to end
/// (exclusive). int64 when every bound is an integer (as in PyTorch), else float32.
/// Options may follow the last number given: `arange(5, {dtype: 'float32'})`.
#[napi(
    ts_args_type = "start: number, end?: number | TensorOptions, step?: number | TensorOptions, options?: TensorOptions"
)]
pub fn arange(
    env: Env,
    start: Num,
    end: Option<Unknown>,
    step: Option<Unknown>,
    options: Option<Unknown>,
) -> Outcome<JsTensor> {
    guard(|| {
        let start = start.read("start")?;
        let (rest, options) = numbers_then_options(env.raw(), &[end, step, options], "arange")?;
        let (start, end, step) = match rest.as_slice() {
            [] => (0.0, start, 1.0),
            [end] => (start, *end, 1.0),
            [end, step, ..] => (start, *end, *step),
        };
        if step == 0.0 || !step.is_finite() || !start.is_finite() || !end.is_finite() {
            bail_code!(
                Code::InvalidArg,
                "arange: start, end and step must be finite and step non-zero"
            );
        }
        if (end - start) / step < 0.0 {
            bail_code!(
                Code::InvalidArg,
                "arange: step {step} does not lead from {start} to {end}"
            );
        }
        let o = self::options(env.raw(), options, false)?;
        let integral = [start, end, step].iter().all(|x| x.fract() == 0.0);
        let kind = o
            .dtype
            .unwrap_or(if integral { Kind::Int64 } else { Kind::Float });
        let t = ffi::scalar::arange(start, end, step, (kind, o.device()))?;
        finish(t, &o)
    })
    .into()
}

/// `steps` values evenly spaced from `start` to `end`, both included.
#[napi]
pub fn linspace(start: Num, end: Num, steps: Int, options: Option<FactoryOptions>) -> Outcome<JsTensor> {
    guard(|| {
        let (start, end) = (start.read("start")?, end.read("end")?);
        let steps = args::shape(&[steps.read("steps")? as f64], "steps")?[0];
        let o = factory_options(options)?;
        let t = ffi::scalar::linspace(start, end, steps, (o.dtype.unwrap_or(Kind::Float), o.device()))?;
        finish(t, &o)
    })
    .into()
}

/// An identity matrix of n rows and m (default n) columns: `eye(3)`, `eye(2, 3)`,
/// `eye(3, {dtype: 'int64'})`.
#[napi(ts_args_type = "n: number, m?: number | TensorOptions, options?: TensorOptions")]
pub fn eye(env: Env, n: Int, m: Option<Unknown>, options: Option<Unknown>) -> Outcome<JsTensor> {
    guard(|| {
        let n = args::shape(&[n.read("n")? as f64], "n")?[0];
        let (rest, options) = numbers_then_options(env.raw(), &[m, options], "eye")?;
        let m = args::shape(&[rest.first().copied().unwrap_or(n as f64)], "m")?[0];
        let o = self::options(env.raw(), options, false)?;
        let t = Tensor::f_eye_m(n, m, (o.dtype.unwrap_or(Kind::Float), o.device()))?;
        finish(t, &o)
    })
    .into()
}

/// Flattened nested-array data and its inferred shape.
struct Nested {
    /// The dtype asked for, when it is an integer one: values are range-checked as read.
    int_kind: Option<(Kind, (i128, i128))>,
    shape: Vec<i64>,
    floats: Vec<f64>,
    ints: Vec<i64>,
    saw_number: bool,
    saw_bigint: bool,
    saw_bool: bool,
}

impl Nested {
    fn walk(&mut self, env: RawEnv, v: Val, depth: usize) -> anyhow::Result<()> {
        if depth > args::MAX_DIMS {
            bail_code!(
                Code::InvalidArg,
                "data: nested deeper than {} levels (a tensor has at most {} dimensions)",
                args::MAX_DIMS,
                args::MAX_DIMS
            );
        }
        if js::is_array(env, v)? {
            let len = js::array_len(env, v)? as i64;
            match self.shape.get(depth) {
                None if self.floats.is_empty() && depth == self.shape.len() => self.shape.push(len),
                Some(&expected) if expected == len => {}
                Some(&expected) => bail_code!(
                    Code::InvalidArg,
                    "data: ragged nested array: expected length {expected} at depth {depth}, got {len}"
                ),
                None => bail_code!(
                    Code::InvalidArg,
                    "data: ragged nested array: an array at depth {depth} where other entries are numbers"
                ),
            }
            for i in 0..len as u32 {
                self.walk(env, js::element(env, v, i)?, depth + 1)?;
            }
            return Ok(());
        }
        if depth != self.shape.len() {
            bail_code!(
                Code::InvalidArg,
                "data: ragged nested array: a scalar at depth {depth} where arrays of depth {} were seen",
                self.shape.len()
            );
        }
        let (f, i) = match js::type_of(env, v)? {
            napi::sys::ValueType::napi_number => {
                self.saw_number = true;
                let x = js::number(env, v)?;
                if let Some((kind, (lo, hi))) = self.int_kind {
                    // Compared as doubles, as PyTorch does (255.9 overflows uint8); int64's
                    // maximum rounds up to 2^63, itself out of range.
                    let top = hi as f64;
                    let above = if top as i128 > hi { x >= top } else { x > top };
                    if x.is_nan() || x < lo as f64 || above {
                        return Err(overflow(x, kind));
                    }
                }
                (x, x as i64)
            }
            napi::sys::ValueType::napi_boolean => {
                self.saw_bool = true;
                let b = js::boolean(env, v)? as i64;
                (b as f64, b)
            }
            napi::sys::ValueType::napi_bigint => {
                self.saw_bigint = true;
                let b = js::bigint(env, v, "data")?;
                if let Some((kind, (lo, hi))) = self.int_kind {
                    if !(lo..=hi).contains(&(b as i128)) {
                        return Err(overflow(b, kind));
                    }
                }
                (b as f64, b)
            }
            _ => bail_code!(
                Code::InvalidArg,
                "data: expected numbers, booleans or BigInts, got {}",
                js::describe(env, v)
            ),
        };
        self.floats.push(f);
        self.ints.push(i);
        Ok(())
    }
}

/// Nested data as a tensor of `kind` (default: float32 for numbers, int64 for BigInts, bool
/// for booleans). Numbers are cast once, from f64, so `{dtype: 'float64'}` and integer dtypes
/// keep every value a JS number can hold exactly.
fn from_nested(env: RawEnv, v: Val, kind: Option<Kind>) -> anyhow::Result<Tensor> {
    let mut n = Nested {
        int_kind: kind.and_then(|k| int_range(k).map(|r| (k, r))),
        shape: vec![],
        floats: vec![],
        ints: vec![],
        saw_number: false,
        saw_bigint: false,
        saw_bool: false,
    };
    n.walk(env, v, 0)?;
    // An empty list has no elements to type: float32, like torch.tensor([]).
    let default = if n.saw_number || (!n.saw_bigint && !n.saw_bool) {
        Kind::Float
    } else if n.saw_bigint {
        Kind::Int64
    } else {
        Kind::Bool
    };
    let kind = kind.unwrap_or(default);
    // Integers go through int64 (exact up to 2^63), the rest through float64.
    let exact_ints =
        !n.saw_number || (!dtype::is_floating(kind) && n.floats.iter().all(|f| f.fract() == 0.0));
    let t = if exact_ints {
        Tensor::f_from_slice(&n.ints)?
    } else {
        Tensor::f_from_slice(&n.floats)?
    };
    Ok(t.f_to_kind(kind)?.f_reshape(&n.shape)?)
}

/// The range of an integer dtype: as PyTorch, a value outside it (or NaN) is an overflow
/// error, not a silent wrap (`tensor([-1, 256], {dtype: 'uint8'})`); fractions within range
/// truncate.
fn int_range(kind: Kind) -> Option<(i128, i128)> {
    Some(match kind {
        Kind::Uint8 => (0, 255),
        Kind::Int8 => (-128, 127),
        Kind::Int16 => (-32768, 32767),
        Kind::Int => (i32::MIN as i128, i32::MAX as i128),
        Kind::Int64 => (i64::MIN as i128, i64::MAX as i128),
        _ => return None,
    })
}

fn overflow(value: impl std::fmt::Display, kind: Kind) -> anyhow::Error {
    crate::error::fail(
        Code::InvalidArg,
        format!(
            "data: value {value} cannot be converted to type {} without overflow",
            dtype::name(kind)
        ),
    )
}

/// Copies a TypedArray into a 1-D tensor of its own type (float16/bfloat16 bits for a
/// Uint16Array when `kind` says so).
pub fn from_typed_array(view: &js::TypedArrayView, kind: Option<Kind>) -> anyhow::Result<Tensor> {
    let source = match (view.type_name, kind) {
        ("Uint16Array", Some(k @ (Kind::Half | Kind::BFloat16))) => k,
        ("Uint16Array", _) => bail_code!(Code::InvalidArg, "data: a Uint16Array holds float16 or bfloat16 bits; pass {{dtype: 'float16'}} or {{dtype: 'bfloat16'}}"),
        ("Uint32Array", _) => {
            let vals: Vec<i64> = view.bytes.chunks_exact(4).map(|c| u32::from_ne_bytes(c.try_into().unwrap()) as i64).collect();
            return Ok(Tensor::f_from_slice(&vals)?);
        }
        ("BigUint64Array", _) => bail_code!(Code::InvalidArg, "data: BigUint64Array is not supported (int64 is the widest integer dtype); use a BigInt64Array"),
        (name, _) => dtype::from_typed_array(name).context("unsupported TypedArray")?,
    };
    Ok(Tensor::f_from_data_size(view.bytes, &[view.len as i64], source)?)
}

/// A new tensor holding a copy of `data`: nested arrays of numbers, booleans or BigInts, a
/// scalar, a TypedArray (its own dtype; reshape with `options.shape`), or a Tensor (copied).
/// Numbers default to float32, booleans to bool, BigInts to int64.
#[napi]
pub fn tensor(data: TensorData, options: Option<TensorOptions>) -> Outcome<JsTensor> {
    guard(|| {
        let o = options_of(options.map(|o| o.raw()), true)?;
        let convert::Raw { env: raw, val: data } = data.raw();
        let base = if let Some(t) = js::with_typed_array(raw, data, |view| from_typed_array(view, o.dtype))? {
            t
        } else if let Some(other) =
            super::operands::with_tensor(raw, data, |t| t.get().and_then(|t| deep_copy(&t)))
        {
            other?
        } else {
            from_nested(raw, data, o.dtype)?
        };
        let numel = base.numel() as i64;
        // `shape` views the data as that shape, whatever form it came in (a flat TypedArray,
        // nested arrays, a tensor); the element count must match.
        let base = match &o.shape {
            Some(s) if s.iter().product::<i64>() != numel => bail_code!(
                Code::ShapeMismatch,
                "options.shape: {numel} elements cannot be viewed as {s:?}"
            ),
            Some(s) => base.f_reshape(s)?,
            None => base,
        };
        let t = base.f_to_device(o.device())?;
        let t = match o.dtype {
            Some(k) if k != t.kind() => t.f_to_kind(k)?,
            _ => t,
        };
        finish(t, &o)
    })
    .into()
}

/// A copy with its own storage, detached from autograd (what `torch.tensor(t)` gives).
pub fn deep_copy(t: &Tensor) -> anyhow::Result<Tensor> {
    let mut out = t.f_empty_like()?;
    out.f_copy_(&t.f_detach()?)?;
    Ok(out)
}
