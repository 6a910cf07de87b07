//! The Redis rows of `make bench-server`: floodgate-server with `--redis-url` beside the
//! ceiling, `redis-benchmark` running the very `EVALSHA` it sends (see the bench's own
//! documentation).

use super::{cpu_now, cpu_since, load, server_command, start, BoxError, Outcome, Proc};
use floodgate_server::algorithm::{Algorithm, Limit, Unit};
use floodgate_server::store::redis::{script_cmd, CallTimes, Mode, SCRIPT};
use floodgate_server::store::{Check, CounterKey};
use std::num::{NonZeroU16, NonZeroU32};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The Redis rows: a token bucket (the script PLATFORM.md measured) that never fills.
const REDIS_CONFIG: &str = "domain: bench
descriptors:
  - key: client
    rate_limit: { unit: second, requests_per_unit: 4000000000, algorithm: token_bucket }
";

pub async fn compare(secs: u64, stream_counts: &[usize]) -> Result<(), BoxError> {
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("bench.yaml");
    std::fs::write(&config, REDIS_CONFIG)?;
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        l.local_addr()?.port()
    };
    let redis = Proc(
        Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir.path())
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| format!("redis-server ({e}); `make redis` installs it"))?,
    );
    let url = format!("redis://127.0.0.1:{port}");
    let mut conn = wait_for_redis(&url)?;
    let (server, server_addr) = start(server_command(&config, &["--redis-url", &url]))?;
    // Watched in the floodgate rows: the server, this bench (its gRPC client), Redis.
    let watched = [server.0.id(), std::process::id(), redis.0.id()];

    // The EVALSHA floodgate-server sends for one descriptor of this bench.
    let check = Check {
        key: CounterKey::new("bench", [("client", "hot")]),
        limit: Limit {
            requests_per_unit: NonZeroU32::new(4_000_000_000).ok_or("rpu")?,
            unit: Unit::Second,
            unit_multiplier: NonZeroU16::MIN,
            algorithm: Algorithm::TokenBucket {
                burst: NonZeroU32::new(4_000_000_000).ok_or("burst")?,
            },
        },
        hits: 1,
        shadow: false,
        quota: None,
        quota_mode: false,
        blocked: false,
        hold: None,
    };
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(SCRIPT)
        .query(&mut conn)?;
    // A deadline far in the future: the script compares it, as in production, and runs.
    let times = CallTimes {
        now_us: String::new(),
        not_after_us: "9007199254740991".into(),
    };
    let evalsha: Vec<String> = script_cmd(&sha, "", &[&check], Mode::Commit, &times)
        .args_iter()
        .map(|a| match a {
            redis::Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
            _ => String::new(),
        })
        .collect();

    println!("floodgate-server with --redis-url (token bucket, one key) vs the ceiling: redis-benchmark running the same EVALSHA, {secs} s per row");
    println!();
    println!("| streams | redis-benchmark EVALSHA/s | floodgate decisions/s | ratio | redis-benchmark p50 / p99 µs | floodgate p50 / p99 µs | CPU µs per decision: floodgate-server / bench client | Redis CPU µs per EVALSHA: redis-benchmark / floodgate |");
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for &streams in stream_counts {
        let ceiling = redis_benchmark(port, streams, secs, &evalsha, redis.0.id())?;
        let s = load(server_addr, streams, false, secs, &watched).await?;
        println!(
            "| {streams} | {:.0} | {:.0} | {:.2} | {:.0} / {:.0} | {:.0} / {:.0} | {} / {} | {} / {} |",
            ceiling.per_sec,
            s.per_sec,
            s.per_sec / ceiling.per_sec,
            ceiling.p50_us,
            ceiling.p99_us,
            s.p50_us,
            s.p99_us,
            s.cpu_us(0),
            s.cpu_us(1),
            ceiling.cpu_us(0),
            s.cpu_us(2),
        );
    }
    Ok(())
}

/// Polls `PING` until Redis answers (at most 10 s).
fn wait_for_redis(url: &str) -> Result<redis::Connection, BoxError> {
    let client = redis::Client::open(url)?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(mut c) = client.get_connection() {
            if redis::cmd("PING").query::<String>(&mut c).is_ok() {
                return Ok(c);
            }
        }
        if Instant::now() > deadline {
            return Err("redis-server did not answer PING".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `redis-benchmark -c streams` running `command` for about `secs` seconds (the count
/// comes from a short calibration run); its CSV gives requests/s and p50/p99. Watches the
/// CPU of `redis_pid` over the measured run.
fn redis_benchmark(
    port: u16,
    streams: usize,
    secs: u64,
    command: &[String],
    redis_pid: u32,
) -> Result<Outcome, BoxError> {
    let run = |n: u64| -> Result<Outcome, BoxError> {
        let before = cpu_now(&[redis_pid]);
        let out = Command::new("redis-benchmark")
            .args(["-h", "127.0.0.1", "-p", &port.to_string()])
            .args(["-c", &streams.to_string(), "-n", &n.to_string(), "--csv"])
            .args(command)
            .stderr(Stdio::null())
            .output()
            .map_err(|e| format!("redis-benchmark ({e}); `make redis` installs it"))?;
        let text = String::from_utf8_lossy(&out.stdout);
        let row: Vec<f64> = text
            .lines()
            .nth(1)
            .ok_or_else(|| format!("redis-benchmark printed {text:?}"))?
            .split("\",\"")
            .skip(1)
            .map(|f| f.trim_matches('"').parse().unwrap_or(0.0))
            .collect();
        // rps, avg, min, p50, p95, p99, max (latencies in ms)
        if row.len() < 6 {
            return Err(format!("redis-benchmark printed {text:?}").into());
        }
        Ok(Outcome {
            per_sec: row[0],
            p50_us: row[3] * 1000.0,
            p99_us: row[5] * 1000.0,
            calls: n,
            cpu: cpu_since(&before, &cpu_now(&[redis_pid])),
        })
    };
    let calibration = run(2_000)?;
    run(((calibration.per_sec * secs as f64) as u64).max(2_000))
}
