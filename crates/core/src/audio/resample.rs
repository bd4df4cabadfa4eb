//! Resampling to the model's rate with rubato's synchronous FFT resampler (`FftFixedIn`: a fixed
//! ratio of integer rates, the band-limited interpolation of the signal; its delay is removed so
//! sample 0 stays at time 0). transformers' pipeline resamples with torchaudio's windowed-sinc
//! `resample` (arrays) or ffmpeg's swresample (files): the three agree to the filters' roll-off
//! (docs/speech.md gives the difference measured).
use crate::error::{fail, Code};
use anyhow::Result;
use rubato::{FftFixedIn, Resampler};

/// Input frames per FFT chunk.
const CHUNK: usize = 1024;

/// `samples` at `from` Hz resampled to `to` Hz: `ceil(len * to / from)` samples.
pub fn resample(samples: &[f32], from: u32, to: u32) -> Result<Vec<f32>> {
    if from == 0 || to == 0 {
        return Err(fail(
            Code::InvalidArg,
            format!("invalid audio: sample rate {from} Hz"),
        ));
    }
    if from == to {
        return Ok(samples.to_vec());
    }
    let mut resampler = FftFixedIn::<f32>::new(from as usize, to as usize, CHUNK, 2, 1).map_err(|e| {
        fail(
            Code::InvalidArg,
            format!("cannot resample {from} Hz to {to} Hz: {e}"),
        )
    })?;
    let wanted = (samples.len() as u64 * u64::from(to)).div_ceil(u64::from(from)) as usize;
    let delay = resampler.output_delay();
    let mut out: Vec<f32> = Vec::with_capacity(wanted + delay + CHUNK);
    let mut pos = 0;
    let map = |e: rubato::ResampleError| fail(Code::Internal, format!("resampling failed: {e}"));
    // Past the input: zeros until the delayed output is complete.
    while out.len() < wanted + delay {
        let need = resampler.input_frames_next();
        let chunk: Vec<f32> = (pos..pos + need)
            .map(|i| samples.get(i).copied().unwrap_or(0.0))
            .collect();
        pos += need;
        let produced = resampler.process(&[chunk], None).map_err(map)?;
        out.extend_from_slice(&produced[0]);
    }
    Ok(out[delay..delay + wanted].to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sine(freq: f64, rate: u32, n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| (2.0 * std::f64::consts::PI * freq * i as f64 / f64::from(rate)).sin() as f32)
            .collect()
    }

    #[test]
    fn a_tone_keeps_its_phase_and_amplitude_from_44100_to_16000() {
        let out = resample(&sine(440.0, 44100, 44100), 44100, 16000).unwrap();
        assert_eq!(out.len(), 16000);
        let want = sine(440.0, 16000, 16000);
        // Away from the edges (the filter sees zeros beyond them).
        let worst = (200..15800).map(|i| (out[i] - want[i]).abs()).fold(0.0, f32::max);
        assert!(worst < 1e-3, "max error {worst}");
    }

    #[test]
    fn same_rate_is_a_copy_and_zero_rate_an_error() {
        assert_eq!(resample(&[0.5, -0.5], 16000, 16000).unwrap(), vec![0.5, -0.5]);
        assert!(resample(&[0.5], 0, 16000).is_err());
    }
}
