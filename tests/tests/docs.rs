//! The documentation holds together: every relative link of every Markdown file resolves
//! (files and anchors), pages stay short enough to read, each component has one metrics
//! table, the README's tour is what `make run` prints, and no file cites an issue number
//! (nobody outside can open one: say what the behaviour is instead).

use floodgate_integration::markdown;
use floodgate_integration::paths::repo_root;
use std::path::{Component, Path, PathBuf};

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn relative(path: &Path) -> String {
    path.strip_prefix(repo_root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// `base/../x/./y` as `x/y`, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// What is wrong with one link of `file`, if anything.
fn broken(file: &Path, target: &str) -> Option<String> {
    if target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
    let resolved = if path.is_empty() {
        file.to_path_buf()
    } else {
        normalize(&file.parent().expect("a file's directory").join(path))
    };
    if !resolved.starts_with(repo_root()) {
        return Some(format!("{target}: leaves the repository"));
    }
    if !resolved.exists() {
        return Some(format!("{target}: no such file"));
    }
    if anchor.is_empty() {
        return None;
    }
    if resolved.extension().and_then(|e| e.to_str()) != Some("md") {
        return Some(format!(
            "{target}: an anchor into a file that is not Markdown"
        ));
    }
    let anchors = markdown::anchors(&read(&resolved));
    (!anchors.iter().any(|a| a == anchor))
        .then(|| format!("{target}: no heading #{anchor} in {}", relative(&resolved)))
}

#[test]
fn every_relative_link_resolves_anchors_included() {
    let files = markdown::files();
    assert!(files.len() > 20, "found only {files:?}");
    let mut problems = Vec::new();
    let mut checked = 0;
    for file in &files {
        for (line, target) in markdown::links(&read(file)) {
            checked += 1;
            if let Some(problem) = broken(file, &target) {
                problems.push(format!("{}:{line}: {problem}", relative(file)));
            }
        }
    }
    assert!(checked > 100, "only {checked} links found");
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_link_checker_finds_what_github_would_link() {
    assert_eq!(
        markdown::slug("Charges: a cost known after the response (`x-floodgate-charge: 1`)"),
        "charges-a-cost-known-after-the-response-x-floodgate-charge-1"
    );
    assert_eq!(
        markdown::slug("floodgate-server's `/metrics`"),
        "floodgate-servers-metrics"
    );
    assert_eq!(markdown::slug("The module's size"), "the-modules-size");
    let text = "# A\n```sh\n# not a heading [x](nowhere.md)\n```\n## A\nsee `[y](z.md)` and [w](v.md#a-1)\n";
    assert_eq!(markdown::anchors(text), ["a", "a-1"]);
    assert_eq!(markdown::links(text), [(6, "v.md#a-1".to_string())]);
    let here = repo_root().join("docs/architecture.md");
    assert!(broken(&here, "configuration.md#no-such-heading").is_some());
    assert!(broken(&here, "no-such-page.md").is_some());
    assert!(broken(&here, "../../outside.md").is_some());
    assert!(broken(&here, "local-mode.md").is_none());
}

/// The README fits on a screen or two; a page of `docs/` is read in one sitting.
#[test]
fn pages_stay_short() {
    let mut long = Vec::new();
    for file in markdown::files() {
        let name = relative(&file);
        let limit = match name.as_str() {
            "README.md" => 150,
            n if n.starts_with("docs/") || n.starts_with("examples/") => 300,
            _ => continue,
        };
        let lines = read(&file).lines().count();
        if lines > limit {
            long.push(format!(
                "{name}: {lines} lines (at most {limit}: split it by topic)"
            ));
        }
    }
    assert!(long.is_empty(), "{}", long.join("\n"));
}

/// The metrics tables, one per component; nothing else lists metrics row by row (the
/// tables are checked against what is exported, `metrics_docs.rs`).
pub const METRICS_TABLES: [&str; 2] = ["docs/metrics.md", "docs/server/metrics.md"];

#[test]
fn each_component_has_one_metrics_table() {
    let mut elsewhere = Vec::new();
    for file in markdown::files() {
        let name = relative(&file);
        if METRICS_TABLES.contains(&name.as_str()) {
            continue;
        }
        for (line, text) in markdown::prose(&read(&file)) {
            if text.starts_with("| `floodgate_") {
                elsewhere.push(format!("{name}:{line}: {text}"));
            }
        }
    }
    assert!(
        elsewhere.is_empty(),
        "metric rows outside {METRICS_TABLES:?} (add them there, link to them here):\n{}",
        elsewhere.join("\n")
    );
}

/// The command lines `scripts/run.sh` prints (indented by two spaces in its heredoc).
fn printed_by_make_run() -> Vec<String> {
    let script = read(&repo_root().join("scripts/run.sh"));
    let text = script
        .split_once("<<'TXT'")
        .and_then(|(_, rest)| rest.split_once("\nTXT"))
        .map(|(text, _)| text)
        .expect("run.sh prints its walk-through from a heredoc");
    text.lines()
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .map(|l| l.trim().to_string())
        .collect()
}

/// The README's tour shows lines of `make run`'s walk-through, which
/// `tests/tests/make_run.rs` runs: so the tour is true as long as that test passes.
#[test]
fn the_readme_tour_is_what_make_run_prints() {
    let readme = read(&repo_root().join("README.md"));
    let tour = readme
        .split_once("## A five-minute tour")
        .and_then(|(_, rest)| rest.split_once("\n## "))
        .map(|(tour, _)| tour)
        .expect("README.md has a section \"A five-minute tour\"");
    let printed = printed_by_make_run();
    let mut shown = 0;
    let mut fenced = None;
    for line in tour.lines() {
        if let Some(lang) = line.strip_prefix("```") {
            fenced = if fenced.is_some() {
                None
            } else {
                Some(lang.to_string())
            };
            continue;
        }
        if fenced.as_deref() == Some("sh") {
            shown += 1;
            assert!(
                printed.iter().any(|p| p == line.trim()),
                "README.md's tour shows a line `make run` does not print: {line}\n\
                 printed: {printed:#?}"
            );
        }
    }
    assert!(shown >= 6, "the tour shows {shown} command lines");
}
/// Where an issue number would be written: sources, docs, examples, manifests, scripts.
fn cited_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let path = entry.expect("dir entry").path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            let skipped = [
                "target",
                "node_modules",
                "corpus",
                "artifacts",
                "regressions",
            ];
            if path.is_dir() {
                if !name.starts_with('.') && !skipped.contains(&name) {
                    walk(&path, out);
                }
            } else if name == "Makefile"
                || [
                    ".rs", ".md", ".yaml", ".yml", ".toml", ".sh", ".lua", ".proto",
                ]
                .iter()
                .any(|ext| name.ends_with(ext))
            {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&repo_root(), &mut out);
    out
}

/// Where `line` cites an issue by number: `issue 12`, `issues 11 and 12`, `#12`.
fn issue_citation(line: &str) -> Option<usize> {
    let lower = line.to_ascii_lowercase();
    let bytes = lower.as_bytes();
    for (at, _) in lower.match_indices("issue") {
        let rest = lower[at + 5..].trim_start_matches('s');
        let rest = rest.trim_start_matches([' ', '#']);
        if rest.starts_with(|c: char| c.is_ascii_digit()) {
            return Some(at);
        }
    }
    for (at, _) in lower.match_indices('#') {
        let before = at.checked_sub(1).map(|b| bytes[b]);
        let digits = lower[at + 1..]
            .bytes()
            .take_while(u8::is_ascii_digit)
            .count();
        let after = bytes.get(at + 1 + digits).copied();
        let word_before = before.is_some_and(|b| b.is_ascii_alphanumeric());
        let word_after = after.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_');
        if digits > 0 && !word_before && !word_after {
            return Some(at);
        }
    }
    None
}

#[test]
fn no_file_cites_an_issue_number() {
    for (line, cites) in [
        ("the over-limit cache (issue 11)", true),
        ("Issue 13 item 8: a nested YAML", true),
        ("see #12", true),
        ("issues 11 and 12", true),
        ("PKCS#8 or SEC1", false),
        ("an issue with the key", false),
        ("#[derive(Debug)]", false),
        ("`cfg!(feature = \"x\")` #1a2b", false),
    ] {
        assert_eq!(issue_citation(line).is_some(), cites, "{line}");
    }
    let mut found = Vec::new();
    for file in cited_files() {
        let name = relative(&file);
        if name == "tests/tests/docs.rs" {
            continue; // the examples just above
        }
        for (number, line) in read(&file).lines().enumerate() {
            if issue_citation(line).is_some() {
                found.push(format!("{name}:{}: {}", number + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "issue numbers (say what the behaviour is instead):\n{}",
        found.join("\n")
    );
}
