//! What a gRPC connection runs over: plain TCP, or TLS over TCP ([`crate::tls`]). The
//! connection guard ([`super::Guarded`]) and HTTP/2 sit on top and see plaintext either way.

use crate::tls::{Peer, TlsConn};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tonic::transport::server::Connected;

/// The stream under HTTP/2.
#[derive(Debug)]
pub enum Transport {
    /// Plaintext h2c.
    Plain(TcpStream),
    /// TLS, its handshake run by the first reads and writes.
    Tls(Box<TlsConn>),
}

/// What every request on a connection knows about its peer (in the request's extensions).
#[derive(Debug, Clone)]
pub struct PeerInfo {
    /// The client's address.
    pub remote: Option<SocketAddr>,
    /// Over TLS: the peer, once the handshake has filled it in.
    tls: Option<Arc<OnceLock<Peer>>>,
}

impl PeerInfo {
    /// The SAN DNS names and URIs of the client's verified certificate; none over
    /// plaintext or without a client certificate.
    pub fn identities(&self) -> &[String] {
        self.tls
            .as_ref()
            .and_then(|p| p.get())
            .map_or(&[], |p| p.identities.as_slice())
    }
}

impl Transport {
    /// The peer as requests will see it.
    pub fn peer_info(&self) -> PeerInfo {
        match self {
            Transport::Plain(s) => PeerInfo {
                remote: s.peer_addr().ok(),
                tls: None,
            },
            Transport::Tls(t) => PeerInfo {
                remote: t.remote(),
                tls: Some(t.peer()),
            },
        }
    }

    fn project(self: Pin<&mut Self>) -> Pin<&mut dyn AsyncReadWrite> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s),
            Transport::Tls(t) => Pin::new(t.as_mut()),
        }
    }
}

impl Connected for Transport {
    type ConnectInfo = PeerInfo;

    fn connect_info(&self) -> PeerInfo {
        self.peer_info()
    }
}

/// Both halves, for [`Transport::project`].
trait AsyncReadWrite: AsyncRead + AsyncWrite + Unpin {}
impl<T: AsyncRead + AsyncWrite + Unpin> AsyncReadWrite for T {}

impl AsyncRead for Transport {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.project().poll_read(cx, buf)
    }
}

impl AsyncWrite for Transport {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.project().poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.project().poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Transport::Plain(s) => s.is_write_vectored(),
            Transport::Tls(t) => t.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().poll_shutdown(cx)
    }
}
