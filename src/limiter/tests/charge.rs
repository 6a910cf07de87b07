//! Global rules whose cost the response reports: check-only (or the estimate) at request
//! time, and the stream-end charge the host sends without waiting.

use super::*;
use crate::limiter::{GlobalCharge, StreamEndCall};
use crate::wire::call::Call;
use crate::wire::rls;

/// A per-tenant token budget decided by the service, read from the response's JSON.
fn budget(estimate: Option<u32>) -> String {
    let estimate = estimate.map_or_else(String::new, |e| format!(r#", "estimate": {e}"#));
    format!(
        r#"{{
  "rls": {{"cluster": "ratelimit", "domain": "llm"}},
  "rules": [
    {{"name": "tokens", "descriptors": [{{"key": "tenant", "header": "x-tenant"}}],
     "global": {{}}, "cost": {{"response": {{"json": "usage.total_tokens"{estimate}}}}}}},
    {{"name": "calls", "descriptors": [{{"key": "tenant", "header": "x-tenant"}}], "global": {{}}}}
  ]
}}"#
    )
}

fn sent_hits(call: &Call) -> Vec<Option<u64>> {
    let request = RateLimitRequest::decode(call.message()).unwrap();
    request.descriptors.iter().map(|d| d.hits_addend).collect()
}

#[test]
fn a_response_cost_is_asked_check_only_or_with_its_estimate() {
    let (l, store, mut tally) = limiter(&budget(None));
    let call = ask(l.check(&mut tenant("acme"), || Some(NOW), &store, &mut tally));
    assert_eq!(
        sent_hits(&call.call),
        [Some(0), None],
        "check-only beside an ordinary rule of cost 1"
    );
    let (l, store, mut tally) = limiter(&budget(Some(100)));
    let call = ask(l.check(&mut tenant("acme"), || Some(NOW), &store, &mut tally));
    assert_eq!(sent_hits(&call.call), [Some(100), None]);
}

#[test]
fn the_charge_is_the_cost_beyond_what_admission_counted() {
    let values = vec![b"acme".to_vec()];
    let charge = |cost| GlobalCharge {
        rule: 0,
        values: &values,
        cost,
    };
    let (l, _, _) = limiter(&budget(None));
    let call = l.charge_call(&[charge(250)]).unwrap();
    assert_eq!(
        call.header(rls::CHARGE_HEADER.0),
        Some(rls::CHARGE_HEADER.1.as_bytes().to_vec()),
        "counted whether it fits or not"
    );
    let request = RateLimitRequest::decode(call.message()).unwrap();
    assert_eq!(request.domain, "llm");
    assert_eq!(request.descriptors[0].entries[0].key, "tenant");
    assert_eq!(request.descriptors[0].entries[0].value, "acme");
    assert_eq!(sent_hits(&call), [Some(250)]);
    assert_eq!(
        sent_hits(&l.charge_call(&[charge(1)]).unwrap()),
        [None],
        "1 is the default"
    );
    assert_eq!(
        l.charge_call(&[charge(0)]),
        None,
        "nothing to charge: no call"
    );

    let (l, _, _) = limiter(&budget(Some(100)));
    assert_eq!(
        sent_hits(&l.charge_call(&[charge(250)]).unwrap()),
        [Some(150)]
    );
    assert_eq!(
        l.charge_call(&[charge(60)]),
        None,
        "below the estimate: nothing more (the service cannot give back)"
    );
}

#[test]
fn charges_are_counted_sent_or_failed_once() {
    let (l, _, mut tally) = limiter(&budget(None));
    l.stream_end_dispatched(StreamEndCall::Charge, true, &mut tally);
    l.stream_end_answered(
        StreamEndCall::Charge,
        &rls_answer(Code::OverLimit, &[Code::OverLimit]),
        &mut tally,
    );
    l.stream_end_dispatched(StreamEndCall::Charge, true, &mut tally);
    let unavailable = Answer::Status {
        code: 14,
        message: "no healthy upstream".into(),
    };
    l.stream_end_answered(StreamEndCall::Charge, &unavailable, &mut tally);
    l.stream_end_dispatched(StreamEndCall::Charge, false, &mut tally);
    let counted = counts(&l, &mut tally);
    assert!(
        counted.contains(&("floodgate.rls.charges".into(), 2)),
        "{counted:?}"
    );
    assert!(
        counted.contains(&("floodgate.rls.charge_failed".into(), 2)),
        "{counted:?}"
    );
    assert!(
        !counted
            .iter()
            .any(|(name, _)| name.starts_with("floodgate.rls.error")
                || name == "floodgate.rls.over_limit"),
        "a charge's answer is counted only as a charge: {counted:?}"
    );
}

#[test]
fn a_response_cost_rule_never_asks_for_a_lease() {
    let (l, _, _) = limiter(&budget(None));
    let rules = &l.config().rules;
    assert!(
        !rules[0].asks_for_lease(),
        "its cost is known only at stream end"
    );
    assert!(rules[1].asks_for_lease(), "an ordinary global rule does");
}

/// Admits a request for `t` through the service's OK, reads `body` as its JSON answer,
/// ending as `ended`, and returns the charge `settle` makes of it.
fn charge_of(l: &Limiter, t: &str, body: &[u8], ended: crate::usage::Ended) -> Option<Call> {
    let (store, mut tally) = (MemoryShared::default(), Tally::new(l.config().rules.len()));
    let call = ask(l.check(&mut tenant(t), || Some(NOW), &store, &mut tally));
    let ok = rls_answer(Code::Ok, &[Code::Ok, Code::Ok]);
    let verdict = l.answer(
        call.pending,
        ok,
        &mut tenant(t),
        || Some(NOW),
        &store,
        &mut tally,
    );
    let Verdict::Continue(pass) = verdict else {
        panic!("admitted: {verdict:?}");
    };
    let mut meter = pass.meter.expect("a global response-cost rule is metered");
    let config = l.config();
    meter.on_headers(
        config,
        &mut FakeRequest::new(&[("content-type", "application/json")]),
    );
    meter.on_body(config, body);
    let charges = meter.finish(config, ended);
    l.settle(&charges, || Some(NOW), &store, &mut tally)
}

#[test]
fn a_finished_response_becomes_one_charge_of_its_reported_cost_or_the_fallback() {
    use crate::usage::Ended;
    let (l, _, _) = limiter(&budget(None));
    let reported = br#"{"usage":{"total_tokens":420}}"#;
    let message = charge_of(&l, "acme", reported, Ended::Complete).unwrap();
    let request = RateLimitRequest::decode(message.message()).unwrap();
    assert_eq!(request.descriptors.len(), 1, "only the response-cost rule");
    assert_eq!(request.descriptors[0].entries[0].value, "acme");
    assert_eq!(request.descriptors[0].hits_addend, Some(420));
    // Cut off before any usage: the fallback (1 by default, sent as the default 1).
    let message = charge_of(&l, "acme", b"{\"choi", Ended::CutOff).unwrap();
    assert_eq!(sent_hits(&message), [None]);
    // A usage past the rule's `max` (a million by default) is charged `max`: a hostile
    // upstream cannot send the service `4294967295`.
    let huge = br#"{"usage":{"total_tokens":4294967295}}"#;
    let message = charge_of(&l, "acme", huge, Ended::Complete).unwrap();
    assert_eq!(sent_hits(&message), [Some(1_000_000)]);
    let (l, _, _) = limiter(
        &budget(Some(100)).replace(r#""estimate": 100"#, r#""estimate": 100, "fallback": 30"#),
    );
    assert_eq!(
        charge_of(&l, "acme", b"not json", Ended::Complete),
        None,
        "a fallback below the estimate held: nothing more to charge"
    );
}
