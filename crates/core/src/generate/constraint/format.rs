//! What a generation must produce, read from the JS option or OpenAI's `response_format`.
use super::json_options::flag;
use super::tools::{Tool, ToolCallFormat, ToolChoice};
use crate::error::{bail_code, fail, Code};
use anyhow::Result;
use serde_json::Value as Json;

/// What a generation must produce.
#[derive(Clone, Debug, PartialEq)]
pub enum Format {
    /// Any JSON object (`{type: 'json_object'}`).
    JsonObject,
    /// A JSON value valid against `schema`; `strict: false` lets unsupported keywords be
    /// ignored instead of refused.
    JsonSchema { schema: Json, strict: bool },
    /// Text in the language of a Lark grammar (llguidance's dialect: `%json {...}` embeds a
    /// schema, `<[id]>` names a special token).
    Lark(String),
    /// Text matching a regex (the whole output).
    Regex(String),
    /// One tool call or more in the model's format, each naming a tool and giving arguments
    /// valid against its `parameters` (see [`tools`]).
    ToolCalls {
        tools: Vec<Tool>,
        choice: ToolChoice,
        format: ToolCallFormat,
        /// Several calls in one turn (OpenAI's `parallel_tool_calls`).
        parallel: bool,
    },
}

impl Format {
    /// Reads a `responseFormat` (JS) or `response_format` (OpenAI): `{type: 'text'}` (None),
    /// `{type: 'json_object'}`, `{type: 'json_schema', schema, strict?}` or OpenAI's
    /// `{type: 'json_schema', json_schema: {name, schema, strict?, description?}}`,
    /// `{type: 'grammar', grammar}` (Lark), `{type: 'regex', pattern}`, or `{type: 'tool_calls',
    /// tools, toolChoice, format, parallel?}` (OpenAI's `tools`; `toolChoice` `'required'` or a
    /// named function, or `'auto'` with `generic`; `format` a name in `tool_formats.json`:
    /// `'hermes'`, `'llama3'`, `'mistral'` or `'generic'`).
    pub fn from_json(value: &Json) -> Result<Option<Format>> {
        let what = "responseFormat";
        let Some(obj) = value.as_object() else {
            bail_code!(Code::InvalidArg, "{what} must be an object with a 'type'");
        };
        let kind = obj.get("type").and_then(Json::as_str).unwrap_or("");
        let only = |keys: &[&str], at: &str, o: &serde_json::Map<String, Json>| -> Result<()> {
            match o.keys().find(|k| !keys.contains(&k.as_str())) {
                Some(k) => Err(fail(
                    Code::InvalidArg,
                    format!("{at}: unknown key '{k}' (expected {})", keys.join(", ")),
                )),
                None => Ok(()),
            }
        };
        let text = |key: &str| -> Result<String> {
            match obj.get(key) {
                Some(Json::String(s)) => Ok(s.clone()),
                _ => Err(fail(Code::InvalidArg, format!("{what}.{key} must be a string"))),
            }
        };
        Ok(Some(match kind {
            "text" => {
                only(&["type"], what, obj)?;
                return Ok(None);
            }
            "json_object" => {
                only(&["type"], what, obj)?;
                Format::JsonObject
            }
            "json_schema" => {
                let (at, inner) = match obj.get("json_schema") {
                    Some(Json::Object(inner)) => {
                        only(&["type", "json_schema"], what, obj)?;
                        only(
                            &["name", "schema", "strict", "description"],
                            "responseFormat.json_schema",
                            inner,
                        )?;
                        ("responseFormat.json_schema", inner)
                    }
                    Some(_) => bail_code!(Code::InvalidArg, "{what}.json_schema must be an object"),
                    None => {
                        only(&["type", "schema", "strict", "name", "description"], what, obj)?;
                        (what, obj)
                    }
                };
                let strict = flag(inner.get("strict"), true, &format!("{at}.strict"))?;
                let schema = match inner.get("schema") {
                    Some(s @ (Json::Object(_) | Json::Bool(_))) => s.clone(),
                    None => bail_code!(Code::InvalidArg, "{at}.schema is missing"),
                    Some(_) => bail_code!(Code::InvalidArg, "{at}.schema must be a JSON Schema (an object)"),
                };
                Format::JsonSchema { schema, strict }
            }
            "grammar" => {
                only(&["type", "grammar"], what, obj)?;
                Format::Lark(text("grammar")?)
            }
            "regex" => {
                only(&["type", "pattern"], what, obj)?;
                Format::Regex(text("pattern")?)
            }
            "tool_calls" => {
                only(&["type", "tools", "toolChoice", "format", "parallel"], what, obj)?;
                let tools = Tool::list_from_json(obj.get("tools").unwrap_or(&Json::Null))
                    .map_err(|e| fail(Code::InvalidArg, format!("{what}.{e:#}")))?;
                let choice = ToolChoice::from_json(obj.get("toolChoice").unwrap_or(&Json::Null))
                    .map_err(|e| fail(Code::InvalidArg, format!("{what}.{e:#}")))?;
                let format = ToolCallFormat::named(&text("format")?)
                    .map_err(|e| fail(Code::InvalidArg, format!("{what}.{e:#}")))?;
                let answers_in_text = format.text.is_some() && choice == ToolChoice::Auto;
                if !choice.is_forced() && !answers_in_text {
                    bail_code!(
                        Code::InvalidArg,
                        "{what}.toolChoice must be 'required' or {{type: 'function', function: {{name}}}} (a grammar enforces only those), or 'auto' with format 'generic'"
                    );
                }
                let parallel = flag(obj.get("parallel"), true, &format!("{what}.parallel"))?;
                Format::ToolCalls {
                    tools,
                    choice,
                    format,
                    parallel,
                }
            }
            other => bail_code!(
                Code::InvalidArg,
                "{what}.type must be 'text', 'json_object', 'json_schema', 'grammar', 'regex' or 'tool_calls', got {}",
                if other.is_empty() {
                    "nothing".to_string()
                } else {
                    format!("'{other}'")
                }
            ),
        }))
    }

    /// The name errors give the source: the JS option it came from.
    pub(super) fn origin(&self) -> &'static str {
        match self {
            Format::JsonObject | Format::JsonSchema { .. } => "responseFormat.schema",
            Format::Lark(_) => "responseFormat.grammar",
            Format::Regex(_) => "responseFormat.pattern",
            Format::ToolCalls { .. } => "responseFormat.tools",
        }
    }
}
