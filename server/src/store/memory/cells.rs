//! What a write costs the memory store in cells (see [`super`]'s bounds), reckoned before
//! it is applied so that a batch that would pass the capacity changes nothing.

use super::Slot;
use crate::algorithm::Update;
use crate::store::batch::Write;

/// The cells `write` may add to its counter (negative: frees), at most: a new or reset
/// counter costs one cell plus its state; a log gains at most one entry per update that
/// records and loses the entries its updates trim; a concurrency counter gains at most one
/// hold per update. `slot` is what the shard holds for the
/// counter, `live` whether that was loaded (not idle, same limit).
pub(super) fn growth(slot: Option<&Slot>, live: bool, write: &Write) -> isize {
    let mut entries = 0isize;
    let mut trimmed = 0isize;
    for u in &write.updates {
        match u {
            Update::SlidingWindowLog(l) => {
                entries += isize::from(l.records());
                trimmed += l.expired() as isize;
            }
            // A hold is a cell; what an update reclaims or releases is freed after, so
            // reckoned as nothing here (at most: the batch never passes the capacity).
            Update::Concurrency(c) => entries += isize::from(c.adds()),
            _ => {}
        }
    }
    match slot {
        Some(_) if live => entries - trimmed,
        // A stale slot (idle, or from another limit) is replaced by a fresh one.
        Some(slot) => 1 + entries - slot.cells as isize,
        None => isize::from(write.records) * (1 + entries),
    }
}
