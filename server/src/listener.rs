//! The gRPC listener's connections: a bounded number, each closed if it never completes
//! the HTTP/2 preface or goes idle, accepted by a loop that backs off on errors.
//!
//! Why: a connection that never sends a byte used to stay open forever, so 1,100 of them
//! reached the file-descriptor limit; then `accept` failed with EMFILE at once, every time,
//! and the accept loop spun a core while real calls timed out. Here:
//!
//! - **Handshake timeout.** A connection must deliver the 24-byte HTTP/2 client preface
//!   within `--handshake-timeout-ms`, or it is closed (`reason="handshake_timeout"`).
//! - **Idle timeout.** A connection that moves no byte either way for `--idle-timeout-ms`
//!   is closed (`reason="idle_timeout"`). RLS calls are short, so an idle connection has
//!   no call in flight; a client reconnects when it next needs one.
//! - **Limit.** Beyond `--max-connections` open ones, a new connection is accepted and
//!   closed at once (`reason="over_limit"`): the client learns immediately instead of
//!   waiting in the kernel's backlog, and the connections already open keep working.
//! - **Back-off.** An `accept` error (EMFILE, ENFILE, ENOBUFS...) is counted and followed
//!   by a pause, [`FIRST_BACKOFF`] doubling up to [`MAX_BACKOFF`], reset by the next
//!   success; the loop never spins.
//!
//! The timers live in the connection's own reads ([`Guarded`], in `conn.rs`): no task per
//! connection, and nothing on the request path but a clock read per socket read or write.

mod conn;
mod transport;

use crate::metrics::StaticLabels;
use crate::tls::Acceptor;
pub use conn::Guarded;
use futures_util::stream::{self, Stream};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::io;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
pub use transport::{PeerInfo, Transport};

/// The HTTP/2 client connection preface (RFC 9113 §3.4) is this many bytes.
pub const PREFACE_LEN: usize = 24;

/// The first pause after an accept error.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(5);

/// The longest pause between accept attempts while they keep failing.
pub const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// File descriptors kept for everything but gRPC connections when the limit is derived
/// from the process's own (Redis connections, configuration files, the HTTP side).
pub const RESERVED_FDS: u64 = 100;

/// The most connections an automatic limit allows.
pub const MAX_AUTO_CONNECTIONS: u64 = 10_000;

/// The limit where the open-files limit cannot be read.
pub const FALLBACK_MAX_CONNECTIONS: usize = 1_000;

/// `--max-connections 0`: the soft open-files limit (`ulimit -n`) less [`RESERVED_FDS`],
/// between 1 and [`MAX_AUTO_CONNECTIONS`], read from `/proc/self/limits` (Linux); else
/// [`FALLBACK_MAX_CONNECTIONS`].
pub fn automatic_max_connections() -> usize {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|limits| soft_open_files(&limits))
        .map_or(FALLBACK_MAX_CONNECTIONS, |fds| {
            fds.saturating_sub(RESERVED_FDS)
                .clamp(1, MAX_AUTO_CONNECTIONS) as usize
        })
}

/// The soft "Max open files" of a `/proc/PID/limits` text (`None` if absent or unlimited).
fn soft_open_files(limits: &str) -> Option<u64> {
    limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|soft| soft.parse().ok())
}

/// What the listener allows a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Open connections beyond which new ones are closed at once.
    pub max_connections: usize,
    /// How long a new connection has to send the HTTP/2 preface.
    pub handshake_timeout: Duration,
    /// How long a connection may move no byte before it is closed.
    pub idle_timeout: Duration,
}

/// Why the server closed a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// It did not send the HTTP/2 preface in time.
    HandshakeTimeout,
    /// It moved no byte for the idle timeout.
    IdleTimeout,
    /// It arrived while `--max-connections` were open.
    OverLimit,
}

const CLOSED: [(Closed, &str); 3] = [
    (Closed::HandshakeTimeout, "handshake_timeout"),
    (Closed::IdleTimeout, "idle_timeout"),
    (Closed::OverLimit, "over_limit"),
];

/// The listener's metrics, registered with the others by [`crate::metrics::Metrics`].
/// Counting is an atomic operation on a handle created up front.
#[derive(Debug)]
pub struct ConnectionMetrics {
    open: Gauge,
    closed_family: Family<StaticLabels, Counter>,
    closed: [Counter; 3],
    accept_errors: Counter,
}

impl Default for ConnectionMetrics {
    fn default() -> Self {
        let closed_family = Family::<StaticLabels, Counter>::default();
        let closed =
            CLOSED.map(|(_, label)| closed_family.get_or_create_owned(&[("reason", label)]));
        ConnectionMetrics {
            open: Gauge::default(),
            closed_family,
            closed,
            accept_errors: Counter::default(),
        }
    }
}

impl ConnectionMetrics {
    /// gRPC connections open now.
    pub fn open(&self) -> u64 {
        u64::try_from(self.open.get()).unwrap_or(0)
    }

    fn closed(&self, why: Closed) {
        self.closed[why as usize].inc();
    }

    /// Adds these metrics to `registry` (counters' exported names gain `_total`).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "floodgate_connections",
            "gRPC connections open",
            self.open.clone(),
        );
        registry.register(
            "floodgate_connections_closed",
            "gRPC connections the server closed, by reason",
            self.closed_family.clone(),
        );
        registry.register(
            "floodgate_accept_errors",
            "Failed accepts on the gRPC port (e.g. out of file descriptors), each followed by a back-off",
            self.accept_errors.clone(),
        );
    }
}

/// The pause after `current` failed attempts' pause: doubled, at most [`MAX_BACKOFF`].
pub fn next_backoff(current: Option<Duration>) -> Duration {
    current.map_or(FIRST_BACKOFF, |d| (d * 2).min(MAX_BACKOFF))
}

/// The connections `listener` accepts, for tonic's `serve_with_incoming`. Never yields an
/// error: failures are counted, logged and waited out here.
///
/// With `tls`, each connection is wrapped in TLS beneath the guard (the handshake runs
/// concurrently, inside the connection's own reads; see [`crate::tls`]).
pub fn incoming(
    listener: TcpListener,
    limits: Limits,
    metrics: Arc<ConnectionMetrics>,
    tls: Option<Arc<Acceptor>>,
) -> impl Stream<Item = Result<Guarded, io::Error>> {
    stream::unfold(
        (listener, None::<Duration>),
        move |(listener, mut backoff)| {
            let metrics = metrics.clone();
            let tls = tls.clone();
            async move {
                loop {
                    match listener.accept().await {
                        Ok((stream, _)) => {
                            backoff = None;
                            if metrics.open() >= limits.max_connections as u64 {
                                metrics.closed(Closed::OverLimit);
                                drop(stream);
                                continue;
                            }
                            let _ = stream.set_nodelay(true);
                            let transport = match &tls {
                                Some(acceptor) => Transport::Tls(Box::new(acceptor.accept(stream))),
                                None => Transport::Plain(stream),
                            };
                            let conn = Guarded::new(transport, limits, metrics);
                            return Some((Ok(conn), (listener, backoff)));
                        }
                        Err(e) => {
                            metrics.accept_errors.inc();
                            if backoff.is_none() {
                                tracing::warn!(error = %e, "cannot accept gRPC connections; backing off");
                            }
                            let pause = next_backoff(backoff);
                            backoff = Some(pause);
                            tokio::time::sleep(pause).await;
                        }
                    }
                }
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_open_files_limit_is_read_from_proc() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max processes             63439                63439                processes\n\
                      Max open files            1024                 524288               files\n";
        assert_eq!(soft_open_files(limits), Some(1024));
        assert_eq!(
            soft_open_files(
                "Max open files            unlimited            unlimited            files"
            ),
            None
        );
        assert_eq!(soft_open_files(""), None);
        assert!(automatic_max_connections() >= 1);
    }

    #[test]
    fn the_backoff_doubles_up_to_its_cap() {
        let mut d = None;
        let mut seen = Vec::new();
        for _ in 0..10 {
            let next = next_backoff(d);
            seen.push(next.as_millis());
            d = Some(next);
        }
        assert_eq!(seen, [5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
    }
}
