//! Which headers from the rate limit service may be added to a request or a response.
//!
//! The service's `request_headers_to_add` and `response_headers_to_add` are added
//! through the host, which writes them as given: a CR/LF in a value becomes an injected
//! header line on HTTP/1.1, a `:status` or `content-length` breaks the response (a 200
//! turned into a 502), a `:path` or `host` rewrites where the upstream request goes, and
//! a `content-length` on a GET hangs it. So every header the service sends is checked
//! here, and a header that fails is dropped (and counted by the caller); the rest of the
//! answer, its verdict included, still holds: one bad header is the service's mistake,
//! not a reason to let traffic through unlimited or to refuse it.

/// Why a header from the service is dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unsafe {
    /// The name is empty or holds a byte that is not an RFC 9110 token character
    /// (pseudo-headers such as `:status` included: `:` is not one).
    BadName,
    /// The value holds a control character (CR, LF, NUL, or any other below 0x20
    /// except tab, or DEL).
    BadValue,
    /// A header that frames the message, routes it, or belongs to one connection hop:
    /// the proxy owns those.
    Reserved,
}

/// Headers only the proxy may set: framing (`content-length`, `transfer-encoding`),
/// routing (`host`) and the hop-by-hop set (RFC 9110 section 7.6.1 and the ones proxies
/// still honour).
const RESERVED: [&str; 13] = [
    "content-length",
    "transfer-encoding",
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "trailers",
    "upgrade",
    "http2-settings",
];

/// Whether `name: value` may be added; `name` as the service sent it.
pub fn check(name: &str, value: &[u8]) -> Result<(), Unsafe> {
    if name.is_empty() || !name.bytes().all(is_token_char) {
        return Err(Unsafe::BadName);
    }
    if RESERVED.iter().any(|r| r.eq_ignore_ascii_case(name)) {
        return Err(Unsafe::Reserved);
    }
    if value.iter().any(|&b| (b < 0x20 && b != b'\t') || b == 0x7f) {
        return Err(Unsafe::BadValue);
    }
    Ok(())
}

/// RFC 9110 `tchar`: letters, digits and ``!#$%&'*+-.^_`|~``.
fn is_token_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests;
