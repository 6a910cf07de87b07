//! A real Redis Sentinel deployment for tests: a master, one replica, and three sentinels
//! (quorum 2) watching them, each `redis-server` on free loopback ports, killed on drop.
//!
//! Ready means: the replica's link is up and every sentinel knows the replica and the two
//! other sentinels, so that a failover can happen. Polled, never slept on.

use super::redis::RedisServer;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The name the sentinels monitor the master under.
pub const MASTER_NAME: &str = "floodgate-test";

/// How long a master may be silent before a sentinel thinks it down.
pub const DOWN_AFTER_MS: u64 = 1_000;

/// One `redis-server --sentinel`.
struct SentinelProcess {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

/// A master, its replica and three sentinels.
pub struct Sentinels {
    /// The first master (killed by failover tests).
    pub master: RedisServer,
    /// Its replica, promoted by the failover.
    pub replica: RedisServer,
    sentinels: Vec<SentinelProcess>,
}

impl Sentinels {
    /// Starts everything and waits until a failover could happen.
    pub fn start() -> Sentinels {
        let master = RedisServer::start();
        let replica =
            RedisServer::start_with(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
        let sentinels = (0..3).map(|_| spawn_sentinel(master.port)).collect();
        let set = Sentinels {
            master,
            replica,
            sentinels,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let link_up = info(&set.replica, "replication").contains("master_link_status:up");
            let known = set.sentinels.iter().all(|s| {
                let m = sentinel_master(s.port);
                m.get("num-slaves").map(String::as_str) == Some("1")
                    && m.get("num-other-sentinels").map(String::as_str) == Some("2")
            });
            if link_up && known {
                return set;
            }
            assert!(
                Instant::now() < deadline,
                "the sentinels never saw each other"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The sentinels' URLs, as `--redis-sentinel` takes them.
    pub fn urls(&self) -> Vec<String> {
        self.sentinels
            .iter()
            .map(|s| format!("redis://127.0.0.1:{}", s.port))
            .collect()
    }

    /// The master's port as the first sentinel that answers reports it.
    pub fn master_port(&self) -> Option<u16> {
        self.sentinels.iter().find_map(|s| {
            let mut c = redis::Client::open(format!("redis://127.0.0.1:{}", s.port))
                .ok()?
                .get_connection_with_timeout(Duration::from_secs(1))
                .ok()?;
            let addr: Option<(String, u16)> = redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(MASTER_NAME)
                .query(&mut c)
                .ok()?;
            addr.map(|(_, port)| port)
        })
    }
}

impl Drop for Sentinels {
    fn drop(&mut self) {
        for s in &mut self.sentinels {
            let _ = s.child.kill();
            let _ = s.child.wait();
        }
    }
}

/// `INFO section` of `server`.
pub fn info(server: &RedisServer, section: &str) -> String {
    redis::cmd("INFO")
        .arg(section)
        .query(&mut server.conn())
        .unwrap_or_default()
}

fn sentinel_master(port: u16) -> std::collections::HashMap<String, String> {
    let Ok(client) = redis::Client::open(format!("redis://127.0.0.1:{port}")) else {
        return Default::default();
    };
    let Ok(mut c) = client.get_connection_with_timeout(Duration::from_secs(1)) else {
        return Default::default();
    };
    redis::cmd("SENTINEL")
        .arg("MASTER")
        .arg(MASTER_NAME)
        .query(&mut c)
        .unwrap_or_default()
}

fn spawn_sentinel(master_port: u16) -> SentinelProcess {
    let dir = tempfile::tempdir().unwrap();
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let conf = dir.path().join("sentinel.conf");
    std::fs::write(
        &conf,
        format!(
            "port {port}\nbind 127.0.0.1\ndir {dir}\n\
             sentinel monitor {MASTER_NAME} 127.0.0.1 {master_port} 2\n\
             sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}\n\
             sentinel failover-timeout {MASTER_NAME} 10000\n\
             sentinel parallel-syncs {MASTER_NAME} 1\n",
            dir = dir.path().display()
        ),
    )
    .unwrap();
    let child = Command::new("redis-server")
        .arg(&conf)
        .arg("--sentinel")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run redis-server --sentinel ({e}); `make redis`"));
    SentinelProcess {
        child,
        port,
        _dir: dir,
    }
}
