//! The filter's host, stood in for: one clock the filter and the service share, shared
//! data with the host's semantics, and a request as a list of headers.

use floodgate::request::descriptor::{Lookup, RequestView};
use floodgate::shared::{SetError, SharedData, StoreError, Versioned};
use floodgate_server::clock::Clock;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// One clock for the filter and the service.
#[derive(Clone)]
pub struct FakeClock(pub Arc<AtomicU64>);

impl Clock for FakeClock {
    fn now_ns(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// Each key's value and CAS token, and the last token handed out.
type Map = (HashMap<Vec<u8>, (Vec<u8>, u32)>, u32);

/// Shared data with the host's semantics (a missing key is written whatever the token).
#[derive(Default)]
pub struct Shared(RefCell<Map>);

impl SharedData for Shared {
    fn get(&self, key: &[u8]) -> Result<Option<Versioned>, StoreError> {
        let map = self.0.borrow();
        Ok(map.0.get(key).map(|(value, cas)| Versioned {
            value: value.clone(),
            cas: *cas,
        }))
    }

    fn set(&self, key: &[u8], value: &[u8], cas: u32) -> Result<(), SetError> {
        let mut map = self.0.borrow_mut();
        map.1 += 1;
        let next = map.1;
        match map.0.get_mut(key) {
            Some(entry) if entry.1 != cas => Err(SetError::Conflict),
            Some(entry) => {
                *entry = (value.to_vec(), next);
                Ok(())
            }
            None => {
                map.0.insert(key.to_vec(), (value.to_vec(), next));
                Ok(())
            }
        }
    }

    fn create(&self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        let mut map = self.0.borrow_mut();
        map.1 += 1;
        let next = map.1;
        map.0.insert(key.to_vec(), (value.to_vec(), next));
        Ok(())
    }
}

/// A request as a list of headers.
#[derive(Debug, Clone)]
pub struct Request(pub Vec<(String, String)>);

impl RequestView for Request {
    fn header(&mut self, name: &str) -> Lookup {
        match self.0.iter().find(|(k, _)| k == name) {
            Some((_, v)) => Lookup::One(v.as_bytes().to_vec()),
            None => Lookup::Absent,
        }
    }
    fn content_type(&mut self) -> Option<Vec<u8>> {
        None
    }
    fn raw_path(&mut self) -> Option<Vec<u8>> {
        Some(b"/".to_vec())
    }
    fn method(&mut self) -> Option<Vec<u8>> {
        Some(b"GET".to_vec())
    }
    fn authority(&mut self) -> Option<Vec<u8>> {
        Some(b"test".to_vec())
    }
    fn peer_address(&mut self) -> Option<String> {
        Some("10.0.0.1:1000".into())
    }
}
