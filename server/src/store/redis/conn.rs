//! The connection to Redis: one auto-reconnecting multiplexed connection to a single
//! Redis, a cluster client whose connection the probe (re)establishes, or the master
//! the sentinels name ([`super::sentinel`]). Credentials and TLS come from
//! [`super::access`]; errors show URLs redacted.

use super::access;
use super::deadline::RedisClock;
use super::failure::Failure;
use super::sentinel::Sentinel;
use super::target::redact;
use super::{RedisOptions, Target};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// How the store reaches Redis.
pub(super) enum Conn {
    /// One Redis: a shared, pipelined connection that reconnects by itself.
    Single(ConnectionManager),
    /// Redis Cluster: the client, and the connection once the probe has made one.
    Cluster {
        client: Box<ClusterClient>,
        conn: Mutex<Option<ClusterConnection>>,
    },
    /// A master found through Redis Sentinel, followed by the probe.
    Sentinel(Box<Sentinel>),
}

impl Conn {
    /// A lazy connection to `options.target` (nothing is sent yet); errors only for an
    /// unusable address, naming the flag it came from.
    pub(super) fn open(options: &RedisOptions) -> Result<Conn, String> {
        let t = options.timeout;
        let access = &options.access;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(t))
            .set_response_timeout(Some(t))
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_secs(1));
        match &options.target {
            Target::Single(url) => {
                let shown = redact(url);
                let client = access::client(url, &access.auth, &access.tls)
                    .map_err(|e| format!("--redis-url {shown}: {e}"))?;
                let manager = ConnectionManager::new_lazy_with_config(client, config)
                    .map_err(|e| format!("--redis-url {shown}: {e}"))?;
                Ok(Conn::Single(manager))
            }
            Target::Cluster(seeds) => {
                let shown = || {
                    seeds
                        .iter()
                        .map(|s| redact(s))
                        .collect::<Vec<_>>()
                        .join(",")
                };
                let mut builder = ClusterClientBuilder::new(seeds.iter().map(String::as_str))
                    .connection_timeout(t)
                    .response_timeout(t)
                    .retries(1);
                if let Some(user) = &access.auth.username {
                    builder = builder.username(user);
                }
                if let Some(password) = &access.auth.password {
                    builder = builder.password(password.expose());
                }
                if seeds.iter().any(|s| super::target::is_tls_url(s)) {
                    builder = builder
                        .certs(access.tls.certificates())
                        .danger_accept_invalid_hostnames(access.tls.skip_hostname_verification);
                }
                let client = builder
                    .build()
                    .map_err(|e| format!("--redis-cluster {}: {e}", shown()))?;
                Ok(Conn::Cluster {
                    client: Box::new(client),
                    conn: Mutex::new(None),
                })
            }
            Target::Sentinel { master, sentinels } => {
                let sentinel =
                    Sentinel::new(master, sentinels, access, config, t).map_err(|e| {
                        let shown: Vec<String> = sentinels.iter().map(|s| redact(s)).collect();
                        format!("--redis-sentinel {}: {e}", shown.join(","))
                    })?;
                Ok(Conn::Sentinel(Box::new(sentinel)))
            }
        }
    }

    /// The cluster connection the probe made, or a connectivity failure before it has.
    pub(super) fn cluster(
        conn: &Mutex<Option<ClusterConnection>>,
    ) -> Result<ClusterConnection, Failure> {
        conn.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| Failure::Connectivity("not connected to the cluster".into()))
    }

    /// Connects if needed and `PING`s; a single Redis is asked `TIME` instead, which also
    /// tells `redis_clock` Redis's clock.
    pub(super) async fn ping(&self, redis_clock: &RedisClock) -> Result<(), Failure> {
        match self {
            Conn::Single(manager) => time(&mut manager.clone(), redis_clock).await?,
            Conn::Sentinel(sentinel) => time(&mut sentinel.master()?, redis_clock).await?,
            Conn::Cluster { client, conn } => {
                let current = conn.lock().unwrap_or_else(PoisonError::into_inner).clone();
                let mut c = match current {
                    Some(c) => c,
                    None => {
                        let c = client.get_async_connection().await?;
                        *conn.lock().unwrap_or_else(PoisonError::into_inner) = Some(c.clone());
                        c
                    }
                };
                redis::cmd("PING").query_async::<()>(&mut c).await?;
            }
        }
        Ok(())
    }

    /// Sentinel: asks where the master is and follows it (see [`Sentinel::follow`]);
    /// nothing to do for the other targets, whose addresses do not move.
    pub(super) async fn follow(&self, redis_clock: &RedisClock) -> Result<(), Failure> {
        match self {
            Conn::Sentinel(sentinel) => sentinel.follow(redis_clock).await,
            Conn::Single(_) | Conn::Cluster { .. } => Ok(()),
        }
    }
}

/// `TIME` on `conn`, which also tells `redis_clock` Redis's clock.
async fn time(conn: &mut ConnectionManager, redis_clock: &RedisClock) -> Result<(), Failure> {
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(conn).await?;
    let received = redis_clock.local_us();
    let redis_us = secs.saturating_mul(1_000_000).saturating_add(micros);
    redis_clock.observe(redis_us, received);
    Ok(())
}
