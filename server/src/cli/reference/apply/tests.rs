use super::super::{migration_table, Status, SETTINGS};
use super::*;
use crate::cli::duration::go_duration_ms;
use clap::Parser;
use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};

fn args() -> Args {
    Args::try_parse_from(["floodgate-server"]).unwrap()
}

fn env_of<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    let map: HashMap<&str, &str> = vars.iter().copied().collect();
    move |name| map.get(name).map(|v| (*v).to_owned())
}

fn nothing_given(_: &str) -> bool {
    false
}

#[test]
fn every_supported_variable_is_read_by_the_code_that_applies_it() {
    // Each scenario's variables are offered to everything that reads the environment
    // (logging, the flags' fill-in, the Redis and TLS resolvers); the names they ask for
    // are recorded. `apply`'s loop over the accepted and refused ones is not what is
    // checked: it skips supported names, so only dedicated code can ask for them.
    let scenarios: [&[(&str, &str)]; 4] = [
        &[
            ("LOG_LEVEL", "debug"),
            ("LOG_FORMAT", "json"),
            ("GRPC_HOST", "127.0.0.1"),
            ("GRPC_PORT", "9081"),
            ("HOST", "127.0.0.1"),
            ("PORT", "9080"),
            ("RUNTIME_ROOT", "/data"),
            ("RUNTIME_SUBDIRECTORY", "ratelimit"),
            ("RUNTIME_APPDIRECTORY", "config"),
            ("REDIS_URL", "master,sentinel:26379"),
            ("REDIS_TYPE", "SENTINEL"),
            ("REDIS_TLS", "true"),
            ("REDIS_AUTH", "secret"),
            ("REDIS_SENTINEL_AUTH", "secret"),
            ("REDIS_TLS_CACERT", "/ca.pem"),
            ("REDIS_TLS_CLIENT_CERT", "/cert.pem"),
            ("REDIS_TLS_CLIENT_KEY", "/key.pem"),
            ("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", "true"),
            ("REDIS_TIMEOUT", "250ms"),
            ("CACHE_KEY_PREFIX", "edge:"),
            ("GRPC_SERVER_USE_TLS", "true"),
            ("GRPC_SERVER_TLS_CERT", "/cert.pem"),
            ("GRPC_SERVER_TLS_KEY", "/key.pem"),
            ("GRPC_CLIENT_TLS_CACERT", "/ca.pem"),
            ("GRPC_CLIENT_TLS_SAN", "envoy"),
            ("NEAR_LIMIT_RATIO", "0.5"),
            ("SHADOW_MODE", "true"),
            ("MERGE_DOMAIN_CONFIG", "true"),
            ("RESPONSE_DYNAMIC_METADATA", "true"),
            ("LIMIT_RESPONSE_HEADERS_ENABLED", "true"),
            ("LIMIT_LIMIT_HEADER", "L"),
            ("LIMIT_REMAINING_HEADER", "R"),
            ("LIMIT_RESET_HEADER", "T"),
            ("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "false"),
            ("USE_PROMETHEUS", "true"),
            ("PROMETHEUS_ADDR", ":19001"),
            ("PROMETHEUS_PATH", "/stats/prometheus"),
            ("USE_STATSD", "true"),
            ("STATSD_HOST", "statsd"),
            ("STATSD_PORT", "9125"),
            ("STATS_FLUSH_INTERVAL", "1s"),
        ],
        &[("REDIS_URL", "redis:6379"), ("REDIS_TYPE", "SINGLE")],
        &[
            ("CONFIG_TYPE", "GRPC_XDS_SOTW"),
            ("CONFIG_GRPC_XDS_SERVER_URL", "xds:18000"),
            ("CONFIG_GRPC_XDS_SERVER_USE_TLS", "true"),
            ("CONFIG_GRPC_XDS_NODE_ID", "node"),
            ("CONFIG_GRPC_XDS_NODE_METADATA", "k=v"),
            ("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "k=v"),
            ("CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "/cert.pem"),
            ("CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "/key.pem"),
            ("CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "/ca.pem"),
            ("CONFIG_GRPC_XDS_SERVER_TLS_SAN", "xds"),
            ("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", "1048576"),
        ],
        &[],
    ];
    let asked = RefCell::new(BTreeSet::new());
    for vars in scenarios {
        let env = env_of(vars);
        let record = |name: &str| {
            asked.borrow_mut().insert(name.to_owned());
            env(name)
        };
        let _ = logging(&record);
        let mut a = args();
        let _ = apply(&mut a, &nothing_given, &record);
        let _ = a
            .redis
            .resolve(a.counting, &record, &|_| Ok(b"pem".to_vec()));
        let _ = a.tls.resolve(&record);
    }
    let asked = asked.into_inner();
    let listed: BTreeSet<String> = SETTINGS.iter().map(|s| s.name.to_owned()).collect();
    for setting in SETTINGS.iter().filter(|s| s.status == Status::Supported) {
        assert!(
            asked.contains(setting.name),
            "{} is listed as supported but nothing reads it",
            setting.name
        );
    }
    let unlisted: Vec<&String> = asked
        .iter()
        .filter(|n| !listed.contains(*n) && *n != "RUST_LOG")
        .collect();
    assert!(
        unlisted.is_empty(),
        "read but not in the list: {unlisted:?}"
    );
}

#[test]
fn the_list_has_each_reference_setting_once() {
    let mut seen = BTreeSet::new();
    for s in SETTINGS {
        assert!(seen.insert(s.name), "{} twice", s.name);
    }
    // The variables the task names, at least.
    for name in [
        "GRPC_HOST",
        "GRPC_PORT",
        "HOST",
        "PORT",
        "LOG_LEVEL",
        "LOG_FORMAT",
        "RUNTIME_ROOT",
        "RUNTIME_SUBDIRECTORY",
        "RUNTIME_APPDIRECTORY",
        "RUNTIME_WATCH_ROOT",
        "RUNTIME_IGNOREDOTFILES",
        "MERGE_DOMAIN_CONFIG",
        "BACKEND_TYPE",
        "REDIS_SOCKET_TYPE",
        "REDIS_TYPE",
        "REDIS_URL",
        "REDIS_AUTH",
        "REDIS_TLS",
        "REDIS_POOL_SIZE",
        "REDIS_TIMEOUT",
        "LOCAL_CACHE_SIZE_IN_BYTES",
        "NEAR_LIMIT_RATIO",
        "CACHE_KEY_PREFIX",
        "SHADOW_MODE",
        "QUOTA_MODE",
        "LIMIT_RESPONSE_HEADERS_ENABLED",
        "RESPONSE_DYNAMIC_METADATA",
        "USE_PROMETHEUS",
        "PROMETHEUS_ADDR",
        "PROMETHEUS_PATH",
        "USE_STATSD",
        "STATSD_HOST",
        "STATSD_PORT",
        "CONFIG_TYPE",
    ] {
        assert!(seen.contains(name), "{name} missing");
    }
}

#[test]
fn the_migration_page_carries_the_generated_table() {
    // Regenerate with FLOODGATE_WRITE_DOCS=1 after changing the list.
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/server/migrating.md");
    let page = std::fs::read_to_string(&path).unwrap();
    let (begin, end) = (
        "<!-- settings table: generated from server/src/cli/reference.rs -->\n",
        "<!-- end of settings table -->",
    );
    let start = page.find(begin).expect("begin marker") + begin.len();
    let stop = page.find(end).expect("end marker");
    let table = migration_table();
    if std::env::var_os("FLOODGATE_WRITE_DOCS").is_some() {
        let updated = format!("{}{table}{}", &page[..start], &page[stop..]);
        std::fs::write(&path, updated).unwrap();
        return;
    }
    assert_eq!(
        &page[start..stop],
        table,
        "docs/server/migrating.md's table is stale: run FLOODGATE_WRITE_DOCS=1 cargo test -p floodgate-server the_migration_page"
    );
}

#[test]
fn variables_fill_the_flags_and_a_flag_wins() {
    let env = env_of(&[
        ("GRPC_PORT", "9081"),
        ("HOST", "127.0.0.1"),
        ("RUNTIME_ROOT", "/data"),
        ("RUNTIME_SUBDIRECTORY", "ratelimit"),
        ("SHADOW_MODE", "true"),
        ("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "false"),
        ("REDIS_TIMEOUT", "1m30s"),
        ("CACHE_KEY_PREFIX", "edge:"),
        ("LIMIT_RESET_HEADER", "X-Reset"),
    ]);
    let mut a = args();
    let notes = apply(&mut a, &nothing_given, &env).unwrap();
    assert!(notes.is_empty(), "{notes:?}");
    // Either of a pair alone takes the reference's default for the other.
    assert_eq!(a.grpc_addr, "0.0.0.0:9081".parse().unwrap());
    assert_eq!(a.http_addr, "127.0.0.1:8080".parse().unwrap());
    assert_eq!(a.config, PathBuf::from("/data/ratelimit/config"));
    assert!(a.shadow_mode);
    assert_eq!(a.counting, Counting::PerDescriptor);
    assert_eq!(a.redis.redis_timeout_ms, 90_000);
    assert_eq!(a.redis.redis_key_prefix, "edge:");
    assert_eq!(a.reset_header, "X-Reset");

    let mut b = Args::try_parse_from([
        "floodgate-server",
        "--grpc-addr",
        "127.0.0.1:1",
        "--config",
        "/etc/floodgate",
        "--counting",
        "all-or-nothing",
    ])
    .unwrap();
    let given = |id: &str| matches!(id, "grpc_addr" | "config" | "counting");
    apply(&mut b, &given, &env).unwrap();
    assert_eq!(b.grpc_addr, "127.0.0.1:1".parse().unwrap());
    assert_eq!(b.config, PathBuf::from("/etc/floodgate"));
    assert_eq!(b.counting, Counting::AllOrNothing);
    assert!(b.shadow_mode, "no --shadow-mode flag: the variable applies");
}

#[test]
fn nothing_set_changes_nothing() {
    let mut a = args();
    let before = format!("{a:?}");
    assert!(apply(&mut a, &nothing_given, &env_of(&[]))
        .unwrap()
        .is_empty());
    assert_eq!(format!("{a:?}"), before);
}

#[test]
fn features_we_lack_refuse_to_start_saying_what_to_use() {
    let refused =
        |vars: &[(&str, &str)]| apply(&mut args(), &nothing_given, &env_of(vars)).unwrap_err();
    assert_eq!(
        refused(&[("BACKEND_TYPE", "memcache")]),
        "BACKEND_TYPE=\"memcache\" is not supported: the store is memory, or Redis with `REDIS_URL` (no memcache)"
    );
    assert!(refused(&[("MEMCACHE_HOST_PORT", "m:11211")])
        .starts_with("MEMCACHE_HOST_PORT is set: no memcache store"));
    assert!(refused(&[("REDIS_PERSECOND", "true")]).contains("one store for every unit"));
    // A secret is never echoed.
    let e = refused(&[("REDIS_PERSECOND_AUTH", "hunter2")]);
    assert!(!e.contains("hunter2"), "{e}");
    assert!(refused(&[("CONFIG_TYPE", "GRPC_XDS_DELTA")])
        .starts_with("CONFIG_TYPE=\"GRPC_XDS_DELTA\" is not supported"));
    assert!(refused(&[("REDIS_SOCKET_TYPE", "unix")]).contains("Redis over TCP only"));
    // Every refusal at once, links as plain text.
    let both = refused(&[("QUOTA_MODE", "true"), ("GRPC_UDS", "/tmp/s")]);
    assert!(
        both.contains("GRPC_UDS is set") && both.contains("QUOTA_MODE=\"true\""),
        "{both}"
    );
    assert!(
        both.contains("see the reference's other keys)") && !both.contains("]("),
        "{both}"
    );
    // The values that mean what we do are fine, in any case.
    let mut a = args();
    let ok = [
        ("BACKEND_TYPE", "REDIS"),
        ("CONFIG_TYPE", "file"),
        ("REDIS_SOCKET_TYPE", "tcp"),
        ("REDIS_PERSECOND", "false"),
        ("QUOTA_MODE", "0"),
        ("GRPC_UDS", ""),
    ];
    assert!(apply(&mut a, &nothing_given, &env_of(&ok))
        .unwrap()
        .is_empty());
}

#[test]
fn settings_that_need_nothing_are_noted_once_each() {
    let notes = apply(
        &mut args(),
        &nothing_given,
        &env_of(&[
            ("REDIS_POOL_SIZE", "20"),
            ("RUNTIME_WATCH_ROOT", "false"),
            ("DEBUG_PORT", "6070"),
        ]),
    )
    .unwrap();
    assert_eq!(notes.len(), 3, "{notes:?}");
    assert!(notes
        .iter()
        .any(|n| n.starts_with("REDIS_POOL_SIZE is set: ignored (one multiplexed")));
    assert!(notes.iter().all(|n| !n.contains("](")), "{notes:?}");
}

#[test]
fn bad_values_name_their_variable() {
    let bad =
        |vars: &[(&str, &str)]| apply(&mut args(), &nothing_given, &env_of(vars)).unwrap_err();
    assert_eq!(
        bad(&[("GRPC_PORT", "http")]),
        "GRPC_PORT \"http\": expected a port number"
    );
    assert_eq!(
        bad(&[("HOST", "localhost")]),
        "HOST \"localhost\": expected an IP address"
    );
    assert_eq!(
        bad(&[("SHADOW_MODE", "yes")]),
        "SHADOW_MODE \"yes\": expected true or false"
    );
    assert!(bad(&[("NEAR_LIMIT_RATIO", "2")]).starts_with("NEAR_LIMIT_RATIO \"2\""));
    assert!(bad(&[("REDIS_TIMEOUT", "10")]).starts_with("REDIS_TIMEOUT \"10\""));
}

#[test]
fn go_durations() {
    assert_eq!(go_duration_ms("10s"), Some(10_000));
    assert_eq!(go_duration_ms("250ms"), Some(250));
    assert_eq!(go_duration_ms("1m30s"), Some(90_000));
    assert_eq!(go_duration_ms("1.5s"), Some(1_500));
    assert_eq!(go_duration_ms("1h"), Some(3_600_000));
    assert_eq!(go_duration_ms("1500us"), Some(2));
    assert_eq!(go_duration_ms("0s"), None);
    assert_eq!(go_duration_ms("10"), None);
    assert_eq!(go_duration_ms("s"), None);
    assert_eq!(go_duration_ms(""), None);
}

#[test]
fn log_level_and_format() {
    let l = |vars: &[(&str, &str)]| logging(&env_of(vars));
    assert_eq!(
        l(&[]).unwrap(),
        Logging {
            filter: "info".into(),
            json: false
        }
    );
    assert_eq!(l(&[("LOG_LEVEL", "WARN")]).unwrap().filter, "warn");
    assert_eq!(l(&[("LOG_LEVEL", "fatal")]).unwrap().filter, "error");
    assert_eq!(
        l(&[("LOG_LEVEL", "warn"), ("RUST_LOG", "debug")])
            .unwrap()
            .filter,
        "debug"
    );
    assert!(l(&[("LOG_FORMAT", "json")]).unwrap().json);
    assert!(!l(&[("LOG_FORMAT", "TEXT")]).unwrap().json);
    assert_eq!(
        l(&[("LOG_FORMAT", "xml")]).unwrap_err(),
        "LOG_FORMAT \"xml\": expected text or json"
    );
    assert!(l(&[("LOG_LEVEL", "loud")]).is_err());
}

mod listeners;
