//! Numbers at dotted paths of a JSON document, found as the document streams past.
//!
//! The document comes in any number of pieces (the chunks of a body, or the data lines of
//! one SSE event) and is never kept: between pieces the [`JsonScanner`] holds only its
//! place in the grammar, a bit per open container (object or array) up to
//! [`CHECKED_DEPTH`], which paths still match at the first few levels, and the key or
//! number being read. So any size and any depth are read in the same few hundred bytes,
//! and a value off every path is skipped, never copied.
//!
//! Containers deeper than [`CHECKED_DEPTH`] cannot hold a path's end (a path has at most
//! 8 keys), so they are skipped by counting brackets outside strings: a count is all that
//! finding their end needs. Their brackets are not checked to pair up; everything
//! shallower is checked as JSON (RFC 8259): structure, numbers, literals, string escapes
//! and control characters (the bytes of a string are not checked to be UTF-8).
//!
//! What counts as a usage: a JSON integer written with digits only, from 0 to
//! `u32::MAX`. A negative, fractional or exponent number, one past `u32::MAX`, or any
//! other value (`null`, a string) is *not a usage*: the path is left as if absent
//! (OpenAI's streams send `"usage": null` in every chunk but the last). As in most JSON
//! readers the last occurrence of a key counts: meeting a path's key again forgets what
//! was found under the earlier one. Keys are compared byte for byte as written: an
//! escaped key (`"us\u0061ge"`) does not match.

mod values;

use crate::config::{JsonPath, MAX_PATH_SEGMENTS, MAX_SEGMENT_BYTES};
use smallvec::SmallVec;
use values::{Escape, Number, Part, WORDS};

/// Containers nested up to this depth are checked exactly; deeper ones are skipped by
/// counting brackets (see the module documentation).
pub const CHECKED_DEPTH: u32 = 128;

/// The most paths one scanner looks for (one bit each of a `u64`): what the configuration
/// allows all rules together to read.
pub const MAX_TARGETS: usize = crate::config::MAX_DISTINCT_JSON_PATHS;
const _: () = assert!(MAX_TARGETS <= u64::BITS as usize);

/// The document is not JSON (or ended before its value did).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotJson;

/// The paths a scanner looks for, by position (at most [`MAX_TARGETS`]).
pub trait Targets {
    /// The `i`-th.
    fn path(&self, i: usize) -> &JsonPath;
}

impl Targets for [JsonPath] {
    fn path(&self, i: usize) -> &JsonPath {
        &self[i]
    }
}

/// Some paths of a table, by their indexes in it.
pub struct Chosen<'a> {
    /// The table.
    pub table: &'a [JsonPath],
    /// The indexes of the chosen paths.
    pub ids: &'a [u8],
}

impl Targets for Chosen<'_> {
    fn path(&self, i: usize) -> &JsonPath {
        &self.table[usize::from(self.ids[i])]
    }
}

/// Finds the number at each of `paths` in `doc`, written to `found[i]` (`None`: no
/// usage there). [`NotJson`] for anything but one JSON value with only whitespace
/// around it. The whole document at once; [`JsonScanner`] reads it in pieces.
pub fn find_numbers(
    doc: &[u8],
    paths: &[JsonPath],
    found: &mut [Option<u32>],
) -> Result<(), NotJson> {
    let mut scanner = JsonScanner::new(paths.len());
    scanner.feed(paths, doc);
    let numbers = scanner.finish(paths)?;
    for (f, n) in found.iter_mut().zip(numbers) {
        *f = *n;
    }
    Ok(())
}

/// An incremental reader of one JSON document (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonScanner {
    state: State,
    /// Containers open (at most [`CHECKED_DEPTH`]).
    depth: u32,
    /// Bit `d`: the container at depth `d + 1` is an object (else an array).
    objects: u128,
    /// `masks[d]`: the paths whose first `d - 1` keys led to the object at depth `d`.
    masks: [u64; MAX_PATH_SEGMENTS + 1],
    /// The paths whose keys led to the value about to be read.
    value: u64,
    /// The key being read, while it may still match a path.
    key: SmallVec<[u8; MAX_SEGMENT_BYTES]>,
    key_matters: bool,
    number: Number,
    found: SmallVec<[Option<u32>; 4]>,
}

/// Where the scanner is in the grammar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// A value must come.
    Value,
    /// After `[`: a value or `]`.
    ValueOrEnd,
    /// After `{`: a key or `}`.
    KeyOrEnd,
    /// After `,` in an object: a key.
    Key,
    /// After a key.
    Colon,
    /// After a value: `,` or the end of its container.
    Next,
    /// In a string (a key or a value).
    Str { key: bool, escape: Escape },
    /// In a number.
    Number(Part),
    /// In `true`, `false` or `null` (index in [`WORDS`]), `at` bytes read.
    Word { word: u8, at: u8 },
    /// In a container past [`CHECKED_DEPTH`]: brackets still open, in a string, after a
    /// backslash.
    Deep {
        open: u64,
        string: bool,
        escape: bool,
    },
    /// The value is complete: only whitespace may follow.
    Done,
    /// Not JSON.
    Failed,
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// The indexes of the bits set in `mask`.
fn bits(mut mask: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        (mask != 0).then(|| {
            let i = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            i
        })
    })
}

impl JsonScanner {
    /// A scanner looking for `targets` paths (at most [`MAX_TARGETS`]; more are ignored).
    pub fn new(targets: usize) -> JsonScanner {
        let mut scanner = JsonScanner {
            state: State::Value,
            depth: 0,
            objects: 0,
            masks: [0; MAX_PATH_SEGMENTS + 1],
            value: 0,
            key: SmallVec::new(),
            key_matters: false,
            number: Number::default(),
            found: SmallVec::new(),
        };
        scanner.reset(targets);
        scanner
    }

    /// Starts a new document (the next SSE event), looking for `targets` paths.
    pub fn reset(&mut self, targets: usize) {
        let targets = targets.min(MAX_TARGETS);
        self.state = State::Value;
        self.depth = 0;
        self.value = if targets == MAX_TARGETS {
            u64::MAX
        } else {
            (1u64 << targets) - 1
        };
        self.found.clear();
        self.found.resize(targets, None);
    }

    /// What was found so far (`None` once the document is known not to be JSON): for a
    /// document cut off before its end.
    pub fn found_so_far(&self) -> Option<&[Option<u32>]> {
        (self.state != State::Failed).then_some(&self.found[..])
    }

    /// The document ended here: the number found at each path, or [`NotJson`].
    pub fn finish(&mut self, targets: &(impl Targets + ?Sized)) -> Result<&[Option<u32>], NotJson> {
        if let State::Number(part) = self.state {
            if part.complete() {
                self.number_done(targets);
            } else {
                self.state = State::Failed;
            }
        }
        match self.state {
            State::Done => Ok(&self.found),
            _ => {
                self.state = State::Failed;
                Err(NotJson)
            }
        }
    }

    /// Reads the next piece of the document.
    pub fn feed(&mut self, targets: &(impl Targets + ?Sized), mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let used = self.step(targets, bytes);
            bytes = &bytes[used..];
        }
    }

    /// Reads from the start of `bytes` (never empty); returns how many were used. Only
    /// the end of a number uses none, and it always changes the state.
    fn step(&mut self, targets: &(impl Targets + ?Sized), bytes: &[u8]) -> usize {
        let b = bytes[0];
        match self.state {
            State::Failed => bytes.len(),
            State::Str { key, escape } => self.string(targets, bytes, key, escape),
            State::Number(part) => self.number_byte(targets, part, b),
            State::Word { word, at } => {
                let w = WORDS[usize::from(word)];
                if w.get(usize::from(at)) != Some(&b) {
                    return self.fail();
                }
                if usize::from(at) + 1 == w.len() {
                    self.value_done();
                } else {
                    self.state = State::Word { word, at: at + 1 };
                }
                1
            }
            State::Deep {
                open,
                string,
                escape,
            } => self.deep(bytes, open, string, escape),
            _ if is_space(b) => bytes
                .iter()
                .position(|&c| !is_space(c))
                .unwrap_or(bytes.len()),
            State::Done => self.fail(),
            State::Value => self.start_value(b),
            State::ValueOrEnd if b == b']' => self.close(false),
            State::ValueOrEnd => self.start_value(b),
            State::KeyOrEnd if b == b'}' => self.close(true),
            State::KeyOrEnd | State::Key if b == b'"' => {
                self.key.clear();
                self.key_matters = self.object_mask() != 0;
                self.state = State::Str {
                    key: true,
                    escape: Escape::None,
                };
                1
            }
            State::KeyOrEnd | State::Key => self.fail(),
            State::Colon if b == b':' => {
                self.state = State::Value;
                1
            }
            State::Colon => self.fail(),
            State::Next => match b {
                b',' if self.in_object() => {
                    self.state = State::Key;
                    1
                }
                b',' => {
                    self.value = 0;
                    self.state = State::Value;
                    1
                }
                b'}' => self.close(true),
                b']' => self.close(false),
                _ => self.fail(),
            },
        }
    }

    fn fail(&mut self) -> usize {
        self.state = State::Failed;
        1
    }

    fn in_object(&self) -> bool {
        self.depth > 0 && self.objects & (1u128 << (self.depth - 1)) != 0
    }

    /// The paths still matching at the innermost object (0 past the paths' depth).
    fn object_mask(&self) -> u64 {
        self.masks.get(self.depth as usize).copied().unwrap_or(0)
    }

    fn start_value(&mut self, b: u8) -> usize {
        match b {
            b'{' => self.open(true),
            b'[' => self.open(false),
            b'"' => {
                self.state = State::Str {
                    key: false,
                    escape: Escape::None,
                };
            }
            b't' | b'f' | b'n' => {
                let word = match b {
                    b't' => 0,
                    b'f' => 1,
                    _ => 2,
                };
                self.state = State::Word { word, at: 1 };
            }
            b'-' | b'0'..=b'9' => {
                self.number = Number {
                    negative: b == b'-',
                    fraction_or_exponent: false,
                    value: if b == b'-' { 0 } else { u64::from(b - b'0') },
                };
                self.state = State::Number(match b {
                    b'-' => Part::Minus,
                    b'0' => Part::Zero,
                    _ => Part::Int,
                });
            }
            _ => return self.fail(),
        }
        1
    }

    fn open(&mut self, object: bool) {
        if self.depth >= CHECKED_DEPTH {
            self.state = State::Deep {
                open: 1,
                string: false,
                escape: false,
            };
            return;
        }
        let bit = 1u128 << self.depth;
        if object {
            self.objects |= bit;
        } else {
            self.objects &= !bit;
        }
        self.depth += 1;
        if let Some(mask) = self.masks.get_mut(self.depth as usize) {
            *mask = if object { self.value } else { 0 };
        }
        self.value = 0;
        self.state = if object {
            State::KeyOrEnd
        } else {
            State::ValueOrEnd
        };
    }

    fn close(&mut self, object: bool) -> usize {
        if self.depth == 0 || self.in_object() != object {
            return self.fail();
        }
        self.depth -= 1;
        self.value_done();
        1
    }

    fn value_done(&mut self) {
        self.state = if self.depth == 0 {
            State::Done
        } else {
            State::Next
        };
    }
}
