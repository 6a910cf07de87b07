//! Where a reference deployment listens and reads its configuration from.

use super::*;

#[test]
fn with_xds_the_runtime_directory_is_not_the_configuration() {
    let mut a = args();
    let vars = [("CONFIG_TYPE", "GRPC_XDS_SOTW"), ("RUNTIME_ROOT", "/data")];
    apply(&mut a, &nothing_given, &env_of(&vars)).unwrap();
    assert_eq!(a.xds.config_xds.as_deref(), Some("http://localhost:18000"));
    assert!(a.config.as_os_str().is_empty(), "{:?}", a.config);
}

#[test]
fn a_reference_deployment_listens_where_the_reference_does() {
    let mut a = args();
    apply(
        &mut a,
        &nothing_given,
        &env_of(&[("REDIS_URL", "redis:6379")]),
    )
    .unwrap();
    assert_eq!(a.grpc_addr, "0.0.0.0:8081".parse().unwrap());
    assert_eq!(a.http_addr, "0.0.0.0:8080".parse().unwrap());
    // A flag still wins.
    let mut b = args();
    let given = |id: &str| id == "http_addr";
    apply(&mut b, &given, &env_of(&[("REDIS_URL", "redis:6379")])).unwrap();
    assert_eq!(b.http_addr, "127.0.0.1:8080".parse().unwrap());
}

#[test]
fn use_prometheus_opens_the_references_metrics_listener() {
    let mut a = args();
    let vars = [("USE_PROMETHEUS", "true"), ("PROMETHEUS_ADDR", ":19001")];
    apply(&mut a, &nothing_given, &env_of(&vars)).unwrap();
    assert_eq!(a.metrics_addr, Some("0.0.0.0:19001".parse().unwrap()));
    assert_eq!(a.metrics_path, "/metrics");
    let mut b = args();
    apply(&mut b, &nothing_given, &env_of(&[("USE_PROMETHEUS", "1")])).unwrap();
    assert_eq!(
        b.metrics_addr,
        Some("0.0.0.0:9090".parse().unwrap()),
        "the reference's default"
    );
    let mut c = args();
    let vars = [("PROMETHEUS_ADDR", ":19001"), ("PROMETHEUS_PATH", "/m")];
    apply(&mut c, &nothing_given, &env_of(&vars)).unwrap();
    assert_eq!(c.metrics_addr, None, "only with USE_PROMETHEUS=true");
    let bad = [
        ("USE_PROMETHEUS", "true"),
        ("PROMETHEUS_ADDR", "localhost:1"),
    ];
    let e = apply(&mut args(), &nothing_given, &env_of(&bad)).unwrap_err();
    assert_eq!(
        e,
        "PROMETHEUS_ADDR \"localhost:1\": expected :PORT or IP:PORT"
    );
}
