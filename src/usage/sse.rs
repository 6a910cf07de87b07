//! Server-sent events split out of a stream as it passes, chunk by chunk.
//!
//! Follows the WHATWG `text/event-stream` rules that matter for finding a usage: lines
//! end with CRLF, LF or CR (a CRLF split across two chunks is one line end); a line
//! starting with `:` is a comment; `data:` lines (one optional space after the colon)
//! are joined with LF into the event's data; an empty line ends the event. Other fields
//! (`event`, `id`, `retry`) are read and dropped: the usage is in the data.
//!
//! Bounded: at most `cap` bytes of one event are kept (its data plus the line being
//! read). An event that grows past the cap is dropped at once, the rest of it skipped
//! without being kept, and reported as [`Event::Skipped`] when it ends. Nothing else is
//! buffered: memory per stream is at most `cap` whatever the upstream sends.

/// What the splitter found at the end of one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event<'a> {
    /// An event's data (the `data:` lines joined with LF).
    Data(&'a [u8]),
    /// An event longer than the cap: nothing of it was kept.
    Skipped,
}

/// An incremental event splitter for one stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseSplitter {
    cap: usize,
    /// The line being read (field name and value), without its line end.
    line: Vec<u8>,
    /// The current event's data so far.
    data: Vec<u8>,
    /// The current event has a data line (so it is dispatched even if its data is empty).
    has_data: bool,
    /// The current event outgrew the cap: skip until it ends.
    overflowed: bool,
    /// The last chunk ended on CR: an LF starting the next one is the same line end.
    after_cr: bool,
    /// Some byte of the current line was seen (kept or, while skipping, not).
    line_seen: bool,
}

impl SseSplitter {
    /// A splitter keeping at most `cap` bytes of one event.
    pub fn new(cap: usize) -> SseSplitter {
        SseSplitter {
            cap,
            line: Vec::new(),
            data: Vec::new(),
            has_data: false,
            overflowed: false,
            after_cr: false,
            line_seen: false,
        }
    }

    /// Feeds the next chunk of the stream, calling `on_event` for each event it ends.
    pub fn feed(&mut self, mut chunk: &[u8], on_event: &mut impl FnMut(Event<'_>)) {
        if self.after_cr && chunk.first() == Some(&b'\n') {
            chunk = &chunk[1..];
        }
        self.after_cr = false;
        while !chunk.is_empty() {
            match chunk.iter().position(|&b| b == b'\n' || b == b'\r') {
                None => {
                    self.keep(chunk);
                    return;
                }
                Some(end) => {
                    self.keep(&chunk[..end]);
                    self.end_line(on_event);
                    let crlf = chunk[end] == b'\r';
                    chunk = &chunk[end + 1..];
                    if crlf {
                        match chunk.first() {
                            Some(b'\n') => chunk = &chunk[1..],
                            None => self.after_cr = true,
                            Some(_) => {}
                        }
                    }
                }
            }
        }
    }

    /// Keeps part of the current line, unless the event outgrows the cap.
    fn keep(&mut self, part: &[u8]) {
        self.line_seen |= !part.is_empty();
        if self.overflowed {
            return;
        }
        if self.data.len() + self.line.len() + part.len() > self.cap {
            self.overflowed = true;
            self.line.clear();
            self.data.clear();
            return;
        }
        self.line.extend_from_slice(part);
    }

    /// A line ended: an empty one ends the event, a `data` field adds to it.
    fn end_line(&mut self, on_event: &mut impl FnMut(Event<'_>)) {
        let empty = !std::mem::take(&mut self.line_seen);
        if self.overflowed {
            if empty {
                self.reset();
                on_event(Event::Skipped);
            }
            return;
        }
        if empty {
            if self.has_data {
                on_event(Event::Data(&self.data));
            }
            self.reset();
            return;
        }
        let (name, value) = match self.line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &self.line[colon + 1..];
                (
                    &self.line[..colon],
                    value.strip_prefix(b" ").unwrap_or(value),
                )
            }
            None => (&self.line[..], &b""[..]),
        };
        if name == b"data" {
            if self.has_data {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(value);
            self.has_data = true;
        }
        self.line.clear();
    }

    fn reset(&mut self) {
        self.line.clear();
        self.data.clear();
        self.has_data = false;
        self.overflowed = false;
    }
}
