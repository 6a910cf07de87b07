//! A UDP relay between gossip nodes on loopback that a test can cut and restore: a
//! network partition made without root (no namespaces, no firewall rules).
//!
//! Node `i` listens on `listen[i]` and advertises `fronts()[i]`, the relay's socket for
//! it (`--gossip-advertise-addr`), so every datagram between two nodes crosses the relay
//! exactly once. A datagram from node `j` arriving at node `i`'s front is passed on to
//! node `i` from a socket of the relay's own for the pair (j, i); node `i`'s answer to that
//! socket goes back to node `j` from node `i`'s front, the address `j` knows `i` by. The
//! relay drops every datagram between nodes on different sides ([`Relay::partition`]).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::net::UdpSocket;
use tokio::task::JoinHandle;

/// Which side of a partition each node is on; nodes on one side reach each other.
type Sides = Arc<Mutex<Vec<u8>>>;

/// The relay; its tasks end when it drops.
pub struct Relay {
    fronts: Vec<SocketAddr>,
    sides: Sides,
    tasks: Vec<JoinHandle<()>>,
}

impl Relay {
    /// A relay for nodes listening on `listen`, all on one side.
    pub async fn start(listen: &[SocketAddr]) -> Relay {
        let n = listen.len();
        let sides: Sides = Arc::new(Mutex::new(vec![0; n]));
        let mut fronts = Vec::new();
        for _ in 0..n {
            fronts.push(Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap()));
        }
        // backs[j][i]: what node j sends to node i leaves the relay from here.
        let mut backs = Vec::new();
        for _ in 0..n {
            let mut row = Vec::new();
            for _ in 0..n {
                row.push(Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap()));
            }
            backs.push(row);
        }
        let mut tasks = Vec::new();
        for i in 0..n {
            let (front, nodes, apart_now) = (fronts[i].clone(), listen.to_vec(), sides.clone());
            let row: Vec<_> = (0..n).map(|j| backs[j][i].clone()).collect();
            tasks.push(tokio::spawn(async move {
                let (listen, sides) = (nodes, apart_now);
                let mut buf = vec![0u8; 65_536];
                while let Ok((len, from)) = front.recv_from(&mut buf).await {
                    // Only the nodes' own sockets are relayed.
                    let Some(j) = listen.iter().position(|a| *a == from) else {
                        continue;
                    };
                    if apart(&sides, i, j) {
                        continue;
                    }
                    let _ = row[j].send_to(&buf[..len], listen[i]).await;
                }
            }));
            for j in 0..n {
                let (back, front) = (backs[j][i].clone(), fronts[i].clone());
                let (to, sides) = (listen[j], sides.clone());
                tasks.push(tokio::spawn(async move {
                    let mut buf = vec![0u8; 65_536];
                    while let Ok((len, _)) = back.recv_from(&mut buf).await {
                        if !apart(&sides, i, j) {
                            let _ = front.send_to(&buf[..len], to).await;
                        }
                    }
                }));
            }
        }
        let fronts = fronts.iter().map(|s| s.local_addr().unwrap()).collect();
        Relay {
            fronts,
            sides,
            tasks,
        }
    }

    /// The address each node is to advertise (and its peers to seed with).
    pub fn fronts(&self) -> &[SocketAddr] {
        &self.fronts
    }

    /// Cuts the nodes into sides: `sides[i]` is node i's; from now on no datagram
    /// crosses between nodes of different sides.
    pub fn partition(&self, sides: &[u8]) {
        self.sides.lock().unwrap().copy_from_slice(sides);
    }

    /// Restores every path.
    pub fn heal(&self) {
        self.sides.lock().unwrap().fill(0);
    }
}

fn apart(sides: &Sides, i: usize, j: usize) -> bool {
    let sides = sides.lock().unwrap();
    sides[i] != sides[j]
}

impl Drop for Relay {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}
