//! Both ports' connections: bounded in all and per peer, each closed if it never completes
//! its handshake or carries nothing for a while, accepted by loops that back off on errors,
//! and within a file-descriptor budget that neither port can take from the other.
//!
//! Why: a connection that never sends a byte used to stay open for ever, so enough of
//! them reached the file-descriptor limit; then `accept` failed with EMFILE on *both*
//! ports, and silent connections to the metrics port alone stopped gRPC calls. Here:
//!
//! - **Caps** ([`admit`]). Each port has its own cap on open connections and its own cap
//!   per peer (source IP). Beyond either, a new connection is accepted and closed at once
//!   (`reason="over_limit"` or `"peer_over_limit"`): the client learns immediately instead
//!   of waiting in the kernel's backlog, and the connections already open keep working.
//! - **Descriptor budget.** The caps add up to less than the open-files limit: of `ulimit
//!   -n` descriptors, [`RESERVED_FDS`] are kept for everything but client connections
//!   (Redis, configuration files, the listeners, the runtime), the HTTP port gets its cap
//!   (`--http-max-connections`, 64), and the gRPC port the rest
//!   ([`automatic_max_connections`]). A port at its cap refuses connections instead of
//!   taking descriptors, so each keeps its share whatever arrives at the other.
//! - **gRPC timeouts** ([`conn`], [`frames`]). A connection must deliver the HTTP/2 preface
//!   within `--handshake-timeout-ms` (`handshake_timeout`), then is closed once no frame of
//!   a call (HEADERS, CONTINUATION, DATA) has moved either way for `--idle-timeout-ms`
//!   (`idle_timeout`): PINGs, SETTINGS and WINDOW_UPDATEs do not keep it open.
//! - **HTTP timeouts** ([`http`]). A request's head must arrive within
//!   `--http-header-timeout-ms` of the connection's start or of the previous answer
//!   (`header_timeout`), and a connection that moves no byte for `--http-idle-timeout-ms`
//!   (a client that reads no answer) is closed (`idle_timeout`).
//! - **Back-off** ([`accept`]). An `accept` error is counted and followed by a pause,
//!   5 ms doubling to 1 s, reset by the next success; the loop never spins.
//!
//! The timers live in the connection's own reads and writes: no task per connection.

pub mod accept;
pub mod admit;
mod conn;
pub mod frames;
pub mod http;
pub mod metrics;
mod transport;

pub use admit::{Admission, Caps};
pub use conn::{AnyByte, Guarded, Http2, Timeouts, Watch};
pub use metrics::{Closed, ConnectionMetrics, Port};
pub use transport::{PeerInfo, Transport};

use accept::Acceptor;
use futures_util::stream::{self, Stream};
use std::io;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// File descriptors kept for everything but client connections when a cap is derived
/// from the process's own limit: Redis connections (one per Cluster node), configuration
/// files, the listeners, stdio and the runtime's own.
pub const RESERVED_FDS: u64 = 100;

/// The most connections an automatic gRPC cap allows.
pub const MAX_AUTO_CONNECTIONS: u64 = 10_000;

/// The gRPC cap where the open-files limit cannot be read.
pub const FALLBACK_MAX_CONNECTIONS: usize = 1_000;

/// The soft open-files limit (`ulimit -n`), from `/proc/self/limits` (Linux); `None` if
/// unknown or unlimited.
pub fn open_files_limit() -> Option<u64> {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|limits| soft_open_files(&limits))
}

/// `--max-connections 0`: of `open_files` descriptors, what is left after
/// [`RESERVED_FDS`] and the HTTP port's cap `http_total`, between 1 and
/// [`MAX_AUTO_CONNECTIONS`]; [`FALLBACK_MAX_CONNECTIONS`] where the limit is unknown.
pub fn automatic_max_connections(open_files: Option<u64>, http_total: usize) -> usize {
    open_files.map_or(FALLBACK_MAX_CONNECTIONS, |fds| {
        fds.saturating_sub(RESERVED_FDS)
            .saturating_sub(http_total as u64)
            .clamp(1, MAX_AUTO_CONNECTIONS) as usize
    })
}

/// A warning when the ports' caps and [`RESERVED_FDS`] need more descriptors than
/// `open_files`: then descriptors can run out before a cap is reached.
pub fn budget_warning(open_files: Option<u64>, grpc: usize, http: usize) -> Option<String> {
    let fds = open_files?;
    let needed = (grpc as u64)
        .saturating_add(http as u64)
        .saturating_add(RESERVED_FDS);
    (needed > fds).then(|| {
        format!(
            "--max-connections {grpc} and --http-max-connections {http}, with {RESERVED_FDS} descriptors for the rest, \
             need {needed} descriptors but the open-files limit is {fds}: raise `ulimit -n` or lower the caps"
        )
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

/// What the gRPC port allows a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Open connections, in all and per peer.
    pub caps: Caps,
    /// How long a new connection has to send the HTTP/2 preface, and how long it may then
    /// carry no call.
    pub timeouts: Timeouts,
}

/// What the HTTP port allows a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// Open connections, in all and per peer.
    pub caps: Caps,
    /// How long a request's head may take, from the connection's start or the previous
    /// answer.
    pub header_timeout: Duration,
    /// How long a connection may move no byte.
    pub idle_timeout: Duration,
}

/// The connections `listener` accepts for the gRPC port, for tonic's
/// `serve_with_incoming`. Never yields an error: failures are counted, logged and waited
/// out in [`Acceptor::next`].
///
/// With `tls`, each connection is wrapped in TLS *beneath* the guard: the frame watcher
/// and HTTP/2 see plaintext, and the handshake deadline covers the TLS handshake and the
/// HTTP/2 preface together (the handshake runs inside the connection's own reads and
/// writes, concurrently with every other; see [`crate::tls`]).
pub fn incoming(
    listener: TcpListener,
    limits: Limits,
    metrics: Arc<ConnectionMetrics>,
    tls: Option<Arc<crate::tls::Acceptor>>,
) -> impl Stream<Item = Result<Guarded<Transport, Http2>, io::Error>> {
    let acceptor = Acceptor::new(listener, Port::Grpc, Admission::new(limits.caps), metrics);
    stream::unfold(acceptor, move |mut acceptor| {
        let tls = tls.clone();
        async move {
            let (stream, ticket) = acceptor.next().await;
            let metrics = acceptor.metrics().clone();
            let transport = match &tls {
                Some(t) => Transport::Tls(Box::new(t.accept(stream))),
                None => Transport::Plain(stream),
            };
            let conn = Guarded::new(
                transport,
                Http2::default(),
                ticket,
                limits.timeouts,
                metrics,
            );
            Some((Ok(conn), acceptor))
        }
    })
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
    }

    #[test]
    fn the_descriptor_budget_is_split_between_the_ports() {
        // ulimit -n 256: 100 kept, 64 for HTTP, 92 for gRPC.
        assert_eq!(automatic_max_connections(Some(256), 64), 92);
        assert_eq!(automatic_max_connections(Some(1 << 20), 64), 10_000);
        assert_eq!(automatic_max_connections(Some(64), 64), 1);
        assert_eq!(automatic_max_connections(None, 64), 1_000);
        assert_eq!(budget_warning(Some(256), 92, 64), None);
        assert!(budget_warning(Some(256), 200, 64)
            .unwrap()
            .contains("need 364 descriptors but the open-files limit is 256"));
        assert_eq!(budget_warning(None, 1 << 30, 64), None);
    }
}
