//! `SpeechModel` (glue over `torch_core::audio`): a Whisper folder (python/export_whisper.py) and
//! `transcribe`, which decodes, resamples, extracts features and decodes tokens on the executor.
//! lib/audio/speech-recognition.js is the user's class over it.
use crate::error::{bail_code, guard, Code};
use crate::napi::convert::{self, Arg};
use crate::napi::js::{self, Val};
use crate::napi::outcome::Outcome;
use crate::napi::task::{self, abort_flag, prepare, Promise};
use crate::text::text;
use napi::bindgen_prelude::Unknown;
use napi::{Env, JsValue};
use napi_derive::napi;
use std::path::Path;
use std::sync::{Arc, Mutex};
use torch_core::args::Source;
use torch_core::audio::whisper::{self, Task, Transcript, Whisper};
use torch_core::audio::{self, Limits};

/// @internal A Whisper speech-to-text model loaded from a torch-node speech folder;
/// `SpeechRecognitionPipeline` (lib/audio/speech-recognition.js) wraps it.
#[napi(js_name = "_SpeechModel")]
pub struct JsSpeechModel {
    model: Arc<Mutex<Whisper>>,
    sampling_rate: u32,
    num_beams: u32,
}

/// What `transcribe` reads before the work starts.
enum Input {
    Encoded(Source),
    Samples(Vec<f32>),
}

struct Request {
    input: Input,
    options: whisper::Options,
    limits: Limits,
}

fn read_input(env: &Env, v: Val) -> anyhow::Result<Input> {
    let raw = env.raw();
    let samples = js::with_typed_array(raw, v, |view| {
        if view.type_name != "Float32Array" {
            return Ok(None);
        }
        Ok(Some(
            view.bytes
                .chunks_exact(4)
                .map(|b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
        ))
    })?
    .flatten();
    match samples {
        Some(s) => Ok(Input::Samples(s)),
        None => Ok(Input::Encoded(js::source(raw, v, "audio", "an audio file's")?)),
    }
}

fn number_or_null(env: js::Env, x: Option<f64>) -> anyhow::Result<Val> {
    match x {
        Some(x) => js::new_number(env, x),
        None => js::null(env),
    }
}

fn finish(env: js::Env, (t, with_chunks): (Transcript, bool)) -> anyhow::Result<Val> {
    let ids = |v: &[i64]| -> Vec<f64> { v.iter().map(|&x| x as f64).collect() };
    let language = match &t.language {
        Some(l) => js::new_string(env, l)?,
        None => js::null(env)?,
    };
    let mut entries = vec![
        ("text".to_string(), js::new_string(env, &t.text)?),
        (
            "tokens".to_string(),
            js::new_number_array(env, &ids(&t.sequence))?,
        ),
        ("language".to_string(), language),
        ("duration".to_string(), js::new_number(env, t.duration)?),
    ];
    if with_chunks {
        let chunks = t
            .chunks
            .iter()
            .map(|c| {
                let stamp = js::new_array(
                    env,
                    vec![number_or_null(env, c.start)?, number_or_null(env, c.end)?],
                )?;
                let mut fields = vec![
                    ("timestamp".to_string(), stamp),
                    ("text".to_string(), js::new_string(env, &c.text)?),
                    ("tokens".to_string(), js::new_number_array(env, &ids(&c.tokens))?),
                ];
                // The decoded window the chunk came from: how its kept pass looked.
                if let Some(w) = c.window.and_then(|i| t.windows.get(i)) {
                    fields.extend([
                        ("seek".to_string(), js::new_number(env, w.seek as f64)?),
                        ("temperature".to_string(), js::new_number(env, w.temperature)?),
                        ("avgLogprob".to_string(), js::new_number(env, w.avg_logprob)?),
                        (
                            "compressionRatio".to_string(),
                            js::new_number(env, w.compression_ratio)?,
                        ),
                        ("noSpeechProb".to_string(), number_or_null(env, w.no_speech_prob)?),
                    ]);
                }
                js::new_object(env, fields)
            })
            .collect::<anyhow::Result<Vec<Val>>>()?;
        entries.push(("chunks".to_string(), js::new_array(env, chunks)?));
    }
    js::new_object(env, entries)
}

/// Reads an encoded file's bytes (from a path when given one).
fn encoded_bytes(source: Source) -> anyhow::Result<Vec<u8>> {
    match source {
        Source::Bytes(b) => Ok(b),
        Source::Path(p) => std::fs::read(&p)
            .map_err(|e| crate::error::fail(Code::InvalidArg, format!("cannot read audio '{p}': {e}"))),
    }
}

/// What `_decodeAudio` reads before the work starts.
struct DecodeRequest {
    input: Input,
    source_rate: u32,
    rate: u32,
    limits: Limits,
}

fn finish_samples(env: js::Env, samples: Vec<f32>) -> anyhow::Result<Val> {
    let bytes: Vec<u8> = samples.iter().flat_map(|x| x.to_ne_bytes()).collect();
    js::new_typed_array(env, "Float32Array", &bytes)
}

/// @internal Mono float32 samples at `rate` Hz, on the executor (off the event loop), for the
/// audio pipelines (lib/audio/audio-classification.js): `audio` an encoded file (a Buffer or
/// Uint8Array of WAV, FLAC, MP3 or Ogg/Vorbis, or a path to one), decoded and down-mixed, or mono
/// samples (a Float32Array) at `sourceRate` Hz (default `rate`); resampled to `rate` either way.
/// `maxDurationS` (default 1200) bounds the audio. Errors: `InvalidArg` ("invalid audio: ..." for
/// undecodable bytes, rates outside 1..384,000 Hz, NaN samples, audio over the limit; "cannot read
/// audio" for a path), `Aborted` (the signal, while queued).
#[napi(js_name = "_decodeAudio", skip_typescript)]
pub fn decode_audio(
    env: Env,
    audio: Unknown<'_>,
    rate: Arg,
    source_rate: Arg,
    max_duration_s: Arg,
    signal: Option<Unknown<'_>>,
) -> Outcome<Promise> {
    let audio = audio.raw();
    let signal = signal.map(|s| s.raw());
    guard(|| {
        // Read here, not by napi's conversions: a wrong argument is InvalidArg, never a throw.
        let optional = |a: Arg, what: &str| -> anyhow::Result<Option<f64>> {
            let r = a.raw();
            if js::is_nullish(r.env, r.val)? {
                return Ok(None);
            }
            convert::number(r.env, r.val, what).map(Some)
        };
        let whole = |a: Arg, what: &str| -> anyhow::Result<Option<u32>> {
            match optional(a, what)? {
                None => Ok(None),
                Some(x) if x.fract() == 0.0 && (1.0..=f64::from(u32::MAX)).contains(&x) => Ok(Some(x as u32)),
                Some(x) => bail_code!(
                    Code::InvalidArg,
                    "{what}: expected a rate in Hz (an integer ≥ 1), got {x}"
                ),
            }
        };
        let Some(rate) = whole(rate, "rate")? else {
            bail_code!(Code::InvalidArg, "rate: expected a rate in Hz (an integer ≥ 1)");
        };
        let source_rate = whole(source_rate, "sourceRate")?;
        let max_duration_s = optional(max_duration_s, "maxDurationS")?;
        let prepared = prepare(|| {
            let limits = match max_duration_s {
                Some(s) if s.is_finite() && s > 0.0 => Limits { max_seconds: s },
                Some(s) => bail_code!(
                    Code::InvalidArg,
                    "maxDurationS: expected a positive number, got {s}"
                ),
                None => Limits::default(),
            };
            let abort = signal.map(|s| abort_flag(&env, s)).transpose()?;
            Ok((
                DecodeRequest {
                    input: read_input(&env, audio)?,
                    source_rate: source_rate.unwrap_or(rate),
                    rate,
                    limits,
                },
                abort,
            ))
        })?;
        task::spawn(
            env.raw(),
            "decodeAudio",
            prepared,
            move |r: DecodeRequest| {
                let input = match r.input {
                    Input::Samples(samples) => audio::Input::Samples(audio::Audio {
                        samples,
                        sample_rate: r.source_rate,
                    }),
                    Input::Encoded(source) => audio::Input::Encoded(encoded_bytes(source)?),
                };
                audio::samples_at(input, r.rate, &r.limits)
            },
            finish_samples,
        )
    })
    .into()
}

#[napi]
impl JsSpeechModel {
    /// @internal Loads `folder` (written by python/export_whisper.py): the manifest, the encoder
    /// and decoder-step TorchScript programs and the tokenizer, on the CPU
    /// (`SpeechRecognitionPipeline.load` calls it).
    #[napi(js_name = "_open", skip_typescript)]
    pub fn open(folder: Arg) -> Outcome<JsSpeechModel> {
        guard(|| {
            let f = folder.raw();
            let folder = text(f.env, f.val, "folder")?;
            let model = Whisper::load(Path::new(&folder))?;
            let sampling_rate = model.settings.features.sampling_rate;
            let num_beams = model.settings.num_beams as u32;
            Ok(JsSpeechModel {
                model: Arc::new(Mutex::new(model)),
                sampling_rate,
                num_beams,
            })
        })
        .into()
    }

    /// The rate the model's features are computed at (16000 for Whisper).
    #[napi(getter, skip_typescript)]
    pub fn sampling_rate(&self) -> u32 {
        self.sampling_rate
    }

    /// generation_config's `num_beams` (1 where absent): the beams `transcribe` takes by default.
    #[napi(getter, skip_typescript)]
    pub fn checkpoint_num_beams(&self) -> u32 {
        self.num_beams
    }

    /// @internal What `SpeechRecognitionPipeline.run` calls (its options checked there): `audio` an
    /// encoded file (Buffer, Uint8Array or path) or 16 kHz mono samples (Float32Array); resolves to
    /// `{ text, tokens, language, duration }` and, with `return_timestamps`, `chunks`
    /// (`[{ timestamp: [start, end], text, tokens, seek, temperature, avgLogprob,
    /// compressionRatio, noSpeechProb }]`). `stride_length_s`: `[left, right]`. `temperature`
    /// (the temperatures tried in turn), the three thresholds and `seed`: the fallback
    /// (`whisper::Fallback`, checked there). `num_beams` (default the checkpoint's),
    /// `length_penalty` and `early_stopping` (`'true'`, `'false'` or `'never'`): beam search
    /// (checked by `whisper::transcribe`). `signal` rejects with `Aborted` while the call is queued.
    #[napi(skip_typescript, js_name = "_transcribe")]
    #[allow(clippy::too_many_arguments)]
    pub fn transcribe(
        &self,
        env: Env,
        audio: Unknown<'_>,
        language: Option<String>,
        task: Option<String>,
        max_new_tokens: Option<u32>,
        max_duration_s: Option<f64>,
        return_timestamps: Option<bool>,
        chunk_length_s: Option<f64>,
        stride_length_s: Option<Vec<f64>>,
        temperature: Option<Vec<f64>>,
        thresholds: Option<Vec<Option<f64>>>,
        seed: Option<u32>,
        num_beams: Option<u32>,
        length_penalty: Option<f64>,
        early_stopping: Option<String>,
        signal: Option<Unknown<'_>>,
    ) -> Outcome<Promise> {
        let model = self.model.clone();
        let audio = audio.raw();
        let signal = signal.map(|s| s.raw());
        let with_chunks = return_timestamps.unwrap_or(false);
        guard(|| {
            let prepared = prepare(|| {
                let task = match task.as_deref() {
                    None => None,
                    Some("transcribe") => Some(Task::Transcribe),
                    Some("translate") => Some(Task::Translate),
                    Some(other) => bail_code!(
                        Code::InvalidArg,
                        "task: expected 'transcribe' or 'translate', got '{other}'"
                    ),
                };
                let limits = match max_duration_s {
                    Some(s) if s.is_finite() && s > 0.0 => Limits { max_seconds: s },
                    Some(s) => bail_code!(
                        Code::InvalidArg,
                        "maxDurationS: expected a positive number, got {s}"
                    ),
                    None => Limits::default(),
                };
                let positive = |x: f64| x.is_finite() && x > 0.0;
                if let Some(c) = chunk_length_s.filter(|&c| !positive(c)) {
                    bail_code!(
                        Code::InvalidArg,
                        "chunkLengthS: expected a positive number, got {c}"
                    );
                }
                let stride_length_s = match stride_length_s.as_deref() {
                    None => None,
                    Some(&[l, r]) if l.is_finite() && r.is_finite() && l >= 0.0 && r >= 0.0 => Some((l, r)),
                    Some(other) => bail_code!(
                        Code::InvalidArg,
                        "strideLengthS: expected [left, right] seconds >= 0, got {other:?}"
                    ),
                };
                let [compression_ratio_threshold, logprob_threshold, no_speech_threshold] =
                    match thresholds.as_deref() {
                        None => [None; 3],
                        Some(&[c, l, n]) => [c, l, n],
                        Some(other) => bail_code!(
                            Code::InvalidArg,
                            "thresholds: expected [compression ratio, logprob, no speech], got {other:?}"
                        ),
                    };
                let fallback = whisper::Fallback {
                    temperatures: temperature.unwrap_or_else(|| vec![0.0]),
                    compression_ratio_threshold,
                    logprob_threshold,
                    no_speech_threshold,
                    seed: u64::from(seed.unwrap_or(0)),
                };
                fallback.validate()?;
                let early_stopping = match early_stopping.as_deref() {
                    None | Some("false") => whisper::EarlyStopping::Heuristic,
                    Some("true") => whisper::EarlyStopping::Always,
                    Some("never") => whisper::EarlyStopping::Never,
                    Some(other) => bail_code!(
                        Code::InvalidArg,
                        "earlyStopping: expected true, false or 'never', got '{other}'"
                    ),
                };
                let options = whisper::Options {
                    language,
                    task,
                    max_new_tokens: max_new_tokens.map(|n| n as usize),
                    return_timestamps: return_timestamps.unwrap_or(false),
                    chunk_length_s,
                    stride_length_s,
                    fallback,
                    num_beams: num_beams.map(|n| n as usize),
                    length_penalty,
                    early_stopping,
                };
                let abort = signal.map(|s| abort_flag(&env, s)).transpose()?;
                Ok((
                    Request {
                        input: read_input(&env, audio)?,
                        options,
                        limits,
                    },
                    abort,
                ))
            })?;
            task::spawn(
                env.raw(),
                "transcribe",
                prepared,
                move |r: Request| {
                    let model = model.lock().unwrap_or_else(|p| p.into_inner());
                    let rate = model.settings.features.sampling_rate;
                    let samples = match r.input {
                        Input::Samples(s) => {
                            if s.len() as f64 > r.limits.max_seconds * f64::from(rate) {
                                bail_code!(
                                    Code::InvalidArg,
                                    "invalid audio: longer than the limit of {} s (maxDurationS)",
                                    r.limits.max_seconds
                                );
                            }
                            s
                        }
                        Input::Encoded(source) => {
                            audio::decode(encoded_bytes(source)?, &r.limits)?
                                .at_rate(rate)?
                                .samples
                        }
                    };
                    let t = whisper::transcribe(&model, &samples, &r.options, &|| false)?;
                    Ok((t, with_chunks))
                },
                finish,
            )
        })
        .into()
    }
}
