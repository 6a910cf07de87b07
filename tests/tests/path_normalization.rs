//! Rules match the path Envoy hands the filter. Raw, `//api/login`, `/%61pi/login` or
//! `/x/../api/login` reach the same handler as `/api/login` in most applications but are
//! other strings, so a rule on `/api/login` (and a `source: path` bucket) would miss them.
//! Every example normalizes the path first; through a real Envoy with the examples'
//! settings, each variant is limited together with the others (a 3-per-client rule: the
//! 4th request of any mix is 429), and without them the same mix gets through.

use floodgate_integration::examples;
use floodgate_integration::manifests::{self, of_kind};
use floodgate_integration::raw_http::{self, RawResponse};
use floodgate_integration::{configs, Envoy, Upstream};
use serde_json::{json, Value};
use std::net::{IpAddr, Ipv4Addr};

/// The fields of an HttpConnectionManager that normalize the path, as every example
/// sets them (values as JSON).
const NORMALIZATION: [(&str, &str); 3] = [
    ("normalize_path", "true"),
    ("merge_slashes", "true"),
    (
        "path_with_escaped_slashes_action",
        "\"UNESCAPE_AND_REDIRECT\"",
    ),
];

/// One path, written in every way Envoy's normalization folds into `/api/login`.
const VARIANTS: [&str; 7] = [
    "/api/login",
    "//api/login",
    "/api//login",
    "/%61pi/login",
    "/api/%6cogin",
    "/api/./login",
    "/x/../api/login",
];

/// Every HttpConnectionManager config in `value`.
fn connection_managers(value: &Value) -> Vec<&Value> {
    let mut found = Vec::new();
    fn visit<'a>(v: &'a Value, found: &mut Vec<&'a Value>) {
        match v {
            Value::Object(map) => {
                if map.get("name") == Some(&json!("envoy.filters.network.http_connection_manager"))
                {
                    found.push(&v["typed_config"]);
                }
                map.values().for_each(|c| visit(c, found));
            }
            Value::Array(items) => items.iter().for_each(|c| visit(c, found)),
            _ => {}
        }
    }
    visit(value, &mut found);
    found
}

fn normalizes(manager: &Value) -> bool {
    NORMALIZATION
        .iter()
        .all(|(field, value)| manager[field] == serde_json::from_str::<Value>(value).expect("JSON"))
}

#[test]
fn every_plain_envoy_example_normalizes_the_path() {
    let files = examples::files();
    assert!(!files.is_empty());
    for file in files {
        let example = examples::load(&file);
        let managers = connection_managers(&example);
        assert!(!managers.is_empty(), "{}", file.display());
        for manager in managers {
            assert!(
                normalizes(manager),
                "{}: listener {} does not set {NORMALIZATION:?}",
                file.display(),
                manager["stat_prefix"]
            );
        }
    }
}

/// Under Istio, an EnvoyFilter merges the same settings into the inbound connection
/// manager of every pod a WasmPlugin runs on.
#[test]
fn every_istio_plugin_runs_behind_a_normalizing_connection_manager() {
    let documents = manifests::read("examples/istio");
    let plugins = of_kind(&documents, "WasmPlugin");
    assert!(!plugins.is_empty());
    for plugin in plugins {
        let namespace = &plugin.value["metadata"]["namespace"];
        let labels = manifests::labels(&plugin.value["spec"]["selector"]["matchLabels"]);
        let covering = of_kind(&documents, "EnvoyFilter")
            .into_iter()
            .any(|filter| {
                let selector =
                    manifests::labels(&filter.value["spec"]["workloadSelector"]["labels"]);
                &filter.value["metadata"]["namespace"] == namespace
                    && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
                    && filter.value["spec"]["configPatches"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|patch| {
                            patch["applyTo"] == "NETWORK_FILTER"
                                && patch["match"]["context"] == "SIDECAR_INBOUND"
                                && patch["match"]["listener"]["filterChain"]["filter"]["name"]
                                    == "envoy.filters.network.http_connection_manager"
                                && patch["patch"]["operation"] == "MERGE"
                                && normalizes(&patch["patch"]["value"]["typed_config"])
                        })
            });
        assert!(
            covering,
            "{}: no EnvoyFilter normalizes the path for its pods",
            plugin.id()
        );
    }
}

/// Envoy with the 3-per-client `login` rule, keyed by client address and path, with the
/// examples' normalization or without it.
async fn envoy(normalize: bool) -> (Envoy, Upstream) {
    let upstream = Upstream::start().await;
    let plugin = json!({"rules": [{
        "name": "login",
        "match": {"path_prefix": "/api/login"},
        "descriptors": [
            {"key": "client", "source": "remote_address"},
            {"key": "path", "source": "path"}
        ],
        "local": {"capacity": 3, "refill_per_second": 0.001}
    }]});
    let mut listener =
        configs::listener("ingress", vec![configs::floodgate_filter(&plugin)], "app");
    if normalize {
        let example = examples::load(&examples::files()[0]);
        let from = connection_managers(&example)[0];
        let manager = &mut listener["filter_chains"][0]["filters"][0]["typed_config"];
        for (field, _) in NORMALIZATION {
            manager[field] = from[field].clone();
        }
    }
    let bootstrap = configs::bootstrap(
        vec![listener],
        vec![configs::cluster("app", upstream.addr(), false)],
    );
    (Envoy::start(&bootstrap, 2).await, upstream)
}

/// The address of client number `n`, one per round so that each round has its buckets.
fn client(n: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, 10 + n as u8))
}

/// Round `n`: client `n` sends four variants, starting at the `n`th, so that over the
/// rounds every variant comes first, second, third and fourth. Returns the statuses.
async fn round(envoy: &Envoy, n: usize) -> Vec<(&'static str, u16)> {
    let mut statuses = Vec::new();
    for i in 0..4 {
        let path = VARIANTS[(n + i) % VARIANTS.len()];
        let reply: RawResponse =
            raw_http::get_from(client(n), envoy.listener("ingress"), path, &[]).await;
        statuses.push((path, reply.status()));
    }
    statuses
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_spelling_of_a_path_is_limited_together() {
    let (envoy, upstream) = envoy(true).await;
    for n in 0..VARIANTS.len() {
        let statuses = round(&envoy, n).await;
        let codes: Vec<u16> = statuses.iter().map(|(_, s)| *s).collect();
        assert_eq!(codes, [200, 200, 200, 429], "round {n}: {statuses:?}");
    }
    // The upstream saw the normalized path only, three times per client.
    let paths = upstream.paths();
    assert_eq!(paths.len(), 3 * VARIANTS.len());
    assert!(paths.iter().all(|p| p == "/api/login"), "{paths:?}");

    // An escaped slash is redirected to its unescaped form before any filter runs: it
    // costs nothing until the client follows the redirect.
    let escaped =
        raw_http::get_from(client(40), envoy.listener("ingress"), "/api%2Flogin", &[]).await;
    assert!(matches!(escaped.status(), 301..=308), "{}", escaped.head());
    assert_eq!(escaped.header("location").as_deref(), Some("/api/login"));
    for expected in [200, 200, 200, 429] {
        let reply =
            raw_http::get_from(client(40), envoy.listener("ingress"), "/api/login", &[]).await;
        assert_eq!(reply.status(), expected);
    }

    // What Envoy does not fold (docs/configuration.md, "Paths"): case, and a trailing slash, which a
    // `source: path` descriptor keeps as another value.
    let upper = raw_http::get_from(client(0), envoy.listener("ingress"), "/API/login", &[]).await;
    assert_eq!(upper.status(), 200, "the prefix is case-sensitive");
    let trailing =
        raw_http::get_from(client(0), envoy.listener("ingress"), "/api/login/", &[]).await;
    assert_eq!(trailing.status(), 200, "its own `source: path` bucket");
}

/// The defect the examples' settings close: without them, the same mix gets through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_normalization_the_spellings_dodge_the_rule() {
    let (envoy, _upstream) = envoy(false).await;
    let mut admitted = 0;
    for n in 0..VARIANTS.len() {
        admitted += round(&envoy, n)
            .await
            .iter()
            .filter(|(_, status)| *status == 200)
            .count();
    }
    assert!(
        admitted > 3 * VARIANTS.len(),
        "{admitted} of {} admitted with the raw path",
        4 * VARIANTS.len()
    );
}
