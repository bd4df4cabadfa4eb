//! Text generation from a causal LM exported by `python/export_causal_lm.py`:
//! `sample` (greedy or random: temperature, top-k, top-p, min-p, repetition penalty, a seeded
//! RNG), `stream` (decoded text in pieces that end on UTF-8 boundaries; stop strings matched
//! across tokens and never emitted), `request` (a generation's options over the model's
//! defaults), `sequence` (one sequence and the `Decoder` it runs on), `lm` (the model folder),
//! `batch` (sequences sharing each program call and the KV cache: iteration-level batching),
//! `prefix` (prompts' keys and values reused by later prompts), `constraint` (structured output:
//! a token mask per sequence), `admission` (which waiting generations join, and `QueueFull`),
//! `engine` (the rounds), `lifecycle` (a generation's `State`, its `Sink` and `Output`).
//! The glue is the addon's `causal_lm`.
pub mod admission;
pub mod batch;
pub mod constraint;
pub mod engine;
#[cfg(test)]
mod engine_tests;
pub mod lifecycle;
pub mod lm;
pub mod prefix;
pub mod request;
pub mod sample;
pub mod sequence;
pub mod stream;
