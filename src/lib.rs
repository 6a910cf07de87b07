//! floodgate
pub mod bucket;
pub mod config;
pub mod descriptor;
pub mod limiter;
pub mod local;
pub mod metrics;
pub mod response;
pub mod shared;
pub mod table;

#[cfg(test)]
mod testing;

#[cfg(target_arch = "wasm32")]
mod host;
