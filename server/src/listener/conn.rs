//! One gRPC connection under the listener's [`Limits`]: its handshake and idle timers.
//!
//! The timers are polled from the connection's own reads: when a read would wait, the
//! timer is polled too, and once it says so the read fails, which makes hyper close the
//! connection. No task per connection; the request path gains one clock read per socket
//! read or write. Under TLS the guard wraps the TLS stream: it sees plaintext, and the
//! handshake timer covers the TLS handshake and the HTTP/2 preface together.

use super::transport::{PeerInfo, Transport};
use super::{Closed, ConnectionMetrics, Limits, PREFACE_LEN};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};
use tonic::transport::server::Connected;

/// Where a connection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// This many bytes of the preface are still to come.
    Handshake(usize),
    /// The preface is in; the idle timeout applies.
    Serving,
}

/// What the connection's timer firing means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expiry {
    /// Close it.
    Close(Closed),
    /// Not yet: look again at this instant.
    Rearm(Instant),
}

/// Decides what the timer firing at `now` means for a connection in `phase` whose last
/// byte moved at `last_activity`.
fn on_timer(phase: Phase, last_activity: Instant, now: Instant, limits: &Limits) -> Expiry {
    match phase {
        // The timer was set for the handshake deadline at accept time.
        Phase::Handshake(_) => Expiry::Close(Closed::HandshakeTimeout),
        Phase::Serving => {
            let idle_at = last_activity + limits.idle_timeout;
            if now >= idle_at {
                Expiry::Close(Closed::IdleTimeout)
            } else {
                Expiry::Rearm(idle_at)
            }
        }
    }
}

/// A gRPC connection under the listener's [`Limits`]; counted open until dropped.
#[derive(Debug)]
pub struct Guarded {
    stream: Transport,
    phase: Phase,
    timer: Pin<Box<Sleep>>,
    last_activity: Instant,
    limits: Limits,
    metrics: Arc<ConnectionMetrics>,
}

impl Guarded {
    pub(super) fn new(
        stream: Transport,
        limits: Limits,
        metrics: Arc<ConnectionMetrics>,
    ) -> Guarded {
        metrics.open.inc();
        let now = Instant::now();
        Guarded {
            stream,
            phase: Phase::Handshake(PREFACE_LEN),
            timer: Box::pin(tokio::time::sleep_until(now + limits.handshake_timeout)),
            last_activity: now,
            limits,
            metrics,
        }
    }

    fn moved(&mut self, bytes: usize, read: bool) {
        if bytes == 0 {
            return;
        }
        self.last_activity = Instant::now();
        if let (Phase::Handshake(left), true) = (self.phase, read) {
            self.phase = match left.saturating_sub(bytes) {
                0 => Phase::Serving,
                left => Phase::Handshake(left),
            };
        }
    }

    /// Called when a read would wait: fails the read once the timer says to close.
    fn poll_expiry(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        loop {
            if self.timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            let now = Instant::now();
            match on_timer(self.phase, self.last_activity, now, &self.limits) {
                Expiry::Close(why) => {
                    self.metrics.closed(why);
                    tracing::debug!(reason = ?why, "closing a gRPC connection");
                    return Poll::Ready(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("connection closed by the server: {why:?}"),
                    ));
                }
                Expiry::Rearm(at) => self.timer.as_mut().reset(at),
            }
        }
    }
}

impl Guarded {
    /// A write or flush that would wait polls the timer too: under TLS the HTTP/2 server
    /// first waits to *write* its SETTINGS, which cannot happen before the TLS handshake,
    /// so a client stalled mid-handshake would otherwise never meet its deadline.
    fn or_expiry<T>(
        &mut self,
        p: Poll<io::Result<T>>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<T>> {
        match p {
            Poll::Pending => self.poll_expiry(cx).map(Err),
            ready => ready,
        }
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        self.metrics.open.dec();
    }
}

impl Connected for Guarded {
    type ConnectInfo = PeerInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.stream.peer_info()
    }
}

impl AsyncRead for Guarded {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.stream).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                this.moved(buf.filled().len() - before, true);
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => this.poll_expiry(cx).map(Err),
        }
    }
}

impl AsyncWrite for Guarded {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.stream).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = written {
            this.moved(n, false);
        }
        this.or_expiry(written, cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = written {
            this.moved(n, false);
        }
        this.or_expiry(written, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let flushed = Pin::new(&mut this.stream).poll_flush(cx);
        this.or_expiry(flushed, cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const LIMITS: Limits = Limits {
        max_connections: 10,
        handshake_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(60),
    };

    #[tokio::test]
    async fn the_handshake_deadline_closes_and_idleness_is_measured_from_the_last_byte() {
        let t0 = Instant::now();
        assert_eq!(
            on_timer(Phase::Handshake(24), t0, t0, &LIMITS),
            Expiry::Close(Closed::HandshakeTimeout)
        );
        let later = t0 + Duration::from_secs(30);
        assert_eq!(
            on_timer(Phase::Serving, t0, later, &LIMITS),
            Expiry::Rearm(t0 + LIMITS.idle_timeout)
        );
        assert_eq!(
            on_timer(Phase::Serving, t0, t0 + LIMITS.idle_timeout, &LIMITS),
            Expiry::Close(Closed::IdleTimeout)
        );
    }
}
