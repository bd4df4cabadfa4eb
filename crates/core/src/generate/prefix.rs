//! The prefix cache: prompts' keys and values, kept so that a later prompt that starts with the
//! same tokens (a system prompt, a chat history, few-shot examples) copies them into its row
//! instead of running them through the program again.
//!
//! Exact by construction: a causal model's keys and values at position i depend on tokens
//! `0..=i` only, so the slots of a shared prefix are the ones the prompt's own prefill would
//! write (up to the last bits a matrix kernel's blocking may change with the number of rows).
//! At least the prompt's last token always runs (its logits choose the first new token).
//! Bounded: the entries hold at most `max_tokens` tokens in all; the least recently used goes
//! first. An entry whose tokens begin a newer prompt is replaced by it (the newer one serves
//! every prompt the older one did).
use anyhow::Result;
use tch::Tensor;

/// What the prefix cache holds and has done.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PrefixStats {
    pub max_tokens: usize,
    /// Tokens held, in all entries.
    pub tokens: usize,
    pub entries: usize,
    /// Prompts that reused a prefix, and the tokens they did not run.
    pub hits: u64,
    pub reused_tokens: u64,
    /// Entries dropped to stay within `max_tokens`.
    pub evictions: u64,
}

struct Entry {
    tokens: Vec<u32>,
    /// One tensor `[1, Hkv, n, D]` per cache tensor of the batch (n = the entry's tokens).
    kv: Vec<Tensor>,
    /// When it was last used (a counter).
    used: u64,
}

pub struct PrefixCache {
    entries: Vec<Entry>,
    clock: u64,
    stats: PrefixStats,
}

fn common(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl PrefixCache {
    pub fn new(max_tokens: usize) -> PrefixCache {
        PrefixCache {
            entries: Vec::new(),
            clock: 0,
            stats: PrefixStats {
                max_tokens,
                ..PrefixStats::default()
            },
        }
    }

    pub fn stats(&self) -> PrefixStats {
        PrefixStats {
            tokens: self.entries.iter().map(|e| e.tokens.len()).sum(),
            entries: self.entries.len(),
            ..self.stats
        }
    }

    /// Copies the longest cached prefix of `prompt` (at most all its tokens but the last) into
    /// slots `0..n` of `row` (the row's views of the batch's cache tensors); returns n.
    pub fn restore(&mut self, prompt: &[u32], row: &[Tensor]) -> Result<usize> {
        let best = self
            .entries
            .iter_mut()
            .map(|e| (common(&e.tokens, prompt), e))
            .max_by_key(|(n, e)| (*n, e.used));
        let Some((n, entry)) = best else {
            return Ok(0);
        };
        let n = n.min(prompt.len().saturating_sub(1));
        if n == 0 {
            return Ok(0);
        }
        for (dst, src) in row.iter().zip(&entry.kv) {
            dst.f_narrow(2, 0, n as i64)?
                .f_copy_(&src.f_narrow(2, 0, n as i64)?)?;
        }
        self.clock += 1;
        entry.used = self.clock;
        self.stats.hits += 1;
        self.stats.reused_tokens += n as u64;
        Ok(n)
    }

    /// Keeps `prompt`'s keys and values, slots `0..prompt.len()` of `row` (after its prefill).
    pub fn insert(&mut self, prompt: &[u32], row: &[Tensor]) -> Result<()> {
        self.clock += 1;
        let clock = self.clock;
        if prompt.len() > self.stats.max_tokens {
            return Ok(());
        }
        // Held already, within a longer entry: that one is used again.
        if let Some(e) = self
            .entries
            .iter_mut()
            .find(|e| e.tokens.len() >= prompt.len() && e.tokens.starts_with(prompt))
        {
            e.used = clock;
            return Ok(());
        }
        let n = prompt.len() as i64;
        let kv = row
            .iter()
            .map(|t| {
                let src = t.f_narrow(2, 0, n)?;
                let mut copy = Tensor::f_empty(src.size(), (src.kind(), src.device()))?;
                copy.f_copy_(&src)?;
                Ok(copy)
            })
            .collect::<Result<Vec<_>>>()?;
        self.entries.retain(|e| !prompt.starts_with(&e.tokens));
        let mut held: usize = self.entries.iter().map(|e| e.tokens.len()).sum();
        while held + prompt.len() > self.stats.max_tokens {
            let Some(oldest) = (0..self.entries.len()).min_by_key(|&i| self.entries[i].used) else {
                break;
            };
            held -= self.entries.swap_remove(oldest).tokens.len();
            self.stats.evictions += 1;
        }
        self.entries.push(Entry {
            tokens: prompt.to_vec(),
            kv,
            used: clock,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row of one cache tensor `[1, 1, C, 1]` whose slot i holds `value(i)`.
    fn row(capacity: i64, value: impl Fn(i64) -> f32) -> Vec<Tensor> {
        let v: Vec<f32> = (0..capacity).map(value).collect();
        vec![Tensor::f_from_slice(&v)
            .unwrap()
            .f_view([1, 1, capacity, 1])
            .unwrap()]
    }

    fn slots(t: &Tensor) -> Vec<f32> {
        Vec::<f32>::try_from(t.f_view([-1]).unwrap()).unwrap()
    }

    #[test]
    fn the_longest_prefix_is_restored_and_never_the_last_token() {
        let mut c = PrefixCache::new(100);
        c.insert(&[1, 2, 3, 4], &row(8, |i| 10.0 + i as f32)).unwrap();
        c.insert(&[1, 2, 9], &row(8, |i| 20.0 + i as f32)).unwrap();
        let target = row(8, |_| 0.0);
        // Shares 3 tokens with the first entry, 2 with the second.
        assert_eq!(c.restore(&[1, 2, 3, 7, 7], &target).unwrap(), 3);
        assert_eq!(slots(&target[0]), [10.0, 11.0, 12.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
        // The whole entry is the prompt: all but its last token.
        let target = row(8, |_| 0.0);
        assert_eq!(c.restore(&[1, 2, 9], &target).unwrap(), 2);
        assert_eq!(slots(&target[0])[..3], [20.0, 21.0, 0.0]);
        assert_eq!(c.restore(&[5, 1], &target).unwrap(), 0);
        let s = c.stats();
        assert_eq!((s.hits, s.reused_tokens, s.entries, s.tokens), (2, 5, 2, 7));
    }

    #[test]
    fn bounded_least_recently_used_first_and_longer_prompts_replace_their_prefixes() {
        let mut c = PrefixCache::new(6);
        c.insert(&[1, 2, 3], &row(4, |_| 1.0)).unwrap();
        c.insert(&[4, 5, 6], &row(4, |_| 2.0)).unwrap();
        // Using the first makes the second the least recently used.
        c.restore(&[1, 2, 3, 0], &row(4, |_| 0.0)).unwrap();
        c.insert(&[7, 8], &row(4, |_| 3.0)).unwrap();
        let s = c.stats();
        assert_eq!((s.entries, s.tokens, s.evictions), (2, 5, 1));
        assert_eq!(c.restore(&[4, 5, 6, 0], &row(4, |_| 0.0)).unwrap(), 0);
        assert_eq!(c.restore(&[1, 2, 3, 0], &row(4, |_| 0.0)).unwrap(), 3);
        // [7, 8, 9] covers [7, 8]: it takes its place, no eviction.
        c.insert(&[7, 8, 9], &row(4, |_| 4.0)).unwrap();
        let s = c.stats();
        assert_eq!((s.entries, s.tokens, s.evictions), (2, 6, 1));
        // A prefix of a held entry adds nothing; a prompt over the bound is not kept.
        c.insert(&[7], &row(4, |_| 5.0)).unwrap();
        c.insert(&[1; 7], &row(8, |_| 5.0)).unwrap();
        assert_eq!(c.stats().tokens, 6);
    }
}
