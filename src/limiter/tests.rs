use super::*;
use crate::metrics::definitions;
use crate::shared::memory::MemoryShared;
use crate::shared::{SetError, StoreError, Versioned};
use crate::testing::FakeRequest;

const NOW: u64 = 1_700_000_000_000_000_000;

fn limiter(json: &str) -> (Limiter, MemoryShared, Tally) {
    let config = Config::parse(json.as_bytes()).unwrap();
    let tally = Tally::new(config.rules.len());
    let limiter = Limiter::new(config);
    let store = MemoryShared::default();
    limiter.table().prepare(&store).unwrap();
    (limiter, store, tally)
}

/// The tally as metric name → value, for readable assertions.
fn counts(limiter: &Limiter, tally: &mut Tally) -> Vec<(String, i64)> {
    let defs = definitions(&limiter.config().rules);
    tally.drain().map(|(i, d)| (defs[i].1.clone(), d)).collect()
}

fn tenant(t: &str) -> FakeRequest {
    FakeRequest::new(&[(":path", "/api/x"), (":method", "GET"), ("x-tenant", t)])
}

const ONE_RULE: &str = r#"{"rules":[{"name":"per-tenant",
    "descriptors":[{"key":"tenant","header":"x-tenant"}],
    "local":{"capacity":2,"refill_per_second":1}}]}"#;

#[test]
fn requests_no_rule_applies_to_pass_untouched() {
    let (l, store, mut tally) = limiter(ONE_RULE);
    let mut req = FakeRequest::new(&[(":path", "/")]);
    let verdict = l.check(&mut req, || panic!("no clock needed"), &store, &mut tally);
    assert_eq!(verdict, Verdict::pass());
    assert!(counts(&l, &mut tally).is_empty());
}

#[test]
fn over_the_limit_is_rejected_with_headers_and_counted() {
    let (l, store, mut tally) = limiter(ONE_RULE);
    for _ in 0..2 {
        assert_eq!(
            l.check(&mut tenant("a"), || Some(NOW), &store, &mut tally),
            Verdict::pass()
        );
    }
    let verdict = l.check(&mut tenant("a"), || Some(NOW), &store, &mut tally);
    assert_eq!(
        verdict,
        Verdict::Reject(Reply::Http {
            status: 429,
            headers: vec![
                ("retry-after", "1".into()),
                ("x-ratelimit-limit", "2".into()),
                ("x-ratelimit-remaining", "0".into()),
                ("x-ratelimit-reset", "2".into()),
            ],
            body: b"rate limited\n".to_vec(),
        })
    );
    assert_eq!(
        l.check(&mut tenant("b"), || Some(NOW), &store, &mut tally),
        Verdict::pass()
    );
    assert_eq!(
        counts(&l, &mut tally),
        vec![
            ("floodgate.allowed".into(), 3),
            ("floodgate.denied".into(), 1),
            ("floodgate.buckets".into(), 2),
            ("floodgate.rule.per-tenant.allowed".into(), 3),
            ("floodgate.rule.per-tenant.denied".into(), 1),
        ]
    );
}

#[test]
fn grpc_requests_get_resource_exhausted() {
    let (l, store, mut tally) = limiter(ONE_RULE);
    let mut req = tenant("a");
    req.headers
        .insert("content-type".into(), "application/grpc".into());
    for _ in 0..2 {
        l.check(&mut req, || Some(NOW), &store, &mut tally);
    }
    match l.check(&mut req, || Some(NOW), &store, &mut tally) {
        Verdict::Reject(Reply::Grpc { status, .. }) => assert_eq!(status, 8),
        other => panic!("expected a gRPC rejection, got {other:?}"),
    }
}

#[test]
fn shadow_rules_count_but_never_reject() {
    let (l, store, mut tally) = limiter(
        r#"{"rules":[{"name":"trial","shadow":true,
            "descriptors":[{"key":"tenant","header":"x-tenant"}],
            "local":{"capacity":1,"refill_per_second":0}}]}"#,
    );
    for _ in 0..3 {
        assert_eq!(
            l.check(&mut tenant("a"), || Some(NOW), &store, &mut tally),
            Verdict::pass()
        );
    }
    assert_eq!(
        counts(&l, &mut tally),
        vec![
            ("floodgate.allowed".into(), 3),
            ("floodgate.shadow_denied".into(), 2),
            ("floodgate.buckets".into(), 1),
            ("floodgate.rule.trial.allowed".into(), 1),
            ("floodgate.rule.trial.shadow_denied".into(), 2),
        ]
    );
}

#[test]
fn allowed_responses_carry_headers_when_asked() {
    let (l, store, mut tally) = limiter(
        r#"{"rules":[{"name":"r","descriptors":[{"key":"tenant","header":"x-tenant"}],
            "local":{"capacity":5,"refill_per_second":1}}],
            "response":{"headers_on_allowed":true}}"#,
    );
    assert_eq!(
        l.check(&mut tenant("a"), || Some(NOW), &store, &mut tally),
        Verdict::Continue {
            response_headers: vec![
                ("x-ratelimit-limit", "5".into()),
                ("x-ratelimit-remaining", "4".into()),
                ("x-ratelimit-reset", "1".into()),
            ]
        }
    );
}

/// A store whose every call fails, as a broken host would.
struct Broken;

impl SharedData for Broken {
    fn get(&self, _: &str) -> Result<Option<Versioned>, StoreError> {
        Err(StoreError { status: 10 })
    }
    fn set(&self, _: &str, _: &[u8], _: u32) -> Result<(), SetError> {
        Err(SetError::Store(StoreError { status: 10 }))
    }
    fn create(&self, _: &str, _: &[u8]) -> Result<(), StoreError> {
        Err(StoreError { status: 10 })
    }
}

#[test]
fn failures_take_the_configured_mode_and_are_counted() {
    let (open, _, mut tally) = limiter(ONE_RULE);
    assert_eq!(
        open.check(&mut tenant("a"), || Some(NOW), &Broken, &mut tally),
        Verdict::pass()
    );
    assert_eq!(
        counts(&open, &mut tally),
        vec![
            ("floodgate.failure_mode_allowed".into(), 1),
            ("floodgate.error.shared_data".into(), 1),
        ]
    );

    let closed_json = ONE_RULE.replace("}]}", r#"}],"failure_mode":"deny"}"#);
    let (closed, store, mut tally) = limiter(&closed_json);
    let verdict = closed.check(&mut tenant("a"), || None, &store, &mut tally);
    assert_eq!(
        verdict,
        Verdict::Reject(Reply::Http {
            status: 500,
            headers: vec![],
            body: b"rate limiter unavailable\n".to_vec()
        })
    );
    assert_eq!(
        counts(&closed, &mut tally),
        vec![
            ("floodgate.failure_mode_denied".into(), 1),
            ("floodgate.error.clock".into(), 1),
        ]
    );
}
