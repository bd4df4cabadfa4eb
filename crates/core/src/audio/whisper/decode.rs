//! Greedy decoding as transformers' `WhisperForConditionalGeneration.generate` and the
//! `automatic-speech-recognition` pipeline around it: log-mel features, language detection when no
//! language is given (one decoder step on `<|startoftranscript|>` over the first window, argmax
//! over the language tokens), the forced prompt, then one token at a time with `suppress_tokens` at
//! every step, `begin_suppress_tokens` at the first and, with timestamps, the timestamp rules
//! (`timestamps::Rules`), until `<|endoftext|>` or the length limit. A window's tokens are split at
//! their timestamp pairs and the next window starts at the last pair (transformers' seek loop);
//! audio over one window is decoded window after window that way (`returnTimestamps`), or cut into
//! overlapping chunks whose texts are merged (`chunkLengthS`, `asr`).
use super::asr::{self, Chunk, Output, Vocab};
pub use super::prompt::Task;
use super::prompt::{self, language_id};
use super::timestamps::{self, Rules, Window};
use super::Whisper;
use crate::audio::mel::{log_mel, log_mel_of_length};
use crate::error::{fail, trim_libtorch, Code};
use anyhow::Result;
use tch::{IValue, Kind, Tensor};

/// What `transcribe` is asked.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// A code (`en`), token (`<|en|>`) or name (`english`); `None`: detected.
    pub language: Option<String>,
    pub task: Option<Task>,
    /// At most this many tokens after the prompt, per window (default: generation_config's
    /// `max_length` as transformers extends it, within the decoder's positions).
    pub max_new_tokens: Option<usize>,
    /// Timestamp tokens generated and the text cut into timed chunks (transformers'
    /// `return_timestamps=True`); needed for audio over one window unless it is chunked.
    pub return_timestamps: bool,
    /// The audio cut into chunks of this many seconds, decoded each alone and merged where they
    /// overlap (the pipeline's `chunk_length_s`).
    pub chunk_length_s: Option<f64>,
    /// The overlap with the chunk before and after, seconds (default `chunk_length_s / 6` each).
    pub stride_length_s: Option<(f64, f64)>,
}

/// The result: the decoder's tokens (the first window's prompt, then what `generate` returns after
/// it, chunk after chunk when chunked), the text (timestamps and special tokens skipped), the
/// timed chunks (with `return_timestamps`), the language token used, the audio's duration.
#[derive(Debug, Clone, PartialEq)]
pub struct Transcript {
    pub sequence: Vec<i64>,
    pub text: String,
    pub chunks: Vec<Chunk>,
    pub language: Option<String>,
    pub duration: f64,
}

fn run(module: &tch::CModule, inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
    let inputs: Vec<IValue> = inputs.into_iter().map(IValue::Tensor).collect();
    let out = module
        .forward_is(&inputs)
        .map_err(|e| fail(Code::ForwardError, trim_libtorch(&e.to_string())))?;
    match out {
        IValue::Tuple(items) => items
            .into_iter()
            .map(|v| match v {
                IValue::Tensor(t) => Ok(t),
                _ => Err(fail(
                    Code::ForwardError,
                    "the Whisper program returned a non-tensor",
                )),
            })
            .collect(),
        _ => Err(fail(
            Code::ForwardError,
            "the Whisper program did not return a tuple",
        )),
    }
}

/// The self-attention cache and the cross-attention K/V of one request.
struct Step<'a> {
    model: &'a Whisper,
    self_k: Tensor,
    self_v: Tensor,
    cross_k: &'a Tensor,
    cross_v: &'a Tensor,
}

impl<'a> Step<'a> {
    fn new(model: &'a Whisper, cross_k: &'a Tensor, cross_v: &'a Tensor) -> Step<'a> {
        let s = &model.settings;
        let empty = Tensor::zeros(
            [s.layers, 1, s.heads, 0, s.head_dim],
            (Kind::Float, tch::Device::Cpu),
        );
        Step {
            model,
            self_k: empty.shallow_clone(),
            self_v: empty,
            cross_k,
            cross_v,
        }
    }

    /// Feeds `ids` after what the cache holds; the logits of the last one, [vocab].
    fn feed(&mut self, ids: &[i64]) -> Result<Tensor> {
        let past = self.self_k.size()[3];
        let n = ids.len() as i64;
        let input = Tensor::from_slice(ids).view([1, n]);
        let positions = Tensor::arange_start(past, past + n, (Kind::Int64, tch::Device::Cpu)).view([1, n]);
        // [n, past + n]: query i sees keys j <= past + i.
        let j = Tensor::arange(past + n, (Kind::Int64, tch::Device::Cpu)).view([1, past + n]);
        let i = Tensor::arange(n, (Kind::Int64, tch::Device::Cpu)).view([n, 1]) + past;
        let mask = Tensor::zeros([n, past + n], (Kind::Float, tch::Device::Cpu))
            .masked_fill(&j.gt_tensor(&i), f64::NEG_INFINITY);
        let mut out = run(
            &self.model.decoder,
            vec![
                input,
                positions,
                mask,
                self.self_k.shallow_clone(),
                self.self_v.shallow_clone(),
                self.cross_k.shallow_clone(),
                self.cross_v.shallow_clone(),
            ],
        )?;
        if out.len() != 3 {
            return Err(fail(
                Code::ForwardError,
                "the decoder step returned other than (logits, k, v)",
            ));
        }
        self.self_v = out.pop().unwrap();
        self.self_k = out.pop().unwrap();
        Ok(out.pop().unwrap().select(0, 0).select(0, n - 1))
    }
}

/// One `generate` call's result: the prompt, what `generate` returns after it (one window without
/// timestamps: its tokens as generated, the end token included; else every window's segments'
/// tokens, which the pipeline decodes), the segments' tokens, the language id used.
struct Generated {
    prompt: Vec<i64>,
    returned: Vec<i64>,
    tokens: Vec<i64>,
    language: Option<i64>,
}

/// The language id: given, or detected on the first window's encoder output.
fn language(model: &Whisper, options: &Options, cross: &(Tensor, Tensor)) -> Result<Option<i64>> {
    let s = &model.settings;
    let (_, undefined) = prompt::forced_start(s);
    match &options.language {
        Some(l) => Ok(Some(language_id(s, l)?)),
        None if !s.lang_to_id.is_empty() && undefined => {
            // transformers' detect_language: every non-language token masked, then argmax.
            let logits = Step::new(model, &cross.0, &cross.1).feed(&[s.decoder_start])?;
            let lang: Vec<i64> = s.lang_to_id.values().copied().collect();
            let mask = Tensor::full(
                [logits.size()[0]],
                f64::NEG_INFINITY,
                (Kind::Float, tch::Device::Cpu),
            )
            .index_fill(0, &Tensor::from_slice(&lang), 0.0);
            Ok(Some(i64::try_from((logits + mask).argmax(0, false))?))
        }
        None => Ok(None),
    }
}

/// The encoder's cross-attention K/V of `frames` features (a window, padded with zeros to the
/// window's frames as `_get_input_segment` pads it).
fn encode(model: &Whisper, features: &Tensor, window: i64) -> Result<(Tensor, Tensor)> {
    let frames = features.size()[1];
    let input = if frames < window {
        features.constant_pad_nd([0, window - frames])
    } else {
        features.shallow_clone()
    };
    let mut cross = run(&model.encoder, vec![input.unsqueeze(0)])?;
    if cross.len() != 2 {
        return Err(fail(Code::ForwardError, "the encoder returned other than (k, v)"));
    }
    let v = cross.pop().unwrap();
    Ok((cross.pop().unwrap(), v))
}

fn first_argmax(scores: &[f32]) -> i64 {
    let mut best = 0;
    for (i, &v) in scores.iter().enumerate() {
        if v > scores[best] {
            best = i;
        }
    }
    best as i64
}

/// One greedy pass over a window: the tokens after `init` (the end token included when written).
fn greedy(
    model: &Whisper,
    cross: &(Tensor, Tensor),
    init: &[i64],
    max_new: usize,
    rules: Option<&Rules>,
    aborted: &dyn Fn() -> bool,
) -> Result<Vec<i64>> {
    let s = &model.settings;
    let mut step = Step::new(model, &cross.0, &cross.1);
    let mut generated: Vec<i64> = Vec::new();
    let mut logits = step.feed(init)?;
    while generated.len() < max_new {
        if aborted() {
            return Err(fail(Code::Aborted, "the transcription was aborted"));
        }
        let mut scores = Vec::<f32>::try_from(&logits)?;
        let vocab = scores.len() as i64;
        let mut mask = |ids: &[i64]| {
            for &i in ids.iter().filter(|&&i| (0..vocab).contains(&i)) {
                scores[i as usize] = f32::NEG_INFINITY;
            }
        };
        if generated.is_empty() {
            mask(&s.begin_suppress_tokens);
        }
        mask(&s.suppress_tokens);
        if let Some(r) = rules {
            r.apply(&mut scores, &generated);
        }
        let next = first_argmax(&scores);
        generated.push(next);
        if next == s.eos || generated.len() == max_new {
            break;
        }
        logits = step.feed(&[next])?;
    }
    Ok(generated)
}

/// One `generate` call on `features` ([n_mels, frames], one window or more): the seek loop.
fn generate(
    model: &Whisper,
    features: &Tensor,
    options: &Options,
    aborted: &dyn Fn() -> bool,
) -> Result<Generated> {
    let s = &model.settings;
    let window = (s.features.n_samples / s.features.hop_length) as i64;
    let input_stride = (window as usize / s.max_source_positions.max(1)).max(1);
    let time_precision = s.features.n_samples as f64
        / f64::from(s.features.sampling_rate)
        / s.max_source_positions.max(1) as f64;
    let frame_seconds = s.features.hop_length as f64 / f64::from(s.features.sampling_rate);
    let total = features.size()[1];
    let first = encode(model, &features.narrow(1, 0, total.min(window)), window)?;
    let language = language(model, options, &first)?;
    let init = prompt::build(
        s,
        language,
        options.language.is_some(),
        options.task,
        options.return_timestamps,
    )?;
    let positions = s.max_target_positions;
    if init.len() >= positions {
        return Err(fail(Code::InvalidArg, "the prompt fills the decoder's positions"));
    }
    let rules = match (options.return_timestamps, s.no_timestamps, s.timestamp_begin) {
        (true, Some(no_timestamps), Some(timestamp_begin)) => Some(Rules {
            timestamp_begin,
            no_timestamps,
            eos: s.eos,
            max_initial: s.max_initial_timestamp_index,
        }),
        (true, ..) => {
            return Err(fail(
                Code::InvalidArg,
                "returnTimestamps: this model has no timestamp tokens (no_timestamps_token_id)",
            ))
        }
        _ => None,
    };
    let timestamp_begin = s.timestamp_begin.unwrap_or(i64::MAX);
    // transformers raises max_length by the prompt's length each window (within the positions).
    let mut max_length = s.max_length;
    let (mut seek, mut raw, mut tokens) = (0i64, Vec::new(), Vec::new());
    let mut cross = Some(first);
    let mut windows = 0;
    while seek < total {
        windows += 1;
        let frames = (total - seek).min(window);
        let kv = match cross.take() {
            Some(kv) => kv,
            None => encode(model, &features.narrow(1, seek, frames), window)?,
        };
        let max_new = match options.max_new_tokens {
            Some(n) => n.min(positions - init.len()),
            None => {
                max_length = (max_length + (positions / 2 - 1).min(init.len())).min(positions);
                max_length.saturating_sub(init.len())
            }
        };
        let generated = greedy(model, &kv, &init, max_new, rules.as_ref(), aborted)?;
        raw.extend_from_slice(&generated);
        let body = match generated.last() {
            Some(&t) if t == s.eos => &generated[..generated.len() - 1],
            _ => &generated[..],
        };
        let w = Window {
            time_offset: seek as f64 * time_precision / input_stride as f64,
            num_frames: frames as usize,
            time_precision,
            frame_seconds,
            input_stride,
        };
        let (segments, offset) = timestamps::split(body, timestamp_begin, &w);
        for segment in segments {
            tokens.extend(segment.tokens);
        }
        seek += offset as i64;
    }
    let returned = if windows == 1 && rules.is_none() {
        raw
    } else {
        tokens.clone()
    };
    Ok(Generated {
        prompt: init,
        returned,
        tokens,
        language,
    })
}

/// Transcribes (or translates) 16 kHz mono `samples`, calling `aborted` between steps. Audio over
/// one window needs `return_timestamps` or `chunk_length_s` (an `InvalidArg` otherwise, as
/// transformers raises).
pub fn transcribe(
    model: &Whisper,
    samples: &[f32],
    options: &Options,
    aborted: &dyn Fn() -> bool,
) -> Result<Transcript> {
    let s = &model.settings;
    let _guard = tch::no_grad_guard();
    let rate = f64::from(s.features.sampling_rate);
    let time_precision = s.features.n_samples as f64 / rate / s.max_source_positions.max(1) as f64;
    let mut outputs = Vec::new();
    let mut sequence = Vec::new();
    let mut language = None;
    if let Some(chunk_s) = options.chunk_length_s {
        let (left_s, right_s) = options.stride_length_s.unwrap_or((chunk_s / 6.0, chunk_s / 6.0));
        let samples_of = |sec: f64| (sec * rate).round().max(0.0) as usize;
        let (chunk, left, right) = (samples_of(chunk_s), samples_of(left_s), samples_of(right_s));
        if chunk <= left + right {
            return Err(fail(
                Code::InvalidArg,
                format!(
                    "chunkLengthS ({chunk_s} s) must be longer than the two strides ({left_s} + {right_s} s)"
                ),
            ));
        }
        if chunk > s.features.n_samples {
            return Err(fail(
                Code::InvalidArg,
                format!(
                    "chunkLengthS: at most {} s (one window), got {chunk_s}",
                    s.features.n_samples as f64 / rate
                ),
            ));
        }
        for piece in asr::pieces(samples.len(), chunk, left, right) {
            let features = log_mel(&samples[piece.start..piece.end], &s.features)?;
            let g = generate(model, &features, options, aborted)?;
            if sequence.is_empty() {
                sequence = g.prompt.clone();
                language = g.language;
            }
            sequence.extend_from_slice(&g.returned);
            let secs = |n: usize| n as f64 / rate;
            outputs.push(Output {
                tokens: g.tokens,
                stride: Some((
                    secs(piece.end - piece.start),
                    secs(piece.stride_left),
                    secs(piece.stride_right),
                )),
            });
        }
    } else {
        let features = if samples.len() > s.features.n_samples {
            if !options.return_timestamps {
                return Err(fail(
                    Code::InvalidArg,
                    format!(
                        "the audio ({:.1} s) is longer than one {} s window: pass returnTimestamps: true \
                         (decoded window after window) or chunkLengthS (chunks merged), as transformers requires",
                        samples.len() as f64 / rate,
                        s.features.n_samples as f64 / rate
                    ),
                ));
            }
            log_mel_of_length(samples, &s.features, samples.len())?
        } else {
            log_mel(samples, &s.features)?
        };
        let g = generate(model, &features, options, aborted)?;
        sequence = g.prompt;
        sequence.extend_from_slice(&g.returned);
        language = g.language;
        outputs.push(Output {
            tokens: g.tokens,
            stride: None,
        });
    }
    let tb = s.timestamp_begin.unwrap_or(i64::MAX);
    let is_special = |t: i64| model.special_ids.contains(&t);
    let decode = |ids: &[i64]| -> Result<String> {
        let ids: Vec<u32> = ids.iter().map(|&t| t as u32).collect();
        model.tokenizer.decode(&ids, false)
    };
    let vocab = Vocab {
        timestamp_begin: tb,
        is_special: &is_special,
        decode: &decode,
    };
    let (text, chunks) = asr::decode_asr(&outputs, options.return_timestamps, time_precision, &vocab)?;
    let language = language.and_then(|id| {
        s.lang_to_id
            .iter()
            .find(|(_, &v)| v == id)
            .map(|(k, _)| k.trim_matches(['<', '|', '>']).to_string())
    });
    Ok(Transcript {
        sequence,
        text,
        chunks,
        language,
        duration: samples.len() as f64 / rate,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use std::path::Path;

    /// models/golden/whisper (the `whisper` fixture job): greedy sequences equal transformers'.
    #[test]
    fn greedy_sequences_equal_transformers_generate() {
        let dir = Path::new(crate::REPO_ROOT).join("models/golden/whisper");
        let Ok(goldens) = std::fs::read(dir.join("goldens.json")) else {
            eprintln!("skipped: run `node tools/models.js --lazy` (the whisper job) first");
            return;
        };
        let goldens: Value = serde_json::from_slice(&goldens).unwrap();
        let model = Whisper::load(&dir.join("model")).unwrap();
        let wav = std::fs::read(dir.join("speech.wav")).unwrap();
        let audio = crate::audio::decode(wav, &Default::default()).unwrap();
        for case in goldens["cases"].as_array().unwrap() {
            let options = Options {
                language: case["language"].as_str().map(str::to_string),
                task: case["task"].as_str().map(|t| {
                    if t == "translate" {
                        Task::Translate
                    } else {
                        Task::Transcribe
                    }
                }),
                max_new_tokens: goldens["maxNewTokens"].as_u64().map(|n| n as usize),
                ..Options::default()
            };
            let got = transcribe(&model, &audio.samples, &options, &|| false).unwrap();
            let want: Vec<i64> = case["sequence"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_i64().unwrap())
                .collect();
            assert_eq!(got.sequence, want, "{case}");
            assert_eq!(got.text, case["text"].as_str().unwrap(), "{case}");
        }
    }

    /// models/golden/whisper/timestamps.json: transformers' pipeline(return_timestamps=True) on
    /// ts-model (one window, 40 s long-form, chunked with and without timestamps): the text and
    /// the chunks equal (timestamps to their two decimals), generate's tokens after the prompt.
    #[test]
    fn timestamps_long_form_and_chunks_equal_the_transformers_pipeline() {
        let dir = Path::new(crate::REPO_ROOT).join("models/golden/whisper");
        let Ok(goldens) = std::fs::read(dir.join("timestamps.json")) else {
            eprintln!("skipped: run `node tools/models.js --lazy` (the whisper job) first");
            return;
        };
        let goldens: Value = serde_json::from_slice(&goldens).unwrap();
        let model = Whisper::load(&dir.join("ts-model")).unwrap();
        let read = |f: &str| {
            crate::audio::decode(std::fs::read(dir.join(f)).unwrap(), &Default::default())
                .unwrap()
                .samples
        };
        let (short, long) = (read("speech.wav"), read("long.wav"));
        for case in goldens["cases"].as_array().unwrap() {
            let name = case["name"].as_str().unwrap();
            let options = Options {
                language: case["language"].as_str().map(str::to_string),
                max_new_tokens: goldens["maxNewTokens"].as_u64().map(|n| n as usize),
                return_timestamps: case["return_timestamps"].as_bool().unwrap_or(false),
                chunk_length_s: case["chunk_length_s"].as_f64(),
                ..Options::default()
            };
            let audio = if name.starts_with("short") { &short } else { &long };
            let got = transcribe(&model, audio, &options, &|| false).unwrap();
            assert_eq!(got.text, case["text"].as_str().unwrap(), "{name}");
            let want = case["chunks"].as_array().cloned().unwrap_or_default();
            assert_eq!(got.chunks.len(), want.len(), "{name}: {:?}", got.chunks);
            for (c, w) in got.chunks.iter().zip(&want) {
                assert_eq!(c.text, w["text"].as_str().unwrap(), "{name}");
                assert_eq!(c.start, w["timestamp"][0].as_f64(), "{name}");
                assert_eq!(c.end, w["timestamp"][1].as_f64(), "{name}");
            }
            if let Some(tokens) = case["tokens"].as_array() {
                let want: Vec<i64> = tokens.iter().map(|v| v.as_i64().unwrap()).collect();
                assert_eq!(
                    got.sequence[got.sequence.len() - want.len()..],
                    want[..],
                    "{name}"
                );
            }
        }
    }
}
