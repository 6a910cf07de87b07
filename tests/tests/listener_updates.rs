//! Listener updates while Envoy runs (listeners from a file, as a control plane pushes
//! them): buckets are kept or restarted exactly as `docs/local-mode.md` says, a steady load sees no
//! 5xx and no connection error, no VM crashes, and any sequence of `max_buckets` changes
//! keeps Envoy's memory bounded.

use floodgate_integration::client::get;
use floodgate_integration::{client, DynamicEnvoy, Envoy, Upstream};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn per_tenant(capacity: u64, max_buckets: u64) -> Value {
    json!({"max_buckets": max_buckets, "rules": [{
        "name": "per-tenant",
        "descriptors": [{"key": "tenant", "header": "x-tenant-id"}],
        "local": {"capacity": capacity, "refill_per_second": 0}
    }]})
}

/// The statuses of `n` requests of `tenant`, one after another, on new connections (a
/// connection opened before an update may still be served by the old filter chain while
/// it drains).
async fn statuses_of(url: &str, tenant: &str, n: usize) -> Vec<u16> {
    let c = client();
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(get(&c, url, &[("x-tenant-id", tenant)]).await.status);
    }
    out
}

/// Log lines that mean a VM failed (a trap, or a callback Envoy could not run).
fn vm_failures(envoy: &Envoy) -> Vec<String> {
    envoy
        .log()
        .lines()
        .filter(|l| l.contains("wasm") && (l.contains("failed") || l.contains("crash")))
        .map(str::to_string)
        .collect()
}

/// A steady load: `lanes` tasks, each sending GETs one after another on its own client
/// (kept-alive connections, as real clients do), every request a new tenant, until told
/// to stop or after `MAX_PER_LANE` requests.
struct Load {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
    lanes: Vec<tokio::task::JoinHandle<Outcome>>,
}

/// What the load's requests came to.
#[derive(Default)]
struct Outcome {
    /// Replies by status.
    statuses: HashMap<u16, u64>,
    /// Requests that got no reply at all.
    errors: Vec<String>,
}

const MAX_PER_LANE: u64 = 50_000;

impl Load {
    fn start(url: &str, lanes: usize) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let lanes = (0..lanes)
            .map(|lane| {
                let (stop, sent, url) = (stop.clone(), sent.clone(), url.to_string());
                tokio::spawn(async move {
                    let c = client();
                    let mut outcome = Outcome::default();
                    for n in 0..MAX_PER_LANE {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let tenant = format!("load-{lane}-{n}");
                        match c.get(&url).header("x-tenant-id", tenant).send().await {
                            Ok(r) => {
                                let status = r.status().as_u16();
                                let _ = r.bytes().await;
                                *outcome.statuses.entry(status).or_insert(0) += 1;
                            }
                            Err(e) => outcome.errors.push(format!("{e:?}")),
                        }
                        sent.fetch_add(1, Ordering::Relaxed);
                    }
                    outcome
                })
            })
            .collect();
        Load { stop, sent, lanes }
    }

    /// Waits until `more` requests have been sent since the call.
    async fn until_more(&self, more: u64) {
        let target = self.sent.load(Ordering::Relaxed) + more;
        floodgate_integration::wait::until("the load to go on", Duration::from_secs(30), || {
            let sent = self.sent.load(Ordering::Relaxed);
            async move { (sent >= target).then_some(()) }
        })
        .await;
    }

    async fn stop(self) -> Outcome {
        self.stop.store(true, Ordering::Relaxed);
        let mut total = Outcome::default();
        for lane in self.lanes {
            let outcome = lane.await.expect("load lane");
            for (status, n) in outcome.statuses {
                *total.statuses.entry(status).or_insert(0) += n;
            }
            total.errors.extend(outcome.errors);
        }
        total
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_listener_update_under_load_keeps_or_restarts_buckets_as_documented() {
    let upstream = Upstream::start().await;
    let mut envoy =
        DynamicEnvoy::floodgate_local(&per_tenant(3, 100_000), upstream.addr(), 2).await;
    let url = envoy.url("ingress", "/");
    let address = envoy.listener("ingress");
    assert_eq!(statuses_of(&url, "kept", 4).await, [200, 200, 200, 429]);

    let load = Load::start(&url, 4);
    load.until_more(200).await;
    envoy.update_plugin(&per_tenant(3, 100_000)).await;
    assert_eq!(
        statuses_of(&url, "kept", 1).await,
        [429],
        "the same configuration keeps the drained bucket"
    );
    load.until_more(200).await;
    envoy.update_plugin(&per_tenant(4, 100_000)).await;
    assert_eq!(
        statuses_of(&url, "kept", 5).await,
        [200, 200, 200, 200, 429],
        "a changed capacity starts the bucket afresh"
    );
    load.until_more(200).await;
    envoy.update_plugin(&per_tenant(4, 50_000)).await;
    assert_eq!(
        statuses_of(&url, "kept", 5).await,
        [200, 200, 200, 200, 429],
        "a changed max_buckets starts every bucket afresh"
    );
    load.until_more(200).await;
    let Outcome { statuses, errors } = load.stop().await;

    assert_eq!(
        envoy.listener("ingress"),
        address,
        "the listener kept its port"
    );
    assert!(
        errors.is_empty(),
        "connection errors under load: {errors:?}"
    );
    assert_eq!(
        statuses.keys().copied().collect::<Vec<_>>(),
        [200],
        "every load request is a new tenant: {statuses:?}"
    );
    assert_eq!(vm_failures(&envoy), Vec::<String>::new());
    assert_eq!(
        envoy.stat("listener_manager.lds.update_rejected").await,
        Some(0)
    );
}

/// Shared-data keys can never be deleted: before slot keys stopped depending on
/// `max_buckets`, each of these changes left a whole table of 300 000 keys behind
/// (about 36 MB each). Now the table of the largest size is all they ever cost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn changing_max_buckets_keeps_envoy_memory_bounded() {
    let upstream = Upstream::start().await;
    let largest = 300_000;
    let mut envoy =
        DynamicEnvoy::floodgate_local(&per_tenant(3, largest), upstream.addr(), 1).await;
    let url = envoy.url("ingress", "/");
    // One update first, so that what any update costs Envoy is in the baseline.
    envoy.update_plugin(&per_tenant(3, largest)).await;
    assert_eq!(statuses_of(&url, "drained", 4).await, [200, 200, 200, 429]);
    let before = envoy.rss_kib();
    envoy.update_plugin(&per_tenant(3, largest - 1)).await;
    assert_eq!(
        statuses_of(&url, "drained", 4).await,
        [200, 200, 200, 429],
        "a change of max_buckets starts every bucket afresh"
    );
    for size in [largest - 2, 150_000, largest - 3, largest - 4, largest] {
        envoy.update_plugin(&per_tenant(3, size)).await;
    }
    let after = envoy.rss_kib();
    eprintln!("Envoy RSS {before} KiB -> {after} KiB over 6 max_buckets changes");
    assert!(
        after <= before + 16 * 1024,
        "Envoy grew from {before} KiB to {after} KiB over 6 changes of max_buckets"
    );
    assert_eq!(
        statuses_of(&url, "drained", 1).await,
        [429],
        "back to a size it had, the table finds the bucket in the state it left it"
    );
    assert_eq!(vm_failures(&envoy), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refused_update_keeps_the_running_configuration_and_its_buckets() {
    let upstream = Upstream::start().await;
    let mut envoy = DynamicEnvoy::floodgate_local(&per_tenant(2, 1000), upstream.addr(), 2).await;
    let url = envoy.url("ingress", "/");
    assert_eq!(statuses_of(&url, "kept", 3).await, [200, 200, 429]);
    let refused = envoy.try_update_plugin(&per_tenant(0, 1000)).await;
    let reason = refused.expect_err("a zero capacity is refused");
    assert!(reason.contains("floodgate"), "{reason}");
    assert!(
        envoy
            .log()
            .contains("invalid configuration: rules[0].local.capacity: must be at least 1"),
        "the filter names the field"
    );
    assert_eq!(
        statuses_of(&url, "kept", 1).await,
        [429],
        "still the old buckets"
    );
    assert_eq!(
        statuses_of(&url, "other", 3).await,
        [200, 200, 429],
        "and the old limits"
    );
    assert_eq!(
        envoy.stat("listener_manager.lds.update_rejected").await,
        Some(1)
    );
}
