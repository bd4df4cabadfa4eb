//! Beam search as transformers 5.23's `GenerationMixin._beam_search` (batch 1, one end token), the
//! bookkeeping only: the decoder behind the `Steps` trait (Whisper's in `decode.rs`, a fake one in
//! the tests). Each step every running beam's next-token log-probabilities (log-softmax, then the
//! suppressions and timestamp rules) are added to the beam's score; the best `2 × beams`
//! continuations are taken (`_get_top_k_continuations`); of them the best `beams` that do not end
//! (the end token, or the length limit) run on (`_get_running_beams_for_next_iteration`), and
//! those among the first `beams` that end compete, their score over `length ^ length_penalty`, for
//! the `beams` finished slots (`_update_finished_beams`). The search stops when every continuation
//! ends, when `early_stopping: true` and every slot is filled, or when no running beam can beat the
//! worst finished one (`_check_early_stop_heuristic`). The scores are float32 and `-1e9` marks a
//! masked entry, as there, so that ties and near-ties fall the same way.
use crate::error::{bail_code, Code};
use anyhow::Result;

/// transformers' `early_stopping`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EarlyStopping {
    /// `False` (the default): stop when the best running beam, at its current length, cannot beat
    /// the worst finished one.
    #[default]
    Heuristic,
    /// `True`: stop as soon as `num_beams` sequences have finished.
    Always,
    /// `"never"`: with a positive length penalty, the best running beam is judged at the length
    /// limit (the canonical beam search).
    Never,
}

/// What a search is asked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// 2..=16.
    pub num_beams: usize,
    /// A finished sequence's score is its summed log-probability over `length ^ length_penalty`
    /// (its generated tokens, the end token included). Default 1.
    pub length_penalty: f64,
    pub early_stopping: EarlyStopping,
    /// At most this many tokens generated.
    pub max_new: usize,
    pub eos: i64,
}

impl Params {
    /// Checks the values (names as JS spells the options).
    pub fn validate(&self) -> Result<()> {
        if !(2..=16).contains(&self.num_beams) {
            bail_code!(
                Code::InvalidArg,
                "numBeams: expected 1..16, got {}",
                self.num_beams
            );
        }
        if !self.length_penalty.is_finite() {
            bail_code!(
                Code::InvalidArg,
                "lengthPenalty: expected a finite number, got {}",
                self.length_penalty
            );
        }
        Ok(())
    }
}

/// The decoder, one step for all running beams.
pub trait Steps {
    /// The next-token log-probabilities (after the suppressions and rules: -inf where masked) of
    /// each running beam, whose generated tokens are `generated`. Before the first call the
    /// decoder holds the prompt; at later calls the running beams are the beams of the last call
    /// at `parents`, each extended by its last token in `generated`. May return one row for all
    /// beams (the first step, where every beam is the prompt).
    fn log_probs(&mut self, parents: &[usize], generated: &[Vec<i64>]) -> Result<Vec<Vec<f32>>>;

    /// Called between steps; `true` ends the search with `Aborted`.
    fn aborted(&self) -> bool {
        false
    }
}

/// The search's result: the best finished sequence (its generated tokens, the end token included
/// where it ended on it), its score (`sequences_scores`) and the mean of its tokens'
/// log-probabilities, each renormalized over its step's unmasked tokens
/// (`_retrieve_avg_logprobs` over the beam's own steps).
#[derive(Debug, Clone, PartialEq)]
pub struct Best {
    pub tokens: Vec<i64>,
    pub score: f64,
    pub avg_logprob: f64,
}

const MASKED: f32 = -1.0e9;

#[derive(Debug, Clone)]
struct Hyp {
    tokens: Vec<i64>,
    score: f32,
    sum_logprob: f64,
}

/// `log(sum(exp(row)))` over the finite entries, in f64.
fn log_z(row: &[f32]) -> f64 {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if max == f32::NEG_INFINITY {
        return f64::NEG_INFINITY;
    }
    let sum: f64 = row.iter().map(|&x| f64::from(x - max).exp()).sum();
    f64::from(max) + sum.ln()
}

/// The indices of the `k` largest of `values`, largest first; ties to the lower index.
fn top_k(values: &[f32], k: usize) -> Vec<usize> {
    let first = |a: &usize, b: &usize| values[*b].total_cmp(&values[*a]).then(a.cmp(b));
    let mut order: Vec<usize> = (0..values.len()).collect();
    if k < order.len() {
        order.select_nth_unstable_by(k, first);
        order.truncate(k);
    }
    order.sort_by(first);
    order
}

/// `x ^ p` as Python's `int ** float` (then used as a float32 divisor).
fn length_power(len: usize, p: f64) -> f32 {
    (len as f64).powf(p) as f32
}

/// Runs the search (see the module's comment).
pub fn search(steps: &mut dyn Steps, p: &Params) -> Result<Best> {
    p.validate()?;
    let beams = p.num_beams;
    let keep = 2 * beams;
    let fresh = |score| Hyp {
        tokens: Vec::new(),
        score,
        sum_logprob: 0.0,
    };
    // Beam 0 runs; the others are the same prompt masked, so that the first step takes from one.
    let mut running: Vec<Hyp> = (0..beams)
        .map(|b| fresh(if b == 0 { 0.0 } else { MASKED }))
        .collect();
    let mut finished: Vec<(Hyp, bool)> = (0..beams).map(|_| (fresh(MASKED), false)).collect();
    let mut parents: Vec<usize> = Vec::new();
    let mut improvable = true;
    let mut len = 0usize;
    if p.max_new == 0 {
        return Ok(Best {
            tokens: Vec::new(),
            score: 0.0,
            avg_logprob: 0.0,
        });
    }
    loop {
        if steps.aborted() {
            bail_code!(Code::Aborted, "the transcription was aborted");
        }
        let generated: Vec<Vec<i64>> = running.iter().map(|h| h.tokens.clone()).collect();
        let rows = steps.log_probs(&parents, &generated)?;
        if rows.len() != 1 && rows.len() != beams {
            bail_code!(
                Code::ForwardError,
                "beam search: {} rows of scores for {beams} beams",
                rows.len()
            );
        }
        let row = |b: usize| &rows[if rows.len() == 1 { 0 } else { b }];
        let vocab = row(0).len();
        let mut all = Vec::with_capacity(beams * vocab);
        for (b, h) in running.iter().enumerate() {
            all.extend(row(b).iter().map(|&x| x + h.score));
        }
        // The best continuations: (parent, token, summed score, ends).
        let z: Vec<f64> = (0..beams).map(|b| log_z(row(b))).collect();
        let candidates: Vec<(usize, i64, f32, bool, f64)> = top_k(&all, keep)
            .into_iter()
            .map(|i| {
                let (b, v) = (i / vocab, i % vocab);
                let ends = v as i64 == p.eos || len + 1 >= p.max_new;
                let logprob = f64::from(row(b)[v]) - z[b];
                (b, v as i64, all[i], ends, running[b].sum_logprob + logprob)
            })
            .collect();
        let extend = |&(b, v, _, _, sum): &(usize, i64, f32, bool, f64), score: f32| {
            let mut tokens = running[b].tokens.clone();
            tokens.push(v);
            Hyp {
                tokens,
                score,
                sum_logprob: sum,
            }
        };
        // The running beams of the next step: the best that do not end.
        let run_scores: Vec<f32> = candidates
            .iter()
            .map(|c| c.2 + if c.3 { MASKED } else { 0.0 })
            .collect();
        let next_running: Vec<Hyp> = top_k(&run_scores, beams)
            .into_iter()
            .map(|i| extend(&candidates[i], run_scores[i]))
            .collect();
        let next_parents: Vec<usize> = top_k(&run_scores, beams)
            .into_iter()
            .map(|i| candidates[i].0)
            .collect();
        // The finished slots: the best of those held and those among the first `beams` that end.
        let all_full = finished.iter().all(|f| f.1) && p.early_stopping == EarlyStopping::Always;
        let divisor = length_power(len + 1, p.length_penalty);
        let mut merged: Vec<(Hyp, bool)> = std::mem::take(&mut finished);
        for (i, c) in candidates.iter().enumerate() {
            let just_finished = c.3 && i < beams;
            let mut s = c.2 / divisor;
            if all_full {
                s += MASKED;
            }
            if !improvable {
                s += MASKED;
            }
            if !just_finished {
                s += MASKED;
            }
            merged.push((extend(c, s), just_finished));
        }
        let merged_scores: Vec<f32> = merged.iter().map(|m| m.0.score).collect();
        finished = top_k(&merged_scores, beams)
            .into_iter()
            .map(|i| merged[i].clone())
            .collect();
        let all_end = candidates.iter().all(|c| c.3);
        running = next_running;
        parents = next_parents;
        len += 1;
        // Can a running beam still beat the worst finished one?
        let best_len = if p.early_stopping == EarlyStopping::Never && p.length_penalty > 0.0 {
            p.max_new
        } else {
            len
        };
        let best_possible = running[0].score / length_power(best_len, p.length_penalty);
        let worst = finished.iter().map(|f| f.0.score).fold(f32::INFINITY, f32::min);
        improvable &= finished
            .iter()
            .any(|f| best_possible > if f.1 { worst } else { MASKED });
        let full = finished.iter().all(|f| f.1) && p.early_stopping == EarlyStopping::Always;
        if !improvable || full || all_end {
            break;
        }
    }
    let best = finished.swap_remove(0).0;
    let n = best.tokens.len();
    Ok(Best {
        score: f64::from(best.score),
        avg_logprob: if n == 0 { 0.0 } else { best.sum_logprob / n as f64 },
        tokens: best.tokens,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake decoder: the log-probabilities depend only on the last token (a Markov chain over a
    /// few tokens), and every call is recorded.
    struct Chain {
        table: Vec<Vec<f32>>,
        start: usize,
        calls: Vec<(Vec<usize>, Vec<Vec<i64>>)>,
    }

    impl Chain {
        fn new(probs: &[&[f64]], start: usize) -> Chain {
            let table = probs
                .iter()
                .map(|r| r.iter().map(|&p| p.ln() as f32).collect())
                .collect();
            Chain {
                table,
                start,
                calls: Vec::new(),
            }
        }
    }

    impl Steps for Chain {
        fn log_probs(&mut self, parents: &[usize], generated: &[Vec<i64>]) -> Result<Vec<Vec<f32>>> {
            self.calls.push((parents.to_vec(), generated.to_vec()));
            Ok(generated
                .iter()
                .map(|g| self.table[g.last().map_or(self.start, |&t| t as usize)].clone())
                .collect())
        }
    }

    fn params(num_beams: usize, max_new: usize) -> Params {
        Params {
            num_beams,
            length_penalty: 1.0,
            early_stopping: EarlyStopping::Heuristic,
            max_new,
            eos: 0,
        }
    }

    // Tokens: 0 the end, 1..=3 text; row 4 the prompt's next step.
    const START: usize = 4;

    /// Greedy takes 1 (0.5), then one of three at 0.3; beams find 2 (0.4), then 3 (0.9), then the
    /// end (0.9).
    fn chain() -> Chain {
        Chain::new(
            &[
                &[0.25, 0.25, 0.25, 0.25, 0.0],
                &[0.3, 0.1, 0.3, 0.3, 0.0],
                &[0.05, 0.0001, 0.0499, 0.9, 0.0],
                &[0.9, 0.05, 0.025, 0.025, 0.0],
                &[0.0, 0.5, 0.4, 0.1, 0.0],
            ],
            START,
        )
    }

    #[test]
    fn beams_find_what_greedy_misses() {
        let mut c = chain();
        let best = search(&mut c, &params(2, 8)).unwrap();
        // [2, 3, 0]: ln(0.4 * 0.9 * 0.9) / 3 = -0.3756; [1, 0]: ln(0.5 * 0.3) / 2 = -0.9486.
        assert_eq!(best.tokens, vec![2, 3, 0]);
        let want = (0.4f64 * 0.9 * 0.9).ln() / 3.0;
        assert!((best.score - want).abs() < 1e-6, "{best:?}");
        assert!((best.avg_logprob - want).abs() < 1e-6, "{best:?}");
        // The first call is the prompt (no parents); later ones name each running beam's parent.
        assert!(c.calls[0].0.is_empty());
        assert_eq!(c.calls[1].0.len(), 2);
        assert_eq!(c.calls[1].1, vec![vec![1], vec![2]]);
    }

    #[test]
    fn a_length_penalty_of_zero_prefers_short_sequences() {
        let mut c = chain();
        let p = Params {
            length_penalty: 0.0,
            ..params(2, 8)
        };
        // ln(0.15) = -1.897 against ln(0.324) = -1.127: the longer still wins on its sum here,
        // but a penalty of 0 scores the sum itself.
        let best = search(&mut c, &p).unwrap();
        assert_eq!(best.tokens, vec![2, 3, 0]);
        assert!((best.score - (0.324f64).ln()).abs() < 1e-6, "{best:?}");
    }

    #[test]
    fn the_length_limit_ends_every_beam() {
        let mut c = chain();
        let best = search(&mut c, &params(3, 2)).unwrap();
        assert_eq!(best.tokens.len(), 2);
        // [2, 3]: 0.4 * 0.9 = 0.36 is the best pair of two.
        assert_eq!(best.tokens, vec![2, 3]);
        assert!((best.score - (0.36f64).ln() / 2.0).abs() < 1e-6, "{best:?}");
        assert_eq!(c.calls.len(), 2);
    }

    #[test]
    fn early_stopping_true_stops_once_the_slots_are_full() {
        // Two beams: the first step's [1] and [2]; [1, 0] and [2, 0] (or [2, 3]) follow.
        let mut heuristic = chain();
        let h = search(&mut heuristic, &params(2, 8)).unwrap();
        let mut always = chain();
        let p = Params {
            early_stopping: EarlyStopping::Always,
            ..params(2, 8)
        };
        let a = search(&mut always, &p).unwrap();
        assert!(always.calls.len() <= heuristic.calls.len());
        assert!(a.score <= h.score);
    }

    #[test]
    fn bad_params_are_refused() {
        let mut c = chain();
        let e = search(&mut c, &params(1, 8)).unwrap_err();
        assert!(format!("{e:#}").contains("numBeams"));
        let e = search(
            &mut c,
            &Params {
                length_penalty: f64::NAN,
                ..params(2, 8)
            },
        )
        .unwrap_err();
        assert!(format!("{e:#}").contains("lengthPenalty"));
    }
}
