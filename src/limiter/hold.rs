//! Hold ids: the name under which a request holds its slots of fleet-wide concurrency
//! rules on the rate limit service, sent as `x-floodgate-hold` with the request's call and
//! as `x-floodgate-release` when its stream ends.
//!
//! The filter mints them, never a client: an id a client could choose or predict would let
//! it release another request's slots, or take a hold nobody can release. So an id is
//! `fg.` and 32 hex digits of SipHash-1-3 of a counter, keyed by a 128-bit nonce drawn once
//! per VM from the host's random source ([`HoldIds::new`]). The counter never repeats
//! within a VM and two VMs' nonces differ, so ids are unique across the fleet (two keyed
//! 128-bit outputs colliding is negligible), and without the nonce the next one cannot be
//! told from the last. Minting is a hash and a 35-byte string: only requests a fleet-wide
//! concurrency rule applies to pay it.

use floodgate_common::headers::is_hold_id;
use siphasher::sip128::{Hasher128, SipHasher13};
use std::cell::Cell;
use std::hash::Hasher;

/// What every minted id starts with: tells the filter's holds apart from the server's own
/// (`fg-srv.`) in the server's state and logs.
const PREFIX: &str = "fg.";

/// One VM's hold ids. Its `Debug` does not print the nonce.
#[derive(Clone)]
pub struct HoldIds {
    k0: u64,
    k1: u64,
    /// The next counter value (a VM's contexts run on one thread: a `Cell` suffices).
    next: Cell<u64>,
}

impl std::fmt::Debug for HoldIds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HoldIds(..)")
    }
}

impl HoldIds {
    /// The ids of a VM whose nonce is `nonce` (16 bytes from the host's random source).
    pub fn new(nonce: [u8; 16]) -> HoldIds {
        let half = |b: &[u8]| {
            let mut w = [0u8; 8];
            w.copy_from_slice(b);
            u64::from_le_bytes(w)
        };
        HoldIds {
            k0: half(&nonce[..8]),
            k1: half(&nonce[8..]),
            next: Cell::new(0),
        }
    }

    /// A fresh id: `fg.` and 32 lowercase hex digits, never the same twice in this VM.
    pub fn mint(&self) -> String {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let n = self.next.get();
        self.next.set(n.wrapping_add(1));
        let mut h = SipHasher13::new_with_keys(self.k0, self.k1);
        h.write_u64(n);
        let digest = h.finish128().as_u128();
        let mut id = String::with_capacity(PREFIX.len() + 32);
        id.push_str(PREFIX);
        for d in (0..32).rev() {
            id.push(char::from(HEX[((digest >> (4 * d)) & 0xf) as usize]));
        }
        debug_assert!(is_hold_id(id.as_bytes()));
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn ids_are_well_formed_for_the_server() {
        let ids = HoldIds::new([7; 16]);
        for _ in 0..100 {
            let id = ids.mint();
            assert!(is_hold_id(id.as_bytes()), "{id}");
            assert_eq!(id.len(), 35);
            assert!(id.starts_with("fg."));
        }
    }

    #[test]
    fn a_vm_never_mints_one_twice() {
        let ids = HoldIds::new([1; 16]);
        let minted: HashSet<String> = (0..10_000).map(|_| ids.mint()).collect();
        assert_eq!(minted.len(), 10_000);
    }

    #[test]
    fn two_vms_mint_apart_and_a_nonce_is_needed_to_predict() {
        let (a, b) = (HoldIds::new([1; 16]), HoldIds::new([2; 16]));
        let from_a: HashSet<String> = (0..1_000).map(|_| a.mint()).collect();
        assert!((0..1_000).all(|_| !from_a.contains(&b.mint())));
        // The same counter under another nonce says nothing of the next id: consecutive
        // ids share no prefix beyond chance.
        let (x, y) = (a.mint(), a.mint());
        assert_ne!(x[3..11], y[3..11]);
    }

    #[test]
    fn the_nonce_is_not_printed() {
        assert_eq!(format!("{:?}", HoldIds::new([9; 16])), "HoldIds(..)");
    }
}
