//! A module that traps, in a real Envoy 1.40: what each failure setting does to the
//! request that crashed the VM and to the requests after it (`docs/failures.md`, "When the
//! module crashes"). The module is the test-only build that panics on a magic header
//! (`make wasm-trap`); one worker, so that every request meets the crashed VM.

use floodgate_integration::client::get;
use floodgate_integration::{client, configs, paths, wait, DynamicEnvoy, Envoy, Upstream};
use serde_json::{json, Value};
use std::time::Duration;

/// The header that makes the test build trap (`src/host/trap.rs`).
const TRAP: (&str, &str) = ("x-floodgate-test-trap", "1");

fn plugin() -> Value {
    json!({"rules": [{
        "name": "per-tenant",
        "descriptors": [{"key": "tenant", "header": "x-tenant-id"}],
        "local": {"capacity": 2, "refill_per_second": 0}
    }]})
}

/// The plugin's filter entry with the trapping build and `field: value` as its only
/// failure setting (none for an empty `field`).
fn trapping_filter(field: &str, value: Value) -> Value {
    let mut filter = configs::wasm_filter(
        "floodgate",
        &paths::trap_wasm().display().to_string(),
        &plugin().to_string(),
    );
    let config = filter["typed_config"]["config"]
        .as_object_mut()
        .expect("plugin config");
    config.remove("fail_open");
    config.remove("failure_policy");
    if !field.is_empty() {
        config.insert(field.to_string(), value);
    }
    filter
}

/// Envoy (one worker) with the trapping build, `field: value` as its only failure setting
/// (none for an empty `field`).
async fn start(field: &str, value: Value) -> (Envoy, Upstream) {
    start_with_workers(field, value, 1).await
}

async fn start_with_workers(field: &str, value: Value, workers: u32) -> (Envoy, Upstream) {
    let upstream = Upstream::start().await;
    let filter = trapping_filter(field, value);
    let yaml = configs::bootstrap(
        vec![configs::listener("ingress", vec![filter], "upstream")],
        vec![configs::cluster("upstream", upstream.addr(), false)],
    );
    (Envoy::start(&yaml, workers).await, upstream)
}

/// Statuses of `n` requests of `tenant`, one after another.
async fn statuses(envoy: &Envoy, headers: &[(&str, &str)], n: usize) -> Vec<u16> {
    let (c, url) = (client(), envoy.url("ingress", "/"));
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(get(&c, &url, headers).await.status);
    }
    out
}

/// Takes one token of tenant `a`, then sends the trapping request: returns its status.
async fn crash(envoy: &Envoy) -> u16 {
    assert_eq!(statuses(envoy, &[("x-tenant-id", "a")], 1).await, [200]);
    let status = statuses(envoy, &[("x-tenant-id", "a"), TRAP], 1).await[0];
    assert!(
        envoy.log().contains(
            "Function: proxy_on_request_headers failed: Uncaught RuntimeError: unreachable"
        ),
        "the VM trapped:\n{}",
        envoy.log()
    );
    status
}

/// The recommended setting: the VM is reloaded, limiting resumes with the buckets it had.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fail_reload_serves_and_limits_again_with_the_same_buckets() {
    let (envoy, upstream) = start("failure_policy", json!("FAIL_RELOAD")).await;
    assert_eq!(crash(&envoy).await, 503);
    // Until the reload (after a 1 s backoff, on the next request) Envoy answers 503.
    let c = client();
    let url = envoy.url("ingress", "/");
    wait::until("the VM to be reloaded", Duration::from_secs(20), || async {
        (get(&c, &url, &[]).await.status == 200).then_some(())
    })
    .await;
    assert_eq!(
        envoy.stat("wasm.floodgate.vm_reload_success").await,
        Some(1)
    );
    assert_eq!(
        statuses(&envoy, &[("x-tenant-id", "a")], 2).await,
        [200, 429],
        "shared data outlives the VM: tenant a still has the one token it had left"
    );
    assert_eq!(
        statuses(&envoy, &[("x-tenant-id", "b")], 3).await,
        [200, 200, 429]
    );
    assert_eq!(
        upstream.count_for("a"),
        2,
        "the trapping request never went upstream"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fail_closed_answers_503_from_then_on() {
    let (envoy, upstream) = start("failure_policy", json!("FAIL_CLOSED")).await;
    assert_eq!(crash(&envoy).await, 503);
    assert_eq!(statuses(&envoy, &[("x-tenant-id", "b")], 3).await, [503; 3]);
    assert_eq!(statuses(&envoy, &[], 2).await, [503; 2]);
    assert_eq!(envoy.stat("wasm.floodgate.vm_reload").await, Some(0));
    assert_eq!(upstream.count(), 1);
}

/// Neither `failure_policy` nor `fail_open`: FAIL_CLOSED.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_setting_answers_503_from_then_on() {
    let (envoy, upstream) = start("", Value::Null).await;
    assert_eq!(crash(&envoy).await, 503);
    assert_eq!(statuses(&envoy, &[("x-tenant-id", "b")], 3).await, [503; 3]);
    assert_eq!(upstream.count(), 1);
}

/// Envoy does not reload a FAIL_CLOSED or FAIL_OPEN VM by itself, but a listener update
/// (even with the same configuration) builds a new one, which finds the buckets in shared
/// data. `meanwhile` is what tenant `b` gets between the crash and the update.
async fn a_listener_update_brings_a_new_vm_with_the_same_buckets(policy: &str, meanwhile: u16) {
    let upstream = Upstream::start().await;
    let listener = || {
        let filter = trapping_filter("failure_policy", json!(policy));
        configs::listener("ingress", vec![filter], "upstream")
    };
    let cluster = configs::cluster("upstream", upstream.addr(), false);
    let mut envoy = DynamicEnvoy::start(vec![listener()], vec![cluster], 1).await;
    assert_eq!(crash(&envoy).await, 503);
    assert_eq!(
        statuses(&envoy, &[("x-tenant-id", "b")], 3).await,
        [meanwhile; 3]
    );
    envoy.update_listeners(vec![listener()]).await;
    assert_eq!(
        statuses(&envoy, &[("x-tenant-id", "a")], 2).await,
        [200, 429],
        "tenant a still has the one token it had left"
    );
    assert_eq!(
        statuses(&envoy, &[("x-tenant-id", "b")], 3).await,
        [200, 200, 429],
        "limited again (unlimited requests took no tokens)"
    );
    assert_eq!(envoy.stat("wasm.floodgate.vm_reload").await, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn after_fail_closed_a_listener_update_brings_a_new_vm_with_the_same_buckets() {
    a_listener_update_brings_a_new_vm_with_the_same_buckets("FAIL_CLOSED", 503).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn after_fail_open_a_listener_update_brings_a_new_vm_with_the_same_buckets() {
    a_listener_update_brings_a_new_vm_with_the_same_buckets("FAIL_OPEN", 200).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fail_open_stops_limiting_from_then_on() {
    let (envoy, upstream) = start("failure_policy", json!("FAIL_OPEN")).await;
    assert_eq!(
        crash(&envoy).await,
        503,
        "the crashing request itself fails"
    );
    assert_eq!(
        statuses(&envoy, &[("x-tenant-id", "b")], 4).await,
        [200; 4],
        "no limit any more"
    );
    assert_eq!(upstream.count(), 5);
}

/// The deprecated boolean: `true` is FAIL_OPEN except that the crashing request goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deprecated_fail_open_true_lets_the_crashing_request_through_then_stops_limiting() {
    let (envoy, upstream) = start("fail_open", json!(true)).await;
    assert_eq!(crash(&envoy).await, 200);
    assert_eq!(statuses(&envoy, &[("x-tenant-id", "b")], 4).await, [200; 4]);
    assert_eq!(upstream.count(), 6);
}

/// The deprecated boolean: `false` is FAIL_CLOSED.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deprecated_fail_open_false_answers_503_from_then_on() {
    let (envoy, upstream) = start("fail_open", json!(false)).await;
    assert_eq!(crash(&envoy).await, 503);
    assert_eq!(statuses(&envoy, &[("x-tenant-id", "b")], 3).await, [503; 3]);
    assert_eq!(upstream.count(), 1);
}

/// Each worker has its own VM: a trap takes out only the one it happened on. New
/// connections are spread over the workers by the kernel, so of 40 of them after a trap
/// under FAIL_CLOSED, some meet the dead VM (503) and some the live one (200).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_trap_takes_out_only_its_own_workers_vm() {
    let (envoy, _upstream) = start_with_workers("failure_policy", json!("FAIL_CLOSED"), 2).await;
    assert_eq!(crash(&envoy).await, 503);
    let url = envoy.url("ingress", "/");
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..40 {
        // A new client per request: a new connection, to whichever worker.
        seen.insert(get(&client(), &url, &[]).await.status);
    }
    assert_eq!(seen.into_iter().collect::<Vec<_>>(), [200, 503]);
}
