//! A client that has read floodgate's source cannot aim evictions at another tenant's
//! entry: a real Envoy loading floodgate.wasm (local mode), and the real floodgate-server
//! granting leases (global mode).
//!
//! The attacker works offline, as one would against a module whose hash key is written in
//! its source: it computes which of its own descriptor values land in the victim's probe
//! window (bucket table) or set (lease table) with the key the filter used before its key
//! became a per-Envoy secret, then sends only those. Against that module both attacks
//! work (the victim's drained bucket is replaced by a fresh one every round; the victim's
//! lease, whose hits the server already counted, is thrown away every round, until the
//! victim's limit is spent on grants it never used). Against a module whose placement is
//! keyed by a secret, the crafted values land wherever any other value would.

use floodgate_integration::client::get;
use floodgate_integration::{client, configs, Envoy, Server, Upstream};
use serde_json::json;
use siphasher::sip128::{Hasher128, SipHasher13};
use std::hash::Hasher;
use std::time::Instant;

/// The constant first half of every key the filter's source used to hash with.
const OLD_KEY0: u64 = 0x666c_6f6f_6467_6174;
/// The second half for local buckets ("bucketv1").
const OLD_BUCKET_KEY1: u64 = 0x6275_636b_6574_7631;
/// The second half for leases and over-limit cache entries ("overlim1").
const OLD_DESCRIPTOR_KEY1: u64 = 0x6f76_6572_6c69_6d31;

/// The bucket table's default size (`max_buckets`), and its probe window.
const MAX_BUCKETS: u64 = 10_000;
const PROBE_WINDOW: usize = 8;
/// The lease table's default number of sets (`lease_slots` 1024 in sets of 4), and its ways.
const LEASE_SETS: u64 = 256;
const LEASE_WAYS: usize = 4;

fn field(h: &mut SipHasher13, bytes: &[u8]) {
    h.write_u64(bytes.len() as u64);
    h.write(bytes);
}

/// What the old source computed for a local bucket of `rule` (capacity, micro-tokens per
/// second) and one descriptor value.
fn old_bucket_fingerprint(rule: &str, capacity: u32, rate_micro: u64, value: &str) -> u128 {
    let mut h = SipHasher13::new_with_keys(OLD_KEY0, OLD_BUCKET_KEY1);
    field(&mut h, rule.as_bytes());
    h.write_u32(capacity);
    h.write_u64(rate_micro);
    field(&mut h, value.as_bytes());
    h.finish128().as_u128()
}

/// What the old source computed for a global rule's descriptor (its lease entry).
fn old_lease_fingerprint(domain: &str, rule: &str, value: &str) -> u128 {
    let mut h = SipHasher13::new_with_keys(OLD_KEY0, OLD_DESCRIPTOR_KEY1);
    field(&mut h, domain.as_bytes());
    field(&mut h, rule.as_bytes());
    field(&mut h, value.as_bytes());
    h.finish128().as_u128()
}

/// `n` attacker values whose placement (`place`) is the victim's.
fn crafted(n: usize, victim: &str, place: impl Fn(&str) -> u64) -> Vec<String> {
    let target = place(victim);
    (0u64..)
        .map(|i| format!("attacker-{i}"))
        .filter(|v| place(v) == target)
        .take(n)
        .collect()
}

/// A stat once the filter has flushed at least `seen` allowed requests (so the counters
/// read belong to the traffic sent).
async fn stat_after(envoy: &Envoy, name: &str, allowed: u64) -> u64 {
    let deadline = Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let flushed = envoy
            .stat("wasmcustom.floodgate.allowed")
            .await
            .unwrap_or(0);
        if flushed >= allowed || Instant::now() > deadline {
            return envoy.stat(name).await.unwrap_or(0);
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn crafted_keys_cannot_evict_a_drained_bucket() {
    // 10 tokens, refilled at 0.1 per second, with a cost header: a drained bucket takes
    // 100 s to fill up again, so evicting it hands its client 10 tokens at once.
    let plugin = json!({"rules": [{
        "name": "per-tenant",
        "descriptors": [{"key": "tenant", "header": "x-tenant-id"}],
        "cost": {"header": "x-cost"},
        "local": {"capacity": 10, "refill_per_second": 0.1}
    }]});
    let attackers = crafted(PROBE_WINDOW, "victim", |v| {
        old_bucket_fingerprint("per-tenant", 10, 100_000, v) as u64 % MAX_BUCKETS
    });
    let upstream = Upstream::start().await;
    let envoy = Envoy::start(&configs::floodgate_local(&plugin, upstream.addr()), 2).await;
    let (c, url) = (client(), envoy.url("ingress", "/"));
    let started = Instant::now();
    let (mut victim, mut attacker) = (0u64, 0u64);
    const ROUNDS: usize = 5;
    for _ in 0..ROUNDS {
        // The victim spends what it has...
        for _ in 0..12 {
            if get(&c, &url, &[("x-tenant-id", "victim")]).await.status == 200 {
                victim += 1;
            }
        }
        // ... then the attacker fills the victim's probe window with drained buckets.
        for a in &attackers {
            let cost = [("x-tenant-id", a.as_str()), ("x-cost", "10")];
            if get(&c, &url, &cost).await.status == 200 {
                attacker += 1;
            }
        }
    }
    let refilled = (started.elapsed().as_secs_f64() * 0.1).ceil() as u64;
    let evictions = stat_after(
        &envoy,
        "wasmcustom.floodgate.bucket_evictions",
        victim + attacker,
    )
    .await;
    assert!(
        victim <= 10 + refilled,
        "the victim was admitted {victim} times in {ROUNDS} rounds ({refilled} tokens \
         refilled): its drained bucket was evicted {evictions} times"
    );
    assert_eq!(evictions, 0, "no bucket had to be evicted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn crafted_tenants_cannot_throw_away_a_victims_lease() {
    // 1000 per hour per tenant, leased 100 at a time: one grant covers every request the
    // victim sends here, unless it is evicted and the victim has to call for another.
    let server = Server::start(
        "
domain: edge
descriptors:
  - key: tenant
    rate_limit: {unit: hour, requests_per_unit: 1000}
    quota: {requests: 100, valid_ms: 600000}
",
        &[],
    );
    let plugin = json!({
        "rls": {"cluster": "ratelimit", "domain": "edge", "timeout_ms": 2_000,
                "failure_mode": "deny"},
        "rules": [{
            "name": "per-tenant",
            "descriptors": [{"key": "tenant", "header": "x-tenant-id"}],
            "global": {}
        }],
        "failure_status": 503
    });
    let attackers = crafted(LEASE_WAYS, "victim", |v| {
        old_lease_fingerprint("edge", "per-tenant", v) as u64 % LEASE_SETS
    });
    let upstream = Upstream::start().await;
    let yaml = configs::floodgate_global(&plugin, upstream.addr(), server.grpc());
    let envoy = Envoy::start(&yaml, 2).await;
    let (c, url) = (client(), envoy.url("ingress", "/"));
    const ROUNDS: u64 = 15;
    let mut victim = 0u64;
    for _ in 0..ROUNDS {
        if get(&c, &url, &[("x-tenant-id", "victim")]).await.status == 200 {
            victim += 1;
        }
        for a in &attackers {
            assert_eq!(get(&c, &url, &[("x-tenant-id", a)]).await.status, 200);
        }
    }
    let allowed = victim + ROUNDS * LEASE_WAYS as u64;
    let evictions = stat_after(&envoy, "wasmcustom.floodgate.lease.evictions", allowed).await;
    assert_eq!(
        victim, ROUNDS,
        "the victim was admitted {victim} of {ROUNDS} times: its lease was evicted \
         {evictions} times, each throwing away hits the server had counted"
    );
    assert_eq!(evictions, 0, "no lease had to be evicted");
}
