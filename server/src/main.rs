//! floodgate-server: placeholder until the global limiter lands.
fn main() {}
