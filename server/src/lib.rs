//! floodgate-server: floodgate's global limiter, an Envoy RLS v3 gRPC service.
//!
//! Envoy's `ratelimit` filter (or floodgate's wasm filter in global mode) sends
//! `ShouldRateLimit(domain, descriptors)`; the service finds each descriptor's limit in the
//! configuration, decides all of them atomically in a store, and answers one status per
//! descriptor. A guide to the modules, in the order a request meets them:
//!
//! - [`rls`]: the one module speaking RLS v3; every protocol quirk is commented there.
//! - [`config`]: the envoyproxy/ratelimit YAML format plus our `algorithm` extension,
//!   validated into types that cannot be wrong; [`config::matching`] walks descriptors.
//! - [`store`]: the batch-shaped, async [`store::Store`] trait; [`store::batch`], the
//!   batch's rules (all or nothing, check-only and blocked items, charges, grants) as pure
//!   code every store reuses; [`store::memory`], the in-process store, and
//!   [`store::redis`], counters shared by replicas in Redis or Redis Cluster (one Lua
//!   script per request, `check.lua`, the rules' Lua twin); [`store::gossip`], each
//!   node of a fleet counting its own part and gossiping it (chitchat); [`store::health`] tells
//!   `/healthz` whether the store answers.
//! - [`algorithm`]: the five algorithms (four rates and concurrency) as pure `(state, now, limit, hits)` math.
//! - [`clock`]: time for the memory store (Redis uses its own), injectable for tests.
//! - [`metrics`], [`http`]: Prometheus counters and the `/healthz`, `/metrics` routes.
//! - [`reload`]: polls the configuration and swaps in valid changes.
//! - [`server`], [`cli`]: listeners, readiness line, graceful shutdown, flags;
//!   [`shutdown`] and [`readiness`]: SIGTERM drains (`/healthz` 503) before it stops.
//! - [`listener`], [`tls`]: the gRPC port's connections (bounded, timed) and their TLS
//!   and mutual TLS (rotated certificates, an identity allow-list).
//! - [`proto`]: the generated RLS types, public so tests and tools share them.

#![warn(missing_docs)]

pub mod algorithm;
pub mod cli;
pub mod clock;
pub mod config;
pub mod http;
pub mod listener;
pub mod metrics;
pub mod proto;
pub mod readiness;
pub mod reference_stats;
pub mod reload;
pub mod rls;
pub mod server;
pub mod shutdown;
pub mod statsd;
pub mod store;
pub mod tls;
pub mod xds;
