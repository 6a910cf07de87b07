//! The workspace keeps its layout rules (see the crate's documentation): no import
//! circle, no file over 400 lines, no long server function, except what `allow.txt`
//! still lists, and `allow.txt` lists nothing that is fixed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use floodgate_layout::{allow, allow_list, check, workspace_root};

#[test]
fn the_workspace_keeps_its_layout_rules() {
    let findings = check(&workspace_root()).unwrap_or_else(|e| panic!("{e}"));
    let verdict = allow::judge(&findings, &allow::parse(&allow_list()));
    let mut report = String::new();
    for n in &verdict.new {
        report.push_str(&format!("\n- {n}"));
    }
    for s in &verdict.stale {
        report.push_str(&format!(
            "\n- tools/layout/allow.txt lists `{s}`, which is fixed: delete the line"
        ));
    }
    assert!(verdict.passes(), "layout rules broken:{report}");
}
