//! What a module's own items name: every path (in `use` items, expressions, types,
//! patterns, and `crate::`/`super::`/`self::` paths inside macro calls), and what its
//! `use` items bring into scope. Child modules' items are their own; test-only items are
//! left out.

use proc_macro2::{TokenStream, TokenTree};
use std::collections::HashMap;
use syn::visit::Visit;
use syn::{Attribute, Item, UseTree};

/// A path named by a module, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    /// Its segments, e.g. `["crate", "store", "CounterKey"]` or `["super", "Check"]`.
    pub segments: Vec<String>,
}

impl Named {
    /// The path as written, `a::b::c`.
    pub fn text(&self) -> String {
        self.segments.join("::")
    }
}

/// What one module's items name and import.
#[derive(Debug, Default)]
pub struct Names {
    /// Every path named.
    pub named: Vec<Named>,
    /// Names brought into scope by `use`: the local name and the path it stands for.
    pub imports: HashMap<String, Vec<String>>,
}

/// Collects what `items` (one module's, without its child modules') name.
pub fn collect(items: &[Item]) -> Names {
    let mut v = Collector::default();
    for item in items {
        v.visit_item(item);
    }
    v.names
}

/// Whether `attrs` make an item test-only: `#[cfg(test)]`, `#[cfg(all(test, …))]` or
/// `#[test]`.
pub fn test_only(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| {
        if a.path().is_ident("test") {
            return true;
        }
        if !a.path().is_ident("cfg") {
            return false;
        }
        let Ok(list) = a.meta.require_list() else {
            return false;
        };
        let text: String = list
            .tokens
            .to_string()
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        text == "test" || text.starts_with("all(test,")
    })
}

#[derive(Default)]
struct Collector {
    names: Names,
}

impl Collector {
    fn name(&mut self, segments: Vec<String>) {
        self.names.named.push(Named { segments });
    }

    fn use_tree(&mut self, tree: &UseTree, prefix: &mut Vec<String>) {
        match tree {
            UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(&p.tree, prefix);
                prefix.pop();
            }
            UseTree::Name(n) => {
                let ident = n.ident.to_string();
                let mut full = prefix.clone();
                let local = if ident == "self" {
                    prefix.last().cloned()
                } else {
                    full.push(ident.clone());
                    Some(ident)
                };
                self.import(local, full);
            }
            UseTree::Rename(r) => {
                let mut full = prefix.clone();
                if r.ident != "self" {
                    full.push(r.ident.to_string());
                }
                self.import(Some(r.rename.to_string()), full);
            }
            UseTree::Glob(_) => self.name(prefix.clone()),
            UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(t, prefix);
                }
            }
        }
    }

    fn import(&mut self, local: Option<String>, full: Vec<String>) {
        if let Some(local) = local.filter(|l| l != "_") {
            self.names.imports.insert(local, full.clone());
        }
        self.name(full);
    }

    /// `crate::a::b`, `super::a`, `self::a` sequences in a macro call's tokens.
    fn macro_tokens(&mut self, tokens: TokenStream) {
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < trees.len() {
            match &trees[i] {
                TokenTree::Group(g) => self.macro_tokens(g.stream()),
                TokenTree::Ident(id) if ["crate", "super", "self"].contains(&&*id.to_string()) => {
                    let mut segments = vec![id.to_string()];
                    let mut j = i + 1;
                    while let (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b))) =
                        (trees.get(j), trees.get(j + 1))
                    {
                        let Some(TokenTree::Ident(next)) = trees.get(j + 2) else {
                            break;
                        };
                        if a.as_char() != ':' || b.as_char() != ':' {
                            break;
                        }
                        segments.push(next.to_string());
                        j += 3;
                    }
                    if segments.len() > 1 {
                        self.name(segments);
                    }
                    i = j - 1;
                }
                _ => {}
            }
            i += 1;
        }
    }
}

impl<'ast> Visit<'ast> for Collector {
    fn visit_item(&mut self, item: &'ast Item) {
        match item {
            // A child module's items are its own.
            Item::Mod(_) => {}
            Item::Use(u) if !test_only(&u.attrs) => self.use_tree(&u.tree, &mut Vec::new()),
            Item::Use(_) => {}
            Item::Fn(f) if test_only(&f.attrs) => {}
            Item::Impl(i) if test_only(&i.attrs) => {}
            Item::Const(c) if test_only(&c.attrs) => {}
            Item::Static(s) if test_only(&s.attrs) => {}
            Item::Struct(s) if test_only(&s.attrs) => {}
            Item::Enum(e) if test_only(&e.attrs) => {}
            Item::Macro(m) if test_only(&m.attrs) => {}
            _ => syn::visit::visit_item(self, item),
        }
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !test_only(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        if segments.len() > 1 {
            self.name(segments);
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.macro_tokens(mac.tokens.clone());
        syn::visit::visit_macro(self, mac);
    }

    // Doc comments and other attributes name nothing the code depends on.
    fn visit_attribute(&mut self, _: &'ast Attribute) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(src: &str) -> Names {
        collect(&syn::parse_file(src).unwrap().items)
    }

    #[test]
    fn use_items_expressions_and_macros_are_named() {
        let n = names(
            "use crate::config::{self, Rule as R};
             use super::metrics::*;
             fn f() { let _ = crate::store::CounterKey::new(); tracing::warn!(\"{}\", crate::rls::X); }
             mod child { use crate::hidden::Thing; }
             #[cfg(test)] mod tests { use crate::test_only::X; }
             #[cfg(test)] fn helper() { crate::test_only::y(); }",
        );
        let texts: Vec<String> = n.named.iter().map(Named::text).collect();
        assert!(texts.contains(&"crate::config".to_string()), "{texts:?}");
        assert!(texts.contains(&"crate::config::Rule".to_string()));
        assert!(texts.contains(&"super::metrics".to_string()));
        assert!(texts.contains(&"crate::store::CounterKey::new".to_string()));
        assert!(texts.contains(&"crate::rls::X".to_string()));
        assert!(!texts
            .iter()
            .any(|t| t.contains("hidden") || t.contains("test_only")));
        assert_eq!(n.imports["config"], ["crate", "config"]);
        assert_eq!(n.imports["R"], ["crate", "config", "Rule"]);
    }
}
