use super::*;

fn s(limit: u32, remaining: u32, reset_s: Option<u64>) -> Standing {
    Standing {
        limit,
        remaining,
        reset_ns: reset_s.map(|r| r * NANOS_PER_SECOND),
    }
}

fn rendered(standings: &[Standing]) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    fields(standings.iter().copied(), |k, v| out.push((k, v)));
    out
}

#[test]
fn the_fewest_remaining_is_shown() {
    let out = rendered(&[s(100, 40, Some(30)), s(10, 3, Some(5)), s(50, 7, Some(60))]);
    assert_eq!(
        out,
        [
            (LIMIT, "10".into()),
            (REMAINING, "3".into()),
            (RESET, "5".into())
        ]
    );
}

#[test]
fn a_tie_on_remaining_shows_the_longer_reset_then_the_first() {
    assert_eq!(
        tightest([s(10, 0, Some(5)), s(20, 0, Some(9))]),
        Some(s(20, 0, Some(9)))
    );
    // Never resetting is the longest of all.
    assert_eq!(
        tightest([s(10, 0, Some(5)), s(30, 0, None)]),
        Some(s(30, 0, None))
    );
    // Equal on both: the first.
    assert_eq!(
        tightest([s(10, 2, Some(5)), s(20, 2, Some(5))]),
        Some(s(10, 2, Some(5)))
    );
}

#[test]
fn a_limit_that_never_resets_has_no_reset_field() {
    assert_eq!(
        rendered(&[s(5, 1, None)]),
        [(LIMIT, "5".into()), (REMAINING, "1".into())]
    );
}

#[test]
fn no_limit_no_fields() {
    assert!(rendered(&[]).is_empty());
}

#[test]
fn the_reset_is_rounded_up_never_down() {
    let one_ns_past = Standing {
        limit: 1,
        remaining: 0,
        reset_ns: Some(2 * NANOS_PER_SECOND + 1),
    };
    assert_eq!(rendered(&[one_ns_past])[2], (RESET, "3".into()));
    assert_eq!(seconds_ceil(0), 0);
    assert_eq!(seconds_ceil(u64::MAX), u64::MAX / NANOS_PER_SECOND + 1);
}
