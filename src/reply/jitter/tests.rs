use super::*;
use crate::bucket::seconds_ceil;
use proptest::prelude::*;

/// `⌈exact × (1 + jitter)⌉` in whole seconds, the most a spread wait may show.
fn ceiling_s(exact_ns: u64, jitter_ppm: u32) -> u64 {
    let most = u128::from(exact_ns) * (1_000_000 + u128::from(jitter_ppm));
    u64::try_from(most.div_ceil(1_000_000_000 * 1_000_000)).unwrap_or(u64::MAX)
}

proptest! {
    #[test]
    fn a_spread_wait_is_never_early_nor_past_the_ceiling(
        exact_ns in 0u64..=u64::MAX / 4,
        jitter_ppm in 0u32..=MAX_JITTER_PPM,
        seed: u64,
    ) {
        let shown = seconds_ceil(spread_ns(exact_ns, jitter_ppm, fraction(seed)));
        prop_assert!(shown >= seconds_ceil(exact_ns));
        prop_assert!(shown <= ceiling_s(exact_ns, jitter_ppm));
    }
}

#[test]
fn no_jitter_is_the_exact_wait() {
    for seed in 0..1000 {
        assert_eq!(spread_ns(2_500_000_000, 0, fraction(seed)), 2_500_000_000);
    }
}

/// Consecutive clock readings (nanoseconds apart, as requests are) fall into ten equal
/// buckets of the range about equally: a chi-square statistic over 100 000 seeds under
/// 27.9, the 0.1 % critical value for nine degrees of freedom. A spread that clumped
/// (every seed in one bucket, or the low bits ignored) is far above it.
#[test]
fn spread_waits_are_about_uniform_over_the_range() {
    const N: u64 = 100_000;
    let exact_ns = 10_000_000_000u64;
    let mut buckets = [0u64; 10];
    for seed in 1_700_000_000_000_000_000..1_700_000_000_000_000_000 + N {
        let extra = spread_ns(exact_ns, MAX_JITTER_PPM, fraction(seed)) - exact_ns;
        let at = usize::try_from(extra * 10 / exact_ns).unwrap_or(9).min(9);
        buckets[at] += 1;
    }
    let expected = N as f64 / 10.0;
    let chi: f64 = buckets
        .iter()
        .map(|&n| (n as f64 - expected).powi(2) / expected)
        .sum();
    assert!(chi < 27.9, "chi-square {chi} over {buckets:?}");
}

#[test]
fn the_largest_draw_stays_under_the_ceiling() {
    // u just under 1: the ceiling is reached but not passed.
    assert_eq!(
        spread_ns(1_000_000_000, MAX_JITTER_PPM, u32::MAX),
        1_999_999_999
    );
    assert_eq!(spread_ns(u64::MAX, MAX_JITTER_PPM, u32::MAX), u64::MAX);
}
