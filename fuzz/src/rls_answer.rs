//! The answer to a rate limit service call: the gRPC response the host hands back, read by
//! [`floodgate::wire::grpc::read_answer`] (status, message, 5-byte frame), then decoded and
//! interpreted by [`floodgate::wire::rls::interpret`].
//!
//! Input fields (see [`crate::input`]): a control field (byte 0: how many headers and
//! trailers the host reports; bytes 1..: one shadow flag per descriptor, its low bit),
//! then the values of `grpc-status` in the trailers, `grpc-message` in the trailers,
//! `grpc-status` in the headers, `grpc-message` in the headers, `:status`, and the body,
//! which is the rest of the input (NULs included, as protobuf needs). An empty field is
//! a part the host does not have.

use crate::input::Fields;
use floodgate::wire::grpc::{read_answer, Part};
use floodgate::wire::rls::{interpret, Answer};

/// Reads and interprets the answer `data` describes.
pub fn run(data: &[u8]) {
    let mut fields = Fields::new(data);
    let control = fields.bytes().unwrap_or_default();
    let counts = control.first().copied().unwrap_or(0);
    let (headers, trailers) = (usize::from(counts & 0x0f), usize::from(counts >> 4));
    let shadows: Vec<bool> = control.iter().skip(1).map(|b| b & 1 == 1).collect();
    let parts: Vec<&[u8]> = (0..5).map(|_| fields.bytes().unwrap_or_default()).collect();
    let body = fields.rest();

    let present = |b: &[u8]| (!b.is_empty()).then(|| b.to_vec());
    let answer = read_answer(headers, trailers, |part| match part {
        Part::Trailer("grpc-status") => present(parts[0]),
        Part::Trailer("grpc-message") => present(parts[1]),
        Part::Header("grpc-status") => present(parts[2]),
        Part::Header("grpc-message") => present(parts[3]),
        Part::Header(":status") => present(parts[4]),
        Part::Body => present(body),
        Part::Header(_) | Part::Trailer(_) => None,
    });
    check(&answer, &shadows);
    // The decoder alone, on the raw body too: most of its input space is unreachable
    // through the frame check above.
    check(&Answer::Response(body.to_vec()), &shadows);
}

/// Interprets `answer` and checks what a decision must hold.
fn check(answer: &Answer, shadows: &[bool]) {
    if let Ok(decided) = interpret(answer, shadows) {
        assert!(
            shadows.len() >= 64 || decided.over >> shadows.len() == 0,
            "an `over` bit per descriptor, none past them"
        );
        assert!(
            decided.standings.is_empty() || decided.standings.len() == shadows.len(),
            "standings are all or none"
        );
        if decided.over_limit {
            assert!(
                shadows
                    .iter()
                    .enumerate()
                    .any(|(i, &s)| decided.is_over(i) && !s),
                "over limit without an enforced descriptor over"
            );
        }
    }
}
