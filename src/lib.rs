//! floodgate
pub mod bucket;
pub mod config;
