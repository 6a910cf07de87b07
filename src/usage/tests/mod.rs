//! The scanners and the meter: the two public stream formats, any size and depth in
//! fixed memory, and properties (cutting a response anywhere changes nothing; the JSON
//! scanner agrees with serde_json on random documents).

mod json;
mod meter;
mod sse;

/// `bytes` cut at `cuts` (positions, any order, out of range ones clamped).
pub(super) fn pieces<'a>(bytes: &'a [u8], cuts: &[proptest::sample::Index]) -> Vec<&'a [u8]> {
    let mut at: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
    at.sort_unstable();
    let mut out = Vec::with_capacity(at.len() + 1);
    let mut last = 0;
    for a in at {
        out.push(&bytes[last..a]);
        last = a;
    }
    out.push(&bytes[last..]);
    out
}
