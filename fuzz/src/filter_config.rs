//! The filter's plugin configuration: any bytes as the JSON Envoy hands `on_configure`.

use floodgate::config::Config;
use floodgate::limiter::Limiter;
use floodgate::shared::placement::PlacementKey;

/// Parses `data` as a plugin configuration. A valid one must also build a limiter (what
/// `on_configure` does next); an invalid one must say what is wrong.
pub fn run(data: &[u8]) {
    match Config::parse(data) {
        Ok(config) => {
            assert!(
                (1..=64).contains(&config.rules.len()),
                "accepted {} rules",
                config.rules.len()
            );
            let limiter = Limiter::new(config, PlacementKey::from_bytes([0x5a; 16]));
            assert!(!limiter.config().rules.is_empty());
        }
        Err(e) => assert!(!e.message.is_empty(), "an error without a message: {e:?}"),
    }
}
