//! Sequences that share each program call (iteration-level batching), and the cache they share.
//!
//! The cache is a `KvCache` (`super::kv_cache`); sequence i owns row i. A step chooses
//! one token for every sequence, lets the ended ones go (the last row's cache moves into the
//! freed row, so the live rows stay `0..n` and the program's batch is the dense view
//! `narrow(0, 0, n)`), then runs every remaining sequence's new token through the program in
//! one call, each at its own position. A new sequence joins between steps: its prompt runs
//! alone on its row (prefill) and it takes part in the next step. The cache's capacity C grows
//! with the positions, not to each sequence's whole need at once: the
//! program's attention reads all C slots of every row at each step (masked past its position), so
//! slots allocated ahead cost time at every step (SmolLM2 int8, 8 rows at position 150: 31 ms a
//! step with C = 160, 70-78 ms with C = 1024; AMD EPYC Zen 3, 2 threads).
//!
//! With speculation (`super::lookup`) a sequence runs its newest token and a draft of the
//! tokens it may write next in the same call: the call is `[rows, 1 + longest draft]`, a
//! shorter row padded with copies of its last token at its last position (the same key written
//! to the same slot again, the same logits), and it keeps every column's logits. The drafted
//! tokens the model rejects leave keys in slots past the sequence's length: no token attends
//! there (token (b, t) reads slots `0..=positions[b, t]`), and the next step writes over them.
use super::decoder::{Decoder, Finish};
use super::kv_cache::KvCache;
use super::lookup::{self, Speculation};
use super::prefix::{Hold, PrefixCache};
use super::sequence::{Piece, Sequence};
use crate::error::{bail_code, describe, fail, Code};
use anyhow::Result;
use tch::Tensor;

/// What a step says about one sequence: new text (and its tokens), and whether it ended
/// (`finish`, or `error` when its own work failed).
pub struct Event<T> {
    pub tag: T,
    pub piece: Piece,
    pub finish: Option<Finish>,
    pub error: Option<anyhow::Error>,
}

/// Sequences generating together, each tagged with its caller's `T`.
pub struct Batch<T> {
    cache: KvCache,
    entries: Vec<(T, Sequence)>,
    /// The most sequences at once.
    limit: usize,
    /// Steps run and the rows they ran, since the batch was made.
    counts: Counts,
    /// Prompts' keys and values kept for later prompts that start the same (None: off).
    prefix: Option<PrefixCache>,
    /// Drafts by prompt lookup, checked in each step (None: off).
    speculation: Option<Speculation>,
}

/// How much the batch has shared: `rows / steps` is the mean number of sequences per step.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Counts {
    pub steps: u64,
    pub rows: u64,
    pub prefills: u64,
    /// Tokens drafted by speculation and run through the program, and those the model accepted.
    pub proposed: u64,
    pub accepted: u64,
}

impl<T> Batch<T> {
    pub fn new(limit: usize) -> Batch<T> {
        Batch {
            cache: KvCache::default(),
            entries: Vec::new(),
            limit: limit.max(1),
            counts: Counts::default(),
            prefix: None,
            speculation: None,
        }
    }

    /// With drafts by prompt lookup (None: off); the decoder must keep several positions'
    /// logits (`Speculation::check`).
    pub fn with_speculation(mut self, speculation: Option<Speculation>) -> Batch<T> {
        self.speculation = speculation;
        self
    }

    /// With a prefix cache of at most `max_tokens` tokens (0: none).
    pub fn with_prefix_cache(mut self, max_tokens: usize) -> Batch<T> {
        self.prefix = (max_tokens > 0).then(|| PrefixCache::new(max_tokens));
        self
    }

    pub fn prefix_cache(&self) -> Option<&PrefixCache> {
        self.prefix.as_ref()
    }

    /// Drops the prefix cache and its keys and values (a closed engine's: nothing will read them).
    pub fn drop_prefix_cache(&mut self) {
        self.prefix = None;
    }

    pub fn counts(&self) -> Counts {
        self.counts
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn is_full(&self) -> bool {
        self.entries.len() >= self.limit
    }

    /// Cache slots allocated (rows × capacity), for tests and stats.
    pub fn allocated(&self) -> (usize, usize) {
        self.cache.allocated()
    }

    pub fn tags(&self) -> impl Iterator<Item = &T> {
        self.entries.iter().map(|(t, _)| t)
    }

    /// Runs `seq`'s prompt on a free row and adds it; on an error the batch is as it was. The
    /// longest prefix the prefix cache holds is copied in, and only the rest runs.
    pub fn admit(&mut self, d: &dyn Decoder, tag: T, mut seq: Sequence) -> Result<()> {
        if self.is_full() {
            bail_code!(Code::Internal, "the batch is full ({} sequences)", self.limit);
        }
        let row = self.entries.len();
        let most = self.most(d).max(seq.capacity(d));
        let logits = self.reserve(d, row + 1, seq.tokens.len(), most).and_then(|()| {
            let cache = self.cache.views(row, 1)?;
            // An image prompt's image tokens are keyed by the images' content (`prefix_key`).
            let key = seq.prefix_key();
            let (reused, hold) = match self.prefix.as_mut() {
                Some(p) => p.restore(&key, &cache)?,
                None => (0, Hold::default()),
            };
            let ids: Vec<i64> = seq.tokens[reused..].iter().map(|&t| t as i64).collect();
            let positions: Vec<i64> = (reused as i64..seq.tokens.len() as i64).collect();
            let rows = cache.iter().map(Tensor::shallow_clone).collect();
            let ran = match &seq.images {
                Some(images) => {
                    let (start, n) = (reused as i64, ids.len() as i64);
                    let embeds = images.embeds.f_narrow(0, start, n)?;
                    let mask = images.mask.f_narrow(0, start, n)?;
                    let rope = images
                        .rope
                        .as_ref()
                        .map(|r| r.f_narrow(1, start, n))
                        .transpose()?;
                    d.run_images(&ids, &positions, rows, (&embeds, &mask, rope.as_ref()))
                }
                None => d.run(&ids, &positions, 1, rows),
            };
            match (self.prefix.as_mut(), &ran) {
                (Some(p), Ok(_)) => p.insert(&key, &cache, hold)?,
                (Some(p), Err(_)) => p.release(hold),
                (None, _) => {}
            }
            ran?.pop().ok_or_else(|| fail(Code::Internal, "no logits"))
        });
        let logits = match logits {
            Ok(l) => l,
            Err(e) => {
                self.release_if_empty();
                return Err(e);
            }
        };
        seq.set_logits(logits);
        seq.images = None; // placed in the cache: their memory goes
        self.entries.push((tag, seq));
        self.counts.prefills += 1;
        Ok(())
    }

    /// Takes out the sequences `which` selects (aborted ones), freeing their rows.
    pub fn remove_where(&mut self, mut which: impl FnMut(&T) -> bool) -> Result<Vec<(T, Sequence)>> {
        let rows: Vec<usize> = (0..self.entries.len())
            .filter(|&i| which(&self.entries[i].0))
            .collect();
        self.remove_rows(rows)
    }

    /// Takes out every sequence (after an error that leaves the batch unusable).
    pub fn clear(&mut self) -> Vec<(T, Sequence)> {
        let all = std::mem::take(&mut self.entries);
        self.release_if_empty();
        all
    }

    /// One token for every sequence. Returns an event for each sequence with new text and
    /// for each that ended (those leave the batch); the others' tokens wait for their text.
    /// When the program call fails, every sequence ends with its error (the batch is empty).
    pub fn step(&mut self, d: &dyn Decoder) -> Vec<Event<T>>
    where
        T: Clone,
    {
        let mut events = Vec::new();
        let mut ended = Vec::new();
        for (i, (tag, seq)) in self.entries.iter_mut().enumerate() {
            let mut piece = Piece::default();
            let chosen = seq.choose(d, &mut piece);
            self.counts.proposed += seq.verified.0 as u64;
            self.counts.accepted += seq.verified.1 as u64;
            match chosen {
                Ok(true) if piece.text.is_empty() => {
                    // Tokens that do not complete a character yet: kept for the next piece.
                    seq.hold(piece);
                }
                Ok(true) => events.push(Event {
                    tag: tag.clone(),
                    piece: seq.with_held(piece),
                    finish: None,
                    error: None,
                }),
                Ok(false) => {
                    ended.push(i);
                    events.push(Event {
                        tag: tag.clone(),
                        piece: seq.with_held(piece),
                        finish: seq.finish,
                        error: None,
                    });
                }
                Err(e) => {
                    ended.push(i);
                    seq.finish = Some(Finish::Aborted);
                    events.push(Event {
                        tag: tag.clone(),
                        piece: Piece::default(),
                        finish: seq.finish,
                        error: Some(e),
                    });
                }
            }
        }
        let moved = self.remove_rows(ended).map(|_| ());
        if let Err(e) = moved.and_then(|()| self.forward(d)) {
            let (code, message) = describe(&e);
            for (tag, _) in self.clear() {
                events.push(Event {
                    tag,
                    piece: Piece::default(),
                    finish: Some(Finish::Aborted),
                    error: Some(fail(code, message.clone())),
                });
            }
        }
        events
    }

    /// Runs every sequence's newest token (and its draft), each at its own position, in one call.
    fn forward(&mut self, d: &dyn Decoder) -> Result<()> {
        let n = self.entries.len();
        if n == 0 {
            return Ok(());
        }
        if let Some(s) = self.speculation {
            let budget = s.budget(n, d.keep_logits());
            for (_, seq) in &mut self.entries {
                let most = budget.min(seq.draft_room(d));
                seq.draft = lookup::propose(&seq.tokens, s.ngram, most);
            }
        }
        let cols = 1 + self.entries.iter().map(|(_, s)| s.draft.len()).max().unwrap_or(0);
        let mut ids = Vec::with_capacity(n * cols);
        let mut positions = Vec::with_capacity(n * cols);
        for (_, s) in &self.entries {
            let at = s.tokens.len() - 1;
            let row = std::iter::once(&s.tokens[at]).chain(&s.draft);
            let last = (at + s.draft.len(), *s.draft.last().unwrap_or(&s.tokens[at]));
            // A shorter row repeats its last token at its last position (see the module's doc).
            let padded = row
                .enumerate()
                .map(|(k, &t)| (at + k, t))
                .chain(std::iter::repeat(last));
            for (p, t) in padded.take(cols) {
                ids.push(t as i64);
                positions.push(p as i64);
            }
        }
        // Each row writes its newest token's slot and its draft's: position + 1 slots.
        let need = (self.entries.iter())
            .map(|(_, s)| s.tokens.len() + s.draft.len())
            .max()
            .unwrap_or(0);
        self.reserve(d, self.cache.rows(), need, self.most(d))?;
        let cache = self.cache.views(0, n)?;
        // An M-RoPE model's rows after images: their rotary positions are shifted.
        let offsets: Vec<i64> = self.entries.iter().map(|(_, s)| s.rope_delta).collect();
        // The constrained rows' next masks depend only on the tokens chosen so far: computed on a
        // thread of their own while the program runs (on 2 cores this hides most of their cost).
        let mut constrained: Vec<&mut Sequence> = (self.entries.iter_mut())
            .map(|(_, s)| s)
            .filter(|s| s.is_constrained())
            .collect();
        let logits = std::thread::scope(|scope| {
            let masks = (!constrained.is_empty()).then(|| {
                std::thread::Builder::new()
                    .name("torch-node-masks".into())
                    .spawn_scoped(scope, move || {
                        constrained.iter_mut().for_each(|s| s.prepare_mask())
                    })
            });
            let logits = match cols {
                _ if offsets.iter().any(|&o| o != 0) => {
                    d.run_offset(&ids, &positions, (n, cols), &offsets, cache)
                }
                1 => d.run(&ids, &positions, n, cache),
                _ => d.run_keep(&ids, &positions, n, cols, cache),
            };
            // A mask that failed is computed again (and its error reported) where it is applied.
            if let Some(Ok(masks)) = masks {
                let _ = masks.join();
            }
            logits
        })?;
        if logits.len() != n * cols {
            bail_code!(
                Code::Internal,
                "the program returned {} logits for {n} rows of {cols}",
                logits.len()
            );
        }
        self.counts.steps += 1;
        self.counts.rows += n as u64;
        let mut logits = logits.into_iter();
        for (_, seq) in &mut self.entries {
            let mut row: Vec<Vec<f32>> = logits.by_ref().take(cols).collect();
            row.truncate(seq.draft.len() + 1);
            seq.set_verified(row);
        }
        Ok(())
    }

    /// Removes `rows` (any order): each freed row takes the last row's sequence and cache. A
    /// failed copy leaves the batch unusable: the caller clears it.
    fn remove_rows(&mut self, mut rows: Vec<usize>) -> Result<Vec<(T, Sequence)>> {
        rows.sort_unstable();
        rows.dedup();
        let mut out = Vec::with_capacity(rows.len());
        // From the highest: the last row is then always a live one (or the removed row itself).
        for &i in rows.iter().rev() {
            let last = self.entries.len() - 1;
            if i != last {
                let used = self.entries[last].1.tokens.len();
                self.cache.move_row(last, i, used)?;
            }
            out.push(self.entries.swap_remove(i));
        }
        self.release_if_empty();
        Ok(out)
    }

    fn release_if_empty(&mut self) {
        if self.entries.is_empty() {
            self.cache.release();
        }
    }

    /// The most slots a live sequence can reach (its prompt and new tokens, within the context).
    fn most(&self, d: &dyn Decoder) -> usize {
        self.entries.iter().map(|(_, s)| s.capacity(d)).max().unwrap_or(0)
    }

    /// Makes room for `rows` rows of at least `need` slots (no sequence needing more than
    /// `most`, already within the context), keeping the live rows' cache.
    fn reserve(&mut self, d: &dyn Decoder, rows: usize, need: usize, most: usize) -> Result<()> {
        let live = self.entries.len();
        (self.cache).reserve(d.cache_shape(), (rows, self.limit), (need, most), live)
    }
}
