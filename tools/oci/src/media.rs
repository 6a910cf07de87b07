//! The names other tools look for, gathered in one place because a typo in any of them
//! gives an image that builds fine and that Istio then refuses to pull.
//!
//! Media types come from the OCI image spec; the annotation and the file name come from
//! the wasm image spec's *compat* variant, which Istio's puller implements.

/// `index.json` of an OCI image layout: the entry point tools read first.
pub const IMAGE_INDEX: &str = "application/vnd.oci.image.index.v1+json";

/// The image manifest: what a registry stores under the tag, and whose digest Istio
/// compares with `WasmPlugin.spec.sha256` for `oci://` URLs.
pub const IMAGE_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

/// The image configuration blob (platform and layer diff ids).
pub const IMAGE_CONFIG: &str = "application/vnd.oci.image.config.v1+json";

/// The one layer of a compat image: a gzip-compressed tar. Istio accepts this media type
/// (or Docker's equivalent) for the compat variant, and no other.
pub const LAYER_TAR_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

/// Manifest annotation the compat variant requires when its layer has the OCI media type.
pub const VARIANT_ANNOTATION: &str = "module.wasm.image/variant";

/// Value of [`VARIANT_ANNOTATION`].
pub const VARIANT_COMPAT: &str = "compat";

/// The file inside the layer that Istio extracts and hands to Envoy.
pub const PLUGIN_FILE: &str = "plugin.wasm";

/// Index annotation naming a manifest inside a layout: the `:tag` in
/// `oci:DIR:tag` (skopeo) or `DIR:tag` (oras).
pub const REF_NAME_ANNOTATION: &str = "org.opencontainers.image.ref.name";

/// Manifest annotation with a human-readable name for the image.
pub const TITLE_ANNOTATION: &str = "org.opencontainers.image.title";

/// Contents of the layout's `oci-layout` marker file.
pub const LAYOUT_VERSION: &str = "1.0.0";

/// Platform written in the image config: the module is WebAssembly for WASI preview 1
/// (`wasm32-wasip1`). Nothing that pulls a single-manifest image checks it; it is there
/// so the config says what the image holds.
pub const ARCHITECTURE: &str = "wasm";

/// See [`ARCHITECTURE`].
pub const OS: &str = "wasip1";

/// Platform of floodgate-server's image: what Kubernetes nodes check before running it.
pub const LINUX_ARCHITECTURE: &str = "amd64";

/// See [`LINUX_ARCHITECTURE`].
pub const LINUX_OS: &str = "linux";
