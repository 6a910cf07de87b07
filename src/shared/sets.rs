//! Fixed tables of small sets in shared data, as the over-limit cache and the lease table
//! keep them: `sets` keys created before traffic, each holding a few entries of
//! descriptors found by fingerprint, every write a compare-and-swap.
//!
//! Keys can never be deleted and the first write of a key cannot be conditional (see
//! [`crate::shared`]), so both tables have a fixed number of set keys, named
//! `<prefix><index>` and created with [`crate::shared::table::prepare_keys`] before traffic. A
//! descriptor lives in the set its fingerprint picks ([`Sets::home`]). An update reads a
//! set, decides from what it read, and writes with the token it read; on a conflict it
//! reads and decides again ([`edit`]), a bounded number of times.

use crate::shared::table::{prepare_keys, SlotKey};
use crate::shared::{SetError, SharedData, StoreError};

/// The shape of one table of sets: its key prefix, its count key, how many sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sets {
    prefix: &'static [u8],
    count_key: &'static [u8],
    sets: u32,
}

impl Sets {
    /// A table of `sets` keys `<prefix><index>` (at least one), their number recorded in
    /// `count_key`. `prefix` is ours, at most 22 bytes (see [`SlotKey::with_prefix`]).
    pub fn new(prefix: &'static [u8], count_key: &'static [u8], sets: u32) -> Sets {
        Sets {
            prefix,
            count_key,
            sets: sets.max(1),
        }
    }

    /// Number of set keys.
    pub fn sets(&self) -> u32 {
        self.sets
    }

    /// The key of set `index`.
    pub fn key(&self, index: u32) -> SlotKey {
        SlotKey::with_prefix(self.prefix, index)
    }

    /// The set a descriptor with this fingerprint lives in.
    pub fn home(&self, fingerprint: u128) -> SlotKey {
        self.key((fingerprint as u64 % u64::from(self.sets)) as u32)
    }

    /// Creates the set keys before traffic. Returns the number of keys created.
    pub fn prepare(&self, store: &impl SharedData) -> Result<u32, StoreError> {
        prepare_keys(store, self.count_key, self.sets, |i| self.key(i))
    }
}

/// What deciding from a set's value came to: a new value to write, or nothing to write.
pub enum Edit<T> {
    /// Write these bytes (if nobody wrote since the read), then report `T`.
    Write(Vec<u8>, T),
    /// Leave the set as it is and report `T`.
    Keep(T),
}

/// What [`edit`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edited<T> {
    /// What the last decision reported; `None` when every attempt met a conflict and
    /// nothing was written.
    pub outcome: Option<T>,
    /// Compare-and-swap conflicts met (each one a read and decide again).
    pub conflicts: u32,
}

/// What storing an entry in a set did (a denial in the over-limit cache, a grant in the
/// lease table).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stored {
    /// A live entry of another descriptor was evicted to make room.
    pub evicted: bool,
    /// Compare-and-swap conflicts met (each one a read and decide again).
    pub conflicts: u32,
    /// Gave up after every attempt met a conflict: nothing was stored.
    pub gave_up: bool,
}

impl From<Edited<bool>> for Stored {
    /// An edit whose outcome says whether it evicted.
    fn from(edited: Edited<bool>) -> Stored {
        Stored {
            evicted: edited.outcome.unwrap_or(false),
            conflicts: edited.conflicts,
            gave_up: edited.outcome.is_none(),
        }
    }
}

/// Reads `key`, decides with `decide` from its value, writes the decision if it changes
/// the value, and on a conflict reads and decides again, at most `attempts` times. A key
/// that does not exist (not prepared: should not happen) is created empty first.
pub fn edit<T>(
    store: &impl SharedData,
    key: &[u8],
    attempts: u32,
    mut decide: impl FnMut(&[u8]) -> Edit<T>,
) -> Result<Edited<T>, StoreError> {
    let mut conflicts = 0;
    for _ in 0..attempts {
        let Some(read) = store.get(key)? else {
            store.create(key, &[])?;
            continue;
        };
        match decide(&read.value) {
            Edit::Keep(outcome) => {
                return Ok(Edited {
                    outcome: Some(outcome),
                    conflicts,
                })
            }
            Edit::Write(value, outcome) => match store.set(key, &value, read.cas) {
                Ok(()) => {
                    return Ok(Edited {
                        outcome: Some(outcome),
                        conflicts,
                    })
                }
                Err(SetError::Conflict) => conflicts += 1,
                Err(SetError::Store(e)) => return Err(e),
            },
        }
    }
    Ok(Edited {
        outcome: None,
        conflicts,
    })
}
