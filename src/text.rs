//! The `torch.text` namespace (glue): `Tokenizer` reads its arguments and options, calls the
//! core (`torch_core::text`: `tokenizer`, `chat_template`), and builds the JS results.
//! `encodeBatch` runs on torch-node's executor (`crate::napi::task`): tokenizing thousands of
//! texts never blocks the event loop; its tensors are made there too and wrapped on the JS thread.
use crate::error::{bail_code, guard, Code};
use crate::napi::convert::{Arg, Raw};
use crate::napi::js::{self, Env as RawEnv, Val};
use crate::napi::lifecycle::ModuleSlot;
use crate::napi::options::{js_options, OptionValue};
use crate::napi::outcome::{js_result, Outcome};
use crate::napi::task::{self, abort_flag, prepare, AbortFlag, Promise};
use crate::tensor::JsTensor;
use napi::sys::ValueType as Js;
use serde_json::Value as Json;
use std::sync::Arc;
use torch_core::text::chat_template::{self, ChatInput};
use torch_core::text::tokenizer::{
    Config, Encodings, Input, PadTo, Padding, Rows, Strategy, Tokenizer, Truncation,
};

/// A text read exactly (a lone surrogate is InvalidArg, never a silent U+FFFD).
pub struct Text(pub String);

impl OptionValue for Text {
    fn read(env: RawEnv, v: Val, what: &str) -> anyhow::Result<Self> {
        text(env, v, what).map(Text)
    }
}

/// A string read exactly (a lone surrogate is InvalidArg naming `what` and its index); also
/// CausalLM's prompts and stop strings.
pub(crate) fn text(env: RawEnv, v: Val, what: &str) -> anyhow::Result<String> {
    if js::type_of(env, v)? != Js::napi_string {
        bail_code!(
            Code::InvalidArg,
            "{what}: expected a string, got {}",
            js::describe(env, v)
        );
    }
    js::string_exact(env, v, what)
}

/// An array of texts.
pub struct Texts(Vec<String>);

impl OptionValue for Texts {
    fn read(env: RawEnv, v: Val, what: &str) -> anyhow::Result<Self> {
        texts(env, v, what).map(Texts)
    }
}

/// As `convert::array_of(.., text)`, without naming each item before it fails: 10,000 texts are
/// read on the JS thread, in one go.
fn texts(env: RawEnv, v: Val, what: &str) -> anyhow::Result<Vec<String>> {
    if !js::is_array(env, v)? {
        bail_code!(
            Code::InvalidArg,
            "{what}: expected an array of strings, got {}",
            js::describe(env, v)
        );
    }
    (0..js::array_len(env, v)?)
        .map(|i| {
            let item = js::element(env, v, i)?;
            if js::type_of(env, item)? == Js::napi_string {
                if let Ok(t) = js::string_exact(env, item, what) {
                    return Ok(t);
                }
            }
            text(env, item, &format!("{what}[{i}]")) // the error, naming the item
        })
        .collect()
}

/// `truncation`: a boolean or transformers' strategy name.
pub struct TruncationOpt(Option<Strategy>);

impl OptionValue for TruncationOpt {
    fn read(env: RawEnv, v: Val, what: &str) -> anyhow::Result<Self> {
        if js::type_of(env, v)? == Js::napi_boolean {
            return Ok(TruncationOpt(
                js::boolean(env, v)?.then_some(Strategy::LongestFirst),
            ));
        }
        Ok(TruncationOpt(Some(match String::read(env, v, what)?.as_str() {
            "longest_first" => Strategy::LongestFirst,
            "only_first" => Strategy::OnlyFirst,
            "only_second" => Strategy::OnlySecond,
            other => bail_code!(
                Code::InvalidArg,
                "{what}: expected a boolean, 'longest_first', 'only_first' or 'only_second', got '{other}'"
            ),
        })))
    }
}

/// `padding`: `'longest'` (or `true`), `'maxLength'`, or `false`.
pub enum PaddingOpt {
    Off,
    Longest,
    MaxLength,
}

impl OptionValue for PaddingOpt {
    fn read(env: RawEnv, v: Val, what: &str) -> anyhow::Result<Self> {
        if js::type_of(env, v)? == Js::napi_boolean {
            return Ok(match js::boolean(env, v)? {
                true => PaddingOpt::Longest,
                false => PaddingOpt::Off,
            });
        }
        match String::read(env, v, what)?.as_str() {
            "longest" => Ok(PaddingOpt::Longest),
            "maxLength" => Ok(PaddingOpt::MaxLength),
            other => bail_code!(
                Code::InvalidArg,
                "{what}: expected 'longest', 'maxLength' or false, got '{other}'"
            ),
        }
    }
}

/// `returnTensors`: `true` (padded `[n, length]` tensors), `'ragged'` or `false`.
#[derive(Clone, Copy, PartialEq)]
pub enum TensorsOpt {
    Off,
    Padded,
    Ragged,
}

impl OptionValue for TensorsOpt {
    fn read(env: RawEnv, v: Val, what: &str) -> anyhow::Result<Self> {
        if js::type_of(env, v)? == Js::napi_boolean {
            return Ok(match js::boolean(env, v)? {
                true => TensorsOpt::Padded,
                false => TensorsOpt::Off,
            });
        }
        match String::read(env, v, what)?.as_str() {
            "ragged" => Ok(TensorsOpt::Ragged),
            other => bail_code!(
                Code::InvalidArg,
                "{what}: expected true, false or 'ragged', got '{other}'"
            ),
        }
    }
}

/// `tokenizer_config.json`'s contents: a string, a Buffer or a plain object.
pub struct ConfigSource(Vec<u8>);

impl OptionValue for ConfigSource {
    fn read(env: RawEnv, v: Val, what: &str) -> anyhow::Result<Self> {
        if js::type_of(env, v)? == Js::napi_object && !js::is_typed_array(env, v)? {
            return Ok(ConfigSource(json(env, v, what, 0)?.to_string().into_bytes()));
        }
        json_bytes(env, v, what).map(ConfigSource)
    }
}

/// JSON text from a string or a Buffer/Uint8Array.
fn json_bytes(env: RawEnv, v: Val, what: &str) -> anyhow::Result<Vec<u8>> {
    if js::type_of(env, v)? == Js::napi_string {
        return Ok(js::string_exact(env, v, what)?.into_bytes());
    }
    let bytes = js::with_typed_array(env, v, |view| {
        Ok((view.type_name == "Uint8Array").then(|| view.bytes.to_vec()))
    })?;
    match bytes.flatten() {
        Some(b) => Ok(b),
        None => bail_code!(
            Code::InvalidArg,
            "{what}: expected JSON text (a string, or a Buffer/Uint8Array), got {}",
            js::describe(env, v)
        ),
    }
}

js_options! {
    /// Options of `Tokenizer.fromJSON`; any other key is refused (`InvalidArg`).
    pub struct LoadBag as JsTokenizerLoadOptions "TokenizerLoadOptions" {
        /// `tokenizer_config.json`'s contents (a string, a Buffer or the parsed object): special
        /// tokens by role, `model_max_length`, `padding_side`, `chat_template`.
        config "config": ConfigSource as "string | Uint8Array | Record<string, unknown>",
        /// A chat template (Jinja), overriding the config's.
        chat_template "chatTemplate": Text as "string",
    }
}

js_options! {
    /// Options of `Tokenizer.encode`; any other key is refused (`InvalidArg`).
    pub struct EncodeBag as JsTokenizerEncodeOptions "TokenizerEncodeOptions" {
        /// A second text: the pair's (a question and its context, for a cross-encoder).
        pair "pair": Text as "string",
        /// Adds the model's special tokens (`[CLS]`, `[SEP]`, `<s>`, ...). Default `true`.
        add_special_tokens "addSpecialTokens": bool as "boolean",
        /// Cuts to `maxLength` tokens: `true` (`'longest_first'`), `'only_first'`,
        /// `'only_second'` or `false`. Default: `true` when `maxLength` is given (as
        /// transformers does), else `false`.
        truncation "truncation": TruncationOpt as "boolean | 'longest_first' | 'only_first' | 'only_second'",
        /// The most tokens, special tokens included. Default `model_max_length` from
        /// `tokenizer_config.json`.
        max_length "maxLength": u64 as "number",
    }
}

js_options! {
    /// Options of `Tokenizer.encodeBatch`; any other key is refused (`InvalidArg`).
    pub struct BatchBag as JsTokenizerBatchOptions "TokenizerBatchOptions" {
        /// Second texts, one per text (pairs).
        pair "pair": Texts as "string[]",
        /// Adds the model's special tokens. Default `true`.
        add_special_tokens "addSpecialTokens": bool as "boolean",
        /// As `encode`'s.
        truncation "truncation": TruncationOpt as "boolean | 'longest_first' | 'only_first' | 'only_second'",
        /// As `encode`'s; also the length `padding: 'maxLength'` pads to.
        max_length "maxLength": u64 as "number",
        /// `'longest'` (or `true`): every row as long as the longest; `'maxLength'`: as long as
        /// `maxLength`; `false`: no padding. Default `'longest'` with `returnTensors: true`, else
        /// `false`. Pads with the pad token, on the config's `padding_side`.
        padding "padding": PaddingOpt as "'longest' | 'maxLength' | boolean",
        /// Rounds the padded length up to a multiple of this (8 suits tensor cores).
        pad_to_multiple_of "padToMultipleOf": u64 as "number",
        /// `true`: int64 tensors `inputIds`, `attentionMask`, `tokenTypeIds` `[n, length]`, ready
        /// for `forward`; `'ragged'`: one `[1, length_i]` tensor of each per text, unpadded (what
        /// a `Batcher`'s `run()` takes with `padValue`); `false` (default): one `Encoding` per text.
        return_tensors "returnTensors": TensorsOpt as "boolean | 'ragged'",
        /// Aborting rejects with `Aborted` while the call is still queued.
        signal "signal": Val as "AbortSignal",
    }
}

js_options! {
    /// Options of `Tokenizer.decode` and `decodeBatch`; any other key is refused (`InvalidArg`).
    pub struct DecodeBag as JsTokenizerDecodeOptions "TokenizerDecodeOptions" {
        /// Leaves the special tokens (`[CLS]`, `<|im_end|>`, ...) out. Default `false`.
        skip_special_tokens "skipSpecialTokens": bool as "boolean",
    }
}

js_options! {
    /// Options of `Tokenizer.applyChatTemplate`; any other key is refused (`InvalidArg`).
    pub struct ChatBag as JsChatTemplateOptions "ChatTemplateOptions" {
        /// Ends with the header that starts the assistant's answer. Default `false`.
        add_generation_prompt "addGenerationPrompt": bool as "boolean",
        /// Tool (function) JSON schemas, for templates that support tools.
        tools "tools": Val as "Record<string, unknown>[]",
        /// Documents for retrieval-augmented templates.
        documents "documents": Val as "Record<string, unknown>[]",
        /// A template to use instead of the tokenizer's own.
        chat_template "chatTemplate": Text as "string",
        /// More variables the template reads (`enable_thinking`, `date_string`, ...).
        variables "variables": Val as "Record<string, unknown>",
    }
}

/// How deep JS data handed to a chat template may nest.
const MAX_DEPTH: usize = 64;

/// Plain JS data (null, booleans, numbers, strings, arrays, plain objects) as JSON; integral
/// numbers become integers (Python's `int`), others floats.
fn json(env: RawEnv, v: Val, what: &str, depth: usize) -> anyhow::Result<Json> {
    if depth > MAX_DEPTH {
        bail_code!(Code::InvalidArg, "{what}: nested more than {MAX_DEPTH} levels");
    }
    Ok(match js::type_of(env, v)? {
        Js::napi_undefined | Js::napi_null => Json::Null,
        Js::napi_boolean => Json::Bool(js::boolean(env, v)?),
        Js::napi_number => {
            let x = js::number(env, v)?;
            if x.fract() == 0.0 && x.abs() < 9.007_199_254_740_992e15 {
                Json::from(x as i64)
            } else {
                serde_json::Number::from_f64(x).map_or(Json::Null, Json::Number)
            }
        }
        Js::napi_string => Json::String(js::string_exact(env, v, what)?),
        Js::napi_object if js::is_array(env, v)? => Json::Array(
            js::elements(env, v)?
                .into_iter()
                .enumerate()
                .map(|(i, item)| json(env, item, &format!("{what}[{i}]"), depth + 1))
                .collect::<anyhow::Result<_>>()?,
        ),
        Js::napi_object if js::is_plain_object(env, v)? => {
            let mut map = serde_json::Map::new();
            for key in js::own_keys(env, v)? {
                let item = js::property(env, v, &key)?;
                let value = match item {
                    Some(item) => json(env, item, &format!("{what}.{key}"), depth + 1)?,
                    None => Json::Null,
                };
                map.insert(key, value);
            }
            Json::Object(map)
        }
        _ => bail_code!(
            Code::InvalidArg,
            "{what}: expected plain data (strings, numbers, booleans, arrays, objects), got {}",
            js::describe(env, v)
        ),
    })
}

js_result!(
    /// Encoded texts as columns (`tokenizer::Encodings`): lib/text/encoding.js makes one
    /// `Encoding` per text over them, whose arrays are cut out on first read.
    EncodingColumns(Encodings) as "EncodingColumns",
    |env, e| columns(env, &e)
);

/// `{starts, ids, offsets, attentionMask, typeIds, specialTokensMask, tokenEnds, tokens}`: a
/// Uint32Array per field (offsets two per token) and the tokens' strings as one string. A few
/// copies on the JS thread, whatever the batch's size.
fn columns(env: RawEnv, e: &Encodings) -> anyhow::Result<Val> {
    // V8's longest string (`String::kMaxLength`, 2^29 - 24 code units on 64-bit).
    const MAX_STRING: u32 = (1 << 29) - 24;
    if e.token_ends.last().is_some_and(|&n| n > MAX_STRING) {
        bail_code!(
            Code::InvalidArg,
            "encodeBatch: the tokens' strings are over V8's longest string; encode fewer texts per call"
        );
    }
    let u32s = [
        ("starts", &e.starts[..]),
        ("ids", &e.ids),
        ("offsets", e.offsets.as_flattened()),
        ("attentionMask", &e.attention_mask),
        ("typeIds", &e.type_ids),
        ("specialTokensMask", &e.special_tokens_mask),
        ("tokenEnds", &e.token_ends),
    ];
    let mut fields = Vec::with_capacity(u32s.len() + 1);
    for (key, values) in u32s {
        fields.push((key.to_string(), js::new_u32_array(env, values)?));
    }
    fields.push(("tokens".into(), js::new_string(env, &e.token_text)?));
    js::new_object(env, fields)
}

/// What `encodeBatch` computed on the executor.
enum BatchOut {
    Encodings(Encodings),
    Padded(Rows, [tch::Tensor; 3]),
    Ragged(Vec<[tch::Tensor; 3]>),
}

const TENSOR_KEYS: [&str; 3] = ["inputIds", "attentionMask", "tokenTypeIds"];

/// `encodeBatch`'s value, on the JS thread.
fn batch_value(env: RawEnv, out: BatchOut) -> anyhow::Result<Val> {
    let tensor = |t: tch::Tensor| js::value_of(env, JsTensor::new(t));
    match out {
        BatchOut::Encodings(e) => columns(env, &e),
        BatchOut::Padded(rows, tensors) => {
            let mut fields = Vec::with_capacity(4);
            for (k, t) in TENSOR_KEYS.iter().zip(tensors) {
                fields.push((k.to_string(), tensor(t)?));
            }
            let lengths: Vec<f64> = rows.lengths.iter().map(|&n| n as f64).collect();
            fields.push(("lengths".into(), js::new_number_array(env, &lengths)?));
            js::new_object(env, fields)
        }
        BatchOut::Ragged(rows) => {
            let mut columns: [Vec<Val>; 3] = Default::default();
            let mut lengths = Vec::with_capacity(rows.len());
            for row in rows {
                lengths.push(row[0].size()[1] as f64);
                for (column, t) in columns.iter_mut().zip(row) {
                    column.push(tensor(t)?);
                }
            }
            let mut fields = Vec::with_capacity(4);
            for (k, column) in TENSOR_KEYS.iter().zip(columns) {
                fields.push((k.to_string(), js::new_array(env, column)?));
            }
            fields.push(("lengths".into(), js::new_number_array(env, &lengths)?));
            js::new_object(env, fields)
        }
    }
}

fn int64(values: &[i64], shape: &[i64]) -> anyhow::Result<tch::Tensor> {
    Ok(tch::Tensor::f_from_slice(values)?.f_reshape(shape)?)
}

js_result!(
    /// A chat rendered to text.
    Rendered(String) as "string",
    |env, s| js::new_string(env, &s)
);

/// The special token of each role, or null.
#[napi_derive::napi(object, object_from_js = false)]
pub struct SpecialTokens {
    pub bos_token: Option<String>,
    pub eos_token: Option<String>,
    pub unk_token: Option<String>,
    pub sep_token: Option<String>,
    pub pad_token: Option<String>,
    pub cls_token: Option<String>,
    pub mask_token: Option<String>,
}

/// Reads `truncation`/`maxLength` into one call's truncation.
fn truncation(
    tok: &Tokenizer,
    truncation: Option<TruncationOpt>,
    max_length: Option<u64>,
) -> anyhow::Result<Option<Truncation>> {
    let strategy = match (truncation, max_length) {
        (Some(TruncationOpt(s)), _) => s,
        (None, Some(_)) => Some(Strategy::LongestFirst),
        (None, None) => None,
    };
    let Some(strategy) = strategy else { return Ok(None) };
    let max_length = match max_length.map(|n| n as usize).or(tok.model_max_length()) {
        Some(0) => bail_code!(Code::InvalidArg, "options.maxLength: must be at least 1"),
        Some(n) => n,
        None => bail_code!(
            Code::InvalidArg,
            "options.truncation: needs options.maxLength (this tokenizer's config gives no model_max_length)"
        ),
    };
    Ok(Some(Truncation { max_length, strategy }))
}

/// Reads token ids: an array of integers, or a 1-D integer tensor.
fn ids(env: RawEnv, v: Val, what: &str) -> anyhow::Result<Vec<u32>> {
    if let Some(t) = crate::tensor::operands::with_tensor(env, v, |t| t.get().map(|t| t.shallow_clone())) {
        let t = t?;
        let kind = t.kind();
        if t.dim() != 1 || torch_core::dtype::is_floating(kind) || kind == tch::Kind::Bool {
            bail_code!(
                Code::InvalidArg,
                "{what}: expected a 1-D integer tensor of ids, got {:?} {}",
                t.size(),
                torch_core::dtype::name(kind)
            );
        }
        let values = Vec::<i64>::try_from(t.f_to_kind(tch::Kind::Int64)?.f_contiguous()?)?;
        return values.into_iter().map(|x| id(x as f64, what)).collect();
    }
    crate::napi::convert::array_of(env, v, "token ids", what, |item, what| {
        id(crate::napi::convert::number(env, item, what)?, what)
    })
}

fn id(x: f64, what: &str) -> anyhow::Result<u32> {
    if x.fract() != 0.0 || !(0.0..=u32::MAX as f64).contains(&x) {
        bail_code!(
            Code::InvalidArg,
            "{what}: expected a token id (an integer ≥ 0), got {x}"
        );
    }
    Ok(x as u32)
}

/// Hugging Face tokenizers (`tokenizer.json`) and chat templates. napi-rs registers and types
/// the class at the top level, so it is `_Tokenizer` there, its members untyped
/// (`skip_typescript`): index.js puts it in `torch.text` and index.d.ts's hand-written `text`
/// namespace declares it, with these docs.
#[napi_derive::napi(namespace = "text")]
pub mod text {
    use super::*;
    use crate::napi::convert::Str;
    use napi::Env;

    /// @internal The native class of `torch.text.Tokenizer` (index.js): a Hugging Face tokenizer
    /// (`tokenizer.json`: WordPiece, byte-level BPE, Unigram/SentencePiece, with their
    /// normalizers, pre-tokenizers, post-processors and decoders) run by the `tokenizers` crate
    /// that Python's `tokenizers` and `transformers` run.
    #[napi_derive::napi(js_name = "_Tokenizer")]
    pub struct JsTokenizer {
        slot: ModuleSlot<Tokenizer>,
    }

    impl JsTokenizer {
        fn wrap(t: Tokenizer) -> JsTokenizer {
            JsTokenizer {
                slot: ModuleSlot::new("Tokenizer", t),
            }
        }

        fn get(&self) -> anyhow::Result<Arc<Tokenizer>> {
            self.slot.get()
        }
    }

    #[napi_derive::napi]
    impl JsTokenizer {
        /// Loads `tokenizer.json` (a path to it, or to the folder holding it) and, from its folder,
        /// `tokenizer_config.json`, `special_tokens_map.json` and `chat_template.jinja` when they
        /// are there. Errors: `ModelLoadError` (missing or malformed file).
        #[napi_derive::napi(skip_typescript)]
        pub fn from_file(path: Str) -> Outcome<JsTokenizer> {
            guard(|| {
                let path = std::path::PathBuf::from(path.read_path()?);
                Ok(JsTokenizer::wrap(Tokenizer::from_file(&path)?))
            })
            .into()
        }

        /// A tokenizer from `tokenizer.json`'s contents (a string or a Buffer); `options.config`:
        /// `tokenizer_config.json`'s.
        #[napi_derive::napi(skip_typescript, js_name = "fromJSON")]
        pub fn from_json(json: Arg, options: Option<Arg>) -> Outcome<JsTokenizer> {
            guard(|| {
                let env = json.raw().env;
                let bytes = json_bytes(env, json.raw().val, "json")?;
                let o = LoadBag::read(env, options.map(|o| o.raw().val), "options")?;
                let mut config = match o.config {
                    Some(c) => Config::parse(Some(&c.0), None)?,
                    None => Config::default(),
                };
                if let Some(t) = o.chat_template {
                    config.chat_template = Some(t.0);
                }
                Ok(JsTokenizer::wrap(Tokenizer::from_bytes(&bytes, config)?))
            })
            .into()
        }

        /// Encodes one text (or, with `pair`, two): ids, tokens, JS-index offsets, masks.
        /// Synchronous, on the calling thread: for many texts use `encodeBatch`.
        #[napi_derive::napi(skip_typescript)]
        pub fn encode(&self, text: Arg, options: Option<Arg>) -> Outcome<EncodingColumns> {
            guard(|| {
                let env = text.raw().env;
                let tok = self.get()?;
                let t = super::text(env, text.raw().val, "text")?;
                let o = EncodeBag::read(env, options.map(|o| o.raw().val), "options")?;
                let trunc = truncation(&tok, o.truncation, o.max_length)?;
                let input: Input = (t, o.pair.map(|p| p.0));
                let e = tok.encode(input, o.add_special_tokens.unwrap_or(true), trunc)?;
                Ok(EncodingColumns(e))
            })
            .into()
        }

        /// Encodes many texts on torch-node's executor (in parallel), each as `encode` would:
        /// an `Encoding` per text, or, with `returnTensors`, int64 tensors ready for `forward`
        /// (`{inputIds, attentionMask, tokenTypeIds, lengths}`).
        #[napi_derive::napi(skip_typescript)]
        pub fn encode_batch(&self, env: Env, texts: Arg, options: Option<Arg>) -> Outcome<Promise> {
            let raw = env.raw();
            Outcome::of(|| {
                let prepared = prepare(|| {
                    let tok = self.get()?;
                    let list = super::texts(raw, texts.raw().val, "texts")?;
                    let o = BatchBag::read(raw, options.map(|o| o.raw().val), "options")?;
                    let abort: AbortFlag = o.signal.map(|s| abort_flag(&env, s)).transpose()?;
                    let inputs: Vec<Input> = match o.pair {
                        None => list.into_iter().map(|t| (t, None)).collect(),
                        Some(Texts(pairs)) if pairs.len() == list.len() => {
                            list.into_iter().zip(pairs).map(|(a, b)| (a, Some(b))).collect()
                        }
                        Some(Texts(pairs)) => bail_code!(
                            Code::InvalidArg,
                            "options.pair: expected one second text per text ({}), got {}",
                            list.len(),
                            pairs.len()
                        ),
                    };
                    let trunc = truncation(&tok, o.truncation, o.max_length)?;
                    let tensors = o.return_tensors.unwrap_or(TensorsOpt::Off);
                    let default_padding = match tensors {
                        TensorsOpt::Padded => PaddingOpt::Longest,
                        _ => PaddingOpt::Off,
                    };
                    let padding = match o.padding.unwrap_or(default_padding) {
                        PaddingOpt::Off => None,
                        PaddingOpt::Longest => Some(PadTo::Longest),
                        PaddingOpt::MaxLength => match o.max_length.map(|n| n as usize).or(tok.model_max_length()) {
                            Some(n) => Some(PadTo::Fixed(n)),
                            None => bail_code!(
                                Code::InvalidArg,
                                "options.padding 'maxLength': needs options.maxLength (the config gives no model_max_length)"
                            ),
                        },
                    };
                    if tensors == TensorsOpt::Ragged && padding.is_some() {
                        bail_code!(
                            Code::InvalidArg,
                            "options.returnTensors 'ragged' is unpadded: leave padding out"
                        );
                    }
                    let padding = padding.map(|to| Padding {
                        to,
                        multiple_of: o.pad_to_multiple_of.filter(|&n| n > 0).map(|n| n as usize),
                    });
                    let special = o.add_special_tokens.unwrap_or(true);
                    Ok(((tok, inputs, special, trunc, padding, tensors), abort))
                })?;
                guard(|| {
                    task::spawn(
                        raw,
                        "encodeBatch",
                        prepared,
                        |(tok, inputs, special, trunc, padding, tensors)| {
                            Ok(match tensors {
                                TensorsOpt::Off => {
                                    BatchOut::Encodings(tok.encode_batch(&inputs, special, trunc, padding)?)
                                }
                                TensorsOpt::Padded => {
                                    let rows = tok.encode_rows(&inputs, special, trunc, padding)?;
                                    let shape = [rows.rows as i64, rows.width as i64];
                                    let t = [
                                        int64(&rows.ids, &shape)?,
                                        int64(&rows.attention_mask, &shape)?,
                                        int64(&rows.type_ids, &shape)?,
                                    ];
                                    BatchOut::Padded(rows, t)
                                }
                                TensorsOpt::Ragged => BatchOut::Ragged(
                                    tok.encode_ragged(&inputs, special, trunc)?
                                        .into_iter()
                                        .map(|[a, b, c]| {
                                            let shape = [1, a.len() as i64];
                                            Ok([int64(&a, &shape)?, int64(&b, &shape)?, int64(&c, &shape)?])
                                        })
                                        .collect::<anyhow::Result<_>>()?,
                                ),
                            })
                        },
                        batch_value,
                    )
                })
            })
        }

        /// The text of token ids (an array of ids or a 1-D integer tensor), joined as the
        /// tokenizer's decoder does.
        #[napi_derive::napi(skip_typescript)]
        pub fn decode(&self, ids: Arg, options: Option<Arg>) -> Outcome<String> {
            guard(|| {
                let env = ids.raw().env;
                let tok = self.get()?;
                let ids = super::ids(env, ids.raw().val, "ids")?;
                let o = DecodeBag::read(env, options.map(|o| o.raw().val), "options")?;
                tok.decode(&ids, o.skip_special_tokens.unwrap_or(false))
            })
            .into()
        }

        /// `decode` for several id lists (arrays, or 1-D tensors).
        #[napi_derive::napi(skip_typescript)]
        pub fn decode_batch(&self, ids: Arg, options: Option<Arg>) -> Outcome<Vec<String>> {
            guard(|| {
                let env = ids.raw().env;
                let tok = self.get()?;
                let lists =
                    crate::napi::convert::array_of(env, ids.raw().val, "id lists", "ids", |item, what| {
                        super::ids(env, item, what)
                    })?;
                let o = DecodeBag::read(env, options.map(|o| o.raw().val), "options")?;
                tok.decode_batch(&lists, o.skip_special_tokens.unwrap_or(false))
            })
            .into()
        }

        /// The id of `token`, or null when it is not in the vocabulary.
        #[napi_derive::napi(skip_typescript)]
        pub fn token_to_id(&self, token: Str) -> Outcome<Option<u32>> {
            guard(|| Ok(self.get()?.token_to_id(&token.read_exact("token")?))).into()
        }

        /// The token of `id`, or null when no token has it.
        #[napi_derive::napi(skip_typescript)]
        pub fn id_to_token(&self, id: Arg) -> Outcome<Option<String>> {
            guard(|| {
                let n = crate::napi::convert::number(id.raw().env, id.raw().val, "id")?;
                Ok(self.get()?.id_to_token(super::id(n, "id")?))
            })
            .into()
        }

        /// The vocabulary's size, added tokens included.
        #[napi_derive::napi(skip_typescript, getter)]
        pub fn vocab_size(&self) -> Outcome<u32> {
            guard(|| Ok(self.get()?.vocab_size() as u32)).into()
        }

        /// `model_max_length` from `tokenizer_config.json` (the longest input the model takes), or null.
        #[napi_derive::napi(skip_typescript, getter)]
        pub fn model_max_length(&self) -> Outcome<Option<u32>> {
            guard(|| Ok(self.get()?.model_max_length().map(|n| n as u32))).into()
        }

        /// The padding token (`tokenizer_config.json`'s `pad_token`, or `tokenizer.json`'s), or null.
        #[napi_derive::napi(skip_typescript, getter)]
        pub fn pad_token(&self) -> Outcome<Option<String>> {
            self.role("pad_token")
        }

        /// The beginning-of-sequence token, or null.
        #[napi_derive::napi(skip_typescript, getter)]
        pub fn bos_token(&self) -> Outcome<Option<String>> {
            self.role("bos_token")
        }

        /// The end-of-sequence token, or null.
        #[napi_derive::napi(skip_typescript, getter)]
        pub fn eos_token(&self) -> Outcome<Option<String>> {
            self.role("eos_token")
        }

        /// The unknown-word token, or null.
        #[napi_derive::napi(skip_typescript, getter)]
        pub fn unk_token(&self) -> Outcome<Option<String>> {
            self.role("unk_token")
        }

        /// Every special token by role (`bosToken`, `eosToken`, `unkToken`, `sepToken`,
        /// `padToken`, `clsToken`, `maskToken`; null where the tokenizer has none).
        #[napi_derive::napi(skip_typescript)]
        pub fn special_tokens(&self) -> Outcome<SpecialTokens> {
            guard(|| {
                let tok = self.get()?;
                let c = tok.config();
                let get = |r: &str| c.special(r).map(str::to_string);
                Ok(SpecialTokens {
                    bos_token: get("bos_token"),
                    eos_token: get("eos_token"),
                    unk_token: get("unk_token"),
                    sep_token: get("sep_token"),
                    pad_token: get("pad_token"),
                    cls_token: get("cls_token"),
                    mask_token: get("mask_token"),
                })
            })
            .into()
        }

        /// The chat template (`tokenizer_config.json`'s `chat_template` or
        /// `chat_template.jinja`), or null.
        #[napi_derive::napi(skip_typescript, getter)]
        pub fn chat_template(&self) -> Outcome<Option<String>> {
            guard(|| Ok(self.get()?.config().chat_template.clone())).into()
        }

        /// Renders a conversation (`[{role, content}, ...]`) with the model's chat template, as
        /// transformers' `apply_chat_template(messages, tokenize=False)`: same text. The
        /// template sees `messages`, `tools`, `documents`, `add_generation_prompt`, the special
        /// tokens by role (`bos_token`, ...) and `options.variables`. A template that raises
        /// (`raise_exception`) or fails is `InvalidArg` with its message.
        #[napi_derive::napi(skip_typescript)]
        pub fn apply_chat_template(&self, messages: Arg, options: Option<Arg>) -> Outcome<Rendered> {
            guard(|| {
                let env = messages.raw().env;
                let tok = self.get()?;
                let o = ChatBag::read(env, options.map(|o| o.raw().val), "options")?;
                if !js::is_array(env, messages.raw().val)? {
                    bail_code!(
                        Code::InvalidArg,
                        "messages: expected an array of messages ({{role, content}}), got {}",
                        js::describe(env, messages.raw().val)
                    );
                }
                let messages = match json(env, messages.raw().val, "messages", 0)? {
                    Json::Array(list) => list,
                    _ => unreachable!("an array reads as a JSON array"),
                };
                if let Some(i) = messages.iter().position(|m| !m.is_object()) {
                    bail_code!(
                        Code::InvalidArg,
                        "messages[{i}]: expected an object ({{role, content}})"
                    );
                }
                let template = match (o.chat_template, &tok.config().chat_template) {
                    (Some(t), _) => t.0,
                    (None, Some(t)) => t.clone(),
                    (None, None) => bail_code!(
                        Code::InvalidArg,
                        "applyChatTemplate: this tokenizer has no chat template (tokenizer_config.json's \
                         chat_template or chat_template.jinja); pass options.chatTemplate"
                    ),
                };
                let read = |v: Option<Val>, what: &str| v.map(|v| json(env, v, what, 0)).transpose();
                let mut variables: Vec<(String, Json)> = tok
                    .config()
                    .special
                    .iter()
                    .map(|(role, t)| (role.to_string(), Json::String(t.clone())))
                    .collect();
                match read(o.variables, "options.variables")? {
                    None => {}
                    Some(Json::Object(extra)) => variables.extend(extra),
                    Some(_) => bail_code!(Code::InvalidArg, "options.variables: expected an object"),
                }
                let rendered = chat_template::render(ChatInput {
                    template: &template,
                    messages,
                    tools: read(o.tools, "options.tools")?,
                    documents: read(o.documents, "options.documents")?,
                    add_generation_prompt: o.add_generation_prompt.unwrap_or(false),
                    variables,
                })?;
                Ok(Rendered(rendered))
            })
            .into()
        }

        /// Frees the tokenizer now (otherwise the garbage collector does); later calls are `Disposed`.
        #[napi_derive::napi(skip_typescript)]
        pub fn dispose(&self) {
            self.slot.dispose();
        }

        /// Whether `dispose()` was called.
        #[napi_derive::napi(skip_typescript, getter)]
        pub fn is_disposed(&self) -> bool {
            self.slot.is_disposed()
        }
    }

    impl JsTokenizer {
        fn role(&self, role: &str) -> Outcome<Option<String>> {
            guard(|| Ok(self.get()?.config().special(role).map(str::to_string))).into()
        }
    }
}

/// Reading a path or a token from a `Str` argument, exactly.
trait StrExt {
    fn read_path(&self) -> anyhow::Result<String>;
    fn read_exact(&self, what: &str) -> anyhow::Result<String>;
}

impl StrExt for crate::napi::convert::Str {
    fn read_path(&self) -> anyhow::Result<String> {
        let Raw { env, val } = self.raw();
        if js::type_of(env, val)? != Js::napi_string {
            bail_code!(
                Code::InvalidArg,
                "path: expected the path of a tokenizer.json file (or its folder), got {}",
                js::describe(env, val)
            );
        }
        js::string_exact(env, val, "path")
    }

    fn read_exact(&self, what: &str) -> anyhow::Result<String> {
        let Raw { env, val } = self.raw();
        text(env, val, what)
    }
}
