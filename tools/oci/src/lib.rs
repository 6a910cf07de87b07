//! floodgate-oci packs `floodgate.wasm` as an OCI image that Istio's `WasmPlugin` pulls,
//! and floodgate-server as a runnable container image, without Docker, buildah or a
//! registry: many CI systems have none of them.
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
//! # floodgate-server's image
//! A plain runnable image ([`server`]): one layer with the static binary and the
//! configuration directory, and a config naming the non-root user, the ports, the
//! entrypoint and default arguments, the configuration volume and the OCI annotations.
//!
//! # Reproducible
//! The same input file always gives the same image digest: tar entries have fixed times,
//! owners and modes and a fixed order, the gzip header has no time or OS, the compression
//! level is fixed, and JSON fields are written in a fixed order.
//!
//! # Modules
//! [`media`] has the names from the specs, [`digest`] content addresses, [`archive`]
//! deterministic tar and gzip, [`document`] the JSON documents, [`image`] assembles them
//! in memory (the wasm image), [`server`] the server's image with [`elf`] checking its
//! binary is static, and [`layout`] writes them out.

pub mod archive;
pub mod digest;
pub mod document;
pub mod elf;
pub mod image;
pub mod layout;
pub mod media;
pub mod server;

pub use digest::Digest;
pub use image::{build, BuildError, Image};
pub use server::build_server;
