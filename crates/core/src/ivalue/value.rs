//! TorchScript values (IValues) on the Rust side, the schema types they are checked against,
//! and the coercion that decides what a JS number is: JS has one number type, TorchScript has
//! `int` and `float`, so the method's declared schema settles it (`2` for a `float` argument
//! becomes 2.0; `2.5` for an `int` argument is an error naming the argument).
use crate::error::bail_code;
use crate::error::Code;
use anyhow::Result;

/// A value crossing between JS and TorchScript.
#[derive(Debug)]
pub enum Value {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    /// A JS number not yet typed by a schema.
    Number(f64),
    Str(String),
    Tensor(tch::Tensor),
    /// Element type annotation (`Some("int")`) once coerced against a schema.
    List(Option<String>, Vec<Value>),
    Tuple(Vec<Value>),
    /// Key and value type annotations once coerced; entries in insertion order.
    Dict(Option<(String, String)>, Vec<(Value, Value)>),
}

/// A TorchScript type as a method schema declares it.
#[derive(Debug, Clone, PartialEq)]
pub enum IType {
    Tensor,
    Int,
    Float,
    Bool,
    Str,
    NoneType,
    /// `number` / `Scalar`: int or float, whichever the value is.
    Number,
    Any,
    Optional(Box<IType>),
    List(Box<IType>),
    Tuple(Vec<IType>),
    Dict(Box<IType>, Box<IType>),
    /// Anything else (Device, objects): passed through by value kind.
    Other(String),
}

impl IType {
    /// Parses TorchScript's annotation string (`Dict[str, List[Optional[Tensor]]]`).
    pub fn parse(s: &str) -> IType {
        let s = s.trim();
        let Some((head, inner)) = s.strip_suffix(']').and_then(|t| t.split_once('[')) else {
            return match s {
                "Tensor" => IType::Tensor,
                "int" | "SymInt" => IType::Int,
                "float" => IType::Float,
                "bool" => IType::Bool,
                "str" => IType::Str,
                "NoneType" | "None" => IType::NoneType,
                "number" | "Scalar" => IType::Number,
                "Any" => IType::Any,
                other => IType::Other(other.to_string()),
            };
        };
        let args: Vec<IType> = split_top_level(inner).into_iter().map(IType::parse).collect();
        match (head, args.as_slice()) {
            ("Optional", [t]) => IType::Optional(Box::new(t.clone())),
            ("List", [t]) => IType::List(Box::new(t.clone())),
            ("Dict", [k, v]) => IType::Dict(Box::new(k.clone()), Box::new(v.clone())),
            ("Tuple", _) if inner.trim() == "()" => IType::Tuple(vec![]),
            ("Tuple", _) => IType::Tuple(args),
            ("Union", [a, IType::NoneType]) | ("Union", [IType::NoneType, a]) => {
                IType::Optional(Box::new(a.clone()))
            }
            _ => IType::Other(s.to_string()),
        }
    }

    /// Back to TorchScript's spelling, for typed containers built in C++.
    pub fn annotation(&self) -> String {
        match self {
            IType::Tensor => "Tensor".into(),
            IType::Int => "int".into(),
            IType::Float => "float".into(),
            IType::Bool => "bool".into(),
            IType::Str => "str".into(),
            IType::NoneType => "NoneType".into(),
            IType::Number => "number".into(),
            IType::Any => "Any".into(),
            IType::Optional(t) => format!("Optional[{}]", t.annotation()),
            IType::List(t) => format!("List[{}]", t.annotation()),
            IType::Tuple(ts) if ts.is_empty() => "Tuple[()]".into(),
            IType::Tuple(ts) => {
                let inner: Vec<String> = ts.iter().map(IType::annotation).collect();
                format!("Tuple[{}]", inner.join(", "))
            }
            IType::Dict(k, v) => format!("Dict[{}, {}]", k.annotation(), v.annotation()),
            IType::Other(s) => s.clone(),
        }
    }
}

/// Splits `a, Dict[b, c], d` at the commas that are not inside brackets.
fn split_top_level(s: &str) -> Vec<&str> {
    let (mut depth, mut start, mut parts) = (0i32, 0usize, Vec::new());
    for (i, c) in s.char_indices() {
        match c {
            '[' | '(' => depth += 1,
            ']' | ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(s[start..].trim());
    parts
}

/// How a value from JS reads in an error message (`crate::args::JsKind`'s words: a `Int` came
/// from a BigInt, a `List` or `Tuple` from an array, a `Dict` from an object or a Map).
pub fn describe(v: &Value) -> String {
    use crate::args::JsKind;
    match v {
        Value::None => JsKind::Null,
        Value::Bool(_) => JsKind::Boolean,
        Value::Int(_) => JsKind::BigInt,
        Value::Float(f) | Value::Number(f) => JsKind::Number(*f),
        Value::Str(_) => JsKind::String,
        Value::Tensor(_) => JsKind::Instance("Tensor"),
        Value::List(..) | Value::Tuple(_) => JsKind::Array,
        Value::Dict(..) => JsKind::Object,
    }
    .to_string()
}

fn is_integral(f: f64) -> bool {
    crate::args::is_integral(f)
}

/// An untyped JS number as TorchScript would see it in an `Any` slot.
fn infer_number(f: f64) -> Value {
    if is_integral(f) {
        Value::Int(f as i64)
    } else {
        Value::Float(f)
    }
}

/// Checks `v` against `ty` and settles numbers; `path` names the argument (`'x'[2]`).
pub fn coerce(v: Value, ty: &IType, path: &str) -> Result<Value> {
    let mismatch = |v: &Value| {
        crate::error::fail(
            Code::InvalidArg,
            format!(
                "argument {path}: expected {}, got {}",
                ty.annotation(),
                describe(v)
            ),
        )
    };
    Ok(match (ty, v) {
        (IType::Optional(_), Value::None) => Value::None,
        (IType::Optional(t), v) => coerce(v, t, path)?,
        (IType::Any | IType::Other(_), v) => coerce_untyped(v),
        (IType::Tensor, v @ Value::Tensor(_)) => v,
        (IType::Int, Value::Number(f)) if is_integral(f) => Value::Int(f as i64),
        (IType::Int, v @ Value::Int(_)) => v,
        (IType::Float, Value::Number(f) | Value::Float(f)) => Value::Float(f),
        (IType::Float, Value::Int(i)) => Value::Float(i as f64),
        (IType::Number, Value::Number(f)) => infer_number(f),
        (IType::Number, v @ (Value::Int(_) | Value::Float(_))) => v,
        (IType::Bool, v @ Value::Bool(_)) => v,
        (IType::Str, v @ Value::Str(_)) => v,
        (IType::NoneType, Value::None) => Value::None,
        (IType::List(t), Value::List(_, items) | Value::Tuple(items)) => {
            let items = coerce_items(items, |_| t, path)?;
            Value::List(Some(t.annotation()), items)
        }
        (IType::Tuple(ts), Value::List(_, items) | Value::Tuple(items)) => {
            if items.len() != ts.len() {
                bail_code!(
                    Code::InvalidArg,
                    "argument {path}: expected {} (length {}), got an array of length {}",
                    ty.annotation(),
                    ts.len(),
                    items.len()
                );
            }
            Value::Tuple(coerce_items(items, |i| &ts[i], path)?)
        }
        (IType::Dict(k, t), Value::Dict(_, entries)) => {
            let mut out = Vec::with_capacity(entries.len());
            for (key, val) in entries {
                let key_path = format!("{path} key {}", describe(&key));
                let key = coerce(numeric_key(key, k), k, &key_path)?;
                let val_path = format!("{path}[{}]", key_label(&key));
                out.push((key, coerce(val, t, &val_path)?));
            }
            Value::Dict(Some((k.annotation(), t.annotation())), out)
        }
        (_, v) => return Err(mismatch(&v)),
    })
}

fn coerce_items<'t>(items: Vec<Value>, ty_of: impl Fn(usize) -> &'t IType, path: &str) -> Result<Vec<Value>> {
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| coerce(item, ty_of(i), &format!("{path}[{i}]")))
        .collect()
}

/// JS object keys are strings: `{"3": "x"}` for a `Dict[int, str]` means key 3.
fn numeric_key(key: Value, ty: &IType) -> Value {
    match (&key, ty) {
        (Value::Str(s), IType::Int | IType::Float | IType::Number) => {
            s.parse::<f64>().map(Value::Number).unwrap_or(key)
        }
        _ => key,
    }
}

fn key_label(key: &Value) -> String {
    match key {
        Value::Str(s) => format!("'{s}'"),
        Value::Int(i) => i.to_string(),
        other => describe(other),
    }
}

/// Settles numbers where no schema says what they are (`Any`, outputs of untyped helpers).
pub fn coerce_untyped(v: Value) -> Value {
    match v {
        Value::Number(f) => infer_number(f),
        Value::List(t, items) => Value::List(t, items.into_iter().map(coerce_untyped).collect()),
        Value::Tuple(items) => Value::Tuple(items.into_iter().map(coerce_untyped).collect()),
        Value::Dict(t, entries) => Value::Dict(
            t,
            entries
                .into_iter()
                .map(|(k, v)| (coerce_untyped(k), coerce_untyped(v)))
                .collect(),
        ),
        v => v,
    }
}

/// A method's schema with its argument annotations parsed: built once per method (the module
/// caches it), so a call only checks values.
#[derive(Debug)]
pub struct Signature {
    method: String,
    args: Vec<(super::schema::SchemaArg, IType)>,
    /// `forward(x: Tensor, n: int)`, for error messages.
    text: String,
}

impl Signature {
    pub fn new(method: &str, schema: &super::schema::MethodSchema) -> Signature {
        let declared: Vec<String> = schema
            .args
            .iter()
            .map(|a| format!("{}: {}", a.name, a.type_str))
            .collect();
        Signature {
            method: method.to_string(),
            args: schema
                .args
                .iter()
                .map(|a| (a.clone(), IType::parse(&a.type_str)))
                .collect(),
            text: format!("{method}({})", declared.join(", ")),
        }
    }
}

/// Checks a call's arguments against a method's signature: arity, then each value's type.
pub fn coerce_args(sig: &Signature, args: Vec<Value>) -> Result<Vec<Value>> {
    let signature = &sig.text;
    if args.len() > sig.args.len() {
        bail_code!(
            Code::InvalidArg,
            "{signature} takes {} argument(s), got {}",
            sig.args.len(),
            args.len()
        );
    }
    if let Some((missing, _)) = sig.args[args.len()..].iter().find(|(a, _)| !a.has_default) {
        bail_code!(
            Code::InvalidArg,
            "{signature}: missing argument '{}' ({}); got {} argument(s)",
            missing.name,
            missing.type_str,
            args.len()
        );
    }
    args.into_iter()
        .zip(&sig.args)
        .map(|(v, (a, ty))| coerce(v, ty, &format!("'{}' of {}()", a.name, sig.method)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ivalue::schema::{MethodSchema, SchemaArg};

    fn ty(s: &str) -> IType {
        IType::parse(s)
    }

    #[test]
    fn parses_nested_annotations() {
        let t = ty("Dict[str, List[Tuple[int, Optional[Tensor]]]]");
        assert_eq!(
            t,
            IType::Dict(
                Box::new(IType::Str),
                Box::new(IType::List(Box::new(IType::Tuple(vec![
                    IType::Int,
                    IType::Optional(Box::new(IType::Tensor))
                ]))))
            )
        );
        assert_eq!(t.annotation(), "Dict[str, List[Tuple[int, Optional[Tensor]]]]");
        assert_eq!(ty("Tuple[()]"), IType::Tuple(vec![]));
        assert_eq!(ty("Union[int, NoneType]"), IType::Optional(Box::new(IType::Int)));
    }

    #[test]
    fn numbers_follow_the_schema() {
        assert!(
            matches!(coerce(Value::Number(2.0), &IType::Float, "'x'").unwrap(), Value::Float(f) if f == 2.0)
        );
        assert!(matches!(
            coerce(Value::Number(2.0), &IType::Int, "'x'").unwrap(),
            Value::Int(2)
        ));
        let e = coerce(Value::Number(2.5), &IType::Int, "'n' of forward()").unwrap_err();
        assert_eq!(
            e.to_string(),
            "argument 'n' of forward(): expected int, got number 2.5"
        );
        assert!(matches!(
            coerce(Value::Number(2.5), &IType::Any, "'x'").unwrap(),
            Value::Float(_)
        ));
        assert!(matches!(
            coerce(Value::Number(3.0), &IType::Number, "'x'").unwrap(),
            Value::Int(3)
        ));
    }

    #[test]
    fn containers_carry_their_types() {
        let v = Value::List(None, vec![Value::Number(1.0), Value::Number(2.0)]);
        match coerce(v, &ty("List[float]"), "'x'").unwrap() {
            Value::List(Some(t), items) => {
                assert_eq!(t, "float");
                assert!(matches!(items[0], Value::Float(_)));
            }
            other => panic!("{other:?}"),
        }
        let d = Value::Dict(None, vec![(Value::Str("3".into()), Value::Str("c".into()))]);
        match coerce(d, &ty("Dict[int, str]"), "'x'").unwrap() {
            Value::Dict(Some((k, v)), entries) => {
                assert_eq!((k.as_str(), v.as_str()), ("int", "str"));
                assert!(matches!(entries[0].0, Value::Int(3)));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn errors_name_the_nested_position() {
        let v = Value::List(None, vec![Value::Number(1.0), Value::Str("a".into())]);
        let e = coerce(v, &ty("List[int]"), "'xs'").unwrap_err();
        assert_eq!(e.to_string(), "argument 'xs'[1]: expected int, got a string");
        let t = Value::List(None, vec![Value::Number(1.0)]);
        let e = coerce(t, &ty("Tuple[int, str]"), "'t'").unwrap_err();
        assert!(e
            .to_string()
            .contains("expected Tuple[int, str] (length 2), got an array of length 1"));
    }

    #[test]
    fn arity_is_checked_against_the_schema() {
        let schema = MethodSchema {
            args: vec![
                SchemaArg {
                    name: "x".into(),
                    type_str: "Tensor".into(),
                    has_default: false,
                },
                SchemaArg {
                    name: "n".into(),
                    type_str: "int".into(),
                    has_default: true,
                },
            ],
            returns: "Tensor".into(),
        };
        let e = coerce_args(&Signature::new("forward", &schema), vec![]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "forward(x: Tensor, n: int): missing argument 'x' (Tensor); got 0 argument(s)"
        );
        let three = vec![Value::None, Value::None, Value::None];
        let e = coerce_args(&Signature::new("forward", &schema), three).unwrap_err();
        assert_eq!(
            e.to_string(),
            "forward(x: Tensor, n: int) takes 2 argument(s), got 3"
        );
    }
}
