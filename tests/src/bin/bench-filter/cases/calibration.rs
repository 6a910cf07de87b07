//! The host-call calibration cases: `bench/host-calls` making one kind of call a fixed
//! number of times per request, beside the same module making none.

use super::{case, host_calls, Case};

/// The calls each calibration case makes per request.
pub const CALIBRATION_CALLS: u32 = 16;

/// The host-call kinds `bench/host-calls` prices, as its configuration names them.
pub const CALIBRATION_KINDS: [&str; 7] = [
    "header",
    "value",
    "property",
    "pairs",
    "clock",
    "shared-get",
    "shared-set",
];

/// The name of the calibration case of `kind` ("none": the module making no call).
pub fn calibration_case(kind: &str) -> String {
    if kind == "none" {
        "host calls: none".to_string()
    } else {
        format!("host calls: {kind} x{CALIBRATION_CALLS}")
    }
}

/// The host-call calibration (`bench/host-calls`): the module making no call, and making
/// [`CALIBRATION_CALLS`] calls of one kind per request, each kind in a VM of its own (the
/// module keeps its plan per VM).
pub fn calibration_cases() -> Vec<Case> {
    std::iter::once("none")
        .chain(CALIBRATION_KINDS)
        .map(|kind| {
            let plan = format!("{kind} {CALIBRATION_CALLS}");
            let filter = host_calls(&format!("host-calls-{kind}"), &plan);
            case(&calibration_case(kind), vec![filter], false)
        })
        .collect()
}
