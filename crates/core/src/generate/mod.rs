//! Text generation from a causal LM exported by `python/export_causal_lm.py`:
//! `sample` (greedy or random: temperature, top-k, top-p, min-p, repetition penalty, a seeded
//! RNG), `stream` (decoded text in pieces that end on UTF-8 boundaries; stop strings matched
//! across tokens and never emitted), `request` (a generation's options over the model's
//! defaults), `decoder` (the model contract: `Decoder`, `Prompt`, `Finish`), `sequence` (one
//! sequence and the choice of its tokens), `logprobs` (what each token's log-probability was), `lm` (the model folder), `vision` (a vision-language folder's image side), `batch` (sequences sharing
//! each program call: iteration-level batching), `kv_cache` (the cache they share), `prefix`
//! (prompts' keys and values reused by later prompts), `lookup` (speculative decoding: drafts by
//! prompt lookup, checked in one step), `constraint` (structured output: a token
//! mask per sequence), `admission` (which waiting generations join, and `QueueFull`), `engine`
//! (the rounds), `lifecycle` (a generation's `State`, its `Sink` and `Output`). No file's `use`
//! lines make a circle (`imports_tests`). The glue is the addon's `causal_lm`.
pub mod admission;
pub mod batch;
pub mod constraint;
pub mod decoder;
pub mod engine;
#[cfg(test)]
mod engine_tests;
#[cfg(test)]
mod imports_tests;
pub mod kv_cache;
pub mod lifecycle;
pub mod lm;
pub mod logprobs;
pub mod lookup;
pub mod prefix;
pub mod request;
pub mod sample;
pub mod sequence;
#[cfg(test)]
mod speculation_tests;
pub mod stream;
pub mod vision;
#[cfg(test)]
mod vlm_tests;
