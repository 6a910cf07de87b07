//! The image `make oci` writes is what Istio's puller accepts and holds exactly the built
//! filter: the layout directory and its tar are followed index → manifest → layer with
//! every digest and size checked, independently of the code that wrote them.

use floodgate_integration::oci::{self, Layout};
use floodgate_integration::paths;

fn built_wasm() -> Vec<u8> {
    std::fs::read(paths::wasm()).expect("read the built wasm")
}

#[test]
fn the_layout_directory_leads_from_the_index_to_the_built_wasm() {
    let layout = Layout::from_dir(&paths::oci_dir().join("floodgate"));
    let pulled = oci::pull_from_layout(&layout, &paths::filter_version());
    assert!(
        pulled.plugin == built_wasm(),
        "plugin.wasm in the image is not the built floodgate.wasm: run `make oci` after `make wasm`"
    );
    assert_eq!(pulled.config["architecture"], "wasm");
    assert_eq!(pulled.config["os"], "wasip1");
    assert_eq!(
        pulled.manifest["annotations"]["org.opencontainers.image.title"],
        "floodgate"
    );

    // Nothing else lies in the layout: the marker, the index and the three blobs.
    let mut expected = vec![
        "index.json".to_string(),
        "oci-layout".to_string(),
        format!("blobs/sha256/{}", &pulled.digest["sha256:".len()..]),
    ];
    for descriptor in [&pulled.manifest["config"], &pulled.manifest["layers"][0]] {
        let digest = descriptor["digest"].as_str().expect("digest");
        expected.push(format!("blobs/sha256/{}", &digest["sha256:".len()..]));
    }
    expected.sort();
    assert_eq!(layout.paths(), expected);
}

#[test]
fn the_layout_tar_holds_the_same_image_as_the_directory() {
    let dir = paths::oci_dir();
    let tar = std::fs::read(dir.join("floodgate.tar")).expect("floodgate.tar (run `make oci`)");
    let from_tar = Layout::from_tar(&tar);
    let from_dir = Layout::from_dir(&dir.join("floodgate"));
    assert_eq!(from_tar.paths(), from_dir.paths());
    for path in from_dir.paths() {
        assert!(from_tar.file(path) == from_dir.file(path), "{path} differs");
    }
    let version = paths::filter_version();
    let pulled = oci::pull_from_layout(&from_tar, &version);
    assert!(pulled.plugin == built_wasm());
}

#[test]
fn the_digest_file_names_the_manifest_istio_will_check() {
    let dir = paths::oci_dir();
    let layout = Layout::from_dir(&dir.join("floodgate"));
    let pulled = oci::pull_from_layout(&layout, &paths::filter_version());
    let written = std::fs::read_to_string(dir.join("floodgate.digest")).expect("floodgate.digest");
    assert_eq!(written.trim(), pulled.digest);
}

/// The checks above can fail: a layout whose layer lost one bit is refused.
#[test]
fn a_tampered_layer_is_caught() {
    let source = paths::oci_dir().join("floodgate");
    let copy = tempfile::tempdir().expect("temp dir");
    let layout = Layout::from_dir(&source);
    for path in layout.paths() {
        let target = copy.path().join(path);
        std::fs::create_dir_all(target.parent().expect("parent")).expect("mkdir");
        std::fs::write(target, layout.file(path)).expect("copy");
    }
    let tag = paths::filter_version();
    let pulled = oci::pull_from_layout(&layout, &tag);
    let layer = pulled.manifest["layers"][0]["digest"]
        .as_str()
        .expect("layer digest")
        .trim_start_matches("sha256:")
        .to_string();
    let layer_path = copy.path().join("blobs/sha256").join(layer);
    let mut bytes = std::fs::read(&layer_path).expect("read layer");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 1;
    std::fs::write(&layer_path, bytes).expect("write layer");

    let tampered = Layout::from_dir(copy.path());
    let result = std::panic::catch_unwind(|| oci::pull_from_layout(&tampered, &tag));
    let message = result.expect_err("a tampered layer must be refused");
    let text = message
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(text.contains("layer: digest does not match"), "{text}");
}
