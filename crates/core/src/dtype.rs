//! The ten dtypes torch-node exposes: their JS names, libtorch kinds and TypedArray types.
use crate::error::Code;
use anyhow::Result;
use tch::Kind;

/// `(name, kind, TypedArray)` — the one table every dtype conversion reads.
/// float16 and bfloat16 travel as raw bit patterns in a Uint16Array (Node 20 has no
/// Float16Array); bool as 0/1 bytes in a Uint8Array.
const DTYPES: [(&str, Kind, &str); 10] = [
    ("float32", Kind::Float, "Float32Array"),
    ("float64", Kind::Double, "Float64Array"),
    ("float16", Kind::Half, "Uint16Array"),
    ("bfloat16", Kind::BFloat16, "Uint16Array"),
    ("int8", Kind::Int8, "Int8Array"),
    ("uint8", Kind::Uint8, "Uint8Array"),
    ("int16", Kind::Int16, "Int16Array"),
    ("int32", Kind::Int, "Int32Array"),
    ("int64", Kind::Int64, "BigInt64Array"),
    ("bool", Kind::Bool, "Uint8Array"),
];

/// PyTorch's aliases, accepted on input (`torch.float` is float32, `torch.long` int64, ...).
const ALIASES: [(&str, &str); 8] = [
    ("float", "float32"),
    ("double", "float64"),
    ("half", "float16"),
    ("long", "int64"),
    ("int", "int32"),
    ("short", "int16"),
    ("char", "int8"),
    ("byte", "uint8"),
];

/// Parses a dtype name (`"float32"`, also `"torch.float32"` and PyTorch's aliases).
pub fn parse(name: &str) -> Result<Kind> {
    let bare = name.strip_prefix("torch.").unwrap_or(name);
    let canonical = ALIASES
        .iter()
        .find(|(a, _)| *a == bare)
        .map(|(_, c)| *c)
        .unwrap_or(bare);
    DTYPES
        .iter()
        .find(|(n, _, _)| *n == canonical)
        .map(|(_, k, _)| *k)
        .ok_or_else(|| {
            let names: Vec<&str> = DTYPES.iter().map(|(n, _, _)| *n).collect();
            crate::error::fail(
                Code::InvalidArg,
                format!(
                    "dtype: unknown dtype '{name}'; expected one of {}",
                    names.join(", ")
                ),
            )
        })
}

/// The JS name of a kind; kinds outside the ten (complex, quantized) keep libtorch's name.
pub fn name(kind: Kind) -> String {
    DTYPES
        .iter()
        .find(|(_, k, _)| *k == kind)
        .map(|(n, _, _)| n.to_string())
        .unwrap_or_else(|| format!("{kind:?}").to_lowercase())
}

/// The TypedArray a tensor of this kind reads into.
pub fn typed_array_name(kind: Kind) -> Option<&'static str> {
    DTYPES.iter().find(|(_, k, _)| *k == kind).map(|(_, _, t)| *t)
}

/// The dtype a TypedArray becomes when no dtype is given; Uint16Array has none (it carries
/// float16 or bfloat16 bits, which only the caller knows).
pub fn from_typed_array(array_type: &str) -> Option<Kind> {
    match array_type {
        "Uint16Array" => None,
        "Uint8ClampedArray" => Some(Kind::Uint8),
        _ => DTYPES
            .iter()
            .find(|(_, k, t)| *t == array_type && *k != Kind::Bool)
            .map(|(_, k, _)| *k),
    }
}

pub fn is_floating(kind: Kind) -> bool {
    matches!(kind, Kind::Float | Kind::Double | Kind::Half | Kind::BFloat16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_and_aliases() {
        assert_eq!(parse("float32").unwrap(), Kind::Float);
        assert_eq!(parse("torch.int64").unwrap(), Kind::Int64);
        assert_eq!(parse("long").unwrap(), Kind::Int64);
        assert_eq!(parse("bfloat16").unwrap(), Kind::BFloat16);
    }

    #[test]
    fn unknown_dtype_names_the_choices() {
        let e = parse("float128").unwrap_err();
        assert!(e.to_string().contains("unknown dtype 'float128'"));
        assert!(e.to_string().contains("bfloat16"));
    }

    #[test]
    fn round_trips_every_dtype() {
        for (n, k, _) in DTYPES {
            assert_eq!(name(parse(n).unwrap()), n);
            assert_eq!(name(k), n);
        }
        assert_eq!(from_typed_array("Uint8Array"), Some(Kind::Uint8));
        assert_eq!(from_typed_array("BigInt64Array"), Some(Kind::Int64));
        assert_eq!(from_typed_array("Uint16Array"), None);
    }
}
