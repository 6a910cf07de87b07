//! Every fuzz target on stable Rust, as part of `cargo test`: the committed corpus and
//! crash reproducers, then a fixed batch of mutations of them. A panic, an abort or an
//! allocation over 64 MiB (see `floodgate_fuzz::cap`) fails the test.
//!
//! A failing mutation is written to `fuzz/artifacts/<target>/replay-<n>` so it can be
//! replayed with `cargo fuzz run <target> <file>` and committed under `regressions/`.

use floodgate_fuzz::mutate::{mutate, Rng};
use floodgate_fuzz::{Body, TARGETS};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

/// Mutations tried per target; `FUZZ_REPLAY_MUTATIONS` changes it.
const MUTATIONS: usize = 2_000;

fn inputs(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    paths.sort();
    paths
        .into_iter()
        .filter_map(|p| std::fs::read(&p).ok().map(|bytes| (p, bytes)))
        .collect()
}

fn fuzz_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `body` on `input`, saying what failed.
fn passes(body: Body, input: &[u8]) -> bool {
    catch_unwind(AssertUnwindSafe(|| body(input))).is_ok()
}

fn replay(target: &str) {
    let Some(&(_, body)) = TARGETS.iter().find(|(name, _)| *name == target) else {
        unreachable!("no target {target}");
    };
    let dir = fuzz_dir();
    let corpus = inputs(&dir.join("corpus").join(target));
    assert!(!corpus.is_empty(), "{target} has no committed corpus");
    let regressions = inputs(&dir.join("regressions").join(target));
    let mut failed: Vec<String> = corpus
        .iter()
        .chain(&regressions)
        .filter(|(_, bytes)| !passes(body, bytes))
        .map(|(path, _)| path.display().to_string())
        .collect();

    let mutations = std::env::var("FUZZ_REPLAY_MUTATIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(MUTATIONS);
    let mut rng = Rng::new(0x666c_6f6f_6467_6174 ^ target.len() as u64);
    let seeds: Vec<&[u8]> = corpus
        .iter()
        .chain(&regressions)
        .map(|(_, b)| b.as_slice())
        .collect();
    for n in 0..mutations {
        let other = seeds[rng.below(seeds.len())];
        let input = mutate(&mut rng, seeds[n % seeds.len()], other);
        if !passes(body, &input) {
            let out = dir.join("artifacts").join(target);
            let file = out.join(format!("replay-{n}"));
            let saved = std::fs::create_dir_all(&out).and_then(|()| std::fs::write(&file, &input));
            failed.push(match saved {
                Ok(()) => format!("mutation {n}, saved as {}", file.display()),
                Err(e) => format!("mutation {n} (not saved: {e}): {input:?}"),
            });
        }
    }
    assert!(
        failed.is_empty(),
        "{target} failed on:\n{}",
        failed.join("\n")
    );
}

#[test]
fn filter_config() {
    replay("filter_config");
}

#[test]
fn rls_answer() {
    replay("rls_answer");
}

#[test]
fn descriptors() {
    replay("descriptors");
}

#[test]
fn server_config() {
    replay("server_config");
}

#[test]
fn server_request() {
    replay("server_request");
}

#[test]
fn usage_stream() {
    replay("usage_stream");
}

#[test]
fn http2_frames() {
    replay("http2_frames");
}

#[test]
fn every_target_is_replayed_and_has_a_libfuzzer_entry_point() {
    for (name, _) in TARGETS {
        let entry = fuzz_dir().join("fuzz_targets").join(format!("{name}.rs"));
        assert!(entry.is_file(), "{} is missing", entry.display());
    }
}
