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

/// A `RateLimitResponse` read for its overall code alone (every other field skipped):
/// whether a call took a hold. Its own type, so that the full response's decoding keeps
/// its one caller (and stays inlined there) on every global path.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct OverallCode {
    /// `RateLimitResponse.overall_code`.
    #[prost(int32, tag = "1")]
    pub overall_code: i32,
}

/// A message the filter does not read (the response's `dynamic_metadata`): decoding it
/// skips its fields.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct Skipped {}
