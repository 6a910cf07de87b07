use super::*;
use crate::cli::Args;
use clap::Parser;
use std::collections::HashMap;

/// Resolves `flags` against the variables `vars` and the files `files`.
fn resolve(
    flags: &[&str],
    vars: &[(&str, &str)],
    files: &[(&str, &str)],
) -> Result<Resolved, String> {
    let mut argv = vec!["floodgate-server", "--config", "c.yaml"];
    argv.extend_from_slice(flags);
    let args = Args::try_parse_from(argv).map_err(|e| e.to_string())?;
    let vars: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let files: HashMap<PathBuf, Vec<u8>> = files
        .iter()
        .map(|(k, v)| (PathBuf::from(k), v.as_bytes().to_vec()))
        .collect();
    args.redis.resolve(
        Counting::AllOrNothing,
        &|name| vars.get(name).cloned(),
        &|p| {
            files
                .get(p)
                .cloned()
                .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
        },
    )
}

fn options(r: Result<Resolved, String>) -> RedisOptions {
    r.unwrap().options.expect("a Redis store")
}

#[test]
fn no_target_is_the_memory_store() {
    assert!(resolve(&[], &[("REDIS_AUTH", "x")], &[])
        .unwrap()
        .options
        .is_none());
}

#[test]
fn the_reference_variables_choose_the_target() {
    let o = options(resolve(&[], &[("REDIS_URL", "10.0.0.5:6379")], &[]));
    assert_eq!(o.target, Target::Single("redis://10.0.0.5:6379".into()));
    let o = options(resolve(
        &[],
        &[
            ("REDIS_TYPE", "cluster"),
            ("REDIS_URL", "a:1, b:2"),
            ("REDIS_TLS", "true"),
        ],
        &[],
    ));
    assert_eq!(
        o.target,
        Target::Cluster(vec!["rediss://a:1".into(), "rediss://b:2".into()])
    );
    let o = options(resolve(
        &[],
        &[
            ("REDIS_TYPE", "SENTINEL"),
            ("REDIS_URL", "mymaster,s1:26379,s2:26379"),
        ],
        &[],
    ));
    assert_eq!(
        o.target,
        Target::Sentinel {
            master: "mymaster".into(),
            sentinels: vec!["redis://s1:26379".into(), "redis://s2:26379".into()],
        }
    );
    let e = resolve(
        &[],
        &[("REDIS_TYPE", "SENTINEL"), ("REDIS_URL", "mymaster")],
        &[],
    )
    .unwrap_err();
    assert!(e.contains("MASTER,HOST:PORT"), "{e}");
    let e = resolve(
        &[],
        &[("REDIS_TYPE", "memcache"), ("REDIS_URL", "a:1")],
        &[],
    )
    .unwrap_err();
    assert!(e.starts_with("REDIS_TYPE \"memcache\""), "{e}");
}

#[test]
fn a_flag_wins_over_a_variable() {
    let o = options(resolve(
        &[
            "--redis-url",
            "redis://flag:1",
            "--redis-password-file",
            "/pw",
        ],
        &[("REDIS_URL", "env:2"), ("REDIS_AUTH", "alice:envpw")],
        &[("/pw", "filepw\n")],
    ));
    assert_eq!(o.target, Target::Single("redis://flag:1".into()));
    assert_eq!(o.access.auth, Auth::password("filepw"));
    let o = options(resolve(
        &["--redis-url", "redis://flag:1"],
        &[("REDIS_AUTH", "alice:envpw")],
        &[],
    ));
    assert_eq!(o.access.auth, Auth::from_reference("alice:envpw"));
    // A password in the URL is a flag too: it wins over REDIS_AUTH.
    let r = resolve(
        &["--redis-url", "redis://u:urlpw@h:1"],
        &[("REDIS_AUTH", "envpw")],
        &[],
    )
    .unwrap();
    assert!(r.password_on_argv);
    assert_eq!(r.options.unwrap().access.auth, Auth::default());
}

#[test]
fn two_passwords_for_one_target_are_refused() {
    let e = resolve(
        &[
            "--redis-url",
            "redis://u:urlpw@h:1",
            "--redis-password-file",
            "/pw",
        ],
        &[],
        &[("/pw", "x")],
    )
    .unwrap_err();
    assert_eq!(
        e,
        "--redis-password-file /pw and a password in the Redis URL: give one"
    );
    let e = resolve(
        &[
            "--redis-url",
            "redis://h:1",
            "--redis-password-file",
            "/nope",
        ],
        &[],
        &[],
    )
    .unwrap_err();
    assert!(e.starts_with("--redis-password-file /nope: "), "{e}");
}

#[test]
fn tls_files_need_a_tls_target() {
    let e = resolve(
        &["--redis-url", "redis://h:1", "--redis-tls-ca-file", "/ca"],
        &[],
        &[("/ca", "")],
    )
    .unwrap_err();
    assert_eq!(
        e,
        "--redis-tls-ca-file is given but the Redis target is not TLS (use rediss:// or REDIS_TLS=true)"
    );
    let e = resolve(
        &[],
        &[("REDIS_URL", "h:1"), ("REDIS_TLS_CACERT", "/ca")],
        &[],
    )
    .unwrap_err();
    assert!(e.starts_with("REDIS_TLS_CACERT is given"), "{e}");
    let o = options(resolve(
        &["--redis-tls-cert-file", "/c"],
        &[
            ("REDIS_URL", "h:1"),
            ("REDIS_TLS", "true"),
            ("REDIS_TLS_CACERT", "/ca"),
            ("REDIS_TLS_CLIENT_KEY", "/k"),
            ("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", "true"),
        ],
        &[("/ca", "CA"), ("/c", "CERT"), ("/k", "KEY")],
    ));
    assert_eq!(o.target, Target::Single("rediss://h:1".into()));
    assert_eq!(o.access.tls.ca_pem.as_deref(), Some(&b"CA"[..]));
    assert_eq!(
        o.access.tls.client,
        Some((b"CERT".to_vec(), b"KEY".to_vec()))
    );
    assert!(o.access.tls.skip_hostname_verification);
    let e = resolve(&[], &[("REDIS_URL", "h:1"), ("REDIS_TLS", "yes")], &[]).unwrap_err();
    assert_eq!(e, "REDIS_TLS \"yes\": expected true or false");
    let e = resolve(
        &[],
        &[
            ("REDIS_URL", "rediss://h:1"),
            ("REDIS_TLS_CLIENT_CERT", "/c"),
        ],
        &[("/c", "")],
    )
    .unwrap_err();
    assert_eq!(
        e,
        "REDIS_TLS_CLIENT_CERT needs both a client certificate and its key"
    );
}

#[test]
fn sentinel_flags_and_credentials() {
    let o = options(resolve(
        &[
            "--redis-sentinel",
            "redis://s1:26379,redis://s2:26379",
            "--redis-sentinel-master",
            "m",
            "--redis-sentinel-password-file",
            "/sp",
        ],
        &[("REDIS_AUTH", "datapw")],
        &[("/sp", "sentinelpw")],
    ));
    assert!(matches!(o.target, Target::Sentinel { ref master, .. } if master == "m"));
    assert_eq!(o.access.auth, Auth::from_reference("datapw"));
    assert_eq!(o.access.sentinel_auth, Auth::password("sentinelpw"));
    let e = resolve(
        &["--redis-url", "redis://h:1"],
        &[("REDIS_SENTINEL_AUTH", "x")],
        &[],
    )
    .unwrap_err();
    assert_eq!(
        e,
        "a sentinel password is given but the target is not Sentinel"
    );
    assert!(
        resolve(&["--redis-sentinel", "redis://s:1"], &[], &[]).is_err(),
        "needs a master name"
    );
}

#[test]
fn no_flag_takes_a_password() {
    let e = resolve(&["--redis-password", "x"], &[], &[]).unwrap_err();
    assert!(e.contains("unexpected argument"), "{e}");
}

#[test]
fn a_key_prefix_goes_to_the_store_and_a_brace_is_refused() {
    let url = ["--redis-url", "redis://127.0.0.1:6379"];
    let o = options(resolve(
        &[url[0], url[1], "--redis-key-prefix", "team-a:"],
        &[],
        &[],
    ));
    assert_eq!(o.key_prefix, "team-a:");
    assert_eq!(options(resolve(&url, &[], &[])).key_prefix, "");
    for bad in ["a{b", "a}", "two words", &"x".repeat(65)] {
        let e = resolve(&[url[0], url[1], "--redis-key-prefix", bad], &[], &[]).unwrap_err();
        assert!(e.starts_with("--redis-key-prefix"), "{e}");
    }
}
