//! Numbers at dotted paths of one JSON document, found without building a tree.
//!
//! The document is a bounded slice (one SSE event's data, or a JSON body, each at most
//! `max_scan_bytes`), walked once by a small recursive-descent reader that keeps nothing
//! but a bit set of the paths still matching and the nesting depth. Values off every
//! path are skipped, never copied.
//!
//! What counts as a usage: a JSON integer written with digits only, from 0 to
//! `u32::MAX`. A negative, fractional or exponent number, one past `u32::MAX`, or any
//! other value (`null`, a string) is *not a usage*: the path is left as if absent
//! (OpenAI's streams send `"usage": null` in every chunk but the last). When a key occurs
//! twice in one object, the last occurrence counts, as in most JSON readers. Keys are
//! compared byte for byte as written: an escaped key (`"us\u0061ge"`) does not match.

use crate::config::JsonPath;

/// Nesting deeper than this abandons the document (it is not an LLM API's usage).
pub const MAX_DEPTH: usize = 32;

/// Why a document could not be read to its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotJson;

/// Finds the number at each of `paths` in `doc` (at most 8 paths), writing `found[i]`
/// for each path `i` that holds a usage and leaving the others untouched. Returns
/// [`NotJson`] for anything but one JSON value with nothing but whitespace around it;
/// `found` may then hold numbers read before the error, which the caller drops.
pub fn find_numbers(
    doc: &[u8],
    paths: &[JsonPath],
    found: &mut [Option<u32>],
) -> Result<(), NotJson> {
    let all = if paths.len() >= 8 {
        u8::MAX
    } else {
        (1u8 << paths.len()) - 1
    };
    let mut r = Reader {
        doc,
        at: 0,
        paths,
        found,
    };
    r.space();
    r.value(all, 0)?;
    r.space();
    if r.at == doc.len() {
        Ok(())
    } else {
        Err(NotJson)
    }
}

struct Reader<'a, 'p, 'f> {
    doc: &'a [u8],
    at: usize,
    paths: &'p [JsonPath],
    found: &'f mut [Option<u32>],
}

impl<'a> Reader<'a, '_, '_> {
    fn peek(&self) -> Option<u8> {
        self.doc.get(self.at).copied()
    }

    fn space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn expect(&mut self, b: u8) -> Result<(), NotJson> {
        if self.peek() == Some(b) {
            self.at += 1;
            Ok(())
        } else {
            Err(NotJson)
        }
    }

    /// One value. `matching`: the paths whose first `depth` keys led here.
    fn value(&mut self, matching: u8, depth: usize) -> Result<(), NotJson> {
        if depth > MAX_DEPTH {
            return Err(NotJson);
        }
        match self.peek().ok_or(NotJson)? {
            b'{' => self.object(matching, depth),
            b'[' => self.array(depth),
            b'"' => self.string().map(|_| ()),
            b't' => self.word(b"true"),
            b'f' => self.word(b"false"),
            b'n' => self.word(b"null"),
            b'-' | b'0'..=b'9' => {
                let number = self.number()?;
                // A number ends a path only where the path ends; elsewhere it is skipped.
                for i in bits(matching) {
                    if self.paths[i].keys.len() == depth {
                        self.found[i] = number;
                    }
                }
                Ok(())
            }
            _ => Err(NotJson),
        }
    }

    fn object(&mut self, matching: u8, depth: usize) -> Result<(), NotJson> {
        self.expect(b'{')?;
        self.space();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(());
        }
        loop {
            self.space();
            let key = self.string()?;
            let mut inner = 0u8;
            for i in bits(matching) {
                let keys = &self.paths[i].keys;
                if keys.get(depth).is_some_and(|k| k.as_bytes() == key) {
                    inner |= 1 << i;
                }
            }
            self.space();
            self.expect(b':')?;
            self.space();
            self.value(inner, depth + 1)?;
            self.space();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    return Ok(());
                }
                _ => return Err(NotJson),
            }
        }
    }

    /// Paths go through object keys only, so nothing in an array matches.
    fn array(&mut self, depth: usize) -> Result<(), NotJson> {
        self.expect(b'[')?;
        self.space();
        if self.peek() == Some(b']') {
            self.at += 1;
            return Ok(());
        }
        loop {
            self.space();
            self.value(0, depth + 1)?;
            self.space();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b']') => {
                    self.at += 1;
                    return Ok(());
                }
                _ => return Err(NotJson),
            }
        }
    }

    /// A string's raw bytes between its quotes (escapes left as written).
    fn string(&mut self) -> Result<&'a [u8], NotJson> {
        self.expect(b'"')?;
        let doc: &'a [u8] = self.doc;
        let start = self.at;
        loop {
            match self.peek().ok_or(NotJson)? {
                b'"' => {
                    let s = &doc[start..self.at];
                    self.at += 1;
                    return Ok(s);
                }
                b'\\' => self.at += 2,
                b if b < 0x20 => return Err(NotJson),
                _ => self.at += 1,
            }
        }
    }

    fn word(&mut self, word: &[u8]) -> Result<(), NotJson> {
        if self.doc[self.at..].starts_with(word) {
            self.at += word.len();
            Ok(())
        } else {
            Err(NotJson)
        }
    }

    /// A JSON number; `Some` only for a usage (digits only, at most `u32::MAX`).
    fn number(&mut self) -> Result<Option<u32>, NotJson> {
        let start = self.at;
        let negative = self.peek() == Some(b'-');
        if negative {
            self.at += 1;
        }
        let digits = self.digits();
        if digits == 0 {
            return Err(NotJson);
        }
        let int_end = self.at;
        let mut whole = true;
        if self.peek() == Some(b'.') {
            self.at += 1;
            if self.digits() == 0 {
                return Err(NotJson);
            }
            whole = false;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            if self.digits() == 0 {
                return Err(NotJson);
            }
            whole = false;
        }
        if negative || !whole {
            return Ok(None);
        }
        let text = &self.doc[start..int_end];
        // JSON forbids leading zeros ("01"); such a document is not JSON.
        if text.len() > 1 && text[0] == b'0' {
            return Err(NotJson);
        }
        Ok(std::str::from_utf8(text).ok().and_then(|t| t.parse().ok()))
    }

    fn digits(&mut self) -> usize {
        let start = self.at;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.at += 1;
        }
        self.at - start
    }
}

/// The indexes of the bits set in `mask`.
fn bits(mask: u8) -> impl Iterator<Item = usize> {
    (0..8).filter(move |i| mask & (1 << i) != 0)
}
