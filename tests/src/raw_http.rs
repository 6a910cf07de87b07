//! HTTP/1.1 spoken by hand: requests no client library would send (a header twice,
//! bytes that are not UTF-8) and responses read as the bytes on the wire, so that a
//! test can see exactly which header lines came back.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// How long a response may take before the test calls it hung.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// A response as it came over the wire.
#[derive(Debug, Clone)]
pub struct RawResponse {
    /// Everything received, head and body.
    pub bytes: Vec<u8>,
}

impl RawResponse {
    /// The status code from the status line (0 if there is none).
    pub fn status(&self) -> u16 {
        let text = String::from_utf8_lossy(&self.bytes);
        text.split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or(0)
    }

    /// The head: status line and header lines, up to the blank line.
    pub fn head(&self) -> String {
        let text = String::from_utf8_lossy(&self.bytes);
        text.split("\r\n\r\n")
            .next()
            .unwrap_or_default()
            .to_string()
    }

    /// The header lines (lower-case names), as (name, value).
    pub fn headers(&self) -> Vec<(String, String)> {
        self.head()
            .split("\r\n")
            .skip(1)
            .filter_map(|line| {
                let (name, value) = line.split_once(':')?;
                Some((name.to_ascii_lowercase(), value.trim().to_string()))
            })
            .collect()
    }

    /// The first value of header `name`.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers()
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
    }

    /// The body: everything after the head.
    pub fn body(&self) -> Vec<u8> {
        match self.bytes.windows(4).position(|w| w == b"\r\n\r\n") {
            Some(at) => self.bytes[at + 4..].to_vec(),
            None => Vec::new(),
        }
    }
}

/// Sends `GET path` to `addr` with these header lines (raw bytes, sent in order, a
/// name repeated if listed twice) and `connection: close`, and reads the response
/// until Envoy closes the connection. Panics if that takes longer than 10 s.
pub async fn get(addr: SocketAddr, path: &str, headers: &[(&str, &[u8])]) -> RawResponse {
    let stream = TcpStream::connect(addr).await.expect("connect to envoy");
    exchange(stream, path, headers).await
}

/// Like [`get`], from the local address `from` (any of 127.0.0.0/8 reaches a listener on
/// 127.0.0.1): a distinct client address for rules keyed by `remote_address`.
pub async fn get_from(
    from: IpAddr,
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &[u8])],
) -> RawResponse {
    let socket = TcpSocket::new_v4().expect("socket");
    socket
        .bind(SocketAddr::new(from, 0))
        .unwrap_or_else(|e| panic!("bind {from}: {e}"));
    let stream = socket.connect(addr).await.expect("connect to envoy");
    exchange(stream, path, headers).await
}

async fn exchange(mut stream: TcpStream, path: &str, headers: &[(&str, &[u8])]) -> RawResponse {
    let mut request = format!("GET {path} HTTP/1.1\r\nhost: test\r\n").into_bytes();
    for (name, value) in headers {
        request.extend_from_slice(name.as_bytes());
        request.extend_from_slice(b": ");
        request.extend_from_slice(value);
        request.extend_from_slice(b"\r\n");
    }
    request.extend_from_slice(b"connection: close\r\n\r\n");
    stream.write_all(&request).await.expect("send request");
    let mut bytes = Vec::new();
    tokio::time::timeout(READ_TIMEOUT, stream.read_to_end(&mut bytes))
        .await
        .unwrap_or_else(|_| panic!("GET {path}: no complete response within {READ_TIMEOUT:?}"))
        .expect("read response");
    RawResponse { bytes }
}
