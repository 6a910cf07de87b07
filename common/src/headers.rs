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

/// Takes a concurrency hold with the admission: the value is the caller's hold id
/// ([`is_hold_id`]), sent once. Each concurrency descriptor of the call takes its hits as
/// slots under that id, all or nothing with the rest of the call. Shared by the filter,
/// which mints the ids, and the server, which keeps the holds, so the two never disagree
/// on a name.
pub const HOLD_HEADER: &str = "x-floodgate-hold";

/// Releases a hold at stream end: the value is the id the hold was taken under. The call
/// frees that id's holds on every concurrency limit its descriptors match and decides
/// nothing else. Idempotent: a release retried, or sent for an expired hold, frees nothing.
pub const RELEASE_HEADER: &str = "x-floodgate-release";

/// The longest hold id, in bytes.
pub const MAX_HOLD_ID: usize = 64;

/// Whether `id` is a well-formed hold id: 1 to [`MAX_HOLD_ID`] bytes of `[A-Za-z0-9._-]`
/// (printable, and free of the `:` the server's Redis member format uses). The one
/// statement of the rule, for the server's parser and the filter's minting tests.
pub fn is_hold_id(id: &[u8]) -> bool {
    let ok = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-');
    !id.is_empty() && id.len() <= MAX_HOLD_ID && id.iter().all(ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hold_ids_are_1_to_64_bytes_of_the_charset() {
        assert!(is_hold_id(b"fg.0123abc"));
        assert!(is_hold_id(b"A-Z_a.z-09"));
        assert!(is_hold_id(&[b'x'; MAX_HOLD_ID]));
        assert!(!is_hold_id(b""));
        assert!(!is_hold_id(&[b'x'; MAX_HOLD_ID + 1]));
        for bad in [&b"a:b"[..], b"a b", b"a/b", "é".as_bytes()] {
            assert!(!is_hold_id(bad), "{bad:?}");
        }
    }
}
