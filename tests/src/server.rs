//! A real floodgate-server process for one test.

use crate::paths;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;
use tempfile::TempDir;

/// A running floodgate-server; killed when dropped. Its configuration and log live in a
/// temporary directory.
pub struct Server {
    child: Child,
    dir: TempDir,
    grpc: SocketAddr,
    http: SocketAddr,
}

impl Server {
    /// Starts the server with `config` (ratelimit YAML) and `extra` flags, on free ports,
    /// and waits for its ready line.
    pub fn start(config: &str, extra: &[&str]) -> Server {
        Server::start_pinned(config, extra, None)
    }

    /// Like [`Server::start`], pinned to the CPUs in `cpus` (a `taskset` list), for
    /// benchmarks.
    pub fn start_pinned(config: &str, extra: &[&str], cpus: Option<&str>) -> Server {
        Server::launch(Some(config), extra, cpus, &[])
    }

    /// Like [`Server::start`], with these environment variables set.
    pub fn start_env(config: &str, extra: &[&str], env: &[(&str, &str)]) -> Server {
        Server::launch(Some(config), extra, None, env)
    }

    /// Starts the server with no configuration file: only `extra` flags and `env`, for a
    /// server whose limits come from elsewhere (an xDS management server).
    pub fn start_without_file(extra: &[&str], env: &[(&str, &str)]) -> Server {
        Server::launch(None, extra, None, env)
    }

    fn launch(
        config: Option<&str>,
        extra: &[&str],
        cpus: Option<&str>,
        env: &[(&str, &str)],
    ) -> Server {
        let dir = tempfile::tempdir().expect("temp dir");
        if let Some(config) = config {
            std::fs::write(dir.path().join(CONFIG_FILE), config).expect("write config");
        }
        let pin: Vec<&str> = cpus.map(|c| vec!["taskset", "-c", c]).unwrap_or_default();
        let any = "127.0.0.1:0".parse().expect("address");
        let (child, grpc, http) = spawn(&dir, extra, any, &pin, env);
        Server {
            child,
            dir,
            grpc,
            http,
        }
    }

    /// Starts it again on the same gRPC address, with the same configuration: a limiter
    /// coming back after [`Server::stop`].
    pub fn restart(&mut self, extra: &[&str]) {
        self.stop();
        let (child, grpc, http) = spawn(&self.dir, extra, self.grpc, &[], &[]);
        (self.child, self.grpc, self.http) = (child, grpc, http);
    }

    /// The process id (e.g. to read its memory from /proc).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The HTTP address (`/metrics`, `/healthz`).
    pub fn http(&self) -> SocketAddr {
        self.http
    }

    /// The gRPC (RLS) address.
    pub fn grpc(&self) -> SocketAddr {
        self.grpc
    }

    /// Stops the process (SIGKILL), keeping its configuration for [`Server::restart`].
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The Prometheus exposition of `/metrics`.
    pub async fn metrics(&self) -> String {
        let url = format!("http://{}/metrics", self.http);
        match crate::client().get(url).send().await {
            Ok(r) => r.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    /// The value of one series, e.g. `floodgate_requests_total{result="ok"}` (0 if absent).
    pub async fn metric(&self, series: &str) -> f64 {
        self.metrics()
            .await
            .lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or(0.0)
    }

    /// The status of `GET /healthz` (`None` if it does not answer): 200 while the store
    /// answers, 503 while Redis is unreachable.
    pub async fn health(&self) -> Option<u16> {
        let url = format!("http://{}/healthz", self.http);
        let response = crate::client().get(url).send().await.ok()?;
        Some(response.status().as_u16())
    }

    /// `GET /healthz`: its status and body (the body says why it is not ready).
    pub async fn health_text(&self) -> (u16, String) {
        let url = format!("http://{}/healthz", self.http);
        let response = crate::client()
            .get(url)
            .send()
            .await
            .expect("/healthz answers");
        (
            response.status().as_u16(),
            response.text().await.unwrap_or_default(),
        )
    }

    /// Everything it logged.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The configuration file's name in a server's directory (absent: none is given).
const CONFIG_FILE: &str = "ratelimit.yaml";

/// Starts the process with the configuration in `dir` (if it has one) and waits for its
/// ready line;
/// returns it with its gRPC and HTTP addresses.
/// `pin` is a command prefix such as `taskset -c 1` (empty: none).
fn spawn(
    dir: &TempDir,
    extra: &[&str],
    grpc: SocketAddr,
    pin: &[&str],
    env: &[(&str, &str)],
) -> (Child, SocketAddr, SocketAddr) {
    let log = std::fs::File::create(dir.path().join("server.log")).expect("log file");
    let mut command = match pin.split_first() {
        Some((program, args)) => {
            let mut c = Command::new(program);
            c.args(args).arg(paths::server());
            c
        }
        None => Command::new(paths::server()),
    };
    let config = dir.path().join(CONFIG_FILE);
    if config.exists() {
        command.arg("--config").arg(config);
    }
    let mut child = command
        .arg("--grpc-addr")
        .arg(grpc.to_string())
        .args(["--http-addr", "127.0.0.1:0"])
        .args(extra)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .expect("spawn floodgate-server");
    let (grpc, http) = ready_addresses(&mut child, &dir.path().join("server.log"));
    (child, grpc, http)
}

/// Waits (up to 60 s) for a floodgate-server child's ready line on its piped stdout and
/// returns the gRPC and HTTP addresses it names; panics with the log at `log` if none
/// comes.
pub fn ready_addresses(child: &mut Child, log: &Path) -> (SocketAddr, SocketAddr) {
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(rest) = line.strip_prefix("floodgate-server ready ") {
                let _ = tx.send(rest.to_string());
            }
        }
    });
    let ready = rx
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| {
            let log = std::fs::read_to_string(log).unwrap_or_default();
            panic!("floodgate-server did not get ready:\n{log}")
        });
    let addr = |key: &str| -> SocketAddr {
        ready
            .split_whitespace()
            .find_map(|f| f.strip_prefix(key))
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no {key} in ready line {ready:?}"))
    };
    (addr("grpc="), addr("http="))
}
