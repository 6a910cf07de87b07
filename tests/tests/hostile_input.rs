//! Hostile client input end to end: a real Envoy loading floodgate.wasm,
//! spoken to over HTTP/1.1 by hand where a client library would not send the request (a
//! header twice, bytes that are not UTF-8), in front of an upstream that counts what
//! reaches it.

use floodgate_integration::fake_rls::Scripted;
use floodgate_integration::raw_http::{self, RawResponse};
use floodgate_integration::{client, configs, Envoy, Upstream};
use floodgate_server::proto::rls::rate_limit_response::Code;
use floodgate_server::proto::rls::RateLimitResponse;
use serde_json::{json, Value};

/// One local rule on `x-tenant-id` (one token, never refilled) with an `x-cost` header.
fn local(extra: Value) -> Value {
    let mut plugin = json!({"rules": [{
        "name": "per-tenant",
        "descriptors": [{"key": "tenant", "header": "x-tenant-id"}],
        "cost": {"header": "x-cost"},
        "local": {"capacity": 1, "refill_per_second": 0}
    }]});
    if let (Some(p), Some(e)) = (plugin.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    plugin
}

/// The content types of the issue, and what each must get back when refused.
#[derive(Clone, Copy)]
enum Expect {
    /// gRPC-Web: HTTP 200, the request's content type, this grpc-status.
    GrpcWeb,
    /// Plain HTTP: the HTTP status.
    Http,
}

const CONTENT_TYPES: [(&str, Expect); 4] = [
    ("application/grpc-web", Expect::GrpcWeb),
    ("application/grpc-web-text+proto", Expect::GrpcWeb),
    ("Application/gRPC", Expect::Http),
    ("application/grpc-something", Expect::Http),
];

fn assert_refused(reply: &RawResponse, content_type: &str, expect: Expect, grpc: u32, http: u16) {
    let head = reply.head();
    match expect {
        Expect::GrpcWeb => {
            assert_eq!(reply.status(), 200, "{content_type}: {head}");
            assert_eq!(
                reply.header("content-type").as_deref(),
                Some(content_type),
                "{head}"
            );
            assert_eq!(
                reply.header("grpc-status"),
                Some(grpc.to_string()),
                "{head}"
            );
            // The body is the same status as a gRPC-Web trailer frame (base64 for -text).
            let body = reply.body();
            let frame = if content_type.contains("-text") {
                decode_base64(&body)
            } else {
                body
            };
            assert_eq!(frame.first(), Some(&0x80), "{content_type}: {frame:?}");
            let trailers = String::from_utf8_lossy(&frame[5..]).to_string();
            assert!(
                trailers.starts_with(&format!("grpc-status:{grpc}\r\n")),
                "{trailers}"
            );
        }
        Expect::Http => {
            assert_eq!(reply.status(), http, "{content_type}: {head}");
            assert_eq!(reply.header("grpc-status"), None, "{head}");
        }
    }
}

fn decode_base64(text: &[u8]) -> Vec<u8> {
    let value = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            _ => 63,
        }
    };
    let mut out = Vec::new();
    for chunk in text.chunks(4) {
        let digits: Vec<u8> = chunk.iter().copied().filter(|&c| c != b'=').collect();
        let n = digits
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &c)| n | value(c) << (18 - 6 * i));
        for i in 0..digits.len().saturating_sub(1) {
            out.push((n >> (16 - 8 * i)) as u8);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn grpc_web_and_odd_content_types_get_a_refusal_they_understand() {
    let upstream = Upstream::start().await;
    let envoy = Envoy::start(
        &configs::floodgate_local(&local(json!({})), upstream.addr()),
        2,
    )
    .await;
    let addr = envoy.listener("ingress");
    for (i, (content_type, expect)) in CONTENT_TYPES.into_iter().enumerate() {
        let tenant = format!("t{i}");
        let headers: [(&str, &[u8]); 2] = [
            ("content-type", content_type.as_bytes()),
            ("x-tenant-id", tenant.as_bytes()),
        ];
        assert_eq!(raw_http::get(addr, "/", &headers).await.status(), 200);
        let rejected = raw_http::get(addr, "/", &headers).await;
        assert_refused(&rejected, content_type, expect, 8, 429);
        let bad_cost: [(&str, &[u8]); 3] = [headers[0], headers[1], ("x-cost", b"lots")];
        let refused = raw_http::get(addr, "/", &bad_cost).await;
        assert_refused(&refused, content_type, expect, 3, 400);
    }
    assert_eq!(upstream.count(), 4);

    // Fail closed: the rate limit service's cluster does not exist.
    let mut plugin = configs::global_tenant_plugin();
    plugin["rls"]["cluster"] = json!("no-such-cluster");
    let closed = Envoy::start(&configs::floodgate_local(&plugin, upstream.addr()), 2).await;
    for (content_type, expect) in CONTENT_TYPES {
        let headers: [(&str, &[u8]); 2] = [
            ("content-type", content_type.as_bytes()),
            ("x-tenant-id", b"acme"),
        ];
        let failed = raw_http::get(closed.listener("ingress"), "/", &headers).await;
        assert_refused(&failed, content_type, expect, 14, 503);
    }
    assert_eq!(upstream.count(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_repeated_cost_or_descriptor_header_is_refused() {
    let upstream = Upstream::start().await;
    let plugin = local(json!({}));
    let envoy = Envoy::start(&configs::floodgate_local(&plugin, upstream.addr()), 2).await;
    let addr = envoy.listener("ingress");
    let two_costs: [(&str, &[u8]); 3] = [
        ("x-tenant-id", b"acme"),
        ("x-cost", b"1"),
        ("x-cost", b"1000"),
    ];
    let reply = raw_http::get(addr, "/", &two_costs).await;
    assert_eq!(reply.status(), 400, "{}", reply.head());
    assert_eq!(
        String::from_utf8_lossy(&reply.body()),
        "the x-cost header must be sent at most once\n"
    );
    let two_tenants: [(&str, &[u8]); 2] = [("x-tenant-id", b"other"), ("x-tenant-id", b"victim")];
    let reply = raw_http::get(addr, "/", &two_tenants).await;
    assert_eq!(reply.status(), 400, "{}", reply.head());
    assert_eq!(
        upstream.count(),
        0,
        "a refused request never reaches the upstream"
    );
    // The victim's token is still there.
    let victim = raw_http::get(addr, "/", &[("x-tenant-id", b"victim")]).await;
    assert_eq!(victim.status(), 200);
    envoy
        .expect_stat("wasmcustom.floodgate.duplicate_header", 2)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn distinct_bytes_get_distinct_buckets() {
    let upstream = Upstream::start().await;
    let envoy = Envoy::start(
        &configs::floodgate_local(&local(json!({})), upstream.addr()),
        2,
    )
    .await;
    let addr = envoy.listener("ingress");
    for tenant in [&b"t\xff"[..], b"t\xfe", "t\u{fffd}".as_bytes()] {
        let first = raw_http::get(addr, "/", &[("x-tenant-id", tenant)]).await;
        assert_eq!(first.status(), 200, "{tenant:?}: {}", first.head());
    }
    for tenant in [&b"t\xff"[..], b"t\xfe", "t\u{fffd}".as_bytes()] {
        let second = raw_http::get(addr, "/", &[("x-tenant-id", tenant)]).await;
        assert_eq!(second.status(), 429, "{tenant:?}: one token each");
    }
    envoy.expect_stat("wasmcustom.floodgate.buckets", 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_global_rule_refuses_values_the_service_cannot_receive() {
    let rls = Scripted::start(RateLimitResponse {
        overall_code: Code::Ok as i32,
        ..RateLimitResponse::default()
    })
    .await;
    let upstream = Upstream::start().await;
    let envoy = Envoy::start(
        &configs::floodgate_global(
            &configs::global_tenant_plugin(),
            upstream.addr(),
            rls.addr(),
        ),
        2,
    )
    .await;
    let reply = raw_http::get(envoy.listener("ingress"), "/", &[("x-tenant-id", b"t\xff")]).await;
    assert_eq!(reply.status(), 400, "{}", reply.head());
    let long = "t".repeat(1025);
    let reply = raw_http::get(
        envoy.listener("ingress"),
        "/",
        &[("x-tenant-id", long.as_bytes())],
    )
    .await;
    assert_eq!(reply.status(), 400, "{}", reply.head());
    assert_eq!(
        String::from_utf8_lossy(&reply.body()),
        "the tenant descriptor value is longer than 1024 bytes\n"
    );
    let fits = "t".repeat(1024);
    let reply = raw_http::get(
        envoy.listener("ingress"),
        "/",
        &[("x-tenant-id", fits.as_bytes())],
    )
    .await;
    assert_eq!(reply.status(), 200, "{}", reply.head());
    assert_eq!(
        rls.calls(),
        1,
        "refused requests are never sent to the service"
    );
    assert_eq!(rls.requests()[0].descriptors[0].entries[0].value, fits);
    envoy
        .expect_stat("wasmcustom.floodgate.invalid_descriptor", 2)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_over_long_value_is_refused_in_local_mode_at_the_configured_maximum() {
    let upstream = Upstream::start().await;
    let plugin = local(json!({"max_descriptor_value_bytes": 8}));
    let envoy = Envoy::start(&configs::floodgate_local(&plugin, upstream.addr()), 2).await;
    let url = envoy.url("ingress", "/");
    let c = client();
    let long = floodgate_integration::client::get(&c, &url, &[("x-tenant-id", "123456789")]).await;
    assert_eq!(long.status, 400);
    let fits = floodgate_integration::client::get(&c, &url, &[("x-tenant-id", "12345678")]).await;
    assert_eq!(fits.status, 200);
    assert_eq!(upstream.count(), 1);
    envoy
        .expect_stat("wasmcustom.floodgate.invalid_descriptor", 1)
        .await;
}
