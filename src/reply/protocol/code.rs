//! The gRPC status codes floodgate reads or answers with, defined once.
//!
//! Numbered as the public gRPC status code document numbers them. Only the codes some
//! part of floodgate names are here: answering clients ([`crate::reply`]) and reading the
//! service's answer ([`crate::wire::grpc::read_answer`], [`crate::wire::rls::interpret`]).
//! They live with the client's protocol, beneath the wire, so that the wire reads the
//! service in the codes replies are written in and nothing points back up.

/// The call succeeded.
pub const OK: u32 = 0;
/// What a response without any `grpc-status` means, and the catch-all for an HTTP
/// status the protocol document does not map.
pub const UNKNOWN: u32 = 2;
/// The client's input cannot be used (a refused cost or descriptor header).
pub const INVALID_ARGUMENT: u32 = 3;
/// The deadline passed (Envoy reports its own timeouts differently: see `rls`).
pub const DEADLINE_EXCEEDED: u32 = 4;
/// HTTP 403 from a non-gRPC peer.
pub const PERMISSION_DENIED: u32 = 7;
/// A rate limit rejected the request.
pub const RESOURCE_EXHAUSTED: u32 = 8;
/// HTTP 404 from a non-gRPC peer: nothing serves that method.
pub const UNIMPLEMENTED: u32 = 12;
/// HTTP 400 from a non-gRPC peer.
pub const INTERNAL: u32 = 13;
/// No healthy host, a refused connection or a reset; also what floodgate answers when
/// its limiter cannot decide (`failure_mode: deny`).
pub const UNAVAILABLE: u32 = 14;
/// HTTP 401 from a non-gRPC peer.
pub const UNAUTHENTICATED: u32 = 16;
