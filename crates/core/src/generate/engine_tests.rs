//! The engine's scheduler under `cargo test`, on a fake decoder (no libtorch program): joins,
//! aborts at each state, the prefill budget, stale rows, QueueFull, the prefix cache, output
//! formats.
//!
//! The fake writes each token's id into its row's cache slot at its position, and its logits
//! pick `65 + (sum of the row's slots 0..=p) % 26` (an ASCII capital): every token depends on
//! the whole of its row's cache up to its position, as a real model's attention does, and on
//! nothing past it. A row that read another sequence's keys, or a cache row moved wrongly,
//! changes the tokens.
use super::constraint::{Format, Vocabulary};
use super::decoder::{CacheShape, Decoder, Finish, Prompt};
use super::engine::{Config, Engine, Generation, Output, Schedule, Sink, State};
use super::request::{Defaults, Options, Request};
use anyhow::Result;
use serde_json::Value as Json;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use tch::{Kind, Tensor};

/// Called at the start of each program call with its row count.
type Hook = Box<dyn FnMut(usize) + Send>;

#[derive(Default)]
pub(super) struct Fake {
    /// Called at the start of each program call with its row count.
    hook: Mutex<Option<Hook>>,
    /// Tokens run through the program, prompts and steps.
    ran: AtomicUsize,
    /// Each call's cache capacity (slots per row) and the highest position it wrote.
    calls: Mutex<Vec<(i64, i64)>>,
}

impl Decoder for Fake {
    fn cache_shape(&self) -> CacheShape {
        CacheShape {
            layers: 1,
            kv_heads: 1,
            head_dim: 1,
            dtype: Kind::Double,
        }
    }
    fn max_context(&self) -> usize {
        256
    }
    fn vocab_size(&self) -> usize {
        128
    }
    fn tokenize(&self, prompt: Prompt) -> Result<Vec<u32>> {
        match prompt {
            Prompt::Text(t) => Ok(t.bytes().map(u32::from).collect()),
            Prompt::Ids(ids) => Ok(ids),
            Prompt::Messages(_) | Prompt::Multimodal(..) => anyhow::bail!("no template"),
        }
    }
    fn is_eos(&self, token: u32) -> bool {
        token == 0
    }
    fn decode(&self, ids: &[u32]) -> Result<String> {
        Ok(ids.iter().map(|&i| i as u8 as char).collect())
    }
    fn vocabulary(&self) -> Result<Arc<Vocabulary>> {
        static VOCABULARY: OnceLock<Arc<Vocabulary>> = OnceLock::new();
        Ok(VOCABULARY.get_or_init(byte_vocabulary).clone())
    }
    fn run(&self, ids: &[i64], positions: &[i64], rows: usize, cache: Vec<Tensor>) -> Result<Vec<Vec<f32>>> {
        self.run_keep(ids, positions, rows, 1, cache)
    }
    fn keep_logits(&self) -> usize {
        16
    }
    /// Each of a row's last `keep` tokens' logits read the row's slots up to its own position.
    fn run_keep(
        &self,
        ids: &[i64],
        positions: &[i64],
        rows: usize,
        keep: usize,
        cache: Vec<Tensor>,
    ) -> Result<Vec<Vec<f32>>> {
        if let Some(hook) = self.hook.lock().unwrap().as_mut() {
            hook(rows);
        }
        self.ran.fetch_add(ids.len(), Ordering::SeqCst);
        let top = positions.iter().copied().max().unwrap_or(0);
        self.calls.lock().unwrap().push((cache[0].size()[2], top));
        let cols = ids.len() / rows;
        let mut out = Vec::new();
        for r in 0..rows {
            let row = cache[0].f_narrow(0, r as i64, 1)?;
            for c in 0..cols {
                let mut slot = row.f_narrow(2, positions[r * cols + c], 1)?;
                let _ = slot.f_fill_(ids[r * cols + c] as f64)?;
            }
            for c in cols - keep..cols {
                let p = positions[r * cols + c];
                let sum = f64::try_from(row.f_narrow(2, 0, p + 1)?.f_sum(Kind::Double)?)? as u64;
                let mut logits = vec![0.0; 128];
                logits[65 + (sum % 26) as usize] = 1.0;
                out.push(logits);
            }
        }
        Ok(out)
    }
}

/// A sink that records what it is sent.
#[derive(Clone, Default)]
pub(super) struct Record {
    pub(super) out: Arc<Mutex<Vec<Output>>>,
    gone: Arc<AtomicBool>,
}

impl Sink for Record {
    type Hold = ();
    fn post(&self, mut out: Output) {
        // Delivered: the slot is free.
        out.settled.take();
        self.out.lock().unwrap().push(out);
    }
    fn is_gone(&self) -> bool {
        self.gone.load(Ordering::SeqCst)
    }
    fn hold(&self) -> Option<()> {
        (!self.is_gone()).then_some(())
    }
}

/// The fake's vocabulary as a byte-level tokenizer: token i is the byte i (what `decode` says),
/// token 0 the EOS.
fn byte_vocabulary() -> Arc<Vocabulary> {
    // GPT-2's bytes-to-unicode: printable bytes stand for themselves, the others for 256 + n.
    let printable = |b: u32| (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
    let spell = |b: u32| match printable(b) {
        true => char::from_u32(b),
        false => char::from_u32(256 + (0..b).filter(|&x| !printable(x)).count() as u32),
    };
    let vocab: serde_json::Map<String, Json> = (0..128u32)
        .map(|i| (spell(i).unwrap().to_string(), Json::from(i)))
        .collect();
    let json = serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": [], "normalizer": null,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
        "post_processor": null,
        "decoder": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
            "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
            "vocab": vocab, "merges": []}
    });
    Vocabulary::from_tokenizer_json(&serde_json::to_vec(&json).unwrap(), &[0], 128).unwrap()
}

impl Record {
    pub(super) fn text(&self) -> String {
        self.out.lock().unwrap().iter().map(|o| o.text.as_str()).collect()
    }
    pub(super) fn finish(&self) -> Option<Finish> {
        self.out.lock().unwrap().last().and_then(|o| o.finish)
    }
    pub(super) fn pieces(&self) -> usize {
        self.out.lock().unwrap().len()
    }
}

type Jobs = Arc<Mutex<VecDeque<Box<dyn FnOnce() + Send>>>>;

pub(super) struct Rig {
    pub(super) engine: Arc<Engine<Fake, Record>>,
    fake: Arc<Fake>,
    jobs: Jobs,
}

pub(super) fn rig(config: Config) -> Rig {
    let jobs: Jobs = Arc::default();
    let queue = jobs.clone();
    let schedule: Schedule = Arc::new(move |job| queue.lock().unwrap().push_back(job));
    let fake = Arc::new(Fake::default());
    Rig {
        engine: Engine::new(fake.clone(), config, schedule),
        fake,
        jobs,
    }
}

pub(super) fn request(max_new_tokens: u64) -> Request {
    Defaults::from_config(&Json::Null)
        .request(&Options {
            max_new_tokens: Some(max_new_tokens),
            ..Options::default()
        })
        .unwrap()
}

impl Rig {
    pub(super) fn start(&self, prompt: &str, n: u64) -> (Arc<Generation<Record>>, Record) {
        let sink = Record::default();
        let g = self
            .engine
            .start(Prompt::Text(prompt.into()), request(n), sink.clone())
            .unwrap();
        (g, sink)
    }
    /// Starts the prompts in turn, prompt i after `apart * i` more rounds (the first at once):
    /// their sinks.
    pub(super) fn start_apart(&self, prompts: &[(&str, u64)], apart: usize) -> Vec<Record> {
        (prompts.iter().enumerate())
            .map(|(i, &(p, n))| {
                (0..apart * i).for_each(|_| {
                    self.round();
                });
                self.start(p, n).1
            })
            .collect()
    }
    /// Runs the next scheduled round; false when none is scheduled.
    pub(super) fn round(&self) -> bool {
        let job = self.jobs.lock().unwrap().pop_front();
        job.map(|j| j()).is_some()
    }
    pub(super) fn run_all(&self) {
        while self.round() {}
    }
}

/// Each prompt's text when it runs alone.
fn alone(prompts: &[(&str, u64)]) -> Vec<String> {
    prompts
        .iter()
        .map(|&(p, n)| {
            let r = rig(Config::new(1));
            let (_, sink) = r.start(p, n);
            r.run_all();
            sink.text()
        })
        .collect()
}

const PROMPTS: [(&str, u64); 4] = [
    ("Once upon a time", 30),
    ("Hello", 7),
    ("The quick brown fox", 19),
    ("AB", 12),
];

#[test]
fn generations_that_join_and_leave_at_different_steps_give_their_tokens_alone() {
    let want = alone(&PROMPTS);
    assert!(want.iter().all(|t| t.len() > 5), "{want:?}");
    // Three rows, four calls: the fourth takes a row another left (with its stale keys past
    // its positions, and rows moved down as earlier ones end).
    let r = rig(Config::new(3));
    let sinks = r.start_apart(&PROMPTS, 1);
    r.run_all();
    for (i, sink) in sinks.iter().enumerate() {
        assert_eq!(sink.text(), want[i], "prompt {i}");
        assert_eq!(sink.finish(), Some(Finish::Length));
    }
    let s = r.engine.stats();
    assert_eq!((s.active, s.queued, s.counts.prefills), (0, 0, 4));
    assert!(s.counts.steps < s.counts.rows, "{s:?}: rows shared steps");
}

#[test]
fn the_cache_grows_with_the_positions_not_to_each_sequences_whole_need() {
    use super::kv_cache::grown_capacity;
    assert_eq!(grown_capacity(0, 5, 300), 32);
    assert_eq!(grown_capacity(0, 1, 1), 2);
    assert_eq!(grown_capacity(32, 30, 300), 32, "enough: kept");
    assert_eq!(grown_capacity(32, 33, 300), 64);
    assert_eq!(grown_capacity(512, 513, 2000), 576, "an eighth more");
    assert_eq!(
        grown_capacity(64, 70, 80),
        80,
        "not past what a sequence can reach"
    );
    assert_eq!(grown_capacity(64, 90, 80), 90, "but what is needed");

    // Sequences crossing several growths, joining at different rounds and ending at different
    // steps (the rows moved while the cache grows): each gives its tokens alone.
    let prompts = [("Once upon a time", 150), ("AB", 90), ("The quick brown fox", 40)];
    // The fake's rule worked out by hand: each new token is 65 + (sum of the row's tokens) % 26.
    let by_hand = |prompt: &str, n: u64| {
        let mut sum: u64 = prompt.bytes().map(u64::from).sum();
        (0..n)
            .map(|_| {
                let t = 65 + sum % 26;
                sum += t;
                t as u8 as char
            })
            .collect::<String>()
    };
    let want = alone(&prompts);
    for (i, &(p, n)) in prompts.iter().enumerate() {
        assert_eq!(want[i], by_hand(p, n), "prompt {i} alone");
    }
    let r = rig(Config::new(3));
    let sinks = r.start_apart(&prompts, 2);
    r.run_all();
    for (i, sink) in sinks.iter().enumerate() {
        assert_eq!(sink.text(), want[i], "prompt {i}");
    }
    let calls = r.fake.calls.lock().unwrap().clone();
    assert!(
        calls.iter().all(|&(c, top)| top < c),
        "a position past the capacity: {calls:?}"
    );
    assert!(
        calls.windows(2).all(|w| w[0].0 <= w[1].0),
        "the capacity never shrinks while live: {calls:?}"
    );
    // The first call (a 16-token prompt that may reach 166 slots) allocates 32, and the last
    // at most the longest sequence's 166.
    assert_eq!(calls[0].0, 32, "{calls:?}");
    assert!(calls.last().unwrap().0 <= 166, "{calls:?}");
    let sizes: std::collections::BTreeSet<i64> = calls.iter().map(|&(c, _)| c).collect();
    assert!(sizes.len() >= 4, "grown step by step: {sizes:?}");
}

#[test]
fn aborts_at_each_state_end_with_one_aborted_piece_and_free_the_row() {
    let r = rig(Config::new(1));
    let (running, run_sink) = r.start("Once upon a time", 100);
    let (queued, queued_sink) = r.start("Hello", 100);
    // Queued: ended at once, before any round.
    r.engine.abort(&queued);
    assert_eq!(queued.state(), State::Finished(Finish::Aborted));
    assert_eq!(
        (queued_sink.pieces(), queued_sink.finish()),
        (1, Some(Finish::Aborted))
    );
    assert_eq!(r.engine.stats().queued, 1, "the other one waits on");
    // Decoding: counted free at once; the next round frees the row and sends the last piece.
    r.round();
    r.round();
    assert_eq!(running.state(), State::Decoding);
    r.engine.abort(&running);
    assert_eq!((running.state(), r.engine.stats().active), (State::Aborting, 0));
    r.round();
    assert_eq!(running.state(), State::Finished(Finish::Aborted));
    assert_eq!(run_sink.finish(), Some(Finish::Aborted));
    assert!(!r.round(), "nothing left: no round scheduled");
    // Finished: nothing more.
    r.engine.abort(&running);
    assert_eq!(
        run_sink
            .out
            .lock()
            .unwrap()
            .iter()
            .filter(|o| o.finish.is_some())
            .count(),
        1
    );

    // Prefilling: aborted while its prompt runs.
    let r = Arc::new(rig(Config::new(2)));
    let (g, sink) = r.start("Hello there", 50);
    let (engine, target) = (r.engine.clone(), g.clone());
    *r.fake.hook.lock().unwrap() = Some(Box::new(move |_| {
        if target.state() == State::Prefilling {
            engine.abort(&target);
        }
    }));
    r.round();
    assert_eq!(g.state(), State::Aborting);
    r.run_all();
    assert_eq!(
        (g.state(), sink.finish()),
        (State::Finished(Finish::Aborted), Some(Finish::Aborted))
    );
    assert_eq!(r.engine.stats().active, 0);
}

#[test]
fn a_running_batch_admits_prompts_up_to_the_prefill_budget_an_idle_one_all() {
    let r = rig(Config {
        prefill_budget: 10,
        ..Config::new(8)
    });
    // Idle: all three 6-token prompts join the first round.
    let first: Vec<_> = (0..3).map(|i| r.start(&format!("abcde{i}"), 50).0).collect();
    r.round();
    assert!(first.iter().all(|g| g.state() == State::Decoding));
    // Running: 6 tokens, then 12 ≥ 10: two join this round, the third the next.
    let later: Vec<_> = (0..3).map(|i| r.start(&format!("fghij{i}"), 50).0).collect();
    r.round();
    let states: Vec<State> = later.iter().map(|g| g.state()).collect();
    assert_eq!(states, [State::Decoding, State::Decoding, State::Queued]);
    r.round();
    assert_eq!(later[2].state(), State::Decoding);
    assert_eq!(r.engine.stats().counts.prefills, 6);
}

#[test]
fn queue_full_past_max_sequences_plus_max_queue_and_receivers_gone_free_their_rows() {
    let r = rig(Config {
        max_queue: Some(1),
        ..Config::new(2)
    });
    let sinks: Vec<Record> = (0..3).map(|i| r.start(&format!("p{i}"), 20).1).collect();
    let e = r
        .engine
        .start(Prompt::Text("x".into()), request(2), Record::default())
        .err()
        .unwrap();
    assert_eq!(crate::error::describe(&e).0, crate::error::Code::QueueFull);
    r.round();
    assert_eq!((r.engine.stats().active, r.engine.stats().queued), (2, 1));
    // A receiver gone (its JS thread tearing down): its row goes, nothing is sent to it.
    sinks[0].gone.store(true, Ordering::SeqCst);
    let sent = sinks[0].pieces();
    r.run_all();
    assert_eq!(sinks[0].pieces(), sent);
    assert_eq!(sinks[2].finish(), Some(Finish::Length));
    assert_eq!(r.engine.stats().active, 0);
}

#[test]
fn errors_end_only_their_generation() {
    let r = rig(Config::new(2));
    let sink = Record::default();
    // A token id past the vocabulary: refused at admission, the others go on.
    r.engine
        .start(Prompt::Ids(vec![1, 500]), request(3), sink.clone())
        .unwrap();
    let (_, ok) = r.start("fine", 3);
    r.run_all();
    let out = sink.out.lock().unwrap();
    assert_eq!(out[0].finish, Some(Finish::Aborted));
    let (code, message) = crate::error::describe(out[0].error.as_ref().unwrap());
    assert_eq!(code, crate::error::Code::InvalidArg);
    assert!(message.contains("out of the vocabulary"), "{message}");
    assert_eq!((ok.finish(), ok.text().len()), (Some(Finish::Length), 3));
}

#[test]
fn the_prefix_cache_reuses_a_shared_prompt_start_and_gives_the_same_tokens() {
    let system = "You are a helpful assistant. Answer briefly. ";
    let prompts = [format!("{system}What is 2+2?"), format!("{system}Name a color.")];
    let without: Vec<String> = prompts
        .iter()
        .map(|p| {
            let r = rig(Config::new(2));
            let (_, sink) = r.start(p, 20);
            r.run_all();
            sink.text()
        })
        .collect();
    let r = rig(Config {
        prefix_cache_tokens: 1000,
        ..Config::new(2)
    });
    let mut with = Vec::new();
    let mut ran = Vec::new();
    for p in &prompts {
        let before = r.fake.ran.load(Ordering::SeqCst);
        let (_, sink) = r.start(p, 20);
        r.run_all();
        with.push(sink.text());
        ran.push(r.fake.ran.load(Ordering::SeqCst) - before);
    }
    assert_eq!(with, without);
    // The second prompt ran only its own end (and its 19 steps).
    assert_eq!(ran[1], prompts[1].len() - system.len() + 19);
    let p = r.engine.stats().prefix.unwrap();
    assert_eq!((p.hits, p.reused_tokens), (1, system.len() as u64));
    // Stored in whole blocks: the first prompt's 3, split after the shared 2 (the system prompt
    // ends mid-block), and the second prompt's own third block beside the first's.
    assert_eq!((p.entries, p.tokens), (3, 4 * super::prefix::BLOCK));
    assert_eq!(p.queried_tokens as usize, prompts[0].len() + prompts[1].len());
    // Closed and idle, the engine drops the cache's spans with the decoder (an unloaded model's
    // cache is not held until the engine itself is dropped); the counters stay.
    r.engine.close();
    let p = r.engine.stats().prefix.unwrap();
    assert_eq!((p.entries, p.tokens, p.hits), (0, 0, 1));
    assert!(r.engine.batch_prefix_is_dropped());
    // Closed while a round is scheduled: that round, finding the engine idle, drops it.
    let r = rig(Config {
        prefix_cache_tokens: 1000,
        ..Config::new(2)
    });
    let (_, first) = r.start(&prompts[0], 20);
    r.run_all();
    assert_eq!(first.text(), without[0]);
    let (_, waiting) = r.start(&prompts[1], 20);
    r.engine.close();
    assert!(!r.engine.batch_prefix_is_dropped());
    r.run_all();
    assert_eq!(waiting.finish(), Some(Finish::Aborted));
    assert!(r.engine.batch_prefix_is_dropped());
}

#[test]
fn a_slot_is_held_until_the_caller_has_the_last_piece_and_close_ends_the_waiting_disposed() {
    /// A sink that keeps the last piece undelivered (its `settled` alive) until told.
    #[derive(Clone, Default)]
    struct Slow(Arc<Mutex<Vec<Output>>>);
    impl Sink for Slow {
        type Hold = ();
        fn post(&self, out: Output) {
            self.0.lock().unwrap().push(out);
        }
        fn is_gone(&self) -> bool {
            false
        }
        fn hold(&self) -> Option<()> {
            Some(())
        }
    }
    let jobs: Jobs = Arc::default();
    let queue = jobs.clone();
    let schedule: Schedule = Arc::new(move |job| queue.lock().unwrap().push_back(job));
    let engine = Engine::new(
        Arc::new(Fake::default()),
        Config {
            max_queue: Some(0),
            ..Config::new(1)
        },
        schedule,
    );
    let sink = Slow::default();
    let g = engine
        .start(Prompt::Text("ab".into()), request(2), sink.clone())
        .unwrap();
    loop {
        let job = jobs.lock().unwrap().pop_front();
        let Some(job) = job else { break };
        job();
    }
    // Its row is free, but the caller has not had the last piece: the slot is still taken.
    assert!(matches!(g.state(), State::Ending(Finish::Length)));
    assert_eq!(engine.stats().active, 1);
    assert!(engine
        .start(Prompt::Text("x".into()), request(2), Slow::default())
        .is_err());
    sink.0.lock().unwrap().clear(); // delivered: `settled` dropped
    assert_eq!(
        (g.state(), engine.stats().active),
        (State::Finished(Finish::Length), 0)
    );
    // close(): waiting calls end Disposed, new ones are refused, the decoder goes when idle.
    let engine = Engine::new(Arc::new(Fake::default()), Config::new(1), Arc::new(|_job| {}));
    let waiting = Record::default();
    engine
        .start(Prompt::Text("ab".into()), request(2), waiting.clone())
        .unwrap();
    engine.close();
    let out = waiting.out.lock().unwrap();
    let (code, _) = crate::error::describe(out[0].error.as_ref().unwrap());
    assert_eq!(code, crate::error::Code::Disposed);
    let refused = engine.start(Prompt::Text("x".into()), request(2), Record::default());
    assert_eq!(
        crate::error::describe(&refused.err().unwrap()).0,
        crate::error::Code::Disposed
    );
}

/// Runs rounds until `sink` has its last piece: a request with a format is made ready on a
/// thread of its own (its grammar compiled there), which schedules a round when it is done.
pub(super) fn run_until_finished(r: &Rig, sink: &Record) {
    for _ in 0..100_000 {
        if sink.finish().is_some() {
            return;
        }
        if !r.round() {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    panic!("the generation did not end");
}

#[test]
fn a_format_masks_each_choice_and_ends_the_sequence_when_the_output_is_whole() {
    let formatted = |pattern: &str, n: u64| {
        let mut request = request(n);
        request.format = Some(Format::Regex(pattern.into()));
        request
    };
    // Alone: the fake would write capitals forever; the regex holds it to its language and ends
    // it (Stop) once nothing may follow.
    let r = rig(Config::new(2));
    let sink = Record::default();
    r.engine
        .start(
            Prompt::Text("AB".into()),
            formatted("(xy|[a-c]{3})-[0-9]{2}", 50),
            sink.clone(),
        )
        .unwrap();
    run_until_finished(&r, &sink);
    let text = sink.text();
    assert!(regex_lite_match(&text), "{text:?}");
    assert_eq!(sink.finish(), Some(Finish::Stop));
    // Beside a free generation in the same steps: the free one gives what it gives alone.
    let want = alone(&[("Hello", 12)]);
    let r = rig(Config::new(2));
    let (free, constrained) = (Record::default(), Record::default());
    r.engine
        .start(
            Prompt::Text("AB".into()),
            formatted("(xy|[a-c]{3})-[0-9]{2}", 50),
            constrained.clone(),
        )
        .unwrap();
    r.engine
        .start(Prompt::Text("Hello".into()), request(12), free.clone())
        .unwrap();
    run_until_finished(&r, &constrained);
    run_until_finished(&r, &free);
    assert_eq!(free.text(), want[0]);
    assert!(regex_lite_match(&constrained.text()), "{:?}", constrained.text());
    // A grammar that does not compile ends its generation with InvalidArg, and only it.
    let (bad, good) = (Record::default(), Record::default());
    r.engine
        .start(Prompt::Text("AB".into()), formatted("(", 5), bad.clone())
        .unwrap();
    r.engine
        .start(Prompt::Text("Hello".into()), request(12), good.clone())
        .unwrap();
    run_until_finished(&r, &bad);
    run_until_finished(&r, &good);
    let out = bad.out.lock().unwrap();
    let e = out.last().and_then(|o| o.error.as_ref()).expect("an error");
    assert_eq!(crate::error::describe(e).0, crate::error::Code::InvalidArg);
    assert_eq!(good.text(), want[0]);
}

/// `(xy|[a-c]{3})-[0-9]{2}`, by hand (no regex crate among the core's dependencies).
pub(super) fn regex_lite_match(text: &str) -> bool {
    let Some((head, digits)) = text.split_once('-') else {
        return false;
    };
    let head_ok = head == "xy" || (head.len() == 3 && head.bytes().all(|b| (b'a'..=b'c').contains(&b)));
    head_ok && digits.len() == 2 && digits.bytes().all(|b| b.is_ascii_digit())
}
