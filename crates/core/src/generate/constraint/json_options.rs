//! The JSON options every schema compiles with (llguidance's `x-guidance`), and the boolean
//! fields the option readers share: read by `format` and `tools` alike, so neither imports the
//! other for them.
use crate::error::{bail_code, Code};
use anyhow::Result;
use llguidance::JsonCompileOptions;
use serde_json::{json, Value as Json};

/// An optional boolean field: `default` where it is absent or null; anything but a boolean is
/// InvalidArg naming the field (`at`).
pub(crate) fn flag(value: Option<&Json>, default: bool, at: &str) -> Result<bool> {
    match value {
        None | Some(Json::Null) => Ok(default),
        Some(Json::Bool(b)) => Ok(*b),
        Some(_) => bail_code!(Code::InvalidArg, "{at} must be a boolean"),
    }
}

/// How a JSON value is written: no free whitespace (a small model left free to indent can
/// indent forever), separators as Python's `json.dumps` writes them, the most common style in
/// what models read. `lenient` ignores keywords llguidance cannot enforce.
fn json_options(strict: bool) -> Json {
    let options = JsonCompileOptions {
        item_separator: ", ".into(),
        key_separator: ": ".into(),
        whitespace_flexible: false,
        lenient: !strict,
        ..JsonCompileOptions::default()
    };
    serde_json::to_value(options).unwrap_or_default()
}

/// `schema` with torch-node's JSON options, as llguidance reads them (`x-guidance`).
pub(crate) fn with_options(schema: &Json, strict: bool, at: &str) -> Result<Json> {
    let mut schema = match schema {
        Json::Bool(true) => json!({}),
        Json::Bool(false) => bail_code!(Code::InvalidArg, "{at} is false: no value satisfies it"),
        Json::Object(_) => schema.clone(),
        _ => bail_code!(Code::InvalidArg, "{at} must be a JSON Schema (an object)"),
    };
    let Some(obj) = schema.as_object_mut() else {
        bail_code!(Code::InvalidArg, "{at} must be a JSON Schema (an object)");
    };
    if obj.contains_key("x-guidance") {
        bail_code!(
            Code::InvalidArg,
            "{at}: 'x-guidance' is not accepted (use strict)"
        );
    }
    obj.insert("x-guidance".into(), json_options(strict));
    Ok(schema)
}
