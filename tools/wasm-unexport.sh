#!/bin/sh
# wasm-unexport.sh IN OUT NAME... : copies the module IN to OUT without the exports NAME...
# (binaryen's wasm-metadce: everything else IN exports stays a root; code only those
# exports reached goes too, code still called inside the module stays).
#
# Why: the filter defines C's malloc & co. for wasi-libc (src/host/heap/libc.rs), and
# `#[no_mangle]` exports them; a proxy-wasm host would then allocate its buffers with the
# exported `malloc` instead of `proxy_on_memory_allocate`. tests/tests/wasm_exports.rs
# checks the result.
set -eu
in=$1 out=$2
shift 2
# The wasm features current Rust emits (the Makefile's WASM_FEATURES).
features=${WASM_FEATURES:?the Makefile sets WASM_FEATURES}
drop=$(printf -- '-e %s ' "$@")
# shellcheck disable=SC2086 # word splitting of $drop and $features is meant
keep=$(wasm-opt $features "$in" --print -o /dev/null | sed -n 's/^ (export "\([^"]*\)".*/\1/p' | grep -vxF $drop)
graph=$out.graph.json
{
	printf '[{"name": "host", "root": true, "reaches": ['
	sep=
	for e in $keep; do printf '%s"export:%s"' "$sep" "$e"; sep=', '; done
	printf ']}'
	for e in $keep; do printf ',\n {"name": "export:%s", "export": "%s"}' "$e" "$e"; done
	printf ']\n'
} >"$graph"
# -g keeps the names of a build that has them (a profiling build, docs/costs.md); a
# stripped module has none to keep.
# shellcheck disable=SC2086
wasm-metadce -g $features "$in" -f "$graph" -o "$out" >/dev/null
rm -f "$graph"
