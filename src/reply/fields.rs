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
use floodgate_common::decimal::push_decimal;

/// The largest Integer a Structured Field can carry (15 decimal digits).
pub const SF_INTEGER_MAX: u64 = 999_999_999_999_999;

/// `RateLimit-Policy` and `RateLimit` for `standings`: one item per enforced rule, in
/// configuration order. Empty when no enforced rule has a limit to show.
pub fn structured_headers(rules: &[Rule], standings: &[Standing]) -> Headers {
    let shown = super::order::in_rule_order(standings.iter().filter(|s| shows(s)));
    if shown.is_empty() {
        return Vec::new();
    }
    let mut policy = String::new();
    let mut limit = String::new();
    for s in shown {
        let name = rules.get(s.rule).map_or("", |r| r.name.as_str());
        if !policy.is_empty() {
            policy.push_str(", ");
            limit.push_str(", ");
        }
        push_sf_string(&mut policy, name);
        push_param(&mut policy, "q", u64::from(s.limit));
        if rules.get(s.rule).is_some_and(|r| r.limit.is_concurrency()) {
            // The draft's quota unit for a limit on requests in flight.
            policy.push_str(";qu=\"concurrent-requests\"");
        }
        if let Some(w) = s.window_s {
            push_param(&mut policy, "w", w);
        }
        push_sf_string(&mut limit, name);
        push_param(&mut limit, "r", u64::from(s.remaining));
        if let Some(next) = s.next_ns {
            push_param(&mut limit, "t", seconds_ceil(next).min(SF_INTEGER_MAX));
        }
    }
    vec![
        ("ratelimit-policy".into(), policy),
        ("ratelimit".into(), limit),
    ]
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
fn push_sf_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars().filter(|c| (' '..='~').contains(c)) {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
}

/// `;key=value` with an Integer value.
fn push_param(out: &mut String, key: &str, value: u64) {
    out.push(';');
    out.push_str(key);
    out.push('=');
    push_decimal(out, value.min(SF_INTEGER_MAX));
}

#[cfg(test)]
mod tests;
