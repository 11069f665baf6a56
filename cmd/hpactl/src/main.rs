//! `hpactl`: tools around kube-hpa-controller's recorded scenarios.
//!
//! No upstream counterpart. `replay` runs (or with `--check` only validates) scenario files
//! of `fixture-format.md` against the real controller; `serve` serves one scenario as a live API server over plain
//! HTTP on loopback for the real controller binary and `kubectl`; `demo` runs the real
//! controller against a small simulated cluster (the embedded `test-fixtures/demo/demo.yaml`
//! or another scenario) and prints one line per decision.
//!
//! Exit status, as the format specifies: 0 success, 1 a scenario failed (or serving failed),
//! 2 a file is not a valid scenario (the message names the file, the step and the key) or the
//! command line is wrong.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use hpa_fixtures::demo::{self, DemoConfig, GoDuration};
use hpa_fixtures::replay;
use hpa_fixtures::scenario::{self, Scenario, ScenarioError};

mod explain;

/// Command-line interface.
#[derive(Debug, Parser)]
#[command(
    name = "hpactl",
    version,
    about = "Tools for kube-hpa-controller scenarios"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check or run scenario files (files and directories, recursively `*.yaml`).
    Replay {
        /// Only validate the files; do not run them.
        #[arg(long)]
        check: bool,
        /// Scenario files or directories.
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
    },
    /// Serve one scenario as a live API over plain HTTP on loopback.
    Serve {
        /// The scenario file.
        #[arg(value_name = "SCENARIO")]
        scenario: PathBuf,
        /// Listen address, a loopback IP and port (e.g. 127.0.0.1:8001).
        #[arg(long, value_name = "127.0.0.1:PORT")]
        addr: SocketAddr,
        /// Where to write a kubeconfig pointing at the server.
        #[arg(long, value_name = "FILE")]
        kubeconfig_out: PathBuf,
    },
    /// Run the real controller against a small simulated cluster whose load rises and falls,
    /// printing one line per decision (about 40 seconds).
    Demo {
        /// A scenario to run instead of the embedded one (test-fixtures/demo/demo.yaml).
        #[arg(value_name = "SCENARIO")]
        scenario: Option<PathBuf>,
        /// Run the timeline this many times faster than real time (0.1 to 100).
        #[arg(long, default_value_t = 1.0)]
        speed: f64,
        /// The controller's sync period on the demo's clock (default: the scenario's flag).
        #[arg(long, value_name = "DURATION")]
        sync_period: Option<GoDuration>,
    },
    /// Show why an HPA scaled (or did not): its last decisions from a running controller
    /// (--controller), or one computed now on the cluster (no history). Installed as
    /// `kubectl-hpa_explain`, this is `kubectl hpa-explain NAMESPACE/NAME`.
    Explain(explain::ExplainArgs),
}

/// The demo scenario, embedded so that `hpactl demo` runs from any directory.
const DEMO_SCENARIO: &str = include_str!("../../../test-fixtures/demo/demo.yaml");

/// Exit status for an invalid scenario file or bad arguments.
const EXIT_INVALID: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse_from(explain::plugin_args(std::env::args_os()));
    match cli.command {
        Command::Replay { check, paths } => replay(check, &paths),
        Command::Serve {
            scenario,
            addr,
            kubeconfig_out,
        } => serve(&scenario, addr, &kubeconfig_out),
        Command::Demo {
            scenario,
            speed,
            sync_period,
        } => run_demo(scenario.as_deref(), DemoConfig { speed, sync_period }),
        Command::Explain(args) => explain::run(args),
    }
}

/// Loads every file, stopping at the first invalid one; also rejects duplicate names.
fn load_all(paths: &[PathBuf]) -> Result<Vec<(PathBuf, Scenario)>, ScenarioError> {
    let files = scenario::collect_files(paths)?;
    let mut seen: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut out = Vec::with_capacity(files.len());
    for file in files {
        let s = scenario::load_file(&file)?;
        if let Some(first) = seen.get(&s.name) {
            return Err(ScenarioError::Invalid {
                file: file.display().to_string(),
                at: String::new(),
                key: "name".to_string(),
                message: format!(
                    "duplicate scenario name {:?} (also in {})",
                    s.name,
                    first.display()
                ),
            });
        }
        seen.insert(s.name.clone(), file.clone());
        out.push((file, s));
    }
    Ok(out)
}

fn replay(check: bool, paths: &[PathBuf]) -> ExitCode {
    let loaded = match load_all(paths) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(EXIT_INVALID);
        }
    };
    if check {
        for (file, s) in &loaded {
            println!("OK {} ({})", s.name, file.display());
        }
        println!("{} valid", loaded.len());
        return ExitCode::SUCCESS;
    }
    // Flags and objects are checked before anything runs, so an invalid file exits 2
    // without partial results.
    for (file, s) in &loaded {
        if let Err(e) = replay::validate(s, &file.display().to_string()) {
            eprintln!("{e}");
            return ExitCode::from(EXIT_INVALID);
        }
    }
    if std::env::var_os("RUST_LOG").is_some() {
        init_logging();
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (mut passed, mut failed) = (0usize, 0usize);
    for (_, s) in loaded {
        let name = s.name.clone();
        // Each scenario in its own task: a panic fails that scenario only.
        let outcome = runtime
            .block_on(
                async move { tokio::spawn(async move { replay::run_scenario(&s).await }).await },
            )
            .unwrap_or_else(|e| replay::ScenarioOutcome {
                name: name.clone(),
                mismatches: vec![replay::Mismatch {
                    step: None,
                    what: "runner".to_owned(),
                    expected: "the scenario runs".to_owned(),
                    actual: format!("the runner failed: {e}"),
                }],
            });
        for line in outcome.render() {
            println!("{line}");
        }
        if outcome.passed() {
            passed += 1;
        } else {
            failed += 1;
        }
    }
    println!("{passed} passed, {failed} failed");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn serve(file: &Path, addr: SocketAddr, kubeconfig_out: &Path) -> ExitCode {
    if !addr.ip().is_loopback() {
        eprintln!("--addr {addr}: the fixture server only listens on loopback (127.0.0.1 or ::1)");
        return ExitCode::from(EXIT_INVALID);
    }
    let scenario = match scenario::load_file(file) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(EXIT_INVALID);
        }
    };
    init_logging();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(hpa_fixtures::serve::serve(
        scenario,
        addr,
        kubeconfig_out,
        shutdown_on_ctrl_c(),
    ));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

fn run_demo(file: Option<&Path>, config: DemoConfig) -> ExitCode {
    let loaded = match file {
        Some(f) => scenario::load_file(f),
        None => scenario::load_str(DEMO_SCENARIO, "test-fixtures/demo/demo.yaml"),
    };
    let scenario = match loaded {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(EXIT_INVALID);
        }
    };
    if std::env::var_os("RUST_LOG").is_some() {
        init_logging();
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    // A closed pipe (`hpactl demo | head`) just drops the rest of the output.
    let mut print = |line: &str| {
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), "{line}");
    };
    match runtime.block_on(demo::run(&scenario, config, &mut print)) {
        Ok(_) => ExitCode::SUCCESS,
        Err(
            e @ (demo::DemoError::Speed(_)
            | demo::DemoError::SyncPeriod(_)
            | demo::DemoError::Flags(_)
            | demo::DemoError::Load(_)
            | demo::DemoError::Deployment { .. }),
        ) => {
            eprintln!("{e}");
            ExitCode::from(EXIT_INVALID)
        }
        Err(e) => {
            eprintln!("demo: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Completes on Ctrl-C (or immediately if the handler cannot be installed, which then stops
/// the server instead of serving forever unstoppably).
async fn shutdown_on_ctrl_c() {
    if let Err(e) = tokio::signal::ctrl_c().await {
        eprintln!("cannot listen for Ctrl-C: {e}");
    }
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
