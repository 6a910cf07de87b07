//! Starts the real `floodgate-server` binary for end-to-end tests and talks to it.
//!
//! [`Server`] waits for the ready line (no sleeps), and kills the process when dropped.
//! Everything listens on 127.0.0.1 port 0, so tests run in parallel.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod certs;
pub mod redis;
pub mod sentinel;
pub mod sockets;

use floodgate_server::proto::rls::rate_limit_response::Code;
use floodgate_server::proto::rls::rate_limit_service_client::RateLimitServiceClient;
use floodgate_server::proto::rls::{RateLimitRequest, RateLimitResponse};
use floodgate_server::proto::{Entry, RateLimitDescriptor};
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::transport::Channel;

pub const BIN: &str = env!("CARGO_BIN_EXE_floodgate-server");

/// A command for the server with none of the reference service's variables (which the
/// server reads) inherited from the test's environment.
fn clean_command() -> Command {
    let mut command = Command::new(BIN);
    for setting in floodgate_server::cli::reference::SETTINGS {
        command.env_remove(setting.name);
    }
    command.env_remove("RUST_LOG");
    command
}

/// `yaml` written as `name` in a temporary directory (kept as long as the directory is):
/// a configuration file for [`Server::start`].
pub fn config_file(name: &str, yaml: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, yaml).unwrap();
    (dir, path)
}

/// A running server, killed on drop.
pub struct Server {
    child: Child,
    pub grpc: SocketAddr,
    pub http: SocketAddr,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Server {
    /// Starts the server on `config` with extra flags and waits for its ready line.
    pub fn start(config: &Path, extra: &[&str]) -> Server {
        Server::start_command(Command::new(BIN), config, extra)
    }

    /// As [`Server::start`], with these environment variables set (and nothing else of
    /// the test's environment that a variable of the reference service could name).
    pub fn start_env(config: &Path, extra: &[&str], env: &[(&str, &str)]) -> Server {
        let mut command = clean_command();
        command.envs(env.iter().copied());
        Server::start_command(command, config, extra)
    }

    /// Starts the server with no flag at all, configured only by these variables (the
    /// reference's: they must name the configuration and the addresses).
    pub fn start_reference(env: &[(&str, &str)]) -> Server {
        let mut command = clean_command();
        command.envs(env.iter().copied());
        Server::spawn(command)
    }

    /// As [`Server::start`], with the process's open-files limit (`ulimit -n`) set to
    /// `fds`: the shell sets it, then becomes the server.
    pub fn start_with_fd_limit(config: &Path, extra: &[&str], fds: u32) -> Server {
        let mut sh = Command::new("sh");
        sh.args(["-c", &format!("ulimit -n {fds} && exec \"$0\" \"$@\""), BIN]);
        Server::start_command(sh, config, extra)
    }

    fn start_command(mut command: Command, config: &Path, extra: &[&str]) -> Server {
        command
            .arg("--config")
            .arg(config)
            .args(["--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"])
            .args(extra);
        Server::spawn(command)
    }

    fn spawn(mut command: Command) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("server.log");
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(line) => line,
            Err(_) => {
                let _ = child.kill();
                panic!(
                    "no ready line; log:\n{}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
        };
        let (grpc, http) = parse_ready(&line).unwrap_or_else(|| {
            let _ = child.kill();
            panic!(
                "bad ready line {line:?}; log:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            )
        });
        Server {
            child,
            grpc,
            http,
            log,
            _dir: dir,
        }
    }

    /// A gRPC client connected to the server.
    pub async fn client(&self) -> RateLimitServiceClient<Channel> {
        RateLimitServiceClient::connect(format!("http://{}", self.grpc))
            .await
            .unwrap()
    }

    /// `GET path` on the HTTP side: status code and body.
    pub async fn get(&self, path: &str) -> (u16, String) {
        let raw = self.get_raw(path, "").await;
        let status = raw
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let body = raw
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_owned())
            .unwrap_or_default();
        (status, body)
    }

    /// The whole HTTP/1.1 answer (status line, headers, body) to `GET path` sent with the
    /// extra request `headers` (each line ending in `\r\n`).
    pub async fn get_raw(&self, path: &str, headers: &str) -> String {
        let mut s = tokio::net::TcpStream::connect(self.http).await.unwrap();
        let req =
            format!("GET {path} HTTP/1.1\r\nHost: test\r\n{headers}Connection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.unwrap();
        let mut raw = String::new();
        s.read_to_string(&mut raw).await.unwrap();
        raw
    }

    /// The value of one metric series, e.g. `floodgate_requests_total{result="ok"}`.
    pub async fn metric(&self, series: &str) -> Option<f64> {
        let (_, body) = self.get("/metrics").await;
        body.lines()
            .find_map(|l| l.strip_prefix(series).and_then(|v| v.trim().parse().ok()))
    }

    /// Waits (bounded, 20 s) until the metric `series` is at least `at_least`.
    pub async fn metric_reaches(&self, series: &str, at_least: f64) {
        let what = format!("{series} >= {at_least}");
        eventually(Duration::from_secs(20), &what, || async {
            self.metric(series).await.unwrap_or(0.0) >= at_least
        })
        .await;
    }

    /// Sends SIGTERM and waits (bounded) for the exit status.
    pub fn terminate(&mut self) -> ExitStatus {
        self.signal("TERM");
        self.wait_exit(Duration::from_secs(20))
            .expect("did not stop on SIGTERM")
    }

    /// Sends the signal `name` (`TERM`, `INT`) to the process.
    pub fn signal(&self, name: &str) {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill")
            .args([&format!("-{name}"), &pid])
            .status()
            .unwrap()
            .success());
    }

    /// Waits up to `within` for the process to exit; its status, or `None` if it runs on.
    pub fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The process's resident memory in bytes (Linux: `VmRSS` of `/proc/PID/status`).
    pub fn rss_bytes(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap();
        kb * 1024
    }

    /// The process's command line as `ps` shows it to every local user.
    pub fn argv(&self) -> String {
        std::fs::read(format!("/proc/{}/cmdline", self.child.id()))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default()
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        let mut s = String::new();
        let _ = std::fs::File::open(&self.log).and_then(|mut f| f.read_to_string(&mut s));
        s
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `floodgate-server ready grpc=ADDR http=ADDR` → the two addresses.
pub fn parse_ready(line: &str) -> Option<(SocketAddr, SocketAddr)> {
    let rest = line
        .trim_end()
        .strip_prefix("floodgate-server ready grpc=")?;
    let (grpc, http) = rest.split_once(" http=")?;
    Some((grpc.parse().ok()?, http.parse().ok()?))
}

/// A descriptor from `(key, value)` entries.
pub fn descriptor(entries: &[(&str, &str)]) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: entries
            .iter()
            .map(|(k, v)| Entry {
                key: (*k).into(),
                value: (*v).into(),
            })
            .collect(),
        limit: None,
        hits_addend: None,
    }
}

/// Sends `per_client` copies of `request` from each of `clients` at once (each client
/// one after the other), and counts the answers that admitted it.
pub async fn admitted(
    clients: Vec<RateLimitServiceClient<Channel>>,
    request: RateLimitRequest,
    per_client: usize,
) -> usize {
    let tasks: Vec<_> = clients
        .into_iter()
        .map(|mut client| {
            let request = request.clone();
            tokio::spawn(async move {
                let mut admitted = 0;
                for _ in 0..per_client {
                    let r = ask(&mut client, request.clone()).await.unwrap();
                    admitted += usize::from(r.overall_code == Code::Ok as i32);
                }
                admitted
            })
        })
        .collect();
    let mut admitted = 0;
    for t in tasks {
        admitted += t.await.unwrap();
    }
    admitted
}

/// What Envoy's native ratelimit filter sends: domain, descriptors, hits_addend 0.
pub fn envoy_request(domain: &str, descriptors: Vec<RateLimitDescriptor>) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.into(),
        descriptors,
        hits_addend: 0,
    }
}

/// Calls ShouldRateLimit.
pub async fn ask(
    client: &mut RateLimitServiceClient<Channel>,
    req: RateLimitRequest,
) -> Result<RateLimitResponse, tonic::Status> {
    client.should_rate_limit(req).await.map(|r| r.into_inner())
}

/// Polls `check` until it returns true, failing after `within`.
pub async fn eventually<F, Fut>(within: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}
