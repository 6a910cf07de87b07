//! The script's command and reply formats.

use super::*;

/// A check of `hits` on `web`'s `k=v` counter, 10 per minute by `algorithm`, asking nothing else.
fn check(hits: u64, shadow: bool, algorithm: Algorithm) -> Check {
    use crate::algorithm::{Limit, Unit};
    use crate::store::CounterKey;
    use std::num::{NonZeroU16, NonZeroU32};
    Check {
        key: CounterKey::new("web", [("k", "v")]),
        limit: Limit {
            requests_per_unit: NonZeroU32::new(10).unwrap(),
            unit: Unit::Minute,
            unit_multiplier: NonZeroU16::MIN,
            algorithm,
        },
        hits,
        shadow,
        quota: None,
        quota_mode: false,
        blocked: false,
        hold: None,
    }
}

#[test]
fn the_command_follows_the_script_contract() {
    use std::num::NonZeroU32;
    let c = check;
    let burst = NonZeroU32::new(4).unwrap();
    let tb = Check {
        quota: Some(crate::algorithm::lease::Quota {
            requests: NonZeroU32::new(5).unwrap(),
            valid_ms: 1_000,
        }),
        ..c(0, false, Algorithm::TokenBucket { burst })
    };
    let log = c(u64::MAX, true, Algorithm::SlidingWindowLog);
    let times = CallTimes {
        now_us: String::new(),
        not_after_us: "1700000000100000".into(),
    };
    let cmd = script_cmd("sha", "", &[&tb, &log], Mode::Peek, &times);
    let args: Vec<String> = cmd
        .args_iter()
        .map(|a| match a {
            redis::Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
            _ => "<cursor>".to_owned(),
        })
        .collect();
    assert_eq!(
        args,
        [
            "EVALSHA",
            "sha",
            "2",
            "fg:v2:{2de34e4be677f2118eec430806d11eb5}:tb:10:m:4",
            "fg:v2:{2de34e4be677f2118eec430806d11eb5}:swl:10:m:-",
            "peek",
            "",
            "1700000000100000",
            "", // no hold
            "tb",
            "10",
            "60",
            "4",
            "0", // a descriptor's hits_addend of 0: check-only, passed as is
            "0",
            "5", // grant up to 5 if admitted
            "swl",
            "10",
            "60",
            "0",
            "4294967296",
            "1",
            "0" // no grant asked
        ]
    );
}

#[test]
fn the_call_s_hold_goes_once_before_the_items_and_never_in_a_charge() {
    use crate::algorithm::concurrency::{HoldId, HoldOp};
    let c = check;
    let id = HoldId::parse(b"req-7").unwrap();
    let held = |op| Check {
        hold: Some(op),
        ..c(1, false, Algorithm::Concurrency)
    };
    let arg4 = |batch: &[&Check], mode| -> String {
        let cmd = script_cmd("sha", "", batch, mode, &CallTimes::default());
        let arg = match cmd.args_iter().nth(2 + batch.len() + 4) {
            Some(redis::Arg::Simple(b)) => String::from_utf8_lossy(b).into_owned(),
            _ => "<none>".into(),
        };
        arg
    };
    let plain = c(1, false, Algorithm::FixedWindow);
    let acquire = held(HoldOp::Acquire(id));
    assert_eq!(arg4(&[&plain, &acquire], Mode::Commit), "a:req-7");
    assert_eq!(arg4(&[&held(HoldOp::Release(id))], Mode::Commit), "r:req-7");
    assert_eq!(arg4(&[&acquire], Mode::Charge), "");
    assert_eq!(arg4(&[&plain], Mode::Commit), "");
}

#[test]
fn replies_are_parsed_and_big_resets_saturate() {
    let reply = [
        Value::Int(1),
        Value::Int(7),
        Value::BulkString(b"1500".to_vec()),
        Value::Int(3),
        Value::Int(0),
        Value::Int(5_000_000_000),
        Value::BulkString(b"340282366920938463463374607431768211456".to_vec()),
        Value::Int(0),
        Value::Int(1_700_000_000_000_000),
    ];
    let (d, now) = parse_reply(&reply, 2).ok().unwrap();
    assert_eq!(now, 1_700_000_000_000_000);
    assert_eq!(
        d,
        [
            (
                Decision {
                    allowed: true,
                    remaining: 7,
                    reset_in_ns: 1500,
                    grant: None,
                },
                3
            ),
            (
                Decision {
                    allowed: false,
                    remaining: u32::MAX,
                    reset_in_ns: u64::MAX,
                    grant: None,
                },
                0
            )
        ]
    );
}

#[test]
fn malformed_replies_are_errors_not_panics() {
    for reply in [
        vec![Value::Int(1)],
        vec![Value::BulkString(b"early".to_vec())],
        vec![
            Value::Int(2),
            Value::Int(0),
            Value::BulkString(b"1".to_vec()),
            Value::Int(0),
        ],
        vec![
            Value::Int(1),
            Value::Nil,
            Value::BulkString(b"1".to_vec()),
            Value::Int(0),
        ],
        vec![
            Value::Int(1),
            Value::Int(0),
            Value::BulkString(b"-1".to_vec()),
            Value::Int(0),
        ],
        vec![
            Value::Int(1),
            Value::Int(0),
            Value::BulkString(Vec::new()),
            Value::Int(0),
        ],
        vec![
            Value::Int(1),
            Value::Int(0),
            Value::BulkString(b"1".to_vec()),
            Value::Int(-1),
        ],
    ] {
        let mut reply = reply;
        if reply.len() == 4 {
            reply.push(Value::Int(1)); // a time, so that only the items are wrong
        }
        assert!(parse_reply(&reply, 1).is_err(), "{reply:?}");
    }
}

#[test]
fn a_late_reply_is_a_timeout() {
    let late = [Value::BulkString(LATE.to_vec())];
    assert!(matches!(parse_reply(&late, 2), Err(Failure::Timeout(_))));
}
