//! The HTTP context: one per request, carrying out the limiter's verdicts.

use super::abi;
use super::dispatch::{CONTINUE, PAUSE};
use super::log;
use super::request::HostRequest;
use super::root::Plugin;
use super::shared::HostShared;
use crate::grpc;
use crate::limiter::{Pass, Pending, Verdict};
use crate::log_throttle::Cause;
use crate::response::{Headers, Reply};
use crate::rls::Answer;
use ::log::Level;
use std::rc::Rc;

/// A call to the rate limit service this request waits for.
struct Waiting {
    token: u32,
    pending: Pending,
}

/// One request's context.
pub struct Http {
    plugin: Option<Rc<Plugin>>,
    /// Headers for the response, added when it comes.
    response_headers: Headers,
    waiting: Option<Waiting>,
}

impl Http {
    /// A context for a new request (`plugin` is `None` only if configuration failed).
    pub fn new(plugin: Option<Rc<Plugin>>) -> Http {
        Http {
            plugin,
            response_headers: Vec::new(),
            waiting: None,
        }
    }

    /// Decides the request; returns the ABI action.
    pub fn on_request_headers(&mut self) -> u32 {
        let Some(plugin) = self.plugin.clone() else {
            return CONTINUE;
        };
        let verdict = {
            let Ok(mut tally) = plugin.tally.try_borrow_mut() else {
                return CONTINUE;
            };
            plugin.limiter.check(
                &mut HostRequest::default(),
                || abi::current_time_ns().ok(),
                &HostShared,
                &mut tally,
            )
        };
        self.carry_out(&plugin, verdict)
    }

    /// The token of the rate limit call this request waits for, if any.
    pub fn waiting_on(&self) -> Option<u32> {
        self.waiting.as_ref().map(|w| w.token)
    }

    /// The rate limit service answered call `token`: resume or reject the request.
    /// `context_id` is this context's id: the callback arrives on the root context.
    pub fn on_rls_answer(&mut self, context_id: u32, token: u32, answer: Answer) {
        let (Some(plugin), Some(waiting)) = (self.plugin.clone(), self.waiting.take()) else {
            return;
        };
        if waiting.token != token {
            self.waiting = Some(waiting);
            return;
        }
        if let Err(status) = abi::set_effective_context(context_id) {
            log::throttled(Level::Warn, Cause::SwitchContext, || {
                format!("cannot switch to the request's context (status {status})")
            });
            return;
        }
        if let Answer::Status { code, message } = &answer {
            log::throttled(Level::Warn, Cause::RlsFailed, || {
                format!("the rate limit service call failed: gRPC status {code}: {message}")
            });
        }
        let Some(verdict) = decide_answer(&plugin, waiting.pending, answer) else {
            let _ = abi::continue_request();
            return;
        };
        if self.carry_out(&plugin, verdict) == CONTINUE {
            if let Err(status) = abi::continue_request() {
                log::throttled(Level::Warn, Cause::Resume, || {
                    format!("cannot resume the request (status {status})")
                });
            }
        }
    }

    /// Adds the pending headers to the response; returns the ABI action.
    pub fn on_response_headers(&mut self) -> u32 {
        for (name, value) in std::mem::take(&mut self.response_headers) {
            if let Err(status) = abi::add_response_header(&name, &value) {
                log::throttled(Level::Warn, Cause::AddHeader, || {
                    format!("cannot add response header {name} (status {status})")
                });
            }
        }
        CONTINUE
    }

    /// Carries out a verdict; returns CONTINUE when the request goes on now.
    fn carry_out(&mut self, plugin: &Plugin, verdict: Verdict) -> u32 {
        match verdict {
            Verdict::Continue(pass) => {
                self.pass(pass);
                CONTINUE
            }
            Verdict::Reject(reply) => send(&reply),
            Verdict::Ask(ask) => {
                let Some(rls) = plugin.limiter.rls() else {
                    return CONTINUE;
                };
                let sent = abi::http_call(
                    &rls.cluster,
                    &plugin.rls_headers,
                    &grpc::frame(&ask.message),
                    rls.timeout_ms,
                );
                match sent {
                    Ok(token) => {
                        self.waiting = Some(Waiting {
                            token,
                            pending: ask.pending,
                        });
                        PAUSE
                    }
                    Err(status) => {
                        log::throttled(Level::Warn, Cause::RlsNotSent, || {
                            format!(
                                "cannot call the rate limit service on cluster {} (status {status})",
                                rls.cluster
                            )
                        });
                        match decide_answer(plugin, ask.pending, Answer::NotSent(status)) {
                            Some(verdict) => self.carry_out(plugin, verdict),
                            None => CONTINUE,
                        }
                    }
                }
            }
        }
    }

    /// Adds a passing request's headers: upstream now, downstream when the response comes.
    fn pass(&mut self, pass: Pass) {
        for (name, value) in &pass.request_headers {
            if let Err(status) = abi::add_request_header(name, value) {
                log::throttled(Level::Warn, Cause::AddHeader, || {
                    format!("cannot add request header {name} (status {status})")
                });
            }
        }
        self.response_headers = pass.response_headers;
    }
}

/// The limiter's final verdict on what the rate limit service answered (or on a call that
/// could not be sent). `None` only when this thread's tally is already in use: a
/// re-entrant callback, which lets the request through.
fn decide_answer(plugin: &Plugin, pending: Pending, answer: Answer) -> Option<Verdict> {
    let mut tally = plugin.tally.try_borrow_mut().ok()?;
    let now = || abi::current_time_ns().ok();
    Some(plugin.limiter.answer(
        pending,
        answer,
        &mut HostRequest::default(),
        now,
        &HostShared,
        &mut tally,
    ))
}

/// Sends a reply from the proxy. After a local reply the request must stay paused.
fn send(reply: &Reply) -> u32 {
    let (status, body, headers, grpc_status, details) = match reply {
        Reply::Http {
            status,
            headers,
            body,
            details,
        } => (u32::from(*status), body.as_slice(), headers, -1, details),
        Reply::Grpc {
            status,
            message,
            metadata,
            details,
        } => (200, message.as_bytes(), metadata, *status as i32, details),
    };
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (&**k, v.as_str())).collect();
    match abi::send_local_response(status, details, body, &headers, grpc_status) {
        Ok(()) => PAUSE,
        Err(status) => {
            log::throttled(Level::Error, Cause::LocalReply, || {
                format!(
                    "cannot send the local reply (status {status}); letting the request through"
                )
            });
            CONTINUE
        }
    }
}
