//! State kept in proxy-wasm shared data, where every worker thread of an Envoy sees it,
//! and the store itself.
//!
//! - [`placement`]: where an entry lives (a keyed fingerprint) and the per-Envoy secret
//!   that keys it;
//! - [`table`]: the bucket table, a fixed number of slots; [`local`]: taking tokens from
//!   its buckets, atomically per bucket (local rules, and global rules' fallbacks);
//! - [`concurrency`]: requests in flight per key (concurrency rules), in a table of
//!   their own;
//! - [`sets`]: fixed tables of small sets, as [`lease`] (quota grants from the rate limit
//!   service) and [`over_limit`] (its remembered denials) keep them.
//!
//! **The store** as these modules see it: a versioned key/value map.
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
    fn get(&self, key: &[u8]) -> Result<Option<Versioned>, StoreError>;

    /// Writes `value` only if the key still carries `cas`.
    fn set(&self, key: &[u8], value: &[u8], cas: u32) -> Result<(), SetError>;

    /// Writes `value` unconditionally. Only for creating keys: on an existing key it
    /// would overwrite a concurrent update.
    fn create(&self, key: &[u8], value: &[u8]) -> Result<(), StoreError>;
}

pub mod concurrency;
pub mod lease;
pub mod local;
pub mod over_limit;
pub mod placement;
pub mod sets;
pub mod table;
