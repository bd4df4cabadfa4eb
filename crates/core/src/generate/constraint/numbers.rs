//! A bound on the digits of JSON numbers: at most [`MAX_DIGITS`] in a row outside strings, as
//! llama.cpp's JSON-schema grammar bounds a number's integral part to `0 | [1-9][0-9]{0,15}` and
//! its decimal part to `[0-9]{1,16}`. llguidance's number lexeme is unbounded
//! (`-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`) and its `JsonCompileOptions` have no
//! setting for it, so greedy small models (SmolLM2-135M) write `0.000000123456789012345…` or
//! `1111…` until `maxNewTokens`; this takes the tokens that would make a run of more than
//! `MAX_DIGITS` digits out of the mask.
//!
//! The scan follows the output byte by byte: strings (with their `\` escapes) are left alone,
//! digits outside them count, anything else ends the run. It never empties a mask: where the
//! grammar allows nothing but more digits (a schema's `minimum` of 10^20), the grammar wins.
//! Free whitespace needs no bound here: the JSON options allow none (`format.rs`).
use llguidance::toktrie::{SimpleVob, TokEnv, TokenId};
use std::sync::Arc;

/// The most digits in a row outside strings (llama.cpp's 16).
pub const MAX_DIGITS: usize = 16;

/// The vocabulary's tokens that start with a digit: what the bound may take out.
pub(super) struct Digits {
    env: TokEnv,
    /// (token, how many digits it starts with), the tokens that start with one.
    leading: Vec<(TokenId, usize)>,
}

impl Digits {
    pub(super) fn new(env: &TokEnv) -> Arc<Digits> {
        let trie = env.tok_trie();
        let leading = (0..trie.vocab_size() as TokenId)
            .filter_map(|t| {
                let n = trie.token(t).iter().take_while(|b| b.is_ascii_digit()).count();
                (n > 0).then_some((t, n))
            })
            .collect();
        Arc::new(Digits {
            env: env.clone(),
            leading,
        })
    }
}

/// Where the output is, for the bound: inside a string or not, and the digits in a row.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Scan {
    in_string: bool,
    escaped: bool,
    run: usize,
}

impl Scan {
    /// Moves past `token`'s bytes (a special token, 0xFF-marked, ends a run).
    pub(super) fn advance(&mut self, digits: &Digits, token: TokenId) {
        let bytes = digits.env.tok_trie().token(token);
        if bytes.first() == Some(&0xFF) {
            self.run = 0;
            return;
        }
        for &b in bytes {
            self.step(b);
        }
    }

    fn step(&mut self, b: u8) {
        if self.in_string {
            match (self.escaped, b) {
                (true, _) => self.escaped = false,
                (false, b'\\') => self.escaped = true,
                (false, b'"') => self.in_string = false,
                _ => {}
            }
            return;
        }
        match b {
            b'"' => {
                self.in_string = true;
                self.run = 0;
            }
            b'0'..=b'9' => self.run += 1,
            _ => self.run = 0,
        }
    }

    /// Takes out of `mask` the tokens that would make a run over [`MAX_DIGITS`], unless that
    /// leaves nothing.
    pub(super) fn bound(&self, digits: &Digits, mask: &mut SimpleVob) {
        if self.in_string || self.run == 0 {
            return;
        }
        let mut taken = Vec::new();
        for &(t, n) in &digits.leading {
            if self.run + n > MAX_DIGITS && (t as usize) < mask.len() && mask.is_allowed(t) {
                mask.disallow_token(t);
                taken.push(t);
            }
        }
        if !taken.is_empty() && mask.is_zero() {
            taken.into_iter().for_each(|t| mask.allow_token(t));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(text: &str) -> Scan {
        let mut s = Scan::default();
        text.bytes().for_each(|b| s.step(b));
        s
    }

    #[test]
    fn digits_count_outside_strings_only() {
        assert_eq!(scan("{\"a\": 123").run, 3);
        assert_eq!(scan("{\"a\": 1.25").run, 2);
        assert_eq!(scan("{\"a\": 1e7").run, 1);
        assert_eq!(scan("{\"a\": \"12345").run, 0);
        assert!(scan("{\"a\": \"12\\\"345").in_string);
        assert_eq!(scan("{\"a\": \"1\\\\\", \"b\": 42").run, 2);
        assert_eq!(scan("[1, 22").run, 2);
    }
}
