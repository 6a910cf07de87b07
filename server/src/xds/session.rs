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

/// The wait before the next connection attempt: doubling from [`Backoff::FIRST`] up to
/// [`Backoff::MAX`], back to the first once a response arrived (the server is back).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            next: Backoff::FIRST,
        }
    }
}

impl Backoff {
    /// The first wait after a stream ends: short, so a management server's rolling
    /// restart costs little.
    pub const FIRST: Duration = Duration::from_millis(100);
    /// The longest wait: a server down for long is retried every ten seconds, which is
    /// how long a new configuration can wait once it is back.
    pub const MAX: Duration = Duration::from_secs(10);

    /// The wait before the next attempt, and doubles the one after.
    pub fn failed(&mut self) -> Duration {
        let wait = self.next;
        self.next = (self.next * 2).min(Backoff::MAX);
        wait
    }

    /// A response arrived: the next failure waits [`Backoff::FIRST`] again.
    pub fn reset(&mut self) {
        self.next = Backoff::FIRST;
    }
}

#[cfg(test)]
mod tests;
