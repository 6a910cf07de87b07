//! When the host cannot carry out what the limiter decided: what to do instead.
//!
//! The limiter decides; the host carries the decision out with host calls, and each of
//! them can fail. Every such failure goes through one function in the HTTP context,
//! which counts it by [`HostFailure`] (one `floodgate_host_error_*` metric per cause) and
//! does what [`remedy`] says, honouring `failure_mode` (the filter's own failure mode:
//! these are failures of floodgate, not of the rate limit service). Pure, so that the
//! choice is unit-tested on the host target.
//!
//! | cause | `allow` | `deny` |
//! |---|---|---|
//! | the tally is busy (no decision could be made) | let through | failure reply |
//! | the request's context cannot be switched to | leave paused | leave paused |
//! | the request cannot be resumed | leave paused | failure reply |
//! | the local reply cannot be sent | let through | failure reply |
//!
//! The failure reply is the plainest one floodgate sends (`failure_status`, no rate
//! limit or service headers). When even that cannot be sent, or nothing can be done
//! (without its context no host call reaches the request), the request stays paused
//! until Envoy ends the stream (its stream idle timeout, or the client going away):
//! under `deny` that is the only way left not to let it through.

use super::log_throttle::Cause;
use crate::config::FailureMode;
use crate::metrics::Global;

/// A host call that failed while carrying out a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostFailure {
    /// This thread's metric tally was in use (a re-entrant callback): the limiter could
    /// not decide.
    TallyBusy,
    /// The request's context could not be made current for the service's answer.
    SwitchContext,
    /// A paused request could not be resumed.
    Resume,
    /// The local reply (a rejection or a refusal) could not be sent.
    LocalReply,
}

impl HostFailure {
    /// Every cause, in the order of their counters.
    pub const ALL: [HostFailure; 4] = [
        HostFailure::TallyBusy,
        HostFailure::SwitchContext,
        HostFailure::Resume,
        HostFailure::LocalReply,
    ];

    /// The metric counting it.
    pub fn metric(self) -> Global {
        match self {
            HostFailure::TallyBusy => Global::HostErrorTallyBusy,
            HostFailure::SwitchContext => Global::HostErrorContext,
            HostFailure::Resume => Global::HostErrorResume,
            HostFailure::LocalReply => Global::HostErrorLocalReply,
        }
    }

    /// The log throttle's cause it is logged under.
    pub fn cause(self) -> Cause {
        match self {
            HostFailure::TallyBusy => Cause::TallyBusy,
            HostFailure::SwitchContext => Cause::SwitchContext,
            HostFailure::Resume => Cause::Resume,
            HostFailure::LocalReply => Cause::LocalReply,
        }
    }
}

/// What the host does instead of the decision it could not carry out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Remedy {
    /// Let the request go on.
    LetThrough,
    /// Answer it with the failure reply (`failure_status`).
    FailureReply,
    /// Leave it paused: nothing else can be done, or `deny` forbids letting it through.
    LeavePaused,
}

/// What to do when the host failed with `failure`, under `failure_mode` `mode`: see
/// the module documentation's table.
pub fn remedy(failure: HostFailure, mode: FailureMode) -> Remedy {
    match (failure, mode) {
        // Every host call would act on whichever context is current, not this request.
        (HostFailure::SwitchContext, _) => Remedy::LeavePaused,
        // Letting it through is what just failed.
        (HostFailure::Resume, FailureMode::Allow) => Remedy::LeavePaused,
        (HostFailure::TallyBusy | HostFailure::LocalReply, FailureMode::Allow) => {
            Remedy::LetThrough
        }
        (_, FailureMode::Deny) => Remedy::FailureReply,
    }
}

#[cfg(test)]
mod tests;
