//! Every setting of the reference service (envoyproxy/ratelimit reads them from its
//! environment, `src/settings/settings.go`), and what floodgate-server does with each: one
//! list, from which `docs/server/migrating.md`'s table is generated and against which a
//! test checks that every supported variable is read.
//!
//! A deployment of the reference moves over by swapping the image: a **supported**
//! variable keeps its meaning (a flag given on the command line wins over it); one that
//! needs nothing here is **accepted**, ignored and logged once; one that names a feature
//! floodgate-server does not have is **refused** at start-up, with a message that says
//! what to use instead, rather than silently changing what is limited.

mod apply;

pub use apply::{apply, logging, Logging};

/// What floodgate-server does with a reference setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Read, with the reference's meaning, by the code that needs it.
    Supported,
    /// Nothing to do here: accepted whatever its value, logged once when set.
    Accepted,
    /// Set to anything but these values (compared without case; unset and empty are
    /// always fine), the server refuses to start.
    Refused(&'static [&'static str]),
}

/// One setting of the reference.
#[derive(Debug, Clone, Copy)]
pub struct Setting {
    /// The environment variable.
    pub name: &'static str,
    /// Its default in the reference (empty: none).
    pub default: &'static str,
    /// What floodgate-server does with it.
    pub status: Status,
    /// What does the same here, or why nothing is needed (markdown; also the log line or
    /// the refusal's advice).
    pub here: &'static str,
}

/// Values a reference boolean takes when off (Go's `strconv.ParseBool`, without case).
const OFF: &[&str] = &["false", "f", "0"];

const fn s(name: &'static str, default: &'static str, here: &'static str) -> Setting {
    Setting {
        name,
        default,
        status: Status::Supported,
        here,
    }
}

const fn a(name: &'static str, default: &'static str, here: &'static str) -> Setting {
    Setting {
        name,
        default,
        status: Status::Accepted,
        here,
    }
}

const fn r(
    name: &'static str,
    default: &'static str,
    allowed: &'static [&'static str],
    here: &'static str,
) -> Setting {
    Setting {
        name,
        default,
        status: Status::Refused(allowed),
        here,
    }
}

/// Every setting of the reference, in the order of its `settings.go`.
pub const SETTINGS: &[Setting] = &[
    s("HOST", "0.0.0.0", "with `PORT`: `--http-addr HOST:PORT` (`/healthz`, also at the reference's `/healthcheck`, and `/metrics`; no `/json`: speak gRPC); neither set while another of the reference's variables is: `0.0.0.0:8080`, its default"),
    s("PORT", "8080", "with `HOST`, as above; either alone takes the reference's default for the other"),
    a("DEBUG_HOST", "0.0.0.0", "no debug port: metrics are on `--http-addr` `/metrics`"),
    a("DEBUG_PORT", "6070", "no debug port (pprof, `/stats`)"),
    r("GRPC_UDS", "", &[], "gRPC over a Unix socket is not supported: listen on TCP with `GRPC_HOST`/`GRPC_PORT` or `--grpc-addr`"),
    s("GRPC_HOST", "0.0.0.0", "with `GRPC_PORT`: `--grpc-addr HOST:PORT`; neither set while another of the reference's variables is: `0.0.0.0:8081`, its default"),
    s("GRPC_PORT", "8081", "with `GRPC_HOST`, as above; either alone takes the reference's default for the other"),
    a("GRPC_MAX_CONNECTION_AGE", "24h", "connections are not aged out; `--idle-timeout-ms` closes idle ones, `--max-connections` bounds them"),
    a("GRPC_MAX_CONNECTION_AGE_GRACE", "1h", "as `GRPC_MAX_CONNECTION_AGE`"),
    s("GRPC_SERVER_USE_TLS", "false", "serve gRPC over TLS (`--grpc-tls-cert-file`), see [TLS](security.md#tls-and-mutual-tls-on-the-grpc-port)"),
    s("GRPC_SERVER_TLS_CERT", "", "`--grpc-tls-cert-file` (reloaded when it changes)"),
    s("GRPC_SERVER_TLS_KEY", "", "`--grpc-tls-key-file`"),
    s("GRPC_CLIENT_TLS_CACERT", "", "`--grpc-tls-client-ca-file`: mutual TLS"),
    s("GRPC_CLIENT_TLS_SAN", "", "`--grpc-tls-client-identities` (a comma-separated list here, DNS names or URIs)"),
    s("LOG_LEVEL", "WARN", "the log level when `RUST_LOG` is unset (`trace`, `debug`, `info`, `warn`, `error`; `panic`, `fatal`: `error`)"),
    s("LOG_FORMAT", "text", "`json`: one JSON object per line; `text` the default"),
    s("CONFIG_TYPE", "FILE", "`FILE`: the files of `--config` (or `RUNTIME_*`); `GRPC_XDS_SOTW`: an xDS management server, `--config-xds` (see [xDS](sources.md#xds)); anything else refuses to start"),
    a("FORCE_START_WITHOUT_INITIAL_CONFIG", "false", "a file configuration is read before the listeners bind (an invalid one refuses to start); with xDS, serving always starts at once, every domain unknown (answered `OK`) until the first push"),
    s("CONFIG_GRPC_XDS_NODE_ID", "default", "`--config-xds-node-id`"),
    s("CONFIG_GRPC_XDS_NODE_METADATA", "", "`--config-xds-node-metadata` (`k=v,k=v`; `k:v` too), string values"),
    s("CONFIG_GRPC_XDS_SERVER_URL", "localhost:18000", "with `CONFIG_TYPE=GRPC_XDS_SOTW`: `--config-xds http://HOST:PORT` (`https://` with `CONFIG_GRPC_XDS_SERVER_USE_TLS`)"),
    a("CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", "3s", "the reference's wait between retries of one gRPC call; here every reconnection, the first connection too, waits as `XDS_CLIENT_BACKOFF_*` say"),
    s("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "", "`--config-xds-headers` (`k=v,k=v`; `k:v` too): gRPC metadata on the stream"),
    s("CONFIG_GRPC_XDS_SERVER_USE_TLS", "false", "`https://` in `--config-xds`"),
    s("CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "", "`--config-xds-cert`, with `--config-xds-key`: a client certificate for the management server"),
    s("CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "", "`--config-xds-key`"),
    s("CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "", "`--config-xds-ca` (unset: the system's roots)"),
    s("CONFIG_GRPC_XDS_SERVER_TLS_SAN", "", "`--config-xds-san`: the name the management server's certificate must carry, when not the URL's host"),
    s("XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "10s", "`--config-xds-backoff-initial`: the first wait after the stream ended or could not be opened (a Go duration), doubled after each failure, back to it once a response arrived"),
    s("XDS_CLIENT_BACKOFF_MAX_INTERVAL", "60s", "`--config-xds-backoff-max`: the longest wait (not below the initial one)"),
    s("XDS_CLIENT_BACKOFF_RANDOM_FACTOR", "0.5", "`--config-xds-backoff-random-factor`: each wait drawn within this fraction of it either side (0 to 1)"),
    s("XDS_CLIENT_BACKOFF_JITTER", "true", "`--config-xds-backoff-jitter`: `false` makes the waits exact"),
    s("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", "", "`--config-xds-max-message-bytes` (default 4 MiB)"),
    r("USE_DOG_STATSD", "false", OFF, "no DogStatsD sink: scrape `/metrics`"),
    a("USE_DOG_STATSD_MOGRIFIERS", "", "no DogStatsD sink"),
    s("USE_STATSD", "true", "`true`: `--statsd-addr STATSD_HOST:STATSD_PORT`, the reference's per-limit counters pushed in its statsd names (see [Metrics](metrics.md#the-references-series)); unset: off"),
    s("STATSD_HOST", "localhost", "with `USE_STATSD=true`, as above"),
    s("STATSD_PORT", "8125", "with `USE_STATSD=true`, as above"),
    a("EXTRA_TAGS", "", "statsd tags: no statsd sink"),
    s("STATS_FLUSH_INTERVAL", "10s", "`--statsd-flush-ms` (a Go duration)"),
    a("DISABLE_STATS", "false", "`/metrics` is always served; it costs nothing unless scraped"),
    s("USE_PROMETHEUS", "false", "`--reference-stats`: `/metrics` also carries the reference's per-limit series, its names and labels (see [Metrics](metrics.md#the-references-series)); ours are always there"),
    s("PROMETHEUS_ADDR", ":9090", "with `USE_PROMETHEUS=true`: `--metrics-addr ADDR`, a listener of its own serving the metrics (`:PORT` is every interface); `/metrics` on `--http-addr` serves them too"),
    s("PROMETHEUS_PATH", "/metrics", "with `USE_PROMETHEUS=true`: `--metrics-path`, the path on `--metrics-addr`"),
    a("PROMETHEUS_MAPPER_YAML", "", "no statsd-to-Prometheus mapping: the series are named at the source"),
    a("PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", "false", "no response-time histogram"),
    s("RUNTIME_ROOT", "/srv/runtime_data/current", "with `RUNTIME_SUBDIRECTORY` and `RUNTIME_APPDIRECTORY`: `--config ROOT/SUBDIRECTORY/APPDIRECTORY` when no `--config` is given, see [Layouts](configuration.md#layouts-and-reloading)"),
    s("RUNTIME_SUBDIRECTORY", "", "as `RUNTIME_ROOT`"),
    s("RUNTIME_APPDIRECTORY", "config", "as `RUNTIME_ROOT`"),
    a("RUNTIME_IGNOREDOTFILES", "false", "always on: hidden entries are skipped (so a ConfigMap's `..data` is never loaded twice)"),
    a("RUNTIME_WATCH_ROOT", "true", "the path is polled every `--watch-interval-ms`, which sees a root symlink swap and file changes alike"),
    a("EXPIRATION_JITTER_MAX_SECONDS", "300", "keys expire exactly when their state stops mattering, per counter"),
    a("LOCAL_CACHE_SIZE_IN_BYTES", "0", "no server-side over-limit cache: the filter's own (`rls.cache_over_limit`) avoids the call altogether"),
    s("NEAR_LIMIT_RATIO", "0.8", "`--near-limit-ratio`, counted in `floodgate_near_limit_total`"),
    s("CACHE_KEY_PREFIX", "", "`--redis-key-prefix`: put before every key (`PREFIXfg:v2:…`), so deployments sharing one Redis count apart; no space, `{` or `}`"),
    r("BACKEND_TYPE", "redis", &["redis"], "the store is memory, or Redis with `REDIS_URL` (no memcache)"),
    s("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "false", "set: `true` is `--counting all-or-nothing`, `false` `--counting per-descriptor`; unset: all-or-nothing (a rejected request consumes nothing)"),
    s("LIMIT_RESPONSE_HEADERS_ENABLED", "false", "`--limit-response-headers`"),
    s("LIMIT_LIMIT_HEADER", "RateLimit-Limit", "`--limit-header`"),
    s("LIMIT_REMAINING_HEADER", "RateLimit-Remaining", "`--remaining-header`"),
    s("LIMIT_RESET_HEADER", "RateLimit-Reset", "`--reset-header`"),
    s("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "false", "`--healthy-once-configured`: with xDS, `/healthz` answers 503 until the first push is in force; a file configuration always is before the listeners bind"),
    r("REDIS_SOCKET_TYPE", "unix", &["tcp"], "Redis over TCP only (`REDIS_SOCKET_TYPE=tcp`, `REDIS_URL=HOST:PORT`), to Redis itself rather than through twemproxy's Unix socket"),
    s("REDIS_TYPE", "SINGLE", "`SINGLE`, `CLUSTER` or `SENTINEL` with `REDIS_URL`, when no `--redis-*` target flag is given"),
    s("REDIS_URL", "/var/run/nutcracker/ratelimit.sock", "`--redis-url` / `--redis-cluster` / `--redis-sentinel` (`HOST:PORT`, a list, or `MASTER,HOST:PORT,…`)"),
    a("REDIS_POOL_SIZE", "10", "one multiplexed, pipelined connection per node; `--redis-max-in-flight` bounds calls"),
    s("REDIS_AUTH", "", "the data nodes' password (`password` or `user:password`); or `--redis-password-file`"),
    s("REDIS_TLS", "false", "`rediss://`"),
    s("REDIS_TLS_CLIENT_CERT", "", "`--redis-tls-cert-file`"),
    s("REDIS_TLS_CLIENT_KEY", "", "`--redis-tls-key-file`"),
    s("REDIS_TLS_CACERT", "", "`--redis-tls-ca-file`"),
    s("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", "false", "`--redis-tls-skip-hostname-verification`"),
    a("REDIS_PIPELINE_WINDOW", "0", "concurrent calls are pipelined on the shared connection as they come"),
    a("REDIS_PIPELINE_LIMIT", "0", "as `REDIS_PIPELINE_WINDOW`"),
    a("REDIS_CLUSTER_PIPELINE_PARALLELISM", "1", "as `REDIS_PIPELINE_WINDOW`"),
    r("REDIS_PERSECOND", "false", OFF, "one store for every unit: per-second counters are as cheap as any (one script call per request, exact TTLs)"),
    r("REDIS_PERSECOND_SOCKET_TYPE", "unix", &[], "no second Redis for per-second limits (see `REDIS_PERSECOND`)"),
    r("REDIS_PERSECOND_TYPE", "SINGLE", &[], "as `REDIS_PERSECOND_SOCKET_TYPE`"),
    r("REDIS_PERSECOND_URL", "/var/run/nutcracker/ratelimitpersecond.sock", &[], "as `REDIS_PERSECOND_SOCKET_TYPE`"),
    r("REDIS_PERSECOND_POOL_SIZE", "10", &[], "as `REDIS_PERSECOND_SOCKET_TYPE`"),
    r("REDIS_PERSECOND_AUTH", "", &[], "as `REDIS_PERSECOND_SOCKET_TYPE`"),
    r("REDIS_PERSECOND_TLS", "false", OFF, "as `REDIS_PERSECOND_SOCKET_TYPE`"),
    s("REDIS_SENTINEL_AUTH", "", "the sentinels' own password; or `--redis-sentinel-password-file`"),
    r("REDIS_PERSECOND_SENTINEL_AUTH", "", &[], "as `REDIS_PERSECOND_SOCKET_TYPE`"),
    r("REDIS_PERSECOND_PIPELINE_WINDOW", "0", &[], "as `REDIS_PERSECOND_SOCKET_TYPE`"),
    r("REDIS_PERSECOND_PIPELINE_LIMIT", "0", &[], "as `REDIS_PERSECOND_SOCKET_TYPE`"),
    r("REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM", "1", &[], "as `REDIS_PERSECOND_SOCKET_TYPE`"),
    a("REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", "false", "always: a probe every 250 ms, `/healthz` 503 while Redis is unreachable"),
    s("REDIS_TIMEOUT", "10s", "`--redis-timeout-ms` (a Go duration: `10s`, `250ms`, `1m30s`; ours defaults to 100 ms)"),
    r("REDIS_PERSECOND_TIMEOUT", "10s", &[], "as `REDIS_PERSECOND_SOCKET_TYPE`"),
    a("REDIS_POOL_ON_EMPTY_BEHAVIOR", "WAIT", "beyond `--redis-max-in-flight`, calls answer `UNAVAILABLE` at once (the reference's `ERROR`)"),
    r("REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR", "WAIT", &[], "as `REDIS_PERSECOND_SOCKET_TYPE`"),
    a("REDIS_STARTUP_INITIAL_INTERVAL", "1s", "the server starts degraded and comes up with Redis"),
    a("REDIS_STARTUP_MAX_INTERVAL", "30s", "as `REDIS_STARTUP_INITIAL_INTERVAL`"),
    a("REDIS_STARTUP_MAX_ELAPSED_TIME", "0", "as `REDIS_STARTUP_INITIAL_INTERVAL`"),
    r("MEMCACHE_HOST_PORT", "", &[], "no memcache store: memory, or Redis with `REDIS_URL`"),
    r("MEMCACHE_MAX_IDLE_CONNS", "2", &[], "as `MEMCACHE_HOST_PORT`"),
    r("MEMCACHE_SRV", "", &[], "as `MEMCACHE_HOST_PORT`"),
    r("MEMCACHE_SRV_REFRESH", "0", &[], "as `MEMCACHE_HOST_PORT`"),
    r("MEMCACHE_TLS", "false", OFF, "as `MEMCACHE_HOST_PORT`"),
    r("MEMCACHE_TLS_CLIENT_CERT", "", &[], "as `MEMCACHE_HOST_PORT`"),
    r("MEMCACHE_TLS_CLIENT_KEY", "", &[], "as `MEMCACHE_HOST_PORT`"),
    r("MEMCACHE_TLS_CACERT", "", &[], "as `MEMCACHE_HOST_PORT`"),
    r("MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION", "false", OFF, "as `MEMCACHE_HOST_PORT`"),
    s("SHADOW_MODE", "false", "`--shadow-mode`"),
    r("QUOTA_MODE", "false", OFF, "no global quota mode: set `quota_mode: true` on the descriptors (see [the reference's other keys](configuration.md#the-references-other-keys))"),
    s("RESPONSE_DYNAMIC_METADATA", "false", "`--response-dynamic-metadata` (see [Dynamic metadata](protocol.md#dynamic-metadata))"),
    s("MERGE_DOMAIN_CONFIG", "false", "`--merge-domains`"),
    a("TRACING_ENABLED", "false", "no tracing"),
    a("TRACING_SERVICE_NAME", "RateLimit", "no tracing"),
    a("TRACING_SERVICE_NAMESPACE", "", "no tracing"),
    a("TRACING_SERVICE_INSTANCE_ID", "", "no tracing"),
    a("TRACING_EXPORTER_PROTOCOL", "http", "no tracing"),
    a("TRACING_SAMPLING_RATE", "1", "no tracing"),
];

/// The markdown table of [`SETTINGS`] that `docs/server/migrating.md` carries between
/// its generated-table markers (a test keeps the two equal).
pub fn migration_table() -> String {
    let mut out = String::from(
        "| reference setting (its default) | here | what floodgate-server does |\n| --- | --- | --- |\n",
    );
    for setting in SETTINGS {
        let default = match setting.default {
            "" => String::new(),
            d => format!(" (`{d}`)"),
        };
        let status = match setting.status {
            Status::Supported => "**supported**".to_owned(),
            Status::Accepted => "accepted, logged".to_owned(),
            Status::Refused([]) => "refused when set".to_owned(),
            Status::Refused(allowed) => {
                let ok: Vec<String> = allowed.iter().map(|v| format!("`{v}`")).collect();
                format!("refused unless {}", ok.join(", "))
            }
        };
        out.push_str(&format!(
            "| `{}`{default} | {status} | {} |\n",
            setting.name, setting.here
        ));
    }
    out
}
