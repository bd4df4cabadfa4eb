//! A Hugging Face tokenizer (`tokenizer.json`) over the `tokenizers` crate — the same Rust code
//! Python's `tokenizers` and `transformers` run — plus what `transformers` reads beside it
//! (`tokenizer_config.json`: special tokens by role, `model_max_length`, `padding_side`, the
//! chat template). The JS class is the addon's `text` glue.
//!
//! Padding and truncation are per call, as in `transformers`, which ignores the values a
//! `tokenizer.json` may carry (MiniLM's says pad and truncate to 128): they are cleared at load.
//! Truncation runs between the model and the post-processor, as the crate's `post_process`
//! does it (the special tokens the post-processor adds count), on encodings made by a copy
//! without post-processor: the crate 0.23.2 with truncation set also stops the model early at
//! `max_length`, which makes `longest_first` cut the wrong text of a pair (Python's 0.23.3
//! keeps the longer text longer; the parity goldens have such a case).
use super::offsets::Utf16Offsets;
use super::prefix::{self, Locality};
use crate::error::{bail_code, fail, Code};
use anyhow::Context;
use serde_json::Value as Json;
use std::path::Path;
use tokenizers::parallelism::{MaybeParallelRefIterator, MaybeParallelSlice};
use tokenizers::{
    pad_encodings, truncate_encodings, Encoding, PaddingDirection, PaddingParams, PaddingStrategy,
    PostProcessor, TruncationDirection, TruncationParams, TruncationStrategy,
};

/// Texts longer than this many bytes are refused (`InvalidArg`) rather than tokenized: 64 MiB.
pub const MAX_TEXT_BYTES: usize = 64 << 20;

/// The special tokens `transformers` names by role.
pub const ROLES: [&str; 7] = [
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
];

/// What `tokenizer_config.json` (and `special_tokens_map.json`, `chat_template.jinja`) add.
#[derive(Default, Clone, Debug)]
pub struct Config {
    /// Special tokens by role (`ROLES`), as strings.
    pub special: Vec<(&'static str, String)>,
    /// `model_max_length`, when it is a real limit (transformers writes 1e30 for "none").
    pub model_max_length: Option<usize>,
    /// `padding_side`: left pads at the start.
    pub pad_left: bool,
    /// `truncation_side`: left drops tokens from the start.
    pub truncate_left: bool,
    /// The chat template (`chat_template`, its `default` entry when it is a list, or
    /// `chat_template.jinja`).
    pub chat_template: Option<String>,
}

impl Config {
    /// Reads a `tokenizer_config.json`'s contents (and `special_tokens_map.json`'s, whose
    /// entries the config's own override, as in transformers).
    pub fn parse(config: Option<&[u8]>, special_map: Option<&[u8]>) -> anyhow::Result<Config> {
        let read = |bytes: Option<&[u8]>, name: &str| -> anyhow::Result<Json> {
            match bytes {
                None => Ok(Json::Null),
                Some(b) => serde_json::from_slice(b)
                    .map_err(|e| fail(Code::ModelLoadError, format!("{name}: not valid JSON: {e}"))),
            }
        };
        let config = read(config, "tokenizer_config.json")?;
        let map = read(special_map, "special_tokens_map.json")?;
        let mut out = Config::default();
        for role in ROLES {
            let token = config
                .get(role)
                .and_then(token_text)
                .or_else(|| map.get(role).and_then(token_text));
            if let Some(t) = token {
                out.special.push((role, t));
            }
        }
        out.model_max_length = config
            .get("model_max_length")
            .and_then(Json::as_f64)
            .filter(|n| *n >= 1.0 && *n < 1e15)
            .map(|n| n as usize);
        out.pad_left = config.get("padding_side").and_then(Json::as_str) == Some("left");
        out.truncate_left = config.get("truncation_side").and_then(Json::as_str) == Some("left");
        out.chat_template = match config.get("chat_template") {
            Some(Json::String(s)) => Some(s.clone()),
            Some(Json::Array(named)) => named
                .iter()
                .find(|t| t.get("name").and_then(Json::as_str) == Some("default"))
                .or_else(|| named.first())
                .and_then(|t| t.get("template"))
                .and_then(Json::as_str)
                .map(str::to_string),
            _ => None,
        };
        Ok(out)
    }

    /// The token of `role` (`"pad_token"`).
    pub fn special(&self, role: &str) -> Option<&str> {
        self.special
            .iter()
            .find(|(r, _)| *r == role)
            .map(|(_, t)| t.as_str())
    }
}

/// A special token as tokenizer_config.json writes it: a string, or `{content, ...}`.
fn token_text(v: &Json) -> Option<String> {
    match v {
        Json::String(s) => Some(s.clone()),
        Json::Object(o) => o.get("content").and_then(Json::as_str).map(str::to_string),
        _ => None,
    }
}

/// How a pair (or a long text) is cut to `max_length` tokens, as transformers names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    LongestFirst,
    OnlyFirst,
    OnlySecond,
}

/// One call's truncation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Truncation {
    pub max_length: usize,
    pub strategy: Strategy,
}

/// One batch's padding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PadTo {
    Longest,
    Fixed(usize),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Padding {
    pub to: PadTo,
    pub multiple_of: Option<usize>,
}

/// A text and, for a pair, its second text.
pub type Input = (String, Option<String>);

/// Encoded texts as columns, the form JS receives them in: each per-token field holds every
/// text's tokens one after another, text `i`'s at `starts[i]..starts[i + 1]`. One buffer per
/// field for the whole batch costs the JS thread a copy; arrays per text (or their JSON, parsed
/// there) cost it 100+ ms for 10,000 texts. Offsets are in UTF-16 code units of the text they
/// come from (the first text, or the pair's second for its tokens).
#[derive(Debug, Clone, PartialEq)]
pub struct Encodings {
    /// Where each text's tokens start, and the total at the end (texts + 1 values).
    pub starts: Vec<u32>,
    pub ids: Vec<u32>,
    /// Each token's `[start, end)` as JS string indices (special tokens: `[0, 0]`).
    pub offsets: Vec<[u32; 2]>,
    pub attention_mask: Vec<u32>,
    pub type_ids: Vec<u32>,
    pub special_tokens_mask: Vec<u32>,
    /// The tokens' strings, one after another.
    pub token_text: String,
    /// Where each token's string ends in `token_text`, in UTF-16 code units (JS indices).
    pub token_ends: Vec<u32>,
}

impl Encodings {
    fn with_capacity(texts: usize, tokens: usize) -> Encodings {
        let mut starts = Vec::with_capacity(texts + 1);
        starts.push(0);
        Encodings {
            starts,
            ids: Vec::with_capacity(tokens),
            offsets: Vec::with_capacity(tokens),
            attention_mask: Vec::with_capacity(tokens),
            type_ids: Vec::with_capacity(tokens),
            special_tokens_mask: Vec::with_capacity(tokens),
            token_text: String::with_capacity(tokens * 4),
            token_ends: Vec::with_capacity(tokens),
        }
    }

    /// The crate's encodings of `inputs`, with offsets as JS indices into the text each token
    /// came from.
    fn of(encodings: &[Encoding], inputs: &[Input]) -> Encodings {
        let tokens = encodings.iter().map(Encoding::len).sum();
        let mut out = Encodings::with_capacity(encodings.len(), tokens);
        for (e, input) in encodings.iter().zip(inputs) {
            out.push(e, input);
        }
        out
    }

    /// Several batches' columns as one, in order.
    fn join(parts: Vec<Encodings>) -> Encodings {
        let texts = parts.iter().map(Encodings::len).sum();
        let tokens = parts.iter().map(|p| p.ids.len()).sum();
        let mut out = Encodings::with_capacity(texts, tokens);
        out.token_text = String::with_capacity(parts.iter().map(|p| p.token_text.len()).sum());
        for p in parts {
            let (first, units) = (out.ids.len() as u32, out.token_ends.last().copied().unwrap_or(0));
            out.starts.extend(p.starts[1..].iter().map(|s| s + first));
            out.ids.extend_from_slice(&p.ids);
            out.offsets.extend_from_slice(&p.offsets);
            out.attention_mask.extend_from_slice(&p.attention_mask);
            out.type_ids.extend_from_slice(&p.type_ids);
            out.special_tokens_mask.extend_from_slice(&p.special_tokens_mask);
            out.token_text.push_str(&p.token_text);
            out.token_ends.extend(p.token_ends.iter().map(|e| e + units));
        }
        out
    }

    fn push(&mut self, e: &Encoding, (a, b): &Input) {
        let mut first = Utf16Offsets::new(a);
        match b {
            // The crate's sequence ids say which text each token came from (a Vec per call).
            Some(b) => {
                let mut second = Utf16Offsets::new(b);
                let offsets = e.get_offsets().iter().zip(e.get_sequence_ids());
                self.offsets.extend(offsets.map(|(&o, seq)| {
                    let (start, end) = match seq {
                        Some(1) => second.convert(o),
                        _ => first.convert(o),
                    };
                    [start, end]
                }));
            }
            None => self.offsets.extend(e.get_offsets().iter().map(|&o| {
                let (start, end) = first.convert(o);
                [start, end]
            })),
        }
        self.ids.extend_from_slice(e.get_ids());
        self.attention_mask.extend_from_slice(e.get_attention_mask());
        self.type_ids.extend_from_slice(e.get_type_ids());
        self.special_tokens_mask
            .extend_from_slice(e.get_special_tokens_mask());
        let mut end = self.token_ends.last().copied().unwrap_or(0);
        for t in e.get_tokens() {
            self.token_text.push_str(t);
            end += match t.is_ascii() {
                true => t.len(),
                false => t.encode_utf16().count(),
            } as u32;
            self.token_ends.push(end);
        }
        self.starts.push(self.ids.len() as u32);
    }

    /// How many texts.
    pub fn len(&self) -> usize {
        self.starts.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Text `i`'s tokens' strings, as lib/text/encoding.js cuts them.
    #[cfg(test)]
    pub fn tokens(&self, i: usize) -> Vec<String> {
        let units: Vec<u16> = self.token_text.encode_utf16().collect();
        let (from, to) = (self.starts[i] as usize, self.starts[i + 1] as usize);
        (from..to)
            .map(|k| {
                let start = k.checked_sub(1).map_or(0, |j| self.token_ends[j]) as usize;
                String::from_utf16_lossy(&units[start..self.token_ends[k] as usize])
            })
            .collect()
    }
}

/// A batch as flat rows of equal length (padded): ids, attention mask, type ids.
#[derive(Debug, Default)]
pub struct Rows {
    pub rows: usize,
    pub width: usize,
    pub ids: Vec<i64>,
    pub attention_mask: Vec<i64>,
    pub type_ids: Vec<i64>,
    /// Each row's tokens before padding.
    pub lengths: Vec<usize>,
}

type Inner = tokenizers::Tokenizer;

pub struct Tokenizer {
    /// The tokenizer, without padding and truncation.
    base: Inner,
    /// The same without post-processor: the encodings before truncation (see the module doc).
    bare: Inner,
    config: Config,
    /// Whether a long text to truncate may be encoded from its start alone (`text::prefix`).
    locality: Locality,
}

impl Tokenizer {
    /// Loads a tokenizer from `tokenizer.json`'s contents and the config read beside it.
    pub fn from_bytes(json: &[u8], config: Config) -> anyhow::Result<Tokenizer> {
        let mut inner = Inner::from_bytes(json)
            .map_err(|e| fail(Code::ModelLoadError, format!("not a valid tokenizer.json: {e}")))?;
        let parsed: Json = serde_json::from_slice(json).unwrap_or(Json::Null);
        let mut config = config;
        fill_special_from_json(&mut config, &parsed);
        inner.with_padding(None);
        inner
            .with_truncation(None)
            .map_err(|e| fail(Code::ModelLoadError, format!("tokenizer.json: {e}")))?;
        let mut bare = inner.clone();
        bare.with_post_processor(None::<tokenizers::PostProcessorWrapper>);
        Ok(Tokenizer {
            base: inner,
            bare,
            config,
            locality: Locality::of(&parsed),
        })
    }

    /// Loads `path` (a `tokenizer.json`, or a folder holding one) and, from its folder,
    /// `tokenizer_config.json`, `special_tokens_map.json` and `chat_template.jinja` when present.
    pub fn from_file(path: &Path) -> anyhow::Result<Tokenizer> {
        let file = if path.is_dir() {
            path.join("tokenizer.json")
        } else {
            path.to_path_buf()
        };
        let json = std::fs::read(&file).map_err(|e| {
            fail(
                Code::ModelLoadError,
                format!("cannot read '{}': {e}", file.display()),
            )
        })?;
        let dir = file.parent().unwrap_or(Path::new("."));
        let beside = |name: &str| std::fs::read(dir.join(name)).ok();
        let mut config = Config::parse(
            beside("tokenizer_config.json").as_deref(),
            beside("special_tokens_map.json").as_deref(),
        )
        .with_context(|| format!("beside '{}'", file.display()))?;
        if let Some(t) = beside("chat_template.jinja") {
            config.chat_template = Some(String::from_utf8_lossy(&t).into_owned());
        }
        Tokenizer::from_bytes(&json, config).with_context(|| format!("'{}'", file.display()))
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Replaces the chat template the folder gave (a load's `chatTemplate`).
    pub fn set_chat_template(&mut self, template: String) {
        self.config.chat_template = Some(template);
    }

    /// The crate's encodings of `inputs`, in order (in parallel for several).
    fn encodings(
        &self,
        inputs: &[Input],
        add_special_tokens: bool,
        truncation: Option<Truncation>,
    ) -> anyhow::Result<Vec<Encoding>> {
        check_sizes(inputs)?;
        let params = self.truncation_params(truncation);
        let one = |input: &Input| self.encode_input(input, add_special_tokens, params.as_ref());
        // The crate's own rayon pool, as its `encode_batch` (TOKENIZERS_PARALLELISM=false: one
        // thread): the JS thread never runs this for a batch (see the addon's `text` glue).
        let out: Result<Vec<Encoding>, _> = inputs.maybe_par_iter().map(one).collect();
        out.map_err(cannot_encode)
    }

    /// `inputs` encoded as columns: in parallel chunks, each turned into columns by the thread
    /// that encoded it, then joined.
    fn columns(
        &self,
        inputs: &[Input],
        add_special_tokens: bool,
        truncation: Option<Truncation>,
    ) -> anyhow::Result<Encodings> {
        check_sizes(inputs)?;
        let params = self.truncation_params(truncation);
        let chunk = |inputs: &[Input]| -> tokenizers::Result<Encodings> {
            let encodings = inputs
                .iter()
                .map(|input| self.encode_input(input, add_special_tokens, params.as_ref()))
                .collect::<tokenizers::Result<Vec<_>>>()?;
            Ok(Encodings::of(&encodings, inputs))
        };
        // A few chunks per thread, so that one slow chunk does not leave the others idle; one
        // text runs on the calling thread.
        let size = inputs.len().div_ceil(4 * rayon_threads()).max(1);
        let parts: Vec<Encodings> = inputs
            .maybe_par_chunks_cond(inputs.len() > 1, size)
            .map(chunk)
            .collect::<Result<_, _>>()
            .map_err(cannot_encode)?;
        Ok(Encodings::join(parts))
    }

    fn truncation_params(&self, truncation: Option<Truncation>) -> Option<TruncationParams> {
        truncation.map(|t| TruncationParams {
            direction: if self.config.truncate_left {
                TruncationDirection::Left
            } else {
                TruncationDirection::Right
            },
            max_length: t.max_length,
            strategy: match t.strategy {
                Strategy::LongestFirst => TruncationStrategy::LongestFirst,
                Strategy::OnlyFirst => TruncationStrategy::OnlyFirst,
                Strategy::OnlySecond => TruncationStrategy::OnlySecond,
            },
            stride: 0,
        })
    }

    /// One input's encoding, truncated (see the module doc) and post-processed.
    fn encode_input(
        &self,
        (a, b): &Input,
        add_special_tokens: bool,
        params: Option<&TruncationParams>,
    ) -> tokenizers::Result<Encoding> {
        let added = match (params, add_special_tokens, self.base.get_post_processor()) {
            (Some(_), true, Some(pp)) => pp.added_tokens(b.is_some()),
            _ => 0,
        };
        let first = match params {
            Some(p) if b.is_none() && self.encodes_start_only(p) => {
                self.encode_start(a, p.max_length.saturating_sub(added))?
            }
            _ => self.bare.encode(a.as_str(), false)?,
        };
        let second = match b {
            Some(b) => {
                let mut e = self.bare.encode(b.as_str(), false)?;
                e.set_type_ids(vec![1; e.len()]);
                Some(e)
            }
            None => None,
        };
        let (first, second) = match params {
            None => (first, second),
            Some(p) => {
                let p = TruncationParams {
                    max_length: p.max_length.saturating_sub(added),
                    ..p.clone()
                };
                truncate_encodings(first, second, &p)?
            }
        };
        self.base.post_process(first, second, add_special_tokens)
    }

    /// Whether a lone text truncated by `p` may be encoded from its start (`text::prefix`):
    /// kept from the start, by a tokenizer whose first tokens depend on the start alone.
    fn encodes_start_only(&self, p: &TruncationParams) -> bool {
        self.locality.is_local()
            && matches!(p.direction, TruncationDirection::Right)
            && matches!(
                p.strategy,
                TruncationStrategy::LongestFirst | TruncationStrategy::OnlyFirst
            )
    }

    /// `text`'s encoding before truncation, or that of a start of it that already has `keep`
    /// tokens, which truncation makes the same encoding (`text::prefix`); starts of 16 KiB or
    /// 16 bytes per token kept, then 4 times longer each try.
    fn encode_start(&self, text: &str, keep: usize) -> tokenizers::Result<Encoding> {
        let mut near = prefix::WHOLE_BELOW.max(keep.saturating_mul(16));
        while near < text.len() {
            if let Some(cut) = prefix::cut_near(text, near) {
                let start = self.bare.encode(&text[..cut], false)?;
                // A margin beyond the tokens kept: only the last tokens of a start could ever
                // differ from the whole text's (the pipeline splits at the cut, text::prefix).
                if start.len() >= keep.saturating_add(prefix::MARGIN) {
                    return Ok(start);
                }
            }
            near = near.saturating_mul(4);
        }
        self.bare.encode(text, false)
    }

    /// Encodes one text (or a pair).
    pub fn encode(
        &self,
        input: Input,
        add_special_tokens: bool,
        truncation: Option<Truncation>,
    ) -> anyhow::Result<Encodings> {
        self.columns(&[input], add_special_tokens, truncation)
    }

    /// Encodes texts (or pairs), each as `encode` would, padded as asked.
    pub fn encode_batch(
        &self,
        inputs: &[Input],
        add_special_tokens: bool,
        truncation: Option<Truncation>,
        padding: Option<Padding>,
    ) -> anyhow::Result<Encodings> {
        if padding.is_none() {
            return self.columns(inputs, add_special_tokens, truncation);
        }
        let encodings = self.padded(inputs, add_special_tokens, truncation, padding)?;
        Ok(Encodings::of(&encodings, inputs))
    }

    /// Encodes a batch into rows of one length (for tensors): padded as asked; without
    /// padding, every input must give as many tokens (`ShapeMismatch` otherwise).
    pub fn encode_rows(
        &self,
        inputs: &[Input],
        add_special_tokens: bool,
        truncation: Option<Truncation>,
        padding: Option<Padding>,
    ) -> anyhow::Result<Rows> {
        let encodings = self.encodings(inputs, add_special_tokens, truncation)?;
        let lengths: Vec<usize> = encodings.iter().map(Encoding::len).collect();
        let longest = lengths.iter().copied().max().unwrap_or(0);
        // Padded straight into the rows, as `pad_encodings` would pad (its lengths, its side):
        // padding the Encodings themselves (tokens, offsets, masks) costs as much again.
        let (width, pad_id) = match padding {
            None => (longest, 0),
            Some(p) => {
                let mut width = match p.to {
                    PadTo::Longest => longest,
                    PadTo::Fixed(n) => n,
                };
                if let Some(m) = p.multiple_of.filter(|&m| m > 0 && width % m > 0) {
                    width += m - width % m;
                }
                (width, self.pad_id()?.0)
            }
        };
        if let Some(i) = lengths
            .iter()
            .position(|&n| n > width || (padding.is_none() && n != width))
        {
            bail_code!(
                Code::ShapeMismatch,
                "text {i} has {} tokens, the rows {width}: tensors need padding ('longest', or \
                 'maxLength' with truncation)",
                lengths[i]
            );
        }
        let n = encodings.len() * width;
        let mut rows = Rows {
            rows: encodings.len(),
            width,
            lengths,
            ids: Vec::with_capacity(n),
            attention_mask: Vec::with_capacity(n),
            type_ids: Vec::with_capacity(n),
        };
        let long = |v: &[u32]| v.iter().map(|&x| x as i64).collect::<Vec<_>>();
        for e in &encodings {
            let fill = width - e.len();
            let parts = [
                (&mut rows.ids, long(e.get_ids()), pad_id as i64),
                (&mut rows.attention_mask, long(e.get_attention_mask()), 0),
                (&mut rows.type_ids, long(e.get_type_ids()), 0),
            ];
            for (out, values, pad) in parts {
                if self.config.pad_left {
                    out.extend(std::iter::repeat_n(pad, fill));
                    out.extend(values);
                } else {
                    out.extend(values);
                    out.extend(std::iter::repeat_n(pad, fill));
                }
            }
        }
        Ok(rows)
    }

    /// Encodes a batch, one row of ids, mask and type ids per input, unpadded (the Batcher's
    /// per-request form).
    pub fn encode_ragged(
        &self,
        inputs: &[Input],
        add_special_tokens: bool,
        truncation: Option<Truncation>,
    ) -> anyhow::Result<Vec<[Vec<i64>; 3]>> {
        let encodings = self.encodings(inputs, add_special_tokens, truncation)?;
        let long = |v: &[u32]| v.iter().map(|&x| x as i64).collect::<Vec<i64>>();
        Ok(encodings
            .iter()
            .map(|e| {
                [
                    long(e.get_ids()),
                    long(e.get_attention_mask()),
                    long(e.get_type_ids()),
                ]
            })
            .collect())
    }

    fn padded(
        &self,
        inputs: &[Input],
        add_special_tokens: bool,
        truncation: Option<Truncation>,
        padding: Option<Padding>,
    ) -> anyhow::Result<Vec<Encoding>> {
        let mut encodings = self.encodings(inputs, add_special_tokens, truncation)?;
        self.pad(&mut encodings, padding)?;
        Ok(encodings)
    }

    /// The pad token's id and text, or InvalidArg.
    fn pad_id(&self) -> anyhow::Result<(u32, String)> {
        let Some(token) = self.config.special("pad_token") else {
            bail_code!(
                Code::InvalidArg,
                "padding: this tokenizer has no pad token (tokenizer_config.json names none); \
                 pass padding: false"
            );
        };
        match self.base.token_to_id(token) {
            Some(id) => Ok((id, token.to_string())),
            None => bail_code!(
                Code::InvalidArg,
                "padding: the pad token '{token}' is not in the vocabulary"
            ),
        }
    }

    /// Pads `encodings` as the crate (and so transformers) does.
    fn pad(&self, encodings: &mut [Encoding], padding: Option<Padding>) -> anyhow::Result<()> {
        let Some(p) = padding else {
            return Ok(());
        };
        let (pad_id, token) = self.pad_id()?;
        let params = PaddingParams {
            strategy: match p.to {
                PadTo::Longest => PaddingStrategy::BatchLongest,
                PadTo::Fixed(n) => PaddingStrategy::Fixed(n),
            },
            direction: if self.config.pad_left {
                PaddingDirection::Left
            } else {
                PaddingDirection::Right
            },
            pad_to_multiple_of: p.multiple_of,
            pad_id,
            pad_type_id: 0,
            pad_token: token,
        };
        pad_encodings(encodings, &params).map_err(|e| fail(Code::InvalidArg, format!("padding: {e}")))
    }

    /// The text of `ids` (tokens joined by the tokenizer's decoder).
    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> anyhow::Result<String> {
        self.base
            .decode(ids, skip_special_tokens)
            .map_err(|e| fail(Code::InvalidArg, format!("cannot decode: {e}")))
    }

    /// Decodes several id lists (in parallel).
    pub fn decode_batch(&self, ids: &[Vec<u32>], skip_special_tokens: bool) -> anyhow::Result<Vec<String>> {
        let slices: Vec<&[u32]> = ids.iter().map(Vec::as_slice).collect();
        self.base
            .decode_batch(&slices, skip_special_tokens)
            .map_err(|e| fail(Code::InvalidArg, format!("cannot decode: {e}")))
    }

    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.base.token_to_id(token)
    }

    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.base.id_to_token(id)
    }

    /// The Hugging Face tokenizer (no padding, no truncation).
    pub fn hf(&self) -> &Inner {
        &self.base
    }

    /// The vocabulary's size, added tokens included (Python's `get_vocab_size(True)`).
    pub fn vocab_size(&self) -> usize {
        self.base.get_vocab_size(true)
    }

    /// The longest input a model takes (`model_max_length`), when the config says.
    pub fn model_max_length(&self) -> Option<usize> {
        self.config.model_max_length
    }
}

/// Texts over `MAX_TEXT_BYTES` are InvalidArg.
fn check_sizes(inputs: &[Input]) -> anyhow::Result<()> {
    for (i, (a, b)) in inputs.iter().enumerate() {
        let bytes = a.len() + b.as_ref().map_or(0, String::len);
        if bytes > MAX_TEXT_BYTES {
            bail_code!(
                Code::InvalidArg,
                "text {i}: {bytes} bytes is over the limit of {MAX_TEXT_BYTES}"
            );
        }
    }
    Ok(())
}

fn cannot_encode(e: tokenizers::Error) -> anyhow::Error {
    fail(Code::InvalidArg, format!("cannot encode: {e}"))
}

/// The threads the crate's rayon pool runs (1 with TOKENIZERS_PARALLELISM=false).
fn rayon_threads() -> usize {
    match tokenizers::parallelism::get_parallelism() {
        true => tokenizers::parallelism::current_num_threads(),
        false => 1,
    }
}

/// Roles tokenizer_config.json left out, from tokenizer.json itself: the padding's pad token
/// and the model's unknown token.
fn fill_special_from_json(config: &mut Config, json: &Json) {
    let mut fill = |role: &'static str, token: Option<String>| {
        if config.special(role).is_none() {
            if let Some(t) = token {
                config.special.push((role, t));
            }
        }
    };
    let pad = json.pointer("/padding/pad_token").and_then(Json::as_str);
    fill("pad_token", pad.map(str::to_string));
    let model = json.get("model");
    let unk = model
        .and_then(|m| m.get("unk_token"))
        .and_then(Json::as_str)
        .map(str::to_string);
    let unigram_unk = model.and_then(|m| {
        let id = m.get("unk_id")?.as_u64()? as usize;
        m.get("vocab")?.get(id)?.get(0)?.as_str().map(str::to_string)
    });
    fill("unk_token", unk.or(unigram_unk));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny WordPiece tokenizer.json (BERT-style normalizer, [CLS]/[SEP] template), with
    /// `config`.
    fn wordpiece_with(config: Config) -> Tokenizer {
        let json = r###"{
          "version": "1.0", "truncation": {"max_length": 4, "strategy": "LongestFirst", "stride": 0},
          "padding": null,
          "added_tokens": [
            {"id": 0, "content": "[PAD]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
            {"id": 1, "content": "[UNK]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
            {"id": 2, "content": "[CLS]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
            {"id": 3, "content": "[SEP]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}
          ],
          "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": null, "lowercase": true},
          "pre_tokenizer": {"type": "BertPreTokenizer"},
          "post_processor": {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "[SEP]", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}, {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
            "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]}, "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}},
          "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
          "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 100,
            "vocab": {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "hello": 4, "world": 5, "caf": 6, "##e": 7, "!": 8, "🍕": 9}}
        }"###;
        Tokenizer::from_bytes(json.as_bytes(), config).unwrap()
    }

    fn wordpiece() -> Tokenizer {
        wordpiece_with(Config::parse(Some(br#"{"pad_token": "[PAD]"}"#), None).unwrap())
    }

    fn text(s: &str) -> Input {
        (s.to_string(), None)
    }

    #[test]
    fn encodes_with_js_offsets_and_ignores_the_files_truncation() {
        let t = wordpiece();
        let e = t.encode(text("Hello 🍕 café world!"), true, None).unwrap();
        assert_eq!(e.ids, vec![2, 4, 9, 6, 7, 5, 8, 3]);
        assert_eq!(e.starts, vec![0, 8]);
        assert_eq!(e.offsets[2], [6, 8]); // the pizza: two UTF-16 code units
        assert_eq!(e.offsets[3], [9, 12]);
        assert_eq!(e.offsets[4], [12, 13]);
        assert_eq!(e.special_tokens_mask, vec![1, 0, 0, 0, 0, 0, 0, 1]);
        // BERT's normalizer lowercases and strips the accent; the offsets index the original.
        assert_eq!(t.decode(&e.ids, true).unwrap(), "hello 🍕 cafe world!");
    }

    #[test]
    fn truncates_and_pads_per_call() {
        let t = wordpiece();
        let trunc = Some(Truncation {
            max_length: 4,
            strategy: Strategy::LongestFirst,
        });
        let e = t.encode(text("hello world hello world"), true, trunc).unwrap();
        assert_eq!(e.ids, vec![2, 4, 5, 3]);
        let inputs = vec![text("hello"), text("hello world !")];
        let pad = Some(Padding {
            to: PadTo::Longest,
            multiple_of: Some(4),
        });
        let rows = t.encode_rows(&inputs, true, None, pad).unwrap();
        assert_eq!((rows.rows, rows.width), (2, 8));
        assert_eq!(&rows.ids[..8], &[2, 4, 3, 0, 0, 0, 0, 0]);
        assert_eq!(&rows.attention_mask[..8], &[1, 1, 1, 0, 0, 0, 0, 0]);
        assert_eq!(rows.lengths, vec![3, 5]);
        let pair = t
            .encode(("hello".into(), Some("world 🍕".into())), true, None)
            .unwrap();
        assert_eq!(pair.type_ids, vec![0, 0, 0, 1, 1, 1]);
        assert_eq!(pair.offsets[4], [6, 8]);
    }

    #[test]
    fn a_batch_as_columns() {
        let t = wordpiece();
        let inputs = [
            text("Hello 🍕"),
            text(""),
            ("café".into(), Some("🍕 world".into())),
        ];
        let e = t.encode_batch(&inputs, true, None, None).unwrap();
        assert_eq!(e.len(), 3);
        assert_eq!(e.starts, vec![0, 4, 6, 13]);
        assert_eq!(e.ids[4..6], [2, 3]); // the empty text: [CLS] [SEP]
        assert_eq!(e.tokens(0), ["[CLS]", "hello", "🍕", "[SEP]"]);
        assert_eq!(e.tokens(1), ["[CLS]", "[SEP]"]);
        assert_eq!(
            e.tokens(2),
            ["[CLS]", "caf", "##e", "[SEP]", "🍕", "world", "[SEP]"]
        );
        // Token ends count UTF-16 code units: the pizza is 2.
        assert_eq!(e.token_ends[..4], [5, 10, 12, 17]);
        assert_eq!(
            *e.token_ends.last().unwrap() as usize,
            e.token_text.encode_utf16().count()
        );
        // The pair's second text's tokens index that text.
        assert_eq!(e.offsets[10..12], [[0, 2], [3, 8]]);
        assert_eq!(e.type_ids[6..13], [0, 0, 0, 0, 1, 1, 1]);
        let one = t.encode(inputs[2].clone(), true, None).unwrap();
        assert_eq!(one.ids, e.ids[6..]);
        assert_eq!(one.offsets, e.offsets[6..]);
        let empty = t.encode_batch(&[], true, None, None).unwrap();
        assert!(empty.is_empty() && empty.starts == [0]);
    }

    #[test]
    fn special_tokens_by_role_from_the_config_or_the_json() {
        let t = wordpiece_with(Config::default());
        assert_eq!(t.config().special("pad_token"), None);
        assert_eq!(t.config().special("unk_token"), Some("[UNK]"));
        let c = Config::parse(
            Some(br#"{"pad_token": {"content": "[PAD]"}, "model_max_length": 1e30, "padding_side": "left", "chat_template": [{"name": "tool_use", "template": "x"}, {"name": "default", "template": "y"}]}"#),
            Some(br#"{"bos_token": "[CLS]", "pad_token": "ignored"}"#),
        )
        .unwrap();
        assert_eq!(c.special("pad_token"), Some("[PAD]"));
        assert_eq!(c.special("bos_token"), Some("[CLS]"));
        assert_eq!(c.model_max_length, None);
        assert!(c.pad_left);
        assert_eq!(c.chat_template.as_deref(), Some("y"));
    }

    #[test]
    fn malformed_json_is_a_load_error() {
        let e = Tokenizer::from_bytes(b"{\"model\": 3}", Config::default())
            .err()
            .unwrap();
        assert_eq!(crate::error::describe(&e).0, Code::ModelLoadError);
        let longest = Some(Padding {
            to: PadTo::Longest,
            multiple_of: None,
        });
        let no_pad = wordpiece_with(Config::default());
        let e = no_pad
            .encode_rows(&[text("a")], true, None, longest)
            .err()
            .unwrap();
        assert_eq!(crate::error::describe(&e).0, Code::InvalidArg);
        let e = no_pad
            .encode_rows(&[text("a"), text("a b")], true, None, None)
            .err()
            .unwrap();
        assert_eq!(crate::error::describe(&e).0, Code::ShapeMismatch);
    }
}
