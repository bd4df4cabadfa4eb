//! Chat templates: Hugging Face's Jinja templates rendered with `minijinja`, set up as
//! transformers' `_compile_jinja_template` sets up Jinja2 (transformers/utils/
//! chat_template_utils.py): `trim_blocks`, `lstrip_blocks`, loop controls, and the globals
//! `raise_exception`, `strftime_now`, a `tojson` filter that is Python's `json.dumps` (no HTML
//! escaping, `indent`/`separators`/`sort_keys`), and Python's string and dict methods
//! (minijinja-contrib's pycompat). Values print as Python prints them (`True`, `None`,
//! `['a', 'b']`), as Jinja2's output does. The context is `render_jinja_template`'s: `messages`
//! (keys whose value is null dropped; `reasoning_content`/`thinking` aliased), `tools`,
//! `documents`, `add_generation_prompt`, and the special tokens by role (`bos_token`, ...).
use crate::error::{fail, Code};
use minijinja::syntax::SyntaxConfig;
use minijinja::value::{Kwargs, Serde, Value, ValueKind};
use minijinja::{Environment, Error, ErrorKind, State};
use serde_json::Value as Json;
use std::fmt::Write as _;

/// The most nested template calls and blocks a template may make (a runaway recursive macro
/// fails with `InvalidArg` instead of overflowing the stack).
const RECURSION_LIMIT: usize = 200;

/// The instructions one rendering may run (minijinja's fuel): a 4,000-turn chat with tools takes
/// a few million; a template that loops without end (`range(100000)` nested) stops with
/// `InvalidArg` within about a second instead of holding its thread.
const FUEL: u64 = 100_000_000;

/// The largest chat template taken (the largest on the Hub are about 40 KiB).
pub const MAX_TEMPLATE_BYTES: usize = 1 << 20;

/// Checks a chat template given at load (`chatTemplate`): at most 1 MiB and valid Jinja, so a
/// bad one is refused there rather than on every request.
pub fn check(template: &str) -> anyhow::Result<()> {
    if template.len() > MAX_TEMPLATE_BYTES {
        return Err(fail(
            Code::InvalidArg,
            format!("chat template: {} bytes, at most 1 MiB", template.len()),
        ));
    }
    environment()
        .template_from_str(template)
        .map(|_| ())
        .map_err(|e| fail(Code::InvalidArg, format!("chat template: {}", describe(&e))))
}

/// What one rendering takes.
pub struct ChatInput<'a> {
    pub template: &'a str,
    pub messages: Vec<Json>,
    pub tools: Option<Json>,
    pub documents: Option<Json>,
    pub add_generation_prompt: bool,
    /// Special tokens by role, and any extra variables the caller passes.
    pub variables: Vec<(String, Json)>,
}

/// Renders a chat as transformers' `apply_chat_template(..., tokenize=False)`.
pub fn render(input: ChatInput<'_>) -> anyhow::Result<String> {
    let env = environment();
    let template = env
        .template_from_str(input.template)
        .map_err(|e| fail(Code::InvalidArg, format!("chat template: {}", describe(&e))))?;
    let messages: Vec<Json> = input.messages.into_iter().map(plain_message).collect();
    let mut ctx = serde_json::Map::new();
    for (k, v) in input.variables {
        ctx.insert(k, v);
    }
    ctx.insert("messages".into(), Json::Array(messages));
    ctx.insert("tools".into(), input.tools.unwrap_or(Json::Null));
    ctx.insert("documents".into(), input.documents.unwrap_or(Json::Null));
    ctx.insert(
        "add_generation_prompt".into(),
        Json::Bool(input.add_generation_prompt),
    );
    template
        .render(Value::from(Serde(&ctx)))
        .map_err(|e| fail(Code::InvalidArg, format!("chat template: {}", describe(&e))))
}

/// Where a chat template reads the tools it describes to the model: `tools` (transformers'
/// `apply_chat_template(tools=...)`, OpenAI's `{type, function}` objects) or SmolLM3's
/// `xml_tools` (the functions alone, without the `{type, function}` around each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolsVariable {
    Tools,
    XmlTools,
}

/// The variable `template` reads tools from, by its code (its `{% %}` and `{{ }}` blocks with
/// their string literals blanked: a template's text, "<tools></tools> XML tags", names no
/// variable); None when it reads neither (tools given to it would be dropped). The same test as
/// lib/text/tool-calls.js's `toolsVariableOf`.
pub fn tools_variable(template: &str) -> Option<ToolsVariable> {
    let code = template_code(template);
    if names_variable(&code, "tools") {
        return Some(ToolsVariable::Tools);
    }
    names_variable(&code, "xml_tools").then_some(ToolsVariable::XmlTools)
}

/// How a chat template reads a message's `content`, found from its code as vLLM's
/// `_detect_content_format` finds it (vllm/entrypoints/chat_utils.py): `Parts` when it loops over
/// a message's content (`{% for part in message['content'] %}`: OpenAI's list of `{type: 'text',
/// text}` and `{type: 'image'}` parts, as SmolVLM's and Gemma 3's templates do), `String` otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContentFormat {
    String,
    Parts,
}

/// The content format `template` reads (see `ContentFormat`): the names it gives `messages`
/// (`{% set msgs = messages[1:] %}`), the loop variables over them, then whether it loops over
/// one's `content` (indexed, `.content`, sliced or filtered), directly or through a `set` name.
/// Bounded for a crafted template (it runs at each render): names followed through at most
/// `MAX_ALIAS_PASSES` levels of `set`s written out of order, at most `MAX_NAMES` of each kind
/// (real templates use one or two).
pub fn content_format(template: &str) -> ContentFormat {
    const MAX_ALIAS_PASSES: usize = 8;
    const MAX_NAMES: usize = 32;
    let statements = statements(template);
    let mut messages = vec!["messages".to_string()];
    let mut items: Vec<String> = Vec::new();
    let mut contents: Vec<String> = Vec::new();
    // Each pass adds at least one name or ends.
    for _ in 0..MAX_ALIAS_PASSES {
        let before = messages.len() + items.len() + contents.len();
        for (kind, name, expr) in &statements {
            let reads = |vars: &[String], key| vars.iter().any(|v| accesses(expr, v, key));
            let found = match kind {
                Statement::Set if reads(&messages, None) => &mut messages,
                Statement::For if reads(&messages, None) => &mut items,
                Statement::Set if reads(&items, Some("content")) => &mut contents,
                Statement::For if reads(&items, Some("content")) || reads(&contents, None) => {
                    return ContentFormat::Parts;
                }
                _ => continue,
            };
            if !found.contains(name) && found.len() < MAX_NAMES {
                found.push(name.clone());
            }
        }
        if messages.len() + items.len() + contents.len() == before {
            break;
        }
    }
    ContentFormat::String
}

/// Messages' content as a template of `template`'s format reads it (vLLM's chat content
/// parsing): for `Parts`, a string content becomes one `{type: 'text', text}` part; for `String`,
/// a list of text parts is joined into one string (a list with an image stays a list). Null
/// content (beside tool calls) stays null.
pub fn content_as_read(template: &str, messages: Vec<Json>) -> Vec<Json> {
    let format = content_format(template);
    let content = |c: Json| match (format, c) {
        (ContentFormat::Parts, Json::String(text)) => {
            Json::Array(vec![serde_json::json!({"type": "text", "text": text})])
        }
        (ContentFormat::String, Json::Array(parts)) if parts.iter().all(|p| p["type"] == "text") => {
            Json::String(parts.iter().filter_map(|p| p["text"].as_str()).collect())
        }
        (_, c) => c,
    };
    messages
        .into_iter()
        .map(|mut m| {
            if let Some(c) = m.get_mut("content") {
                *c = content(c.take());
            }
            m
        })
        .collect()
}

#[derive(Clone, Copy, PartialEq)]
enum Statement {
    For,
    Set,
}

/// A template's `{% for NAME in EXPR %}` and `{% set NAME = EXPR %}` statements (a single name:
/// a loop over pairs or a namespace attribute names no message), in order.
fn statements(template: &str) -> Vec<(Statement, String, String)> {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(at) = rest.find("{%") {
        let Some(end) = rest[at + 2..].find("%}") else {
            break;
        };
        let inner =
            rest[at + 2..at + 2 + end].trim_matches(|c: char| c == '-' || c == '+' || c.is_whitespace());
        rest = &rest[at + 2 + end + 2..];
        let parsed = if let Some(s) = inner.strip_prefix("for ") {
            s.split_once(" in ").map(|(name, expr)| {
                // `for x in xs if cond` / `recursive`: the iterable alone.
                let expr = expr.split(" if ").next().unwrap_or(expr);
                (Statement::For, name, expr.trim_end_matches(" recursive"))
            })
        } else if let Some(s) = inner.strip_prefix("set ") {
            s.split_once('=').map(|(name, expr)| (Statement::Set, name, expr))
        } else {
            None
        };
        if let Some((kind, name, expr)) = parsed {
            let name = name.trim();
            if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                out.push((kind, name.to_string(), expr.trim().to_string()));
            }
        }
    }
    out
}

/// Whether `expr` is `var` (with `key`: its `['key']`, `["key"]` or `.key`), under any filters
/// (`| reverse`), slices (`[1:]`) and parentheses: vLLM's `_is_var_or_elems_access`.
fn accesses(expr: &str, var: &str, key: Option<&str>) -> bool {
    let mut e: String = expr.chars().filter(|c| !c.is_whitespace()).collect();
    loop {
        let before = e.len();
        if let Some(at) = top_level(&e, '|') {
            e.truncate(at);
        }
        if e.starts_with('(') && e.ends_with(')') {
            e = e[1..e.len() - 1].to_string();
        }
        if e.ends_with(']') {
            if let Some(open) = e.rfind('[') {
                if e[open..].contains(':') {
                    e.truncate(open);
                }
            }
        }
        if e.len() == before {
            break;
        }
    }
    match key {
        None => e == var,
        Some(k) => [
            format!("{var}['{k}']"),
            format!("{var}[\"{k}\"]"),
            format!("{var}.{k}"),
        ]
        .contains(&e),
    }
}

/// Where `c` first stands outside brackets, parentheses and string literals in `s`.
fn top_level(s: &str, c: char) -> Option<usize> {
    let mut depth = 0i32;
    let mut quote = None;
    for (at, ch) in s.char_indices() {
        match (quote, ch) {
            (Some(q), ch) if ch == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(ch),
            (None, '(' | '[' | '{') => depth += 1,
            (None, ')' | ']' | '}') => depth -= 1,
            (None, ch) if ch == c && depth == 0 => return Some(at),
            _ => {}
        }
    }
    None
}

/// A template's `{% %}` and `{{ }}` blocks, joined by spaces, string literals as `""`.
fn template_code(template: &str) -> String {
    let mut blocks = String::new();
    let mut rest = template;
    while let Some(at) = rest.find('{') {
        let close = match rest.as_bytes().get(at + 1) {
            Some(b'%') => "%}",
            Some(b'{') => "}}",
            _ => {
                rest = &rest[at + 1..];
                continue;
            }
        };
        let Some(end) = rest[at + 2..].find(close) else {
            break;
        };
        blocks.push_str(&rest[at..at + 2 + end + 2]);
        blocks.push(' ');
        rest = &rest[at + 2 + end + 2..];
    }
    let mut code = String::with_capacity(blocks.len());
    let mut chars = blocks.chars();
    while let Some(c) = chars.next() {
        if c != '"' && c != '\'' {
            code.push(c);
            continue;
        }
        code.push_str("\"\"");
        while let Some(d) = chars.next() {
            match d {
                '\\' => {
                    chars.next();
                }
                d if d == c => break,
                _ => {}
            }
        }
    }
    code
}

/// Whether `code` names `name` as a variable: not after a word character or a `.`, not
/// followed by a word character.
fn names_variable(code: &str, name: &str) -> bool {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    code.match_indices(name).any(|(at, _)| {
        let before = code[..at].chars().next_back();
        let after = code[at + name.len()..].chars().next();
        !before.is_some_and(|c| word(c) || c == '.') && !after.is_some_and(word)
    })
}

/// A minijinja error in one line: what `raise_exception` said, or the kind, detail and line.
fn describe(e: &Error) -> String {
    let detail = e.detail().unwrap_or("");
    match (e.kind(), e.line()) {
        (ErrorKind::InvalidOperation, _) if detail.starts_with(RAISED) => detail[RAISED.len()..].to_string(),
        (_, Some(line)) => format!("{} (line {line})", e.kind_description(detail)),
        _ => e.kind_description(detail),
    }
}

trait KindDescription {
    fn kind_description(&self, detail: &str) -> String;
}

impl KindDescription for Error {
    fn kind_description(&self, detail: &str) -> String {
        match detail {
            "" => self.kind().to_string(),
            d => format!("{}: {d}", self.kind()),
        }
    }
}

/// Marks the errors `raise_exception` makes, so their message is the template's own.
const RAISED: &str = "\u{1}raised:";

/// A message as transformers hands it to the template: keys whose value is None dropped, and
/// reasoning under its three names.
fn plain_message(m: Json) -> Json {
    let Json::Object(map) = m else { return m };
    let mut map: serde_json::Map<String, Json> = map.into_iter().filter(|(_, v)| !v.is_null()).collect();
    let reasoning = ["reasoning_content", "thinking", "reasoning"]
        .iter()
        .find_map(|k| map.get(*k).cloned());
    if let Some(r) = reasoning {
        // {"thinking": r, **message, "reasoning_content": r}
        let mut out = serde_json::Map::new();
        out.insert("thinking".into(), r.clone());
        for (k, v) in std::mem::take(&mut map) {
            out.insert(k, v);
        }
        out.insert("reasoning_content".into(), r);
        return Json::Object(out);
    }
    Json::Object(map)
}

fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    if let Ok(syntax) = SyntaxConfig::builder()
        .trim_blocks(true)
        .lstrip_blocks(true)
        .build()
    {
        env.set_syntax(syntax);
    }
    env.set_recursion_limit(RECURSION_LIMIT);
    env.set_fuel(Some(FUEL));
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.set_formatter(|out, _state, value| {
        let mut s = String::new();
        python_str(&mut s, value);
        out.write_str(&s).map_err(Error::from)
    });
    env.add_filter("tojson", tojson);
    env.add_function("raise_exception", |message: String| -> Result<Value, Error> {
        Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("{RAISED}{message}"),
        ))
    });
    env.add_function("strftime_now", |format: String| strftime(&format, now_utc()));
    env
}

/// `str(value)` in Python: what Jinja2 prints.
fn python_str(out: &mut String, v: &Value) {
    match v.kind() {
        ValueKind::Undefined => {}
        ValueKind::String => out.push_str(v.as_str().unwrap_or_default()),
        _ => python_repr(out, v),
    }
}

/// `repr(value)` in Python (strings quoted), for values inside lists and dicts.
fn python_repr(out: &mut String, v: &Value) {
    match v.kind() {
        ValueKind::Undefined | ValueKind::None => out.push_str("None"),
        ValueKind::Bool => out.push_str(if v.is_true() { "True" } else { "False" }),
        ValueKind::Number => number(out, v),
        ValueKind::String => {
            let s = v.as_str().unwrap_or_default();
            let q = if s.contains('\'') && !s.contains('"') {
                '"'
            } else {
                '\''
            };
            out.push(q);
            for c in s.chars() {
                match c {
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    c if c == q => {
                        out.push('\\');
                        out.push(c);
                    }
                    c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                        let _ = write!(out, "\\x{:02x}", c as u32);
                    }
                    c => out.push(c),
                }
            }
            out.push(q);
        }
        ValueKind::Seq | ValueKind::Iterable => {
            out.push('[');
            for (i, item) in v.try_iter().into_iter().flatten().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                python_repr(out, &item);
            }
            out.push(']');
        }
        ValueKind::Map => {
            out.push('{');
            for (i, key) in v.try_iter().into_iter().flatten().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                python_repr(out, &key);
                out.push_str(": ");
                python_repr(out, &v.get_item(&key).unwrap_or_default());
            }
            out.push('}');
        }
        _ => out.push_str(&v.to_string()),
    }
}

/// A number as Python prints it: integers as they are, floats as `repr(float)`.
fn number(out: &mut String, v: &Value) {
    if v.is_integer() {
        out.push_str(&v.to_string());
    } else {
        out.push_str(&python_float(f64::try_from(v.clone()).unwrap_or(f64::NAN)));
    }
}

/// `repr(x)` of a Python float: the shortest digits that round-trip, fixed notation for
/// exponents in [-4, 16), else `1e-05` / `1e+16`.
pub fn python_float(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    // `{:e}` gives the shortest round-trip digits: "1.2345e-5", "-3e16".
    let sci = format!("{x:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if negative { "-" } else { "" };
    if (-4..16).contains(&exp) {
        let point = exp + 1; // digits before the decimal point
        let s = if point <= 0 {
            format!("0.{}{digits}", "0".repeat((-point) as usize))
        } else if point as usize >= digits.len() {
            format!("{digits}{}.0", "0".repeat(point as usize - digits.len()))
        } else {
            format!("{}.{}", &digits[..point as usize], &digits[point as usize..])
        };
        format!("{sign}{s}")
    } else {
        let m = if digits.len() > 1 {
            format!("{}.{}", &digits[..1], &digits[1..])
        } else {
            digits
        };
        format!("{sign}{m}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
    }
}

/// Python's `json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)`,
/// transformers' `tojson`.
fn tojson(_state: &State, value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let indent: Option<Value> = kwargs.get("indent")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    let ensure_ascii: Option<bool> = kwargs.get("ensure_ascii")?;
    let separators: Option<Vec<String>> = kwargs.get("separators")?;
    kwargs.assert_all_used()?;
    let indent = match indent {
        None => None,
        Some(v) if v.is_none() => None,
        Some(v) if v.kind() == ValueKind::String => Some(v.as_str().unwrap_or_default().to_string()),
        Some(v) => Some(" ".repeat(v.as_i64().unwrap_or(0).max(0) as usize)),
    };
    let (item, key) = match (separators.as_deref(), &indent) {
        (Some([item, key]), _) => (item.clone(), key.clone()),
        (Some(_), _) => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                "tojson: separators must be (item, key)",
            ))
        }
        (None, Some(_)) => (",".into(), ": ".into()),
        (None, None) => (", ".into(), ": ".into()),
    };
    let style = JsonStyle {
        indent,
        item,
        key,
        sort_keys: sort_keys.unwrap_or(false),
        ensure_ascii: ensure_ascii.unwrap_or(false),
    };
    let mut out = String::new();
    style.write(&mut out, value, 0)?;
    Ok(Value::from(out))
}

struct JsonStyle {
    indent: Option<String>,
    item: String,
    key: String,
    sort_keys: bool,
    ensure_ascii: bool,
}

impl JsonStyle {
    fn newline(&self, out: &mut String, level: usize) {
        if let Some(ind) = &self.indent {
            out.push('\n');
            for _ in 0..level {
                out.push_str(ind);
            }
        }
    }

    fn write(&self, out: &mut String, v: &Value, level: usize) -> Result<(), Error> {
        match v.kind() {
            ValueKind::Undefined | ValueKind::None => out.push_str("null"),
            ValueKind::Bool => out.push_str(if v.is_true() { "true" } else { "false" }),
            ValueKind::Number if v.is_integer() => out.push_str(&v.to_string()),
            ValueKind::Number => {
                let x = f64::try_from(v.clone()).unwrap_or(f64::NAN);
                out.push_str(&match x {
                    x if x.is_nan() => "NaN".into(),
                    x if x.is_infinite() && x > 0.0 => "Infinity".into(),
                    x if x.is_infinite() => "-Infinity".into(),
                    x => python_float(x),
                });
            }
            ValueKind::String => self.string(out, v.as_str().unwrap_or_default()),
            ValueKind::Seq | ValueKind::Iterable => {
                let items: Vec<Value> = v.try_iter()?.collect();
                if items.is_empty() {
                    out.push_str("[]");
                    return Ok(());
                }
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(&self.item);
                    }
                    self.newline(out, level + 1);
                    self.write(out, item, level + 1)?;
                }
                self.newline(out, level);
                out.push(']');
            }
            ValueKind::Map => {
                let mut keys: Vec<Value> = v.try_iter()?.collect();
                if keys.is_empty() {
                    out.push_str("{}");
                    return Ok(());
                }
                if self.sort_keys {
                    keys.sort_by_key(|k| k.to_string());
                }
                out.push('{');
                for (i, k) in keys.iter().enumerate() {
                    if i > 0 {
                        out.push_str(&self.item);
                    }
                    self.newline(out, level + 1);
                    match k.as_str() {
                        Some(s) => self.string(out, s),
                        None => self.string(out, &k.to_string()),
                    }
                    out.push_str(&self.key);
                    self.write(out, &v.get_item(k)?, level + 1)?;
                }
                self.newline(out, level);
                out.push('}');
            }
            _ => self.string(out, &v.to_string()),
        }
        Ok(())
    }

    fn string(&self, out: &mut String, s: &str) {
        out.push('"');
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                c if (c as u32) < 0x20 || (self.ensure_ascii && (c as u32) > 0x7e) => {
                    let mut units = [0u16; 2];
                    for u in c.encode_utf16(&mut units) {
                        let _ = write!(out, "\\u{u:04x}");
                    }
                }
                c => out.push(c),
            }
        }
        out.push('"');
    }
}

/// Seconds since the epoch, now.
fn now_utc() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Python's `datetime.strftime` for the directives chat templates use (`%d %b %Y`, ...), in
/// UTC.
pub fn strftime(format: &str, epoch_seconds: i64) -> Result<String, Error> {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    const DAYS: [&str; 7] = [
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
    ];
    let days = epoch_seconds.div_euclid(86_400);
    let secs = epoch_seconds.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let weekday = (days + 3).rem_euclid(7) as usize; // 1970-01-01 was a Thursday
    let yday = days - days_from_civil(y, 1, 1) + 1;
    let (hh, mm, ss) = (secs / 3600, secs / 60 % 60, secs % 60);
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(directive) = chars.next() else {
            out.push('%');
            break;
        };
        let _ = match directive {
            'Y' => write!(out, "{y}"),
            'y' => write!(out, "{:02}", y.rem_euclid(100)),
            'm' => write!(out, "{m:02}"),
            'd' => write!(out, "{d:02}"),
            'e' => write!(out, "{d:>2}"),
            'B' => write!(out, "{}", MONTHS[m as usize - 1]),
            'b' | 'h' => write!(out, "{}", &MONTHS[m as usize - 1][..3]),
            'A' => write!(out, "{}", DAYS[weekday]),
            'a' => write!(out, "{}", &DAYS[weekday][..3]),
            'H' => write!(out, "{hh:02}"),
            'I' => write!(out, "{:02}", if hh % 12 == 0 { 12 } else { hh % 12 }),
            'p' => write!(out, "{}", if hh < 12 { "AM" } else { "PM" }),
            'M' => write!(out, "{mm:02}"),
            'S' => write!(out, "{ss:02}"),
            'j' => write!(out, "{yday:03}"),
            'u' => write!(out, "{}", weekday + 1),
            'w' => write!(out, "{}", (weekday + 1) % 7),
            'F' => write!(out, "{y}-{m:02}-{d:02}"),
            'T' => write!(out, "{hh:02}:{mm:02}:{ss:02}"),
            'Z' => write!(out, "UTC"),
            'z' => write!(out, "+0000"),
            '%' => write!(out, "%"),
            other => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    format!("strftime_now: unsupported directive %{other}"),
                ))
            }
        };
    }
    Ok(out)
}

/// Howard Hinnant's `civil_from_days`: (year, month, day) of days since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = m as i64;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chat(template: &str, messages: Json, gen: bool) -> anyhow::Result<String> {
        render(ChatInput {
            template,
            messages: messages.as_array().unwrap().clone(),
            tools: None,
            documents: None,
            add_generation_prompt: gen,
            variables: vec![("eos_token".into(), json!("</s>"))],
        })
    }

    #[test]
    fn renders_like_jinja2_with_trim_blocks_and_python_values() {
        let t = "{% for m in messages %}\n{{ m.role }}: {{ m.content.strip() }} {{ m.content.startswith(' hi') }}\n{% endfor %}{% if add_generation_prompt %}go{{ eos_token }}{% endif %}";
        let out = chat(
            t,
            json!([{"role": "user", "content": " hi ", "name": null}]),
            true,
        )
        .unwrap();
        assert_eq!(out, "user: hi True\ngo</s>");
        let out = chat("{{ [1, 'a', none, 2.5] }} {{ {'k': true} }}", json!([]), false).unwrap();
        assert_eq!(out, "[1, 'a', None, 2.5] {'k': True}");
    }

    #[test]
    fn tojson_is_python_json_dumps() {
        let t = "{{ messages[0] | tojson }}|{{ messages[0] | tojson(indent=2) }}|{{ [] | tojson }}";
        let out = chat(t, json!([{"b": "<é>\n", "a": [1, 2.0, null]}]), false).unwrap();
        assert_eq!(
            out,
            "{\"b\": \"<é>\\n\", \"a\": [1, 2.0, null]}|{\n  \"b\": \"<é>\\n\",\n  \"a\": [\n    1,\n    2.0,\n    null\n  ]\n}|[]"
        );
    }

    #[test]
    fn a_template_that_loops_without_end_runs_out_of_fuel() {
        let t = "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}";
        let e = chat(t, json!([]), false).unwrap_err();
        let (code, message) = crate::error::describe(&e);
        assert_eq!(code, Code::InvalidArg);
        assert!(message.starts_with("chat template: "), "{message}");
        assert!(message.contains("fuel"), "{message}");
        // A long chat still renders.
        let turns: Vec<Json> = (0..4000)
            .map(|i| json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": format!("turn {i}")}))
            .collect();
        let t = "{% for m in messages %}<|{{ m.role }}|>{{ m.content | trim }}\n{% endfor %}";
        assert_eq!(chat(t, Json::Array(turns), false).unwrap().lines().count(), 4000);
    }

    #[test]
    fn check_refuses_bad_and_huge_templates_at_load() {
        assert!(check("{% for m in messages %}{{ m.content }}{% endfor %}").is_ok());
        let (code, message) = crate::error::describe(&check("{% for m in %}").unwrap_err());
        assert_eq!(code, Code::InvalidArg);
        assert!(message.starts_with("chat template: syntax error"), "{message}");
        let huge = "x".repeat(MAX_TEMPLATE_BYTES + 1);
        let (_, message) = crate::error::describe(&check(&huge).unwrap_err());
        assert_eq!(
            message,
            format!("chat template: {} bytes, at most 1 MiB", MAX_TEMPLATE_BYTES + 1)
        );
    }

    #[test]
    fn raise_exception_and_syntax_errors_are_invalid_arg() {
        let e = chat(
            "{{ raise_exception('Only user and assistant roles!') }}",
            json!([]),
            false,
        )
        .unwrap_err();
        let (code, message) = crate::error::describe(&e);
        assert_eq!(code, Code::InvalidArg);
        assert_eq!(message, "chat template: Only user and assistant roles!");
        let e = chat("{% for %}", json!([]), false).unwrap_err();
        assert!(
            format!("{e:#}").starts_with("chat template: syntax error"),
            "{e:#}"
        );
        let e = chat(
            "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
            json!([]),
            false,
        )
        .unwrap_err();
        assert_eq!(crate::error::describe(&e).0, Code::InvalidArg);
    }

    #[test]
    fn python_floats_and_dates() {
        for (x, s) in [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (1e-5, "1e-05"),
            (1e16, "1e+16"),
            (123456.5, "123456.5"),
            (-2.5e-7, "-2.5e-07"),
            (1e15, "1000000000000000.0"),
        ] {
            assert_eq!(python_float(x), s);
        }
        // 2024-02-29 13:05:09 UTC, a Thursday.
        let t = 1_709_211_909;
        assert_eq!(
            strftime("%d %b %Y %H:%M:%S %A %j", t).unwrap(),
            "29 Feb 2024 13:05:09 Thursday 060"
        );
        assert_eq!(strftime("%Y-%m-%d", 0).unwrap(), "1970-01-01");
    }

    #[test]
    fn the_tools_variable_is_read_from_the_templates_code() {
        let cases = [
            (
                "{%- if tools %}{{ tools | tojson }}{% endif %}<tool_call>",
                Some(ToolsVariable::Tools),
            ),
            (
                "{%- if xml_tools %}{{ xml_tools }}{% endif %}<tool_call>",
                Some(ToolsVariable::XmlTools),
            ),
            (
                "{% if tools is not none %}{{- '<|python_tag|>' }}{% endif %}",
                Some(ToolsVariable::Tools),
            ),
            // Text that only mentions tools names no variable; nor does an attribute or a longer name.
            ("{{ \"<tools></tools> XML tags\" }} tools", None),
            (
                "{{ 'it\\'s tools' }}{{ message.tools }}{{ my_tools }}{{ toolset }}",
                None,
            ),
            ("{% for m in messages %}{{ m['content'] }}{% endfor %}", None),
            ("{{ unclosed tools", None),
        ];
        for (template, want) in cases {
            assert_eq!(tools_variable(template), want, "{template}");
        }
    }

    /// SmolVLM's template (models/make_vlm_models.py) and SmolLM2's, given the same chat as text
    /// parts and as strings: rendered as transformers renders each the content it reads (parts
    /// for SmolVLM, strings for SmolLM2; models/make_vlm_models.py's templates through
    /// `render_jinja_template`).
    #[test]
    fn content_is_given_as_the_template_reads_it() {
        const SMOLVLM: &str = "<|im_start|>{% for message in messages %}{{message['role'] | capitalize}}{% if message['content'][0]['type'] == 'image' %}{{':'}}{% else %}{{': '}}{% endif %}{% for line in message['content'] %}{% if line['type'] == 'text' %}{{line['text']}}{% elif line['type'] == 'image' %}{{ '<image>' }}{% endif %}{% endfor %}<end_of_utterance>\n{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}";
        const SMOLLM2: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
        let want = [
            (SMOLVLM, "<|im_start|>User: Tell me a story.<end_of_utterance>\nAssistant: Once upon a time.<end_of_utterance>\nAssistant:"),
            (SMOLLM2, "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nTell me a story.<|im_end|>\n<|im_start|>assistant\nOnce upon a time.<|im_end|>\n<|im_start|>assistant\n"),
        ];
        let parts = json!([
            {"role": "user", "content": [{"type": "text", "text": "Tell me "}, {"type": "text", "text": "a story."}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Once upon a time."}]},
        ]);
        let strings = json!([
            {"role": "user", "content": "Tell me a story."},
            {"role": "assistant", "content": "Once upon a time."},
        ]);
        for (template, want) in want {
            for messages in [&parts, &strings] {
                let messages = content_as_read(template, messages.as_array().unwrap().clone());
                let got = chat(template, Json::Array(messages), true).unwrap();
                assert_eq!(got, want);
            }
        }
        // Images stay parts; a null content beside tool calls stays null.
        let image = json!({"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "hi"}]});
        let call = json!({"role": "assistant", "content": null, "tool_calls": []});
        let read = content_as_read(SMOLLM2, vec![image.clone(), call.clone()]);
        assert_eq!(read, vec![image, call]);
    }

    #[test]
    fn the_content_format_is_read_from_the_templates_loops() {
        use ContentFormat::{Parts, String};
        let cases = [
            ("{% for m in messages %}{% for p in m['content'] %}{{ p.text }}{% endfor %}{% endfor %}", Parts),
            ("{%- for m in messages -%}{%- for p in m.content -%}{%- endfor -%}{%- endfor -%}", Parts),
            ("{% for m in messages %}{% if m.content is string %}{{ m.content }}{% else %}{% for p in m[\"content\"] | selectattr('type', 'equalto', 'text') %}{% endfor %}{% endif %}{% endfor %}", Parts),
            // Through a `set` name: of the messages (sliced), and of a message's content.
            ("{% set loop_messages = messages[1:] %}{% for m in loop_messages %}{% set c = m['content'] %}{% for p in c %}{% endfor %}{% endfor %}", Parts),
            ("{% for m in messages %}{{ m['content'] | trim }}{% endfor %}", String),
            // A loop over something else's content, or over the messages alone.
            ("{% for m in messages %}{% for d in documents %}{% for x in d['content'] %}{% endfor %}{% endfor %}{% endfor %}", String),
            ("{% for m in messages %}{% for p in m['contents'] %}{% endfor %}{% endfor %}", String),
            ("{% for m in messages %}{{ m['content'][0]['text'] }}{% endfor %}", String),
            ("{% for m in messages", String),
        ];
        for (template, want) in cases {
            assert_eq!(content_format(template), want, "{template}");
        }
        // Crafted: a chain of `set`s written last-first is followed 8 levels deep, no further
        // (one pass a level); 50,000 aliases of `messages` are kept to 32 names.
        let chain = |n: usize| {
            let sets: std::string::String = (1..=n)
                .rev()
                .map(|i| format!("{{% set a{i} = a{} %}}", i - 1))
                .collect::<Vec<_>>()
                .join("")
                .replace("a0", "messages");
            format!("{sets}{{% for m in a{n} %}}{{% for p in m.content %}}{{% endfor %}}{{% endfor %}}")
        };
        assert_eq!(content_format(&chain(6)), Parts);
        assert_eq!(content_format(&chain(40)), String);
        let many: std::string::String = (0..50_000)
            .map(|i| format!("{{% set m{i} = messages %}}"))
            .collect();
        assert_eq!(content_format(&many), String);
    }
}
