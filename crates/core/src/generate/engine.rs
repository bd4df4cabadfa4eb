//! The generation engine of one loaded model: one admission queue, one batch, and the round
//! (`tick`) that runs while it has work.
//!
//! Each round runs as one job of the executor (`Schedule`): it frees the rows of aborted
//! generations, admits waiting ones (`super::admission` decides which; each prompt is
//! tokenized and run there, so a chat template never blocks JS; a prompt over 16 KiB, or one
//! with images (their vision program), is made ahead on a thread of its own, so it stalls no
//! step), runs one step for every
//! sequence, hands each generation's new text to its `Sink`, and schedules the next round; each
//! job goes to the back of the executor's queue, so other work takes turns with the steps.
//!
//! A generation's lifecycle (`State`, each transition a match arm of `State::on`):
//! ```text
//!   Queued ──admit──▶ Prefilling ──prefilled──▶ Decoding ──end──▶ Ending ──delivered──▶ Finished
//!     │                   └──────────error──────────┴───────────────▲
//!     └──abort──▶ Finished(aborted)   Prefilling, Decoding ──abort──▶ Aborting ──freed──▶ Finished
//! ```
//! A generation holds a slot (`stats().active`, and one of `maxSequences + maxQueue`) from
//! `admit` until its caller has its last piece (`Output::settled` is dropped) or aborts it:
//! as the caller sees it, not as the round frees the row (the round frees an aborted row at
//! its start). So a caller busy starting calls sees the same bound however fast rows free.
use super::admission::{Admission, Round};
use super::batch::{Batch, Counts, Event};
use super::decoder::{Decoder, Finish, Prompt};
pub use super::lifecycle::{Output, Settled, Sink, State, Transition};
use super::prefix::PrefixStats;
use super::request::Request;
use super::sequence::Sequence;
use crate::error::{bail_code, catch_panic, Code};
use anyhow::Result;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// How a generation starts: its prompt, or its sequence once tokenized.
enum Start {
    /// Both boxed: a generation's settings and its sequence are hundreds of bytes, and this
    /// moves between states.
    Prompt(Prompt, Box<Request>),
    Ready(Box<Sequence>),
    Taken,
}

/// One generation: its sink, its state, what it starts from.
pub struct Generation<S: Sink> {
    sink: S,
    /// Changed under the engine's `shared` lock only (with the admission counts).
    state: Mutex<State>,
    start: Mutex<Start>,
    /// False while a long prompt is tokenized apart (it may not join before).
    ready: std::sync::atomic::AtomicBool,
    prompt_tokens: AtomicUsize,
}

impl<S: Sink> Generation<S> {
    pub fn state(&self) -> State {
        *lock(&self.state)
    }

    pub fn sink(&self) -> &S {
        &self.sink
    }

    fn post(&self, mut out: Output) {
        out.prompt_tokens = self.prompt_tokens.load(Ordering::SeqCst);
        self.sink.post(out);
    }
}

/// Runs a job later (the executor's `submit`; tests run them by hand).
pub type Schedule = Arc<dyn Fn(Box<dyn FnOnce() + Send>) + Send + Sync>;

/// An engine's limits.
#[derive(Clone, Debug)]
pub struct Config {
    pub max_sequences: usize,
    /// Calls waiting for a row before `QueueFull` (None: no bound).
    pub max_queue: Option<usize>,
    /// Prompt tokens that may join a running batch in one round.
    pub prefill_budget: usize,
    /// A prompt of more bytes is tokenized on a thread of its own before it may join: a 10 MB
    /// prompt took 9 s to tokenize, and inside a round every other generation would wait.
    pub long_prompt_bytes: usize,
    /// The prefix cache's bound in tokens (0: none).
    pub prefix_cache_tokens: usize,
    /// Speculative decoding by prompt lookup (None: off; `Speculation::check` the decoder first).
    pub speculation: Option<super::lookup::Speculation>,
}

impl Config {
    pub fn new(max_sequences: usize) -> Config {
        Config {
            max_sequences,
            max_queue: Some(64),
            prefill_budget: 512,
            long_prompt_bytes: 16 << 10,
            prefix_cache_tokens: 0,
            speculation: None,
        }
    }
}

/// What `stats()` reports.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Stats {
    pub active: usize,
    pub queued: usize,
    pub counts: Counts,
    pub prefix: Option<PrefixStats>,
}

struct Shared<S: Sink> {
    admission: Admission<Arc<Generation<S>>>,
    /// A round is scheduled or running.
    scheduled: bool,
    /// `close()` was called: no new generation; the decoder goes once the last one ends.
    closed: bool,
}

pub struct Engine<D: Decoder, S: Sink> {
    /// Itself, for the `Settled` of the pieces it sends.
    me: std::sync::Weak<Self>,
    /// None once closed and idle (the model's memory goes with it).
    decoder: Mutex<Option<Arc<D>>>,
    config: Config,
    schedule: Schedule,
    shared: Mutex<Shared<S>>,
    /// Only the round touches it (one at a time: `Shared::scheduled`).
    batch: Mutex<Batch<Arc<Generation<S>>>>,
    /// The batch's counts as of its last round (read without waiting for a running step).
    counts: Mutex<(Counts, Option<PrefixStats>)>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn is_long(prompt: &Prompt, limit: usize) -> bool {
    match prompt {
        Prompt::Text(text) => text.len() > limit,
        // Images run through the vision program as the prompt is made: apart, so no step waits.
        Prompt::Multimodal(..) => true,
        Prompt::Messages(chat) => chat.size() > limit,
        Prompt::Ids(_) => false,
    }
}

impl<D: Decoder, S: Sink> Engine<D, S> {
    pub fn new(decoder: Arc<D>, config: Config, schedule: Schedule) -> Arc<Self> {
        Arc::new_cyclic(|me| Engine {
            me: me.clone(),
            shared: Mutex::new(Shared {
                admission: Admission::new(config.max_sequences, config.max_queue),
                scheduled: false,
                closed: false,
            }),
            batch: Mutex::new(
                Batch::new(config.max_sequences)
                    .with_prefix_cache(config.prefix_cache_tokens)
                    .with_speculation(config.speculation),
            ),
            // The prefix cache's bound shows before the first round.
            counts: Mutex::new((
                Counts::default(),
                (config.prefix_cache_tokens > 0).then(|| PrefixStats {
                    max_tokens: config.prefix_cache_tokens,
                    ..PrefixStats::default()
                }),
            )),
            decoder: Mutex::new(Some(decoder)),
            config,
            schedule,
        })
    }

    /// The decoder, or `Disposed` once closed.
    pub fn decoder(&self) -> Result<Arc<D>> {
        if lock(&self.shared).closed {
            bail_code!(
                Code::Disposed,
                "this model was disposed; it can no longer be used"
            );
        }
        self.running_decoder()
    }

    /// The decoder while generations may still need it (None once closed and idle).
    fn running_decoder(&self) -> Result<Arc<D>> {
        match &*lock(&self.decoder) {
            Some(d) => Ok(d.clone()),
            None => bail_code!(
                Code::Disposed,
                "this model was disposed; it can no longer be used"
            ),
        }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// No new generation: the waiting ones end with `Disposed`; the running ones go on until
    /// they end or are aborted, and then the decoder and the prefix cache are dropped.
    pub fn close(&self) {
        let mut shared = lock(&self.shared);
        shared.closed = true;
        let mut waiting = Vec::new();
        while let Some(g) = shared.admission.remove(|_| true) {
            waiting.push(g);
        }
        let idle = !shared.scheduled;
        if idle {
            lock(&self.decoder).take();
        }
        drop(shared);
        if idle {
            self.release_prefix_cache();
        }
        for g in waiting {
            let e = crate::error::fail(Code::Disposed, "this model was disposed");
            self.finish(&g, Finish::Aborted, Some(e), Output::default());
        }
    }

    /// Queues a generation (`QueueFull` past `max_sequences + max_queue`); its pieces go to
    /// `sink`. A long prompt is tokenized on a thread of its own first.
    pub fn start(self: &Arc<Self>, prompt: Prompt, request: Request, sink: S) -> Result<Arc<Generation<S>>> {
        // A long prompt, an output format to compile, or log-probabilities to spell (the token
        // table is built on first use): made ready apart from the rounds.
        let long = is_long(&prompt, self.config.long_prompt_bytes)
            || request.format.is_some()
            || request.logprobs.is_some();
        let g = Arc::new(Generation {
            sink,
            state: Mutex::new(State::Queued),
            start: Mutex::new(Start::Prompt(prompt, Box::new(request))),
            ready: (!long).into(),
            prompt_tokens: AtomicUsize::new(0),
        });
        {
            let mut shared = lock(&self.shared);
            if shared.closed {
                bail_code!(
                    Code::Disposed,
                    "this model was disposed; it can no longer be used"
                );
            }
            shared.admission.push(g.clone())?;
        }
        if !long {
            self.wake();
            return Ok(g);
        }
        let (engine, ahead) = (self.clone(), g.clone());
        let spawned = std::thread::Builder::new()
            .name("torch-node-prompt".into())
            .spawn(move || engine.prepare_apart(&ahead));
        if spawned.is_err() {
            // No thread to be had: the round tokenizes it, as a short one.
            g.ready.store(true, Ordering::SeqCst);
            self.wake();
        }
        Ok(g)
    }

    /// On its own thread: tokenizes a long prompt, then lets it join.
    fn prepare_apart(self: &Arc<Self>, g: &Arc<Generation<S>>) {
        let Some(hold) = g.sink.hold() else {
            return self.drop_queued(g, None);
        };
        match g.sink.scope(|| catch_panic(|| self.prepare(g))) {
            Ok(seq) => {
                *lock(&g.start) = Start::Ready(Box::new(seq));
                g.ready.store(true, Ordering::SeqCst);
                self.wake();
            }
            Err(e) => self.drop_queued(g, Some(e)),
        }
        drop(hold);
    }

    /// A waiting generation that cannot start: out of the queue, ended (with `error`).
    fn drop_queued(&self, g: &Arc<Generation<S>>, error: Option<anyhow::Error>) {
        let mut shared = lock(&self.shared);
        if shared.admission.remove(|x| Arc::ptr_eq(x, g)).is_some() {
            drop(shared);
            self.finish(g, Finish::Aborted, error, Output::default());
        }
    }

    /// Tokenizes a generation's prompt: its sequence, ready to join a batch.
    fn prepare(&self, g: &Generation<S>) -> Result<Sequence> {
        let Start::Prompt(prompt, request) = std::mem::replace(&mut *lock(&g.start), Start::Taken) else {
            bail_code!(Code::Internal, "the generation was started twice");
        };
        let decoder = self.running_decoder()?;
        let prepared = decoder.prepare(prompt)?;
        g.prompt_tokens.store(prepared.ids.len(), Ordering::SeqCst);
        request.check_context(prepared.ids.len(), decoder.max_context())?;
        Ok(Sequence::new(&*decoder, prepared.ids, *request)?.with_images(prepared.images))
    }

    /// Ends a generation: at once while it waits (its last piece sent now), else its row is
    /// freed as the running step ends; the last piece, `aborted`, still comes.
    pub fn abort(&self, g: &Arc<Generation<S>>) {
        let mut shared = lock(&self.shared);
        if shared.admission.remove(|x| Arc::ptr_eq(x, g)).is_some() {
            drop(shared);
            return self.finish(g, Finish::Aborted, None, Output::default());
        }
        self.apply(&mut shared, g, Transition::Abort);
    }

    /// Ends `g` with `finish` and sends `out` as its last piece (with `error`).
    fn finish(&self, g: &Arc<Generation<S>>, finish: Finish, error: Option<anyhow::Error>, out: Output) {
        self.transition(g, Transition::End(finish));
        let mut out = Output {
            finish: Some(finish),
            error,
            ..out
        };
        if matches!(g.state(), State::Ending(_)) {
            let (engine, g) = (self.me.clone(), g.clone());
            out.settled = Some(Settled(Some(Box::new(move || {
                if let Some(engine) = engine.upgrade() {
                    // Its row is free now: a waiting call may join.
                    engine.transition(&g, Transition::Delivered);
                    engine.wake();
                }
            }))));
        }
        g.post(out);
    }

    /// Moves `g` on by `t`, keeping the admission's count of rows held in step.
    fn apply(&self, shared: &mut Shared<S>, g: &Generation<S>, t: Transition) {
        let mut state = lock(&g.state);
        let before = *state;
        *state = before.on(t);
        if before.holds_row() && !state.holds_row() {
            shared.admission.release();
        }
    }

    fn transition(&self, g: &Generation<S>, t: Transition) {
        self.apply(&mut lock(&self.shared), g, t);
    }

    pub fn stats(&self) -> Stats {
        let (active, queued) = lock(&self.shared).admission.counts();
        let (counts, prefix) = *lock(&self.counts);
        Stats {
            active,
            queued,
            counts,
            prefix,
        }
    }

    /// Schedules a round unless one is scheduled or running.
    fn wake(self: &Arc<Self>) {
        let mut shared = lock(&self.shared);
        if !shared.scheduled {
            shared.scheduled = true;
            drop(shared);
            let engine = self.clone();
            (self.schedule)(Box::new(move || engine.tick()));
        }
    }

    /// One round: see the module doc.
    pub fn tick(self: Arc<Self>) {
        let mut batch = lock(&self.batch);
        let mut holds = Vec::new();
        let freed = self.free_rows(&mut batch, &mut holds);
        match (freed, self.running_decoder()) {
            (Ok(()), Ok(decoder)) => {
                self.admit(&*decoder, &mut batch, &mut holds);
                self.step(&*decoder, &mut batch);
            }
            (Ok(()), Err(e)) => self.end_all(&mut batch, &e),
            (Err(_), _) => {}
        }
        drop(holds);
        *lock(&self.counts) = (batch.counts(), batch.prefix_cache().map(|p| p.stats()));
        let idle = batch.is_empty();
        drop(batch);
        let mut shared = lock(&self.shared);
        if idle && !shared.admission.can_admit(|g| g.ready.load(Ordering::SeqCst)) {
            shared.scheduled = false;
            let closed = shared.closed;
            if closed {
                lock(&self.decoder).take();
            }
            drop(shared);
            if closed {
                self.release_prefix_cache();
            }
        } else {
            drop(shared);
            let engine = self.clone();
            (self.schedule)(Box::new(move || engine.tick()));
        }
    }

    /// A closed engine's prefix cache goes with its decoder, not when the engine itself is dropped
    /// (a served model unloaded while its JS object waits for the GC held its cache's memory:
    /// docs/serving.md, the soak). Only after `shared` is released: a round locks the batch first.
    fn release_prefix_cache(&self) {
        let mut batch = lock(&self.batch);
        batch.drop_prefix_cache();
        // The counters stay (a disposed model's stats), the held spans read 0.
        if let Some(p) = lock(&self.counts).1.as_mut() {
            (p.tokens, p.entries) = (0, 0);
        }
    }

    #[cfg(test)]
    pub(super) fn batch_prefix_is_dropped(&self) -> bool {
        lock(&self.batch).prefix_cache().is_none()
    }

    /// Drops the rows of generations whose receiver is gone (nothing is sent) and of aborted
    /// ones (their last piece is sent); holds the receivers of the rest.
    fn free_rows(&self, batch: &mut Batch<Arc<Generation<S>>>, holds: &mut Vec<S::Hold>) -> Result<()> {
        let result = (|| {
            for (g, _) in batch.remove_where(|g| g.sink.is_gone())? {
                self.transition(&g, Transition::End(Finish::Aborted));
                self.transition(&g, Transition::Delivered);
            }
            holds.extend(batch.tags().filter_map(|g| g.sink.hold()));
            for (g, _) in batch.remove_where(|g| g.state() == State::Aborting)? {
                self.finish(&g, Finish::Aborted, None, Output::default());
            }
            Ok(())
        })();
        if let Err(e) = &result {
            self.end_all(batch, e);
        }
        result
    }

    /// Every generation of the batch ends with `error` (the batch's state is unknown).
    fn end_all(&self, batch: &mut Batch<Arc<Generation<S>>>, error: &anyhow::Error) {
        let (code, message) = crate::error::describe(error);
        for (g, _) in batch.clear() {
            let e = crate::error::fail(code, message.clone());
            self.finish(&g, Finish::Aborted, Some(e), Output::default());
        }
    }

    /// Waiting generations join as `Admission::next` allows.
    fn admit(&self, decoder: &D, batch: &mut Batch<Arc<Generation<S>>>, holds: &mut Vec<S::Hold>) {
        let mut round: Round = lock(&self.shared)
            .admission
            .round(batch.len(), self.config.prefill_budget);
        loop {
            let g = {
                let mut shared = lock(&self.shared);
                let Some(g) = shared
                    .admission
                    .next(&mut round, |g| g.ready.load(Ordering::SeqCst))
                else {
                    break;
                };
                self.apply(&mut shared, &g, Transition::Admit);
                g
            };
            let Some(hold) = g.sink.hold() else {
                self.transition(&g, Transition::End(Finish::Aborted));
                self.transition(&g, Transition::Delivered);
                continue;
            };
            let joined = g.sink.scope(|| {
                catch_panic(|| {
                    let start = std::mem::replace(&mut *lock(&g.start), Start::Taken);
                    let seq = match start {
                        Start::Ready(seq) => *seq,
                        start => {
                            *lock(&g.start) = start;
                            self.prepare(&g)?
                        }
                    };
                    batch.admit(decoder, g.clone(), seq)
                })
            });
            match joined {
                Ok(()) => self.transition(&g, Transition::Prefilled),
                Err(e) => self.finish(&g, Finish::Aborted, Some(e), Output::default()),
            }
            round.charge(g.prompt_tokens.load(Ordering::SeqCst));
            holds.push(hold);
        }
    }

    /// One token for every sequence of the batch; each generation's text to its sink.
    fn step(&self, decoder: &D, batch: &mut Batch<Arc<Generation<S>>>) {
        let Some(first) = batch.tags().next().cloned() else {
            return;
        };
        let events = first.sink.scope(|| catch_panic(|| Ok(batch.step(decoder))));
        match events {
            Ok(events) => events.into_iter().for_each(|e| self.deliver(e)),
            Err(e) => self.end_all(batch, &e),
        }
    }

    fn deliver(&self, e: Event<Arc<Generation<S>>>) {
        let out = Output {
            text: e.piece.text,
            tokens: e.piece.tokens,
            logprobs: e.piece.logprobs,
            ..Output::default()
        };
        match e.finish {
            Some(f) => self.finish(&e.tag, f, e.error, out),
            None => e.tag.post(out),
        }
    }
}
