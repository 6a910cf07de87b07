//! The example configurations under `envoy/` stay valid for the pinned Envoy.

use floodgate_integration::paths::repo_root;
use floodgate_integration::Envoy;

#[test]
fn every_envoy_example_passes_validate() {
    let dir = repo_root().join("envoy");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).expect("envoy/") {
        let path = entry.expect("entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let relative = path
            .strip_prefix(repo_root())
            .expect("inside the repository");
        if let Err(log) = Envoy::validate(relative) {
            panic!("{} is not valid:\n{log}", relative.display());
        }
        checked += 1;
    }
    assert!(checked >= 1, "no examples found in {}", dir.display());
}
