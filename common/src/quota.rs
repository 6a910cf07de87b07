//! The [`QUOTA_HEADER`] request header: which descriptors the caller asks a lease for.
//!
//! A caller that will spend granted hits itself (floodgate's filter) names, on the gRPC
//! call, the 0-based indices into `RateLimitRequest.descriptors` it wants a grant for:
//! `x-floodgate-quota: 0` or `0,2`. Envoy's native `ratelimit` filter never sends it, so it
//! never gets a grant (a grant to a client that ignores it would waste those hits).
//!
//! Absent or empty: nothing asked. Anything else that is not a comma-separated list of
//! distinct decimal indices below the number of descriptors (at most [`MAX_ENTRIES`]
//! entries, no spaces, the header given once) is **malformed**: the request is still
//! answered, with no grant for anything, and counted
//! by the server. Never an error answer: a bad hint must not turn into a failure mode.
//!
//! [`encode`] writes what [`parse`] reads back, for the filter; a test holds them to each
//! other.

pub use crate::headers::QUOTA_HEADER;

/// The most indices one header may list: one per descriptor a request may carry (the
/// server's limit on descriptors), and the width of [`Asked`]'s bit set.
pub const MAX_ENTRIES: usize = 64;

/// The descriptors a caller asked a lease for, as a bit set over their indices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Asked(u64);

impl Asked {
    /// Nothing asked.
    pub const NONE: Asked = Asked(0);

    /// Whether descriptor `index` was asked for.
    pub fn contains(self, index: usize) -> bool {
        index < 64 && self.0 & (1 << index) != 0
    }
}

/// Why a header was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformed {
    /// Sent more than once.
    Repeated,
    /// Not a list of decimal digits and commas (or not visible ASCII).
    NotDigits,
    /// An index at or beyond the number of descriptors.
    OutOfRange,
    /// More than [`MAX_ENTRIES`] entries.
    TooMany,
    /// The same index twice.
    Duplicate,
}

/// The header's value for these descriptor indices (ascending, distinct): `0,2`. Empty
/// for none: then no header is sent.
pub fn encode(indices: &[usize]) -> String {
    let mut out = String::with_capacity(indices.len() * 3);
    for (n, i) in indices.iter().enumerate() {
        if n > 0 {
            out.push(',');
        }
        out.push_str(&i.to_string());
    }
    out
}

/// Reads the header's values (`values`: every occurrence, in order) for a request of
/// `descriptors` descriptors.
pub fn parse(values: &[&[u8]], descriptors: usize) -> Result<Asked, Malformed> {
    let value = match values {
        [] => return Ok(Asked::NONE),
        [one] => *one,
        _ => return Err(Malformed::Repeated),
    };
    if value.is_empty() {
        return Ok(Asked::NONE);
    }
    if value.split(|&b| b == b',').count() > MAX_ENTRIES {
        return Err(Malformed::TooMany);
    }
    let mut asked = 0u64;
    for entry in value.split(|&b| b == b',') {
        if entry.is_empty() || !entry.iter().all(u8::is_ascii_digit) {
            return Err(Malformed::NotDigits);
        }
        // Digits only, so this is a number; too many digits is out of range.
        let index = entry.iter().try_fold(0usize, |acc, &d| {
            acc.checked_mul(10)?.checked_add(usize::from(d - b'0'))
        });
        let index = match index {
            Some(i) if i < descriptors && i < 64 => i,
            _ => return Err(Malformed::OutOfRange),
        };
        if asked & (1 << index) != 0 {
            return Err(Malformed::Duplicate);
        }
        asked |= 1 << index;
    }
    Ok(Asked(asked))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn asked(v: &str, n: usize) -> Result<Vec<usize>, Malformed> {
        parse(&[v.as_bytes()], n).map(|a| (0..64).filter(|&i| a.contains(i)).collect())
    }

    #[test]
    fn lists_of_indices() {
        assert_eq!(parse(&[], 3), Ok(Asked::NONE), "absent");
        assert_eq!(asked("", 3), Ok(vec![]), "empty");
        assert_eq!(asked("0", 1), Ok(vec![0]));
        assert_eq!(asked("0,2", 3), Ok(vec![0, 2]));
        assert_eq!(asked("2,0", 3), Ok(vec![0, 2]), "any order");
        assert_eq!(asked("007", 8), Ok(vec![7]), "leading zeros are digits");
        let all: Vec<String> = (0..64).map(|i| i.to_string()).collect();
        assert_eq!(asked(&all.join(","), 64), Ok((0..64).collect()));
    }

    #[test]
    fn indices_are_written_comma_separated() {
        assert_eq!(encode(&[0, 2, 11]), "0,2,11");
        assert_eq!(encode(&[]), "");
    }

    #[test]
    fn malformed_values() {
        for (v, n, why) in [
            ("1", 1, Malformed::OutOfRange),
            ("64", 64, Malformed::OutOfRange),
            ("99999999999999999999999", 3, Malformed::OutOfRange),
            ("-1", 3, Malformed::NotDigits),
            ("0, 1", 3, Malformed::NotDigits),
            ("0,", 3, Malformed::NotDigits),
            (",0", 3, Malformed::NotDigits),
            ("a", 3, Malformed::NotDigits),
            ("١", 3, Malformed::NotDigits),
            ("0,0", 3, Malformed::Duplicate),
        ] {
            assert_eq!(asked(v, n), Err(why), "{v:?}");
        }
        let many = vec!["0"; 65].join(",");
        assert_eq!(asked(&many, 64), Err(Malformed::TooMany));
        assert_eq!(parse(&[b"0", b"1"], 3), Err(Malformed::Repeated));
    }

    proptest! {
        #[test]
        fn any_bytes_parse_or_are_refused_without_panic(v in prop::collection::vec(any::<u8>(), 0..200), n in 0usize..70) {
            if let Ok(a) = parse(&[&v], n) {
                for i in 0..64 {
                    prop_assert!(!a.contains(i) || i < n);
                }
            }
        }

        #[test]
        fn what_the_filter_writes_the_server_reads(set in prop::collection::btree_set(0usize..64, 0..64), extra in 0usize..4) {
            let indices: Vec<usize> = set.iter().copied().collect();
            let descriptors = indices.last().map_or(0, |last| last + 1 + extra).min(64);
            let a = parse(&[encode(&indices).as_bytes()], descriptors).unwrap();
            prop_assert_eq!((0..64).filter(|&i| a.contains(i)).collect::<Vec<_>>(), indices);
        }

        #[test]
        fn a_list_of_distinct_indices_is_read_back(set in prop::collection::btree_set(0usize..64, 0..64)) {
            let v = set.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(",");
            let a = parse(&[v.as_bytes()], 64).unwrap();
            prop_assert_eq!((0..64).filter(|&i| a.contains(i)).collect::<Vec<_>>(), set.into_iter().collect::<Vec<_>>());
        }
    }
}
