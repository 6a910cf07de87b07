//! The counts as tables (Markdown, as `docs/costs.md` shows them).

use crate::calibration;
use crate::cost::Cost;
use crate::measure::Measured;
use crate::paths::Path;
use std::collections::BTreeMap;

/// Names without the ABI's `proxy_` / `proxy_on_` prefixes, with their counts.
fn by_name(counts: &BTreeMap<String, u64>, prefix: &str) -> String {
    counts
        .iter()
        .map(|(name, n)| {
            let short = name.strip_prefix(prefix).unwrap_or(name);
            if *n == 1 {
                short.to_string()
            } else {
                format!("{short} ×{n}")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// One row's figures.
fn row(path: &str, cost: &Cost) -> String {
    format!(
        "| {path} | {} | {} / {} | {} | {} | {} / {} | {} |",
        cost.instructions,
        cost.bulk_ops,
        cost.bulk_bytes,
        cost.vm_entries(),
        cost.calls(),
        cost.bytes_in,
        cost.bytes_out,
        calibration::FITTED.map_or_else(
            || "-".to_string(),
            |m| format!("{:.0} %", 100.0 * m.share(cost))
        ),
    )
}

/// The totals table, then what each path enters and calls, by name.
pub fn table(paths: &[Path], measured: &[Measured]) -> String {
    let mut out = String::from(
        "| path | wasm instructions | bulk ops / bytes | VM entries | host calls | ABI bytes in / out | expected CPU, of a proxied request |\n\
         |---|---:|---:|---:|---:|---:|---:|\n",
    );
    for m in measured {
        out.push_str(&row(m.name, &m.cost));
        out.push('\n');
    }
    out.push_str("\n| path | what it is | VM entries | host calls |\n|---|---|---|---|\n");
    for m in measured {
        let about = paths
            .iter()
            .find(|p| p.name == m.name)
            .map_or("", |p| p.about);
        out.push_str(&format!(
            "| {} | {about} | {} | {} |\n",
            m.name,
            by_name(&m.cost.entries, "proxy_on_"),
            by_name(&m.cost.host_calls, "proxy_"),
        ));
    }
    out
}

/// The fitted model as the README shows it: each coefficient in the run's µs and as a
/// share of that run's request with no filter (what carries over to another machine).
pub fn calibration(model: &calibration::Model) -> String {
    let mut out = format!(
        "baseline: a request with no filter cost the worker {:.1} µs in this run\n\n\
         | per | µs in this run | share of a proxied request |\n|---|---:|---:|\n",
        model.baseline
    );
    let mut rows = vec![
        ("wasm filter a request passes".to_string(), model.per_filter),
        ("VM entry (callback)".to_string(), model.entry),
        (
            "value handed back, its allocation entered (priced alone)".to_string(),
            model.allocation,
        ),
    ];
    for (kind, price) in calibration::PRICED.iter().zip(model.prices) {
        let held = if kind.allocations > 0 {
            ", its allocation included"
        } else {
            ""
        };
        rows.push((format!("`{}`{held} (priced alone)", kind.import), price));
    }
    rows.extend([
        (
            "local reply (`proxy_send_local_response`)".to_string(),
            model.local_reply,
        ),
        (
            "thousand wasm instructions".to_string(),
            model.kilo_instructions,
        ),
        (
            "`proxy_http_call` and taking its answer, Envoy's side included".to_string(),
            model.http_call,
        ),
    ]);
    for (what, us) in rows {
        out.push_str(&format!(
            "| {what} | {us:.3} | {:.2} % |\n",
            us / model.baseline * 100.0
        ));
    }
    out
}
