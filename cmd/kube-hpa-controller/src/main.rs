//! `kube-hpa-controller`: the Kubernetes horizontal pod autoscaler controller as its own
//! process, run instead of kube-controller-manager's (`cmd/kube-controller-manager`).
//!
//! Parses kube-controller-manager's flags for this controller (exit 2 on a bad one), sets up
//! logging, then runs [`kube_hpa_controller::app::run`]: client, serving, leader election and
//! the controller, until SIGTERM/SIGINT (exit 0), the loss of the lease (exit 1) or a panic in
//! any task (exit 2, [`kube_hpa_controller::crash`]).

use std::process::ExitCode;

use hpa_build_info::BUILD_INFO;
use hpa_config::{FlagError, Options, VersionFlag};
use kube_hpa_controller::app::{self, Outcome};

/// mimalloc rather than glibc's malloc: at 10,000 HPAs the process's resident memory is about
/// 70 MiB lower for the same live heap, and allocation costs less CPU (docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The most worker threads the async runtime starts (fewer on a smaller node).
const MAX_RUNTIME_THREADS: usize = 4;

fn main() -> ExitCode {
    let parsed = match Options::parse_args(std::env::args_os()) {
        Ok(p) => p,
        Err(FlagError::Help(text)) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        // component-base's `verflag.PrintAndExitIfRequested`: nothing is started.
        Err(FlagError::Version(flag)) => {
            if flag == VersionFlag::Raw {
                print!("{}", BUILD_INFO.raw_text());
            } else {
                print!("{}", BUILD_INFO.version_text("kube-hpa-controller"));
            }
            return ExitCode::SUCCESS;
        }
        Err(FlagError::Invalid(msg)) => {
            eprintln!("Error: {msg}");
            return ExitCode::from(2);
        }
    };
    for warning in &parsed.warnings {
        eprintln!("{warning}");
    }
    if let Err(e) = kube_hpa_controller::logging::init(&parsed.options.logging) {
        eprintln!("Error: {e}");
        return ExitCode::from(2);
    }
    // A panic in any task (informers, scale target watches, serving, leader election,
    // workers) ends the process with status 2, as KCM's HandleCrash does.
    kube_hpa_controller::crash::exit_on_panic();
    // At most four runtime threads: the controller waits on the API server far more than it
    // computes (0.12 of a core at 10,000 HPAs, docs/benchmarks.md), and each thread keeps its
    // own allocator caches, so more threads on a large node would only add resident memory.
    let threads = std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .min(MAX_RUNTIME_THREADS);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("Error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(app::run(parsed.options, app::termination_signal()));
    match result {
        Ok(Outcome::Stopped) => ExitCode::SUCCESS,
        Ok(Outcome::LeaderElectionLost) => {
            eprintln!("Error: leaderelection lost");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("Error: {e}");
            ExitCode::FAILURE
        }
    }
}
