//! A rate limit service that answers every call OK, holds back its answer to calls that
//! take a hold (`x-floodgate-hold`) for a while, and notes when each hold was answered and
//! each release (`x-floodgate-release`) arrived: the order the filter's two calls reach a
//! service in, which the real server cannot show.

use crate::fake_rls::serve_rls;
use floodgate_server::proto::rls::rate_limit_response::{Code, DescriptorStatus};
use floodgate_server::proto::rls::rate_limit_service_server::RateLimitService;
use floodgate_server::proto::rls::{RateLimitRequest, RateLimitResponse};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// What the service saw of one id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The hold call was answered at this time.
    HoldAnswered(Instant),
    /// A release arrived at this time.
    Released(Instant),
}

/// The service; stops when dropped.
pub struct HoldingRls {
    addr: SocketAddr,
    events: Arc<Mutex<Vec<(String, Event)>>>,
    task: JoinHandle<()>,
}

struct Service {
    delay: Duration,
    events: Arc<Mutex<Vec<(String, Event)>>>,
}

#[tonic::async_trait]
impl RateLimitService for Service {
    async fn should_rate_limit(
        &self,
        request: tonic::Request<RateLimitRequest>,
    ) -> Result<tonic::Response<RateLimitResponse>, tonic::Status> {
        let header = |name: &str| {
            request
                .metadata()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let (hold, release) = (header("x-floodgate-hold"), header("x-floodgate-release"));
        if let Some(id) = release {
            let at = Event::Released(Instant::now());
            self.events.lock().expect("lock").push((id, at));
        }
        if let Some(id) = hold {
            tokio::time::sleep(self.delay).await;
            let at = Event::HoldAnswered(Instant::now());
            self.events.lock().expect("lock").push((id, at));
        }
        let descriptors = request.into_inner().descriptors.len();
        Ok(tonic::Response::new(RateLimitResponse {
            overall_code: Code::Ok as i32,
            statuses: (0..descriptors)
                .map(|_| DescriptorStatus {
                    code: Code::Ok as i32,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }))
    }
}

impl HoldingRls {
    /// Serves on a free loopback port, answering hold calls after `delay`.
    pub async fn start(delay: Duration) -> HoldingRls {
        let events = Arc::new(Mutex::new(Vec::new()));
        let (addr, task) = serve_rls(Service {
            delay,
            events: events.clone(),
        })
        .await;
        HoldingRls { addr, events, task }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Everything seen so far, by id, in order.
    pub fn events(&self) -> Vec<(String, Event)> {
        self.events.lock().expect("lock").clone()
    }
}

impl Drop for HoldingRls {
    fn drop(&mut self) {
        self.task.abort();
    }
}
