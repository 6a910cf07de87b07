//! The JSON documents of an image: index, manifest, config and the layout marker.
//!
//! They are plain structs serialised in declaration order (maps are `BTreeMap`, so
//! sorted), which keeps the bytes, and so the digests, the same from build to build.
//! Field names are the ones the OCI image spec defines.

use crate::digest::Digest;
use serde::Serialize;
use std::collections::BTreeMap;

/// Annotations: string keys to string values, written sorted by key.
pub type Annotations = BTreeMap<String, String>;

/// A reference to a blob: what it is, its address and its length.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// The blob's media type.
    pub media_type: String,
    /// The blob's SHA-256.
    pub digest: Digest,
    /// The blob's length in bytes.
    pub size: u64,
    /// Optional annotations (left out of the JSON when empty).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: Annotations,
}

/// `index.json`: the layout's list of images, each named by a ref-name annotation.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Index {
    /// Always 2.
    pub schema_version: u32,
    /// [`crate::media::IMAGE_INDEX`].
    pub media_type: String,
    /// The image manifests in the layout (here: one).
    pub manifests: Vec<Descriptor>,
}

/// The image manifest: the config and the layers, plus annotations.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// Always 2.
    pub schema_version: u32,
    /// [`crate::media::IMAGE_MANIFEST`].
    pub media_type: String,
    /// The image config blob.
    pub config: Descriptor,
    /// The layers, bottom first (here: exactly one).
    pub layers: Vec<Descriptor>,
    /// Manifest annotations (the compat variant marker among them).
    pub annotations: Annotations,
}

/// The image config: the platform, how a container of it runs (runnable images only) and
/// the digests of the uncompressed layers.
#[derive(Debug, Clone, Serialize)]
pub struct ImageConfig {
    /// CPU architecture of the contents.
    pub architecture: String,
    /// Operating system of the contents.
    pub os: String,
    /// How a container runtime starts it; absent for an image that is only a carrier
    /// (the wasm compat image), so that image's config stays as it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<RuntimeConfig>,
    /// The layers as the runtime unpacks them.
    pub rootfs: RootFs,
}

/// The execution parameters of a runnable image, the image config's `config` object: what
/// Kubernetes and every OCI runtime read to start a container. Names are the spec's.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct RuntimeConfig {
    /// `UID:GID` the process runs as. Numeric, so that Kubernetes' `runAsNonRoot` can
    /// check it without a passwd file in the image.
    pub user: String,
    /// The ports the program listens on, as `PORT/tcp`.
    pub exposed_ports: BTreeMap<String, Empty>,
    /// The program and its fixed arguments.
    pub entrypoint: Vec<String>,
    /// Default arguments after the entrypoint's; a pod's `args` replace them.
    pub cmd: Vec<String>,
    /// Directories meant to be mounted (the configuration).
    pub volumes: BTreeMap<String, Empty>,
    /// The working directory of the process.
    pub working_dir: String,
    /// The signal that asks the program to stop gracefully.
    pub stop_signal: String,
    /// Labels: the same key/value pairs as the manifest's annotations, for tools that
    /// show only the config's.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: Annotations,
}

/// An empty JSON object, `{}`: the value the spec gives each port and volume.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Empty {}

/// The uncompressed layer digests, in layer order.
#[derive(Debug, Clone, Serialize)]
pub struct RootFs {
    /// Always `layers`.
    #[serde(rename = "type")]
    pub kind: String,
    /// SHA-256 of each layer's tar before compression.
    pub diff_ids: Vec<Digest>,
}

/// The `oci-layout` file that marks a directory as an OCI image layout.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LayoutMarker {
    /// The layout format version, [`crate::media::LAYOUT_VERSION`].
    pub image_layout_version: String,
}

/// `value` as compact JSON. Serialising these structs cannot fail (string keys, no
/// floats), but the error is passed on rather than assumed away.
pub fn to_json<T: Serialize>(value: &T) -> Result<Vec<u8>, serde_json::Error> {
    serde_json::to_vec(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptor_uses_the_spec_field_names_and_omits_empty_annotations() {
        let d = Descriptor {
            media_type: "m".into(),
            digest: Digest::of(b""),
            size: 0,
            annotations: Annotations::new(),
        };
        let json = String::from_utf8(to_json(&d).unwrap()).unwrap();
        assert_eq!(
            json,
            "{\"mediaType\":\"m\",\"digest\":\"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\",\"size\":0}"
        );
    }

    #[test]
    fn config_writes_rootfs_type_and_diff_ids() {
        let c = ImageConfig {
            architecture: "wasm".into(),
            os: "wasip1".into(),
            config: None,
            rootfs: RootFs {
                kind: "layers".into(),
                diff_ids: vec![Digest::of(b"")],
            },
        };
        let json = String::from_utf8(to_json(&c).unwrap()).unwrap();
        assert!(json.contains("\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"sha256:e3b0"));
        assert!(!json.contains("\"config\""), "no runtime config: {json}");
    }

    #[test]
    fn runtime_config_uses_the_specs_pascal_case_names_and_empty_objects() {
        let c = RuntimeConfig {
            user: "65532:65532".into(),
            exposed_ports: BTreeMap::from([("8081/tcp".to_string(), Empty {})]),
            entrypoint: vec!["/bin/x".into()],
            cmd: vec!["--flag".into()],
            volumes: BTreeMap::from([("/etc/x".to_string(), Empty {})]),
            working_dir: "/".into(),
            stop_signal: "SIGTERM".into(),
            labels: Annotations::new(),
        };
        let json = String::from_utf8(to_json(&c).unwrap()).unwrap();
        assert_eq!(
            json,
            "{\"User\":\"65532:65532\",\"ExposedPorts\":{\"8081/tcp\":{}},\"Entrypoint\":[\"/bin/x\"],\"Cmd\":[\"--flag\"],\"Volumes\":{\"/etc/x\":{}},\"WorkingDir\":\"/\",\"StopSignal\":\"SIGTERM\"}"
        );
    }
}
