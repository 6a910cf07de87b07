//! The HTTP context: one per request, carrying out the limiter's verdict.

use super::abi;
use super::dispatch::{CONTINUE, PAUSE};
use super::request::HostRequest;
use super::root::Plugin;
use super::shared::HostShared;
use crate::limiter::Verdict;
use crate::response::{Reply, DETAILS};
use std::rc::Rc;

/// One request's context.
pub struct Http {
    plugin: Option<Rc<Plugin>>,
    /// `x-ratelimit-*` headers for the response, when configured.
    response_headers: Vec<(&'static str, String)>,
}

impl Http {
    /// A context for a new request (`plugin` is `None` only if configuration failed).
    pub fn new(plugin: Option<Rc<Plugin>>) -> Http {
        Http {
            plugin,
            response_headers: Vec::new(),
        }
    }
}

impl Http {
    /// Decides the request; returns the ABI action.
    pub fn on_request_headers(&mut self) -> u32 {
        let Some(plugin) = &self.plugin else {
            return CONTINUE;
        };
        let verdict = {
            let Ok(mut tally) = plugin.tally.try_borrow_mut() else {
                return CONTINUE;
            };
            plugin.limiter.check(
                &mut HostRequest,
                || abi::current_time_ns().ok(),
                &HostShared,
                &mut tally,
            )
        };
        match verdict {
            Verdict::Continue { response_headers } => {
                self.response_headers = response_headers;
                CONTINUE
            }
            Verdict::Reject(reply) => send(&reply),
        }
    }

    /// Adds the pending `x-ratelimit-*` headers; returns the ABI action.
    pub fn on_response_headers(&mut self) -> u32 {
        for (name, value) in std::mem::take(&mut self.response_headers) {
            if let Err(status) = abi::add_response_header(name, &value) {
                log::warn!("cannot add response header {name} (status {status})");
            }
        }
        CONTINUE
    }
}

/// Sends a reply from the proxy. After a local reply the request must stay paused.
fn send(reply: &Reply) -> u32 {
    let result = match reply {
        Reply::Http {
            status,
            headers,
            body,
        } => {
            let headers: Vec<(&str, &str)> =
                headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            abi::send_local_response(u32::from(*status), DETAILS, body, &headers, -1)
        }
        Reply::Grpc {
            status,
            message,
            metadata,
        } => {
            let headers: Vec<(&str, &str)> =
                metadata.iter().map(|(k, v)| (*k, v.as_str())).collect();
            abi::send_local_response(200, DETAILS, message.as_bytes(), &headers, *status as i32)
        }
    };
    match result {
        Ok(()) => PAUSE,
        Err(status) => {
            log::error!("cannot send the rejection (status {status}); letting it through");
            CONTINUE
        }
    }
}
