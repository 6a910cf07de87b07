//! End to end against hostile clients (issue 13): the real binary, real sockets.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use floodgate_server::proto::rls::rate_limit_response::Code;
use std::time::Duration;
use support::{ask, descriptor, envoy_request, eventually, Server};

const CONFIG: &str = r#"
domain: edge
descriptors:
  - key: tenant
    rate_limit: { unit: hour, requests_per_unit: 5 }
"#;

fn config(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("edge.yaml");
    std::fs::write(&path, CONFIG).unwrap();
    path
}

/// Issue 13 item 1: 3,000 distinct 50 KB values used to grow the memory store by the
/// values themselves (about 150 MB). A counter now holds a fixed-size fingerprint, so
/// they cost what 3,000 small values cost: well under a megabyte, plus allocator noise.
#[tokio::test]
async fn a_counters_memory_does_not_depend_on_its_values_length() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&config(dir.path()), &[]);
    let mut client = server.client().await;
    let value = |i: usize| format!("{i:08}{}", "v".repeat(50 * 1024));
    // Warm up: connection buffers and the first table allocations are not what we measure.
    for i in 0..200 {
        let r = ask(
            &mut client,
            envoy_request("edge", vec![descriptor(&[("tenant", &value(i))])]),
        );
        assert_eq!(r.await.unwrap().overall_code, Code::Ok as i32);
    }
    let before = server.rss_bytes();
    let n = 3_000;
    for i in 200..200 + n {
        let r = ask(
            &mut client,
            envoy_request("edge", vec![descriptor(&[("tenant", &value(i))])]),
        );
        assert_eq!(r.await.unwrap().overall_code, Code::Ok as i32);
    }
    let grown = server.rss_bytes().saturating_sub(before);
    // Every value got its own counter (the sweep publishes the count every second).
    let cells = || async {
        server
            .metric("floodgate_store_cells{store=\"memory\"}")
            .await
            == Some((200 + n) as f64)
    };
    eventually(Duration::from_secs(5), "3,200 cells", cells).await;
    // The values alone are 150 MB; 16 MB leaves room for the allocator, not for values.
    assert!(
        grown < 16 << 20,
        "RSS grew by {} MB over {n} counters of 50 KB values",
        grown >> 20
    );
}
