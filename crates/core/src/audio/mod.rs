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
