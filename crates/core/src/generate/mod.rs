//! Text generation from a causal LM exported by `python/export_causal_lm.py`:
//! `sample` (greedy, temperature, top-k, top-p, min-p, repetition penalty, a seeded RNG),
//! `stream` (decoded text in pieces that end on UTF-8 boundaries; stop strings matched across
//! tokens and never emitted), `lm` (the model folder, its sequences and one token's choice),
//! `batch` (sequences sharing each program call and the KV cache: iteration-level batching).
//! The glue is the addon's `causal_lm`.
pub mod batch;
pub mod constraint;
pub mod lm;
pub mod sample;
pub mod stream;
