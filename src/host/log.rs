//! `log` macros to Envoy's log, through `proxy_log`.

use super::hostcalls;
use super::types::LogLevel;
use crate::host::log_throttle::{with_held_back, Cause, LogThrottle};

/// Messages below this level are dropped inside the VM: formatting and the host call
/// would cost every request that logs.
const MAX_LEVEL: log::LevelFilter = log::LevelFilter::Info;

struct HostLogger;

impl log::Log for HostLogger {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= MAX_LEVEL
    }

    fn log(&self, record: &log::Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let level = match record.level() {
            log::Level::Trace => LogLevel::Trace,
            log::Level::Debug => LogLevel::Debug,
            log::Level::Info => LogLevel::Info,
            log::Level::Warn => LogLevel::Warn,
            log::Level::Error => LogLevel::Error,
        };
        // Nowhere to report a failure to log.
        let _ = hostcalls::log(level, &record.args().to_string());
    }

    fn flush(&self) {}
}

static LOGGER: HostLogger = HostLogger;

/// Routes the `log` macros to Envoy. Called once when the module starts.
pub fn install() {
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(MAX_LEVEL);
    }
}

thread_local! {
    /// This worker's log throttle (each VM is one thread), built in a constant: a
    /// lazily built thread-local is checked at every use and brings its initialiser.
    static THROTTLE: std::cell::RefCell<LogThrottle> =
        const { std::cell::RefCell::new(LogThrottle::new()) };
}

/// Logs a per-request failure at `level` unless its cause already logged within the
/// throttle period (see [`crate::host::log_throttle`]); `line` is only formatted when logged.
pub fn throttled(level: log::Level, cause: Cause, line: impl FnOnce() -> String) {
    // Without a clock every failure counts as "now = 0": the first is logged, the rest
    // held back, which is still better than a flood.
    let now = hostcalls::current_time_ns().unwrap_or(0);
    let admitted = THROTTLE.with(|t| {
        t.try_borrow_mut()
            .ok()
            .and_then(|mut t| t.admit(cause, now))
    });
    if let Some(held_back) = admitted {
        log::log!(level, "{}", with_held_back(&line(), held_back));
    }
}
