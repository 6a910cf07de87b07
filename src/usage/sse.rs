//! Server-sent events read out of a stream as it passes, chunk by chunk, keeping nothing.
//!
//! Follows the WHATWG `text/event-stream` rules that matter for finding a usage: lines
//! end with CRLF, LF or CR (a CRLF split across two chunks is one line end); a line
//! starting with `:` is a comment; `data:` lines (one optional space after the colon)
//! are joined with LF into the event's data; an empty line ends the event, which counts
//! if it had a data line. Other fields (`event`, `id`, `retry`) are read and dropped: the
//! usage is in the data.
//!
//! The data is handed on as [`Piece`]s, in the pieces it arrived in, the moment each is
//! read: the reader holds no line and no event, only where it is in the line (a few
//! bytes of state), so memory per stream is the same whatever the upstream sends.

/// What the reader hands on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece<'a> {
    /// More of the current event's data (an LF between two of its data lines included).
    Data(&'a [u8]),
    /// The current event ended, and it had a data line: its data is complete.
    End,
}

/// An incremental event reader for one stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SseReader {
    line: Line,
    /// The current event has a data line.
    has_data: bool,
    /// The last byte read was CR: an LF next is the same line end.
    after_cr: bool,
}

/// Where the reader is in the current line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Line {
    /// Nothing of it read yet.
    #[default]
    Start,
    /// In the field name: bytes read, and whether they are `data` so far.
    Name { len: u8, data: bool },
    /// Right after the colon: a space here is not part of the value.
    ValueStart { data: bool },
    /// In the value (a comment's text too: not data).
    Value { data: bool },
}

const DATA: &[u8] = b"data";

impl SseReader {
    /// A reader at the start of a stream.
    pub fn new() -> SseReader {
        SseReader::default()
    }

    /// Reads the next chunk of the stream, calling `on` for each piece of data and each
    /// end of an event.
    pub fn feed(&mut self, chunk: &[u8], on: &mut impl FnMut(Piece<'_>)) {
        let mut i = 0;
        while i < chunk.len() {
            let b = chunk[i];
            if std::mem::take(&mut self.after_cr) && b == b'\n' {
                i += 1;
                continue;
            }
            if b == b'\n' || b == b'\r' {
                self.after_cr = b == b'\r';
                self.end_line(on);
                i += 1;
                continue;
            }
            match self.line {
                Line::Start if b == b':' => {
                    self.line = Line::Value { data: false };
                    i += 1;
                }
                Line::Start => self.line = Line::Name { len: 0, data: true },
                Line::Name { len, data } if b == b':' => {
                    let data = data && usize::from(len) == DATA.len();
                    if data {
                        self.data_line(on);
                    }
                    self.line = Line::ValueStart { data };
                    i += 1;
                }
                Line::Name { len, data } => {
                    let data = data && DATA.get(usize::from(len)) == Some(&b);
                    self.line = Line::Name {
                        len: len.saturating_add(1),
                        data,
                    };
                    i += 1;
                }
                Line::ValueStart { data } => {
                    self.line = Line::Value { data };
                    if b == b' ' {
                        i += 1;
                    }
                }
                Line::Value { data } => {
                    let rest = &chunk[i..];
                    let end = rest
                        .iter()
                        .position(|&c| c == b'\n' || c == b'\r')
                        .unwrap_or(rest.len());
                    if data {
                        on(Piece::Data(&rest[..end]));
                    }
                    i += end;
                }
            }
        }
    }

    /// A line ended: an empty one ends the event, a `data` line without a colon adds an
    /// empty line to it.
    fn end_line(&mut self, on: &mut impl FnMut(Piece<'_>)) {
        match std::mem::take(&mut self.line) {
            Line::Start => {
                if std::mem::take(&mut self.has_data) {
                    on(Piece::End);
                }
            }
            Line::Name { len, data } if data && usize::from(len) == DATA.len() => {
                self.data_line(on);
            }
            Line::Name { .. } | Line::ValueStart { .. } | Line::Value { .. } => {}
        }
    }

    /// A data line starts: after an earlier one, its value follows an LF.
    fn data_line(&mut self, on: &mut impl FnMut(Piece<'_>)) {
        if self.has_data {
            on(Piece::Data(b"\n"));
        }
        self.has_data = true;
    }
}
