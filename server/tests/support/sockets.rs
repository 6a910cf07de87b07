//! Raw client sockets for hostile-connection tests: connections from a chosen loopback
//! address (every 127.x.y.z is this host on Linux, so one test can be several peers),
//! connections that never speak, and waiting for the server to close one.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpSocket, TcpStream};

/// A connection to `addr` from the loopback address `source` (e.g. `127.0.0.2`).
pub async fn connect_from(addr: SocketAddr, source: IpAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::new(source, 0)).unwrap();
    socket.connect(addr).await.unwrap()
}

/// `127.0.0.N`.
pub fn loopback(n: u8) -> IpAddr {
    IpAddr::from([127, 0, 0, n])
}

/// Opens `n` connections to `addr` that never send a byte.
pub async fn silent_connections(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(TcpStream::connect(addr).await.unwrap());
    }
    out
}

/// Waits (bounded) until the server closes `conn`: reads (the server's own SETTINGS, say)
/// until end of file or an error.
pub async fn closed_by_server(conn: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 4096];
    let until_closed = async {
        loop {
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(within, until_closed).await.is_ok()
}
