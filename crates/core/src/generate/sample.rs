//! Choosing the next token from a step's logits. The order of the processors is transformers'
//! (`generate`'s logits processors): repetition penalty, then temperature, top-k, top-p, min-p;
//! temperature 0 is greedy (argmax, the first index on a tie, as `torch.argmax`).
use crate::error::{bail_code, Code};

/// How to sample; `Default` is greedy.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// 0: greedy.
    pub temperature: f64,
    /// 0: off.
    pub top_k: usize,
    /// 1: off.
    pub top_p: f64,
    /// 0: off.
    pub min_p: f64,
    /// 1: off.
    pub repetition_penalty: f64,
    pub seed: u64,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            repetition_penalty: 1.0,
            seed: 0,
        }
    }
}

impl Params {
    /// Refuses values out of range with `InvalidArg`, naming the option as JS spells it.
    pub fn check(&self) -> anyhow::Result<()> {
        let finite = |x: f64| x.is_finite();
        if !finite(self.temperature) || self.temperature < 0.0 {
            bail_code!(
                Code::InvalidArg,
                "options.temperature: expected a number ≥ 0, got {}",
                self.temperature
            );
        }
        if !finite(self.top_p) || self.top_p <= 0.0 || self.top_p > 1.0 {
            bail_code!(
                Code::InvalidArg,
                "options.topP: expected a number in (0, 1], got {}",
                self.top_p
            );
        }
        if !finite(self.min_p) || !(0.0..=1.0).contains(&self.min_p) {
            bail_code!(
                Code::InvalidArg,
                "options.minP: expected a number in [0, 1], got {}",
                self.min_p
            );
        }
        if !finite(self.repetition_penalty) || self.repetition_penalty <= 0.0 {
            bail_code!(
                Code::InvalidArg,
                "options.repetitionPenalty: expected a number > 0, got {}",
                self.repetition_penalty
            );
        }
        Ok(())
    }

    pub fn greedy(&self) -> bool {
        self.temperature == 0.0
    }
}

/// SplitMix64: small, fast, and the same sequence on every platform (same seed, same tokens).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1), 53 bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// transformers' `RepetitionPenaltyLogitsProcessor`: each token already seen (prompt and
/// output) has its logit divided by the penalty when positive, multiplied when negative.
pub fn penalize(logits: &mut [f32], seen: &[u32], penalty: f64) {
    if penalty == 1.0 {
        return;
    }
    let mut done = std::collections::HashSet::new();
    for &t in seen {
        let Some(l) = logits.get_mut(t as usize) else {
            continue;
        };
        if done.insert(t) {
            *l = if *l > 0.0 {
                (*l as f64 / penalty) as f32
            } else {
                (*l as f64 * penalty) as f32
            };
        }
    }
}

/// The index of the largest logit (the first on a tie; NaN never wins).
pub fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &l) in logits.iter().enumerate() {
        if l > logits[best] || logits[best].is_nan() {
            best = i;
        }
    }
    best as u32
}

/// Picks the next token: `seen` is every token so far (for the repetition penalty).
pub fn choose(logits: &mut [f32], seen: &[u32], p: &Params, rng: &mut Rng) -> u32 {
    penalize(logits, seen, p.repetition_penalty);
    if p.greedy() {
        return argmax(logits);
    }
    // Candidates by logit, largest first (a stable sort: ties keep index order).
    let mut order: Vec<u32> = (0..logits.len() as u32).collect();
    order.sort_by(|&a, &b| logits[b as usize].total_cmp(&logits[a as usize]));
    if p.top_k > 0 {
        order.truncate(p.top_k);
    }
    let t = p.temperature;
    let top = logits[order[0] as usize] as f64 / t;
    let mut probs: Vec<f64> = order
        .iter()
        .map(|&i| (logits[i as usize] as f64 / t - top).exp())
        .collect();
    let total: f64 = probs.iter().sum();
    probs.iter_mut().for_each(|x| *x /= total);
    if p.top_p < 1.0 {
        // Keep the smallest prefix whose mass reaches top_p (at least one token).
        let mut mass = 0.0;
        let keep = probs
            .iter()
            .position(|&x| {
                mass += x;
                mass >= p.top_p
            })
            .map_or(probs.len(), |i| i + 1);
        probs.truncate(keep);
    }
    if p.min_p > 0.0 {
        let floor = probs[0] * p.min_p;
        let keep = probs.iter().take_while(|&&x| x >= floor).count().max(1);
        probs.truncate(keep);
    }
    let total: f64 = probs.iter().sum();
    let mut target = rng.next_f64() * total;
    for (i, &x) in probs.iter().enumerate() {
        target -= x;
        if target < 0.0 {
            return order[i];
        }
    }
    order[probs.len() - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sampled(logits: &[f32], p: &Params, n: usize) -> Vec<u32> {
        let mut rng = Rng::new(p.seed);
        (0..n)
            .map(|_| choose(&mut logits.to_vec(), &[], p, &mut rng))
            .collect()
    }

    #[test]
    fn greedy_is_argmax_first_on_ties() {
        assert_eq!(argmax(&[0.0, 3.0, 3.0, -1.0]), 1);
        assert_eq!(argmax(&[f32::NAN, 1.0]), 1);
        let p = Params::default();
        assert_eq!(sampled(&[1.0, 5.0, 2.0], &p, 3), vec![1, 1, 1]);
    }

    #[test]
    fn same_seed_same_tokens() {
        let logits: Vec<f32> = (0..50).map(|i| (i as f32 * 0.37).sin()).collect();
        let p = Params {
            temperature: 1.0,
            seed: 42,
            ..Params::default()
        };
        let a = sampled(&logits, &p, 200);
        assert_eq!(a, sampled(&logits, &p, 200));
        let other = sampled(
            &logits,
            &Params {
                seed: 43,
                ..p.clone()
            },
            200,
        );
        assert_ne!(a, other);
        // Temperature 1 over near-equal logits visits many tokens.
        let distinct: std::collections::HashSet<_> = a.iter().collect();
        assert!(distinct.len() > 20, "{}", distinct.len());
    }

    #[test]
    fn top_k_top_p_min_p_restrict_the_candidates() {
        let logits = [4.0, 3.0, 2.0, 1.0, 0.0];
        let hot = Params {
            temperature: 5.0,
            seed: 1,
            ..Params::default()
        };
        let k2 = sampled(
            &logits,
            &Params {
                top_k: 2,
                ..hot.clone()
            },
            300,
        );
        assert!(k2.iter().all(|&t| t < 2) && k2.contains(&1));
        // At temperature 1: p = .64 .24 .09 .03 .01; top_p .8 keeps the first two.
        let warm = Params {
            temperature: 1.0,
            ..hot.clone()
        };
        let tp = sampled(
            &logits,
            &Params {
                top_p: 0.8,
                ..warm.clone()
            },
            300,
        );
        assert!(tp.iter().all(|&t| t < 2) && tp.contains(&1));
        // min_p .1 keeps p ≥ .064: the first three.
        let mp = sampled(
            &logits,
            &Params {
                min_p: 0.1,
                ..warm.clone()
            },
            500,
        );
        assert!(mp.iter().all(|&t| t < 3) && mp.contains(&2));
        // Frequencies follow the softmax: token 0 about 64% at temperature 1.
        let all = sampled(&logits, &warm, 4000);
        let zeros = all.iter().filter(|&&t| t == 0).count() as f64 / 4000.0;
        assert!((zeros - 0.636).abs() < 0.03, "{zeros}");
    }

    #[test]
    fn repetition_penalty_as_transformers() {
        let mut l = vec![2.0, -2.0, 1.0];
        penalize(&mut l, &[0, 1, 0], 2.0);
        assert_eq!(l, vec![1.0, -4.0, 1.0]);
        // Greedy then picks the first of the tie, index 0.
        let p = Params {
            repetition_penalty: 3.0,
            ..Params::default()
        };
        assert_eq!(choose(&mut [2.0, 1.0], &[0], &p, &mut Rng::new(0)), 1);
    }

    #[test]
    fn out_of_range_values_are_refused() {
        let bad = [
            Params {
                temperature: -1.0,
                ..Params::default()
            },
            Params {
                top_p: 0.0,
                ..Params::default()
            },
            Params {
                top_p: 1.5,
                ..Params::default()
            },
            Params {
                min_p: 2.0,
                ..Params::default()
            },
            Params {
                repetition_penalty: 0.0,
                ..Params::default()
            },
            Params {
                temperature: f64::NAN,
                ..Params::default()
            },
        ];
        for p in bad {
            let e = p.check().unwrap_err();
            assert_eq!(crate::error::describe(&e).0, Code::InvalidArg, "{p:?}");
        }
        assert!(Params::default().check().is_ok());
    }
}
