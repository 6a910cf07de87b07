//! The RLS v3 types and tonic stubs generated from `proto/` at build time, nested by
//! protobuf package (the generated code refers to its siblings by relative path), with
//! short aliases. Public so end-to-end tests and tools build clients from the same types.

#![allow(missing_docs, clippy::all)]

/// Generated packages, mirroring the protobuf package names.
pub mod envoy {
    pub mod service {
        pub mod discovery {
            pub mod v3 {
                tonic::include_proto!("envoy.service.discovery.v3");
            }
        }
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

/// `google.rpc`: the error detail of an xDS NACK.
pub mod google {
    pub mod rpc {
        tonic::include_proto!("google.rpc");
    }
}

/// `ratelimit.config.ratelimit.v3`: the reference's configuration as xDS carries it.
pub mod ratelimit {
    pub mod config {
        pub mod ratelimit {
            pub mod v3 {
                tonic::include_proto!("ratelimit.config.ratelimit.v3");
            }
        }
    }
}

/// `envoy.service.discovery.v3`: ADS, state of the world.
pub use envoy::service::discovery::v3 as discovery;
/// The reference's `RateLimitConfig` and its parts.
pub use ratelimit::config::ratelimit::v3 as rls_conf;

/// `envoy.service.ratelimit.v3`: the service, request and response.
pub use envoy::service::ratelimit::v3 as rls;

pub use envoy::config::core::v3::HeaderValue;
pub use envoy::extensions::common::ratelimit::v3::{
    rate_limit_descriptor::Entry, RateLimitDescriptor,
};
