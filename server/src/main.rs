//! floodgate-server's entry point: parse flags, set up logging, run. See the library docs.

use floodgate_server::cli::reference;
use floodgate_server::cli::Args;
use floodgate_server::{config, server};
use std::process::ExitCode;

/// The static (musl) build's allocator: musl's own made a decision cost about twice the
/// CPU of the glibc build. Other builds use the system allocator.
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let started = reference::logging(&|name| std::env::var(name).ok())
        .and_then(|logging| Ok((logging, Args::from_command_line()?)));
    let (logging, (args, notes)) = match started {
        Ok(s) => s,
        Err(e) => {
            eprintln!("floodgate-server: {e}");
            return ExitCode::from(2);
        }
    };
    // One TLS crypto provider for the process (ring; never OpenSSL), for the Redis
    // client's connections as for the gRPC port's.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let filter = tracing_subscriber::EnvFilter::try_new(&logging.filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter);
    if logging.json {
        logs.json().init();
    } else {
        logs.with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init();
    }
    for note in notes {
        tracing::info!("{note}");
    }
    if args.check {
        return match config::load_with(&args.config, &args.load_options()) {
            Ok(c) => {
                println!(
                    "{}: OK ({} domain(s))",
                    args.config.display(),
                    c.domain_names().count()
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{e}");
                ExitCode::from(1)
            }
        };
    }
    let runtime = match runtime(args.worker_threads) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("floodgate-server: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(server::run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("floodgate-server: {e}");
            ExitCode::from(1)
        }
    }
}

/// The runtime `--worker-threads` asks for: 1 is a current-thread runtime (tasks woken by
/// other tasks queue behind the ready ones, so concurrent answers and Redis commands leave
/// in fewer writes); 0 is one worker per core.
fn runtime(threads: usize) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = if threads == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        if threads > 1 {
            b.worker_threads(threads);
        }
        b
    };
    builder.enable_all().build()
}
