//! The push commands of `docs/istio.md` work: skopeo copies the layout (directory and tar) into a
//! real registry with the digest unchanged, and pulling it back the way Istio does gives
//! the built filter. The digest the registry reports for the tag is the one `make oci`
//! printed, so `WasmPlugin.spec.sha256` can be set before pushing.

use floodgate_integration::registry::skopeo_copy;
use floodgate_integration::{paths, Registry};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skopeo_pushes_the_layout_and_the_registry_serves_the_built_filter() {
    let registry = Registry::start().await;
    let dir = paths::oci_dir();
    let tag = paths::filter_version();
    let printed = std::fs::read_to_string(dir.join("floodgate.digest")).expect("floodgate.digest");
    let wasm = std::fs::read(paths::wasm()).expect("built wasm");

    let sources = [
        (
            "from-dir",
            format!("oci:{}:{tag}", dir.join("floodgate").display()),
        ),
        (
            "from-tar",
            format!("oci-archive:{}:{tag}", dir.join("floodgate.tar").display()),
        ),
    ];
    for (repository, source) in sources {
        skopeo_copy(
            &source,
            &format!("docker://{}/{repository}:{tag}", registry.host),
        );
        let (pulled, reported) = registry.pull(repository, &tag).await;
        assert_eq!(
            reported,
            printed.trim(),
            "{source}: registry digest\n{}",
            registry.log()
        );
        assert_eq!(pulled.digest, reported);
        assert!(
            pulled.plugin == wasm,
            "{source}: plugin.wasm is not the built filter"
        );
    }
}
