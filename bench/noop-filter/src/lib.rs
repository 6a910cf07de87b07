//! The floor of any wasm filter, for `make bench`: read one request header, do nothing
//! with it. Whatever floodgate costs above this is floodgate's own work.

#[cfg(target_arch = "wasm32")]
mod filter {
    use proxy_wasm::traits::{Context, HttpContext, RootContext};
    use proxy_wasm::types::{Action, ContextType, LogLevel};

    proxy_wasm::main! {{
        proxy_wasm::set_log_level(LogLevel::Warn);
        proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(Root) });
    }}

    struct Root;

    impl Context for Root {}

    impl RootContext for Root {
        fn create_http_context(&self, _: u32) -> Option<Box<dyn HttpContext>> {
            Some(Box::new(Noop))
        }

        fn get_type(&self) -> Option<ContextType> {
            Some(ContextType::HttpContext)
        }
    }

    struct Noop;

    impl Context for Noop {}

    impl HttpContext for Noop {
        fn on_http_request_headers(&mut self, _: usize, _: bool) -> Action {
            // The SDK helper panics only on statuses Envoy never returns for this call;
            // acceptable in a bench-only module.
            let _ = proxy_wasm::hostcalls::get_map_value(
                proxy_wasm::types::MapType::HttpRequestHeaders,
                "x-tenant-id",
            );
            Action::Continue
        }
    }
}
