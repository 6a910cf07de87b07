//! Assembling the image in memory: layer, config, manifest and index, each addressed by
//! its digest. Nothing here touches the file system; [`crate::layout`] writes the result.

use crate::archive::{self, Item};
use crate::digest::Digest;
use crate::document::{
    self, Annotations, Descriptor, ImageConfig, Index, LayoutMarker, Manifest, RootFs,
    RuntimeConfig,
};
use crate::media;
use std::fmt;

/// The first four bytes of every WebAssembly module. Istio refuses a pulled binary
/// without them; checking here fails the build instead of the rollout.
const WASM_MAGIC: &[u8; 4] = b"\0asm";

/// The longest tag the OCI distribution spec allows.
const MAX_TAG_LEN: usize = 128;

/// A blob of the image: its bytes and how it is referenced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob {
    /// The media type it is referenced with.
    pub media_type: &'static str,
    /// Its contents.
    pub bytes: Vec<u8>,
    /// SHA-256 of `bytes`.
    pub digest: Digest,
}

impl Blob {
    fn new(media_type: &'static str, bytes: Vec<u8>) -> Blob {
        let digest = Digest::of(&bytes);
        Blob {
            media_type,
            bytes,
            digest,
        }
    }

    /// A descriptor pointing at this blob.
    pub fn descriptor(&self, annotations: Annotations) -> Descriptor {
        Descriptor {
            media_type: self.media_type.to_string(),
            digest: self.digest.clone(),
            size: self.bytes.len() as u64,
            annotations,
        }
    }
}

/// A complete image, ready to be written as a layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// The gzip-compressed tar of the one layer (`plugin.wasm`, or the server's files).
    pub layer: Blob,
    /// The image config.
    pub config: Blob,
    /// The image manifest. Its digest is the image digest.
    pub manifest: Blob,
    /// The layout's `index.json`.
    pub index: Vec<u8>,
    /// The layout's `oci-layout` marker.
    pub marker: Vec<u8>,
    /// The tag the index names the manifest with.
    pub tag: String,
    /// SHA-256 of the file the image carries: the `.wasm` (what a WasmPlugin's `sha256`
    /// means for `file://`/`https://` URLs), or the server's binary.
    pub payload_digest: Digest,
}

impl Image {
    /// The image digest: what a registry reports for the tag and what Istio compares
    /// with `WasmPlugin.spec.sha256` for an `oci://` URL.
    pub fn digest(&self) -> &Digest {
        &self.manifest.digest
    }

    /// Every blob, in the order they are written: layer, config, manifest.
    pub fn blobs(&self) -> [&Blob; 3] {
        [&self.layer, &self.config, &self.manifest]
    }
}

/// Why an image could not be built.
#[derive(Debug)]
pub enum BuildError {
    /// The input does not start with the WebAssembly magic number.
    NotWasm,
    /// The server binary cannot run alone in the image (see [`crate::elf`]).
    NotStatic(crate::elf::ElfError),
    /// The tag is not a valid OCI tag.
    BadTag(String),
    /// Writing the archive failed.
    Archive(std::io::Error),
    /// Writing a JSON document failed.
    Json(serde_json::Error),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::NotWasm => {
                f.write_str("input is not a WebAssembly module (no \\0asm magic number)")
            }
            BuildError::NotStatic(e) => write!(f, "cannot run alone in the image: {e}"),
            BuildError::BadTag(tag) => write!(
                f,
                "tag {tag:?} is not a valid OCI tag ([A-Za-z0-9_][A-Za-z0-9._-]*, at most {MAX_TAG_LEN})"
            ),
            BuildError::Archive(e) => write!(f, "cannot write the layer archive: {e}"),
            BuildError::Json(e) => write!(f, "cannot write a JSON document: {e}"),
        }
    }
}

impl std::error::Error for BuildError {}

impl From<std::io::Error> for BuildError {
    fn from(e: std::io::Error) -> BuildError {
        BuildError::Archive(e)
    }
}

impl From<serde_json::Error> for BuildError {
    fn from(e: serde_json::Error) -> BuildError {
        BuildError::Json(e)
    }
}

/// Whether `tag` is a valid OCI tag: `[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`.
pub fn is_valid_tag(tag: &str) -> bool {
    let mut chars = tag.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    tag.len() <= MAX_TAG_LEN
        && (first.is_ascii_alphanumeric() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// Builds the compat-variant image of `wasm`, titled `title`, named `tag` in the index.
pub fn build(wasm: &[u8], title: &str, tag: &str) -> Result<Image, BuildError> {
    if !wasm.starts_with(WASM_MAGIC) {
        return Err(BuildError::NotWasm);
    }
    let layer_tar = archive::tar(&[Item::File(media::PLUGIN_FILE, wasm)])?;
    assemble(Parts {
        layer_tar,
        architecture: media::ARCHITECTURE,
        os: media::OS,
        runtime: None,
        annotations: Annotations::from([
            (
                media::VARIANT_ANNOTATION.to_string(),
                media::VARIANT_COMPAT.to_string(),
            ),
            (media::TITLE_ANNOTATION.to_string(), title.to_string()),
        ]),
        tag,
        payload: wasm,
    })
}

/// What differs between two images: the one layer's tar, the platform, how it runs, the
/// manifest's annotations, the tag, and the file it carries.
pub(crate) struct Parts<'a> {
    /// The single layer, before compression.
    pub layer_tar: Vec<u8>,
    /// The config's `architecture`.
    pub architecture: &'a str,
    /// The config's `os`.
    pub os: &'a str,
    /// The config's `config` (runnable images only).
    pub runtime: Option<RuntimeConfig>,
    /// The manifest's annotations.
    pub annotations: Annotations,
    /// The tag the index names the manifest with.
    pub tag: &'a str,
    /// The file the image exists to carry, for [`Image::payload_digest`].
    pub payload: &'a [u8],
}

/// Compresses the layer and writes the config, manifest, index and marker around it.
pub(crate) fn assemble(parts: Parts<'_>) -> Result<Image, BuildError> {
    if !is_valid_tag(parts.tag) {
        return Err(BuildError::BadTag(parts.tag.to_string()));
    }
    let layer = Blob::new(media::LAYER_TAR_GZIP, archive::gzip(&parts.layer_tar)?);

    let config = Blob::new(
        media::IMAGE_CONFIG,
        document::to_json(&ImageConfig {
            architecture: parts.architecture.to_string(),
            os: parts.os.to_string(),
            config: parts.runtime,
            rootfs: RootFs {
                kind: "layers".to_string(),
                // The runtime-facing identity of the layer is its uncompressed tar.
                diff_ids: vec![Digest::of(&parts.layer_tar)],
            },
        })?,
    );

    let manifest = Blob::new(
        media::IMAGE_MANIFEST,
        document::to_json(&Manifest {
            schema_version: 2,
            media_type: media::IMAGE_MANIFEST.to_string(),
            config: config.descriptor(Annotations::new()),
            layers: vec![layer.descriptor(Annotations::new())],
            annotations: parts.annotations,
        })?,
    );

    let index = document::to_json(&Index {
        schema_version: 2,
        media_type: media::IMAGE_INDEX.to_string(),
        manifests: vec![manifest.descriptor(Annotations::from([(
            media::REF_NAME_ANNOTATION.to_string(),
            parts.tag.to_string(),
        )]))],
    })?;
    let marker = document::to_json(&LayoutMarker {
        image_layout_version: media::LAYOUT_VERSION.to_string(),
    })?;

    Ok(Image {
        layer,
        config,
        manifest,
        index,
        marker,
        tag: parts.tag.to_string(),
        payload_digest: Digest::of(parts.payload),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::read::GzDecoder;
    use serde_json::Value;
    use std::io::Read;

    /// The smallest valid module: magic number and version 1.
    const EMPTY_MODULE: &[u8] = b"\0asm\x01\0\0\0";

    fn json(bytes: &[u8]) -> Value {
        serde_json::from_slice(bytes).unwrap()
    }

    #[test]
    fn the_same_module_always_gives_the_same_image() {
        let a = build(EMPTY_MODULE, "floodgate", "0.1.0").unwrap();
        let b = build(EMPTY_MODULE, "floodgate", "0.1.0").unwrap();
        assert_eq!(a, b);
        let other = build(b"\0asm\x01\0\0\0\0", "floodgate", "0.1.0").unwrap();
        assert_ne!(a.digest(), other.digest());
    }

    #[test]
    fn the_manifest_is_a_compat_variant_with_one_gzip_tar_layer() {
        let image = build(EMPTY_MODULE, "floodgate", "0.1.0").unwrap();
        let m = json(&image.manifest.bytes);
        assert_eq!(m["schemaVersion"], 2);
        assert_eq!(m["mediaType"], media::IMAGE_MANIFEST);
        assert_eq!(m["annotations"][media::VARIANT_ANNOTATION], "compat");
        assert_eq!(m["annotations"][media::TITLE_ANNOTATION], "floodgate");
        let layers = m["layers"].as_array().unwrap();
        assert_eq!(layers.len(), 1);
        assert_eq!(layers[0]["mediaType"], media::LAYER_TAR_GZIP);
        assert_eq!(layers[0]["digest"], image.layer.digest.to_string());
        assert_eq!(layers[0]["size"], image.layer.bytes.len());
        assert_eq!(m["config"]["mediaType"], media::IMAGE_CONFIG);
        assert_eq!(m["config"]["digest"], image.config.digest.to_string());
        assert_eq!(m["config"]["size"], image.config.bytes.len());
    }

    #[test]
    fn the_layer_holds_exactly_plugin_wasm_and_the_config_names_its_tar() {
        let wasm = b"\0asm\x01\0\0\0 some code";
        let image = build(wasm, "floodgate", "0.1.0").unwrap();
        let mut tar_bytes = Vec::new();
        GzDecoder::new(image.layer.bytes.as_slice())
            .read_to_end(&mut tar_bytes)
            .unwrap();
        let mut archive = tar::Archive::new(tar_bytes.as_slice());
        let mut files = Vec::new();
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            let mut body = Vec::new();
            entry.read_to_end(&mut body).unwrap();
            files.push((entry.path().unwrap().display().to_string(), body));
        }
        assert_eq!(files, vec![("plugin.wasm".to_string(), wasm.to_vec())]);
        let config = json(&image.config.bytes);
        assert_eq!(
            config["rootfs"]["diff_ids"][0],
            Digest::of(&tar_bytes).to_string()
        );
        assert_eq!(config["architecture"], "wasm");
        assert_eq!(config["os"], "wasip1");
        assert_eq!(image.payload_digest, Digest::of(wasm));
    }

    #[test]
    fn the_index_names_the_manifest_by_tag() {
        let image = build(EMPTY_MODULE, "floodgate", "v2_rc-1.x").unwrap();
        let index = json(&image.index);
        assert_eq!(index["schemaVersion"], 2);
        assert_eq!(index["mediaType"], media::IMAGE_INDEX);
        let manifests = index["manifests"].as_array().unwrap();
        assert_eq!(manifests.len(), 1);
        assert_eq!(manifests[0]["digest"], image.digest().to_string());
        assert_eq!(manifests[0]["mediaType"], media::IMAGE_MANIFEST);
        assert_eq!(manifests[0]["size"], image.manifest.bytes.len());
        assert_eq!(
            manifests[0]["annotations"][media::REF_NAME_ANNOTATION],
            "v2_rc-1.x"
        );
        assert_eq!(image.marker, b"{\"imageLayoutVersion\":\"1.0.0\"}");
    }

    /// Pins what depends only on our own code (tar layout and JSON), so an accidental
    /// change to either is seen. The gzip bytes are left out: they belong to the
    /// compressor's version, which Cargo.lock pins.
    #[test]
    fn golden_layer_tar_and_config() {
        let image = build(EMPTY_MODULE, "floodgate", "0.1.0").unwrap();
        let config = String::from_utf8(image.config.bytes.clone()).unwrap();
        let diff_id = json(&image.config.bytes)["rootfs"]["diff_ids"][0]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(
            config,
            format!(
                "{{\"architecture\":\"wasm\",\"os\":\"wasip1\",\"rootfs\":{{\"type\":\"layers\",\"diff_ids\":[\"{diff_id}\"]}}}}"
            )
        );
        assert_eq!(diff_id, GOLDEN_EMPTY_MODULE_TAR);
    }

    const GOLDEN_EMPTY_MODULE_TAR: &str =
        "sha256:69116e29dad538f91c7c5d999dc400570f40455fb24b26d513ee1eae117b0539";

    #[test]
    fn refuses_input_that_is_not_wasm() {
        assert!(matches!(
            build(b"MZ\x90\0", "floodgate", "0.1.0"),
            Err(BuildError::NotWasm)
        ));
        assert!(matches!(
            build(b"", "floodgate", "0.1.0"),
            Err(BuildError::NotWasm)
        ));
    }

    #[test]
    fn accepts_only_oci_tags() {
        for good in ["0.1.0", "latest", "_x", "v1.2.3-rc.1", &"a".repeat(128)] {
            assert!(is_valid_tag(good), "{good}");
        }
        for bad in ["", ".x", "-x", "a:b", "a/b", "a b", &"a".repeat(129)] {
            assert!(!is_valid_tag(bad), "{bad}");
        }
        let err = build(EMPTY_MODULE, "floodgate", "a/b").unwrap_err();
        assert!(err.to_string().contains("\"a/b\" is not a valid OCI tag"));
    }
}
