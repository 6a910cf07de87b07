//! Reading an OCI image the way Istio's puller does, checking every digest and size.
//!
//! This is written apart from `floodgate-oci` on purpose: a test that reused the
//! builder's own types could not see a mistake both share. It goes by the public specs
//! only: index → manifest (by tag) → config and the single compat layer → `plugin.wasm`.

use flate2::read::GzDecoder;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

/// Media type of an OCI image index.
pub const INDEX: &str = "application/vnd.oci.image.index.v1+json";
/// Media type of an OCI image manifest.
pub const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// Media type of an OCI image config.
pub const CONFIG: &str = "application/vnd.oci.image.config.v1+json";
/// The compat variant's layer media type that Istio accepts for OCI manifests.
pub const LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

/// `sha256:<hex>` of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    let sum = Sha256::digest(bytes);
    let hex: String = sum.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// Panics unless `bytes` are what `descriptor` (a JSON descriptor) says: same digest and
/// same size.
pub fn check_descriptor(what: &str, descriptor: &Value, bytes: &[u8]) {
    assert_eq!(
        descriptor["digest"].as_str(),
        Some(sha256(bytes).as_str()),
        "{what}: digest does not match the content"
    );
    assert_eq!(
        descriptor["size"].as_u64(),
        Some(bytes.len() as u64),
        "{what}: size does not match the content"
    );
}

/// An OCI image layout's files, from a directory or from a tar of one.
pub struct Layout {
    files: BTreeMap<String, Vec<u8>>,
}

impl Layout {
    /// Reads every file under `dir` (paths relative to it, `/`-separated).
    pub fn from_dir(dir: &Path) -> Layout {
        fn walk(root: &Path, dir: &Path, files: &mut BTreeMap<String, Vec<u8>>) {
            let entries = std::fs::read_dir(dir)
                .unwrap_or_else(|e| panic!("read {}: {e} (run `make oci`)", dir.display()));
            for entry in entries {
                let path = entry.expect("dir entry").path();
                if path.is_dir() {
                    walk(root, &path, files);
                } else {
                    let relative = path.strip_prefix(root).expect("under root");
                    let name = relative.to_string_lossy().replace('\\', "/");
                    files.insert(name, std::fs::read(&path).expect("read file"));
                }
            }
        }
        let mut files = BTreeMap::new();
        walk(dir, dir, &mut files);
        Layout { files }
    }

    /// Unpacks a tar of a layout (regular files only; directories are implied).
    pub fn from_tar(bytes: &[u8]) -> Layout {
        let mut files = BTreeMap::new();
        let mut archive = tar::Archive::new(bytes);
        for entry in archive.entries().expect("tar entries") {
            let mut entry = entry.expect("tar entry");
            if entry.header().entry_type().is_dir() {
                continue;
            }
            assert!(
                entry.header().entry_type().is_file(),
                "unexpected tar entry type"
            );
            let name = entry.path().expect("path").to_string_lossy().into_owned();
            let mut body = Vec::new();
            entry.read_to_end(&mut body).expect("read tar entry");
            assert!(files.insert(name.clone(), body).is_none(), "{name} twice");
        }
        Layout { files }
    }

    /// Every file's path, sorted.
    pub fn paths(&self) -> Vec<&str> {
        self.files.keys().map(String::as_str).collect()
    }

    /// A file's bytes.
    pub fn file(&self, path: &str) -> &[u8] {
        self.files
            .get(path)
            .unwrap_or_else(|| panic!("layout has no {path}: {:?}", self.paths()))
    }

    /// The blob `descriptor` points at, checked against its digest and size.
    pub fn blob(&self, what: &str, descriptor: &Value) -> Vec<u8> {
        let digest = descriptor["digest"].as_str().expect("descriptor digest");
        let hex = digest.strip_prefix("sha256:").expect("sha256 digest");
        let bytes = self.file(&format!("blobs/sha256/{hex}")).to_vec();
        check_descriptor(what, descriptor, &bytes);
        bytes
    }

    /// Checks the layout marker and index, and returns the manifest descriptor the index
    /// names `tag`.
    pub fn manifest_for(&self, tag: &str) -> Value {
        let marker: Value = serde_json::from_slice(self.file("oci-layout")).expect("oci-layout");
        assert_eq!(marker["imageLayoutVersion"], "1.0.0");
        let index: Value = serde_json::from_slice(self.file("index.json")).expect("index.json");
        assert_eq!(index["schemaVersion"], 2);
        assert_eq!(index["mediaType"], INDEX);
        let manifests = index["manifests"].as_array().expect("manifests");
        let found: Vec<&Value> = manifests
            .iter()
            .filter(|m| m["annotations"]["org.opencontainers.image.ref.name"] == tag)
            .collect();
        assert_eq!(found.len(), 1, "exactly one manifest tagged {tag}: {index}");
        assert_eq!(found[0]["mediaType"], MANIFEST);
        found[0].clone()
    }
}

/// What a compat-variant puller ends up with.
#[derive(Debug)]
pub struct Pulled {
    /// The manifest's digest: the image digest.
    pub digest: String,
    /// The manifest.
    pub manifest: Value,
    /// The image config.
    pub config: Value,
    /// The extracted `plugin.wasm`.
    pub plugin: Vec<u8>,
}

/// Follows a manifest the way Istio does for a compat image: one layer of the OCI
/// tar+gzip media type, the variant annotation, `plugin.wasm` inside, a wasm module.
/// `blob` fetches (and checks) a blob by descriptor.
pub fn follow_manifest(manifest_bytes: &[u8], blob: impl Fn(&str, &Value) -> Vec<u8>) -> Pulled {
    let image = follow_image(manifest_bytes, blob);
    assert_eq!(
        image.manifest["annotations"]["module.wasm.image/variant"], "compat",
        "Istio's compat variant needs this annotation with an OCI layer"
    );
    let unpacked = Layout::from_tar(&image.layer_tar);
    assert_eq!(
        unpacked.paths(),
        vec!["plugin.wasm"],
        "the layer holds plugin.wasm only"
    );
    let plugin = unpacked.file("plugin.wasm").to_vec();
    assert!(plugin.starts_with(b"\0asm"), "plugin.wasm is a wasm module");
    Pulled {
        digest: image.digest,
        manifest: image.manifest,
        config: image.config,
        plugin,
    }
}

/// What a puller ends up with for a one-layer image (both of ours: the compat image and
/// floodgate-server's runnable one).
#[derive(Debug)]
pub struct Image {
    /// The manifest's digest: the image digest.
    pub digest: String,
    /// The manifest.
    pub manifest: Value,
    /// The image config (`config` holds how to run it).
    pub config: Value,
    /// The single layer, uncompressed.
    pub layer_tar: Vec<u8>,
}

/// Follows a one-layer image's manifest as a runtime does: an OCI manifest, its config,
/// one tar+gzip layer whose uncompressed digest is the config's diff_id. `blob` fetches
/// (and checks) a blob by descriptor.
pub fn follow_image(manifest_bytes: &[u8], blob: impl Fn(&str, &Value) -> Vec<u8>) -> Image {
    let manifest: Value = serde_json::from_slice(manifest_bytes).expect("manifest JSON");
    assert_eq!(manifest["schemaVersion"], 2);
    assert_eq!(manifest["mediaType"], MANIFEST);
    assert_eq!(manifest["config"]["mediaType"], CONFIG);
    let config: Value =
        serde_json::from_slice(&blob("config", &manifest["config"])).expect("config JSON");
    let layers = manifest["layers"].as_array().expect("layers");
    assert_eq!(layers.len(), 1, "exactly one layer");
    assert_eq!(layers[0]["mediaType"], LAYER);
    let mut layer_tar = Vec::new();
    GzDecoder::new(blob("layer", &layers[0]).as_slice())
        .read_to_end(&mut layer_tar)
        .expect("layer is gzip");
    assert_eq!(
        config["rootfs"]["diff_ids"],
        serde_json::json!([sha256(&layer_tar)]),
        "the config's diff_id is the uncompressed layer's digest"
    );
    Image {
        digest: sha256(manifest_bytes),
        manifest,
        config,
        layer_tar,
    }
}

/// Every entry of a layer tar: path, mode, whether a directory, contents.
pub fn entries(layer_tar: &[u8]) -> Vec<(String, u32, bool, Vec<u8>)> {
    let mut archive = tar::Archive::new(layer_tar);
    let mut found = Vec::new();
    for entry in archive.entries().expect("tar entries") {
        let mut entry = entry.expect("tar entry");
        let header = entry.header().clone();
        let mut body = Vec::new();
        entry.read_to_end(&mut body).expect("read tar entry");
        found.push((
            entry.path().expect("path").to_string_lossy().into_owned(),
            header.mode().expect("mode"),
            header.entry_type().is_dir(),
            body,
        ));
    }
    found
}

/// Unpacks a layer into `root` as a runtime does, modes included.
pub fn unpack(layer_tar: &[u8], root: &Path) {
    let mut archive = tar::Archive::new(layer_tar);
    archive.set_preserve_permissions(true);
    archive.unpack(root).expect("unpack the layer");
}

/// Pulls image `tag` out of a layout, checking every step.
pub fn pull_from_layout(layout: &Layout, tag: &str) -> Pulled {
    let descriptor = layout.manifest_for(tag);
    let manifest = layout.blob("manifest", &descriptor);
    follow_manifest(&manifest, |what, d| layout.blob(what, d))
}
