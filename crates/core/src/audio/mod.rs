//! Audio for the speech pipeline: `decode` (WAV, FLAC, MP3, Ogg/Vorbis by symphonia, down-mixed to
//! mono, within limits against audio bombs), `resample` (to the model's rate, rubato) and `mel`
//! (Whisper's log-mel features, as transformers' `WhisperFeatureExtractor`).
pub mod decode;
pub mod mel;
pub mod resample;

pub use decode::{decode, Limits};

/// Mono samples in [-1, 1] at `sample_rate` Hz.
#[derive(Debug, Clone, PartialEq)]
pub struct Audio {
    pub samples: Vec<f32>,
    pub sample_rate: u32,
}

impl Audio {
    /// The audio at `rate` Hz (itself when it already is).
    pub fn at_rate(self, rate: u32) -> anyhow::Result<Audio> {
        if self.sample_rate == rate {
            return Ok(self);
        }
        let samples = resample::resample(&self.samples, self.sample_rate, rate)?;
        Ok(Audio {
            samples,
            sample_rate: rate,
        })
    }

    /// The duration in seconds.
    pub fn seconds(&self) -> f64 {
        self.samples.len() as f64 / f64::from(self.sample_rate)
    }
}
pub mod whisper;

/// What the audio pipelines take: an encoded file's bytes, or mono samples at their rate.
pub enum Input {
    Encoded(Vec<u8>),
    Samples(Audio),
}

/// `input`'s mono samples at `rate` Hz: decoded (within `limits`) or taken as given, then
/// resampled. `InvalidArg` for undecodable bytes, a rate outside 1..384,000 Hz, a sample that is
/// not finite, audio over `limits.max_seconds`.
pub fn samples_at(input: Input, rate: u32, limits: &Limits) -> anyhow::Result<Vec<f32>> {
    use crate::error::{bail_code, Code};
    let audio = match input {
        Input::Encoded(bytes) => decode(bytes, limits)?,
        Input::Samples(a) => {
            if !(1..=384_000).contains(&a.sample_rate) {
                bail_code!(
                    Code::InvalidArg,
                    "invalid audio: a sampling rate of {} Hz (1..384000)",
                    a.sample_rate
                );
            }
            if a.seconds() > limits.max_seconds {
                bail_code!(
                    Code::InvalidArg,
                    "invalid audio: longer than the limit of {} s (maxDurationS)",
                    limits.max_seconds
                );
            }
            if a.samples.iter().any(|x| !x.is_finite()) {
                bail_code!(Code::InvalidArg, "invalid audio: a sample is NaN or infinite");
            }
            a
        }
    };
    Ok(audio.at_rate(rate)?.samples)
}

#[cfg(test)]
mod tests {
    use super::mel::{log_mel, MelSettings};
    use super::*;
    use std::path::Path;

    #[test]
    fn samples_at_decodes_resamples_and_refuses() {
        let same = Input::Samples(Audio {
            samples: vec![0.5; 160],
            sample_rate: 16000,
        });
        assert_eq!(
            samples_at(same, 16000, &Limits::default()).unwrap(),
            vec![0.5; 160]
        );
        let up = Input::Samples(Audio {
            samples: vec![0.0; 800],
            sample_rate: 8000,
        });
        assert_eq!(samples_at(up, 16000, &Limits::default()).unwrap().len(), 1600);
        let refused =
            |input: Input, limits: Limits| format!("{:#}", samples_at(input, 16000, &limits).unwrap_err());
        let nan = Input::Samples(Audio {
            samples: vec![f32::NAN],
            sample_rate: 16000,
        });
        assert!(refused(nan, Limits::default()).contains("NaN"));
        let zero = Input::Samples(Audio {
            samples: vec![0.0],
            sample_rate: 0,
        });
        assert!(refused(zero, Limits::default()).contains("sampling rate"));
        let long = Input::Samples(Audio {
            samples: vec![0.0; 32000],
            sample_rate: 16000,
        });
        assert!(refused(long, Limits { max_seconds: 1.0 }).contains("limit of 1 s"));
        assert!(refused(Input::Encoded(b"garbage".to_vec()), Limits::default()).contains("invalid audio"));
    }

    /// (max, mean) |difference| of the features of `file` from `want`.
    fn diff(file: &Path, want: &[f32]) -> (f32, f32) {
        let audio = decode(std::fs::read(file).unwrap(), &Limits::default())
            .unwrap()
            .at_rate(16000)
            .unwrap();
        let got = log_mel(&audio.samples, &MelSettings::default()).unwrap();
        let got: Vec<f32> = Vec::<f32>::try_from(got.flatten(0, -1)).unwrap();
        assert_eq!(got.len(), want.len());
        let d: Vec<f32> = got.iter().zip(want).map(|(a, b)| (a - b).abs()).collect();
        (
            d.iter().copied().fold(0.0, f32::max),
            d.iter().sum::<f32>() / d.len() as f32,
        )
    }

    /// models/golden/whisper (the `whisper` fixture job): WhisperFeatureExtractor's features of
    /// speech.wav, against ours of the WAV and of the committed FLAC (lossless: within 1e-5), and
    /// of the MP3 and Ogg/Vorbis copies (lossy codecs: the bound is the codec's, not ours).
    #[test]
    fn features_equal_whisper_feature_extractor() {
        let dir = Path::new(crate::REPO_ROOT).join("models/golden/whisper");
        let Ok(bytes) = std::fs::read(dir.join("speech.features.f32")) else {
            eprintln!("skipped: run `node tools/models.js --lazy` (the whisper job) first");
            return;
        };
        let want: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let fixtures = Path::new(crate::REPO_ROOT).join("models/fixtures/audio");
        let [wav, flac, mp3, ogg, resampled] = [
            dir.join("speech.wav"),
            fixtures.join("speech.flac"),
            fixtures.join("speech.mp3"),
            fixtures.join("speech.ogg"),
            dir.join("speech44k.wav"),
        ]
        .map(|f| diff(&f, &want));
        eprintln!("(max, mean) |diff|: wav {wav:?} flac {flac:?} mp3 {mp3:?} ogg {ogg:?} 44.1k stereo {resampled:?}");
        assert!(wav.0 <= 1e-5 && flac.0 <= 1e-5, "wav {wav:?} flac {flac:?}");
        // Lossy codecs and resampling: what moves is the quietest bins near the -8 floor (log10
        // magnifies them), so the bound is on the mean.
        for (name, d) in [("mp3", mp3), ("ogg", ogg), ("44.1k", resampled)] {
            assert!(d.1 < 0.05, "{name}: {d:?}");
        }
    }
}
