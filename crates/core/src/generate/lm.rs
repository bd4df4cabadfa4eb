//! A causal LM folder (`manifest.json` kind "causal-lm", `model.pt2`, tokenizer files,
//! `generation_config.json`), its sequences and the choice of each next token.
//!
//! The program (see `python/export_causal_lm.py`) is one decoder step:
//! `logits [B, V] = step(input_ids [B, T], positions [B, T], past.i.key/value [B, Hkv, C, D]...)`;
//! it writes the step's keys and values into the cache tensors in place, so the cache is
//! allocated once (by `super::batch`, shared by the sequences that run together) and never
//! copied per token: a decode step costs the same at position 20 as at 1,000 but for the
//! attention's reading of the cache.
use super::constraint::Vocabulary;
use super::decoder::{CacheShape, Chat, Decoder, Prepared, Prompt};
use super::request::Defaults;
use super::vision::{Vision, VisionManifest};
use crate::aot::{self, AotModule};
use crate::cpu::CompiledFor;
use crate::error::{bail_code, fail, Code};
use crate::text::chat_template::{self, ChatInput, ToolsVariable};
use crate::text::tokenizer::Tokenizer;
use anyhow::{Context, Result};
use serde_json::Value as Json;
use std::path::Path;
use std::sync::{Arc, OnceLock};
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
    /// The logits' width (the config's `vocab_size`; 0 when the manifest does not say).
    pub vocab_size: usize,
    pub dtype: Kind,
    pub dtype_name: String,
    /// Constants the program never reads (original FQNs, proven at export): their memory is
    /// given back after the load (`aot_pages::release_unread_constants`).
    pub unused_constants: Vec<String>,
    /// What the compiled code needs of the CPU (None: a manifest from before it was recorded).
    pub compiled_for: Option<CompiledFor>,
    /// The weight-only quantization scheme (`int8`, `int4-g32`, `int4-g128`), if any.
    pub quantization: Option<String>,
    /// What the linear layers multiply through (`manifest.json`'s `kernels`, as JSON text; the
    /// empty object where the manifest predates it).
    pub kernels: String,
    /// A vision-language export's image side (`python/export_vlm.py`); None for a text LM.
    pub vision: Option<VisionManifest>,
    /// The most trailing positions' logits one call returns (format 2: the program's `keep`
    /// input, whose length says how many); 0 for a format 1 program (no `keep`: the last only).
    pub keep_logits: usize,
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
            vocab_size: m["vocab_size"].as_u64().unwrap_or(0) as usize,
            dtype,
            dtype_name,
            unused_constants: unused.filter_map(Json::as_str).map(str::to_string).collect(),
            compiled_for: CompiledFor::from_manifest(&m),
            quantization: m["quantization"]["scheme"].as_str().map(str::to_string),
            kernels: m.get("kernels").map_or_else(|| "{}".to_string(), Json::to_string),
            vision: VisionManifest::parse(&m["vision"])?,
            keep_logits: m["keep_logits"].as_u64().unwrap_or(0) as usize,
        })
    }
}

pub struct Model {
    program: AotModule,
    /// The vision tower and projector (a vision-language export).
    vision: Option<Vision>,
    pub tokenizer: Tokenizer,
    pub manifest: Manifest,
    pub defaults: Defaults,
    /// The longest sequence (prompt + output) this instance serves.
    pub max_context: usize,
    /// The most sequences that share a step.
    pub max_sequences: usize,
    /// The vocabulary output constraints compile against: built by the first request with a
    /// `responseFormat` (0.4-0.6 s for 49,152 tokens), then shared.
    vocabulary: OnceLock<Result<Arc<Vocabulary>, (Code, String)>>,
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
    if let Some(compiled_for) = &manifest.compiled_for {
        let program = dir.join("model.pt2");
        compiled_for.check(&program.display().to_string(), crate::cpu::flags())?;
    }
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
    let mut defaults = Defaults::from_config(&generation);
    defaults.max_new_tokens = defaults.max_new_tokens.min(max_context);
    let tokenizer = Tokenizer::from_file(dir)?;
    let program = aot::load(&dir.join("model.pt2").to_string_lossy(), Device::Cpu)?;
    // An optimization only: where the loader cannot list its constants, they all stay.
    let _ = program.release_unread_constants(&manifest.unused_constants);
    let vision = match &manifest.vision {
        Some(v) => Some(Vision::load(dir, v.clone())?),
        None => None,
    };
    Ok(Model {
        program,
        vision,
        tokenizer,
        manifest,
        defaults,
        max_context,
        max_sequences,
        vocabulary: OnceLock::new(),
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

impl Model {
    /// The prompt's token ids (an image prompt's before its image tokens are expanded). A chat
    /// with tools hands them to the template where it reads them (`tools`, or SmolLM3's
    /// `xml_tools`: the functions alone); a template that reads no tools refuses them
    /// (`InvalidArg`: `torch-node serve` writes such a chat in the generic tool format instead).
    pub fn prompt_ids(&self, prompt: Prompt) -> Result<Vec<u32>> {
        let text = match prompt {
            Prompt::Ids(ids) => return Ok(ids),
            Prompt::Text(t) => return Ok(self.tokenizer.encode((t, None), true, None)?.ids),
            Prompt::Messages(chat) | Prompt::Multimodal(chat, _) => self.render_chat(chat)?,
        };
        // As transformers' apply_chat_template(tokenize=True): the template wrote the specials.
        Ok(self.tokenizer.encode((text, None), false, None)?.ids)
    }

    /// The chat rendered by the model's chat template (with its tools where the template reads
    /// them), as transformers' `apply_chat_template(add_generation_prompt=True)`.
    fn render_chat(&self, chat: Chat) -> Result<String> {
        let Some(template) = self.tokenizer.config().chat_template.as_deref() else {
            bail_code!(
                Code::InvalidArg,
                "this model has no chat template: pass a string prompt"
            );
        };
        let specials = self.tokenizer.config().special.iter();
        let mut variables: Vec<(String, Json)> = specials
            .map(|(r, t)| (r.to_string(), Json::String(t.clone())))
            .collect();
        let tools = match (chat.tools, chat_template::tools_variable(template)) {
            (None, _) => None,
            (Some(tools), Some(ToolsVariable::Tools)) => Some(Json::Array(tools)),
            (Some(tools), Some(ToolsVariable::XmlTools)) => {
                // transformers: apply_chat_template(xml_tools=[t["function"] for t in tools])
                let functions = tools.into_iter().map(|mut t| t["function"].take());
                variables.push(("xml_tools".into(), Json::Array(functions.collect())));
                None
            }
            (Some(_), None) => bail_code!(
                Code::InvalidArg,
                "options.tools: this model's chat template does not render tools (torch-node \
                 serve describes them in the generic tool format instead)"
            ),
        };
        chat_template::render(ChatInput {
            template,
            messages: chat_template::content_as_read(template, chat.messages),
            tools,
            documents: None,
            add_generation_prompt: true,
            variables,
        })
    }
}

impl Model {
    /// A chat with images: rendered and tokenized here, expanded and embedded by the vision side.
    fn prepare_images(&self, chat: Chat, pixels: Vec<Tensor>) -> Result<Prepared> {
        let Some(vision) = &self.vision else {
            bail_code!(
                Code::InvalidArg,
                "this model takes no images: its folder has no vision program (export a LLaVA or \
                 Gemma 3 checkpoint with python/export_vlm.py)"
            );
        };
        // As transformers' processors: the image tokens expanded in the text, then tokenized.
        let text = vision.manifest.expand_text(&self.render_chat(chat)?);
        let ids = self.tokenizer.encode((text, None), false, None)?.ids;
        vision.prepare(ids, pixels)
    }

    /// The program call: each row's last `keep` tokens' logits (rows × keep, row by row); a
    /// vision-language program also takes `images` (`[rows, cols, hidden]` embeddings and a
    /// `[rows, cols]` mask: zeros and false for text-only steps), an M-RoPE one the rotary
    /// positions (`Extra::rope`, else each row's positions plus its `Extra::offsets`).
    fn call(
        &self,
        ids: &[i64],
        positions: &[i64],
        (rows, keep): (usize, usize),
        cache: Vec<Tensor>,
        extra: Extra<'_>,
    ) -> Result<Vec<Vec<f32>>> {
        let images = extra.images;
        let rows = rows.max(1) as i64;
        let cols = ids.len() as i64 / rows;
        if keep < 1 || keep > self.keep_logits() || keep as i64 > cols {
            bail_code!(
                Code::Internal,
                "logits of {keep} positions asked of {cols} (the program keeps at most {})",
                self.keep_logits()
            );
        }
        // The program writes each token's key and value into the cache at its position: a
        // position outside the cache's slots is refused here, before any write.
        let slots = cache.first().map_or(0, |t| t.size().get(2).copied().unwrap_or(0));
        if let Some(p) = positions.iter().find(|&&p| p < 0 || p >= slots) {
            bail_code!(
                Code::Internal,
                "position {p} is outside the KV cache's {slots} slots"
            );
        }
        let mut inputs = vec![
            Tensor::f_from_slice(ids)?.f_view([rows, cols])?,
            Tensor::f_from_slice(positions)?.f_view([rows, cols])?,
        ];
        if self.manifest.keep_logits > 0 {
            // Format 2: its length is how many trailing positions' logits come back.
            inputs.push(Tensor::f_zeros([keep as i64], (Kind::Int64, Device::Cpu))?);
        }
        if let Some(v) = &self.manifest.vision {
            match images {
                Some((embeds, mask)) => {
                    inputs.push(embeds.f_reshape([rows, cols, v.hidden])?);
                    inputs.push(mask.f_reshape([rows, cols])?);
                }
                None => {
                    inputs.push(Tensor::f_zeros(
                        [rows, cols, v.hidden],
                        (Kind::Float, Device::Cpu),
                    )?);
                    inputs.push(Tensor::f_zeros([rows, cols], (Kind::Bool, Device::Cpu))?);
                }
            }
            if v.mrope.is_some() {
                inputs.push(super::vision::mrope::rope_input(
                    positions,
                    (rows, cols),
                    extra.rope,
                    extra.offsets,
                )?);
            }
        }
        inputs.extend(cache);
        let out = self.program.run(inputs)?;
        let logits = out.first().context("the program returned no logits")?;
        let flat = Vec::<f32>::try_from(logits.f_to_kind(Kind::Float)?.f_view([-1])?)?;
        let vocab = flat.len() / (rows as usize * keep);
        Ok(flat.chunks(vocab.max(1)).map(<[f32]>::to_vec).collect())
    }
}

impl Decoder for Model {
    fn cache_shape(&self) -> CacheShape {
        let m = &self.manifest;
        CacheShape {
            layers: m.layers,
            kv_heads: m.kv_heads,
            head_dim: m.head_dim,
            dtype: m.dtype,
        }
    }

    fn max_context(&self) -> usize {
        self.max_context
    }

    fn vocab_size(&self) -> usize {
        self.tokenizer.vocab_size()
    }

    fn tokenize(&self, prompt: Prompt) -> Result<Vec<u32>> {
        self.prompt_ids(prompt)
    }

    fn is_eos(&self, token: u32) -> bool {
        self.manifest.eos.contains(&token)
    }

    fn decode(&self, ids: &[u32]) -> Result<String> {
        self.tokenizer.decode(ids, true)
    }

    fn token_bytes(&self, token: u32) -> Vec<u8> {
        match self.vocabulary() {
            Ok(v) => v.token_bytes(token),
            Err(_) => {
                (self.tokenizer.decode(&[token], false)).map_or_else(|_| Vec::new(), String::into_bytes)
            }
        }
    }

    fn vocabulary(&self) -> Result<Arc<Vocabulary>> {
        let built = self.vocabulary.get_or_init(|| {
            let width = self.manifest.vocab_size.max(self.tokenizer.vocab_size());
            Vocabulary::from_tokenizer(self.tokenizer.hf(), &self.manifest.eos, width)
                .map(Arc::new)
                .map_err(|e| crate::error::describe(&e))
        });
        built.clone().map_err(|(code, message)| fail(code, message))
    }

    fn prepare(&self, prompt: Prompt) -> Result<Prepared> {
        let ids = match prompt {
            Prompt::Multimodal(chat, pixels) => return self.prepare_images(chat, pixels),
            prompt => self.prompt_ids(prompt)?,
        };
        // A text prompt holding the image token has no image to put there (transformers
        // refuses it too).
        if let Some(v) = &self.manifest.vision {
            if ids.contains(&v.image_token_id) {
                bail_code!(
                    Code::InvalidArg,
                    "the prompt holds the image token (id {}) but no image: pass images as {{type: 'image'}} \
                     parts of a message's content",
                    v.image_token_id
                );
            }
        }
        Ok(Prepared { ids, images: None })
    }

    fn run_images(
        &self,
        ids: &[i64],
        positions: &[i64],
        cache: Vec<Tensor>,
        (embeds, mask, rope): (&Tensor, &Tensor, Option<&Tensor>),
    ) -> Result<Vec<Vec<f32>>> {
        if self.manifest.vision.is_none() {
            bail_code!(Code::Internal, "this model takes no image embeddings");
        }
        let extra = Extra {
            images: Some((embeds, mask)),
            rope,
            offsets: &[],
        };
        self.call(ids, positions, (1, 1), cache, extra)
    }

    fn run(&self, ids: &[i64], positions: &[i64], rows: usize, cache: Vec<Tensor>) -> Result<Vec<Vec<f32>>> {
        self.call(ids, positions, (rows, 1), cache, Extra::default())
    }

    fn run_offset(
        &self,
        ids: &[i64],
        positions: &[i64],
        (rows, keep): (usize, usize),
        offsets: &[i64],
        cache: Vec<Tensor>,
    ) -> Result<Vec<Vec<f32>>> {
        let mrope = self.manifest.vision.as_ref().is_some_and(|v| v.mrope.is_some());
        if !mrope && offsets.iter().any(|&o| o != 0) {
            bail_code!(Code::Internal, "this model takes no rotary position offsets");
        }
        let extra = Extra {
            offsets,
            ..Extra::default()
        };
        self.call(ids, positions, (rows, keep), cache, extra)
    }

    fn keep_logits(&self) -> usize {
        self.manifest.keep_logits.max(1)
    }

    fn run_keep(
        &self,
        ids: &[i64],
        positions: &[i64],
        rows: usize,
        keep: usize,
        cache: Vec<Tensor>,
    ) -> Result<Vec<Vec<f32>>> {
        self.call(ids, positions, (rows, keep), cache, Extra::default())
    }
}

/// A program call's inputs beyond ids, positions and cache (see `Model::call`).
#[derive(Default)]
struct Extra<'a> {
    images: Option<(&'a Tensor, &'a Tensor)>,
    rope: Option<&'a Tensor>,
    offsets: &'a [i64],
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::batch::Batch;
    use crate::generate::request::Options;
    use crate::generate::sequence::Sequence;

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
                    (_, Some(m)) => Prompt::Messages(Chat::new(m.clone())),
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
            // With drafts by prompt lookup (a format 2 export): the same goldens, alone and batched.
            if model.keep_logits() < 2 {
                eprintln!("{name}: speculation skipped (a format 1 export: npm run models)");
                continue;
            }
            let (mut proposed, mut accepted) = (0, 0);
            for (limit, stagger) in [(1, 0), (3, 1)] {
                let (outs, counts) = generate_speculative(&model, prompts.clone(), limit, stagger);
                proposed += counts.proposed;
                accepted += counts.accepted;
                for ((case, want), (got, text)) in wants.iter().zip(&outs) {
                    let label = format!("{name} {} (speculative, {limit} rows)", case["name"]);
                    check_golden(&label, case, want, got, text);
                }
            }
            assert!(proposed > 0, "{name}: nothing proposed");
            eprintln!("{name}: speculation accepted {accepted} of {proposed} drafted tokens");
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
        run_batch(model, Batch::new(limit), prompts, stagger).0
    }

    /// `generate` with drafts by prompt lookup (up to 5 tokens, trigrams down): the outputs and
    /// the batch's counts.
    fn generate_speculative(
        model: &Model,
        prompts: Vec<Vec<u32>>,
        limit: usize,
        stagger: usize,
    ) -> (Vec<(Vec<u32>, String)>, crate::generate::batch::Counts) {
        let spec = crate::generate::lookup::Speculation::new("prompt-lookup", None, None).unwrap();
        spec.check(model).unwrap();
        let batch = Batch::new(limit).with_speculation(Some(spec));
        run_batch(model, batch, prompts, stagger)
    }

    fn run_batch(
        model: &Model,
        mut batch: Batch<usize>,
        prompts: Vec<Vec<u32>>,
        stagger: usize,
    ) -> (Vec<(Vec<u32>, String)>, crate::generate::batch::Counts) {
        let mut out = vec![(Vec::new(), String::new()); prompts.len()];
        let mut waiting: std::collections::VecDeque<_> = prompts.into_iter().enumerate().collect();
        let mut steps = 0;
        while !waiting.is_empty() || !batch.is_empty() {
            if !batch.is_full() && steps >= stagger * (out.len() - waiting.len()) {
                if let Some((k, prompt)) = waiting.pop_front() {
                    let request = Defaults::from_config(&Json::Null)
                        .request(&Options {
                            max_new_tokens: Some(64),
                            ..Options::default()
                        })
                        .unwrap();
                    let seq = Sequence::new(model, prompt, request).unwrap();
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
        (out, batch.counts())
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

    /// The tiny random Llama of `npm run models`, loaded with the folder's defaults; None (the test
    /// skips, saying why) where the models were not made.
    fn llama_tiny() -> Option<Model> {
        let dir = format!("{}/models/golden/lm/llama-tiny", crate::REPO_ROOT);
        if !Path::new(&dir).join("manifest.json").exists() {
            eprintln!("skipped: {dir} (npm run models)");
            return None;
        }
        let options = LoadOptions {
            dtype: None,
            max_context: None,
            max_sequences: None,
        };
        Some(load(&dir, options).unwrap())
    }

    /// The tiny LLaVA of models/make_vlm_models.py against transformers' greedy generate: the
    /// expanded prompt ids, then the same new ids (or a split where Python's top-2 logits were
    /// within 1e-4), each case alone and all three sharing steps (the image prompts batched
    /// with the text-only one). Skipped when the fixture was not made.
    #[test]
    fn llava_greedy_matches_transformers_goldens() {
        let root = format!("{}/models/golden/vlm", crate::REPO_ROOT);
        let Ok(golden) = std::fs::read(format!("{root}/llava-tiny.golden.json")) else {
            eprintln!("skipped: {root}/llava-tiny.golden.json (models/make_vlm_models.py)");
            return;
        };
        let golden: Json = serde_json::from_slice(&golden).unwrap();
        let options = LoadOptions {
            dtype: None,
            max_context: None,
            max_sequences: None,
        };
        let model = load(&format!("{root}/llava-tiny"), options).unwrap();
        let cases = golden["cases"].as_array().unwrap();
        let ids_of = |v: &Json| -> Vec<u32> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap() as u32)
                .collect()
        };
        let sequence = |case: &Json| -> Sequence {
            let pixels: Vec<Tensor> = (case["pixel_values"].as_array().unwrap().iter())
                .map(|p| {
                    let flat: Vec<f32> = p
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|x| x.as_f64().unwrap() as f32)
                        .collect();
                    Tensor::from_slice(&flat).view([3, 32, 32])
                })
                .collect();
            let messages = case["messages"].as_array().unwrap().clone();
            let prepared = match pixels.is_empty() {
                true => model.prepare(Prompt::Messages(Chat::new(messages))).unwrap(),
                false => model
                    .prepare(Prompt::Multimodal(Chat::new(messages), pixels))
                    .unwrap(),
            };
            assert_eq!(
                prepared.ids,
                ids_of(&case["input_ids"]),
                "{}: prompt ids",
                case["name"]
            );
            let request = Defaults::from_config(&Json::Null)
                .request(&Options {
                    max_new_tokens: golden["new_tokens"].as_u64(),
                    ..Options::default()
                })
                .unwrap();
            Sequence::new(&model, prepared.ids, request)
                .unwrap()
                .with_images(prepared.images)
        };
        let run = |seqs: Vec<Sequence>, limit: usize| -> Vec<Vec<u32>> {
            let mut batch: Batch<usize> = Batch::new(limit).with_prefix_cache(1024);
            let mut out = vec![Vec::new(); seqs.len()];
            for (k, s) in seqs.into_iter().enumerate() {
                batch.admit(&model, k, s).unwrap();
            }
            while !batch.is_empty() {
                for event in batch.step(&model) {
                    assert!(event.error.is_none());
                    out[event.tag].extend(&event.piece.tokens);
                }
            }
            out
        };
        let alone: Vec<Vec<u32>> = cases
            .iter()
            .map(|c| run(vec![sequence(c)], 1).remove(0))
            .collect();
        let together = run(cases.iter().map(sequence).collect(), 3);
        for ((case, a), t) in cases.iter().zip(&alone).zip(&together) {
            for (label, got) in [("alone", a), ("batched", t)] {
                let want = ids_of(&case["output_ids"]);
                if let Some(at) = want.iter().zip(got).position(|(x, y)| x != y) {
                    let gap = case["top2_gaps"][at].as_f64().unwrap();
                    assert!(
                        gap < 1e-4,
                        "{} {label}: token {at} differs, top-2 gap {gap}",
                        case["name"]
                    );
                } else {
                    assert_eq!(&want, got, "{} {label}", case["name"]);
                }
            }
        }
        // The same images again hit the prefix cache (keyed by their pixels); other pixels do not.
        let mut batch: Batch<usize> = Batch::new(1).with_prefix_cache(1024);
        batch.admit(&model, 0, sequence(&cases[0])).unwrap();
        batch.clear();
        batch.admit(&model, 0, sequence(&cases[0])).unwrap();
        let reused = batch.prefix_cache().unwrap().stats().reused_tokens;
        assert!(
            reused >= 32,
            "the same image's blocks were not reused: {reused} tokens"
        );
        batch.clear();
        // The first case's chat with the second case's first image (the coffee).
        let mut other = cases[0].clone();
        other["pixel_values"] = Json::Array(vec![cases[1]["pixel_values"][0].clone()]);
        other["input_ids"] = cases[0]["input_ids"].clone();
        let seq = sequence(&other);
        batch.admit(&model, 0, seq).unwrap();
        let after = batch.prefix_cache().unwrap().stats().reused_tokens;
        // Only the text before the image may match: nothing of the image.
        let image = golden["image_token_id"].as_u64().unwrap() as u32;
        let before = ids_of(&cases[0]["input_ids"])
            .iter()
            .position(|&t| t == image)
            .unwrap() as u64;
        assert!(
            after - reused <= before,
            "another image's tokens reused the first one's keys"
        );
    }

    /// Images given to a text LM, a wrong pixel shape and an image-count mismatch: InvalidArg.
    #[test]
    fn bad_image_prompts_are_refused() {
        let messages =
            |content: Json| Chat::new(vec![serde_json::json!({"role": "user", "content": content})]);
        let image = || Tensor::zeros([3, 32, 32], (Kind::Float, Device::Cpu));
        let parts = serde_json::json!([{"type": "image"}, {"type": "text", "text": "hi"}]);
        if let Some(text_lm) = llama_tiny() {
            let e = text_lm
                .prepare(Prompt::Multimodal(messages(parts.clone()), vec![image()]))
                .err()
                .unwrap();
            assert!(e.to_string().contains("takes no images"), "{e}");
        }
        let dir = format!("{}/models/golden/vlm/llava-tiny", crate::REPO_ROOT);
        if !Path::new(&dir).join("manifest.json").exists() {
            eprintln!("skipped: {dir} (models/make_vlm_models.py)");
            return;
        }
        let options = LoadOptions {
            dtype: None,
            max_context: None,
            max_sequences: None,
        };
        let model = load(&dir, options).unwrap();
        let code = |p: Prompt| crate::error::describe(&model.prepare(p).err().unwrap());
        let wrong = Tensor::zeros([3, 16, 32], (Kind::Float, Device::Cpu));
        let (c, m) = code(Prompt::Multimodal(messages(parts.clone()), vec![wrong]));
        assert!(c == Code::InvalidArg && m.contains("[3, 32, 32]"), "{m}");
        let (c, m) = code(Prompt::Multimodal(messages(parts), vec![image(), image()]));
        assert!(c == Code::InvalidArg && m.contains("2 image(s)"), "{m}");
        let (c, m) = code(Prompt::Messages(messages(Json::String("look: <image>".into()))));
        assert!(c == Code::InvalidArg && m.contains("image token"), "{m}");
    }

    /// A position outside the cache's slots is refused before the program writes there.
    #[test]
    fn a_position_outside_the_cache_is_refused() {
        let Some(model) = llama_tiny() else { return };
        let m = model.cache_shape();
        let cache = |slots: i64| -> Vec<Tensor> {
            let shape = [1, m.kv_heads, slots, m.head_dim];
            (0..2 * m.layers)
                .map(|_| Tensor::zeros(shape, (m.dtype, Device::Cpu)))
                .collect()
        };
        assert_eq!(model.run(&[1, 2], &[0, 1], 1, cache(2)).unwrap().len(), 1);
        for positions in [[0, 2], [-1, 0]] {
            let e = model.run(&[1, 2], &positions, 1, cache(2)).unwrap_err();
            assert!(e.to_string().contains("outside the KV cache's 2 slots"), "{e}");
        }
    }

    /// `logprobs` against the log-softmax of the program's logits computed apart: each step's
    /// context run as one prompt on a fresh cache (not the incremental decode that made the
    /// tokens), within 1e-4, with the same top-5 tokens.
    #[test]
    fn logprobs_are_the_log_softmax_of_the_raw_logits() {
        let Some(model) = llama_tiny() else { return };
        let prompt = model
            .prompt_ids(Prompt::Text("The quick brown fox".into()))
            .unwrap();
        // Sampled with a penalty: the reported numbers are still the raw logits'.
        let request = Defaults::from_config(&Json::Null)
            .request(&Options {
                max_new_tokens: Some(6),
                temperature: Some(0.7),
                repetition_penalty: Some(1.3),
                seed: Some(7),
                logprobs: Some(true),
                top_logprobs: Some(5),
                ..Options::default()
            })
            .unwrap();
        let mut batch: Batch<()> = Batch::new(1);
        batch
            .admit(
                &model,
                (),
                Sequence::new(&model, prompt.clone(), request).unwrap(),
            )
            .unwrap();
        let (mut tokens, mut reported) = (Vec::new(), Vec::new());
        while !batch.is_empty() {
            for event in batch.step(&model) {
                assert!(event.error.is_none());
                tokens.extend(event.piece.tokens);
                reported.extend(event.piece.logprobs);
            }
        }
        assert_eq!(tokens.len(), 6);
        assert_eq!(reported.iter().map(|r| r.token).collect::<Vec<_>>(), tokens);
        let m = model.cache_shape();
        for (step, r) in reported.iter().enumerate() {
            let context: Vec<i64> = prompt.iter().chain(&tokens[..step]).map(|&t| t as i64).collect();
            let slots = context.len() as i64 + 1;
            let cache = (0..2 * m.layers)
                .map(|_| Tensor::zeros([1, m.kv_heads, slots, m.head_dim], (m.dtype, Device::Cpu)))
                .collect();
            let positions: Vec<i64> = (0..context.len() as i64).collect();
            let logits = model.run(&context, &positions, 1, cache).unwrap().remove(0);
            let max = logits.iter().fold(f64::NEG_INFINITY, |a, &x| a.max(x as f64));
            let log_z = max + logits.iter().map(|&x| (x as f64 - max).exp()).sum::<f64>().ln();
            let want = |t: u32| logits[t as usize] as f64 - log_z;
            assert!((r.logprob as f64 - want(r.token)).abs() < 1e-4, "step {step}");
            let mut order: Vec<u32> = (0..logits.len() as u32).collect();
            order.sort_by(|&a, &b| logits[b as usize].total_cmp(&logits[a as usize]));
            let top: Vec<u32> = r.top.iter().map(|a| a.token).collect();
            assert_eq!(top, order[..5], "step {step}: the likeliest five");
            for a in &r.top {
                assert!((a.logprob as f64 - want(a.token)).abs() < 1e-4, "step {step}");
                assert_eq!(a.bytes, model.token_bytes(a.token));
            }
        }
    }
}
