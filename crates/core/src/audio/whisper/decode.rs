//! Greedy decoding (or beam search: `beam`) as transformers' `WhisperForConditionalGeneration
//! .generate` and the `automatic-speech-recognition` pipeline around it: log-mel features, language detection when no
//! language is given (one decoder step on `<|startoftranscript|>` over the first window, argmax
//! over the language tokens), the forced prompt, then one token at a time with `suppress_tokens` at
//! every step, `begin_suppress_tokens` at the first and, with timestamps, the timestamp rules
//! (`timestamps::Rules`), until `<|endoftext|>` or the length limit. A window's tokens are split at
//! their timestamp pairs and the next window starts at the last pair (transformers' seek loop);
//! audio over one window is decoded window after window that way (`returnTimestamps`), or cut into
//! overlapping chunks whose texts are merged (`chunkLengthS`, `asr`).
use super::asr::{self, Chunk, Output, Vocab};
use super::beam::{self, EarlyStopping, Steps};
use super::fallback::{self, Fallback, Pass, Verdict, WindowStats};
pub use super::prompt::Task;
use super::prompt::{self, language_id};
use super::timestamps::{self, Rules, Window};
use super::Whisper;
use crate::audio::mel::{log_mel, log_mel_of_length};
use crate::error::{fail, trim_libtorch, Code};
use crate::generate::sample::{self, Params, Rng, Sampling};
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
    /// Temperatures and thresholds: each window decoded again at the next temperature while it
    /// looks wrong (default: one greedy pass).
    pub fallback: Fallback,
    /// Beam search with this many beams (1..16) at temperature 0; 1 is greedy. `None`: the
    /// checkpoint's generation config (`Settings::num_beams`). A pass at a temperature above 0
    /// samples with one beam, and, as transformers' `generate_with_fallback` leaves its config,
    /// the later windows of the call then decode with one beam too.
    pub num_beams: Option<usize>,
    /// transformers' `length_penalty` (default 1): a finished beam's score is its summed
    /// log-probability over its length to this power.
    pub length_penalty: Option<f64>,
    /// transformers' `early_stopping` (default `False`: the heuristic).
    pub early_stopping: EarlyStopping,
}

/// The result: the decoder's tokens (the first window's prompt, then what `generate` returns after
/// it, chunk after chunk when chunked), the text (timestamps and special tokens skipped), the
/// timed chunks (with `return_timestamps`; each `window` an index into `windows`), how each
/// decoded window's kept pass looked, the language token used, the audio's duration.
#[derive(Debug, Clone, PartialEq)]
pub struct Transcript {
    pub sequence: Vec<i64>,
    pub text: String,
    pub chunks: Vec<Chunk>,
    pub windows: Vec<WindowStats>,
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
    cross_k: Tensor,
    cross_v: Tensor,
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
            cross_k: cross_k.shallow_clone(),
            cross_v: cross_v.shallow_clone(),
        }
    }

    /// Beam search: the self-attention cache's rows become those at `parents` (one a beam), and
    /// the cross-attention K/V (one request's) is viewed once for each.
    fn reorder(&mut self, parents: &[usize]) {
        let index = Tensor::from_slice(&parents.iter().map(|&p| p as i64).collect::<Vec<_>>());
        self.self_k = self.self_k.index_select(1, &index);
        self.self_v = self.self_v.index_select(1, &index);
        let beams = parents.len() as i64;
        if self.cross_k.size()[1] != beams {
            let grow = |t: &Tensor| {
                let mut size = t.size();
                size[1] = beams;
                t.narrow(1, 0, 1).expand(size, false)
            };
            self.cross_k = grow(&self.cross_k);
            self.cross_v = grow(&self.cross_v);
        }
    }

    /// Feeds one token to each beam (`ids[b]` after beam `b`'s cache); the logits, [beams, vocab].
    fn feed_beams(&mut self, ids: &[i64]) -> Result<Tensor> {
        let past = self.self_k.size()[3];
        let beams = ids.len() as i64;
        let input = Tensor::from_slice(ids).view([beams, 1]);
        let positions = Tensor::full([beams, 1], past, (Kind::Int64, tch::Device::Cpu));
        let mask = Tensor::zeros([1, past + 1], (Kind::Float, tch::Device::Cpu));
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
        Ok(out.pop().unwrap().select(1, 0))
    }

    /// Feeds `ids` after what the cache holds; the logits of the last one, [vocab].
    fn feed(&mut self, ids: &[i64]) -> Result<Tensor> {
        let n = ids.len() as i64;
        Ok(self.feed_all(ids)?.select(0, n - 1))
    }

    /// Feeds `ids` after what the cache holds; the logits of each, [ids, vocab].
    fn feed_all(&mut self, ids: &[i64]) -> Result<Tensor> {
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
        Ok(out.pop().unwrap().select(0, 0))
    }
}

/// One `generate` call's result: the prompt, what `generate` returns after it (one window without
/// timestamps: its tokens as generated, the end token included; else every window's segments'
/// tokens, which the pipeline decodes), the segments' tokens, the window each of them came from
/// (an index into `windows`), the windows' kept passes, the language id used.
struct Generated {
    prompt: Vec<i64>,
    returned: Vec<i64>,
    tokens: Vec<i64>,
    token_windows: Vec<usize>,
    windows: Vec<WindowStats>,
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

/// `log_softmax(scores)[i]`, in f64.
fn log_prob(scores: &[f32], i: usize) -> f64 {
    let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = scores.iter().map(|&x| f64::from(x - max).exp()).sum();
    f64::from(scores[i] - max) - sum.ln()
}

/// `<|nospeech|>`'s probability after `<|startoftranscript|>`: the prompt's first position, which
/// sees only that token (the causal mask); `prompt`: the prompt's logits, [prompt, vocab].
fn no_speech(model: &Whisper, prompt: &Tensor) -> Result<Option<f64>> {
    let s = &model.settings;
    Ok(match s.no_timestamps {
        Some(nt) if nt >= 1 && nt - 1 < s.vocab_size => Some(f64::try_from(
            prompt
                .get(0)
                .to_kind(Kind::Float)
                .softmax(0, Kind::Float)
                .get(nt - 1),
        )?),
        _ => None,
    })
}

/// One pass over a window at `temperature` (0: greedy, else a draw from the scores over it):
/// the tokens after `init` (the end token included when written), their average log-probability
/// and `<|nospeech|>`'s probability after `<|startoftranscript|>`.
#[allow(clippy::too_many_arguments)]
fn decode_pass(
    model: &Whisper,
    cross: &(Tensor, Tensor),
    init: &[i64],
    max_new: usize,
    rules: Option<&Rules>,
    temperature: f64,
    rng: &mut Rng,
    aborted: &dyn Fn() -> bool,
) -> Result<Pass> {
    let s = &model.settings;
    let mut step = Step::new(model, &cross.0, &cross.1);
    let prompt = step.feed_all(init)?;
    let no_speech_prob = no_speech(model, &prompt)?;
    let mut logits = prompt.get(init.len() as i64 - 1);
    let sampling = Params {
        sampling: Sampling::Random {
            temperature,
            top_k: None,
            top_p: 1.0,
            min_p: 0.0,
        },
        ..Params::default()
    };
    let mut generated: Vec<i64> = Vec::new();
    let mut sum_logprob = 0.0;
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
        // transformers applies the temperature after the Whisper processors.
        let next = if temperature > 0.0 {
            i64::from(sample::choose(&mut scores.clone(), &[], &sampling, rng))
        } else {
            first_argmax(&scores)
        };
        sum_logprob += log_prob(&scores, next as usize);
        generated.push(next);
        if next == s.eos || generated.len() == max_new {
            break;
        }
        logits = step.feed(&[next])?;
    }
    Ok(Pass {
        avg_logprob: sum_logprob / generated.len().max(1) as f64,
        tokens: generated,
        temperature,
        no_speech_prob,
        score: None,
    })
}

/// The Whisper decoder under beam search: the prompt's logits first, then one batched step for
/// all beams, the cache reordered to the beams' parents; each row log-softmaxed, then the
/// suppressions and timestamp rules applied to it (transformers' order for beams).
struct WhisperBeams<'a, 'b> {
    step: Step<'a>,
    first: Option<Tensor>,
    rules: Option<&'b Rules>,
    aborted: &'b dyn Fn() -> bool,
}

impl Steps for WhisperBeams<'_, '_> {
    fn log_probs(&mut self, parents: &[usize], generated: &[Vec<i64>]) -> Result<Vec<Vec<f32>>> {
        let logits = match self.first.take() {
            Some(first) => first.unsqueeze(0),
            None => {
                self.step.reorder(parents);
                let last: Vec<i64> = generated.iter().map(|g| *g.last().unwrap_or(&0)).collect();
                self.step.feed_beams(&last)?
            }
        };
        let s = &self.step.model.settings;
        let log_probs = logits.to_kind(Kind::Float).log_softmax(-1, Kind::Float);
        let rows = log_probs.size()[0];
        (0..rows)
            .map(|r| {
                let mut row = Vec::<f32>::try_from(&log_probs.get(r))?;
                let done = &generated[r as usize];
                let vocab = row.len() as i64;
                let mut mask = |ids: &[i64]| {
                    for &i in ids.iter().filter(|&&i| (0..vocab).contains(&i)) {
                        row[i as usize] = f32::NEG_INFINITY;
                    }
                };
                if done.is_empty() {
                    mask(&s.begin_suppress_tokens);
                }
                mask(&s.suppress_tokens);
                if let Some(rules) = self.rules {
                    rules.apply(&mut row, done);
                }
                Ok(row)
            })
            .collect()
    }

    fn aborted(&self) -> bool {
        (self.aborted)()
    }
}

/// One beam-search pass over a window (temperature 0): the best finished beam's tokens, its
/// score, its average log-probability, `<|nospeech|>`'s probability.
fn beam_pass(
    model: &Whisper,
    cross: &(Tensor, Tensor),
    init: &[i64],
    rules: Option<&Rules>,
    params: &beam::Params,
    aborted: &dyn Fn() -> bool,
) -> Result<Pass> {
    let mut step = Step::new(model, &cross.0, &cross.1);
    let prompt = step.feed_all(init)?;
    let no_speech_prob = no_speech(model, &prompt)?;
    let first = prompt.get(init.len() as i64 - 1);
    let mut steps = WhisperBeams {
        step,
        first: Some(first),
        rules,
        aborted,
    };
    let best = beam::search(&mut steps, params)?;
    Ok(Pass {
        tokens: best.tokens,
        temperature: 0.0,
        avg_logprob: best.avg_logprob,
        no_speech_prob,
        score: Some(best.score),
    })
}

/// A window decoded at each temperature in turn until a pass is kept (or silent, `None`), as
/// `generate_with_fallback`: with `beams.num_beams` over 1 at temperature 0 by beam search.
#[allow(clippy::too_many_arguments)]
fn decode_window(
    model: &Whisper,
    cross: &(Tensor, Tensor),
    init: &[i64],
    max_new: usize,
    rules: Option<&Rules>,
    fallback: &Fallback,
    beams: &mut beam::Params,
    rng: &mut Rng,
    aborted: &dyn Fn() -> bool,
) -> Result<Option<Pass>> {
    let mut kept = None;
    for &t in &fallback.temperatures {
        if t > 0.0 {
            // generate_with_fallback sets num_beams = 1 to sample, and leaves it so.
            beams.num_beams = 1;
        }
        let pass = if beams.num_beams > 1 {
            let params = beam::Params { max_new, ..*beams };
            beam_pass(model, cross, init, rules, &params, aborted)?
        } else {
            decode_pass(model, cross, init, max_new, rules, t, rng, aborted)?
        };
        match fallback::verdict(&pass, fallback, model.settings.vocab_size) {
            Verdict::Silent => return Ok(None),
            Verdict::Keep => return Ok(Some(pass)),
            Verdict::Retry => kept = Some(pass),
        }
    }
    Ok(kept)
}

/// OpenAI's compression ratio of a pass: its text (timestamps and special tokens left out),
/// trimmed, as UTF-8.
fn text_compression_ratio(model: &Whisper, tokens: &[i64]) -> Result<f64> {
    let tb = model.settings.timestamp_begin.unwrap_or(i64::MAX);
    let ids: Vec<u32> = tokens
        .iter()
        .filter(|&&t| t < tb && !model.special_ids.contains(&t))
        .map(|&t| t as u32)
        .collect();
    let text = model.tokenizer.decode(&ids, false)?;
    Ok(fallback::zlib_ratio(text.trim().as_bytes()))
}

/// One `generate` call on `features` ([n_mels, frames], one window or more): the seek loop.
fn generate(
    model: &Whisper,
    features: &Tensor,
    options: &Options,
    rng: &mut Rng,
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
    let (mut token_windows, mut stats) = (Vec::new(), Vec::new());
    let mut cross = Some(first);
    let mut windows = 0;
    let mut beams = beam::Params {
        num_beams: options.num_beams.unwrap_or(s.num_beams).max(1),
        length_penalty: options.length_penalty.unwrap_or(1.0),
        early_stopping: options.early_stopping,
        max_new: 0,
        eos: s.eos,
    };
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
        let Some(pass) = decode_window(
            model,
            &kv,
            &init,
            max_new,
            rules.as_ref(),
            &options.fallback,
            &mut beams,
            rng,
            aborted,
        )?
        else {
            // Silence (`should_skip`): the whole window is passed over.
            seek += frames;
            continue;
        };
        let generated = pass.tokens;
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
            token_windows.extend(std::iter::repeat_n(stats.len(), segment.tokens.len()));
            tokens.extend(segment.tokens);
        }
        stats.push(WindowStats {
            seek: seek as usize,
            temperature: pass.temperature,
            avg_logprob: pass.avg_logprob,
            compression_ratio: text_compression_ratio(model, &generated)?,
            no_speech_prob: pass.no_speech_prob,
            score: pass.score,
        });
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
        token_windows,
        windows: stats,
        language,
    })
}

/// Checks the beam options (names as JS spells them): 1..16 beams; `lengthPenalty` finite, and
/// it and `earlyStopping` only where beams search (transformers ignores them with one beam, with a
/// warning).
fn check_beams(options: &Options, checkpoint: usize) -> Result<()> {
    let beams = options.num_beams.unwrap_or(checkpoint);
    if !(1..=16).contains(&beams) {
        return Err(fail(
            Code::InvalidArg,
            format!("numBeams: expected 1..16, got {beams}"),
        ));
    }
    if let Some(p) = options.length_penalty.filter(|p| !p.is_finite()) {
        return Err(fail(
            Code::InvalidArg,
            format!("lengthPenalty: expected a finite number, got {p}"),
        ));
    }
    if beams == 1 && (options.length_penalty.is_some() || options.early_stopping != EarlyStopping::default())
    {
        return Err(fail(
            Code::InvalidArg,
            "lengthPenalty and earlyStopping: only with numBeams over 1 (beam search)",
        ));
    }
    Ok(())
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
    options.fallback.validate()?;
    check_beams(options, s.num_beams)?;
    let mut rng = Rng::new(options.fallback.seed);
    let mut outputs = Vec::new();
    let mut windows: Vec<WindowStats> = Vec::new();
    let mut sequence = Vec::new();
    let mut language = None;
    // A call's windows joined to the transcript's: their indices after those before, `seek` from
    // the audio's start (`frames` before the call's features).
    let mut add = |g: &mut Generated, frames: usize| -> Vec<usize> {
        let before = windows.len();
        windows.extend(g.windows.drain(..).map(|w| WindowStats {
            seek: w.seek + frames,
            ..w
        }));
        g.token_windows.iter().map(|w| w + before).collect()
    };
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
            let mut g = generate(model, &features, options, &mut rng, aborted)?;
            let token_windows = add(&mut g, piece.start / s.features.hop_length);
            if sequence.is_empty() {
                sequence = g.prompt.clone();
                language = g.language;
            }
            sequence.extend_from_slice(&g.returned);
            let secs = |n: usize| n as f64 / rate;
            outputs.push(Output {
                tokens: g.tokens,
                windows: token_windows,
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
        let mut g = generate(model, &features, options, &mut rng, aborted)?;
        let token_windows = add(&mut g, 0);
        sequence = g.prompt;
        sequence.extend_from_slice(&g.returned);
        language = g.language;
        outputs.push(Output {
            tokens: g.tokens,
            windows: token_windows,
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
        windows,
        language,
        duration: samples.len() as f64 / rate,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audio::whisper::Fallback;
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

    /// models/golden/whisper/segments.json: generate(return_timestamps=True) on ts-model with the
    /// fallback's thresholds, each window's passes as transformers' `_need_fallback` saw them. The
    /// kept windows' seek, temperature, avg_logprob (1e-4), text compression ratio (1e-9: the
    /// same zlib) and no_speech_prob (1e-4) equal, and the tokens; the forced fallback ends each
    /// window at 1.0 (sampled: only the temperature is compared).
    #[test]
    fn window_stats_and_fallback_equal_transformers() {
        let dir = Path::new(crate::REPO_ROOT).join("models/golden/whisper");
        let Ok(goldens) = std::fs::read(dir.join("segments.json")) else {
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
            let temperatures = match &case["temperature"] {
                Value::Array(a) => a.iter().map(|t| t.as_f64().unwrap()).collect(),
                t => vec![t.as_f64().unwrap()],
            };
            let options = Options {
                language: Some("en".into()),
                max_new_tokens: goldens["maxNewTokens"].as_u64().map(|n| n as usize),
                return_timestamps: true,
                fallback: Fallback {
                    temperatures,
                    compression_ratio_threshold: case["compression_ratio_threshold"].as_f64(),
                    logprob_threshold: case["logprob_threshold"].as_f64(),
                    no_speech_threshold: case["no_speech_threshold"].as_f64(),
                    seed: 0,
                },
                ..Options::default()
            };
            let audio = if name == "long" || name == "silence" {
                &long
            } else {
                &short
            };
            let got = transcribe(&model, audio, &options, &|| false).unwrap();
            let kept: Vec<&Value> = case["windows"]
                .as_array()
                .unwrap()
                .iter()
                .map(|w| w["passes"].as_array().unwrap().last().unwrap())
                .filter(|p| !p["skip"].as_bool().unwrap())
                .collect();
            if name == "fallback" {
                assert!(kept.iter().all(|p| p["temperature"] == 1.0), "{name}: {kept:?}");
                assert!(!got.windows.is_empty());
                assert!(
                    got.windows.iter().all(|w| w.temperature == 1.0),
                    "{name}: {:?}",
                    got.windows
                );
                continue;
            }
            let seeks: Vec<u64> = case["windows"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|w| !w["passes"][0]["skip"].as_bool().unwrap())
                .map(|w| w["seek"].as_u64().unwrap())
                .collect();
            assert_eq!(got.windows.len(), kept.len(), "{name}: {:?}", got.windows);
            for ((w, p), seek) in got.windows.iter().zip(&kept).zip(&seeks) {
                let d = |a: f64, k: &str| (a - p[k].as_f64().unwrap()).abs();
                eprintln!(
                    "{name}: |diff| avg_logprob {:.1e} compression_ratio {:.1e} no_speech_prob {:.1e}",
                    d(w.avg_logprob, "avgLogprob"),
                    d(w.compression_ratio, "compressionRatio"),
                    d(w.no_speech_prob.unwrap(), "noSpeechProb")
                );
                assert_eq!(w.seek as u64, *seek, "{name}");
                assert_eq!(w.temperature, p["temperature"].as_f64().unwrap(), "{name}");
                let close = |a: f64, b: &Value, tol: f64| (a - b.as_f64().unwrap()).abs() <= tol;
                assert!(close(w.avg_logprob, &p["avgLogprob"], 1e-4), "{name}: {w:?} {p}");
                assert!(
                    close(w.compression_ratio, &p["compressionRatio"], 1e-9),
                    "{name}: {w:?} {p}"
                );
                assert!(
                    close(w.no_speech_prob.unwrap(), &p["noSpeechProb"], 1e-4),
                    "{name}: {w:?} {p}"
                );
            }
            let want: Vec<i64> = case["tokens"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_i64().unwrap())
                .collect();
            assert_eq!(
                got.sequence[got.sequence.len() - want.len()..],
                want[..],
                "{name}"
            );
            assert!(got
                .chunks
                .iter()
                .all(|c| c.window.is_some_and(|i| i < got.windows.len())));
        }
    }

    /// models/golden/whisper/beams.json: transformers' generate(num_beams=N) (length_penalty and
    /// early_stopping varied) on model: the sequence and text equal, sequences_scores within 1e-4;
    /// with timestamps on ts-model (one window, 40 s long-form): the tokens equal, each window's
    /// sequences_scores and avg_logprob within 1e-4; the pipeline's default (5 beams): its text
    /// and chunks.
    #[test]
    fn beam_search_equals_transformers_generate() {
        let dir = Path::new(crate::REPO_ROOT).join("models/golden/whisper");
        let Ok(goldens) = std::fs::read(dir.join("beams.json")) else {
            eprintln!("skipped: run `node tools/models.js --lazy` (the whisper job) first");
            return;
        };
        let goldens: Value = serde_json::from_slice(&goldens).unwrap();
        let (model, ts_model) = (
            Whisper::load(&dir.join("model")).unwrap(),
            Whisper::load(&dir.join("ts-model")).unwrap(),
        );
        let read = |f: &str| {
            crate::audio::decode(std::fs::read(dir.join(f)).unwrap(), &Default::default())
                .unwrap()
                .samples
        };
        let (short, long) = (read("speech.wav"), read("long.wav"));
        let ids = |v: &Value| -> Vec<i64> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_i64().unwrap())
                .collect()
        };
        let close = |a: f64, b: &Value| (a - b.as_f64().unwrap()).abs() <= 1e-4;
        for case in goldens["cases"].as_array().unwrap() {
            let ts = case["model"] == "ts-model";
            let options = Options {
                language: case["language"].as_str().map(str::to_string),
                task: (case["task"] == "translate").then_some(Task::Translate),
                max_new_tokens: goldens[if ts { "tsMaxNewTokens" } else { "maxNewTokens" }]
                    .as_u64()
                    .map(|n| n as usize),
                return_timestamps: ts,
                num_beams: case["num_beams"].as_u64().map(|n| n as usize),
                length_penalty: case["length_penalty"].as_f64(),
                early_stopping: match &case["early_stopping"] {
                    Value::Bool(true) => EarlyStopping::Always,
                    Value::String(s) if s == "never" => EarlyStopping::Never,
                    _ => EarlyStopping::Heuristic,
                },
                ..Options::default()
            };
            let audio = if case["name"] == "ts-long" { &long } else { &short };
            let got = transcribe(if ts { &ts_model } else { &model }, audio, &options, &|| false).unwrap();
            if !ts {
                assert_eq!(got.sequence, ids(&case["sequence"]), "{case}");
                assert_eq!(got.text, case["text"].as_str().unwrap(), "{case}");
                let score = got.windows[0].score.unwrap();
                eprintln!(
                    "{case}: |score diff| {:.1e}",
                    (score - case["sequencesScore"].as_f64().unwrap()).abs()
                );
                assert!(close(score, &case["sequencesScore"]), "{score} {case}");
                continue;
            }
            if let Some(want) = case["windows"].as_array() {
                assert_eq!(got.windows.len(), want.len(), "{case}: {:?}", got.windows);
                for (w, p) in got.windows.iter().zip(want) {
                    eprintln!(
                        "{}: |diff| score {:.1e} avg_logprob {:.1e}",
                        case["name"],
                        (w.score.unwrap() - p["sequencesScore"].as_f64().unwrap()).abs(),
                        (w.avg_logprob - p["avgLogprob"].as_f64().unwrap()).abs()
                    );
                    assert!(close(w.score.unwrap(), &p["sequencesScore"]), "{w:?} {p}");
                    assert!(close(w.avg_logprob, &p["avgLogprob"]), "{w:?} {p}");
                }
                let want = ids(&case["tokens"]);
                assert_eq!(
                    got.sequence[got.sequence.len() - want.len()..],
                    want[..],
                    "{case}"
                );
            } else {
                assert_eq!(got.text, case["text"].as_str().unwrap(), "{case}");
                let want = case["chunks"].as_array().unwrap();
                assert_eq!(got.chunks.len(), want.len(), "{:?}", got.chunks);
                for (c, w) in got.chunks.iter().zip(want) {
                    assert_eq!(c.text, w["text"].as_str().unwrap());
                    assert_eq!(c.start, w["timestamp"][0].as_f64());
                    assert_eq!(c.end, w["timestamp"][1].as_f64());
                }
            }
        }
    }

    /// The beam options are checked before any work: 1..16 beams, a finite length penalty, and
    /// the beam-only options refused with one beam.
    #[test]
    fn beam_options_are_checked() {
        let opts = |num_beams, length_penalty, early_stopping| Options {
            num_beams,
            length_penalty,
            early_stopping,
            ..Options::default()
        };
        let heuristic = EarlyStopping::Heuristic;
        assert!(check_beams(&opts(None, None, heuristic), 1).is_ok());
        assert!(check_beams(&opts(Some(4), Some(0.5), EarlyStopping::Never), 1).is_ok());
        // The checkpoint's beams count where none is given.
        assert!(check_beams(&opts(None, Some(0.5), heuristic), 5).is_ok());
        let err = |o: Options| format!("{:#}", check_beams(&o, 1).unwrap_err());
        assert!(err(opts(Some(0), None, heuristic)).contains("numBeams"));
        assert!(err(opts(Some(17), None, heuristic)).contains("numBeams"));
        assert!(err(opts(Some(2), Some(f64::NAN), heuristic)).contains("lengthPenalty"));
        assert!(err(opts(None, Some(1.0), heuristic)).contains("only with numBeams"));
        assert!(err(opts(Some(1), None, EarlyStopping::Always)).contains("only with numBeams"));
    }
}
