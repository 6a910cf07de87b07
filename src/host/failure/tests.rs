use super::*;

#[test]
fn allow_lets_through_what_it_still_can() {
    let r = |f| remedy(f, FailureMode::Allow);
    assert_eq!(r(HostFailure::TallyBusy), Remedy::LetThrough);
    assert_eq!(r(HostFailure::LocalReply), Remedy::LetThrough);
    assert_eq!(r(HostFailure::Resume), Remedy::LeavePaused);
    assert_eq!(r(HostFailure::SwitchContext), Remedy::LeavePaused);
}

#[test]
fn deny_never_lets_a_request_through() {
    for failure in HostFailure::ALL {
        assert_ne!(
            remedy(failure, FailureMode::Deny),
            Remedy::LetThrough,
            "{failure:?}"
        );
    }
    let r = |f| remedy(f, FailureMode::Deny);
    assert_eq!(r(HostFailure::TallyBusy), Remedy::FailureReply);
    assert_eq!(r(HostFailure::LocalReply), Remedy::FailureReply);
    assert_eq!(r(HostFailure::Resume), Remedy::FailureReply);
    assert_eq!(r(HostFailure::SwitchContext), Remedy::LeavePaused);
}

#[test]
fn each_cause_has_its_own_metric() {
    let metrics: std::collections::BTreeSet<usize> = HostFailure::ALL
        .iter()
        .map(|f| f.metric() as usize)
        .collect();
    assert_eq!(metrics.len(), HostFailure::ALL.len());
    for (i, failure) in HostFailure::ALL.iter().enumerate() {
        assert_eq!(*failure as usize, i, "{failure:?} out of order");
    }
}
