//! What the exposition says, in both formats.

use super::*;
use crate::store::health::Cause;

#[test]
fn renders_counters_and_a_cumulative_histogram() {
    let m = Metrics::new("memory");
    let web: Arc<str> = Arc::from("we\"b");
    m.domain(&web).record(Outcome::Ok);
    m.domain(&web).record(Outcome::ShadowOverLimit);
    m.unknown_domain().record(Outcome::NoLimit);
    m.store_latency(Duration::from_micros(30));
    m.store_latency(Duration::from_secs(2));
    m.reload(false);
    let text = m.render();
    assert!(text.contains("floodgate_decisions_total{domain=\"we\\\"b\",result=\"ok\"} 1"));
    assert!(text
        .contains("floodgate_decisions_total{domain=\"we\\\"b\",result=\"shadow_over_limit\"} 1"));
    assert!(text.contains("floodgate_decisions_total{domain=\"\",result=\"no_limit\"} 1"));
    assert!(
        text.contains("floodgate_store_latency_seconds_bucket{store=\"memory\",le=\"5e-05\"} 1")
    );
    assert!(text.contains("floodgate_store_latency_seconds_bucket{store=\"memory\",le=\"1\"} 1"));
    assert!(text.contains("floodgate_store_latency_seconds_bucket{store=\"memory\",le=\"+Inf\"} 2"));
    assert!(text.contains("floodgate_store_latency_seconds_count{store=\"memory\"} 2"));
    assert!(text.contains("floodgate_config_reloads_total{result=\"failure\"} 1"));
    assert!(text.contains("floodgate_store_up{store=\"memory\"} 1"));
}

#[test]
fn openmetrics_on_request_with_the_same_series() {
    assert_eq!(Format::from_accept(None), Format::Classic);
    assert_eq!(Format::from_accept(Some("text/plain")), Format::Classic);
    let om = "application/openmetrics-text;version=1.0.0,text/plain;q=0.5";
    assert_eq!(Format::from_accept(Some(om)), Format::OpenMetrics);
    let m = Metrics::new("memory");
    m.request(RequestResult::OverLimit);
    let text = m.render_as(Format::OpenMetrics);
    assert!(text.contains("# TYPE floodgate_requests counter"), "{text}");
    assert!(text.contains("floodgate_requests_total{result=\"over_limit\"} 1"));
    assert!(text.ends_with("# EOF\n"));
    let classic = m.render();
    assert!(classic.contains("# TYPE floodgate_requests_total counter"));
    assert!(!classic.contains("# EOF"));
}

#[test]
fn every_series_exists_before_traffic_and_only_for_configured_domains() {
    let m = Metrics::new("memory");
    m.register_domains(["web"].into_iter());
    let text = m.render();
    let decisions = text
        .lines()
        .filter(|l| l.starts_with("floodgate_decisions_total{"))
        .count();
    assert_eq!(decisions, 8, "web and \"\", four results each:\n{text}");
    for series in [
        "floodgate_errors_total{kind=\"store_unavailable\"} 0",
        "floodgate_config_reloads_total{result=\"success\"} 0",
        "floodgate_connections_closed_total{reason=\"handshake_timeout\"} 0",
        "floodgate_accept_errors_total 0",
        "floodgate_connections 0",
        "floodgate_store_cells{store=\"memory\"} 0",
        "floodgate_store_failures_total{cause=\"unreachable\"} 0",
    ] {
        assert!(text.contains(series), "{series} missing:\n{text}");
    }
}

#[test]
fn store_up_follows_health() {
    let health = Arc::new(Health::default());
    let m = Metrics::with_health("redis", health.clone());
    m.error(ErrorKind::StoreOverloaded);
    assert!(health.set_down(Cause::Auth, "NOAUTH Authentication required."));
    health.failed(Cause::Auth);
    let text = m.render();
    assert!(text.contains("floodgate_store_up{store=\"redis\"} 0"));
    assert!(text.contains("floodgate_store_failures_total{cause=\"auth\"} 1"));
    assert!(text.contains("floodgate_store_failures_total{cause=\"script\"} 0"));
    assert!(text.contains("floodgate_errors_total{kind=\"store_overloaded\"} 1"));
    assert!(health.set_up());
    assert!(m.render().contains("floodgate_store_up{store=\"redis\"} 1"));
}
