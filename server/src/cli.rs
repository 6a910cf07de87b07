//! Command-line flags (and, for the settings the reference service reads from its
//! environment, those variables: a flag wins over a variable).

pub mod calls;
pub mod duration;
pub mod gossip;
pub mod redis;
pub mod reference;
pub mod tls;
pub mod xds;

use self::redis::RedisArgs;
use crate::config::LoadOptions;
use crate::listener::{automatic_max_connections, Caps, HttpLimits, Limits, Timeouts};
use crate::rls::{HeaderNames, Options as RlsOptions, ResponseHeaders, Trust};
use crate::store::memory::DEFAULT_CAPACITY;
use crate::store::Counting;
use clap::Parser;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// floodgate-server: an Envoy rate limit service (RLS v3) with fixed window, token bucket
/// and sliding window limits, configured in the envoyproxy/ratelimit YAML format.
#[derive(Debug, Clone, Parser)]
#[command(name = "floodgate-server", version)]
pub struct Args {
    /// Rate limit configuration: a YAML file, or a directory whose *.yaml/*.yml files each
    /// hold one domain. Watched: valid changes apply without a restart. Required, unless
    /// the reference's RUNTIME_ROOT / RUNTIME_SUBDIRECTORY / RUNTIME_APPDIRECTORY name it,
    /// or the configuration comes from xDS (--config-xds).
    #[arg(
        long,
        value_name = "PATH",
        default_value = "",
        hide_default_value = true,
        value_parser = any_path
    )]
    pub config: PathBuf,

    /// Address the gRPC rate limit service listens on (port 0: any free port).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8081")]
    pub grpc_addr: SocketAddr,

    /// Address /healthz and /metrics listen on (port 0: any free port).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub http_addr: SocketAddr,

    /// With --config-xds: /healthz answers 503 until the first push is in force, so that no
    /// call is sent to a server that would answer it unlimited (the reference's
    /// HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED). A file configuration is always in force
    /// before the listeners bind.
    #[arg(long)]
    pub healthy_once_configured: bool,

    /// Validate the configuration, print the result and exit (non-zero on error).
    #[arg(long)]
    pub check: bool,

    /// Add draft-03 x-ratelimit-limit/-remaining/-reset to response_headers_to_add.
    #[arg(long, conflicts_with = "limit_response_headers")]
    pub response_headers: bool,

    /// Put the reference's dynamic_metadata in every answer (its RESPONSE_DYNAMIC_METADATA):
    /// the domain, the descriptors, and the `metadata` of the limits that applied.
    #[arg(long)]
    pub response_dynamic_metadata: bool,

    /// Add the reference service's RateLimit-Limit/-Remaining/-Reset headers (its
    /// LIMIT_RESPONSE_HEADERS_ENABLED) to response_headers_to_add.
    #[arg(long)]
    pub limit_response_headers: bool,

    /// The limit header's name under --limit-response-headers (LIMIT_LIMIT_HEADER).
    #[arg(long, value_name = "NAME", default_value = "RateLimit-Limit")]
    pub limit_header: String,

    /// The remaining header's name under --limit-response-headers (LIMIT_REMAINING_HEADER).
    #[arg(long, value_name = "NAME", default_value = "RateLimit-Remaining")]
    pub remaining_header: String,

    /// The reset header's name under --limit-response-headers (LIMIT_RESET_HEADER).
    #[arg(long, value_name = "NAME", default_value = "RateLimit-Reset")]
    pub reset_header: String,

    /// Decide and count as usual, but answer OK to every request (the reference's
    /// SHADOW_MODE): the descriptor statuses still say which limits were over.
    #[arg(long)]
    pub shadow_mode: bool,

    /// Count an admitted decision as near its limit when it leaves more than this share
    /// of the limit used (the reference's NEAR_LIMIT_RATIO), in floodgate_near_limit_total.
    #[arg(long, value_name = "RATIO", default_value_t = 0.8, value_parser = ratio)]
    pub near_limit_ratio: f64,

    /// Which descriptors of a rejected request consume: all-or-nothing (none: the default,
    /// no counter pollution) or per-descriptor (every one within its own limit, as the
    /// reference counts by default).
    #[arg(long, value_enum, value_name = "MODE", default_value_t = Counting::AllOrNothing)]
    pub counting: Counting,

    /// Also export the reference service's per-limit series on /metrics
    /// (ratelimit_service_rate_limit_total_hits and the others, with its labels), as its
    /// USE_PROMETHEUS does, so that its dashboards and alerts keep working.
    #[arg(long)]
    pub reference_stats: bool,

    /// Also serve the metrics on a listener of their own at this address, under
    /// --metrics-path (the reference's PROMETHEUS_ADDR, with USE_PROMETHEUS=true).
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<SocketAddr>,

    /// The path --metrics-addr serves the metrics under (PROMETHEUS_PATH).
    #[arg(long, value_name = "PATH", default_value = "/metrics", value_parser = metrics_path)]
    pub metrics_path: String,

    /// Push the reference's per-limit counters to this statsd address (HOST:PORT, UDP),
    /// in its statsd names, as its USE_STATSD with STATSD_HOST and STATSD_PORT does.
    #[arg(long, value_name = "HOST:PORT")]
    pub statsd_addr: Option<String>,

    /// How often the statsd counters are pushed, in milliseconds (STATS_FLUSH_INTERVAL).
    #[arg(long, value_name = "MS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub statsd_flush_ms: u64,

    /// Let several files of a directory define the same domain: their descriptors are
    /// merged into one tree (the reference's MERGE_DOMAIN_CONFIG).
    #[arg(long)]
    pub merge_domains: bool,

    /// Refuse stream-end charges (calls with x-floodgate-charge: 1) with PERMISSION_DENIED:
    /// for a service whose callers need none (no cost known after the response), so that
    /// no caller can put a limit into debt.
    #[arg(long)]
    pub refuse_charges: bool,

    /// Ignore quota lease requests (x-floodgate-quota): such calls are decided with no
    /// lease, so no caller can take hits ahead.
    #[arg(long)]
    pub refuse_quota: bool,

    /// Memory store capacity in cells (one per counter, plus one per sliding_window_log
    /// entry). When full, requests needing a new counter get UNAVAILABLE.
    #[arg(long, value_name = "CELLS", default_value_t = DEFAULT_CAPACITY)]
    pub memory_capacity: usize,

    /// The xDS configuration source (instead of --config).
    #[command(flatten)]
    pub xds: self::xds::XdsArgs,

    /// The Redis store (without a target: the memory store).
    #[command(flatten)]
    pub redis: RedisArgs,

    /// `--store`, and the gossip store's flags.
    #[command(flatten)]
    pub gossip: self::gossip::GossipArgs,

    /// TLS and mutual TLS on the gRPC port, and who may send charges and quota requests.
    #[command(flatten)]
    pub tls: self::tls::TlsArgs,

    /// How many calls one gRPC connection carries at once, and how long one may take.
    #[command(flatten)]
    pub calls: self::calls::CallArgs,

    /// gRPC connections open at once; beyond, a new connection is closed at once. 0: the
    /// open-files limit (ulimit -n) less 100 and less --http-max-connections, at most
    /// 10,000 (1,000 where it cannot be read).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub max_connections: usize,

    /// gRPC connections open at once from one peer (source IP); beyond, a new one from it
    /// is closed at once. 0: no per-peer cap. The default leaves room for an Envoy with
    /// 128 workers opening two connections each.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CONNECTIONS_PER_PEER)]
    pub max_connections_per_peer: usize,

    /// How long a new gRPC connection has to send the HTTP/2 preface before it is closed,
    /// in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 5_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub handshake_timeout_ms: u64,

    /// How long a gRPC connection may carry no call (no HEADERS, CONTINUATION or DATA
    /// frame either way; PINGs, SETTINGS and WINDOW_UPDATEs do not count) before it is
    /// closed, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 600_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_timeout_ms: u64,

    /// HTTP connections (/healthz, /metrics) open at once; beyond, a new one is closed at
    /// once. Counted out of the open-files limit before the gRPC port's automatic cap.
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..))]
    pub http_max_connections: u64,

    /// HTTP connections open at once from one peer (source IP). 0: no per-peer cap.
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub http_max_connections_per_peer: usize,

    /// How long an HTTP request's head may take, from the connection's start or the
    /// previous answer, before the connection is closed, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 5_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub http_header_timeout_ms: u64,

    /// How long an HTTP connection may move no byte, either way, before it is closed, in
    /// milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub http_idle_timeout_ms: u64,

    /// After SIGTERM, how long /healthz answers 503 (draining) while gRPC keeps serving,
    /// before the listeners close and in-flight calls drain, in milliseconds: long enough
    /// for Kubernetes and every proxy to stop sending (so no preStop sleep is needed).
    /// SIGINT stops at once.
    #[arg(long, value_name = "MS", default_value_t = 5_000)]
    pub shutdown_delay_ms: u64,

    /// How often to look for configuration changes, in milliseconds (0: never).
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    pub watch_interval_ms: u64,

    /// Threads serving requests. 0: one per available core. 1: a single-threaded runtime,
    /// the cheapest per decision (no work stealing, no cross-thread wake-ups, and concurrent
    /// calls batched into fewer socket writes), for a server that one core can carry or
    /// that shares its cores with Redis.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub worker_threads: usize,
}

/// `--max-connections-per-peer`'s default: an Envoy opens about one HTTP/2 connection per
/// worker to the service (more while a pool drains or reconnects), and a large one runs
/// 64 to 128 workers; 256 leaves it room for two each.
pub const DEFAULT_MAX_CONNECTIONS_PER_PEER: usize = 256;

/// `--config`'s parser: any path, the empty one too (it stands for "not given", which
/// [`Args::from_command_line`] refuses unless a reference variable names the path).
fn any_path(text: &str) -> Result<PathBuf, std::convert::Infallible> {
    Ok(PathBuf::from(text))
}

impl Args {
    /// The flags from the command line, then the reference's variables from the
    /// process's environment where no flag was given (see [`reference`]). Exits with
    /// clap's usage message on a bad flag; returns the lines to log once (variables set
    /// that need nothing here), or why the environment is refused.
    pub fn from_command_line() -> Result<(Args, Vec<String>), String> {
        use clap::{CommandFactory, FromArgMatches};
        let matches = Args::command().get_matches();
        let mut args = Args::from_arg_matches(&matches).map_err(|e| e.to_string())?;
        let given =
            |id: &str| matches.value_source(id) == Some(clap::parser::ValueSource::CommandLine);
        let notes = reference::apply(&mut args, &given, &|name| std::env::var(name).ok())?;
        if args.config.as_os_str().is_empty() && args.xds.config_xds.is_none() {
            return Err(
                "no configuration: give --config PATH or --config-xds URL (or the reference's RUNTIME_ROOT and RUNTIME_SUBDIRECTORY, or CONFIG_TYPE=GRPC_XDS_SOTW)"
                    .to_owned(),
            );
        }
        if args.check && args.xds.config_xds.is_some() {
            return Err(
                "--check validates a file: give --config PATH, not --config-xds".to_owned(),
            );
        }
        Ok((args, notes))
    }

    /// The gRPC port's limits, the automatic connection cap resolved against the
    /// open-files limit `open_files` (see [`crate::listener`]).
    pub fn connection_limits(&self, open_files: Option<u64>) -> Limits {
        let total = match self.max_connections {
            0 => automatic_max_connections(open_files, self.http_limits().caps.total),
            n => n,
        };
        Limits {
            caps: Caps {
                total,
                per_peer: self.max_connections_per_peer,
            },
            timeouts: Timeouts {
                handshake: Duration::from_millis(self.handshake_timeout_ms),
                idle: Duration::from_millis(self.idle_timeout_ms),
            },
        }
    }

    /// The HTTP port's limits.
    pub fn http_limits(&self) -> HttpLimits {
        HttpLimits {
            caps: Caps {
                total: usize::try_from(self.http_max_connections).unwrap_or(usize::MAX),
                per_peer: self.http_max_connections_per_peer,
            },
            header_timeout: Duration::from_millis(self.http_header_timeout_ms),
            idle_timeout: Duration::from_millis(self.http_idle_timeout_ms),
        }
    }

    /// The Redis store's options (`None`: the memory store), from the flags and the
    /// process's environment; see [`redis`].
    pub fn redis(&self) -> Result<redis::Resolved, String> {
        self.redis
            .resolve(self.counting, &|name| std::env::var(name).ok(), &|path| {
                std::fs::read(path)
            })
    }

    /// The gRPC port's TLS and who may spend, from the flags and the process's
    /// environment; see [`tls`].
    pub fn grpc_tls(&self) -> Result<self::tls::Resolved, String> {
        self.tls.resolve(&|name| std::env::var(name).ok())
    }

    /// How the RLS layer answers, from the protocol flags and who may spend (`permits`,
    /// from [`Args::grpc_tls`]).
    pub fn rls(&self, permits: &self::tls::Resolved) -> RlsOptions {
        let headers = if self.limit_response_headers {
            ResponseHeaders::Reference(HeaderNames {
                limit: self.limit_header.clone(),
                remaining: self.remaining_header.clone(),
                reset: self.reset_header.clone(),
            })
        } else if self.response_headers {
            ResponseHeaders::Draft03
        } else {
            ResponseHeaders::None
        };
        RlsOptions {
            headers,
            shadow_mode: self.shadow_mode,
            near_limit_ratio: self.near_limit_ratio,
            dynamic_metadata: self.response_dynamic_metadata,
            charges: permits.charges.clone(),
            quota: permits.quota.clone(),
            trust: Trust {
                allow_charges: !self.refuse_charges,
                allow_quota: !self.refuse_quota,
            },
        }
    }

    /// The xDS client's settings (`None`: the configuration is a file), its TLS files
    /// read now; see [`xds`].
    pub fn xds(&self) -> Result<Option<crate::xds::client::Settings>, String> {
        self.xds.resolve(&|path| std::fs::read(path))
    }

    /// How the configuration is read, from the layout flags.
    pub fn load_options(&self) -> LoadOptions {
        let gossip = self.gossip.store == Some(self::gossip::StoreKind::Gossip);
        LoadOptions {
            merge_domains: self.merge_domains,
            supported: gossip.then_some(crate::config::Supported {
                store: "gossip",
                algorithms: crate::store::gossip::part::SUPPORTED,
            }),
        }
    }
}

/// A path for axum's router: absolute, no route parameters or wildcards.
pub(crate) fn metrics_path(s: &str) -> Result<String, String> {
    let plain = s.starts_with('/') && !s.contains([':', '*', '{', '}']);
    match plain {
        true => Ok(s.to_owned()),
        false => Err(format!("{s:?}: expected a path such as /metrics")),
    }
}

/// A ratio in [0, 1].
fn ratio(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(format!("{s:?} is not a ratio between 0 and 1")),
    }
}
