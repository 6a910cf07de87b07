//! End to end: configuration directories laid out as deployments of
//! envoyproxy/ratelimit have them, reloaded the way they are updated: the reference's
//! runtime root symlink swap, a Kubernetes ConfigMap's `..data` swap, and a domain split
//! over files (`--merge-domains`). Each swap is an atomic `rename` of a symlink, and each
//! reload is awaited on `floodgate_config_reloads_total`, the server's own signal.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::os::unix::fs::symlink;
use std::path::Path;
use std::time::Duration;
use support::{ask, descriptor, envoy_request, eventually, Server};

fn limit_file(rpu: u32) -> String {
    format!(
        "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {{ unit: hour, requests_per_unit: {rpu} }}\n"
    )
}

/// Points the symlink `link` at `target` in one step: a new link, renamed over the old.
fn swap_symlink(link: &Path, target: &str) {
    // As the kubelet does: `..data_tmp`, then renamed over `..data`.
    let mut name = link.file_name().unwrap().to_owned();
    name.push("_tmp");
    let tmp = link.with_file_name(name);
    symlink(target, &tmp).unwrap();
    std::fs::rename(&tmp, link).unwrap();
}

/// The limit the server applies to `user`, as its answer reports it.
async fn user_limit(server: &Server) -> u32 {
    let mut client = server.client().await;
    let r = ask(
        &mut client,
        envoy_request("edge", vec![descriptor(&[("user", "u")])]),
    )
    .await
    .unwrap();
    r.statuses[0]
        .current_limit
        .as_ref()
        .map_or(0, |l| l.requests_per_unit)
}

async fn await_reloads(server: &Server, n: f64) {
    eventually(Duration::from_secs(20), "the reload", || async {
        server
            .metric("floodgate_config_reloads_total{result=\"success\"}")
            .await
            >= Some(n)
    })
    .await;
    assert_eq!(
        server
            .metric("floodgate_config_reloads_total{result=\"failure\"}")
            .await,
        Some(0.0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_runtime_layout_reloads_on_a_root_symlink_swap() {
    // RUNTIME_ROOT=/srv/runtime_data/current, a symlink to one version of the tree;
    // RUNTIME_SUBDIRECTORY=ratelimit; the files in config/.
    let root = tempfile::tempdir().unwrap();
    for (version, rpu) in [("v1", 5), ("v2", 7)] {
        let app = root.path().join(version).join("ratelimit/config");
        std::fs::create_dir_all(&app).unwrap();
        std::fs::write(app.join("edge.yaml"), limit_file(rpu)).unwrap();
        // Beside config/: never read (it would refuse the directory).
        std::fs::write(app.join("../notes.yaml"), "not: [a, domain").unwrap();
    }
    let current = root.path().join("current");
    symlink("v1", &current).unwrap();
    let server = Server::start(&current.join("ratelimit"), &["--watch-interval-ms", "50"]);
    assert_eq!(user_limit(&server).await, 5);
    swap_symlink(&current, "v2");
    await_reloads(&server, 1.0).await;
    assert_eq!(user_limit(&server).await, 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configmap_mount_reloads_when_its_data_link_is_swapped() {
    // What the kubelet writes: a timestamped directory, `..data` pointing at it, and each
    // key a symlink through `..data`.
    let mount = tempfile::tempdir().unwrap();
    for (version, rpu) in [
        ("..2026_12_01_10_00_00.1", 5),
        ("..2026_12_01_10_05_00.2", 9),
    ] {
        let dir = mount.path().join(version);
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("edge.yaml"), limit_file(rpu)).unwrap();
    }
    let data = mount.path().join("..data");
    symlink("..2026_12_01_10_00_00.1", &data).unwrap();
    symlink("..data/edge.yaml", mount.path().join("edge.yaml")).unwrap();
    let server = Server::start(mount.path(), &["--watch-interval-ms", "50"]);
    assert_eq!(user_limit(&server).await, 5);
    swap_symlink(&data, "..2026_12_01_10_05_00.2");
    await_reloads(&server, 1.0).await;
    assert_eq!(user_limit(&server).await, 9);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_domains_serves_one_domain_from_several_files_and_reloads_them() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.yaml"), limit_file(5)).unwrap();
    let b = "domain: edge\ndescriptors:\n  - key: path\n    rate_limit: { unit: hour, requests_per_unit: 3 }\n";
    std::fs::write(dir.path().join("b.yaml"), b).unwrap();
    let server = Server::start(
        dir.path(),
        &["--merge-domains", "--watch-interval-ms", "50"],
    );
    assert_eq!(user_limit(&server).await, 5);
    let mut client = server.client().await;
    let path = || envoy_request("edge", vec![descriptor(&[("path", "/a")])]);
    let r = ask(&mut client, path()).await.unwrap();
    assert_eq!(
        r.statuses[0].limit_remaining, 2,
        "b.yaml's limit, in the same domain"
    );
    let tmp = dir.path().join(".b.tmp");
    std::fs::write(
        &tmp,
        b.replace("requests_per_unit: 3", "requests_per_unit: 30"),
    )
    .unwrap();
    std::fs::rename(&tmp, dir.path().join("b.yaml")).unwrap();
    await_reloads(&server, 1.0).await;
    let r = ask(&mut client, path()).await.unwrap();
    assert_eq!(
        r.statuses[0].limit_remaining, 29,
        "a changed limit starts afresh"
    );
}

/// A file written in place arrives in pieces, and a piece can parse: `requests_per_unit:
/// 6000` read after its first digit is `6`. The reloader used to apply what it read;
/// it now waits until two reads a poll apart agree, so the half-written file is never
/// in force, and the whole one is, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_written_in_two_steps_is_applied_only_once_whole() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("edge.yaml");
    let block = |rpu: &str| {
        format!(
            "domain: edge\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: hour\n      requests_per_unit: {rpu}"
        )
    };
    std::fs::write(&path, block("5\n")).unwrap();
    // Long enough for the test to finish writing between two polls on a loaded machine.
    let server = Server::start(&path, &["--watch-interval-ms", "2000"]);
    assert_eq!(user_limit(&server).await, 5);

    // The first piece, then a pause that a poll falls into: the server logs the change it
    // saw (or, without the wait, has already applied it).
    std::fs::write(&path, block("6")).unwrap();
    eventually(
        Duration::from_secs(20),
        "a poll of the half file",
        || async {
            server.log().contains("configuration changed")
                || server
                    .metric("floodgate_config_reloads_total{result=\"success\"}")
                    .await
                    >= Some(1.0)
        },
    )
    .await;
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    file.write_all(b"000\n").unwrap();
    drop(file);

    await_reloads(&server, 1.0).await;
    assert_eq!(user_limit(&server).await, 6000, "the whole file, first");
    // The half file never was in force: one reload in all.
    let reloaded = server.log().matches("configuration reloaded").count();
    assert_eq!(reloaded, 1, "{}", server.log());
    assert_eq!(
        server
            .metric("floodgate_config_reloads_total{result=\"success\"}")
            .await,
        Some(1.0)
    );
}
