use super::*;

const S: u64 = 1_000_000_000;

#[test]
fn one_line_per_cause_per_period_with_the_count_held_back() {
    let mut t = LogThrottle::default();
    let start = 1_000 * S;
    assert_eq!(t.admit(Cause::RlsNotSent, start), Some(0));
    for i in 1..1_000 {
        assert_eq!(t.admit(Cause::RlsNotSent, start + i * 9 * S / 1_000), None);
    }
    // Another cause is not held back by the first.
    assert_eq!(t.admit(Cause::Resume, start + S), Some(0));
    assert_eq!(t.admit(Cause::RlsNotSent, start + PERIOD_NS), Some(999));
    assert_eq!(t.admit(Cause::RlsNotSent, start + PERIOD_NS + 1), None);
    assert_eq!(t.admit(Cause::RlsNotSent, start + 3 * PERIOD_NS), Some(1));
}

#[test]
fn a_clock_going_back_does_not_silence_a_cause() {
    let mut t = LogThrottle::default();
    assert_eq!(t.admit(Cause::AddHeader, 100 * S), Some(0));
    assert_eq!(t.admit(Cause::AddHeader, 50 * S), Some(0));
}

#[test]
fn lines_say_how_many_were_held_back() {
    assert_eq!(with_held_back("x failed", 0), "x failed");
    assert_eq!(
        with_held_back("x failed", 7),
        "x failed (7 more like this not logged in the last 10 s)"
    );
}
