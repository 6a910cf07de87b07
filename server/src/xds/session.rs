//! The ADS state-of-the-world protocol as a pure state machine: what to send when a stream
//! opens, and what a response means (a configuration to put in force and its ACK, or a
//! NACK), with no I/O, so every rule is unit-tested without a management server.
//!
//! The rules (xDS protocol, "ACK/NACK and resource type instance version"):
//! - A stream opens with a request naming our node and the resource type, and the version
//!   last applied (empty before the first), so a management server can tell a restart of
//!   ours from a reconnect; there is no nonce yet. No resource names: a wildcard
//!   subscription, every `RateLimitConfig` the server has for the node.
//! - State of the world: every response carries every resource, so the whole set is
//!   validated at once and replaces what is in force (an empty set empties it).
//! - ACK: `version_info` is the response's version, `response_nonce` its nonce.
//! - NACK: `version_info` is the version last applied (what still is in force),
//!   `response_nonce` the refused response's nonce, and `error_detail` a `google.rpc.Status`
//!   of code `INVALID_ARGUMENT` whose message is the validation error with its field path.

use super::{parse_resources, TYPE_URL};
use crate::config::{Config, LoadOptions};
use crate::proto::discovery::{DiscoveryRequest, DiscoveryResponse};
use crate::proto::envoy::config::core::v3::Node;
use crate::proto::google::rpc::Status;
use std::time::Duration;

/// `google.rpc.Code.INVALID_ARGUMENT`: a NACK's code.
pub const INVALID_ARGUMENT: i32 = 3;

/// One client's protocol state, kept across streams (the version applied survives a
/// reconnect).
#[derive(Debug, Clone)]
pub struct Session {
    node: Node,
    applied: String,
}

/// What a response comes to.
#[derive(Debug)]
pub enum Reply {
    /// Every resource validated: put `config` in force, then send `ack`.
    Apply {
        /// The configuration the resources describe, whole.
        config: Config,
        /// The response's version, now the one applied.
        version: String,
        /// The ACK.
        ack: DiscoveryRequest,
    },
    /// The resources were refused: keep the configuration in force, send `nack`.
    Reject {
        /// Why, with the resource and field path.
        error: String,
        /// The NACK, carrying `error` as its detail.
        nack: DiscoveryRequest,
    },
}

impl Session {
    /// A session for `node`, nothing applied yet.
    pub fn new(node: Node) -> Session {
        Session {
            node,
            applied: String::new(),
        }
    }

    /// The version last applied (empty: none yet).
    pub fn applied(&self) -> &str {
        &self.applied
    }

    /// The first request of a stream: the subscription.
    pub fn subscribe(&self) -> DiscoveryRequest {
        self.request(self.applied.clone(), String::new(), None)
    }

    /// What `response` means, validated as `options` say; on success its version becomes
    /// the one applied.
    pub fn on_response(&mut self, response: &DiscoveryResponse, options: &LoadOptions) -> Reply {
        let parsed = if response.type_url == TYPE_URL {
            parse_resources(&response.resources, options).map_err(|e| e.to_string())
        } else {
            // Only our type is asked for; an ADS server that sends another must not have
            // its (unreadable) resources taken for an empty set.
            Err(format!(
                "type_url: expected {TYPE_URL}, got {:?}",
                response.type_url
            ))
        };
        match parsed {
            Ok(config) => {
                self.applied.clone_from(&response.version_info);
                Reply::Apply {
                    config,
                    version: response.version_info.clone(),
                    ack: self.request(response.version_info.clone(), response.nonce.clone(), None),
                }
            }
            Err(error) => {
                let detail = Status {
                    code: INVALID_ARGUMENT,
                    message: error.clone(),
                    details: Vec::new(),
                };
                Reply::Reject {
                    error,
                    nack: self.request(self.applied.clone(), response.nonce.clone(), Some(detail)),
                }
            }
        }
    }

    fn request(&self, version: String, nonce: String, error: Option<Status>) -> DiscoveryRequest {
        DiscoveryRequest {
            version_info: version,
            // Sent on every request: harmless, and a management server behind a proxy that
            // balances requests needs it on each.
            node: Some(self.node.clone()),
            resource_names: Vec::new(),
            type_url: TYPE_URL.to_owned(),
            response_nonce: nonce,
            error_detail: error,
        }
    }
}

/// The wait before the next connection attempt, as the reference's xDS client waits: from
/// the initial interval, doubling up to the longest, back to the initial once a response
/// arrived (the server is back). With a random factor `f`, each wait is drawn from
/// `[w·(1−f), w·(1+f)]` around the nominal `w`, so a fleet of servers that lost the same
/// management server does not reconnect in step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    spread: f64,
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new(Backoff::FIRST, Backoff::MAX, Backoff::SPREAD)
            .unwrap_or(Backoff::fixed(Backoff::FIRST))
    }
}

impl Backoff {
    /// The reference's initial interval (`XDS_CLIENT_BACKOFF_INITIAL_INTERVAL`).
    pub const FIRST: Duration = Duration::from_secs(10);
    /// The reference's longest interval (`XDS_CLIENT_BACKOFF_MAX_INTERVAL`).
    pub const MAX: Duration = Duration::from_secs(60);
    /// The reference's random factor (`XDS_CLIENT_BACKOFF_RANDOM_FACTOR`, with
    /// `XDS_CLIENT_BACKOFF_JITTER=true`).
    pub const SPREAD: f64 = 0.5;

    /// Waits from `first` doubling to `max`, each spread by `spread` (0: exact, at most 1);
    /// the reason as an error when `first` is zero, `max` below `first` or `spread` out of
    /// range.
    pub fn new(first: Duration, max: Duration, spread: f64) -> Result<Backoff, String> {
        if first.is_zero() {
            return Err("the initial interval must be longer than zero".to_owned());
        }
        if max < first {
            return Err(format!(
                "the longest interval ({max:?}) is shorter than the initial one ({first:?})"
            ));
        }
        if !(0.0..=1.0).contains(&spread) {
            return Err(format!("the random factor {spread} is not between 0 and 1"));
        }
        Ok(Backoff {
            first,
            max,
            spread,
            next: first,
        })
    }

    /// Always `wait`, with no spread.
    const fn fixed(wait: Duration) -> Backoff {
        Backoff {
            first: wait,
            max: wait,
            spread: 0.0,
            next: wait,
        }
    }

    /// The wait before the next attempt, and doubles the one after. `unit` in `[0, 1)`
    /// (a random draw; the caller's, so that this stays pure) places the wait in its
    /// spread: 0 the shortest, 0.5 the nominal.
    pub fn failed(&mut self, unit: f64) -> Duration {
        let nominal = self.next;
        self.next = nominal.saturating_mul(2).min(self.max);
        let scale = 1.0 + self.spread * (2.0 * unit.clamp(0.0, 1.0) - 1.0);
        nominal.mul_f64(scale.max(0.0))
    }

    /// A response arrived: the next failure waits the initial interval again.
    pub fn reset(&mut self) {
        self.next = self.first;
    }
}

#[cfg(test)]
mod tests;
