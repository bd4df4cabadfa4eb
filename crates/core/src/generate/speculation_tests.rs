//! Speculative decoding (`super::lookup`) in the engine, on `engine_tests`' fake decoder: the
//! same text as without drafts alone and batched, stop strings and the token limit inside an
//! accepted run, a constrained row, the prefix cache, abort, and a program that keeps one
//! position refused.
//!
//! The fake's next token is `65 + (sum of the row's tokens) % 26`: as a function of the sum
//! modulo 26 alone, its output falls into a cycle, which a unigram lookup then proposes
//! exactly: drafts are accepted, and every step runs one.
use super::constraint::Format;
use super::decoder::{CacheShape, Decoder, Finish, Prompt};
use super::engine::Config;
use super::engine_tests::{regex_lite_match, request, rig, run_until_finished, Record, Rig};
use super::lookup::Speculation;
use anyhow::Result;
use tch::{Kind, Tensor};

fn speculative(rows: usize) -> Config {
    Config {
        speculation: Some(Speculation::new("prompt-lookup", Some(6), None).unwrap()),
        ..Config::new(rows)
    }
}

/// Each prompt's text and finish, started one round apart on `config`.
fn texts(config: Config, prompts: &[(&str, u64)]) -> (Vec<(String, Option<Finish>)>, Rig) {
    let r = rig(config);
    let sinks = r.start_apart(prompts, 1);
    r.run_all();
    let out = sinks.iter().map(|s| (s.text(), s.finish())).collect();
    (out, r)
}

const PROMPTS: [(&str, u64); 5] = [
    ("Once upon a time", 60),
    // One step (its second token) and no room for a draft: a row without one beside rows with.
    ("Hello", 2),
    ("The quick brown fox", 45),
    ("AB", 33),
    ("Z", 1),
];

#[test]
fn drafts_give_the_text_of_plain_decoding_alone_and_batched() {
    for rows in [1, 3] {
        let (want, _) = texts(Config::new(rows), &PROMPTS);
        let (got, r) = texts(speculative(rows), &PROMPTS);
        assert_eq!(got, want, "{rows} rows");
        let s = r.engine.stats().counts;
        let generated: u64 = PROMPTS.iter().map(|p| p.1).sum();
        assert!(s.accepted > 0 && s.accepted <= s.proposed, "{s:?}");
        // Each accepted token is one step fewer: every step's row gave 1 + its accepted tokens.
        assert_eq!(s.rows + s.prefills + s.accepted, generated, "{rows} rows: {s:?}");
    }
}

#[test]
fn stop_strings_and_the_token_limit_end_inside_an_accepted_run() {
    let (plain, _) = texts(Config::new(1), &[("AB", 120)]);
    let text = &plain[0].0;
    // A stop string from the cycle: it first ends where a draft is being accepted.
    let stop = &text[90..93];
    let at = text.find(stop).unwrap();
    let mut stopped = request(120);
    stopped.stop = vec![stop.to_string()];
    for config in [Config::new(1), speculative(1)] {
        let r = rig(config);
        let sink = Record::default();
        let _g = r
            .engine
            .start(Prompt::Text("AB".into()), stopped.clone(), sink.clone())
            .unwrap();
        r.run_all();
        assert_eq!(
            (sink.text(), sink.finish()),
            (text[..at].to_string(), Some(Finish::Stop))
        );
    }
    // The token limit at every count from 20 to 40: never a token past it.
    for n in 20..=40 {
        let (got, r) = texts(speculative(1), &[("AB", n)]);
        assert_eq!(
            got[0],
            (text[..n as usize].to_string(), Some(Finish::Length)),
            "{n}"
        );
        assert!(r.engine.stats().counts.accepted > 0);
    }
    // The pieces stream in order, several tokens at once once drafts are accepted.
    let r = rig(speculative(1));
    let (_, sink) = r.start("AB", 60);
    r.run_all();
    let out = sink.out.lock().unwrap();
    let tokens: Vec<u32> = out.iter().flat_map(|o| o.tokens.clone()).collect();
    let want: Vec<u32> = text[..60].bytes().map(u32::from).collect();
    assert_eq!(tokens, want);
    assert!(
        out.iter().any(|o| o.tokens.len() > 2),
        "no piece of several tokens"
    );
}

#[test]
fn a_constrained_row_verifies_its_drafts_under_its_mask() {
    let formatted = || {
        let mut r = request(80);
        r.format = Some(Format::Regex("(xy|[a-c]{3})-[0-9]{2}[A-Z]{40}".into()));
        r
    };
    let run = |config: Config| {
        let r = rig(config);
        let (constrained, free) = (Record::default(), Record::default());
        let _a = r
            .engine
            .start(Prompt::Text("AB".into()), formatted(), constrained.clone())
            .unwrap();
        let _b = r
            .engine
            .start(Prompt::Text("Hello".into()), request(30), free.clone())
            .unwrap();
        run_until_finished(&r, &constrained);
        run_until_finished(&r, &free);
        let accepted = r.engine.stats().counts.accepted;
        ((constrained.text(), constrained.finish()), free.text(), accepted)
    };
    let (want, want_free, _) = run(Config::new(2));
    let (got, got_free, accepted) = run(speculative(2));
    assert_eq!((got, got_free), (want.clone(), want_free));
    assert_eq!(want.1, Some(Finish::Stop), "the format ended it");
    assert!(regex_lite_match(&want.0[..want.0.len() - 40]), "{want:?}");
    assert!(accepted > 0);
}

#[test]
fn with_the_prefix_cache_and_after_an_abort_the_text_is_the_same() {
    let system = "You are a terse assistant. Answer in one word. ";
    let (a, b) = (format!("{system}What is 2+2?"), format!("{system}Name a color."));
    let prompts = [(a.as_str(), 40), (b.as_str(), 40)];
    let (want, _) = texts(Config::new(2), &prompts);
    let cached = Config {
        prefix_cache_tokens: 256,
        ..speculative(2)
    };
    let (got, r) = texts(cached, &prompts);
    assert_eq!(got, want);
    assert!(r.engine.stats().prefix.unwrap().reused_tokens > 0);
    // Aborted while drafting: it ends aborted, the row is freed, the other goes on unchanged.
    let r = rig(speculative(2));
    let (running, sink) = r.start(&a, 200);
    let (_, other) = r.start(&b, 40);
    (0..6).for_each(|_| {
        r.round();
    });
    r.engine.abort(&running);
    r.run_all();
    assert_eq!(sink.finish(), Some(Finish::Aborted));
    assert_eq!(other.text(), want[1].0);
    assert_eq!(r.engine.stats().active, 0);
}

/// A decoder whose program returns each row's last logits alone (a format 1 export).
struct OneKept;

impl Decoder for OneKept {
    fn cache_shape(&self) -> CacheShape {
        CacheShape {
            layers: 1,
            kv_heads: 1,
            head_dim: 1,
            dtype: Kind::Float,
        }
    }
    fn max_context(&self) -> usize {
        8
    }
    fn vocab_size(&self) -> usize {
        4
    }
    fn tokenize(&self, _: Prompt) -> Result<Vec<u32>> {
        Ok(vec![1])
    }
    fn is_eos(&self, _: u32) -> bool {
        false
    }
    fn decode(&self, _: &[u32]) -> Result<String> {
        Ok(String::new())
    }
    fn run(&self, _: &[i64], _: &[i64], rows: usize, _: Vec<Tensor>) -> Result<Vec<Vec<f32>>> {
        Ok(vec![vec![0.0; 4]; rows])
    }
}

#[test]
fn a_program_that_keeps_one_position_is_refused_naming_the_re_export() {
    let s = Speculation::new("prompt-lookup", None, None).unwrap();
    let e = s.check(&OneKept).unwrap_err();
    let (code, message) = crate::error::describe(&e);
    assert_eq!(code, crate::error::Code::InvalidArg);
    assert!(message.contains("export it again"), "{message}");
    let e = OneKept.run_keep(&[1, 2], &[0, 1], 1, 2, Vec::new()).unwrap_err();
    assert!(e.to_string().contains("one position"), "{e}");
}
