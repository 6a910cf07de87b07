use super::*;

#[test]
fn ordinary_headers_pass() {
    for (name, value) in [
        ("x-ratelimit-note", "ok"),
        ("X-Quota", "7"),
        ("x-tab", "a\tb"),
        ("x-utf8", "é"),
        ("x-empty", ""),
        ("set-cookie", "a=b; Path=/"),
        ("x!#$%&'*+-.^_`|~", "v"),
    ] {
        assert_eq!(check(name, value.as_bytes()), Ok(()), "{name}");
    }
}

#[test]
fn injection_in_values_is_refused() {
    for value in [
        &b"v\r\nx-injected: yes"[..],
        b"v\nx",
        b"v\rx",
        b"v\0x",
        b"\x1b[31m",
        b"v\x7f",
    ] {
        assert_eq!(check("x-a", value), Err(Unsafe::BadValue), "{value:?}");
    }
}

#[test]
fn bad_names_and_pseudo_headers_are_refused() {
    for name in [
        "",
        ":status",
        ":path",
        ":authority",
        "x a",
        "x-a\r\nx-b",
        "x:a",
        "x\0",
        "x-é",
        "(x)",
    ] {
        assert_eq!(check(name, b"v"), Err(Unsafe::BadName), "{name:?}");
    }
}

#[test]
fn framing_routing_and_hop_by_hop_headers_are_refused() {
    for name in RESERVED {
        assert_eq!(check(name, b"5"), Err(Unsafe::Reserved), "{name}");
        let upper = name.to_ascii_uppercase();
        assert_eq!(check(&upper, b"5"), Err(Unsafe::Reserved), "{upper}");
    }
}
