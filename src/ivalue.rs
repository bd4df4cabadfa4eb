//! JS values <-> [`Value`]: Tensor, number, boolean, string, null/undefined <-> None, Array <->
//! List/Tuple, plain object (string keys) or Map (other keys) <-> Dict, nested.
//! Takes N-API's opaque handles like `crate::napi::js`, which N-API itself validates.
#![allow(clippy::not_unsafe_ptr_arg_deref)]
use crate::error::bail_code;
use crate::error::Code;
use crate::napi::js::{self, Env as RawEnv, Val};
use crate::napi::outcome::js_result;
use crate::tensor::JsTensor;
use napi::sys::ValueType as T;
use torch_core::ivalue::value::Value;

/// Reads a JS value; `path` names it in errors (`input 0`, `input 0[2]`).
pub fn from_js(env: RawEnv, v: Val, path: &str) -> anyhow::Result<Value> {
    read(env, v, path, 0)
}

fn read(env: RawEnv, v: Val, path: &str, depth: usize) -> anyhow::Result<Value> {
    if depth > torch_core::args::MAX_DEPTH {
        bail_code!(
            Code::InvalidArg,
            "{}: nested deeper than {} levels",
            path.split('[').next().unwrap_or(path),
            torch_core::args::MAX_DEPTH
        );
    }
    let from_js = |env, v, path: &str| read(env, v, path, depth + 1);
    Ok(match js::type_of(env, v)? {
        T::napi_undefined | T::napi_null => Value::None,
        T::napi_boolean => Value::Bool(js::boolean(env, v)?),
        T::napi_number => Value::Number(js::number(env, v)?),
        T::napi_bigint => Value::Int(js::bigint(env, v, path)?),
        T::napi_string => Value::Str(js::string(env, v)?),
        T::napi_object if js::is_array(env, v)? => {
            let items = (0..js::array_len(env, v)?)
                .map(|i| from_js(env, js::element(env, v, i)?, &format!("{path}[{i}]")))
                .collect::<anyhow::Result<Vec<_>>>()?;
            Value::List(None, items)
        }
        T::napi_object => object(env, v, path, depth)?,
        _ => bail_code!(
            Code::InvalidArg,
            "{path}: {} has no TorchScript equivalent",
            js::describe(env, v)
        ),
    })
}

fn object(env: RawEnv, v: Val, path: &str, depth: usize) -> anyhow::Result<Value> {
    let from_js = |env, v, path: &str| read(env, v, path, depth + 1);
    if let Some(t) = crate::tensor::operands::with_tensor(env, v, |t| t.get().map(|t| t.shallow_clone())) {
        return Ok(Value::Tensor(t.map_err(|e| e.context(path.to_string()))?));
    }
    if js::is_typed_array(env, v)? {
        bail_code!(
            Code::InvalidArg,
            "{path}: a TypedArray is not a TorchScript value; wrap it with torch.tensor(array, {{shape}})"
        );
    }
    let entries = if js::is_map(env, v)? {
        js::map_entries(env, v)?
            .into_iter()
            .map(|(k, val)| {
                Ok((
                    from_js(env, k, &format!("{path} key"))?,
                    from_js(env, val, &format!("{path} value"))?,
                ))
            })
            .collect::<anyhow::Result<Vec<_>>>()?
    } else {
        js::keys(env, v)?
            .into_iter()
            .map(|k| {
                let val = js::property(env, v, &k)?.unwrap_or(js::null(env)?);
                let val = from_js(env, val, &format!("{path}['{k}']"))?;
                Ok((Value::Str(k), val))
            })
            .collect::<anyhow::Result<Vec<_>>>()?
    };
    Ok(Value::Dict(None, entries))
}

js_result!(
    /// A model's output (a sync call's answer), in its JS form (`to_js`).
    Output(Value) as "IValue",
    |env, v| to_js(env, v)
);

js_result!(
    /// Named tensors as a plain object (`namedParameters()`): `{'fc.weight': Tensor, ...}`.
    TensorRecord(Vec<(String, tch::Tensor)>) as "Record<string, Tensor>",
    |env, fields| {
        let fields = fields
            .into_iter()
            .map(|(name, t)| Ok((name, to_js(env, Value::Tensor(t))?)))
            .collect::<anyhow::Result<Vec<_>>>()?;
        js::new_object(env, fields)
    }
);

/// Builds the JS form of a value: tensors become `Tensor` objects, dicts with string keys plain
/// objects, other dicts `Map`s, tuples and lists arrays, None `null`.
pub fn to_js(env: RawEnv, v: Value) -> anyhow::Result<Val> {
    match v {
        Value::None => js::null(env),
        Value::Bool(b) => js::new_bool(env, b),
        Value::Int(i) => js::new_number(env, i as f64),
        Value::Float(f) | Value::Number(f) => js::new_number(env, f),
        Value::Str(s) => js::new_string(env, &s),
        Value::Tensor(t) => js::value_of(env, JsTensor::new(t)),
        Value::List(_, items) | Value::Tuple(items) => {
            let items = items
                .into_iter()
                .map(|x| to_js(env, x))
                .collect::<anyhow::Result<Vec<_>>>()?;
            js::new_array(env, items)
        }
        Value::Dict(ty, entries) => {
            let string_keys = ty.as_ref().is_some_and(|(k, _)| k == "str")
                || entries.iter().all(|(k, _)| matches!(k, Value::Str(_))) && !entries.is_empty();
            if string_keys {
                let fields = entries
                    .into_iter()
                    .map(|(k, v)| match k {
                        Value::Str(s) => Ok((s, to_js(env, v)?)),
                        other => anyhow::bail!(
                            "dict key {} is not a string",
                            torch_core::ivalue::value::describe(&other)
                        ),
                    })
                    .collect::<anyhow::Result<Vec<_>>>()?;
                js::new_object(env, fields)
            } else {
                let pairs = entries
                    .into_iter()
                    .map(|(k, v)| Ok((to_js(env, k)?, to_js(env, v)?)))
                    .collect::<anyhow::Result<Vec<_>>>()?;
                js::new_map(env, pairs)
            }
        }
    }
}
