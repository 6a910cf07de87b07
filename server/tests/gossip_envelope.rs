//! The gossip store's envelope: what keys cost and how propagation grows with the fleet,
//! on real floodgate-server processes on loopback (docs/server/gossip.md quotes these).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "gossip/fleet.rs"]
mod fleet;
mod support;

use fleet::{
    clear_of_window_end, config, fleet, node, remaining, tenant, udp_ports, INTERVAL_MS, LIMIT,
};
use floodgate_server::proto::rls::rate_limit_response::Code;
use std::time::{Duration, Instant};
use support::{ask, eventually, Server};

/// What keys cost: 10,000 distinct counters admitted on one node reach both peers; the
/// time that takes, the fleet's gossip bytes per key and each node's resident memory per
/// key (docs/server/gossip.md quotes these figures).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_keys_reach_every_node() {
    const KEYS: usize = 10_000;
    let dir = tempfile::tempdir().unwrap();
    // Every key must stay live until both peers are seen holding it: the admissions and
    // the wait below within one window (the wait's 120 s and a margin).
    clear_of_window_end(Duration::from_secs(150)).await;
    let nodes = fleet(&config(dir.path())).await;
    let sent = r#"floodgate_gossip_bytes_total{direction="sent"}"#;
    let mut bytes_before = 0.0;
    for n in &nodes {
        bytes_before += n.metric(sent).await.unwrap_or(0.0);
    }
    let rss_before: Vec<u64> = nodes.iter().map(Server::rss_bytes).collect();
    let started = Instant::now();
    let tasks: Vec<_> = (0..8)
        .map(|t| {
            let client = nodes[0].client();
            async move {
                let mut client = client.await;
                for k in (t..KEYS).step_by(8) {
                    let r = ask(&mut client, tenant(&format!("key-{k}"))).await.unwrap();
                    assert_eq!(r.overall_code, Code::Ok as i32);
                }
            }
        })
        .collect();
    futures_util::future::join_all(tasks).await;
    let admitted_in = started.elapsed();
    let heard = r#"floodgate_gossip_keys{owner="peers"}"#;
    for n in &nodes[1..] {
        eventually(
            Duration::from_secs(120),
            "both peers hold every key",
            || async { n.metric(heard).await.unwrap_or(0.0) >= KEYS as f64 },
        )
        .await;
    }
    let converged_in = started.elapsed();
    let mut bytes_after = 0.0;
    for n in &nodes {
        bytes_after += n.metric(sent).await.unwrap_or(0.0);
    }
    let per_key =
        |i: usize| (nodes[i].rss_bytes().saturating_sub(rss_before[i])) as f64 / KEYS as f64;
    eprintln!(
        "{KEYS} keys on node 0: admitted in {admitted_in:?}, on both peers after {converged_in:?}; \
         fleet gossip {:.0} bytes per key; resident memory per key: owner {:.0} B, peers {:.0} B and {:.0} B",
        (bytes_after - bytes_before) / KEYS as f64,
        per_key(0),
        per_key(1),
        per_key(2),
    );
    assert_eq!(remaining(&nodes[2], "key-9999").await, LIMIT - 1);
}

/// The envelope in nodes and keys (run on demand, in a release build for figures:
/// `cargo test --release -p floodgate-server --test gossip_envelope -- --ignored
/// --nocapture`, or `make bench-gossip`): `GOSSIP_NODES` nodes (10 by default), each
/// seeded through one node; for each count in `GOSSIP_KEYS` (`1,1000` by default) that
/// many new keys admitted on node 0, and how long until every other node holds them: the
/// last one admitted (polled on each node in turn, so an upper bound), then all of them
/// (the nodes' `floodgate_gossip_keys{owner="peers"}`, which they refresh once a second).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, run on demand"]
async fn propagation_across_a_larger_fleet() {
    let n: usize = std::env::var("GOSSIP_NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let counts: Vec<usize> = std::env::var("GOSSIP_KEYS")
        .unwrap_or_else(|_| "1,1000".into())
        .split(',')
        .filter_map(|k| k.trim().parse().ok())
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let addrs = udp_ports(n);
    let nodes: Vec<Server> = (0..n)
        .map(|i| {
            let seed = if i == 0 { &addrs[1] } else { &addrs[0] };
            node(&config, &addrs[i], &[seed.as_str()], &format!("node-{i}"))
        })
        .collect();
    let live = "floodgate_gossip_peers{state=\"live\"}";
    for node in &nodes {
        node.metric_reaches(live, (n - 1) as f64).await;
    }
    let heard = r#"floodgate_gossip_keys{owner="peers"}"#;
    let mut total = 0;
    for keys in counts {
        let admitting = Instant::now();
        admit_new_keys(&nodes[0], &format!("{keys}"), keys).await;
        let admitted = Instant::now();
        let took = admitted - admitting;
        total += keys;
        for node in &nodes[1..] {
            eventually(
                Duration::from_secs(300),
                "every node holds the last key",
                || async { remaining(node, &format!("{keys}-{}", keys - 1)).await == LIMIT - 1 },
            )
            .await;
        }
        let last = admitted.elapsed();
        for node in &nodes[1..] {
            eventually(
                Duration::from_secs(300),
                "every node holds every key",
                || async { node.metric(heard).await.unwrap_or(0.0) >= total as f64 },
            )
            .await;
        }
        eprintln!(
            "{n} nodes, {INTERVAL_MS} ms interval: {keys} new key(s) admitted on node 0 in {took:?}; \
             the last reached every node {last:?} after the last admission, all of them {:?}",
            admitted.elapsed()
        );
    }
}

/// Admits `keys` new keys `{prefix}-{k}` on `node`, from 8 callers at once.
async fn admit_new_keys(node: &Server, prefix: &str, keys: usize) {
    let tasks: Vec<_> = (0..8.min(keys))
        .map(|t| {
            let client = node.client();
            async move {
                let mut client = client.await;
                for k in (t..keys).step_by(8) {
                    let r = ask(&mut client, tenant(&format!("{prefix}-{k}")))
                        .await
                        .unwrap();
                    assert_eq!(r.overall_code, Code::Ok as i32);
                }
            }
        })
        .collect();
    futures_util::future::join_all(tasks).await;
}
