//! The model contract: what the engine needs of a model (`Decoder`: one program call, its
//! cache's shape, its tokens), what it is asked to continue (`Prompt`) and why a sequence ended
//! (`Finish`). The exported LM (`super::lm::Model`) is one decoder; the scheduler's unit tests use
//! a tiny fake. It imports only the constraint's `Vocabulary`, so every file of the wing may import it.
use super::constraint::Vocabulary;
use crate::error::{bail_code, Code};
use anyhow::Result;
use serde_json::Value as Json;
use std::sync::Arc;
use tch::{Kind, Tensor};

/// What to continue: text, a conversation for the chat template, token ids, or a conversation
/// with images: each `{"type": "image"}` part of its messages' content takes the next of
/// `images`, the image processor's `pixel_values` `[3, S, S]` float32.
pub enum Prompt {
    Text(String),
    Messages(Chat),
    Ids(Vec<u32>),
    Multimodal(Chat, Vec<Tensor>),
}

/// A conversation for the chat template: its messages (`{role, content, ...}`: tool calls and
/// tool results as OpenAI writes them, which the template reads) and the tools (OpenAI's
/// `{type: 'function', function: {name, description?, parameters?}}`) the template describes
/// to the model, rendered with the generation prompt as transformers'
/// `apply_chat_template(messages, tools=tools, add_generation_prompt=True)`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Chat {
    pub messages: Vec<Json>,
    pub tools: Option<Vec<Json>>,
}

impl Chat {
    /// A conversation without tools.
    pub fn new(messages: Vec<Json>) -> Chat {
        Chat {
            messages,
            tools: None,
        }
    }

    /// The bytes its template reads, about (the engine tokenizes a large one apart).
    pub fn size(&self) -> usize {
        let text = |v: &Json| match v {
            Json::String(s) => s.len(),
            Json::Null => 0,
            v => v.to_string().len(),
        };
        let messages: usize = self.messages.iter().map(|m| text(&m["content"])).sum();
        messages
            + self
                .tools
                .iter()
                .flatten()
                .map(|t| t.to_string().len())
                .sum::<usize>()
    }

    /// Checks messages given as JSON (`what` names them in errors): each an object with a string
    /// `role` and a `content` that is a string, a list of `{type: 'text', text}` parts (kept: the
    /// model's template reads them as parts or joined, `chat_template::content_as_read`), or
    /// null/absent beside `tool_calls`.
    /// `InvalidArg` otherwise.
    pub fn messages_from_json(messages: Json, what: &str) -> Result<Vec<Json>> {
        let Json::Array(list) = messages else {
            bail_code!(
                Code::InvalidArg,
                "{what}: expected an array of {{role, content}} messages"
            );
        };
        if list.is_empty() {
            bail_code!(Code::InvalidArg, "{what}: expected at least one message");
        }
        list.into_iter()
            .enumerate()
            .map(|(i, m)| message(m, &format!("{what}[{i}]")))
            .collect()
    }

    /// Checks `tools` (`what` names them): an array of `{type: 'function', function: {name,
    /// description?, parameters?}}`, `name` a non-empty string, `parameters` an object.
    pub fn tools_from_json(tools: Json, what: &str) -> Result<Vec<Json>> {
        let Json::Array(list) = tools else {
            bail_code!(
                Code::InvalidArg,
                "{what}: expected an array of {{type: 'function', function: {{name, parameters}}}}"
            );
        };
        for (i, tool) in list.iter().enumerate() {
            let f = &tool["function"];
            if tool["type"] != "function" || !f.is_object() {
                bail_code!(
                    Code::InvalidArg,
                    "{what}[{i}]: expected {{type: 'function', function: {{name, parameters}}}}"
                );
            }
            if f["name"].as_str().is_none_or(str::is_empty) {
                bail_code!(
                    Code::InvalidArg,
                    "{what}[{i}].function.name: expected a non-empty string"
                );
            }
            if !(f["parameters"].is_null() || f["parameters"].is_object()) {
                bail_code!(
                    Code::InvalidArg,
                    "{what}[{i}].function.parameters: expected a JSON schema object"
                );
            }
        }
        Ok(list)
    }
}

/// One message, checked (see `Chat::messages_from_json`).
fn message(m: Json, what: &str) -> Result<Json> {
    let Json::Object(mut map) = m else {
        bail_code!(Code::InvalidArg, "{what}: expected a {{role, content}} object");
    };
    if !map.get("role").is_some_and(Json::is_string) {
        bail_code!(Code::InvalidArg, "{what}.role: expected a string");
    }
    let calls = map.get("tool_calls").is_some_and(|c| !c.is_null());
    let content = match map.remove("content") {
        Some(Json::String(s)) => Json::String(s),
        None | Some(Json::Null) if calls => Json::Null,
        Some(Json::Array(parts)) => {
            for (k, part) in parts.iter().enumerate() {
                if part["type"] != "text" || !part["text"].is_string() {
                    bail_code!(
                        Code::InvalidArg,
                        "{what}.content[{k}]: expected {{type: 'text', text}}"
                    );
                }
            }
            Json::Array(parts)
        }
        _ => bail_code!(
            Code::InvalidArg,
            "{what}.content: expected a string or an array of text parts"
        ),
    };
    map.insert("content".into(), content);
    Ok(Json::Object(map))
}

/// A prompt's image tokens' input embeddings, for its prefill: `embeds [T, hidden]` (float32,
/// zero at the text tokens) and `mask [T]` (bool, true at the image tokens), over the prompt's T
/// tokens; `hash`, of the images' pixels, for whatever keys KV by content. An M-RoPE model's
/// (Qwen2-VL) `rope`: each prompt token's (temporal, height, width) rotary position, `[3, T]`
/// int64, and `rope_delta`: what every later token adds to its position (`super::mrope`).
pub struct Images {
    pub embeds: Tensor,
    pub mask: Tensor,
    pub hash: u64,
    pub rope: Option<Tensor>,
    pub rope_delta: i64,
}

/// A tokenized prompt: its ids and, where it has images, their embeddings.
pub struct Prepared {
    pub ids: Vec<u32>,
    pub images: Option<Images>,
}

/// The cache a decoder's program reads and writes: `2·layers` tensors `[rows, Hkv, C, D]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CacheShape {
    pub layers: usize,
    pub kv_heads: i64,
    pub head_dim: i64,
    pub dtype: Kind,
}

/// What the engine needs of a model: one program call, its cache's shape, its tokens.
pub trait Decoder: Send + Sync + 'static {
    fn cache_shape(&self) -> CacheShape;
    /// The longest sequence (prompt + output) served.
    fn max_context(&self) -> usize;
    fn vocab_size(&self) -> usize;
    /// The prompt's token ids (a conversation through the chat template).
    fn tokenize(&self, prompt: Prompt) -> Result<Vec<u32>>;
    fn is_eos(&self, token: u32) -> bool;
    /// Decodes tokens (special tokens skipped).
    fn decode(&self, ids: &[u32]) -> Result<String>;
    /// A token's bytes as the model writes them (a special token's content), for `logprobs`;
    /// by default its decoded text's.
    fn token_bytes(&self, token: u32) -> Vec<u8> {
        self.decode(&[token]).map(String::into_bytes).unwrap_or_default()
    }
    /// The prompt's ids and image embeddings (`Prompt::Multimodal`, which a decoder without
    /// a vision program refuses: `InvalidArg`).
    fn prepare(&self, prompt: Prompt) -> Result<Prepared> {
        if let Prompt::Multimodal(..) = prompt {
            bail_code!(
                Code::InvalidArg,
                "this model takes no images (its folder has no vision program)"
            );
        }
        Ok(Prepared {
            ids: self.tokenize(prompt)?,
            images: None,
        })
    }
    /// A prefill on one row with image embeddings (`Images` narrowed to `positions`' tokens:
    /// `[cols, hidden]`, `[cols]` and an M-RoPE model's `[3, cols]` positions); only decoders
    /// whose `prepare` made `Images` take it.
    fn run_images(
        &self,
        ids: &[i64],
        positions: &[i64],
        cache: Vec<Tensor>,
        images: (&Tensor, &Tensor, Option<&Tensor>),
    ) -> Result<Vec<Vec<f32>>> {
        let _ = (ids, positions, cache, images);
        bail_code!(Code::Internal, "this model takes no image embeddings")
    }
    /// One program call: `ids` and `positions` are `[rows, cols]` row-major, `cache` the cache
    /// tensors' dense views of those rows (written in place). Each row's logits of its last token.
    fn run(&self, ids: &[i64], positions: &[i64], rows: usize, cache: Vec<Tensor>) -> Result<Vec<Vec<f32>>>;
    /// The most trailing positions per row `run_keep` returns logits for: 1 where the program
    /// returns each row's last token's alone (exported before speculative decoding).
    fn keep_logits(&self) -> usize {
        1
    }
    /// As `run`, with the logits of each row's last `keep` tokens (`keep` ≤ the columns and
    /// `keep_logits()`): `rows × keep` of them, row by row.
    fn run_keep(
        &self,
        ids: &[i64],
        positions: &[i64],
        rows: usize,
        keep: usize,
        cache: Vec<Tensor>,
    ) -> Result<Vec<Vec<f32>>> {
        if keep != 1 {
            bail_code!(Code::Internal, "this model returns one position's logits per row");
        }
        self.run(ids, positions, rows, cache)
    }
    /// As `run_keep` (`run` where `keep` is 1), each row's rotary positions its cache slots
    /// plus `offsets[row]` (an M-RoPE model's rows after images: `Images::rope_delta`). A decoder
    /// without M-RoPE takes only zero offsets.
    fn run_offset(
        &self,
        ids: &[i64],
        positions: &[i64],
        (rows, keep): (usize, usize),
        offsets: &[i64],
        cache: Vec<Tensor>,
    ) -> Result<Vec<Vec<f32>>> {
        if offsets.iter().any(|&o| o != 0) {
            bail_code!(Code::Internal, "this model takes no rotary position offsets");
        }
        match keep {
            1 => self.run(ids, positions, rows, cache),
            _ => self.run_keep(ids, positions, rows, keep, cache),
        }
    }
    /// The vocabulary output constraints compile against (built on first use, then shared).
    fn vocabulary(&self) -> Result<Arc<Vocabulary>> {
        bail_code!(
            Code::InvalidArg,
            "responseFormat: this model has no tokenizer to constrain its output with"
        )
    }
}

/// Why a sequence ended.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Finish {
    Stop,
    Length,
    Aborted,
}

impl Finish {
    pub fn name(self) -> &'static str {
        match self {
            Finish::Stop => "stop",
            Finish::Length => "length",
            Finish::Aborted => "aborted",
        }
    }
}
