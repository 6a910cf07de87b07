//! The units of time a limit is counted in, and their lengths, written once: the server
//! counts windows in them, and the filter reads a service's limit (a unit and a
//! multiplier) as a window length in seconds.

/// Nanoseconds per second.
pub const NANOS_PER_SECOND: u64 = 1_000_000_000;

/// Nanoseconds per millisecond.
pub const NANOS_PER_MS: u64 = 1_000_000;

/// The time unit a limit is counted in, as the envoyproxy/ratelimit configuration names
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unit {
    /// One second.
    Second,
    /// Sixty seconds.
    Minute,
    /// 3,600 seconds.
    Hour,
    /// 86,400 seconds (no leap seconds, no time zones: windows align to the Unix epoch).
    Day,
    /// Seven days. The RLS response enum has no week: floodgate-server sends it as
    /// `UNKNOWN`.
    Week,
    /// 30 days, as the reference service counts a month (not calendar months: windows
    /// align to the Unix epoch like every other unit).
    Month,
    /// 365 days, as the reference service counts a year.
    Year,
}

impl Unit {
    /// Every unit, shortest first.
    pub const ALL: [Unit; 7] = [
        Unit::Second,
        Unit::Minute,
        Unit::Hour,
        Unit::Day,
        Unit::Week,
        Unit::Month,
        Unit::Year,
    ];

    /// The unit's length in seconds.
    pub const fn seconds(self) -> u64 {
        match self {
            Unit::Second => 1,
            Unit::Minute => 60,
            Unit::Hour => 3_600,
            Unit::Day => 86_400,
            Unit::Week => 604_800,
            Unit::Month => 2_592_000,
            Unit::Year => 31_536_000,
        }
    }

    /// The unit's length in nanoseconds.
    pub const fn period_ns(self) -> u64 {
        self.seconds() * NANOS_PER_SECOND
    }

    /// The name used in configuration and logs.
    pub const fn name(self) -> &'static str {
        match self {
            Unit::Second => "second",
            Unit::Minute => "minute",
            Unit::Hour => "hour",
            Unit::Day => "day",
            Unit::Week => "week",
            Unit::Month => "month",
            Unit::Year => "year",
        }
    }
}

/// A protobuf `Duration` or `Timestamp` (`seconds`, `nanos`) as nanoseconds: 0 when
/// negative, `u64::MAX` when longer. The filter reads a service's `duration_until_reset`
/// and a grant's `valid_until` through it; the server writes both with [`to_parts`].
pub fn from_parts(seconds: i64, nanos: i32) -> u64 {
    let ns = i128::from(seconds) * i128::from(NANOS_PER_SECOND) + i128::from(nanos);
    u64::try_from(ns.max(0)).unwrap_or(u64::MAX)
}

/// Nanoseconds as a protobuf `Duration`'s or `Timestamp`'s `seconds` and `nanos`.
pub fn to_parts(ns: u64) -> (i64, i32) {
    (
        i64::try_from(ns / NANOS_PER_SECOND).unwrap_or(i64::MAX),
        i32::try_from(ns % NANOS_PER_SECOND).unwrap_or(0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_unit_is_a_whole_number_of_the_one_before() {
        assert_eq!(Unit::Minute.seconds(), 60 * Unit::Second.seconds());
        assert_eq!(Unit::Hour.seconds(), 60 * Unit::Minute.seconds());
        assert_eq!(Unit::Day.seconds(), 24 * Unit::Hour.seconds());
        assert_eq!(Unit::Week.seconds(), 7 * Unit::Day.seconds());
        assert_eq!(Unit::Month.seconds(), 30 * Unit::Day.seconds());
        assert_eq!(Unit::Year.seconds(), 365 * Unit::Day.seconds());
        for unit in Unit::ALL {
            assert_eq!(unit.period_ns(), unit.seconds() * 1_000_000_000);
        }
    }

    #[test]
    fn parts_read_as_nanoseconds_clamped_and_back() {
        assert_eq!(from_parts(2, 500), 2 * NANOS_PER_SECOND + 500);
        assert_eq!(from_parts(-1, 0), 0);
        assert_eq!(from_parts(i64::MAX, 999_999_999), u64::MAX);
        for ns in [
            0,
            1,
            NANOS_PER_SECOND - 1,
            NANOS_PER_SECOND,
            1 << 62,
            u64::MAX,
        ] {
            let (seconds, nanos) = to_parts(ns);
            assert_eq!(from_parts(seconds, nanos), ns, "{ns}");
        }
    }

    #[test]
    fn names_are_the_configuration_s() {
        let names: Vec<&str> = Unit::ALL.iter().map(|u| u.name()).collect();
        assert_eq!(
            names,
            ["second", "minute", "hour", "day", "week", "month", "year"]
        );
    }
}
