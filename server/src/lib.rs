//! floodgate-server
pub mod algorithm;
