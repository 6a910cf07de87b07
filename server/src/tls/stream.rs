//! One TLS connection whose handshake runs inside its own first reads and writes.
//!
//! Why lazy: the accept loop hands a connection to the HTTP/2 server at once, and the
//! handshake then progresses as hyper polls it, concurrently with every other connection.
//! A client that stalls mid-handshake holds nobody else up, and the listener's handshake
//! timer (which sees no HTTP/2 preface until the handshake is done) closes it.

use super::{HandshakeError, TlsMetrics};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_rustls::Accept;

/// Who is at the other end, once the handshake has said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Peer {
    /// The SAN DNS names and URIs of the client's verified certificate (none without one).
    pub identities: Vec<String>,
}

enum State {
    Handshaking(Box<Accept<TcpStream>>),
    Ready(Box<TlsStream<TcpStream>>),
    Failed,
}

/// A server-side TLS connection; see the module documentation.
pub struct TlsConn {
    state: State,
    remote: Option<SocketAddr>,
    peer: Arc<OnceLock<Peer>>,
    metrics: Arc<TlsMetrics>,
}

impl std::fmt::Debug for TlsConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConn")
            .field("peer", &self.peer.get())
            .finish()
    }
}

impl TlsConn {
    pub(super) fn new(
        accept: Accept<TcpStream>,
        remote: Option<SocketAddr>,
        metrics: Arc<TlsMetrics>,
    ) -> TlsConn {
        TlsConn {
            state: State::Handshaking(Box::new(accept)),
            remote,
            peer: Arc::new(OnceLock::new()),
            metrics,
        }
    }

    /// The peer, filled in when the handshake completes (requests come only after).
    pub fn peer(&self) -> Arc<OnceLock<Peer>> {
        self.peer.clone()
    }

    /// The client's address.
    pub fn remote(&self) -> Option<SocketAddr> {
        self.remote
    }

    /// The established stream, driving the handshake first; `Pending` while it runs.
    fn ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<&mut TlsStream<TcpStream>>> {
        if let State::Handshaking(accept) = &mut self.state {
            match Pin::new(accept.as_mut()).poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(stream)) => {
                    let identities = stream
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|chain| chain.first())
                        .map(|leaf| super::identity::names(leaf))
                        .unwrap_or_default();
                    let _ = self.peer.set(Peer { identities });
                    self.metrics.handshake_ok();
                    self.state = State::Ready(Box::new(stream));
                }
                Poll::Ready(Err(e)) => {
                    let why = HandshakeError::of(&e);
                    self.metrics.handshake_failed(why);
                    tracing::debug!(error = %e, reason = why.label(), "TLS handshake refused");
                    self.state = State::Failed;
                    return Poll::Ready(Err(e));
                }
            }
        }
        match &mut self.state {
            State::Ready(stream) => Poll::Ready(Ok(stream.as_mut())),
            State::Handshaking(_) | State::Failed => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "the TLS handshake failed",
            ))),
        }
    }
}

impl AsyncRead for TlsConn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut().ready(cx) {
            Poll::Ready(Ok(s)) => Pin::new(s).poll_read(cx, buf),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncWrite for TlsConn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut().ready(cx) {
            Poll::Ready(Ok(s)) => Pin::new(s).poll_write(cx, buf),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut().ready(cx) {
            Poll::Ready(Ok(s)) => Pin::new(s).poll_write_vectored(cx, bufs),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut().ready(cx) {
            Poll::Ready(Ok(s)) => Pin::new(s).poll_flush(cx),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match &mut this.state {
            State::Ready(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            // Nothing of ours to flush: dropping the connection closes it.
            State::Handshaking(_) | State::Failed => Poll::Ready(Ok(())),
        }
    }
}
