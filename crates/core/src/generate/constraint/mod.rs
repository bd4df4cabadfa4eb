//! Structured output: a token mask per sequence that keeps a generation inside a JSON schema, a
//! Lark grammar, a regex or a tool-call format, with llguidance (what llama.cpp, vLLM and
//! SGLang use) doing the parsing.
//!
//! # Use
//!
//! ```text
//! once per model, on a worker (0.4-0.6 s for 49,152 tokens on 2 cores: a trie of the vocabulary)
//!   let vocab = Vocabulary::from_tokenizer_json(&json, &manifest.eos, logits_width)?;
//! once per request, on a worker, never on the JS thread (ms; bounded, see below)
//!   let format = Format::from_json(&response_format)?;            // None for {type: 'text'}
//!   let grammar = vocab.compile(&format)?;                         // InvalidArg naming the part
//! once per sequence (cheap: shares the compiled grammar)
//!   let mut c = grammar.start();
//! each step, for each constrained row of the batch
//!   c.apply(&mut logits_row)?;          // disallowed tokens to -inf (computes the mask)
//!   let token = sample(...);
//!   c.advance(token)?;                  // then: c.must_stop() -> finish without sampling EOS
//! ```
//!
//! The mask for the next step depends only on the tokens chosen so far, so
//! [`Constraint::compute_mask`] can run while the model computes the step's logits (on another
//! thread: a `Constraint` is `Send`); `apply` then only writes -inf (microseconds). Constraints
//! started from one `Grammar` share its lexer's cache (behind a lock): their masks are best
//! computed on one thread. [`Mask`] also gives the bits (`words`) or an additive row
//! (`write_bias`: 0 or -inf) for a logits tensor.
//!
//! # Ending
//!
//! The model's EOS tokens (all of the manifest's `eos_token_ids`) are allowed exactly when the
//! text so far is complete ([`Constraint::is_accepting`]); when nothing may follow
//! ([`Constraint::must_stop`], e.g. after the closing `}` of an object) the mask holds only EOS
//! and the caller should finish the sequence. A sequence cut by `maxNewTokens` (or a stop
//! string) is not complete: `is_accepting` says so, and the caller reports it.
//!
//! # Bounds
//!
//! A schema or grammar over [`MAX_SOURCE_BYTES`] is refused before compiling, as is a schema
//! over the limits of `schema.rs` (subschemas, properties, branches, depth), one that refers
//! outside itself or that no finite value satisfies; compiling spends llguidance's lexer fuel
//! and grammar-size limits ([`limits`]), so a hostile schema fails in milliseconds with
//! InvalidArg. Each step is bounded by llguidance's step fuel and row limit, and each
//! constraint by [`TIME_BUDGET`]: a grammar that exhausts them fails its sequence with
//! InvalidArg, never hangs. The lexer's states are capped, which caps a constraint's memory.
//!
//! The OpenAI shapes are accepted as sent (`json_schema: {name, schema, strict}`); `strict:
//! false` lets schema keywords llguidance cannot enforce be ignored instead of refused.
mod format;
mod json_options;
mod numbers;
mod schema;
mod tools;
mod vocab;

#[cfg(test)]
mod tests;

pub use format::Format;
pub use numbers::MAX_DIGITS;
pub use tools::{Tool, ToolCallFormat, ToolChoice, Wrapper};

use crate::error::{bail_code, catch_panic, fail, Code};
use anyhow::Result;
use json_options::with_options;
use llguidance::api::{ParserLimits, TopLevelGrammar};
use llguidance::toktrie::{SimpleVob, TokEnv};
use llguidance::{Matcher, ParserFactory};
use numbers::{Digits, Scan};
use serde_json::json;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The largest schema (as JSON text), Lark grammar or regex compiled. OpenAI's own limits
/// (5,000 properties, 10 levels, 120,000 characters of names and enums) fit well inside.
pub const MAX_SOURCE_BYTES: usize = 1 << 20;

/// The most time one sequence's constraint spends in masks and advances. Legitimate output costs
/// about 0.1 ms a token (4,000 tokens: 0.4 s); an ambiguous grammar (`start: x+`, `x: "a" | x x`)
/// costs more with every token, up to half a second a step before llguidance's row limit
/// stops it: this stops it sooner, so it cannot hold a batch's steps for tens of seconds.
pub const TIME_BUDGET: Duration = Duration::from_secs(5);

fn over_budget(budget: Duration) -> String {
    format!(
        "the output constraint took more than {:?} to follow: the grammar is too ambiguous",
        budget
    )
}

/// The compile's stack: 32 MiB of address space (touched only as deep as it goes).
const COMPILE_STACK_BYTES: usize = 32 << 20;

/// The limits every compile and step runs under: llguidance's defaults but for fewer lexer
/// states (each costs 1-2 kB; 50,000 caps a constraint's lexer near 100 MB) and short errors.
pub fn limits() -> ParserLimits {
    ParserLimits {
        max_lexer_states: 50_000,
        verbose_errors: false,
        ..ParserLimits::default()
    }
}

/// A model's vocabulary, ready to compile constraints for: built once per model.
pub struct Vocabulary {
    factory: ParserFactory,
    width: usize,
    /// Special tokens by content (longest first), for the tool-call wrappers.
    specials: Vec<(String, u32)>,
    /// The tokens that start with digits, for the bound on JSON numbers (`numbers.rs`).
    digits: Arc<Digits>,
    /// The last formats compiled, most recent first: a server sends the same schema or tools
    /// again and again, and each compile runs llguidance and a first mask (milliseconds to
    /// seconds for a large schema).
    compiled: Mutex<VecDeque<(Format, Grammar)>>,
}

/// How many compiled formats a model keeps (`Vocabulary::compile`).
const COMPILED_KEPT: usize = 16;

impl Vocabulary {
    /// From a `tokenizer.json`'s contents: `eos` are the model's end-of-sequence ids (its
    /// manifest's `eos_token_ids`, at least one), `width` the logits' last dimension.
    pub fn from_tokenizer_json(json: &[u8], eos: &[u32], width: usize) -> Result<Arc<Vocabulary>> {
        let tokenizer = tokenizers::Tokenizer::from_bytes(json)
            .map_err(|e| fail(Code::ModelLoadError, format!("not a valid tokenizer.json: {e}")))?;
        Self::from_tokenizer(&tokenizer, eos, width).map(Arc::new)
    }

    /// From a loaded Hugging Face tokenizer.
    pub fn from_tokenizer(
        tokenizer: &tokenizers::Tokenizer,
        eos: &[u32],
        width: usize,
    ) -> Result<Vocabulary> {
        let table = vocab::table(tokenizer, eos, width)?;
        Self::from_env(table.env, table.specials, width)
    }

    fn from_env(env: TokEnv, specials: Vec<(String, u32)>, width: usize) -> Result<Vocabulary> {
        let mut factory = catch_panic(|| ParserFactory::new_simple(&env))
            .map_err(|e| fail(Code::Internal, format!("the token trie: {e:#}")))?;
        factory.quiet();
        *factory.limits_mut() = limits();
        let digits = Digits::new(&env);
        Ok(Vocabulary {
            factory,
            width,
            specials,
            digits,
            compiled: Mutex::new(VecDeque::new()),
        })
    }

    /// A token's bytes (a special token's content, without toktrie's marker).
    pub fn token_bytes(&self, token: u32) -> Vec<u8> {
        let bytes = self.factory.tok_env().tok_trie().token(token);
        bytes.strip_prefix(&[0xFF]).unwrap_or(bytes).to_vec()
    }

    /// The logits' width the masks have.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Compiles `format`: InvalidArg naming the part for a schema or grammar that is invalid,
    /// unsupported, over the limits, or that no text satisfies. One of the last COMPILED_KEPT
    /// formats compiled is not compiled again (a failed one is not kept).
    pub fn compile(&self, format: &Format) -> Result<Grammar> {
        if let Some(hit) = self.cached(format) {
            return Ok(hit);
        }
        let grammar = self.compile_apart(format)?;
        let mut compiled = lock(&self.compiled);
        compiled.push_front((format.clone(), grammar.clone()));
        compiled.truncate(COMPILED_KEPT);
        Ok(grammar)
    }

    /// A copy of `format`'s grammar if it is kept, moved to the front.
    fn cached(&self, format: &Format) -> Option<Grammar> {
        let mut compiled = lock(&self.compiled);
        let at = compiled.iter().position(|(f, _)| f == format)?;
        let entry = compiled.remove(at)?;
        let grammar = entry.1.clone();
        compiled.push_front(entry);
        Some(grammar)
    }

    /// How many compiled formats are kept.
    pub fn kept(&self) -> usize {
        lock(&self.compiled).len()
    }

    fn compile_apart(&self, format: &Format) -> Result<Grammar> {
        // llguidance recurses once per property of an object (about 320 bytes a level): a
        // thread of its own with a stack sized for the limits, whatever thread calls.
        std::thread::scope(|scope| {
            let compiling = std::thread::Builder::new()
                .name("torch-node-constraint".into())
                .stack_size(COMPILE_STACK_BYTES)
                .spawn_scoped(scope, || self.compile_here(format))
                .map_err(|e| fail(Code::Internal, format!("cannot start a thread to compile: {e}")))?;
            compiling.join().unwrap_or_else(|panic| {
                Err(fail(Code::Internal, crate::error::panic_message(panic.as_ref())))
            })
        })
    }

    fn compile_here(&self, format: &Format) -> Result<Grammar> {
        let at = format.origin();
        let grammar = match format {
            Format::JsonObject => {
                TopLevelGrammar::from_json_schema(with_options(&json!({"type": "object"}), true, at)?)
            }
            Format::JsonSchema { schema, strict } => {
                let size = serde_json::to_vec(schema).map_or(usize::MAX, |v| v.len());
                check_size(at, size)?;
                let schema = with_options(schema, *strict, at)?;
                schema::check(&schema, at)?;
                TopLevelGrammar::from_json_schema(schema)
            }
            Format::Lark(source) => {
                check_size(at, source.len())?;
                // The schemas it embeds get the checks a schema gets.
                let embedded = schema::embedded_in_lark(source);
                schema::limit(&embedded.iter().collect::<Vec<_>>(), at)?;
                for s in &embedded {
                    schema::finite(s, at)?;
                }
                TopLevelGrammar::from_lark(source.clone())
            }
            Format::Regex(pattern) => {
                check_size(at, pattern.len())?;
                TopLevelGrammar::from_regex(pattern)
            }
            Format::ToolCalls {
                tools,
                choice,
                format,
                parallel,
            } => {
                let lark = tools::lark(tools, choice, format, *parallel, &self.specials)?;
                check_size(at, lark.len())?;
                TopLevelGrammar::from_lark(lark)
            }
        };
        let parser = catch_panic(|| {
            self.factory
                .create_parser(grammar)
                .map_err(|e| fail(Code::InvalidArg, format!("{at}: {}", one_line(&e))))
        })?;
        let mut matcher = Matcher::new(Ok(parser));
        // The first mask proves the grammar can start (a grammar with no way in fails here)
        // and warms the lexer the sequences share.
        let mask = catch_panic(|| {
            matcher.compute_mask().map_err(|e| {
                fail(
                    Code::InvalidArg,
                    format!("{at}: no text satisfies it ({})", one_line(&e)),
                )
            })
        })?;
        if mask.is_zero() {
            bail_code!(Code::InvalidArg, "{at}: no text satisfies it");
        }
        // JSON's numbers are bounded (`numbers.rs`); a Lark grammar or a regex says itself how
        // many digits it wants.
        let json = !matches!(format, Format::Lark(_) | Format::Regex(_));
        let first = Constraint {
            matcher,
            mask: Some(Mask(mask)),
            width: self.width,
            spent: Duration::ZERO,
            budget: TIME_BUDGET,
            digits: json.then(|| self.digits.clone()),
            scan: Scan::default(),
        };
        Ok(Grammar { first })
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn check_size(at: &str, bytes: usize) -> Result<()> {
    if bytes > MAX_SOURCE_BYTES {
        bail_code!(
            Code::InvalidArg,
            "{at}: {bytes} bytes is over the limit of {MAX_SOURCE_BYTES}"
        );
    }
    Ok(())
}

/// An error on one line, at most 300 characters (llguidance's can quote whole grammars).
fn one_line(e: &anyhow::Error) -> String {
    let text = format!("{e:#}");
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let line = line.as_str();
    let mut cut = line.len().min(300);
    while !line.is_char_boundary(cut) {
        cut -= 1;
    }
    if cut < line.len() {
        format!("{}...", &line[..cut])
    } else {
        line.to_string()
    }
}

/// A compiled constraint: start one [`Constraint`] per sequence from it.
#[derive(Clone)]
pub struct Grammar {
    /// Started, with its first mask computed: each sequence starts from a copy.
    first: Constraint,
}

impl Grammar {
    /// A fresh constraint at the start of the output (shares the compiled lexer and parser
    /// tables; the first mask comes computed).
    pub fn start(&self) -> Constraint {
        self.first.clone()
    }
}

/// One sequence's constraint: the mask of the next token, advanced token by token. A clone
/// goes on independently from the same point (shares the compiled tables).
#[derive(Clone)]
pub struct Constraint {
    matcher: Matcher,
    /// The next token's mask, once computed (cleared by `advance`).
    mask: Option<Mask>,
    width: usize,
    /// Time spent in masks and advances so far, and the most allowed ([`TIME_BUDGET`]).
    spent: Duration,
    budget: Duration,
    /// The bound on JSON numbers' digits, and where the output is for it (None: no bound).
    digits: Option<Arc<Digits>>,
    scan: Scan,
}

/// Which tokens may come next: a bit per token of the logits' width.
#[derive(Clone, Debug)]
pub struct Mask(SimpleVob);

impl Mask {
    /// Whether `token` may come next.
    pub fn allows(&self, token: u32) -> bool {
        (token as usize) < self.0.len() && self.0.is_allowed(token)
    }

    /// How many tokens may come next.
    pub fn count(&self) -> usize {
        self.0.num_set()
    }

    /// The bits, 32 tokens a word, token `i` at bit `i % 32` of word `i / 32`.
    pub fn words(&self) -> &[u32] {
        self.0.as_slice()
    }

    /// Sets the logits of the tokens that may not come next to -inf (and any past the mask's
    /// width: a program's logits may be wider than the vocabulary).
    pub fn apply(&self, logits: &mut [f32]) {
        let words = self.0.as_slice();
        if let Some(tail) = logits.get_mut(words.len() * 32..) {
            tail.fill(f32::NEG_INFINITY);
        }
        for (chunk, &word) in logits.chunks_mut(32).zip(words) {
            match word {
                u32::MAX => {}
                0 => chunk.fill(f32::NEG_INFINITY),
                _ => {
                    // A select per lane, no branch: the compiler vectorizes it.
                    for (bit, l) in chunk.iter_mut().enumerate() {
                        let keep = (word >> bit) & 1 == 1;
                        *l = if keep { *l } else { f32::NEG_INFINITY };
                    }
                }
            }
        }
    }

    /// Writes the additive form (0 where allowed, -inf elsewhere) into `row`, for a mask
    /// tensor added to a batch's logits.
    pub fn write_bias(&self, row: &mut [f32]) {
        row.fill(0.0);
        self.apply(row);
    }
}

impl Constraint {
    /// Computes the next token's mask (the step's work; kept until [`advance`](Self::advance)).
    /// InvalidArg when the grammar exceeds the step limits.
    pub fn compute_mask(&mut self) -> Result<()> {
        if self.mask.is_some() {
            return Ok(());
        }
        let mut mask = self.spend(|m| m.compute_mask_or_eos())?;
        if let Some(digits) = &self.digits {
            self.scan.bound(digits, &mut mask);
        }
        self.mask = Some(Mask(mask));
        Ok(())
    }

    /// Runs one llguidance call, as InvalidArg when it fails or when the constraint's time is
    /// spent.
    fn spend<T>(&mut self, call: impl FnOnce(&mut Matcher) -> Result<T>) -> Result<T> {
        if self.spent > self.budget {
            bail_code!(Code::InvalidArg, "{}", over_budget(self.budget));
        }
        let t0 = Instant::now();
        let matcher = &mut self.matcher;
        let r = catch_panic(|| {
            call(matcher).map_err(|e| {
                fail(
                    Code::InvalidArg,
                    format!("the output constraint failed: {}", one_line(&e)),
                )
            })
        });
        self.spent += t0.elapsed();
        if r.is_ok() && self.spent > self.budget {
            bail_code!(Code::InvalidArg, "{}", over_budget(self.budget));
        }
        r
    }

    #[cfg(test)]
    fn with_budget(mut self, budget: Duration) -> Constraint {
        self.budget = budget;
        self
    }

    /// The next token's mask (computed if it is not yet).
    pub fn mask(&mut self) -> Result<&Mask> {
        self.compute_mask()?;
        self.mask
            .as_ref()
            .ok_or_else(|| fail(Code::Internal, "the mask was not computed"))
    }

    /// Sets the logits of disallowed tokens to -inf; `logits` is one row, at least the
    /// vocabulary's width (ids past it are never allowed).
    pub fn apply(&mut self, logits: &mut [f32]) -> Result<()> {
        if logits.len() < self.width {
            bail_code!(
                Code::Internal,
                "a logits row of {} for a vocabulary of {}",
                logits.len(),
                self.width
            );
        }
        self.mask()?.apply(logits);
        Ok(())
    }

    /// Moves past `token`, the one chosen. A token the mask did not allow is an Internal
    /// error (the caller sampled without applying the mask).
    pub fn advance(&mut self, token: u32) -> Result<()> {
        if let Some(mask) = &self.mask {
            if !mask.allows(token) {
                bail_code!(
                    Code::Internal,
                    "token {token} was chosen against the output constraint"
                );
            }
        }
        self.mask = None;
        self.spend(|m| m.consume_token(token))?;
        if let Some(digits) = &self.digits {
            self.scan.advance(digits, token);
        }
        Ok(())
    }

    /// Whether the text so far is complete (EOS may come next): a sequence that ends now has
    /// valid output.
    pub fn is_accepting(&mut self) -> bool {
        !self.matcher.is_error()
            && (self.matcher.is_stopped() || self.matcher.is_accepting().unwrap_or(false))
    }

    /// Whether nothing may follow but EOS: the caller should finish the sequence now.
    pub fn must_stop(&self) -> bool {
        self.matcher.is_stopped() && !self.matcher.is_error()
    }
}
