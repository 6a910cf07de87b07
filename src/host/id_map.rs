//! A map keyed by ids the host chooses (context ids, call tokens), for the dispatcher.
//!
//! Envoy numbers contexts and calls from one counter per VM, so the live ids of a worker
//! are a window of nearly consecutive numbers: an id is its own hash, and with a table at
//! least twice the live count, consecutive ids never collide. Open addressing with
//! linear probing and backward-shift deletion (no tombstones) then finds an id in its
//! first slot almost always. That costs a request's context create, headers, response
//! headers and delete about a third of what a `HashMap` did (its 8-byte control groups
//! and its hash). Clients choose none of these ids, and the table only grows to twice
//! the most contexts ever live at once, as the `HashMap` did.

/// Slots a table starts with, on its first insert.
const MIN_SLOTS: usize = 8;

/// A map from host-chosen `u32` ids to `V`.
pub struct IdMap<V> {
    /// A power of two slots (or none yet), at most half of them full.
    slots: Vec<Option<(u32, V)>>,
    /// How many are full.
    len: usize,
}

impl<V> IdMap<V> {
    /// An empty map, in a constant (no allocation until the first insert).
    pub const fn new() -> IdMap<V> {
        IdMap {
            slots: Vec::new(),
            len: 0,
        }
    }

    /// The slot `id` would be found from.
    fn home(&self, id: u32) -> usize {
        id as usize & (self.slots.len().wrapping_sub(1))
    }

    /// The slot holding `id`, if any.
    fn find(&self, id: u32) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(id);
        // At most half the slots are full, so an empty one ends every probe.
        loop {
            match &self.slots[i] {
                None => return None,
                Some((key, _)) if *key == id => return Some(i),
                Some(_) => i = (i + 1) & mask,
            }
        }
    }

    /// The value of `id`.
    pub fn get(&self, id: u32) -> Option<&V> {
        let i = self.find(id)?;
        self.slots[i].as_ref().map(|(_, v)| v)
    }

    /// The value of `id`, to change.
    pub fn get_mut(&mut self, id: u32) -> Option<&mut V> {
        let i = self.find(id)?;
        self.slots[i].as_mut().map(|(_, v)| v)
    }

    /// Sets the value of `id`, returning the one it replaces.
    pub fn insert(&mut self, id: u32, value: V) -> Option<V> {
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(id);
        loop {
            match &mut self.slots[i] {
                slot @ None => {
                    *slot = Some((id, value));
                    self.len += 1;
                    return None;
                }
                Some((key, old)) if *key == id => return Some(std::mem::replace(old, value)),
                Some(_) => i = (i + 1) & mask,
            }
        }
    }

    /// Doubles the table (out of line: it happens a handful of times per VM).
    #[inline(never)]
    fn grow(&mut self) {
        let slots = (self.slots.len() * 2).max(MIN_SLOTS);
        let old = std::mem::replace(&mut self.slots, Vec::with_capacity(slots));
        self.slots.resize_with(slots, || None);
        self.len = 0;
        for (id, value) in old.into_iter().flatten() {
            self.insert(id, value);
        }
    }

    /// Takes `id` out of the map.
    pub fn remove(&mut self, id: u32) -> Option<V> {
        let mut hole = self.find(id)?;
        let (_, value) = self.slots[hole].take()?;
        self.len -= 1;
        // Backward shift: each entry after the hole, up to the next empty slot, moves
        // into the hole when its home is not between the hole and where it sits, so
        // every probe still reaches it before an empty slot.
        let mask = self.slots.len() - 1;
        let mut i = (hole + 1) & mask;
        while let Some((key, _)) = &self.slots[i] {
            let home = self.home(*key);
            // Distances from the entry's home, along the probe.
            if (i.wrapping_sub(home) & mask) >= (i.wrapping_sub(hole) & mask) {
                self.slots[hole] = self.slots[i].take();
                hole = i;
            }
            i = (i + 1) & mask;
        }
        Some(value)
    }

    /// Removes every entry whose value `keep` refuses (a walk over the whole table: for
    /// rare paths).
    pub fn retain(&mut self, mut keep: impl FnMut(&V) -> bool) {
        let gone: Vec<u32> = self
            .slots
            .iter()
            .flatten()
            .filter(|(_, v)| !keep(v))
            .map(|(id, _)| *id)
            .collect();
        for id in gone {
            self.remove(id);
        }
    }
}

impl<V> Default for IdMap<V> {
    fn default() -> IdMap<V> {
        IdMap::new()
    }
}

#[cfg(test)]
mod tests;
