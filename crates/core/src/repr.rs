//! A pure-Rust reproduction of PyTorch's `repr(tensor)`.
//!
//! This mirrors `torch/_tensor_str.py` (PyTorch 2.13) with the default print
//! options (`precision=4`, `threshold=1000`, `edgeitems=3`, `linewidth=80`,
//! `sci_mode=None`) for dense, strided, real tensors. The caller reads the
//! elements out of the tensor; everything here is plain string building, so
//! the output can be compared character for character with Python's.

use std::fmt::Display;

/// `PRINT_OPTS.precision`: digits after the decimal point.
const PRECISION: usize = 4;
/// `PRINT_OPTS.threshold`: tensors with more elements than this are summarized.
const THRESHOLD: usize = 1000;
/// `PRINT_OPTS.edgeitems`: items kept at each end of a summarized dimension.
const EDGEITEMS: usize = 3;
/// `PRINT_OPTS.linewidth`: characters per line used for line breaking.
const LINEWIDTH: usize = 80;
/// Prefix of a plain tensor's repr; its length is the indent of every
/// continuation line (`indent = len(prefix)` in `_str_intern`).
const PREFIX: &str = "tensor(";
/// The dtype Python treats as the default (`torch.get_default_dtype()`).
const DEFAULT_FLOAT_DTYPE: &str = "float32";

/// Element values already read out of the tensor, row-major (C order) over `shape`.
///
/// Float dtypes (float16/bfloat16/float32/float64) give `F64` (each value
/// exactly the tensor's value widened to f64); integer dtypes give `I64`;
/// bool gives `Bool`.
pub enum ReprData {
    /// Values of a floating-point tensor, widened exactly to f64.
    F64(Vec<f64>),
    /// Values of an integer tensor.
    I64(Vec<i64>),
    /// Values of a bool tensor.
    Bool(Vec<bool>),
}

impl ReprData {
    fn len(&self) -> usize {
        match self {
            ReprData::F64(v) => v.len(),
            ReprData::I64(v) => v.len(),
            ReprData::Bool(v) => v.len(),
        }
    }
}

/// Everything `repr(tensor)` looks at, already extracted from the tensor.
pub struct ReprInput<'a> {
    /// The tensor's sizes (`tensor.shape`); empty for a 0-dim tensor.
    pub shape: &'a [i64],
    /// The tensor's elements in row-major order; exactly `product(shape)` of them.
    pub data: ReprData,
    /// PyTorch dtype name without the "torch." prefix: "float32", "float64",
    /// "float16", "bfloat16", "int8", "uint8", "int16", "int32", "int64", "bool".
    pub dtype: &'a str,
    /// None for CPU; Some("cuda:0") etc. otherwise (printed as device='cuda:0').
    pub device: Option<&'a str>,
    /// Name of the autograd node if any, e.g. Some("AddBackward0") -> grad_fn=<AddBackward0>.
    pub grad_fn: Option<&'a str>,
    /// Whether the tensor requires grad (printed only when `grad_fn` is None).
    pub requires_grad: bool,
}

/// Python's repr(tensor), e.g. "tensor([[1., 1.]])".
///
/// Mirrors `_str_intern` for a plain strided tensor.
///
/// # Panics
///
/// Panics if a dimension in `shape` is negative or if the number of values in
/// `data` is not the product of `shape` (1 for a 0-dim tensor).
pub fn tensor_repr(input: &ReprInput) -> String {
    let shape: Vec<usize> = input
        .shape
        .iter()
        .map(|&d| usize::try_from(d).expect("tensor_repr: negative dimension in shape"))
        .collect();
    let numel: usize = shape.iter().product();
    assert_eq!(
        input.data.len(),
        numel,
        "tensor_repr: data holds {} values but shape {:?} needs {}",
        input.data.len(),
        input.shape,
        numel
    );

    let indent = PREFIX.len();
    let mut suffixes = Vec::new();

    // _str_intern prints the device whenever it is not the default (CPU) one.
    if let Some(device) = input.device {
        suffixes.push(format!("device='{device}'"));
    }

    let tensor_str = if numel == 0 {
        // Empty tensors: the size is shown unless it is (0,), and the dtype is
        // shown unless it is the default float dtype, since no element can
        // hint at it (so even int64 and bool are printed here).
        if shape.len() != 1 {
            suffixes.push(format!("size={}", python_tuple(input.shape)));
        }
        if input.dtype != DEFAULT_FLOAT_DTYPE {
            suffixes.push(dtype_suffix(input.dtype));
        }
        "[]".to_string()
    } else {
        if !has_default_dtype(input.dtype) {
            suffixes.push(dtype_suffix(input.dtype));
        }
        match &input.data {
            ReprData::F64(values) => tensor_str(values, &shape, indent),
            ReprData::I64(values) => tensor_str(values, &shape, indent),
            ReprData::Bool(values) => tensor_str(values, &shape, indent),
        }
    };

    // A grad_fn takes precedence over requires_grad=True, as in _str_intern.
    if let Some(name) = input.grad_fn {
        suffixes.push(format!("grad_fn=<{name}>"));
    } else if input.requires_grad {
        suffixes.push("requires_grad=True".to_string());
    }

    add_suffixes(&format!("{PREFIX}{tensor_str}"), &suffixes, indent)
}

/// `has_default_dtype` in `_str_intern`: these dtypes are implied by the
/// printed values, so no `dtype=` suffix is needed.
fn has_default_dtype(dtype: &str) -> bool {
    matches!(dtype, DEFAULT_FLOAT_DTYPE | "int64" | "bool")
}

fn dtype_suffix(dtype: &str) -> String {
    format!("dtype=torch.{dtype}")
}

/// `str(tuple(shape))`: Python writes a one-element tuple with a trailing comma.
fn python_tuple(shape: &[i64]) -> String {
    match shape {
        [single] => format!("({single},)"),
        _ => {
            let items: Vec<String> = shape.iter().map(i64::to_string).collect();
            format!("({})", items.join(", "))
        }
    }
}

/// Mirrors `_add_suffixes` with `force_newline=False` (only sparse tensors force it).
fn add_suffixes(tensor_str: &str, suffixes: &[String], indent: usize) -> String {
    // Python: `last_line_len = len(tensor_str) - tensor_str.rfind("\n") + 1`,
    // where rfind gives -1 without a newline. This over-counts by two, but the
    // line breaks depend on it, so it is reproduced as is (in characters).
    let total_len = tensor_str.chars().count();
    let last_newline = tensor_str
        .rfind('\n')
        .map_or(-1, |byte| tensor_str[..byte].chars().count() as isize);
    let mut last_line_len = (total_len as isize - last_newline + 1) as usize;

    let mut out = tensor_str.to_string();
    for suffix in suffixes {
        let suffix_len = suffix.chars().count();
        if last_line_len + suffix_len + 2 > LINEWIDTH {
            out.push_str(",\n");
            out.push_str(&" ".repeat(indent));
            out.push_str(suffix);
            last_line_len = indent + suffix_len;
        } else {
            out.push_str(", ");
            out.push_str(suffix);
            last_line_len += suffix_len + 2;
        }
    }
    out.push(')');
    out
}

/// Mirrors `_tensor_str` for a non-empty tensor.
fn tensor_str<T: Element>(data: &[T], shape: &[usize], indent: usize) -> String {
    let summarize = data.len() > THRESHOLD;
    // When summarizing, the formatter only sees the values that will be
    // printed (`_Formatter(get_summarized_data(self))`), so widths and the
    // int/sci mode decisions ignore the elided middle.
    let formatter = if summarize {
        let mut shown = Vec::new();
        summarized_data(data, shape, &mut shown);
        T::formatter(&shown)
    } else {
        T::formatter(data)
    };
    tensor_str_with_formatter(data, shape, indent, summarize, &formatter)
}

/// The rows of a dimension of length `len` that get printed, in order; `None`
/// stands for the ellipsis placed between the leading and trailing
/// `EDGEITEMS` rows when summarizing (`summarize and size > 2 * edgeitems`).
fn shown_indices(len: usize, summarize: bool) -> Vec<Option<usize>> {
    if summarize && len > 2 * EDGEITEMS {
        (0..EDGEITEMS)
            .map(Some)
            .chain(std::iter::once(None))
            .chain((len - EDGEITEMS..len).map(Some))
            .collect()
    } else {
        (0..len).map(Some).collect()
    }
}

/// The values of the `index`-th sub-tensor along the first dimension.
fn sub_tensor<'d, T>(data: &'d [T], shape: &[usize], index: usize) -> &'d [T] {
    let stride: usize = shape[1..].iter().product();
    &data[index * stride..(index + 1) * stride]
}

/// Mirrors `get_summarized_data`: appends to `out` only the values that a
/// summarized print shows (the edge items of every dimension).
fn summarized_data<T: Copy>(data: &[T], shape: &[usize], out: &mut Vec<T>) {
    match shape.len() {
        0 => out.extend_from_slice(data),
        1 => out.extend(
            shown_indices(shape[0], true)
                .into_iter()
                .flatten()
                .map(|i| data[i]),
        ),
        _ => {
            for i in shown_indices(shape[0], true).into_iter().flatten() {
                summarized_data(sub_tensor(data, shape, i), &shape[1..], out);
            }
        }
    }
}

/// Mirrors `_tensor_str_with_formatter`: recursion over the leading dimension.
fn tensor_str_with_formatter<T: Element>(
    data: &[T],
    shape: &[usize],
    indent: usize,
    summarize: bool,
    formatter: &Formatter,
) -> String {
    match shape.len() {
        // _scalar_str
        0 => data[0].format(formatter),
        1 => vector_str(data, indent, summarize, formatter),
        dim => {
            let slices: Vec<String> = shown_indices(shape[0], summarize)
                .into_iter()
                .map(|index| match index {
                    Some(i) => tensor_str_with_formatter(
                        sub_tensor(data, shape, i),
                        &shape[1..],
                        indent + 1,
                        summarize,
                        formatter,
                    ),
                    None => "...".to_string(),
                })
                .collect();
            // Slices of a k-dim tensor are separated by k-1 newlines, then
            // aligned one column past the opening bracket.
            let separator = format!(",{}{}", "\n".repeat(dim - 1), " ".repeat(indent + 1));
            format!("[{}]", slices.join(&separator))
        }
    }
}

/// Mirrors `_vector_str`: a 1-D row, wrapped to fit `LINEWIDTH`.
fn vector_str<T: Element>(data: &[T], indent: usize, summarize: bool, formatter: &Formatter) -> String {
    // Each element takes its width plus ", ".
    let element_length = formatter.max_width + 2;
    // Python: max(1, floor((linewidth - indent) / element_length)); the
    // numerator can be negative for deeply nested tensors.
    let elements_per_line = (LINEWIDTH as isize - indent as isize)
        .div_euclid(element_length as isize)
        .max(1) as usize;

    let items: Vec<String> = shown_indices(data.len(), summarize)
        .into_iter()
        .map(|index| match index {
            Some(i) => data[i].format(formatter),
            None => " ...".to_string(),
        })
        .collect();
    let lines: Vec<String> = items
        .chunks(elements_per_line)
        .map(|line| line.join(", "))
        .collect();
    let separator = format!(",\n{}", " ".repeat(indent + 1));
    format!("[{}]", lines.join(&separator))
}

/// The state `_Formatter.__init__` computes from the values to print.
///
/// `int_mode` and `sci_mode` only matter for floating-point elements.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Formatter {
    /// All nonzero finite values are whole numbers: print `1.` instead of `1.0000`.
    int_mode: bool,
    /// Print in scientific notation (`1.0000e-05`).
    sci_mode: bool,
    /// Width every element is right-aligned to.
    max_width: usize,
}

impl Formatter {
    /// `_Formatter.__init__` for non-floating dtypes: the width is that of the
    /// longest `str(value)`.
    fn for_display<T: Display>(values: &[T]) -> Self {
        let max_width = values.iter().map(|v| v.to_string().len()).fold(1, usize::max);
        Formatter {
            int_mode: true,
            sci_mode: false,
            max_width,
        }
    }

    /// `_Formatter.__init__` for floating dtypes. Only nonzero finite values
    /// take part, so zeros, nan and inf never switch modes.
    fn for_floats(values: &[f64]) -> Self {
        let mut formatter = Formatter {
            int_mode: true,
            sci_mode: false,
            max_width: 1,
        };
        let nonzero_finite: Vec<f64> = values
            .iter()
            .copied()
            .filter(|v| v.is_finite() && *v != 0.0)
            .collect();
        if nonzero_finite.is_empty() {
            return formatter;
        }

        // Python converts the absolute values to float64 before the ratio;
        // our values already are f64, exactly equal to the tensor's.
        let min = nonzero_finite
            .iter()
            .map(|v| v.abs())
            .fold(f64::INFINITY, f64::min);
        let max = nonzero_finite.iter().map(|v| v.abs()).fold(0.0, f64::max);

        formatter.int_mode = nonzero_finite.iter().all(|&v| v == v.ceil());
        formatter.sci_mode = max / min > 1000.0 || max > 1.0e8 || min < 1.0e-4;

        formatter.max_width = nonzero_finite
            .iter()
            .map(|&v| match (formatter.int_mode, formatter.sci_mode) {
                (_, true) => python_sci(v, PRECISION).len(),
                // The "+ 1" accounts for the "." appended to integral floats.
                (true, false) => python_fixed(v, 0).len() + 1,
                (false, false) => python_fixed(v, PRECISION).len(),
            })
            .fold(formatter.max_width, usize::max);
        formatter
    }

    /// The float branch of `_Formatter.format`, before padding.
    fn format_float(&self, value: f64) -> String {
        if self.sci_mode {
            python_sci(value, PRECISION)
        } else if self.int_mode {
            // A trailing "." marks finite integral values as floats.
            let mut text = python_fixed(value, 0);
            if value.is_finite() {
                text.push('.');
            }
            text
        } else {
            python_fixed(value, PRECISION)
        }
    }

    /// `(self.max_width - len(ret)) * " " + ret`: right-align, never truncate.
    fn pad(&self, text: String) -> String {
        format!("{text:>width$}", width = self.max_width)
    }
}

/// An element type that `repr` can print: the three kinds of `ReprData`.
trait Element: Copy {
    /// `_Formatter(values)`.
    fn formatter(values: &[Self]) -> Formatter;
    /// `_Formatter.format(value)`.
    fn format(self, formatter: &Formatter) -> String;
}

impl Element for f64 {
    fn formatter(values: &[Self]) -> Formatter {
        Formatter::for_floats(values)
    }

    fn format(self, formatter: &Formatter) -> String {
        formatter.pad(formatter.format_float(self))
    }
}

impl Element for i64 {
    fn formatter(values: &[Self]) -> Formatter {
        Formatter::for_display(values)
    }

    fn format(self, formatter: &Formatter) -> String {
        formatter.pad(self.to_string())
    }
}

/// Python spells booleans `True`/`False`.
struct PythonBool(bool);

impl Display for PythonBool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0 { "True" } else { "False" })
    }
}

impl Element for bool {
    fn formatter(values: &[Self]) -> Formatter {
        let values: Vec<PythonBool> = values.iter().map(|&b| PythonBool(b)).collect();
        Formatter::for_display(&values)
    }

    fn format(self, formatter: &Formatter) -> String {
        formatter.pad(PythonBool(self).to_string())
    }
}

/// Python's spelling of non-finite floats under `f`/`e` formats; the sign of
/// a NaN is never shown.
fn python_non_finite(value: f64) -> Option<String> {
    if value.is_nan() {
        Some("nan".to_string())
    } else if value.is_infinite() {
        Some(if value > 0.0 { "inf" } else { "-inf" }.to_string())
    } else {
        None
    }
}

/// Python's `format(value, f".{precision}f")`.
///
/// Rust's `{:.N}` is likewise correctly rounded from the exact binary value
/// with ties to even, and keeps the sign of negative zero, so only the
/// non-finite spellings differ.
fn python_fixed(value: f64, precision: usize) -> String {
    python_non_finite(value).unwrap_or_else(|| format!("{value:.precision$}"))
}

/// Python's `format(value, f".{precision}e")`, e.g. `1.2346e-05`.
///
/// Rust writes the exponent as `e-5`; Python always writes a sign and at
/// least two digits.
fn python_sci(value: f64, precision: usize) -> String {
    if let Some(text) = python_non_finite(value) {
        return text;
    }
    let text = format!("{value:.precision$e}");
    let (mantissa, exponent) = text
        .split_once('e')
        .expect("Rust's LowerExp output always contains 'e'");
    let exponent: i32 = exponent.parse().expect("Rust's LowerExp exponent is an integer");
    let sign = if exponent < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exponent.unsigned_abs())
}

#[cfg(test)]
mod tests {
    //! Expected strings were produced by `repr()` in Python with torch 2.13;
    //! the comment in each test is the Python expression that built the tensor.
    //! Float32 data is written as the exact f64 value of each float32 element.

    use super::*;

    /// A CPU tensor without autograd state.
    fn plain<'a>(shape: &'a [i64], data: ReprData, dtype: &'a str) -> ReprInput<'a> {
        ReprInput {
            shape,
            data,
            dtype,
            device: None,
            grad_fn: None,
            requires_grad: false,
        }
    }

    fn check(input: ReprInput, expected: &str) {
        assert_eq!(tensor_repr(&input), expected);
    }

    #[test]
    fn python_float_formatting() {
        // format(v, ".Nf") / format(v, ".Ne") in Python: exact ties round to even.
        assert_eq!(python_fixed(0.125, 2), "0.12");
        assert_eq!(python_fixed(0.375, 2), "0.38");
        assert_eq!(python_fixed(2.5, 0), "2");
        assert_eq!(python_fixed(1.5, 0), "2");
        assert_eq!(python_fixed(-0.0, 4), "-0.0000");
        assert_eq!(python_fixed(-0.00001, 4), "-0.0000");
        assert_eq!(python_fixed(1e16, 0), "10000000000000000");
        assert_eq!(python_fixed(-f64::NAN, 4), "nan");
        assert_eq!(python_fixed(f64::NEG_INFINITY, 0), "-inf");
        assert_eq!(python_sci(1.03125, 4), "1.0312e+00");
        assert_eq!(python_sci(-0.00001, 4), "-1.0000e-05");
        assert_eq!(python_sci(1e16, 0), "1e+16");
        assert_eq!(python_sci(1e-300, 4), "1.0000e-300");
        assert_eq!(python_sci(0.0, 4), "0.0000e+00");
        assert_eq!(python_sci(f64::INFINITY, 4), "inf");
    }

    #[test]
    fn python_tuples() {
        assert_eq!(python_tuple(&[0]), "(0,)");
        assert_eq!(python_tuple(&[0, 3]), "(0, 3)");
        assert_eq!(python_tuple(&[]), "()");
    }

    #[test]
    fn device_cuda() {
        // torch.tensor([1., 2.], device="cuda:0", requires_grad=True) * 2
        // (written by hand: same path as `device_cpu_forced` below)
        let input = ReprInput {
            device: Some("cuda:0"),
            grad_fn: Some("MulBackward0"),
            ..plain(&[2], ReprData::F64(vec![2.0, 4.0]), "float16")
        };
        check(
            input,
            "tensor([2., 4.], device='cuda:0', dtype=torch.float16, grad_fn=<MulBackward0>)",
        );
    }

    #[test]
    #[should_panic(expected = "data holds 3 values")]
    fn mismatched_data_panics() {
        tensor_repr(&plain(&[2, 2], ReprData::I64(vec![1, 2, 3]), "int64"));
    }

    #[test]
    fn scalar_float() {
        // torch.tensor(3.14159)
        check(
            plain(&[], ReprData::F64(vec![3.141590118408203]), "float32"),
            "tensor(3.1416)",
        );
    }
    #[test]
    fn scalar_int_mode_float() {
        // torch.tensor(2.)
        check(plain(&[], ReprData::F64(vec![2.0]), "float32"), "tensor(2.)");
    }
    #[test]
    fn scalar_int() {
        // torch.tensor(-7)
        check(plain(&[], ReprData::I64(vec![-7]), "int64"), "tensor(-7)");
    }
    #[test]
    fn scalar_bool() {
        // torch.tensor(True)
        check(plain(&[], ReprData::Bool(vec![true]), "bool"), "tensor(True)");
    }
    #[test]
    fn scalar_nan() {
        // torch.tensor(nan)
        check(
            plain(&[], ReprData::F64(vec![f64::NAN]), "float32"),
            "tensor(nan)",
        );
    }
    #[test]
    fn scalar_sci() {
        // torch.tensor(1e-5)
        check(
            plain(&[], ReprData::F64(vec![9.999999747378752e-06]), "float32"),
            "tensor(1.0000e-05)",
        );
    }
    #[test]
    fn vector_floats() {
        // torch.tensor([0.1, -2.5, 3.25])
        check(
            plain(
                &[3],
                ReprData::F64(vec![0.10000000149011612, -2.5, 3.25]),
                "float32",
            ),
            "tensor([ 0.1000, -2.5000,  3.2500])",
        );
    }
    #[test]
    fn vector_ints() {
        // torch.tensor([1, -20, 300])
        check(
            plain(&[3], ReprData::I64(vec![1, -20, 300]), "int64"),
            "tensor([  1, -20, 300])",
        );
    }
    #[test]
    fn vector_big_ints() {
        // torch.tensor([2**62, -5])
        check(
            plain(&[2], ReprData::I64(vec![4611686018427387904, -5]), "int64"),
            "tensor([4611686018427387904,                  -5])",
        );
    }
    #[test]
    fn vector_bools() {
        // torch.tensor([True, False, True])
        check(
            plain(&[3], ReprData::Bool(vec![true, false, true]), "bool"),
            "tensor([ True, False,  True])",
        );
    }
    #[test]
    fn int_mode_floats() {
        // torch.tensor([1., 2.])
        check(
            plain(&[2], ReprData::F64(vec![1.0, 2.0]), "float32"),
            "tensor([1., 2.])",
        );
    }
    #[test]
    fn negative_zeros_int_mode() {
        // torch.tensor([-0., 0., 1.])
        check(
            plain(&[3], ReprData::F64(vec![-0.0, 0.0, 1.0]), "float32"),
            "tensor([-0., 0., 1.])",
        );
    }
    #[test]
    fn negative_zero_fixed() {
        // torch.tensor([-0., 1.5, -0.00001])
        check(
            plain(
                &[3],
                ReprData::F64(vec![-0.0, 1.5, -9.999999747378752e-06]),
                "float32",
            ),
            "tensor([-0.0000e+00,  1.5000e+00, -1.0000e-05])",
        );
    }
    #[test]
    fn all_zeros() {
        // torch.zeros(3)
        check(
            plain(&[3], ReprData::F64(vec![0.0, 0.0, 0.0]), "float32"),
            "tensor([0., 0., 0.])",
        );
    }
    #[test]
    fn sci_small() {
        // torch.tensor([1e-5, 1.])
        check(
            plain(&[2], ReprData::F64(vec![9.999999747378752e-06, 1.0]), "float32"),
            "tensor([1.0000e-05, 1.0000e+00])",
        );
    }
    #[test]
    fn sci_large() {
        // torch.tensor([1e10, 1.])
        check(
            plain(&[2], ReprData::F64(vec![10000000000.0, 1.0]), "float32"),
            "tensor([1.0000e+10, 1.0000e+00])",
        );
    }
    #[test]
    fn sci_int_mode() {
        // torch.tensor([1., 1e9, -3.])
        check(
            plain(&[3], ReprData::F64(vec![1.0, 1000000000.0, -3.0]), "float32"),
            "tensor([ 1.0000e+00,  1.0000e+09, -3.0000e+00])",
        );
    }
    #[test]
    fn sci_ratio_over_1000() {
        // torch.tensor([0.5, 1000.5])
        check(
            plain(&[2], ReprData::F64(vec![0.5, 1000.5]), "float32"),
            "tensor([5.0000e-01, 1.0005e+03])",
        );
    }
    #[test]
    fn ratio_exactly_1000() {
        // torch.tensor([0.5, 500.])
        check(
            plain(&[2], ReprData::F64(vec![0.5, 500.0]), "float32"),
            "tensor([  0.5000, 500.0000])",
        );
    }
    #[test]
    fn nan_inf_mixed() {
        // torch.tensor([nan, inf, -inf, 1.5])
        check(
            plain(
                &[4],
                ReprData::F64(vec![f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1.5]),
                "float32",
            ),
            "tensor([   nan,    inf,   -inf, 1.5000])",
        );
    }
    #[test]
    fn nan_inf_int_mode() {
        // torch.tensor([1., nan, -inf, 20.])
        check(
            plain(
                &[4],
                ReprData::F64(vec![1.0, f64::NAN, f64::NEG_INFINITY, 20.0]),
                "float32",
            ),
            "tensor([ 1., nan, -inf, 20.])",
        );
    }
    #[test]
    fn nan_inf_sci() {
        // torch.tensor([1e-8, nan, 1., -inf])
        check(
            plain(
                &[4],
                ReprData::F64(vec![9.99999993922529e-09, f64::NAN, 1.0, f64::NEG_INFINITY]),
                "float32",
            ),
            "tensor([1.0000e-08,        nan, 1.0000e+00,       -inf])",
        );
    }
    #[test]
    fn only_non_finite() {
        // torch.tensor([nan, 0., inf])
        check(
            plain(&[3], ReprData::F64(vec![f64::NAN, 0.0, f64::INFINITY]), "float32"),
            "tensor([nan, 0., inf])",
        );
    }
    #[test]
    fn rounding_ties() {
        // torch.tensor([0.125, 2.5, 0.00015, 1.03125], dtype=torch.float64)
        check(
            plain(&[4], ReprData::F64(vec![0.125, 2.5, 0.00015, 1.03125]), "float64"),
            "tensor([1.2500e-01, 2.5000e+00, 1.5000e-04, 1.0312e+00], dtype=torch.float64)",
        );
    }
    #[test]
    fn matrix_2d() {
        // torch.tensor([[1.5, -2.], [3., 4.25]])
        check(
            plain(&[2, 2], ReprData::F64(vec![1.5, -2.0, 3.0, 4.25]), "float32"),
            "tensor([[ 1.5000, -2.0000],\n        [ 3.0000,  4.2500]])",
        );
    }
    #[test]
    fn matrix_2d_bool() {
        // torch.tensor([[True, False], [False, True]])
        check(
            plain(&[2, 2], ReprData::Bool(vec![true, false, false, true]), "bool"),
            "tensor([[ True, False],\n        [False,  True]])",
        );
    }
    #[test]
    fn tensor_3d() {
        // torch.arange(24.).reshape(2, 3, 4) / 3
        check(plain(&[2, 3, 4], ReprData::F64((0..24).map(|i| (i as f32 / 3.0) as f64).collect()), "float32"), "tensor([[[0.0000, 0.3333, 0.6667, 1.0000],\n         [1.3333, 1.6667, 2.0000, 2.3333],\n         [2.6667, 3.0000, 3.3333, 3.6667]],\n\n        [[4.0000, 4.3333, 4.6667, 5.0000],\n         [5.3333, 5.6667, 6.0000, 6.3333],\n         [6.6667, 7.0000, 7.3333, 7.6667]]])");
    }
    #[test]
    fn tensor_4d() {
        // torch.tensor([[[[1, 2]]], [[[3, -4]]]])
        check(
            plain(&[2, 1, 1, 2], ReprData::I64(vec![1, 2, 3, -4]), "int64"),
            "tensor([[[[ 1,  2]]],\n\n\n        [[[ 3, -4]]]])",
        );
    }
    #[test]
    fn wrap_long_vector() {
        // torch.arange(30.) / 7
        check(plain(&[30], ReprData::F64((0..30).map(|i| (i as f32 / 7.0) as f64).collect()), "float32"), "tensor([0.0000, 0.1429, 0.2857, 0.4286, 0.5714, 0.7143, 0.8571, 1.0000, 1.1429,\n        1.2857, 1.4286, 1.5714, 1.7143, 1.8571, 2.0000, 2.1429, 2.2857, 2.4286,\n        2.5714, 2.7143, 2.8571, 3.0000, 3.1429, 3.2857, 3.4286, 3.5714, 3.7143,\n        3.8571, 4.0000, 4.1429])");
    }
    #[test]
    fn wrap_int_vector() {
        // torch.arange(100)
        check(plain(&[100], ReprData::I64((0..100).collect()), "int64"), "tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17,\n        18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35,\n        36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53,\n        54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71,\n        72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89,\n        90, 91, 92, 93, 94, 95, 96, 97, 98, 99])");
    }
    #[test]
    fn wrap_wide_matrix() {
        // torch.arange(60.).reshape(3, 20) * 1.1
        check(plain(&[3, 20], ReprData::F64((0..60).map(|i| (i as f32 * 1.1) as f64).collect()), "float32"), "tensor([[ 0.0000,  1.1000,  2.2000,  3.3000,  4.4000,  5.5000,  6.6000,  7.7000,\n          8.8000,  9.9000, 11.0000, 12.1000, 13.2000, 14.3000, 15.4000, 16.5000,\n         17.6000, 18.7000, 19.8000, 20.9000],\n        [22.0000, 23.1000, 24.2000, 25.3000, 26.4000, 27.5000, 28.6000, 29.7000,\n         30.8000, 31.9000, 33.0000, 34.1000, 35.2000, 36.3000, 37.4000, 38.5000,\n         39.6000, 40.7000, 41.8000, 42.9000],\n        [44.0000, 45.1000, 46.2000, 47.3000, 48.4000, 49.5000, 50.6000, 51.7000,\n         52.8000, 53.9000, 55.0000, 56.1000, 57.2000, 58.3000, 59.4000, 60.5000,\n         61.6000, 62.7000, 63.8000, 64.9000]])");
    }
    #[test]
    fn summarized_1d() {
        // torch.arange(2000.)
        check(
            plain(
                &[2000],
                ReprData::F64((0..2000).map(f64::from).collect()),
                "float32",
            ),
            "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n        1.9990e+03])",
        );
    }
    #[test]
    fn summarized_1d_ignores_middle() {
        // torch.cat([torch.zeros(3), torch.full((1000,), 1e9), torch.ones(3)])
        check(
            plain(
                &[1006],
                ReprData::F64(
                    (0..1006)
                        .map(|i| match i {
                            0..=2 => 0.0,
                            1003.. => 1.0,
                            _ => 1e9,
                        })
                        .collect(),
                ),
                "float32",
            ),
            "tensor([0., 0., 0.,  ..., 1., 1., 1.])",
        );
    }
    #[test]
    fn summarized_2d() {
        // torch.arange(1600.).reshape(40, 40) / 7
        check(plain(&[40, 40], ReprData::F64((0..1600).map(|i| (i as f32 / 7.0) as f64).collect()), "float32"), "tensor([[0.0000e+00, 1.4286e-01, 2.8571e-01,  ..., 5.2857e+00, 5.4286e+00,\n         5.5714e+00],\n        [5.7143e+00, 5.8571e+00, 6.0000e+00,  ..., 1.1000e+01, 1.1143e+01,\n         1.1286e+01],\n        [1.1429e+01, 1.1571e+01, 1.1714e+01,  ..., 1.6714e+01, 1.6857e+01,\n         1.7000e+01],\n        ...,\n        [2.1143e+02, 2.1157e+02, 2.1171e+02,  ..., 2.1671e+02, 2.1686e+02,\n         2.1700e+02],\n        [2.1714e+02, 2.1729e+02, 2.1743e+02,  ..., 2.2243e+02, 2.2257e+02,\n         2.2271e+02],\n        [2.2286e+02, 2.2300e+02, 2.2314e+02,  ..., 2.2814e+02, 2.2829e+02,\n         2.2843e+02]])");
    }
    #[test]
    fn summarized_2d_two_rows() {
        // torch.arange(2000).reshape(2, 1000)
        check(plain(&[2, 1000], ReprData::I64((0..2000).collect()), "int64"), "tensor([[   0,    1,    2,  ...,  997,  998,  999],\n        [1000, 1001, 1002,  ..., 1997, 1998, 1999]])");
    }
    #[test]
    fn summarized_3d() {
        // torch.arange(2000).reshape(10, 10, 20)
        check(plain(&[10, 10, 20], ReprData::I64((0..2000).collect()), "int64"), "tensor([[[   0,    1,    2,  ...,   17,   18,   19],\n         [  20,   21,   22,  ...,   37,   38,   39],\n         [  40,   41,   42,  ...,   57,   58,   59],\n         ...,\n         [ 140,  141,  142,  ...,  157,  158,  159],\n         [ 160,  161,  162,  ...,  177,  178,  179],\n         [ 180,  181,  182,  ...,  197,  198,  199]],\n\n        [[ 200,  201,  202,  ...,  217,  218,  219],\n         [ 220,  221,  222,  ...,  237,  238,  239],\n         [ 240,  241,  242,  ...,  257,  258,  259],\n         ...,\n         [ 340,  341,  342,  ...,  357,  358,  359],\n         [ 360,  361,  362,  ...,  377,  378,  379],\n         [ 380,  381,  382,  ...,  397,  398,  399]],\n\n        [[ 400,  401,  402,  ...,  417,  418,  419],\n         [ 420,  421,  422,  ...,  437,  438,  439],\n         [ 440,  441,  442,  ...,  457,  458,  459],\n         ...,\n         [ 540,  541,  542,  ...,  557,  558,  559],\n         [ 560,  561,  562,  ...,  577,  578,  579],\n         [ 580,  581,  582,  ...,  597,  598,  599]],\n\n        ...,\n\n        [[1400, 1401, 1402,  ..., 1417, 1418, 1419],\n         [1420, 1421, 1422,  ..., 1437, 1438, 1439],\n         [1440, 1441, 1442,  ..., 1457, 1458, 1459],\n         ...,\n         [1540, 1541, 1542,  ..., 1557, 1558, 1559],\n         [1560, 1561, 1562,  ..., 1577, 1578, 1579],\n         [1580, 1581, 1582,  ..., 1597, 1598, 1599]],\n\n        [[1600, 1601, 1602,  ..., 1617, 1618, 1619],\n         [1620, 1621, 1622,  ..., 1637, 1638, 1639],\n         [1640, 1641, 1642,  ..., 1657, 1658, 1659],\n         ...,\n         [1740, 1741, 1742,  ..., 1757, 1758, 1759],\n         [1760, 1761, 1762,  ..., 1777, 1778, 1779],\n         [1780, 1781, 1782,  ..., 1797, 1798, 1799]],\n\n        [[1800, 1801, 1802,  ..., 1817, 1818, 1819],\n         [1820, 1821, 1822,  ..., 1837, 1838, 1839],\n         [1840, 1841, 1842,  ..., 1857, 1858, 1859],\n         ...,\n         [1940, 1941, 1942,  ..., 1957, 1958, 1959],\n         [1960, 1961, 1962,  ..., 1977, 1978, 1979],\n         [1980, 1981, 1982,  ..., 1997, 1998, 1999]]])");
    }
    #[test]
    fn empty_1d() {
        // torch.tensor([])
        check(plain(&[0], ReprData::F64(vec![]), "float32"), "tensor([])");
    }
    #[test]
    fn empty_2d() {
        // torch.zeros(0, 3)
        check(
            plain(&[0, 3], ReprData::F64(vec![]), "float32"),
            "tensor([], size=(0, 3))",
        );
    }
    #[test]
    fn empty_int64() {
        // torch.zeros(0, dtype=torch.int64)
        check(
            plain(&[0], ReprData::I64(vec![]), "int64"),
            "tensor([], dtype=torch.int64)",
        );
    }
    #[test]
    fn empty_bool_2d() {
        // torch.zeros(2, 0, dtype=torch.bool)
        check(
            plain(&[2, 0], ReprData::Bool(vec![]), "bool"),
            "tensor([], size=(2, 0), dtype=torch.bool)",
        );
    }
    #[test]
    fn empty_float64() {
        // torch.zeros(0, dtype=torch.float64)
        check(
            plain(&[0], ReprData::F64(vec![]), "float64"),
            "tensor([], dtype=torch.float64)",
        );
    }
    #[test]
    fn dtype_float64() {
        // torch.tensor([1.5, 2.25], dtype=torch.float64)
        check(
            plain(&[2], ReprData::F64(vec![1.5, 2.25]), "float64"),
            "tensor([1.5000, 2.2500], dtype=torch.float64)",
        );
    }
    #[test]
    fn dtype_float16() {
        // torch.tensor([0.1, 1000.], dtype=torch.float16)
        check(
            plain(&[2], ReprData::F64(vec![0.0999755859375, 1000.0]), "float16"),
            "tensor([9.9976e-02, 1.0000e+03], dtype=torch.float16)",
        );
    }
    #[test]
    fn dtype_bfloat16() {
        // torch.tensor([1/3, -2.], dtype=torch.bfloat16)
        check(
            plain(&[2], ReprData::F64(vec![0.333984375, -2.0]), "bfloat16"),
            "tensor([ 0.3340, -2.0000], dtype=torch.bfloat16)",
        );
    }
    #[test]
    fn dtype_int8() {
        // torch.tensor([-128, 127], dtype=torch.int8)
        check(
            plain(&[2], ReprData::I64(vec![-128, 127]), "int8"),
            "tensor([-128,  127], dtype=torch.int8)",
        );
    }
    #[test]
    fn dtype_uint8() {
        // torch.tensor([0, 255], dtype=torch.uint8)
        check(
            plain(&[2], ReprData::I64(vec![0, 255]), "uint8"),
            "tensor([  0, 255], dtype=torch.uint8)",
        );
    }
    #[test]
    fn dtype_int16() {
        // torch.tensor([1, -300], dtype=torch.int16)
        check(
            plain(&[2], ReprData::I64(vec![1, -300]), "int16"),
            "tensor([   1, -300], dtype=torch.int16)",
        );
    }
    #[test]
    fn dtype_int32() {
        // torch.tensor([[1], [2]], dtype=torch.int32)
        check(
            plain(&[2, 1], ReprData::I64(vec![1, 2]), "int32"),
            "tensor([[1],\n        [2]], dtype=torch.int32)",
        );
    }
    #[test]
    fn scalar_float64() {
        // torch.tensor(1.5, dtype=torch.float64)
        check(
            plain(&[], ReprData::F64(vec![1.5]), "float64"),
            "tensor(1.5000, dtype=torch.float64)",
        );
    }
    #[test]
    fn requires_grad() {
        // torch.ones(2, requires_grad=True)
        let input = ReprInput {
            requires_grad: true,
            ..plain(&[2], ReprData::F64(vec![1.0, 1.0]), "float32")
        };
        check(input, "tensor([1., 1.], requires_grad=True)");
    }
    #[test]
    fn grad_fn() {
        // torch.ones(2, requires_grad=True) + 1
        let input = ReprInput {
            grad_fn: Some("AddBackward0"),
            ..plain(&[2], ReprData::F64(vec![2.0, 2.0]), "float32")
        };
        check(input, "tensor([2., 2.], grad_fn=<AddBackward0>)");
    }
    #[test]
    fn grad_fn_float64() {
        // torch.tensor([0.5], dtype=torch.float64, requires_grad=True) * 3
        let input = ReprInput {
            grad_fn: Some("MulBackward0"),
            ..plain(&[1], ReprData::F64(vec![1.5]), "float64")
        };
        check(
            input,
            "tensor([1.5000], dtype=torch.float64, grad_fn=<MulBackward0>)",
        );
    }
    #[test]
    fn suffix_wraps() {
        // torch.arange(6., dtype=torch.float64).requires_grad_() * 1111.1111
        let input = ReprInput {
            grad_fn: Some("MulBackward0"),
            ..plain(
                &[6],
                ReprData::F64(vec![
                    0.0,
                    1111.1111,
                    2222.2222,
                    3333.3333000000002,
                    4444.4444,
                    5555.5555,
                ]),
                "float64",
            )
        };
        check(input, "tensor([   0.0000, 1111.1111, 2222.2222, 3333.3333, 4444.4444, 5555.5555],\n       dtype=torch.float64, grad_fn=<MulBackward0>)");
    }
    #[test]
    fn suffix_wraps_after_matrix() {
        // torch.arange(16., dtype=torch.float16).reshape(2, 8).requires_grad_() / 3
        let input = ReprInput {
            grad_fn: Some("DivBackward0"),
            ..plain(
                &[2, 8],
                ReprData::F64(vec![
                    0.0,
                    0.333251953125,
                    0.66650390625,
                    1.0,
                    1.3330078125,
                    1.6669921875,
                    2.0,
                    2.333984375,
                    2.666015625,
                    3.0,
                    3.333984375,
                    3.666015625,
                    4.0,
                    4.33203125,
                    4.66796875,
                    5.0,
                ]),
                "float16",
            )
        };
        check(input, "tensor([[0.0000, 0.3333, 0.6665, 1.0000, 1.3330, 1.6670, 2.0000, 2.3340],\n        [2.6660, 3.0000, 3.3340, 3.6660, 4.0000, 4.3320, 4.6680, 5.0000]],\n       dtype=torch.float16, grad_fn=<DivBackward0>)");
    }
    #[test]
    fn negative_zero_fixed_point() {
        // torch.tensor([-0., 1.5])
        check(
            plain(&[2], ReprData::F64(vec![-0.0, 1.5]), "float32"),
            "tensor([-0.0000, 1.5000])",
        );
    }
    #[test]
    fn second_suffix_wraps() {
        // torch.arange(4., dtype=torch.float64).requires_grad_() * 1111.1111
        let input = ReprInput {
            grad_fn: Some("MulBackward0"),
            ..plain(
                &[4],
                ReprData::F64(vec![0.0, 1111.1111, 2222.2222, 3333.3333000000002]),
                "float64",
            )
        };
        check(input, "tensor([   0.0000, 1111.1111, 2222.2222, 3333.3333], dtype=torch.float64,\n       grad_fn=<MulBackward0>)");
    }
    #[test]
    fn device_cpu_forced() {
        // torch.tensor([1, 2], dtype=torch.int32), printed with
        // torch._C._get_default_device patched to return "meta"
        let input = ReprInput {
            device: Some("cpu"),
            ..plain(&[2], ReprData::I64(vec![1, 2]), "int32")
        };
        check(input, "tensor([1, 2], device='cpu', dtype=torch.int32)");
    }
}
