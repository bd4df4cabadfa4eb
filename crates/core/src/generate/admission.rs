//! Which waiting generations join the batch, and when a call is refused: one queue, one unit.
//!
//! As text-generation-inference's `State::next_batch` (backends/v3/src/queue.rs): the engine's
//! round asks `next` for one generation at a time and charges what its prompt cost; the unit
//! says no once the rows are taken or, while other sequences are decoding, once this round's
//! prompts reach the prefill budget (a prefill delays every running sequence's next token by
//! its own time). An idle batch takes as many as it has rows. A call is refused (`QueueFull`)
//! once `max_sequences + max_queue` generations are in (holding a row or waiting).
use crate::error::{bail_code, Code};
use anyhow::Result;
use std::collections::VecDeque;

pub struct Admission<T> {
    waiting: VecDeque<T>,
    /// Generations holding a row: admitted, neither ended nor aborted.
    active: usize,
    max_sequences: usize,
    /// None: no bound.
    max_queue: Option<usize>,
}

/// One round of admissions (between two steps).
#[derive(Debug)]
pub struct Round {
    free_rows: usize,
    /// No sequence is decoding: the budget does not apply.
    idle: bool,
    budget: usize,
    prefilled: usize,
}

impl Round {
    /// A joining prompt ran `tokens` tokens.
    pub fn charge(&mut self, tokens: usize) {
        self.prefilled += tokens.max(1);
    }
}

impl<T> Admission<T> {
    pub fn new(max_sequences: usize, max_queue: Option<usize>) -> Admission<T> {
        Admission {
            waiting: VecDeque::new(),
            active: 0,
            max_sequences: max_sequences.max(1),
            max_queue,
        }
    }

    /// Queues a call; `QueueFull` when `max_sequences + max_queue` are in already.
    pub fn push(&mut self, t: T) -> Result<()> {
        let (active, queued) = self.counts();
        if let Some(max_queue) = self.max_queue {
            if active + queued >= self.max_sequences + max_queue {
                bail_code!(
                    Code::QueueFull,
                    "{active} sequences are generating and {queued} calls wait (maxSequences {}, maxQueue {max_queue})",
                    self.max_sequences
                );
            }
        }
        self.waiting.push_back(t);
        Ok(())
    }

    /// Takes out the first waiting call `which` selects (one aborted while it waits).
    pub fn remove(&mut self, which: impl Fn(&T) -> bool) -> Option<T> {
        let at = self.waiting.iter().position(which)?;
        self.waiting.remove(at)
    }

    /// A round over a batch with `rows_in_use` rows taken (those of aborted generations too,
    /// until the engine frees them) and a prefill budget of `budget` tokens. A generation that
    /// ended still holds its row until its last piece is delivered (`release`), though the batch
    /// freed it: at most `max_sequences` are ever in flight.
    pub fn round(&self, rows_in_use: usize, budget: usize) -> Round {
        Round {
            free_rows: self.max_sequences.saturating_sub(rows_in_use.max(self.active)),
            idle: rows_in_use == 0,
            budget,
            prefilled: 0,
        }
    }

    /// The next call to join (the first that is `ready`: a long prompt tokenized apart is not
    /// until it is), or None when the round is over. It then holds a row (`release` frees it).
    pub fn next(&mut self, round: &mut Round, ready: impl Fn(&T) -> bool) -> Option<T> {
        if round.free_rows == 0 || (!round.idle && round.prefilled >= round.budget) {
            return None;
        }
        let at = self.waiting.iter().position(ready)?;
        let t = self.waiting.remove(at)?;
        round.free_rows -= 1;
        self.active += 1;
        Some(t)
    }

    /// A generation that held a row ended or was aborted.
    pub fn release(&mut self) {
        self.active = self.active.saturating_sub(1);
    }

    /// Whether a waiting call could join now (the engine goes on while one can): one is
    /// `ready` and a row is free.
    pub fn can_admit(&self, ready: impl Fn(&T) -> bool) -> bool {
        self.active < self.max_sequences && self.waiting.iter().any(ready)
    }

    /// (holding a row, waiting).
    pub fn counts(&self) -> (usize, usize) {
        (self.active, self.waiting.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(max_sequences: usize, max_queue: Option<usize>, n: u32) -> Admission<u32> {
        let mut a = Admission::new(max_sequences, max_queue);
        (0..n).for_each(|i| a.push(i).unwrap());
        a
    }

    fn take(a: &mut Admission<u32>, round: &mut Round, cost: usize) -> Vec<u32> {
        std::iter::from_fn(|| {
            let t = a.next(round, |_| true)?;
            round.charge(cost);
            Some(t)
        })
        .collect()
    }

    #[test]
    fn an_idle_batch_takes_as_many_as_it_has_rows_whatever_the_budget() {
        let mut a = queue(3, None, 5);
        let mut round = a.round(0, 10);
        assert_eq!(take(&mut a, &mut round, 1000), [0, 1, 2]);
        assert_eq!(a.counts(), (3, 2));
    }

    #[test]
    fn a_running_batch_takes_prompts_until_the_budget_is_reached() {
        let mut a = queue(8, None, 5);
        // 1 row decoding; prompts of 300 tokens and a budget of 512: two join (300, then 600).
        let mut round = a.round(1, 512);
        assert_eq!(take(&mut a, &mut round, 300), [0, 1]);
        // The next round starts afresh.
        let mut round = a.round(3, 512);
        assert_eq!(take(&mut a, &mut round, 600), [2]);
        // No free row: none.
        let mut full = a.round(8, 512);
        assert!(a.next(&mut full, |_| true).is_none());
    }

    #[test]
    fn calls_not_ready_are_passed_over_in_order() {
        let mut a = queue(4, None, 4);
        let mut round = a.round(0, 512);
        assert_eq!(a.next(&mut round, |&t| t % 2 == 1), Some(1));
        assert_eq!(a.next(&mut round, |&t| t % 2 == 1), Some(3));
        assert_eq!(a.next(&mut round, |&t| t % 2 == 1), None);
        assert!(a.can_admit(|&t| t == 2) && !a.can_admit(|&t| t == 1));
    }

    #[test]
    fn an_ended_generation_holds_its_row_until_released_though_the_batch_freed_it() {
        let mut a = queue(1, Some(1), 2);
        let mut round = a.round(0, 512);
        assert_eq!(take(&mut a, &mut round, 1), [0]);
        // 0 ended: its row left the batch, its last piece is not delivered yet.
        let mut round = a.round(0, 512);
        assert!(a.next(&mut round, |_| true).is_none());
        assert!(!a.can_admit(|_| true));
        assert_eq!(a.counts(), (1, 1));
        a.release();
        assert!(a.can_admit(|_| true));
        let mut round = a.round(0, 512);
        assert_eq!(take(&mut a, &mut round, 1), [1]);
    }

    #[test]
    fn queue_full_past_max_sequences_plus_max_queue_and_releases_make_room() {
        let mut a = queue(2, Some(1), 3);
        let e = a.push(9).unwrap_err();
        let (code, message) = crate::error::describe(&e);
        assert_eq!(code, Code::QueueFull);
        assert!(message.contains("(maxSequences 2, maxQueue 1)"), "{message}");
        let mut round = a.round(0, 512);
        assert_eq!(take(&mut a, &mut round, 1), [0, 1]);
        assert!(a.push(9).is_err(), "2 rows held and 1 waiting");
        a.release();
        a.push(9).unwrap();
        assert_eq!(a.remove(|&t| t == 2), Some(2));
        assert_eq!(a.counts(), (1, 1));
        // No bound: never full.
        let mut free = queue(1, None, 1000);
        free.push(1000).unwrap();
    }
}
