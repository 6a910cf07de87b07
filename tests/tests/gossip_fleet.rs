//! The filter's global mode against a gossiping fleet, end to end: three floodgate-server
//! processes (`--store gossip` on loopback), each with its own Envoy loading the real
//! floodgate.wasm in global mode, one limit, load spread on the three Envoys, and an
//! upstream that counts what reaches it. The filter is unchanged: it asks its own server,
//! and the servers hold the limit between them within the gossip store's stated bound
//! (`docs/server/gossip.md`), with the filter's quota leases on or off.

use floodgate_integration::client::{get, statuses, Reply};
use floodgate_integration::{client, configs, wait, Envoy, Server, Upstream};
use futures::future::join_all;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// The fleet's limit per tenant, in a fixed window of an hour: the test keeps clear of its
/// end ([`wait::clear_of_window_end`]), so no boundary falls inside it.
const LIMIT: usize = 60;
/// Hits one lease grant takes at most (`quota.requests`).
const N: usize = 10;
/// Gossip interval of every node, in milliseconds.
const INTERVAL_MS: u64 = 50;
/// Clients per Envoy, each sending one request every [`PACE`].
const CLIENTS: usize = 2;
const PACE: Duration = Duration::from_millis(20);

fn limits(leased: bool) -> String {
    let quota = if leased {
        format!("\n    quota: {{ requests: {N}, valid_ms: 60000 }}")
    } else {
        String::new()
    };
    format!(
        "domain: edge\ndescriptors:\n  - key: tenant\n    rate_limit: {{ unit: hour, requests_per_unit: {LIMIT} }}{quota}\n"
    )
}

/// One global rule per tenant, leasing when the service offers it; fail closed, so a
/// failed call shows up as a 503 and never as an admission.
fn plugin() -> Value {
    json!({
        "rls": {"cluster": "ratelimit", "domain": "edge", "timeout_ms": 2_000,
                "failure_mode": "deny"},
        "rules": [{
            "name": "per-tenant",
            "descriptors": [{"key": "tenant", "header": "x-tenant-id"}],
            "global": {"quota": true}
        }],
        "failure_status": 503
    })
}

/// `n` free UDP ports on loopback (bound, then released for the nodes to take).
fn udp_ports(n: usize) -> Vec<String> {
    let sockets: Vec<std::net::UdpSocket> = (0..n)
        .map(|_| std::net::UdpSocket::bind("127.0.0.1:0").expect("udp port"))
        .collect();
    sockets
        .iter()
        .map(|s| s.local_addr().expect("udp address").to_string())
        .collect()
}

/// Three gossip nodes, each seeded with the other two, once each holds both live.
async fn fleet(config: &str) -> Vec<Server> {
    let addrs = udp_ports(3);
    let interval = INTERVAL_MS.to_string();
    let nodes: Vec<Server> = (0..3)
        .map(|i| {
            let seeds: Vec<&str> = (0..3)
                .filter(|&j| j != i)
                .map(|j| addrs[j].as_str())
                .collect();
            let seeds = seeds.join(",");
            let id = format!("node-{i}");
            let flags = [
                "--store",
                "gossip",
                "--gossip-addr",
                &addrs[i],
                "--gossip-seeds",
                &seeds,
                "--gossip-interval-ms",
                &interval,
                "--gossip-cluster-id",
                "fleet",
                "--gossip-node-id",
                &id,
            ];
            Server::start(config, &flags)
        })
        .collect();
    for n in &nodes {
        wait::until("both peers live", Duration::from_secs(20), || async {
            (n.metric(r#"floodgate_gossip_peers{state="live"}"#).await >= 2.0).then_some(())
        })
        .await;
    }
    nodes
}

/// [`CLIENTS`] clients per URL, each sending `per_client` GETs for tenant `acme`, one
/// every [`PACE`], all at once.
async fn paced(urls: &[String], per_client: usize) -> Vec<Reply> {
    let tasks = urls.iter().flat_map(|url| {
        (0..CLIENTS).map(move |_| {
            let (url, c) = (url.clone(), client());
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(PACE);
                let mut replies = Vec::new();
                for _ in 0..per_client {
                    tick.tick().await;
                    replies.push(get(&c, &url, &[("x-tenant-id", "acme")]).await);
                }
                replies
            })
        })
    });
    join_all(tasks)
        .await
        .into_iter()
        .flat_map(|r| r.expect("client task"))
        .collect()
}

/// The stated bound for three nodes each admitting at most `rate` per second:
/// over-admission ≤ Σ rate_i × propagation, propagation ≈ interval × (1 + rounds), with
/// three nodes one round: taken at twice that, as the server's own test does (a loaded
/// two-core machine runs its rounds late).
fn bound(rate_per_node: f64) -> usize {
    let propagation = 4.0 * INTERVAL_MS as f64 / 1_000.0;
    (3.0 * rate_per_node * propagation).ceil() as usize
}

/// The scenario: three nodes, three Envoys, three times the limit asked for, spread.
/// Returns what the upstream saw and the bound it was held to beyond the limit.
async fn spread(leased: bool) -> (usize, usize) {
    let nodes = fleet(&limits(leased)).await;
    let upstream = Upstream::start().await;
    let mut envoys = Vec::new();
    for n in &nodes {
        let yaml = configs::floodgate_global(&plugin(), upstream.addr(), n.grpc());
        envoys.push(Envoy::start(&yaml, 2).await);
    }
    let urls: Vec<String> = envoys.iter().map(|e| e.url("ingress", "/")).collect();
    let per_client = 3 * LIMIT / (urls.len() * CLIENTS);
    // At least 30 s left in the hour: far more than the paced requests (under 1 s) and the
    // spending of the grants after them take. (Grants, too, end at the window's end.)
    wait::clear_of_window_end(Duration::from_secs(3_600), Duration::from_secs(30)).await;
    let started = Instant::now();
    let mut replies = paced(&urls, per_client).await;
    let took = started.elapsed();
    // Spend what the Envoys still hold of their grants: each asks until refused, so every
    // hit the fleet counted is either admitted or refused by now, none stranded.
    if leased {
        let c = client();
        for url in &urls {
            for _ in 0..3 * LIMIT {
                let r = get(&c, url, &[("x-tenant-id", "acme")]).await;
                let refused = r.status == 429;
                replies.push(r);
                if refused {
                    break;
                }
            }
        }
    }
    let counts = statuses(&replies);
    let admitted = counts.get(&200).copied().unwrap_or(0);
    let over = counts.get(&429).copied().unwrap_or(0);
    assert_eq!(
        admitted + over,
        replies.len(),
        "{counts:?}: every request admitted or refused, none failed\n{}",
        nodes[0].log()
    );
    assert_eq!(
        upstream.count(),
        admitted as u64,
        "the upstream sees the admitted"
    );
    let mut calls = 0.0;
    for n in &nodes {
        for result in ["ok", "over_limit"] {
            let series = format!(r#"floodgate_requests_total{{result="{result}"}}"#);
            calls += n.metric(&series).await;
        }
    }
    // The bound: 100 admitted per second per node at most (two clients every 20 ms); a
    // lease adds at most one grant per node, granted on a view that had not yet heard.
    let bound = bound((CLIENTS as f64) * 1_000.0 / PACE.as_millis() as f64)
        + if leased { 3 * N } else { 0 };
    eprintln!(
        "gossip fleet, leases {leased}: upstream saw {admitted} of {} in {took:?} \
         ({calls} server calls); limit {LIMIT}, bound + {bound}",
        replies.len()
    );
    assert!(admitted >= LIMIT, "{counts:?}: under-admission");
    assert!(
        admitted <= LIMIT + bound,
        "{counts:?}: over-admission past the bound (limit {LIMIT} + {bound})"
    );
    (admitted, bound)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_envoys_on_a_gossiping_fleet_hold_one_limit_within_the_bound() {
    spread(false).await;
}

/// With quota leases most requests make no call, and a grant takes only the node's share
/// of what it sees remaining (`remaining / live nodes`), so leasing does not multiply the
/// over-admission: the same bound holds, plus one grant per node.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leases_on_a_gossiping_fleet_do_not_multiply_the_over_admission() {
    spread(true).await;
}
