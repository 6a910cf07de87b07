//! floodgate-server's image: a runnable Linux image holding one static binary and the
//! directory its configuration is mounted on, nothing else.
//!
//! # What is in it
//! - [`BINARY`], mode 0755 and owned by root, so the process (not root) cannot replace it;
//! - [`CONFIG_DIR`], empty: a Kubernetes ConfigMap is mounted there;
//! - [`ALIASES`]: the same binary under the reference's path (a hard link entry, no second
//!   copy), because Envoy Gateway's Deployment runs the rate limit container with
//!   `command: ["/bin/ratelimit"]`, which replaces the entrypoint: swapping the image is
//!   then the one change.
//!
//! No shell, no C library, no CA bundle, no passwd file: the binary is statically linked
//! (checked, [`crate::elf`]) and the user is numeric, which is what Kubernetes'
//! `runAsNonRoot` needs to verify it without a passwd file. A root file system this small
//! can be mounted read-only: the server writes nothing to disk.
//!
//! # How a container of it runs
//! The entrypoint is the binary; the default arguments serve [`CONFIG_DIR`] with gRPC on
//! `0.0.0.0:8081` and `/healthz`/`/metrics` on `0.0.0.0:8080` (a pod's `args` replace
//! them); user [`USER`]; SIGTERM stops it gracefully (in-flight calls finish).

use crate::archive::{self, Item};
use crate::document::{Annotations, Empty, RuntimeConfig};
use crate::elf;
use crate::image::{assemble, BuildError, Image, Parts};
use crate::media;
use std::collections::BTreeMap;

/// Where the binary lies in the image, and the entrypoint.
pub const BINARY: &str = "/usr/local/bin/floodgate-server";
/// Second names of [`BINARY`]: `/bin/ratelimit` is where envoyproxy/ratelimit's image puts
/// its binary, and the command Envoy Gateway gives the container.
pub const ALIASES: &[&str] = &["/bin/ratelimit"];
/// The directory the configuration is mounted on (a declared volume).
pub const CONFIG_DIR: &str = "/etc/floodgate";
/// `UID:GID` of the process: 65532, the id conventionally called `nonroot`, owns nothing
/// in the image.
pub const USER: &str = "65532:65532";
/// The RLS gRPC port the default arguments listen on.
pub const GRPC_PORT: u16 = 8081;
/// The `/healthz` and `/metrics` port the default arguments listen on.
pub const HTTP_PORT: u16 = 8080;
/// The image's title annotation unless one is given.
pub const TITLE: &str = "floodgate-server";

/// Builds the server's image around `binary` (a static x86-64 Linux executable), named
/// `tag` in the index. `annotations` (the OCI annotation keys: version, revision,
/// licenses, …) go on the manifest and, as labels, in the config; the title defaults to
/// [`TITLE`].
pub fn build_server(
    binary: &[u8],
    tag: &str,
    mut annotations: Annotations,
) -> Result<Image, BuildError> {
    elf::check_static_x86_64(binary).map_err(BuildError::NotStatic)?;
    annotations
        .entry(media::TITLE_ANNOTATION.to_string())
        .or_insert_with(|| TITLE.to_string());

    let binary_path = relative(BINARY);
    // Every parent directory gets its own entry, so that extraction gives it the mode
    // here rather than the extractor's default.
    let mut directories: Vec<String> = Vec::new();
    let config_dir = format!("{}/", relative(CONFIG_DIR));
    let aliases: Vec<String> = ALIASES.iter().map(|a| relative(a)).collect();
    for dir in parents(&binary_path)
        .into_iter()
        .chain(parents(&config_dir))
        .chain(aliases.iter().flat_map(|a| parents(a)))
    {
        if !directories.contains(&dir) {
            directories.push(dir);
        }
    }
    let mut items: Vec<Item<'_>> = directories.iter().map(|d| Item::Dir(d)).collect();
    items.push(Item::Executable(&binary_path, binary));
    // After the binary: a hard link names an entry already written.
    items.extend(aliases.iter().map(|a| Item::HardLink(a, &binary_path)));
    let layer_tar = archive::tar(&items)?;

    assemble(Parts {
        layer_tar,
        architecture: media::LINUX_ARCHITECTURE,
        os: media::LINUX_OS,
        runtime: Some(runtime_config(annotations.clone())),
        annotations,
        tag,
        payload: binary,
    })
}

/// The image config's `config`: how a runtime starts the server.
fn runtime_config(labels: Annotations) -> RuntimeConfig {
    RuntimeConfig {
        user: USER.to_string(),
        exposed_ports: BTreeMap::from([
            (format!("{GRPC_PORT}/tcp"), Empty {}),
            (format!("{HTTP_PORT}/tcp"), Empty {}),
        ]),
        entrypoint: vec![BINARY.to_string()],
        cmd: vec![
            format!("--config={CONFIG_DIR}"),
            format!("--grpc-addr=0.0.0.0:{GRPC_PORT}"),
            format!("--http-addr=0.0.0.0:{HTTP_PORT}"),
        ],
        volumes: BTreeMap::from([(CONFIG_DIR.to_string(), Empty {})]),
        working_dir: "/".to_string(),
        stop_signal: "SIGTERM".to_string(),
        labels,
    }
}

/// An absolute image path as a tar entry name (tar entries are relative to the root).
fn relative(path: &str) -> String {
    path.trim_start_matches('/').to_string()
}

/// The directories above `path`, outermost first: `a/b/c` gives `a`, `a/b`.
fn parents(path: &str) -> Vec<String> {
    let parts: Vec<&str> = path.split('/').collect();
    (1..parts.len())
        .map(|n| parts[..n].join("/"))
        .filter(|d| !d.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elf::tests::elf_with_program_headers;
    use flate2::read::GzDecoder;
    use serde_json::Value;
    use std::io::Read;

    fn static_binary() -> Vec<u8> {
        elf_with_program_headers(&[1])
    }

    fn json(bytes: &[u8]) -> Value {
        serde_json::from_slice(bytes).unwrap()
    }

    fn layer_entries(image: &Image) -> Vec<(String, u32, Vec<u8>)> {
        let mut tar_bytes = Vec::new();
        GzDecoder::new(image.layer.bytes.as_slice())
            .read_to_end(&mut tar_bytes)
            .unwrap();
        let mut archive = tar::Archive::new(tar_bytes.as_slice());
        let mut entries = Vec::new();
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            let mut body = Vec::new();
            entry.read_to_end(&mut body).unwrap();
            let mode = entry.header().mode().unwrap();
            entries.push((entry.path().unwrap().display().to_string(), mode, body));
        }
        entries
    }

    #[test]
    fn the_layer_holds_the_binary_and_the_config_directory_only() {
        let binary = static_binary();
        let image = build_server(&binary, "0.1.0", Annotations::new()).unwrap();
        let entries = layer_entries(&image);
        let names: Vec<(&str, u32)> = entries.iter().map(|(p, m, _)| (p.as_str(), *m)).collect();
        assert_eq!(
            names,
            vec![
                ("usr/", 0o755),
                ("usr/local/", 0o755),
                ("usr/local/bin/", 0o755),
                ("etc/", 0o755),
                ("etc/floodgate/", 0o755),
                ("bin/", 0o755),
                ("usr/local/bin/floodgate-server", 0o755),
                ("bin/ratelimit", 0o755),
            ]
        );
        assert_eq!(entries[6].2, binary);
        assert!(entries[7].2.is_empty(), "the alias is a link, not a copy");
        assert_eq!(image.payload_digest, crate::Digest::of(&binary));
    }

    #[test]
    fn the_config_says_how_to_run_it_as_a_non_root_user() {
        let annotations = Annotations::from([(
            "org.opencontainers.image.version".to_string(),
            "0.1.0".to_string(),
        )]);
        let image = build_server(&static_binary(), "0.1.0", annotations).unwrap();
        let config = json(&image.config.bytes);
        assert_eq!(config["architecture"], "amd64");
        assert_eq!(config["os"], "linux");
        let run = &config["config"];
        assert_eq!(run["User"], "65532:65532");
        assert_eq!(run["Entrypoint"], serde_json::json!([BINARY]));
        assert_eq!(
            run["Cmd"],
            serde_json::json!([
                "--config=/etc/floodgate",
                "--grpc-addr=0.0.0.0:8081",
                "--http-addr=0.0.0.0:8080"
            ])
        );
        assert_eq!(
            run["ExposedPorts"],
            serde_json::json!({"8080/tcp": {}, "8081/tcp": {}})
        );
        assert_eq!(run["Volumes"], serde_json::json!({"/etc/floodgate": {}}));
        assert_eq!(run["StopSignal"], "SIGTERM");
        assert_eq!(run["Labels"]["org.opencontainers.image.version"], "0.1.0");
        assert_eq!(run["Labels"]["org.opencontainers.image.title"], TITLE);

        let manifest = json(&image.manifest.bytes);
        assert_eq!(manifest["annotations"], run["Labels"]);
        assert!(
            manifest["annotations"]
                .get(media::VARIANT_ANNOTATION)
                .is_none(),
            "a runnable image is not a wasm compat image"
        );
    }

    #[test]
    fn a_given_title_is_kept_and_the_same_input_gives_the_same_image() {
        let titled = Annotations::from([(media::TITLE_ANNOTATION.to_string(), "x".to_string())]);
        let a = build_server(&static_binary(), "0.1.0", titled.clone()).unwrap();
        assert_eq!(
            json(&a.manifest.bytes)["annotations"][media::TITLE_ANNOTATION],
            "x"
        );
        assert_eq!(a, build_server(&static_binary(), "0.1.0", titled).unwrap());
    }

    #[test]
    fn a_dynamically_linked_binary_is_refused_with_the_remedy() {
        let dynamic = elf_with_program_headers(&[6, 3, 1]);
        let err = build_server(&dynamic, "0.1.0", Annotations::new()).unwrap_err();
        assert!(err.to_string().contains("dynamically linked"), "{err}");
        assert!(err.to_string().contains("make server-static"), "{err}");
        assert!(build_server(b"\0asm\x01\0\0\0", "0.1.0", Annotations::new()).is_err());
    }

    #[test]
    fn parents_lists_each_directory_above_a_path() {
        assert_eq!(parents("a/b/c"), vec!["a", "a/b"]);
        assert_eq!(parents("etc/floodgate/"), vec!["etc", "etc/floodgate"]);
        assert!(parents("file").is_empty());
    }
}
