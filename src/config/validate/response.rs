//! The `response` section: how rejections look, and which rate-limit fields replies carry.

use super::super::wire;
use super::super::{
    BodyFormat, ConfigError, HeaderFields, ResponseConfig, DEFAULT_BODY, DEFAULT_STATUS,
};
use super::status;

pub(super) fn response(r: Option<wire::Response>) -> Result<ResponseConfig, ConfigError> {
    let Some(r) = r else {
        return Ok(ResponseConfig {
            status: DEFAULT_STATUS,
            body: DEFAULT_BODY.to_string(),
            headers_on_allowed: false,
            headers: HeaderFields::Draft03,
            body_format: BodyFormat::Text,
        });
    };
    let status = match r.status {
        None => DEFAULT_STATUS,
        Some(s) => status("response.status", s)?,
    };
    let headers = match r.headers.as_deref() {
        None | Some("draft03") => HeaderFields::Draft03,
        Some("draft10") => HeaderFields::Draft10,
        Some("both") => HeaderFields::Both,
        Some("none") => HeaderFields::None,
        Some(other) => {
            return Err(ConfigError::new(
                "response.headers",
                format!(
                "unknown variant `{other}`, expected one of `draft03`, `draft10`, `both`, `none`"
            ),
            ))
        }
    };
    let headers_on_allowed = r.headers_on_allowed.unwrap_or(false);
    if headers_on_allowed && headers == HeaderFields::None {
        return Err(ConfigError::new(
            "response.headers_on_allowed",
            "has no effect with `headers: \"none\"`: remove one of them",
        ));
    }
    Ok(ResponseConfig {
        status,
        body: r.body.unwrap_or_else(|| DEFAULT_BODY.to_string()),
        headers_on_allowed,
        headers,
        body_format: match r.body_format.as_deref() {
            None | Some("text") => BodyFormat::Text,
            Some("problem+json") => BodyFormat::ProblemJson,
            Some(other) => {
                return Err(ConfigError::new(
                    "response.body_format",
                    format!("unknown variant `{other}`, expected `text` or `problem+json`"),
                ))
            }
        },
    })
}
