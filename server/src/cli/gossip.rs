//! `--store` and the gossip store's flags (see [`crate::store::gossip`]).

use crate::store::gossip::node::GossipOptions;
use clap::{Args, ValueEnum};
use std::net::SocketAddr;
use std::time::Duration;

/// Which store holds the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StoreKind {
    /// In this process (the default without a Redis target).
    Memory,
    /// In Redis (the default with a Redis target, which it needs).
    Redis,
    /// In this process, each node of a fleet counting its part and gossiping it to its
    /// peers: a fleet-wide limit with no central store, within a stated bound.
    Gossip,
}

/// The store choice and the gossip store's flags.
#[derive(Debug, Clone, Args)]
pub struct GossipArgs {
    /// Where counters live: memory, redis or gossip. Without it: redis when a Redis
    /// target is given, else memory.
    #[arg(long, value_enum, value_name = "STORE")]
    pub store: Option<StoreKind>,

    /// UDP address the gossip store listens on, and advertises to its peers unless
    /// --gossip-advertise-addr says otherwise (so then not 0.0.0.0).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7946")]
    pub gossip_addr: SocketAddr,

    /// UDP address peers are told to reach this node at, when it is not --gossip-addr
    /// (listening on 0.0.0.0, behind a NAT or a relay). Default: --gossip-addr.
    #[arg(long, value_name = "ADDR")]
    pub gossip_advertise_addr: Option<SocketAddr>,

    /// Peers to join through, comma-separated HOST:PORT; a DNS name is resolved to every
    /// address it has (a Kubernetes headless Service), and again periodically.
    #[arg(long, value_name = "HOST:PORT,...", value_delimiter = ',')]
    pub gossip_seeds: Vec<String>,

    /// How often a node gossips with a few peers, in milliseconds: a count reaches every
    /// node in about this times log2(nodes) rounds.
    #[arg(long, value_name = "MS", default_value_t = 200, value_parser = clap::value_parser!(u64).range(10..=60_000))]
    pub gossip_interval_ms: u64,

    /// Only nodes with the same cluster id gossip together.
    #[arg(long, value_name = "ID", default_value = "floodgate")]
    pub gossip_cluster_id: String,

    /// This node's name among its peers. Default: the host name and the gossip address.
    #[arg(long, value_name = "ID")]
    pub gossip_node_id: Option<String>,
}

impl GossipArgs {
    /// The gossip options, when `--store gossip` asks for the gossip store; an error when
    /// the flags contradict each other (`redis_target`: a Redis target was given).
    pub fn resolve(&self, redis_target: bool) -> Result<Option<GossipOptions>, String> {
        match (self.store, redis_target) {
            (Some(StoreKind::Gossip), true) => {
                Err("--store gossip keeps no counter in Redis: give no Redis target".into())
            }
            (Some(StoreKind::Memory), true) => {
                Err("--store memory keeps no counter in Redis: give no Redis target".into())
            }
            (Some(StoreKind::Redis), false) => {
                Err("--store redis needs a Redis target (--redis-url and the others)".into())
            }
            (Some(StoreKind::Gossip), false) => Ok(Some(self.options())),
            _ => Ok(None),
        }
    }

    fn options(&self) -> GossipOptions {
        let node_id = self
            .gossip_node_id
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| format!("{}-{}", hostname(), self.advertised()));
        GossipOptions {
            addr: self.gossip_addr,
            advertise: self.advertised(),
            seeds: self
                .gossip_seeds
                .iter()
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect(),
            interval: Duration::from_millis(self.gossip_interval_ms),
            cluster_id: self.gossip_cluster_id.clone(),
            node_id,
        }
    }
}

impl GossipArgs {
    /// The address peers reach this node at.
    fn advertised(&self) -> SocketAddr {
        self.gossip_advertise_addr.unwrap_or(self.gossip_addr)
    }
}

/// The host's name (Linux), for a default node id; `floodgate` where it cannot be read.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "floodgate".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        gossip: GossipArgs,
    }

    fn parse(argv: &[&str]) -> GossipArgs {
        let mut all = vec!["x"];
        all.extend_from_slice(argv);
        Cli::try_parse_from(all).map(|c| c.gossip).expect("parses")
    }

    #[test]
    fn gossip_takes_its_flags() {
        let a = parse(&[
            "--store",
            "gossip",
            "--gossip-addr",
            "10.0.0.1:7000",
            "--gossip-seeds",
            "a:7000, seeds.ns.svc:7000,",
            "--gossip-interval-ms",
            "50",
            "--gossip-cluster-id",
            "web",
            "--gossip-node-id",
            "n1",
        ]);
        let o = a.resolve(false).expect("valid").expect("gossip");
        assert_eq!(o.addr, "10.0.0.1:7000".parse().expect("addr"));
        assert_eq!(
            o.advertise, o.addr,
            "advertised where it listens by default"
        );
        assert_eq!(o.seeds, ["a:7000", "seeds.ns.svc:7000"]);
        assert_eq!(o.interval, Duration::from_millis(50));
        assert_eq!((o.cluster_id.as_str(), o.node_id.as_str()), ("web", "n1"));
    }

    #[test]
    fn the_node_id_defaults_to_host_and_address() {
        let o = parse(&["--store", "gossip"])
            .resolve(false)
            .unwrap_or_default();
        let id = o.map(|o| o.node_id).unwrap_or_default();
        assert!(id.ends_with("-127.0.0.1:7946"), "{id}");
    }

    #[test]
    fn a_node_may_advertise_another_address_than_it_listens_on() {
        let o = parse(&[
            "--store",
            "gossip",
            "--gossip-addr",
            "0.0.0.0:7946",
            "--gossip-advertise-addr",
            "10.0.0.7:7946",
        ])
        .resolve(false)
        .unwrap_or_default()
        .expect("gossip");
        assert_eq!(o.addr, "0.0.0.0:7946".parse().expect("addr"));
        assert_eq!(o.advertise, "10.0.0.7:7946".parse().expect("addr"));
        assert!(o.node_id.ends_with("-10.0.0.7:7946"), "{}", o.node_id);
    }

    #[test]
    fn contradictions_are_refused() {
        assert!(parse(&["--store", "gossip"]).resolve(true).is_err());
        assert!(parse(&["--store", "memory"]).resolve(true).is_err());
        assert!(parse(&["--store", "redis"]).resolve(false).is_err());
        assert_eq!(parse(&[]).resolve(true), Ok(None));
        assert!(Cli::try_parse_from(["x", "--gossip-interval-ms", "0"]).is_err());
    }
}
