//! A request's headers as the host hands them over all at once, so that a header sent
//! twice is seen as such.
//!
//! proxy-wasm's single-header look-up returns only the first value of a header (Envoy's
//! host says so in a TODO), while the upstream receives every value: a client could
//! send `x-cost: 1` then `x-cost: 1000`, be charged 1 and have the application read
//! 1000. [`HeaderMap`] decodes the full list (`proxy_get_header_map_pairs`) once per
//! request and tells one value from several. [`encode_pairs`] writes the same encoding,
//! for the headers the module hands the host.

/// What a request carries under one header name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// Not there.
    Absent,
    /// Exactly one value, as raw bytes (header values may hold obs-text, not UTF-8).
    One(Vec<u8>),
    /// Two or more values: which one counts is ambiguous, so the caller refuses it.
    Repeated,
}

/// Every header of a request: the host's encoded pairs, checked once and walked in place
/// for each look-up (no vector of spans, no copy of the list).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeaderMap {
    bytes: Vec<u8>,
}

/// Calls `each(name, value)` for every pair of the proxy-wasm encoding in `bytes`, in
/// order, until it returns false. `None` when the bytes are not in that shape; empty
/// bytes are an empty list.
fn walk<'a>(bytes: &'a [u8], mut each: impl FnMut(&'a [u8], &'a [u8]) -> bool) -> Option<()> {
    let word = |at: usize| -> Option<usize> {
        let b = bytes.get(at..at.checked_add(4)?)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    };
    if bytes.is_empty() {
        return Some(());
    }
    let count = word(0)?;
    let mut text = count.checked_mul(8)?.checked_add(4)?;
    if text > bytes.len() {
        return None;
    }
    for i in 0..count {
        let name_len = word(4 + 8 * i)?;
        let value_len = word(8 + 8 * i)?;
        let name_end = text.checked_add(name_len)?;
        let value_start = name_end.checked_add(1)?;
        let value_end = value_start.checked_add(value_len)?;
        if bytes.get(name_end) != Some(&0) || bytes.get(value_end) != Some(&0) {
            return None;
        }
        if !each(&bytes[text..name_end], &bytes[value_start..value_end]) {
            return Some(());
        }
        text = value_end + 1;
    }
    Some(())
}

impl HeaderMap {
    /// Checks the proxy-wasm encoding of a header list: a little-endian u32 count, a
    /// (name length, value length) u32 pair per header, then each name and value followed
    /// by a NUL byte. `None` when the bytes are not in that shape.
    pub fn decode(bytes: Vec<u8>) -> Option<HeaderMap> {
        walk(&bytes, |_, _| true)?;
        Some(HeaderMap { bytes })
    }

    /// The values under `name` (compared without regard to ASCII case).
    pub fn lookup(&self, name: &str) -> Lookup {
        let mut found: Option<&[u8]> = None;
        let mut repeated = false;
        // The bytes were checked by `decode`: the walk cannot fail here.
        let _ = walk(&self.bytes, |n, v| {
            if n.eq_ignore_ascii_case(name.as_bytes()) {
                if found.is_some() {
                    repeated = true;
                    return false;
                }
                found = Some(v);
            }
            true
        });
        match (repeated, found) {
            (true, _) => Lookup::Repeated,
            (false, Some(v)) => Lookup::One(v.to_vec()),
            (false, None) => Lookup::Absent,
        }
    }
}

/// The proxy-wasm encoding of a list of pairs, as [`HeaderMap::decode`] reads it: a count,
/// every (key, value) length, then every key and value each followed by a NUL byte. All
/// integers little-endian u32. What the host takes for the headers of a call or a local
/// reply.
pub fn encode_pairs<V: AsRef<[u8]>>(pairs: &[(&str, V)]) -> Vec<u8> {
    let text: usize = pairs
        .iter()
        .map(|(k, v)| k.len() + v.as_ref().len() + 2)
        .sum();
    let mut out = Vec::with_capacity(4 + 8 * pairs.len() + text);
    out.extend_from_slice(&(pairs.len() as u32).to_le_bytes());
    for (k, v) in pairs {
        out.extend_from_slice(&(k.len() as u32).to_le_bytes());
        out.extend_from_slice(&(v.as_ref().len() as u32).to_le_bytes());
    }
    for (k, v) in pairs {
        out.extend_from_slice(k.as_bytes());
        out.push(0);
        out.extend_from_slice(v.as_ref());
        out.push(0);
    }
    out
}

#[cfg(test)]
mod tests;
