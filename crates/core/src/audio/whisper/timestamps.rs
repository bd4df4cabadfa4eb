//! Timestamps in generation, as transformers 5.23: `WhisperTimeStampLogitsProcessor` (the rules a
//! step's scores are masked by) and `WhisperGenerationMixin._retrieve_segment` (a window's tokens
//! split into segments at their timestamp pairs, and how far the next window starts).

/// The token ids the rules need.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rules {
    /// `<|0.00|>`: every id from it on is a timestamp.
    pub timestamp_begin: i64,
    pub no_timestamps: i64,
    pub eos: i64,
    /// generation_config's `max_initial_timestamp_index`.
    pub max_initial: Option<i64>,
}

impl Rules {
    /// Masks `scores` (one step's logits, after the suppressions) to -inf as the processor does;
    /// `generated`: the tokens generated in this window so far (after the prompt).
    pub fn apply(&self, scores: &mut [f32], generated: &[i64]) {
        let tb = self.timestamp_begin.max(0) as usize;
        let vocab = scores.len();
        let tb = tb.min(vocab);
        if let Some(s) = scores.get_mut(self.no_timestamps as usize) {
            *s = f32::NEG_INFINITY;
        }
        let is_ts = |t: i64| t >= self.timestamp_begin;
        let n = generated.len();
        let last_was_timestamp = n >= 1 && is_ts(generated[n - 1]);
        let penultimate_was_timestamp = n < 2 || is_ts(generated[n - 2]);
        if last_was_timestamp {
            if penultimate_was_timestamp {
                // Has to be text.
                scores[tb..].fill(f32::NEG_INFINITY);
            } else {
                // Cannot be text: a timestamp (the pair's second) or the end.
                let eos = (self.eos.max(0) as usize).min(vocab);
                scores[..eos].fill(f32::NEG_INFINITY);
            }
        }
        let mut timestamp_last = self.timestamp_begin;
        if let Some(&last) = generated.iter().rev().find(|&&t| is_ts(t)) {
            timestamp_last = if last_was_timestamp && !penultimate_was_timestamp {
                last
            } else {
                last + 1
            };
        }
        let upto = (timestamp_last.max(0) as usize).min(vocab);
        if upto > tb {
            scores[tb..upto].fill(f32::NEG_INFINITY);
        }
        if n == 0 {
            scores[..tb].fill(f32::NEG_INFINITY);
            if let Some(m) = self.max_initial {
                let from = ((self.timestamp_begin + m + 1).max(0) as usize).min(vocab);
                scores[from..].fill(f32::NEG_INFINITY);
            }
        }
        // When the timestamps' total probability beats every text token's, a timestamp it is.
        let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        if max == f32::NEG_INFINITY {
            return;
        }
        let sum: f64 = scores.iter().map(|&s| f64::from(s - max).exp()).sum();
        let log_z = f64::from(max) + sum.ln();
        let ts_sum: f64 = scores[tb..].iter().map(|&s| f64::from(s - max).exp()).sum();
        let ts_logprob = f64::from(max) + ts_sum.ln() - log_z;
        let text_max = scores[..tb].iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let text_logprob = f64::from(text_max) - log_z;
        if ts_logprob > text_logprob {
            scores[..tb].fill(f32::NEG_INFINITY);
        }
    }
}

/// One segment of a window: its tokens and its start and end in seconds of the whole audio.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    pub start: f64,
    pub end: f64,
    pub tokens: Vec<i64>,
}

/// Where a window's timing comes from: the window's offset in seconds, the frames it read and
/// the model's steps (`time_precision`: seconds a timestamp step; `frame_seconds`: a feature
/// frame's; `input_stride`: feature frames an encoder position).
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub time_offset: f64,
    pub num_frames: usize,
    pub time_precision: f64,
    pub frame_seconds: f64,
    pub input_stride: usize,
}

/// `_retrieve_segment`: the window's `tokens` (generated, the end token dropped) split at each
/// timestamp pair; the frames to move on by (to the last pair's timestamp when the window ended
/// mid-segment, else the whole window).
pub fn split(tokens: &[i64], timestamp_begin: i64, w: &Window) -> (Vec<Segment>, usize) {
    let is_ts: Vec<bool> = tokens.iter().map(|&t| t >= timestamp_begin).collect();
    let n = tokens.len();
    let single_ending = n >= 2 && !is_ts[n - 2] && is_ts[n - 1];
    let mut slices: Vec<usize> = (0..n.saturating_sub(1))
        .filter(|&i| is_ts[i] && is_ts[i + 1])
        .map(|i| i + 1)
        .collect();
    let at = |t: i64| w.time_offset + (t - timestamp_begin) as f64 * w.time_precision;
    if !slices.is_empty() {
        if single_ending {
            slices.push(n);
        } else {
            *slices.last_mut().unwrap() += 1;
        }
        let mut segments = Vec::new();
        let mut last = 0;
        for (i, &cut) in slices.iter().enumerate() {
            let is_last = i == slices.len() - 1;
            let t = &tokens[last..cut];
            let end_idx = if !is_last || single_ending {
                t.len() - 1
            } else {
                t.len() - 2
            };
            segments.push(Segment {
                start: at(t[0]),
                end: at(t[end_idx]),
                tokens: t.to_vec(),
            });
            last = cut;
        }
        let offset = if single_ending {
            w.num_frames
        } else {
            (tokens[last - 2] - timestamp_begin).max(0) as usize * w.input_stride
        };
        return (segments, offset);
    }
    // No pair: the whole window is one segment, ending at its last timestamp where it has one.
    let mut end = (w.num_frames as f64 * w.frame_seconds / w.time_precision).trunc();
    if let Some(&t) = tokens.iter().rev().find(|&&t| t >= timestamp_begin) {
        if t != timestamp_begin {
            end = (t - timestamp_begin) as f64;
        }
    }
    let segment = Segment {
        start: w.time_offset,
        end: w.time_offset + end * w.time_precision,
        tokens: tokens.to_vec(),
    };
    (vec![segment], w.num_frames)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULES: Rules = Rules {
        timestamp_begin: 10,
        no_timestamps: 9,
        eos: 5,
        max_initial: None,
    };

    fn allowed(scores: &[f32]) -> Vec<usize> {
        (0..scores.len())
            .filter(|&i| scores[i] > f32::NEG_INFINITY)
            .collect()
    }

    #[test]
    fn the_first_token_is_a_timestamp_and_pairs_close() {
        let mut s = vec![0.0; 16];
        RULES.apply(&mut s, &[]);
        assert_eq!(allowed(&s), (10..16).collect::<Vec<_>>());
        // After one timestamp: text (a text token wins over the timestamps' total here).
        let mut s = vec![0.0; 16];
        s[2] = 10.0;
        RULES.apply(&mut s, &[11]);
        assert_eq!(allowed(&s), vec![0, 1, 2, 3, 4, 5, 6, 7, 8]);
        // Text after a timestamp: no timestamp before it again.
        let mut s = vec![0.0; 16];
        s[2] = 10.0;
        RULES.apply(&mut s, &[11, 2]);
        assert_eq!(allowed(&s), vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 13, 14, 15]);
        // A timestamp after text: its pair (the same or later) or the end; no text.
        let mut s = vec![0.0; 16];
        s[5] = 10.0;
        RULES.apply(&mut s, &[11, 2, 13]);
        assert_eq!(allowed(&s), vec![5, 6, 7, 8, 13, 14, 15]);
    }

    #[test]
    fn the_timestamps_total_forces_a_timestamp() {
        // Six timestamps at 0 against one text token at 1: e^1 < 6 e^0.
        let mut s = vec![f32::NEG_INFINITY; 16];
        s[2] = 1.0;
        s[10..].fill(0.0);
        RULES.apply(&mut s, &[11, 2]);
        assert_eq!(allowed(&s), vec![12, 13, 14, 15]);
    }

    #[test]
    fn segments_split_at_pairs_and_seek_to_the_last() {
        let w = Window {
            time_offset: 1.0,
            num_frames: 3000,
            time_precision: 0.02,
            frame_seconds: 0.01,
            input_stride: 2,
        };
        // <0> a <5><5> b <9> c: one pair, not a single ending: seek to <5>.
        let (segs, offset) = split(&[10, 1, 15, 15, 2, 19, 3], 10, &w);
        assert_eq!(segs.len(), 1);
        assert_eq!(segs[0].tokens, vec![10, 1, 15, 15]);
        assert!((segs[0].start - 1.0).abs() < 1e-12 && (segs[0].end - 1.1).abs() < 1e-12);
        assert_eq!(offset, 10);
        // Ends on a single timestamp: every segment, then the whole window.
        let (segs, offset) = split(&[10, 1, 15, 15, 2, 19], 10, &w);
        assert_eq!(segs.len(), 2);
        assert_eq!(segs[1].tokens, vec![15, 2, 19]);
        assert_eq!(offset, 3000);
        // No pair: one segment to the window's end.
        let (segs, offset) = split(&[1, 2], 10, &w);
        assert!((segs[0].end - 31.0).abs() < 1e-9);
        assert_eq!(offset, 3000);
    }
}
