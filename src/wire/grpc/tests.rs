use super::*;
use std::collections::HashMap;

/// A response as the host would hand it out, recording what was asked for.
#[derive(Default)]
struct Response {
    headers: HashMap<&'static str, &'static str>,
    trailers: HashMap<&'static str, &'static str>,
    body: Vec<u8>,
    asked: Vec<Part>,
}

impl Response {
    fn read(&mut self) -> Answer {
        let (headers, trailers) = (self.headers.len(), self.trailers.len());
        read_answer(headers, trailers, |part| {
            self.asked.push(part);
            match part {
                Part::Header(name) => self.headers.get(name).map(|v| v.as_bytes().to_vec()),
                Part::Trailer(name) => self.trailers.get(name).map(|v| v.as_bytes().to_vec()),
                Part::Body => Some(self.body.clone()),
            }
        })
    }
}

fn grpc_ok(body: Vec<u8>) -> Response {
    Response {
        headers: HashMap::from([(":status", "200"), ("content-type", "application/grpc")]),
        trailers: HashMap::from([("grpc-status", "0")]),
        body,
        ..Response::default()
    }
}

#[test]
fn frames_are_flag_length_message() {
    assert_eq!(frame(b"abc"), vec![0, 0, 0, 0, 3, b'a', b'b', b'c']);
    assert_eq!(frame(b""), vec![0, 0, 0, 0, 0]);
    assert_eq!(unframe(frame(b"hello")), Some(b"hello".to_vec()));
    assert_eq!(unframe(frame(b"")), Some(Vec::new()));
}

#[test]
fn broken_frames_are_refused() {
    // Too short, compressed, length longer or shorter than the body, two messages.
    assert_eq!(unframe(vec![0, 0, 0]), None);
    assert_eq!(unframe(vec![1, 0, 0, 0, 1, 7]), None);
    assert_eq!(unframe(vec![0, 0, 0, 0, 2, 7]), None);
    assert_eq!(unframe(vec![0, 0, 0, 0, 1, 7, 8]), None);
    let mut two = frame(b"a");
    two.extend(frame(b"b"));
    assert_eq!(unframe(two), None);
}

#[test]
fn request_headers_name_path_authority_and_deadline() {
    let headers = request_headers("/a.B/C", "ratelimit", 20);
    let get = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(get(":method"), Some("POST"));
    assert_eq!(get(":path"), Some("/a.B/C"));
    assert_eq!(get(":authority"), Some("ratelimit"));
    assert_eq!(get("content-type"), Some("application/grpc"));
    assert_eq!(get("te"), Some("trailers"));
    assert_eq!(get("grpc-timeout"), Some("20m"));
}

#[test]
fn an_ok_call_reads_status_then_body_and_nothing_else() {
    let mut r = grpc_ok(frame(b"message"));
    assert_eq!(r.read(), Answer::Response(b"message".to_vec()));
    assert_eq!(r.asked, vec![Part::Trailer("grpc-status"), Part::Body]);
}

#[test]
fn an_ok_status_with_a_broken_body_is_undecodable() {
    assert_eq!(grpc_ok(b"plain text".to_vec()).read(), Answer::Undecodable);
    assert_eq!(grpc_ok(Vec::new()).read(), Answer::Undecodable);
}

#[test]
fn an_error_status_wins_over_the_body() {
    let mut r = grpc_ok(frame(b"message"));
    r.trailers = HashMap::from([("grpc-status", "8"), ("grpc-message", "slow down")]);
    assert_eq!(
        r.read(),
        Answer::Status {
            code: 8,
            message: "slow down".into()
        }
    );
    assert!(!r.asked.contains(&Part::Body));
}

#[test]
fn trailers_only_responses_carry_the_status_in_headers() {
    let mut r = Response {
        headers: HashMap::from([(":status", "200"), ("grpc-status", "14")]),
        ..Response::default()
    };
    assert_eq!(
        r.read(),
        Answer::Status {
            code: 14,
            message: String::new()
        }
    );
    assert_eq!(
        r.asked,
        vec![Part::Header("grpc-status"), Part::Header("grpc-message")]
    );
}

#[test]
fn envoys_own_replies_map_to_grpc_codes_with_their_text() {
    let reply = |status: &'static str, body: &str| Response {
        headers: HashMap::from([(":status", status)]),
        body: body.as_bytes().to_vec(),
        ..Response::default()
    };
    assert_eq!(
        reply("504", "upstream request timeout").read(),
        Answer::Status {
            code: 14,
            message: "upstream request timeout".into()
        }
    );
    assert_eq!(
        reply("503", "no healthy upstream").read(),
        Answer::Status {
            code: 14,
            message: "no healthy upstream".into()
        }
    );
    let code = |status| match reply(status, "").read() {
        Answer::Status { code, .. } => code,
        other => panic!("{other:?}"),
    };
    assert_eq!(code("400"), 13);
    assert_eq!(code("401"), 16);
    assert_eq!(code("403"), 7);
    assert_eq!(code("404"), 12);
    assert_eq!(code("429"), 14);
    assert_eq!(code("502"), 14);
    assert_eq!(code("500"), 2);
    assert_eq!(code("2x0"), 2);
}

#[test]
fn a_reset_without_response_is_unavailable() {
    let mut r = Response::default();
    assert!(matches!(r.read(), Answer::Status { code: 14, .. }));
    assert!(r.asked.is_empty());
}

#[test]
fn an_unparsable_status_is_unknown() {
    let mut r = grpc_ok(frame(b"m"));
    r.trailers = HashMap::from([("grpc-status", "ok")]);
    assert!(matches!(r.read(), Answer::Status { code: 2, .. }));
}
