//! The test host: what Envoy keeps for a VM (shared data, contexts, the stream in flight,
//! HTTP calls, metrics, the clock) and the proxy-wasm 0.2.1 imports that act on it.
//!
//! It mirrors Envoy 1.40's host where the module can tell, and where a count depends on
//! it: a missing header or key is NOT_FOUND, an empty value is handed back without
//! allocating (`copyToPointerSize`), each non-empty value costs one entry into
//! `proxy_on_memory_allocate`, shared data compare-and-swap tokens come from one counter,
//! HTTP calls answer in the root context of the plugin that made them. Everything is
//! deterministic: a fixed clock moved only by the driver, a fixed random sequence.

#[macro_use]
mod memory;
mod http;
mod imports;
mod wasi;

pub use imports::link;

use crate::abi::Pairs;
use crate::cost::Cost;
use std::collections::{BTreeMap, HashMap, VecDeque};
use wasmi::{Memory, TypedFunc};

/// A context the VM knows: a plugin's root context or a request's HTTP context.
#[derive(Debug, Default)]
pub struct Context {
    /// The root context it belongs to (its own id for a root context).
    pub root: u32,
    /// A root context's plugin configuration.
    pub plugin_configuration: Vec<u8>,
    /// The request was resumed (`proxy_continue_stream`) during the last callback.
    pub continued: bool,
    /// A reply the module sent from the proxy.
    pub local_reply: Option<LocalReply>,
}

/// A reply sent with `proxy_send_local_response`.
#[derive(Debug, Clone)]
pub struct LocalReply {
    /// HTTP status.
    pub status: u32,
    /// Response code details.
    pub details: String,
    /// Body.
    pub body: Vec<u8>,
    /// Headers to add.
    pub headers: Pairs,
    /// gRPC status (negative: none).
    pub grpc_status: i32,
}

/// The request in flight and what of it the module can read.
#[derive(Debug, Default)]
pub struct Stream {
    /// Request headers (pseudo-headers first, as Envoy keeps them).
    pub request_headers: Pairs,
    /// Response headers, once the response started.
    pub response_headers: Option<Pairs>,
    /// Response trailers, once they came.
    pub response_trailers: Option<Pairs>,
    /// The response body chunk being passed.
    pub response_body: Vec<u8>,
    /// The downstream peer (`source.address`).
    pub source_address: String,
}

/// An HTTP call the module made, waiting for its answer.
#[derive(Debug, Clone)]
pub struct Call {
    /// Its token.
    pub token: u32,
    /// The root context its answer goes to.
    pub root: u32,
    /// The cluster.
    pub cluster: String,
    /// Request headers.
    pub headers: Pairs,
    /// Request body.
    pub body: Vec<u8>,
    /// Timeout.
    pub timeout_ms: u32,
}

/// The answer to an HTTP call, readable during `proxy_on_http_call_response`.
#[derive(Debug, Clone, Default)]
pub struct CallResponse {
    /// Response headers.
    pub headers: Pairs,
    /// Response body.
    pub body: Vec<u8>,
    /// Response trailers.
    pub trailers: Pairs,
}

/// A metric the module defined.
#[derive(Debug, Clone)]
pub struct Metric {
    /// Its name.
    pub name: String,
    /// Its value.
    pub value: i64,
}

/// Everything the host keeps for one VM.
pub struct Host {
    /// What was counted so far (instructions are read from the module when asked).
    pub cost: Cost,
    /// Wall clock, ns since the Unix epoch.
    pub clock_ns: u64,
    /// Shared data: key → (value, CAS token).
    pub shared: HashMap<String, (Vec<u8>, u32)>,
    next_cas: u32,
    /// Every live context.
    pub contexts: BTreeMap<u32, Context>,
    /// The context the running callback was entered for.
    pub current: u32,
    /// The context host calls act on (`proxy_set_effective_context`; 0: the current one).
    pub effective: u32,
    /// The request in flight.
    pub stream: Stream,
    /// The HTTP call answer being delivered.
    pub call_response: Option<CallResponse>,
    /// HTTP calls made and not answered yet, in order.
    pub calls: VecDeque<Call>,
    next_token: u32,
    /// Clusters `proxy_http_call` can reach.
    pub clusters: Vec<String>,
    /// Metrics by id.
    pub metrics: BTreeMap<u32, Metric>,
    /// Tick periods asked for, by root context.
    pub tick_periods: BTreeMap<u32, u32>,
    /// Log lines (level, message).
    pub logs: Vec<(i32, String)>,
    /// What the module wrote to stdout / stderr.
    pub output: Vec<u8>,
    rng: u64,
    /// The module's `proxy_on_memory_allocate` and memory, once instantiated.
    pub(crate) alloc: Option<TypedFunc<i32, i32>>,
    pub(crate) memory: Option<Memory>,
}

/// 2026-01-01T00:00:00Z: where every run's clock starts.
pub const EPOCH_NS: u64 = 1_767_225_600_000_000_000;

impl Default for Host {
    fn default() -> Host {
        Host {
            cost: Cost::default(),
            clock_ns: EPOCH_NS,
            shared: HashMap::new(),
            next_cas: 1,
            contexts: BTreeMap::new(),
            current: 0,
            effective: 0,
            stream: Stream::default(),
            call_response: None,
            calls: VecDeque::new(),
            next_token: 1,
            clusters: vec!["ratelimit".to_string()],
            metrics: BTreeMap::new(),
            tick_periods: BTreeMap::new(),
            logs: Vec::new(),
            output: Vec::new(),
            rng: 0x2545_f491_4f6c_dd1d,
            alloc: None,
            memory: None,
        }
    }
}

impl Host {
    /// The context host calls act on now.
    pub fn acting(&self) -> u32 {
        if self.effective != 0 && self.contexts.contains_key(&self.effective) {
            self.effective
        } else {
            self.current
        }
    }

    /// The acting context's state (`None` if the VM deleted it).
    pub fn acting_context(&mut self) -> Option<&mut Context> {
        let id = self.acting();
        self.contexts.get_mut(&id)
    }

    /// Writes shared data as Envoy does: a stale non-zero token is refused; every write
    /// gets the next token.
    pub fn set_shared(&mut self, key: String, value: Vec<u8>, cas: u32) -> i32 {
        if let Some((_, token)) = self.shared.get(&key) {
            if cas != 0 && cas != *token {
                return crate::abi::status::CAS_MISMATCH;
            }
        }
        let token = self.next_cas;
        self.next_cas = self.next_cas.wrapping_add(1).max(1);
        self.shared.insert(key, (value, token));
        crate::abi::status::OK
    }

    /// A new call token.
    pub fn token(&mut self) -> u32 {
        let token = self.next_token;
        self.next_token += 1;
        token
    }

    /// The next bytes of the fixed random sequence (xorshift64*).
    pub fn random(&mut self, out: &mut [u8]) {
        for byte in out {
            self.rng ^= self.rng >> 12;
            self.rng ^= self.rng << 25;
            self.rng ^= self.rng >> 27;
            *byte = (self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8;
        }
    }
}
