//! Test doubles: the one place the unit tests of every module take them from.
//!
//! The pure modules reach the host only through two traits, [`RequestView`] and
//! [`SharedData`]; here are their doubles ([`FakeRequest`], [`MemoryShared`], [`Broken`])
//! and small helpers to compare results. Each module keeps its tests in `<module>/tests.rs`
//! (`#[cfg(test)] mod tests;`), importing what it needs from here.
//!
//! [`RequestView`]: crate::request::descriptor::RequestView
//! [`SharedData`]: crate::shared::SharedData

mod request;
mod shared;

pub use request::FakeRequest;
pub use shared::{Broken, MemoryShared};

use crate::reply::Headers;
use crate::shared::placement::PlacementKey;

/// The placement key of the tests: a fixed one, so that failures reproduce.
pub const PLACEMENT: PlacementKey = PlacementKey::from_bytes([0x42; 16]);

/// Headers from literal pairs, for comparing with replies.
pub fn h(pairs: &[(&'static str, &str)]) -> Headers {
    pairs.iter().copied().collect()
}
