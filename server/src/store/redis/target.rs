//! Where Redis is, and how its addresses are shown: never with a password.
//!
//! A URL may carry credentials (`redis://user:password@host`). Everything that logs,
//! prints or formats a target goes through [`redact`], so the password becomes `***`
//! (the user name stays: it helps to tell deployments apart and is no secret). `Debug`
//! and `Display` of [`Target`] are redacted, so `?target` in a log line is safe.

use std::fmt;

/// Where Redis is.
#[derive(Clone, PartialEq, Eq)]
pub enum Target {
    /// One Redis server (or a proxy in front of several): `redis://HOST:PORT[/DB]`, or
    /// `rediss://` for TLS.
    Single(String),
    /// Redis Cluster, found through these seed nodes.
    Cluster(Vec<String>),
    /// A master found through Redis Sentinel and followed across failovers.
    Sentinel {
        /// The name the sentinels monitor the master under (`sentinel monitor NAME ...`).
        master: String,
        /// The sentinels' URLs (`redis://HOST:PORT`, or `rediss://` when they and the
        /// data nodes speak TLS).
        sentinels: Vec<String>,
    },
}

impl Target {
    /// Whether the target is reached over TLS (its URLs are `rediss://`).
    pub fn uses_tls(&self) -> bool {
        self.urls().iter().any(|u| is_tls_url(u))
    }

    /// The URLs the target is made of (seeds, sentinels, or the one URL).
    pub fn urls(&self) -> Vec<&str> {
        match self {
            Target::Single(url) => vec![url.as_str()],
            Target::Cluster(seeds) => seeds.iter().map(String::as_str).collect(),
            Target::Sentinel { sentinels, .. } => sentinels.iter().map(String::as_str).collect(),
        }
    }

    /// Whether one of the URLs carries a password.
    pub fn has_password(&self) -> bool {
        self.urls().iter().any(|u| redact(u) != *u)
    }
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Single(url) => f.debug_tuple("Single").field(&redact(url)).finish(),
            Target::Cluster(seeds) => f.debug_tuple("Cluster").field(&redact_all(seeds)).finish(),
            Target::Sentinel { master, sentinels } => f
                .debug_struct("Sentinel")
                .field("master", master)
                .field("sentinels", &redact_all(sentinels))
                .finish(),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Single(url) => f.write_str(&redact(url)),
            Target::Cluster(seeds) => f.write_str(&redact_all(seeds).join(",")),
            Target::Sentinel { master, sentinels } => {
                write!(f, "{master} via {}", redact_all(sentinels).join(","))
            }
        }
    }
}

/// Whether `url` asks for TLS (`rediss://`).
pub fn is_tls_url(url: &str) -> bool {
    url.get(..9)
        .is_some_and(|s| s.eq_ignore_ascii_case("rediss://"))
}

/// `url` with the password of its authority replaced by `***`; anything that is not a
/// URL with credentials comes back unchanged.
///
/// The authority ends at the first `/`, `?` or `#` after the scheme; its credentials end
/// at its *last* `@` (a password may itself contain `@`, and a host never does); the
/// password starts after the credentials' first `:`.
pub fn redact(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_owned();
    };
    let rest = &url[scheme_end..];
    let authority_len = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_len];
    let Some(at) = authority.rfind('@') else {
        return url.to_owned();
    };
    let credentials = &authority[..at];
    let Some(colon) = credentials.find(':') else {
        return url.to_owned();
    };
    format!(
        "{}{}:***{}",
        &url[..scheme_end],
        &credentials[..colon],
        &rest[at..]
    )
}

fn redact_all(urls: &[String]) -> Vec<String> {
    urls.iter().map(|u| redact(u)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_show() {
        for (url, shown) in [
            (
                "redis://default:s3cretPW@127.0.0.1:18379/0",
                "redis://default:***@127.0.0.1:18379/0",
            ),
            ("redis://:pw@h:1", "redis://:***@h:1"),
            ("rediss://u:p@ss:w@rd@h:6380", "rediss://u:***@h:6380"),
            ("redis://u:p@h:1/2?x=@y", "redis://u:***@h:1/2?x=@y"),
            ("redis://user@h:1", "redis://user@h:1"),
            ("redis://h:1", "redis://h:1"),
            ("h:1", "h:1"),
            ("redis://h:1/?password=@", "redis://h:1/?password=@"),
        ] {
            assert_eq!(redact(url), shown, "{url}");
        }
    }

    #[test]
    fn a_target_formats_without_its_password() {
        let t = Target::Single("redis://default:s3cretPW@127.0.0.1:18379/0".into());
        assert_eq!(
            format!("{t:?}"),
            r#"Single("redis://default:***@127.0.0.1:18379/0")"#
        );
        assert_eq!(t.to_string(), "redis://default:***@127.0.0.1:18379/0");
        assert!(t.has_password());
        let s = Target::Sentinel {
            master: "m".into(),
            sentinels: vec!["redis://:x@a:1".into(), "rediss://b:2".into()],
        };
        assert!(!format!("{s:?}{s}").contains(":x@"));
        assert!(s.uses_tls());
        let c = Target::Cluster(vec!["redis://a:1".into()]);
        assert!(!c.uses_tls() && !c.has_password());
    }
}
