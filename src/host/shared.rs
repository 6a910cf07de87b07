//! [`SharedData`] on proxy-wasm shared data.

use super::hostcalls;
use super::types::Status;
use crate::shared::{SetError, SharedData, StoreError, Versioned};

/// This VM's shared data (scoped by `vm_id`, shared by every worker of the Envoy).
pub struct HostShared;

impl SharedData for HostShared {
    fn get(&self, key: &[u8]) -> Result<Option<Versioned>, StoreError> {
        hostcalls::shared_get(key)
            .map(|found| found.map(|(value, cas)| Versioned { value, cas }))
            .map_err(|status| StoreError { status: status.0 })
    }

    fn set(&self, key: &[u8], value: &[u8], cas: u32) -> Result<(), SetError> {
        hostcalls::shared_set(key, value, cas).map_err(|status| match status {
            Status::CAS_MISMATCH => SetError::Conflict,
            status => SetError::Store(StoreError { status: status.0 }),
        })
    }

    fn create(&self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        hostcalls::shared_set(key, value, 0).map_err(|status| StoreError { status: status.0 })
    }
}
