//! A [`Reply`] as the host's `send_local_response` takes it: one shape for both
//! protocols, so the host layer only hands the fields over.

use super::Reply;

/// The arguments of one local response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalResponse<'a> {
    /// The HTTP status (200 for a gRPC reply, whose status is `grpc_status`).
    pub status: u32,
    /// Response code details for Envoy's access log.
    pub details: &'a str,
    /// The body (a gRPC reply's is its `grpc-message`, which Envoy moves there).
    pub body: &'a [u8],
    /// Headers, or a gRPC reply's metadata, in the host's encoding: the reply's own
    /// buffer, handed over as it is.
    pub headers: &'a [u8],
    /// The gRPC status, or -1 for a plain HTTP response.
    pub grpc_status: i32,
}

impl Reply {
    /// This reply as a local response's arguments.
    pub fn local_response(&self) -> LocalResponse<'_> {
        let (status, body, headers, grpc_status, details) = match self {
            Reply::Http {
                status,
                headers,
                body,
                details,
            } => (u32::from(*status), body.as_bytes(), headers, -1, details),
            Reply::Grpc {
                status,
                message,
                metadata,
                details,
            } => (200, message.as_bytes(), metadata, *status as i32, details),
        };
        LocalResponse {
            status,
            details: details.as_str(),
            body,
            headers: headers.encoded(),
            grpc_status,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reply::protocol::Protocol;

    #[test]
    fn an_http_reply_has_no_grpc_status() {
        let reply = crate::reply::failure(503, Protocol::Http);
        let local = reply.local_response();
        assert_eq!((local.status, local.grpc_status), (503, -1));
        assert_eq!(local.details, crate::reply::FAILURE_DETAILS);
    }

    #[test]
    fn a_grpc_reply_is_a_200_with_its_status_and_message_as_body() {
        let reply = crate::reply::failure(503, Protocol::Grpc);
        let Reply::Grpc {
            status, message, ..
        } = &reply
        else {
            panic!("a gRPC client gets a gRPC reply");
        };
        let local = reply.local_response();
        assert_eq!(local.status, 200);
        assert_eq!(local.grpc_status, *status as i32);
        assert_eq!(local.body, message.as_bytes());
    }

    #[test]
    fn a_rejection_by_one_rule_shares_the_details_its_rule_made() {
        use crate::reply::tests::rules;
        use crate::reply::{rejection, rejection_details, Details, Headers, Standing};
        let rules = rules();
        let config = crate::reply::tests::config();
        let denied = Standing {
            rule: 1,
            limit: 1,
            window_s: None,
            remaining: 0,
            reset_ns: None,
            next_ns: None,
            allowed: false,
            retry_ns: None,
            shadow: false,
        };
        let reply = rejection(
            &config,
            &rules,
            &[denied],
            None,
            Headers::new(),
            Protocol::Http,
            0,
        );
        let Reply::Http {
            details: Details::Rule(shared),
            ..
        } = &reply
        else {
            panic!("the rule's own details: {reply:?}");
        };
        assert!(std::sync::Arc::ptr_eq(shared, &rules[1].details));
        // The text the list of names makes for it.
        assert_eq!(
            reply.local_response().details,
            rejection_details(&["per-route"]).as_str()
        );
        assert_eq!(
            reply.local_response().details,
            "floodgate_rate_limited{per-route}"
        );
        // Every rule's own are what the list of its one name makes.
        for rule in &rules {
            assert_eq!(*rule.details, *rejection_details(&[&rule.name]).as_str());
        }
    }
}
