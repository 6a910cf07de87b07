//! The proxy-wasm 0.2.1 host functions, as Envoy answers them, each counted by name with
//! the bytes it moves.
//!
//! [`link`] defines every function the test host carries out, plus a trapping stand-in
//! for each other proxy-wasm function a module imports (the SDK imports gRPC, queue and
//! foreign-function calls it never makes for a no-op): calling one fails the run with its
//! name. An import outside the ABI fails the load, naming it.

use super::http;
use super::memory::{count, give, poke, read, text, C};
use super::{wasi, Host};
use crate::abi::status;
use wasmi::{Error, ExternType, Linker, Module};

/// The proxy-wasm functions the test host carries out (defined in [`link`]).
const CARRIED_OUT: &[&str] = &[
    "proxy_log",
    "proxy_get_log_level",
    "proxy_get_current_time_nanoseconds",
    "proxy_set_tick_period_milliseconds",
    "proxy_get_buffer_bytes",
    "proxy_get_header_map_value",
    "proxy_get_header_map_pairs",
    "proxy_add_header_map_value",
    "proxy_replace_header_map_value",
    "proxy_remove_header_map_value",
    "proxy_get_property",
    "proxy_set_property",
    "proxy_get_shared_data",
    "proxy_set_shared_data",
    "proxy_send_local_response",
    "proxy_continue_stream",
    "proxy_set_effective_context",
    "proxy_http_call",
    "proxy_define_metric",
    "proxy_increment_metric",
    "proxy_record_metric",
    "proxy_get_metric",
    "proxy_done",
];

/// Proxy-wasm functions a module may import that the test host does not carry out: each
/// links to a stand-in that fails the run if called.
const NOT_CARRIED_OUT: &[&str] = &[
    "proxy_close_stream",
    "proxy_set_buffer_bytes",
    "proxy_get_buffer_status",
    "proxy_get_header_map_size",
    "proxy_set_header_map_pairs",
    "proxy_grpc_call",
    "proxy_grpc_stream",
    "proxy_grpc_send",
    "proxy_grpc_cancel",
    "proxy_grpc_close",
    "proxy_register_shared_queue",
    "proxy_resolve_shared_queue",
    "proxy_enqueue_shared_queue",
    "proxy_dequeue_shared_queue",
    "proxy_call_foreign_function",
    "proxy_get_status",
    "proxy_get_configuration",
    "proxy_continue_request",
    "proxy_continue_response",
    "proxy_clear_route_cache",
];

/// Defines the host functions for `module`; an import the host does not know is an error
/// naming it.
pub fn link(linker: &mut Linker<Host>, module: &Module) -> Result<(), Error> {
    linker.func_wrap("env", "proxy_log", proxy_log)?;
    linker.func_wrap("env", "proxy_get_log_level", get_log_level)?;
    linker.func_wrap("env", "proxy_get_current_time_nanoseconds", get_time)?;
    linker.func_wrap("env", "proxy_set_tick_period_milliseconds", set_tick_period)?;
    linker.func_wrap("env", "proxy_get_buffer_bytes", http::get_buffer_bytes)?;
    linker.func_wrap(
        "env",
        "proxy_get_header_map_value",
        http::get_header_map_value,
    )?;
    linker.func_wrap(
        "env",
        "proxy_get_header_map_pairs",
        http::get_header_map_pairs,
    )?;
    linker.func_wrap(
        "env",
        "proxy_add_header_map_value",
        http::add_header_map_value,
    )?;
    linker.func_wrap(
        "env",
        "proxy_replace_header_map_value",
        http::replace_header_map_value,
    )?;
    linker.func_wrap(
        "env",
        "proxy_remove_header_map_value",
        http::remove_header_map_value,
    )?;
    linker.func_wrap("env", "proxy_get_property", get_property)?;
    linker.func_wrap("env", "proxy_set_property", set_property)?;
    linker.func_wrap("env", "proxy_get_shared_data", get_shared_data)?;
    linker.func_wrap("env", "proxy_set_shared_data", set_shared_data)?;
    linker.func_wrap(
        "env",
        "proxy_send_local_response",
        http::send_local_response,
    )?;
    linker.func_wrap("env", "proxy_continue_stream", http::continue_stream)?;
    linker.func_wrap(
        "env",
        "proxy_set_effective_context",
        http::set_effective_context,
    )?;
    linker.func_wrap("env", "proxy_http_call", http::http_call)?;
    linker.func_wrap("env", "proxy_define_metric", define_metric)?;
    linker.func_wrap("env", "proxy_increment_metric", increment_metric)?;
    linker.func_wrap("env", "proxy_record_metric", record_metric)?;
    linker.func_wrap("env", "proxy_get_metric", get_metric)?;
    linker.func_wrap("env", "proxy_done", done)?;
    wasi::link(linker)?;
    let mut unknown = Vec::new();
    for import in module.imports() {
        let (module_name, name) = (import.module(), import.name());
        let provided = match module_name {
            "env" => CARRIED_OUT.contains(&name),
            wasi::MODULE => wasi::PROVIDED.contains(&name),
            _ => false,
        };
        if provided {
            continue;
        }
        match import.ty() {
            ExternType::Func(ty) if module_name == "env" && NOT_CARRIED_OUT.contains(&name) => {
                let label = name.to_string();
                linker.func_new("env", name, ty.clone(), move |_, _, _| {
                    Err(Error::new(format!(
                        "the module called {label}, which the cost host does not carry out"
                    )))
                })?;
            }
            _ => unknown.push(format!("{module_name}.{name}")),
        }
    }
    if unknown.is_empty() {
        Ok(())
    } else {
        Err(Error::new(format!(
            "the module imports {}, which the cost host does not provide (not proxy-wasm ABI 0.2.1)",
            unknown.join(", ")
        )))
    }
}

fn proxy_log(mut c: C, level: i32, ptr: i32, len: i32) -> Result<i32, Error> {
    count(&mut c, "proxy_log");
    let message = text(arg!(&mut c, ptr, len));
    c.data_mut().logs.push((level, message));
    Ok(status::OK)
}

fn get_log_level(mut c: C, ptr: i32) -> Result<i32, Error> {
    count(&mut c, "proxy_get_log_level");
    // Envoy's default level, info.
    Ok(if poke(&mut c, ptr, &2u32.to_le_bytes())? {
        status::OK
    } else {
        status::INVALID_MEMORY_ACCESS
    })
}

fn get_time(mut c: C, ptr: i32) -> Result<i32, Error> {
    count(&mut c, "proxy_get_current_time_nanoseconds");
    let now = c.data().clock_ns;
    Ok(if poke(&mut c, ptr, &now.to_le_bytes())? {
        status::OK
    } else {
        status::INVALID_MEMORY_ACCESS
    })
}

fn set_tick_period(mut c: C, ms: i32) -> Result<i32, Error> {
    count(&mut c, "proxy_set_tick_period_milliseconds");
    let host = c.data_mut();
    let root = host.acting_context().map_or(0, |ctx| ctx.root);
    host.tick_periods.insert(root, ms as u32);
    Ok(status::OK)
}

fn get_property(mut c: C, pp: i32, pl: i32, ptr_ptr: i32, size_ptr: i32) -> Result<i32, Error> {
    count(&mut c, "proxy_get_property");
    let path = arg!(&mut c, pp, pl);
    let host = c.data_mut();
    let acting = host.acting();
    let is_http = host
        .contexts
        .get(&acting)
        .is_some_and(|ctx| ctx.root != acting);
    let value = match path.split(|&b| b == 0).collect::<Vec<_>>().as_slice() {
        [b"source", b"address"] if is_http => host.stream.source_address.clone().into_bytes(),
        _ => return Ok(status::NOT_FOUND),
    };
    give(&mut c, &value, ptr_ptr, size_ptr)
}

fn set_property(mut c: C, kp: i32, kl: i32, vp: i32, vl: i32) -> Result<i32, Error> {
    count(&mut c, "proxy_set_property");
    let _ = (arg!(&mut c, kp, kl), arg!(&mut c, vp, vl));
    Ok(status::OK)
}

fn get_shared_data(
    mut c: C,
    kp: i32,
    kl: i32,
    ptr_ptr: i32,
    size_ptr: i32,
    cas_ptr: i32,
) -> Result<i32, Error> {
    count(&mut c, "proxy_get_shared_data");
    let key = text(arg!(&mut c, kp, kl));
    let Some((value, cas)) = c.data().shared.get(&key).cloned() else {
        return Ok(status::NOT_FOUND);
    };
    let given = give(&mut c, &value, ptr_ptr, size_ptr)?;
    if given != status::OK || !poke(&mut c, cas_ptr, &cas.to_le_bytes())? {
        return Ok(status::INVALID_MEMORY_ACCESS);
    }
    Ok(status::OK)
}

fn set_shared_data(mut c: C, kp: i32, kl: i32, vp: i32, vl: i32, cas: i32) -> Result<i32, Error> {
    count(&mut c, "proxy_set_shared_data");
    let key = text(arg!(&mut c, kp, kl));
    let value = arg!(&mut c, vp, vl);
    Ok(c.data_mut().set_shared(key, value, cas as u32))
}

fn define_metric(mut c: C, kind: i32, np: i32, nl: i32, id_ptr: i32) -> Result<i32, Error> {
    count(&mut c, "proxy_define_metric");
    let name = text(arg!(&mut c, np, nl));
    let host = c.data_mut();
    // Envoy's ids: a sequence number above the type's two low bits.
    let id = ((host.metrics.len() as u32 + 1) << 2) | (kind as u32 & 3);
    host.metrics.insert(id, super::Metric { name, value: 0 });
    Ok(if poke(&mut c, id_ptr, &id.to_le_bytes())? {
        status::OK
    } else {
        status::INVALID_MEMORY_ACCESS
    })
}

fn increment_metric(mut c: C, id: i32, delta: i64) -> Result<i32, Error> {
    count(&mut c, "proxy_increment_metric");
    match c.data_mut().metrics.get_mut(&(id as u32)) {
        Some(metric) => metric.value += delta,
        None => return Ok(status::NOT_FOUND),
    }
    Ok(status::OK)
}

fn record_metric(mut c: C, id: i32, value: i64) -> Result<i32, Error> {
    count(&mut c, "proxy_record_metric");
    match c.data_mut().metrics.get_mut(&(id as u32)) {
        Some(metric) => metric.value = value,
        None => return Ok(status::NOT_FOUND),
    }
    Ok(status::OK)
}

fn get_metric(mut c: C, id: i32, ptr: i32) -> Result<i32, Error> {
    count(&mut c, "proxy_get_metric");
    let Some(value) = c.data().metrics.get(&(id as u32)).map(|m| m.value) else {
        return Ok(status::NOT_FOUND);
    };
    Ok(if poke(&mut c, ptr, &value.to_le_bytes())? {
        status::OK
    } else {
        status::INVALID_MEMORY_ACCESS
    })
}

fn done(mut c: C) -> Result<i32, Error> {
    count(&mut c, "proxy_done");
    Ok(status::OK)
}
