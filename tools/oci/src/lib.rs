//! floodgate-oci packs `floodgate.wasm` as an OCI image that Istio's `WasmPlugin` pulls,
//! without Docker, buildah or a registry: many CI systems have none of them.
//!
//! # The format
//! Istio's puller accepts the *compat* variant of the wasm image spec, which is an
//! ordinary OCI image:
//! - an image manifest (`application/vnd.oci.image.manifest.v1+json`) with the
//!   annotation `module.wasm.image/variant: compat`;
//! - exactly one layer, `application/vnd.oci.image.layer.v1.tar+gzip`, a tar holding
//!   one file, `plugin.wasm`;
//! - a standard image config (`application/vnd.oci.image.config.v1+json`).
//!
//! The image is written as an OCI image layout, a directory (`oci-layout`, `index.json`,
//! `blobs/sha256/…`) and a tar of it, which `skopeo`, `crane` and `oras` push as is.
//!
//! # Reproducible
//! The same `.wasm` always gives the same image digest: tar entries have fixed times,
//! owners and modes and a fixed order, the gzip header has no time or OS, the compression
//! level is fixed, and JSON fields are written in a fixed order.
//!
//! # Modules
//! [`media`] has the names from the specs, [`digest`] content addresses, [`archive`]
//! deterministic tar and gzip, [`document`] the JSON documents, [`image`] assembles them
//! in memory and [`layout`] writes them out.

pub mod archive;
pub mod digest;
pub mod document;
pub mod image;
pub mod layout;
pub mod media;

pub use digest::Digest;
pub use image::{build, BuildError, Image};
