//! Splitting one fuzz input into the several values a structured target needs.
//!
//! Fields are separated by NUL bytes, which no header value the targets read may contain
//! anyway (Envoy refuses NUL in headers), so every field can hold any other byte and a
//! seed is easy to write by hand. A target whose last value is binary (a protobuf
//! message) takes it whole with [`Fields::rest`].

/// A cursor over the input's fields.
#[derive(Debug, Clone)]
pub struct Fields<'a> {
    rest: Option<&'a [u8]>,
}

impl<'a> Fields<'a> {
    /// The fields of `data`.
    pub fn new(data: &'a [u8]) -> Fields<'a> {
        Fields { rest: Some(data) }
    }

    /// The next field's bytes, `None` past the last one.
    pub fn bytes(&mut self) -> Option<&'a [u8]> {
        let rest = self.rest?;
        match rest.iter().position(|&b| b == 0) {
            Some(nul) => {
                self.rest = rest.get(nul + 1..);
                rest.get(..nul)
            }
            None => {
                self.rest = None;
                Some(rest)
            }
        }
    }

    /// The next field as text the way the host layer reads header bytes: invalid UTF-8
    /// replaced, not refused.
    pub fn text(&mut self) -> Option<String> {
        self.bytes()
            .map(|b| String::from_utf8_lossy(b).into_owned())
    }

    /// Everything after the fields read so far, NULs included; empty past the end.
    pub fn rest(self) -> &'a [u8] {
        self.rest.unwrap_or_default()
    }
}
