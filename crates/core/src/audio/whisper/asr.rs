//! What transformers 5.23's `automatic-speech-recognition` pipeline does around `generate`: the
//! audio cut into overlapping chunks (`chunk_iter`, `chunkLengthS` / `strideLengthS`) and the
//! windows' tokens turned into text and timed chunks (`tokenization_whisper._decode_asr` at segment
//! level, with `_find_longest_common_sequence` merging what overlapping chunks both heard).
use anyhow::Result;

/// One piece of the audio the pipeline decodes: its samples' range and its strides (samples it
/// shares with the chunk before and after).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    pub start: usize,
    pub end: usize,
    pub stride_left: usize,
    pub stride_right: usize,
}

/// `chunk_iter`: chunks of `chunk_len` samples every `chunk_len - left - right` samples, the first
/// without a left stride, the last without a right one; a chunk no longer than its left stride
/// is dropped. Lengths as the pipeline rounds them (whole samples).
pub fn pieces(total: usize, chunk_len: usize, left: usize, right: usize) -> Vec<Piece> {
    let step = chunk_len.saturating_sub(left + right).max(1);
    let mut out = Vec::new();
    let mut start = 0;
    while start < total {
        let end = (start + chunk_len).min(total);
        let is_last = start + chunk_len >= total;
        let stride_left = if start == 0 { 0 } else { left };
        if end - start > stride_left {
            out.push(Piece {
                start,
                end,
                stride_left,
                stride_right: if is_last { 0 } else { right },
            });
        }
        if is_last {
            break;
        }
        start += step;
    }
    out
}

/// A window's output for `decode_asr`: its tokens (no prompt), the decoded window each token came
/// from (an index, parallel to `tokens`; empty: none known) and, when chunked, its stride in
/// seconds (chunk length, left, right).
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    pub tokens: Vec<i64>,
    pub windows: Vec<usize>,
    pub stride: Option<(f64, f64, f64)>,
}

/// A timed chunk of the text: `[start, end]` in seconds (`end` `None` where the model did not
/// close the last one), the text, its token ids and the decoded window it came from (the one of
/// the timestamp that closed it, or of its last token; `None` where `Output::windows` is empty).
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    pub start: Option<f64>,
    pub end: Option<f64>,
    pub text: String,
    pub tokens: Vec<i64>,
    pub window: Option<usize>,
}

/// Python's `round(x, 2)`: the float's exact value rounded to two decimals.
fn round2(x: f64) -> f64 {
    format!("{x:.2}").parse().unwrap_or(x)
}

/// `_find_longest_common_sequence`: the sequences joined where each overlaps the next best (the
/// most matching tokens for the overlap's length, ties to the longer overlap), cut in the
/// overlap's middle.
pub fn longest_common_sequence(sequences: &[Vec<i64>]) -> Vec<i64> {
    let Some(first) = sequences.first() else {
        return Vec::new();
    };
    let mut left_seq: Vec<i64> = first.clone();
    let mut total = Vec::new();
    for right_seq in &sequences[1..] {
        let ll = left_seq.len();
        let rl = right_seq.len();
        let mut best = 0.0f64;
        let mut indices = (ll, ll, 0usize, 0usize);
        for i in 1..ll + rl {
            let eps = i as f64 / 10000.0;
            let left_start = ll.saturating_sub(i);
            let left_stop = ll.min(ll + rl - i);
            let right_start = i.saturating_sub(ll);
            let right_stop = rl.min(i);
            let matches = left_seq[left_start..left_stop]
                .iter()
                .zip(&right_seq[right_start..right_stop])
                .filter(|(a, b)| a == b)
                .count();
            let matching = matches as f64 / i as f64 + eps;
            if matches > 1 && matching > best {
                best = matching;
                indices = (left_start, left_stop, right_start, right_stop);
            }
        }
        let (ls, le, rs, re) = indices;
        total.extend_from_slice(&left_seq[..(ls + le) / 2]);
        left_seq = right_seq[(rs + re) / 2..].to_vec();
    }
    total.extend(left_seq);
    total
}

/// The tokenizer's view `decode_asr` needs.
pub struct Vocab<'a> {
    pub timestamp_begin: i64,
    pub is_special: &'a dyn Fn(i64) -> bool,
    pub decode: &'a dyn Fn(&[i64]) -> Result<String>,
}

/// `_decode_asr` (segment timestamps or none; languages are not reported): the text and, with
/// `timestamps`, the timed chunks. `time_precision`: seconds a timestamp step.
pub fn decode_asr(
    outputs: &[Output],
    timestamps: bool,
    time_precision: f64,
    v: &Vocab,
) -> Result<(String, Vec<Chunk>)> {
    const SEGMENT_SIZE: f64 = 1500.0;
    let tb = v.timestamp_begin;
    let mut chunks: Vec<Chunk> = Vec::new();
    let new_chunk = || Chunk {
        start: None,
        end: None,
        text: String::new(),
        tokens: Vec::new(),
        window: None,
    };
    let mut chunk = new_chunk();
    let mut time_offset = 0.0f64;
    let mut previous: Vec<Vec<i64>> = Vec::new();
    let mut skip = false;
    let close = |previous: &mut Vec<Vec<i64>>, chunk: &mut Chunk| -> Result<()> {
        let resolved = longest_common_sequence(previous);
        chunk.text = (v.decode)(&resolved)?;
        chunk.tokens = resolved;
        previous.clear();
        Ok(())
    };
    for output in outputs {
        let ids = &output.tokens;
        let mut last_timestamp: Option<i64> = None;
        let mut first_timestamp = tb as f64;
        let mut cur_max = 0.0f64;
        let mut prev_segments_len = 0.0f64;
        let mut penultimate = 0.0f64;
        let mut right_stride_end = 0.0;
        if let Some((chunk_len, left, right)) = output.stride {
            time_offset -= left;
            let right_stride_start = chunk_len - right;
            right_stride_end = right;
            if left != 0.0 {
                first_timestamp = left / time_precision + tb as f64;
            }
            if right != 0.0 {
                for &t in ids.iter().rev() {
                    if t >= tb {
                        if last_timestamp.is_some() && ((t - tb) as f64) * time_precision < right_stride_start
                        {
                            break;
                        }
                        last_timestamp = Some(t);
                    }
                }
            }
        }
        let mut current: Vec<i64> = Vec::new();
        for (i, &t) in ids.iter().enumerate() {
            if let Some(&w) = output.windows.get(i) {
                chunk.window = Some(w);
            }
            if (v.is_special)(t) {
                continue;
            }
            if t < tb {
                current.push(t);
                continue;
            }
            let timestamp = (t - tb) as f64 * time_precision;
            if timestamp < cur_max {
                let single_ending = i >= 2 && !(ids[i - 1] >= tb && ids[i - 2] >= tb);
                if single_ending {
                    prev_segments_len += time_precision * SEGMENT_SIZE;
                } else {
                    cur_max = penultimate;
                    prev_segments_len += penultimate;
                }
            }
            penultimate = cur_max;
            cur_max = timestamp;
            let time = round2((t - tb) as f64 * time_precision + time_offset + prev_segments_len);
            if last_timestamp.is_some_and(|l| t >= l) {
                skip = true;
            } else if skip || (!previous.is_empty() && (t as f64) < first_timestamp) {
                skip = false;
            } else if chunk.start.is_none() {
                chunk.start = Some(time);
            } else if Some(time) != chunk.start {
                chunk.end = Some(time);
                previous.push(std::mem::take(&mut current));
                close(&mut previous, &mut chunk)?;
                chunks.push(std::mem::replace(&mut chunk, new_chunk()));
            }
        }
        if let Some((chunk_len, _, _)) = output.stride {
            time_offset += chunk_len - right_stride_end;
        }
        if !current.is_empty() {
            previous.push(current);
        } else if !previous.iter().any(|p| !p.is_empty()) {
            chunk = new_chunk();
            previous.clear();
        }
    }
    if !previous.is_empty() {
        close(&mut previous, &mut chunk)?;
        chunks.push(chunk);
    }
    let text = chunks.iter().map(|c| c.text.as_str()).collect();
    if !timestamps {
        chunks.clear();
    }
    Ok((text, chunks))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_as_chunk_iter() {
        // 100 samples, chunks of 40 with strides of 10: every 20.
        let p = pieces(100, 40, 10, 10);
        let starts: Vec<_> = p
            .iter()
            .map(|p| (p.start, p.end, p.stride_left, p.stride_right))
            .collect();
        assert_eq!(
            starts,
            vec![
                (0, 40, 0, 10),
                (20, 60, 10, 10),
                (40, 80, 10, 10),
                (60, 100, 10, 0)
            ]
        );
        assert_eq!(
            pieces(30, 40, 10, 10),
            vec![Piece {
                start: 0,
                end: 30,
                stride_left: 0,
                stride_right: 0
            }]
        );
    }

    #[test]
    fn overlaps_merge_in_their_middle() {
        // transformers: _find_longest_common_sequence([[1, 2, 3, 4], [3, 4, 5, 6]]) == [1, 2, 3, 4, 5, 6].
        assert_eq!(
            longest_common_sequence(&[vec![1, 2, 3, 4], vec![3, 4, 5, 6]]),
            vec![1, 2, 3, 4, 5, 6]
        );
        // No overlap of two or more: simply joined.
        assert_eq!(
            longest_common_sequence(&[vec![1, 2], vec![3, 4]]),
            vec![1, 2, 3, 4]
        );
    }

    #[test]
    fn timestamp_pairs_make_chunks() {
        let decode = |ids: &[i64]| Ok(ids.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(","));
        let v = Vocab {
            timestamp_begin: 100,
            is_special: &|t| t == 99,
            decode: &decode,
        };
        let out = Output {
            tokens: vec![100, 1, 2, 150, 150, 3, 175, 99],
            windows: vec![],
            stride: None,
        };
        let (text, chunks) = decode_asr(&[out], true, 0.02, &v).unwrap();
        assert_eq!(text, "1,23");
        assert_eq!(chunks[0].start, Some(0.0));
        assert_eq!(chunks[0].end, Some(1.0));
        assert_eq!(chunks[1].tokens, vec![3]);
        assert_eq!((chunks[1].start, chunks[1].end), (Some(1.0), Some(1.5)));
    }
}
