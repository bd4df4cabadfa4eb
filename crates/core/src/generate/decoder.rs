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

/// What to continue: text, a conversation for the chat template, or token ids.
pub enum Prompt {
    Text(String),
    Messages(Vec<Json>),
    Ids(Vec<u32>),
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
    /// One program call: `ids` and `positions` are `[rows, cols]` row-major, `cache` the cache
    /// tensors' dense views of those rows (written in place). Each row's logits of its last token.
    fn run(&self, ids: &[i64], positions: &[i64], rows: usize, cache: Vec<Tensor>) -> Result<Vec<Vec<f32>>>;
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
