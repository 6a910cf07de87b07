//! The root context: configuration, the bucket table, metric flushing.
//!
//! Envoy creates one root context per VM: the main thread's first, then one per worker.
//! Each parses and validates the configuration (a bad one makes `on_configure` return
//! false, so Envoy refuses the filter), agrees with the other VMs on the placement key
//! ([`crate::shared::placement`]), makes sure the tables exist in shared data, defines the
//! metrics, and once per tick checks the placement key and flushes this thread's tally.

use super::failure::HostFailure;
use super::hostcalls;
use super::shared::HostShared;
use super::types::MetricType;
use crate::config::Config;
use crate::limiter::Limiter;
use crate::metrics::{self, Kind, Tally};
use crate::shared::placement::PlacementKey;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// How often this thread's metric tally is sent to Envoy.
const FLUSH_PERIOD_MS: u32 = 1_000;

/// Everything an HTTP context needs, shared by all requests of this thread.
pub struct Plugin {
    /// The decision logic and configuration.
    pub limiter: Limiter,
    /// Metric updates waiting for the next tick.
    pub tally: RefCell<Tally>,
    /// Envoy metric ids, indexed like the tally.
    metric_ids: Vec<u32>,
    /// Host failures waiting for the next tick, by [`HostFailure`]: cells, not the
    /// tally, because one of them is the tally being in use.
    host_failures: [Cell<u32>; HostFailure::ALL.len()],
}

/// The root context of one plugin in this VM.
#[derive(Default)]
pub struct Root {
    plugin: Option<Rc<Plugin>>,
}

impl Root {
    /// Reads and applies the plugin configuration; `false` makes Envoy refuse it.
    pub fn configure(&mut self) -> bool {
        match configure() {
            Ok(plugin) => {
                self.plugin = Some(Rc::new(plugin));
                true
            }
            Err(message) => {
                log::error!("{message}");
                false
            }
        }
    }

    /// Checks the placement key against the stored one and flushes this thread's
    /// metric tally.
    pub fn tick(&mut self) {
        if let Some(plugin) = &self.plugin {
            plugin.reconcile_placement();
            plugin.flush();
        }
    }

    /// What new HTTP contexts of this root share (`None` until configured).
    pub fn plugin(&self) -> Option<Rc<Plugin>> {
        self.plugin.clone()
    }
}

fn configure() -> Result<Plugin, String> {
    let bytes = hostcalls::plugin_configuration()
        .map_err(|status| format!("cannot read the plugin configuration (status {status})"))?;
    let config = Config::parse(&bytes).map_err(|e| format!("invalid configuration: {e}"))?;
    for warning in &config.warnings {
        log::warn!("configuration: {warning}");
    }
    #[cfg(not(feature = "response-cost"))]
    config
        .refuse_response_costs()
        .map_err(|e| format!("invalid configuration: {e}"))?;
    let agreed = PlacementKey::load_or_create(&HostShared, hostcalls::random_bytes::<16>)
        .map_err(|e| format!("cannot agree on the placement key in shared data ({e:?})"))?;
    if agreed.drawn {
        log::info!("placement key drawn and stored in shared data");
    }
    let mut limiter = Limiter::new(config, agreed.key);
    if limiter.mints_holds() {
        // This VM's own nonce: hold ids must differ between VMs, unlike the placement key.
        let nonce = hostcalls::random_bytes::<16>()
            .map_err(|status| format!("cannot draw a nonce for hold ids (status {status})"))?;
        limiter = limiter.with_hold_nonce(nonce);
    }
    prepare_tables(&limiter)?;
    let metric_ids = metrics::definitions(&limiter.config().rules)
        .iter()
        .map(|(kind, name)| {
            let kind = match kind {
                Kind::Counter => MetricType::Counter,
                Kind::Gauge => MetricType::Gauge,
            };
            hostcalls::define_metric(kind, name)
                .map_err(|status| format!("cannot define metric {name} (status {status})"))
        })
        .collect::<Result<Vec<u32>, String>>()?;
    hostcalls::set_tick_period_ms(FLUSH_PERIOD_MS)
        .map_err(|status| format!("cannot set the tick period (status {status})"))?;
    let tally = RefCell::new(Tally::for_rules(&limiter.config().rules));
    Ok(Plugin {
        limiter,
        tally,
        metric_ids,
        host_failures: Default::default(),
    })
}

/// Makes sure the tables this configuration uses exist in shared data, before traffic:
/// the bucket table (unless no rule keeps buckets), the lease table and the over-limit
/// cache's keys.
fn prepare_tables(limiter: &Limiter) -> Result<(), String> {
    // A global-only configuration without fallbacks takes no buckets: no table.
    let local = limiter.needs_table();
    let created = if local {
        limiter.table().prepare(&HostShared).map_err(|e| {
            format!(
                "cannot create the bucket table in shared data (status {})",
                e.status
            )
        })?
    } else {
        0
    };
    // The lease table's keys, before traffic like the bucket table's.
    if let Some(leases) = limiter.lease_table() {
        let created = leases.prepare(&HostShared).map_err(|e| {
            format!(
                "cannot create the lease table in shared data (status {})",
                e.status
            )
        })?;
        log::info!(
            "lease table: {} sets of {} entries ({created} created)",
            leases.sets(),
            crate::shared::lease::WAYS
        );
    }
    // The concurrency keys' table, before traffic like the bucket table's.
    if let Some(slots) = limiter.slot_table() {
        let created = slots.prepare(&HostShared).map_err(|e| {
            format!(
                "cannot create the concurrency table in shared data (status {})",
                e.status
            )
        })?;
        log::info!(
            "concurrency table: {} slots ({created} created)",
            slots.size()
        );
    }
    // The over-limit cache's keys, before traffic like the bucket table's.
    if let Some(cache) = limiter.over_limit_cache() {
        let created = cache.prepare(&HostShared).map_err(|e| {
            format!(
                "cannot create the over-limit cache in shared data (status {})",
                e.status
            )
        })?;
        log::info!(
            "over-limit cache: {} sets of {} entries ({created} created)",
            cache.sets(),
            crate::shared::over_limit::WAYS
        );
    }
    if local {
        log::info!(
            "{} rules, {} bucket slots ({} created)",
            limiter.config().rules.len(),
            limiter.table().size(),
            created
        );
    } else {
        log::info!(
            "{} rules, all global: no bucket table",
            limiter.config().rules.len()
        );
    }
    Ok(())
}

impl Plugin {
    /// Takes the placement key stored in shared data if it is not this VM's: VMs that
    /// raced to create it converge here, within a tick (see [`crate::shared::placement`]). One
    /// shared-data read per tick when they agree; a failure is tried again next tick.
    fn reconcile_placement(&self) {
        match self.limiter.placement().reconcile(&HostShared) {
            Ok(None) => {}
            Ok(Some(stored)) => {
                log::warn!("placement key: another VM stored its own first; adopted it");
                self.limiter.adopt_placement(stored);
            }
            Err(e) => log::warn!("placement key: cannot check it in shared data ({e:?})"),
        }
    }

    /// Counts a host failure (see [`super::failure`]) for the next flush.
    pub fn count_host_failure(&self, failure: HostFailure) {
        if let Some(cell) = self.host_failures.get(failure as usize) {
            cell.set(cell.get().saturating_add(1));
        }
    }

    /// Sends this thread's pending metric updates to Envoy.
    pub fn flush(&self) {
        for (failure, cell) in HostFailure::ALL.iter().zip(&self.host_failures) {
            let delta = cell.take();
            if delta > 0 {
                self.increment(failure.metric() as usize, i64::from(delta));
            }
        }
        let Ok(mut tally) = self.tally.try_borrow_mut() else {
            return;
        };
        for (index, delta) in tally.drain() {
            self.increment(index, delta);
        }
    }

    /// Adds `delta` to the metric at `index` (indexed like the tally).
    fn increment(&self, index: usize, delta: i64) {
        if let Some(&id) = self.metric_ids.get(index) {
            if let Err(status) = hostcalls::increment_metric(id, delta) {
                log::warn!("metric update failed (status {status})");
            }
        }
    }
}
