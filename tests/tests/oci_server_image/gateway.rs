//! The image run as Envoy Gateway runs the reference's: `command: ["/bin/ratelimit"]` (which
//! replaces the entrypoint, so the image's default arguments are dropped too) and only the
//! environment Envoy Gateway's rate limit Deployment sets (its
//! `internal/infrastructure/kubernetes/ratelimit/resource.go`): the configuration pushed
//! over xDS by a management server, counters in a real Redis.

use super::ads::{Management, Seen, Snapshot, TYPE_URL};
use super::{from_layout, tenant_request, uids, Stopper, SETUP};
use floodgate_integration::soak::redis::Redis;
use floodgate_integration::{client, paths, server};
use floodgate_server::proto::rls::rate_limit_response::Code;
use floodgate_server::proto::rls::rate_limit_service_client::RateLimitServiceClient;
use floodgate_server::proto::rls_conf::{
    RateLimitConfig, RateLimitDescriptor as ConfDescriptor, RateLimitPolicy, RateLimitUnit,
};
use prost::Message;
use std::os::unix::fs::MetadataExt;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

const WAIT: Duration = Duration::from_secs(30);

/// Domain `edge`: tenant `acme`, 2 a day.
fn pushed() -> Snapshot {
    let resource = RateLimitConfig {
        name: "edge".into(),
        domain: "edge".into(),
        descriptors: vec![ConfDescriptor {
            key: "tenant".into(),
            value: "acme".into(),
            rate_limit: Some(RateLimitPolicy {
                unit: RateLimitUnit::Day as i32,
                requests_per_unit: 2,
                ..Default::default()
            }),
            ..Default::default()
        }],
    };
    let any = prost_types::Any {
        type_url: TYPE_URL.into(),
        value: resource.encode_to_vec(),
    };
    Some(("v1".into(), vec![any]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_gateway_s_command_and_environment_start_it_and_it_limits() {
    let image = from_layout();
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("rootfs");
    std::fs::create_dir(&root).expect("mkdir rootfs");
    floodgate_integration::oci::unpack(&image.layer_tar, &root);
    let alias = std::fs::metadata(root.join("bin/ratelimit")).expect("/bin/ratelimit");
    let binary = std::fs::metadata(root.join("usr/local/bin/floodgate-server")).expect("binary");
    assert_eq!(alias.ino(), binary.ino(), "one file, two names");
    assert_eq!(alias.mode() & 0o777, 0o755);

    let redis = Redis::start().expect("redis-server");
    let redis_addr = redis.url().trim_start_matches("redis://").to_owned();
    let (_push, snapshot) = watch::channel::<Snapshot>(pushed());
    let (seen_tx, mut seen) = mpsc::unbounded_channel::<Seen>();
    let any = "127.0.0.1:0".parse().expect("address");
    let ads = Management::start(any, snapshot, seen_tx, Arc::default()).await;
    let xds_url = ads.addr.to_string();

    // What Envoy Gateway sets, minus its TLS files (the gRPC listener's and the xDS
    // client's TLS are tested in their own tests), plus the two ports: the test shares
    // the host's network, where 8081 and 8080 may be taken; 0 picks free ones.
    let env = [
        ("REDIS_SOCKET_TYPE", "tcp"),
        ("REDIS_URL", redis_addr.as_str()),
        ("RUNTIME_ROOT", "/data"),
        ("RUNTIME_SUBDIRECTORY", "ratelimit"),
        ("RUNTIME_IGNOREDOTFILES", "true"),
        ("RUNTIME_WATCH_ROOT", "false"),
        ("LOG_LEVEL", "info"),
        ("USE_STATSD", "false"),
        ("CONFIG_TYPE", "GRPC_XDS_SOTW"),
        ("CONFIG_GRPC_XDS_SERVER_URL", xds_url.as_str()),
        ("CONFIG_GRPC_XDS_NODE_ID", "envoy-ratelimit"),
        ("FORCE_START_WITHOUT_INITIAL_CONFIG", "true"),
        ("GRPC_PORT", "0"),
        ("PORT", "0"),
    ];
    let user = image.config["config"]["User"].as_str().expect("User");
    let log = dir.path().join("server.log");
    // Nothing from the test's environment reaches the server but PATH, which the
    // host's `chroot` is found by.
    let mut child = Command::new(paths::program("unshare", "apt-get install util-linux"))
        .args(["--mount", "--propagation", "private", "bash", "-c", SETUP])
        .arg(&root)
        .arg(user)
        .arg("/bin/ratelimit")
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("spawn unshare");
    let stop = Stopper(&mut child);
    let (grpc, http) = server::ready_addresses(stop.0, &log);
    let server_log = || std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(uids(stop.0.id()), "65532 65532 65532 65532");

    // Subscribed as Envoy Gateway's node, and the push ACKed.
    let ack = tokio::time::timeout(WAIT, async {
        let mut node = None;
        loop {
            let s = seen.recv().await.expect("the management server is gone");
            assert_eq!(s.token, None, "no additional header was set");
            node = node.or(s.request.node.clone());
            if s.request.response_nonce == "nonce-1" {
                return (node, s.request);
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no ACK within {WAIT:?}:\n{}", server_log()));
    assert_eq!(ack.0.expect("node").id, "envoy-ratelimit");
    assert_eq!(ack.1.version_info, "v1", "ACKed, not NACKed");
    assert!(ack.1.error_detail.is_none());

    let mut rls = RateLimitServiceClient::connect(format!("http://{grpc}"))
        .await
        .expect("connect to /bin/ratelimit");
    let mut codes = Vec::new();
    for _ in 0..3 {
        let answer = rls
            .should_rate_limit(tenant_request("acme"))
            .await
            .expect("ShouldRateLimit")
            .into_inner();
        codes.push(answer.overall_code);
    }
    let (ok, over) = (Code::Ok as i32, Code::OverLimit as i32);
    assert_eq!(
        codes,
        [ok, ok, over],
        "the pushed 2 a day\n{}",
        server_log()
    );

    // Envoy Gateway's readiness and startup probes.
    let probe = client()
        .get(format!("http://{http}/healthcheck"))
        .send()
        .await
        .expect("GET /healthcheck");
    assert_eq!(probe.status(), 200);
    ads.stop().await;
    drop(stop);
    drop(redis);
}
