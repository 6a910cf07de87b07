//! A scripted rate limit service: answers each `ShouldRateLimit` call the module makes as
//! floodgate-server would under `make bench`'s configuration, with no network.
//!
//! The call is decoded (it must be a well-formed gRPC `RateLimitRequest`), and each
//! descriptor is answered by its first entry's key: the statuses floodgate-server writes
//! (current limit, remaining, time to reset, and a quota grant when the call asked for one
//! with `x-floodgate-quota`). The answer comes as tonic sends it: `:status` 200 and
//! `content-type` in the headers, one length-prefixed message, `grpc-status: 0` in the
//! trailers.

use crate::abi::{pairs, Pairs};
use crate::host::{Call, CallResponse};
use floodgate::wire::proto::envoy::service::ratelimit::v3::rate_limit_response::{
    quota::ExpirationSpecifier, rate_limit::Unit, Code, DescriptorStatus, Quota, RateLimit,
};
use floodgate::wire::proto::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use prost::Message;

/// How the service answers descriptors whose first key is [`Limit::key`].
#[derive(Debug, Clone)]
pub struct Limit {
    /// The descriptor key.
    pub key: &'static str,
    /// Requests per unit.
    pub requests_per_unit: u32,
    /// The unit, in seconds (1, 60, 3600).
    pub unit_seconds: u64,
    /// Every call is over the limit.
    pub over: bool,
    /// Hits granted per lease when quota is asked for, valid for this many ms.
    pub lease: Option<(u32, u64)>,
}

impl Limit {
    /// A limit no request reaches.
    pub const fn never_reached(key: &'static str) -> Limit {
        Limit {
            key,
            requests_per_unit: 4_000_000_000,
            unit_seconds: 1,
            over: false,
            lease: None,
        }
    }
}

/// The service: its limits and how many calls it answered.
#[derive(Debug, Clone, Default)]
pub struct Rls {
    /// The limits, by descriptor key.
    pub limits: Vec<Limit>,
    /// Calls answered.
    pub answered: u64,
}

impl Rls {
    /// The answer to `call` at `now_ns`; an error if the call is not a rate limit call.
    pub fn answer(&mut self, call: &Call, now_ns: u64) -> Result<CallResponse, String> {
        let path = header(&call.headers, ":path");
        if path.as_deref() != Some(floodgate::wire::rls::PATH) {
            return Err(format!("a call to {path:?}, not ShouldRateLimit"));
        }
        let message = call
            .body
            .get(5..)
            .filter(|m| call.body.first() == Some(&0) && m.len() == frame_len(&call.body))
            .ok_or("the call's body is not one uncompressed gRPC message")?;
        let request = RateLimitRequest::decode(message).map_err(|e| e.to_string())?;
        let quota: Vec<usize> = header(&call.headers, floodgate::wire::rls::QUOTA_HEADER)
            .map(|v| v.split(',').filter_map(|i| i.parse().ok()).collect())
            .unwrap_or_default();
        let mut statuses = Vec::new();
        for (index, descriptor) in request.descriptors.iter().enumerate() {
            let key = descriptor
                .entries
                .first()
                .map(|e| e.key.as_str())
                .unwrap_or("");
            let limit = self
                .limits
                .iter()
                .find(|l| l.key == key)
                .ok_or_else(|| format!("no scripted limit for descriptor key {key:?}"))?;
            statuses.push(status(limit, now_ns, quota.contains(&index)));
        }
        let over = statuses.iter().any(|s| s.code == Code::OverLimit as i32);
        let response = RateLimitResponse {
            overall_code: if over { Code::OverLimit } else { Code::Ok } as i32,
            statuses,
            ..Default::default()
        };
        self.answered += 1;
        let message = response.encode_to_vec();
        let mut body = vec![0];
        body.extend_from_slice(&(message.len() as u32).to_be_bytes());
        body.extend_from_slice(&message);
        Ok(CallResponse {
            headers: pairs(&[(":status", "200"), ("content-type", "application/grpc")]),
            body,
            trailers: pairs(&[("grpc-status", "0")]),
        })
    }
}

/// The length a gRPC frame's prefix announces.
fn frame_len(body: &[u8]) -> usize {
    body.get(1..5).map_or(usize::MAX, |b| {
        u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize
    })
}

fn header(headers: &Pairs, name: &str) -> Option<String> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
}

/// One descriptor's status, as floodgate-server writes it for a fixed window.
fn status(limit: &Limit, now_ns: u64, asks_quota: bool) -> DescriptorStatus {
    let unit_ns = limit.unit_seconds * 1_000_000_000;
    let reset_ns = unit_ns - now_ns % unit_ns;
    let unit = match limit.unit_seconds {
        1 => Unit::Second,
        60 => Unit::Minute,
        3600 => Unit::Hour,
        _ => Unit::Day,
    };
    let quota = match (limit.lease, asks_quota && !limit.over) {
        (Some((requests, valid_ms)), true) => {
            let until = now_ns + valid_ms * 1_000_000;
            Some(Quota {
                requests,
                expiration_specifier: Some(ExpirationSpecifier::ValidUntil(
                    prost_types::Timestamp {
                        seconds: (until / 1_000_000_000) as i64,
                        nanos: (until % 1_000_000_000) as i32,
                    },
                )),
                id: String::new(),
            })
        }
        _ => None,
    };
    DescriptorStatus {
        code: if limit.over {
            Code::OverLimit
        } else {
            Code::Ok
        } as i32,
        current_limit: Some(RateLimit {
            name: String::new(),
            requests_per_unit: limit.requests_per_unit,
            unit: unit as i32,
            unit_multiplier: None,
        }),
        limit_remaining: if limit.over {
            0
        } else {
            limit.requests_per_unit - 1
        },
        duration_until_reset: Some(prost_types::Duration {
            seconds: (reset_ns / 1_000_000_000) as i64,
            nanos: (reset_ns % 1_000_000_000) as i32,
        }),
        quota,
    }
}
