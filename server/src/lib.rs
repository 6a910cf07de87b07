//! floodgate-server
pub mod algorithm;
pub mod clock;
pub mod config;
pub mod store;
