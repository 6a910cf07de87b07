//! Polling for a condition instead of sleeping for a guess.

use std::future::Future;
use std::time::{Duration, Instant};

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
