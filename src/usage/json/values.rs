//! The values a [`JsonScanner`] reads across pieces of a document: strings (keys among
//! them), numbers, and containers past [`super::CHECKED_DEPTH`], each a small state
//! carried from one piece to the next.

use super::{bits, JsonScanner, State, Targets};
use crate::config::MAX_SEGMENT_BYTES;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Escape {
    None,
    Backslash,
    /// Hex digits of `\u` still to come.
    Hex(u8),
}

/// The part of a number being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Part {
    Minus,
    Zero,
    Int,
    Dot,
    Frac,
    Exp,
    ExpSign,
    ExpDigits,
}

impl Part {
    /// Whether a number may end here.
    pub(super) fn complete(self) -> bool {
        matches!(self, Part::Zero | Part::Int | Part::Frac | Part::ExpDigits)
    }
}

/// A number read so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Number {
    pub(super) negative: bool,
    pub(super) fraction_or_exponent: bool,
    /// Its integer part, stopped just past `u32::MAX`.
    pub(super) value: u64,
}

pub(super) const WORDS: [&[u8]; 3] = [b"true", b"false", b"null"];
const TOO_BIG: u64 = u32::MAX as u64 + 1;

impl JsonScanner {
    pub(super) fn string(
        &mut self,
        targets: &(impl Targets + ?Sized),
        bytes: &[u8],
        key: bool,
        escape: Escape,
    ) -> usize {
        let b = bytes[0];
        let escape = match escape {
            Escape::None => None,
            Escape::Backslash => Some(match b {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Escape::None,
                b'u' => Escape::Hex(4),
                _ => return self.fail(),
            }),
            Escape::Hex(n) if b.is_ascii_hexdigit() => Some(if n > 1 {
                Escape::Hex(n - 1)
            } else {
                Escape::None
            }),
            Escape::Hex(_) => return self.fail(),
        };
        if let Some(escape) = escape {
            // No path key has a backslash: an escaped key matches none.
            self.key_matters &= !key;
            self.state = State::Str { key, escape };
            return 1;
        }
        let end = bytes
            .iter()
            .position(|&c| c == b'"' || c == b'\\' || c < 0x20);
        let run = &bytes[..end.unwrap_or(bytes.len())];
        if key && self.key_matters {
            if self.key.len() + run.len() > MAX_SEGMENT_BYTES {
                self.key_matters = false;
            } else {
                self.key.extend_from_slice(run);
            }
        }
        let Some(end) = end else {
            return bytes.len();
        };
        match bytes[end] {
            b'"' if key => self.key_done(targets),
            b'"' => self.value_done(),
            b'\\' => {
                self.state = State::Str {
                    key,
                    escape: Escape::Backslash,
                };
            }
            _ => return self.fail(),
        }
        end + 1
    }

    /// A key ended: the paths it continues are the ones the value after it matches, and
    /// what was found under an earlier occurrence of it is forgotten.
    fn key_done(&mut self, targets: &(impl Targets + ?Sized)) {
        let mut inner = 0u64;
        if self.key_matters {
            let at = self.depth as usize - 1;
            for i in bits(self.object_mask()) {
                if targets
                    .path(i)
                    .keys
                    .get(at)
                    .is_some_and(|k| k.as_bytes() == &self.key[..])
                {
                    inner |= 1 << i;
                }
            }
        }
        for i in bits(inner) {
            self.found[i] = None;
        }
        self.value = inner;
        self.state = State::Colon;
    }

    pub(super) fn number_byte(
        &mut self,
        targets: &(impl Targets + ?Sized),
        part: Part,
        b: u8,
    ) -> usize {
        let next = match (part, b) {
            (Part::Minus, b'0') => Part::Zero,
            (Part::Minus | Part::Int, b'0'..=b'9') => {
                let n = &mut self.number.value;
                *n = (*n * 10 + u64::from(b - b'0')).min(TOO_BIG);
                Part::Int
            }
            (Part::Zero | Part::Int, b'.') => Part::Dot,
            (Part::Zero | Part::Int | Part::Frac, b'e' | b'E') => Part::Exp,
            (Part::Dot | Part::Frac, b'0'..=b'9') => Part::Frac,
            (Part::Exp, b'+' | b'-') => Part::ExpSign,
            (Part::Exp | Part::ExpSign | Part::ExpDigits, b'0'..=b'9') => Part::ExpDigits,
            (part, _) if part.complete() => {
                // The byte after the number: read it in the state the number leaves.
                self.number_done(targets);
                return 0;
            }
            _ => return self.fail(),
        };
        if matches!(next, Part::Dot | Part::Exp) {
            self.number.fraction_or_exponent = true;
        }
        self.state = State::Number(next);
        1
    }

    pub(super) fn number_done(&mut self, targets: &(impl Targets + ?Sized)) {
        let n = self.number;
        let usage =
            (!n.negative && !n.fraction_or_exponent && n.value < TOO_BIG).then_some(n.value as u32);
        for i in bits(self.value) {
            if targets.path(i).keys.len() == self.depth as usize {
                self.found[i] = usage;
            }
        }
        self.value_done();
    }

    pub(super) fn deep(
        &mut self,
        bytes: &[u8],
        mut open: u64,
        mut string: bool,
        mut escape: bool,
    ) -> usize {
        for (i, &b) in bytes.iter().enumerate() {
            if escape {
                escape = false;
            } else if string {
                match b {
                    b'\\' => escape = true,
                    b'"' => string = false,
                    _ => {}
                }
            } else {
                match b {
                    b'"' => string = true,
                    b'{' | b'[' => open += 1,
                    b'}' | b']' => {
                        open -= 1;
                        if open == 0 {
                            self.value_done();
                            return i + 1;
                        }
                    }
                    _ => {}
                }
            }
        }
        self.state = State::Deep {
            open,
            string,
            escape,
        };
        bytes.len()
    }
}
