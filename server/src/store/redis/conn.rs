//! The connection to Redis: one auto-reconnecting multiplexed connection to a single
//! Redis, or a cluster client whose connection the probe (re)establishes.

use super::deadline::RedisClock;
use super::failure::Failure;
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
}

impl Conn {
    /// A lazy connection to `options.target` (nothing is sent yet); errors only for an
    /// unusable address, naming the flag it came from.
    pub(super) fn open(options: &RedisOptions) -> Result<Conn, String> {
        let t = options.timeout;
        match &options.target {
            Target::Single(url) => {
                let client = redis::Client::open(url.as_str())
                    .map_err(|e| format!("--redis-url {url}: {e}"))?;
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(t))
                    .set_response_timeout(Some(t))
                    .set_number_of_retries(1)
                    .set_min_delay(Duration::from_millis(50))
                    .set_max_delay(Duration::from_secs(1));
                let manager = ConnectionManager::new_lazy_with_config(client, config)
                    .map_err(|e| format!("--redis-url {url}: {e}"))?;
                Ok(Conn::Single(manager))
            }
            Target::Cluster(seeds) => {
                let client = ClusterClientBuilder::new(seeds.iter().map(String::as_str))
                    .connection_timeout(t)
                    .response_timeout(t)
                    .retries(1)
                    .build()
                    .map_err(|e| format!("--redis-cluster {}: {e}", seeds.join(",")))?;
                Ok(Conn::Cluster {
                    client: Box::new(client),
                    conn: Mutex::new(None),
                })
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
            Conn::Single(manager) => {
                let mut conn = manager.clone();
                let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(&mut conn).await?;
                let received = redis_clock.local_us();
                let redis_us = secs.saturating_mul(1_000_000).saturating_add(micros);
                redis_clock.observe(redis_us, received);
            }
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
}
