//! Rust types for our RLS v3 subset (`proto/`), generated at build time into `OUT_DIR`.
//! Module nesting mirrors the protobuf packages, as the generated code expects.

#![allow(missing_docs, clippy::all)]

/// `envoy.*` packages.
pub mod envoy {
    /// `envoy.service.*`
    pub mod service {
        /// `envoy.service.ratelimit.*`
        pub mod ratelimit {
            /// `envoy.service.ratelimit.v3`: the request and response of `ShouldRateLimit`.
            pub mod v3 {
                include!(concat!(env!("OUT_DIR"), "/envoy.service.ratelimit.v3.rs"));
            }
        }
    }
    /// `envoy.extensions.*`
    pub mod extensions {
        /// `envoy.extensions.common.*`
        pub mod common {
            /// `envoy.extensions.common.ratelimit.*`
            pub mod ratelimit {
                /// `envoy.extensions.common.ratelimit.v3`: descriptors.
                pub mod v3 {
                    include!(concat!(
                        env!("OUT_DIR"),
                        "/envoy.extensions.common.ratelimit.v3.rs"
                    ));
                }
            }
        }
    }
    /// `envoy.config.*`
    pub mod config {
        /// `envoy.config.core.*`
        pub mod core {
            /// `envoy.config.core.v3`: header values.
            pub mod v3 {
                include!(concat!(env!("OUT_DIR"), "/envoy.config.core.v3.rs"));
            }
        }
    }
}

/// A message the filter does not read (the response's `dynamic_metadata`): decoding it
/// skips its fields.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct Skipped {}
