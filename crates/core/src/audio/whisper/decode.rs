//! Greedy decoding as transformers' `WhisperForConditionalGeneration.generate` (short-form: up to
//! one 30 s window): log-mel features, the encoder once, language detection when no language is
//! given (one decoder step on `<|startoftranscript|>`, argmax over the language tokens), the forced
//! prompt, then one token at a time with `suppress_tokens` at every step and
//! `begin_suppress_tokens` at the first, until `<|endoftext|>` or the length limit.
pub use super::prompt::Task;
use super::prompt::{self, language_id};
use super::Whisper;
use crate::audio::mel::log_mel;
use crate::error::{fail, trim_libtorch, Code};
use anyhow::Result;
use tch::{IValue, Kind, Tensor};

/// What `transcribe` is asked.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// A code (`en`), token (`<|en|>`) or name (`english`); `None`: detected.
    pub language: Option<String>,
    pub task: Option<Task>,
    /// At most this many tokens after the prompt (default: generation_config's `max_length` less
    /// the prompt, within the decoder's positions).
    pub max_new_tokens: Option<usize>,
}

/// The result: the whole sequence (prompt, then generated tokens, as `generate` returns it), the
/// text (timestamps and special tokens skipped), the language token used.
#[derive(Debug, Clone, PartialEq)]
pub struct Transcript {
    pub sequence: Vec<i64>,
    pub text: String,
    pub language: Option<String>,
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

fn suppress(logits: &Tensor, ids: &[i64]) -> Tensor {
    if ids.is_empty() {
        return logits.shallow_clone();
    }
    let vocab = logits.size()[0];
    let valid: Vec<i64> = ids.iter().copied().filter(|&i| (0..vocab).contains(&i)).collect();
    logits.index_fill(0, &Tensor::from_slice(&valid), f64::NEG_INFINITY)
}

/// Transcribes (or translates) 16 kHz mono `samples` (the first 30 s), calling `aborted` between
/// steps.
pub fn transcribe(
    model: &Whisper,
    samples: &[f32],
    options: &Options,
    aborted: &dyn Fn() -> bool,
) -> Result<Transcript> {
    let s = &model.settings;
    let _guard = tch::no_grad_guard();
    let features = log_mel(samples, &s.features)?.unsqueeze(0);
    let mut cross = run(&model.encoder, vec![features])?;
    if cross.len() != 2 {
        return Err(fail(Code::ForwardError, "the encoder returned other than (k, v)"));
    }
    let cross_v = cross.pop().unwrap();
    let cross_k = cross.pop().unwrap();
    let (_, language_undefined) = prompt::forced_start(s);
    let language = match &options.language {
        Some(l) => Some(language_id(s, l)?),
        None if !s.lang_to_id.is_empty() && language_undefined => {
            // transformers' detect_language: every non-language token masked, then argmax.
            let logits = Step::new(model, &cross_k, &cross_v).feed(&[s.decoder_start])?;
            let lang: Vec<i64> = s.lang_to_id.values().copied().collect();
            let mask = Tensor::full(
                [logits.size()[0]],
                f64::NEG_INFINITY,
                (Kind::Float, tch::Device::Cpu),
            )
            .index_fill(0, &Tensor::from_slice(&lang), 0.0);
            Some(i64::try_from((logits + mask).argmax(0, false))?)
        }
        None => None,
    };
    let init = prompt::build(s, language, options.language.is_some(), options.task, false)?;
    let limit = s.max_length.min(s.max_target_positions);
    if init.len() >= limit {
        return Err(fail(Code::InvalidArg, "the prompt fills the decoder's positions"));
    }
    let max_new = options
        .max_new_tokens
        .unwrap_or(limit - init.len())
        .min(limit - init.len());
    let mut step = Step::new(model, &cross_k, &cross_v);
    let mut sequence = init.clone();
    let mut logits = step.feed(&init)?;
    for generated in 0..max_new {
        if aborted() {
            return Err(fail(Code::Aborted, "the transcription was aborted"));
        }
        let mut scores = suppress(&logits, &s.suppress_tokens);
        if generated == 0 {
            scores = suppress(&scores, &s.begin_suppress_tokens);
        }
        let next = i64::try_from(scores.argmax(0, false))?;
        sequence.push(next);
        if next == s.eos || generated + 1 == max_new {
            break;
        }
        logits = step.feed(&[next])?;
    }
    let text_ids: Vec<u32> = sequence
        .iter()
        .filter(|&&t| s.timestamp_begin.is_none_or(|b| t < b))
        .map(|&t| t as u32)
        .collect();
    let text = model.tokenizer.decode(&text_ids, true)?;
    let language = language.and_then(|id| {
        s.lang_to_id
            .iter()
            .find(|(_, &v)| v == id)
            .map(|(k, _)| k.trim_matches(['<', '|', '>']).to_string())
    });
    Ok(Transcript {
        sequence,
        text,
        language,
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
}
