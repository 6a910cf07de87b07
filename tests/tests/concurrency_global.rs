//! Fleet-wide concurrency rules end to end: two real Envoys (two workers each) loading the
//! built floodgate.wasm with `"concurrency": {"global": {}}`, the real floodgate-server
//! keeping the holds (in memory, or in a real Redis behind two servers), and one slow
//! upstream that counts how many requests of each key it holds at once. Together the
//! Envoys never let more than the server's limit of one key through; another key has its
//! own slots; the slots come back when the streams end (the filter's release, long before
//! the holds' one-minute deadline); a client sending its own `x-floodgate-hold` or
//! `x-floodgate-release` changes nothing; and the holds of a module that trapped, whose
//! releases never come, end at their deadline on the server.

use floodgate_integration::client::get;
use floodgate_integration::holding_rls::{Event, HoldingRls};
use floodgate_integration::soak::redis::Redis;
use floodgate_integration::{client, configs, paths, wait, Envoy, Reply, Server, SlowUpstream};
use serde_json::{json, Value};
use std::time::Duration;

/// The fleet's limit per key: the server's, not the filter's.
const LIMIT: usize = 3;

/// Three streams in flight per key, each hold lasting a minute without a release: a test
/// that sees the slots come back within seconds sees the releases.
const SERVER: &str = "
domain: edge
descriptors:
  - key: streams
    rate_limit: { unit: minute, requests_per_unit: 3, algorithm: concurrency }
";

const RELEASES: &str = "wasmcustom.floodgate.rls.releases";

fn plugin() -> Value {
    json!({
        "rls": {"cluster": "ratelimit", "domain": "edge", "timeout_ms": 2000, "failure_mode": "deny"},
        "rules": [{"name": "streams", "descriptors": [{"key": "streams", "header": "x-tenant-id"}],
                   "concurrency": {"global": {}}}],
        "response": {"headers": "both"}
    })
}

async fn envoy(upstream: &SlowUpstream, server: &Server) -> Envoy {
    let yaml = configs::floodgate_global(&plugin(), upstream.addr(), server.grpc());
    Envoy::start(&yaml, 2).await
}

/// Sends one GET of `tenant` to `path` through `envoy` in the background, with `extra`
/// headers.
fn send(
    envoy: &Envoy,
    path: &str,
    tenant: &str,
    extra: &[(&str, &str)],
) -> tokio::task::JoinHandle<Reply> {
    let (c, url) = (client(), envoy.url("ingress", path));
    let mut headers: Vec<(String, String)> = vec![("x-tenant-id".into(), tenant.into())];
    headers.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    tokio::spawn(async move {
        let pairs: Vec<(&str, &str)> = headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        get(&c, &url, &pairs).await
    })
}

/// Whether a request of `tenant` through `envoy` is admitted now: `/fail` is answered 503
/// `failed` by the upstream at once, 429 by floodgate when the fleet has no slot.
async fn admitted(envoy: &Envoy, tenant: &str) -> bool {
    let url = envoy.url("ingress", "/fail");
    let reply = get(&client(), &url, &[("x-tenant-id", tenant)]).await;
    let from_upstream = reply.status == 503 && reply.body == "failed\n";
    assert!(from_upstream || reply.status == 429, "{reply:?}");
    from_upstream
}

/// Five requests of `tenant` through each Envoy at once, each with `extra` headers:
/// returns the held ones once `LIMIT` are held and the rest rejected as a concurrency
/// rule rejects.
async fn batch(
    envoys: [&Envoy; 2],
    upstream: &SlowUpstream,
    tenant: &str,
    extra: &[(&str, &str)],
) -> Vec<tokio::task::JoinHandle<Reply>> {
    let mut pending: Vec<_> = envoys
        .iter()
        .flat_map(|e| {
            (0..5)
                .map(|_| send(e, "/", tenant, extra))
                .collect::<Vec<_>>()
        })
        .collect();
    upstream.wait_in_flight(tenant, LIMIT as u64).await;
    wait::until("the rest rejected", Duration::from_secs(10), || {
        let done = pending.iter().filter(|t| t.is_finished()).count();
        std::future::ready((done >= pending.len() - LIMIT).then_some(()))
    })
    .await;
    let mut held = Vec::new();
    for task in pending.drain(..) {
        if !task.is_finished() {
            held.push(task);
            continue;
        }
        let reply = task.await.expect("request");
        assert_eq!(reply.status, 429, "{reply:?}");
        assert_eq!(
            reply.header("retry-after"),
            None,
            "no honest time to promise"
        );
        assert_eq!(reply.header("x-ratelimit-reset"), None);
        assert_eq!(
            reply.header("ratelimit-policy"),
            Some(r#""streams";q=3;qu="concurrent-requests""#)
        );
    }
    assert_eq!(held.len(), LIMIT);
    held
}

/// What every store must do, over `servers` (the Envoys ask one each).
async fn fleet(servers: [&Server; 2]) {
    let upstream = SlowUpstream::start().await;
    let a = envoy(&upstream, servers[0]).await;
    let b = envoy(&upstream, servers[1]).await;

    // Ten requests of one key over two Envoys: the fleet holds exactly three. Every one
    // carries a client's own hold id (the same for all) and a release: were either read,
    // the server would count them as one hold, or free slots.
    let forged = [
        ("x-floodgate-hold", "forged"),
        ("x-floodgate-release", "forged"),
    ];
    let held = batch([&a, &b], &upstream, "acme", &forged).await;
    assert_eq!(upstream.max_in_flight("acme"), LIMIT as u64);
    assert_eq!(
        upstream.seen("acme"),
        LIMIT as u64,
        "rejected requests never reach it"
    );

    // Another key has its own slots while `acme` is full, through either Envoy.
    assert!(admitted(&a, "globex").await);
    assert!(admitted(&b, "globex").await);
    // A client's release of some id frees nothing of `acme`'s.
    let release = get(
        &client(),
        &b.url("ingress", "/fail"),
        &[("x-tenant-id", "acme"), ("x-floodgate-release", "forged")],
    )
    .await;
    assert_eq!(release.status, 429, "{release:?}");
    assert_eq!(upstream.in_flight("acme"), LIMIT as u64);

    // The streams end: the filter releases their holds, and the slots are back within
    // seconds, long before the holds' one-minute deadline.
    upstream.release();
    for task in held {
        assert_eq!(task.await.expect("request").status, 200);
    }
    wait::until("the releases sent", Duration::from_secs(10), || async {
        let sent = a.stat(RELEASES).await.unwrap_or(0) + b.stat(RELEASES).await.unwrap_or(0);
        // Three held streams and the two admitted `globex` requests.
        (sent >= 5).then_some(())
    })
    .await;
    upstream.reset_max();
    let held = batch([&b, &a], &upstream, "acme", &[]).await;
    assert_eq!(upstream.max_in_flight("acme"), LIMIT as u64);
    upstream.release();
    for task in held {
        assert_eq!(task.await.expect("request").status, 200);
    }
    for envoy in [&a, &b] {
        assert_eq!(
            envoy.stat("wasmcustom.floodgate.rls.release_failed").await,
            Some(0)
        );
    }
    // The server saw every hold taken released (3 + 2 + 3 streams), and no release of a
    // request it rejected: those took nothing, and the filter sends none for them.
    let released = "floodgate_holds_total{domain=\"edge\",event=\"released\"}";
    let acquired = "floodgate_holds_total{domain=\"edge\",event=\"acquired\"}";
    wait::until(
        "the server to count the releases",
        Duration::from_secs(10),
        || async {
            let mut total = (0.0, 0.0);
            // One server may serve both Envoys: count each once.
            let distinct = if std::ptr::eq(servers[0], servers[1]) {
                1
            } else {
                2
            };
            for server in &servers[..distinct] {
                total.0 += server.metric(acquired).await;
                total.1 += server.metric(released).await;
            }
            (total == (8.0, 8.0)).then_some(())
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_envoys_hold_the_fleet_limit_on_the_memory_store() {
    let server = Server::start(SERVER, &[]);
    fleet([&server, &server]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_envoys_hold_the_fleet_limit_over_redis_behind_two_servers() {
    let redis = Redis::start().expect("redis-server");
    let first = Server::start(SERVER, &["--redis-url", &redis.url()]);
    let second = Server::start(SERVER, &["--redis-url", &redis.url()]);
    fleet([&first, &second]).await;
}

/// One slot per key, a hold lasting 6 s without a release.
const SHORT: &str = "
domain: edge
descriptors:
  - key: streams
    rate_limit: { unit: second, unit_multiplier: 6, requests_per_unit: 1, algorithm: concurrency }
";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn holds_of_a_module_that_trapped_end_at_their_deadline_on_the_server() {
    let server = Server::start(SHORT, &[]);
    let upstream = SlowUpstream::start().await;
    let filter = configs::wasm_filter(
        "floodgate",
        &paths::trap_wasm().display().to_string(),
        &plugin().to_string(),
    );
    let listener = configs::listener("ingress", vec![filter], "upstream");
    let yaml = configs::bootstrap(
        vec![listener],
        vec![
            configs::cluster("upstream", upstream.addr(), false),
            configs::cluster("ratelimit", server.grpc(), true),
        ],
    );
    let envoy = Envoy::start(&yaml, 1).await;
    let held = send(&envoy, "/", "a", &[]);
    upstream.wait_in_flight("a", 1).await;
    assert!(!admitted(&envoy, "a").await, "the fleet's one slot is held");
    // The VM goes away with the held request's release.
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
    wait::until("the VM to be reloaded", Duration::from_secs(20), || async {
        let c = client();
        let reply = get(&c, &envoy.url("ingress", "/fail"), &[("x-tenant-id", "p")]).await;
        (reply.body == "failed\n").then_some(())
    })
    .await;
    // The held stream ended, but nobody released its hold: the server still counts it.
    assert!(
        !admitted(&envoy, "a").await,
        "the vanished holder's slot still counts"
    );
    // Within its 6 s, the server's deadline frees it.
    wait::until(
        "the hold ended at its deadline",
        Duration::from_secs(15),
        || async { admitted(&envoy, "a").await.then_some(()) },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_request_that_goes_away_during_its_hold_call_releases_after_the_answer() {
    use tokio::io::AsyncWriteExt;
    // The service answers a hold call after 1 s; the client leaves after 200 ms.
    let rls = HoldingRls::start(Duration::from_secs(1)).await;
    let upstream = SlowUpstream::start().await;
    let yaml = configs::floodgate_global(&plugin(), upstream.addr(), rls.addr());
    let envoy = Envoy::start(&yaml, 1).await;
    let mut stream = tokio::net::TcpStream::connect(envoy.listener("ingress"))
        .await
        .expect("connect");
    let request = "GET / HTTP/1.1\r\nhost: x\r\nx-tenant-id: gone\r\n\r\n";
    stream.write_all(request.as_bytes()).await.expect("write");
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(stream);
    let events = wait::until("the release", Duration::from_secs(10), || async {
        let events = rls.events();
        events
            .iter()
            .any(|(_, e)| matches!(e, Event::Released(_)))
            .then_some(events)
    })
    .await;
    let answered = events.iter().find_map(|(id, e)| match e {
        Event::HoldAnswered(at) => Some((id.clone(), *at)),
        _ => None,
    });
    let released = events.iter().find_map(|(id, e)| match e {
        Event::Released(at) => Some((id.clone(), *at)),
        _ => None,
    });
    let ((held_id, answered_at), (released_id, released_at)) = (
        answered.expect("the hold answered"),
        released.expect("released"),
    );
    assert_eq!(held_id, released_id, "{events:?}");
    assert!(
        released_at >= answered_at,
        "the release came before the hold was answered: {events:?}"
    );
    assert_eq!(
        upstream.seen("gone"),
        0,
        "the request never reached the upstream"
    );
}
