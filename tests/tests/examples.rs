//! The example configurations under `envoy/` stay valid for the pinned Envoy, and each
//! one actually limits traffic when run.

use floodgate_integration::client::{get, statuses};
use floodgate_integration::paths::repo_root;
use floodgate_integration::{burst, client, examples, Envoy};

#[test]
fn every_envoy_example_passes_validate() {
    let dir = repo_root().join("envoy");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).expect("envoy/") {
        let path = entry.expect("entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let relative = path
            .strip_prefix(repo_root())
            .expect("inside the repository");
        if let Err(log) = Envoy::validate(relative) {
            panic!("{} is not valid:\n{log}", relative.display());
        }
        checked += 1;
    }
    assert!(checked >= 1, "no examples found in {}", dir.display());
}

/// Requests carry this tenant: every example limits on the `x-tenant-id` header.
const TENANT: (&str, &str) = ("x-tenant-id", "example-check");

/// More requests than any example's per-tenant burst allows.
const BURST: usize = 120;

/// Each `envoy/*.yaml`, with its ports moved to free ones and its demo upstream replaced
/// by a counting one: the first request gets 200, a burst then gets 429s, and no rejected
/// request reaches the upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_envoy_example_serves_then_limits() {
    let files = examples::files();
    assert!(!files.is_empty(), "no envoy/*.yaml");
    for file in files {
        let running = examples::start(&file).await;
        let (name, upstream) = (&running.name, &running.upstream);
        let url = running.envoy.url(&running.listener, "/api/items");
        let c = client();

        let first = get(&c, &url, &[TENANT]).await;
        assert_eq!(first.status, 200, "{name}: first request: {first:?}");
        let replies = burst(&c, &url, &[TENANT], BURST).await;
        let counts = statuses(&replies);
        let allowed = counts.get(&200).copied().unwrap_or(0);
        let limited = counts.get(&429).copied().unwrap_or(0);
        assert!(
            limited > 0,
            "{name}: a burst of {BURST} was never limited: {counts:?}"
        );
        assert_eq!(
            allowed + limited,
            BURST,
            "{name}: only 200 and 429 expected: {counts:?}"
        );
        assert_eq!(
            upstream.count(),
            1 + allowed as u64,
            "{name}: rejected requests must not reach the upstream"
        );
        if let Some(server) = &running.server {
            // The limiter was really asked (a broken cluster with failure_mode allow
            // would let the local rule alone produce the 429s).
            let over = server
                .metric("floodgate_requests_total{result=\"over_limit\"}")
                .await;
            assert!(
                over > 0.0,
                "{name}: floodgate-server never answered OVER_LIMIT"
            );
        }
    }
}
