//! What the floodgate filter and floodgate-server must agree on, written once.
//!
//! Both sides of the wire link this crate, so a header's name or a value's encoding cannot
//! drift apart between them. It is plain `std` Rust with no dependency: it builds for the
//! filter's wasm32 target as for the server's.
//!
//! - [`decimal`]: whole numbers as header values, without `core::fmt`;
//! - [`draft03`]: which limit the draft-03 `x-ratelimit-*` fields show, and their values;
//! - [`gcra`]: the token bucket's math, the filter's local buckets and the server's
//!   `token_bucket` both (each side only picks its units);
//! - [`headers`]: the names of the extension headers the filter sends the service, and the
//!   charge header's one value;
//! - [`quota`]: the quota header's value, written by the filter ([`quota::encode`]) and read
//!   by the server ([`quota::parse`]);
//! - [`unit`]: the units of time a limit is counted in, and their lengths.

pub mod decimal;
pub mod draft03;
pub mod gcra;
pub mod headers;
pub mod quota;
pub mod unit;
