//! One connection under its port's timeouts: a handshake deadline, then an idle timeout
//! measured from the last activity, where what counts as activity is the port's [`Watch`].
//!
//! The timers are polled from the connection's own reads and writes: when one would wait,
//! the timer is polled too, and once it says so the read or write fails, which makes the
//! HTTP layer close the connection. No task per connection; nothing on the request path
//! but a few comparisons per frame and a clock read when a call's frame passes.
//!
//! `Guarded` wraps whatever stream the HTTP layer reads (TCP, or on the gRPC port a
//! [`super::Transport`] that may be TLS, so that the watcher sees plaintext frames), and
//! holds the connection's [`Ticket`], so its place under the port's caps is given back
//! when it closes. Under TLS the HTTP/2 server first waits to *write* its SETTINGS, which
//! cannot happen before the TLS handshake: the timer polled on writes is what closes a
//! client stalled mid-handshake.

use super::admit::Ticket;
use super::frames::Frames;
use super::metrics::{Closed, ConnectionMetrics};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};
use tonic::transport::server::Connected;

/// What counts as activity on a connection, and when its handshake is over.
pub trait Watch: Send + Unpin {
    /// `bytes` just read from the peer: whether they carry a call.
    fn read(&mut self, bytes: &[u8]) -> bool;
    /// `bytes` just written to the peer: whether they carry a call.
    fn wrote(&mut self, bytes: &[u8]) -> bool;
    /// Whether the handshake is still under way (its deadline applies, not the idle one).
    fn handshaking(&self) -> bool;
}

/// The gRPC port: HTTP/2 frames that carry a call, either way (see [`super::frames`]);
/// the handshake is the client's preface.
#[derive(Debug)]
pub struct Http2 {
    from_client: Frames,
    from_server: Frames,
}

impl Default for Http2 {
    fn default() -> Self {
        Http2 {
            from_client: Frames::from_client(),
            from_server: Frames::from_server(),
        }
    }
}

impl Watch for Http2 {
    fn read(&mut self, bytes: &[u8]) -> bool {
        self.from_client.feed(bytes)
    }

    fn wrote(&mut self, bytes: &[u8]) -> bool {
        self.from_server.feed(bytes)
    }

    fn handshaking(&self) -> bool {
        self.from_client.in_preface()
    }
}

/// The HTTP port: any byte either way (its request heads are timed by the HTTP/1 layer
/// itself); no handshake.
#[derive(Debug, Default)]
pub struct AnyByte;

impl Watch for AnyByte {
    fn read(&mut self, bytes: &[u8]) -> bool {
        !bytes.is_empty()
    }

    fn wrote(&mut self, bytes: &[u8]) -> bool {
        !bytes.is_empty()
    }

    fn handshaking(&self) -> bool {
        false
    }
}

/// A connection's deadlines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// How long the handshake may take (ignored by a [`Watch`] without one).
    pub handshake: Duration,
    /// How long the connection may carry no activity.
    pub idle: Duration,
}

/// What the connection's timer firing means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expiry {
    /// Close it.
    Close(Closed),
    /// Not yet: look again at this instant.
    Rearm(Instant),
}

/// Decides what the timer firing at `now` means for a connection still `handshaking` (its
/// timer was set for the handshake deadline) or whose last activity was `last_activity`.
fn on_timer(handshaking: bool, last_activity: Instant, now: Instant, t: &Timeouts) -> Expiry {
    if handshaking {
        return Expiry::Close(Closed::HandshakeTimeout);
    }
    let idle_at = last_activity + t.idle;
    if now >= idle_at {
        Expiry::Close(Closed::IdleTimeout)
    } else {
        Expiry::Rearm(idle_at)
    }
}

/// A connection under its port's timeouts; counted open until dropped.
#[derive(Debug)]
pub struct Guarded<IO, W> {
    io: IO,
    watch: W,
    timer: Pin<Box<Sleep>>,
    last_activity: Instant,
    handshaking: bool,
    expired: Option<Closed>,
    timeouts: Timeouts,
    metrics: Arc<ConnectionMetrics>,
    _ticket: Ticket,
}

impl<IO, W: Watch> Guarded<IO, W> {
    /// `io`, admitted with `ticket`, watched by `watch`.
    pub fn new(
        io: IO,
        watch: W,
        ticket: Ticket,
        timeouts: Timeouts,
        metrics: Arc<ConnectionMetrics>,
    ) -> Self {
        metrics.opened();
        let now = Instant::now();
        let handshaking = watch.handshaking();
        let first = if handshaking {
            timeouts.handshake
        } else {
            timeouts.idle
        };
        Guarded {
            io,
            watch,
            timer: Box::pin(tokio::time::sleep_until(now + first)),
            last_activity: now,
            handshaking,
            expired: None,
            timeouts,
            metrics,
            _ticket: ticket,
        }
    }

    /// Notes that bytes moved: `call` if they carried one. The end of the handshake counts
    /// as activity too (the idle timeout runs from then).
    fn moved(&mut self, call: bool) {
        let handshake_done = self.handshaking && !self.watch.handshaking();
        if handshake_done {
            self.handshaking = false;
        }
        if call || handshake_done {
            self.last_activity = Instant::now();
        }
    }

    /// Called when a read or write would wait: fails it once the timer says to close.
    fn poll_expiry(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        loop {
            if let Some(why) = self.expired {
                return Poll::Ready(closed_error(why));
            }
            if self.timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            let now = Instant::now();
            match on_timer(self.handshaking, self.last_activity, now, &self.timeouts) {
                Expiry::Close(why) => {
                    self.metrics.closed(why);
                    tracing::debug!(reason = why.label(), "closing a connection");
                    self.expired = Some(why);
                }
                Expiry::Rearm(at) => self.timer.as_mut().reset(at),
            }
        }
    }
}

fn closed_error(why: Closed) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!("connection closed by the server: {}", why.label()),
    )
}

impl<IO, W> Drop for Guarded<IO, W> {
    fn drop(&mut self) {
        self.metrics.gone();
    }
}

impl<IO: Connected, W> Connected for Guarded<IO, W> {
    type ConnectInfo = IO::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}

impl<IO: AsyncRead + Unpin, W: Watch> AsyncRead for Guarded<IO, W> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let call = this.watch.read(&buf.filled()[before..]);
                this.moved(call);
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => this.poll_expiry(cx).map(Err),
        }
    }
}

impl<IO: AsyncWrite + Unpin, W: Watch> AsyncWrite for Guarded<IO, W> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.io).poll_write(cx, buf) {
            Poll::Ready(Ok(n)) => {
                let call = this.watch.wrote(&buf[..n]);
                this.moved(call);
                Poll::Ready(Ok(n))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            // A peer that reads nothing must not hold the connection either.
            Poll::Pending => this.poll_expiry(cx).map(Err),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.io).poll_write_vectored(cx, bufs) {
            Poll::Ready(Ok(n)) => {
                let mut left = n;
                let mut call = false;
                for b in bufs {
                    if left == 0 {
                        break;
                    }
                    let take = left.min(b.len());
                    call |= this.watch.wrote(&b[..take]);
                    left -= take;
                }
                this.moved(call);
                Poll::Ready(Ok(n))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => this.poll_expiry(cx).map(Err),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match Pin::new(&mut this.io).poll_flush(cx) {
            Poll::Pending => this.poll_expiry(cx).map(Err),
            done => done,
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Timeouts = Timeouts {
        handshake: Duration::from_secs(5),
        idle: Duration::from_secs(60),
    };

    #[tokio::test]
    async fn the_handshake_deadline_closes_and_idleness_is_measured_from_the_last_call() {
        let t0 = Instant::now();
        assert_eq!(
            on_timer(true, t0, t0, &T),
            Expiry::Close(Closed::HandshakeTimeout)
        );
        let later = t0 + Duration::from_secs(30);
        assert_eq!(on_timer(false, t0, later, &T), Expiry::Rearm(t0 + T.idle));
        assert_eq!(
            on_timer(false, t0, t0 + T.idle, &T),
            Expiry::Close(Closed::IdleTimeout)
        );
    }

    #[test]
    fn http2_counts_only_call_frames_and_ends_the_handshake_with_the_preface() {
        let mut w = Http2::default();
        assert!(w.handshaking());
        assert!(!w.read(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"));
        assert!(!w.handshaking());
        let ping = [0, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
        assert!(!w.read(&ping));
        assert!(!w.wrote(&ping), "nor its acknowledgement");
        assert!(w.wrote(&[0, 0, 0, 1, 4, 0, 0, 0, 1]), "an answer's HEADERS");
        assert!(AnyByte.read(b"G") && !AnyByte.handshaking());
    }
}
