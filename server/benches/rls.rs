//! `make bench-server`: floodgate-server against a floor, over real gRPC, in one run.
//!
//! The floor is a tonic RLS server (this same binary started with `--floor`) that answers
//! OK for every descriptor without deciding anything: the cost of gRPC alone. Both run as
//! separate processes on this machine and face the same client, so the ratio of their
//! decisions per second is what deciding costs. Scenarios: 1, 16 and 64 concurrent streams
//! (in-flight calls, multiplexed over one HTTP/2 connection per 16 streams), on one hot
//! key or spread over 100,000 keys. Not a test: it prints a table and judges nothing.
//!
//! Then the Redis store: floodgate-server with `--redis-url` on a `redis-server` this bench
//! starts, at 1, 16 and 64 streams, side by side with the ceiling: `redis-benchmark`
//! running the very `EVALSHA` floodgate-server sends for one descriptor (same script, key
//! and arguments) over as many connections. Redis is single-threaded, so the ceiling is
//! what Redis itself can do with this script here.
//!
//! The Redis rows also say where the CPU goes: CPU time per decision of floodgate-server, of
//! this bench's own gRPC client, and of Redis (per `EVALSHA`, in both columns), read from
//! `/proc/PID/stat` over the measured seconds (Linux only; `-` elsewhere). On a small
//! machine the three compete for the same cores, so these say what a change saves.
//!
//! Then TLS (`support/tls.rs`): the same server plaintext and over mutual TLS, and the
//! cost of a handshake.
//!
//! Environment: `BENCH_SECS` (measurement seconds per scenario, default 3); `BENCH_STORE`
//! (`memory`, `redis`, `tls`, or all by default); `BENCH_STREAMS` (comma-separated stream counts,
//! default `1,16,64`; one row alone is handy under `perf`); `BENCH_SERVER_ARGS` (extra
//! floodgate-server flags, whitespace-separated, e.g. `--worker-threads 1`).

use floodgate_server::proto::rls::rate_limit_response::{Code, DescriptorStatus};
use floodgate_server::proto::rls::rate_limit_service_client::RateLimitServiceClient;
use floodgate_server::proto::rls::rate_limit_service_server::{
    RateLimitService, RateLimitServiceServer,
};
use floodgate_server::proto::rls::{RateLimitRequest, RateLimitResponse};
use floodgate_server::proto::{Entry, RateLimitDescriptor};
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tonic::transport::{Channel, ClientTlsConfig};

#[path = "support/tls.rs"]
mod tls;

#[path = "rls/redis.rs"]
mod redis_rows;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const CONFIG: &str = "domain: bench
descriptors:
  - key: client
    rate_limit: { unit: second, requests_per_unit: 4000000000 }
";
const MANY_KEYS: u64 = 100_000;

fn main() -> Result<(), BoxError> {
    if std::env::args().any(|a| a == "--floor") {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        return runtime.block_on(floor());
    }
    // The load generator runs on one thread: on a small machine every cycle it spends is
    // taken from the servers it measures, and one thread is its cheapest shape (no work
    // stealing or cross-thread wake-ups; concurrent calls leave in fewer writes).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(compare())
}

/// The floor: answers OK for every descriptor, deciding nothing.
struct Floor;

#[tonic::async_trait]
impl RateLimitService for Floor {
    async fn should_rate_limit(
        &self,
        request: tonic::Request<RateLimitRequest>,
    ) -> Result<tonic::Response<RateLimitResponse>, tonic::Status> {
        let statuses = request
            .into_inner()
            .descriptors
            .iter()
            .map(|_| DescriptorStatus {
                code: Code::Ok as i32,
                ..Default::default()
            })
            .collect();
        Ok(tonic::Response::new(RateLimitResponse {
            overall_code: Code::Ok as i32,
            statuses,
            ..Default::default()
        }))
    }
}

async fn floor() -> Result<(), BoxError> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("floor ready grpc={}", listener.local_addr()?);
    std::io::stdout().flush()?;
    tonic::transport::Server::builder()
        .add_service(RateLimitServiceServer::new(Floor))
        .serve_with_incoming(
            tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)),
        )
        .await?;
    Ok(())
}

/// A child process killed on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `cmd` and reads the `grpc=ADDR` from its first stdout line.
fn start(mut cmd: Command) -> Result<(Proc, SocketAddr), BoxError> {
    let mut child = Proc(cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn()?);
    let stdout = child.0.stdout.take().ok_or("no stdout")?;
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    let addr = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("grpc="))
        .ok_or_else(|| format!("no ready line: {line:?}"))?
        .parse()?;
    Ok((child, addr))
}

struct Outcome {
    per_sec: f64,
    p50_us: f64,
    p99_us: f64,
    /// Calls counted in the measured window.
    calls: u64,
    /// CPU seconds each watched process used in the measured window (`None`: unknown).
    cpu: Vec<Option<f64>>,
}

/// CPU seconds (user + system, all threads) `pid` has used so far, from `/proc/PID/stat`.
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces; fields after its `)` are plain.
    let after = stat.get(stat.rfind(')')? + 1..)?;
    let mut fields = after.split_whitespace().skip(11); // field 14 is utime, 15 stime
    let utime: f64 = fields.next()?.parse().ok()?;
    let stime: f64 = fields.next()?.parse().ok()?;
    // In clock ticks of USER_HZ, which Linux fixes at 100 on every architecture it
    // exposes this file on.
    Some((utime + stime) / 100.0)
}

/// The CPU seconds each of `pids` has used so far.
fn cpu_now(pids: &[u32]) -> Vec<Option<f64>> {
    pids.iter().map(|&p| cpu_seconds(p)).collect()
}

/// Per-process CPU used between `before` and `after`.
fn cpu_since(before: &[Option<f64>], after: &[Option<f64>]) -> Vec<Option<f64>> {
    before
        .iter()
        .zip(after)
        .map(|(b, a)| Some(a.as_ref()? - b.as_ref()?))
        .collect()
}

impl Outcome {
    /// Microseconds of CPU the `i`th watched process spent per call, or `-`.
    fn cpu_us(&self, i: usize) -> String {
        match self.cpu.get(i).copied().flatten() {
            Some(s) if self.calls > 0 => format!("{:.1}", s * 1e6 / self.calls as f64),
            _ => "-".to_owned(),
        }
    }
}

async fn compare() -> Result<(), BoxError> {
    let secs: u64 = std::env::var("BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let streams = match std::env::var("BENCH_STREAMS") {
        Ok(s) => s
            .split(',')
            .map(|n| n.trim().parse::<usize>().ok().filter(|&n| n > 0))
            .collect::<Option<Vec<usize>>>()
            .ok_or_else(|| format!("BENCH_STREAMS={s:?}: expected counts like 1,16,64"))?,
        Err(_) => vec![1, 16, 64],
    };
    let which = std::env::var("BENCH_STORE").unwrap_or_default();
    if which.is_empty() || which == "memory" {
        compare_memory(secs, &streams).await?;
    }
    if which != "memory" && which != "tls" {
        redis_rows::compare(secs, &streams).await?;
    }
    if which.is_empty() || which == "tls" {
        let dir = tempfile::tempdir()?;
        let config = dir.path().join("bench.yaml");
        std::fs::write(&config, CONFIG)?;
        tls::compare(&config, secs, &streams).await?;
    }
    Ok(())
}

async fn compare_memory(secs: u64, stream_counts: &[usize]) -> Result<(), BoxError> {
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("bench.yaml");
    std::fs::write(&config, CONFIG)?;

    let mut floor_cmd = Command::new(std::env::current_exe()?);
    floor_cmd.arg("--floor");
    let (_floor, floor_addr) = start(floor_cmd)?;
    let (_server, server_addr) = start(server_command(&config, &[]))?;

    println!("floodgate-server vs floor (OK without deciding), memory store, {secs} s per row");
    println!();
    println!("| keys | streams | floor decisions/s | floodgate decisions/s | ratio | floor p50 / p99 µs | floodgate p50 / p99 µs |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for many in [false, true] {
        for &streams in stream_counts {
            let f = load(floor_addr, streams, many, secs, &[]).await?;
            let s = load(server_addr, streams, many, secs, &[]).await?;
            println!(
                "| {} | {streams} | {:.0} | {:.0} | {:.2} | {:.0} / {:.0} | {:.0} / {:.0} |",
                if many { "100k" } else { "one" },
                f.per_sec,
                s.per_sec,
                s.per_sec / f.per_sec,
                f.p50_us,
                f.p99_us,
                s.p50_us,
                s.p99_us
            );
        }
    }
    println!();
    Ok(())
}

fn server_command(config: &std::path::Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_floodgate-server"));
    cmd.arg("--config").arg(config).args([
        "--grpc-addr",
        "127.0.0.1:0",
        "--http-addr",
        "127.0.0.1:0",
    ]);
    cmd.args(extra);
    if let Ok(extra) = std::env::var("BENCH_SERVER_ARGS") {
        cmd.args(extra.split_whitespace());
    }
    cmd.env("RUST_LOG", "warn");
    cmd
}

/// One request for `client=value` in domain `bench`.
fn request(value: String) -> RateLimitRequest {
    RateLimitRequest {
        domain: "bench".into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: "client".into(),
                value,
            }],
            limit: None,
            hits_addend: None,
        }],
        hits_addend: 0,
    }
}

/// Runs `streams` concurrent callers against `addr` for `secs` (after a 1 s warm-up),
/// watching the CPU of `pids` over the measured seconds.
async fn load(
    addr: SocketAddr,
    streams: usize,
    many: bool,
    secs: u64,
    pids: &[u32],
) -> Result<Outcome, BoxError> {
    load_with(addr, None, streams, many, secs, pids).await
}

/// [`load`], over TLS with `tls`.
async fn load_with(
    addr: SocketAddr,
    tls: Option<&ClientTlsConfig>,
    streams: usize,
    many: bool,
    secs: u64,
    pids: &[u32],
) -> Result<Outcome, BoxError> {
    let connections = streams.div_ceil(16);
    let mut channels = Vec::with_capacity(connections);
    for _ in 0..connections {
        let channel = match tls {
            None => Channel::from_shared(format!("http://{addr}"))?,
            Some(t) => Channel::from_shared(format!("https://{addr}"))?.tls_config(t.clone())?,
        };
        channels.push(channel.connect().await?);
    }
    let measuring = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::with_capacity(streams);
    for i in 0..streams {
        let mut client = RateLimitServiceClient::new(channels[i % connections].clone());
        let (measuring, stop) = (measuring.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies: Vec<u32> = Vec::with_capacity(1 << 16);
            let mut n = i as u64 * 7919;
            while !stop.load(Ordering::Relaxed) {
                n = n.wrapping_add(1);
                let value = if many {
                    (n % MANY_KEYS).to_string()
                } else {
                    "hot".to_owned()
                };
                let req = request(value);
                let started = Instant::now();
                let r = client.should_rate_limit(req).await?;
                if r.get_ref().overall_code != Code::Ok as i32 {
                    return Err::<Vec<u32>, BoxError>("a bench request was limited".into());
                }
                if measuring.load(Ordering::Relaxed) {
                    latencies
                        .push(u32::try_from(started.elapsed().as_micros()).unwrap_or(u32::MAX));
                }
            }
            Ok(latencies)
        }));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    measuring.store(true, Ordering::Relaxed);
    let started = Instant::now();
    let cpu_before = cpu_now(pids);
    tokio::time::sleep(Duration::from_secs(secs)).await;
    measuring.store(false, Ordering::Relaxed);
    let cpu = cpu_since(&cpu_before, &cpu_now(pids));
    let elapsed = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await??);
    }
    all.sort_unstable();
    let pct = |p: f64| {
        all.get(((all.len() as f64 * p) as usize).min(all.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0) as f64
    };
    Ok(Outcome {
        per_sec: all.len() as f64 / elapsed,
        p50_us: pct(0.50),
        p99_us: pct(0.99),
        calls: all.len() as u64,
        cpu,
    })
}
