//! The structured rate-limit fields of draft-ietf-httpapi-ratelimit-headers-10 and -11.
//!
//! The two drafts give the fields the same syntax and parameters; -11 renames what `r`
//! and `t` mean: `r` is the *available quota* (-10: remaining), `t` the *effective
//! window*, the seconds within which the client can use no more than `r` (-10: the seconds
//! until additional quota is made available), and a client "SHOULD NOT exceed the
//! available quota within" it. For a token bucket both readings name one figure: until
//! the next whole token is there the client can use `r` and no more, and once it is there
//! more quota is available. Rounded up, `t` never invites a client early: one that uses at
//! most `r` within `t` is never rejected by the bucket. So `draft10` and `draft11` send the
//! same bytes (tested), and both values stay, so that a configuration names the draft its
//! clients parse.
//!
//! Both fields are Structured Field Lists (RFC 9651) of Items whose value is a String
//! naming the policy, here the rule's name:
//!
//! - `RateLimit-Policy: "per-tenant";q=100;w=10`: the quota `q` (an Integer) allowed per
//!   window `w` (an Integer of seconds, optional).
//! - `RateLimit: "per-tenant";r=0;t=3`: the remaining quota `r` now, and `t`, the seconds
//!   until more quota is made available (optional).
//!
//! **A token bucket as q/w.** A bucket of `capacity` C refilled at `rate` R tokens per
//! second is advertised as `q=C;w=⌈C/R⌉`: the burst, and the time the bucket takes to
//! refill from empty, rounded up to whole seconds (the draft has no sub-second windows).
//! A client that never sends more than `q` requests in any `w` seconds is never rejected:
//! a burst of `q` fits the bucket, and every `w` seconds earn at least `q` tokens back
//! (property-tested). The advertised rate C/w is never above R; it is below R only when
//! C/R is not a whole number of seconds (a bucket of 1 refilled 1 000 times a second is
//! `q=1;w=1`). A bucket that never refills has no `w`.
//!
//! **r and t.** `r` is the whole tokens left (after this request when it was admitted);
//! `t` the seconds, rounded up, until one more whole token is there: what the draft
//! calls "additional quota". A full bucket, or one that never refills, has no `t`. For a
//! global rule they are the service's `limit_remaining` and `duration_until_reset`
//! (rounded up as `retry-after` is), and `q`/`w` its `current_limit`
//! (`requests_per_unit` per `unit`, times its `unit_multiplier` when the service sends one).
//!
//! **Concurrency rules** carry the draft's quota unit, `qu="concurrent-requests"`: `q` is
//! the rule's `max`, `r` the slots left; no `w` and no `t` (a slot frees when some
//! stream ends, at no time the filter can promise).
//!
//! **No partition key.** `pk` is optional and is never sent: a key derived from the
//! descriptor values without a secret could be reversed by trying values (client IPs,
//! tenant ids), and a secret shared by the fleet is more to manage than a client gains
//! from it: a client already knows which tenant or address it sends.

use super::{Headers, Standing};
use crate::bucket::seconds_ceil;
use crate::config::Rule;
use floodgate_common::decimal::push_decimal_bytes;

/// The largest Integer a Structured Field can carry (15 decimal digits).
pub const SF_INTEGER_MAX: u64 = 999_999_999_999_999;

/// `RateLimit-Policy` and `RateLimit` for `standings`: one item per enforced rule, in
/// configuration order. Empty when no enforced rule has a limit to show.
pub fn structured_headers(rules: &[Rule], standings: &[Standing]) -> Headers {
    let mut headers = Headers::new();
    push_structured_headers(&mut headers, rules, standings);
    headers
}

/// [`structured_headers`], appended to `headers`: each list written straight into the
/// encoded fields (no string of its own), one walk of the shown standings per field.
pub fn push_structured_headers(headers: &mut Headers, rules: &[Rule], standings: &[Standing]) {
    let shown = super::order::in_rule_order(standings.iter().filter(|s| shows(s)));
    if shown.is_empty() {
        return;
    }
    let name = |s: &Standing| rules.get(s.rule).map_or("", |r| r.name.as_str());
    headers.push_with(b"ratelimit-policy", |out| {
        push_list(out, &shown, |out, s| {
            push_sf_string(out, name(s));
            push_param(out, b"q", u64::from(s.limit));
            if rules.get(s.rule).is_some_and(|r| r.limit.is_concurrency()) {
                // The draft's quota unit for a limit on requests in flight.
                out.extend_from_slice(b";qu=\"concurrent-requests\"");
            }
            if let Some(w) = s.window_s {
                push_param(out, b"w", w);
            }
        });
    });
    headers.push_with(b"ratelimit", |out| {
        push_list(out, &shown, |out, s| {
            push_sf_string(out, name(s));
            push_param(out, b"r", u64::from(s.remaining));
            if let Some(next) = s.next_ns {
                push_param(out, b"t", seconds_ceil(next).min(SF_INTEGER_MAX));
            }
        });
    });
}

/// A Structured Field List: each standing's item, as `item` writes it, `, ` between.
fn push_list(
    out: &mut Vec<u8>,
    shown: &[&Standing],
    mut item: impl FnMut(&mut Vec<u8>, &Standing),
) {
    for (i, s) in shown.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(b", ");
        }
        item(out, s);
    }
}

/// Whether a standing is shown: an enforced rule with a limit. A service's status with
/// no `current_limit` (limit 0) that admits the request says no limit applied to it.
fn shows(s: &Standing) -> bool {
    let no_limit = s.limit == 0 && s.allowed;
    !s.shadow && !no_limit
}

/// The window over which a token bucket of `capacity` refilled at `rate_micro`
/// millionths of a token per second earns `capacity` tokens back, in whole seconds
/// rounded up; `None` when it never refills (or would take longer than a Structured
/// Field Integer can say).
pub fn bucket_window_s(capacity: u32, rate_micro: u64) -> Option<u64> {
    if rate_micro == 0 {
        return None;
    }
    // At most 4.3 × 10¹⁵ millionths: a u64 holds it, and wasm divides a u64 in one
    // instruction where a u128 is a call (`__udivti3`, about 70 instructions).
    let seconds = (u64::from(capacity) * 1_000_000).div_ceil(rate_micro);
    Some(seconds).filter(|&s| s <= SF_INTEGER_MAX)
}

/// A Structured Field String: `"` and `\` escaped, anything not printable ASCII left out
/// (rule names are letters, digits, `-` and `_`; this only keeps the field well formed).
/// By bytes: every byte of a character beyond ASCII is beyond `~` too.
fn push_sf_string(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    for b in s.bytes().filter(|b| (b' '..=b'~').contains(b)) {
        if b == b'"' || b == b'\\' {
            out.push(b'\\');
        }
        out.push(b);
    }
    out.push(b'"');
}

/// `;key=value` with an Integer value.
fn push_param(out: &mut Vec<u8>, key: &[u8], value: u64) {
    out.push(b';');
    out.extend_from_slice(key);
    out.push(b'=');
    push_decimal_bytes(out, value.min(SF_INTEGER_MAX));
}

#[cfg(test)]
mod tests;
