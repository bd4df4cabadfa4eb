//! Reading values out: `toArray()` (nested arrays), `toTypedArray()` (a copy), `item()`.
use super::JsTensor;
use crate::error::bail_code;
use crate::error::{guard, Code};
use crate::napi::js::{self, Env as RawEnv, Val};
use crate::napi::outcome::{js_result, Outcome};
use napi_derive::napi;
use tch::{Device, Kind, Tensor};
use torch_core::dtype;

/// A contiguous CPU copy (or the tensor itself when it already is one), detached from autograd.
pub fn host(t: &Tensor) -> anyhow::Result<Tensor> {
    Ok(t.f_detach()?.f_to_device(Device::Cpu)?.f_contiguous()?)
}

/// The raw bytes of a tensor's elements in row-major order.
pub fn bytes(t: &Tensor) -> anyhow::Result<Vec<u8>> {
    let h = host(t)?;
    let numel = h.numel();
    let mut out = vec![0u8; numel * h.kind().elt_size_in_bytes()];
    h.f_copy_data_u8(&mut out, numel)?;
    Ok(out)
}

/// Element values widened for JS: f64 for floats and integers, bool for bool.
pub enum Values {
    Numbers(Vec<f64>),
    Bools(Vec<bool>),
}

pub fn values(t: &Tensor) -> anyhow::Result<Values> {
    let h = host(t)?;
    Ok(if h.kind() == Kind::Bool {
        let v = Vec::<i64>::try_from(&h.f_to_kind(Kind::Int64)?.f_reshape([-1])?)?;
        Values::Bools(v.into_iter().map(|x| x != 0).collect())
    } else {
        Values::Numbers(Vec::<f64>::try_from(
            &h.f_to_kind(Kind::Double)?.f_reshape([-1])?,
        )?)
    })
}

fn scalar(env: RawEnv, values: &Values, i: usize) -> anyhow::Result<Val> {
    match values {
        Values::Numbers(v) => js::new_number(env, v[i]),
        Values::Bools(v) => js::new_bool(env, v[i]),
    }
}

fn nest(env: RawEnv, values: &Values, shape: &[i64], offset: &mut usize) -> anyhow::Result<Val> {
    let Some((&n, rest)) = shape.split_first() else {
        *offset += 1;
        return scalar(env, values, *offset - 1);
    };
    if let (true, Values::Numbers(v)) = (rest.is_empty(), values) {
        let row = &v[*offset..*offset + n as usize];
        *offset += n as usize;
        return js::new_number_array(env, row);
    }
    let items = (0..n)
        .map(|_| nest(env, values, rest, offset))
        .collect::<anyhow::Result<Vec<_>>>()?;
    js::new_array(env, items)
}

js_result!(
    /// `toArray()`'s answer: the values and the shape to nest them by.
    NestedValues((Values, Vec<i64>)) as "NestedArray",
    |env, v| nest(env, &v.0, &v.1, &mut 0)
);
js_result!(
    /// `toTypedArray()`'s answer: the TypedArray's class and the bytes it copies.
    TypedArrayCopy((&'static str, Vec<u8>)) as "TensorTypedArray",
    |env, v| js::new_typed_array(env, v.0, &v.1)
);
js_result!(
    /// `item()`'s answer: a number, or a boolean for bool.
    Item(Values) as "number | boolean",
    |env, v| scalar(env, &v, 0)
);

#[napi]
impl JsTensor {
    /// The values as nested arrays (a number or boolean for a 0-dim tensor). int64 values
    /// beyond ±2^53 lose precision as JS numbers: use `toTypedArray()` (BigInt64Array) for those.
    #[napi(ts_return_type = "NestedArray")]
    pub fn to_array(&self) -> Outcome<NestedValues> {
        guard(|| {
            let t = self.get()?;
            torch_core::args::check_numel(&t.size(), "toArray")?;
            Ok(NestedValues((values(&t)?, t.size())))
        })
        .into()
    }

    /// A copy of the elements, row-major, in the dtype's TypedArray: Float32Array, Float64Array,
    /// Int8Array, Uint8Array (uint8 and bool), Int16Array, Int32Array, BigInt64Array (int64),
    /// Uint16Array (float16 and bfloat16 raw bits).
    #[napi(ts_return_type = "TensorTypedArray")]
    pub fn to_typed_array(&self) -> Outcome<TypedArrayCopy> {
        guard(|| {
            let t = self.get()?;
            let Some(name) = dtype::typed_array_name(t.kind()) else {
                bail_code!(
                    Code::DTypeMismatch,
                    "toTypedArray: dtype {} has no TypedArray",
                    dtype::name(t.kind())
                );
            };
            Ok(TypedArrayCopy((name, bytes(&t)?)))
        })
        .into()
    }

    /// The value of a one-element tensor as a number (boolean for bool).
    #[napi(ts_return_type = "number | boolean")]
    pub fn item(&self) -> Outcome<Item> {
        guard(|| {
            let t = self.get()?;
            let n = t.numel();
            if n != 1 {
                bail_code!(
                    Code::ShapeMismatch,
                    "item: the tensor has {n} elements (shape {:?}); item() needs exactly one",
                    t.size()
                );
            }
            Ok(Item(values(&t)?))
        })
        .into()
    }
}
