//! Token offsets as JS string indices. The `tokenizers` crate gives byte offsets into the UTF-8
//! text (Python's binding turns them into code-point offsets); JS strings are UTF-16, so
//! `text.slice(start, end)` needs UTF-16 code-unit indices: an emoji is 4 bytes, 1 code point
//! and 2 code units; `é` is 2 bytes, 1 code point, 1 code unit.
//!
//! The mapping follows Python's `BytesToCharOffsetConverter` (tokenizers/src/tokenizer/
//! pre_tokenizer.rs) exactly, in code units instead of code points: a byte offset inside a
//! character maps to the start of that character, an end offset at (or past) the end of the text
//! to the text's length; so a byte-level BPE token holding part of an emoji's bytes spans the
//! whole emoji, as in Python.

/// Maps byte offsets of one text to UTF-16 indices.
pub struct Utf16Offsets {
    /// For each byte: the UTF-16 index of the character it belongs to. Empty for ASCII text,
    /// where bytes and code units coincide.
    at_byte: Vec<u32>,
    /// The text's length in bytes and in UTF-16 code units.
    bytes: usize,
    units: u32,
}

impl Utf16Offsets {
    pub fn new(text: &str) -> Self {
        if text.is_ascii() {
            return Utf16Offsets {
                at_byte: Vec::new(),
                bytes: text.len(),
                units: text.len() as u32,
            };
        }
        let mut at_byte = Vec::with_capacity(text.len());
        let mut units = 0u32;
        for c in text.chars() {
            at_byte.extend(std::iter::repeat_n(units, c.len_utf8()));
            units += c.len_utf16() as u32;
        }
        Utf16Offsets {
            at_byte,
            bytes: text.len(),
            units,
        }
    }

    /// The UTF-16 index of the character holding byte `b` (the length at or past the end).
    fn index(&self, b: usize) -> u32 {
        if b >= self.bytes {
            self.units
        } else if self.at_byte.is_empty() {
            b as u32
        } else {
            self.at_byte[b]
        }
    }

    /// `[start, end)` in bytes as `[start, end)` in UTF-16 code units.
    pub fn convert(&self, (start, end): (usize, usize)) -> (u32, u32) {
        (self.index(start), self.index(end).max(self.index(start)))
    }

    /// The text's length in UTF-16 code units.
    pub fn len(&self) -> u32 {
        self.units
    }

    pub fn is_empty(&self) -> bool {
        self.units == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `text.slice(start, end)` in JS terms.
    fn slice(text: &str, (start, end): (u32, u32)) -> String {
        let units: Vec<u16> = text.encode_utf16().collect();
        String::from_utf16(&units[start as usize..end as usize]).unwrap()
    }

    fn byte_range(text: &str, piece: &str) -> (usize, usize) {
        let start = text.find(piece).unwrap();
        (start, start + piece.len())
    }

    #[test]
    fn ascii_is_identity() {
        let m = Utf16Offsets::new("hello world");
        assert_eq!(m.convert((6, 11)), (6, 11));
        assert_eq!(m.len(), 11);
    }

    #[test]
    fn emoji_cjk_and_accents_slice_back_to_their_text() {
        let text = "café 🍕 日本 e\u{301} 👨\u{200d}👩";
        let m = Utf16Offsets::new(text);
        for piece in ["café", "🍕", "日本", "e\u{301}", "👨\u{200d}👩", "\u{301}"] {
            assert_eq!(slice(text, m.convert(byte_range(text, piece))), piece);
        }
        assert_eq!(m.len() as usize, text.encode_utf16().count());
    }

    #[test]
    fn offsets_inside_a_character_cover_all_of_it() {
        // A byte-level token holding the pizza's second and third bytes: Python says chars [0, 1).
        let text = "🍕!";
        let m = Utf16Offsets::new(text);
        assert_eq!(m.convert((1, 3)), (0, 0));
        assert_eq!(m.convert((0, 4)), (0, 2));
        assert_eq!(m.convert((0, 5)), (0, 3));
        assert_eq!(m.convert((2, 5)), (0, 3));
    }

    #[test]
    fn end_of_text_and_empty_text() {
        let m = Utf16Offsets::new("");
        assert_eq!(m.convert((0, 0)), (0, 0));
        assert!(m.is_empty());
        let m = Utf16Offsets::new("né");
        assert_eq!(m.convert((3, 3)), (2, 2));
        assert_eq!(m.convert((1, 9)), (1, 2));
    }
}
