//! The Redis store's flags, and the reference service's environment variables beside them.
//!
//! A flag wins over a variable. The variables keep their reference meaning, so a
//! deployment of envoyproxy/ratelimit moves over unchanged: `REDIS_TYPE` (`SINGLE`,
//! `CLUSTER`, `SENTINEL`) with `REDIS_URL` (`HOST:PORT`; `HOST:PORT,...`;
//! `MASTER,HOST:PORT,...`), `REDIS_TLS`, `REDIS_TLS_CACERT`, `REDIS_TLS_CLIENT_CERT`,
//! `REDIS_TLS_CLIENT_KEY`, `REDIS_TLS_SKIP_HOSTNAME_VERIFICATION`, `REDIS_AUTH` and
//! `REDIS_SENTINEL_AUTH` (`password` or `username:password`). `REDIS_URL` is read only
//! when no target flag is given; it may also be a `redis://` URL.
//!
//! No flag takes a password: argv is visible to every local user (`ps`). A password
//! comes from a file, a variable, or (still accepted, with a warning) the URL.

use crate::store::redis::target::Target;
use crate::store::redis::{Access, Auth, RedisOptions, TlsMaterial};
use crate::store::Counting;
use clap::Args;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The Redis store's flags.
#[derive(Debug, Clone, Args)]
pub struct RedisArgs {
    /// Keep counters in Redis instead of in memory, so that every replica shares them:
    /// redis://HOST:PORT[/DB], or rediss:// for TLS. Credentials may be in the URL
    /// (redis://USER:PASSWORD@HOST), but prefer --redis-password-file or REDIS_AUTH.
    /// Without a target flag, REDIS_TYPE and REDIS_URL are read from the environment.
    #[arg(long, value_name = "URL", conflicts_with_all = ["redis_cluster", "redis_sentinel"])]
    pub redis_url: Option<String>,

    /// Keep counters in a Redis Cluster, found through these seed nodes: comma-separated
    /// redis://HOST:PORT (or rediss://) URLs (any few nodes of the cluster).
    #[arg(
        long,
        value_name = "URLS",
        value_delimiter = ',',
        conflicts_with = "redis_sentinel"
    )]
    pub redis_cluster: Vec<String>,

    /// Keep counters in the master that these sentinels name (comma-separated
    /// redis://HOST:PORT URLs, or rediss:// when sentinels and data nodes speak TLS), and
    /// follow it across failovers. Needs --redis-sentinel-master.
    #[arg(
        long,
        value_name = "URLS",
        value_delimiter = ',',
        requires = "redis_sentinel_master"
    )]
    pub redis_sentinel: Vec<String>,

    /// The name the sentinels monitor the master under.
    #[arg(long, value_name = "NAME", requires = "redis_sentinel")]
    pub redis_sentinel_master: Option<String>,

    /// A file holding the data nodes' password (all of it, less a final line break; the
    /// user, if any, in the URL). Environment: REDIS_AUTH (password or user:password).
    #[arg(long, value_name = "PATH")]
    pub redis_password_file: Option<PathBuf>,

    /// A file holding the sentinels' own password. Environment: REDIS_SENTINEL_AUTH.
    #[arg(long, value_name = "PATH")]
    pub redis_sentinel_password_file: Option<PathBuf>,

    /// PEM CA certificates a rediss:// server's certificate must chain to (default: the
    /// system's roots). Environment: REDIS_TLS_CACERT.
    #[arg(long, value_name = "PATH")]
    pub redis_tls_ca_file: Option<PathBuf>,

    /// PEM client certificate chain presented to Redis (with --redis-tls-key-file).
    /// Environment: REDIS_TLS_CLIENT_CERT.
    #[arg(long, value_name = "PATH")]
    pub redis_tls_cert_file: Option<PathBuf>,

    /// PEM private key of --redis-tls-cert-file. Environment: REDIS_TLS_CLIENT_KEY.
    #[arg(long, value_name = "PATH")]
    pub redis_tls_key_file: Option<PathBuf>,

    /// Verify Redis's certificate chain but not that it names the host (for services
    /// whose certificates name something else). Environment:
    /// REDIS_TLS_SKIP_HOSTNAME_VERIFICATION.
    #[arg(long)]
    pub redis_tls_skip_hostname_verification: bool,

    /// The longest one Redis call may take, connecting included, before the request answers
    /// UNAVAILABLE, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    pub redis_timeout_ms: u64,

    /// Put before every Redis key, so that deployments sharing one Redis count apart (the
    /// reference's `CACHE_KEY_PREFIX`): at most 64 printable ASCII bytes, no space, `{`
    /// or `}`.
    #[arg(long, value_name = "PREFIX", default_value = "")]
    pub redis_key_prefix: String,

    /// Redis calls allowed in flight at once; beyond that, requests answer UNAVAILABLE at
    /// once instead of queueing (bounds memory while Redis is slow or away).
    #[arg(long, value_name = "CALLS", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
    pub redis_max_in_flight: u32,
}

/// Reads a file, its error naming the flag or variable (first argument) that gave it.
type ReadNamed<'a> = dyn Fn(&str, &Path) -> Result<Vec<u8>, String> + 'a;

/// Where a setting came from, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// A flag.
    Flag,
    /// An environment variable.
    Environment,
}

/// The Redis store's options resolved from flags and environment.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The options, `None` for the memory store.
    pub options: Option<RedisOptions>,
    /// Whether the target's password was given in a URL on the command line (worth a
    /// warning: `ps` shows it).
    pub password_on_argv: bool,
}

impl RedisArgs {
    /// Resolves the Redis options from these flags, the environment as `env` reads it, and
    /// files as `read` reads them. Errors name the flag or variable at fault.
    pub fn resolve(
        &self,
        counting: Counting,
        env: &dyn Fn(&str) -> Option<String>,
        read: &dyn Fn(&Path) -> std::io::Result<Vec<u8>>,
    ) -> Result<Resolved, String> {
        let Some((target, origin)) = self.target(env)? else {
            return Ok(Resolved {
                options: None,
                password_on_argv: false,
            });
        };
        let file =
            |flag: &str, p: &Path| read(p).map_err(|e| format!("{flag} {}: {e}", p.display()));
        let text = |flag: &str, p: &Path| {
            String::from_utf8(file(flag, p)?)
                .map_err(|_| format!("{flag} {}: not UTF-8 text", p.display()))
        };
        let auth = match (&self.redis_password_file, env("REDIS_AUTH")) {
            (Some(p), _) if target.has_password() => {
                return Err(format!(
                    "--redis-password-file {} and a password in the Redis URL: give one",
                    p.display()
                ))
            }
            (Some(p), _) => Auth::password(&text("--redis-password-file", p)?),
            (None, _) if target.has_password() => Auth::default(),
            (None, Some(v)) if !v.is_empty() => Auth::from_reference(&v),
            (None, _) => Auth::default(),
        };
        let sentinel_auth = match (
            &self.redis_sentinel_password_file,
            env("REDIS_SENTINEL_AUTH"),
        ) {
            (Some(p), _) => Auth::password(&text("--redis-sentinel-password-file", p)?),
            (None, Some(v)) if !v.is_empty() => Auth::from_reference(&v),
            (None, _) => Auth::default(),
        };
        if sentinel_auth.is_set() && !matches!(target, Target::Sentinel { .. }) {
            return Err("a sentinel password is given but the target is not Sentinel".into());
        }
        let tls = self.tls(&target, env, &file)?;
        if !crate::store::redis::key::valid_prefix(&self.redis_key_prefix) {
            return Err(format!(
                "--redis-key-prefix {:?}: at most 64 printable ASCII bytes, no space, `{{` or `}}`",
                self.redis_key_prefix
            ));
        }
        Ok(Resolved {
            password_on_argv: origin == Origin::Flag && target.has_password(),
            options: Some(RedisOptions {
                target,
                access: Access {
                    auth,
                    sentinel_auth,
                    tls,
                },
                timeout: Duration::from_millis(self.redis_timeout_ms),
                max_in_flight: self.redis_max_in_flight as usize,
                counting,
                key_prefix: self.redis_key_prefix.clone(),
            }),
        })
    }

    /// The target from the flags, else from `REDIS_TYPE`/`REDIS_URL`, else none.
    fn target(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<(Target, Origin)>, String> {
        if let Some(url) = &self.redis_url {
            return Ok(Some((Target::Single(url.clone()), Origin::Flag)));
        }
        if !self.redis_cluster.is_empty() {
            return Ok(Some((
                Target::Cluster(self.redis_cluster.clone()),
                Origin::Flag,
            )));
        }
        if let (false, Some(master)) = (self.redis_sentinel.is_empty(), &self.redis_sentinel_master)
        {
            return Ok(Some((
                Target::Sentinel {
                    master: master.clone(),
                    sentinels: self.redis_sentinel.clone(),
                },
                Origin::Flag,
            )));
        }
        let Some(url) = env("REDIS_URL").filter(|u| !u.is_empty()) else {
            return Ok(None);
        };
        let tls = match env("REDIS_TLS") {
            Some(v) => truthy("REDIS_TLS", &v)?,
            None => false,
        };
        let kind = env("REDIS_TYPE").unwrap_or_else(|| "SINGLE".into());
        let list: Vec<String> = url.split(',').map(|u| with_scheme(u.trim(), tls)).collect();
        let target = match kind.to_ascii_uppercase().as_str() {
            "SINGLE" => Target::Single(with_scheme(&url, tls)),
            "CLUSTER" => Target::Cluster(list),
            "SENTINEL" => {
                let mut parts = url.split(',').map(str::trim);
                let master = parts.next().unwrap_or_default().to_owned();
                let sentinels: Vec<String> = parts.map(|u| with_scheme(u, tls)).collect();
                if master.is_empty() || sentinels.is_empty() {
                    return Err(
                        "REDIS_URL: REDIS_TYPE=SENTINEL expects MASTER,HOST:PORT[,HOST:PORT...]"
                            .into(),
                    );
                }
                Target::Sentinel { master, sentinels }
            }
            _ => {
                return Err(format!(
                    "REDIS_TYPE {kind:?}: expected SINGLE, CLUSTER or SENTINEL"
                ))
            }
        };
        Ok(Some((target, Origin::Environment)))
    }

    /// The TLS files (flags, else variables), refused for a target that is not TLS.
    fn tls(
        &self,
        target: &Target,
        env: &dyn Fn(&str) -> Option<String>,
        file: &ReadNamed<'_>,
    ) -> Result<TlsMaterial, String> {
        let pick = |flag: &Option<PathBuf>, flag_name: &'static str, var: &'static str| match (
            flag,
            env(var).filter(|v| !v.is_empty()),
        ) {
            (Some(p), _) => Some((p.clone(), flag_name)),
            (None, Some(v)) => Some((PathBuf::from(v), var)),
            (None, None) => None,
        };
        let ca = pick(
            &self.redis_tls_ca_file,
            "--redis-tls-ca-file",
            "REDIS_TLS_CACERT",
        );
        let cert = pick(
            &self.redis_tls_cert_file,
            "--redis-tls-cert-file",
            "REDIS_TLS_CLIENT_CERT",
        );
        let key = pick(
            &self.redis_tls_key_file,
            "--redis-tls-key-file",
            "REDIS_TLS_CLIENT_KEY",
        );
        let skip = self.redis_tls_skip_hostname_verification
            || match env("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION") {
                Some(v) => truthy("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", &v)?,
                None => false,
            };
        if !target.uses_tls() {
            if let Some((_, name)) = [&ca, &cert, &key].into_iter().flatten().next() {
                return Err(format!(
                    "{name} is given but the Redis target is not TLS (use rediss:// or REDIS_TLS=true)"
                ));
            }
            if skip {
                return Err(
                    "skipping the host name check needs a TLS Redis target (rediss://)".into(),
                );
            }
        }
        let client = match (cert, key) {
            (Some((c, cn)), Some((k, kn))) => Some((file(cn, &c)?, file(kn, &k)?)),
            (None, None) => None,
            (Some((_, n)), None) | (None, Some((_, n))) => {
                return Err(format!("{n} needs both a client certificate and its key"))
            }
        };
        Ok(TlsMaterial {
            ca_pem: ca.map(|(p, n)| file(n, &p)).transpose()?,
            client,
            skip_hostname_verification: skip,
        })
    }
}

/// `host:port` in the reference's form becomes a URL; a URL stays as it is.
fn with_scheme(u: &str, tls: bool) -> String {
    if u.contains("://") {
        u.to_owned()
    } else if tls {
        format!("rediss://{u}")
    } else {
        format!("redis://{u}")
    }
}

/// A boolean variable as the reference reads it (Go's `strconv.ParseBool`).
pub(super) fn truthy(name: &str, v: &str) -> Result<bool, String> {
    match v {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" | "" => Ok(false),
        _ => Err(format!("{name} {v:?}: expected true or false")),
    }
}

#[cfg(test)]
mod tests;
