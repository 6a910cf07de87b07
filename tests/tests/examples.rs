//! The examples (`examples/<name>/envoy.yaml`) stay valid for the pinned Envoy, and each
//! one actually limits traffic when run.

use floodgate_integration::client::{get, statuses};
use floodgate_integration::paths::repo_root;
use floodgate_integration::{burst, client, examples, Envoy};

#[test]
fn every_envoy_example_passes_validate() {
    let files = examples::files();
    assert!(files.len() >= 3, "examples found: {files:?}");
    for path in files {
        let relative = path
            .strip_prefix(repo_root())
            .expect("inside the repository");
        if let Err(log) = Envoy::validate(relative) {
            panic!("{} is not valid:\n{log}", relative.display());
        }
    }
}

/// An example is a folder a user can run: it says what it shows and how, in its README.
#[test]
fn every_example_has_a_readme() {
    let dir = repo_root().join("examples");
    let mut folders = 0;
    for entry in std::fs::read_dir(&dir).expect("examples/") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            folders += 1;
            let readme = path.join("README.md");
            assert!(readme.is_file(), "{} has no README.md", path.display());
        }
    }
    assert!(folders >= 5, "only {folders} examples");
}

/// Requests carry this tenant: every example limits on the `x-tenant-id` header.
const TENANT: (&str, &str) = ("x-tenant-id", "example-check");

/// More requests than any example's per-tenant burst allows.
const BURST: usize = 120;

/// Each example, with its ports moved to free ones and its demo upstream replaced
/// by a counting one: the first request gets 200, a burst then gets 429s, and no rejected
/// request reaches the upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_envoy_example_serves_then_limits() {
    let files = examples::files();
    assert!(!files.is_empty(), "no examples/*/envoy.yaml");
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
