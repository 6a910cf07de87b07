//! [`SharedData`] on proxy-wasm shared data.

use super::abi;
use crate::shared::{SetError, SharedData, StoreError, Versioned};

/// This VM's shared data (scoped by `vm_id`, shared by every worker of the Envoy).
pub struct HostShared;

impl SharedData for HostShared {
    fn get(&self, key: &str) -> Result<Option<Versioned>, StoreError> {
        abi::shared_get(key)
            .map(|found| found.map(|(value, cas)| Versioned { value, cas }))
            .map_err(|status| StoreError { status })
    }

    fn set(&self, key: &str, value: &[u8], cas: u32) -> Result<(), SetError> {
        abi::shared_set(key, value, cas).map_err(|status| match status {
            abi::CAS_MISMATCH => SetError::Conflict,
            status => SetError::Store(StoreError { status }),
        })
    }

    fn create(&self, key: &str, value: &[u8]) -> Result<(), StoreError> {
        abi::shared_set(key, value, 0).map_err(|status| StoreError { status })
    }
}
