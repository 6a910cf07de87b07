//! Redis Sentinel: the master is found through the sentinels and followed across failovers.
//!
//! Every probe (each [`super::PROBE_EVERY`]) asks the sentinels, in order, for the master's
//! address (`SENTINEL GET-MASTER-ADDR-BY-NAME`); the first that answers is believed. When
//! the address differs from the one in use, a connection to the new address is made,
//! checked with `ROLE` (it must say `master`), and swapped in; calls already sent on the
//! old connection finish or fail there. Meanwhile the outage rules apply as for a single
//! Redis: calls to a dead master time out and mark the store down, a demoted master's
//! `READONLY` answers count as connectivity failures, and `UNAVAILABLE` is answered until
//! the new master is in use.
//!
//! Nothing is retried, so nothing is counted twice: a call is sent once, to one master.
//! What a failover can lose is what Redis replication can lose: writes the old master
//! acknowledged but had not yet sent to the replica that was promoted (asynchronous
//! replication; bound them with Redis's `min-replicas-max-lag`). Calls in flight when the
//! master died were answered `UNAVAILABLE` and may or may not have been applied: at most
//! `--redis-max-in-flight` of them.

use super::access::{self, Access};
use super::deadline::RedisClock;
use super::failure::Failure;
use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use redis::{AsyncConnectionConfig, IntoConnectionInfo};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// The connection in use and the address it goes to.
struct Current {
    addr: (String, u16),
    manager: ConnectionManager,
}

/// The sentinels, and the master's connection once found.
pub(super) struct Sentinel {
    master_name: String,
    /// One client per sentinel, with its cached connection.
    sentinels: Vec<(
        redis::Client,
        tokio::sync::Mutex<Option<MultiplexedConnection>>,
    )>,
    /// Whether the data nodes speak TLS (as the sentinels do: one scheme for both).
    tls: bool,
    access: Access,
    config: ConnectionManagerConfig,
    timeout: Duration,
    current: Mutex<Option<Current>>,
}

impl Sentinel {
    /// Clients for the sentinels (nothing is sent yet).
    pub(super) fn new(
        master_name: &str,
        sentinels: &[String],
        access: &Access,
        config: ConnectionManagerConfig,
        timeout: Duration,
    ) -> Result<Sentinel, String> {
        if sentinels.is_empty() {
            return Err("no sentinel given".into());
        }
        let clients = sentinels
            .iter()
            .map(|url| {
                let client = access::client(url, &access.sentinel_auth, &access.tls)?;
                Ok((client, tokio::sync::Mutex::new(None)))
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Sentinel {
            master_name: master_name.to_owned(),
            sentinels: clients,
            tls: sentinels.iter().any(|u| super::target::is_tls_url(u)),
            access: access.clone(),
            config,
            timeout,
            current: Mutex::new(None),
        })
    }

    /// The master's connection, or a connectivity failure before one is found.
    pub(super) fn master(&self) -> Result<ConnectionManager, Failure> {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|c| c.manager.clone())
            .ok_or_else(|| Failure::Connectivity("no master found through the sentinels".into()))
    }

    /// Asks the sentinels where the master is and, when it moved, connects there. A
    /// sentinel outage while the master in use still answers changes nothing.
    pub(super) async fn follow(&self, redis_clock: &RedisClock) -> Result<(), Failure> {
        let addr = match self.ask_sentinels().await {
            Ok(addr) => addr,
            Err(e) if self.master().is_ok() => {
                tracing::debug!(
                    error = e.message(),
                    "no sentinel answered; keeping the master in use"
                );
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let in_use = self
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|c| c.addr.clone());
        if in_use.as_ref() == Some(&addr) {
            return Ok(());
        }
        let manager = self.connect(&addr).await?;
        tracing::info!(
            master = %self.master_name,
            from = ?in_use.as_ref().map(|(h, p)| format!("{h}:{p}")),
            to = %format!("{}:{}", addr.0, addr.1),
            "Redis master found through the sentinels; using it"
        );
        // Another host's clock: estimate its offset afresh (see `deadline`).
        redis_clock.forget();
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) =
            Some(Current { addr, manager });
        Ok(())
    }

    /// The first answer of `SENTINEL GET-MASTER-ADDR-BY-NAME`, sentinels in order.
    async fn ask_sentinels(&self) -> Result<(String, u16), Failure> {
        let mut last = Failure::Connectivity("no sentinel answered".into());
        for (client, cached) in &self.sentinels {
            let mut cached = cached.lock().await;
            let mut conn = match cached.clone() {
                Some(c) => c,
                None => {
                    let config = AsyncConnectionConfig::new()
                        .set_connection_timeout(Some(self.timeout))
                        .set_response_timeout(Some(self.timeout));
                    match client
                        .get_multiplexed_async_connection_with_config(&config)
                        .await
                    {
                        Ok(c) => {
                            *cached = Some(c.clone());
                            c
                        }
                        Err(e) => {
                            last = e.into();
                            continue;
                        }
                    }
                }
            };
            let answer: Result<Option<(String, u16)>, _> = redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(&self.master_name)
                .query_async(&mut conn)
                .await;
            match answer {
                Ok(Some(addr)) => return Ok(addr),
                Ok(None) => {
                    last = Failure::Reply(format!(
                        "a sentinel does not know a master named {:?}",
                        self.master_name
                    ));
                }
                Err(e) => {
                    *cached = None;
                    last = e.into();
                }
            }
        }
        Err(last)
    }

    /// A connection to the master at `addr`, once it says it is one.
    async fn connect(&self, (host, port): &(String, u16)) -> Result<ConnectionManager, Failure> {
        let scheme = if self.tls { "rediss" } else { "redis" };
        let host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host.clone()
        };
        let info = format!("{scheme}://{host}:{port}/")
            .into_connection_info()
            .map_err(|e| Failure::Reply(format!("the sentinels' master address: {e}")))?;
        let client =
            access::client_for(access::with_auth(info, &self.access.auth), &self.access.tls)
                .map_err(Failure::Reply)?;
        let mut manager = ConnectionManager::new_lazy_with_config(client, self.config.clone())
            .map_err(Failure::from)?;
        let role: Vec<redis::Value> = redis::cmd("ROLE").query_async(&mut manager).await?;
        match role.first() {
            Some(redis::Value::BulkString(r)) if r == b"master" => Ok(manager),
            Some(redis::Value::SimpleString(r)) if r == "master" => Ok(manager),
            _ => Err(Failure::Connectivity(format!(
                "{host}:{port}, named master by the sentinels, is not (yet) a master"
            ))),
        }
    }
}
