//! floodgate-costs: what each request path of floodgate.wasm costs, counted.
pub mod abi;
pub mod budget;
pub mod calibration;
pub mod cost;
pub mod envoy;
pub mod host;
pub mod instrument;
pub mod measure;
pub mod paths;
pub mod plugins;
pub mod report;
pub mod rls;
pub mod vm;
