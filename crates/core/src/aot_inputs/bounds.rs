//! Which recorded upper bounds guard memory, read from the generated code.
//!
//! The upper bound the input checks record for a dynamic size is the symbol's range when the
//! wrapper was generated, narrowed by every guard taken while tracing *and* compiling. Some
//! guards only record what the compiler assumed: ResNet-18 exported with `Dim(max=64)` records
//! 15 because ATen's convolution backend choice (`use_mkldnn`: `input.size(0) >= 16 || ...`)
//! was evaluated on a symbolic batch during lowering; the export itself records 1..64, and every
//! buffer and loop of the generated code is sized by the batch read from the input, so Python's
//! runner (which checks nothing) runs batch 64 and gets the right answer. Other guards keep
//! reads inside fixed-size memory: `pos[:x.size(1)]` records the table's length, and the kernel
//! reads `pos` at `x1 < ks1` (the sequence length), past its end for a longer sequence.
//!
//! So a symbol's upper bound is kept when the generated code may touch fixed-size memory (a
//! constant, or a buffer or input whose extent does not grow with the symbol) at an offset that
//! depends on the symbol, and released only when every use of the symbol was read and none
//! does. Whatever is not understood keeps the bound (fail closed): an unknown kernel, a call
//! that does not match its definition, a statement of the wrapper we do not recognise.
use super::{braced_groups, Expr};
use std::collections::{HashMap, HashSet};

/// The symbols whose recorded upper bound only records a compiler assumption: the generated
/// code reads and writes, along them, only memory sized by them. Empty when the wrapper's
/// `run_impl` cannot be found.
pub(super) fn assumed_bounds(wrapper: &str, kernels: &str) -> HashSet<String> {
    let Some(body) = function_body(wrapper, "AOTInductorModel::run_impl(") else {
        return HashSet::new();
    };
    let kernels: HashMap<&str, Kernel> = kernel_definitions(kernels)
        .chain(kernel_definitions(wrapper))
        .map(|k| (k.name, k))
        .collect();
    let mut program = Program::default();
    for statement in statements(body) {
        program.read(&statement, &kernels);
    }
    program.symbols.difference(&program.guarded).cloned().collect()
}

#[derive(Default)]
struct Program {
    /// The input size symbols (`int64_t s77 = arg122_1_size[0];`).
    symbols: HashSet<String>,
    /// Symbols whose bound must stay.
    guarded: HashSet<String>,
    /// Scalar names of the wrapper -> the symbols they are computed from.
    scalars: HashMap<String, HashSet<String>>,
    /// `int_array_K` -> its items.
    int_arrays: HashMap<String, Vec<String>>,
    /// Tensors (inputs, buffers) -> the symbols their extent grows with; absent: fixed.
    extent: HashMap<String, HashSet<String>>,
}

impl Program {
    /// The symbols a piece of wrapper code depends on, through scalars and int arrays.
    fn symbols_in(&self, text: &str) -> HashSet<String> {
        let mut out = HashSet::new();
        for name in names(text) {
            if let Some(s) = self.scalars.get(name) {
                out.extend(s.iter().cloned());
            }
            if let Some(items) = self.int_arrays.get(name) {
                out.extend(items.iter().flat_map(|i| self.symbols_in(i)));
            }
        }
        out
    }

    /// The symbols a list of sizes grows with; None when one is not a sum of products of
    /// symbols and integers (`std::min(16L, s27)` is fixed past 16).
    fn growth(&self, sizes: &[String]) -> Option<HashSet<String>> {
        sizes
            .iter()
            .all(|s| Expr::parse(s).is_some())
            .then(|| sizes.iter().flat_map(|s| self.symbols_in(s)).collect())
    }

    /// The items of `int_array_K` or of an inline `{...}`.
    fn sizes(&self, arg: &str) -> Option<Vec<String>> {
        let arg = arg.trim();
        match self.int_arrays.get(arg) {
            Some(items) => Some(items.clone()),
            None if arg.starts_with('{') => braced_groups(arg).into_iter().next(),
            None => None,
        }
    }

    fn extent_of(&self, tensor: &str) -> HashSet<String> {
        self.extent.get(tensor).cloned().unwrap_or_default()
    }

    fn read(&mut self, statement: &str, kernels: &HashMap<&str, Kernel>) {
        let s = statement.split("//").next().unwrap_or("").trim();
        if s.is_empty() {
            return;
        }
        // `int64_t s77 = arg122_1_size[0];`, `int64_t ps0 = 8L*s27;`
        if let Some((name, value)) = declaration(s, &["int64_t ", "const int64_t ", "auto "]) {
            if let Some((tensor, _)) = value.split_once("_size[") {
                if value.ends_with(']') && is_name(tensor) {
                    self.symbols.insert(name.to_string());
                    self.scalars
                        .insert(name.into(), HashSet::from([name.to_string()]));
                    self.extent.entry(tensor.into()).or_default().insert(name.into());
                    return;
                }
            }
            if let Some(other) = value.strip_prefix("std::move(").and_then(|v| v.strip_suffix(')')) {
                let e = self.extent_of(other.trim());
                self.extent.insert(name.into(), e);
                return;
            }
            if !s.starts_with("auto ") {
                let symbols = self.symbols_in(value);
                self.scalars.insert(name.into(), symbols);
                return;
            }
        }
        // `const int64_t int_array_0[] = {s77, 3L};`, `static constexpr int64_t int_array_1[] = {...};`
        if let Some((_, rest)) = s.split_once("int64_t int_array_") {
            if let Some((id, items)) = rest.split_once("[] =") {
                let items = braced_groups(items).into_iter().next().unwrap_or_default();
                self.int_arrays.insert(format!("int_array_{id}"), items);
                return;
            }
        }
        // Compiled checks of sizes: `assert_size_stride(buf2, {s77, 64L, ...}, {...}, "...")`:
        // the symbolic sizes of a buffer (an extern op's output) or an input.
        if let Some((_, call)) = s.split_once("assert_size_stride(") {
            if let Some((tensor, rest)) = call.split_once(',') {
                if let Some(sizes) = braced_groups(rest).first() {
                    if let Some(g) = self.growth(sizes) {
                        self.extent.entry(tensor.trim().into()).or_default().extend(g);
                    }
                }
            }
            return;
        }
        let symbols = self.symbols_in(s);
        // A view of a tensor: sized along a symbol its base does not grow with, it reaches past
        // the base's end.
        if let Some((_, call)) = s.split_once("reinterpret_tensor_wrapper(") {
            let args = arguments(call);
            let base = args.first().map(|a| a.trim()).unwrap_or("");
            let base_extent = self.extent_of(base);
            self.guarded
                .extend(symbols.iter().filter(|s| !base_extent.contains(*s)).cloned());
            if let Some((name, _)) = declaration(s, &["auto "]) {
                self.extent.insert(name.into(), base_extent);
            }
            return;
        }
        if let Some((_, call)) = s.split_once("aoti_torch_empty_strided(") {
            let args = arguments(call);
            let sizes = args.get(1).and_then(|a| self.sizes(a));
            let handle = args.last().and_then(|h| h.trim().strip_prefix('&'));
            if let (Some(sizes), Some(handle)) = (sizes, handle) {
                let name = handle.strip_suffix("_handle").unwrap_or(handle);
                if let Some(g) = self.growth(&sizes) {
                    self.extent.insert(name.into(), g);
                }
            }
            return;
        }
        if symbols.is_empty() {
            return;
        }
        // An ATen op through the C shim checks its tensors' sizes itself; not one that makes a
        // tensor of given sizes over memory it is handed.
        let unchecked_view = s.contains("reinterpret") || s.contains("from_blob");
        if s.starts_with("AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_") && !unchecked_view {
            return;
        }
        if let Some(kernel) = s.split_once('(').and_then(|(name, _)| kernels.get(name.trim())) {
            if let Some(guarded) = self.kernel_call(kernel, s, &symbols) {
                self.guarded.extend(guarded);
                return;
            }
        }
        // Not understood: keep the bounds of the symbols it uses.
        self.guarded.extend(symbols);
    }

    /// The symbols (of `symbols`) the call may read fixed-size memory along; None when the
    /// call does not match the kernel's parameters.
    fn kernel_call(&self, kernel: &Kernel, call: &str, symbols: &HashSet<String>) -> Option<HashSet<String>> {
        let args = arguments(call.split_once('(')?.1);
        if args.len() != kernel.params.len() {
            return None;
        }
        let mut guarded = HashSet::new();
        for symbol in symbols {
            let mut seeds = HashSet::new();
            let mut fixed = HashSet::new();
            for ((ty, param), arg) in kernel.params.iter().zip(&args) {
                if ty.contains('*') {
                    // `(const float*)(arg122_1.data_ptr())`; anything else is fixed-size.
                    let base = arg.split(".data_ptr()").next().and_then(|b| names(b).last());
                    let grows = arg.contains(".data_ptr()")
                        && base.is_some_and(|b| self.extent_of(b).contains(symbol));
                    if !grows {
                        fixed.insert(param.as_str());
                    }
                } else if self.symbols_in(arg).contains(symbol) {
                    seeds.insert(param.as_str());
                }
            }
            if !seeds.is_empty() && kernel.reads_along(&seeds, &fixed) {
                guarded.insert(symbol.clone());
            }
        }
        Some(guarded)
    }
}

/// A kernel defined in the generated C++: `extern "C" void name(params) { body }`.
struct Kernel<'a> {
    name: &'a str,
    /// (type, name)
    params: Vec<(String, String)>,
    body: &'a str,
}

impl Kernel<'_> {
    /// Whether a statement touches one of the `fixed` pointers (or a pointer computed from
    /// one) while using a name that depends on `seeds` (the scalar parameters that carry the
    /// symbol): loop variables bounded by them and values computed from them. A value loaded
    /// from memory is data: an index computed from data is bounds-checked by the generated
    /// code itself (`AOTI_TORCH_CHECK(... "index out of bounds")`).
    fn reads_along(&self, seeds: &HashSet<&str>, fixed: &HashSet<&str>) -> bool {
        let pointers: HashSet<&str> = self
            .params
            .iter()
            .filter(|(ty, _)| ty.contains('*'))
            .map(|(_, n)| n.as_str())
            .collect();
        let Scoped { loops, statements } = Scoped::of(self.body);
        let loops: Vec<(&str, &str)> = loops.iter().map(|(v, h)| (v.as_str(), h.as_str())).collect();
        let statements: Vec<&str> = statements.iter().map(String::as_str).collect();
        let mut dependent: HashSet<&str> = seeds.clone();
        let mut fixed: HashSet<&str> = fixed.clone();
        let mut pointers = pointers;
        loop {
            let before = (dependent.len(), fixed.len(), pointers.len());
            for (var, header) in &loops {
                if names(header).any(|n| dependent.contains(n)) {
                    dependent.insert(var);
                }
            }
            for s in &statements {
                let Some((lhs, rhs)) = assignment(s) else {
                    continue;
                };
                let Some(name) = names(lhs).last() else {
                    continue;
                };
                let rhs_names: Vec<&str> = names(rhs).collect();
                // `T* p = in_ptr0 + k`, `auto p = &in_ptr0[k]`, `auto p = in_ptr0 + k`; not a
                // load (`in_ptr0[k]`).
                let first = rhs.trim_start_matches(['(', ' ']);
                let alias = lhs.contains('*')
                    || first.starts_with('&')
                    || names(first).next().is_some_and(|n| {
                        pointers.contains(n)
                            && first.starts_with(n)
                            && !first[n.len()..].trim_start().starts_with('[')
                    });
                if alias {
                    pointers.insert(name);
                    if rhs_names.iter().any(|n| fixed.contains(n)) {
                        fixed.insert(name);
                    }
                    if rhs_names.iter().any(|n| dependent.contains(n)) {
                        dependent.insert(name);
                    }
                } else if !rhs_names.iter().any(|n| pointers.contains(n))
                    && rhs_names.iter().any(|n| dependent.contains(n))
                {
                    dependent.insert(name);
                }
            }
            if before == (dependent.len(), fixed.len(), pointers.len()) {
                break;
            }
        }
        statements.iter().any(|s| {
            let defined = assignment(s).and_then(|(lhs, _)| names(lhs).last());
            let used: Vec<&str> = names(s).filter(|n| Some(*n) != defined).collect();
            used.iter().any(|n| fixed.contains(n)) && used.iter().any(|n| dependent.contains(n))
        })
    }
}

/// Every `extern "C" void name(...) { ... }` defined in `source`.
fn kernel_definitions(source: &str) -> impl Iterator<Item = Kernel<'_>> {
    source.split("extern \"C\"").skip(1).filter_map(|rest| {
        let rest = rest.trim_start().strip_prefix("void")?.trim_start();
        let (name, after) = rest.split_once('(')?;
        let name = name.trim();
        if !is_name(name) {
            return None;
        }
        let close = matching(after, '(', ')')?;
        let params = arguments(&after[..=close])
            .iter()
            .map(|p| {
                let p = p.trim();
                let split = p.rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))?;
                Some((p[..=split].trim().to_string(), p[split + 1..].to_string()))
            })
            .collect::<Option<Vec<_>>>()?;
        // A declaration (`...);`, as the wrapper declares the kernels it calls) has no body.
        if !after[close + 1..].trim_start().starts_with('{') {
            return None;
        }
        let open = after[close..].find('{')? + close;
        let body = &after[open + 1..];
        let end = matching(body, '{', '}')?;
        Some(Kernel {
            name,
            params,
            body: &body[..end],
        })
    })
}

/// The index of the `close` that ends a text which starts just after an `open`.
fn matching(text: &str, open: char, close: char) -> Option<usize> {
    let mut depth = 0;
    for (i, c) in text.char_indices() {
        if c == open {
            depth += 1;
        } else if c == close {
            if depth == 0 {
                return Some(i);
            }
            depth -= 1;
        }
    }
    None
}

/// The arguments of a call, from just after its `(` to its `)`, split at top-level commas.
fn arguments(call: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in call.char_indices() {
        match c {
            '(' | '{' | '[' => depth += 1,
            ')' if depth == 0 => {
                out.push(&call[start..i]);
                break;
            }
            ')' | '}' | ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&call[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.into_iter().filter(|a| !a.trim().is_empty()).collect()
}

/// A kernel body as flat statements and loops, each name declared in a block (a loop
/// variable, `auto tmp0 = ...`, `float tmp1[64]`) renamed apart from the same name declared in
/// another block: the generated code reuses `x0` and `tmp0` in every loop nest.
struct Scoped {
    /// (loop variable, its header)
    loops: Vec<(String, String)>,
    statements: Vec<String>,
}

impl Scoped {
    fn of(body: &str) -> Scoped {
        // Preprocessor lines (`#pragma omp for`) carry no `;` to end them.
        let code: String = body
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n");
        let mut walk = Walk {
            scopes: vec![HashMap::new()],
            count: 0,
            out: Scoped {
                loops: Vec::new(),
                statements: Vec::new(),
            },
        };
        walk.block(&code);
        walk.out
    }
}

struct Walk {
    scopes: Vec<HashMap<String, String>>,
    count: usize,
    out: Scoped,
}

impl Walk {
    /// Statements end at `;` (outside parentheses); `head { ... }` opens a scope.
    fn block(&mut self, code: &str) {
        let (mut depth, mut start, mut i) = (0i32, 0, 0);
        let bytes = code.as_bytes();
        while i < bytes.len() {
            match bytes[i] {
                b'(' => depth += 1,
                b')' => depth -= 1,
                b';' if depth == 0 => {
                    self.statement(&code[start..i]);
                    start = i + 1;
                }
                b'{' if depth == 0 => {
                    let end = matching(&code[i + 1..], '{', '}').map_or(code.len(), |e| i + 1 + e);
                    self.scope(&code[start..i], &code[i + 1..end]);
                    i = end;
                    start = (end + 1).min(code.len());
                }
                _ => {}
            }
            i += 1;
        }
        self.statement(&code[start.min(code.len())..]);
    }

    /// `head { body }`: a loop declares its variable in the new scope.
    fn scope(&mut self, head: &str, body: &str) {
        self.scopes.push(HashMap::new());
        let head = head.trim();
        match head
            .strip_prefix("for")
            .map(str::trim_start)
            .filter(|h| h.starts_with('('))
        {
            Some(h) => {
                let header = &h[1..matching(&h[1..], '(', ')').map_or(h.len(), |e| e + 1)];
                let var = header.split(['=', ';']).next().and_then(|d| names(d).last());
                if let Some(var) = var {
                    let var = self.declare(var);
                    let header = self.rename(header);
                    self.out.loops.push((var, header));
                }
            }
            None => self.statement(head),
        }
        self.block(body);
        self.scopes.pop();
    }

    fn statement(&mut self, text: &str) {
        let text = text.trim();
        if text.is_empty() {
            return;
        }
        // A declaration names a type before the name: `auto tmp0 = ...`, `float tmp1[64]`.
        let lhs = assignment(text).map_or(text, |(lhs, _)| lhs);
        let lhs = lhs.split('[').next().unwrap_or(lhs);
        let declared = (assignment(text).is_some() || text.ends_with(']'))
            .then(|| names(lhs).collect::<Vec<_>>())
            .filter(|n| n.len() >= 2)
            .and_then(|n| n.last().copied());
        let renamed = match declared {
            Some(name) => {
                // The value is read in the enclosing names, then the name is declared.
                let Some((l, r)) = assignment(text) else {
                    self.declare(name);
                    return self.out.statements.push(self.rename(text));
                };
                let r = self.rename(r);
                self.declare(name);
                format!("{}={r}", self.rename(l))
            }
            None => self.rename(text),
        };
        self.out.statements.push(renamed);
    }

    fn declare(&mut self, name: &str) -> String {
        self.count += 1;
        let unique = format!("{name}__{}", self.count);
        if let Some(scope) = self.scopes.last_mut() {
            scope.insert(name.to_string(), unique.clone());
        }
        unique
    }

    fn rename(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut word = String::new();
        for c in text.chars().chain(std::iter::once(' ')) {
            if c.is_ascii_alphanumeric() || c == '_' {
                word.push(c);
                continue;
            }
            if !word.is_empty() {
                let found = self.scopes.iter().rev().find_map(|s| s.get(&word));
                out.push_str(found.map_or(word.as_str(), String::as_str));
                word.clear();
            }
            out.push(c);
        }
        out.pop();
        out
    }
}

/// `lhs = rhs` (also `+=` and the like), not a comparison.
fn assignment(statement: &str) -> Option<(&str, &str)> {
    let bytes = statement.as_bytes();
    (0..bytes.len()).find_map(|i| {
        let prev = if i > 0 { bytes[i - 1] } else { b' ' };
        let next = bytes.get(i + 1).copied().unwrap_or(b' ');
        (bytes[i] == b'=' && next != b'=' && !b"=!<>".contains(&prev)).then(|| {
            (
                statement[..i].trim_end_matches(['+', '-', '*', '/', '|', '&']),
                &statement[i + 1..],
            )
        })
    })
}

/// `<prefix>name = value` -> (name, value) for the first matching prefix.
fn declaration<'a>(statement: &'a str, prefixes: &[&str]) -> Option<(&'a str, &'a str)> {
    let rest = prefixes.iter().find_map(|p| statement.strip_prefix(p))?;
    let (name, value) = rest.split_once('=')?;
    let name = name.trim();
    is_name(name).then(|| (name, value.trim().trim_end_matches(';').trim()))
}

/// The identifiers in a piece of C++.
fn names(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| {
            w.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        })
}

fn is_name(s: &str) -> bool {
    !s.is_empty() && names(s).next() == Some(s)
}

/// The text between `{` after `signature` and its matching `}`.
fn function_body<'a>(source: &'a str, signature: &str) -> Option<&'a str> {
    let at = source.find(signature)?;
    let open = source[at..].find('{')? + at;
    let body = &source[open + 1..];
    Some(&body[..matching(body, '{', '}')?])
}

/// The statements of the wrapper's `run_impl`: one a line, a line continued while its
/// parentheses are open.
fn statements(body: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut depth = 0i32;
    for line in body.lines() {
        current.push_str(line.trim());
        current.push(' ');
        depth += line.matches('(').count() as i32 - line.matches(')').count() as i32;
        if depth <= 0 {
            out.push(std::mem::take(&mut current));
            depth = 0;
        }
    }
    if !current.trim().is_empty() {
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `run_impl` torch 2.13 generated for `ids [b, s] -> tokens(ids) + positions[:s]`
    /// (b = Dim(1..64), s = Dim(1..16), the table's length), comments trimmed.
    const WRAPPER: &str = r#"
void AOTInductorModel::run_impl(
    AtenTensorHandle*
        input_handles, // array of input AtenTensorHandle; handles
    AOTIProxyExecutorHandle proxy_executor
) {
    __check_inputs_outputs(input_handles, output_handles);
    auto inputs = steal_from_raw_handles_to_raii_handles(input_handles, 1);
    auto arg2_1 = std::move(inputs[0]);
    [[maybe_unused]] auto& pos = constants_->at(0);
    [[maybe_unused]] auto& emb_weight = constants_->at(1);
    auto arg2_1_size = arg2_1.sizes();
    int64_t s52 = arg2_1_size[0];
    int64_t s27 = arg2_1_size[1];
    inputs.clear();
    if (_check_aoti_runtime_check_inputs_env()) { assert_size_stride(arg2_1, {s52, s27}, {s27, 1L}, "input"); }
    const int64_t int_array_0[] = {s52, s27, 8L};
    const int64_t int_array_1[] = {8L*s27, 8L, 1L};
    AtenTensorHandle buf0_handle;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(3, int_array_0, int_array_1, cached_torch_dtype_float32, cached_torch_device_type_cpu, this->device_idx_, &buf0_handle));
    RAIIAtenTensorHandle buf0(buf0_handle);
    cpp_fused_add_embedding_slice_0((const int64_t*)(arg2_1.data_ptr()), (const float*)(emb_weight.data_ptr()), (const float*)(pos.data_ptr()), (float*)(buf0.data_ptr()), s52, s27);
    arg2_1.reset();
    output_handles[0] = buf0.release();
} // AOTInductorModel::run_impl
"#;

    const KERNEL: &str = r#"
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  cpp_fused_add_embedding_slice_0(const int64_t* in_ptr0,
                       const float* in_ptr1,
                       const float* in_ptr2,
                       float* out_ptr0,
                       const int64_t ks0,
                       const int64_t ks1)
{
    {
        #pragma GCC ivdep
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(ks0); x0+=static_cast<int64_t>(1L))
        {
            #pragma GCC ivdep
            for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(ks1); x1+=static_cast<int64_t>(1L))
            {
                for(int64_t x2=static_cast<int64_t>(0L); x2<static_cast<int64_t>(8L); x2+=static_cast<int64_t>(8L))
                {
                    {
                        if(C10_LIKELY(x2 >= static_cast<int64_t>(0) && x2 < static_cast<int64_t>(8L)))
                        {
                            auto tmp0 = in_ptr0[static_cast<int64_t>(x1 + ks1*x0)];
                            auto tmp5 = at::vec::Vectorized<float>::loadu(in_ptr2 + static_cast<int64_t>(x2 + 8L*x1), static_cast<int64_t>(8));
                            auto tmp1 = tmp0;
                            auto tmp2 = c10::convert<int64_t>(tmp1);
                            AOTI_TORCH_CHECK((0 <= tmp2) & (tmp2 < 50L), "index out of bounds: 0 <= tmp2 < 50L");
                            auto tmp4 = at::vec::Vectorized<float>::loadu(in_ptr1 + static_cast<int64_t>(x2 + 8L*tmp0), static_cast<int64_t>(8));
                            auto tmp6 = tmp4 + tmp5;
                            tmp6.store(out_ptr0 + static_cast<int64_t>(x2 + 8L*x1 + 8L*ks1*x0));
                        }
                    }
                }
            }
        }
    }
}
"#;

    fn assumed(wrapper: &str, kernels: &str) -> Vec<String> {
        let mut out: Vec<String> = assumed_bounds(wrapper, kernels).into_iter().collect();
        out.sort();
        out
    }

    #[test]
    fn a_size_that_indexes_a_weight_keeps_its_bound_the_batch_does_not() {
        // s27 reads `pos` (16 rows) at x1 < s27; s52 only sizes the input and the output.
        assert_eq!(assumed(WRAPPER, KERNEL), ["s52"]);
    }

    #[test]
    fn what_is_not_understood_keeps_the_bound() {
        // No kernel source: the call is not understood.
        assert!(assumed(WRAPPER, "").is_empty());
        // A call whose arguments do not match the definition.
        let long = WRAPPER.replace(", s52, s27);", ", s52, s27, s52);");
        assert!(assumed(&long, KERNEL).is_empty());
        // An unknown statement that uses a symbol.
        let odd = WRAPPER.replace("arg2_1.reset();", "some_helper(buf0, s52);");
        assert_eq!(assumed(&odd, KERNEL), Vec::<String>::new());
        // No run_impl at all.
        assert!(assumed("int main() {}", KERNEL).is_empty());
    }

    #[test]
    fn a_buffer_sized_by_a_min_is_fixed_size() {
        // An output sized min(16, s52) rows, written along s52: fixed past 16.
        let min = WRAPPER.replace("{s52, s27, 8L}", "{std::min(16L, s52), s27, 8L}");
        assert!(assumed(&min, KERNEL).is_empty());
    }

    #[test]
    fn views() {
        let view = |base: &str| {
            WRAPPER.replace(
                "arg2_1.reset();",
                &format!("auto buf1 = wrap_with_raii_handle_if_needed(reinterpret_tensor_wrapper({base}, 2, int_array_2, int_array_3, 0L));"),
            )
            .replace(
                "AtenTensorHandle buf0_handle;",
                "const int64_t int_array_2[] = {s52, 8L};\n    static constexpr int64_t int_array_3[] = {8L, 1L};\n    AtenTensorHandle buf0_handle;",
            )
        };
        // A view of the output along the batch stays inside it; one of a weight does not.
        assert_eq!(assumed(&view("buf0"), KERNEL), ["s52"]);
        assert!(assumed(&view("emb_weight"), KERNEL).is_empty());
    }

    #[test]
    fn values_loaded_from_memory_are_data_and_pointer_aliases_are_followed() {
        // `tmp0` (a token id) indexes the embedding: checked by the kernel, not a size.
        let k = Kernel {
            name: "k",
            params: vec![
                ("const float*".into(), "in_ptr0".into()),
                ("const int64_t".into(), "ks0".into()),
            ],
            body: "for(int64_t x0=0; x0<ks0; x0++) { const float* p = in_ptr0 + 4L; auto tmp0 = p[x0]; }",
        };
        let seeds = HashSet::from(["ks0"]);
        assert!(k.reads_along(&seeds, &HashSet::from(["in_ptr0"])));
        assert!(!k.reads_along(&seeds, &HashSet::new()));
        let data = Kernel {
            name: "data",
            params: vec![
                ("const float*".into(), "in_ptr0".into()),
                ("const int64_t*".into(), "in_ptr1".into()),
                ("const int64_t".into(), "ks0".into()),
            ],
            body: "for(int64_t x0=0; x0<ks0; x0++) { auto tmp0 = in_ptr1[x0]; auto tmp1 = in_ptr0[tmp0]; }",
        };
        assert!(!data.reads_along(&seeds, &HashSet::from(["in_ptr0"])));
    }

    #[test]
    fn pieces() {
        assert_eq!(arguments("a, (b, c), {d, e}) tail"), ["a", " (b, c)", " {d, e}"]);
        assert_eq!(assignment("auto tmp = a <= b"), Some(("auto tmp ", " a <= b")));
        assert_eq!(assignment("x0 += 1"), Some(("x0 ", " 1")));
        assert_eq!(assignment("if (a == b)"), None);
        let scoped = Scoped::of(
            "for(long i=0; i<n; i++) { auto t = i; } for(long i=0; i<8; i++) { float t[4]; f(t, i); }",
        );
        assert_eq!(
            scoped.loops,
            [
                ("i__1".to_string(), "long i__1=0; i__1<n; i__1++".to_string()),
                ("i__3".into(), "long i__3=0; i__3<8; i__3++".into())
            ]
        );
        assert_eq!(
            scoped.statements,
            ["auto t__2 = i__1", "float t__4[4]", "f(t__4, i__3)"]
        );
        let k: Vec<Kernel> = kernel_definitions(KERNEL).collect();
        assert_eq!(k.len(), 1);
        assert_eq!(k[0].params[4], ("const int64_t".to_string(), "ks0".to_string()));
    }
}
