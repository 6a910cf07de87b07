//! The reference's `quota_mode` and `metadata` (in the dynamic metadata), and its
//! per-limit metrics, over gRPC.

use super::support::Server;
use super::*;

fn field<'s>(s: &'s Struct, path: &[&str]) -> Option<&'s Value> {
    let (first, rest) = path.split_first()?;
    let v = s.fields.get(*first)?;
    if rest.is_empty() {
        return Some(v);
    }
    match &v.kind {
        Some(Kind::StructValue(inner)) => field(inner, rest),
        _ => None,
    }
}

fn text(s: &Struct, path: &[&str]) -> Option<String> {
    match field(s, path)?.kind.as_ref()? {
        Kind::StringValue(t) => Some(t.clone()),
        Kind::NumberValue(n) => Some(n.to_string()),
        _ => None,
    }
}

pub async fn quota_mode_and_metadata(c: &mut Client) {
    let d = "quota";
    let teams: &[&[(&str, &str)]] = &[&[("team", "alpha")], &[("team", "beta")]];
    let r = c.ask(d, teams).await;
    assert_eq!((code(r.overall_code), codes(&r)), ("OK", vec!["OK", "OK"]));
    let m = r.dynamic_metadata.as_ref().unwrap();
    assert_eq!(text(m, &["domain"]).as_deref(), Some("quota"));
    // Both applied: merged in request order, the first value of a key wins.
    assert_eq!(
        text(m, &["metadata", "quota", "team"]).as_deref(),
        Some("alpha")
    );
    assert_eq!(
        text(m, &["metadata", "quota", "tier"]).as_deref(),
        Some("1")
    );
    assert_eq!(
        text(m, &["metadata", "quota", "region"]).as_deref(),
        Some("eu")
    );
    assert_eq!(text(m, &["metadata", "owner"]).as_deref(), Some("platform"));
    let entries = match &field(m, &["descriptors"]).unwrap().kind {
        Some(Kind::ListValue(l)) => l.values.len(),
        other => panic!("{other:?}"),
    };
    assert_eq!(entries, 2);

    // alpha is over, beta is not: a soft limit, the request is admitted; only beta's
    // metadata comes back.
    let r = c.ask(d, teams).await;
    assert_eq!(
        (code(r.overall_code), codes(&r)),
        ("OK", vec!["OVER", "OK"])
    );
    let m = r.dynamic_metadata.as_ref().unwrap();
    assert_eq!(
        text(m, &["metadata", "quota", "team"]).as_deref(),
        Some("beta")
    );
    assert_eq!(text(m, &["metadata", "quota", "tier"]), None);

    // Both over: over, and the enforced org limit consumes nothing.
    let with_org: &[&[(&str, &str)]] =
        &[&[("team", "alpha")], &[("team", "beta")], &[("org", "o")]];
    let r = c.ask(d, with_org).await;
    assert_eq!(
        (code(r.overall_code), codes(&r)),
        ("OVER", vec!["OVER", "OVER", "OK"])
    );
    assert_eq!(
        field(r.dynamic_metadata.as_ref().unwrap(), &["metadata"]),
        None
    );
    let r = c.ask(d, &[&[("org", "o")]]).await;
    assert_eq!(r.statuses[0].limit_remaining, 99);
}

pub async fn per_limit_metrics(c: &mut Client, server: &Server) {
    let d = "metrics";
    c.ask(d, &[&[("route", "api/users"), ("method", "GET")]])
        .await;
    c.ask(d, &[&[("route", "api/orders"), ("method", "GET")]])
        .await;
    c.ask(d, &[&[("route", "api/orders"), ("method", "GET")]])
        .await;
    c.ask(d, &[&[("client", "10.1.2.3")]]).await;
    c.ask(d, &[&[("client", "10.1.2.3")]]).await;
    c.ask(d, &[&[("plain", "p")]]).await;
    let series = |limit: &str, result: &str| {
        format!(
            "floodgate_limit_decisions_total{{domain=\"metrics\",limit=\"{limit}\",result=\"{result}\"}}"
        )
    };
    // Named by the configured path: the wildcard as written, never the client's value;
    // the two routes still have a counter each.
    assert_eq!(
        server.metric(&series("route_api/*.method", "ok")).await,
        Some(2.0)
    );
    assert_eq!(
        server
            .metric(&series("route_api/*.method", "over_limit"))
            .await,
        Some(1.0)
    );
    assert_eq!(server.metric(&series("client", "ok")).await, Some(1.0));
    assert_eq!(
        server.metric(&series("client", "over_limit")).await,
        Some(1.0)
    );
    let (_, body) = server.get("/metrics").await;
    assert!(
        !body.contains("10.1.2.3") && !body.contains("api/users"),
        "{body}"
    );
    assert!(
        !body.contains("limit=\"plain\""),
        "plain has no per-limit series"
    );
}
