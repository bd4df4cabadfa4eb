//! A causal LM folder (`manifest.json` kind "causal-lm", `model.pt2`, tokenizer files,
//! `generation_config.json`), its sequences and the choice of each next token.
//!
//! The program (see `python/export_causal_lm.py`) is one decoder step:
//! `logits [B, V] = step(input_ids [B, T], positions [B, T], past.i.key/value [B, Hkv, C, D]...)`;
//! it writes the step's keys and values into the cache tensors in place, so the cache is
//! allocated once (by `super::batch`, shared by the sequences that run together) and never
//! copied per token: a decode step costs the same at position 20 as at 1,000 but for the
//! attention's reading of the cache.
use super::sample::{self, Params, Rng};
use super::stream::{Detokenizer, Stops};
use crate::aot::{self, AotModule};
use crate::error::{bail_code, fail, Code};
use crate::text::chat_template::{self, ChatInput};
use crate::text::tokenizer::Tokenizer;
use anyhow::{Context, Result};
use serde_json::{Map, Value as Json};
use std::path::Path;
use tch::{Device, Kind, Tensor};

/// What `manifest.json` says the program needs.
#[derive(Clone, Debug)]
pub struct Manifest {
    pub layers: usize,
    pub kv_heads: i64,
    pub head_dim: i64,
    pub max_context: usize,
    /// The most rows one program call takes (`--max-batch` at export).
    pub max_batch: usize,
    pub eos: Vec<u32>,
    pub dtype: Kind,
    pub dtype_name: String,
    /// Constants the program never reads (original FQNs, proven at export): their memory is
    /// given back after the load (`aot_pages::release_unread_constants`).
    pub unused_constants: Vec<String>,
}

impl Manifest {
    pub fn parse(json: &[u8]) -> Result<Manifest> {
        let m: Json = serde_json::from_slice(json).context("manifest.json is not JSON")?;
        if m["kind"] != "causal-lm" {
            bail_code!(
                Code::ModelLoadError,
                "manifest.json: kind is {}, expected \"causal-lm\"",
                m["kind"]
            );
        }
        let int = |k: &str| {
            m[k].as_u64()
                .ok_or_else(|| fail(Code::ModelLoadError, format!("manifest.json: '{k}' is missing")))
        };
        let dtype_name = m["dtype"].as_str().unwrap_or("float32").to_string();
        let dtype = crate::dtype::parse(&dtype_name).map_err(|_| {
            fail(
                Code::ModelLoadError,
                format!("manifest.json: unknown dtype '{dtype_name}'"),
            )
        })?;
        let eos = m["eos_token_ids"].as_array().into_iter().flatten();
        let unused = m["unused_constants"].as_array().into_iter().flatten();
        Ok(Manifest {
            layers: int("layers")? as usize,
            kv_heads: int("kv_heads")? as i64,
            head_dim: int("head_dim")? as i64,
            max_context: int("max_context")? as usize,
            max_batch: m["max_batch"].as_u64().unwrap_or(1).max(1) as usize,
            eos: eos.filter_map(Json::as_u64).map(|i| i as u32).collect(),
            dtype,
            dtype_name,
            unused_constants: unused.filter_map(Json::as_str).map(str::to_string).collect(),
        })
    }
}

/// Per-request settings: sampling, limits, stop strings.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub params: Params,
    pub max_new_tokens: usize,
    pub stop: Vec<String>,
}

/// The options `generate`/`complete` accept, as JS names them (signal and timeoutMs stay in
/// JS); the defaults come from `generation_config.json`.
const OPTIONS: &[&str] = &[
    "maxNewTokens",
    "temperature",
    "topK",
    "topP",
    "minP",
    "repetitionPenalty",
    "seed",
    "stop",
];

impl Request {
    /// transformers' defaults where `generation_config.json` says nothing: sampling only when
    /// `do_sample` is true, 20 new tokens... except `max_new_tokens`, 256 here.
    pub fn defaults(generation_config: &Json) -> Request {
        let g = generation_config;
        let num = |k: &str, d: f64| g[k].as_f64().unwrap_or(d);
        let sampling = g["do_sample"].as_bool().unwrap_or(false);
        Request {
            params: Params {
                temperature: if sampling { num("temperature", 1.0) } else { 0.0 },
                top_k: if sampling {
                    g["top_k"].as_u64().unwrap_or(50) as usize
                } else {
                    0
                },
                top_p: if sampling { num("top_p", 1.0) } else { 1.0 },
                min_p: if sampling { num("min_p", 0.0) } else { 0.0 },
                repetition_penalty: num("repetition_penalty", 1.0),
                seed: 0,
            },
            max_new_tokens: g["max_new_tokens"].as_u64().unwrap_or(256) as usize,
            stop: Vec::new(),
        }
    }

    /// These defaults overridden by a JSON options object; unknown keys and bad values are
    /// `InvalidArg`.
    pub fn with_options(&self, options: &Map<String, Json>) -> Result<Request> {
        let mut r = self.clone();
        for (key, v) in options {
            if v.is_null() {
                continue;
            }
            let what = format!("options.{key}");
            let number = || {
                v.as_f64()
                    .ok_or_else(|| fail(Code::InvalidArg, format!("{what}: expected a number, got {v}")))
            };
            let count = |min: u64| {
                v.as_u64().filter(|&n| n >= min).ok_or_else(|| {
                    fail(
                        Code::InvalidArg,
                        format!("{what}: expected a whole number ≥ {min}, got {v}"),
                    )
                })
            };
            match key.as_str() {
                "maxNewTokens" => r.max_new_tokens = count(1)? as usize,
                "temperature" => r.params.temperature = number()?,
                "topK" => r.params.top_k = count(0)? as usize,
                "topP" => r.params.top_p = number()?,
                "minP" => r.params.min_p = number()?,
                "repetitionPenalty" => r.params.repetition_penalty = number()?,
                "seed" => r.params.seed = count(0)?,
                "stop" => r.stop = stop_strings(v, &what)?,
                _ => bail_code!(
                    Code::InvalidArg,
                    "unknown option '{key}'; accepted: {}, signal, timeoutMs",
                    OPTIONS.join(", ")
                ),
            }
        }
        r.params.check()?;
        Ok(r)
    }
}

fn stop_strings(v: &Json, what: &str) -> Result<Vec<String>> {
    let list = match v {
        Json::String(s) => vec![s.clone()],
        Json::Array(a) if a.iter().all(Json::is_string) => {
            a.iter().filter_map(Json::as_str).map(str::to_string).collect()
        }
        _ => bail_code!(
            Code::InvalidArg,
            "{what}: expected a string or an array of strings, got {v}"
        ),
    };
    if list.iter().any(String::is_empty) {
        bail_code!(Code::InvalidArg, "{what}: a stop string may not be empty");
    }
    Ok(list)
}

/// What to continue: text, a conversation for the chat template, or token ids.
pub enum Prompt {
    Text(String),
    Messages(Vec<Json>),
    Ids(Vec<u32>),
}

pub struct Model {
    program: AotModule,
    pub tokenizer: Tokenizer,
    pub manifest: Manifest,
    pub defaults: Request,
    /// The longest sequence (prompt + output) this instance serves.
    pub max_context: usize,
    /// The most sequences that share a step.
    pub max_sequences: usize,
}

/// Load options (`dtype` must be the exported one: the program is compiled for it).
pub struct LoadOptions {
    pub dtype: Option<String>,
    pub max_context: Option<usize>,
    pub max_sequences: Option<usize>,
}

pub fn load(folder: &str, options: LoadOptions) -> Result<Model> {
    let dir = Path::new(folder);
    let read = |name: &str| {
        std::fs::read(dir.join(name)).map_err(|e| {
            fail(
                Code::ModelLoadError,
                format!("cannot read '{}': {e}", dir.join(name).display()),
            )
        })
    };
    let manifest = Manifest::parse(&read("manifest.json")?)?;
    if let Some(d) = options.dtype.filter(|d| *d != manifest.dtype_name) {
        bail_code!(
            Code::InvalidArg,
            "options.dtype: this folder was exported as {}, not {d} (export again with --dtype {d})",
            manifest.dtype_name
        );
    }
    let max_context = within(
        options.max_context,
        "maxContext",
        (2, manifest.max_context, "the exported limit"),
        manifest.max_context,
    )?;
    let max_sequences = within(
        options.max_sequences,
        "maxSequences",
        (1, manifest.max_batch, "the exported --max-batch"),
        manifest.max_batch.min(4),
    )?;
    let generation: Json = read("generation_config.json")
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Json::Null);
    let mut defaults = Request::defaults(&generation);
    defaults.max_new_tokens = defaults.max_new_tokens.min(max_context);
    let tokenizer = Tokenizer::from_file(dir)?;
    let program = aot::load(&dir.join("model.pt2").to_string_lossy(), Device::Cpu)?;
    // An optimization only: where the loader cannot list its constants, they all stay.
    let _ = program.release_unread_constants(&manifest.unused_constants);
    Ok(Model {
        program,
        tokenizer,
        manifest,
        defaults,
        max_context,
        max_sequences,
    })
}

/// A load option: `value` within `lo..=hi` (what `hi` is, for the message), `default` when absent.
fn within(
    value: Option<usize>,
    name: &str,
    (lo, hi, what): (usize, usize, &str),
    default: usize,
) -> Result<usize> {
    match value {
        Some(n) if !(lo..=hi).contains(&n) => {
            bail_code!(
                Code::InvalidArg,
                "options.{name}: expected {lo} to {hi} ({what}), got {n}"
            )
        }
        Some(n) => Ok(n),
        None => Ok(default),
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

/// One sequence being generated: its tokens, sampling and text state (its cache is a row of
/// the `Batch` it runs in).
pub struct Sequence {
    request: Request,
    /// Prompt and output.
    pub(super) tokens: Vec<u32>,
    pub prompt_tokens: usize,
    /// The logits of the next token.
    logits: Vec<f32>,
    rng: Rng,
    detok: Detokenizer,
    stops: Stops,
    pub finish: Option<Finish>,
    /// A stop string ended it (nothing held back is left to emit).
    matched: bool,
    /// Tokens chosen since the last piece whose text is not complete yet.
    held: Vec<u32>,
}

/// Text and the tokens that made it since the last piece.
#[derive(Debug, Default, PartialEq)]
pub struct Piece {
    pub text: String,
    pub tokens: Vec<u32>,
}

impl Model {
    pub fn prompt_ids(&self, prompt: Prompt) -> Result<Vec<u32>> {
        let text = match prompt {
            Prompt::Ids(ids) => return Ok(ids),
            Prompt::Text(t) => return Ok(self.tokenizer.encode((t, None), true, None)?.ids),
            Prompt::Messages(messages) => {
                let Some(template) = self.tokenizer.config().chat_template.as_deref() else {
                    bail_code!(
                        Code::InvalidArg,
                        "this model has no chat template: pass a string prompt"
                    );
                };
                let variables = self.tokenizer.config().special.iter();
                chat_template::render(ChatInput {
                    template,
                    messages,
                    tools: None,
                    documents: None,
                    add_generation_prompt: true,
                    variables: variables
                        .map(|(r, t)| (r.to_string(), Json::String(t.clone())))
                        .collect(),
                })?
            }
        };
        // As transformers' apply_chat_template(tokenize=True): the template wrote the specials.
        Ok(self.tokenizer.encode((text, None), false, None)?.ids)
    }

    /// A new sequence for `prompt` (checked against the vocabulary and `max_context`); its
    /// prompt runs when a `Batch` admits it.
    pub fn sequence(&self, prompt: Vec<u32>, request: Request) -> Result<Sequence> {
        if prompt.is_empty() {
            bail_code!(Code::InvalidArg, "the prompt is empty (no tokens)");
        }
        let vocab = self.tokenizer.vocab_size();
        if let Some(bad) = prompt.iter().find(|&&t| t as usize >= vocab.max(1)) {
            bail_code!(
                Code::InvalidArg,
                "prompt: token id {bad} is out of the vocabulary ({vocab})"
            );
        }
        if prompt.len() >= self.max_context {
            bail_code!(
                Code::InvalidArg,
                "the prompt has {} tokens; this model serves at most {} in all",
                prompt.len(),
                self.max_context
            );
        }
        Ok(Sequence {
            rng: Rng::new(request.params.seed),
            stops: Stops::new(request.stop.clone()),
            request,
            prompt_tokens: prompt.len(),
            tokens: prompt,
            logits: Vec::new(),
            detok: Detokenizer::default(),
            finish: None,
            matched: false,
            held: Vec::new(),
        })
    }

    /// The cache slots `seq` needs in all: prompt and new tokens, within `max_context`.
    pub fn capacity(&self, seq: &Sequence) -> usize {
        (seq.prompt_tokens + seq.request.max_new_tokens)
            .min(self.max_context)
            .max(2)
    }

    /// One program call: `ids` and `positions` are `[rows, cols]` row-major, `cache` the
    /// `2·layers` cache tensors `[rows, Hkv, C, D]` (dense views: written in place). Returns
    /// each row's logits of its last token.
    pub(super) fn run(
        &self,
        ids: Vec<i64>,
        positions: Vec<i64>,
        rows: i64,
        cache: Vec<Tensor>,
    ) -> Result<Vec<Vec<f32>>> {
        let cols = ids.len() as i64 / rows.max(1);
        let mut inputs = vec![
            Tensor::from_slice(&ids).f_view([rows, cols])?,
            Tensor::from_slice(&positions).f_view([rows, cols])?,
        ];
        inputs.extend(cache);
        let out = self.program.run(inputs)?;
        let logits = out.first().context("the program returned no logits")?;
        let flat = Vec::<f32>::try_from(logits.f_to_kind(Kind::Float)?.f_view([-1])?)?;
        let vocab = flat.len() / rows.max(1) as usize;
        Ok(flat.chunks(vocab.max(1)).map(<[f32]>::to_vec).collect())
    }

    fn decode(&self, ids: &[u32]) -> Result<String> {
        self.tokenizer.decode(ids, true)
    }

    /// Chooses `seq`'s next token from its logits and adds the text it completes to `piece`.
    /// True when the sequence goes on (the token must then run through the program); at the end
    /// `seq.finish` is set and the text held back is flushed into `piece`.
    pub(super) fn choose(&self, seq: &mut Sequence, piece: &mut Piece) -> Result<bool> {
        let decode = |ids: &[u32]| self.decode(ids);
        let token = sample::choose(&mut seq.logits, &seq.tokens, &seq.request.params, &mut seq.rng);
        seq.tokens.push(token);
        piece.tokens.push(token);
        let generated = seq.tokens.len() - seq.prompt_tokens;
        if self.manifest.eos.contains(&token) {
            seq.finish = Some(Finish::Stop);
        } else {
            let (text, stopped) = seq.stops.push(&seq.detok.push(token, &decode)?);
            piece.text.push_str(&text);
            if stopped {
                seq.finish = Some(Finish::Stop);
                seq.matched = true;
            } else if generated >= seq.request.max_new_tokens || seq.tokens.len() >= self.max_context {
                seq.finish = Some(Finish::Length);
            }
        }
        if seq.finish.is_none() {
            return Ok(true);
        }
        if !seq.matched {
            let rest = seq.detok.flush(&decode)?;
            let (text, stopped) = seq.stops.push(&rest);
            piece.text.push_str(&text);
            if !stopped {
                piece.text.push_str(&seq.stops.flush());
            }
        }
        Ok(false)
    }
}

impl Sequence {
    /// The tokens generated so far.
    pub fn output(&self) -> &[u32] {
        &self.tokens[self.prompt_tokens..]
    }

    pub(super) fn set_logits(&mut self, logits: Vec<f32>) {
        self.logits = logits;
    }

    /// Keeps tokens that made no text yet for the next piece.
    pub(super) fn hold(&mut self, tokens: Vec<u32>) {
        self.held.extend(tokens);
    }

    /// `piece` with the held tokens before its own.
    pub(super) fn with_held(&mut self, mut piece: Piece) -> Piece {
        if !self.held.is_empty() {
            self.held.append(&mut piece.tokens);
            piece.tokens = std::mem::take(&mut self.held);
        }
        piece
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::batch::Batch;

    fn options(json: &str) -> Map<String, Json> {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn defaults_come_from_generation_config() {
        let g: Json = serde_json::from_str(
            r#"{"do_sample": true, "temperature": 0.7, "top_p": 0.9, "max_new_tokens": 40}"#,
        )
        .unwrap();
        let r = Request::defaults(&g);
        assert_eq!(
            (
                r.params.temperature,
                r.params.top_k,
                r.params.top_p,
                r.max_new_tokens
            ),
            (0.7, 50, 0.9, 40)
        );
        let greedy = Request::defaults(&Json::Null);
        assert!(greedy.params.greedy());
        let r = greedy
            .with_options(&options(
                r#"{"temperature": 1, "topK": 5, "stop": "x", "seed": 3}"#,
            ))
            .unwrap();
        assert_eq!(
            (r.params.top_k, r.params.seed, r.stop.clone()),
            (5, 3, vec!["x".to_string()])
        );
    }

    #[test]
    fn bad_options_are_invalid_args() {
        let d = Request::defaults(&Json::Null);
        for (json, says) in [
            (r#"{"temprature": 1}"#, "unknown option 'temprature'"),
            (r#"{"maxNewTokens": 0}"#, "options.maxNewTokens"),
            (r#"{"maxNewTokens": 1.5}"#, "options.maxNewTokens"),
            (r#"{"topK": -1}"#, "options.topK"),
            (r#"{"topP": 0}"#, "options.topP"),
            (r#"{"temperature": "hot"}"#, "options.temperature"),
            (r#"{"stop": [1]}"#, "options.stop"),
            (r#"{"stop": [""]}"#, "options.stop"),
        ] {
            let e = d.with_options(&options(json)).unwrap_err();
            let (code, message) = crate::error::describe(&e);
            assert_eq!(code, Code::InvalidArg, "{json}");
            assert!(message.contains(says), "{json}: {message}");
        }
    }

    /// Greedy parity with transformers' generate on the goldens of models/make_lm_models.py
    /// (skipped when they were not generated): the same ids, or a split where Python's top-2
    /// logits were within 1e-4.
    #[test]
    fn greedy_matches_transformers_goldens() {
        let root = format!("{}/models/golden/lm", crate::REPO_ROOT);
        for name in [
            "llama-tiny",
            "gpt2-tiny",
            "qwen2-tiny",
            "qwen3-tiny",
            "mistral-tiny",
        ] {
            let Ok(golden) = std::fs::read(format!("{root}/{name}.golden.json")) else {
                eprintln!("skipped: {root}/{name}.golden.json (npm run models)");
                continue;
            };
            let golden: Json = serde_json::from_slice(&golden).unwrap();
            let model = load(
                &format!("{root}/{name}"),
                LoadOptions {
                    dtype: None,
                    max_context: None,
                    max_sequences: None,
                },
            )
            .unwrap();
            let (mut prompts, mut wants) = (Vec::new(), Vec::new());
            for case in golden["cases"].as_array().unwrap() {
                let ids = |k: &str| -> Vec<u32> {
                    case[k]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|v| v.as_u64().unwrap() as u32)
                        .collect()
                };
                let prompt = match (case["prompt"].as_str(), case["messages"].as_array()) {
                    (Some(t), _) => Prompt::Text(t.to_string()),
                    (_, Some(m)) => Prompt::Messages(m.clone()),
                    _ => unreachable!(),
                };
                let prompt = model.prompt_ids(prompt).unwrap();
                assert_eq!(prompt, ids("input_ids"), "{name} {}: prompt ids", case["name"]);
                prompts.push(prompt);
                wants.push((case, ids("output_ids")));
            }
            // Each case alone, then all of them sharing steps (joining one step apart, three rows: the
            // fourth takes the row the first leaves, with its stale keys past its positions).
            let alone: Vec<_> = prompts
                .iter()
                .map(|p| generate(&model, vec![p.clone()], 1, 0).remove(0))
                .collect();
            let together = generate(&model, prompts.clone(), 3, 1);
            for (((case, want), (got, text)), (got_b, text_b)) in wants.iter().zip(&alone).zip(&together) {
                let label = format!("{name} {}", case["name"]);
                check_golden(&label, case, want, got, text);
                check_golden(&format!("{label} (batched)"), case, want, got_b, text_b);
            }
        }
    }

    /// Greedy, 64 new tokens for each prompt; `limit` sequences at once, the k-th prompt
    /// joining after `stagger * k` steps. Each prompt's output ids and streamed text.
    fn generate(
        model: &Model,
        prompts: Vec<Vec<u32>>,
        limit: usize,
        stagger: usize,
    ) -> Vec<(Vec<u32>, String)> {
        let mut batch: Batch<usize> = Batch::new(limit);
        let mut out = vec![(Vec::new(), String::new()); prompts.len()];
        let mut waiting: std::collections::VecDeque<_> = prompts.into_iter().enumerate().collect();
        let mut steps = 0;
        while !waiting.is_empty() || !batch.is_empty() {
            if !batch.is_full() && steps >= stagger * (out.len() - waiting.len()) {
                if let Some((k, prompt)) = waiting.pop_front() {
                    let request = Request {
                        max_new_tokens: 64,
                        ..Request::defaults(&Json::Null)
                    };
                    let seq = model.sequence(prompt, request).unwrap();
                    batch.admit(model, k, seq).unwrap();
                }
            }
            for event in batch.step(model) {
                assert!(event.error.is_none());
                out[event.tag].0.extend(&event.piece.tokens);
                out[event.tag].1.push_str(&event.piece.text);
            }
            steps += 1;
        }
        out
    }

    /// The same ids as Python's generate, or a split where Python's top-2 logits were within 1e-4.
    fn check_golden(label: &str, case: &Json, want: &[u32], got: &[u32], text: &str) {
        match want.iter().zip(got).position(|(a, b)| a != b) {
            None => {
                assert_eq!(want.len(), got.len(), "{label}");
                assert_eq!(text, case["text_out"].as_str().unwrap(), "{label}: text");
            }
            Some(at) => {
                let gap = case["top2_gaps"][at].as_f64().unwrap();
                assert!(gap < 1e-4, "{label}: token {at} differs, top-2 gap {gap}");
            }
        }
    }
}
