//! `response.retry_after_jitter`: waits spread upward so that clients rejected together
//! do not all come back at the same instant.
//!
//! Clients that retry exactly when a limit lifts arrive together and are rejected
//! together. With a jitter `j`, a rejection's waits (`retry-after`, `x-ratelimit-reset`
//! and the draft fields' `t`) become `exact × (1 + j × u)`, `u` uniform in [0, 1), rounded
//! up to whole seconds as before: never earlier than the exact wait, so no client is
//! invited to retry early, and never later than `⌈exact × (1 + j)⌉`.
//!
//! `u` comes from a seed the request already has (its clock reading, mixed), one `u` per
//! rejection applied to every wait in it: the fields keep their order (`t` is never later
//! than `retry-after`), no host call is added, and a test that fixes the clock fixes `u`.
//! Integer arithmetic only: the jitter is held in millionths.

use super::Standing;
pub use crate::config::MAX_JITTER_PPM;

/// A 32-bit fraction (`u × 2³²`) from `seed`: the splitmix64 finaliser, whose output bits
/// are each uniform and independent enough for spreading retries (not for secrets).
pub fn fraction(seed: u64) -> u32 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) as u32
}

/// `exact_ns × (1 + jitter_ppm / 10⁶ × u / 2³²)`, rounded down to the nanosecond (the
/// whole seconds shown are rounded up from it), saturating at `u64::MAX`.
pub fn spread_ns(exact_ns: u64, jitter_ppm: u32, u: u32) -> u64 {
    let extra =
        u128::from(exact_ns) * u128::from(jitter_ppm) * u128::from(u) / (1_000_000u128 << 32);
    u64::try_from(u128::from(exact_ns) + extra).unwrap_or(u64::MAX)
}

/// Spreads every wait of `rejecting` by the same draw from `seed`, so that the fields of
/// one reply keep their order (see the module).
pub fn spread(rejecting: &mut [Standing], jitter_ppm: u32, seed: u64) {
    let u = fraction(seed);
    let spread = |ns: &mut Option<u64>| {
        if let Some(ns) = ns {
            *ns = spread_ns(*ns, jitter_ppm, u);
        }
    };
    for s in rejecting {
        spread(&mut s.retry_ns);
        spread(&mut s.reset_ns);
        spread(&mut s.next_ns);
    }
}

#[cfg(test)]
mod tests;
