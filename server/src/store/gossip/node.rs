//! This node as a chitchat peer: membership, failure detection and dissemination are
//! chitchat's (scuttlebutt reconciliation over UDP, phi-accrual failure detection); this
//! module only publishes the store's parts as this node's keys and reads the peers'.
//!
//! Every gossip round (`--gossip-interval-ms`) the loop writes the parts that changed
//! since the last round into this node's state (one chitchat key each: a part changed a
//! thousand times in a round is published once); about once a second it drops idle parts
//! and deletes their keys. A peer's part reaches the store as chitchat applies it (a key-change
//! listener, [`GossipStore::hear`]), from every node but this one, live or dead; the loop
//! drops the peers' idle parts about once a second.

use super::{wire, GossipStore};
use crate::clock::Clock;
use crate::store::CounterKey;
use chitchat::transport::{Socket, Transport, UdpTransport};
use chitchat::{
    spawn_chitchat, ChitchatConfig, ChitchatHandle, ChitchatId, ChitchatMessage,
    FailureDetectorConfig, Serializable,
};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::watch;

/// How long a dead node's parts stay in the cluster state, and so keep counting (each
/// only until its window ends): a day, longer than any but day-or-longer windows.
pub const DEAD_NODE_GRACE: Duration = Duration::from_secs(24 * 3_600);

/// How long a deleted key's tombstone is kept, so that every peer hears of the deletion.
/// A peer that misses it loses nothing: the part it holds is idle by then anyway.
const TOMBSTONE_GRACE: Duration = Duration::from_secs(60);

/// Where and with whom this node gossips (the `--gossip-*` flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GossipOptions {
    /// The UDP address gossip listens on.
    pub addr: SocketAddr,
    /// The UDP address peers are told to reach this node at (`addr` unless a NAT or a
    /// relay stands between).
    pub advertise: SocketAddr,
    /// Peers to join through: `HOST:PORT`s; a name is resolved to every address it has
    /// (a Kubernetes headless Service), again from time to time.
    pub seeds: Vec<String>,
    /// How often this node gossips with a few peers.
    pub interval: Duration,
    /// Only nodes of the same cluster id talk to each other.
    pub cluster_id: String,
    /// This node's name among its peers.
    pub node_id: String,
}

/// A label set of the gossip families: one fixed label, one of a few fixed values.
type Labels = [(&'static str, &'static str); 1];

/// What the gossip loop reports on `/metrics`. The families are registered on every
/// server (so one metrics table documents every store); their series exist only once a
/// gossip node runs ([`start`]).
#[derive(Debug, Default)]
pub struct GossipStats {
    peers: Family<Labels, Gauge>,
    keys: Family<Labels, Gauge>,
    bytes: Family<Labels, Counter>,
}

/// The series of a running node.
#[derive(Debug, Clone)]
struct Handles {
    live: Gauge,
    dead: Gauge,
    own_keys: Gauge,
    peer_keys: Gauge,
    sent: Counter,
    received: Counter,
}

impl GossipStats {
    /// Registers the families in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "floodgate_gossip_peers",
            "Gossip store: peers by state (live; dead, whose parts still count until their windows end)",
            self.peers.clone(),
        );
        registry.register(
            "floodgate_gossip_keys",
            "Gossip store: counter keys this node publishes (owner=self) and peers' parts it holds (owner=peers)",
            self.keys.clone(),
        );
        registry.register(
            "floodgate_gossip_bytes",
            "Gossip store: gossip bytes (UDP payloads) by direction",
            self.bytes.clone(),
        );
    }

    fn handles(&self) -> Handles {
        Handles {
            live: self.peers.get_or_create_owned(&[("state", "live")]),
            dead: self.peers.get_or_create_owned(&[("state", "dead")]),
            own_keys: self.keys.get_or_create_owned(&[("owner", "self")]),
            peer_keys: self.keys.get_or_create_owned(&[("owner", "peers")]),
            sent: self.bytes.get_or_create_owned(&[("direction", "sent")]),
            received: self.bytes.get_or_create_owned(&[("direction", "received")]),
        }
    }
}

/// A running gossip node. Dropping it stops chitchat's server (this node leaves the
/// cluster; peers soon call it dead); the publishing loop ends at `stop`.
pub struct Node {
    handle: ChitchatHandle,
}

impl Node {
    /// This node's identity in the cluster.
    pub fn id(&self) -> &ChitchatId {
        self.handle.chitchat_id()
    }
}

/// Joins the cluster as `options` say and starts the loop that publishes `store`'s parts
/// and reads the peers', until `stop` turns true.
pub async fn start<C: Clock>(
    store: Arc<GossipStore<C>>,
    options: GossipOptions,
    stats: &GossipStats,
    stop: watch::Receiver<bool>,
) -> Result<Node, String> {
    let stats = stats.handles();
    // A restarted node is a new generation: its old generation's parts keep counting
    // where peers hold them, and its new one starts from zero.
    let generation = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let config = ChitchatConfig {
        chitchat_id: ChitchatId::new(options.node_id.clone(), generation, options.advertise),
        cluster_id: options.cluster_id.clone(),
        gossip_interval: options.interval,
        listen_addr: options.addr,
        seed_nodes: options.seeds.clone(),
        failure_detector_config: FailureDetectorConfig {
            dead_node_grace_period: DEAD_NODE_GRACE,
            initial_interval: options.interval,
            ..FailureDetectorConfig::default()
        },
        marked_for_deletion_grace_period: TOMBSTONE_GRACE,
        catchup_callback: None,
        extra_liveness_predicate: None,
    };
    let transport = Counted(stats.clone());
    let handle = spawn_chitchat(config, Vec::new(), &transport)
        .await
        .map_err(|e| format!("gossip on {}: {e:#}", options.addr))?;
    listen(&handle, store.clone()).await;
    tokio::spawn(rounds(
        handle.chitchat(),
        store,
        stats,
        options.interval,
        stop,
    ));
    Ok(Node { handle })
}

/// Hands every peer's counter key to `store` as chitchat applies it. The listener runs
/// under chitchat's lock, so it only parses and stores.
async fn listen<C: Clock>(handle: &ChitchatHandle, store: Arc<GossipStore<C>>) {
    let me = handle.chitchat_id().clone();
    let chitchat = handle.chitchat();
    let c = chitchat.lock().await;
    c.subscribe_event(wire::PREFIX, move |event| {
        if *event.node == me {
            return;
        }
        // The key comes without its prefix; a peer's bytes are never trusted.
        let (Some(key), Some((tag, part))) = (
            CounterKey::from_hex(event.key),
            wire::parse_value(event.value),
        ) else {
            return;
        };
        store.hear(node_hash(event.node), key, tag, part);
    })
    .forever();
}

/// A node's identity as the store's view of its peers keys it (a generation of a node
/// is a node of its own).
fn node_hash(id: &ChitchatId) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    BuildHasherDefault::<DefaultHasher>::default().hash_one(id)
}

/// The loop: every `interval`, publish what changed; about once a second, forget the
/// peers' idle parts.
async fn rounds<C: Clock>(
    chitchat: Arc<tokio::sync::Mutex<chitchat::Chitchat>>,
    store: Arc<GossipStore<C>>,
    stats: Handles,
    interval: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let every = (Duration::from_secs(1).as_millis() / interval.as_millis().max(1)).max(1);
    let gauge = |g: &Gauge, n: usize| g.set(i64::try_from(n).unwrap_or(i64::MAX));
    for round in 0u128.. {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        let second = round % every == 0;
        if second {
            // As often as the memory store's sweep: it walks every part.
            store.sweep();
        }
        let outbox = store.take_outbox();
        let mut c = chitchat.lock().await;
        let own = c.self_node_state();
        for (key, value) in outbox {
            match value {
                Some(v) => own.set(wire::key(&key), v),
                None => own.delete(&wire::key(&key)),
            }
        }
        let me = c.self_chitchat_id().clone();
        let live = c.live_nodes().filter(|id| **id != me).count();
        let dead = c.dead_nodes().count();
        drop(c);
        store.set_fleet(u32::try_from(live + 1).unwrap_or(u32::MAX));
        gauge(&stats.live, live);
        gauge(&stats.dead, dead);
        gauge(&stats.own_keys, store.cells());
        if second {
            gauge(&stats.peer_keys, store.forget_idle_peers());
        }
    }
}

/// chitchat's UDP transport, counting the bytes it moves.
struct Counted(Handles);

#[async_trait::async_trait]
impl Transport for Counted {
    async fn open(&self, listen_addr: SocketAddr) -> anyhow::Result<Box<dyn Socket>> {
        let inner = UdpTransport.open(listen_addr).await?;
        Ok(Box::new(CountedSocket {
            inner,
            stats: self.0.clone(),
        }))
    }
}

struct CountedSocket {
    inner: Box<dyn Socket>,
    stats: Handles,
}

#[async_trait::async_trait]
impl Socket for CountedSocket {
    async fn send(&mut self, to: SocketAddr, msg: ChitchatMessage) -> anyhow::Result<()> {
        let len = msg.serialized_len() as u64;
        self.inner.send(to, msg).await?;
        self.stats.sent.inc_by(len);
        Ok(())
    }

    async fn recv(&mut self) -> anyhow::Result<(SocketAddr, ChitchatMessage)> {
        let (from, msg) = self.inner.recv().await?;
        let len = msg.serialized_len() as u64;
        self.stats.received.inc_by(len);
        Ok((from, msg))
    }
}
