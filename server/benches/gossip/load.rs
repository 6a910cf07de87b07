//! The bench's callers (see `gossip.rs`): each cycles over the hot keys on one node,
//! spends its grants before it calls again as the filter does, and records per key and
//! window the hits each answer committed, with the window read from the answer itself.

use super::{BoxError, KEYS, LIMIT};
use floodgate_server::proto::rls::rate_limit_response::quota::ExpirationSpecifier;
use floodgate_server::proto::rls::rate_limit_response::Code;
use floodgate_server::proto::rls::rate_limit_service_client::RateLimitServiceClient;
use floodgate_server::proto::rls::RateLimitRequest;
use floodgate_server::proto::{Entry, RateLimitDescriptor};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tonic::transport::Channel;

/// What one row measured.
#[derive(Default)]
pub struct Row {
    pub calls: u64,
    pub latencies_us: Vec<u32>,
    /// Hits committed per (key, window end in seconds).
    pub committed: HashMap<(u64, u64), u64>,
    /// Hits spent from grants with no call.
    pub from_grants: u64,
    pub errors: u64,
}

/// One node's callers' leases, shared as one Envoy's workers share theirs: per key, the
/// hits left of its last grant and until when (ns since the epoch).
type Leases = Arc<Mutex<HashMap<u64, (u32, u128)>>>;

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// One caller: cycles over the keys on `channel` until `stop`, recording once `measuring`.
/// With `pace`, it sends one request (spent from a grant or called) per `pace` at most:
/// a leasing caller's demand, which spending alone would make unbounded.
async fn caller(
    channel: Channel,
    first: u64,
    leased: bool,
    pace: Option<Duration>,
    leases: Leases,
    measuring: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
) -> Row {
    let mut client = RateLimitServiceClient::new(channel);
    let mut row = Row::default();
    let mut tick = pace.map(tokio::time::interval);
    let mut key = first;
    while !stop.load(Ordering::Relaxed) {
        if let Some(t) = tick.as_mut() {
            t.tick().await;
        }
        key = (key + 1) % KEYS;
        let measured = measuring.load(Ordering::Relaxed);
        {
            let mut held = leases.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some((left, until)) = held.get_mut(&key) {
                if *left > 0 && now_ns() < *until {
                    *left -= 1;
                    row.from_grants += u64::from(measured);
                    continue;
                }
            }
        }
        let mut call = tonic::Request::new(RateLimitRequest {
            domain: "bench".into(),
            descriptors: vec![RateLimitDescriptor {
                entries: vec![Entry {
                    key: "client".into(),
                    value: key.to_string(),
                }],
                limit: None,
                hits_addend: None,
            }],
            hits_addend: 0,
        });
        if leased {
            call.metadata_mut().insert(
                "x-floodgate-quota",
                tonic::metadata::MetadataValue::from_static("0"),
            );
        }
        let started = Instant::now();
        let Ok(r) = client.should_rate_limit(call).await else {
            row.errors += 1;
            continue;
        };
        let took = started.elapsed();
        let r = r.into_inner();
        let Some(status) = r.statuses.first() else {
            row.errors += 1;
            continue;
        };
        let mut hits = u64::from(r.overall_code == Code::Ok as i32);
        if let Some(q) = &status.quota {
            let until = match &q.expiration_specifier {
                Some(ExpirationSpecifier::ValidUntil(t)) => {
                    t.seconds.max(0) as u128 * 1_000_000_000 + t.nanos.max(0) as u128
                }
                _ => 0,
            };
            let mut held = leases.lock().unwrap_or_else(PoisonError::into_inner);
            held.insert(key, (q.requests, until));
            hits += u64::from(q.requests);
        }
        if !measured {
            continue;
        }
        row.calls += 1;
        row.latencies_us
            .push(u32::try_from(took.as_micros()).unwrap_or(u32::MAX));
        // The window the decision was made in ends `duration_until_reset` from now.
        let reset = status.duration_until_reset.as_ref().map_or(0, |d| {
            d.seconds.max(0) as u128 * 1_000_000_000 + d.nanos.max(0) as u128
        });
        let end = ((now_ns() + reset + 500_000_000) / 1_000_000_000) as u64;
        *row.committed.entry((key, end)).or_default() += hits;
    }
    row
}

/// Runs the load on `addrs` (one connection each, `streams` callers per node, each paced
/// to one request per `pace` if given); returns what it measured and the measured span.
pub async fn load(
    addrs: &[SocketAddr],
    streams: usize,
    secs: u64,
    leased: bool,
    pace: Option<Duration>,
) -> Result<(Row, f64, f64), BoxError> {
    let measuring = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for (n, addr) in addrs.iter().enumerate() {
        let channel = Channel::from_shared(format!("http://{addr}"))?
            .connect()
            .await?;
        let leases = Leases::default();
        for s in 0..streams {
            let first = ((n * streams + s) as u64 * 37) % KEYS;
            tasks.push(tokio::spawn(caller(
                channel.clone(),
                first,
                leased,
                pace,
                leases.clone(),
                measuring.clone(),
                stop.clone(),
            )));
        }
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let from = now_ns() as f64 / 1e9;
    measuring.store(true, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(secs)).await;
    measuring.store(false, Ordering::Relaxed);
    let to = now_ns() as f64 / 1e9;
    stop.store(true, Ordering::Relaxed);
    let mut all = Row::default();
    for t in tasks {
        let r = t.await?;
        all.calls += r.calls;
        all.latencies_us.extend(r.latencies_us);
        all.from_grants += r.from_grants;
        all.errors += r.errors;
        for (k, v) in r.committed {
            *all.committed.entry(k).or_default() += v;
        }
    }
    Ok((all, from, to))
}

/// Over-admission over the whole windows inside `[from, to]`: mean and worst, as a share
/// of the limit; and how many key-windows that is.
pub fn over_admission(
    committed: &HashMap<(u64, u64), u64>,
    from: f64,
    to: f64,
) -> (f64, f64, usize) {
    let whole: Vec<f64> = committed
        .iter()
        .filter(|((_, end), _)| (*end as f64 - 1.0) >= from && (*end as f64) <= to)
        .map(|(_, &hits)| hits.saturating_sub(LIMIT) as f64 / LIMIT as f64)
        .collect();
    let n = whole.len();
    let mean = whole.iter().sum::<f64>() / n.max(1) as f64;
    let worst = whole.iter().copied().fold(0.0, f64::max);
    (mean, worst, n)
}
