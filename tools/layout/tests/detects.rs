//! The check finds what it is meant to find, on small workspaces made for the purpose.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use floodgate_layout::{check, Finding};
use std::path::Path;

fn write(root: &Path, file: &str, text: &str) {
    let path = root.join(file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn keys(root: &Path) -> Vec<String> {
    check(root).unwrap().iter().map(Finding::key).collect()
}

#[test]
fn a_circle_between_siblings_is_found_through_every_kind_of_path() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "k/src/lib.rs",
        "mod a;\nmod b;\nmod c;\npub struct Root;\n",
    );
    // a → b by a `use`, b → a by a path in an expression inside a nested module file.
    write(root, "k/src/a.rs", "use crate::b::Thing;\npub struct A;\n");
    write(root, "k/src/b.rs", "mod inner;\npub struct Thing;\n");
    write(
        root,
        "k/src/b/inner.rs",
        "fn f() { let _ = super::super::a::A; }\n",
    );
    // c names its parent and a sibling one way only: no circle.
    write(root, "k/src/c.rs", "use crate::Root;\nuse crate::a::A;\n");
    assert_eq!(keys(root), ["circle k/src/lib.rs crate a b"]);
}

#[test]
fn macros_imported_modules_and_path_attributes_count_and_tests_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "k/tests/suite.rs",
        "#[path = \"suite/x.rs\"]\nmod x;\nmod y;\n#[cfg(test)]\nmod t { use crate::x::X; }\n",
    );
    // x names y only inside a macro call; y names x through an imported module.
    write(
        root,
        "k/tests/suite/x.rs",
        "pub struct X;\nfn f() { println!(\"{}\", crate::y::Y); }\n",
    );
    write(
        root,
        "k/tests/y/mod.rs",
        "use crate::x as ex;\npub struct Y;\nfn g() { let _ = ex::X; }\n",
    );
    assert_eq!(keys(root), ["circle k/tests/suite.rs crate x y"]);

    // Only a test module makes the way back: no circle.
    write(
        root,
        "k/tests/y/mod.rs",
        "pub struct Y;\n#[cfg(test)]\nmod tests { use crate::x::X; }\n",
    );
    assert!(keys(root).is_empty(), "{:?}", keys(root));
}

#[test]
fn long_files_and_long_server_functions_are_found() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let long_fn = format!("pub fn long() {{\n{}}}\n", "    let _x = 1;\n".repeat(80));
    write(
        root,
        "server/src/lib.rs",
        &format!("mod helpers;\n{long_fn}"),
    );
    write(root, "server/src/helpers.rs", "pub fn short() {}\n");
    // A test file may have long functions; a filter file is not under the function rule.
    write(root, "server/tests/t.rs", &long_fn);
    write(root, "src/lib.rs", &long_fn);
    write(root, "src/big.lua", &"-- line\n".repeat(401));
    assert_eq!(
        keys(root),
        ["file src/big.lua", "function server/src/lib.rs long"]
    );
}
