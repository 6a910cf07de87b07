//! The soak's listener update, kept working by `make test` (the soak itself is not part
//! of it): a real Envoy reading its listener from a file through LDS, the file replaced
//! with a new plugin configuration, and the new configuration answering new connections.

use floodgate_integration::client::get;
use floodgate_integration::soak::lds::ListenerFile;
use floodgate_integration::soak::setup::{self, FIRST, SECOND};
use floodgate_integration::{client, Envoy, Upstream};

/// Sends `n` requests for `tenant` on a fresh client; returns (status, body) of each.
async fn ask(url: &str, tenant: &str, n: u64) -> Vec<(u16, String)> {
    let c = client();
    let mut replies = Vec::new();
    for _ in 0..n {
        let r = get(&c, url, &[("x-tenant-id", tenant)]).await;
        replies.push((r.status, r.body));
    }
    replies
}

fn expected(limit: u64, n: u64, body: &str) -> Vec<(u16, String)> {
    (0..n)
        .map(|i| {
            if i < limit {
                (200, "ok\n".to_string())
            } else {
                (429, body.to_string())
            }
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_listener_file_brings_the_new_plugin_configuration() {
    let upstream = Upstream::start().await;
    let port = setup::free_port().expect("port");
    let mut file = ListenerFile::new(&[FIRST.listener(port)]).expect("listener file");
    // No rate limit service: only the local rule is asked.
    let rls = "127.0.0.1:9".parse().expect("address");
    let bootstrap = setup::envoy_bootstrap(&file, upstream.addr(), rls).expect("bootstrap");
    let envoy = Envoy::start(&bootstrap, 2).await;
    let url = format!("http://127.0.0.1:{port}/local/item");
    assert_eq!(
        ask(&url, "before", FIRST.local_limit + 2).await,
        expected(FIRST.local_limit, FIRST.local_limit + 2, FIRST.body)
    );

    let applied = file.update(&envoy, &[SECOND.listener(port)]).await;
    assert_eq!(applied, Ok(2), "listener_manager.lds.update_success");
    assert_eq!(
        ask(&url, "after", SECOND.local_limit + 2).await,
        expected(SECOND.local_limit, SECOND.local_limit + 2, SECOND.body)
    );
    assert_eq!(upstream.count_for("before"), FIRST.local_limit);
    assert_eq!(upstream.count_for("after"), SECOND.local_limit);
}
