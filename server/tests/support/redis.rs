//! Real `redis-server` processes for tests: a single server or a small Cluster, each on
//! free loopback ports, with persistence off, killed when dropped.
//!
//! Readiness is a `PING` (or `cluster_state:ok`) poll, never a fixed sleep. A missing
//! `redis-server` fails the test with a pointer to `make redis`: nothing is skipped.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One `redis-server` on 127.0.0.1.
pub struct RedisServer {
    child: Option<Child>,
    pub port: u16,
    dir: tempfile::TempDir,
    extra: Vec<String>,
    /// `redis-cli` arguments that reach it over TLS (empty: plaintext).
    tls_cli: Vec<String>,
}

impl RedisServer {
    /// Starts a server on a free port and waits until it answers `PING`.
    pub fn start() -> RedisServer {
        Self::start_with(&[])
    }

    /// Same, with extra `redis-server` arguments.
    pub fn start_with(extra: &[&str]) -> RedisServer {
        let extra: Vec<String> = extra.iter().map(|s| (*s).to_owned()).collect();
        for _ in 0..5 {
            let dir = tempfile::tempdir().unwrap();
            let port = free_port(false);
            let mut server = RedisServer {
                child: Some(spawn(port, dir.path(), &extra)),
                port,
                dir,
                extra: extra.clone(),
                tls_cli: Vec::new(),
            };
            if server.wait_ready(Duration::from_secs(10)) {
                return server;
            }
            // Lost the port between probing and binding: dropped (killed), try another.
        }
        panic!("could not start redis-server on a free port");
    }

    /// A server that speaks only TLS (`--port 0 --tls-port`), with `cert`/`key` as its
    /// certificate, clients checked against `ca` when `auth_clients` (`tls-auth-clients`).
    /// Ready once `redis-cli --tls` gets `PONG` with `client` (a leaf the CA signed).
    pub fn start_tls(
        ca: &Path,
        server: (&Path, &Path),
        client: (&Path, &Path),
        auth_clients: bool,
        extra: &[&str],
    ) -> RedisServer {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port(false);
        let mut args: Vec<String> = ["--tls-port", &port.to_string(), "--port", "0"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        for (flag, path) in [
            ("--tls-cert-file", server.0),
            ("--tls-key-file", server.1),
            ("--tls-ca-cert-file", ca),
        ] {
            args.push(flag.to_owned());
            args.push(path.display().to_string());
        }
        args.push("--tls-auth-clients".to_owned());
        args.push(if auth_clients { "yes" } else { "no" }.to_owned());
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        let mut s = RedisServer {
            child: Some(spawn_args(dir.path(), &args)),
            port,
            dir,
            extra: args,
            tls_cli: ["--tls", "--cacert"]
                .iter()
                .map(|s| (*s).to_owned())
                .chain([
                    ca.display().to_string(),
                    "--cert".into(),
                    client.0.display().to_string(),
                    "--key".into(),
                    client.1.display().to_string(),
                ])
                .collect(),
        };
        assert!(
            s.wait_ready(Duration::from_secs(10)),
            "TLS redis-server on {port}"
        );
        s
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// A plain synchronous connection, for inspecting keys.
    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .unwrap()
            .get_connection()
            .unwrap()
    }

    /// Sends `signal` (`STOP` freezes it, `CONT` thaws it) to the server.
    pub fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("running").id().to_string();
        let ok = Command::new("kill")
            .args([&format!("-{signal}"), &pid])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{signal} {pid}");
    }

    /// Kills the server (SIGKILL: no goodbye to clients) and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again on the same port (empty: persistence is off) and waits for `PING`.
    pub fn restart(&mut self) {
        self.kill();
        self.child = Some(if self.tls_cli.is_empty() {
            spawn(self.port, self.dir.path(), &self.extra)
        } else {
            spawn_args(self.dir.path(), &self.extra)
        });
        assert!(
            self.wait_ready(Duration::from_secs(10)),
            "redis-server did not come back on port {}",
            self.port
        );
    }

    fn wait_ready(&mut self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Some(Ok(Some(_))) = self.child.as_mut().map(Child::try_wait) {
                return false; // exited: the port was taken
            }
            if self.answers() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }
}

impl RedisServer {
    /// Whether it answers `PING` (over TLS with `redis-cli` when it speaks TLS).
    pub fn answers(&self) -> bool {
        if self.tls_cli.is_empty() {
            return ping(self.port);
        }
        Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(&self.tls_cli)
            .arg("PING")
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .is_ok_and(|o| o.stdout.starts_with(b"PONG"))
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

fn spawn(port: u16, dir: &Path, extra: &[String]) -> Child {
    let mut args = vec!["--port".to_owned(), port.to_string()];
    args.extend_from_slice(extra);
    spawn_args(dir, &args)
}

fn spawn_args(dir: &Path, args: &[String]) -> Child {
    Command::new("redis-server")
        .args(["--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(dir)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run redis-server ({e}); `make redis` installs it"))
}

/// Whether a Redis on `port` answers `PING`: `+PONG`, or `-NOAUTH` from one started with
/// `--requirepass` (it is up; it wants a password).
pub fn ping(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    let mut buf = [0u8; 7];
    s.write_all(b"PING\r\n").is_ok()
        && s.read_exact(&mut buf).is_ok()
        && (&buf == b"+PONG\r\n" || &buf == b"-NOAUTH")
}

/// A port free now; with `bus`, port + 10000 (Redis Cluster's bus) is free too.
fn free_port(bus: bool) -> u16 {
    loop {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        if !bus {
            return port;
        }
        if port < 55_000 && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
}

/// A Redis Cluster of three masters (no replicas), every slot covered.
pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts three cluster-enabled servers, joins them with `redis-cli --cluster create`
    /// and waits until every node reports `cluster_state:ok`.
    pub fn start() -> RedisCluster {
        let nodes: Vec<RedisServer> = (0..3)
            .map(|_| {
                let dir = tempfile::tempdir().unwrap();
                let port = free_port(true);
                let extra = vec![
                    "--cluster-enabled".to_owned(),
                    "yes".to_owned(),
                    "--cluster-config-file".to_owned(),
                    dir.path().join("nodes.conf").display().to_string(),
                    "--cluster-node-timeout".to_owned(),
                    "2000".to_owned(),
                ];
                let mut s = RedisServer {
                    child: Some(spawn(port, dir.path(), &extra)),
                    port,
                    dir,
                    extra,
                    tls_cli: Vec::new(),
                };
                assert!(
                    s.wait_ready(Duration::from_secs(10)),
                    "cluster node on {port}"
                );
                s
            })
            .collect();
        let out = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)))
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli (from `make redis`)");
        assert!(
            out.status.success(),
            "redis-cli --cluster create: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        for n in &nodes {
            loop {
                let info: String = redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query(&mut n.conn())
                    .unwrap();
                if info.contains("cluster_state:ok") {
                    break;
                }
                assert!(Instant::now() < deadline, "cluster never became ok: {info}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        RedisCluster { nodes }
    }

    /// The seed URLs, as `--redis-cluster` takes them.
    pub fn seeds(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }
}
