//! Which protocol a client speaks, told apart exactly as Envoy does, and gRPC-Web's
//! framing of a status; [`code`] holds the gRPC status codes floodgate names.
//!
//! A rejection must be in the client's protocol or the client reads it as success:
//!
//! - **gRPC** is what Envoy's own gRPC code (`Grpc::Common::hasGrpcContentType`) calls
//!   gRPC: a `content-type` of exactly `application/grpc`, or `application/grpc+`
//!   followed by anything, compared case-sensitively. Envoy frames a local reply to such
//!   a request as a trailers-only gRPC answer itself, and *only* for such a request: for
//!   anything else a gRPC status handed to it is ignored and the reply goes out as
//!   plain HTTP.
//! - **gRPC-Web** is one of the four content types Envoy's `grpc_web` filter accepts
//!   (again exact, case-sensitive). Without that filter in front of us, Envoy sees no
//!   gRPC in the request, so we build the gRPC-Web answer ourselves: HTTP 200, the
//!   request's content type, `grpc-status` and `grpc-message` as headers (a trailers-only
//!   answer), and the same status as a gRPC-Web trailer frame in the body (Envoy drops
//!   the `content-type` of a local reply without a body, and clients that read the
//!   status from the body find it there).
//! - Anything else, `Application/gRPC` and `application/grpc-web+json` included, is
//!   plain HTTP and gets the configured HTTP status.

/// How a rejection must be framed for the client to understand it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// Plain HTTP: the HTTP status says it all.
    Http,
    /// gRPC: Envoy frames the trailers-only reply from the status we give it.
    Grpc,
    /// gRPC-Web with this `content-type`; `text` for the base64 variants.
    GrpcWeb {
        /// The request's content type, echoed in the reply.
        content_type: &'static str,
        /// Whether the body is base64 text (`application/grpc-web-text…`).
        text: bool,
    },
}

/// The gRPC-Web content types Envoy's `grpc_web` filter accepts, with whether each is
/// the base64 text variant.
const GRPC_WEB: [(&str, bool); 4] = [
    ("application/grpc-web", false),
    ("application/grpc-web+proto", false),
    ("application/grpc-web-text", true),
    ("application/grpc-web-text+proto", true),
];

/// The protocol of a request with this `content-type` (`None`: no such header).
pub fn classify(content_type: Option<&[u8]>) -> Protocol {
    let Some(ct) = content_type else {
        return Protocol::Http;
    };
    if let Some(rest) = ct.strip_prefix(b"application/grpc") {
        if rest.is_empty() || rest.starts_with(b"+") {
            return Protocol::Grpc;
        }
    }
    GRPC_WEB
        .iter()
        .find(|(name, _)| name.as_bytes() == ct)
        .map_or(Protocol::Http, |&(content_type, text)| Protocol::GrpcWeb {
            content_type,
            text,
        })
}

/// A `grpc-message` value as the gRPC protocol encodes it: printable ASCII except `%`
/// as is, every other byte as `%XX`. Also what keeps a message free of CR and LF.
pub fn percent_encode(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for b in message.bytes() {
        if (0x20..=0x7e).contains(&b) && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The body of a gRPC-Web answer carrying only a status: one trailer frame (flag
/// `0x80`, big-endian length, then `grpc-status` and `grpc-message` as HTTP/1 header
/// lines), base64-encoded for the text variants.
pub fn grpc_web_status_body(code: u32, message: &str, text: bool) -> Vec<u8> {
    let trailers = format!(
        "grpc-status:{code}\r\ngrpc-message:{}\r\n",
        percent_encode(message)
    );
    let mut frame = Vec::with_capacity(5 + trailers.len());
    frame.push(0x80);
    frame.extend_from_slice(&(trailers.len() as u32).to_be_bytes());
    frame.extend_from_slice(trailers.as_bytes());
    if text {
        base64(&frame).into_bytes()
    } else {
        frame
    }
}

/// Standard base64 with padding (what gRPC-Web text bodies use).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

pub mod code;

#[cfg(test)]
mod tests;
