//! The proxy's side of a request: which callbacks Envoy 1.40 enters, in which order, and
//! what it does with what the module answers.
//!
//! One VM holds every plugin of the filter chain (as `make bench` configures its chained
//! copies: one root context each, same VM). A request creates one HTTP context per filter
//! and goes through them in order; a filter that pauses waits for its HTTP call, answered
//! at once by the scripted [`Rls`] in the root context that made it; a local reply ends
//! the request side. The response then goes through the filters that saw the request, in
//! reverse order: headers, each body chunk, trailers. Then, per filter, `on_log`,
//! `on_done` and `on_delete`. Calls no request waits for (a lease refill, a stream-end
//! charge) are answered once the request is over. Only the callbacks the module exports
//! are entered, as Envoy does: a callback that is not exported costs nothing.

use crate::abi::{action, pairs, Pairs};
use crate::host::{Context, Stream};
use crate::rls::Rls;
use crate::vm::Vm;
use wasmi::Val;

/// A request as it reaches the filter chain.
#[derive(Debug, Clone)]
pub struct Request {
    /// Its headers, as Envoy's map holds them.
    pub headers: Pairs,
    /// The downstream peer's address.
    pub source_address: String,
}

/// What the upstream answers.
#[derive(Debug, Clone)]
pub struct Response {
    /// Headers.
    pub headers: Pairs,
    /// Body chunks, in the order they come.
    pub chunks: Vec<Vec<u8>>,
    /// Trailers, if any.
    pub trailers: Option<Pairs>,
}

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It went upstream.
    Forwarded,
    /// The module answered it from the proxy with this status.
    Replied(u32),
}

/// One Envoy with one VM and a filter chain of plugins on it.
pub struct Proxy {
    /// The VM.
    pub vm: Vm,
    /// The root context of each filter in the chain, in order.
    roots: Vec<u32>,
    next_id: u32,
    /// The rate limit service.
    pub rls: Rls,
    /// What the upstream answers every request.
    pub upstream: Response,
}

fn err(e: wasmi::Error) -> String {
    e.to_string()
}

impl Proxy {
    /// Starts `wasm` with one plugin per configuration (a chain of `plugins.len()`
    /// filters): each gets a root context, `on_vm_start` and `on_configure`, which must
    /// accept it.
    pub fn start(
        wasm: &[u8],
        plugins: &[String],
        rls: Rls,
        upstream: Response,
    ) -> Result<Proxy, String> {
        Proxy::start_with(wasm, plugins, rls, upstream, false)
    }

    /// The same, with a counter per function when `per_function` (see [`Vm::functions`]).
    pub fn start_with(
        wasm: &[u8],
        plugins: &[String],
        rls: Rls,
        upstream: Response,
        per_function: bool,
    ) -> Result<Proxy, String> {
        let vm = Vm::load_with(wasm, per_function).map_err(err)?;
        let mut proxy = Proxy {
            vm,
            roots: Vec::new(),
            next_id: 1,
            rls,
            upstream,
        };
        for configuration in plugins {
            let root = proxy.new_context(None);
            proxy.roots.push(root);
            if let Some(context) = proxy.vm.host().contexts.get_mut(&root) {
                context.plugin_configuration = configuration.as_bytes().to_vec();
            }
            proxy.enter("proxy_on_context_create", root, &[root, 0])?;
            proxy.enter("proxy_on_vm_start", root, &[root, 0])?;
            let accepted = proxy.enter(
                "proxy_on_configure",
                root,
                &[root, configuration.len() as u32],
            )?;
            if !matches!(accepted, Some(Val::I32(1))) && proxy.vm.exports("proxy_on_configure") {
                let logs = &proxy.vm.host_ref().logs;
                return Err(format!(
                    "the plugin refused its configuration {configuration}: {logs:?}"
                ));
            }
        }
        Ok(proxy)
    }

    /// A new context id (a root context when `root` is `None`), known to the host.
    fn new_context(&mut self, root: Option<u32>) -> u32 {
        let id = self.next_id;
        self.next_id += 1;
        let context = Context {
            root: root.unwrap_or(id),
            ..Context::default()
        };
        self.vm.host().contexts.insert(id, context);
        id
    }

    /// Enters `callback` if the module exports it (`None` otherwise).
    fn enter(&mut self, callback: &str, context: u32, args: &[u32]) -> Result<Option<Val>, String> {
        if !self.vm.exports(callback) {
            return Ok(None);
        }
        let args: Vec<Val> = args.iter().map(|&a| Val::I32(a as i32)).collect();
        self.vm.call(callback, context, &args).map_err(err)
    }

    /// Moves the clock on.
    pub fn advance(&mut self, ns: u64) {
        self.vm.host().clock_ns += ns;
    }

    /// One request through the chain and back (see the module docs).
    pub fn request(&mut self, request: &Request) -> Result<Outcome, String> {
        self.vm.host().stream = Stream {
            request_headers: request.headers.clone(),
            source_address: request.source_address.clone(),
            ..Stream::default()
        };
        let mut reached = Vec::new();
        let mut reply = None;
        for root in self.roots.clone() {
            let context = self.new_context(Some(root));
            reached.push(context);
            self.enter("proxy_on_context_create", context, &[context, root])?;
            let headers = request.headers.len() as u32;
            let action = self.enter("proxy_on_request_headers", context, &[context, headers, 1])?;
            let paused = !matches!(action, None | Some(Val::I32(action::CONTINUE)));
            reply = self.wait(context, paused)?;
            if reply.is_some() {
                break;
            }
        }
        let outcome = match &reply {
            Some(r) => Outcome::Replied(r.status),
            None => Outcome::Forwarded,
        };
        let response = match reply {
            Some(r) => local_reply(r),
            None => self.upstream.clone(),
        };
        self.respond(&reached, response)?;
        for &context in &reached {
            self.enter("proxy_on_log", context, &[context])?;
        }
        for &context in &reached {
            self.enter("proxy_on_done", context, &[context])?;
            self.enter("proxy_on_delete", context, &[context])?;
            self.vm.host().contexts.remove(&context);
        }
        // Calls no request waits for: their answers come after the request.
        while let Some(call) = self.vm.host().calls.pop_front() {
            self.answer(call)?;
        }
        self.vm.host().stream = Stream::default();
        Ok(outcome)
    }

    /// After a filter's request headers: its local reply, if it sent one; if it paused,
    /// answers calls until it resumes or replies.
    fn wait(
        &mut self,
        context: u32,
        paused: bool,
    ) -> Result<Option<crate::host::LocalReply>, String> {
        loop {
            let state = self
                .vm
                .host()
                .contexts
                .get_mut(&context)
                .ok_or("the request's context is gone")?;
            if let Some(reply) = state.local_reply.take() {
                return Ok(Some(reply));
            }
            if !paused || state.continued {
                return Ok(None);
            }
            let call = self
                .vm
                .host()
                .calls
                .pop_front()
                .ok_or("the request stays paused with no call to wait for")?;
            self.answer(call)?;
        }
    }

    /// Answers one HTTP call in the root context that made it.
    fn answer(&mut self, call: crate::host::Call) -> Result<(), String> {
        let now = self.vm.host().clock_ns;
        let response = self.rls.answer(&call, now)?;
        let sizes = [
            response.headers.len() as u32,
            response.body.len() as u32,
            response.trailers.len() as u32,
        ];
        self.vm.host().call_response = Some(response);
        let result = self.enter(
            "proxy_on_http_call_response",
            call.root,
            &[call.root, call.token, sizes[0], sizes[1], sizes[2]],
        );
        self.vm.host().call_response = None;
        result.map(|_| ())
    }

    /// The response through the filters that saw the request, last first.
    fn respond(&mut self, reached: &[u32], response: Response) -> Result<(), String> {
        let Response {
            headers,
            chunks,
            trailers,
        } = response;
        let count = headers.len() as u32;
        self.vm.host().stream.response_headers = Some(headers);
        let headers_end = chunks.is_empty() && trailers.is_none();
        for &context in reached.iter().rev() {
            self.enter(
                "proxy_on_response_headers",
                context,
                &[context, count, u32::from(headers_end)],
            )?;
        }
        let last = chunks.len();
        for (i, chunk) in chunks.into_iter().enumerate() {
            let end = i + 1 == last && trailers.is_none();
            let size = chunk.len() as u32;
            self.vm.host().stream.response_body = chunk;
            for &context in reached.iter().rev() {
                self.enter(
                    "proxy_on_response_body",
                    context,
                    &[context, size, u32::from(end)],
                )?;
            }
        }
        if let Some(trailers) = trailers {
            let count = trailers.len() as u32;
            self.vm.host().stream.response_trailers = Some(trailers);
            for &context in reached.iter().rev() {
                self.enter("proxy_on_response_trailers", context, &[context, count])?;
            }
        }
        Ok(())
    }

    /// One tick of every root context that asked for ticks (each worker's own).
    pub fn tick(&mut self) -> Result<(), String> {
        let roots: Vec<u32> = self.vm.host().tick_periods.keys().copied().collect();
        for root in roots {
            self.enter("proxy_on_tick", root, &[root])?;
        }
        while let Some(call) = self.vm.host().calls.pop_front() {
            self.answer(call)?;
        }
        Ok(())
    }
}

/// The response Envoy sends for a local reply.
fn local_reply(reply: crate::host::LocalReply) -> Response {
    let mut headers = pairs(&[
        (":status", &reply.status.to_string()),
        ("content-length", &reply.body.len().to_string()),
    ]);
    if !reply.body.is_empty() && !reply.headers.iter().any(|(k, _)| k == "content-type") {
        headers.push(("content-type".to_string(), b"text/plain".to_vec()));
    }
    headers.extend(reply.headers);
    let chunks = if reply.body.is_empty() {
        Vec::new()
    } else {
        vec![reply.body]
    };
    Response {
        headers,
        chunks,
        trailers: None,
    }
}
