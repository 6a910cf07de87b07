//! `make run`'s walk-through does what it says: `scripts/run.sh` is started as a user
//! starts it, and every command line it prints is run in order, exactly as printed, as a
//! user pasting the whole text would run it. Each line's output is checked against what
//! the text promises (statuses, the lease counters, metrics that exist).
//!
//! The demo listens on fixed ports (the ones the text names), so this test refuses to
//! start while any of them is taken (for instance by a `make run` left running).

use floodgate_integration::paths::repo_root;
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Every port the demo binds: Envoy listeners and admins, floodgate-server, the upstream.
const PORTS: [u16; 7] = [10000, 10001, 9901, 9902, 8080, 8081, 10080];

/// How the walk-through ends.
const LAST_LINE: &str = "Ctrl-C stops everything.";

/// `scripts/run.sh` in a process group of its own, stopped (with everything it started)
/// when dropped: its own trap kills its children on SIGTERM.
struct Demo {
    child: Child,
}

impl Drop for Demo {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.child.wait();
    }
}

/// Starts the demo and returns it with the text it printed once everything was up.
fn start_demo() -> (Demo, Vec<String>) {
    use std::os::unix::process::CommandExt;
    for port in PORTS {
        assert!(
            TcpListener::bind(("127.0.0.1", port)).is_ok(),
            "port {port} is in use: is `make run` running? The demo needs it"
        );
    }
    let mut child = Command::new("bash")
        .arg("scripts/run.sh")
        .current_dir(repo_root())
        .stdout(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("scripts/run.sh starts");
    let stdout = child.stdout.take().expect("piped stdout");
    let demo = Demo { child };
    let (tx, rx) = mpsc::channel();
    // The demo upstream prints every request to the same stdout: keep reading it for as
    // long as the demo runs, or it would die of a broken pipe.
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    let mut text = Vec::new();
    loop {
        // run.sh waits up to 30 s for each of its three processes.
        let line = rx
            .recv_timeout(Duration::from_secs(120))
            .expect("scripts/run.sh printed its walk-through (see .run/*.log)");
        let last = line.trim().ends_with(LAST_LINE);
        text.push(line);
        if last {
            return (demo, text);
        }
    }
}

/// The command lines of the walk-through: indented by two spaces, as printed.
fn commands(text: &[String]) -> Vec<String> {
    text.iter()
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .map(|l| l.trim().to_string())
        .collect()
}

/// Runs one pasted line in bash from the repository root, as a user's shell would.
fn run(line: &str) -> String {
    let out = Command::new("bash")
        .args(["-c", line])
        .current_dir(repo_root())
        .output()
        .expect("bash runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The status codes a `-w '%{http_code}\n'` loop printed.
fn codes(output: &str) -> Vec<u16> {
    output
        .lines()
        .map(|l| l.trim().parse().expect("a status code per line"))
        .collect()
}

/// The status of a `curl -i` reply.
fn status(output: &str) -> u16 {
    output
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP reply: {output:?}"))
}

/// What one line of the walk-through must do.
enum Expect {
    /// A loop of requests: exactly these statuses, in order.
    Codes(&'static [(u16, usize)]),
    /// A loop against a bucket that refills `per_second`: the first `admitted` are 200,
    /// then 429s, except at most one more 200 per second elapsed since the loop began.
    Refilling {
        admitted: usize,
        total: usize,
        per_second: f64,
    },
    /// One `curl -i`: this status, and these header names (lowercase).
    Reply(u16, &'static [&'static str]),
    /// The output holds each of these lines (retried while counters flush).
    Lines(&'static [&'static str]),
    /// Some output, each line starting with this.
    Prefixed(&'static str),
}

fn expand(codes: &[(u16, usize)]) -> Vec<u16> {
    codes
        .iter()
        .flat_map(|&(code, n)| std::iter::repeat_n(code, n))
        .collect()
}

fn check(line: &str, expect: &Expect) {
    match expect {
        Expect::Codes(want) => assert_eq!(codes(&run(line)), expand(want), "{line}"),
        Expect::Refilling {
            admitted,
            total,
            per_second,
        } => {
            let began = Instant::now();
            let got = codes(&run(line));
            let slack = (began.elapsed().as_secs_f64() * per_second).ceil() as usize;
            assert_eq!(got.len(), *total, "{line}: {got:?}");
            assert!(
                got[..*admitted].iter().all(|&c| c == 200),
                "{line}: {got:?}"
            );
            let rest = &got[*admitted..];
            let late = rest.iter().filter(|&&c| c == 200).count();
            assert!(
                rest.iter().all(|&c| c == 200 || c == 429) && late <= slack,
                "{line}: {got:?} (at most {slack} refilled)"
            );
            assert!(rest.contains(&429), "{line}: never limited: {got:?}");
        }
        Expect::Reply(code, headers) => {
            let out = run(line);
            assert_eq!(status(&out), *code, "{line}:\n{out}");
            let lower = out.to_ascii_lowercase();
            for h in *headers {
                assert!(lower.contains(&format!("\n{h}:")), "{line}: no {h}:\n{out}");
            }
        }
        Expect::Lines(want) => {
            // The counters flush once a second; a loaded machine may need another look,
            // as a user would look again.
            let mut out = String::new();
            for _ in 0..10 {
                out = run(line);
                if want.iter().all(|w| out.lines().any(|l| l.trim() == *w)) {
                    return;
                }
            }
            panic!("{line}: wanted {want:?}, got:\n{out}");
        }
        Expect::Prefixed(prefix) => {
            let out = run(line);
            assert!(!out.trim().is_empty(), "{line}: no output");
            assert!(out.lines().all(|l| l.starts_with(prefix)), "{line}:\n{out}");
        }
    }
}

#[test]
fn the_printed_walk_through_does_what_it_says() {
    let (_demo, text) = start_demo();
    let lines = commands(&text);
    // In the order printed; each entry names a fragment of its line so that a change
    // to the text that this test does not know about fails here, not silently.
    let plan: [(&str, Expect); 10] = [
        (
            "seq 8",
            Expect::Refilling {
                admitted: 5,
                total: 8,
                per_second: 1.0,
            },
        ),
        (
            "acme' localhost:10000",
            Expect::Reply(429, &["retry-after", "x-ratelimit-limit"]),
        ),
        ("globex", Expect::Reply(200, &[])),
        ("seq 12", Expect::Codes(&[(200, 10), (429, 2)])),
        (
            "acme' localhost:10001",
            Expect::Reply(429, &["retry-after"]),
        ),
        ("x-cost: 10", Expect::Reply(200, &[])),
        ("seq 15", Expect::Codes(&[(200, 15)])),
        (
            "lease",
            Expect::Lines(&[
                "wasmcustom.floodgate.lease.allowed: 14",
                "wasmcustom.floodgate.lease.grants: 1",
            ]),
        ),
        ("9901/stats/prometheus", Expect::Prefixed("floodgate_")),
        ("9902/stats/prometheus", Expect::Prefixed("floodgate_")),
    ];
    let server_metrics = "8080/metrics";
    assert_eq!(
        lines.len(),
        plan.len() + 1,
        "the walk-through's command lines changed: {lines:#?}"
    );
    for (line, (fragment, expect)) in lines.iter().zip(&plan) {
        assert!(
            line.contains(fragment),
            "expected a line with {fragment:?}, got {line}"
        );
        check(line, expect);
    }
    let last = &lines[plan.len()];
    assert!(last.contains(server_metrics), "{last}");
    check(last, &Expect::Prefixed("floodgate_"));
}
