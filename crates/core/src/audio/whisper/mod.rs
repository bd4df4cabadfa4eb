//! Whisper from a torch-node speech folder (python/export_whisper.py): the manifest, the two
//! TorchScript programs (`encoder.pt`: features -> cross-attention K/V; `decoder.pt`: one decoder
//! step over explicit cache tensors) and the tokenizer; `prompt` builds the forced decoder prompt
//! and `decode` runs greedy decoding (or `beam` search) as transformers'
//! `WhisperForConditionalGeneration.generate`.
//!
//! This decode loop is self-contained (one request, batch 1): the shared generation engine
//! (`crate::generate`) is to take encoder-decoder models later (issue 51), and this loop then goes.
pub mod asr;
pub mod beam;
pub mod decode;
pub mod fallback;
pub mod prompt;
pub mod timestamps;

use crate::audio::mel::MelSettings;
use crate::error::{fail, Code};
use crate::text::tokenizer::Tokenizer;
use anyhow::{Context, Result};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::path::Path;

pub use beam::EarlyStopping;
pub use decode::{transcribe, Options, Task, Transcript};
pub use fallback::{Fallback, WindowStats};

/// What decoding needs of the manifest.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    pub features: MelSettings,
    pub decoder_start: i64,
    pub eos: i64,
    pub no_timestamps: Option<i64>,
    pub timestamp_begin: Option<i64>,
    /// `<|en|>` -> id.
    pub lang_to_id: HashMap<String, i64>,
    /// `transcribe` / `translate` -> id.
    pub task_to_id: HashMap<String, i64>,
    /// transformers' language names -> codes (`english` -> `en`).
    pub language_names: HashMap<String, String>,
    pub suppress_tokens: Vec<i64>,
    pub begin_suppress_tokens: Vec<i64>,
    /// generation_config's `forced_decoder_ids`: (position, token or None for the language).
    pub forced_decoder_ids: Vec<(usize, Option<i64>)>,
    /// generation_config's `max_length` (prompt and generated tokens).
    pub max_length: usize,
    /// The decoder's learned positions.
    pub max_target_positions: usize,
    /// The encoder's positions (1500): a timestamp step is a window's seconds over these.
    pub max_source_positions: usize,
    /// generation_config's `max_initial_timestamp_index` (the first timestamp at most this step).
    pub max_initial_timestamp_index: Option<i64>,
    /// generation_config's `num_beams` (1 where absent).
    pub num_beams: usize,
    pub vocab_size: i64,
    pub layers: i64,
    pub heads: i64,
    pub head_dim: i64,
}

fn bad(message: impl Into<String>) -> anyhow::Error {
    fail(Code::ModelLoadError, message)
}

fn int(v: &Value, key: &str) -> Result<i64> {
    v.get(key)
        .and_then(Value::as_i64)
        .ok_or_else(|| bad(format!("manifest.json: no integer '{key}'")))
}

fn id_map(v: Option<&Value>) -> HashMap<String, i64> {
    v.and_then(Value::as_object)
        .map(|o| {
            o.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_i64()?)))
                .collect()
        })
        .unwrap_or_default()
}

fn ids(v: Option<&Value>) -> Vec<i64> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_i64).collect())
        .unwrap_or_default()
}

impl Settings {
    /// Reads the manifest's JSON (`format: torch-node/speech-model`).
    pub fn parse(manifest: &Value) -> Result<Settings> {
        if manifest.get("format").and_then(Value::as_str) != Some("torch-node/speech-model") {
            return Err(bad(
                "manifest.json: not a torch-node speech model (format torch-node/speech-model)",
            ));
        }
        let f = manifest
            .get("features")
            .ok_or_else(|| bad("manifest.json: no 'features'"))?;
        let t = manifest
            .get("tokens")
            .ok_or_else(|| bad("manifest.json: no 'tokens'"))?;
        let usize_of = |v: &Value, k: &str| int(v, k).map(|n| n.max(0) as usize);
        let forced = manifest
            .get("forcedDecoderIds")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|pair| Some((pair.get(0)?.as_u64()? as usize, pair.get(1)?.as_i64())))
                    .collect()
            })
            .unwrap_or_default();
        Ok(Settings {
            features: MelSettings {
                n_mels: usize_of(f, "nMels")?,
                n_fft: usize_of(f, "nFft")?,
                hop_length: usize_of(f, "hopLength")?,
                sampling_rate: int(f, "samplingRate")? as u32,
                n_samples: usize_of(f, "nSamples")?,
            },
            decoder_start: int(t, "decoderStart")?,
            eos: int(t, "eos")?,
            no_timestamps: t.get("noTimestamps").and_then(Value::as_i64),
            timestamp_begin: t.get("timestampBegin").and_then(Value::as_i64),
            lang_to_id: id_map(t.get("langToId")),
            task_to_id: id_map(t.get("taskToId")),
            language_names: manifest
                .get("languageNames")
                .and_then(Value::as_object)
                .map(|o| {
                    o.iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                        .collect()
                })
                .unwrap_or_default(),
            suppress_tokens: ids(manifest.get("suppressTokens")),
            begin_suppress_tokens: ids(manifest.get("beginSuppressTokens")),
            forced_decoder_ids: forced,
            max_length: usize_of(manifest, "maxLength")?,
            max_target_positions: usize_of(manifest, "maxTargetPositions")?,
            // Folders exported before these were written: Whisper's own values.
            max_source_positions: manifest
                .get("maxSourcePositions")
                .and_then(Value::as_u64)
                .map_or(1500, |n| n.max(1) as usize),
            max_initial_timestamp_index: manifest.get("maxInitialTimestampIndex").and_then(Value::as_i64),
            num_beams: manifest.get("numBeams").and_then(Value::as_u64).unwrap_or(1) as usize,
            vocab_size: int(manifest, "vocabSize")?,
            layers: int(manifest, "layers")?,
            heads: int(manifest, "heads")?,
            head_dim: int(manifest, "headDim")?,
        })
    }
}

/// A loaded Whisper folder.
pub struct Whisper {
    pub settings: Settings,
    pub encoder: tch::CModule,
    pub decoder: tch::CModule,
    pub tokenizer: Tokenizer,
    /// The tokenizer's special tokens (transformers' `all_special_ids`), left out of the text.
    pub special_ids: HashSet<i64>,
}

impl Whisper {
    /// Loads `folder` (an export_whisper.py folder) on the CPU.
    pub fn load(folder: &Path) -> Result<Whisper> {
        let path = folder.join("manifest.json");
        let text = std::fs::read(&path).map_err(|e| bad(format!("cannot read '{}': {e}", path.display())))?;
        let manifest: Value =
            serde_json::from_slice(&text).map_err(|e| bad(format!("'{}': {e}", path.display())))?;
        let settings = Settings::parse(&manifest)?;
        let program = |key: &str| -> Result<tch::CModule> {
            let part = manifest
                .get(key)
                .ok_or_else(|| bad(format!("manifest.json: no '{key}'")))?;
            if part.get("programFormat").and_then(Value::as_str) != Some("torchscript") {
                return Err(bad(format!(
                    "manifest.json: the {key} is not a TorchScript program"
                )));
            }
            let file = part.get("program").and_then(Value::as_str).unwrap_or_default();
            let mut m = tch::CModule::load(folder.join(file)).map_err(|e| {
                bad(format!(
                    "cannot load the {key} '{file}': {}",
                    crate::error::trim_libtorch(&e.to_string())
                ))
            })?;
            m.set_eval();
            Ok(m)
        };
        let tokenizer_file = manifest
            .get("tokenizer")
            .and_then(Value::as_str)
            .unwrap_or("tokenizer.json");
        let tokenizer =
            Tokenizer::from_file(&folder.join(tokenizer_file)).context("the Whisper tokenizer")?;
        let special_ids = tokenizer
            .hf()
            .get_added_tokens_decoder()
            .into_iter()
            .filter(|(_, t)| t.special)
            .map(|(id, _)| i64::from(id))
            .collect();
        Ok(Whisper {
            special_ids,
            encoder: program("encoder")?,
            decoder: program("decoder")?,
            settings,
            tokenizer,
        })
    }
}
