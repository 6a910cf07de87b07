//! End to end: a configuration directory using the envoyproxy/ratelimit keys
//! floodgate-server used to refuse (`tests/fixtures/config/reference-keys/`) loads
//! unchanged and is answered with the reference's semantics over gRPC: wildcards in the
//! middle of a value, `share_threshold`, blocks, month and year units, `replaces`,
//! `quota_mode`, `metadata` in the dynamic metadata, per-limit metrics, a check-only
//! descriptor (`hits_addend` 0), and a descriptor's own `limit` override, month and year
//! included. The same
//! scenario runs on the memory store and on Redis.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "reference_keys/metadata.rs"]
mod metadata;
mod support;

use metadata::{per_limit_metrics, quota_mode_and_metadata};

use floodgate_server::proto::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;
use floodgate_server::proto::rls::rate_limit_response::{rate_limit::Unit, Code};
use floodgate_server::proto::rls::{RateLimitRequest, RateLimitResponse};
use floodgate_server::proto::RateLimitDescriptor;
use prost_types::value::Kind;
use prost_types::{Struct, Value};
use std::path::Path;
use support::redis::RedisServer;
use support::{ask, descriptor, envoy_request, Server};

const DIR: &str = "tests/fixtures/config/reference-keys";

/// One request of one descriptor per entry list, in `domain`.
fn request(domain: &str, descriptors: &[&[(&str, &str)]]) -> RateLimitRequest {
    envoy_request(domain, descriptors.iter().map(|d| descriptor(d)).collect())
}

struct Client(
    floodgate_server::proto::rls::rate_limit_service_client::RateLimitServiceClient<
        tonic::transport::Channel,
    >,
);

impl Client {
    async fn ask(&mut self, domain: &str, descriptors: &[&[(&str, &str)]]) -> RateLimitResponse {
        ask(&mut self.0, request(domain, descriptors))
            .await
            .unwrap()
    }

    /// The overall code of a request, as "OK" / "OVER".
    async fn overall(&mut self, domain: &str, descriptors: &[&[(&str, &str)]]) -> &'static str {
        code(self.ask(domain, descriptors).await.overall_code)
    }
}

fn code(c: i32) -> &'static str {
    match c {
        c if c == Code::Ok as i32 => "OK",
        c if c == Code::OverLimit as i32 => "OVER",
        _ => "UNKNOWN",
    }
}

fn codes(r: &RateLimitResponse) -> Vec<&'static str> {
    r.statuses.iter().map(|s| code(s.code)).collect()
}

/// The limit a status reports: (name, requests_per_unit, unit).
fn limit_of(r: &RateLimitResponse, i: usize) -> Option<(String, u32, i32)> {
    r.statuses[i]
        .current_limit
        .as_ref()
        .map(|l| (l.name.clone(), l.requests_per_unit, l.unit))
}

async fn wildcards(c: &mut Client) {
    let d = "wildcards";
    // `/v1/*/items` is written first: it wins over `/v1/*`.
    let r = c.ask(d, &[&[("path", "/v1/users/items")]]).await;
    assert_eq!(limit_of(&r, 0).unwrap().0, "items");
    assert_eq!(
        c.overall(d, &[&[("path", "/v1/users/items")]]).await,
        "OVER"
    );
    // Each matching value has its own counter.
    assert_eq!(c.overall(d, &[&[("path", "/v1/orders/items")]]).await, "OK");
    let r = c.ask(d, &[&[("path", "/v1/users")]]).await;
    assert_eq!(limit_of(&r, 0).unwrap().0, "v1");
    // The exact value beats both wildcards.
    let r = c.ask(d, &[&[("path", "/v1/health")]]).await;
    assert_eq!(
        (limit_of(&r, 0), r.statuses[0].limit_remaining),
        (None, u32::MAX)
    );
    // Several stars.
    let r = c.ask(d, &[&[("host", "api.eu-west.example.com")]]).await;
    assert_eq!(limit_of(&r, 0).unwrap().0, "eu");
    let r = c.ask(d, &[&[("host", "api.us.example.org")]]).await;
    assert_eq!(limit_of(&r, 0), None, "no match");
}

async fn share_threshold(c: &mut Client) {
    let d = "share";
    assert_eq!(c.overall(d, &[&[("file", "docs/a")]]).await, "OK");
    assert_eq!(c.overall(d, &[&[("file", "docs/b")]]).await, "OK");
    assert_eq!(
        c.overall(d, &[&[("file", "docs/c")]]).await,
        "OVER",
        "one counter for docs/*"
    );
    // A shared wildcard above the limit: tenants t-1 and t-2 share the op=read counter.
    assert_eq!(
        c.overall(d, &[&[("tenant", "t-1"), ("op", "read")]]).await,
        "OK"
    );
    assert_eq!(
        c.overall(d, &[&[("tenant", "t-2"), ("op", "read")]]).await,
        "OVER"
    );
    assert_eq!(
        c.overall(d, &[&[("tenant", "t-2"), ("op", "write")]]).await,
        "OK"
    );
}

async fn block(c: &mut Client) {
    let d = "block";
    let r = c.ask(d, &[&[("client", "banned")]]).await;
    assert_eq!(codes(&r), ["OVER"]);
    assert_eq!(
        limit_of(&r, 0),
        Some(("banned".into(), 0, Unit::Hour as i32))
    );
    assert_eq!(r.statuses[0].limit_remaining, 0);
    let reset = r.statuses[0].duration_until_reset.unwrap();
    assert!(
        reset.seconds <= 3_600,
        "until the hour's window ends: {reset:?}"
    );
    let r = c.ask(d, &[&[("client", "suspended")]]).await;
    assert_eq!(codes(&r), ["OVER"], "no requests_per_unit blocks too");
    // The blocked descriptor rejects the request, and the other one consumes nothing.
    let r = c
        .ask(d, &[&[("client", "banned")], &[("client", "c1")]])
        .await;
    assert_eq!(
        (code(r.overall_code), codes(&r)),
        ("OVER", vec!["OVER", "OK"])
    );
    let r = c.ask(d, &[&[("client", "c1")]]).await;
    assert_eq!(
        r.statuses[0].limit_remaining, 4,
        "only this request counted"
    );
}

async fn check_only(c: &mut Client) {
    // A descriptor's own hits_addend 0: decided, remaining as it stands, nothing counted.
    let d = "block";
    let mut probe = descriptor(&[("client", "probe")]);
    probe.hits_addend = Some(0);
    for _ in 0..3 {
        let r = ask(&mut c.0, envoy_request(d, vec![probe.clone()]))
            .await
            .unwrap();
        assert_eq!((codes(&r), r.statuses[0].limit_remaining), (vec!["OK"], 5));
    }
    let r = c.ask(d, &[&[("client", "probe")]]).await;
    assert_eq!(
        r.statuses[0].limit_remaining, 4,
        "only the counted request counted"
    );
}

async fn calendar(c: &mut Client) {
    let d = "calendar";
    for (plan, unit, days) in [
        ("free", Unit::Month, 30),
        ("pro", Unit::Year, 365),
        ("team", Unit::Month, 30),
        ("org", Unit::Year, 365),
    ] {
        for _ in 0..2 {
            let r = c.ask(d, &[&[("plan", plan)]]).await;
            assert_eq!(codes(&r), ["OK"], "{plan}");
            assert_eq!(limit_of(&r, 0).unwrap().2, unit as i32, "{plan}");
        }
        let r = c.ask(d, &[&[("plan", plan)]]).await;
        assert_eq!(codes(&r), ["OVER"], "{plan}");
        let reset = r.statuses[0].duration_until_reset.unwrap();
        assert!(
            reset.seconds > 0 && reset.seconds <= days * 86_400,
            "{plan}: {reset:?}"
        );
    }
}

async fn overrides(c: &mut Client) {
    // A descriptor's own limit stands in for the configured one, even a block, and the
    // wire's month (5) and year (6) are the configuration's 30 and 365 days.
    let d = "block";
    for (value, rpu, unit, days) in [("banned", 2, Unit::Month, 30), ("c2", 1, Unit::Year, 365)] {
        let overridden = RateLimitDescriptor {
            limit: Some(RateLimitOverride {
                requests_per_unit: rpu,
                unit: unit as i32,
            }),
            ..descriptor(&[("client", value)])
        };
        for left in (0..rpu).rev() {
            let r = ask(&mut c.0, envoy_request(d, vec![overridden.clone()]))
                .await
                .unwrap();
            assert_eq!(codes(&r), ["OK"], "{value}");
            assert_eq!(limit_of(&r, 0), Some((String::new(), rpu, unit as i32)));
            assert_eq!(r.statuses[0].limit_remaining, left);
        }
        let r = ask(&mut c.0, envoy_request(d, vec![overridden]))
            .await
            .unwrap();
        assert_eq!(codes(&r), ["OVER"], "{value}");
        let reset = r.statuses[0].duration_until_reset.unwrap();
        assert!(
            reset.seconds > 0 && reset.seconds <= days * 86_400,
            "{value}: {reset:?}"
        );
    }
    // The configured block still holds without the override.
    assert_eq!(c.overall(d, &[&[("client", "banned")]]).await, "OVER");
}

async fn replaces(c: &mut Client) {
    let d = "replaces";
    let both: &[&[(&str, &str)]] = &[&[("user", "u1")], &[("tier", "gold")]];
    for _ in 0..3 {
        let r = c.ask(d, both).await;
        assert_eq!(codes(&r), ["OK", "OK"]);
        assert_eq!(limit_of(&r, 0), None, "per-user is replaced");
        assert_eq!(r.statuses[0].limit_remaining, 0);
    }
    assert_eq!(c.overall(d, both).await, "OVER", "gold's own limit");
    // Alone, per-user applies, and the replaced requests did not count against it.
    let r = c.ask(d, &[&[("user", "u1")]]).await;
    assert_eq!(codes(&r), ["OK"]);
    assert_eq!(limit_of(&r, 0).unwrap().0, "per-user");
    assert_eq!(c.overall(d, &[&[("user", "u1")]]).await, "OVER");
    // unlimited next to a bare requests_per_unit.
    let r = c.ask(d, &[&[("internal", "x")]]).await;
    assert_eq!(
        (limit_of(&r, 0), r.statuses[0].limit_remaining),
        (None, u32::MAX)
    );
}

async fn scenario(server: &Server) {
    let mut c = Client(server.client().await);
    wildcards(&mut c).await;
    share_threshold(&mut c).await;
    block(&mut c).await;
    check_only(&mut c).await;
    calendar(&mut c).await;
    overrides(&mut c).await;
    replaces(&mut c).await;
    quota_mode_and_metadata(&mut c).await;
    per_limit_metrics(&mut c, server).await;
}

#[tokio::test]
async fn the_reference_keys_on_the_memory_store() {
    let server = Server::start(Path::new(DIR), &["--response-dynamic-metadata"]);
    scenario(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_keys_on_redis() {
    let redis = RedisServer::start();
    let server = Server::start(
        Path::new(DIR),
        &["--response-dynamic-metadata", "--redis-url", &redis.url()],
    );
    scenario(&server).await;
}

#[tokio::test]
async fn without_the_flag_there_is_no_dynamic_metadata_and_series_start_at_zero() {
    let server = Server::start(Path::new(DIR), &[]);
    // The per-limit series exist from the configuration's load, at zero.
    let before =
        "floodgate_limit_decisions_total{domain=\"metrics\",limit=\"client\",result=\"ok\"}";
    assert_eq!(server.metric(before).await, Some(0.0));
    let mut c = Client(server.client().await);
    let r = c.ask("quota", &[&[("team", "beta")]]).await;
    assert_eq!(r.dynamic_metadata, None);
}
