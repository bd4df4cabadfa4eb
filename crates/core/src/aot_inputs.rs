//! What an AOTInductor package accepts as inputs: read from the C++ that
//! AOTInductor generated and packed beside the compiled library
//! (`data/aotinductor/model/*.wrapper.cpp` and `*.kernel.cpp`), and checked before each run.
//!
//! The compiled program checks its own inputs only when `AOTI_RUNTIME_CHECK_INPUTS` is set
//! (Python's `aoti_load_package` leaves it unset and checks nothing), and those checks refuse
//! sizes Python runs correctly. We check what guards memory and what Python cannot do wrong
//! either way — dtype, rank, fixed sizes, fixed strides — and add what the compiled checks
//! miss: a size symbol shared by several inputs (or a size computed from one, `2*s0`) must
//! agree everywhere, or a kernel sized by the first reads past the end of the others.
//!
//! The bounds of dynamic sizes are read as what they are:
//! - A lower bound of 2 is torch.export's specialization of sizes 0 and 1 (the bound it
//!   records for `Dim("batch", min=1)`; torch 2.13 `cpp_wrapper_cpu.py`,
//!   `generate_input_output_runtime_checks`): the generated code sizes every buffer and loop by
//!   the symbol it reads from the input, so 1 runs as in Python.
//! - An upper bound is the symbol's range when the code was generated, narrowed by every
//!   guard of tracing and lowering. It is kept where the generated code reads fixed-size
//!   memory along the size (a positional-embedding table sliced to the sequence length), and
//!   released where it only records what the compiler assumed (ResNet-18 exported with
//!   `Dim(max=64)` records 15, from ATen's convolution backend choice evaluated on a symbolic
//!   batch): see `bounds`.
use crate::error::{fail, Code};
use anyhow::Result;
use std::collections::HashMap;
use std::io::Read;

mod bounds;

/// The input checks of a package, one entry per input in the program's flattened order.
#[derive(Debug, Clone, PartialEq)]
pub struct InputChecks {
    inputs: Vec<InputSpec>,
}

#[derive(Debug, Clone, PartialEq)]
struct InputSpec {
    /// AOTInductor's dtype name (`float32`, `int64`, ...), which is also ours.
    dtype: String,
    dims: Vec<DimSpec>,
    /// The strides the generated code checks; `None` where the stride is symbolic.
    strides: Vec<Option<i64>>,
}

#[derive(Debug, Clone, PartialEq)]
struct DimSpec {
    size: Size,
    lower: Option<i64>,
    upper: Option<i64>,
}

#[derive(Debug, Clone, PartialEq)]
enum Size {
    Fixed(i64),
    /// A size symbol (`s77`): every dimension with the same symbol must have the same size.
    Symbol(String),
    /// A size computed from symbols (`2L*s17`), `None` when we cannot evaluate its form.
    Computed(String, Option<Expr>),
    /// Dynamic, but the wrapper names no symbol for it (no input assert): bounds only.
    Unnamed,
}

/// One input as given: sizes, strides and dtype name.
pub struct Actual<'a> {
    pub sizes: &'a [i64],
    pub strides: &'a [i64],
    pub dtype: &'a str,
}

/// The generated C++ of a package's `model`: the wrapper (input checks, `run_impl`) and the
/// kernels it calls.
pub struct Sources {
    pub wrapper: String,
    pub kernels: String,
}

/// Reads the generated sources of the package's `model` from the `.pt2` zip archive:
/// `Ok(None)` when it has no wrapper source (a package without sources).
pub fn package_sources(path: &str) -> Result<Option<Sources>> {
    const MAX_SOURCE: u64 = 256 << 20;
    let file = std::fs::File::open(path)?;
    let mut zip = zip::ZipArchive::new(std::io::BufReader::new(file))?;
    // The loader takes what lies under `data/aotinductor/model/` (after an archive folder):
    // a `<hash>.wrapper.cpp` and a `<hash>.kernel.cpp`; only the wrapper has the checks.
    let names: Vec<String> = zip
        .file_names()
        .filter(|n| n.contains("data/aotinductor/model/") && n.ends_with(".cpp"))
        .map(str::to_string)
        .collect();
    let (mut wrapper, mut kernels) = (None, String::new());
    for name in names {
        let entry = zip.by_name(&name)?;
        if entry.size() > MAX_SOURCE {
            continue;
        }
        let mut text = String::new();
        entry.take(MAX_SOURCE).read_to_string(&mut text)?;
        if wrapper.is_none() && text.contains("__check_inputs_outputs(") {
            wrapper = Some(text);
        } else {
            kernels.push_str(&text);
            kernels.push('\n');
        }
    }
    Ok(wrapper.map(|wrapper| Sources { wrapper, kernels }))
}

impl InputChecks {
    /// The checks of a package: those its wrapper records, less the upper bounds that its
    /// generated code shows to be compiler assumptions rather than guards of memory.
    pub fn read(sources: &Sources) -> Result<InputChecks> {
        let mut checks = InputChecks::parse(&sources.wrapper)?;
        let assumed = bounds::assumed_bounds(&sources.wrapper, &sources.kernels);
        for dim in checks.inputs.iter_mut().flat_map(|i| i.dims.iter_mut()) {
            if matches!(&dim.size, Size::Symbol(s) if assumed.contains(s)) {
                dim.upper = None;
            }
        }
        Ok(checks)
    }

    /// Reads the checks from the wrapper source: its `check_input_<i>` functions (dtype, fixed
    /// sizes, bounds, fixed strides) and its `assert_size_stride(<input>, {sizes}, {strides},
    /// "input")` lines (which size symbol each dynamic dimension is).
    pub fn parse(source: &str) -> Result<InputChecks> {
        let unreadable = |what: &str| {
            fail(
                Code::ModelLoadError,
                format!("cannot read the input checks in the package's generated code: {what}"),
            )
        };
        let count = number_after(source, "AOTInductorModelBase(")
            .ok_or_else(|| unreadable("no AOTInductorModelBase(...) constructor"))?;
        let names = input_names(source);
        let asserts = input_asserts(source);
        let inputs = (0..count)
            .map(|i| {
                let body =
                    check_function(source, i).ok_or_else(|| unreadable(&format!("no check_input_{i}")))?;
                let symbolic = names.get(&i).and_then(|n| asserts.get(n));
                InputSpec::parse(body, symbolic)
                    .ok_or_else(|| unreadable(&format!("check_input_{i} has no dtype check")))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(InputChecks { inputs })
    }

    /// How many inputs the program takes.
    pub fn len(&self) -> usize {
        self.inputs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.inputs.is_empty()
    }

    /// How input `i`, of these sizes and strides, is to be given to the program: as it is where
    /// the program fixes every stride (a memory format such as channels-last, compiled in) and
    /// they agree; copied into those strides where they differ; else made dense row-major (a
    /// stride symbolic, the input unknown, or sizes those strides cannot lay out).
    pub fn layout(&self, i: usize, sizes: &[i64], strides: &[i64]) -> Layout {
        let Some(spec) = self.inputs.get(i).filter(|s| s.strides.len() == sizes.len()) else {
            return Layout::Dense;
        };
        let Some(fixed) = spec.strides.iter().copied().collect::<Option<Vec<i64>>>() else {
            return Layout::Dense;
        };
        if !dense_layout(sizes, &fixed) {
            Layout::Dense
        } else if strides_agree(&spec.strides, sizes, strides) {
            Layout::AsGiven
        } else {
            Layout::Strided(fixed)
        }
    }

    /// Checks the inputs (as many as the program takes; the runner reports a wrong count).
    pub fn check(&self, inputs: &[Actual]) -> Result<()> {
        let mut bound: HashMap<&str, (i64, usize, usize)> = HashMap::new();
        for (i, (spec, actual)) in self.inputs.iter().zip(inputs).enumerate() {
            spec.check_alone(i, actual)?;
            for (d, dim) in spec.dims.iter().enumerate() {
                if let Size::Symbol(s) = &dim.size {
                    let v = actual.sizes[d];
                    match bound.get(s.as_str()) {
                        None => {
                            bound.insert(s, (v, i, d));
                        }
                        Some(&(w, j, e)) if w != v => {
                            return Err(spec.mismatch(
                                i,
                                actual,
                                format!("dimension {d} must equal input {j}'s dimension {e}, {w}"),
                            ))
                        }
                        Some(_) => {}
                    }
                }
            }
        }
        let values: HashMap<&str, i64> = bound.iter().map(|(s, (v, _, _))| (*s, *v)).collect();
        for (i, (spec, actual)) in self.inputs.iter().zip(inputs).enumerate() {
            for (d, dim) in spec.dims.iter().enumerate() {
                let Size::Computed(text, expr) = &dim.size else {
                    continue;
                };
                match expr.as_ref().and_then(|e| e.eval(&values)) {
                    Some(want) if want != actual.sizes[d] => {
                        return Err(spec.mismatch(
                            i,
                            actual,
                            format!("dimension {d} must be {text} = {want}"),
                        ))
                    }
                    Some(_) => {}
                    // Not computable from the other inputs: its recorded bounds only.
                    None => spec.check_bounds(i, actual, d, dim)?,
                }
            }
        }
        Ok(())
    }
}

impl InputSpec {
    /// Reads a `check_input_<i>` body; `symbolic` is the input's `({sizes}, {strides})` from its
    /// `assert_size_stride` line. None when the body has no dtype check (not a check function).
    fn parse(body: &str, symbolic: Option<&(Vec<String>, Vec<String>)>) -> Option<InputSpec> {
        let dtype = body
            .split("_expected_dtype = aoti_torch_dtype_")
            .nth(1)?
            .split('(')
            .next()?
            .to_string();
        let mut fixed = HashMap::new();
        let (mut lower, mut upper, mut strides) = (HashMap::new(), HashMap::new(), HashMap::new());
        for line in body.lines() {
            let Some(cond) = line
                .trim()
                .strip_prefix("if (")
                .and_then(|l| l.strip_suffix(") {"))
            else {
                continue;
            };
            let [a, op, b] = cond.split_whitespace().collect::<Vec<_>>()[..] else {
                continue;
            };
            // `3 != x_size[1]`, `3 != x_stride[0]`, `x_size[0] < 2`, `x_size[0] > 64`.
            let (map, d, value) = match (op, index_of(a, "_size["), index_of(b, "_size[")) {
                ("!=", _, Some(d)) => (&mut fixed, d, a),
                ("<", Some(d), _) => (&mut lower, d, b),
                (">", Some(d), _) => (&mut upper, d, b),
                ("!=", _, None) => match index_of(b, "_stride[") {
                    Some(d) => (&mut strides, d, a),
                    None => continue,
                },
                _ => continue,
            };
            if let Some(n) = integer(value) {
                map.insert(d, n);
            }
        }
        // The rank: the assert line lists every dimension; without it, the checks name every
        // dimension too, since a dense layout's last stride is always the fixed 1.
        let checked = fixed
            .keys()
            .chain(lower.keys())
            .chain(upper.keys())
            .chain(strides.keys());
        let rank = match symbolic {
            Some((sizes, _)) => sizes.len(),
            None => checked.max().map_or(0, |d| d + 1),
        };
        let dims = (0..rank)
            .map(|d| DimSpec {
                size: match (fixed.get(&d), symbolic.map(|(s, _)| s[d].as_str())) {
                    (Some(&n), _) => Size::Fixed(n),
                    (None, Some(s)) if is_identifier(s) => Size::Symbol(s.to_string()),
                    (None, Some(s)) => match integer(s) {
                        Some(n) => Size::Fixed(n),
                        None => Size::Computed(tidy(s), Expr::parse(s)),
                    },
                    (None, None) => Size::Unnamed,
                },
                lower: lower.get(&d).copied(),
                upper: upper.get(&d).copied(),
            })
            .collect();
        Some(InputSpec {
            dtype,
            dims,
            strides: (0..rank).map(|d| strides.get(&d).copied()).collect(),
        })
    }

    /// What can be checked of one input on its own: dtype, rank, fixed sizes, the bounds of
    /// named sizes, fixed strides.
    fn check_alone(&self, i: usize, actual: &Actual) -> Result<()> {
        if actual.dtype != self.dtype {
            return Err(fail(
                Code::DTypeMismatch,
                format!("input {i}: expected dtype {}, got {}", self.dtype, actual.dtype),
            ));
        }
        if actual.sizes.len() != self.dims.len() {
            return Err(fail(
                Code::ShapeMismatch,
                format!(
                    "input {i}: expected {} dimensions {}, got shape {}",
                    self.dims.len(),
                    self.shape(),
                    list(actual.sizes)
                ),
            ));
        }
        for (d, dim) in self.dims.iter().enumerate() {
            match dim.size {
                Size::Fixed(n) if actual.sizes[d] != n => {
                    return Err(self.mismatch(i, actual, format!("dimension {d} must be {n}")))
                }
                Size::Symbol(_) | Size::Unnamed => self.check_bounds(i, actual, d, dim)?,
                _ => {}
            }
        }
        if !strides_agree(&self.strides, actual.sizes, actual.strides) {
            let want: Vec<String> = self
                .strides
                .iter()
                .map(|s| s.map_or("*".to_string(), |s| s.to_string()))
                .collect();
            return Err(fail(
                Code::ShapeMismatch,
                format!(
                    "input {i}: expected strides [{}] (the memory format the package was compiled for), got {}",
                    want.join(", "),
                    list(actual.strides)
                ),
            ));
        }
        Ok(())
    }

    fn check_bounds(&self, i: usize, actual: &Actual, d: usize, dim: &DimSpec) -> Result<()> {
        let v = actual.sizes[d];
        if v < dim.min() || dim.upper.is_some_and(|u| v > u) {
            return Err(self.mismatch(
                i,
                actual,
                format!(
                    "dimension {d} is {v}, outside the {} this package was compiled for",
                    dim.range()
                ),
            ));
        }
        Ok(())
    }

    fn mismatch(&self, i: usize, actual: &Actual, why: String) -> anyhow::Error {
        fail(
            Code::ShapeMismatch,
            format!(
                "input {i}: expected shape {}, got {} ({why})",
                self.shape(),
                list(actual.sizes)
            ),
        )
    }

    /// The expected shape for messages: `[1..64, 3, 224, 224]`.
    fn shape(&self) -> String {
        let dims: Vec<String> = self
            .dims
            .iter()
            .map(|d| match &d.size {
                Size::Fixed(n) => n.to_string(),
                Size::Computed(text, _) => text.clone(),
                Size::Symbol(_) | Size::Unnamed => d.range(),
            })
            .collect();
        format!("[{}]", dims.join(", "))
    }
}

impl DimSpec {
    /// The smallest size accepted. A recorded 2 is torch.export's specialization of 0 and 1
    /// (the bound it records for `min=1`), not something the generated code needs: read it as
    /// 1. Size 0 stays refused: the program was never traced for an empty dimension.
    fn min(&self) -> i64 {
        match self.lower {
            Some(2) | None => 1,
            Some(n) => n,
        }
    }

    fn range(&self) -> String {
        match self.upper {
            Some(u) => format!("{}..{u}", self.min()),
            None => format!("{}..", self.min()),
        }
    }
}

/// A size expression of sympy's C form over symbols and integers: `2L*s17`, `s0 + (-1L)`.
#[derive(Debug, Clone, PartialEq)]
enum Expr {
    Int(i64),
    Symbol(String),
    Add(Box<Expr>, Box<Expr>),
    Sub(Box<Expr>, Box<Expr>),
    Mul(Box<Expr>, Box<Expr>),
    Neg(Box<Expr>),
}

impl Expr {
    /// None for anything else (a division, a function call): such a size is bounds-checked only.
    fn parse(text: &str) -> Option<Expr> {
        let tokens = tokens(text)?;
        let mut pos = 0;
        let e = Expr::sum(&tokens, &mut pos)?;
        (pos == tokens.len()).then_some(e)
    }

    fn sum(t: &[Token], pos: &mut usize) -> Option<Expr> {
        let mut e = Expr::product(t, pos)?;
        while let Some(Token::Op(op @ ('+' | '-'))) = t.get(*pos) {
            *pos += 1;
            let rhs = Box::new(Expr::product(t, pos)?);
            e = if *op == '+' {
                Expr::Add(Box::new(e), rhs)
            } else {
                Expr::Sub(Box::new(e), rhs)
            };
        }
        Some(e)
    }

    fn product(t: &[Token], pos: &mut usize) -> Option<Expr> {
        let mut e = Expr::unary(t, pos)?;
        while let Some(Token::Op('*')) = t.get(*pos) {
            *pos += 1;
            e = Expr::Mul(Box::new(e), Box::new(Expr::unary(t, pos)?));
        }
        Some(e)
    }

    fn unary(t: &[Token], pos: &mut usize) -> Option<Expr> {
        let token = t.get(*pos)?;
        *pos += 1;
        match token {
            Token::Op('-') => Some(Expr::Neg(Box::new(Expr::unary(t, pos)?))),
            Token::Int(n) => Some(Expr::Int(*n)),
            Token::Name(s) => Some(Expr::Symbol(s.clone())),
            Token::Op('(') => {
                let e = Expr::sum(t, pos)?;
                (t.get(*pos) == Some(&Token::Op(')'))).then(|| *pos += 1)?;
                Some(e)
            }
            Token::Op(_) => None,
        }
    }

    /// The value given the symbols' values; None when a symbol is unknown or it overflows.
    fn eval(&self, values: &HashMap<&str, i64>) -> Option<i64> {
        Some(match self {
            Expr::Int(n) => *n,
            Expr::Symbol(s) => *values.get(s.as_str())?,
            Expr::Add(a, b) => a.eval(values)?.checked_add(b.eval(values)?)?,
            Expr::Sub(a, b) => a.eval(values)?.checked_sub(b.eval(values)?)?,
            Expr::Mul(a, b) => a.eval(values)?.checked_mul(b.eval(values)?)?,
            Expr::Neg(a) => a.eval(values)?.checked_neg()?,
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Int(i64),
    Name(String),
    Op(char),
}

/// None on anything but integers, names, `+ - * ( )` and spaces (`::`, `/`, `,` of a call).
fn tokens(text: &str) -> Option<Vec<Token>> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if "+-*()".contains(c) {
            out.push(Token::Op(c));
            chars.next();
        } else if c.is_ascii_alphanumeric() || c == '_' {
            let mut word = String::new();
            while let Some(&c) = chars.peek().filter(|c| c.is_ascii_alphanumeric() || **c == '_') {
                word.push(c);
                chars.next();
            }
            out.push(match integer(&word) {
                Some(n) => Token::Int(n),
                None if is_identifier(&word) => Token::Name(word),
                None => return None,
            });
        } else {
            return None;
        }
    }
    Some(out)
}

/// `15`, `15L`, `-2LL` -> the integer.
fn integer(text: &str) -> Option<i64> {
    text.trim().trim_end_matches('L').parse().ok()
}

fn is_identifier(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `2L*s17` -> `2*s17`, for messages.
fn tidy(expr: &str) -> String {
    let mut out = String::new();
    let mut prev = ' ';
    for c in expr.chars() {
        if !(c == 'L' && prev.is_ascii_digit()) {
            out.push(c);
        }
        prev = c;
    }
    out
}

/// `arg0_1_size[3]` with `marker` `_size[` -> 3.
fn index_of(token: &str, marker: &str) -> Option<usize> {
    let (_, rest) = token.split_once(marker)?;
    rest.strip_suffix(']')?.parse().ok()
}

fn list(values: &[i64]) -> String {
    let items: Vec<String> = values.iter().map(i64::to_string).collect();
    format!("[{}]", items.join(", "))
}

/// The first integer after `marker` (across spaces and newlines).
fn number_after(source: &str, marker: &str) -> Option<usize> {
    let rest = source.split_once(marker)?.1.trim_start();
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// `inputs_info_[i].name = "arg0_1";` lines: input index -> its name in the generated code.
fn input_names(source: &str) -> HashMap<usize, String> {
    source
        .lines()
        .filter_map(|l| {
            let rest = l.trim().strip_prefix("inputs_info_[")?;
            let (i, rest) = rest.split_once("].name = \"")?;
            Some((i.parse().ok()?, rest.strip_suffix("\";")?.to_string()))
        })
        .collect()
}

/// `assert_size_stride(arg0_1, {s17, 3L}, {3L, 1L}, "input")` lines: input name -> the symbolic
/// sizes and strides.
fn input_asserts(source: &str) -> HashMap<String, (Vec<String>, Vec<String>)> {
    let mut out = HashMap::new();
    for line in source.lines().filter(|l| l.contains("\"input\")")) {
        let Some((_, call)) = line.split_once("assert_size_stride(") else {
            continue;
        };
        let Some((name, rest)) = call.split_once(',') else {
            continue;
        };
        let groups = braced_groups(rest);
        if let [sizes, strides, ..] = &groups[..] {
            out.insert(name.trim().to_string(), (sizes.clone(), strides.clone()));
        }
    }
    out
}

/// ` {s17, 3L}, {2L*s17, }, ...` -> `[["s17", "3L"], ["2L*s17"]]`; commas inside parentheses
/// (a call's arguments) do not split.
fn braced_groups(text: &str) -> Vec<Vec<String>> {
    let mut groups = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find('{') {
        let body = &rest[start + 1..];
        let (mut depth, mut items, mut item) = (0, Vec::new(), String::new());
        let mut end = body.len();
        for (k, c) in body.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                ',' | '}' if depth == 0 => {
                    if !item.trim().is_empty() {
                        items.push(item.trim().to_string());
                    }
                    item.clear();
                    if c == '}' {
                        end = k;
                        break;
                    }
                    continue;
                }
                _ => {}
            }
            item.push(c);
        }
        groups.push(items);
        rest = &body[(end + 1).min(body.len())..];
    }
    groups
}

/// The body of `static void check_input_<i>(...) { ... }`.
/// How an input is to be given to the program (`InputChecks::layout`).
#[derive(Debug, PartialEq)]
pub enum Layout {
    /// As it is.
    AsGiven,
    /// Copied into these strides.
    Strided(Vec<i64>),
    /// Made dense row-major (`contiguous()`).
    Dense,
}

/// Whether strides `got` agree with `want` wherever the program reads them: not along a
/// dimension of size 1 (PyTorch ignores the stride there too), nor where `want` is symbolic.
fn strides_agree(want: &[Option<i64>], sizes: &[i64], got: &[i64]) -> bool {
    want.iter()
        .zip(got.iter().zip(sizes))
        .all(|(want, (&got, &size))| size <= 1 || want.is_none_or(|w| w == got))
}

/// Whether `strides` lay `sizes` out densely in some order of the dimensions (each element
/// once, no gaps: row-major, channels-last, ...), so a tensor of those strides can be allocated.
fn dense_layout(sizes: &[i64], strides: &[i64]) -> bool {
    let mut dims: Vec<(i64, i64)> = sizes
        .iter()
        .zip(strides)
        .filter(|(&n, _)| n > 1)
        .map(|(&n, &s)| (s, n))
        .collect();
    dims.sort_unstable();
    let mut next = 1i64;
    for (stride, size) in dims {
        if stride != next {
            return false;
        }
        let Some(n) = next.checked_mul(size) else {
            return false;
        };
        next = n;
    }
    sizes.iter().all(|&n| n >= 0)
}

fn check_function(source: &str, i: usize) -> Option<&str> {
    let start = source.find(&format!("static void check_input_{i}("))?;
    let body = &source[start..];
    // Up to the next function: the generated ones are separated by a line that closes them.
    let end = ["\nAOTI_NOINLINE static", "\nstatic "]
        .iter()
        .filter_map(|next| body[1..].find(next))
        .min()
        .map_or(body.len(), |e| e + 1);
    Some(&body[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Trimmed from a wrapper torch 2.13 generated for `(x [b, 3], y [b, 3], z [2*b], k [c, 3]
    /// int64)`: b = Dim(min=1, max=64), c = Dim(min=1).
    const WRAPPER: &str = r#"
AOTInductorModel::AOTInductorModel(std::shared_ptr<ConstantMap> constants_map,
                                   const std::string& device_str,
                                   std::optional<std::string> cubin_dir)
    : AOTInductorModelBase(4,
                           2,
                           0,
                           device_str) {
    inputs_info_[0].name = "arg0_1";
    inputs_info_[1].name = "arg1_1";
    inputs_info_[2].name = "arg2_1";
    inputs_info_[3].name = "arg3_1";
}
AOTI_NOINLINE static void check_input_0(
    AtenTensorHandle* input_handles
) {
    ConstantHandle arg0_1 = ConstantHandle(input_handles[0]);
    int32_t arg0_1_expected_dtype = aoti_torch_dtype_float32();
    if (arg0_1_expected_dtype != arg0_1_dtype) {
    }
    auto arg0_1_size = arg0_1.sizes();
    if (arg0_1_size[0] < 2) {
    }
    if (arg0_1_size[0] > 64) {
    }
    if (3 != arg0_1_size[1]) {
    }
    auto arg0_1_stride = arg0_1.strides();
    if (3 != arg0_1_stride[0]) {
    }
    if (1 != arg0_1_stride[1]) {
    }
    int32_t arg0_1_expected_device_type = 0;
}

AOTI_NOINLINE static void check_input_1(
    AtenTensorHandle* input_handles
) {
    int32_t arg1_1_expected_dtype = aoti_torch_dtype_float32();
    if (arg1_1_size[0] < 2) {
    }
    if (arg1_1_size[0] > 64) {
    }
    if (3 != arg1_1_size[1]) {
    }
    if (3 != arg1_1_stride[0]) {
    }
    if (1 != arg1_1_stride[1]) {
    }
}

AOTI_NOINLINE static void check_input_2(
    AtenTensorHandle* input_handles
) {
    int32_t arg2_1_expected_dtype = aoti_torch_dtype_float32();
    if (arg2_1_size[0] < 4) {
    }
    if (arg2_1_size[0] > 128) {
    }
    if (1 != arg2_1_stride[0]) {
    }
}

AOTI_NOINLINE static void check_input_3(
    AtenTensorHandle* input_handles
) {
    int32_t arg3_1_expected_dtype = aoti_torch_dtype_int64();
    if (arg3_1_size[0] < 2) {
    }
    if (3 != arg3_1_size[1]) {
    }
    if (3 != arg3_1_stride[0]) {
    }
    if (1 != arg3_1_stride[1]) {
    }
}

static bool _check_aoti_runtime_check_inputs_env() {
}

AOTI_NOINLINE static void __check_inputs_outputs(
    AtenTensorHandle* input_handles,
    AtenTensorHandle* output_handles) {
}
    int64_t s17 = arg0_1_size[0];
    int64_t s37 = arg3_1_size[0];
    if (_check_aoti_runtime_check_inputs_env()) { assert_size_stride(arg2_1, {2L*s17, }, {1L, }, "input"); }
    if (_check_aoti_runtime_check_inputs_env()) { assert_size_stride(arg3_1, {s37, 3L}, {3L, 1L}, "input"); }
    if (_check_aoti_runtime_check_inputs_env()) { assert_size_stride(arg0_1, {s17, 3L}, {3L, 1L}, "input"); }
    if (_check_aoti_runtime_check_inputs_env()) { assert_size_stride(arg1_1, {s17, 3L}, {3L, 1L}, "input"); }
"#;

    fn checks() -> InputChecks {
        InputChecks::parse(WRAPPER).unwrap()
    }

    /// Dense row-major strides, as `contiguous()` gives.
    fn dense(sizes: &[i64]) -> Vec<i64> {
        let mut strides = vec![1; sizes.len()];
        for d in (0..sizes.len().saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * sizes[d + 1].max(1);
        }
        strides
    }

    /// Runs the checks on inputs given as (shape, dtype); Err is (code, message).
    fn run(inputs: &[(Vec<i64>, &str)]) -> std::result::Result<(), (Code, String)> {
        let strides: Vec<Vec<i64>> = inputs.iter().map(|(s, _)| dense(s)).collect();
        let actual: Vec<Actual> = inputs
            .iter()
            .zip(&strides)
            .map(|((sizes, dtype), strides)| Actual {
                sizes,
                strides,
                dtype,
            })
            .collect();
        checks().check(&actual).map_err(|e| crate::error::describe(&e))
    }

    fn ok(b: i64, c: i64) -> std::result::Result<(), (Code, String)> {
        run(&[
            (vec![b, 3], "float32"),
            (vec![b, 3], "float32"),
            (vec![2 * b], "float32"),
            (vec![c, 3], "int64"),
        ])
    }

    #[test]
    fn reads_every_input() {
        let c = checks();
        assert_eq!(c.len(), 4);
        assert_eq!(c.inputs[0].shape(), "[1..64, 3]");
        assert_eq!(c.inputs[2].shape(), "[2*s17]");
        assert_eq!(c.inputs[3].shape(), "[1.., 3]");
        assert_eq!(c.inputs[3].dtype, "int64");
        assert_eq!(c.inputs[0].dims[0].size, Size::Symbol("s17".into()));
    }

    #[test]
    fn a_dynamic_size_of_1_runs_as_in_python() {
        assert_eq!(ok(1, 1), Ok(()));
        assert_eq!(ok(2, 5), Ok(()));
        assert_eq!(ok(64, 1000), Ok(()));
    }

    #[test]
    fn sizes_outside_the_recorded_range_are_refused() {
        let (code, message) = ok(65, 1).unwrap_err();
        assert_eq!(code, Code::ShapeMismatch);
        assert_eq!(
            message,
            "input 0: expected shape [1..64, 3], got [65, 3] (dimension 0 is 65, outside the 1..64 this package was compiled for)"
        );
        assert!(ok(0, 1)
            .unwrap_err()
            .1
            .contains("dimension 0 is 0, outside the 1..64"));
        assert!(ok(1, 0)
            .unwrap_err()
            .1
            .starts_with("input 3: expected shape [1.., 3], got [0, 3]"));
    }

    #[test]
    fn refusals_name_the_input_and_the_reason() {
        // (x, y, z, x's dtype) with k = [1, 3] int64; then the code and message expected.
        type Case = (
            &'static [i64],
            &'static [i64],
            &'static [i64],
            &'static str,
            Code,
            &'static str,
        );
        let cases: [Case; 5] = [
            (&[3, 3], &[2, 3], &[6], "float32", Code::ShapeMismatch,
             "input 1: expected shape [1..64, 3], got [2, 3] (dimension 0 must equal input 0's dimension 0, 3)"),
            (&[3, 3], &[3, 3], &[5], "float32", Code::ShapeMismatch,
             "input 2: expected shape [2*s17], got [5] (dimension 0 must be 2*s17 = 6)"),
            (&[2, 3], &[2, 3], &[4], "float64", Code::DTypeMismatch,
             "input 0: expected dtype float32, got float64"),
            (&[2, 3, 1], &[2, 3], &[4], "float32", Code::ShapeMismatch,
             "input 0: expected 2 dimensions [1..64, 3], got shape [2, 3, 1]"),
            (&[2, 4], &[2, 3], &[4], "float32", Code::ShapeMismatch,
             "input 0: expected shape [1..64, 3], got [2, 4] (dimension 1 must be 3)"),
        ];
        for (x, y, z, dtype, code, message) in cases {
            let inputs = [
                (x.to_vec(), dtype),
                (y.to_vec(), "float32"),
                (z.to_vec(), "float32"),
                (vec![1, 3], "int64"),
            ];
            assert_eq!(run(&inputs), Err((code, message.to_string())));
        }
    }

    #[test]
    fn layouts_follow_the_strides_the_program_fixes_for_that_rank() {
        let c = checks();
        assert_eq!(c.layout(0, &[2, 3], &[3, 1]), Layout::AsGiven);
        assert_eq!(c.layout(0, &[1, 3], &[99, 1]), Layout::AsGiven); // size 1: never read
        assert_eq!(c.layout(0, &[2, 3], &[1, 2]), Layout::Strided(vec![3, 1]));
        assert_eq!(c.layout(0, &[6], &[1]), Layout::Dense);
        assert_eq!(c.layout(99, &[2, 3], &[3, 1]), Layout::Dense);
        // the wrong sizes for those strides: nothing dense to allocate
        assert_eq!(c.layout(0, &[2, 5], &[5, 1]), Layout::Dense);
    }

    #[test]
    fn dense_layouts_are_permutations_without_gaps_or_overlaps() {
        assert!(dense_layout(&[2, 3, 4, 5], &[60, 1, 15, 3])); // channels-last
        assert!(dense_layout(&[2, 3], &[3, 1]));
        assert!(dense_layout(&[1, 3], &[99, 1])); // a size-1 stride is never read
        assert!(!dense_layout(&[2, 5], &[3, 1])); // overlapping
        assert!(!dense_layout(&[2, 3], &[6, 1])); // gaps
        assert!(!dense_layout(&[2, 3], &[0, 1]));
    }

    #[test]
    fn strides_count_only_where_a_dimension_has_more_than_one_element() {
        let spec = &checks().inputs[0];
        let column = Actual {
            sizes: &[2, 3],
            strides: &[1, 2],
            dtype: "float32",
        };
        assert!(spec
            .check_alone(0, &column)
            .unwrap_err()
            .to_string()
            .contains("expected strides [3, 1]"));
        let one_row = Actual {
            sizes: &[1, 3],
            strides: &[1, 1],
            dtype: "float32",
        };
        assert!(spec.check_alone(0, &one_row).is_ok());
    }

    #[test]
    fn without_assert_lines_the_checks_give_rank_and_bounds() {
        let no_asserts: String = WRAPPER
            .lines()
            .filter(|l| !l.contains("\"input\")"))
            .collect::<Vec<_>>()
            .join("\n");
        let c = InputChecks::parse(&no_asserts).unwrap();
        assert_eq!(c.inputs[0].shape(), "[1..64, 3]");
        assert_eq!(c.inputs[2].shape(), "[4..128]");
        assert_eq!(c.inputs[0].dims[0].size, Size::Unnamed);
    }

    #[test]
    fn a_recorded_lower_bound_above_2_is_kept() {
        let dim = DimSpec {
            size: Size::Unnamed,
            lower: Some(3),
            upper: None,
        };
        assert_eq!(dim.min(), 3);
        assert_eq!(dim.range(), "3..");
    }

    #[test]
    fn expressions() {
        let values = HashMap::from([("s0", 5), ("s1", 2)]);
        let eval = |t: &str| Expr::parse(t).and_then(|e| e.eval(&values));
        assert_eq!(eval("2L*s0"), Some(10));
        assert_eq!(eval("s0 + (-1L)"), Some(4));
        assert_eq!(eval("(-1L) + s0*s1 - 3"), Some(6));
        assert_eq!(eval("s9"), None);
        assert_eq!(
            Expr::parse("c10::div_floor_integer(static_cast<int64_t>(s0), 2L)"),
            None
        );
        assert_eq!(Expr::parse("s0 / 2"), None);
        assert_eq!(
            braced_groups(" {f(a, b), 3L}, {}, "),
            vec![vec!["f(a, b)".to_string(), "3L".into()], vec![]]
        );
        assert_eq!(tidy("2L*s17 + 10L"), "2*s17 + 10");
    }

    /// A `.pt2`-like zip with these records, in a fresh temp file; returns its path.
    fn package(records: &[(&str, &str)]) -> String {
        use std::io::Write;
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("torch-node-aot-inputs-{}-{n}.pt2", std::process::id()));
        let mut zip = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
        for (name, text) in records {
            zip.start_file(*name, zip::write::FileOptions::default()).unwrap();
            zip.write_all(text.as_bytes()).unwrap();
        }
        zip.finish().unwrap();
        path.to_string_lossy().into_owned()
    }

    #[test]
    fn the_wrapper_is_found_in_the_package() {
        let with = package(&[
            ("pkg/data/aotinductor/model/k.kernel.cpp", "void kernel() {}"),
            ("pkg/data/aotinductor/model/w.wrapper.cpp", WRAPPER),
            (
                "pkg/data/aotinductor/other/x.wrapper.cpp",
                "__check_inputs_outputs(",
            ),
        ]);
        let sources = package_sources(&with).unwrap().unwrap();
        assert_eq!(sources.wrapper, WRAPPER);
        assert!(sources.kernels.contains("void kernel() {}"));
        let without = package(&[("pkg/data/aotinductor/model/k.kernel.cpp", "void kernel() {}")]);
        assert!(package_sources(&without).unwrap().is_none());
        // Without checks to read, the package is refused unless the user turned on the compiled ones.
        if std::env::var_os("AOTI_RUNTIME_CHECK_INPUTS").is_none() {
            let (code, message) = crate::error::describe(&crate::aot::input_checks(&without).unwrap_err());
            assert_eq!(code, Code::ModelLoadError);
            assert!(message.contains("set AOTI_RUNTIME_CHECK_INPUTS=1"), "{message}");
        }
        for p in [with, without] {
            std::fs::remove_file(p).unwrap();
        }
    }

    #[test]
    fn a_source_without_checks_is_an_error() {
        let e = InputChecks::parse("int main() {}").unwrap_err();
        assert_eq!(crate::error::describe(&e).0, Code::ModelLoadError);
    }
}
