//! Argument checks shared by every export: shapes and dims arrive from JS as
//! doubles and must be whole, finite and in range before libtorch sees them (libtorch would
//! abort or throw a C++ backtrace on a negative size).
use crate::error::bail_code;
use crate::error::Code;
use anyhow::Result;

/// Where a model or an image comes from: a file path, or the file's bytes (copied from JS, so
/// they can travel to the thread pool).
pub enum Source {
    Path(String),
    Bytes(Vec<u8>),
}

/// The largest magnitude up to which every integer is exactly a JS number (2^53).
pub const MAX_SAFE: f64 = 9_007_199_254_740_992.0;

/// Whether a JS number is a whole number that an i64 holds exactly (|x| <= 2^53), the one rule
/// for "is this number an int" (Python-scalar typing, TorchScript `int` arguments, shapes).
pub fn is_integral(value: f64) -> bool {
    value.is_finite() && value.fract() == 0.0 && value.abs() <= MAX_SAFE
}

/// A number as JS's `String(x)` writes it (`Infinity`, `1e+21`, `1e-7`, `0` for -0), so native
/// messages say what lib/errors.js's would.
pub fn js_number(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if x == 0.0 {
        return "0".into();
    }
    if (1e-6..1e21).contains(&x.abs()) {
        return format!("{x}");
    }
    let e = format!("{x:e}");
    match e.split_once('e') {
        Some((m, exp)) if !exp.starts_with('-') => format!("{m}e+{exp}"),
        _ => e,
    }
}

/// What a JS value is, as every error message of torch-node names it ("expected a Tensor, got
/// <this>"): the one wording of the addon's readers (`napi::js::describe`), of the coerced
/// TorchScript values (`ivalue::value::describe`) and of lib/ (`errors.js`'s `describe`, which
/// calls the addon's `_describe`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum JsKind<'a> {
    Number(f64),
    String,
    Boolean,
    Undefined,
    Null,
    BigInt,
    Symbol,
    Function,
    Array,
    /// An object whose class has this name (`Tensor`, `AbortSignal`).
    Instance(&'a str),
    /// A plain object, or one whose class cannot be read.
    Object,
}

impl std::fmt::Display for JsKind<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JsKind::Number(x) => write!(f, "number {}", js_number(*x)),
            JsKind::String => f.write_str("a string"),
            JsKind::Boolean => f.write_str("a boolean"),
            JsKind::Undefined => f.write_str("undefined"),
            JsKind::Null => f.write_str("null"),
            JsKind::BigInt => f.write_str("a BigInt"),
            JsKind::Symbol => f.write_str("a symbol"),
            JsKind::Function => f.write_str("a function"),
            JsKind::Array => f.write_str("an array"),
            JsKind::Instance(name) if name.starts_with(['A', 'E', 'I', 'O', 'U']) => write!(f, "an {name}"),
            JsKind::Instance(name) => write!(f, "a {name}"),
            JsKind::Object => f.write_str("an object"),
        }
    }
}

/// A whole number that fits i64, or an InvalidArg error naming `what`.
pub fn integer(value: f64, what: &str) -> Result<i64> {
    if !is_integral(value) {
        bail_code!(Code::InvalidArg, "{what}: expected an integer, got {value}");
    }
    Ok(value as i64)
}

/// The most dimensions a shape may have. libtorch keeps sizes inline up to 5 dims and has no
/// hard limit, but printing, `toArray` and nested data recurse once per dimension: a cap (as
/// JSON parsers cap nesting) keeps hostile input from exhausting the native stack.
pub const MAX_DIMS: usize = 1024;

/// How deeply nested objects and TorchScript values may be (the same reason). Lower than
/// MAX_DIMS: each level of a value reads properties through V8, whose own stack limit (~1 MB on
/// the main thread) would otherwise end a deep walk with a bare RangeError.
pub const MAX_DEPTH: usize = 256;

/// The most threads `setNumThreads` / `setNumInteropThreads` accept (each is an OS thread).
pub const MAX_THREADS: i64 = 1024;

/// A thread count in 1..=MAX_THREADS.
pub fn thread_count(value: f64, what: &str) -> Result<i32> {
    let n = integer(value, what)?;
    if !(1..=MAX_THREADS).contains(&n) {
        bail_code!(
            Code::InvalidArg,
            "{what}: expected 1 to {MAX_THREADS} threads, got {n}"
        );
    }
    Ok(n as i32)
}

/// Refuses more than [`MAX_DIMS`] dimensions, and sizes whose element count overflows int64
/// (libtorch would wrap or throw from deep inside; a borrowed buffer's bounds check would pass).
pub fn check_numel(sizes: &[i64], what: &str) -> Result<i64> {
    if sizes.len() > MAX_DIMS {
        bail_code!(
            Code::InvalidArg,
            "{what}: {} dimensions is more than the {MAX_DIMS} supported",
            sizes.len()
        );
    }
    if sizes.contains(&0) {
        return Ok(0);
    }
    sizes
        .iter()
        .try_fold(1i64, |n, &s| n.checked_mul(s.max(0)))
        .ok_or_else(|| {
            crate::error::fail(
                Code::InvalidArg,
                format!("{what}: {sizes:?} has more elements than an int64 can count"),
            )
        })
}

/// A count of at least 1 (threads, chunks).
pub fn positive(value: f64, what: &str) -> Result<i64> {
    let n = integer(value, what)?;
    if n < 1 {
        bail_code!(Code::InvalidArg, "{what}: must be at least 1, got {n}");
    }
    Ok(n)
}

/// A shape: non-negative integers whose product fits int64.
pub fn shape(values: &[f64], what: &str) -> Result<Vec<i64>> {
    sizes(values, what, false)
}

/// A shape for `view`/`reshape`: non-negative sizes, or -1 once (inferred).
pub fn view_shape(values: &[f64], what: &str) -> Result<Vec<i64>> {
    sizes(values, what, true)
}

fn sizes(values: &[f64], what: &str, one_inferred: bool) -> Result<Vec<i64>> {
    let mut inferred = !one_inferred;
    let sizes = values
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let n = integer(v, &format!("{what}[{i}]"))?;
            if n == -1 && !inferred {
                inferred = true;
            } else if n < 0 {
                bail_code!(
                    Code::InvalidArg,
                    "{what}[{i}]: sizes must be non-negative{}, got {n}",
                    if one_inferred { " (or one -1)" } else { "" }
                );
            }
            Ok(n)
        })
        .collect::<Result<Vec<i64>>>()?;
    check_numel(&sizes, what)?;
    Ok(sizes)
}

/// A dimension index for a tensor of `ndim` dims; negative counts from the end, as in PyTorch.
pub fn dim(value: f64, ndim: usize, what: &str) -> Result<i64> {
    let d = integer(value, what)?;
    let n = ndim.max(1) as i64;
    if d < -n || d >= n {
        bail_code!(
            Code::InvalidArg,
            "{what}: dimension {d} is out of range for a tensor of {ndim} dimension(s) (expected {} to {})",
            -n,
            n - 1
        );
    }
    Ok(if d < 0 { d + n } else { d })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_in_js() {
        let cases = [
            (5.0, "5"),
            (-0.0, "0"),
            (2.5, "2.5"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1e21, "1e+21"),
            (1.5e300, "1.5e+300"),
            (1e-7, "1e-7"),
            (0.000001, "0.000001"),
            (123456789012345680000.0, "123456789012345680000"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
            (f64::NAN, "NaN"),
        ];
        for (x, js) in cases {
            assert_eq!(js_number(x), js, "{x}");
        }
    }

    #[test]
    fn kinds_read_as_lib_errors_js_says_them() {
        let cases = [
            (JsKind::Number(1e21), "number 1e+21"),
            (JsKind::Number(-0.0), "number 0"),
            (JsKind::Undefined, "undefined"),
            (JsKind::Array, "an array"),
            (JsKind::Instance("AbortSignal"), "an AbortSignal"),
            (JsKind::Instance("Tensor"), "a Tensor"),
            (JsKind::Object, "an object"),
        ];
        for (kind, words) in cases {
            assert_eq!(kind.to_string(), words);
        }
    }

    use crate::error::describe;

    #[test]
    fn shapes_must_be_whole_and_non_negative() {
        assert_eq!(shape(&[2.0, 3.0], "shape").unwrap(), vec![2, 3]);
        let (code, msg) = describe(&shape(&[2.0, -1.0], "shape").unwrap_err());
        assert_eq!(code, Code::InvalidArg);
        assert_eq!(msg, "shape[1]: sizes must be non-negative, got -1");
        let (_, msg) = describe(&shape(&[1.5], "shape").unwrap_err());
        assert_eq!(msg, "shape[0]: expected an integer, got 1.5");
        assert!(shape(&[f64::NAN], "shape").is_err());
    }

    #[test]
    fn shapes_whose_element_count_overflows_are_refused() {
        let big = 4_294_967_296.0;
        let (code, msg) = describe(&shape(&[big, big], "shape").unwrap_err());
        assert_eq!(code, Code::InvalidArg);
        assert!(msg.contains("more elements than an int64 can count"), "{msg}");
        assert!(
            shape(&[big, big, 0.0], "shape").is_ok(),
            "a zero size makes the product 0"
        );
        assert!(shape(&vec![1.0; MAX_DIMS + 1], "shape").is_err());
        assert!(thread_count(4_294_967_297.0, "n").is_err());
        assert!(thread_count(5000.0, "n").is_err());
        assert_eq!(thread_count(2.0, "n").unwrap(), 2);
    }

    #[test]
    fn view_shapes_allow_one_inferred_size() {
        assert_eq!(view_shape(&[-1.0, 3.0], "shape").unwrap(), vec![-1, 3]);
        let (_, msg) = describe(&view_shape(&[-1.0, -1.0], "shape").unwrap_err());
        assert_eq!(msg, "shape[1]: sizes must be non-negative (or one -1), got -1");
    }

    #[test]
    fn dims_wrap_and_are_range_checked() {
        assert_eq!(dim(-1.0, 2, "dim").unwrap(), 1);
        assert_eq!(dim(0.0, 0, "dim").unwrap(), 0);
        let (code, msg) = describe(&dim(2.0, 2, "dim").unwrap_err());
        assert_eq!(code, Code::InvalidArg);
        assert!(msg.contains("dimension 2 is out of range for a tensor of 2 dimension(s)"));
        assert!(dim(0.5, 2, "dim").is_err());
    }
}
