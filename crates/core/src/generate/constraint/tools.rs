//! Tool calls as a grammar: with `toolChoice` `required` or a named function, the output is
//! one call or more in the model's format, each naming a tool and giving arguments valid
//! against that tool's `parameters` (a Lark grammar embedding one JSON schema per tool with
//! llguidance's `%json {...}`); with `auto` in a format that has a text answer (`generic`),
//! the output is either calls or that answer. The formats' strings come from one table
//! (`data/tool_formats.json`), named by the caller, who knows the model's template: Hermes/Qwen wrap
//! each call in `<tool_call>\n...\n</tool_call>`, Mistral writes `[TOOL_CALLS][{...}, {...}]`,
//! Llama 3.x a bare object with `parameters`, and a template without tools gets llama.cpp's
//! generic JSON (`{"tool_calls": [...]}`, `{"tool_call": {...}}` or `{"response": "..."}`).
use super::json_options::{flag, with_options};
use crate::error::{bail_code, fail, Code};
use anyhow::Result;
use serde_json::{json, Map, Value as Json};
use std::fmt::Write;

/// The most tools one request offers (OpenAI's limit).
pub const MAX_TOOLS: usize = 128;

/// A function the model may call (OpenAI's `tools[i].function`).
#[derive(Clone, Debug, PartialEq)]
pub struct Tool {
    pub name: String,
    /// The arguments' JSON schema (`{}` when the tool gave none: no arguments).
    pub parameters: Json,
    /// `strict: false` lets unsupported keywords in `parameters` be ignored (default true).
    pub strict: bool,
}

impl Tool {
    /// Reads OpenAI's `tools`: `[{type: 'function', function: {name, description?,
    /// parameters?, strict?}}]`.
    pub fn list_from_json(tools: &Json) -> Result<Vec<Tool>> {
        let Some(list) = tools.as_array() else {
            bail_code!(Code::InvalidArg, "tools must be an array");
        };
        let mut out: Vec<Tool> = Vec::with_capacity(list.len());
        for (i, t) in list.iter().enumerate() {
            let at = format!("tools[{i}]");
            if t["type"] != "function" {
                bail_code!(Code::InvalidArg, "{at}.type must be 'function'");
            }
            let Some(f) = t.get("function").and_then(Json::as_object) else {
                bail_code!(Code::InvalidArg, "{at}.function must be an object");
            };
            let name = match f.get("name") {
                Some(Json::String(n)) if !n.is_empty() && n.len() <= 256 => n.clone(),
                _ => bail_code!(
                    Code::InvalidArg,
                    "{at}.function.name must be a non-empty string of at most 256 bytes"
                ),
            };
            if out.iter().any(|o| o.name == name) {
                bail_code!(Code::InvalidArg, "{at}: a second tool named '{name}'");
            }
            let parameters = match f.get("parameters") {
                None | Some(Json::Null) => {
                    json!({"type": "object", "properties": {}, "additionalProperties": false})
                }
                Some(p @ (Json::Object(_) | Json::Bool(_))) => p.clone(),
                Some(_) => bail_code!(
                    Code::InvalidArg,
                    "{at}.function.parameters must be a JSON Schema (an object)"
                ),
            };
            let strict = flag(f.get("strict"), true, &format!("{at}.function.strict"))?;
            out.push(Tool {
                name,
                parameters,
                strict,
            });
        }
        Ok(out)
    }
}

/// OpenAI's `tool_choice`.
#[derive(Clone, Debug, PartialEq)]
pub enum ToolChoice {
    /// The model decides (no grammar).
    Auto,
    /// No tool call (no grammar; the caller leaves the tools out of the prompt or not).
    None,
    /// At least one call, to any of the tools.
    Required,
    /// One call to this function.
    Function(String),
}

impl ToolChoice {
    /// `'auto'`, `'none'`, `'required'`, or `{type: 'function', function: {name}}`.
    pub fn from_json(choice: &Json) -> Result<ToolChoice> {
        Ok(match choice {
            Json::String(s) if s == "auto" => ToolChoice::Auto,
            Json::String(s) if s == "none" => ToolChoice::None,
            Json::String(s) if s == "required" => ToolChoice::Required,
            Json::Object(o) if o.get("type").and_then(Json::as_str) == Some("function") => {
                match o
                    .get("function")
                    .and_then(|f| f.get("name"))
                    .and_then(Json::as_str)
                {
                    Some(name) => ToolChoice::Function(name.to_string()),
                    None => bail_code!(Code::InvalidArg, "toolChoice.function.name must be a string"),
                }
            }
            _ => bail_code!(
                Code::InvalidArg,
                "toolChoice must be 'auto', 'none', 'required' or {{type: 'function', function: {{name}}}}"
            ),
        })
    }

    /// Whether this choice is enforced by a grammar (`required`, a named function).
    pub fn is_forced(&self) -> bool {
        matches!(self, ToolChoice::Required | ToolChoice::Function(_))
    }
}

/// How a model writes its tool calls: `begin` calls (each `call_prefix` object `call_suffix`,
/// `separator` between two; an empty one allows a single call) `end`; the object is
/// `{"name": ..., "<arguments_key>": {...}}`. `one` replaces `begin`/`end` where one call is
/// allowed; `text`, where the format has it, wraps a JSON string the model may answer with
/// instead (so `toolChoice` `auto` is a grammar too).
/// A string equal to a special token of the tokenizer (`<tool_call>` in Qwen 2.5,
/// `[TOOL_CALLS]` in Mistral) is that token.
///
/// The formats are one table, `data/tool_formats.json` (in every npm package, prebuilt ones too),
/// which lib/text/tool-calls.js reads too: the
/// grammar and the parser that reads the calls back take their strings from the same place.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCallFormat {
    pub begin: String,
    pub call_prefix: String,
    pub call_suffix: String,
    pub separator: String,
    pub end: String,
    pub arguments_key: String,
    /// Boxed: most formats have neither, and `Format` stays small.
    pub one: Option<Box<Wrapper>>,
    pub text: Option<Box<Wrapper>>,
}

/// What goes around a value: `begin` value `end`.
#[derive(Clone, Debug, PartialEq)]
pub struct Wrapper {
    pub begin: String,
    pub end: String,
}

/// The table of formats (name: fields), shared with lib/text/tool-calls.js.
const TABLE: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../data/tool_formats.json"
));

impl ToolCallFormat {
    /// The format named `name` in the table (`hermes`, `llama3`, `mistral`, `generic`).
    pub fn named(name: &str) -> Result<ToolCallFormat> {
        let table: Json = serde_json::from_str(TABLE)
            .map_err(|e| fail(Code::Internal, format!("tool_formats.json: {e}")))?;
        let Some(entry) = table.get(name).filter(|_| !name.is_empty()) else {
            let names: Vec<&String> = table.as_object().map(|o| o.keys().collect()).unwrap_or_default();
            let names: Vec<String> = names.iter().map(|n| format!("'{n}'")).collect();
            bail_code!(
                Code::InvalidArg,
                "format must be {}, got '{name}'",
                names.join(", ")
            );
        };
        let text = |key: &str| -> Result<String> {
            match entry.get(key) {
                Some(Json::String(s)) => Ok(s.clone()),
                _ => Err(fail(
                    Code::Internal,
                    format!("tool_formats.json: {name}.{key} is not a string"),
                )),
            }
        };
        let wrapper = |key: &str| -> Result<Option<Box<Wrapper>>> {
            let Some(w) = entry.get(key) else {
                return Ok(None);
            };
            let part = |k: &str| match w.get(k) {
                Some(Json::String(s)) => Ok(s.clone()),
                _ => Err(fail(
                    Code::Internal,
                    format!("tool_formats.json: {name}.{key}.{k} is not a string"),
                )),
            };
            Ok(Some(Box::new(Wrapper {
                begin: part("begin")?,
                end: part("end")?,
            })))
        };
        Ok(ToolCallFormat {
            begin: text("begin")?,
            call_prefix: text("callPrefix")?,
            call_suffix: text("callSuffix")?,
            separator: text("separator")?,
            end: text("end")?,
            arguments_key: text("argumentsKey")?,
            one: wrapper("one")?,
            text: wrapper("text")?,
        })
    }
}

/// The Lark grammar of `choice`'s calls to `tools` in `format`; `specials` are the
/// tokenizer's special tokens (content, id), longest first.
pub(super) fn lark(
    tools: &[Tool],
    choice: &ToolChoice,
    format: &ToolCallFormat,
    parallel: bool,
    specials: &[(String, u32)],
) -> Result<String> {
    let chosen: Vec<&Tool> = match choice {
        ToolChoice::Required => tools.iter().collect(),
        ToolChoice::Auto if format.text.is_some() => tools.iter().collect(),
        ToolChoice::Function(name) => match tools.iter().find(|t| &t.name == name) {
            Some(t) => vec![t],
            None => bail_code!(Code::InvalidArg, "toolChoice: no tool is named '{name}'"),
        },
        ToolChoice::Auto | ToolChoice::None => bail_code!(
            Code::InvalidArg,
            "toolChoice {choice:?} is not enforced by a grammar (only 'required', a named function, and 'auto' in a format with a text answer are)"
        ),
    };
    if chosen.is_empty() {
        bail_code!(Code::InvalidArg, "toolChoice 'required' with no tools");
    }
    if format.arguments_key.is_empty() || format.arguments_key == "name" {
        bail_code!(
            Code::InvalidArg,
            "the tool-call format's arguments key must be a name other than 'name'"
        );
    }
    if tools.len() > MAX_TOOLS {
        bail_code!(
            Code::InvalidArg,
            "tools: {} tools is over the limit of {MAX_TOOLS}",
            tools.len()
        );
    }
    let all: Vec<&Json> = chosen.iter().map(|t| &t.parameters).collect();
    super::schema::limit(&all, "tools")?;
    let piece = |s: &str| pieces(s, specials);
    // A named function is called once; a format without a separator has room for one call.
    let many = parallel && !matches!(choice, ToolChoice::Function(_)) && !format.separator.is_empty();
    let mut g = String::new();
    let (begin, end) = match &format.one {
        Some(one) if !many => (&one.begin, &one.end),
        _ => (&format.begin, &format.end),
    };
    let calls = if many {
        format!("call ({} call)*", piece(&format.separator))
    } else {
        "call".into()
    };
    match (&format.text, choice) {
        (Some(text), ToolChoice::Auto) => {
            let _ = writeln!(g, "start: calls | reply");
            let _ = writeln!(g, "reply: {} reply_text {}", piece(&text.begin), piece(&text.end));
            let string = with_options(&json!({"type": "string"}), true, "tools")?;
            let _ = writeln!(g, "reply_text: %json {string}");
        }
        _ => {
            let _ = writeln!(g, "start: calls");
        }
    }
    let _ = writeln!(g, "calls: {} {calls} {}", piece(begin), piece(end));
    let _ = writeln!(
        g,
        "call: {} object {}",
        piece(&format.call_prefix),
        piece(&format.call_suffix)
    );
    let names: Vec<String> = (0..chosen.len()).map(|i| format!("tool_{i}")).collect();
    let _ = writeln!(g, "object: {}", names.join(" | "));
    for (i, t) in chosen.iter().enumerate() {
        let at = format!(
            "tools[{}].function.parameters",
            tools.iter().position(|x| x.name == t.name).unwrap_or(i)
        );
        let arguments = match &t.parameters {
            Json::Bool(true) => json!({}),
            Json::Bool(false) => bail_code!(Code::InvalidArg, "{at} is false: no arguments satisfy it"),
            p => p.clone(),
        };
        if arguments.get("x-guidance").is_some() {
            bail_code!(
                Code::InvalidArg,
                "{at}: 'x-guidance' is not accepted (use strict)"
            );
        }
        super::schema::finite(&arguments, &at)?;
        let mut arguments = arguments;
        rebase_refs(
            &mut arguments,
            &format!("/properties/{}", pointer_escape(&format.arguments_key)),
            0,
        );
        let mut properties = Map::new();
        properties.insert("name".into(), json!({"const": t.name}));
        properties.insert(format.arguments_key.clone(), arguments);
        let call = json!({
            "type": "object",
            "properties": properties,
            "required": ["name", format.arguments_key],
            "additionalProperties": false,
        });
        let call = with_options(&call, t.strict, &at)?;
        let text = serde_json::to_string(&call).map_err(|e| fail(Code::InvalidArg, format!("{at}: {e}")))?;
        let _ = writeln!(g, "tool_{i}: %json {text}");
    }
    Ok(g)
}

/// The arguments' local `$ref`s (`#/$defs/x`, relative to the parameters' root) rewritten for
/// where the parameters sit in the call object (`#/properties/arguments/$defs/x`).
fn rebase_refs(s: &mut Json, base: &str, depth: usize) {
    if depth > 256 {
        return;
    }
    match s {
        Json::Object(o) => {
            for (k, v) in o.iter_mut() {
                match v {
                    Json::String(r) if k == "$ref" && r.starts_with('#') => {
                        *r = format!("#{base}{}", &r[1..]);
                    }
                    _ => rebase_refs(v, base, depth + 1),
                }
            }
        }
        Json::Array(a) => a.iter_mut().for_each(|v| rebase_refs(v, base, depth + 1)),
        _ => {}
    }
}

/// A JSON pointer token (RFC 6901: `~` and `/` escaped).
fn pointer_escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// A wrapper string as Lark: quoted text, with the special tokens it contains as `<[id]>`
/// (the model writes `<tool_call>` as one token where the tokenizer has it).
fn pieces(s: &str, specials: &[(String, u32)]) -> String {
    let mut out = Vec::new();
    let mut text = String::new();
    let mut rest = s;
    'scan: while !rest.is_empty() {
        for (content, id) in specials {
            if !content.is_empty() && rest.starts_with(content.as_str()) {
                if !text.is_empty() {
                    out.push(quote(&std::mem::take(&mut text)));
                }
                out.push(format!("<[{id}]>"));
                rest = &rest[content.len()..];
                continue 'scan;
            }
        }
        let c = rest.chars().next().unwrap_or_default();
        text.push(c);
        rest = &rest[c.len_utf8()..];
    }
    if !text.is_empty() {
        out.push(quote(&text));
    }
    out.join(" ")
}

/// A Lark string literal (its escapes are JSON's).
fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}
