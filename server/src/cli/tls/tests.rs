use super::*;
use crate::cli::Args;
use clap::Parser;
use std::collections::HashMap;

fn resolve(flags: &[&str], vars: &[(&str, &str)]) -> Result<Resolved, String> {
    let mut argv = vec!["floodgate-server", "--config", "c.yaml"];
    argv.extend_from_slice(flags);
    let args = Args::try_parse_from(argv).map_err(|e| e.to_string())?;
    let vars: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    args.tls.resolve(&|name| vars.get(name).cloned())
}

#[test]
fn plaintext_by_default() {
    let r = resolve(&[], &[]).unwrap();
    assert_eq!(
        (r.tls, r.charges, r.quota),
        (None, Who::Anyone, Who::Anyone)
    );
}

#[test]
fn the_reference_variables_and_a_flag_over_them() {
    let r = resolve(
        &["--grpc-tls-key-file", "/flag.key"],
        &[
            ("GRPC_SERVER_USE_TLS", "true"),
            ("GRPC_SERVER_TLS_CERT", "/env.pem"),
            ("GRPC_SERVER_TLS_KEY", "/env.key"),
            ("GRPC_CLIENT_TLS_CACERT", "/ca.pem"),
            (
                "GRPC_CLIENT_TLS_SAN",
                "envoy.example, spiffe://td/ns/edge/*",
            ),
        ],
    )
    .unwrap();
    let tls = r.tls.unwrap();
    assert_eq!(tls.cert, PathBuf::from("/env.pem"));
    assert_eq!(tls.key, PathBuf::from("/flag.key"));
    assert_eq!(tls.client_ca, Some(PathBuf::from("/ca.pem")));
    assert_eq!(tls.allowed.len(), 2);
}

#[test]
fn settings_that_cannot_take_effect_are_refused() {
    for (flags, vars, error) in [
        (
            &["--grpc-tls-cert-file", "/c"][..],
            &[][..],
            "TLS needs both --grpc-tls-cert-file and --grpc-tls-key-file (GRPC_SERVER_TLS_CERT, GRPC_SERVER_TLS_KEY)",
        ),
        (
            &[],
            &[("GRPC_SERVER_TLS_CERT", "/c"), ("GRPC_SERVER_TLS_KEY", "/k")][..],
            "GRPC_SERVER_TLS_CERT/_KEY are set but GRPC_SERVER_USE_TLS is not true",
        ),
        (
            &["--grpc-tls-client-ca-file", "/ca"],
            &[],
            "a client CA (--grpc-tls-client-ca-file, GRPC_CLIENT_TLS_CACERT) needs TLS: give --grpc-tls-cert-file and --grpc-tls-key-file",
        ),
        (
            &["--grpc-tls-cert-file", "/c", "--grpc-tls-key-file", "/k", "--grpc-tls-client-identities", "a"],
            &[],
            "--grpc-tls-client-identities needs client certificates (--grpc-tls-client-ca-file)",
        ),
        (
            &["--charge-identities", "a"],
            &[],
            "--charge-identities needs client certificates (--grpc-tls-client-ca-file): identities come only from them",
        ),
        (
            &["--grpc-tls-cert-file", "/c", "--grpc-tls-key-file", "/k", "--grpc-tls-client-ca-file", "/ca", "--quota-identities", "a*b"],
            &[],
            "--quota-identities: \"a*b\": an identity is a SAN DNS name or URI, exact or ending in *",
        ),
        (&[], &[("GRPC_SERVER_USE_TLS", "on")], "GRPC_SERVER_USE_TLS \"on\": expected true or false"),
    ] {
        assert_eq!(resolve(flags, vars).unwrap_err(), error, "{flags:?} {vars:?}");
    }
}

#[test]
fn who_may_spend() {
    let r = resolve(
        &[
            "--grpc-tls-cert-file",
            "/c",
            "--grpc-tls-key-file",
            "/k",
            "--grpc-tls-client-ca-file",
            "/ca",
            "--charge-identities",
            "spiffe://td/ns/llm/sa/gw",
        ],
        &[],
    )
    .unwrap();
    assert!(r.charges.admits(&["spiffe://td/ns/llm/sa/gw".into()]));
    assert!(!r.charges.admits(&["spiffe://td/ns/web/sa/gw".into()]));
    assert_eq!(r.quota, Who::Anyone);
}
