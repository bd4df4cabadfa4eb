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
    Messages(Vec<Json>),
    Ids(Vec<u32>),
    Multimodal(Vec<Json>, Vec<Tensor>),
}

/// A prompt's image tokens' input embeddings, for its prefill: `embeds [T, hidden]` (float32,
/// zero at the text tokens) and `mask [T]` (bool, true at the image tokens), over the prompt's T
/// tokens; `hash`, of the images' pixels, for whatever keys KV by content.
pub struct Images {
    pub embeds: Tensor,
    pub mask: Tensor,
    pub hash: u64,
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
    /// `[cols, hidden]` and `[cols]`); only decoders whose `prepare` made `Images` take it.
    fn run_images(
        &self,
        ids: &[i64],
        positions: &[i64],
        cache: Vec<Tensor>,
        images: (&Tensor, &Tensor),
    ) -> Result<Vec<Vec<f32>>> {
        let _ = (ids, positions, cache, images);
        bail_code!(Code::Internal, "this model takes no image embeddings")
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
