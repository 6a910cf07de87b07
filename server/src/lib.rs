//! floodgate-server
pub mod algorithm;
pub mod config;
