//! Generated text as it streams: pieces that end on whole characters, and stop strings.
//!
//! `Detokenizer` follows text-generation-inference's incremental decode: decode the tokens from
//! a prefix offset twice (up to the last emitted token, and to the newest); the new text is
//! emitted only when it does not end in U+FFFD, i.e. when the newest tokens complete their
//! UTF-8 sequence (an emoji or a CJK character spans several byte-level tokens).
//! UTF-8 resynchronizes at a complete character, so the pieces join into the decode of all
//! tokens. `Stops` holds back the longest tail that could still begin a stop string, so a stop
//! string split across tokens is caught and never emitted.

/// Decodes tokens (the tokenizer's `decode`, special tokens skipped).
pub type Decode<'a> = &'a dyn Fn(&[u32]) -> anyhow::Result<String>;

#[derive(Default)]
pub struct Detokenizer {
    tokens: Vec<u32>,
    prefix: usize,
    read: usize,
}

impl Detokenizer {
    /// Adds a token; returns the text it completes (possibly empty).
    pub fn push(&mut self, token: u32, decode: Decode) -> anyhow::Result<String> {
        self.tokens.push(token);
        let before = decode(&self.tokens[self.prefix..self.read])?;
        let now = decode(&self.tokens[self.prefix..])?;
        if now.ends_with('\u{FFFD}') || now.len() <= before.len() || !now.starts_with(&before) {
            return Ok(String::new());
        }
        self.prefix = self.read;
        self.read = self.tokens.len();
        Ok(now[before.len()..].to_string())
    }

    /// What is left at the end (an incomplete sequence decodes as U+FFFD, as the full decode).
    pub fn flush(&mut self, decode: Decode) -> anyhow::Result<String> {
        let before = decode(&self.tokens[self.prefix..self.read])?;
        let now = decode(&self.tokens[self.prefix..])?;
        self.prefix = self.tokens.len();
        self.read = self.prefix;
        Ok(now.strip_prefix(before.as_str()).unwrap_or("").to_string())
    }
}

/// Stop strings over the streamed text.
pub struct Stops {
    stops: Vec<String>,
    held: String,
}

impl Stops {
    pub fn new(stops: Vec<String>) -> Stops {
        Stops {
            stops: stops.into_iter().filter(|s| !s.is_empty()).collect(),
            held: String::new(),
        }
    }

    /// Takes new text; returns what may be emitted and whether a stop string was reached
    /// (the text from the stop string on is dropped).
    pub fn push(&mut self, text: &str) -> (String, bool) {
        self.held.push_str(text);
        let first = self.stops.iter().filter_map(|s| self.held.find(s.as_str())).min();
        if let Some(at) = first {
            let out = self.held[..at].to_string();
            self.held.clear();
            return (out, true);
        }
        let keep = self.hold_back();
        let out = self.held[..self.held.len() - keep].to_string();
        self.held.drain(..self.held.len() - keep);
        (out, false)
    }

    /// The bytes at the end of `held` that begin some stop string (on a char boundary).
    fn hold_back(&self) -> usize {
        let longest = self.stops.iter().map(String::len).max().unwrap_or(0);
        (1..longest.min(self.held.len() + 1))
            .rev()
            .filter(|&n| self.held.is_char_boundary(self.held.len() - n))
            .find(|&n| {
                let tail = &self.held[self.held.len() - n..];
                self.stops.iter().any(|s| s.starts_with(tail))
            })
            .unwrap_or(0)
    }

    /// The text held at the end (no stop string came).
    pub fn flush(&mut self) -> String {
        std::mem::take(&mut self.held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A byte-level vocabulary: token i is byte i.
    fn bytes(ids: &[u32]) -> anyhow::Result<String> {
        let b: Vec<u8> = ids.iter().map(|&i| i as u8).collect();
        Ok(String::from_utf8_lossy(&b).into_owned())
    }

    #[test]
    fn pieces_end_on_whole_characters_and_join_into_the_decode() {
        let text = "a😀b東京\u{301}é";
        let ids: Vec<u32> = text
            .bytes()
            .map(u32::from)
            .chain([0xFF, b'z' as u32, 0xE6])
            .collect();
        let mut d = Detokenizer::default();
        let mut pieces = Vec::new();
        for &t in &ids {
            pieces.push(d.push(t, &bytes).unwrap());
        }
        pieces.push(d.flush(&bytes).unwrap());
        assert!(pieces
            .iter()
            .all(|p| !p.ends_with('\u{FFFD}') || p == "\u{FFFD}z" || p == "\u{FFFD}"));
        assert_eq!(pieces.concat(), bytes(&ids).unwrap());
        assert!(pieces.contains(&"😀".to_string()), "{pieces:?}");
        // The emoji's first three bytes gave nothing.
        assert_eq!(pieces[1..4], ["", "", ""]);
    }

    #[test]
    fn stop_strings_are_matched_across_pieces_and_dropped() {
        let mut s = Stops::new(vec!["<END>".into(), "\n\n".into()]);
        assert_eq!(s.push("Hello <E"), ("Hello ".into(), false));
        assert_eq!(s.push("N"), ("".into(), false));
        assert_eq!(s.push("D> more"), ("".into(), true));

        let mut s = Stops::new(vec!["<END>".into()]);
        assert_eq!(s.push("a <E"), ("a ".into(), false));
        assert_eq!(s.push("X"), ("<EX".into(), false), "a false start is released");
        assert_eq!(s.push("<"), ("".into(), false));
        assert_eq!(s.flush(), "<");

        let mut s = Stops::new(vec!["東京".into()]);
        assert_eq!(s.push("a東"), ("a".into(), false));
        assert_eq!(s.push("京b"), ("".into(), true));
        let mut none = Stops::new(vec![String::new()]);
        assert_eq!(none.push("x"), ("x".into(), false));
    }
}
