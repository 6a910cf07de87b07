//! The xDS settings from flags and from the reference's variables.

use super::*;
use crate::cli::Args;
use clap::Parser;
use std::collections::HashMap;

fn env_of<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    let map: HashMap<&str, &str> = vars.iter().copied().collect();
    move |name| map.get(name).map(|v| (*v).to_owned())
}

fn from(flags: &[&str], vars: &[(&str, &str)]) -> Result<XdsArgs, String> {
    let mut argv = vec!["floodgate-server"];
    argv.extend_from_slice(flags);
    let args = Args::try_parse_from(argv).map_err(|e| e.to_string())?;
    let mut x = args.xds;
    let given = |id: &str| {
        flags
            .iter()
            .any(|f| f.trim_start_matches("--").replace('-', "_") == id)
    };
    apply(&mut x, &given, &env_of(vars))?;
    Ok(x)
}

fn no_files(_: &Path) -> std::io::Result<Vec<u8>> {
    Err(std::io::Error::other("no files in this test"))
}

#[test]
fn the_reference_variables_make_an_ads_client() {
    let x = from(
        &[],
        &[
            ("CONFIG_TYPE", "GRPC_XDS_SOTW"),
            ("CONFIG_GRPC_XDS_SERVER_URL", "xds.gateway:18001"),
            ("CONFIG_GRPC_XDS_NODE_ID", "envoy-gateway-ratelimit"),
            ("CONFIG_GRPC_XDS_NODE_METADATA", "zone=a, team:edge"),
            (
                "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS",
                "X-Token:s3cret,x-env=prod",
            ),
        ],
    )
    .unwrap();
    assert_eq!(x.config_xds.as_deref(), Some("http://xds.gateway:18001"));
    let s = x.resolve(&no_files).unwrap().expect("xDS on");
    assert_eq!(s.node.id, "envoy-gateway-ratelimit");
    let meta = s.node.metadata.expect("metadata").fields;
    let text = |k: &str| match meta.get(k).and_then(|v| v.kind.clone()) {
        Some(prost_types::value::Kind::StringValue(v)) => v,
        other => panic!("{k}: {other:?}"),
    };
    assert_eq!((text("zone"), text("team")), ("a".into(), "edge".into()));
    let headers: Vec<(String, String)> = s
        .headers
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap().to_owned()))
        .collect();
    assert_eq!(
        headers,
        [
            ("x-token".into(), "s3cret".into()),
            ("x-env".into(), "prod".into())
        ]
    );
}

#[test]
fn the_reference_defaults_apply_and_tls_turns_the_scheme_to_https() {
    let x = from(&[], &[("CONFIG_TYPE", "grpc_xds_sotw")]).unwrap();
    assert_eq!(x.config_xds.as_deref(), Some("http://localhost:18000"));
    assert_eq!(x.config_xds_node_id, "default");
    let x = from(
        &[],
        &[
            ("CONFIG_TYPE", "GRPC_XDS_SOTW"),
            ("CONFIG_GRPC_XDS_SERVER_USE_TLS", "true"),
            ("CONFIG_GRPC_XDS_SERVER_TLS_SAN", "xds.internal"),
        ],
    )
    .unwrap();
    assert_eq!(x.config_xds.as_deref(), Some("https://localhost:18000"));
    assert_eq!(x.config_xds_san.as_deref(), Some("xds.internal"));
}

#[test]
fn a_flag_wins_over_a_variable() {
    let x = from(
        &[
            "--config-xds",
            "http://127.0.0.1:9000",
            "--config-xds-node-id",
            "mine",
        ],
        &[
            ("CONFIG_TYPE", "GRPC_XDS_SOTW"),
            ("CONFIG_GRPC_XDS_SERVER_URL", "elsewhere:1"),
            ("CONFIG_GRPC_XDS_NODE_ID", "theirs"),
        ],
    )
    .unwrap();
    assert_eq!(x.config_xds.as_deref(), Some("http://127.0.0.1:9000"));
    assert_eq!(x.config_xds_node_id, "mine");
    // --config on the command line wins over CONFIG_TYPE=GRPC_XDS_SOTW.
    let x = from(
        &["--config", "/etc/floodgate"],
        &[("CONFIG_TYPE", "GRPC_XDS_SOTW")],
    )
    .unwrap();
    assert!(x.config_xds.is_none());
}

#[test]
fn file_or_no_config_type_reads_no_xds_variable() {
    for vars in [
        &[
            ("CONFIG_TYPE", "FILE"),
            ("CONFIG_GRPC_XDS_SERVER_URL", "x:1"),
        ][..],
        &[("CONFIG_GRPC_XDS_NODE_ID", "n")][..],
    ] {
        let x = from(&[], vars).unwrap();
        assert!(x.config_xds.is_none(), "{vars:?}");
        assert_eq!(x.config_xds_node_id, "default");
    }
    let e = from(&[], &[("CONFIG_TYPE", "GRPC_XDS_DELTA")]).unwrap_err();
    assert!(
        e.starts_with("CONFIG_TYPE=\"GRPC_XDS_DELTA\" is not supported"),
        "{e}"
    );
}

#[test]
fn settings_that_cannot_work_are_refused_with_their_name() {
    let refused = |flags: &[&str]| from(flags, &[]).unwrap().resolve(&no_files).unwrap_err();
    let e = refused(&["--config-xds", "127.0.0.1:18000"]);
    assert!(e.contains("expected http://HOST:PORT"), "{e}");
    let e = refused(&["--config-xds", "http://h:1", "--config-xds-ca", "/ca.pem"]);
    assert!(e.contains("need an https:// URL"), "{e}");
    let e = refused(&["--config-xds", "https://h:1", "--config-xds-ca", "/ca.pem"]);
    assert!(e.starts_with("--config-xds-ca /ca.pem: cannot read"), "{e}");
    let e = refused(&[
        "--config-xds",
        "http://h:1",
        "--config-xds-headers",
        "novalue",
    ]);
    assert!(
        e.contains("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS): \"novalue\" is not KEY=VALUE"),
        "{e}"
    );
    let e = refused(&[
        "--config-xds",
        "http://h:1",
        "--config-xds-headers",
        "bad name=v",
    ]);
    assert!(e.contains("is not a header name"), "{e}");
    let e = from(
        &[],
        &[
            ("CONFIG_TYPE", "GRPC_XDS_SOTW"),
            ("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", "big"),
        ],
    )
    .unwrap_err();
    assert!(
        e.starts_with("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES \"big\""),
        "{e}"
    );
}

#[test]
fn config_and_config_xds_exclude_each_other() {
    let e = Args::try_parse_from([
        "floodgate-server",
        "--config",
        "a.yaml",
        "--config-xds",
        "http://h:1",
    ])
    .unwrap_err();
    assert_eq!(e.kind(), clap::error::ErrorKind::ArgumentConflict);
}
