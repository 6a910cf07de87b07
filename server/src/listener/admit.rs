//! Which new connections a port takes: at most so many open in all, and at most so many
//! from one peer (source address).
//!
//! The per-peer cap keeps one client from taking every slot of a port: without it, one pod
//! holding `--max-connections` idle connections locks every other caller out until its
//! connections time out, and opens new ones as they do. A peer is an IP address, IPv4 and
//! IPv4-mapped IPv6 alike (a dual-stack listener sees `::ffff:10.0.0.7` for `10.0.0.7`).
//! The table holds only peers with a connection open, so it is bounded by the port's own
//! cap whatever addresses connect.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

/// How many connections a port keeps open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// Open connections in all.
    pub total: usize,
    /// Open connections from one peer; 0: no per-peer cap.
    pub per_peer: usize,
}

/// Why a new connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The port has [`Caps::total`] open.
    OverLimit,
    /// Its peer has [`Caps::per_peer`] open.
    PeerOverLimit,
}

#[derive(Debug, Default)]
struct Open {
    total: usize,
    by_peer: HashMap<IpAddr, usize>,
}

/// A port's open connections, counted against its [`Caps`].
#[derive(Debug)]
pub struct Admission {
    caps: Caps,
    open: Mutex<Open>,
}

/// One admitted connection's place; given back when dropped.
#[derive(Debug)]
pub struct Ticket {
    admission: Arc<Admission>,
    peer: IpAddr,
}

impl Admission {
    /// Admission under `caps`, nothing open yet.
    pub fn new(caps: Caps) -> Arc<Admission> {
        Arc::new(Admission {
            caps,
            open: Mutex::default(),
        })
    }

    /// A place for a connection from `peer`, or why there is none.
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Result<Ticket, Refused> {
        let peer = peer.to_canonical();
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if open.total >= self.caps.total {
            return Err(Refused::OverLimit);
        }
        let mine = open.by_peer.get(&peer).copied().unwrap_or(0);
        if self.caps.per_peer > 0 && mine >= self.caps.per_peer {
            return Err(Refused::PeerOverLimit);
        }
        open.total += 1;
        open.by_peer.insert(peer, mine + 1);
        Ok(Ticket {
            admission: self.clone(),
            peer,
        })
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .total
    }

    /// Distinct peers with a connection open now.
    pub fn peers(&self) -> usize {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .by_peer
            .len()
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut open = self
            .admission
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        open.total = open.total.saturating_sub(1);
        if let Some(n) = open.by_peer.get_mut(&self.peer) {
            *n -= 1;
            if *n == 0 {
                open.by_peer.remove(&self.peer);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    #[test]
    fn a_peer_gets_its_share_and_the_port_its_total() {
        let a = Admission::new(Caps {
            total: 3,
            per_peer: 2,
        });
        let one = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        let mapped = IpAddr::V6(Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped());
        let two = IpAddr::V6(Ipv6Addr::LOCALHOST);
        let t1 = a.admit(one).unwrap();
        let _t2 = a.admit(mapped).unwrap();
        assert_eq!(
            a.admit(one).unwrap_err(),
            Refused::PeerOverLimit,
            "the mapped address is the same peer"
        );
        let _t3 = a.admit(two).unwrap();
        assert_eq!(a.admit(two).unwrap_err(), Refused::OverLimit);
        drop(t1);
        assert_eq!((a.open(), a.peers()), (2, 2));
        let _t4 = a.admit(one).unwrap();
        assert_eq!(a.open(), 3);
    }

    #[test]
    fn no_per_peer_cap_at_zero_and_the_table_empties() {
        let a = Admission::new(Caps {
            total: 100,
            per_peer: 0,
        });
        let peer = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let tickets: Vec<_> = (0..100).map(|_| a.admit(peer).unwrap()).collect();
        assert_eq!(a.admit(peer).unwrap_err(), Refused::OverLimit);
        drop(tickets);
        assert_eq!((a.open(), a.peers()), (0, 0));
    }
}
