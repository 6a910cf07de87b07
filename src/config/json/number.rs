//! A JSON number as the configuration reads it: exactly, from its text (see
//! [`Number::integer`] and [`Number::millionths`]), with no floating point code.

/// A JSON number, kept as its text (checked against JSON's grammar), so that nothing is
/// rounded before the field that reads it decides what it accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Number(String);

impl Number {
    /// A number the reader has checked against JSON's grammar.
    pub(super) fn new(text: String) -> Number {
        Number(text)
    }
}

/// What [`Number::integer`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Integer {
    /// A whole number from 0 to `u64::MAX`, written without fraction or exponent.
    Unsigned(u64),
    /// A negative whole number that fits an `i64`.
    Negative(i64),
    /// Anything else: a fraction, an exponent, or out of range.
    Other,
}

/// A number in whole millionths, as [`Number::millionths`] reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Millionths {
    /// Below zero (a zero is never negative: `-0` is 0).
    pub negative: bool,
    /// The magnitude's whole millionths; `None`: more than `u64::MAX`.
    pub whole: Option<u64>,
    /// What is left below one millionth.
    pub rest: Rest,
}

/// The part of a number below the last whole millionth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rest {
    /// Nothing: the number is a whole number of millionths.
    Zero,
    /// Less than half a millionth.
    BelowHalf,
    /// Half a millionth or more.
    HalfOrMore,
}

impl Number {
    /// The number as written, e.g. for an error message.
    pub fn text(&self) -> &str {
        &self.0
    }

    /// The number as an integer, the way serde_json tells integers from floats.
    pub fn integer(&self) -> Integer {
        let t = self.0.as_str();
        if t.contains(['.', 'e', 'E']) {
            return Integer::Other;
        }
        match t.strip_prefix('-') {
            None => t.parse().map_or(Integer::Other, Integer::Unsigned),
            // serde_json reads `-0` as a float, and so a u64 field refuses it.
            Some(_) => match t.parse::<i64>() {
                Ok(n) if n < 0 => Integer::Negative(n),
                _ => Integer::Other,
            },
        }
    }

    /// The number in millionths, exactly: `0.25` is 250 000 with nothing left over.
    pub fn millionths(&self) -> Millionths {
        let t = self.0.as_str();
        let (negative, t) = t.strip_prefix('-').map_or((false, t), |t| (true, t));
        let (mantissa, exponent) = t.split_once(['e', 'E']).unwrap_or((t, "0"));
        let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        // The exponent is at most what a u64's digits and a document's length allow;
        // beyond that the number is 0 or more than u64::MAX either way.
        let exponent: i64 = match exponent.parse::<i64>() {
            Ok(e) => e.clamp(-100_000, 100_000),
            Err(_) => i64::from(if exponent.starts_with('-') {
                -100_000
            } else {
                100_000
            }),
        };
        let digits = int.bytes().chain(frac.bytes());
        // The value is digits × 10^shift millionths.
        let shift = exponent + 6 - frac.len() as i64;
        let all: Vec<u8> = digits.skip_while(|&d| d == b'0').collect();
        let Some(last) = all.iter().rposition(|&d| d != b'0') else {
            return Millionths {
                negative: false,
                whole: Some(0),
                rest: Rest::Zero,
            };
        };
        let significant = &all[..=last];
        let shift = shift + (all.len() - 1 - last) as i64;
        // Digits at or above the millionths place, then the first one below it and
        // whether any other below it is nonzero.
        let above = significant.len() as i64 + shift.min(0);
        let mut whole: Option<u64> = Some(0);
        for &d in significant.iter().take(above.max(0) as usize) {
            whole = whole
                .and_then(|w| w.checked_mul(10))
                .and_then(|w| w.checked_add(u64::from(d - b'0')));
        }
        for _ in 0..shift.max(0) {
            whole = whole.and_then(|w| w.checked_mul(10));
        }
        let below = &significant[above.clamp(0, significant.len() as i64) as usize..];
        let rest = match below.first() {
            None => Rest::Zero,
            // Leading zeros between the millionths place and the first digit below it.
            Some(_) if above < 0 => Rest::BelowHalf,
            Some(&d) if d >= b'5' => Rest::HalfOrMore,
            Some(_) => Rest::BelowHalf,
        };
        Millionths {
            negative,
            whole,
            rest,
        }
    }
}
