//! `make bench-gossip`: the same load on floodgate-server's stores side by side, in one run,
//! release build: one node on memory (exact, the reference), one and three nodes over one
//! Redis (exact, a central store), three gossiping nodes at two intervals, and three
//! gossiping nodes granting quota leases. Not a test: it prints a table and judges nothing.
//!
//! The load: `BENCH_STREAMS` concurrent callers per node (8), each cycling over
//! [`KEYS`] hot keys limited to [`LIMIT`] per second each (fixed window), as fast as the
//! nodes answer, for `BENCH_SECS` seconds (3) after a 1 s warm-up. The callers of each
//! node share one HTTP/2 connection to it. Every answer carries the window it was decided
//! in (its `duration_until_reset` from the server's clock), so the bench counts what each
//! store committed per key and window, exactly; **over-admission** is what a whole window
//! inside the measured seconds committed beyond the limit, as a share of the limit (mean
//! and worst over keys and windows).
//!
//! A leasing node's callers share its leases, as one Envoy's workers do, and spend a grant
//! before they call again; their rows count the hits the fleet committed (admissions and
//! grants, spent or not), which is what over-admission is about. Spending costs nothing,
//! so one leasing row is paced to the demand the row before it answered ("same demand"),
//! and one is not ("unbounded demand": each caller asks as fast as its grants go).
//!
//! Everything runs on this machine: on a small one the nodes, Redis and this client share
//! the cores, so the columns compare stores under the same squeeze, not absolute capacity.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[path = "gossip/load.rs"]
mod load;

use load::{load, over_admission};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Hot keys, each its own counter.
const KEYS: u64 = 100;
/// Each key's limit per one-second window.
const LIMIT: u64 = 50;
/// Hits one lease grant takes at most, in the leasing row.
const GRANT: u32 = 10;

fn config(leased: bool) -> String {
    let quota = if leased {
        format!("\n    quota: {{ requests: {GRANT}, valid_ms: 1000 }}")
    } else {
        String::new()
    };
    format!(
        "domain: bench\ndescriptors:\n  - key: client\n    rate_limit: {{ unit: second, requests_per_unit: {LIMIT} }}{quota}\n"
    )
}

fn main() -> Result<(), BoxError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    runtime.block_on(compare())
}

/// A child process killed on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts floodgate-server with `config` and `extra` flags; returns it and its gRPC and
/// HTTP addresses.
fn server(
    config: &std::path::Path,
    extra: &[String],
) -> Result<(Proc, SocketAddr, SocketAddr), BoxError> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_floodgate-server"));
    cmd.arg("--config").arg(config).args([
        "--grpc-addr",
        "127.0.0.1:0",
        "--http-addr",
        "127.0.0.1:0",
    ]);
    cmd.args(extra).env("RUST_LOG", "warn");
    let mut child = Proc(cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn()?);
    let stdout = child.0.stdout.take().ok_or("no stdout")?;
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    let field = |name: &str| -> Result<SocketAddr, BoxError> {
        Ok(line
            .split_whitespace()
            .find_map(|w| w.strip_prefix(name))
            .ok_or_else(|| format!("no {name} in the ready line: {line:?}"))?
            .parse()?)
    };
    Ok((child, field("grpc=")?, field("http=")?))
}

/// One series' value on a server's `/metrics` (HTTP/1.0, no client library).
fn metric(http: SocketAddr, series: &str) -> f64 {
    use std::io::{Read, Write};
    let mut text = String::new();
    if let Ok(mut s) = std::net::TcpStream::connect(http) {
        let _ = s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n");
        let _ = s.read_to_string(&mut text);
    }
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// A `redis-server` on a free port, no persistence.
fn redis() -> Result<(Proc, u16), BoxError> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .stdout(Stdio::null())
        .spawn()?;
    let proc = Proc(child);
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            return Err("redis-server did not start".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok((proc, port))
}

/// The flags of `n` gossip nodes on loopback at `interval_ms`, each seeded with all the
/// others.
fn gossip_flags(n: usize, interval_ms: u64) -> Result<Vec<Vec<String>>, BoxError> {
    let sockets: Vec<std::net::UdpSocket> = (0..n)
        .map(|_| std::net::UdpSocket::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()?;
    let addrs: Vec<String> = sockets
        .iter()
        .map(|s| s.local_addr().map(|a| a.to_string()))
        .collect::<Result<_, _>>()?;
    drop(sockets);
    Ok((0..n)
        .map(|i| {
            let seeds: Vec<&str> = (0..n)
                .filter(|&j| j != i)
                .map(|j| addrs[j].as_str())
                .collect();
            [
                "--store",
                "gossip",
                "--gossip-addr",
                &addrs[i],
                "--gossip-seeds",
                &seeds.join(","),
                "--gossip-interval-ms",
                &interval_ms.to_string(),
                "--gossip-cluster-id",
                "bench",
            ]
            .map(str::to_owned)
            .to_vec()
        })
        .collect())
}

fn percentile(sorted: &[u32], p: f64) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() - 1) as f64 * p) as usize]
}

/// One scenario's row: start `nodes` servers with their flags, wait until a gossiping
/// fleet is joined, run the load (paced if `pace`), print; returns the requests per
/// second per node it answered (from grants included).
async fn row(
    label: &str,
    flags: Vec<Vec<String>>,
    leased: bool,
    pace: Option<Duration>,
    streams: usize,
    secs: u64,
) -> Result<f64, BoxError> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("bench.yaml");
    std::fs::write(&path, config(leased))?;
    let mut procs = Vec::new();
    let mut addrs = Vec::new();
    let mut https = Vec::new();
    for f in &flags {
        let (p, a, h) = server(&path, f)?;
        procs.push(p);
        addrs.push(a);
        https.push(h);
    }
    if flags[0].iter().any(|f| f == "gossip") {
        let peers = (flags.len() - 1) as f64;
        let live = r#"floodgate_gossip_peers{state="live"}"#;
        let deadline = Instant::now() + Duration::from_secs(20);
        while https.iter().any(|&h| metric(h, live) < peers) {
            if Instant::now() > deadline {
                return Err(format!("{label}: the nodes did not all meet").into());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let (mut r, from, to) = load(&addrs, streams, secs, leased, pace).await?;
    r.latencies_us.sort_unstable();
    let (mean, worst, windows) = over_admission(&r.committed, from, to);
    let per_node = r.calls as f64 / secs as f64 / addrs.len() as f64;
    let spent = if leased {
        format!(
            "{:.0}",
            r.from_grants as f64 / secs as f64 / addrs.len() as f64
        )
    } else {
        "-".to_owned()
    };
    println!(
        "| {label} | {} | {per_node:.0} | {spent} | {} / {} | {:.1} % / {:.1} % ({windows}) | {} |",
        addrs.len(),
        percentile(&r.latencies_us, 0.5),
        percentile(&r.latencies_us, 0.99),
        mean * 100.0,
        worst * 100.0,
        r.errors,
    );
    drop(procs);
    Ok((r.calls + r.from_grants) as f64 / secs as f64 / addrs.len() as f64)
}

async fn compare() -> Result<(), BoxError> {
    let secs: u64 = std::env::var("BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let streams: usize = std::env::var("BENCH_STREAMS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    println!(
        "{KEYS} hot keys at {LIMIT}/s each (fixed window), {streams} callers per node, {secs} s per row, release build"
    );
    println!();
    println!("| store | nodes | decisions/s per node | hits/s per node from grants | p50 / p99 µs | over-admission per window, mean / worst (key-windows) | errors |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    let (_redis, port) = redis()?;
    let url = vec![
        "--redis-url".to_owned(),
        format!("redis://127.0.0.1:{port}"),
    ];
    let rows = [
        ("memory", vec![vec![]]),
        ("redis", vec![url.clone()]),
        ("redis (one Redis)", vec![url.clone(), url.clone(), url]),
        ("gossip, 200 ms", gossip_flags(3, 200)?),
        ("gossip, 50 ms", gossip_flags(3, 50)?),
    ];
    let mut rate = 0.0;
    for (label, flags) in rows {
        rate = row(label, flags, false, None, streams, secs).await?;
    }
    // The same demand as the row before it, each request spent from a grant or called.
    let pace = Duration::from_secs_f64(streams as f64 / rate.max(1.0));
    let label = format!("gossip, 50 ms, leases of {GRANT}, same demand");
    row(
        &label,
        gossip_flags(3, 50)?,
        true,
        Some(pace),
        streams,
        secs,
    )
    .await?;
    // Demand without pacing: a leasing caller spends its grants as fast as it can.
    let label = format!("gossip, 50 ms, leases of {GRANT}, unbounded demand");
    row(&label, gossip_flags(3, 50)?, true, None, streams, secs).await?;
    println!();
    Ok(())
}
