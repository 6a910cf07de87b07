//! The RLS v3 types and tonic stubs generated from `proto/` at build time, nested by
//! protobuf package (the generated code refers to its siblings by relative path), with
//! short aliases. Public so end-to-end tests and tools build clients from the same types.

#![allow(missing_docs, clippy::all)]

/// Generated packages, mirroring the protobuf package names.
pub mod envoy {
    pub mod service {
        pub mod ratelimit {
            pub mod v3 {
                tonic::include_proto!("envoy.service.ratelimit.v3");
            }
        }
    }
    pub mod extensions {
        pub mod common {
            pub mod ratelimit {
                pub mod v3 {
                    tonic::include_proto!("envoy.extensions.common.ratelimit.v3");
                }
            }
        }
    }
    pub mod config {
        pub mod core {
            pub mod v3 {
                tonic::include_proto!("envoy.config.core.v3");
            }
        }
    }
}

/// `envoy.service.ratelimit.v3`: the service, request and response.
pub use envoy::service::ratelimit::v3 as rls;

pub use envoy::config::core::v3::HeaderValue;
pub use envoy::extensions::common::ratelimit::v3::{
    rate_limit_descriptor::Entry, RateLimitDescriptor,
};
