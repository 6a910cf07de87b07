//! Rules whose cost the response reports: admission on the estimate, the charge when
//! the response is done, debt, and what is counted.

use super::*;
use crate::usage::{Ended, NoUsage, Usage};

const S: u64 = 1_000_000_000;

/// 1 000 tokens per tenant per minute, charged what an OpenAI-style answer reports.
const BUDGET: &str = r#"{"rules":[{"name":"tokens",
    "descriptors":[{"key":"tenant","header":"x-tenant"}],
    "local":{"capacity":1000,"refill_per_second":16.666666},
    "cost":{"response":{"json":"usage.total_tokens","fallback":5}}}]}"#;

/// Admits a request for tenant `t` at `now` and answers it with `body` (JSON), ending
/// as `ended`. Returns the verdict, or `None` if it was rejected.
fn exchange(
    l: &Limiter,
    store: &MemoryShared,
    tally: &mut Tally,
    t: &str,
    body: &[u8],
    ended: Ended,
    now: u64,
) -> Result<(), Box<Verdict>> {
    let verdict = l.check(&mut tenant(t), || Some(now), store, tally);
    let Verdict::Continue(pass) = verdict else {
        return Err(Box::new(verdict));
    };
    let mut meter = pass.meter.expect("a response-cost rule applies: a meter");
    let config = l.config();
    let mut json = FakeRequest::new(&[("content-type", "application/json")]);
    meter.on_headers(config, &mut json);
    meter.on_body(config, body);
    let charges = meter.finish(config, ended);
    l.settle(&charges, || Some(now), store, tally);
    Ok(())
}

fn used(n: u32) -> Vec<u8> {
    format!(r#"{{"usage":{{"total_tokens":{n}}}}}"#).into_bytes()
}

#[test]
fn requests_are_admitted_until_the_charged_usage_exceeds_the_budget_then_wait_out_the_debt() {
    let (l, store, mut tally) = limiter(BUDGET);
    // 400 + 400 + 400 = 1 200: the third is admitted (the bucket was not in debt) and
    // puts it 200 tokens into debt.
    for _ in 0..3 {
        exchange(
            &l,
            &store,
            &mut tally,
            "a",
            &used(400),
            Ended::Complete,
            NOW,
        )
        .unwrap();
    }
    let rejected =
        exchange(&l, &store, &mut tally, "a", &used(1), Ended::Complete, NOW).unwrap_err();
    let rejected = *rejected;
    // 200 tokens of debt plus the 1 the next request needs, at 16.666666 per second:
    // 12.06 s, rounded up.
    let Verdict::Reject(Reply::Http {
        status, headers, ..
    }) = rejected
    else {
        panic!("expected a 429, got {rejected:?}");
    };
    assert_eq!(status, 429);
    assert_eq!(headers.iter().next(), Some(("retry-after", "13")));
    // Other tenants have their own budget.
    exchange(&l, &store, &mut tally, "b", &used(10), Ended::Complete, NOW).unwrap();
    // Exactly when the debt is refilled (201 tokens / 16.666666 per second), not before.
    let wait = (201u128 * S as u128 * 1_000_000).div_ceil(16_666_666) as u64;
    assert!(exchange(
        &l,
        &store,
        &mut tally,
        "a",
        &used(1),
        Ended::Complete,
        NOW + wait - 1
    )
    .is_err());
    assert!(exchange(
        &l,
        &store,
        &mut tally,
        "a",
        &used(1),
        Ended::Complete,
        NOW + wait
    )
    .is_ok());
    let c = counts(&l, &mut tally);
    let get = |name: &str| c.iter().find(|(n, _)| n == name).map_or(0, |(_, v)| *v);
    assert_eq!(get("floodgate.usage.reported"), 5);
    assert_eq!(get("floodgate.usage.tokens"), 3 * 400 + 10 + 1);
    assert_eq!(get("floodgate.denied"), 2);
}

#[test]
fn a_response_that_cannot_be_charged_costs_the_fallback_and_is_counted() {
    let (l, store, mut tally) = limiter(BUDGET);
    exchange(
        &l,
        &store,
        &mut tally,
        "a",
        b"<html>oops</html>",
        Ended::Complete,
        NOW,
    )
    .unwrap();
    // Cut off before its usage came.
    exchange(
        &l,
        &store,
        &mut tally,
        "a",
        b"{\"choices\":[",
        Ended::CutOff,
        NOW,
    )
    .unwrap();
    exchange(&l, &store, &mut tally, "a", b"{}", Ended::Complete, NOW).unwrap();
    let c = counts(&l, &mut tally);
    let get = |name: &str| c.iter().find(|(n, _)| n == name).map_or(0, |(_, v)| *v);
    assert_eq!(get("floodgate.usage.fallback.unreadable"), 1);
    assert_eq!(get("floodgate.usage.fallback.cut_off"), 1);
    assert_eq!(get("floodgate.usage.fallback.absent"), 1);
    assert_eq!(get("floodgate.usage.tokens"), 15);
    // An empty body is not JSON either.
    let mut m = l.meter_for_test("a", &store, &mut tally);
    let config = l.config();
    m.on_headers(
        config,
        &mut FakeRequest::new(&[("content-type", "application/json")]),
    );
    let charges = m.finish(config, Ended::Complete);
    assert_eq!(
        charges[0].usage,
        Usage::Fallback {
            cost: 5,
            why: NoUsage::Unreadable
        }
    );
}

/// An answer reporting `4294967295` tokens is charged the rule's `max` (a million by
/// default), and the bucket's debt stops at one burst: the tenant waits about a minute
/// (1 001 tokens at 16.67 per second), not eight years. Both are counted.
#[test]
fn a_huge_usage_is_clamped_and_locks_a_tenant_out_for_at_most_two_bursts() {
    let (l, store, mut tally) = limiter(BUDGET);
    let huge = used(u32::MAX);
    exchange(&l, &store, &mut tally, "a", &huge, Ended::Complete, NOW).unwrap();
    let rejected = exchange(&l, &store, &mut tally, "a", &used(1), Ended::Complete, NOW);
    let Err(rejected) = rejected else {
        panic!("in debt: rejected");
    };
    let Verdict::Reject(Reply::Http { headers, .. }) = *rejected else {
        panic!("expected a 429, got {rejected:?}");
    };
    assert_eq!(headers.iter().next(), Some(("retry-after", "61")));
    let c = counts(&l, &mut tally);
    let get = |name: &str| c.iter().find(|(n, _)| n == name).map_or(0, |(_, v)| *v);
    assert_eq!(get("floodgate.usage.clamped"), 1);
    assert_eq!(get("floodgate.usage.debt_capped"), 1);
    assert_eq!(get("floodgate.usage.tokens"), 1_000_000);
}

#[test]
fn rules_without_a_response_cost_build_no_meter() {
    let (l, store, mut tally) = limiter(
        r#"{"rules":[{"name":"per-tenant","descriptors":[{"key":"tenant","header":"x-tenant"}],
            "local":{"capacity":2,"refill_per_second":1}}]}"#,
    );
    let Verdict::Continue(pass) = l.check(&mut tenant("a"), || Some(NOW), &store, &mut tally)
    else {
        panic!("admitted");
    };
    assert_eq!(pass.meter, None);
}

impl Limiter {
    /// A meter from an admitted request of tenant `t`.
    fn meter_for_test(
        &self,
        t: &str,
        store: &MemoryShared,
        tally: &mut Tally,
    ) -> Box<ResponseMeter> {
        match self.check(&mut tenant(t), || Some(NOW), store, tally) {
            Verdict::Continue(pass) => pass.meter.unwrap(),
            other => panic!("expected a pass, got {other:?}"),
        }
    }
}

/// A local response-cost rule beside a global rule: the meter waits with the request for
/// the service, goes on with it when the service allows it, and is dropped (the estimate
/// given back) when it rejects it.
#[test]
fn the_meter_goes_through_a_call_to_the_rate_limit_service() {
    let (l, store, mut tally) = limiter(
        r#"{"rls":{"cluster":"ratelimit","domain":"edge"},"rules":[
            {"name":"tokens","descriptors":[{"key":"tenant","header":"x-tenant"}],
             "local":{"capacity":1000,"refill_per_second":1},
             "cost":{"response":{"json":"usage.total_tokens","estimate":100}}},
            {"name":"calls","descriptors":[{"key":"tenant","header":"x-tenant"}],"global":{}}]}"#,
    );
    let call = ask(l.check(&mut tenant("a"), || Some(NOW), &store, &mut tally));
    let ok = rls_answer(Code::Ok, &[Code::Ok]);
    match l.answer(
        call.pending,
        ok,
        &mut tenant("a"),
        || Some(NOW),
        &store,
        &mut tally,
    ) {
        Verdict::Continue(pass) => assert!(pass.meter.is_some()),
        other => panic!("expected a pass, got {other:?}"),
    }
    let call = ask(l.check(&mut tenant("b"), || Some(NOW), &store, &mut tally));
    let over = rls_answer(Code::OverLimit, &[Code::OverLimit]);
    let verdict = l.answer(
        call.pending,
        over,
        &mut tenant("b"),
        || Some(NOW),
        &store,
        &mut tally,
    );
    assert!(matches!(verdict, Verdict::Reject(_)), "{verdict:?}");
    let remaining = |t: &str| {
        let fp = l.placement().bucket(
            "tokens",
            crate::bucket::Quota::new(1000, 1_000_000).unwrap(),
            &[t.as_bytes().to_vec()],
        );
        let found = l.table().find(&store, fp, NOW).unwrap();
        match crate::bucket::decide(
            found.state,
            NOW,
            crate::bucket::Quota::new(1000, 1_000_000).unwrap(),
            1,
        ) {
            d @ crate::bucket::Decision::Allow { .. } => d.remaining() + 1,
            _ => 0,
        }
    };
    // a holds its estimate until its response is done; b's rejected request gave it back.
    assert_eq!(remaining("a"), 900);
    assert_eq!(remaining("b"), 1000);
}
