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

/// Maps byte offsets of one text to UTF-16 indices. A cursor: each lookup walks from where the
/// last one ended, so a text's offsets in order (as a tokenizer gives them) cost one pass over
/// it and no allocation (a table per byte cost more than the walk: 10,000 texts per batch).
pub struct Utf16Offsets<'a> {
    text: &'a [u8],
    /// Bytes and code units coincide.
    ascii: bool,
    /// A character boundary and its UTF-16 index: where the last lookup ended.
    byte: usize,
    unit: u32,
}

/// The length in bytes of the UTF-8 character that starts with `lead`, and in UTF-16 code units.
fn widths(lead: u8) -> (usize, u32) {
    match lead {
        0x00..=0x7f => (1, 1),
        0xc0..=0xdf => (2, 1),
        0xe0..=0xef => (3, 1),
        _ => (4, 2),
    }
}

impl<'a> Utf16Offsets<'a> {
    pub fn new(text: &'a str) -> Self {
        Utf16Offsets {
            text: text.as_bytes(),
            ascii: text.is_ascii(),
            byte: 0,
            unit: 0,
        }
    }

    /// The UTF-16 index of the character holding byte `b` (the length at or past the end).
    fn index(&mut self, b: usize) -> u32 {
        let b = b.min(self.text.len());
        if self.ascii || b == 0 {
            return b as u32;
        }
        while self.byte > b {
            self.byte -= 1;
            while self.text[self.byte] & 0xc0 == 0x80 {
                self.byte -= 1;
            }
            self.unit -= widths(self.text[self.byte]).1;
        }
        while self.byte < b {
            let (bytes, units) = widths(self.text[self.byte]);
            if self.byte + bytes > b {
                break; // `b` is inside this character: its start
            }
            self.byte += bytes;
            self.unit += units;
        }
        self.unit
    }

    /// `[start, end)` in bytes as `[start, end)` in UTF-16 code units.
    pub fn convert(&mut self, (start, end): (usize, usize)) -> (u32, u32) {
        let start = self.index(start);
        (start, self.index(end).max(start))
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
        let mut m = Utf16Offsets::new("hello world");
        assert_eq!(m.convert((6, 11)), (6, 11));
        assert_eq!(m.convert((6, 99)), (6, 11));
    }

    #[test]
    fn emoji_cjk_and_accents_slice_back_to_their_text() {
        let text = "café 🍕 日本 e\u{301} 👨\u{200d}👩";
        let mut m = Utf16Offsets::new(text);
        // In any order: the cursor walks back as well as forward.
        for piece in [
            "café",
            "🍕",
            "日本",
            "e\u{301}",
            "👨\u{200d}👩",
            "\u{301}",
            "日本",
            "café",
        ] {
            assert_eq!(slice(text, m.convert(byte_range(text, piece))), piece);
        }
        assert_eq!(m.convert((0, text.len())).1 as usize, text.encode_utf16().count());
    }

    #[test]
    fn offsets_inside_a_character_cover_all_of_it() {
        // A byte-level token holding the pizza's second and third bytes: Python says chars [0, 1).
        let text = "🍕!";
        let mut m = Utf16Offsets::new(text);
        assert_eq!(m.convert((1, 3)), (0, 0));
        assert_eq!(m.convert((0, 4)), (0, 2));
        assert_eq!(m.convert((0, 5)), (0, 3));
        assert_eq!(m.convert((2, 5)), (0, 3));
    }

    #[test]
    fn end_of_text_and_empty_text() {
        let mut m = Utf16Offsets::new("");
        assert_eq!(m.convert((0, 0)), (0, 0));
        assert_eq!(m.convert((0, 3)), (0, 0));
        let mut m = Utf16Offsets::new("né");
        assert_eq!(m.convert((3, 3)), (2, 2));
        assert_eq!(m.convert((1, 9)), (1, 2));
    }

    #[test]
    fn the_cursor_agrees_with_a_table_in_any_order() {
        let text = "a é 🍕 日 e\u{301}z 👨\u{200d}👩!";
        let mut table = Vec::new();
        let mut units = 0u32;
        for c in text.chars() {
            table.extend(std::iter::repeat_n(units, c.len_utf8()));
            units += c.len_utf16() as u32;
        }
        let expect = |b: usize| table.get(b).copied().unwrap_or(units);
        let mut m = Utf16Offsets::new(text);
        let n = text.len() + 2;
        for b in (0..n).chain((0..n).rev()).chain((0..n).map(|i| i * 7 % n)) {
            assert_eq!(m.index(b), expect(b), "byte {b}");
        }
    }
}
