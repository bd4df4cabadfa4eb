//! Speculative decoding by prompt lookup: a sequence's next tokens guessed from its own tokens
//! (prompt and output), then checked by the model in one step.
//!
//! A summary, an extraction or an edit quotes its input: after the last few tokens written, the
//! text that followed them earlier is a good guess of what comes next. `propose` finds the
//! latest earlier place where the sequence's last `ngram` tokens occur (then `ngram - 1`, down
//! to 1, as transformers' `prompt_lookup_num_tokens` and llama.cpp's `--lookup` start from the
//! longest n-gram) and proposes up to `most` of the tokens that followed it. `Batch` runs the
//! sequence's newest token and the draft in one program call, keeping the logits of every
//! position (`Decoder::run_keep`), and `Sequence::choose` accepts the longest prefix the model
//! agrees with (`sample::verify`) plus one token of its own: greedy output is the same as
//! without a draft, and sampled output has the same distribution.
use super::decoder::Decoder;
use crate::error::{bail_code, Code};
use anyhow::Result;

/// Prompt lookup's settings (the load option `speculative`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Speculation {
    /// The most tokens proposed per sequence and step.
    pub max_draft: usize,
    /// The longest n-gram looked up (then shorter ones, down to 1).
    pub ngram: usize,
}

/// Tokens one program call runs in all (rows × columns) before drafts shrink: up to 16 rows
/// the linear layers read each weight once (`torch_node::rows_linear`), so a draft costs a
/// one-row step little more than its attention; past that every row costs again. One sequence
/// drafts up to 15 tokens, 2 up to 7 each, 4 up to 3, 8 up to 1; 9 and more none.
pub const STEP_TOKENS: usize = 16;

impl Speculation {
    /// `method` must be `"prompt-lookup"`; `max_draft` 1 to 15 (default 5), `ngram` 1 to 8
    /// (default 3). `InvalidArg` naming the option otherwise.
    pub fn new(method: &str, max_draft: Option<u64>, ngram: Option<u64>) -> Result<Speculation> {
        if method != "prompt-lookup" {
            bail_code!(
                Code::InvalidArg,
                "options.speculative.method: expected 'prompt-lookup', got '{method}'"
            );
        }
        let within = |v: Option<u64>, name: &str, hi: u64, default: u64| -> Result<usize> {
            match v.unwrap_or(default) {
                n @ 1.. if n <= hi => Ok(n as usize),
                n => bail_code!(
                    Code::InvalidArg,
                    "options.speculative.{name}: expected 1 to {hi}, got {n}"
                ),
            }
        };
        Ok(Speculation {
            max_draft: within(max_draft, "maxDraft", STEP_TOKENS as u64 - 1, 5)?,
            ngram: within(ngram, "ngram", 8, 3)?,
        })
    }

    /// Refuses a model whose program returns only each row's last logits (exported before
    /// speculative decoding: manifest format 1), naming the re-export.
    pub fn check(&self, d: &dyn Decoder) -> Result<()> {
        if d.keep_logits() < 2 {
            bail_code!(
                Code::InvalidArg,
                "options.speculative: this model's program returns the logits of one position per \
                 row (exported before speculative decoding); export it again with this version of \
                 torch-node (torch-node export) to verify drafts"
            );
        }
        Ok(())
    }

    /// The most tokens each of `rows` sequences may propose in one step of a program that keeps
    /// at most `keep` positions' logits.
    pub fn budget(&self, rows: usize, keep: usize) -> usize {
        let per_row = (STEP_TOKENS / rows.max(1)).saturating_sub(1);
        per_row.min(self.max_draft).min(keep.saturating_sub(1))
    }
}

/// Up to `most` tokens that followed the latest earlier occurrence of `tokens`' last n tokens,
/// n from `ngram` down to 1 (the first n with a match wins); empty when none occurs before.
pub fn propose(tokens: &[u32], ngram: usize, most: usize) -> Vec<u32> {
    let len = tokens.len();
    if most == 0 {
        return Vec::new();
    }
    for n in (1..=ngram.min(len.saturating_sub(1))).rev() {
        let tail = &tokens[len - n..];
        // Latest first: the start of a match ends before the tail does, so something follows it.
        let found = (0..len - n)
            .rev()
            .find(|&start| &tokens[start..start + n] == tail);
        if let Some(start) = found {
            let from = start + n;
            return tokens[from..(from + most).min(len)].to_vec();
        }
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proposes_what_followed_the_longest_latest_match() {
        // "a b c d | x b c" : the trigram "x b c" never occurred, the bigram "b c" did, at 1.
        let t = [1, 2, 3, 4, 9, 2, 3];
        assert_eq!(propose(&t, 3, 4), vec![4, 9, 2, 3]);
        assert_eq!(propose(&t, 3, 2), vec![4, 9]);
        // The latest occurrence wins: "5 7" after the second "1 2", not "3" after the first.
        let t = [1, 2, 3, 0, 1, 2, 5, 7, 0, 1, 2];
        assert_eq!(propose(&t, 3, 3), vec![5, 7, 0]);
        // The longest n-gram first: the trigram "0 1 2" matches at 0 (followed by 5), where the
        // unigram "2" alone matches latest at 5 (followed by 7).
        let t = [0, 1, 2, 5, 9, 2, 7, 0, 1, 2];
        assert_eq!(propose(&t, 3, 2), vec![5, 9]);
        assert_eq!(propose(&t, 1, 2), vec![7, 0]);
        // What follows runs up to the end of the sequence, not past it.
        assert_eq!(propose(&[7, 7], 3, 5), vec![7]);
    }

    #[test]
    fn nothing_to_propose() {
        assert!(propose(&[1, 2, 3], 3, 4).is_empty());
        assert!(propose(&[1], 3, 4).is_empty());
        assert!(propose(&[], 3, 4).is_empty());
        assert!(propose(&[5, 5, 5], 3, 0).is_empty());
    }

    #[test]
    fn options_are_checked() {
        let s = Speculation::new("prompt-lookup", None, None).unwrap();
        assert_eq!((s.max_draft, s.ngram), (5, 3));
        for (method, draft, ngram, says) in [
            ("draft-model", None, None, "method"),
            ("prompt-lookup", Some(0), None, "maxDraft"),
            ("prompt-lookup", Some(16), None, "maxDraft"),
            ("prompt-lookup", None, Some(0), "ngram"),
            ("prompt-lookup", None, Some(9), "ngram"),
        ] {
            let e = Speculation::new(method, draft, ngram).unwrap_err();
            let (code, message) = crate::error::describe(&e);
            assert_eq!(code, Code::InvalidArg);
            assert!(message.contains(says), "{message}");
        }
    }

    #[test]
    fn drafts_shrink_as_rows_share_the_step() {
        let s = Speculation::new("prompt-lookup", Some(15), None).unwrap();
        let budgets: Vec<usize> = [1, 2, 4, 8, 9].iter().map(|&n| s.budget(n, 16)).collect();
        assert_eq!(budgets, vec![15, 7, 3, 1, 0]);
        assert_eq!(s.budget(1, 4), 3, "the program keeps at most 4 positions");
        assert_eq!(s.budget(1, 1), 0, "a format 1 program keeps one");
        let small = Speculation::new("prompt-lookup", Some(2), None).unwrap();
        assert_eq!(small.budget(1, 16), 2);
    }
}
