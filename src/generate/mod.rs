//! Text generation from a causal LM exported by `python/export_causal_lm.py`, napi-free:
//! `sample` (greedy, temperature, top-k, top-p, min-p, repetition penalty, a seeded RNG),
//! `stream` (decoded text in pieces that end on UTF-8 boundaries; stop strings matched across
//! tokens and never emitted), `lm` (the model folder, its KV cache and the decode loop).
//! The glue is `crate::causal_lm`.
pub mod lm;
pub mod sample;
pub mod stream;
