//! A fleet of gossiping floodgate-server processes on loopback, for the gossip tests.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::support::{ask, descriptor, envoy_request, Server};
use floodgate_server::proto::rls::RateLimitRequest;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The fleet's limit, per hour ([`WINDOW`]).
pub const LIMIT: u32 = 60;
/// The limit's window. Windows align with the epoch (every hour on the hour, UTC), so a
/// test that must stay within one window first waits out the end of the current one
/// ([`clear_of_window_end`]).
pub const WINDOW: Duration = Duration::from_secs(3_600);
/// Gossip interval of every node, in milliseconds.
pub const INTERVAL_MS: u64 = 50;

pub fn config(dir: &Path) -> PathBuf {
    let path = dir.join("fleet.yaml");
    let text = format!(
        "domain: fleet\ndescriptors:\n  - key: tenant\n    rate_limit: {{ unit: hour, requests_per_unit: {LIMIT} }}\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// `n` free UDP ports on loopback (bound, then released for the nodes to take).
pub fn udp_ports(n: usize) -> Vec<String> {
    let sockets: Vec<std::net::UdpSocket> = (0..n)
        .map(|_| std::net::UdpSocket::bind("127.0.0.1:0").unwrap())
        .collect();
    sockets
        .iter()
        .map(|s| s.local_addr().unwrap().to_string())
        .collect()
}

/// A node gossiping on `addr`, joining through `seeds`.
pub fn node(config: &Path, addr: &str, seeds: &[&str], id: &str) -> Server {
    node_via(config, addr, addr, seeds, id)
}

/// A node listening on `addr` that tells its peers to reach it at `advertise` (a relay's).
pub fn node_via(config: &Path, addr: &str, advertise: &str, seeds: &[&str], id: &str) -> Server {
    let interval = INTERVAL_MS.to_string();
    let seeds = seeds.join(",");
    let flags = [
        "--store",
        "gossip",
        "--gossip-addr",
        addr,
        "--gossip-advertise-addr",
        advertise,
        "--gossip-seeds",
        &seeds,
        "--gossip-interval-ms",
        &interval,
        "--gossip-cluster-id",
        "e2e",
        "--gossip-node-id",
        id,
    ];
    Server::start(config, &flags)
}

/// Returns once at least `need` is left of the current window, waiting for the next one
/// if less is: at a window's end every part counts nothing any more, so the nodes drop
/// them and the fleet's counts start again from zero.
pub async fn clear_of_window_end(need: Duration) {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let into = Duration::from_nanos((now.as_nanos() % WINDOW.as_nanos()) as u64);
    let left = WINDOW - into;
    if left < need {
        tokio::time::sleep(left + Duration::from_secs(1)).await;
    }
}

/// Three nodes, each seeded with the other two, once each holds both live, with at least
/// 30 s left of the current window.
pub async fn fleet(config: &Path) -> Vec<Server> {
    clear_of_window_end(Duration::from_secs(30)).await;
    let addrs = udp_ports(3);
    let nodes: Vec<Server> = (0..3)
        .map(|i| {
            let seeds: Vec<&str> = (0..3)
                .filter(|&j| j != i)
                .map(|j| addrs[j].as_str())
                .collect();
            node(config, &addrs[i], &seeds, &format!("node-{i}"))
        })
        .collect();
    for n in &nodes {
        n.metric_reaches("floodgate_gossip_peers{state=\"live\"}", 2.0)
            .await;
    }
    nodes
}

pub fn tenant(name: &str) -> RateLimitRequest {
    envoy_request("fleet", vec![descriptor(&[("tenant", name)])])
}

/// What a node has left of `name`'s limit, as it stands: a check-only descriptor
/// (`hits_addend` 0) counts nothing.
pub async fn remaining(node: &Server, name: &str) -> u32 {
    let mut d = descriptor(&[("tenant", name)]);
    d.hits_addend = Some(0);
    let mut client = node.client().await;
    let r = ask(&mut client, envoy_request("fleet", vec![d]))
        .await
        .unwrap();
    r.statuses[0].limit_remaining
}
