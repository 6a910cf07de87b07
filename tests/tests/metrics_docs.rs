//! The metric names the docs' two tables document (one per component, see `docs.rs`) and
//! the alerting rules use are the ones the filter (in Envoy) and floodgate-server really
//! export, and the rules themselves pass promtool's checks and unit tests.

use floodgate_integration::{examples, markdown, paths};
use std::collections::BTreeSet;
use std::process::Command;

/// Metric names from the `# TYPE name kind` lines of a Prometheus exposition.
fn exposed_names(exposition: &str) -> BTreeSet<String> {
    exposition
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| name.starts_with("floodgate_"))
        .map(str::to_string)
        .collect()
}

/// What really comes out: the filter's names (Envoy's `/stats/prometheus`, every example
/// running) and floodgate-server's (`/metrics`).
async fn exported() -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut filter, mut server) = (BTreeSet::new(), BTreeSet::new());
    for file in examples::files() {
        let running = examples::start(&file).await;
        filter.extend(exposed_names(&running.envoy.prometheus().await));
        if let Some(s) = &running.server {
            server.extend(exposed_names(&s.metrics().await));
        }
    }
    // The gossip store's families have series only under --store gossip, which no
    // example runs: one node alone adds them.
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").expect("a free UDP port");
    let gossip_addr = udp.local_addr().expect("its address").to_string();
    drop(udp);
    let gossip = floodgate_integration::server::Server::start(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 1 }\n",
        &["--store", "gossip", "--gossip-addr", &gossip_addr],
    );
    server.extend(exposed_names(&gossip.metrics().await));
    assert!(!filter.is_empty(), "Envoy exported no floodgate_* metric");
    assert!(
        !server.is_empty(),
        "no example ran floodgate-server, or it exported nothing"
    );
    (filter, server)
}

/// Names in the metric table (rows starting with a backquoted `floodgate_…`) under the
/// heading `heading` of the markdown file `file`, labels stripped.
fn documented(file: &str, heading: &str) -> BTreeSet<String> {
    let text = std::fs::read_to_string(paths::repo_root().join(file)).expect("read markdown");
    let names: BTreeSet<String> = markdown::section(&text, heading)
        .into_iter()
        .filter_map(|line| line.strip_prefix("| `floodgate_"))
        .map(|rest| {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            format!("floodgate_{name}")
        })
        .collect();
    assert!(
        !names.is_empty(),
        "{file}: no metric table under {heading:?}"
    );
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_docs_document_exactly_the_exported_metrics() {
    let (filter, server) = exported().await;
    assert_eq!(
        documented("docs/metrics.md", "The filter's metrics"),
        filter,
        "docs/metrics.md table vs what Envoy exports"
    );
    assert_eq!(
        documented("docs/server/metrics.md", "floodgate-server's metrics"),
        server,
        "docs/server/metrics.md table vs floodgate-server's /metrics"
    );
}

const ALERTS: &str = "examples/prometheus/floodgate-alerts.yaml";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_alerts_use_only_exported_metrics() {
    let (filter, server) = exported().await;
    let text = std::fs::read_to_string(paths::repo_root().join(ALERTS)).expect("alerts");
    let rules: serde_json::Value = serde_yaml_ng::from_str(&text).expect("alerts YAML");
    let mut used = BTreeSet::new();
    for group in rules["groups"].as_array().expect("groups") {
        for rule in group["rules"].as_array().expect("rules") {
            let expr = rule["expr"].as_str().expect("expr");
            for (at, _) in expr.match_indices("floodgate_") {
                let name: String = expr[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                used.insert(name);
            }
        }
    }
    assert!(!used.is_empty());
    let unknown: Vec<&String> = used
        .iter()
        .filter(|n| !filter.contains(*n) && !server.contains(*n))
        .collect();
    assert!(
        unknown.is_empty(),
        "{ALERTS} uses metrics nothing exports: {unknown:?}"
    );
}

fn promtool(args: &[&str]) {
    let out = Command::new(paths::program("promtool", "make promtool"))
        .current_dir(paths::repo_root().join("examples/prometheus"))
        .args(args)
        .output()
        .expect("run promtool");
    assert!(
        out.status.success(),
        "promtool {}:\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_alerting_rules_pass_promtool_checks_and_unit_tests() {
    promtool(&["check", "rules", "floodgate-alerts.yaml"]);
    promtool(&["test", "rules", "floodgate-alerts.test.yaml"]);
}
