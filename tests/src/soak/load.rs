//! The soak's steady mixed load, and the fence that splits it into generations.
//!
//! A few tasks, each paced to its share of `SOAK_RATE` requests per second, send a mix of
//! requests: 40 % to `/local/` and 40 % to `/global/`, each with an `x-tenant-id`, and
//! 20 % to `/open/`, which no rule limits. Each task keeps a pool of live tenants per
//! mode; a tenant is given a number of requests to send (2 to 9, so most go over their
//! limit and some never reach it) and retires when it has sent them, replaced by a
//! new id: the tenant population keeps changing for the whole run.
//!
//! Every request holds a read lock on the current [`Epoch`] while it is in flight. The
//! driver takes the write lock to draw a fence: once it holds it no request is in flight,
//! and requests after it belong to the next generation, with new tenant ids (the id
//! carries the generation), and possibly a new client.

use super::oracle::{Class, Tenant};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::{RwLock, RwLockWriteGuard};
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

/// Client tasks (2 cores shared with Envoy, floodgate-server and Redis).
const TASKS: u64 = 4;
/// Live tenants per task and mode.
const POOL: usize = 8;
/// A request that takes longer than this is an unexpected outcome.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// What requests use until the next fence.
pub struct Epoch {
    /// The generation requests belong to.
    pub generation: u32,
    /// The client they are sent with (a new one after a listener update, so that no
    /// connection of the old filter chain is reused).
    pub client: reqwest::Client,
    /// The rejection body the generation's plugin configuration answers.
    pub body: &'static str,
}

/// What the client saw: per tenant, plus the unlimited path and unexpected answers.
#[derive(Default)]
pub struct Seen {
    /// Per tenant id.
    pub tenants: HashMap<String, Tenant>,
    /// Unexpected answers by description.
    pub unexpected: HashMap<String, u64>,
    /// 200s on `/open/`.
    pub open_admitted: u64,
}

struct Shared {
    epoch: RwLock<Epoch>,
    seen: Mutex<Seen>,
    /// Limited requests answered 200 or 429: what Envoy's allowed + denied must reach.
    decided: AtomicU64,
    stop: AtomicBool,
    base: String,
}

/// The running load.
pub struct Load {
    shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
}

/// A client for one epoch.
pub fn new_client() -> reqwest::Client {
    crate::client()
}

impl Load {
    /// Starts the tasks against `base` (`http://127.0.0.1:PORT`) at `rate` requests/s.
    pub fn start(base: String, rate: u64, epoch: Epoch) -> Load {
        let shared = Arc::new(Shared {
            epoch: RwLock::new(epoch),
            seen: Mutex::new(Seen::default()),
            decided: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            base,
        });
        let period = Duration::from_micros(1_000_000 * TASKS / rate.max(1));
        let tasks = (0..TASKS)
            .map(|task| tokio::spawn(run(shared.clone(), task, period)))
            .collect();
        Load { shared, tasks }
    }

    /// Draws a fence: waits until no request is in flight and holds them off until the
    /// guard is dropped. Change the epoch through the guard.
    pub async fn fence(&self) -> RwLockWriteGuard<'_, Epoch> {
        self.shared.epoch.write().await
    }

    /// Limited requests answered 200 or 429 so far.
    pub fn decided(&self) -> u64 {
        self.shared.decided.load(Ordering::SeqCst)
    }

    /// Stops the tasks, waits for them and returns what they saw.
    pub async fn stop(self) -> Seen {
        self.shared.stop.store(true, Ordering::SeqCst);
        for task in self.tasks {
            let _ = task.await;
        }
        let mut seen = self
            .shared
            .seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        std::mem::take(&mut *seen)
    }
}

/// A tenant a task is still sending for.
struct Live {
    id: String,
    planned: u64,
    sent: u64,
}

/// One task's live tenants of one generation.
struct Pool {
    generation: u32,
    local: Vec<Live>,
    global: Vec<Live>,
    next: u64,
}

async fn run(shared: Arc<Shared>, task: u64, period: Duration) {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (task + 1).wrapping_mul(0xD1B5_4A32_D192_ED03));
    let mut pool = Pool {
        generation: u32::MAX,
        local: Vec::new(),
        global: Vec::new(),
        next: 0,
    };
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    while !shared.stop.load(Ordering::SeqCst) {
        tick.tick().await;
        let epoch = shared.epoch.read().await;
        if pool.generation != epoch.generation {
            pool.generation = epoch.generation;
            pool.local.clear();
            pool.global.clear();
        }
        let roll = rng.below(10);
        let class = match roll {
            0..=3 => Class::Local,
            4..=7 => Class::Global,
            _ => {
                let url = format!("{}/open/{}", shared.base, rng.below(1000));
                let outcome = send(&epoch.client, &url, None).await;
                record_open(&shared, outcome);
                continue;
            }
        };
        let tenant = pick(&mut pool, class, task, &mut rng);
        let path = if class == Class::Local {
            "local"
        } else {
            "global"
        };
        let url = format!("{}/{path}/item", shared.base);
        let outcome = send(&epoch.client, &url, Some(&tenant)).await;
        record(&shared, &epoch, class, &tenant, &url, outcome);
    }
}

/// A live tenant of `class` to send for (retiring it if this is its last request).
fn pick(pool: &mut Pool, class: Class, task: u64, rng: &mut Rng) -> String {
    let generation = pool.generation;
    let (live, letter) = match class {
        Class::Local => (&mut pool.local, 'l'),
        Class::Global => (&mut pool.global, 'g'),
    };
    while live.len() < POOL {
        pool.next += 1;
        live.push(Live {
            id: format!("{letter}{generation}-{task}-{}", pool.next),
            planned: 2 + rng.below(8),
            sent: 0,
        });
    }
    let i = rng.below(POOL as u64) as usize;
    live[i].sent += 1;
    let id = live[i].id.clone();
    if live[i].sent >= live[i].planned {
        live.swap_remove(i);
    }
    id
}

/// What came back: the status, whether the service's `x-ratelimit-limit` was on it, the
/// body; or the error.
type Outcome = Result<(u16, bool, String), String>;

async fn send(client: &reqwest::Client, url: &str, tenant: Option<&str>) -> Outcome {
    let mut request = client.get(url).timeout(REQUEST_TIMEOUT);
    if let Some(tenant) = tenant {
        request = request.header("x-tenant-id", tenant);
    }
    let response = request.send().await.map_err(|e| error_kind(&e))?;
    let status = response.status().as_u16();
    let decided = response.headers().contains_key("x-ratelimit-limit");
    let body = response.text().await.map_err(|e| error_kind(&e))?;
    Ok((status, decided, body))
}

/// An error's kind without its address or port, so that equal failures group together.
fn error_kind(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timeout"
    } else if e.is_connect() {
        "connect"
    } else if e.is_body() {
        "body"
    } else {
        "request"
    };
    format!("{kind} error")
}

fn record_open(shared: &Shared, outcome: Outcome) {
    let mut seen = shared.seen.lock().unwrap_or_else(PoisonError::into_inner);
    match outcome {
        Ok((200, _, _)) => seen.open_admitted += 1,
        Ok((status, _, _)) => {
            *seen
                .unexpected
                .entry(format!("{status} on /open/"))
                .or_default() += 1
        }
        Err(e) => *seen.unexpected.entry(format!("{e} on /open/")).or_default() += 1,
    }
}

fn record(shared: &Shared, epoch: &Epoch, class: Class, tenant: &str, url: &str, outcome: Outcome) {
    let mut seen = shared.seen.lock().unwrap_or_else(PoisonError::into_inner);
    let t = seen.tenants.entry(tenant.to_string()).or_insert(Tenant {
        class: Some(class),
        generation: epoch.generation,
        ..Tenant::default()
    });
    t.sent += 1;
    let path = url
        .strip_prefix(shared.base.as_str())
        .and_then(|p| p.rsplit_once('/'))
        .map_or(url, |(p, _)| p);
    let unexpected = match outcome {
        Ok((200, decided, _)) => {
            if class == Class::Global && !decided {
                t.failure_admitted += 1;
            } else {
                t.admitted += 1;
            }
            None
        }
        Ok((429, _, body)) => {
            t.rejected += 1;
            if body != epoch.body {
                t.wrong_body += 1;
            }
            None
        }
        Ok((status, _, _)) => Some(format!("{status} on {path}")),
        Err(e) => Some(format!("{e} on {path}")),
    };
    match unexpected {
        Some(what) => {
            t.unexpected += 1;
            *seen.unexpected.entry(what).or_default() += 1;
        }
        None => {
            shared.decided.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// A small deterministic generator (xorshift64*): the same run sends the same mix.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1)
    }
}
