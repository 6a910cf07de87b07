//! The repository's Markdown as the docs tests read it: headings and the anchors GitHub
//! gives them, inline links, and the lines under a heading. Fenced code is skipped
//! everywhere (a `#` comment in a shell block is no heading, a `[x](y)` in it no link).

use crate::paths;
use std::path::{Path, PathBuf};

/// Every Markdown file of the repository, sorted, skipping build outputs, hidden
/// directories and installed packages.
pub fn files() -> Vec<PathBuf> {
    let mut found = Vec::new();
    walk(&paths::repo_root(), &mut found);
    found.sort();
    found
}

fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("dir entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if path.is_dir() {
            let skipped = [
                "target",
                "node_modules",
                "corpus",
                "artifacts",
                "regressions",
            ];
            if !name.starts_with('.') && !skipped.contains(&name) {
                walk(&path, found);
            }
        } else if name.ends_with(".md") {
            found.push(path);
        }
    }
}

/// The lines of `text` outside fenced code blocks, numbered from 1.
pub fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            lines.push((i + 1, line));
        }
    }
    lines
}

/// A heading's text (`## Paths: normalize them` gives `Paths: normalize them`).
pub fn heading(line: &str) -> Option<&str> {
    let hashes = line.len() - line.trim_start_matches('#').len();
    let rest = &line[hashes..];
    (1..=6)
        .contains(&hashes)
        .then_some(rest)
        .filter(|r| r.starts_with(' '))
        .map(str::trim)
}

/// The anchor GitHub gives a heading: its text as rendered (code spans and links reduced
/// to their text), lower case, with everything but letters, digits, spaces, `-` and `_`
/// removed and spaces turned into `-`.
pub fn slug(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    // A link renders as its text.
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find("](").map(|c| open + c) else {
            break;
        };
        let Some(end) = rest[close..].find(')').map(|e| close + e) else {
            break;
        };
        text.push_str(&rest[..open]);
        text.push_str(&rest[open + 1..close]);
        rest = &rest[end + 1..];
    }
    text.push_str(rest);
    text.to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every anchor of a Markdown text, in order; a repeated heading gets `-1`, `-2`, … as
/// on GitHub.
pub fn anchors(text: &str) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for (_, line) in prose(text) {
        let Some(h) = heading(line) else { continue };
        let base = slug(h);
        let repeats = seen
            .iter()
            .filter(|s| **s == base || s.strip_prefix(&format!("{base}-")).is_some_and(is_count))
            .count();
        seen.push(if repeats == 0 {
            base
        } else {
            format!("{base}-{repeats}")
        });
    }
    seen
}

fn is_count(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// The targets of the inline links (`[text](target)`) of a text, with their line
/// numbers; code spans are skipped.
pub fn links(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (number, line) in prose(text) {
        let line = without_code_spans(line);
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            found.push((number, after[..end].to_string()));
            rest = &after[end..];
        }
    }
    found
}

fn without_code_spans(line: &str) -> String {
    line.split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 0)
        .map(|(_, part)| part)
        .collect::<Vec<_>>()
        .join("``")
}

/// The lines under the heading `title` of `text`, up to the next heading of any level.
pub fn section<'a>(text: &'a str, title: &str) -> Vec<&'a str> {
    let mut inside = false;
    let mut lines = Vec::new();
    for (_, line) in prose(text) {
        if let Some(h) = heading(line) {
            inside = h == title;
        } else if inside {
            lines.push(line);
        }
    }
    lines
}
