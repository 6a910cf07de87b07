//! The gRPC port's per-connection and per-call bounds: how many calls one HTTP/2
//! connection may carry at once, and how long one call may take.
//!
//! Why: without them a connection could open streams without bound, each buffering a
//! request body of up to a stream window (64 KB) that a trickle of DATA frames keeps
//! alive, since every DATA frame is activity to the idle timer. With them, a connection
//! holds at most `--max-concurrent-streams` calls (a stream beyond is refused with
//! `RST_STREAM(REFUSED_STREAM)`, and Envoy opens another connection instead), and each call,
//! its request body included, ends after `--call-timeout-ms` (answered `CANCELLED`).

use clap::Args;
use std::time::Duration;

/// The default of `--max-concurrent-streams`.
///
/// An Envoy worker keeps one HTTP/2 connection to the service and multiplexes its calls
/// over it; a call lasts a millisecond or so, so 256 calls in flight carry hundreds of
/// thousands of decisions per second per connection. Past the limit Envoy opens another
/// connection (it honours the server's `SETTINGS_MAX_CONCURRENT_STREAMS`) rather than
/// failing the call. 256 streams of 64 KB bound what one connection can make the server
/// buffer to 16 MB.
pub const DEFAULT_MAX_CONCURRENT_STREAMS: u32 = 256;

/// The default of `--call-timeout-ms`: far above any decision (microseconds in memory,
/// `--redis-timeout-ms` against Redis) and above Envoy's own RLS timeout (20 ms by
/// default), so only a stalled or trickled call reaches it.
pub const DEFAULT_CALL_TIMEOUT_MS: u64 = 2_000;

/// The gRPC port's stream and call bounds.
#[derive(Debug, Clone, Args)]
pub struct CallArgs {
    /// Calls (HTTP/2 streams) one gRPC connection may carry at once, advertised in
    /// SETTINGS_MAX_CONCURRENT_STREAMS; a stream beyond is refused (Envoy then opens
    /// another connection).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CONCURRENT_STREAMS,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_concurrent_streams: u32,

    /// The longest one gRPC call may take, reading its request included, in
    /// milliseconds; a call still running then is answered CANCELLED and its stream
    /// closed. A client's shorter grpc-timeout applies too.
    #[arg(long, value_name = "MS", default_value_t = DEFAULT_CALL_TIMEOUT_MS,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub call_timeout_ms: u64,
}

impl CallArgs {
    /// The per-call timeout.
    pub fn call_timeout(&self) -> Duration {
        Duration::from_millis(self.call_timeout_ms)
    }
}
