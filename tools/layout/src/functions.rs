//! The length of every function in a file, from `fn` to its closing brace.

use crate::refs::test_only;
use crate::Error;
use std::path::Path;
use syn::spanned::Spanned;
use syn::{Block, ImplItem, Item, Signature, TraitItem, Type};

/// One function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    /// `Type::name` for a method, else `name`.
    pub name: String,
    /// Lines from `fn` to the closing brace.
    pub lines: usize,
    /// Whether it is a test or inside a test-only module or impl.
    pub test_only: bool,
}

/// Every function with a body in the Rust file at `path`.
pub fn measure(path: &Path) -> Result<Vec<Function>, Error> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::Read(path.to_owned(), e))?;
    let file = syn::parse_file(&text).map_err(|e| Error::Parse(path.to_owned(), e))?;
    let mut out = Vec::new();
    items(&file.items, false, &mut out);
    Ok(out)
}

fn items(list: &[Item], in_test: bool, out: &mut Vec<Function>) {
    for item in list {
        match item {
            Item::Fn(f) => out.push(function(
                f.sig.ident.to_string(),
                &f.sig,
                &f.block,
                in_test || test_only(&f.attrs),
            )),
            Item::Impl(i) => {
                let test = in_test || test_only(&i.attrs);
                let owner = type_name(&i.self_ty);
                for ii in &i.items {
                    if let ImplItem::Fn(f) = ii {
                        out.push(function(
                            format!("{owner}::{}", f.sig.ident),
                            &f.sig,
                            &f.block,
                            test || test_only(&f.attrs),
                        ));
                    }
                }
            }
            Item::Trait(t) => {
                let test = in_test || test_only(&t.attrs);
                for ti in &t.items {
                    if let TraitItem::Fn(f) = ti {
                        if let Some(block) = &f.default {
                            out.push(function(
                                format!("{}::{}", t.ident, f.sig.ident),
                                &f.sig,
                                block,
                                test || test_only(&f.attrs),
                            ));
                        }
                    }
                }
            }
            Item::Mod(m) => {
                if let Some((_, content)) = &m.content {
                    items(content, in_test || test_only(&m.attrs), out);
                }
            }
            _ => {}
        }
    }
}

fn function(name: String, sig: &Signature, block: &Block, test_only: bool) -> Function {
    let start = sig.span().start().line;
    let end = block.brace_token.span.close().end().line;
    Function {
        name,
        lines: end.saturating_sub(start) + 1,
        test_only,
    }
}

/// The last path segment of a type (`MemoryStore` for `MemoryStore<C>`), or `_`.
fn type_name(ty: &Type) -> String {
    match ty {
        Type::Path(p) => p
            .path
            .segments
            .last()
            .map_or_else(|| "_".to_string(), |s| s.ident.to_string()),
        Type::Reference(r) => type_name(&r.elem),
        _ => "_".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_run_from_fn_to_the_closing_brace() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.rs");
        std::fs::write(
            &path,
            "/// doc\nfn short() {}\n\nimpl<T> Thing<T> {\n    fn three(&self)\n    {\n    }\n}\n#[cfg(test)]\nmod tests {\n    fn helper() {\n    }\n}\n",
        )
        .unwrap();
        let got = measure(&path).unwrap();
        assert_eq!(
            got,
            [
                Function {
                    name: "short".into(),
                    lines: 1,
                    test_only: false
                },
                Function {
                    name: "Thing::three".into(),
                    lines: 3,
                    test_only: false
                },
                Function {
                    name: "helper".into(),
                    lines: 2,
                    test_only: true
                },
            ]
        );
    }
}
