//! Windows of several units (`unit_multiplier`) on the wire: `current_limit` carries the
//! unit and, in field 4, the multiplier (a `UInt32Value`, as Envoy's proposal defines it;
//! absent for one unit, so plain answers are unchanged); `duration_until_reset` and the
//! draft-03 `w` cover the whole window.

use super::*;
use prost::Message;

const WINDOWS: &str = r#"
domain: web
descriptors:
  - key: five
    rate_limit: { unit: minute, unit_multiplier: 5, requests_per_unit: 2, name: five-minutes }
  - key: one
    rate_limit: { unit: minute, requests_per_unit: 2 }
  - key: blocked
    rate_limit: { unit: second, unit_multiplier: 30, requests_per_unit: 0 }
"#;

fn svc(headers: ResponseHeaders) -> RlsService<MemoryStore<ManualClock>> {
    let files = Files {
        root: PathBuf::from("t.yaml"),
        files: vec![(PathBuf::from("t.yaml"), WINDOWS.to_owned())],
    };
    let config = config::Shared::new(config::parse(&files).unwrap());
    // 1,000 s: 200 s into a five-minute window (they start at multiples of 300 s).
    let store = MemoryStore::with_clock(100, ManualClock::new(1_000 * S));
    let options = Options {
        headers,
        ..Options::default()
    };
    RlsService::new(config, store, Arc::new(Metrics::new("memory")), options)
}

#[test]
fn the_multiplier_travels_in_field_4_and_the_reset_covers_the_whole_window() {
    let svc = svc(ResponseHeaders::None);
    let r = block_on(svc.decide(request("web", vec![desc(&[("five", "a")], None)], 0))).unwrap();
    let status = &r.statuses[0];
    let limit = status.current_limit.as_ref().unwrap();
    assert_eq!(
        (limit.requests_per_unit, limit.unit, limit.unit_multiplier),
        (2, PbUnit::Minute as i32, Some(5))
    );
    // The window [900 s, 1200 s) ends in 200 s.
    let reset = status.duration_until_reset.unwrap();
    assert_eq!((reset.seconds, reset.nanos), (200, 0));
    // On the wire: field 4, length-delimited, holding a UInt32Value { value: 5 }.
    let bytes = limit.encode_to_vec();
    assert!(bytes.ends_with(&[0x22, 0x02, 0x08, 0x05]), "{bytes:02x?}");

    // One unit: no field 4, the answer as before.
    let r = block_on(svc.decide(request("web", vec![desc(&[("one", "a")], None)], 0))).unwrap();
    let limit = r.statuses[0].current_limit.as_ref().unwrap();
    assert_eq!(limit.unit_multiplier, None);
    assert!(!limit.encode_to_vec().contains(&0x22));

    // A block of 30 s windows: over until the aligned 30 s window ends (at 1,020 s).
    let r = block_on(svc.decide(request("web", vec![desc(&[("blocked", "a")], None)], 0))).unwrap();
    let status = &r.statuses[0];
    assert_eq!(status.code, Code::OverLimit as i32);
    let limit = status.current_limit.as_ref().unwrap();
    assert_eq!(
        (limit.requests_per_unit, limit.unit_multiplier),
        (0, Some(30))
    );
    assert_eq!(status.duration_until_reset.unwrap().seconds, 20);
}

#[test]
fn draft03_headers_show_the_longer_window_of_two_equally_used() {
    let svc = svc(ResponseHeaders::Draft03);
    let r = block_on(svc.decide(request(
        "web",
        vec![desc(&[("one", "a")], None), desc(&[("five", "a")], None)],
        0,
    )))
    .unwrap();
    // Both limits are 2 with 1 left: the one that resets later is shown, though it
    // comes second.
    let five = r.statuses[1].duration_until_reset.unwrap();
    let reset = five.seconds + i64::from(five.nanos > 0);
    assert!(reset > 60, "the five-minute window resets later: {reset}");
    let headers: Vec<(&str, String)> = r
        .response_headers_to_add
        .iter()
        .map(|h| (h.key.as_str(), h.value.clone()))
        .collect();
    assert_eq!(
        headers,
        [
            ("x-ratelimit-limit", "2".to_string()),
            ("x-ratelimit-remaining", "1".to_string()),
            ("x-ratelimit-reset", reset.to_string()),
        ]
    );
}
