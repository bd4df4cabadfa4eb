//! The native side of `torch.text.CausalLM` (glue over `torch_core::generate::engine`; the
//! public class is lib/text/causal-lm.js, which owns `signal`/`timeoutMs` and turns the pieces
//! into an async iterator). This file reads the arguments (the option bags below, the prompt),
//! and is the engine's `Sink`: each piece goes to its generation's JS thread through that
//! thread's queue (`crate::napi::queue`), which calls the JS callback there. Scheduling,
//! admission, `QueueFull` and the lifecycle are the core's (`torch_core::generate`).
use crate::error::{bail_code, describe, guard, Code};
use crate::napi::convert::Arg;
use crate::napi::js::{self, Env as RawEnv, Val};
use crate::napi::lifecycle;
use crate::napi::options::{js_options, OptionValue};
use crate::napi::outcome::{js_result, Outcome};
use crate::napi::queue::{self, JsQueue, Running};
use crate::napi::task::{self, Promise};
use crate::napi::warnings;
use crate::text::{text, Text};
use napi::bindgen_prelude::{Function, FunctionRef};
use napi::sys::ValueType as Js;
use napi::Env;
use napi_derive::napi;
use serde_json::Value as Json;
use std::sync::{Arc, Mutex};
use torch_core::executor;
use torch_core::generate::constraint::Format;
use torch_core::generate::decoder::{Chat, Prompt};
use torch_core::generate::engine::{Config, Engine, Generation, Output, Schedule, Sink};
use torch_core::generate::lm::{self, LoadOptions, Model};
use torch_core::generate::lookup::Speculation;
use torch_core::generate::request::{Options, Request};
use torch_core::text::chat_template;

js_options! {
    /// Options of `torch.text.CausalLM.load`; any other key is refused (`InvalidArg`).
    pub struct LoadBag as JsCausalLmLoadOptions "CausalLMOptions" {
        /// The export's dtype (the manifest's); another one is `InvalidArg`.
        dtype "dtype": String as "'float32' | 'bfloat16' | 'float16'",
        /// Sequences generating at once, sharing each decode step and one KV cache (default 4,
        /// or the export's `--max-batch` when smaller; more than `--max-batch` is `InvalidArg`).
        max_sequences "maxSequences": u64 as "number",
        /// Calls waiting for a sequence slot before `QueueFull` (default 64; `Infinity` for no
        /// bound).
        max_queue "maxQueue": QueueBound as "number",
        /// The most tokens of a sequence, prompt and output (default and upper bound: the
        /// exported limit).
        max_context "maxContext": u64 as "number",
        /// Keeps prompts' keys and values for later prompts that start the same (a system
        /// prompt, a chat history), in a radix tree of 16-token blocks where a shared start is
        /// held once: `{maxTokens}` bounds the tokens held (least recently used leaves first out;
        /// memory: maxTokens × layers × 2 × kv heads × head dim × the dtype's bytes). Off by
        /// default (`torch-node serve` turns it on). See `stats().prefixCache`.
        prefix_cache "prefixCache": PrefixCacheOpt as "{ maxTokens: number }",
        /// Speculative decoding by prompt lookup: each step, each sequence proposes up to
        /// `maxDraft` tokens (default 5, at most 15) that followed the latest earlier occurrence
        /// of its last `ngram` tokens (default 3, then shorter), and the model checks them in
        /// the same call: greedy output is the same as without, sampled output has the same
        /// distribution. Faster where the output quotes the prompt (summaries, extraction,
        /// edits). Needs a model exported by this version (manifest format 2). See
        /// `stats().speculative` and docs/generation.md#speculative-decoding.
        speculative "speculative": SpeculativeOpt as "{ method: 'prompt-lookup'; maxDraft?: number; ngram?: number }",
        /// A chat template (Jinja) to use instead of the folder's (`chat_template.jinja` or
        /// `tokenizer_config.json`'s): one that renders tools, for a model whose own does not.
        chat_template "chatTemplate": Text as "string",
    }
}

js_options! {
    /// `speculative`'s options.
    pub struct SpeculativeBag as JsSpeculativeOptions "SpeculativeOptions" {
        /// `'prompt-lookup'` (the only method).
        method "method": String as "'prompt-lookup'",
        /// The most tokens proposed per sequence and step (1 to 15, default 5).
        max_draft "maxDraft": u64 as "number",
        /// The longest n-gram looked up (1 to 8, default 3).
        ngram "ngram": u64 as "number",
    }
}

js_options! {
    /// `prefixCache`'s options.
    pub struct PrefixBag as JsPrefixCacheOptions "PrefixCacheOptions" {
        /// The most tokens held, in all cached prompts (0: off).
        max_tokens "maxTokens": u64 as "number",
    }
}

js_options! {
    /// Options of `CausalLM.generate`/`complete` read natively (`signal` and `timeoutMs` are
    /// the JS wrapper's); defaults from `generation_config.json`; any other key is `InvalidArg`.
    pub struct GenerateBag as JsGenerateOptions "CausalLMGenerateOptions" {
        /// The most tokens to generate (default 256 or the config's).
        max_new_tokens "maxNewTokens": u64 as "number",
        /// 0: greedy.
        temperature "temperature": f64 as "number",
        /// Keep the k likeliest tokens (0: off).
        top_k "topK": u64 as "number",
        /// Nucleus sampling, in (0, 1].
        top_p "topP": f64 as "number",
        /// Drop tokens below minP × the likeliest one's probability.
        min_p "minP": f64 as "number",
        /// transformers' repetition penalty (1: off).
        repetition_penalty "repetitionPenalty": f64 as "number",
        /// The same seed gives the same tokens.
        seed "seed": u64 as "number",
        /// Stop strings: matched across tokens, never emitted (`finishReason: 'stop'`).
        stop "stop": StopStrings as "string | string[]",
        /// What the output must be: JSON (any object, or valid against a schema), text of a
        /// Lark grammar or a regex, or tool calls; enforced by a token mask at each step. See
        /// docs/generation.md#structured-output.
        response_format "responseFormat": ResponseFormatOpt as "ResponseFormat",
        /// Report each token's log-probability: the log-softmax of the model's raw logits at its
        /// step, before the penalty, temperature, top-k/p, min-p or `responseFormat` change them.
        logprobs "logprobs": bool as "boolean",
        /// With `logprobs`: the likeliest tokens at each step too, 0 to 20 (default 0).
        top_logprobs "topLogprobs": u64 as "number",
        /// With a chat prompt: the tools its chat template describes to the model (OpenAI's
        /// function tools), rendered natively as transformers' `apply_chat_template(messages,
        /// tools=tools)`; a template that reads no tools refuses them (`InvalidArg`).
        tools "tools": ToolsOpt as "ChatTool[]",
        /// A prompt and `maxNewTokens` that together pass the context are `InvalidArg` (vLLM's
        /// 400) rather than cut at the context (`finishReason: 'length'`).
        strict_context "strictContext": bool as "boolean",
    }
}

js_options! {
    /// Options of `CausalLM.tokenize`; any other key is refused (`InvalidArg`).
    pub struct TokenizeBag as JsTokenizeOptions "CausalLMTokenizeOptions" {
        /// With a chat prompt: the tools its chat template describes (as `generate`'s).
        tools "tools": ToolsOpt as "ChatTool[]",
    }
}

/// `tools`, as the JS wrapper passes them: their JSON text (read once there, as
/// `responseFormat`), checked here.
pub struct ToolsOpt(Vec<Json>);

impl OptionValue for ToolsOpt {
    fn read(env: RawEnv, v: Val, what: &str) -> anyhow::Result<Self> {
        let value = parse_json(&String::read(env, v, what)?, what)?;
        Ok(ToolsOpt(Chat::tools_from_json(value, what)?))
    }
}

/// JSON text the JS wrapper wrote (`what` names it): `InvalidArg` when it does not parse.
fn parse_json(json: &str, what: &str) -> anyhow::Result<Json> {
    serde_json::from_str(json).map_err(|e| {
        let why = match e.to_string().contains("recursion limit") {
            true => "nested more than 128 levels deep".to_string(),
            false => format!("not JSON ({e})"),
        };
        crate::error::fail(Code::InvalidArg, format!("{what}: {why}"))
    })
}

/// `prompt` with `tools` for its chat template: only a chat takes them, and only a template
/// that reads them (checked here, at once, rather than when the prompt is rendered).
fn with_tools(model: &Model, prompt: Prompt, tools: Option<ToolsOpt>) -> anyhow::Result<Prompt> {
    let Some(ToolsOpt(tools)) = tools else {
        return Ok(prompt);
    };
    let template = model.tokenizer.config().chat_template.as_deref();
    if template.and_then(chat_template::tools_variable).is_none() {
        bail_code!(
            Code::InvalidArg,
            "options.tools: this model's chat template does not render tools (torch-node serve \
             describes them in the generic tool format instead)"
        );
    }
    match prompt {
        Prompt::Messages(chat) => Ok(Prompt::Messages(Chat {
            tools: Some(tools),
            ..chat
        })),
        Prompt::Multimodal(chat, images) => Ok(Prompt::Multimodal(
            Chat {
                tools: Some(tools),
                ..chat
            },
            images,
        )),
        _ => bail_code!(
            Code::InvalidArg,
            "options.tools: only with a chat prompt (an array of messages)"
        ),
    }
}

/// `responseFormat`, as the JS wrapper passes it: its JSON text (JS reads the object once, so
/// getters, Proxies and cycles fail there, as the caller's own errors).
pub struct ResponseFormatOpt(Option<Format>);

impl OptionValue for ResponseFormatOpt {
    fn read(env: RawEnv, v: Val, what: &str) -> anyhow::Result<Self> {
        let value = parse_json(&String::read(env, v, what)?, what)?;
        Ok(ResponseFormatOpt(Format::from_json(&value)?))
    }
}

/// `maxQueue`: a whole number ≥ 0, or `Infinity` (no bound: None).
pub struct QueueBound(Option<usize>);

impl OptionValue for QueueBound {
    fn read(env: RawEnv, v: Val, what: &str) -> anyhow::Result<Self> {
        if js::type_of(env, v)? == Js::napi_number && js::number(env, v)? == f64::INFINITY {
            return Ok(QueueBound(None));
        }
        Ok(QueueBound(Some(u64::read(env, v, what)? as usize)))
    }
}

/// `prefixCache`: `{maxTokens}`.
pub struct PrefixCacheOpt(usize);

impl OptionValue for PrefixCacheOpt {
    fn read(env: RawEnv, v: Val, what: &str) -> anyhow::Result<Self> {
        let bag = PrefixBag::read(env, Some(v), what)?;
        Ok(PrefixCacheOpt(bag.max_tokens.unwrap_or(0) as usize))
    }
}

/// `speculative`: `{method, maxDraft?, ngram?}`.
pub struct SpeculativeOpt(Speculation);

impl OptionValue for SpeculativeOpt {
    fn read(env: RawEnv, v: Val, what: &str) -> anyhow::Result<Self> {
        let bag = SpeculativeBag::read(env, Some(v), what)?;
        let method = bag.method.unwrap_or_default();
        Ok(SpeculativeOpt(Speculation::new(
            &method,
            bag.max_draft,
            bag.ngram,
        )?))
    }
}

/// `stop`: a string or an array of strings.
pub struct StopStrings(Vec<String>);

impl OptionValue for StopStrings {
    fn read(env: RawEnv, v: Val, what: &str) -> anyhow::Result<Self> {
        if js::type_of(env, v)? == Js::napi_string {
            return Ok(StopStrings(vec![text(env, v, what)?]));
        }
        if !js::is_array(env, v)? {
            bail_code!(
                Code::InvalidArg,
                "{what}: expected a string or an array of strings, got {}",
                js::describe(env, v)
            );
        }
        let items = js::elements(env, v)?;
        let list = items
            .iter()
            .enumerate()
            .map(|(i, &s)| text(env, s, &format!("{what}[{i}]")));
        Ok(StopStrings(list.collect::<anyhow::Result<_>>()?))
    }
}

/// The prompt: a string, `{role, content}` messages (for the chat template) or token ids.
fn prompt(env: RawEnv, v: Val) -> anyhow::Result<Prompt> {
    let what = "prompt";
    if js::type_of(env, v)? == Js::napi_string {
        return Ok(Prompt::Text(text(env, v, what)?));
    }
    let items = match js::is_array(env, v)? {
        true => js::elements(env, v)?,
        false => Vec::new(),
    };
    let kinds = items
        .iter()
        .map(|&i| js::type_of(env, i))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if !items.is_empty() && kinds.iter().all(|&k| k == Js::napi_number) {
        let ids = items.iter().map(|&i| {
            let x = js::number(env, i)?;
            if x.fract() != 0.0 || !(0.0..=u32::MAX as f64).contains(&x) {
                bail_code!(Code::InvalidArg, "{what}: token id {x} is out of the vocabulary");
            }
            Ok(x as u32)
        });
        return Ok(Prompt::Ids(ids.collect::<anyhow::Result<_>>()?));
    }
    if !items.is_empty() && kinds.iter().all(|&k| k == Js::napi_object) {
        let mut images = Vec::new();
        let mut message = |(i, &m): (usize, &Val)| -> anyhow::Result<Option<Json>> {
            let role = match js::property(env, m, "role")? {
                Some(s) if js::type_of(env, s)? == Js::napi_string => {
                    text(env, s, &format!("{what}[{i}].role"))?
                }
                _ => return Ok(None),
            };
            let content = match js::property(env, m, "content")? {
                Some(s) if js::type_of(env, s)? == Js::napi_string => {
                    Json::String(text(env, s, &format!("{what}[{i}].content"))?)
                }
                Some(list) if js::is_array(env, list)? => {
                    content_parts(env, list, &format!("{what}[{i}].content"), &mut images)?
                }
                _ => return Ok(None),
            };
            Ok(Some(serde_json::json!({"role": role, "content": content})))
        };
        let messages = items
            .iter()
            .enumerate()
            .map(&mut message)
            .collect::<anyhow::Result<Option<Vec<_>>>>()?;
        if let Some(messages) = messages {
            return Ok(match images.is_empty() {
                true => Prompt::Messages(Chat::new(messages)),
                false => Prompt::Multimodal(Chat::new(messages), images),
            });
        }
    }
    bail_code!(
        Code::InvalidArg,
        "{what}: expected a string, an array of {{role, content}} messages or of token ids, got {}",
        js::describe(env, v)
    )
}

/// A message's content parts: `{type: 'text', text}` and `{type: 'image', image}` (`image`: the
/// image processor's pixel_values Tensor, copied into `images`; the part becomes
/// `{type: 'image'}` for the chat template). Text-only parts are joined into one string, the
/// content every chat template takes.
fn content_parts(env: RawEnv, list: Val, what: &str, images: &mut Vec<tch::Tensor>) -> anyhow::Result<Json> {
    let mut parts = Vec::new();
    for (k, part) in js::elements(env, list)?.into_iter().enumerate() {
        let at = format!("{what}[{k}]");
        let kind = match js::type_of(env, part)? == Js::napi_object {
            true => js::property(env, part, "type")?,
            false => None,
        };
        let kind = match kind {
            Some(t) if js::type_of(env, t)? == Js::napi_string => text(env, t, &format!("{at}.type"))?,
            _ => bail_code!(
                Code::InvalidArg,
                "{at}: expected {{type: 'text', text}} or {{type: 'image', image}}, got {}",
                js::describe(env, part)
            ),
        };
        match kind.as_str() {
            "text" => {
                let t = js::property(env, part, "text")?;
                let t = match t {
                    Some(t) if js::type_of(env, t)? == Js::napi_string => {
                        text(env, t, &format!("{at}.text"))?
                    }
                    _ => bail_code!(Code::InvalidArg, "{at}.text: expected a string"),
                };
                parts.push(serde_json::json!({"type": "text", "text": t}));
            }
            "image" => {
                let Some(image) = js::property(env, part, "image")? else {
                    bail_code!(
                        Code::InvalidArg,
                        "{at}.image: expected the image's pixel_values Tensor"
                    );
                };
                let pixels = crate::tensor::operands::shared(env, image, &format!("{at}.image"))?;
                images.push(pixels.f_detach()?.f_to_dtype(pixels.kind(), false, true)?);
                parts.push(serde_json::json!({"type": "image"}));
            }
            other => bail_code!(
                Code::InvalidArg,
                "{at}.type: expected 'text' or 'image', got '{other}'"
            ),
        }
    }
    if parts.iter().all(|p| p["type"] == "text") {
        let joined: String = parts.iter().filter_map(|p| p["text"].as_str()).collect();
        return Ok(Json::String(joined));
    }
    Ok(Json::Array(parts))
}

/// The prompt `prepare` and `tokenize` read: `chat`'s JSON text when given, else `prompt`.
fn read_prompt(prompt_arg: Arg, chat: Option<Arg>) -> anyhow::Result<Prompt> {
    let p = prompt_arg.raw();
    let Some(chat) = chat
        .map(|c| c.raw())
        .filter(|c| !js::is_nullish(c.env, c.val).unwrap_or(true))
    else {
        return prompt(p.env, p.val);
    };
    let what = "prompt";
    let value = parse_json(&text(chat.env, chat.val, what)?, what)?;
    Ok(Prompt::Messages(Chat::new(Chat::messages_from_json(
        value, what,
    )?)))
}

/// What a piece sends to JS: text and its tokens, and on the last piece why it ended (or the
/// error that ended it).
pub struct Step(Output);

js_result!(
    /// `{text, tokens, promptTokens, logprobs?, finishReason?, errorCode?, errorMessage?}`;
    /// `logprobs`: per token `{token, logprob, bytes, top: [{token, logprob, bytes}]}`.
    StepJs(Step) as "CausalLMStep",
    |env, s| {
        let s = s.0;
        let tokens: Vec<f64> = s.tokens.iter().map(|&t| t as f64).collect();
        let mut fields = vec![
            ("text".to_string(), js::new_string(env, &s.text)?),
            ("tokens".to_string(), js::new_number_array(env, &tokens)?),
            ("promptTokens".to_string(), js::new_number(env, s.prompt_tokens as f64)?),
        ];
        if !s.logprobs.is_empty() {
            let entry = |token: u32, logprob: f32, bytes: &[u8]| -> anyhow::Result<Vec<(String, Val)>> {
                let bytes: Vec<f64> = bytes.iter().map(|&b| b as f64).collect();
                Ok(vec![
                    ("token".to_string(), js::new_number(env, token as f64)?),
                    ("logprob".to_string(), js::new_number(env, logprob as f64)?),
                    ("bytes".to_string(), js::new_number_array(env, &bytes)?),
                ])
            };
            let mut items = Vec::with_capacity(s.logprobs.len());
            for t in &s.logprobs {
                let top = (t.top.iter())
                    .map(|a| js::new_object(env, entry(a.token, a.logprob, &a.bytes)?))
                    .collect::<anyhow::Result<Vec<_>>>()?;
                let mut fields = entry(t.token, t.logprob, &t.bytes)?;
                fields.push(("top".to_string(), js::new_array(env, top)?));
                items.push(js::new_object(env, fields)?);
            }
            fields.push(("logprobs".to_string(), js::new_array(env, items)?));
        }
        if let Some(f) = s.finish {
            fields.push(("finishReason".to_string(), js::new_string(env, f.name())?));
        }
        if let Some((code, message)) = s.error.as_ref().map(describe) {
            fields.push(("errorCode".to_string(), js::new_string(env, code.as_ref())?));
            fields.push(("errorMessage".to_string(), js::new_string(env, &message)?));
        }
        js::new_object(env, fields)
    }
);

type Callback = FunctionRef<StepJs, ()>;

/// A generation's JS side: the queue of its JS thread and its callback.
pub struct JsSink {
    queue: Arc<JsQueue>,
    /// Dropped on the JS thread with the last piece (a JS reference belongs to its thread).
    callback: Arc<Mutex<Option<Callback>>>,
}

impl Sink for JsSink {
    type Hold = Running;

    fn post(&self, out: Output) {
        let last = out.finish.is_some();
        let callback = self.callback.clone();
        self.queue
            .post(Box::new(move |env| deliver(env, &callback, Step(out), last)));
    }

    fn is_gone(&self) -> bool {
        self.queue.is_closing()
    }

    fn hold(&self) -> Option<Running> {
        self.queue.running()
    }

    fn scope<R>(&self, work: impl FnOnce() -> R) -> R {
        warnings::with_origin(Some(self.queue.clone()), work)
    }
}

/// On the JS thread: hands the piece to the generation's callback.
fn deliver(env: napi::sys::napi_env, callback: &Mutex<Option<Callback>>, piece: Step, last: bool) {
    let env = Env::from_raw(env);
    let held = callback.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(f) = held.as_ref().and_then(|c| c.borrow_back(&env).ok()) {
        // The wrapper's callback only buffers the piece; it does not throw.
        let _ = f.call(StepJs(piece));
    }
    drop(held);
    if last {
        callback.lock().unwrap_or_else(|p| p.into_inner()).take();
        queue::fulfilled(env.raw());
    }
}

type LmEngine = Engine<Model, JsSink>;

fn schedule() -> Schedule {
    Arc::new(executor::submit)
}

/// `load`'s arguments, read on the JS thread.
struct LoadArgs {
    folder: String,
    options: LoadOptions,
    max_queue: Option<usize>,
    prefix_cache_tokens: usize,
    speculation: Option<Speculation>,
    chat_template: Option<String>,
}

/// A loaded model and its engine's limits.
struct Loaded(Model, Config);

fn load_model(a: LoadArgs) -> anyhow::Result<Loaded> {
    let mut model = lm::load(&a.folder, a.options)?;
    if let Some(template) = a.chat_template {
        chat_template::check(&template)?;
        model.tokenizer.set_chat_template(template);
    }
    if let Some(s) = &a.speculation {
        s.check(&model)?;
    }
    let config = Config {
        max_queue: a.max_queue,
        prefix_cache_tokens: a.prefix_cache_tokens,
        speculation: a.speculation,
        ..Config::new(model.max_sequences)
    };
    Ok(Loaded(model, config))
}

fn wrap(Loaded(model, config): Loaded) -> JsCausalLM {
    JsCausalLM {
        engine: Engine::new(Arc::new(model), config, schedule()),
    }
}

/// The generation defaults and limits.
pub struct Info(Arc<Model>);

js_result!(
    /// `{maxContext, maxSequences, maxNewTokens, temperature, topK, topP, minP, repetitionPenalty, eos, dtype,
    /// quantization, compiledFor, compiledForFlags, exportedOn, kernels}` (the last five from manifest.json;
    /// `kernels` as JSON text).
    InfoJs(Info) as "CausalLMInfo",
    |env, info| {
        let m = &info.0;
        let d = &m.defaults;
        let eos: Vec<f64> = m.manifest.eos.iter().map(|&t| t as f64).collect();
        let compiled_for = m.manifest.compiled_for.as_ref();
        let n = |x: f64| js::new_number(env, x);
        js::new_object(
            env,
            vec![
                ("maxContext".into(), n(m.max_context as f64)?),
                ("maxSequences".into(), n(m.max_sequences as f64)?),
                ("maxNewTokens".into(), n(d.max_new_tokens as f64)?),
                ("temperature".into(), n(d.temperature)?),
                ("topK".into(), n(d.top_k as f64)?),
                ("topP".into(), n(d.top_p)?),
                ("minP".into(), n(d.min_p)?),
                ("repetitionPenalty".into(), n(d.repetition_penalty)?),
                ("eos".into(), js::new_number_array(env, &eos)?),
                ("dtype".into(), js::new_string(env, &m.manifest.dtype_name)?),
                // "" where the manifest has none: CausalLM's `program` getter reads null.
                ("quantization".into(), js::new_string(env, m.manifest.quantization.as_deref().unwrap_or(""))?),
                ("compiledFor".into(), js::new_string(env, compiled_for.map_or("", |c| c.isa.as_str()))?),
                ("compiledForFlags".into(), js::new_string(env, &compiled_for.map_or(String::new(), |c| c.cpu_flags.join(" ")))?),
                ("exportedOn".into(), js::new_string(env, compiled_for.map_or("", |c| c.exported_on.as_str()))?),
                ("kernels".into(), js::new_string(env, &m.manifest.kernels)?),
            ],
        )
    }
);

/// What the engine holds and has run.
pub struct Stats(torch_core::generate::engine::Stats, usize, Option<Speculation>);

js_result!(
    /// `{active, queued, maxSequences, steps, rows, prefills, prefixCache?, speculative?}`.
    StatsJs(Stats) as "CausalLMStats",
    |env, s| {
        let Stats(s, max_sequences, speculation) = s;
        let n = |x: f64| js::new_number(env, x);
        let mut fields = vec![
            ("active".to_string(), n(s.active as f64)?),
            ("queued".to_string(), n(s.queued as f64)?),
            ("maxSequences".to_string(), n(max_sequences as f64)?),
            ("steps".to_string(), n(s.counts.steps as f64)?),
            ("rows".to_string(), n(s.counts.rows as f64)?),
            ("prefills".to_string(), n(s.counts.prefills as f64)?),
        ];
        if let Some(p) = s.prefix {
            let cache = js::new_object(
                env,
                vec![
                    ("maxTokens".into(), n(p.max_tokens as f64)?),
                    ("tokens".into(), n(p.tokens as f64)?),
                    ("entries".into(), n(p.entries as f64)?),
                    ("queries".into(), n(p.queries as f64)?),
                    ("queriedTokens".into(), n(p.queried_tokens as f64)?),
                    ("hits".into(), n(p.hits as f64)?),
                    ("reusedTokens".into(), n(p.reused_tokens as f64)?),
                    ("evictions".into(), n(p.evictions as f64)?),
                ],
            )?;
            fields.push(("prefixCache".to_string(), cache));
        }
        if let Some(spec) = speculation {
            // Tokens drafted and run through the program, and those the model agreed with.
            let c = &s.counts;
            let acceptance = c.accepted as f64 / c.proposed.max(1) as f64;
            let speculative = js::new_object(
                env,
                vec![
                    ("maxDraft".into(), n(spec.max_draft as f64)?),
                    ("ngram".into(), n(spec.ngram as f64)?),
                    ("proposedTokens".into(), n(c.proposed as f64)?),
                    ("acceptedTokens".into(), n(c.accepted as f64)?),
                    ("acceptance".into(), n(acceptance)?),
                ],
            )?;
            fields.push(("speculative".to_string(), speculative));
        }
        js::new_object(env, fields)
    }
);

/// @internal A causal language model folder loaded for generation; `torch.text.CausalLM`
/// (lib/text/causal-lm.js) wraps it.
#[napi(js_name = "_CausalLM")]
pub struct JsCausalLM {
    /// Holds the model until `dispose()` and the last generation's end (`Engine::close`).
    engine: Arc<LmEngine>,
}

/// @internal A generation's prompt and options, read and checked (`CausalLM.prepare`).
#[napi(js_name = "_GenerateRequest")]
pub struct JsRequest {
    start: Mutex<Option<(Prompt, Request)>>,
}

/// @internal One generation in flight: `abort()` ends it and frees its cache.
#[napi(js_name = "_Generation")]
pub struct JsGeneration {
    engine: Arc<LmEngine>,
    generation: Arc<Generation<JsSink>>,
}

#[napi]
impl JsCausalLM {
    /// @internal Loads `folder` (manifest.json, model.pt2, tokenizer, generation_config.json)
    /// on the executor, with `CausalLMOptions`.
    #[napi(skip_typescript)]
    pub fn load(env: Env, folder: Arg, options: Arg) -> Outcome<Promise> {
        lifecycle::load(
            env.raw(),
            || {
                let (f, o) = (folder.raw(), options.raw());
                let folder = text(f.env, f.val, "folder")?;
                let bag = LoadBag::read(o.env, Some(o.val), "options")?;
                let args = LoadArgs {
                    folder,
                    options: LoadOptions {
                        dtype: bag.dtype,
                        max_context: bag.max_context.map(|n| n as usize),
                        max_sequences: bag.max_sequences.map(|n| n as usize),
                    },
                    max_queue: bag.max_queue.map_or(Some(64), |q| q.0),
                    prefix_cache_tokens: bag.prefix_cache.map_or(0, |p| p.0),
                    speculation: bag.speculative.map(|s| s.0),
                    chat_template: bag.chat_template.map(|t| t.0),
                };
                Ok((args, None))
            },
            load_model,
            wrap,
        )
    }

    /// @internal The generation defaults and limits.
    #[napi(skip_typescript)]
    pub fn info(&self) -> Outcome<InfoJs> {
        guard(|| Ok(InfoJs(Info(self.engine.decoder()?)))).into()
    }

    /// @internal Reads and checks a generation's prompt and options (`InvalidArg` at once).
    /// `chat`: the messages as JSON text (a chat without images: every key of each message
    /// reaches the template, tool calls and tool results too), read instead of `prompt`.
    #[napi(skip_typescript)]
    pub fn prepare(&self, prompt_arg: Arg, options: Arg, chat: Option<Arg>) -> Outcome<JsRequest> {
        guard(|| {
            let model = self.engine.decoder()?;
            let prompt = read_prompt(prompt_arg, chat)?;
            let o = options.raw();
            let mut bag = GenerateBag::read(o.env, Some(o.val), "options")?;
            let prompt = with_tools(&model, prompt, bag.tools.take())?;
            let request = model.defaults.request(&Options {
                max_new_tokens: bag.max_new_tokens,
                temperature: bag.temperature,
                top_k: bag.top_k,
                top_p: bag.top_p,
                min_p: bag.min_p,
                repetition_penalty: bag.repetition_penalty,
                seed: bag.seed,
                stop: bag.stop.map(|s| s.0),
                format: bag.response_format.and_then(|f| f.0),
                logprobs: bag.logprobs,
                top_logprobs: bag.top_logprobs,
                strict_context: bag.strict_context,
            })?;
            Ok(JsRequest {
                start: Mutex::new(Some((prompt, request))),
            })
        })
        .into()
    }

    /// @internal Starts a prepared generation; each piece goes to `onPiece` on this thread, the
    /// last with its `finishReason`. `QueueFull` past `maxSequences + maxQueue`.
    #[napi(skip_typescript)]
    pub fn start(
        &self,
        env: Env,
        request: &JsRequest,
        on_piece: Function<StepJs, ()>,
    ) -> Outcome<JsGeneration> {
        guard(|| {
            self.engine.decoder()?;
            let Some((prompt, request)) = request.start.lock().unwrap_or_else(|p| p.into_inner()).take()
            else {
                bail_code!(Code::InvalidArg, "this request was started already");
            };
            let Some(queue) = queue::current() else {
                bail_code!(Code::Internal, "the addon was not initialised on this thread");
            };
            let sink = JsSink {
                queue: queue.clone(),
                callback: Arc::new(Mutex::new(Some(on_piece.create_ref()?))),
            };
            let generation = self.engine.start(prompt, request, sink)?;
            // Keeps the event loop alive until the last piece has been delivered.
            queue::expect(env.raw(), &queue);
            Ok(JsGeneration {
                engine: self.engine.clone(),
                generation,
            })
        })
        .into()
    }

    /// @internal The prompt's token ids as `generate` would run them (a chat rendered with its
    /// tools), made on the executor: a Promise of a Uint32Array. Arguments as `prepare`'s.
    #[napi(skip_typescript)]
    pub fn tokenize(&self, env: Env, prompt_arg: Arg, options: Arg, chat: Option<Arg>) -> Outcome<Promise> {
        let raw = env.raw();
        Outcome::of(|| {
            let prepared = task::prepare(|| {
                let model = self.engine.decoder()?;
                let prompt = read_prompt(prompt_arg, chat)?;
                let o = options.raw();
                let bag = TokenizeBag::read(o.env, Some(o.val), "options")?;
                let prompt = with_tools(&model, prompt, bag.tools)?;
                Ok(((model, prompt), None))
            })?;
            guard(|| {
                task::spawn(
                    raw,
                    "CausalLM.tokenize",
                    prepared,
                    |(model, prompt)| model.prompt_ids(prompt),
                    |env, ids| js::new_u32_array(env, &ids),
                )
            })
        })
    }

    /// @internal What the engine holds and has run.
    #[napi(skip_typescript)]
    pub fn stats(&self) -> StatsJs {
        let config = self.engine.config();
        StatsJs(Stats(
            self.engine.stats(),
            config.max_sequences,
            config.speculation,
        ))
    }

    /// @internal Frees the model once running generations end; waiting ones end `Disposed`.
    #[napi(skip_typescript)]
    pub fn dispose(&self) {
        self.engine.close();
    }
}

#[napi]
impl JsGeneration {
    /// @internal Stops the generation: its row of the cache is freed as the step running now
    /// ends (at once when it waits for a row); the last piece, `finishReason: 'aborted'`,
    /// still arrives.
    #[napi(skip_typescript)]
    pub fn abort(&self) {
        self.engine.abort(&self.generation);
    }
}
