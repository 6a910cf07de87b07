//! Every invalid configuration under `tests/fixtures/config/invalid/` is refused with the
//! exact message in its `.err` file (a `.yaml` file, or a directory of them); every valid one
//! under `valid/` loads.

// A test crate: failing loudly on a broken fixture is the point.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use floodgate_server::config;
use std::fs;
use std::path::{Path, PathBuf};

const INVALID: &str = "tests/fixtures/config/invalid";

fn fixtures() -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for entry in fs::read_dir(INVALID).unwrap() {
        let err = entry.unwrap().path();
        if err.extension().is_some_and(|e| e == "err") {
            let stem = err.with_extension("");
            let input = if stem.is_dir() {
                stem
            } else {
                err.with_extension("yaml")
            };
            out.push((
                input,
                fs::read_to_string(&err).unwrap().trim_end().to_owned(),
            ));
        }
    }
    out.sort();
    out
}

#[test]
fn each_invalid_fixture_fails_with_its_exact_message() {
    let all = fixtures();
    assert!(all.len() >= 20, "fixtures went missing: {}", all.len());
    let mut wrong = Vec::new();
    for (input, expected) in &all {
        match config::load(input) {
            Ok(_) => wrong.push(format!(
                "{}: loaded, expected {expected:?}",
                input.display()
            )),
            Err(e) if e.to_string() != *expected => wrong.push(format!(
                "{}:\n  got      {e}\n  expected {expected}",
                input.display()
            )),
            Err(_) => {}
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn every_invalid_yaml_has_an_expected_message() {
    for entry in fs::read_dir(INVALID).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e == "yaml") || p.is_dir() {
            let err = p.with_extension("err");
            assert!(err.exists(), "{} has no .err", p.display());
        }
    }
}

#[test]
fn an_empty_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("notes.txt"), "not config").unwrap();
    let e = config::load(dir.path()).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: no configuration files (*.yaml, *.yml) in this directory",
            dir.path().display()
        )
    );
}

#[test]
fn a_missing_path_is_refused() {
    let e = config::load(Path::new("tests/fixtures/config/nope.yaml")).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("tests/fixtures/config/nope.yaml: cannot read: "),
        "{e}"
    );
}

#[test]
fn the_valid_examples_load() {
    let c = config::load(Path::new("tests/fixtures/config/valid")).unwrap();
    assert!(c.domain("web").is_some());
}

/// 200 KB of nested `[` used to cost libyaml about a minute of CPU (its
/// flow levels make parsing quadratic). The linear pre-scan refuses it before the parser.
#[test]
fn a_200_kb_flow_nesting_bomb_is_refused_by_the_pre_scan() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bomb.yaml");
    let n = 100_000;
    let text = format!(
        "domain: web\ndescriptors: {}{}\n",
        "[".repeat(n),
        "]".repeat(n)
    );
    assert!(text.len() > 200_000);
    fs::write(&file, text).unwrap();
    let e = config::load(&file).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: invalid YAML: flow collections ([...] or {{...}}) nest deeper than 64 levels at line 2 column 78",
            file.display()
        )
    );
}

/// The reference's runtime layout, given as `RUNTIME_ROOT/RUNTIME_SUBDIRECTORY`: the files
/// of `config/` load, and the invalid `reload.yaml` beside it is not read.
#[test]
fn the_reference_runtime_layout_loads_its_config_directory_only() {
    let c = config::load(Path::new("tests/fixtures/config/runtime/ratelimit")).unwrap();
    let mut names: Vec<&str> = c.domain_names().collect();
    names.sort_unstable();
    assert_eq!(names, ["api", "edge"]);
}

#[test]
fn an_empty_runtime_config_directory_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("config")).unwrap();
    fs::write(dir.path().join("beside.yaml"), "domain: x\n").unwrap();
    let e = config::load(dir.path()).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: no configuration files (*.yaml, *.yml) in this directory",
            dir.path().join("config").display()
        )
    );
}

const MERGE: &str = "tests/fixtures/config/merge";

#[test]
fn merge_domains_joins_one_domain_split_over_files() {
    let valid = Path::new(MERGE).join("valid");
    let merged = config::LoadOptions {
        merge_domains: true,
        ..Default::default()
    };
    let c = config::load_with(&valid, &merged).unwrap();
    let shop = c.domain("shop").unwrap();
    assert!(shop.find([("user", "u1")]).is_some(), "from a.yaml");
    assert!(shop.find([("cart", "checkout")]).is_some(), "from b.yaml");
    // Without the flag the same directory is a duplicate domain, as in the reference.
    let e = config::load(&valid).unwrap_err();
    let expected = fs::read_to_string(format!("{MERGE}/valid.err-without-merge")).unwrap();
    assert_eq!(e.to_string(), expected.trim_end());
}

#[test]
fn merge_domains_still_refuses_a_descriptor_defined_twice() {
    let merged = config::LoadOptions {
        merge_domains: true,
        ..Default::default()
    };
    let e = config::load_with(
        &Path::new(MERGE).join("invalid/duplicate_descriptor"),
        &merged,
    )
    .unwrap_err();
    let expected = fs::read_to_string(format!("{MERGE}/invalid/duplicate_descriptor.err")).unwrap();
    assert_eq!(e.to_string(), expected.trim_end());
}

const GOSSIP: &str = "tests/fixtures/config/gossip";

#[test]
fn the_gossip_store_refuses_the_algorithms_it_cannot_hold() {
    let gossip = config::LoadOptions {
        supported: Some(config::Supported {
            store: "gossip",
            algorithms: floodgate_server::store::gossip::part::SUPPORTED,
        }),
        ..Default::default()
    };
    for name in ["sliding_window_log", "concurrency"] {
        let file = Path::new(GOSSIP).join(format!("{name}.yaml"));
        let e = config::load_with(&file, &gossip).unwrap_err();
        let expected = fs::read_to_string(format!("{GOSSIP}/{name}.err")).unwrap();
        assert_eq!(e.to_string(), expected.trim_end(), "{name}");
        // The same file loads for a store that holds every algorithm.
        assert!(config::load(&file).is_ok(), "{name}");
    }
}
