//! Command-line flags.

use crate::store::memory::DEFAULT_CAPACITY;
use clap::Parser;
use std::net::SocketAddr;
use std::path::PathBuf;

/// floodgate-server: an Envoy rate limit service (RLS v3) with fixed window, token bucket
/// and sliding window limits, configured in the envoyproxy/ratelimit YAML format.
#[derive(Debug, Clone, Parser)]
#[command(name = "floodgate-server", version)]
pub struct Args {
    /// Rate limit configuration: a YAML file, or a directory whose *.yaml/*.yml files each
    /// hold one domain. Watched: valid changes apply without a restart.
    #[arg(long, value_name = "PATH")]
    pub config: PathBuf,

    /// Address the gRPC rate limit service listens on (port 0: any free port).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8081")]
    pub grpc_addr: SocketAddr,

    /// Address /healthz and /metrics listen on (port 0: any free port).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub http_addr: SocketAddr,

    /// Validate the configuration, print the result and exit (non-zero on error).
    #[arg(long)]
    pub check: bool,

    /// Add draft-03 x-ratelimit-limit/-remaining/-reset to response_headers_to_add.
    #[arg(long)]
    pub response_headers: bool,

    /// Memory store capacity in cells (one per counter, plus one per sliding_window_log
    /// entry). When full, requests needing a new counter get UNAVAILABLE.
    #[arg(long, value_name = "CELLS", default_value_t = DEFAULT_CAPACITY)]
    pub memory_capacity: usize,

    /// How often to look for configuration changes, in milliseconds (0: never).
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    pub watch_interval_ms: u64,
}
