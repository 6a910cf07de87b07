//! Running a path and counting its measured request.

use crate::cost::Cost;
use crate::envoy::{Outcome, Proxy};
use crate::paths::{bench_request, Measure, Path};
use crate::rls::Rls;

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

/// Loads the path's module, warms up, and counts the measured part; an error if the
/// module is missing, the run fails, or the request did not go as the path says.
pub fn measure(path: &Path) -> Result<Measured, String> {
    let (file, build) = path.module.file();
    let wasm = std::fs::read(&file)
        .map_err(|e| format!("{}: {e} (run `{build}` first)", file.display()))?;
    let configurations: Vec<String> = path
        .chain
        .iter()
        .map(|v| {
            if v.is_null() {
                String::new()
            } else {
                v.to_string()
            }
        })
        .collect();
    let rls = Rls {
        limits: path.limits.clone(),
        answered: 0,
    };
    let mut proxy = Proxy::start(&wasm, &configurations, rls, path.upstream.clone())?;
    let request = bench_request();
    for _ in 0..path.warm_up {
        proxy.advance(STEP_NS);
        proxy.request(&request)?;
    }
    let next = |proxy: &mut Proxy| -> Result<Measured, String> {
        proxy.advance(STEP_NS);
        let (before, calls) = (proxy.vm.cost(), proxy.rls.answered);
        let outcome = proxy.request(&request)?;
        Ok(Measured {
            name: path.name,
            cost: proxy.vm.cost().since(&before),
            outcome,
            calls: proxy.rls.answered - calls,
        })
    };
    let measured = match path.measure {
        Measure::NextRequest => next(&mut proxy)?,
        Measure::FirstRequestWithCalls(calls) => {
            let mut found = None;
            for _ in 0..1_000 {
                let m = next(&mut proxy)?;
                if m.calls == calls {
                    found = Some(m);
                    break;
                }
            }
            found.ok_or_else(|| {
                format!("{}: no request made {calls} calls within 1 000", path.name)
            })?
        }
        Measure::Tick => {
            let outcome = next(&mut proxy)?.outcome;
            proxy.advance(1_000 * STEP_NS);
            let before = proxy.vm.cost();
            proxy.tick()?;
            return Ok(Measured {
                name: path.name,
                cost: proxy.vm.cost().since(&before),
                outcome,
                calls: 0,
            });
        }
    };
    if (measured.outcome, measured.calls) != (path.outcome, path.calls) {
        return Err(format!(
            "{}: the measured request ended {:?} after {} calls; the path expects {:?} after {}",
            path.name, measured.outcome, measured.calls, path.outcome, path.calls
        ));
    }
    Ok(measured)
}
