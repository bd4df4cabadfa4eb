//! Argument checks shared by every export (napi-free): shapes and dims arrive from JS as
//! doubles and must be whole, finite and in range before libtorch sees them (libtorch would
//! abort or throw a C++ backtrace on a negative size).
use crate::bail_code;
use crate::error::Code;
use anyhow::Result;

/// The largest magnitude up to which every integer is exactly a JS number (2^53).
pub const MAX_SAFE: f64 = 9_007_199_254_740_992.0;

/// Whether a JS number is a whole number that an i64 holds exactly (|x| <= 2^53), the one rule
/// for "is this number an int" (Python-scalar typing, TorchScript `int` arguments, shapes).
pub fn is_integral(value: f64) -> bool {
    value.is_finite() && value.fract() == 0.0 && value.abs() <= MAX_SAFE
}

/// A whole number that fits i64, or an InvalidArg error naming `what`.
pub fn integer(value: f64, what: &str) -> Result<i64> {
    if !is_integral(value) {
        bail_code!(Code::InvalidArg, "{what}: expected an integer, got {value}");
    }
    Ok(value as i64)
}

/// A count of at least 1 (threads, chunks).
pub fn positive(value: f64, what: &str) -> Result<i64> {
    let n = integer(value, what)?;
    if n < 1 {
        bail_code!(Code::InvalidArg, "{what}: must be at least 1, got {n}");
    }
    Ok(n)
}

/// A shape: non-negative integers.
pub fn shape(values: &[f64], what: &str) -> Result<Vec<i64>> {
    values
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let n = integer(v, &format!("{what}[{i}]"))?;
            if n < 0 {
                bail_code!(
                    Code::InvalidArg,
                    "{what}[{i}]: sizes must be non-negative, got {n}"
                );
            }
            Ok(n)
        })
        .collect()
}

/// A shape for `view`/`reshape`: non-negative sizes, or -1 once (inferred).
pub fn view_shape(values: &[f64], what: &str) -> Result<Vec<i64>> {
    let mut inferred = false;
    values
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let n = integer(v, &format!("{what}[{i}]"))?;
            if n == -1 && !inferred {
                inferred = true;
            } else if n < 0 {
                bail_code!(
                    Code::InvalidArg,
                    "{what}[{i}]: sizes must be non-negative (or one -1), got {n}"
                );
            }
            Ok(n)
        })
        .collect()
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
