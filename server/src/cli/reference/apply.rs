//! Reading the reference's variables into the flags they stand for, refusing those that
//! name a feature floodgate-server lacks, and noting those that need nothing here.
//!
//! Pure over its inputs (the environment is a function, `given` says which flags were on
//! the command line), so every rule is tested without touching the process.

use super::{Setting, Status, SETTINGS};
use crate::cli::duration::go_duration_ms;
use crate::cli::redis::truthy;
use crate::cli::Args;
use crate::store::Counting;
use std::net::SocketAddr;
use std::path::PathBuf;

/// How logs are written: the reference's `LOG_LEVEL` and `LOG_FORMAT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Logging {
    /// The `tracing` filter: `RUST_LOG` if set, else `LOG_LEVEL`, else `info`.
    pub filter: String,
    /// `LOG_FORMAT=json`: one JSON object per line.
    pub json: bool,
}

/// The log settings from the environment. `RUST_LOG` wins over `LOG_LEVEL`; the
/// reference's `panic` and `fatal` levels are `error` here.
pub fn logging(env: &dyn Fn(&str) -> Option<String>) -> Result<Logging, String> {
    let set = |name: &str| env(name).filter(|v| !v.is_empty());
    let filter = match (set("RUST_LOG"), set("LOG_LEVEL")) {
        (Some(f), _) => f,
        (None, Some(level)) => match level.to_ascii_lowercase().as_str() {
            l @ ("trace" | "debug" | "info" | "warn" | "error") => l.to_owned(),
            "warning" => "warn".to_owned(),
            "panic" | "fatal" => "error".to_owned(),
            _ => {
                return Err(format!(
                    "LOG_LEVEL {level:?}: expected trace, debug, info, warn or error"
                ))
            }
        },
        (None, None) => "info".to_owned(),
    };
    let json = match set("LOG_FORMAT").map(|f| f.to_ascii_lowercase()) {
        None => false,
        Some(f) if f == "text" => false,
        Some(f) if f == "json" => true,
        Some(f) => return Err(format!("LOG_FORMAT {f:?}: expected text or json")),
    };
    Ok(Logging { filter, json })
}

/// Fills `args` from the reference's variables where the flag was not `given` on the
/// command line, and checks the others. Returns the lines to log once (variables that are
/// set and need nothing here), or every refusal, each saying what to use instead.
pub fn apply(
    args: &mut Args,
    given: &dyn Fn(&str) -> bool,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<String>, String> {
    let set = |name: &str| env(name).filter(|v| !v.is_empty());
    let notes = unsupported(&set)?;
    crate::cli::xds::apply(&mut args.xds, given, &set)?;
    addresses(args, given, &set)?;
    switches(args, given, &set)?;
    tuning(args, given, &set)?;
    statsd(args, given, &set)?;
    prometheus(args, given, &set)?;
    Ok(notes)
}

/// The lines to log for the variables that are set and need nothing here, or every
/// refusal of those that name a feature floodgate-server lacks.
fn unsupported(set: &dyn Fn(&str) -> Option<String>) -> Result<Vec<String>, String> {
    let mut notes = Vec::new();
    let mut refusals = Vec::new();
    // Supported variables are read below, each by the code that applies it (so a test
    // can check that each one is); here only the others.
    for setting in SETTINGS.iter().filter(|s| s.status != Status::Supported) {
        let Some(value) = set(setting.name) else {
            continue;
        };
        match setting.status {
            Status::Supported => {}
            Status::Accepted => notes.push(format!(
                "{} is set: ignored ({})",
                setting.name,
                plain(setting.here)
            )),
            Status::Refused(allowed) if allowed.iter().any(|a| a.eq_ignore_ascii_case(&value)) => {}
            Status::Refused(allowed) => refusals.push(refusal(setting, allowed, &value)),
        }
    }
    if !refusals.is_empty() {
        return Err(refusals.join("; "));
    }
    Ok(notes)
}

/// The gRPC and HTTP addresses and the configuration's path (none with xDS: the reference
/// reads no runtime directory then).
fn addresses(
    args: &mut Args,
    given: &dyn Fn(&str) -> bool,
    set: &dyn Fn(&str) -> Option<String>,
) -> Result<(), String> {
    // A deployment written for the reference (any of its variables set) listens where
    // the reference does by default, on every interface; ours alone stays on loopback.
    let reference = SETTINGS.iter().any(|s| set(s.name).is_some());
    let fallback = |port: u16| reference.then(|| SocketAddr::from(([0, 0, 0, 0], port)));
    if !given("grpc_addr") {
        if let Some(addr) = address(&set, "GRPC_HOST", "GRPC_PORT", 8081)?.or(fallback(8081)) {
            args.grpc_addr = addr;
        }
    }
    if !given("http_addr") {
        if let Some(addr) = address(&set, "HOST", "PORT", 8080)?.or(fallback(8080)) {
            args.http_addr = addr;
        }
    }
    if !given("config") && args.xds.config_xds.is_none() {
        if let Some(path) = runtime_path(&set) {
            args.config = path;
        }
    }
    Ok(())
}

/// The on/off switches and the response headers' names.
fn switches(
    args: &mut Args,
    given: &dyn Fn(&str) -> bool,
    set: &dyn Fn(&str) -> Option<String>,
) -> Result<(), String> {
    let flags: [(&str, &str, &mut bool); 6] = [
        (
            "healthy_once_configured",
            "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED",
            &mut args.healthy_once_configured,
        ),
        (
            "reference_stats",
            "USE_PROMETHEUS",
            &mut args.reference_stats,
        ),
        (
            "merge_domains",
            "MERGE_DOMAIN_CONFIG",
            &mut args.merge_domains,
        ),
        ("shadow_mode", "SHADOW_MODE", &mut args.shadow_mode),
        (
            "limit_response_headers",
            "LIMIT_RESPONSE_HEADERS_ENABLED",
            &mut args.limit_response_headers,
        ),
        (
            "response_dynamic_metadata",
            "RESPONSE_DYNAMIC_METADATA",
            &mut args.response_dynamic_metadata,
        ),
    ];
    for (id, name, flag) in flags {
        if let (false, Some(v)) = (given(id), set(name)) {
            *flag = truthy(name, &v)?;
        }
    }
    let names: [(&str, &str, &mut String); 3] = [
        ("limit_header", "LIMIT_LIMIT_HEADER", &mut args.limit_header),
        (
            "remaining_header",
            "LIMIT_REMAINING_HEADER",
            &mut args.remaining_header,
        ),
        ("reset_header", "LIMIT_RESET_HEADER", &mut args.reset_header),
    ];
    for (id, name, header) in names {
        if let (false, Some(v)) = (given(id), set(name)) {
            *header = v;
        }
    }
    Ok(())
}

/// The near-limit ratio, how an over-limit request counts, and Redis's timeout.
fn tuning(
    args: &mut Args,
    given: &dyn Fn(&str) -> bool,
    set: &dyn Fn(&str) -> Option<String>,
) -> Result<(), String> {
    if let (false, Some(v)) = (given("near_limit_ratio"), set("NEAR_LIMIT_RATIO")) {
        args.near_limit_ratio = match v.parse::<f64>() {
            Ok(r) if (0.0..=1.0).contains(&r) => r,
            _ => {
                return Err(format!(
                    "NEAR_LIMIT_RATIO {v:?}: expected a ratio between 0 and 1"
                ))
            }
        };
    }
    let stop = "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT";
    if let (false, Some(v)) = (given("counting"), set(stop)) {
        args.counting = match truthy(stop, &v)? {
            true => Counting::AllOrNothing,
            false => Counting::PerDescriptor,
        };
    }
    if let (false, Some(v)) = (given("redis_key_prefix"), set("CACHE_KEY_PREFIX")) {
        args.redis.redis_key_prefix = v;
    }
    if let (false, Some(v)) = (given("redis_timeout_ms"), set("REDIS_TIMEOUT")) {
        args.redis.redis_timeout_ms = go_duration_ms(&v).ok_or_else(|| {
            format!(
                "REDIS_TIMEOUT {v:?}: expected a duration of at least 1ms, such as 10s or 250ms"
            )
        })?;
    }
    Ok(())
}

/// The statsd sink: `USE_STATSD` with `STATSD_HOST`/`STATSD_PORT`, and its flush interval.
fn statsd(
    args: &mut Args,
    given: &dyn Fn(&str) -> bool,
    set: &dyn Fn(&str) -> Option<String>,
) -> Result<(), String> {
    let use_statsd = match set("USE_STATSD") {
        Some(v) => truthy("USE_STATSD", &v)?,
        None => false,
    };
    let (host, port) = (set("STATSD_HOST"), set("STATSD_PORT"));
    if use_statsd && !given("statsd_addr") {
        let host = host.unwrap_or_else(|| "localhost".to_owned());
        let port = port.unwrap_or_else(|| "8125".to_owned());
        if port.parse::<u16>().is_err() {
            return Err(format!("STATSD_PORT {port:?}: expected a port number"));
        }
        args.statsd_addr = Some(format!("{host}:{port}"));
    }
    if let (false, Some(v)) = (given("statsd_flush_ms"), set("STATS_FLUSH_INTERVAL")) {
        args.statsd_flush_ms = go_duration_ms(&v).ok_or_else(|| {
            format!("STATS_FLUSH_INTERVAL {v:?}: expected a duration such as 10s")
        })?;
    }
    Ok(())
}

/// The reference's own metrics listener: `PROMETHEUS_ADDR` (`:9090`, every interface) and
/// `PROMETHEUS_PATH`, with `USE_PROMETHEUS=true`.
fn prometheus(
    args: &mut Args,
    given: &dyn Fn(&str) -> bool,
    set: &dyn Fn(&str) -> Option<String>,
) -> Result<(), String> {
    let on = match set("USE_PROMETHEUS") {
        Some(v) => truthy("USE_PROMETHEUS", &v)?,
        None => false,
    };
    if !on {
        return Ok(());
    }
    if !given("metrics_addr") {
        let text = set("PROMETHEUS_ADDR").unwrap_or_else(|| ":9090".to_owned());
        let full = match text.strip_prefix(':') {
            Some(port) => format!("0.0.0.0:{port}"),
            None => text.clone(),
        };
        args.metrics_addr = Some(
            full.parse()
                .map_err(|_| format!("PROMETHEUS_ADDR {text:?}: expected :PORT or IP:PORT"))?,
        );
    }
    if let (false, Some(v)) = (given("metrics_path"), set("PROMETHEUS_PATH")) {
        args.metrics_path =
            crate::cli::metrics_path(&v).map_err(|e| format!("PROMETHEUS_PATH {e}"))?;
    }
    Ok(())
}

/// A refusal's message: what was set, and what to use.
fn refusal(setting: &Setting, allowed: &[&str], value: &str) -> String {
    if allowed.is_empty() {
        // Any value is refused, and may be a secret: name the variable only.
        format!("{} is set: {}", setting.name, plain(setting.here))
    } else {
        format!(
            "{}={value:?} is not supported: {}",
            setting.name,
            plain(setting.here)
        )
    }
}

/// `HOST:PORT` from a pair of variables, either alone taking the reference's default
/// for the other (`0.0.0.0`, `default_port`); `None` when neither is set.
fn address(
    set: &dyn Fn(&str) -> Option<String>,
    host: &str,
    port: &str,
    default_port: u16,
) -> Result<Option<SocketAddr>, String> {
    let (h, p) = (set(host), set(port));
    if h.is_none() && p.is_none() {
        return Ok(None);
    }
    let port_number = match &p {
        None => default_port,
        Some(v) => v
            .parse::<u16>()
            .map_err(|_| format!("{port} {v:?}: expected a port number"))?,
    };
    let h = h.unwrap_or_else(|| "0.0.0.0".to_owned());
    let text = match h.contains(':') {
        true => format!("[{h}]:{port_number}"),
        false => format!("{h}:{port_number}"),
    };
    text.parse()
        .map(Some)
        .map_err(|_| format!("{host} {h:?}: expected an IP address"))
}

/// The configuration directory the reference reads:
/// `RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY`, with its defaults, when
/// `RUNTIME_ROOT` or `RUNTIME_SUBDIRECTORY` is set.
fn runtime_path(set: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let (root, sub) = (set("RUNTIME_ROOT"), set("RUNTIME_SUBDIRECTORY"));
    if root.is_none() && sub.is_none() {
        return None;
    }
    let mut path = PathBuf::from(root.unwrap_or_else(|| "/srv/runtime_data/current".into()));
    if let Some(sub) = sub {
        path.push(sub);
    }
    path.push(set("RUNTIME_APPDIRECTORY").unwrap_or_else(|| "config".into()));
    Some(path)
}

/// Markdown links as their text, for log lines and error messages.
fn plain(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len());
    let mut rest = markdown;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find("](").map(|i| open + i) else {
            break;
        };
        let Some(end) = rest[close..].find(')').map(|i| close + i) else {
            break;
        };
        out.push_str(&rest[..open]);
        out.push_str(&rest[open + 1..close]);
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests;
