//! What the engine and its callers share about one generation: the `Sink` its pieces go to, the
//! `Output` of a piece, and its lifecycle (`State`, each transition a match arm of `State::on`;
//! the diagram is in `super::engine`'s module doc).
use super::decoder::Finish;
use super::logprobs::TokenLogprob;

/// Where a generation's output goes (the addon: a JS callback on the caller's thread).
pub trait Sink: Send + Sync + 'static {
    /// What `hold` returns: the receiver is kept while it lives.
    type Hold;
    /// Sends a piece; the last one has `finish` set.
    fn post(&self, out: Output);
    /// Whether the receiver is gone (its JS thread tearing down): nothing more is sent.
    fn is_gone(&self) -> bool;
    /// Keeps the receiver while engine work for it runs; None once it is gone.
    fn hold(&self) -> Option<Self::Hold>;
    /// Runs engine work on this receiver's behalf (the addon sends libtorch's warnings to it).
    fn scope<R>(&self, work: impl FnOnce() -> R) -> R {
        work()
    }
}

/// New text and its tokens; on the last piece why it ended (or the error that ended it).
#[derive(Default)]
pub struct Output {
    pub text: String,
    pub tokens: Vec<u32>,
    /// Each token's log-probability, when the request asked (`super::logprobs`).
    pub logprobs: Vec<TokenLogprob>,
    pub prompt_tokens: usize,
    pub finish: Option<Finish>,
    pub error: Option<anyhow::Error>,
    /// On the last piece: frees the generation's slot when dropped (once delivered, or when
    /// the receiver is gone and the piece with it).
    pub settled: Option<Settled>,
}

/// Frees a generation's slot when dropped (see `Output::settled`).
pub struct Settled(pub(super) Option<Box<dyn FnOnce() + Send>>);

impl Drop for Settled {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}

/// Where a generation is in its life (module doc).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum State {
    Queued,
    Prefilling,
    Decoding,
    /// Aborted while it held a row: the next round frees it.
    Aborting,
    /// Its row is free; its last piece is on its way to the caller.
    Ending(Finish),
    Finished(Finish),
}

/// What happens to a generation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Transition {
    Admit,
    Prefilled,
    Abort,
    End(Finish),
    Delivered,
}

impl State {
    /// The state after `t`; a transition that does not apply leaves it as it is.
    pub fn on(self, t: Transition) -> State {
        use State::*;
        use Transition::*;
        match (self, t) {
            (Queued, Admit) => Prefilling,
            (Queued, Abort) => Finished(Finish::Aborted),
            (Queued, End(f)) => Finished(f),
            (Prefilling, Prefilled) => Decoding,
            (Prefilling | Decoding, Abort) => Aborting,
            (Prefilling | Decoding, End(f)) => Ending(f),
            (Aborting, End(_)) => Finished(Finish::Aborted),
            (Ending(f), Delivered) => Finished(f),
            (s, _) => s,
        }
    }

    /// Whether it holds a slot (module doc).
    pub fn holds_row(self) -> bool {
        matches!(self, State::Prefilling | State::Decoding | State::Ending(_))
    }
}
