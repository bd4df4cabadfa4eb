//! Encoding only the start of a long text that will be truncated to its first tokens.
//!
//! The `tokenizers` crate (and Python's) encodes a whole text before it truncates: 12 s of one
//! thread for a 10 MB text cut to 512 tokens. For most tokenizers the first tokens of a text
//! depend only on its start, up to a cut where the pipeline always splits. A cut here is
//! just before an ASCII space that follows a letter or digit, and the pipeline always splits
//! there when (`Locality::of`, read from `tokenizer.json`):
//! - its normalizer works within a character or a grapheme cluster (BERT's, Unicode forms,
//!   case and accent folding, `Precompiled`, prepending, byte mapping), or replaces a fixed
//!   string that holds no letter or digit followed by a space;
//! - its pre-tokenizer splits at every space, before any step that could look across one:
//!   BERT's, `Whitespace`, `WhitespaceSplit`, `ByteLevel` with its regex (GPT-2's pattern ends
//!   every piece before a space), `Metaspace` with `split`; in a sequence, with only
//!   character-class splitters beside it (digits, punctuation, scripts, a delimiter);
//! - no added token holds a space or absorbs the spaces after it (`rstrip`).
//!
//! Then the text's tokens are the start's tokens followed by the rest's, and a start that
//! already yields the tokens kept gives the same encoding: ids, offsets, everything. Any other
//! tokenizer (a `Split` regex, `ByteLevel` without its regex, `FixedLength`) encodes the whole
//! text, as before.
use serde_json::Value as Json;

/// Texts up to this many bytes are always encoded whole.
pub const WHOLE_BELOW: usize = 16 << 10;

/// How many more tokens than it keeps a start must yield.
pub const MARGIN: usize = 16;

/// Whether a tokenizer's first tokens depend only on the text up to a cut (module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Locality(bool);

impl Locality {
    /// Reads `tokenizer.json` (parsed).
    pub fn of(json: &Json) -> Locality {
        let normalizer = json
            .get("normalizer")
            .is_none_or(|n| n.is_null() || local_normalizer(n));
        let pre = json.get("pre_tokenizer").is_some_and(splits_at_spaces);
        let added = json
            .get("added_tokens")
            .and_then(Json::as_array)
            .is_none_or(|tokens| tokens.iter().all(added_token_is_local));
        Locality(normalizer && pre && added)
    }

    pub fn is_local(self) -> bool {
        self.0
    }
}

fn kind(v: &Json) -> &str {
    v.get("type").and_then(Json::as_str).unwrap_or("")
}

fn local_normalizer(n: &Json) -> bool {
    match kind(n) {
        "BertNormalizer" | "Strip" | "StripAccents" | "NFC" | "NFD" | "NFKC" | "NFKD" | "Lowercase"
        | "Nmt" | "Precompiled" | "Prepend" | "ByteLevel" => true,
        "Replace" => n
            .pointer("/pattern/String")
            .and_then(Json::as_str)
            .is_some_and(|s| !letter_then_space(s)),
        "Sequence" => n
            .get("normalizers")
            .and_then(Json::as_array)
            .is_some_and(|all| all.iter().all(local_normalizer)),
        _ => false,
    }
}

/// Whether `s` holds a letter or digit followed by a space (a match that could span a cut).
fn letter_then_space(s: &str) -> bool {
    s.chars()
        .zip(s.chars().skip(1))
        .any(|(a, b)| a.is_alphanumeric() && b == ' ')
}

/// A pre-tokenizer that always splits at a space that follows a letter or digit.
fn isolates_spaces(p: &Json) -> bool {
    match kind(p) {
        "BertPreTokenizer" | "Whitespace" | "WhitespaceSplit" => true,
        "ByteLevel" => p.get("use_regex").and_then(Json::as_bool).unwrap_or(true),
        "Metaspace" => p.get("split").and_then(Json::as_bool).unwrap_or(true),
        _ => false,
    }
}

/// A pre-tokenizer that splits by character classes alone (never looks past a space).
fn splits_by_class(p: &Json) -> bool {
    matches!(
        kind(p),
        "Digits" | "Punctuation" | "UnicodeScripts" | "CharDelimiterSplit"
    )
}

fn splits_at_spaces(p: &Json) -> bool {
    match kind(p) {
        "Sequence" => p
            .get("pretokenizers")
            .and_then(Json::as_array)
            .is_some_and(|all| {
                all.iter().any(isolates_spaces)
                    && all.iter().all(|p| isolates_spaces(p) || splits_by_class(p))
            }),
        _ => isolates_spaces(p),
    }
}

fn added_token_is_local(t: &Json) -> bool {
    let content = t.get("content").and_then(Json::as_str).unwrap_or("");
    let rstrip = t.get("rstrip").and_then(Json::as_bool).unwrap_or(false);
    !rstrip && !content.chars().any(char::is_whitespace)
}

/// The byte index of a cut in `text` at or below `near` (module doc): an ASCII space that
/// follows a letter or digit, searched back to `near / 2`; None when there is none.
pub fn cut_near(text: &str, near: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let start = near.min(text.len().saturating_sub(1));
    // An ASCII byte is never inside a character: `i` is a boundary where it is a space.
    (near / 2..=start)
        .rev()
        .find(|&i| bytes[i] == b' ' && text[..i].chars().next_back().is_some_and(char::is_alphanumeric))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn local(normalizer: Json, pre: Json, added: Json) -> bool {
        Locality::of(&json!({"normalizer": normalizer, "pre_tokenizer": pre, "added_tokens": added}))
            .is_local()
    }

    #[test]
    fn the_families_of_the_tests_are_read_right() {
        let bert = json!({"type": "BertNormalizer", "lowercase": true});
        let cls = json!([{"content": "[CLS]", "rstrip": false}]);
        assert!(local(
            bert.clone(),
            json!({"type": "BertPreTokenizer"}),
            cls.clone()
        ));
        // SmolLM2 / GPT-2: ByteLevel with its regex; Llama 3 / Qwen: a Split regex, then ByteLevel without.
        let byte_level = json!({"type": "ByteLevel", "use_regex": true});
        assert!(local(Json::Null, byte_level.clone(), json!([])));
        let split = json!({"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "\\p{L}+"}}, {"type": "ByteLevel", "use_regex": false}]});
        assert!(!local(Json::Null, split, json!([])));
        let digits = json!({"type": "Sequence", "pretokenizers": [{"type": "Digits"}, byte_level]});
        assert!(local(Json::Null, digits, json!([])));
        // T5-like: NFKC and a double-space collapse, Metaspace splitting.
        let collapse = json!({"type": "Sequence", "normalizers": [
            {"type": "NFKC"}, {"type": "Replace", "pattern": {"String": "  "}, "content": " "}]});
        assert!(local(
            collapse,
            json!({"type": "Metaspace", "split": true}),
            json!([])
        ));
    }

    #[test]
    fn anything_that_may_look_across_a_space_encodes_whole() {
        let pre = json!({"type": "BertPreTokenizer"});
        assert!(!local(
            json!({"type": "Replace", "pattern": {"String": "a b"}}),
            pre.clone(),
            json!([])
        ));
        assert!(!local(
            json!({"type": "Replace", "pattern": {"Regex": "\\s+"}}),
            pre.clone(),
            json!([])
        ));
        assert!(!local(
            json!({"type": "Metaspace", "split": false}),
            json!({"type": "Metaspace", "split": false}),
            json!([])
        ));
        assert!(!local(
            Json::Null,
            json!({"type": "FixedLength", "length": 5}),
            json!([])
        ));
        assert!(!local(
            Json::Null,
            json!({"type": "ByteLevel", "use_regex": false}),
            json!([])
        ));
        assert!(!local(
            Json::Null,
            pre.clone(),
            json!([{"content": "<mask>", "rstrip": true}])
        ));
        assert!(!local(
            Json::Null,
            pre.clone(),
            json!([{"content": "New York", "rstrip": false}])
        ));
        assert!(!local(json!({"type": "SomethingNew"}), pre, json!([])));
        assert!(
            !Locality::of(&json!({"normalizer": null})).is_local(),
            "no pre-tokenizer: one piece"
        );
    }

    #[test]
    fn a_cut_is_a_space_after_a_letter_or_digit() {
        let text = "ab  cd,  é ef";
        // Back from 12: the space at 11 follows "é" (a letter, bytes 9 and 10).
        assert_eq!(cut_near(text, 12), Some(11));
        assert_eq!(cut_near(text, 9), None, "none back to 4: spaces and a comma");
        assert_eq!(cut_near(text, 4), Some(2));
        assert_eq!(cut_near(&" ".repeat(100), 80), None);
        assert_eq!(cut_near("abc", 100), None);
    }
}
