//! Running a path and counting its measured request.

use crate::cost::Cost;
use crate::envoy::{Outcome, Proxy};
use crate::paths::{bench_request, Measure, Path};
use crate::rls::Rls;
use serde_json::Value;
use std::collections::BTreeMap;

/// Time between two requests of a run (the clock moves only when the driver says so).
const STEP_NS: u64 = 1_000_000;

/// What one path's measured request (or tick) cost.
#[derive(Debug, Clone)]
pub struct Measured {
    /// The path's name.
    pub name: &'static str,
    /// The counts.
    pub cost: Cost,
    /// How the measured request ended.
    pub outcome: Outcome,
    /// Rate limit calls it made.
    pub calls: u64,
}

/// The path's module file.
pub fn module(path: &Path) -> Result<Vec<u8>, String> {
    let (file, build) = path.module.file();
    std::fs::read(&file).map_err(|e| format!("{}: {e} (run `{build}` first)", file.display()))
}

/// Loads the path's module, warms up, and counts the measured part; an error if the
/// module is missing, the run fails, or the request did not go as the path says.
pub fn measure(path: &Path) -> Result<Measured, String> {
    Ok(run(path, &module(path)?, false)?.0)
}

/// [`measure`] on `wasm` (the path's module, or a build of it with names), with the
/// measured part's instructions and bulk-memory operations by function index.
pub fn profile(path: &Path, wasm: &[u8]) -> Result<(Measured, BTreeMap<u32, [u64; 2]>), String> {
    run(path, wasm, true)
}

/// What a function-by-function snapshot changed.
fn since(now: BTreeMap<u32, [u64; 2]>, then: &BTreeMap<u32, [u64; 2]>) -> BTreeMap<u32, [u64; 2]> {
    now.into_iter()
        .map(|(f, [n, copies])| {
            let [n0, copies0] = then.get(&f).copied().unwrap_or_default();
            (f, [n - n0, copies - copies0])
        })
        .filter(|(_, [n, _])| *n > 0)
        .collect()
}

type Run = (Measured, BTreeMap<u32, [u64; 2]>);

fn run(path: &Path, wasm: &[u8], per_function: bool) -> Result<Run, String> {
    let configurations: Vec<String> = path
        .chain
        .iter()
        .map(|v| match v {
            Value::Null => String::new(),
            // A plain-text configuration (bench/host-calls' plan), handed over as it is.
            Value::String(text) => text.clone(),
            _ => v.to_string(),
        })
        .collect();
    let rls = Rls {
        limits: path.limits.clone(),
        answered: 0,
    };
    let mut proxy = Proxy::start_with(
        wasm,
        &configurations,
        rls,
        path.upstream.clone(),
        per_function,
    )?;
    let request = bench_request();
    for _ in 0..path.warm_up {
        proxy.advance(STEP_NS);
        proxy.request(&request)?;
    }
    // Counts one step (a request, or a tick when `tick`).
    let step = |proxy: &mut Proxy, tick: bool| -> Result<Run, String> {
        proxy.advance(if tick { 1_000 * STEP_NS } else { STEP_NS });
        let (before, functions, calls) =
            (proxy.vm.cost(), proxy.vm.functions(), proxy.rls.answered);
        let outcome = if tick {
            proxy.tick()?;
            Outcome::Forwarded
        } else {
            proxy.request(&request)?
        };
        let measured = Measured {
            name: path.name,
            cost: proxy.vm.cost().since(&before),
            outcome,
            calls: proxy.rls.answered - calls,
        };
        Ok((measured, since(proxy.vm.functions(), &functions)))
    };
    let run = match path.measure {
        Measure::NextRequest => step(&mut proxy, false)?,
        Measure::FirstRequestWithCalls(calls) => {
            let mut found = None;
            for _ in 0..1_000 {
                let run = step(&mut proxy, false)?;
                if run.0.calls == calls {
                    found = Some(run);
                    break;
                }
            }
            found.ok_or_else(|| {
                format!("{}: no request made {calls} calls within 1 000", path.name)
            })?
        }
        Measure::Tick => {
            step(&mut proxy, false)?;
            return step(&mut proxy, true);
        }
    };
    let measured = &run.0;
    if (measured.outcome, measured.calls) != (path.outcome, path.calls) {
        return Err(format!(
            "{}: the measured request ended {:?} after {} calls; the path expects {:?} after {}",
            path.name, measured.outcome, measured.calls, path.outcome, path.calls
        ));
    }
    Ok(run)
}
