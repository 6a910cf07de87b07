//! Concurrency rules end to end: a real Envoy (two workers) loading the built
//! floodgate.wasm in front of an upstream that holds requests open and counts how many of
//! each key it holds at once. It never sees more than `max` of one key; every way a
//! stream ends gives its slot back (the in-flight gauge returns to 0); a module that
//! traps mid-stream loses its holds' releases, and the slots come back at their deadline.

use floodgate_integration::client::get;
use floodgate_integration::{client, configs, paths, wait, Envoy, Reply, SlowUpstream};
use serde_json::{json, Value};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

const IN_FLIGHT: &str = "wasmcustom.floodgate.rule.streams.concurrency_in_flight";
const RELEASED: &str = "wasmcustom.floodgate.rule.streams.concurrency_released";

fn plugin(max: u32, extra: Value) -> Value {
    let mut limit = json!({"max": max});
    if let (Some(limit), Some(extra)) = (limit.as_object_mut(), extra.as_object()) {
        limit.extend(extra.clone());
    }
    json!({"rules": [{
        "name": "streams",
        "descriptors": [{"key": "tenant", "header": "x-tenant-id"}],
        "concurrency": limit
    }], "response": {"headers": "both", "body_format": "problem+json"}})
}

/// A cluster whose one endpoint accepts connections and closes them at once.
async fn closing_endpoint() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            drop(stream);
        }
    });
    addr
}

/// Listener `ingress`: floodgate (`filter`), a fault filter that answers 503 itself when
/// a request has `x-abort` (a local reply by a later filter), then routes: `/timeout`
/// (0.5 s route timeout) and `/` to the slow upstream, `/closed` to an endpoint that
/// closes every connection.
async fn start_with(filter: Value, workers: u32) -> (Envoy, SlowUpstream) {
    let upstream = SlowUpstream::start().await;
    let closing = closing_endpoint().await;
    let fault = json!({
        "name": "envoy.filters.http.fault",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault",
            "abort": {"http_status": 503, "percentage": {"numerator": 100, "denominator": "HUNDRED"}},
            "headers": [{"name": "x-abort", "present_match": true}]
        }
    });
    let mut listener = configs::listener("ingress", vec![filter, fault], "upstream");
    let routes = json!([
        {"match": {"prefix": "/timeout"}, "route": {"cluster": "upstream", "timeout": "0.5s"}},
        {"match": {"prefix": "/closed"}, "route": {"cluster": "closing", "timeout": "5s"}},
        {"match": {"prefix": "/"}, "route": {"cluster": "upstream", "timeout": "30s"}}
    ]);
    listener["filter_chains"][0]["filters"][0]["typed_config"]["route_config"]["virtual_hosts"]
        [0]["routes"] = routes;
    let yaml = configs::bootstrap(
        vec![listener],
        vec![
            configs::cluster("upstream", upstream.addr(), false),
            configs::cluster("closing", closing, false),
        ],
    );
    (Envoy::start(&yaml, workers).await, upstream)
}

async fn start(plugin: &Value) -> (Envoy, SlowUpstream) {
    start_with(configs::floodgate_filter(plugin), 2).await
}

/// Sends one GET of `tenant` to `path` in the background.
fn send(envoy: &Envoy, path: &str, tenant: &str) -> tokio::task::JoinHandle<Reply> {
    let (c, url, tenant) = (client(), envoy.url("ingress", path), tenant.to_string());
    tokio::spawn(async move { get(&c, &url, &[("x-tenant-id", tenant.as_str())]).await })
}

/// Whether a request of `tenant` is admitted now: `/fail` is answered 503 `failed` by the
/// upstream at once when it gets there, 429 by floodgate when there is no slot.
async fn admitted(envoy: &Envoy, tenant: &str) -> bool {
    let reply = get(
        &client(),
        &envoy.url("ingress", "/fail"),
        &[("x-tenant-id", tenant)],
    )
    .await;
    let from_upstream = reply.status == 503 && reply.body == "failed\n";
    assert!(from_upstream || reply.status == 429, "{reply:?}");
    from_upstream
}

/// Sends 10 requests of `a` at once; returns them once 3 are held and 7 answered.
async fn batch_of_ten(
    envoy: &Envoy,
    upstream: &SlowUpstream,
) -> Vec<tokio::task::JoinHandle<Reply>> {
    let mut pending: Vec<_> = (0..10).map(|_| send(envoy, "/", "a")).collect();
    upstream.wait_in_flight("a", 3).await;
    let mut rejected = Vec::new();
    wait::until("7 rejections", Duration::from_secs(10), || {
        let done: Vec<usize> = (0..pending.len())
            .filter(|&i| pending[i].is_finished())
            .collect();
        std::future::ready((done.len() >= 7).then_some(()))
    })
    .await;
    let mut held = Vec::new();
    for task in pending.drain(..) {
        if task.is_finished() {
            rejected.push(task.await.expect("request"));
        } else {
            held.push(task);
        }
    }
    assert_eq!(rejected.len(), 7);
    for reply in &rejected {
        assert_eq!(reply.status, 429, "{reply:?}");
        assert_eq!(
            reply.header("retry-after"),
            None,
            "no honest time to promise"
        );
        assert_eq!(reply.header("x-ratelimit-limit"), Some("3"));
        assert_eq!(reply.header("x-ratelimit-remaining"), Some("0"));
        assert_eq!(
            reply.header("ratelimit-policy"),
            Some(r#""streams";q=3;qu="concurrent-requests""#)
        );
        assert!(reply.body.contains("streams"), "{}", reply.body);
    }
    held
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_parallel_requests_of_one_key_get_three_slots_and_another_key_its_own() {
    let (envoy, upstream) = start(&plugin(3, json!({}))).await;
    let held = batch_of_ten(&envoy, &upstream).await;
    assert_eq!(upstream.max_in_flight("a"), 3);
    assert_eq!(
        upstream.seen("a"),
        3,
        "rejected requests never reach the upstream"
    );
    // Another key has its own slots while `a` is full.
    let b: Vec<_> = (0..3).map(|_| send(&envoy, "/", "b")).collect();
    upstream.wait_in_flight("b", 3).await;
    envoy.expect_stat(IN_FLIGHT, 6).await;
    upstream.release();
    for task in held.into_iter().chain(b) {
        assert_eq!(task.await.expect("request").status, 200);
    }
    envoy.expect_stat(IN_FLIGHT, 0).await;
    envoy.expect_stat(RELEASED, 6).await;
    // The count is back to 0: a new batch gets exactly 3 again.
    upstream.reset_max();
    let held = batch_of_ten(&envoy, &upstream).await;
    assert_eq!(upstream.max_in_flight("a"), 3);
    upstream.release();
    for task in held {
        assert_eq!(task.await.expect("request").status, 200);
    }
    envoy.expect_stat(IN_FLIGHT, 0).await;
    envoy
        .expect_stat("wasmcustom.floodgate.rule.streams.concurrency_rejected", 14)
        .await;
}

/// After a stream of key `how` ended: its slot was released (`released`: slots released
/// so far, counting this one), the gauge is back to 0, and a new request of `how` is
/// admitted (and its own slot released).
async fn ended(envoy: &Envoy, how: &str, released: &mut u64) {
    *released += 1;
    envoy.expect_stat(RELEASED, *released).await;
    envoy.expect_stat(IN_FLIGHT, 0).await;
    assert!(admitted(envoy, how).await, "{how}: the slot is free again");
    *released += 1;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_way_a_stream_ends_gives_its_slot_back() {
    let (envoy, upstream) = start(&plugin(1, json!({}))).await;
    let mut released = 0;

    // The response completes.
    let task = send(&envoy, "/", "complete");
    upstream.wait_in_flight("complete", 1).await;
    assert!(!admitted(&envoy, "complete").await, "the slot is held");
    upstream.release();
    assert_eq!(task.await.expect("request").status, 200);
    ended(&envoy, "complete", &mut released).await;

    // The client goes away mid-request.
    let mut stream = TcpStream::connect(envoy.listener("ingress"))
        .await
        .expect("connect");
    let request = "GET / HTTP/1.1\r\nhost: x\r\nx-tenant-id: reset\r\n\r\n";
    stream.write_all(request.as_bytes()).await.expect("write");
    upstream.wait_in_flight("reset", 1).await;
    drop(stream);
    upstream.wait_in_flight("reset", 0).await;
    ended(&envoy, "reset", &mut released).await;

    // The upstream fails: answers 503, or closes the connection.
    assert!(admitted(&envoy, "fail").await);
    released += 1;
    let closed = get(
        &client(),
        &envoy.url("ingress", "/closed"),
        &[("x-tenant-id", "closed")],
    )
    .await;
    assert_eq!(closed.status, 503, "{closed:?}");
    ended(&envoy, "closed", &mut released).await;

    // The route times out.
    let timed_out = get(
        &client(),
        &envoy.url("ingress", "/timeout"),
        &[("x-tenant-id", "slow")],
    )
    .await;
    assert_eq!(timed_out.status, 504, "{timed_out:?}");
    ended(&envoy, "slow", &mut released).await;

    // A later filter answers the request itself.
    let aborted = get(
        &client(),
        &envoy.url("ingress", "/"),
        &[("x-tenant-id", "abort"), ("x-abort", "1")],
    )
    .await;
    assert_eq!(aborted.status, 503, "{aborted:?}");
    assert_eq!(upstream.seen("abort"), 0, "the fault filter answered");
    ended(&envoy, "abort", &mut released).await;
    upstream.release();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn holds_of_a_module_that_trapped_come_back_at_their_deadline() {
    let plugin = plugin(1, json!({"max_duration_seconds": 4}));
    let filter = configs::wasm_filter(
        "floodgate",
        &paths::trap_wasm().display().to_string(),
        &plugin.to_string(),
    );
    let (envoy, upstream) = start_with(filter, 1).await;
    let held = send(&envoy, "/", "a");
    upstream.wait_in_flight("a", 1).await;
    // The admission is flushed to Envoy before the VM goes away.
    envoy
        .expect_stat("wasmcustom.floodgate.rule.streams.concurrency_admitted", 1)
        .await;
    let trap = get(
        &client(),
        &envoy.url("ingress", "/"),
        &[("x-tenant-id", "t"), ("x-floodgate-test-trap", "1")],
    )
    .await;
    assert!(
        envoy.log().contains("Uncaught RuntimeError: unreachable"),
        "trapped: {trap:?}"
    );
    upstream.release();
    let _ = held.await;
    // Until the reload (after a 1 s backoff, on the next request) Envoy answers 503 itself.
    wait::until("the VM to be reloaded", Duration::from_secs(20), || async {
        let c = client();
        let reply = get(&c, &envoy.url("ingress", "/fail"), &[("x-tenant-id", "p")]).await;
        (reply.body == "failed\n").then_some(())
    })
    .await;
    // The held request ended, but its VM was gone: nobody gave its slot back.
    assert!(
        !admitted(&envoy, "a").await,
        "the vanished holder's slot still counts"
    );
    // Within its 4 s (rounded up by half a second), the deadline frees it.
    wait::until(
        "the slot reclaimed at its deadline",
        Duration::from_secs(10),
        || async { admitted(&envoy, "a").await.then_some(()) },
    )
    .await;
    envoy
        .expect_stat("wasmcustom.floodgate.rule.streams.concurrency_reclaimed", 1)
        .await;
    envoy.expect_stat(IN_FLIGHT, 0).await;
}
