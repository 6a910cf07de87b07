//! Whole numbers as decimal text, for header values the filter and the server write.
//!
//! `to_string` goes through `core::fmt` (a formatter, its padding and its two-digit
//! table): in the filter's wasm that cost a rejection about 40 instructions for each
//! small number, and 80 for a `u64`. Header values here are seconds and counts, mostly
//! one or two digits, so a plain loop writes them for a fraction of that, with the same
//! bytes (property-tested against `to_string`).

use std::fmt::Write;

/// "00" to "99": two digits for each number under 100.
const PAIRS: &str = "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899";

/// The digits of `n` < 100, without a leading zero.
fn small(n: u64) -> &'static str {
    let at = 2 * (n as usize % 100);
    PAIRS.get(at + usize::from(n < 10)..at + 2).unwrap_or("")
}

/// The two digits of `n` % 100, a leading zero kept.
fn pair(n: u64) -> &'static str {
    let at = 2 * (n as usize % 100);
    PAIRS.get(at..at + 2).unwrap_or("")
}

/// Appends `n` in decimal to `out`: numbers under 10 000 from the table of pairs, larger
/// ones (rare in a header) through `core::fmt`.
pub fn push_decimal(out: &mut String, n: u64) {
    if n < 100 {
        out.push_str(small(n));
    } else if n < 10_000 {
        out.push_str(small(n / 100));
        out.push_str(pair(n));
    } else {
        // Writing to a String cannot fail.
        let _ = write!(out, "{n}");
    }
}

/// The digits of `n` in decimal, written into the end of `buf` (room for `u64::MAX`'s
/// 20) two at a time from the table of pairs, and returned: for a caller that needs the
/// length before it copies them (a reply's header fields are written straight into the
/// buffer the host takes, with no string of their own). No `core::fmt` at any size.
pub fn digits(n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let (mut at, mut rest) = (buf.len(), n);
    while rest >= 10 {
        at -= 2;
        if let Some(place) = buf.get_mut(at..at + 2) {
            place.copy_from_slice(pair(rest).as_bytes());
        }
        rest /= 100;
        if rest == 0 {
            return buf.get(at..).unwrap_or_default();
        }
    }
    // One digit left (or `n` is one digit, 0 included).
    at -= 1;
    if let Some(d) = buf.get_mut(at) {
        *d = b'0' + rest as u8;
    }
    buf.get(at..).unwrap_or_default()
}

/// Appends `n` in decimal to `out`: numbers under 10 000 straight from the table of
/// pairs (in the filter's wasm about half what [`digits`] and a copy cost them), larger
/// ones through [`digits`].
pub fn push_decimal_bytes(out: &mut Vec<u8>, n: u64) {
    if n < 100 {
        out.extend_from_slice(small(n).as_bytes());
    } else if n < 10_000 {
        out.extend_from_slice(small(n / 100).as_bytes());
        out.extend_from_slice(pair(n).as_bytes());
    } else {
        out.extend_from_slice(digits(n, &mut [0; 20]));
    }
}

/// `n` in decimal (`n.to_string()`'s bytes), allocated once at its length.
pub fn decimal(n: u64) -> String {
    if n < 100 {
        return String::from(small(n));
    }
    if n < 10_000 {
        let high = small(n / 100);
        let mut out = String::with_capacity(high.len() + 2);
        out.push_str(high);
        out.push_str(pair(n));
        return out;
    }
    n.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_edges_are_written_as_to_string_writes_them() {
        for n in [
            0,
            1,
            9,
            10,
            99,
            100,
            101,
            999,
            1_000,
            1_009,
            9_999,
            10_000,
            u64::from(u32::MAX),
            u64::MAX,
        ] {
            assert_eq!(decimal(n), n.to_string());
            let mut bytes = Vec::new();
            push_decimal_bytes(&mut bytes, n);
            assert_eq!(bytes, n.to_string().into_bytes());
        }
    }

    proptest! {
        #[test]
        fn every_number_is_written_as_to_string_writes_it(n in any::<u64>(), small in 0..20_000u64) {
            prop_assert_eq!(decimal(n), n.to_string());
            prop_assert_eq!(decimal(small), small.to_string());
            let mut out = String::from("q=");
            push_decimal(&mut out, small);
            prop_assert_eq!(out, format!("q={small}"));
            for n in [n, small] {
                let mut bytes = b"q=".to_vec();
                push_decimal_bytes(&mut bytes, n);
                prop_assert_eq!(bytes, format!("q={n}").into_bytes());
            }
        }
    }
}
