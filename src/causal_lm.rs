//! The native side of `torch.text.CausalLM` (glue over `crate::generate`; the public class is
//! lib/text/causal-lm.js, which reads the options, queues past `maxSequences` and turns the
//! pieces into an async iterator).
//!
//! A generation is a chain of executor jobs: each runs `Model::advance` (one step, or a few
//! until some text is ready), posts the piece to its JS thread through that thread's queue
//! (`crate::napi::queue`, which calls the JS callback there) and resubmits itself. No JS round
//! trip is needed per token, and concurrent generations take turns step by step on the executor
//! (each job goes to the back of its queue). `abort()` frees the sequence's cache at once when
//! no step is running, else right after the running one.
use crate::error::{bail_code, catch_panic, describe, guard, Code};
use crate::executor;
use crate::generate::lm::{self, Finish, LoadOptions, Model, Prompt, Request, Sequence};
use crate::napi::convert::Str;
use crate::napi::js;
use crate::napi::lifecycle::{self, Slot};
use crate::napi::outcome::{js_result, Outcome};
use crate::napi::queue::{self, JsQueue};
use crate::napi::task::Promise;
use crate::napi::warnings;
use napi::bindgen_prelude::{Function, FunctionRef};
use napi::Env;
use napi_derive::napi;
use serde_json::{Map, Value as Json};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// What a step sends to JS: text and its tokens, and on the last piece why it ended (or the
/// error that ended it).
#[derive(Default)]
pub struct Step {
    text: String,
    tokens: Vec<u32>,
    prompt_tokens: usize,
    finish: Option<&'static str>,
    error: Option<(Code, String)>,
}

js_result!(
    /// `{text, tokens, promptTokens, finishReason?, errorCode?, errorMessage?}`.
    StepJs(Step) as "CausalLMStep",
    |env, s| {
        let tokens: Vec<f64> = s.tokens.iter().map(|&t| t as f64).collect();
        let mut fields = vec![
            ("text".to_string(), js::new_string(env, &s.text)?),
            ("tokens".to_string(), js::new_number_array(env, &tokens)?),
            ("promptTokens".to_string(), js::new_number(env, s.prompt_tokens as f64)?),
        ];
        if let Some(f) = s.finish {
            fields.push(("finishReason".to_string(), js::new_string(env, f)?));
        }
        if let Some((code, message)) = &s.error {
            fields.push(("errorCode".to_string(), js::new_string(env, code.as_ref())?));
            fields.push(("errorMessage".to_string(), js::new_string(env, message)?));
        }
        js::new_object(env, fields)
    }
);

type Callback = FunctionRef<StepJs, ()>;

/// One generation's state, shared by its JS handle and the job chain on the executor.
struct Stream {
    model: Arc<Model>,
    /// Taken by the first job (tokenized there: a chat template or a long prompt never blocks JS).
    start: Mutex<Option<(Prompt, Request)>>,
    sequence: Mutex<Option<Sequence>>,
    prompt_tokens: Mutex<usize>,
    aborted: AtomicBool,
    queue: Arc<JsQueue>,
    /// Dropped on the JS thread with the last piece (a JS reference belongs to its thread).
    callback: Mutex<Option<Callback>>,
}

/// Runs one step of `stream` on this executor instance, posts its piece and, unless it was the
/// last, queues the next step.
fn step(stream: Arc<Stream>) {
    // The JS thread is tearing down (a terminated worker): nothing to deliver to.
    let Some(running) = stream.queue.running() else {
        return;
    };
    let origin = Some(stream.queue.clone());
    let out = warnings::with_origin(origin, || catch_panic(|| advance(&stream)));
    let piece = out.unwrap_or_else(|e| {
        let (code, message) = describe(&e);
        stream.sequence.lock().unwrap_or_else(|p| p.into_inner()).take();
        Step {
            finish: Some(Finish::Aborted.name()),
            error: Some((code, message)),
            ..Step::default()
        }
    });
    let last = piece.finish.is_some();
    let target = stream.clone();
    stream
        .queue
        .post(Box::new(move |env| deliver(env, &target, piece, last)));
    drop(running);
    if !last {
        executor::submit(Box::new(move || step(stream)));
    }
}

/// Starts the sequence on the first step, then advances it until a piece of text is ready.
fn advance(stream: &Stream) -> anyhow::Result<Step> {
    let mut slot = stream.sequence.lock().unwrap_or_else(|p| p.into_inner());
    let aborted = || Step {
        finish: Some(Finish::Aborted.name()),
        ..Step::default()
    };
    if stream.aborted.load(Ordering::SeqCst) {
        slot.take();
        return Ok(aborted());
    }
    if let Some((prompt, request)) = stream.start.lock().unwrap_or_else(|p| p.into_inner()).take() {
        let ids = stream.model.prompt_ids(prompt)?;
        *stream.prompt_tokens.lock().unwrap_or_else(|p| p.into_inner()) = ids.len();
        *slot = Some(stream.model.start(ids, request)?);
    }
    let Some(seq) = slot.as_mut() else {
        return Ok(aborted());
    };
    let piece = stream.model.advance(seq)?;
    let finish = seq.finish;
    if finish.is_some() || stream.aborted.load(Ordering::SeqCst) {
        slot.take(); // frees the cache now, not when JS lets go of its handle
    }
    Ok(Step {
        text: piece.text,
        tokens: piece.tokens,
        prompt_tokens: *stream.prompt_tokens.lock().unwrap_or_else(|p| p.into_inner()),
        finish: finish.map(Finish::name),
        error: None,
    })
}

/// On the JS thread: hands the piece to the generation's callback.
fn deliver(env: napi::sys::napi_env, stream: &Stream, piece: Step, last: bool) {
    let env = Env::from_raw(env);
    let callback = stream.callback.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(f) = callback.as_ref().and_then(|c| c.borrow_back(&env).ok()) {
        // The wrapper's callback only buffers the piece; it does not throw.
        let _ = f.call(StepJs(piece));
    }
    drop(callback);
    if last {
        stream.callback.lock().unwrap_or_else(|p| p.into_inner()).take();
        queue::fulfilled(env.raw());
    }
}

/// `{dtype, maxContext}` as JSON (the JS wrapper has checked their types).
fn load_options(json: &str) -> anyhow::Result<LoadOptions> {
    let o: Json = serde_json::from_str(json)?;
    Ok(LoadOptions {
        dtype: o["dtype"].as_str().map(str::to_string),
        max_context: o["maxContext"].as_u64().map(|n| n as usize),
    })
}

/// `{text}`, `{messages}` or `{ids}` as JSON.
fn prompt(json: &str) -> anyhow::Result<Prompt> {
    let p: Json = serde_json::from_str(json)?;
    Ok(match (&p["text"], &p["messages"], &p["ids"]) {
        (Json::String(t), _, _) => Prompt::Text(t.clone()),
        (_, Json::Array(m), _) => Prompt::Messages(m.clone()),
        (_, _, Json::Array(ids)) => Prompt::Ids(
            ids.iter()
                .map(|v| v.as_u64().map(|n| n as u32))
                .collect::<Option<_>>()
                .ok_or_else(|| {
                    crate::error::fail(Code::InvalidArg, "prompt: token ids must be integers ≥ 0")
                })?,
        ),
        _ => bail_code!(
            Code::InvalidArg,
            "prompt: expected a string, an array of {{role, content}} messages or of token ids"
        ),
    })
}

/// @internal A causal language model folder loaded for generation; `torch.text.CausalLM`
/// (lib/text/causal-lm.js) wraps it.
#[napi(js_name = "_CausalLM")]
pub struct JsCausalLM {
    slot: Slot<Model>,
}

/// @internal One generation in flight: `abort()` ends it and frees its cache.
#[napi(js_name = "_Generation")]
pub struct JsGeneration {
    stream: Arc<Stream>,
}

#[napi]
impl JsCausalLM {
    /// @internal Loads `folder` (manifest.json, model.pt2, tokenizer, generation_config.json)
    /// on the executor; `options` is `{dtype, maxContext}` as JSON.
    #[napi(skip_typescript)]
    pub fn load(env: Env, folder: Str, options: Str) -> Outcome<Promise> {
        lifecycle::load(
            env.raw(),
            || {
                let raw = folder.raw();
                let folder = js::string(raw.env, raw.val)?;
                let options = load_options(&js::string(options.raw().env, options.raw().val)?)?;
                Ok(((folder, options), None))
            },
            |(folder, options)| lm::load(&folder, options),
            |model| JsCausalLM {
                slot: Slot::new("CausalLM", model),
            },
        )
    }

    /// @internal The generation defaults and limits, as JSON: `{maxContext, maxNewTokens,
    /// temperature, topK, topP, minP, repetitionPenalty, eos, dtype}`.
    #[napi(skip_typescript)]
    pub fn info(&self) -> Outcome<String> {
        guard(|| {
            let m = self.slot.get()?;
            let d = &m.defaults;
            Ok(serde_json::json!({
                "maxContext": m.max_context,
                "maxNewTokens": d.max_new_tokens,
                "temperature": d.params.temperature,
                "topK": d.params.top_k,
                "topP": d.params.top_p,
                "minP": d.params.min_p,
                "repetitionPenalty": d.params.repetition_penalty,
                "eos": m.manifest.eos,
                "dtype": m.manifest.dtype_name,
            })
            .to_string())
        })
        .into()
    }

    /// @internal Starts a generation: `prompt` (`{text}`, `{messages}` or `{ids}`) and `options`
    /// as JSON; each piece goes to `onPiece` on this thread, the last with its `finishReason`.
    /// Bad options are `InvalidArg` here, at once.
    #[napi(skip_typescript)]
    pub fn start(
        &self,
        env: Env,
        prompt_json: Str,
        options: Str,
        on_piece: Function<StepJs, ()>,
    ) -> Outcome<JsGeneration> {
        guard(|| {
            let model = self.slot.get()?;
            let read = |s: Str| js::string(s.raw().env, s.raw().val);
            let prompt = prompt(&read(prompt_json)?)?;
            let options: Map<String, Json> = serde_json::from_str(&read(options)?)?;
            let request = model.defaults.with_options(&options)?;
            let Some(queue) = queue::current() else {
                bail_code!(Code::Internal, "the addon was not initialised on this thread");
            };
            let stream = Arc::new(Stream {
                model,
                start: Mutex::new(Some((prompt, request))),
                sequence: Mutex::new(None),
                prompt_tokens: Mutex::new(0),
                aborted: AtomicBool::new(false),
                queue,
                callback: Mutex::new(Some(on_piece.create_ref()?)),
            });
            // Keeps the event loop alive until the last piece has been delivered.
            queue::expect(env.raw(), &stream.queue);
            let first = stream.clone();
            executor::submit(Box::new(move || step(first)));
            Ok(JsGeneration { stream })
        })
        .into()
    }

    /// @internal Checks generation options (JSON) against the defaults: `InvalidArg` for an
    /// unknown key or a value out of range, before the call waits for a sequence slot.
    #[napi(skip_typescript)]
    pub fn check_options(&self, options: Str) -> Outcome<bool> {
        guard(|| {
            let options: Map<String, Json> =
                serde_json::from_str(&js::string(options.raw().env, options.raw().val)?)?;
            self.slot.get()?.defaults.with_options(&options)?;
            Ok(true)
        })
        .into()
    }

    /// @internal Frees the model once running generations end.
    #[napi(skip_typescript)]
    pub fn dispose(&self) {
        self.slot.dispose()
    }
}

#[napi]
impl JsGeneration {
    /// @internal Stops the generation: its cache is freed now when no step is running (else as
    /// that step ends); the last piece, `finishReason: 'aborted'`, still arrives.
    #[napi(skip_typescript)]
    pub fn abort(&self) {
        self.stream.aborted.store(true, Ordering::SeqCst);
        if let Ok(mut seq) = self.stream.sequence.try_lock() {
            seq.take();
        }
    }
}
