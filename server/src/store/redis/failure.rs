//! What went wrong with one Redis call: the one error type the connection, the script
//! call and the breaker ([`super::outage`]) share, with its cause as [`crate::store::health::Health`] counts it.

use crate::store::health::Cause;
use redis::{ErrorKind, RedisError, ServerErrorKind};

/// What went wrong with one call, for health and logs.
pub(super) enum Failure {
    /// Redis could not be reached.
    Connectivity(String),
    /// Redis did not answer in time, or ran the call past its deadline.
    Timeout(String),
    /// Redis refused our credentials or permissions.
    Auth(String),
    /// Redis refuses commands for now (out of memory, read-only, loading, busy).
    Refused(String),
    /// The script failed, or answered what the store does not understand. A call's own
    /// such failure does not count towards "down" (it may be one key's); the probe, which
    /// runs the script too, decides.
    Reply(String),
}

impl Failure {
    /// The failure's text, for logs and the UNAVAILABLE status.
    pub(super) fn message(&self) -> &str {
        match self {
            Failure::Connectivity(m)
            | Failure::Timeout(m)
            | Failure::Auth(m)
            | Failure::Refused(m)
            | Failure::Reply(m) => m,
        }
    }

    /// Its cause, as counted and shown by [`Health`].
    pub(super) fn cause(&self) -> Cause {
        match self {
            Failure::Connectivity(_) => Cause::Unreachable,
            Failure::Timeout(_) => Cause::Timeout,
            Failure::Auth(_) => Cause::Auth,
            Failure::Refused(_) => Cause::Refused,
            Failure::Reply(_) => Cause::Script,
        }
    }
}

impl From<RedisError> for Failure {
    fn from(e: RedisError) -> Self {
        let m = e.to_string();
        // Server error codes that say Redis will not run our commands for anyone: these are
        // not per-key, so a call failing with one counts towards "down".
        let code = e.code().unwrap_or_default();
        if e.is_timeout() {
            Failure::Timeout(m)
        } else if e.is_io_error()
            || e.is_connection_dropped()
            || e.is_connection_refusal()
            || e.is_cluster_error()
            // A master cut off from its replicas: the master is about to be elsewhere.
            // (A demoted one's READONLY is a refusal, below: the store cannot decide.)
            || e.kind() == ErrorKind::Server(ServerErrorKind::MasterDown)
        {
            Failure::Connectivity(m)
        } else if e.kind() == ErrorKind::AuthenticationFailed
            || e.kind() == ErrorKind::Server(ServerErrorKind::NoPerm)
            || matches!(code, "NOAUTH" | "WRONGPASS" | "NOPERM")
        {
            Failure::Auth(m)
        } else if matches!(
            e.kind(),
            ErrorKind::Server(ServerErrorKind::ReadOnly | ServerErrorKind::BusyLoading)
        ) || matches!(code, "OOM" | "MISCONF" | "BUSY" | "READONLY" | "LOADING")
        {
            Failure::Refused(m)
        } else {
            Failure::Reply(m)
        }
    }
}
