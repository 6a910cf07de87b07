//! HTTP clients and concurrent bursts.

use futures::future::join_all;
use std::collections::HashMap;

/// A client that never goes through a proxy from the environment.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(256)
        .build()
        .expect("http client")
}

/// An h2c (prior knowledge) client, for gRPC-shaped requests.
pub fn grpc_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .http2_prior_knowledge()
        .build()
        .expect("h2c client")
}

/// What came back for one request.
#[derive(Debug, Clone)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// Headers, lower-case names.
    pub headers: HashMap<String, String>,
    /// Body as text.
    pub body: String,
}

impl Reply {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

/// Sends one GET with `headers`.
pub async fn get(client: &reqwest::Client, url: &str, headers: &[(&str, &str)]) -> Reply {
    let mut request = client.get(url);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let response = request
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into(),
            )
        })
        .collect();
    let body = response.text().await.unwrap_or_default();
    Reply {
        status,
        headers,
        body,
    }
}

/// Sends `n` GETs at once and returns every reply.
pub async fn burst(
    client: &reqwest::Client,
    url: &str,
    headers: &[(&str, &str)],
    n: usize,
) -> Vec<Reply> {
    join_all((0..n).map(|_| get(client, url, headers))).await
}

/// How many replies had each status.
pub fn statuses(replies: &[Reply]) -> HashMap<u16, usize> {
    let mut counts = HashMap::new();
    for r in replies {
        *counts.entry(r.status).or_default() += 1;
    }
    counts
}
