//! The host functions of the stream and its calls: buffers, header maps, local replies,
//! resuming, switching context, HTTP calls.

use super::memory::{count, give, poke, read, text, C};
use super::{Call, Host, LocalReply};
use crate::abi::{buffer, decode_pairs, encode_pairs, map, status, Pairs};
use wasmi::Error;

pub(super) fn get_buffer_bytes(
    mut c: C,
    kind: i32,
    start: i32,
    max: i32,
    ptr_ptr: i32,
    size_ptr: i32,
) -> Result<i32, Error> {
    count(&mut c, "proxy_get_buffer_bytes");
    let host = c.data_mut();
    let bytes = match kind {
        buffer::PLUGIN_CONFIGURATION => {
            let root = host.acting_context().map_or(0, |ctx| ctx.root);
            host.contexts
                .get(&root)
                .map(|r| r.plugin_configuration.clone())
        }
        buffer::VM_CONFIGURATION | buffer::HTTP_REQUEST_BODY => Some(Vec::new()),
        buffer::HTTP_RESPONSE_BODY => Some(host.stream.response_body.clone()),
        buffer::HTTP_CALL_RESPONSE_BODY => host.call_response.as_ref().map(|r| r.body.clone()),
        _ => None,
    };
    let Some(bytes) = bytes else {
        return Ok(status::NOT_FOUND);
    };
    let start = (start as u32 as usize).min(bytes.len());
    let end = start.saturating_add(max as u32 as usize).min(bytes.len());
    if end == start {
        return Ok(status::OK);
    }
    give(&mut c, &bytes[start..end], ptr_ptr, size_ptr)
}

/// The header map of `kind` as the acting context sees it (`None`: it has none now).
fn header_map(host: &mut Host, kind: i32) -> Option<&mut Pairs> {
    let acting = host.acting();
    let is_http = host
        .contexts
        .get(&acting)
        .is_some_and(|ctx| ctx.root != acting);
    match kind {
        map::REQUEST_HEADERS if is_http => Some(&mut host.stream.request_headers),
        map::RESPONSE_HEADERS if is_http => host.stream.response_headers.as_mut(),
        map::RESPONSE_TRAILERS if is_http => host.stream.response_trailers.as_mut(),
        map::HTTP_CALL_RESPONSE_HEADERS => host.call_response.as_mut().map(|r| &mut r.headers),
        map::HTTP_CALL_RESPONSE_TRAILERS => host.call_response.as_mut().map(|r| &mut r.trailers),
        _ => None,
    }
}

pub(super) fn get_header_map_value(
    mut c: C,
    kind: i32,
    kp: i32,
    kl: i32,
    ptr_ptr: i32,
    size_ptr: i32,
) -> Result<i32, Error> {
    count(&mut c, "proxy_get_header_map_value");
    let key = text(arg!(&mut c, kp, kl)).to_ascii_lowercase();
    let Some(headers) = header_map(c.data_mut(), kind) else {
        return Ok(status::BAD_ARGUMENT);
    };
    let Some(value) = headers
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.clone())
    else {
        return Ok(status::NOT_FOUND);
    };
    give(&mut c, &value, ptr_ptr, size_ptr)
}

pub(super) fn get_header_map_pairs(
    mut c: C,
    kind: i32,
    ptr_ptr: i32,
    size_ptr: i32,
) -> Result<i32, Error> {
    count(&mut c, "proxy_get_header_map_pairs");
    let Some(headers) = header_map(c.data_mut(), kind) else {
        return Ok(status::BAD_ARGUMENT);
    };
    // An empty map is handed back as an empty value, not an encoded zero count.
    let encoded = if headers.is_empty() {
        Vec::new()
    } else {
        encode_pairs(headers)
    };
    give(&mut c, &encoded, ptr_ptr, size_ptr)
}

/// Changes a header map the acting context may change.
fn edit(
    mut c: C,
    name: &str,
    kind: i32,
    kp: i32,
    kl: i32,
    value: Option<(i32, i32)>,
    f: fn(&mut Pairs, String, Vec<u8>),
) -> Result<i32, Error> {
    count(&mut c, name);
    let key = text(arg!(&mut c, kp, kl)).to_ascii_lowercase();
    let value = match value {
        Some((vp, vl)) => arg!(&mut c, vp, vl),
        None => Vec::new(),
    };
    if kind == map::HTTP_CALL_RESPONSE_HEADERS || kind == map::HTTP_CALL_RESPONSE_TRAILERS {
        return Ok(status::BAD_ARGUMENT);
    }
    let Some(headers) = header_map(c.data_mut(), kind) else {
        return Ok(status::BAD_ARGUMENT);
    };
    f(headers, key, value);
    Ok(status::OK)
}

pub(super) fn add_header_map_value(
    c: C,
    kind: i32,
    kp: i32,
    kl: i32,
    vp: i32,
    vl: i32,
) -> Result<i32, Error> {
    edit(
        c,
        "proxy_add_header_map_value",
        kind,
        kp,
        kl,
        Some((vp, vl)),
        |h, k, v| h.push((k, v)),
    )
}

pub(super) fn replace_header_map_value(
    c: C,
    kind: i32,
    kp: i32,
    kl: i32,
    vp: i32,
    vl: i32,
) -> Result<i32, Error> {
    edit(
        c,
        "proxy_replace_header_map_value",
        kind,
        kp,
        kl,
        Some((vp, vl)),
        |h, k, v| {
            h.retain(|(name, _)| *name != k);
            h.push((k, v));
        },
    )
}

pub(super) fn remove_header_map_value(c: C, kind: i32, kp: i32, kl: i32) -> Result<i32, Error> {
    edit(
        c,
        "proxy_remove_header_map_value",
        kind,
        kp,
        kl,
        None,
        |h, k, _| h.retain(|(name, _)| *name != k),
    )
}

#[allow(clippy::too_many_arguments)]
pub(super) fn send_local_response(
    mut c: C,
    code: i32,
    dp: i32,
    dl: i32,
    bp: i32,
    bl: i32,
    hp: i32,
    hl: i32,
    grpc_status: i32,
) -> Result<i32, Error> {
    count(&mut c, "proxy_send_local_response");
    let details = text(arg!(&mut c, dp, dl));
    let body = arg!(&mut c, bp, bl);
    let Some(headers) = decode_pairs(&arg!(&mut c, hp, hl)) else {
        return Ok(status::BAD_ARGUMENT);
    };
    let reply = LocalReply {
        status: code as u32,
        details,
        body,
        headers,
        grpc_status,
    };
    match c.data_mut().acting_context() {
        Some(ctx) => ctx.local_reply = Some(reply),
        None => return Ok(status::BAD_ARGUMENT),
    }
    Ok(status::OK)
}

pub(super) fn continue_stream(mut c: C, stream: i32) -> Result<i32, Error> {
    count(&mut c, "proxy_continue_stream");
    if !(0..=3).contains(&stream) {
        return Ok(status::BAD_ARGUMENT);
    }
    match c.data_mut().acting_context() {
        Some(ctx) => ctx.continued = true,
        None => return Ok(status::BAD_ARGUMENT),
    }
    Ok(status::OK)
}

pub(super) fn set_effective_context(mut c: C, id: i32) -> Result<i32, Error> {
    count(&mut c, "proxy_set_effective_context");
    let host = c.data_mut();
    if !host.contexts.contains_key(&(id as u32)) {
        return Ok(status::BAD_ARGUMENT);
    }
    host.effective = id as u32;
    Ok(status::OK)
}

#[allow(clippy::too_many_arguments)]
pub(super) fn http_call(
    mut c: C,
    up: i32,
    ul: i32,
    hp: i32,
    hl: i32,
    bp: i32,
    bl: i32,
    tp: i32,
    tl: i32,
    timeout_ms: i32,
    token_ptr: i32,
) -> Result<i32, Error> {
    count(&mut c, "proxy_http_call");
    let cluster = text(arg!(&mut c, up, ul));
    let Some(headers) = decode_pairs(&arg!(&mut c, hp, hl)) else {
        return Ok(status::BAD_ARGUMENT);
    };
    let body = arg!(&mut c, bp, bl);
    let _trailers = arg!(&mut c, tp, tl);
    let host = c.data_mut();
    if !host.clusters.contains(&cluster) {
        return Ok(status::BAD_ARGUMENT);
    }
    let root = host.acting_context().map_or(0, |ctx| ctx.root);
    let token = host.token();
    host.calls.push_back(Call {
        token,
        root,
        cluster,
        headers,
        body,
        timeout_ms: timeout_ms as u32,
    });
    Ok(if poke(&mut c, token_ptr, &token.to_le_bytes())? {
        status::OK
    } else {
        status::INVALID_MEMORY_ACCESS
    })
}
