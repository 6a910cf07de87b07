//! The HTTP context: one per request, carrying out the limiter's verdicts.
//!
//! A request is in one [`State`] at a time. Its callbacks return a [`Flow`] saying what
//! happened; the dispatcher turns that into the ABI's action and, for a call to the rate
//! limit service, remembers which context waits for which call token (only the
//! dispatcher knows tokens). Whatever the host cannot carry out goes through
//! [`Http::cannot_carry_out`] (see [`super::failure`]).

use super::background;
use super::failure::{remedy, HostFailure, Remedy};
use super::holding::Holding;
use super::hostcalls;
use super::log;
#[cfg(feature = "response-cost")]
use super::metering;
use super::refill;
use super::request::HostRequest;
use super::root::Plugin;
use super::shared::HostShared;
use super::types::Status;
use crate::host::log_throttle::Cause;
use crate::limiter::{Ask, Pass, Pending, Verdict};
use crate::reply::{Headers, Reply};
#[cfg(feature = "response-cost")]
use crate::usage::Ended;
use crate::usage::ResponseMeter;
use crate::wire::grpc::Answer;
use ::log::Level;
use std::rc::Rc;

/// What a request callback did with the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// It goes on now.
    Continue,
    /// It stays paused (answered from the proxy, or nothing else could be done).
    Pause,
    /// It is paused until the rate limit call with this token answers.
    WaitingOn(u32),
}

/// Where a request stands. Small (the waiting request's `Pending` stays in the box its
/// verdict came in): every context is moved into the dispatcher's map and out of it
/// again, and a large state was copied whole both ways on every request.
enum State {
    /// Not decided yet.
    Idle,
    /// Paused for the rate limit service, with what its answer needs (the call's
    /// `pending`; its body is freed once sent).
    Waiting(Box<Ask>),
    /// Let through: headers to add to the response when it comes, and the meter of
    /// its response-cost rules, if any.
    Passed(Headers, Option<Box<ResponseMeter>>),
    /// The response is passing, and its cost is being read from it.
    #[cfg(feature = "response-cost")]
    Metering(Box<ResponseMeter>),
    /// Answered from the proxy, or left as it was: nothing more to do.
    Done,
}

/// Whether the request is still inside `on_request_headers` (letting it through is
/// returning `Continue`) or paused (letting it through is a host call).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Headers,
    Paused,
}

/// One request's context.
pub struct Http {
    plugin: Option<Rc<Plugin>>,
    state: State,
    /// What the request holds, given back when the context goes away (`proxy_on_delete`
    /// comes for every way a stream ends). `None` for requests no concurrency rule
    /// applies to.
    holding: Option<Box<Holding>>,
}

impl Http {
    /// A context for a new request (`plugin` is `None` only if configuration failed).
    pub fn new(plugin: Option<Rc<Plugin>>) -> Http {
        Http {
            plugin,
            state: State::Idle,
            holding: None,
        }
    }

    /// Decides the request.
    pub fn on_request_headers(&mut self) -> Flow {
        let Some(plugin) = self.plugin.clone() else {
            return Flow::Continue;
        };
        let mut verdict = {
            let Ok(mut tally) = plugin.tally.try_borrow_mut() else {
                return self.cannot_carry_out(
                    &plugin,
                    HostFailure::TallyBusy,
                    None,
                    Phase::Headers,
                );
            };
            plugin.limiter.check_holding(
                &mut HostRequest::default(),
                || hostcalls::current_time_ns().ok(),
                &HostShared,
                &mut tally,
                &mut self.holding,
            )
        };
        if let Verdict::Continue(Pass {
            refill: refill @ Some(_),
            ..
        }) = &mut verdict
        {
            if let Some(refill) = refill.take() {
                refill::send(&plugin, refill);
            }
        }
        self.carry_out(&plugin, verdict, Phase::Headers)
    }

    /// Whether the request waits for a rate limit call (its token is the dispatcher's).
    pub fn is_waiting(&self) -> bool {
        matches!(self.state, State::Waiting(_))
    }

    /// The rate limit service answered this request's call, and this context is current
    /// again: resume or reject the request.
    pub fn on_rls_answer(&mut self, answer: Answer) {
        let (Some(plugin), State::Waiting(ask)) = (
            self.plugin.clone(),
            std::mem::replace(&mut self.state, State::Done),
        ) else {
            return;
        };
        if let Answer::Status { code, message } = &answer {
            log::throttled(Level::Warn, Cause::RlsFailed, || {
                format!("the rate limit service call failed: gRPC status {code}: {message}")
            });
        }
        if let Some(holding) = &mut self.holding {
            holding.answered(&plugin, &answer);
        }
        let Some(verdict) = decide_answer(&plugin, ask.pending, answer) else {
            self.cannot_carry_out(&plugin, HostFailure::TallyBusy, None, Phase::Paused);
            return;
        };
        self.carry_out(&plugin, verdict, Phase::Paused);
    }

    /// The answer to this request's call came, but its context could not be made
    /// current: nothing can reach the request any more.
    pub fn on_context_unreachable(&mut self, status: Status) {
        self.state = State::Done;
        if let Some(plugin) = self.plugin.clone() {
            self.cannot_carry_out(
                &plugin,
                HostFailure::SwitchContext,
                Some(status),
                Phase::Paused,
            );
        }
    }

    /// Adds the pending headers to the response, and starts reading its cost (`end`:
    /// the response has no body, so it is over).
    pub fn on_response_headers(&mut self, end: bool) {
        let State::Passed(headers, meter) = std::mem::replace(&mut self.state, State::Done) else {
            return;
        };
        for (name, value) in headers.pairs() {
            if let Err(status) = hostcalls::add_response_header(name, value) {
                let name = String::from_utf8_lossy(name);
                log::throttled(Level::Warn, Cause::AddHeader, || {
                    format!("cannot add response header {name} (status {status})")
                });
            }
        }
        self.start_metering(meter, end);
    }

    /// Starts reading the response's cost, if the request has a meter.
    #[cfg(feature = "response-cost")]
    fn start_metering(&mut self, meter: Option<Box<ResponseMeter>>, end: bool) {
        if let (Some(mut meter), Some(plugin)) = (meter, self.plugin.clone()) {
            metering::on_headers(&plugin, &mut meter);
            if end {
                metering::settle(&plugin, *meter, Ended::Complete);
            } else {
                self.state = State::Metering(meter);
            }
        }
    }

    /// The plain build refuses a response cost, so it never carries a meter; leaving the
    /// meter's code out keeps that module small.
    #[cfg(not(feature = "response-cost"))]
    fn start_metering(&mut self, _meter: Option<Box<ResponseMeter>>, _end: bool) {}

    /// A response body chunk of `size` bytes passes (`end`: the last one).
    #[cfg(feature = "response-cost")]
    pub fn on_response_body(&mut self, size: usize, end: bool) {
        let (State::Metering(meter), Some(plugin)) = (&mut self.state, self.plugin.clone()) else {
            return;
        };
        metering::on_body(&plugin, meter, size);
        if end {
            self.settle(&plugin, Ended::Complete);
        }
    }

    /// The response trailers came: the response is over.
    #[cfg(feature = "response-cost")]
    pub fn on_response_trailers(&mut self) {
        let (State::Metering(meter), Some(plugin)) = (&mut self.state, self.plugin.clone()) else {
            return;
        };
        metering::on_trailers(&plugin, meter);
        self.settle(&plugin, Ended::Complete);
    }

    /// The context is going away. A request still reading its cost (its client left,
    /// or the stream was reset) is charged what it reported so far, or the fallback.
    pub fn on_delete(&mut self) {
        if self.holding.is_some() {
            self.give_back();
        }
        #[cfg(feature = "response-cost")]
        if let Some(plugin) = self.plugin.clone() {
            if matches!(self.state, State::Metering(_) | State::Passed(_, Some(_))) {
                self.settle(&plugin, Ended::CutOff);
            }
        }
    }

    /// Gives back what the request holds, once (out of line: few requests hold anything).
    #[inline(never)]
    fn give_back(&mut self) {
        let waiting = self.is_waiting();
        if let (Some(holding), Some(plugin)) = (self.holding.take(), &self.plugin) {
            holding.give_back(plugin, waiting);
        }
    }

    /// Charges the request's response cost, once: the state is `Done` afterwards.
    #[cfg(feature = "response-cost")]
    fn settle(&mut self, plugin: &Rc<Plugin>, ended: Ended) {
        match std::mem::replace(&mut self.state, State::Done) {
            State::Metering(meter) | State::Passed(_, Some(meter)) => {
                metering::settle(plugin, *meter, ended);
            }
            _ => {}
        }
    }

    /// Carries out a verdict.
    fn carry_out(&mut self, plugin: &Plugin, verdict: Verdict, phase: Phase) -> Flow {
        match verdict {
            Verdict::Continue(pass) => {
                self.pass(pass);
                self.let_through(plugin, phase)
            }
            Verdict::Reject(reply) => {
                self.state = State::Done;
                match send(&reply) {
                    Ok(()) => Flow::Pause,
                    Err(status) => {
                        self.cannot_carry_out(plugin, HostFailure::LocalReply, Some(status), phase)
                    }
                }
            }
            Verdict::Ask(ask) => self.ask(plugin, ask, phase),
        }
    }

    /// Makes the request's call to the rate limit service and waits for it; a call that
    /// cannot be made is decided as the limiter says for one.
    fn ask(&mut self, plugin: &Plugin, mut ask: Box<Ask>, phase: Phase) -> Flow {
        let Some(rls) = plugin.limiter.rls() else {
            return Flow::Continue;
        };
        match background::start(rls, &ask.call, "call") {
            Ok(token) => {
                if let Some(release) = ask.release.take() {
                    let holding = self.holding.get_or_insert_with(Box::default);
                    (holding.release, holding.call) = (Some(release), token);
                }
                // Sent: only `pending` is needed until the answer.
                ask.call.body = Vec::new();
                self.state = State::Waiting(ask);
                Flow::WaitingOn(token)
            }
            Err(status) => match decide_answer(plugin, ask.pending, Answer::NotSent(status.0)) {
                Some(verdict) => self.carry_out(plugin, verdict, phase),
                None => self.cannot_carry_out(plugin, HostFailure::TallyBusy, None, phase),
            },
        }
    }

    /// Lets the request go on: by returning `Continue` from its headers, or by resuming
    /// it once paused.
    fn let_through(&mut self, plugin: &Plugin, phase: Phase) -> Flow {
        if phase == Phase::Headers {
            return Flow::Continue;
        }
        match hostcalls::continue_request() {
            Ok(()) => Flow::Continue,
            Err(status) => self.cannot_carry_out(plugin, HostFailure::Resume, Some(status), phase),
        }
    }

    /// The one place where the host cannot carry out the limiter's decision: counts it
    /// by cause and does what [`remedy`] says for `failure_mode`. What the remedy tries is
    /// best effort: if that fails as well it is logged, not counted again, and the
    /// request stays paused rather than risk looping.
    fn cannot_carry_out(
        &mut self,
        plugin: &Plugin,
        failure: HostFailure,
        status: Option<Status>,
        phase: Phase,
    ) -> Flow {
        plugin.count_host_failure(failure);
        let mode = plugin.limiter.config().failure_mode;
        let remedy = remedy(failure, mode);
        log::throttled(Level::Warn, failure.cause(), || {
            let status = status.map_or_else(String::new, |s| format!(" (status {s})"));
            format!("cannot carry out the limiter's decision: {failure:?}{status}; {remedy:?}")
        });
        match remedy {
            Remedy::LetThrough if phase == Phase::Headers => Flow::Continue,
            Remedy::LetThrough => match hostcalls::continue_request() {
                Ok(()) => Flow::Continue,
                Err(status) => {
                    log::throttled(Level::Error, Cause::Resume, || {
                        format!("cannot resume the request either (status {status})")
                    });
                    Flow::Pause
                }
            },
            Remedy::FailureReply => {
                self.state = State::Done;
                let reply = plugin.limiter.failure_reply(&mut HostRequest::default());
                if let Err(status) = send(&reply) {
                    log::throttled(Level::Error, Cause::LocalReply, || {
                        format!("cannot send the failure reply either (status {status}); the request stays paused")
                    });
                }
                Flow::Pause
            }
            Remedy::LeavePaused => {
                self.state = State::Done;
                Flow::Pause
            }
        }
    }

    /// Adds a passing request's headers: upstream now, downstream when the response comes.
    fn pass(&mut self, pass: Pass) {
        for (name, value) in &pass.request_headers {
            if let Err(status) = hostcalls::add_request_header(name, value) {
                log::throttled(Level::Warn, Cause::AddHeader, || {
                    format!("cannot add request header {name} (status {status})")
                });
            }
        }
        #[cfg(feature = "response-cost")]
        if pass.meter.as_ref().is_some_and(|m| m.reads_json()) {
            metering::ask_for_identity();
        }
        self.state = State::Passed(pass.response_headers, pass.meter);
    }
}

/// The limiter's final verdict on what the rate limit service answered (or on a call that
/// could not be sent). `None` only when this thread's tally is already in use.
fn decide_answer(plugin: &Plugin, pending: Pending, answer: Answer) -> Option<Verdict> {
    let mut tally = plugin.tally.try_borrow_mut().ok()?;
    let now = || hostcalls::current_time_ns().ok();
    Some(plugin.limiter.answer(
        pending,
        answer,
        &mut HostRequest::default(),
        now,
        &HostShared,
        &mut tally,
    ))
}

/// Sends a reply from the proxy (after which the request must stay paused).
fn send(reply: &Reply) -> Result<(), Status> {
    let r = reply.local_response();
    hostcalls::send_local_response(r.status, r.details, r.body, r.headers, r.grpc_status)
}
