//! A real Envoy process for one test.

use crate::paths;
use crate::wait;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;
use tempfile::TempDir;

/// How long Envoy may take to start (V8 compiles the module once per VM).
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A running Envoy; killed when dropped. Its log is kept in a temporary directory.
pub struct Envoy {
    child: Child,
    dir: TempDir,
    admin: SocketAddr,
    listeners: HashMap<String, SocketAddr>,
    http: reqwest::Client,
}

impl Envoy {
    /// Starts Envoy with `yaml` (listeners and admin on port 0) and `concurrency` worker
    /// threads, and waits until it is ready and every listener has its port.
    pub async fn start(yaml: &str, concurrency: u32) -> Envoy {
        Envoy::start_pinned(yaml, concurrency, None).await
    }

    /// Like [`Envoy::start`], with every thread pinned to the CPUs in `cpus` (a
    /// `taskset` list such as `"0"`), for benchmarks.
    pub async fn start_pinned(yaml: &str, concurrency: u32, cpus: Option<&str>) -> Envoy {
        let mut envoy = Envoy::spawn(yaml, concurrency, cpus);
        let admin_file = envoy.dir.path().join("admin.txt");
        envoy.admin = wait::until("envoy admin address", START_TIMEOUT, || {
            let exited = envoy.exited();
            let text = std::fs::read_to_string(&admin_file).ok();
            async move {
                if let Some(status) = exited {
                    return Some(Err(status));
                }
                text.and_then(|t| t.trim().parse().ok()).map(Ok)
            }
        })
        .await
        .unwrap_or_else(|status| panic!("envoy exited ({status}):\n{}", envoy.log()));
        // Polled by hand rather than with `wait::until`: an Envoy that exits while
        // starting (a refused listener, say) fails the test at once, with its log.
        let deadline = std::time::Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = envoy.exited() {
                panic!("envoy exited ({status}):\n{}", envoy.log());
            }
            if let Some(listeners) = envoy.probe_ready().await {
                envoy.listeners = listeners;
                return envoy;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "timed out after {START_TIMEOUT:?} waiting for envoy ready:\n{}",
                envoy.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Runs Envoy with `yaml`, expecting it to refuse the configuration: returns its exit
    /// status and log. Panics if it is still running after the start timeout.
    pub async fn refuse(yaml: &str) -> (ExitStatus, String) {
        let mut envoy = Envoy::spawn(yaml, 1, None);
        let status = wait::until("envoy to exit", START_TIMEOUT, || {
            let exited = envoy.exited();
            async move { exited }
        })
        .await;
        (status, envoy.log())
    }

    /// Starts the process; the admin address and listeners are filled in by `start`.
    fn spawn(yaml: &str, concurrency: u32, cpus: Option<&str>) -> Envoy {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = dir.path().join("envoy.yaml");
        std::fs::write(&config, yaml).expect("write config");
        let log = std::fs::File::create(dir.path().join("envoy.log")).expect("log file");
        let mut command = match cpus {
            Some(cpus) => {
                let mut c = Command::new("taskset");
                c.args(["-c", cpus]).arg(paths::envoy());
                c
            }
            None => Command::new(paths::envoy()),
        };
        let child = command
            .current_dir(paths::repo_root())
            .arg("-c")
            .arg(&config)
            .arg("--concurrency")
            .arg(concurrency.to_string())
            .arg("--disable-hot-restart")
            .arg("--admin-address-path")
            .arg(dir.path().join("admin.txt"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn envoy");
        Envoy {
            child,
            admin: "127.0.0.1:0".parse().expect("address"),
            listeners: HashMap::new(),
            http: crate::client(),
            dir,
        }
    }

    /// Runs `envoy --mode validate` on a file (relative paths from the repository root).
    pub fn validate(config: &Path) -> Result<(), String> {
        let out = Command::new(paths::envoy())
            .current_dir(paths::repo_root())
            .args(["--mode", "validate", "--disable-hot-restart", "-c"])
            .arg(config)
            .output()
            .expect("run envoy --mode validate");
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// `Some(listeners)` once the server is live and every listener is bound.
    async fn probe_ready(&self) -> Option<HashMap<String, SocketAddr>> {
        let ready = self.admin_get("/ready").await?;
        if ready.trim() != "LIVE" {
            return None;
        }
        let json: serde_json::Value =
            serde_json::from_str(&self.admin_get("/listeners?format=json").await?).ok()?;
        let mut listeners = HashMap::new();
        for status in json["listener_statuses"].as_array()? {
            let name = status["name"].as_str()?.to_string();
            let socket = &status["local_address"]["socket_address"];
            let port = socket["port_value"].as_u64()?;
            if port == 0 {
                return None;
            }
            let addr = format!("{}:{port}", socket["address"].as_str()?)
                .parse()
                .ok()?;
            listeners.insert(name, addr);
        }
        Some(listeners)
    }

    /// Finds the listeners' addresses again, e.g. after a listener update (see
    /// [`crate::lds`]); `false` while a listener has no port yet.
    pub(crate) async fn refresh_listeners(&mut self) -> bool {
        match self.probe_ready().await {
            Some(listeners) => {
                self.listeners = listeners;
                true
            }
            None => false,
        }
    }

    /// The body of an admin `GET path`, `None` if the admin does not answer.
    pub async fn admin_get(&self, path: &str) -> Option<String> {
        let url = format!("http://{}{path}", self.admin);
        let response = self.http.get(url).send().await.ok()?;
        response.text().await.ok()
    }

    /// The address of listener `name`.
    pub fn listener(&self, name: &str) -> SocketAddr {
        *self
            .listeners
            .get(name)
            .unwrap_or_else(|| panic!("no listener {name}: {:?}", self.listeners))
    }

    /// `http://<listener>/<path>`.
    pub fn url(&self, listener: &str, path: &str) -> String {
        format!("http://{}{path}", self.listener(listener))
    }

    /// Every stat as name → value (counters and gauges; histograms are skipped).
    pub async fn stats(&self) -> HashMap<String, u64> {
        let text = self.admin_get("/stats").await.unwrap_or_default();
        text.lines()
            .filter_map(|line| {
                let (name, value) = line.split_once(": ")?;
                Some((name.to_string(), value.trim().parse().ok()?))
            })
            .collect()
    }

    /// One stat, if Envoy has it.
    pub async fn stat(&self, name: &str) -> Option<u64> {
        self.stats().await.get(name).copied()
    }

    /// Waits until stat `name` equals `expected` (the filter flushes once a second) and
    /// panics with the last value seen otherwise.
    pub async fn expect_stat(&self, name: &str, expected: u64) {
        let mut last = None;
        let found = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                last = self.stat(name).await;
                if last == Some(expected) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
        assert!(
            found.is_ok(),
            "stat {name}: expected {expected}, last saw {last:?}"
        );
    }

    /// The Prometheus exposition, as an operator's scraper sees it.
    pub async fn prometheus(&self) -> String {
        self.admin_get("/stats/prometheus")
            .await
            .unwrap_or_default()
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// CPU time (user + system, in clock ticks) of the thread named `name`, e.g.
    /// `wrk:worker_0`, from /proc.
    pub fn thread_cpu_ticks(&self, name: &str) -> Option<u64> {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", self.pid())).ok()?;
        for task in tasks.flatten() {
            let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
            if comm.trim() != name {
                continue;
            }
            let stat = std::fs::read_to_string(task.path().join("stat")).ok()?;
            // Fields after the parenthesised command name: utime and stime are the
            // 12th and 13th of them.
            let rest = &stat[stat.rfind(')')? + 2..];
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let utime: u64 = fields.get(11)?.parse().ok()?;
            let stime: u64 = fields.get(12)?.parse().ok()?;
            return Some(utime + stime);
        }
        None
    }

    /// Resident memory in KiB, from /proc.
    pub fn rss_kib(&self) -> u64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }

    /// Everything Envoy logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("envoy.log")).unwrap_or_default()
    }
}

impl Drop for Envoy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
