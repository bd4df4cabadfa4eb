//! Choosing the next token from a step's logits. The order of the processors is transformers'
//! (`generate`'s logits processors): repetition penalty, then temperature, top-k, top-p, min-p;
//! greedy is argmax (the first index on a tie, as `torch.argmax`).
//!
//! `Sampling` is an enum as candle's (`candle_transformers::generation::Sampling`): greedy
//! carries no temperature, so a combination that means nothing cannot be built. Top-k is a
//! partial selection (`select_nth_unstable_by`, O(V)) and only the k kept are sorted: a full
//! sort of a 49,152-token vocabulary per token is what it replaces.
use crate::error::{bail_code, Code};

/// How the next token is picked.
#[derive(Clone, Debug, PartialEq)]
pub enum Sampling {
    /// The likeliest token.
    Greedy,
    /// A draw from the softmax at `temperature` (> 0), restricted to the `top_k` likeliest
    /// (None: all), then to the smallest set reaching `top_p` of the mass (1: all), then to those
    /// at least `min_p` × the likeliest one's probability (0: all).
    Random {
        temperature: f64,
        top_k: Option<usize>,
        top_p: f64,
        min_p: f64,
    },
}

/// How to sample; `Default` is greedy.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    pub sampling: Sampling,
    /// 1: off.
    pub repetition_penalty: f64,
    pub seed: u64,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            sampling: Sampling::Greedy,
            repetition_penalty: 1.0,
            seed: 0,
        }
    }
}

impl Sampling {
    /// From the four numbers users give (transformers' names): temperature 0 is greedy, top-k 0
    /// is off. Values out of range are `InvalidArg`, naming the option as JS spells it.
    pub fn new(temperature: f64, top_k: usize, top_p: f64, min_p: f64) -> anyhow::Result<Sampling> {
        if !temperature.is_finite() || temperature < 0.0 {
            bail_code!(
                Code::InvalidArg,
                "options.temperature: expected a number ≥ 0, got {temperature}"
            );
        }
        if !top_p.is_finite() || top_p <= 0.0 || top_p > 1.0 {
            bail_code!(
                Code::InvalidArg,
                "options.topP: expected a number in (0, 1], got {top_p}"
            );
        }
        if !min_p.is_finite() || !(0.0..=1.0).contains(&min_p) {
            bail_code!(
                Code::InvalidArg,
                "options.minP: expected a number in [0, 1], got {min_p}"
            );
        }
        if temperature == 0.0 {
            return Ok(Sampling::Greedy);
        }
        Ok(Sampling::Random {
            temperature,
            top_k: (top_k > 0).then_some(top_k),
            top_p,
            min_p,
        })
    }

    /// The four numbers back (for `defaults`): greedy is temperature 0, top-k 0.
    pub fn numbers(&self) -> (f64, usize, f64, f64) {
        match *self {
            Sampling::Greedy => (0.0, 0, 1.0, 0.0),
            Sampling::Random {
                temperature,
                top_k,
                top_p,
                min_p,
            } => (temperature, top_k.unwrap_or(0), top_p, min_p),
        }
    }
}

/// `repetitionPenalty`: a number > 0.
pub fn repetition_penalty(p: f64) -> anyhow::Result<f64> {
    if !p.is_finite() || p <= 0.0 {
        bail_code!(
            Code::InvalidArg,
            "options.repetitionPenalty: expected a number > 0, got {p}"
        );
    }
    Ok(p)
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
    match candidates(logits, &p.sampling) {
        None => argmax(logits),
        Some((order, probs)) => draw(&order, &probs, rng),
    }
}

/// Checks a drafted token (speculative decoding, `super::lookup`): the token chosen where the
/// draft proposed `proposal`, with the distribution `choose` draws from. Greedy: the argmax
/// (the draft is accepted when it is the argmax). Random, the standard rejection scheme for a
/// draft that proposes one token with certainty (Leviathan et al. 2023, Chen et al. 2023):
/// accept `proposal` with its probability p(x); otherwise draw from p with x removed and the
/// rest renormalized, i.e. max(0, p - q) normalized for q = δ(x). Each token y ≠ x then comes
/// out with probability (1 - p(x)) · p(y) / (1 - p(x)) = p(y): the distribution is `choose`'s.
pub fn verify(logits: &mut [f32], seen: &[u32], p: &Params, rng: &mut Rng, proposal: u32) -> u32 {
    penalize(logits, seen, p.repetition_penalty);
    let Some((mut order, mut probs)) = candidates(logits, &p.sampling) else {
        return argmax(logits);
    };
    let total: f64 = probs.iter().sum();
    if let Some(at) = order.iter().position(|&t| t == proposal) {
        if rng.next_f64() * total < probs[at] {
            return proposal;
        }
        order.remove(at);
        probs.remove(at);
        if order.is_empty() {
            return proposal; // p(x) = 1 is always accepted above; only rounding gets here
        }
    }
    draw(&order, &probs, rng)
}

/// The candidates of a random draw, likeliest first, and their weights (not normalized): the
/// softmax at the temperature within top-k, then top-p, then min-p. None for greedy.
fn candidates(logits: &[f32], sampling: &Sampling) -> Option<(Vec<u32>, Vec<f64>)> {
    let Sampling::Random {
        temperature: t,
        top_k,
        top_p,
        min_p,
    } = *sampling
    else {
        return None;
    };
    // Candidates by logit, largest first; ties keep index order (as a stable sort would).
    let by_logit = |a: &u32, b: &u32| logits[*b as usize].total_cmp(&logits[*a as usize]).then(a.cmp(b));
    let mut order: Vec<u32> = (0..logits.len() as u32).collect();
    if let Some(k) = top_k.filter(|&k| k < order.len()) {
        order.select_nth_unstable_by(k - 1, by_logit);
        order.truncate(k);
    }
    order.sort_unstable_by(by_logit);
    if order.is_empty() {
        return Some((vec![0], vec![1.0]));
    }
    let top = logits[order[0] as usize] as f64 / t;
    let mut probs: Vec<f64> = order
        .iter()
        .map(|&i| (logits[i as usize] as f64 / t - top).exp())
        .collect();
    let total: f64 = probs.iter().sum();
    probs.iter_mut().for_each(|x| *x /= total);
    if top_p < 1.0 {
        // Keep the smallest prefix whose mass reaches top_p (at least one token).
        let mut mass = 0.0;
        let keep = probs
            .iter()
            .position(|&x| {
                mass += x;
                mass >= top_p
            })
            .map_or(probs.len(), |i| i + 1);
        probs.truncate(keep);
    }
    if min_p > 0.0 {
        let floor = probs[0] * min_p;
        let keep = probs.iter().take_while(|&&x| x >= floor).count().max(1);
        probs.truncate(keep);
    }
    order.truncate(probs.len());
    Some((order, probs))
}

/// One draw from `order` with weights `probs` (same length, at least one).
fn draw(order: &[u32], probs: &[f64], rng: &mut Rng) -> u32 {
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

    fn random(temperature: f64, top_k: usize, top_p: f64, min_p: f64, seed: u64) -> Params {
        Params {
            sampling: Sampling::new(temperature, top_k, top_p, min_p).unwrap(),
            repetition_penalty: 1.0,
            seed,
        }
    }

    #[test]
    fn greedy_is_argmax_first_on_ties() {
        assert_eq!(argmax(&[0.0, 3.0, 3.0, -1.0]), 1);
        assert_eq!(argmax(&[f32::NAN, 1.0]), 1);
        let p = Params::default();
        assert_eq!(sampled(&[1.0, 5.0, 2.0], &p, 3), vec![1, 1, 1]);
        assert_eq!(Sampling::new(0.0, 5, 0.5, 0.1).unwrap(), Sampling::Greedy);
    }

    #[test]
    fn same_seed_same_tokens() {
        let logits: Vec<f32> = (0..50).map(|i| (i as f32 * 0.37).sin()).collect();
        let a = sampled(&logits, &random(1.0, 0, 1.0, 0.0, 42), 200);
        assert_eq!(a, sampled(&logits, &random(1.0, 0, 1.0, 0.0, 42), 200));
        assert_ne!(a, sampled(&logits, &random(1.0, 0, 1.0, 0.0, 43), 200));
        // Temperature 1 over near-equal logits visits many tokens.
        let distinct: std::collections::HashSet<_> = a.iter().collect();
        assert!(distinct.len() > 20, "{}", distinct.len());
    }

    #[test]
    fn top_k_top_p_min_p_restrict_the_candidates() {
        let logits = [4.0, 3.0, 2.0, 1.0, 0.0];
        let k2 = sampled(&logits, &random(5.0, 2, 1.0, 0.0, 1), 300);
        assert!(k2.iter().all(|&t| t < 2) && k2.contains(&1));
        // At temperature 1: p = .64 .24 .09 .03 .01; top_p .8 keeps the first two.
        let tp = sampled(&logits, &random(1.0, 0, 0.8, 0.0, 1), 300);
        assert!(tp.iter().all(|&t| t < 2) && tp.contains(&1));
        // min_p .1 keeps p ≥ .064: the first three.
        let mp = sampled(&logits, &random(1.0, 0, 1.0, 0.1, 1), 500);
        assert!(mp.iter().all(|&t| t < 3) && mp.contains(&2));
        // Frequencies follow the softmax: token 0 about 64% at temperature 1.
        let all = sampled(&logits, &random(1.0, 0, 1.0, 0.0, 1), 4000);
        let zeros = all.iter().filter(|&&t| t == 0).count() as f64 / 4000.0;
        assert!((zeros - 0.636).abs() < 0.03, "{zeros}");
    }

    #[test]
    fn top_k_by_partial_selection_keeps_the_k_largest_first_on_ties() {
        // A shuffled vocabulary with ties: the partial selection must keep the same k tokens a
        // full stable sort keeps, and draw the same tokens for a seed.
        let logits: Vec<f32> = (0..1000).map(|i| ((i * 7919) % 97) as f32 / 10.0).collect();
        let full = |seed| {
            let mut order: Vec<u32> = (0..logits.len() as u32).collect();
            order.sort_by(|&a, &b| logits[b as usize].total_cmp(&logits[a as usize]));
            order.truncate(5);
            let mut rng = Rng::new(seed);
            let top = logits[order[0] as usize] as f64;
            let probs: Vec<f64> = order
                .iter()
                .map(|&i| (logits[i as usize] as f64 - top).exp())
                .collect();
            let mut target = rng.next_f64() * probs.iter().sum::<f64>();
            for (i, &x) in probs.iter().enumerate() {
                target -= x;
                if target < 0.0 {
                    return order[i];
                }
            }
            order[4]
        };
        for seed in 0..50 {
            let got = sampled(&logits, &random(1.0, 5, 1.0, 0.0, seed), 1)[0];
            assert_eq!(got, full(seed), "seed {seed}");
        }
        // k larger than the vocabulary: all of it.
        let few = sampled(&[1.0, 1.0], &random(1.0, 10, 1.0, 0.0, 3), 200);
        assert!(few.contains(&0) && few.contains(&1));
    }

    /// Over a tiny vocabulary, each token's frequency from `verify` (whatever the proposal)
    /// is its probability under `choose`'s distribution: 40,000 draws with a fixed seed (the
    /// same numbers every run), within 0.012 (about 5 standard deviations at p = 0.5).
    #[test]
    fn verify_keeps_the_distribution() {
        let logits = [2.0f32, 1.0, 0.5, -1.0, 0.0];
        for params in [random(1.0, 0, 1.0, 0.0, 9), random(0.7, 4, 0.9, 0.0, 9)] {
            // The exact distribution: the candidates' weights, normalized.
            let (order, probs) = candidates(&logits, &params.sampling).unwrap();
            let total: f64 = probs.iter().sum();
            let mut want = [0.0; 5];
            for (t, w) in order.iter().zip(&probs) {
                want[*t as usize] = w / total;
            }
            for proposal in [0, 2, 3] {
                let mut rng = Rng::new(params.seed + proposal as u64);
                let mut seen = [0usize; 5];
                let n = 40_000;
                for _ in 0..n {
                    seen[verify(&mut logits.to_vec(), &[], &params, &mut rng, proposal) as usize] += 1;
                }
                for t in 0..5 {
                    let got = seen[t] as f64 / n as f64;
                    assert!(
                        (got - want[t]).abs() < 0.012,
                        "proposal {proposal}, token {t}: {got} against {}",
                        want[t]
                    );
                }
            }
        }
    }

    #[test]
    fn verify_greedy_is_argmax_and_draws_as_choose_without_a_match() {
        let p = Params::default();
        for proposal in [0, 1, 2] {
            assert_eq!(
                verify(&mut [1.0, 5.0, 2.0], &[], &p, &mut Rng::new(0), proposal),
                1
            );
        }
        // A proposal outside the candidates (top-k 2) is never accepted: the draw is choose's
        // with the same generator state.
        let params = random(1.0, 2, 1.0, 0.0, 5);
        let logits = [3.0, 2.9, -5.0];
        for seed in 0..20 {
            let a = verify(&mut logits.to_vec(), &[], &params, &mut Rng::new(seed), 2);
            let b = choose(&mut logits.to_vec(), &[], &params, &mut Rng::new(seed));
            assert_eq!(a, b);
        }
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
        for (t, p, m, says) in [
            (-1.0, 1.0, 0.0, "temperature"),
            (f64::NAN, 1.0, 0.0, "temperature"),
            (1.0, 0.0, 0.0, "topP"),
            (1.0, 1.5, 0.0, "topP"),
            (1.0, 1.0, 2.0, "minP"),
        ] {
            let e = Sampling::new(t, 0, p, m).unwrap_err();
            let (code, message) = crate::error::describe(&e);
            assert_eq!(code, Code::InvalidArg);
            assert!(message.contains(says), "{message}");
        }
        assert!(repetition_penalty(0.0).is_err());
        assert!(repetition_penalty(1.2).is_ok());
    }
}
