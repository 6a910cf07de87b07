//! The server's request handling: any bytes as the `ShouldRateLimit` message tonic would
//! decode, then [`floodgate_server::rls::RlsService::decide`] over the memory store,
//! in-process and without a network.
//!
//! The service is configured with every algorithm, nested and wildcard descriptors,
//! shadow and unlimited rules; the store is small (16 cells) so that inputs with many
//! distinct descriptors fill it. Each request is decided three times on a clock that
//! moves between them, so counters are created, exhausted and windows roll, then sent as
//! a stream-end charge (`x-floodgate-charge`), which must never block a limit for more
//! than two of its units, however many hits it reports (debt is capped at one limit).

use floodgate_server::clock::Clock;
use floodgate_server::config::{self, source::Files};
use floodgate_server::metrics::Metrics;
use floodgate_server::proto::rls::rate_limit_response::{rate_limit::Unit, Code};
use floodgate_server::proto::rls::RateLimitRequest;
use floodgate_server::rls::{CallKind, Options, ResponseHeaders, RlsService};
use floodgate_server::store::memory::MemoryStore;
use prost::Message;
use std::future::Future;
use std::path::PathBuf;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Waker};

/// Cells the store may hold.
const CAPACITY: usize = 16;

/// The configuration: each algorithm and each kind of match once.
const CONFIG: &str = "\
domain: fuzz
descriptors:
  - key: remote_address
    rate_limit: { unit: second, requests_per_unit: 3, algorithm: token_bucket, burst: 2 }
  - key: tenant
    rate_limit: { name: per-tenant, unit: minute, requests_per_unit: 5, algorithm: sliding_window_counter }
    descriptors:
      - key: path
        value: /api/*
        rate_limit: { unit: hour, requests_per_unit: 2, algorithm: sliding_window_log }
      - key: path
        value: /healthz
        rate_limit: { unlimited: true }
      - key: path
        rate_limit: { unit: second, requests_per_unit: 4, algorithm: fixed_window }
  - key: tenant
    value: acme
    shadow_mode: true
    rate_limit: { unit: day, requests_per_unit: 1 }
  - key: user
    rate_limit: { unit: second, requests_per_unit: 4294967295 }
";

/// A clock the target moves by hand; shared with the store it is given to.
#[derive(Debug, Default)]
struct Now(AtomicU64);

impl Clock for Now {
    fn now_ns(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Decodes `data` as a request and decides it.
pub fn run(data: &[u8]) {
    // tonic answers INVALID_ARGUMENT for bytes that are not a request; nothing to decide.
    let Ok(request) = RateLimitRequest::decode(data) else {
        return;
    };
    let clock = Arc::new(Now(AtomicU64::new(1_700_000_000_000_000_000)));
    let store = Arc::new(MemoryStore::with_clock(CAPACITY, clock.clone()));
    let service = RlsService::new(
        shared_config().clone(),
        store.clone(),
        Arc::new(Metrics::new("memory")),
        Options {
            headers: ResponseHeaders::Draft03,
            ..Options::default()
        },
    );
    for step_ns in [0, 0, 1_500_000_000] {
        clock.0.fetch_add(step_ns, Ordering::Relaxed);
        match ready(service.decide(request.clone())) {
            Ok(response) => {
                assert_eq!(
                    response.statuses.len(),
                    request.descriptors.len(),
                    "one status per descriptor"
                );
                assert_ne!(
                    response.overall_code,
                    Code::Unknown as i32,
                    "an UNKNOWN answer"
                );
            }
            Err(status) => assert!(
                matches!(
                    status.code(),
                    tonic::Code::InvalidArgument | tonic::Code::Unavailable
                ),
                "an unexpected status: {status:?}"
            ),
        }
        assert!(store.cells() <= CAPACITY, "the store outgrew its capacity");
    }
    if let Ok(charged) = ready(service.decide_call(request.clone(), &[], CallKind::Charge)) {
        for s in &charged.statuses {
            let (Some(limit), Some(reset)) = (&s.current_limit, &s.duration_until_reset) else {
                continue;
            };
            let unit_s = match Unit::try_from(limit.unit) {
                Ok(Unit::Second) => 1,
                Ok(Unit::Minute) => 60,
                Ok(Unit::Hour) => 3_600,
                Ok(Unit::Day) => 86_400,
                _ => continue,
            };
            assert!(
                reset.seconds <= 2 * unit_s,
                "a charge blocks {reset:?}, more than two units of {limit:?}"
            );
        }
    }
}

/// The validated configuration, loaded once: loading is the other server target's.
fn shared_config() -> &'static config::Shared {
    static CONFIG_IN_FORCE: OnceLock<config::Shared> = OnceLock::new();
    CONFIG_IN_FORCE.get_or_init(|| {
        let files = Files {
            root: PathBuf::from("fuzz.yaml"),
            files: vec![(PathBuf::from("fuzz.yaml"), CONFIG.to_owned())],
        };
        match config::parse(&files) {
            Ok(config) => config::Shared::new(config),
            // Ours, and pinned by the replay test: a refusal is a bug in this target.
            Err(e) => unreachable!("the server_request target's configuration is refused: {e}"),
        }
    })
}

/// The output of a future that never waits: the memory store answers without yielding,
/// so one poll must finish it.
fn ready<T>(future: impl Future<Output = T>) -> T {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => output,
        Poll::Pending => unreachable!("the memory store waited"),
    }
}
