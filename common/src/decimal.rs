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
        }
    }
}
