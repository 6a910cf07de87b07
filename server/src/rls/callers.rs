//! What a caller may ask of the service beyond a decision, and who may ask it.
//!
//! Two request headers (gRPC metadata) ask for more than a decision: [`CHARGE_HEADER`]
//! makes a call a stream-end **charge**, counted into debt whether it fits or not, and
//! [`super::QUOTA_HEADER`] asks for **quota leases**, hits taken ahead for the caller to
//! spend itself. floodgate's filter sends both; Envoy's native `ratelimit` filter neither.
//!
//! Over plaintext the service cannot tell one caller from another, so whoever reaches the
//! gRPC port may send them: a charge spends a tenant's limit into debt
//! (at most one limit, see [`crate::algorithm::charge`]) and a lease takes its hits ahead.
//! [`Trust`] is the operator's switch for each (`--refuse-charges`, `--refuse-quota`): a
//! refused charge is answered `PERMISSION_DENIED` and counts nothing; a refused quota
//! header is answered as if it were absent (a decision with no lease), since an error
//! would turn every call of a filter that asks into its failure mode. Over mutual TLS the
//! operator can also name *who* may, by client identity ([`super::permit`]).

use tonic::Status;

/// The request header (gRPC metadata) that makes a call a **charge**: every descriptor is
/// counted whether it fits or not ([`crate::store::Store::charge`]), and the answer says
/// where each stands after it. floodgate's filter sends it, with `hits_addend` = the cost,
/// at the end of a response whose cost is known only then (an LLM answer's tokens): the
/// request was admitted already, and a charge refused for not fitting would leak the
/// budget. Its only value is `1`; any other is refused as INVALID_ARGUMENT. Envoy's native
/// `apply_on_stream_done` sends no such header. Named once for filter and server, in
/// `floodgate-common`.
pub use floodgate_common::headers::CHARGE_HEADER;
use floodgate_common::headers::CHARGE_VALUE;

/// What a call is, from its [`CHARGE_HEADER`]: an admission or a charge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    /// All or nothing: nothing is consumed unless every enforced descriptor fits.
    Admission,
    /// Every descriptor is counted, into debt if need be.
    Charge,
}

impl CallKind {
    /// The kind of call its metadata says; `Err` for a charge header other than `1`.
    pub fn of(metadata: &tonic::metadata::MetadataMap) -> Result<CallKind, Status> {
        match metadata.get(CHARGE_HEADER) {
            None => Ok(CallKind::Admission),
            Some(v) if v.as_bytes() == CHARGE_VALUE.as_bytes() => Ok(CallKind::Charge),
            Some(_) => Err(Status::invalid_argument(format!(
                "{CHARGE_HEADER} must be {CHARGE_VALUE}"
            ))),
        }
    }
}

/// What callers may ask for beyond a decision. By default, everything (what floodgate's
/// filter needs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trust {
    /// Calls may be charges (`--refuse-charges` turns it off).
    pub allow_charges: bool,
    /// Calls may ask for quota leases (`--refuse-quota` turns it off).
    pub allow_quota: bool,
}

impl Default for Trust {
    fn default() -> Self {
        Trust {
            allow_charges: true,
            allow_quota: true,
        }
    }
}

impl Trust {
    /// Whether a call of `kind` may be made: `PERMISSION_DENIED` for a refused charge.
    pub fn allows(&self, kind: CallKind) -> Result<(), Status> {
        match kind {
            CallKind::Charge if !self.allow_charges => Err(Status::permission_denied(format!(
                "charges ({CHARGE_HEADER}) are refused by this server (--refuse-charges)"
            ))),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_charge_is_permission_denied_and_admissions_always_pass() {
        let closed = Trust {
            allow_charges: false,
            allow_quota: false,
        };
        let e = closed.allows(CallKind::Charge).unwrap_err();
        assert_eq!(e.code(), tonic::Code::PermissionDenied);
        assert_eq!(
            e.message(),
            "charges (x-floodgate-charge) are refused by this server (--refuse-charges)"
        );
        assert!(closed.allows(CallKind::Admission).is_ok());
        assert!(Trust::default().allows(CallKind::Charge).is_ok());
    }
}
