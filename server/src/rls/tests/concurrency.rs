//! Concurrency limits on the wire: the hold and release headers' calls, the status of a
//! concurrency descriptor over its limit, releases that ignore every other limit, and no
//! lease or charge on a concurrency limit.

use super::*;
use crate::algorithm::concurrency::HoldId;
use crate::store::Store;

const HOLDS: &str = r#"
domain: web
descriptors:
  - key: streams
    rate_limit: { unit: minute, requests_per_unit: 2, algorithm: concurrency }
  - key: user
    rate_limit: { unit: second, requests_per_unit: 100 }
"#;

fn svc() -> RlsService<Arc<MemoryStore<Arc<ManualClock>>>> {
    let files = Files {
        root: PathBuf::from("t.yaml"),
        files: vec![(PathBuf::from("t.yaml"), HOLDS.to_owned())],
    };
    let config = config::Shared::new(config::parse(&files).unwrap());
    let clock = Arc::new(ManualClock::new(1_000 * S));
    let store = Arc::new(MemoryStore::with_clock(100, clock));
    RlsService::new(
        config,
        store,
        Arc::new(Metrics::new("memory")),
        Options::default(),
    )
}

fn hold(who: &str) -> HoldCall {
    HoldCall::Hold(HoldId::parse(who.as_bytes()).unwrap())
}

fn release(who: &str) -> HoldCall {
    HoldCall::Release(HoldId::parse(who.as_bytes()).unwrap())
}

fn call<St: Store>(svc: &RlsService<St>, hold: HoldCall, kind: CallKind) -> RateLimitResponse {
    let req = request(
        "web",
        vec![
            desc(&[("streams", "acme")], None),
            desc(&[("user", "u")], None),
        ],
        0,
    );
    block_on(svc.decide_holding(req, &[], kind, hold)).unwrap()
}

#[test]
fn holds_are_taken_released_and_over_reports_the_earliest_deadline() {
    let svc = svc();
    assert_eq!(
        call(&svc, hold("a"), CallKind::Admission).overall_code,
        Code::Ok as i32
    );
    assert_eq!(
        call(&svc, hold("a"), CallKind::Admission).overall_code,
        Code::Ok as i32
    );
    assert_eq!(
        call(&svc, hold("b"), CallKind::Admission).overall_code,
        Code::Ok as i32
    );
    let over = call(&svc, hold("c"), CallKind::Admission);
    assert_eq!(over.overall_code, Code::OverLimit as i32);
    let s = &over.statuses[0];
    assert_eq!(s.code, Code::OverLimit as i32);
    assert_eq!(s.limit_remaining, 0);
    let limit = s.current_limit.as_ref().unwrap();
    assert_eq!(
        (limit.requests_per_unit, limit.unit),
        (2, PbUnit::Minute as i32)
    );
    assert_eq!(s.duration_until_reset.as_ref().unwrap().seconds, 60);
    // The rejected call counted nothing on its rate limit: 97 of 100 left after three.
    assert_eq!(over.statuses[1].limit_remaining, 97);
    // A release answers OK for every descriptor and counts nothing on the rate limit.
    let r = call(&svc, release("a"), CallKind::Admission);
    assert_eq!(r.overall_code, Code::Ok as i32);
    assert!(r.statuses.iter().all(|s| s.code == Code::Ok as i32));
    assert_eq!(r.statuses[0].limit_remaining, 1);
    assert_eq!(
        r.statuses[1],
        no_limit_status(0),
        "other limits are ignored"
    );
    let again = call(&svc, hold("c"), CallKind::Admission);
    assert_eq!(again.overall_code, Code::Ok as i32);
    assert_eq!(
        again.statuses[1].limit_remaining, 96,
        "the release counted nothing"
    );
    let text = svc.metrics.render();
    for (event, n) in [("acquired", 4), ("rejected", 1), ("released", 1)] {
        let line = format!("floodgate_holds_total{{domain=\"web\",event=\"{event}\"}} {n}");
        assert!(text.contains(&line), "{line} in\n{text}");
    }
}

#[test]
fn calls_without_a_hold_header_hold_under_ids_of_the_server() {
    let svc = svc();
    for _ in 0..2 {
        let r = call(&svc, HoldCall::Anonymous, CallKind::Admission);
        assert_eq!(r.overall_code, Code::Ok as i32);
    }
    let over = call(&svc, HoldCall::Anonymous, CallKind::Admission);
    assert_eq!(
        over.overall_code,
        Code::OverLimit as i32,
        "each call is its own hold"
    );
    // A charge counts nothing on the concurrency limit, full or not.
    let charged = call(&svc, hold("x"), CallKind::Charge);
    assert_eq!(charged.statuses[0].limit_remaining, 0);
    let over = call(&svc, hold("d"), CallKind::Admission);
    assert_eq!(over.statuses[0].code, Code::OverLimit as i32);
}

#[test]
fn a_concurrency_descriptor_is_never_leased() {
    let svc = svc();
    let req = request("web", vec![desc(&[("streams", "acme")], None)], 0);
    let asked: &[&[u8]] = &[b"0"];
    let r = block_on(svc.decide_holding(req, asked, CallKind::Admission, hold("a"))).unwrap();
    assert_eq!(r.overall_code, Code::Ok as i32);
    assert_eq!(r.statuses[0].quota, None);
    assert_eq!(r.statuses[0].limit_remaining, 1);
}
