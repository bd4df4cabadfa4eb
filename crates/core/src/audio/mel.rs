//! Whisper's log-mel features, as transformers' `WhisperFeatureExtractor` computes them with torch
//! (`_torch_extract_fbank_features`, transformers 5.23): the audio zero-padded or cut to
//! `chunk_length` seconds, `torch.stft(n_fft, hop, hann_window(n_fft), center, reflect)`, the last
//! frame dropped, power spectrum, the mel filter bank (float64 Slaney filters cast to float32, as
//! `mel_filter_bank(..., norm="slaney", mel_scale="slaney")`), `log10(max(x, 1e-10))`, clamped to
//! 8 below the maximum, then `(x + 4) / 4`. The same libtorch ops in the same order, so the
//! features agree with Python's to float32 rounding.
use crate::error::{fail, Code};
use anyhow::Result;
use tch::{Device, Kind, Tensor};

/// The feature extractor's settings (a checkpoint's `preprocessor_config.json`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MelSettings {
    /// `feature_size`: 80 (Whisper up to large-v2) or 128 (large-v3).
    pub n_mels: usize,
    pub n_fft: usize,
    pub hop_length: usize,
    pub sampling_rate: u32,
    /// `n_samples`: the window the model reads (30 s at 16 kHz: 480,000).
    pub n_samples: usize,
}

impl Default for MelSettings {
    fn default() -> Self {
        MelSettings {
            n_mels: 80,
            n_fft: 400,
            hop_length: 160,
            sampling_rate: 16000,
            n_samples: 480_000,
        }
    }
}

fn hertz_to_mel(freq: f64) -> f64 {
    // Slaney: linear below 1 kHz, logarithmic above (transformers' audio_utils.hertz_to_mel).
    let (min_log_hertz, min_log_mel, logstep) = (1000.0, 15.0, 27.0 / 6.4f64.ln());
    if freq >= min_log_hertz {
        min_log_mel + (freq / min_log_hertz).ln() * logstep
    } else {
        3.0 * freq / 200.0
    }
}

fn mel_to_hertz(mels: f64) -> f64 {
    let (min_log_hertz, min_log_mel, logstep) = (1000.0, 15.0, 6.4f64.ln() / 27.0);
    if mels >= min_log_mel {
        min_log_hertz * (logstep * (mels - min_log_mel)).exp()
    } else {
        200.0 * mels / 3.0
    }
}

fn linspace(start: f64, end: f64, n: usize) -> Vec<f64> {
    // numpy.linspace: start + i * step, the last point exactly `end`.
    let step = (end - start) / (n - 1) as f64;
    (0..n)
        .map(|i| if i == n - 1 { end } else { start + i as f64 * step })
        .collect()
}

/// The `[n_fft / 2 + 1, n_mels]` filter bank of `mel_filter_bank(num_frequency_bins, n_mels, 0,
/// 8000, sampling_rate, norm="slaney", mel_scale="slaney")`, computed in float64 as numpy does.
pub fn mel_filters(s: &MelSettings) -> Vec<f64> {
    let bins = s.n_fft / 2 + 1;
    let fft_freqs = linspace(0.0, f64::from(s.sampling_rate / 2), bins);
    let mels = linspace(hertz_to_mel(0.0), hertz_to_mel(8000.0), s.n_mels + 2);
    let filter_freqs: Vec<f64> = mels.iter().map(|&m| mel_to_hertz(m)).collect();
    let diff: Vec<f64> = filter_freqs.windows(2).map(|w| w[1] - w[0]).collect();
    let mut out = vec![0.0; bins * s.n_mels];
    for (b, &f) in fft_freqs.iter().enumerate() {
        for m in 0..s.n_mels {
            let down = -(filter_freqs[m] - f) / diff[m];
            let up = (filter_freqs[m + 2] - f) / diff[m + 1];
            let enorm = 2.0 / (filter_freqs[m + 2] - filter_freqs[m]);
            out[b * s.n_mels + m] = 0.0f64.max(down.min(up)) * enorm;
        }
    }
    out
}

/// The `[n_mels, n_samples / hop]` log-mel features of 16 kHz mono `samples` (padded with zeros or
/// cut to `n_samples`), float32.
pub fn log_mel(samples: &[f32], s: &MelSettings) -> Result<Tensor> {
    log_mel_of_length(samples, s, s.n_samples)
}

/// The `[n_mels, length / hop]` log-mel features of `samples` padded with zeros or cut to `length`
/// samples (at least `n_samples`): `log_mel` for long-form audio, as the feature extractor with
/// `truncation=False, padding="longest"` (the clamp 8 below the maximum is over all of it).
pub fn log_mel_of_length(samples: &[f32], s: &MelSettings, length: usize) -> Result<Tensor> {
    if s.n_mels == 0 || s.n_fft < 2 || s.hop_length == 0 || s.n_samples < s.n_fft {
        return Err(fail(
            Code::InvalidArg,
            format!("invalid feature extractor settings {s:?}"),
        ));
    }
    let length = length.max(s.n_samples);
    let mut wave = vec![0f32; length];
    let n = samples.len().min(length);
    wave[..n].copy_from_slice(&samples[..n]);
    let _guard = tch::no_grad_guard();
    let wave = Tensor::from_slice(&wave).view([1, length as i64]);
    let window = Tensor::hann_window(s.n_fft as i64, (Kind::Float, Device::Cpu));
    // torch.stft's Python defaults: center=True (the signal reflect-padded by n_fft / 2 on both
    // sides, as torch.stft pads it before framing), onesided, not normalized. tch passes
    // `align_to_window` as a value, which ATen refuses with center=True: so the padding is done here.
    let half = (s.n_fft / 2) as i64;
    let padded = wave.unsqueeze(0).reflection_pad1d([half, half]).squeeze_dim(0);
    let stft = padded.f_stft_center(
        s.n_fft as i64,
        s.hop_length as i64,
        None::<i64>,
        Some(&window),
        false,
        "reflect",
        false,
        true,
        true,
        false,
    )?;
    let frames = stft.size()[2];
    let magnitudes = stft
        .narrow(2, 0, frames - 1)
        .abs()
        .pow_tensor_scalar(2)
        .contiguous();
    let bins = (s.n_fft / 2 + 1) as i64;
    let filters: Vec<f32> = mel_filters(s).iter().map(|&v| v as f32).collect();
    let filters = Tensor::from_slice(&filters).view([bins, s.n_mels as i64]);
    let mel = filters.tr().matmul(&magnitudes);
    let log_spec = mel.clamp_min(1e-10).log10();
    let floor = log_spec.max() - 8.0;
    let log_spec = log_spec.maximum(&floor);
    Ok(((log_spec + 4.0) / 4.0).squeeze_dim(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slaney_filters_match_transformers_mel_filter_bank() {
        // transformers 5.23 audio_utils.mel_filter_bank(201, 80, 0, 8000, 16000, "slaney", "slaney"):
        // its sum, and entries [1, 0], [10, 5], [10, 10], [200, 79] (printed by Python).
        let f = mel_filters(&MelSettings::default());
        let sum: f64 = f.iter().sum();
        assert!((sum - 1.999024102917858).abs() < 1e-12, "{sum}");
        assert!((f[80] - 0.024862593984176087).abs() < 1e-15, "{}", f[80]);
        assert!(f[10 * 80 + 5].abs() < 1e-15);
        assert!(
            (f[10 * 80 + 10] - 0.019908218880980738).abs() < 1e-15,
            "{}",
            f[10 * 80 + 10]
        );
        assert!(f[200 * 80 + 79].abs() < 1e-15);
    }

    #[test]
    fn the_128_mel_bank_of_large_v3_matches_too() {
        // mel_filter_bank(201, 128, 0, 8000, 16000, "slaney", "slaney"): its sum and row 150's
        // largest entry, at mel 116.
        let s = MelSettings {
            n_mels: 128,
            ..MelSettings::default()
        };
        let f = mel_filters(&s);
        let sum: f64 = f.iter().sum();
        assert!((sum - 3.1909855285406996).abs() < 1e-12, "{sum}");
        assert!((f[150 * 128 + 116] - 0.006443682645083771).abs() < 1e-15);
        assert_eq!(log_mel(&[0.1; 400], &s).unwrap().size(), vec![128, 3000]);
    }

    #[test]
    fn features_are_80_by_3000_and_silence_is_flat() {
        let features = log_mel(&[0.0; 1000], &MelSettings::default()).unwrap();
        assert_eq!(features.size(), vec![80, 3000]);
        // log10(1e-10) everywhere: (-10 + 4) / 4.
        let v = f64::try_from(features.max()).unwrap();
        assert!((v + 1.5).abs() < 1e-6, "{v}");
    }
}
