use super::*;
use crate::config::Config;

#[test]
fn names_are_fixed_by_the_configuration() {
    let rules = Config::parse(
        br#"{"rules":[{"name":"per-tenant","descriptors":[{"key":"k","header":"x"}],
            "local":{"capacity":1,"refill_per_second":1}}]}"#,
    )
    .unwrap()
    .rules;
    let defs = definitions(&rules);
    assert_eq!(defs.len(), Global::ALL.len() + 3);
    assert_eq!(defs[0], (Kind::Counter, "floodgate.allowed".to_string()));
    assert_eq!(defs[21], (Kind::Gauge, "floodgate.buckets".to_string()));
    assert_eq!(
        defs[Global::ALL.len()..]
            .iter()
            .map(|(_, n)| n.as_str())
            .collect::<Vec<_>>(),
        [
            "floodgate.rule.per-tenant.allowed",
            "floodgate.rule.per-tenant.denied",
            "floodgate.rule.per-tenant.shadow_denied"
        ]
    );
    for (i, g) in Global::ALL.iter().enumerate() {
        assert_eq!(*g as usize, i, "{g:?} out of order");
    }
}

#[test]
fn a_tally_drains_only_what_changed() {
    let mut t = Tally::new(2);
    t.add(Global::Denied, 1);
    t.add(Global::Denied, 2);
    t.rule(1, PerRule::ShadowDenied);
    assert_eq!(
        t.drain().collect::<Vec<_>>(),
        vec![(1, 3), (Global::ALL.len() + 5, 1)]
    );
    assert_eq!(t.drain().count(), 0);
}
