//! The `response` section: how rejections look, and which rate-limit fields replies carry.

use super::super::json::{Number, Rest};
use super::super::wire;
use super::super::{
    BodyFormat, ConfigError, HeaderFields, ResponseConfig, DEFAULT_BODY, DEFAULT_STATUS,
    MAX_JITTER_PPM,
};

pub(super) fn response(r: Option<wire::Response>) -> Result<ResponseConfig, ConfigError> {
    let Some(r) = r else {
        return Ok(ResponseConfig {
            status: DEFAULT_STATUS,
            body: DEFAULT_BODY.into(),
            headers_on_allowed: false,
            headers: HeaderFields::Draft03,
            body_format: BodyFormat::Text,
            retry_after_jitter_ppm: 0,
        });
    };
    let status = match r.status {
        None => DEFAULT_STATUS,
        Some(s) => status("response.status", s)?,
    };
    let headers = match r.headers.as_deref() {
        None | Some("draft03") => HeaderFields::Draft03,
        Some("draft10") => HeaderFields::Draft10,
        Some("draft11") => HeaderFields::Draft11,
        Some("both") => HeaderFields::Both,
        Some("none") => HeaderFields::None,
        Some(other) => {
            return Err(ConfigError::new(
                "response.headers",
                format!(
                "unknown variant `{other}`, expected one of `draft03`, `draft10`, `draft11`, `both`, `none`"
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
    let retry_after_jitter_ppm = jitter(r.retry_after_jitter)?;
    Ok(ResponseConfig {
        retry_after_jitter_ppm,
        status,
        body: r.body.map_or_else(|| DEFAULT_BODY.into(), Into::into),
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

/// `response.retry_after_jitter`: a finite fraction from 0 to 1 (a wait at most
/// doubled), held in millionths. Anything else is refused rather than clamped: a jitter
/// of 10 meant as "10 %" would otherwise keep clients away eleven times too long.
fn jitter(j: Option<Number>) -> Result<u32, ConfigError> {
    const FIELD: &str = "response.retry_after_jitter";
    let Some(j) = j else {
        return Ok(0);
    };
    let m = j.millionths();
    let max = MAX_JITTER_PPM;
    match m.whole {
        // Rounded to the nearest millionth, half away from zero, as before.
        Some(w)
            if !m.negative
                && (w < u64::from(max) || (w == u64::from(max) && m.rest == Rest::Zero)) =>
        {
            Ok(w as u32 + u32::from(m.rest == Rest::HalfOrMore))
        }
        _ => Err(ConfigError::new(
            FIELD,
            format!(
                "must be a fraction from 0 to {} (0.2 spreads waits by up to 20 %), got {}",
                max / 1_000_000,
                j.text()
            ),
        )),
    }
}

/// An HTTP status a rejection may be sent with (`response.status`, `failure_status`).
pub(super) fn status(at: &str, s: u64) -> Result<u16, ConfigError> {
    match s {
        400..=599 => Ok(s as u16),
        _ => Err(ConfigError::new(
            at,
            format!("{s} is not a 4xx or 5xx status code"),
        )),
    }
}
