use super::*;

fn generation(id: u32, phase: Phase) -> Generation {
    Generation {
        id,
        phase,
        local_limit: 5,
        envoy: EnvoyCounts::default(),
        server: ServerCounts::default(),
        synced: true,
    }
}

fn tenant(class: Class, generation: u32, sent: u64, admitted: u64, failure: u64) -> Tenant {
    Tenant {
        class: Some(class),
        generation,
        sent,
        admitted,
        failure_admitted: failure,
        rejected: sent - admitted - failure,
        upstream: admitted + failure,
        ..Tenant::default()
    }
}

/// Runs the judge and returns the names of the checks that failed.
fn failed(generations: &mut [Generation], tenants: &[(&str, Tenant)]) -> Vec<String> {
    let tenants: HashMap<String, Tenant> = tenants
        .iter()
        .map(|(id, t)| (id.to_string(), t.clone()))
        .collect();
    // Envoy's allowed + denied follow the client's replies unless a test says otherwise.
    for g in generations.iter_mut() {
        if g.envoy.allowed + g.envoy.denied == 0 {
            let of_gen = tenants.values().filter(|t| t.generation == g.id);
            g.envoy.allowed = of_gen
                .clone()
                .map(|t| t.admitted + t.failure_admitted)
                .sum();
            g.envoy.denied = of_gen.map(|t| t.rejected).sum();
        }
    }
    let upstream_total = tenants.values().map(|t| t.upstream).sum();
    let checks = judge(&Evidence {
        generations,
        tenants: &tenants,
        global_limit: 4,
        unexpected: &HashMap::new(),
        open_admitted: 0,
        upstream_total,
    });
    checks
        .into_iter()
        .filter(|c| !c.passed)
        .map(|c| c.name)
        .collect()
}

#[test]
fn exact_limits_in_calm_generations_pass() {
    let mut gens = [generation(0, Phase::Calm)];
    let tenants = [
        ("l0", tenant(Class::Local, 0, 8, 5, 0)),
        ("l1", tenant(Class::Local, 0, 3, 3, 0)),
        ("g0", tenant(Class::Global, 0, 7, 4, 0)),
    ];
    assert_eq!(failed(&mut gens, &tenants), Vec::<String>::new());
}

#[test]
fn one_admission_too_many_fails_in_either_mode() {
    let mut gens = [generation(0, Phase::Calm)];
    assert_eq!(
        failed(&mut gens, &[("l0", tenant(Class::Local, 0, 8, 6, 0))]),
        ["local limit exact per tenant"]
    );
    let mut gens = [generation(0, Phase::Calm)];
    assert_eq!(
        failed(&mut gens, &[("g0", tenant(Class::Global, 0, 8, 5, 0))]),
        ["global limit held per tenant"]
    );
}

#[test]
fn a_rejected_request_reaching_the_upstream_fails() {
    let mut gens = [generation(0, Phase::Calm)];
    let mut t = tenant(Class::Global, 0, 8, 4, 0);
    t.upstream = 5;
    assert_eq!(
        failed(&mut gens, &[("g0", t)]),
        ["upstream got only admitted requests"]
    );
}

#[test]
fn counted_failure_admissions_during_a_redis_outage_pass() {
    let mut down = generation(1, Phase::RedisDown);
    down.envoy = EnvoyCounts {
        failure_allowed: 6,
        rls_errors: 6,
        rls_unavailable: 6,
        ..EnvoyCounts::default()
    };
    down.server.store_unavailable = 6;
    let mut gens = [generation(0, Phase::Calm), down];
    let tenants = [
        ("g0", tenant(Class::Global, 1, 9, 2, 5)),
        ("g1", tenant(Class::Global, 1, 4, 3, 1)),
    ];
    assert_eq!(failed(&mut gens, &tenants), Vec::<String>::new());
}

#[test]
fn an_uncounted_failure_admission_fails() {
    let mut down = generation(1, Phase::RedisDown);
    down.envoy = EnvoyCounts {
        failure_allowed: 4,
        rls_errors: 4,
        rls_unavailable: 4,
        ..EnvoyCounts::default()
    };
    down.server.store_unavailable = 4;
    let mut gens = [down];
    assert_eq!(
        failed(&mut gens, &[("g0", tenant(Class::Global, 1, 9, 2, 5))]),
        ["every failure-mode decision counted"]
    );
}

#[test]
fn a_failure_mode_in_a_calm_generation_fails() {
    let mut calm = generation(0, Phase::Calm);
    calm.envoy = EnvoyCounts {
        failure_allowed: 1,
        rls_errors: 1,
        rls_unavailable: 1,
        ..EnvoyCounts::default()
    };
    let mut gens = [calm];
    assert_eq!(
        failed(&mut gens, &[("g0", tenant(Class::Global, 0, 5, 0, 1))]),
        [
            "global limit held per tenant",
            "failure modes only during outages"
        ]
    );
}

#[test]
fn an_outage_nobody_felt_fails() {
    let mut gens = [generation(0, Phase::ServerDown)];
    assert_eq!(
        failed(&mut gens, &[("g0", tenant(Class::Global, 0, 5, 4, 0))]),
        ["failure modes only during outages"]
    );
}

#[test]
fn envoy_counters_that_never_caught_up_fail() {
    let mut calm = generation(0, Phase::Calm);
    calm.synced = false;
    let mut gens = [calm];
    assert_eq!(
        failed(&mut gens, &[("l0", tenant(Class::Local, 0, 5, 5, 0))]),
        ["Envoy counted every decision"]
    );
}
