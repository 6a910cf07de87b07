//! The proxy-wasm ABI 0.2.1 values the test host speaks: statuses, map and buffer types,
//! and the pair encoding of header maps.

/// A header map or any list of (name, value) pairs, in order.
pub type Pairs = Vec<(String, Vec<u8>)>;

/// `WasmResult` values the host returns.
pub mod status {
    /// Success.
    pub const OK: i32 = 0;
    /// The key, header, property or buffer does not exist.
    pub const NOT_FOUND: i32 = 1;
    /// An argument is out of range (e.g. an unknown map type or context id).
    pub const BAD_ARGUMENT: i32 = 2;
    /// A pointer and length outside the module's memory.
    pub const INVALID_MEMORY_ACCESS: i32 = 6;
    /// A compare-and-swap write whose token is stale.
    pub const CAS_MISMATCH: i32 = 8;
}

/// Header map types (`proxy_get_header_map_*`).
pub mod map {
    /// The request's headers.
    pub const REQUEST_HEADERS: i32 = 0;
    /// The request's trailers.
    pub const REQUEST_TRAILERS: i32 = 1;
    /// The response's headers.
    pub const RESPONSE_HEADERS: i32 = 2;
    /// The response's trailers.
    pub const RESPONSE_TRAILERS: i32 = 3;
    /// An HTTP call's response headers (inside `proxy_on_http_call_response`).
    pub const HTTP_CALL_RESPONSE_HEADERS: i32 = 6;
    /// An HTTP call's response trailers (inside `proxy_on_http_call_response`).
    pub const HTTP_CALL_RESPONSE_TRAILERS: i32 = 7;
}

/// Buffer types (`proxy_get_buffer_bytes`).
pub mod buffer {
    /// The request body chunk being passed.
    pub const HTTP_REQUEST_BODY: i32 = 0;
    /// The response body chunk being passed.
    pub const HTTP_RESPONSE_BODY: i32 = 1;
    /// An HTTP call's response body (inside `proxy_on_http_call_response`).
    pub const HTTP_CALL_RESPONSE_BODY: i32 = 4;
    /// The VM configuration (`vm_config.configuration`).
    pub const VM_CONFIGURATION: i32 = 6;
    /// The plugin configuration (`configuration` of the plugin).
    pub const PLUGIN_CONFIGURATION: i32 = 7;
}

/// The callback results the host reads.
pub mod action {
    /// Go on with the stream.
    pub const CONTINUE: i32 = 0;
}

/// The ABI's encoding of pairs: a count, every (name length, value length), then every
/// name and value each followed by a NUL byte; all numbers little-endian u32.
pub fn encode_pairs(pairs: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut out = (pairs.len() as u32).to_le_bytes().to_vec();
    for (k, v) in pairs {
        out.extend_from_slice(&(k.len() as u32).to_le_bytes());
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
    }
    for (k, v) in pairs {
        out.extend_from_slice(k.as_bytes());
        out.push(0);
        out.extend_from_slice(v);
        out.push(0);
    }
    out
}

/// Reads [`encode_pairs`]' encoding back (`None` when malformed). An empty buffer is an
/// empty list, as Envoy reads it.
pub fn decode_pairs(bytes: &[u8]) -> Option<Pairs> {
    if bytes.is_empty() {
        return Some(Vec::new());
    }
    let word = |at: usize| -> Option<usize> {
        let b = bytes.get(at..at + 4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    };
    let count = word(0)?;
    let mut sizes = Vec::new();
    for i in 0..count {
        sizes.push((word(4 + 8 * i)?, word(8 + 8 * i)?));
    }
    let mut at = 4 + 8 * count;
    let mut pairs = Vec::new();
    for (k, v) in sizes {
        let key = bytes.get(at..at + k)?;
        at += k + 1;
        let value = bytes.get(at..at + v)?;
        at += v + 1;
        pairs.push((String::from_utf8(key.to_vec()).ok()?, value.to_vec()));
    }
    Some(pairs)
}

/// Pairs from string literals.
pub fn pairs(list: &[(&str, &str)]) -> Pairs {
    list.iter()
        .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_round_trip() {
        let list = pairs(&[(":path", "/"), ("x-tenant-id", "bench"), ("empty", "")]);
        assert_eq!(decode_pairs(&encode_pairs(&list)), Some(list));
        assert_eq!(decode_pairs(&[]), Some(Vec::new()));
        assert_eq!(decode_pairs(&[1, 0, 0, 0, 9]), None, "truncated");
    }
}
