//! The xDS configuration source's settings: `--config-xds URL` and its companions, or the
//! reference's `CONFIG_TYPE=GRPC_XDS_SOTW` with its `CONFIG_GRPC_XDS_*` variables (a flag
//! wins over a variable), resolved into the client's [`Settings`].

pub use self::backoff::BackoffArgs;
use crate::cli::redis::truthy;
use crate::proto::envoy::config::core::v3::Node;
use crate::xds::client::Settings;
use std::path::{Path, PathBuf};
use tonic::metadata::{AsciiMetadataKey, AsciiMetadataValue};
use tonic::transport::{Certificate, ClientTlsConfig, Identity};

/// Where the configuration comes from when it is pushed rather than read from a file.
#[derive(Debug, Clone, clap::Args)]
pub struct XdsArgs {
    /// Take the configuration from an xDS management server (ADS, state of the world:
    /// `RateLimitConfig` resources, as Envoy Gateway pushes them) instead of a file:
    /// `http://HOST:PORT`, or `https://HOST:PORT` (see --config-xds-ca). Serving starts at
    /// once, every domain unknown until the first push; a push that does not validate is
    /// NACKed and the configuration in force stays. The reference's CONFIG_TYPE=GRPC_XDS_SOTW
    /// with CONFIG_GRPC_XDS_SERVER_URL.
    #[arg(long, value_name = "URL", conflicts_with = "config")]
    pub config_xds: Option<String>,

    /// The node id the management server knows us by (CONFIG_GRPC_XDS_NODE_ID).
    #[arg(long, value_name = "ID", default_value = "default")]
    pub config_xds_node_id: String,

    /// The node's metadata, `KEY=VALUE,KEY=VALUE` (`KEY:VALUE` too), as strings
    /// (CONFIG_GRPC_XDS_NODE_METADATA).
    #[arg(long, value_name = "K=V,...")]
    pub config_xds_node_metadata: Option<String>,

    /// gRPC metadata sent on the stream, `NAME=VALUE,NAME=VALUE` (`NAME:VALUE` too), e.g. a
    /// token the management server asks for (CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS).
    #[arg(long, value_name = "K=V,...")]
    pub config_xds_headers: Option<String>,

    /// PEM CA bundle the https management server's certificate must chain to (without it:
    /// the system's roots) (CONFIG_GRPC_XDS_SERVER_TLS_CACERT).
    #[arg(long, value_name = "PATH")]
    pub config_xds_ca: Option<PathBuf>,

    /// PEM client certificate shown to an https management server that asks for one
    /// (CONFIG_GRPC_XDS_CLIENT_TLS_CERT); with --config-xds-key.
    #[arg(long, value_name = "PATH", requires = "config_xds_key")]
    pub config_xds_cert: Option<PathBuf>,

    /// PEM private key of --config-xds-cert (CONFIG_GRPC_XDS_CLIENT_TLS_KEY).
    #[arg(long, value_name = "PATH", requires = "config_xds_cert")]
    pub config_xds_key: Option<PathBuf>,

    /// The name the management server's certificate must carry, when it is not the URL's
    /// host (CONFIG_GRPC_XDS_SERVER_TLS_SAN).
    #[arg(long, value_name = "NAME")]
    pub config_xds_san: Option<String>,

    /// The largest response accepted, in bytes (XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES; default
    /// 4 MiB).
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..))]
    pub config_xds_max_message_bytes: Option<u64>,

    /// How long to wait before opening the stream again.
    #[command(flatten)]
    pub backoff: BackoffArgs,
}

/// The reference's `CONFIG_TYPE` values.
const FILE: &str = "FILE";
const SOTW: &str = "GRPC_XDS_SOTW";

/// Fills `x` from the reference's variables where the flag was not `given`: with
/// `CONFIG_TYPE=GRPC_XDS_SOTW`, the URL (`CONFIG_GRPC_XDS_SERVER_URL`, `host:port`, over
/// TLS with `CONFIG_GRPC_XDS_SERVER_USE_TLS`); whenever xDS is on, the rest.
pub fn apply(
    x: &mut XdsArgs,
    given: &dyn Fn(&str) -> bool,
    set: &dyn Fn(&str) -> Option<String>,
) -> Result<(), String> {
    let by_env = match set("CONFIG_TYPE") {
        None => false,
        Some(t) if t.eq_ignore_ascii_case(FILE) => false,
        Some(t) if t.eq_ignore_ascii_case(SOTW) => true,
        Some(t) => {
            return Err(format!(
                "CONFIG_TYPE={t:?} is not supported: {FILE} (a file or directory) or {SOTW} (xDS)"
            ))
        }
    };
    let tls = match set("CONFIG_GRPC_XDS_SERVER_USE_TLS") {
        Some(v) if by_env => truthy("CONFIG_GRPC_XDS_SERVER_USE_TLS", &v)?,
        _ => false,
    };
    // A flag wins over a variable: --config on the command line keeps the files.
    if by_env && !given("config_xds") && !given("config") {
        let url = set("CONFIG_GRPC_XDS_SERVER_URL").unwrap_or_else(|| "localhost:18000".into());
        x.config_xds = Some(match (url.contains("://"), tls) {
            (true, _) => url,
            (false, true) => format!("https://{url}"),
            (false, false) => format!("http://{url}"),
        });
    }
    match x.config_xds {
        Some(_) => companions(x, given, set),
        None => Ok(()),
    }
}

/// With xDS on, the node, headers, TLS and size settings from their variables.
fn companions(
    x: &mut XdsArgs,
    given: &dyn Fn(&str) -> bool,
    set: &dyn Fn(&str) -> Option<String>,
) -> Result<(), String> {
    if let (false, Some(v)) = (given("config_xds_node_id"), set("CONFIG_GRPC_XDS_NODE_ID")) {
        x.config_xds_node_id = v;
    }
    let texts: [(&str, &str, &mut Option<String>); 3] = [
        (
            "config_xds_node_metadata",
            "CONFIG_GRPC_XDS_NODE_METADATA",
            &mut x.config_xds_node_metadata,
        ),
        (
            "config_xds_headers",
            "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS",
            &mut x.config_xds_headers,
        ),
        (
            "config_xds_san",
            "CONFIG_GRPC_XDS_SERVER_TLS_SAN",
            &mut x.config_xds_san,
        ),
    ];
    for (id, name, field) in texts {
        if let (false, Some(v)) = (given(id), set(name)) {
            *field = Some(v);
        }
    }
    let paths: [(&str, &str, &mut Option<PathBuf>); 3] = [
        (
            "config_xds_ca",
            "CONFIG_GRPC_XDS_SERVER_TLS_CACERT",
            &mut x.config_xds_ca,
        ),
        (
            "config_xds_cert",
            "CONFIG_GRPC_XDS_CLIENT_TLS_CERT",
            &mut x.config_xds_cert,
        ),
        (
            "config_xds_key",
            "CONFIG_GRPC_XDS_CLIENT_TLS_KEY",
            &mut x.config_xds_key,
        ),
    ];
    for (id, name, field) in paths {
        if let (false, Some(v)) = (given(id), set(name)) {
            *field = Some(PathBuf::from(v));
        }
    }
    let max = "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES";
    if let (false, Some(v)) = (given("config_xds_max_message_bytes"), set(max)) {
        x.config_xds_max_message_bytes = Some(
            v.parse::<u64>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("{max} {v:?}: expected a number of bytes"))?,
        );
    }
    backoff::apply(&mut x.backoff, given, set)
}

impl XdsArgs {
    /// The client's settings (`None`: no xDS), the TLS files read through `read`.
    pub fn resolve(
        &self,
        read: &dyn Fn(&Path) -> std::io::Result<Vec<u8>>,
    ) -> Result<Option<Settings>, String> {
        let Some(url) = &self.config_xds else {
            return Ok(None);
        };
        let https = match url.split_once("://") {
            Some(("http", _)) => false,
            Some(("https", _)) => true,
            _ => {
                return Err(format!(
                    "--config-xds {url:?}: expected http://HOST:PORT or https://HOST:PORT"
                ))
            }
        };
        let mut endpoint = Settings::endpoint(url).map_err(|e| format!("--config-xds {e}"))?;
        let tls_files = [
            &self.config_xds_ca,
            &self.config_xds_cert,
            &self.config_xds_key,
        ];
        if !https && (tls_files.iter().any(|f| f.is_some()) || self.config_xds_san.is_some()) {
            return Err(format!(
                "--config-xds {url:?}: the TLS settings (CA, client certificate, SAN) need an https:// URL"
            ));
        }
        if https {
            endpoint = endpoint
                .tls_config(self.tls(read)?)
                .map_err(|e| format!("--config-xds TLS: {e}"))?;
        }
        let max_message = self
            .config_xds_max_message_bytes
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        Ok(Some(Settings {
            endpoint,
            url: url.clone(),
            node: Node {
                id: self.config_xds_node_id.clone(),
                cluster: String::new(),
                metadata: self.metadata()?,
            },
            headers: self.headers()?,
            max_message,
            backoff: self.backoff.resolve()?,
        }))
    }

    fn tls(
        &self,
        read: &dyn Fn(&Path) -> std::io::Result<Vec<u8>>,
    ) -> Result<ClientTlsConfig, String> {
        let file = |flag: &str, path: &Path| {
            read(path).map_err(|e| format!("{flag} {}: cannot read: {e}", path.display()))
        };
        let mut tls = ClientTlsConfig::new();
        tls = match &self.config_xds_ca {
            Some(ca) => tls.ca_certificate(Certificate::from_pem(file("--config-xds-ca", ca)?)),
            None => tls.with_native_roots(),
        };
        if let (Some(cert), Some(key)) = (&self.config_xds_cert, &self.config_xds_key) {
            tls = tls.identity(Identity::from_pem(
                file("--config-xds-cert", cert)?,
                file("--config-xds-key", key)?,
            ));
        }
        if let Some(san) = &self.config_xds_san {
            tls = tls.domain_name(san.clone());
        }
        Ok(tls)
    }

    fn metadata(&self) -> Result<Option<prost_types::Struct>, String> {
        let Some(text) = &self.config_xds_node_metadata else {
            return Ok(None);
        };
        let fields = pairs(
            "--config-xds-node-metadata (CONFIG_GRPC_XDS_NODE_METADATA)",
            text,
        )?
        .into_iter()
        .map(|(k, v)| {
            let value = prost_types::Value {
                kind: Some(prost_types::value::Kind::StringValue(v)),
            };
            (k, value)
        })
        .collect();
        Ok(Some(prost_types::Struct { fields }))
    }

    fn headers(&self) -> Result<Vec<(AsciiMetadataKey, AsciiMetadataValue)>, String> {
        let Some(text) = &self.config_xds_headers else {
            return Ok(Vec::new());
        };
        let setting = "--config-xds-headers (CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS)";
        pairs(setting, text)?
            .into_iter()
            .map(|(k, v)| {
                let key = AsciiMetadataKey::from_bytes(k.to_ascii_lowercase().as_bytes())
                    .map_err(|_| format!("{setting}: {k:?} is not a header name"))?;
                let value = AsciiMetadataValue::try_from(v.as_str())
                    .map_err(|_| format!("{setting}: the value of {k:?} is not a header value"))?;
                Ok((key, value))
            })
            .collect()
    }
}

/// `K=V,K=V` (or `K:V`, the reference's map form) as pairs, each split at its first `=`
/// or `:`; blank items are skipped.
fn pairs(setting: &str, text: &str) -> Result<Vec<(String, String)>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(|item| match item.find(['=', ':']) {
            Some(at) if at > 0 => Ok((
                item[..at].trim().to_owned(),
                item[at + 1..].trim().to_owned(),
            )),
            _ => Err(format!("{setting}: {item:?} is not KEY=VALUE")),
        })
        .collect()
}

mod backoff;
#[cfg(test)]
mod tests;
