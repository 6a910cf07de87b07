//! An in-memory [`SharedData`] with the host's semantics, and a broken one.

use crate::shared::{SetError, SharedData, StoreError, Versioned};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Shared data for tests: clone it to hand the same map to several "workers".
#[derive(Clone, Default)]
pub struct MemoryShared {
    inner: Arc<Mutex<Inner>>,
    /// Yield the thread between operations, to make CAS conflicts likely.
    pub yield_between: bool,
}

#[derive(Default)]
struct Inner {
    map: HashMap<Vec<u8>, (Vec<u8>, u32)>,
    next_cas: u32,
    sets: usize,
    gets: usize,
}

impl MemoryShared {
    /// Number of keys ever created.
    pub fn keys(&self) -> usize {
        self.inner.lock().unwrap().map.len()
    }

    /// Number of reads.
    pub fn reads(&self) -> usize {
        self.inner.lock().unwrap().gets
    }

    /// Number of successful writes of any kind.
    pub fn writes(&self) -> usize {
        self.inner.lock().unwrap().sets
    }

    fn pause(&self) {
        if self.yield_between {
            std::thread::yield_now();
        }
    }
}

impl SharedData for MemoryShared {
    fn get(&self, key: &[u8]) -> Result<Option<Versioned>, StoreError> {
        self.pause();
        let mut inner = self.inner.lock().unwrap();
        inner.gets += 1;
        Ok(inner.map.get(key).map(|(value, cas)| Versioned {
            value: value.clone(),
            cas: *cas,
        }))
    }

    fn set(&self, key: &[u8], value: &[u8], cas: u32) -> Result<(), SetError> {
        self.pause();
        let mut inner = self.inner.lock().unwrap();
        inner.next_cas += 1;
        let next = inner.next_cas;
        inner.sets += 1;
        match inner.map.get_mut(key) {
            Some(entry) if entry.1 != cas => {
                inner.sets -= 1;
                Err(SetError::Conflict)
            }
            Some(entry) => {
                *entry = (value.to_vec(), next);
                Ok(())
            }
            // Like the host: a missing key is created whatever the token.
            None => {
                inner.map.insert(key.to_vec(), (value.to_vec(), next));
                Ok(())
            }
        }
    }

    fn create(&self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        let mut inner = self.inner.lock().unwrap();
        inner.next_cas += 1;
        let next = inner.next_cas;
        inner.sets += 1;
        inner.map.insert(key.to_vec(), (value.to_vec(), next));
        Ok(())
    }
}

/// Shared data whose every call fails with `status`, as a broken host would.
pub struct Broken(pub u32);

impl SharedData for Broken {
    fn get(&self, _: &[u8]) -> Result<Option<Versioned>, StoreError> {
        Err(StoreError { status: self.0 })
    }
    fn set(&self, _: &[u8], _: &[u8], _: u32) -> Result<(), SetError> {
        Err(SetError::Store(StoreError { status: self.0 }))
    }
    fn create(&self, _: &[u8], _: &[u8]) -> Result<(), StoreError> {
        Err(StoreError { status: self.0 })
    }
}
