//! A model's vocabulary as llguidance sees it: every token's bytes, in a token trie, with the
//! model's end-of-sequence tokens and the width of its logits.
//!
//! `toktrie_hf_tokenizers` does this for llguidance, but over `tokenizers` 0.21 (this crate pins
//! 0.23.2, the line Python's tokenizers 0.23 builds on): two copies of the crate and two regex
//! engines for a table of bytes. What it does is small, and done here over our copy, without its
//! panics (a malformed byte token is an error, not an abort): a byte-level BPE's token strings map
//! back to bytes through GPT-2's byte-to-unicode table; a SentencePiece-style tokenizer (byte
//! fallback) spells bytes `<0xAB>` and spaces `▁`; special added tokens are marked with toktrie's
//! 0xFF prefix so no text can produce them (a grammar names them `<[id]>`).
//!
//! Only the mask needs the vocabulary: llguidance tokenizes text itself only to force tokens
//! (`ff_tokens`) or heal a prompt, and neither is used, so the environment says it is not
//! canonical and tokenizes greedily over the trie if llguidance ever asks.
use crate::error::{bail_code, catch_panic, fail, Code};
use anyhow::Result;
use llguidance::toktrie::{TokEnv, TokRxInfo, TokTrie, TokenId, TokenizerEnv};
use std::collections::HashMap;
use std::sync::Arc;
use tokenizers::{DecoderWrapper, Tokenizer as HfTokenizer};

/// How the tokenizer's token strings spell bytes.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Spelling {
    /// GPT-2's byte-to-unicode table (the `ByteLevel` decoder).
    ByteLevel,
    /// `<0xAB>` byte tokens and `space` standing for ' ' (`ByteFallback`, or `Metaspace` alone).
    Pieces { space: char },
}

/// The token trie with its EOS tokens: what llguidance's `TokEnv` is.
struct Env {
    trie: TokTrie,
}

impl TokenizerEnv for Env {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<TokenId> {
        self.trie.greedy_tokenize(s)
    }

    fn tokenize_is_canonical(&self) -> bool {
        false
    }
}

/// Every token's bytes, the special tokens by content, the EOS tokens and the logits' width.
pub(super) struct Table {
    pub env: TokEnv,
    /// Special added tokens (content, id): a wrapper string equal to one is emitted as it.
    pub specials: Vec<(String, TokenId)>,
}

/// Builds the table for `tokenizer`, with `eos` the tokens that end a generation (the model's
/// `eos_token_ids`; the first is the one llguidance names) and `width` the logits' last
/// dimension (at least the vocabulary: a model may pad its embedding; the pad ids are never
/// allowed).
pub(super) fn table(tokenizer: &HfTokenizer, eos: &[TokenId], width: usize) -> Result<Table> {
    let spelling = spelling(tokenizer)?;
    let size = tokenizer.get_vocab_size(true);
    if width < size {
        bail_code!(
            Code::InvalidArg,
            "the logits' width {width} is smaller than the vocabulary ({size} tokens)"
        );
    }
    if width > u32::MAX as usize / 2 {
        bail_code!(Code::InvalidArg, "the logits' width {width} is too large");
    }
    let Some(&first_eos) = eos.first() else {
        bail_code!(
            Code::InvalidArg,
            "the model names no end-of-sequence token: a constrained generation could not end"
        );
    };
    if let Some(bad) = eos.iter().find(|&&t| t as usize >= width) {
        bail_code!(
            Code::InvalidArg,
            "end-of-sequence token {bad} is outside the vocabulary"
        );
    }
    let mut words: Vec<Vec<u8>> = vec![Vec::new(); width];
    let mut specials = Vec::new();
    let added = tokenizer.get_added_tokens_decoder();
    for (&id, token) in &added {
        let Some(word) = words.get_mut(id as usize) else {
            continue;
        };
        if token.special {
            *word = special(&token.content);
            specials.push((token.content.clone(), id));
        } else {
            // Added tokens are matched on their text before the model's splits: their bytes
            // are their content.
            *word = token.content.as_bytes().to_vec();
        }
    }
    let bytes = byte_table();
    for id in 0..size as TokenId {
        if added.contains_key(&id) {
            continue;
        }
        let Some(name) = tokenizer.id_to_token(id) else {
            continue;
        };
        words[id as usize] = match spelling {
            Spelling::ByteLevel => match name.chars().map(|c| bytes.get(&c).copied()).collect() {
                Some(b) => b,
                None => bail_code!(
                    Code::InvalidArg,
                    "token {id} ({name:?}) is not spelled in the byte-level alphabet"
                ),
            },
            Spelling::Pieces { space } => match byte_token(&name) {
                Some(b) => vec![b],
                None => name.replace(space, " ").into_bytes(),
            },
        };
    }
    // Padding rows and ids no token has: special, so nothing matches them.
    for (id, word) in words.iter_mut().enumerate() {
        if word.is_empty() {
            *word = special(&format!("<[{id}]>"));
        }
    }
    specials.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.1.cmp(&b.1)));
    let info = TokRxInfo::new(width as u32, first_eos);
    // TokTrie asserts on what it is given (lengths, ids): a tokenizer that trips one is an error.
    let trie = catch_panic(|| Ok(TokTrie::from(&info, &words).with_eos_tokens(eos)))?;
    Ok(Table {
        env: Arc::new(Env { trie }),
        specials,
    })
}

fn special(content: &str) -> Vec<u8> {
    let mut b = Vec::with_capacity(content.len() + 1);
    b.push(TokTrie::SPECIAL_TOKEN_MARKER);
    b.extend_from_slice(content.as_bytes());
    b
}

/// `<0xAB>` -> 0xAB.
fn byte_token(name: &str) -> Option<u8> {
    let hex = name.strip_prefix("<0x")?.strip_suffix('>')?;
    (hex.len() == 2).then(|| u8::from_str_radix(hex, 16).ok())?
}

/// The decoder says how tokens spell bytes: `ByteLevel` (GPT-2, Llama 3, Qwen, SmolLM), or
/// `ByteFallback` with a `Replace` of the space stand-in (Llama 2, Mistral, Gemma), or a
/// `Metaspace` alone (older SentencePiece conversions).
fn spelling(tokenizer: &HfTokenizer) -> Result<Spelling> {
    fn walk(d: &DecoderWrapper, byte_level: &mut bool, pieces: &mut bool, space: &mut char) {
        match d {
            DecoderWrapper::ByteLevel(_) => *byte_level = true,
            DecoderWrapper::ByteFallback(_) => *pieces = true,
            DecoderWrapper::Metaspace(m) => {
                *pieces = true;
                *space = m.get_replacement();
            }
            DecoderWrapper::Replace(r) => {
                // The pattern is private: read it from the serialized form.
                let v = serde_json::to_value(r).unwrap_or_default();
                let mut from = v["pattern"]["String"].as_str().unwrap_or("").chars();
                if let (Some(c), None, Some(" ")) = (from.next(), from.next(), v["content"].as_str()) {
                    *space = c;
                }
            }
            DecoderWrapper::Sequence(s) => {
                for d in s.get_decoders() {
                    walk(d, byte_level, pieces, space);
                }
            }
            _ => {}
        }
    }
    let (mut byte_level, mut pieces, mut space) = (false, false, ' ');
    if let Some(d) = tokenizer.get_decoder() {
        walk(d, &mut byte_level, &mut pieces, &mut space);
    }
    match (byte_level, pieces) {
        (true, _) => Ok(Spelling::ByteLevel),
        (false, true) => Ok(Spelling::Pieces { space }),
        _ => Err(fail(
            Code::InvalidArg,
            "structured output needs a byte-level or byte-fallback tokenizer; this one's decoder is neither",
        )),
    }
}

/// GPT-2's `bytes_to_unicode`, reversed: printable Latin-1 bytes stand for themselves, the
/// others for U+0100 onwards in byte order.
fn byte_table() -> HashMap<char, u8> {
    let mut next = 0x100u32;
    (0..=255u8)
        .map(|b| {
            let c = b as char;
            if matches!(c, '!'..='~' | '\u{A1}'..='\u{AC}' | '\u{AE}'..='\u{FF}') {
                (c, b)
            } else {
                next += 1;
                (char::from_u32(next - 1).unwrap_or(c), b)
            }
        })
        .collect()
}
