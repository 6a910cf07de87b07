//! The accept loop both ports share: admit under the port's caps or close at once, and
//! back off on errors instead of spinning.

use super::admit::{Admission, Ticket};
use super::metrics::{Closed, ConnectionMetrics, Port};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};

/// The first pause after an accept error.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(5);

/// The longest pause between accept attempts while they keep failing.
pub const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// The pause after `current` failed attempts' pause: doubled, at most [`MAX_BACKOFF`].
pub fn next_backoff(current: Option<Duration>) -> Duration {
    current.map_or(FIRST_BACKOFF, |d| (d * 2).min(MAX_BACKOFF))
}

/// One port's listener, its caps and its metrics.
#[derive(Debug)]
pub struct Acceptor {
    listener: TcpListener,
    port: Port,
    admission: Arc<Admission>,
    metrics: Arc<ConnectionMetrics>,
    backoff: Option<Duration>,
}

impl Acceptor {
    /// Accepts on `listener` for `port`, under `admission`, counting in `metrics`.
    pub fn new(
        listener: TcpListener,
        port: Port,
        admission: Arc<Admission>,
        metrics: Arc<ConnectionMetrics>,
    ) -> Acceptor {
        Acceptor {
            listener,
            port,
            admission,
            metrics,
            backoff: None,
        }
    }

    /// The next admitted connection and its ticket. A connection over a cap is accepted
    /// and closed at once (its client learns at once instead of hanging in the kernel's
    /// backlog), and counted. An `accept` error (EMFILE, ENFILE, ENOBUFS...) is counted,
    /// logged once per episode and followed by a pause, [`FIRST_BACKOFF`] doubling up to
    /// [`MAX_BACKOFF`], reset by the next success: the loop never spins a core.
    pub async fn next(&mut self) -> (TcpStream, Ticket) {
        loop {
            match self.listener.accept().await {
                Ok((stream, peer)) => {
                    self.backoff = None;
                    match self.admission.admit(peer.ip()) {
                        Ok(ticket) => {
                            let _ = stream.set_nodelay(true);
                            return (stream, ticket);
                        }
                        Err(refused) => {
                            self.metrics.closed(Closed::from(refused));
                            drop(stream);
                        }
                    }
                }
                Err(e) => {
                    self.metrics.accept_failed();
                    if self.backoff.is_none() {
                        tracing::warn!(
                            error = %e,
                            "cannot accept {} connections; backing off",
                            self.port.name()
                        );
                    }
                    let pause = next_backoff(self.backoff);
                    self.backoff = Some(pause);
                    tokio::time::sleep(pause).await;
                }
            }
        }
    }

    /// The metrics connections accepted here count in.
    pub fn metrics(&self) -> &Arc<ConnectionMetrics> {
        &self.metrics
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_up_to_its_cap() {
        let mut d = None;
        let mut seen = Vec::new();
        for _ in 0..10 {
            let next = next_backoff(d);
            seen.push(next.as_millis());
            d = Some(next);
        }
        assert_eq!(seen, [5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
    }
}
