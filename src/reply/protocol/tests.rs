use super::*;

#[test]
fn grpc_is_what_envoy_calls_grpc() {
    let c = |s: &str| classify(Some(s.as_bytes()));
    assert_eq!(c("application/grpc"), Protocol::Grpc);
    assert_eq!(c("application/grpc+proto"), Protocol::Grpc);
    assert_eq!(c("application/grpc+"), Protocol::Grpc);
    for http in [
        "Application/gRPC",
        "application/GRPC",
        "application/grpc-something",
        "application/grpcx",
        "application/grp",
        "application/json",
        "application/grpc-web+json",
        "Application/grpc-web",
        "",
    ] {
        assert_eq!(c(http), Protocol::Http, "{http}");
    }
    assert_eq!(classify(None), Protocol::Http);
}

#[test]
fn grpc_web_is_one_of_four_exact_types() {
    for (ct, text) in GRPC_WEB {
        assert_eq!(
            classify(Some(ct.as_bytes())),
            Protocol::GrpcWeb {
                content_type: ct,
                text
            }
        );
    }
}

#[test]
fn messages_are_percent_encoded() {
    assert_eq!(percent_encode("rate limited"), "rate limited");
    assert_eq!(percent_encode("a\r\nb%c"), "a%0D%0Ab%25c");
    assert_eq!(percent_encode("é"), "%C3%A9");
}

#[test]
fn a_status_frame_is_a_grpc_web_trailer_frame() {
    let body = grpc_web_status_body(8, "over\nlimit", false);
    let text = b"grpc-status:8\r\ngrpc-message:over%0Alimit\r\n";
    assert_eq!(body[0], 0x80);
    assert_eq!(&body[1..5], &(text.len() as u32).to_be_bytes());
    assert_eq!(&body[5..], text);
    let b64 = grpc_web_status_body(8, "over\nlimit", true);
    assert_eq!(b64, base64(&body).into_bytes());
}

#[test]
fn base64_matches_the_rfc_vectors() {
    for (plain, encoded) in [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="),
        ("fooba", "Zm9vYmE="),
        ("foobar", "Zm9vYmFy"),
    ] {
        assert_eq!(base64(plain.as_bytes()), encoded);
    }
}
