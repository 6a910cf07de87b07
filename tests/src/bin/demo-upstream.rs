//! The demo upstream `make run` puts behind Envoy: answers 200 `ok` and prints every
//! request that reaches it, so you can watch rejected requests not arrive.

use floodgate_integration::Upstream;
use std::net::SocketAddr;

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let addr: SocketAddr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:10080".to_string())
        .parse()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let upstream = Upstream::start_on(addr, true).await?;
    println!("demo upstream listening on {}", upstream.addr());
    tokio::signal::ctrl_c().await?;
    Ok(())
}
