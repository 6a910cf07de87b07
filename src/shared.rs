//! The shared-data store as the bucket table sees it: a versioned key/value map.
//!
//! proxy-wasm shared data is one map per `vm_id`, shared by every worker thread of an
//! Envoy, with a compare-and-swap token per key. Two facts shape everything built on it
//! (see PLATFORM.md): keys can never be deleted, and the first write of a key cannot be
//! conditional (a missing key has no CAS token). The host layer implements this trait
//! with host calls; tests implement it with a map that behaves the same way.

/// A value with the CAS token it was read with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versioned {
    /// The bytes stored (empty for a key created empty).
    pub value: Vec<u8>,
    /// Token to pass to [`SharedData::set`]: the write succeeds only if nobody wrote since.
    pub cas: u32,
}

/// A host failure reading or writing shared data: the status the host returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreError {
    /// The proxy-wasm status code.
    pub status: u32,
}

/// Why a conditional write did not happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetError {
    /// Someone wrote the key after we read it: read again and decide again.
    Conflict,
    /// The host failed.
    Store(StoreError),
}

/// A versioned key/value map shared by all workers of one proxy.
pub trait SharedData {
    /// The current value, or `None` if the key was never written.
    fn get(&self, key: &str) -> Result<Option<Versioned>, StoreError>;

    /// Writes `value` only if the key still carries `cas`.
    fn set(&self, key: &str, value: &[u8], cas: u32) -> Result<(), SetError>;

    /// Writes `value` unconditionally. Only for creating keys: on an existing key it
    /// would overwrite a concurrent update.
    fn create(&self, key: &str, value: &[u8]) -> Result<(), StoreError>;
}

#[cfg(test)]
pub(crate) mod memory {
    //! An in-memory [`SharedData`] with the host's semantics, for tests.

    use super::*;
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
        map: HashMap<String, (Vec<u8>, u32)>,
        next_cas: u32,
        sets: usize,
    }

    impl MemoryShared {
        /// Number of keys ever created.
        pub fn keys(&self) -> usize {
            self.inner.lock().unwrap().map.len()
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
        fn get(&self, key: &str) -> Result<Option<Versioned>, StoreError> {
            self.pause();
            let inner = self.inner.lock().unwrap();
            Ok(inner.map.get(key).map(|(value, cas)| Versioned {
                value: value.clone(),
                cas: *cas,
            }))
        }

        fn set(&self, key: &str, value: &[u8], cas: u32) -> Result<(), SetError> {
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
                    inner.map.insert(key.to_string(), (value.to_vec(), next));
                    Ok(())
                }
            }
        }

        fn create(&self, key: &str, value: &[u8]) -> Result<(), StoreError> {
            let mut inner = self.inner.lock().unwrap();
            inner.next_cas += 1;
            let next = inner.next_cas;
            inner.sets += 1;
            inner.map.insert(key.to_string(), (value.to_vec(), next));
            Ok(())
        }
    }

    /// Shared data whose every call fails with `status`, as a broken host would.
    pub struct Broken(pub u32);

    impl SharedData for Broken {
        fn get(&self, _: &str) -> Result<Option<Versioned>, StoreError> {
            Err(StoreError { status: self.0 })
        }
        fn set(&self, _: &str, _: &[u8], _: u32) -> Result<(), SetError> {
            Err(SetError::Store(StoreError { status: self.0 }))
        }
        fn create(&self, _: &str, _: &[u8]) -> Result<(), StoreError> {
            Err(StoreError { status: self.0 })
        }
    }
}
