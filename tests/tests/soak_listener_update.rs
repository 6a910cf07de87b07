//! The soak's listener update, kept working by `make test` (the soak itself is not part
//! of it): a real Envoy reading the soak's listener from a file through LDS, the file
//! replaced with the soak's second plugin configuration, and that configuration
//! answering new connections.

use floodgate_integration::client::get;
use floodgate_integration::lds::DynamicEnvoy;
use floodgate_integration::soak::setup::{self, FIRST, SECOND};
use floodgate_integration::{client, Upstream};

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
async fn the_soaks_listener_update_brings_its_second_plugin_configuration() {
    let upstream = Upstream::start().await;
    let port = setup::free_port().expect("port");
    // No rate limit service: only the local rule is asked.
    let rls = "127.0.0.1:9".parse().expect("address");
    let clusters = setup::clusters(upstream.addr(), rls);
    let mut envoy = DynamicEnvoy::start(vec![FIRST.listener(port)], clusters, 2).await;
    let url = format!("http://127.0.0.1:{port}/local/item");
    assert_eq!(
        ask(&url, "before", FIRST.local_limit + 2).await,
        expected(FIRST.local_limit, FIRST.local_limit + 2, FIRST.body)
    );

    envoy.update_listeners(vec![SECOND.listener(port)]).await;
    envoy
        .expect_stat("listener_manager.lds.update_success", 2)
        .await;
    assert_eq!(
        ask(&url, "after", SECOND.local_limit + 2).await,
        expected(SECOND.local_limit, SECOND.local_limit + 2, SECOND.body)
    );
    assert_eq!(upstream.count_for("before"), FIRST.local_limit);
    assert_eq!(upstream.count_for("after"), SECOND.local_limit);
}
