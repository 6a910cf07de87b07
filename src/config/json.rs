//! A small JSON reader for the plugin configuration, parsed once per configure.
//!
//! The module used to read the configuration through serde_json and serde_path_to_error:
//! about 70 KB of the filter (a tracked deserializer instantiated for every field type),
//! for a document read once. This reader builds a plain [`Value`] tree and remembers
//! where it is, so that a syntax error names the field path as before (`rules: EOF while
//! parsing a list`), with serde_json's wording. Numbers are kept as their text: the
//! configuration's integers are read exactly, and its fractions as whole millionths
//! ([`Number::millionths`]), without floating point code in the module.

/// A JSON value. Objects keep their keys in document order (duplicates included: the
/// reader of the object refuses them with the field's name).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number, as written.
    Number(Number),
    /// A string, unescaped.
    String(String),
    /// An array.
    Array(Vec<Value>),
    /// An object's members in document order.
    Object(Vec<(String, Value)>),
}

/// A syntax error: where in the document (the field path, empty for the whole) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    /// The field path the reader was in, as [`super::ConfigError::path`] writes it.
    pub path: String,
    /// serde_json's wording of the error.
    pub message: &'static str,
}

/// How deeply arrays and objects may nest (serde_json's limit): the reader recurses, and
/// a hostile document must not exhaust the stack.
const MAX_DEPTH: u32 = 128;

/// Reads one JSON document: a value, with nothing but whitespace after it.
pub fn parse(input: &[u8]) -> Result<Value, SyntaxError> {
    let mut reader = Reader {
        input,
        at: 0,
        path: Vec::new(),
        depth: 0,
    };
    let value = reader.value()?;
    if reader.skip_space().is_some() {
        return Err(reader.fail("trailing characters"));
    }
    Ok(value)
}

/// One step of the field path the reader is in.
enum Step {
    Key(String),
    Index(usize),
}

struct Reader<'a> {
    input: &'a [u8],
    at: usize,
    path: Vec<Step>,
    depth: u32,
}

impl Reader<'_> {
    fn fail(&self, message: &'static str) -> SyntaxError {
        let mut path = String::new();
        for step in &self.path {
            match step {
                Step::Key(k) if path.is_empty() => path.push_str(k),
                Step::Key(k) => {
                    path.push('.');
                    path.push_str(k);
                }
                Step::Index(i) => {
                    path.push('[');
                    path.push_str(&i.to_string());
                    path.push(']');
                }
            }
        }
        SyntaxError { path, message }
    }

    fn peek(&self) -> Option<u8> {
        self.input.get(self.at).copied()
    }

    /// Skips whitespace; the byte after it, if any.
    fn skip_space(&mut self) -> Option<u8> {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
        self.peek()
    }

    fn value(&mut self) -> Result<Value, SyntaxError> {
        match self.skip_space() {
            None => Err(self.fail("EOF while parsing a value")),
            Some(b'"') => {
                self.at += 1;
                self.string().map(Value::String)
            }
            Some(b'{') => self.nested(Reader::object),
            Some(b'[') => self.nested(Reader::array),
            Some(b't') => self.word("true", Value::Bool(true)),
            Some(b'f') => self.word("false", Value::Bool(false)),
            Some(b'n') => self.word("null", Value::Null),
            Some(b'-' | b'0'..=b'9') => self.number().map(Value::Number),
            Some(_) => Err(self.fail("expected value")),
        }
    }

    fn nested(
        &mut self,
        read: fn(&mut Self) -> Result<Value, SyntaxError>,
    ) -> Result<Value, SyntaxError> {
        if self.depth == MAX_DEPTH {
            return Err(self.fail("recursion limit exceeded"));
        }
        self.depth += 1;
        self.at += 1;
        let value = read(self);
        self.depth -= 1;
        value
    }

    fn word(&mut self, word: &str, value: Value) -> Result<Value, SyntaxError> {
        for &expected in word.as_bytes() {
            match self.peek() {
                None => return Err(self.fail("EOF while parsing a value")),
                Some(b) if b == expected => self.at += 1,
                Some(_) => return Err(self.fail("expected ident")),
            }
        }
        Ok(value)
    }

    fn digits(&mut self) -> usize {
        let start = self.at;
        while let Some(b'0'..=b'9') = self.peek() {
            self.at += 1;
        }
        self.at - start
    }

    fn number(&mut self) -> Result<Number, SyntaxError> {
        let start = self.at;
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        let leading_zero = self.peek() == Some(b'0');
        match self.digits() {
            0 if self.peek().is_none() => return Err(self.fail("EOF while parsing a value")),
            0 => return Err(self.fail("invalid number")),
            n if leading_zero && n > 1 => return Err(self.fail("invalid number")),
            _ => {}
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            self.required_digits()?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.at += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.at += 1;
            }
            self.required_digits()?;
        }
        // Only ASCII digits, signs, `.` and `e` were taken.
        let text = String::from_utf8_lossy(&self.input[start..self.at]).into_owned();
        Ok(Number::new(text))
    }

    fn required_digits(&mut self) -> Result<(), SyntaxError> {
        match self.digits() {
            0 if self.peek().is_none() => Err(self.fail("EOF while parsing a value")),
            0 => Err(self.fail("invalid number")),
            _ => Ok(()),
        }
    }

    /// A string's contents, after its opening quote.
    fn string(&mut self) -> Result<String, SyntaxError> {
        let mut out = Vec::new();
        loop {
            let Some(b) = self.peek() else {
                return Err(self.fail("EOF while parsing a string"));
            };
            self.at += 1;
            match b {
                b'"' => break,
                b'\\' => self.escape(&mut out)?,
                0..=0x1f => {
                    return Err(self
                        .fail("control character (\\u0000-\\u001F) found while parsing a string"))
                }
                _ => out.push(b),
            }
        }
        String::from_utf8(out).map_err(|_| self.fail("invalid unicode code point"))
    }

    fn escape(&mut self, out: &mut Vec<u8>) -> Result<(), SyntaxError> {
        let Some(b) = self.peek() else {
            return Err(self.fail("EOF while parsing a string"));
        };
        self.at += 1;
        let byte = match b {
            b'"' => b'"',
            b'\\' => b'\\',
            b'/' => b'/',
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => {
                let c = self.unicode_escape()?;
                out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                return Ok(());
            }
            _ => return Err(self.fail("invalid escape")),
        };
        out.push(byte);
        Ok(())
    }

    /// The character of a `\u` escape (after the `u`), a surrogate pair's second half
    /// included.
    fn unicode_escape(&mut self) -> Result<char, SyntaxError> {
        let first = self.hex4()?;
        let code = match first {
            0xd800..=0xdbff => {
                if self.input.get(self.at..self.at + 2) != Some(b"\\u") {
                    return Err(self.fail("lone leading surrogate in hex escape"));
                }
                self.at += 2;
                let second = self.hex4()?;
                if !(0xdc00..=0xdfff).contains(&second) {
                    return Err(self.fail("lone leading surrogate in hex escape"));
                }
                0x10000 + ((first - 0xd800) << 10) + (second - 0xdc00)
            }
            _ => first,
        };
        char::from_u32(code).ok_or_else(|| self.fail("invalid unicode code point"))
    }

    fn hex4(&mut self) -> Result<u32, SyntaxError> {
        let mut code = 0;
        for _ in 0..4 {
            let Some(b) = self.peek() else {
                return Err(self.fail("EOF while parsing a string"));
            };
            let digit = (b as char)
                .to_digit(16)
                .ok_or_else(|| self.fail("invalid escape"))?;
            self.at += 1;
            code = code * 16 + digit;
        }
        Ok(code)
    }

    /// An object's members, after its `{`.
    fn object(&mut self) -> Result<Value, SyntaxError> {
        let mut members = Vec::new();
        if self.skip_space() == Some(b'}') {
            self.at += 1;
            return Ok(Value::Object(members));
        }
        loop {
            match self.skip_space() {
                None => return Err(self.fail("EOF while parsing an object")),
                Some(b'"') => self.at += 1,
                Some(b'}') => return Err(self.fail("trailing comma")),
                Some(_) => return Err(self.fail("key must be a string")),
            }
            let key = self.string()?;
            match self.skip_space() {
                None => return Err(self.fail("EOF while parsing an object")),
                Some(b':') => self.at += 1,
                Some(_) => return Err(self.fail("expected `:`")),
            }
            self.path.push(Step::Key(key));
            let value = self.value()?;
            if let Some(Step::Key(key)) = self.path.pop() {
                members.push((key, value));
            }
            match self.skip_space() {
                None => return Err(self.fail("EOF while parsing an object")),
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    return Ok(Value::Object(members));
                }
                Some(_) => return Err(self.fail("expected `,` or `}`")),
            }
        }
    }

    /// An array's elements, after its `[`.
    fn array(&mut self) -> Result<Value, SyntaxError> {
        let mut elements = Vec::new();
        match self.skip_space() {
            None => return Err(self.fail("EOF while parsing a list")),
            Some(b']') => {
                self.at += 1;
                return Ok(Value::Array(elements));
            }
            Some(_) => {}
        }
        loop {
            self.path.push(Step::Index(elements.len()));
            let value = self.value()?;
            self.path.pop();
            elements.push(value);
            match self.skip_space() {
                None => return Err(self.fail("EOF while parsing a list")),
                Some(b',') => {
                    self.at += 1;
                    if self.skip_space() == Some(b']') {
                        return Err(self.fail("trailing comma"));
                    }
                }
                Some(b']') => {
                    self.at += 1;
                    return Ok(Value::Array(elements));
                }
                Some(_) => return Err(self.fail("expected `,` or `]`")),
            }
        }
    }
}

mod number;
pub use number::{Integer, Number, Rest};

#[cfg(test)]
mod tests;
