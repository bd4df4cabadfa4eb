//! How good a window's decoding looks, and whether to decode it again: transformers 5.23's
//! `WhisperGenerationMixin.generate_with_fallback` / `_need_fallback` (after openai-whisper's
//! `decode_with_fallback`). A window is decoded at the first temperature (0: greedy); when its
//! compression ratio is over `compression_ratio_threshold` (the text repeats) or its average
//! log-probability under `logprob_threshold`, again at the next temperature (sampling), until one
//! passes or the temperatures run out (the last pass is kept). With `no_speech_threshold`, a pass
//! whose `<|nospeech|>` probability is over it and whose average log-probability is under
//! `logprob_threshold` marks the window silent: skipped, no text.
use crate::error::{bail_code, Code};
use anyhow::Result;

/// The temperatures and thresholds of the fallback (transformers' `generate` arguments).
#[derive(Debug, Clone, PartialEq)]
pub struct Fallback {
    /// Tried in order; 0 is greedy, above 0 sampling at that temperature (`[0.0]` by default: one
    /// greedy pass, no fallback).
    pub temperatures: Vec<f64>,
    pub compression_ratio_threshold: Option<f64>,
    pub logprob_threshold: Option<f64>,
    pub no_speech_threshold: Option<f64>,
    /// The sampler's seed (the passes above 0 draw from one generator, window after window).
    pub seed: u64,
}

impl Default for Fallback {
    fn default() -> Self {
        Fallback {
            temperatures: vec![0.0],
            compression_ratio_threshold: None,
            logprob_threshold: None,
            no_speech_threshold: None,
            seed: 0,
        }
    }
}

impl Fallback {
    /// Checks the values (names as JS spells the options): temperatures finite, in [0, 2], at
    /// least one and at most 16; thresholds finite; `noSpeechThreshold` needs `logprobThreshold`
    /// (transformers reads the log-probability to decide silence).
    pub fn validate(&self) -> Result<()> {
        if self.temperatures.is_empty() || self.temperatures.len() > 16 {
            bail_code!(
                Code::InvalidArg,
                "temperature: expected a number or 1..16 numbers, got {} numbers",
                self.temperatures.len()
            );
        }
        if let Some(t) = self
            .temperatures
            .iter()
            .find(|t| !(t.is_finite() && (0.0..=2.0).contains(*t)))
        {
            bail_code!(
                Code::InvalidArg,
                "temperature: expected numbers in [0, 2], got {t}"
            );
        }
        for (name, v) in [
            ("compressionRatioThreshold", self.compression_ratio_threshold),
            ("logprobThreshold", self.logprob_threshold),
            ("noSpeechThreshold", self.no_speech_threshold),
        ] {
            if let Some(v) = v.filter(|v| !v.is_finite()) {
                bail_code!(Code::InvalidArg, "{name}: expected a finite number, got {v}");
            }
        }
        if self.no_speech_threshold.is_some() && self.logprob_threshold.is_none() {
            bail_code!(
                Code::InvalidArg,
                "noSpeechThreshold: needs logprobThreshold (a window is silent when both say so)"
            );
        }
        Ok(())
    }
}

/// One decoding pass over a window, as the fallback judges it.
#[derive(Debug, Clone, PartialEq)]
pub struct Pass {
    /// The tokens after the prompt, the end token included when written.
    pub tokens: Vec<i64>,
    pub temperature: f64,
    /// The mean over `tokens` (the end token included, as transformers and openai-whisper count
    /// it) of each token's log-probability under the step's scores after the suppressions and
    /// timestamp rules, before the temperature (`_retrieve_avg_logprobs`).
    pub avg_logprob: f64,
    /// softmax of the step after `<|startoftranscript|>` (the unprocessed logits), at
    /// `<|nospeech|>` (the id before `<|notimestamps|>`): `WhisperNoSpeechDetection`.
    pub no_speech_prob: Option<f64>,
    /// Beam search's score of the kept beam (`sequences_scores`); `None` for one beam.
    pub score: Option<f64>,
}

/// What a window's kept pass looked like: its first feature frame in the audio (OpenAI's `seek`),
/// the temperature, its average log-probability, the compression ratio of its text (OpenAI's:
/// the UTF-8 bytes of the decoded text, trimmed), the `<|nospeech|>` probability, beam search's
/// score of the kept beam (`None` for one beam).
#[derive(Debug, Clone, PartialEq)]
pub struct WindowStats {
    pub seek: usize,
    pub temperature: f64,
    pub avg_logprob: f64,
    pub compression_ratio: f64,
    pub no_speech_prob: Option<f64>,
    pub score: Option<f64>,
}

/// The verdict on a pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Keep,
    /// Decode the window again at the next temperature (the last pass is kept regardless).
    Retry,
    /// Silence: the window is skipped.
    Silent,
}

/// `len(data) / len(zlib.compress(data))` (level 6, zlib's default, as Python's `zlib.compress`).
/// 0 where zlib fails (it does not, short of memory).
pub fn zlib_ratio(data: &[u8]) -> f64 {
    let compressed = crate::ffi::zlib::compress(data, 6).map_or(0, |v| v.len());
    if compressed == 0 {
        return 0.0;
    }
    data.len() as f64 / compressed as f64
}

/// transformers' `_retrieve_compression_ratio`: the ratio of the token ids written as
/// little-endian integers of `int(log2(vocab) / 8) + 1` bytes each.
pub fn token_compression_ratio(tokens: &[i64], vocab_size: i64) -> f64 {
    let width = ((vocab_size.max(2) as f64).log2() / 8.0) as usize + 1;
    let bytes: Vec<u8> = tokens
        .iter()
        .flat_map(|&t| t.to_le_bytes().into_iter().take(width))
        .collect();
    zlib_ratio(&bytes)
}

/// `_need_fallback`: retry when the token compression ratio is over its threshold or the average
/// log-probability under its; silent (and no retry) when, besides the latter, `<|nospeech|>` is
/// over its threshold.
pub fn verdict(pass: &Pass, fallback: &Fallback, vocab_size: i64) -> Verdict {
    let mut retry = fallback
        .compression_ratio_threshold
        .is_some_and(|t| token_compression_ratio(&pass.tokens, vocab_size) > t);
    let low_logprob = fallback.logprob_threshold.is_some_and(|t| pass.avg_logprob < t);
    retry |= low_logprob;
    if let (Some(t), Some(p)) = (fallback.no_speech_threshold, pass.no_speech_prob) {
        if low_logprob && p > t {
            return Verdict::Silent;
        }
    }
    if retry {
        Verdict::Retry
    } else {
        Verdict::Keep
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pass(tokens: Vec<i64>, avg_logprob: f64, no_speech: f64) -> Pass {
        Pass {
            tokens,
            temperature: 0.0,
            avg_logprob,
            no_speech_prob: Some(no_speech),
            score: None,
        }
    }

    #[test]
    fn zlib_ratio_as_python() {
        // Python 3.11 (zlib 1.2.13): len(b) / len(zlib.compress(b)).
        assert_eq!(zlib_ratio(b""), 0.0); // compress(b"") is 8 bytes
        let repeated = " hello hello hello hello hello hello hello hello".as_bytes();
        assert_eq!(zlib_ratio(repeated), 48.0 / 17.0);
        // Whisper's vocabulary (51865 ids): 2 bytes a token.
        assert_eq!(token_compression_ratio(&[1, 2], 51865), 4.0 / 12.0);
    }

    #[test]
    fn the_verdict_follows_need_fallback() {
        let f = Fallback {
            temperatures: vec![0.0, 0.2],
            compression_ratio_threshold: Some(2.4),
            logprob_threshold: Some(-1.0),
            no_speech_threshold: Some(0.6),
            seed: 0,
        };
        let v = 51865;
        assert_eq!(verdict(&pass(vec![1, 2, 3], -0.5, 0.1), &f, v), Verdict::Keep);
        assert_eq!(verdict(&pass(vec![1, 2, 3], -1.5, 0.1), &f, v), Verdict::Retry);
        assert_eq!(verdict(&pass(vec![1, 2, 3], -1.5, 0.9), &f, v), Verdict::Silent);
        // A likely pass is not silent however likely <|nospeech|> is.
        assert_eq!(verdict(&pass(vec![1, 2, 3], -0.5, 0.9), &f, v), Verdict::Keep);
        // Repetition: 200 tokens of one id compress far below 1/2.4.
        assert_eq!(verdict(&pass(vec![7; 200], -0.1, 0.1), &f, v), Verdict::Retry);
        assert_eq!(
            verdict(&pass(vec![7; 200], -0.1, 0.1), &Fallback::default(), v),
            Verdict::Keep
        );
    }

    #[test]
    fn options_are_checked() {
        let ok = Fallback::default();
        assert!(ok.validate().is_ok());
        let bad = |f: Fallback| format!("{:#}", f.validate().unwrap_err());
        assert!(bad(Fallback {
            temperatures: vec![],
            ..ok.clone()
        })
        .contains("temperature"));
        assert!(bad(Fallback {
            temperatures: vec![f64::NAN],
            ..ok.clone()
        })
        .contains("[0, 2]"));
        assert!(bad(Fallback {
            temperatures: vec![-0.5],
            ..ok.clone()
        })
        .contains("[0, 2]"));
        let m = bad(Fallback {
            no_speech_threshold: Some(0.6),
            ..ok.clone()
        });
        assert!(m.contains("needs logprobThreshold"), "{m}");
        let m = bad(Fallback {
            logprob_threshold: Some(f64::INFINITY),
            ..ok
        });
        assert!(m.contains("logprobThreshold"), "{m}");
    }
}
