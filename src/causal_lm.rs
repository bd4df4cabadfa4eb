//! The native side of `torch.text.CausalLM` (glue over `torch_core::generate`; the public class is
//! lib/text/causal-lm.js, which reads the options, queues past `maxSequences` and turns the
//! pieces into an async iterator).
//!
//! Each loaded model has an `Engine`: the generations in flight share one `Batch` (one program
//! call per step for all of them, see `torch_core::generate::batch`). The engine runs as a chain
//! of executor jobs while it has work: each job (`tick`) drops the aborted generations, admits
//! waiting ones (their prompt tokenized and run there: a chat template never blocks JS; a prompt
//! over 16 KiB is tokenized ahead on a thread of its own, so it stalls no step), runs one step
//! and posts each generation's new text to its JS thread through that thread's queue
//! (`crate::napi::queue`, which calls the JS callback there), then resubmits itself; each job
//! goes to the back of the executor's queue, so other work (other models, `forward` calls) takes
//! turns with the steps. No JS round trip is needed per token. `abort()` frees the generation's
//! row at the next step.
use crate::error::{bail_code, catch_panic, describe, guard, Code};
use crate::napi::convert::Str;
use crate::napi::js;
use crate::napi::lifecycle::{self, ModuleSlot};
use crate::napi::outcome::{js_result, Outcome};
use crate::napi::queue::{self, JsQueue, Running};
use crate::napi::task::Promise;
use crate::napi::warnings;
use napi::bindgen_prelude::{Function, FunctionRef};
use napi::Env;
use napi_derive::napi;
use serde_json::{Map, Value as Json};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use torch_core::executor;
use torch_core::generate::batch::{Batch, Counts, Event};
use torch_core::generate::lm::{self, Finish, LoadOptions, Model, Prompt, Request, Sequence};

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

/// Prompt tokens that may join a running batch in one round (see `tick`).
const PREFILL_BUDGET: usize = 512;

/// A prompt of more bytes than this is tokenized on a thread of its own before it joins the
/// engine (`start`): a 10 MB prompt took 9 s to tokenize, and inside a tick every other
/// generation of the model would wait for it (its length is only known once tokenized).
const LONG_PROMPT_BYTES: usize = 16 << 10;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One generation: its JS side (queue, callback) and what the engine needs to start it.
struct Stream {
    model: Arc<Model>,
    /// Taken when the engine admits it (or when a long prompt is tokenized ahead).
    start: Mutex<Option<(Prompt, Request)>>,
    /// A long prompt's sequence, tokenized ahead on a thread of its own.
    prepared: Mutex<Option<Sequence>>,
    prompt_tokens: AtomicUsize,
    aborted: AtomicBool,
    queue: Arc<JsQueue>,
    /// Dropped on the JS thread with the last piece (a JS reference belongs to its thread).
    callback: Mutex<Option<Callback>>,
}

impl Stream {
    /// Sends a piece to the JS thread (the last one when `step.finish` is set).
    fn post(self: &Arc<Self>, mut step: Step) {
        step.prompt_tokens = self.prompt_tokens.load(Ordering::SeqCst);
        let last = step.finish.is_some();
        let target = self.clone();
        self.queue
            .post(Box::new(move |env| deliver(env, &target, step, last)));
    }

    fn end(self: &Arc<Self>, finish: Finish, error: Option<&anyhow::Error>) {
        self.post(Step {
            finish: Some(finish.name()),
            error: error.map(describe),
            ..Step::default()
        });
    }
}

/// The generations of one loaded model: those waiting for a row and the running batch.
struct Engine {
    inbox: Mutex<Inbox>,
    /// Only the engine's job touches it (one at a time: `Inbox::scheduled`).
    batch: Mutex<Batch<Arc<Stream>>>,
    /// The batch's counts as of its last step (read without waiting for a running step).
    counts: Mutex<Counts>,
}

struct Inbox {
    waiting: VecDeque<Arc<Stream>>,
    /// A tick is queued or running.
    scheduled: bool,
}

impl Engine {
    fn new(max_sequences: usize) -> Engine {
        Engine {
            inbox: Mutex::new(Inbox {
                waiting: VecDeque::new(),
                scheduled: false,
            }),
            batch: Mutex::new(Batch::new(max_sequences)),
            counts: Mutex::new(Counts::default()),
        }
    }

    /// Queues a generation; starts the engine's job chain when it is idle.
    fn add(self: &Arc<Self>, stream: Arc<Stream>) {
        let mut inbox = lock(&self.inbox);
        inbox.waiting.push_back(stream);
        if !inbox.scheduled {
            inbox.scheduled = true;
            let engine = self.clone();
            executor::submit(Box::new(move || tick(engine)));
        }
    }
}

/// One round of the engine on an executor instance: see the module comment.
fn tick(engine: Arc<Engine>) {
    let mut batch = lock(&engine.batch);
    // Generations whose JS thread is tearing down get nothing more; the rest are marked
    // running on this instance until their pieces are posted (the teardown waits for that).
    let mut running: Vec<Running> = Vec::new();
    for (stream, _) in batch.remove_where(|s| s.queue.is_closing()) {
        stream.aborted.store(true, Ordering::SeqCst);
    }
    running.extend(batch.tags().filter_map(|s| s.queue.running()));
    for (stream, _) in batch.remove_where(|s| s.aborted.load(Ordering::SeqCst)) {
        stream.end(Finish::Aborted, None);
    }
    {
        let mut inbox = lock(&engine.inbox);
        let (gone, waiting) = std::mem::take(&mut inbox.waiting)
            .into_iter()
            .partition(|s| s.aborted.load(Ordering::SeqCst));
        inbox.waiting = waiting;
        for stream in gone {
            stream.end(Finish::Aborted, None);
        }
    }
    // Waiting generations join while rows are free: all of them into an idle batch, else until
    // this round's prompts reach PREFILL_BUDGET tokens (a prefill delays the running
    // sequences' next token by its own time).
    let idle = batch.is_empty();
    let mut prefilled = 0;
    while !batch.is_full() && (idle || prefilled < PREFILL_BUDGET) {
        let Some(stream) = lock(&engine.inbox).waiting.pop_front() else {
            break;
        };
        let Some(guard) = stream.queue.running() else {
            continue;
        };
        let origin = Some(stream.queue.clone());
        let admitted = warnings::with_origin(origin, || catch_panic(|| admit(&mut batch, &stream)));
        if let Err(e) = admitted {
            stream.end(Finish::Aborted, Some(&e));
        }
        prefilled += stream.prompt_tokens.load(Ordering::SeqCst).max(1);
        running.push(guard);
    }
    if !batch.is_empty() {
        // Every generation of the batch is of this engine's model.
        let first = batch.tags().next().cloned();
        let (origin, model) = first.map(|s| (s.queue.clone(), s.model.clone())).unzip();
        let events = warnings::with_origin(origin, || {
            catch_panic(|| Ok(model.map(|m| batch.step(&m)).unwrap_or_default()))
        });
        match events {
            Ok(events) => events.into_iter().for_each(post_event),
            Err(e) => {
                // A panic inside the step: the batch's state is unknown; end every generation.
                for (stream, _) in batch.clear() {
                    stream.end(Finish::Aborted, Some(&e));
                }
            }
        }
    }
    drop(running);
    *lock(&engine.counts) = batch.counts();
    let idle = batch.is_empty();
    drop(batch);
    let mut inbox = lock(&engine.inbox);
    if idle && inbox.waiting.is_empty() {
        inbox.scheduled = false;
    } else {
        drop(inbox);
        executor::submit(Box::new(move || tick(engine)));
    }
}

/// Runs a generation's prompt on a row of the batch (tokenizing it first unless done ahead).
fn admit(batch: &mut Batch<Arc<Stream>>, stream: &Arc<Stream>) -> anyhow::Result<()> {
    let prepared = lock(&stream.prepared).take();
    let seq = match prepared {
        Some(seq) => seq,
        None => prepare(stream)?,
    };
    batch.admit(&stream.model, stream.clone(), seq)
}

/// Tokenizes a generation's prompt: its sequence, ready to join a batch.
fn prepare(stream: &Stream) -> anyhow::Result<Sequence> {
    let Some((prompt, request)) = lock(&stream.start).take() else {
        bail_code!(Code::Internal, "the generation was started twice");
    };
    let ids = stream.model.prompt_ids(prompt)?;
    stream.prompt_tokens.store(ids.len(), Ordering::SeqCst);
    stream.model.sequence(ids, request)
}

/// Whether a prompt is long enough to tokenize apart from the engine (`LONG_PROMPT_BYTES`).
fn is_long(prompt: &Prompt) -> bool {
    match prompt {
        Prompt::Text(text) => text.len() > LONG_PROMPT_BYTES,
        Prompt::Messages(messages) => {
            let bytes: usize = messages
                .iter()
                .filter_map(|m| m["content"].as_str())
                .map(str::len)
                .sum();
            bytes > LONG_PROMPT_BYTES
        }
        Prompt::Ids(_) => false,
    }
}

/// Queues a generation on its engine: a long prompt after it was tokenized on a thread of its
/// own (the engine's steps go on meanwhile), any other at once.
fn enqueue(engine: &Arc<Engine>, stream: Arc<Stream>) {
    let long = lock(&stream.start).as_ref().is_some_and(|(p, _)| is_long(p));
    if !long {
        return engine.add(stream);
    }
    let (engine_ahead, stream_ahead) = (engine.clone(), stream.clone());
    let spawned = std::thread::Builder::new()
        .name("torch-node-prompt".into())
        .spawn(move || {
            let (engine, stream) = (engine_ahead, stream_ahead);
            // The JS thread tearing down: nothing to deliver to.
            let Some(running) = stream.queue.running() else {
                return;
            };
            let origin = Some(stream.queue.clone());
            match warnings::with_origin(origin, || catch_panic(|| prepare(&stream))) {
                Ok(seq) => {
                    *lock(&stream.prepared) = Some(seq);
                    engine.add(stream);
                }
                Err(e) => stream.end(Finish::Aborted, Some(&e)),
            }
            drop(running);
        });
    if spawned.is_err() {
        // No thread to be had: the engine tokenizes it, as a short one.
        engine.add(stream);
    }
}

fn post_event(event: Event<Arc<Stream>>) {
    event.tag.post(Step {
        text: event.piece.text,
        tokens: event.piece.tokens,
        prompt_tokens: 0,
        finish: event.finish.map(Finish::name),
        error: event.error.as_ref().map(describe),
    });
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
        max_sequences: o["maxSequences"].as_u64().map(|n| n as usize),
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
    slot: ModuleSlot<Model>,
    engine: Arc<Engine>,
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
                engine: Arc::new(Engine::new(model.max_sequences)),
                slot: ModuleSlot::new("CausalLM", model),
            },
        )
    }

    /// @internal The generation defaults and limits, as JSON: `{maxContext, maxSequences, maxNewTokens,
    /// temperature, topK, topP, minP, repetitionPenalty, eos, dtype}`.
    #[napi(skip_typescript)]
    pub fn info(&self) -> Outcome<String> {
        guard(|| {
            let m = self.slot.get()?;
            let d = &m.defaults;
            Ok(serde_json::json!({
                "maxContext": m.max_context,
                "maxSequences": m.max_sequences,
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
                prepared: Mutex::new(None),
                prompt_tokens: AtomicUsize::new(0),
                aborted: AtomicBool::new(false),
                queue,
                callback: Mutex::new(Some(on_piece.create_ref()?)),
            });
            // Keeps the event loop alive until the last piece has been delivered.
            queue::expect(env.raw(), &stream.queue);
            enqueue(&self.engine, stream.clone());
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

    /// @internal What the engine has run, as JSON: `{steps, rows, prefills}` (program calls
    /// for decode steps, the sequences they carried, and prompts run).
    #[napi(skip_typescript)]
    pub fn counts(&self) -> String {
        let c = lock(&self.engine.counts).to_owned();
        serde_json::json!({"steps": c.steps, "rows": c.rows, "prefills": c.prefills}).to_string()
    }

    /// @internal Frees the model once running generations end.
    #[napi(skip_typescript)]
    pub fn dispose(&self) {
        self.slot.dispose()
    }
}

#[napi]
impl JsGeneration {
    /// @internal Stops the generation: its row of the cache is freed as the step running now
    /// ends (at once when it waits for a row); the last piece, `finishReason: 'aborted'`,
    /// still arrives.
    #[napi(skip_typescript)]
    pub fn abort(&self) {
        self.stream.aborted.store(true, Ordering::SeqCst);
    }
}
