//! The `application/problem+json` body of a rejection (RFC 9457), with the
//! `quota-exceeded` problem type that draft-ietf-httpapi-ratelimit-headers-10 registers.
//!
//! Its extension member `violated-policies` lists the policies the request exceeded: here
//! the names of the rules that rejected it, in configuration order, the same names the
//! `RateLimit` fields use. It is left out when the rate limit service rejected the
//! request without saying which descriptor was over (no per-descriptor statuses).

/// The media type of the body.
pub const CONTENT_TYPE: &str = "application/problem+json";

/// The problem type URI the draft registers for an exceeded quota.
pub const QUOTA_EXCEEDED: &str = "https://iana.org/assignments/http-problem-types#quota-exceeded";

/// The problem's short, human-readable summary (the same for every occurrence).
pub const TITLE: &str = "Quota exceeded";

/// The body rejecting a request with HTTP `status`, naming the `violated` rules:
/// `{"type":…,"title":…,"status":429,"violated-policies":[…]}`.
///
/// Written by hand rather than through serde_json's serializer, which would add its
/// number and string formatting to the module for one small document.
pub fn body(status: u16, violated: &[&str]) -> Vec<u8> {
    let mut out = String::with_capacity(160 + violated.iter().map(|v| v.len() + 3).sum::<usize>());
    out.push_str("{\"type\":");
    push_json_string(&mut out, QUOTA_EXCEEDED);
    out.push_str(",\"title\":");
    push_json_string(&mut out, TITLE);
    out.push_str(",\"status\":");
    floodgate_common::decimal::push_decimal(&mut out, u64::from(status));
    if !violated.is_empty() {
        out.push_str(",\"violated-policies\":[");
        for (i, name) in violated.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            push_json_string(&mut out, name);
        }
        out.push(']');
    }
    out.push('}');
    out.into_bytes()
}

/// A JSON string: `"` and `\` escaped, control characters as `\u00XX` (rule names have
/// none; this only keeps the document valid whatever it is given).
fn push_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_is_json_whatever_the_names() {
        let body = body(429, &["a\"b\\c\n", "per-tenant"]);
        let parsed: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(parsed["violated-policies"][0], "a\"b\\c\n");
        assert_eq!(parsed["violated-policies"][1], "per-tenant");
        assert_eq!(parsed["type"], QUOTA_EXCEEDED);
        assert_eq!(parsed["title"], TITLE);
    }
}
