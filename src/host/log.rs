//! `log` macros to Envoy's log, through `proxy_log`.

use super::abi;

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
        // proxy-wasm levels: 0 trace, 1 debug, 2 info, 3 warn, 4 error.
        let level = match record.level() {
            log::Level::Trace => 0,
            log::Level::Debug => 1,
            log::Level::Info => 2,
            log::Level::Warn => 3,
            log::Level::Error => 4,
        };
        // Nowhere to report a failure to log.
        let _ = abi::log(level, &record.args().to_string());
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
