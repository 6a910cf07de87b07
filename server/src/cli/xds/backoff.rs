//! The xDS client's back-off: `--config-xds-backoff-*`, or the reference's
//! `XDS_CLIENT_BACKOFF_*` variables (a flag wins), with the reference's defaults.

use crate::cli::duration::go_duration_ms;
use crate::cli::redis::truthy;
use crate::xds::session::Backoff;
use std::time::Duration;

/// How long the xDS client waits before opening a stream again.
#[derive(Debug, Clone, clap::Args)]
pub struct BackoffArgs {
    /// The first wait after the stream to the management server ended or could not be
    /// opened, a duration (`10s`, `500ms`, `1m`); doubled after each failure, back to this
    /// once a response arrived (XDS_CLIENT_BACKOFF_INITIAL_INTERVAL).
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub config_xds_backoff_initial: String,

    /// The longest wait between two attempts (XDS_CLIENT_BACKOFF_MAX_INTERVAL).
    #[arg(long, value_name = "DURATION", default_value = "60s")]
    pub config_xds_backoff_max: String,

    /// Each wait is drawn within this fraction of it either side, 0 to 1, so servers
    /// that lost the same management server do not reconnect in step
    /// (XDS_CLIENT_BACKOFF_RANDOM_FACTOR).
    #[arg(long, value_name = "FACTOR", default_value_t = Backoff::SPREAD)]
    pub config_xds_backoff_random_factor: f64,

    /// `false`: exact waits, the random factor unused (XDS_CLIENT_BACKOFF_JITTER).
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub config_xds_backoff_jitter: bool,
}

/// Each flag, its variable.
const INITIAL: (&str, &str) = (
    "config_xds_backoff_initial",
    "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL",
);
const MAX: (&str, &str) = ("config_xds_backoff_max", "XDS_CLIENT_BACKOFF_MAX_INTERVAL");
const FACTOR: (&str, &str) = (
    "config_xds_backoff_random_factor",
    "XDS_CLIENT_BACKOFF_RANDOM_FACTOR",
);
const JITTER: (&str, &str) = ("config_xds_backoff_jitter", "XDS_CLIENT_BACKOFF_JITTER");

/// Fills `b` from the variables where the flag was not `given`; a value that is not a
/// duration, number or boolean is refused with the variable's name.
pub fn apply(
    b: &mut BackoffArgs,
    given: &dyn Fn(&str) -> bool,
    set: &dyn Fn(&str) -> Option<String>,
) -> Result<(), String> {
    let from =
        |(id, name): (&str, &'static str)| set(name).filter(|_| !given(id)).map(|v| (name, v));
    if let Some((_, v)) = from(INITIAL) {
        b.config_xds_backoff_initial = v;
    }
    if let Some((_, v)) = from(MAX) {
        b.config_xds_backoff_max = v;
    }
    if let Some((name, v)) = from(FACTOR) {
        b.config_xds_backoff_random_factor = v
            .trim()
            .parse()
            .map_err(|_| format!("{name} {v:?}: expected a number between 0 and 1"))?;
    }
    if let Some((name, v)) = from(JITTER) {
        b.config_xds_backoff_jitter = truthy(name, &v)?;
    }
    Ok(())
}

impl BackoffArgs {
    /// The client's back-off; an error names the flag and its variable.
    pub fn resolve(&self) -> Result<Backoff, String> {
        let setting = |(id, name): (&str, &str)| format!("--{} ({name})", id.replace('_', "-"));
        let duration = |which: (&str, &str), text: &str| {
            go_duration_ms(text)
                .map(Duration::from_millis)
                .ok_or_else(|| {
                    format!(
                        "{} {text:?}: expected a duration longer than zero, e.g. 10s or 500ms",
                        setting(which)
                    )
                })
        };
        let first = duration(INITIAL, &self.config_xds_backoff_initial)?;
        let max = duration(MAX, &self.config_xds_backoff_max)?;
        let spread = match self.config_xds_backoff_jitter {
            true => self.config_xds_backoff_random_factor,
            false => 0.0,
        };
        Backoff::new(first, max, spread).map_err(|why| {
            let culprit = if max < first {
                format!("{} and {}", setting(INITIAL), setting(MAX))
            } else if first.is_zero() {
                setting(INITIAL)
            } else {
                setting(FACTOR)
            };
            format!("{culprit}: {why}")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn args() -> BackoffArgs {
        BackoffArgs {
            config_xds_backoff_initial: "10s".into(),
            config_xds_backoff_max: "60s".into(),
            config_xds_backoff_random_factor: Backoff::SPREAD,
            config_xds_backoff_jitter: true,
        }
    }

    fn with(vars: &[(&str, &str)], flags: &[&str]) -> Result<Backoff, String> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut b = args();
        apply(&mut b, &|id| flags.contains(&id), &|n| map.get(n).cloned())?;
        b.resolve()
    }

    #[test]
    fn the_defaults_are_the_references() {
        assert_eq!(with(&[], &[]).unwrap(), Backoff::default());
    }

    #[test]
    fn the_variables_set_the_waits_and_jitter_false_makes_them_exact() {
        let mut b = with(
            &[
                (INITIAL.1, "250ms"),
                (MAX.1, "1s"),
                (FACTOR.1, "0.9"),
                (JITTER.1, "false"),
            ],
            &[],
        )
        .unwrap();
        let waits: Vec<u128> = (0..4).map(|_| b.failed(0.0).as_millis()).collect();
        assert_eq!(waits, [250, 500, 1000, 1000]);
        let mut spread = with(&[(INITIAL.1, "1s"), (FACTOR.1, "0.2")], &[]).unwrap();
        assert_eq!(spread.failed(0.0), Duration::from_millis(800));
    }

    #[test]
    fn a_flag_wins_over_its_variable() {
        // The flag's value is the default here; the variable is not read.
        let b = with(&[(INITIAL.1, "nonsense")], &[INITIAL.0]).unwrap();
        assert_eq!(b, Backoff::default());
    }

    #[test]
    fn a_bad_value_is_refused_with_the_variable_s_name() {
        for (vars, named) in [
            (vec![(INITIAL.1, "ten")], INITIAL.1),
            (vec![(INITIAL.1, "0s")], INITIAL.1),
            (vec![(MAX.1, "5")], MAX.1),
            (vec![(FACTOR.1, "half")], FACTOR.1),
            (vec![(FACTOR.1, "1.5")], FACTOR.1),
            (vec![(JITTER.1, "maybe")], JITTER.1),
            (vec![(INITIAL.1, "2m"), (MAX.1, "1m")], MAX.1),
        ] {
            let err = with(&vars, &[]).unwrap_err();
            assert!(err.contains(named), "{vars:?}: {err}");
        }
    }
}
