//! Encoded audio (WAV, FLAC, MP3, Ogg/Vorbis) to mono float samples with symphonia. Every failure is
//! a coded `InvalidArg` ("invalid audio: ..."); the decoded length is bounded by `Limits` as the
//! packets arrive, so a header that lies about its length costs no memory before it is refused.
use super::Audio;
use crate::error::{fail, Code};
use anyhow::Result;
use symphonia::core::audio::SampleBuffer;
use symphonia::core::codecs::{DecoderOptions, CODEC_TYPE_NULL};
use symphonia::core::errors::Error as SymphoniaError;
use symphonia::core::formats::FormatOptions;
use symphonia::core::io::MediaSourceStream;
use symphonia::core::meta::MetadataOptions;
use symphonia::core::probe::Hint;

/// Bounds on what `decode` accepts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// The longest audio decoded, in seconds (default 1200: 20 minutes, at most 230 MB of mono
    /// samples at 48 kHz).
    pub max_seconds: f64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_seconds: 1200.0 }
    }
}

/// The highest source sample rate accepted (384 kHz, the most any common format writes).
const MAX_RATE: u32 = 384_000;
/// The most channels accepted (symphonia's own channel masks stop at 32 positions).
const MAX_CHANNELS: usize = 32;

fn invalid(message: impl std::fmt::Display) -> anyhow::Error {
    fail(Code::InvalidArg, format!("invalid audio: {message}"))
}

/// Decodes `bytes` (a WAV, FLAC, MP3 or Ogg/Vorbis file; the container is sniffed, not trusted
/// from a name) to mono by averaging the channels (as ffmpeg's `-ac 1`, which transformers'
/// pipeline uses to read files) at the file's own rate.
pub fn decode(bytes: Vec<u8>, limits: &Limits) -> Result<Audio> {
    if bytes.is_empty() {
        return Err(invalid("zero bytes"));
    }
    let stream = MediaSourceStream::new(Box::new(std::io::Cursor::new(bytes)), Default::default());
    let probed = symphonia::default::get_probe()
        .format(
            &Hint::new(),
            stream,
            &FormatOptions::default(),
            &MetadataOptions::default(),
        )
        .map_err(|e| invalid(format!("not a WAV, FLAC, MP3 or Ogg/Vorbis file ({e})")))?;
    let mut format = probed.format;
    let track = format
        .tracks()
        .iter()
        .find(|t| t.codec_params.codec != CODEC_TYPE_NULL)
        .ok_or_else(|| invalid("no audio track"))?;
    let track_id = track.id;
    let params = track.codec_params.clone();
    let rate = params.sample_rate.ok_or_else(|| invalid("no sample rate"))?;
    if rate == 0 || rate > MAX_RATE {
        return Err(invalid(format!("sample rate {rate} Hz is outside 1..{MAX_RATE}")));
    }
    let max_samples = (limits.max_seconds * f64::from(rate)).ceil() as usize;
    let mut decoder = symphonia::default::get_codecs()
        .make(&params, &DecoderOptions::default())
        .map_err(|e| invalid(format!("unsupported codec ({e})")))?;
    let mut mono: Vec<f32> = Vec::new();
    let mut buffer: Option<SampleBuffer<f32>> = None;
    loop {
        let packet = match format.next_packet() {
            Ok(p) => p,
            Err(SymphoniaError::IoError(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(SymphoniaError::ResetRequired) => break,
            Err(e) => return Err(invalid(e)),
        };
        if packet.track_id() != track_id {
            continue;
        }
        let decoded = match decoder.decode(&packet) {
            Ok(d) => d,
            // A corrupt packet in a stream that otherwise decodes: skipped, as ffmpeg does.
            Err(SymphoniaError::DecodeError(_)) => continue,
            Err(e) => return Err(invalid(e)),
        };
        let spec = *decoded.spec();
        let channels = spec.channels.count();
        if channels == 0 || channels > MAX_CHANNELS {
            return Err(invalid(format!("{channels} channels")));
        }
        let frames = decoded.frames();
        if mono.len() + frames > max_samples {
            return Err(invalid(format!(
                "longer than the limit of {} s (maxDurationS)",
                limits.max_seconds
            )));
        }
        let buf = match &mut buffer {
            Some(b) if b.capacity() >= decoded.capacity() * channels => b,
            _ => buffer.insert(SampleBuffer::new(decoded.capacity() as u64, spec)),
        };
        buf.copy_interleaved_ref(decoded);
        let scale = 1.0 / channels as f32;
        mono.extend(
            buf.samples()
                .chunks_exact(channels)
                .map(|frame| frame.iter().sum::<f32>() * scale),
        );
    }
    if mono.is_empty() {
        return Err(invalid("no samples decoded"));
    }
    Ok(Audio {
        samples: mono,
        sample_rate: rate,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A 16-bit PCM WAV of `samples` (interleaved over `channels`) at `rate`.
    pub(crate) fn wav(samples: &[i16], channels: u16, rate: u32) -> Vec<u8> {
        let data_len = (samples.len() * 2) as u32;
        let mut out = Vec::new();
        out.extend_from_slice(b"RIFF");
        out.extend_from_slice(&(36 + data_len).to_le_bytes());
        out.extend_from_slice(b"WAVEfmt ");
        out.extend_from_slice(&16u32.to_le_bytes());
        out.extend_from_slice(&1u16.to_le_bytes());
        out.extend_from_slice(&channels.to_le_bytes());
        out.extend_from_slice(&rate.to_le_bytes());
        out.extend_from_slice(&(rate * u32::from(channels) * 2).to_le_bytes());
        out.extend_from_slice(&(channels * 2).to_le_bytes());
        out.extend_from_slice(&16u16.to_le_bytes());
        out.extend_from_slice(b"data");
        out.extend_from_slice(&data_len.to_le_bytes());
        for s in samples {
            out.extend_from_slice(&s.to_le_bytes());
        }
        out
    }

    fn code(e: &anyhow::Error) -> Code {
        e.downcast_ref::<crate::error::CodedError>().unwrap().code
    }

    #[test]
    fn stereo_wav_is_averaged_to_mono() {
        let audio = decode(wav(&[16384, 0, -16384, 16384], 2, 8000), &Limits::default()).unwrap();
        assert_eq!(audio.sample_rate, 8000);
        assert_eq!(audio.samples, vec![0.25, 0.0]);
    }

    #[test]
    fn garbage_empty_and_truncated_bytes_are_coded_errors() {
        for bytes in [
            vec![],
            b"not audio at all, just text".to_vec(),
            wav(&[1, 2, 3], 1, 16000)[..30].to_vec(),
        ] {
            let e = decode(bytes, &Limits::default()).unwrap_err();
            assert_eq!(code(&e), Code::InvalidArg);
            assert!(format!("{e:#}").starts_with("invalid audio: "), "{e:#}");
        }
    }

    #[test]
    fn a_header_claiming_4_gb_is_refused_without_reading_that_much() {
        let mut bytes = wav(&[100; 1600], 1, 16000);
        bytes[40..44].copy_from_slice(&u32::MAX.to_le_bytes());
        let e = decode(bytes, &Limits::default()).unwrap_err();
        assert_eq!(code(&e), Code::InvalidArg);
        assert!(format!("{e:#}").contains("chunk length"), "{e:#}");
    }

    #[test]
    fn audio_over_the_duration_limit_is_refused() {
        let e = decode(wav(&[0; 16000], 1, 16000), &Limits { max_seconds: 0.5 }).unwrap_err();
        assert_eq!(code(&e), Code::InvalidArg);
        assert!(format!("{e:#}").contains("limit of 0.5 s"), "{e:#}");
    }
}
