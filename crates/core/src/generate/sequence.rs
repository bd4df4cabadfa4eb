//! One sequence being generated: its tokens, its sampling and text state, and the choice of each
//! next token. Its cache is a row of the `Batch` it runs in.
use super::constraint::Constraint;
use super::decoder::{Decoder, Finish, Images};
use super::logprobs::{self, Alternative, TokenLogprob};
use super::request::Request;
use super::sample::{self, Rng};
use super::stream::{Detokenizer, Stops};
use crate::error::{bail_code, Code};
use anyhow::Result;

/// Text and the tokens that made it since the last piece (with their log-probabilities when the
/// request asks for them).
#[derive(Debug, Default, PartialEq)]
pub struct Piece {
    pub text: String,
    pub tokens: Vec<u32>,
    pub logprobs: Vec<TokenLogprob>,
}

pub struct Sequence {
    request: Request,
    /// Prompt and output.
    pub(super) tokens: Vec<u32>,
    pub prompt_tokens: usize,
    /// The logits of the next token, then (after a step that ran a draft) of the token after
    /// each drafted one: `draft.len() + 1` rows.
    logits: Vec<Vec<f32>>,
    /// Tokens proposed after the newest one (`super::lookup`), run with it in the last step.
    pub(super) draft: Vec<u32>,
    /// The last `choose`'s draft: (tokens proposed, tokens accepted).
    pub(super) verified: (usize, usize),
    rng: Rng,
    detok: Detokenizer,
    stops: Stops,
    pub finish: Option<Finish>,
    /// A stop string ended it (nothing held back is left to emit).
    matched: bool,
    /// Tokens chosen since the last piece whose text is not complete yet.
    held: Piece,
    /// The output's grammar (`Request::format`): masks each choice, ends the sequence when
    /// nothing may follow.
    constraint: Option<Box<Constraint>>,
    /// The prompt's image embeddings, until its prefill has run.
    pub(super) images: Option<Images>,
    /// What its tokens after the prompt add to their rotary positions (an M-RoPE model's prompt
    /// with images: `Images::rope_delta`; 0 otherwise).
    pub(super) rope_delta: i64,
}

impl Sequence {
    /// A new sequence for `prompt` (checked against the vocabulary and the context); its prompt
    /// runs when a `Batch` admits it. A request with a format compiles it here (milliseconds to
    /// a bounded second or so: the engine makes such sequences apart from its rounds).
    pub fn new(d: &dyn Decoder, prompt: Vec<u32>, request: Request) -> Result<Sequence> {
        if prompt.is_empty() {
            bail_code!(Code::InvalidArg, "the prompt is empty (no tokens)");
        }
        let vocab = d.vocab_size();
        if let Some(bad) = prompt.iter().find(|&&t| t as usize >= vocab.max(1)) {
            bail_code!(
                Code::InvalidArg,
                "prompt: token id {bad} is out of the vocabulary ({vocab})"
            );
        }
        if prompt.len() >= d.max_context() {
            bail_code!(
                Code::InvalidArg,
                "the prompt has {} tokens; this model serves at most {} in all",
                prompt.len(),
                d.max_context()
            );
        }
        let constraint = match &request.format {
            Some(format) => Some(Box::new(d.vocabulary()?.compile(format)?.start())),
            None => None,
        };
        if request.logprobs.is_some() {
            // The token table `token_bytes` reads, built here (apart from the rounds) on first use;
            // a decoder without one spells tokens through `decode`.
            let _ = d.vocabulary();
        }
        Ok(Sequence {
            constraint,
            rng: Rng::new(request.params.seed),
            stops: Stops::new(request.stop.clone()),
            request,
            prompt_tokens: prompt.len(),
            tokens: prompt,
            logits: Vec::new(),
            draft: Vec::new(),
            verified: (0, 0),
            detok: Detokenizer::default(),
            finish: None,
            matched: false,
            held: Piece::default(),
            images: None,
            rope_delta: 0,
        })
    }

    /// With the prompt's image embeddings (`Decoder::prepare`'s), placed at its prefill.
    pub fn with_images(mut self, images: Option<Images>) -> Sequence {
        self.rope_delta = images.as_ref().map_or(0, |i| i.rope_delta);
        self.images = images;
        self
    }

    /// The ids the prefix cache keys the prompt by: its tokens, but at an image token a key of
    /// the images' content hash and the position (above any vocabulary: bit 31 set), so that
    /// keys and values are reused only for the same images at the same places.
    pub(super) fn prefix_key(&self) -> std::borrow::Cow<'_, [u32]> {
        let Some(images) = &self.images else {
            return std::borrow::Cow::Borrowed(&self.tokens);
        };
        let mask = Vec::<bool>::try_from(&images.mask).unwrap_or_default();
        let key = self.tokens.iter().enumerate().map(|(i, &t)| match mask.get(i) {
            Some(true) => {
                let mixed = images.hash ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                0x8000_0000 | (mixed ^ (mixed >> 32)) as u32
            }
            _ => t,
        });
        std::borrow::Cow::Owned(key.collect())
    }

    /// The cache slots it needs in all: prompt and new tokens, within the context.
    pub fn capacity(&self, d: &dyn Decoder) -> usize {
        (self.prompt_tokens + self.request.max_new_tokens)
            .min(d.max_context())
            .max(2)
    }

    /// The most tokens a draft may propose now: every one accepted and the token after them
    /// stay within the new tokens and the context (the last drafted token's slot is in the cache).
    pub(super) fn draft_room(&self, d: &dyn Decoder) -> usize {
        let generated = self.tokens.len() - self.prompt_tokens;
        let left = self.request.max_new_tokens.saturating_sub(generated);
        left.saturating_sub(1)
            .min(d.max_context().saturating_sub(self.tokens.len()))
    }

    /// The tokens generated so far.
    pub fn output(&self) -> &[u32] {
        &self.tokens[self.prompt_tokens..]
    }

    /// Chooses the next token from the logits and adds the text it completes to `piece`; after a
    /// step that ran a draft, the drafted tokens the model agrees with (`sample::verify`) and the
    /// one it chooses after them, each through the same checks (constraint, EOS, stop strings,
    /// the token limit) as one token alone. True when the sequence goes on (the newest token
    /// must then run through the program); at the end `finish` is set and the text held back is
    /// flushed into `piece`.
    pub(super) fn choose(&mut self, d: &dyn Decoder, piece: &mut Piece) -> Result<bool> {
        let rows = std::mem::take(&mut self.logits);
        let draft = std::mem::take(&mut self.draft);
        self.verified = (draft.len(), 0);
        for (at, logits) in rows.into_iter().enumerate() {
            let proposal = draft.get(at).copied();
            let token = self.pick(d, logits, proposal, piece)?;
            let agreed = proposal == Some(token);
            self.verified.1 += agreed as usize;
            if !self.push(d, token, piece)? {
                return Ok(false);
            }
            if !agreed {
                break;
            }
        }
        Ok(true)
    }

    /// The token chosen from one position's `logits` (`proposal`: the draft's token there),
    /// masked by the constraint, which then advances over it; its log-probability into `piece`.
    fn pick(
        &mut self,
        d: &dyn Decoder,
        mut logits: Vec<f32>,
        proposal: Option<u32>,
        piece: &mut Piece,
    ) -> Result<u32> {
        // The raw logits, before the constraint and the sampler change them (`super::logprobs`).
        let raw = self.request.logprobs.map(|top| (logits.clone(), top));
        if let Some(c) = &mut self.constraint {
            c.apply(&mut logits)?;
        }
        let (params, rng) = (&self.request.params, &mut self.rng);
        let token = match proposal {
            Some(x) => sample::verify(&mut logits, &self.tokens, params, rng, x),
            None => sample::choose(&mut logits, &self.tokens, params, rng),
        };
        if let Some((raw, top)) = raw {
            let (logprob, top) = logprobs::of(&raw, token, top);
            let top = top.into_iter().map(|(token, logprob)| Alternative {
                token,
                logprob,
                bytes: d.token_bytes(token),
            });
            piece.logprobs.push(TokenLogprob {
                token,
                logprob,
                bytes: d.token_bytes(token),
                top: top.collect(),
            });
        }
        Ok(token)
    }

    /// Adds a chosen token and the text it completes to `piece`. True when the sequence goes
    /// on; at the end `finish` is set and the text held back is flushed into `piece`.
    fn push(&mut self, d: &dyn Decoder, token: u32, piece: &mut Piece) -> Result<bool> {
        let decode = |ids: &[u32]| d.decode(ids);
        let complete = match &mut self.constraint {
            Some(c) => {
                c.advance(token)?;
                c.must_stop()
            }
            None => false,
        };
        self.tokens.push(token);
        piece.tokens.push(token);
        let generated = self.tokens.len() - self.prompt_tokens;
        if d.is_eos(token) {
            self.finish = Some(Finish::Stop);
        } else {
            let (text, stopped) = self.stops.push(&self.detok.push(token, &decode)?);
            piece.text.push_str(&text);
            if stopped {
                self.finish = Some(Finish::Stop);
                self.matched = true;
            } else if complete {
                // The output is whole and nothing may follow (the closing brace of the schema's
                // object): it ends as if the model had chosen EOS.
                self.finish = Some(Finish::Stop);
            } else if generated >= self.request.max_new_tokens || self.tokens.len() >= d.max_context() {
                self.finish = Some(Finish::Length);
            }
        }
        if self.finish.is_none() {
            return Ok(true);
        }
        if !self.matched {
            let rest = self.detok.flush(&decode)?;
            let (text, stopped) = self.stops.push(&rest);
            piece.text.push_str(&text);
            if !stopped {
                piece.text.push_str(&self.stops.flush());
            }
        }
        Ok(false)
    }

    /// Whether an output format constrains it.
    pub(super) fn is_constrained(&self) -> bool {
        self.constraint.is_some()
    }

    /// Computes the next token's mask ahead of `choose` (which applies it, computing it there
    /// instead when this failed: its error is reported then).
    pub(super) fn prepare_mask(&mut self) {
        if let Some(c) = &mut self.constraint {
            let _ = c.compute_mask();
        }
    }

    /// The next token's logits (a step without a draft, or a prefill).
    pub(super) fn set_logits(&mut self, logits: Vec<f32>) {
        self.logits = vec![logits];
    }

    /// The logits of the newest token's position and each drafted one's (`draft.len() + 1`).
    pub(super) fn set_verified(&mut self, logits: Vec<Vec<f32>>) {
        self.logits = logits;
    }

    /// Keeps tokens that made no text yet (and their log-probabilities) for the next piece.
    pub(super) fn hold(&mut self, mut piece: Piece) {
        self.held.tokens.append(&mut piece.tokens);
        self.held.logprobs.append(&mut piece.logprobs);
    }

    /// `piece` with the held tokens before its own.
    pub(super) fn with_held(&mut self, mut piece: Piece) -> Piece {
        if !self.held.tokens.is_empty() {
            self.held.tokens.append(&mut piece.tokens);
            self.held.logprobs.append(&mut piece.logprobs);
            piece.tokens = std::mem::take(&mut self.held.tokens);
            piece.logprobs = std::mem::take(&mut self.held.logprobs);
        }
        piece
    }
}
