//! `make soak`: floodgate under a long mixed load while its dependencies fail.
//!
//! # What runs
//!
//! One Envoy 1.40 (2 workers) loads the real `floodgate.wasm` on one listener, read from
//! a file through LDS ([`crate::lds::DynamicEnvoy`]); its plugin has a local rule on
//! `/local/` (capacity 5, never refilled, per `x-tenant-id`) and a global rule on
//! `/global/` (per `x-tenant-id`), decided by the real floodgate-server
//! (`--response-headers`) on a real `redis-server` (4 per tenant, `sliding_window_log`
//! over a day). `/open/` is limited by neither. Behind Envoy a counting upstream records every request per tenant. The load
//! ([`load`]) is paced (`SOAK_RATE`, default 200 requests/s over 4 tasks) and mixed, and
//! its tenants keep changing: each one sends 2 to 9 requests, then a new id replaces it.
//!
//! # Faults ([`schedule`])
//!
//! Redis is killed every 2 minutes (SIGKILL, persistence off: it comes back empty) and
//! restarted 5 s later; floodgate-server is killed once (at 50 %) and restarted 3 s
//! later on the same address; once (at 75 %) the listener is replaced with a new plugin
//! configuration (capacity 3, another rejection body), applied once Envoy's
//! `/config_dump` shows it active and `listener_manager.lds.update_success` has grown.
//! A run shorter than one period still gets one Redis restart (at 25 %).
//!
//! # Generations: the oracle's unit
//!
//! Every fault sits between two *fences*. A fence waits until no request is in flight
//! (the load's requests hold a read lock, the fence takes the write lock), reads
//! Envoy's and floodgate-server's counters (after Envoy's once-a-second flush has caught
//! up with the client's count of replies), and starts a new *generation*. Tenant ids
//! carry their generation, so no tenant ever spans a fault: a generation is either calm
//! or one outage, from the kill to the moment floodgate-server reports healthy again.
//! After the listener update the load also switches to a new client, so that no request
//! of the new generation runs on a connection of the old filter chain.
//!
//! # The oracle ([`oracle`])
//!
//! A global 200 carries the service's `x-ratelimit-limit` header when floodgate-server
//! decided it, and none when Envoy let it through by the failure mode (`allow`): the
//! client tells the two apart for every request. Then, exactly:
//!
//! - every answer is a 200 or a 429 whose body is its generation's configured one;
//! - per tenant, the upstream received exactly the 200s the client got (and in all, the
//!   200s of every path): no rejected request reached it;
//! - local: a tenant is admitted exactly `min(sent, capacity)` in every generation (Redis
//!   and the server play no part), and no bucket was evicted (an eviction would hand a
//!   fresh bucket to a tenant: `max_buckets` is far above the tenants of a run);
//! - global, calm: exactly `min(sent, 4)` decided admissions and no failure-mode ones;
//!   during an outage at most 4 decided (Redis comes back empty once per outage, and the
//!   tenant is new), and anything beyond was a failure-mode admission;
//! - per generation, Envoy's `failure_mode_allowed` equals the failure-mode admissions
//!   the client saw, and the `rls_error_*` counters sum to the same (one cause each);
//! - calm generations have no failure mode and no `rls_error_*` in Envoy and no
//!   `store_unavailable`/`store_overloaded` in floodgate-server; every outage has some;
//!   during a Redis outage Envoy's `rls_error_unavailable` equals the server's
//!   UNAVAILABLE answers (Envoy's 3 s service timeout is far above the server's 1 s
//!   Redis timeout, so no failure is Envoy's own timeout);
//! - Envoy's `allowed + denied` equals the limited requests answered, at every fence;
//! - after the last fault, a fresh tenant in each mode sends its limit + 3 requests one
//!   at a time: exactly the limit is admitted and reaches the upstream;
//! - RSS (`VmRSS`) of Envoy and floodgate-server after the warm-up and at the end (and
//!   the first server just before its restart) grows by at most 8 MiB (Envoy) or 4 MiB
//!   (floodgate-server), or 5 % if that is more ([`report`] says why).
//!
//! floodgate-server is the debug build `make soak` builds with the filter, with
//! `--redis-timeout-ms 1000` rather than the default 100 ms (see
//! [`setup::REDIS_TIMEOUT_MS`]): the soak judges the faults it injects, not this
//! machine's scheduling stalls.

pub mod counters;
pub mod driver;
pub mod load;
pub mod oracle;
pub mod redis;
pub mod report;
pub mod schedule;
pub mod setup;
