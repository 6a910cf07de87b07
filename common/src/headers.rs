//! The extension request headers (gRPC metadata) the filter sends on a `ShouldRateLimit`
//! call, beyond what Envoy's own `ratelimit` filter sends. Lowercase, as gRPC metadata keys
//! are.

/// Asks for quota leases: the 0-based indices of the descriptors the caller wants a grant
/// for (see [`crate::quota`]).
pub const QUOTA_HEADER: &str = "x-floodgate-quota";

/// Makes the call a stream-end charge: every descriptor counted whether it fits or not
/// (into debt), because the request it charges was admitted already.
pub const CHARGE_HEADER: &str = "x-floodgate-charge";

/// [`CHARGE_HEADER`]'s only value; the server refuses any other.
pub const CHARGE_VALUE: &str = "1";
