//! The log-probabilities a generation reports with each token (`logprobs`/`topLogprobs`; OpenAI's
//! `logprobs`/`top_logprobs`): the log-softmax of the model's raw logits at that step, before the
//! repetition penalty, temperature, top-k/top-p/min-p or an output constraint touch them, as vLLM
//! reports by default (`logprobs_mode: raw_logprobs`). Computed in f64; the alternatives are a
//! partial selection of the `top` likeliest (ties: the lower id first), not a sort of the vocabulary.

/// The most alternatives a token reports (OpenAI's bound on `top_logprobs`).
pub const MAX_TOP: usize = 20;

/// What OpenAI reports for a logprob of -∞ (a token the model rules out): JSON has no infinity.
const FLOOR: f32 = -9999.0;

/// One token's log-probability, its bytes (a special token's content; a byte-level token may be
/// part of a character), and the likeliest tokens at its step.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TokenLogprob {
    pub token: u32,
    pub logprob: f32,
    pub bytes: Vec<u8>,
    pub top: Vec<Alternative>,
}

/// One of the likeliest tokens at a step.
#[derive(Clone, Debug, PartialEq)]
pub struct Alternative {
    pub token: u32,
    pub logprob: f32,
    pub bytes: Vec<u8>,
}

/// `token`'s log-softmax over `logits`, and the `top` likeliest tokens with theirs, likeliest
/// first.
pub fn of(logits: &[f32], token: u32, top: usize) -> (f32, Vec<(u32, f32)>) {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let sum: f64 = logits.iter().map(|&x| (x as f64 - max).exp()).sum();
    let log_z = max + sum.ln();
    let at = |i: usize| -> f32 {
        let v = logits.get(i).map_or(f64::NEG_INFINITY, |&x| x as f64 - log_z) as f32;
        if v.is_finite() {
            v
        } else {
            FLOOR
        }
    };
    let k = top.min(logits.len());
    let mut ids: Vec<u32> = (0..logits.len() as u32).collect();
    let likelier = |a: &u32, b: &u32| {
        let (x, y) = (logits[*a as usize], logits[*b as usize]);
        y.total_cmp(&x).then(a.cmp(b))
    };
    if k > 0 && k < ids.len() {
        ids.select_nth_unstable_by(k - 1, likelier);
    }
    ids.truncate(k);
    ids.sort_unstable_by(likelier);
    (
        at(token as usize),
        ids.into_iter().map(|i| (i, at(i as usize))).collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against the log-softmax written out, and OpenAI's order of the alternatives.
    #[test]
    fn the_log_softmax_and_the_likeliest() {
        let logits = [1.0f32, 3.0, -2.0, 3.0, 0.5];
        let z: f64 = logits.iter().map(|&x| (x as f64).exp()).sum::<f64>().ln();
        let want = |i: usize| (logits[i] as f64 - z) as f32;
        let (lp, top) = of(&logits, 4, 3);
        assert!((lp - want(4)).abs() < 1e-6);
        assert_eq!(
            top.iter().map(|t| t.0).collect::<Vec<_>>(),
            [1, 3, 0],
            "ties: lower id first"
        );
        assert!(top.iter().all(|&(i, l)| (l - want(i as usize)).abs() < 1e-6));
        let total: f64 = (0..5).map(|i| (want(i) as f64).exp()).sum();
        assert!((total - 1.0).abs() < 1e-6);
        assert_eq!(of(&logits, 0, 0).1, []);
        assert_eq!(of(&logits, 0, 99).1.len(), 5);
    }

    /// Large logits do not overflow; a ruled-out token reads as OpenAI's floor, not -∞.
    #[test]
    fn extremes_stay_finite() {
        let (lp, top) = of(&[1e30, f32::NEG_INFINITY, 0.0], 1, 2);
        assert_eq!(lp, FLOOR);
        assert_eq!(top[0], (0, 0.0));
        assert_eq!(top[1].0, 2);
    }
}
