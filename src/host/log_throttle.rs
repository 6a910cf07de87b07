//! Log lines about failures that can happen on every request, at most one per cause
//! per period.
//!
//! When the rate limit service is unreachable or Envoy's circuit breaker overflows,
//! every request fails the same way: a warning per request would flood Envoy's log
//! (thousands of identical lines a second) and bury everything else. The counters
//! already count each failure; the log only needs to say that it is happening. So the
//! first failure of a cause is logged at once, later ones within [`PERIOD_NS`] are only
//! counted here, and the next line logged for that cause says how many were left out.

/// How long after a logged line the same cause stays quiet: 10 seconds.
pub const PERIOD_NS: u64 = 10_000_000_000;

/// Failures logged per request, each throttled on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum Cause {
    /// The call to the rate limit service could not be started.
    RlsNotSent,
    /// The rate limit service call ended with an error status.
    RlsFailed,
    /// The request's context could not be made current for its answer.
    SwitchContext,
    /// A paused request could not be resumed.
    Resume,
    /// A header could not be added.
    AddHeader,
    /// A local reply could not be sent.
    LocalReply,
    /// This thread's tally was in use when a request needed it.
    TallyBusy,
    /// A response body chunk could not be read for its usage (only the response-cost
    /// build reads bodies).
    #[cfg_attr(not(feature = "response-cost"), allow(dead_code))]
    ResponseBody,
}

const CAUSES: usize = 8;

/// When each cause last logged, and how many lines it has held back since.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogThrottle {
    last_ns: [Option<u64>; CAUSES],
    held_back: [u64; CAUSES],
}

impl LogThrottle {
    /// Nothing logged yet, in a constant (the thread-local throttle is built in one:
    /// see [`crate::host::log`]).
    pub const fn new() -> LogThrottle {
        LogThrottle {
            last_ns: [None; CAUSES],
            held_back: [0; CAUSES],
        }
    }

    /// Whether a line for `cause` may be logged at `now_ns`: `Some(n)` with the number of
    /// lines held back since the last one, or `None` to stay quiet (and count it). A
    /// clock that goes backwards never silences a cause for longer than one period.
    pub fn admit(&mut self, cause: Cause, now_ns: u64) -> Option<u64> {
        let i = cause as usize;
        let quiet = self.last_ns[i].is_some_and(|last| now_ns >= last && now_ns - last < PERIOD_NS);
        if quiet {
            self.held_back[i] += 1;
            return None;
        }
        self.last_ns[i] = Some(now_ns);
        Some(std::mem::take(&mut self.held_back[i]))
    }
}

/// `line`, saying how many like it were held back before it.
pub fn with_held_back(line: &str, held_back: u64) -> String {
    if held_back == 0 {
        line.to_string()
    } else {
        format!("{line} ({held_back} more like this not logged in the last 10 s)")
    }
}

#[cfg(test)]
mod tests;
