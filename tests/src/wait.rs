//! Polling for a condition instead of sleeping for a guess, and keeping a test's counted
//! requests inside one fixed window.

use std::future::Future;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Polls `probe` every 20 ms until it returns `Some`, or panics after `timeout` with
/// `what` in the message.
pub async fn until<T, F, Fut>(what: &str, timeout: Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// How far past a window's boundary [`clear_of_window_end`] waits: floodgate-server reads
/// the wall clock once at start and runs on the monotonic clock from there, so its "now"
/// may differ from this process's by a little; a quarter of a second covers that.
const PAST_BOUNDARY: Duration = Duration::from_millis(250);

/// Returns once at least `needed` is left before the end of the current fixed window of
/// length `window`: at once when there is, else just past the boundary.
///
/// Why: floodgate-server's fixed windows are aligned to the Unix epoch on the wall clock
/// (the memory store's clock and Redis's `TIME` alike), so a test whose burst straddles a
/// boundary sees its count start afresh and admits more than the limit. A test that is
/// about a fixed window calls this right before its first counted request, with `needed`
/// a generous bound on how long its counted part takes: then no boundary falls inside it.
/// The wait is at most `needed` (plus a quarter second), and only in the share of runs
/// that start that close to a boundary. "Left" is counted as the server may see it: its
/// clock may be a little ahead of or behind this one ([`PAST_BOUNDARY`] either way).
pub async fn clear_of_window_end(window: Duration, needed: Duration) {
    assert!(
        needed + 2 * PAST_BOUNDARY <= window,
        "a window of {window:?} never has {needed:?} left"
    );
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970");
    let into = now.as_nanos() % window.as_nanos();
    let left = Duration::from_nanos(
        u64::try_from(window.as_nanos() - into).expect("a window shorter than 584 years"),
    );
    if left < needed + PAST_BOUNDARY {
        tokio::time::sleep(left + PAST_BOUNDARY).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Left in the current window of `window` by this process's clock.
    fn left(window: Duration) -> Duration {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("after 1970");
        let into = now.as_nanos() % window.as_nanos();
        Duration::from_nanos(u64::try_from(window.as_nanos() - into).expect("short"))
    }

    #[tokio::test]
    async fn returns_with_what_is_needed_left_in_the_window() {
        // Windows of 2 s and a need of 1.5 s; the second call comes with less left than
        // that, so it has to wait for the next window.
        let (window, needed) = (Duration::from_secs(2), Duration::from_millis(1_500));
        for _ in 0..2 {
            clear_of_window_end(window, needed).await;
            let left = left(window);
            assert!(left >= needed, "{left:?} left of {window:?}");
            tokio::time::sleep(left - needed / 2).await;
        }
    }
}
