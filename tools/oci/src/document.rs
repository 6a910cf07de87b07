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

/// The image config: the platform and the digests of the uncompressed layers.
#[derive(Debug, Clone, Serialize)]
pub struct ImageConfig {
    /// CPU architecture of the contents.
    pub architecture: String,
    /// Operating system of the contents.
    pub os: String,
    /// The layers as the runtime unpacks them.
    pub rootfs: RootFs,
}

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
            rootfs: RootFs {
                kind: "layers".into(),
                diff_ids: vec![Digest::of(b"")],
            },
        };
        let json = String::from_utf8(to_json(&c).unwrap()).unwrap();
        assert!(json.contains("\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"sha256:e3b0"));
    }
}
