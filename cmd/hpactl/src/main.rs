//! `hpactl`: tools around kube-hpa-controller's recorded scenarios.
//!
//! No upstream counterpart. `replay` runs (or with `--check` only validates) scenario files
//! of `docs/scenario-format.md` against the real controller; `serve` serves one scenario as a live API server over plain
//! HTTP on loopback for the real controller binary and `kubectl`; `demo` runs the real
//! controller against a small simulated cluster (the embedded `test-fixtures/demo/demo.yaml`
//! or another scenario) and prints one line per decision; `generate` writes a simulated
//! cluster of many HPAs as a scenario and `bench` runs the controller against one, counting
//! requests at the server (`docs/benchmarks.md`); `simulate` runs the controller's decision
//! code over a simulated workload and load timeline (`docs/simulate-format.md`); `record`
//! samples a live namespace into a scenario whose expectations are the live controller's
//! decisions; `cluster` runs upstream's control plane on loopback for the real-cluster tests.
//!
//! Exit status, as the format specifies: 0 success, 1 a scenario failed (or serving failed),
//! 2 a file is not a valid scenario (the message names the file, the step and the key) or the
//! command line is wrong.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use hpa_build_info::BUILD_INFO;
use hpa_config::VersionFlag;
use hpa_fixtures::bench::{self, BenchConfig, ControllerRun};
use hpa_fixtures::generate::{GenerateConfig, MetricMix, Wave};
use hpa_fixtures::replay;
use hpa_fixtures::scenario::{self, Scenario, ScenarioError};

mod cluster;
mod demo;
mod drive;
mod explain;
mod out;
mod plugin;

use demo::{DemoConfig, GoDuration};

use out::outln;

/// Command-line interface.
#[derive(Debug, Parser)]
#[command(name = "hpactl", about = "Tools for kube-hpa-controller scenarios")]
struct Cli {
    /// --version, --version=raw prints version information and quits
    #[arg(long, value_name = "version", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = VersionFlag::parse)]
    version: Option<VersionFlag>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check or run scenario files (files and directories, recursively `*.yaml`).
    Replay {
        /// Only validate the files; do not run them.
        #[arg(long)]
        check: bool,
        /// The controller's `--scale-target-cache` for every scenario whose `flags` do not
        /// set it (the scenario's own setting wins).
        #[arg(long, value_name = "true|false", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
        scale_target_cache: Option<bool>,
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
    /// Write a simulated cluster of many HPAs as a scenario file (YAML, or JSON for `*.json`),
    /// every HPA in the steady state a faithful controller keeps (no status write needed).
    Generate {
        #[command(flatten)]
        cluster: ClusterArgs,
        /// Scenario name.
        #[arg(long, default_value = "generated")]
        name: String,
        /// Add a first step that reconciles every HPA once and expects no scale, event or
        /// status write (for `hpactl replay`).
        #[arg(long)]
        expect_steady: bool,
        /// Where to write the scenario (default: standard output, YAML).
        #[arg(long, short, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Serve a generated (or given) cluster and run the controller against it for a while;
    /// print requests per HPA per sync (from the server's counters), reconcile intervals, CPU
    /// and memory. Arguments after `--` go to the controller binary verbatim.
    Bench {
        #[command(flatten)]
        cluster: ClusterArgs,
        /// Serve this scenario instead of generating one.
        #[arg(long, value_name = "FILE")]
        scenario: Option<PathBuf>,
        /// How long the controller runs (e.g. 2m).
        #[arg(long, default_value = "1m", value_name = "DURATION")]
        duration: GoDuration,
        /// The kube-hpa-controller binary to run (default: the controller in-process).
        #[arg(long, value_name = "PATH")]
        binary: Option<PathBuf>,
        /// Where the binary's output goes (default: hpactl-bench-PID.controller.log in the
        /// temporary directory; with --replicas, .N appended for replica N).
        #[arg(long, value_name = "FILE")]
        controller_log: Option<PathBuf>,
        /// Run this many replicas of --binary at once (give them --shards=N after `--`): each
        /// with its own bearer token, serving port and log, leader election in `default`; the
        /// report adds each one's CPU, peak RSS, reconciles and requests. With --dir (this
        /// controller only): the replicas on the real cluster, leader election in
        /// `kube-system`, the shards' RBAC granted first; their reconciles and CPU summed.
        #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=64))]
        replicas: u16,
        /// Measure the fixture server alone (scale GETs and PodMetrics LISTs per second over
        /// loopback, `--duration` each) instead of running a controller.
        #[arg(long)]
        server_only: bool,
        /// Concurrent connections of `--server-only`.
        #[arg(long, default_value_t = 4)]
        connections: usize,
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
        /// Measure on the real cluster in this directory (`hpactl cluster up`, then `cluster
        /// populate`) instead of a fixture server: the apiserver's request counts, the
        /// controller's reconciles from its /metrics, its CPU and peak RSS, and kube-apiserver's
        /// and etcd's CPU while it runs.
        #[arg(
            long,
            value_name = "DIR",
            conflicts_with_all = ["scenario", "server_only", "controller_log"]
        )]
        dir: Option<PathBuf>,
        /// With --dir: which controller runs, `kcm` (upstream's kube-controller-manager of the
        /// cluster's release, HPA controller only) or `self` (this controller's binary:
        /// --binary, else the kube-hpa-controller beside hpactl).
        #[arg(long, value_name = "kcm|self", requires = "dir")]
        controller: Option<RealController>,
        /// With --dir: the quiet window before the controller starts, whose requests (the
        /// cluster's own) are subtracted.
        #[arg(long, default_value = "10s", value_name = "DURATION")]
        baseline: GoDuration,
        /// With --dir: how long the controller runs before the measured --duration starts
        /// (its first pass writes every HPA's status).
        #[arg(long, default_value = "0s", value_name = "DURATION")]
        warmup: GoDuration,
        /// With --dir: write a CPU profile of kube-apiserver over the measured window here
        /// (its /debug/pprof/profile; read it with `go tool pprof -top FILE`).
        #[arg(long, value_name = "FILE", requires = "dir")]
        apiserver_profile: Option<PathBuf>,
        /// Controller flags (after `--`).
        #[arg(last = true, value_name = "CONTROLLER FLAGS")]
        controller_args: Vec<String>,
    },
    /// Show why an HPA scaled (or did not): its last decisions from a running controller
    /// (--controller), or one computed now on the cluster (no history). Installed as
    /// `kubectl-hpa_explain`, this is `kubectl hpa-explain NAMESPACE/NAME`.
    Explain(explain::ExplainArgs),
    /// Sample a live cluster's HPAs, their scale targets, pods and metrics every interval and
    /// write what was seen as a scenario for `hpactl replay` (the live controller's decisions
    /// become the expectations).
    Record(RecordArgs),
    /// A real control plane on loopback: upstream's etcd, kube-apiserver and (on demand)
    /// kube-controller-manager, with the fixture server as the aggregated metrics APIs.
    Cluster(cluster::ClusterArgs),
    /// Play a workload into a cluster of `hpactl cluster up` in wall-clock time: HPAs of every
    /// metric type and target kind, pods that follow the scale, metric values that follow a
    /// load timeline, metric API failures and HPA edits (seeded, or from a simulate file).
    Drive(drive::DriveArgs),
    /// What an HPA would do under a load timeline: runs the controller's decision code on a
    /// virtual clock over a simulated workload (docs/simulate-format.md) and writes
    /// DIR/simulation.csv and DIR/simulation.svg. Installed as `kubectl-hpa_simulate`, this
    /// is `kubectl hpa-simulate FILE --out DIR`.
    Simulate(SimulateArgs),
}

/// `hpactl simulate` arguments.
#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// The simulation file (YAML).
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// The output directory (created if missing).
    #[arg(long, short, value_name = "DIR")]
    out: PathBuf,
    /// A second simulation file (another HPA variant) run over the first file's load and
    /// workload, drawn on the same chart.
    #[arg(long, value_name = "OTHER.yaml")]
    compare: Option<PathBuf>,
}

/// The demo scenario, embedded so that `hpactl demo` runs from any directory.
/// The shape of a generated cluster (`generate` and `bench`).
#[derive(Debug, clap::Args)]
struct ClusterArgs {
    /// Number of HPAs (each with a Deployment).
    #[arg(long, default_value_t = 100)]
    hpas: usize,
    /// Pods per Deployment.
    #[arg(long, default_value_t = 10)]
    pods_per_hpa: usize,
    /// Namespaces the HPAs are spread over.
    #[arg(long, default_value_t = 10)]
    namespaces: usize,
    /// The HPAs' metrics: kinds cpu, memory, container-cpu, pods, object, external; `+` joins
    /// kinds into one HPA's set, `,` separates sets that HPAs take in turn.
    #[arg(long, default_value = "cpu")]
    metrics: MetricMix,
    /// Seed of the per-pod variation.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Add a load wave of this many steps (0: none).
    #[arg(long, default_value_t = 0)]
    wave_steps: usize,
    /// Time between the wave's steps.
    #[arg(long, default_value = "1m", value_name = "DURATION")]
    wave_interval: GoDuration,
    /// The wave's relative amplitude (0 to 0.9).
    #[arg(long, default_value_t = 0.5)]
    wave_amplitude: f64,
    /// COUNT=PERIOD: the last COUNT HPAs get the annotation kube-hpa-controller.io/sync-period
    /// with PERIOD (e.g. 100=3s); `bench` reports their reconcile intervals apart.
    #[arg(long, value_name = "COUNT=PERIOD")]
    sync_period_annotation: Option<hpa_fixtures::SyncPeriodGroup>,
}

impl ClusterArgs {
    fn config(&self, name: &str, expect_steady: bool) -> GenerateConfig {
        GenerateConfig {
            name: name.to_string(),
            hpas: self.hpas,
            namespaces: self.namespaces,
            pods_per_hpa: self.pods_per_hpa,
            metrics: self.metrics.clone(),
            seed: self.seed,
            wave: (self.wave_steps > 0).then(|| Wave {
                steps: self.wave_steps,
                interval: jiff::SignedDuration::from_nanos(self.wave_interval.as_nanos()),
                amplitude: self.wave_amplitude,
            }),
            expect_steady,
            sync_period_annotation: self.sync_period_annotation.clone(),
            ..GenerateConfig::default()
        }
    }
}

const DEMO_SCENARIO: &str = include_str!("../../../test-fixtures/demo/demo.yaml");

/// Exit status for an invalid scenario file or bad arguments.
const EXIT_INVALID: u8 = 2;

/// `--version` (`hpactl`'s, and the plugins'): the version and commit, or with `raw` every
/// build field.
fn print_version(v: VersionFlag) -> ExitCode {
    if v == VersionFlag::Raw {
        out::text(&BUILD_INFO.raw_text());
    } else {
        out::text(&BUILD_INFO.version_text("hpactl"));
    }
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // Installed as a kubectl plugin (`kubectl-hpa_explain`), the name says the subcommand.
    let command = match args.first().and_then(plugin::Plugin::of) {
        Some(plugin) => match plugin.parse(args) {
            plugin::Invocation::Version(v) => return print_version(v),
            plugin::Invocation::Run(command) => *command,
        },
        None => {
            let cli = Cli::parse_from(args);
            match (cli.version, cli.command) {
                (Some(v @ (VersionFlag::Raw | VersionFlag::True)), _) => return print_version(v),
                (_, Some(command)) => command,
                (_, None) => {
                    use clap::CommandFactory;
                    Cli::command()
                        .error(
                            clap::error::ErrorKind::MissingSubcommand,
                            "a subcommand is required",
                        )
                        .exit()
                }
            }
        }
    };
    match command {
        Command::Replay {
            check,
            scale_target_cache,
            paths,
        } => replay(check, scale_target_cache, &paths),
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
        Command::Generate {
            cluster,
            name,
            expect_steady,
            out,
        } => generate_cmd(&cluster.config(&name, expect_steady), out.as_deref()),
        Command::Bench {
            duration,
            binary,
            json,
            dir: Some(dir),
            controller,
            baseline,
            warmup,
            apiserver_profile,
            controller_args,
            replicas,
            ..
        } => real_bench_cmd(
            &dir,
            controller.unwrap_or(RealController::SelfBinary),
            binary,
            [warmup.to_std(), duration.to_std(), baseline.to_std()],
            json,
            apiserver_profile,
            usize::from(replicas),
            controller_args,
        ),
        Command::Bench {
            cluster,
            scenario,
            duration,
            binary,
            controller_log,
            replicas,
            server_only,
            connections,
            json,
            dir: None,
            controller: _,
            baseline: _,
            warmup: _,
            apiserver_profile: _,
            controller_args,
        } => bench_cmd(BenchArgs {
            config: cluster.config("bench", false),
            scenario,
            duration: duration.to_std(),
            binary,
            controller_log,
            replicas: usize::from(replicas),
            server_only,
            connections,
            json,
            controller_args,
        }),
        Command::Explain(args) => explain::run(args),
        Command::Record(args) => record_cmd(args),
        Command::Cluster(args) => cluster::run(args),
        Command::Drive(args) => drive::run(args),
        Command::Simulate(SimulateArgs { file, out, compare }) => {
            simulate_cmd(&file, &out, compare.as_deref())
        }
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

fn replay(check: bool, scale_target_cache: Option<bool>, paths: &[PathBuf]) -> ExitCode {
    let mut loaded = match load_all(paths) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(EXIT_INVALID);
        }
    };
    if let Some(on) = scale_target_cache {
        for (_, s) in &mut loaded {
            replay::default_scale_target_cache(s, on);
        }
    }
    if check {
        for (file, s) in &loaded {
            outln!("OK {} ({})", s.name, file.display());
        }
        outln!("{} valid", loaded.len());
        // Freeing a big scenario object by object takes seconds; the process ends here.
        std::mem::forget(loaded);
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
    let runtime = match new_runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let (mut passed, mut failed) = (0usize, 0usize);
    for (_, s) in loaded {
        let outcome = runtime.block_on(replay::run_isolated(s));
        for line in outcome.render() {
            outln!("{line}");
        }
        if outcome.passed() {
            passed += 1;
        } else {
            failed += 1;
        }
    }
    outln!("{passed} passed, {failed} failed");
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
    let runtime = match new_runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
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
    let runtime = match new_runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    // A closed pipe (`hpactl demo | head`) ends the demo quietly.
    let mut print = |line: &str| outln!("{line}");
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

/// The multi-threaded runtime every subcommand runs on; a failure to start it is said once,
/// here.
fn new_runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("starting the runtime: {e}");
            ExitCode::FAILURE
        })
}

fn init_logging() {
    init_logging_with("info");
}

/// Logging to standard error with `default` as the filter when `RUST_LOG` is unset.
fn init_logging_with(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Colour only on a terminal: logs written to a file carry no escape sequences.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

fn generate_cmd(config: &GenerateConfig, out: Option<&Path>) -> ExitCode {
    let doc = match hpa_fixtures::generate::generate(config) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(EXIT_INVALID);
        }
    };
    let json = out.is_some_and(|p| p.extension().is_some_and(|e| e == "json"));
    let result = match out {
        Some(path) => std::fs::File::create(path)
            .map_err(anyhow::Error::from)
            .and_then(|f| write_doc(std::io::BufWriter::new(f), &doc, json))
            .map_err(|e| e.context(format!("writing {}", path.display()))),
        // Through `out`: a closed pipe (`hpactl generate | head`) ends quietly.
        None => serde_saphyr::to_string(&doc)
            .map(|text| out::text(&text))
            .map_err(anyhow::Error::from),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e:#}");
            ExitCode::FAILURE
        }
    }
}

fn write_doc(
    mut w: impl std::io::Write,
    doc: &serde_json::Value,
    json: bool,
) -> anyhow::Result<()> {
    if json {
        serde_json::to_writer(&mut w, doc)?;
        writeln!(w)?;
    } else {
        let text = serde_saphyr::to_string(doc)?;
        w.write_all(text.as_bytes())?;
    }
    w.flush()?;
    Ok(())
}

/// `hpactl bench --controller`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum RealController {
    /// Upstream's kube-controller-manager.
    Kcm,
    /// This controller.
    #[value(name = "self")]
    SelfBinary,
}

/// The kube-hpa-controller binary beside this hpactl (else the one on `PATH`).
pub(crate) fn controller_beside_hpactl() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("kube-hpa-controller")))
        .unwrap_or_else(|| PathBuf::from("kube-hpa-controller"))
}

/// `hpactl bench --dir`: one controller (or this controller's replicas) against the
/// populated real cluster in `dir`.
#[allow(clippy::too_many_arguments)]
fn real_bench_cmd(
    dir: &Path,
    controller: RealController,
    binary: Option<PathBuf>,
    [warmup, duration, baseline]: [std::time::Duration; 3],
    json: bool,
    apiserver_profile: Option<PathBuf>,
    replicas: usize,
    flags: Vec<String>,
) -> ExitCode {
    use hpa_cluster::bench::{Controller, RealBenchConfig};
    let controller = match controller {
        RealController::Kcm if replicas > 1 => {
            eprintln!(
                "--replicas: upstream's kube-controller-manager runs alone (--controller self)"
            );
            return ExitCode::from(EXIT_INVALID);
        }
        RealController::Kcm => Controller::Kcm,
        RealController::SelfBinary => {
            Controller::SelfBinary(binary.unwrap_or_else(controller_beside_hpactl))
        }
    };
    if std::env::var_os("RUST_LOG").is_some() {
        init_logging();
    }
    let runtime = match new_runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let config = RealBenchConfig {
        controller,
        flags,
        warmup,
        duration,
        baseline,
        apiserver_profile,
        replicas,
    };
    let result = runtime.block_on(async {
        let cluster = hpa_cluster::Cluster::open(dir)?;
        cluster.bench(&config).await
    });
    match result {
        Ok(report) => {
            outln!("{}", render(&report, json));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// What `hpactl bench` was asked.
struct BenchArgs {
    config: GenerateConfig,
    scenario: Option<PathBuf>,
    duration: std::time::Duration,
    binary: Option<PathBuf>,
    controller_log: Option<PathBuf>,
    replicas: usize,
    server_only: bool,
    connections: usize,
    json: bool,
    controller_args: Vec<String>,
}

fn bench_cmd(args: BenchArgs) -> ExitCode {
    if args.replicas > 1 && args.binary.is_none() {
        eprintln!("--replicas: more than one needs --binary (or --dir: a real cluster)");
        return ExitCode::from(EXIT_INVALID);
    }
    // A generated cluster's objects are loaded one at a time, never all held as values.
    let loaded = match &args.scenario {
        Some(file) => scenario::load_file(file)
            .map(|s| (s, None))
            .map_err(|e| e.to_string()),
        None => hpa_fixtures::generate::generate_parts(&args.config)
            .map_err(|e| e.to_string())
            .and_then(|(doc, objects)| {
                scenario::scenario_from_value(doc, "(generated)")
                    .map(|s| (s, Some(objects)))
                    .map_err(|e| e.to_string())
            }),
    };
    let (scenario, generated) = match loaded {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(EXIT_INVALID);
        }
    };
    if std::env::var_os("RUST_LOG").is_some() {
        init_logging();
    }
    let runtime = match new_runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let printed = if args.server_only {
        runtime
            .block_on(bench::server_throughput(
                scenario,
                generated.into_iter().flatten(),
                args.duration,
                args.connections,
            ))
            .map(|t| render(&t, args.json))
    } else {
        let controller = match args.binary {
            Some(path) => ControllerRun::Binary {
                path,
                args: args.controller_args,
            },
            None => ControllerRun::InProcess {
                args: args.controller_args,
            },
        };
        let config = BenchConfig {
            duration: args.duration,
            controller,
            controller_log: args.controller_log,
            replicas: args.replicas,
        };
        runtime
            .block_on(bench::run(
                scenario,
                generated.into_iter().flatten(),
                &config,
            ))
            .map(|r| render(&r, args.json))
    };
    match printed {
        Ok(text) => {
            outln!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// One JSON object, or a two-column table of its fields (nested objects flattened with `.`).
fn render(report: &impl serde::Serialize, json: bool) -> String {
    let value = serde_json::to_value(report).unwrap_or_default();
    if json {
        return value.to_string();
    }
    let mut rows = Vec::new();
    flatten("", &value, &mut rows);
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    rows.iter()
        .map(|(k, v)| format!("{k:<width$}  {v}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn flatten(prefix: &str, v: &serde_json::Value, rows: &mut Vec<(String, String)>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, v, rows);
            }
        }
        serde_json::Value::Number(n) => {
            let text = match n.as_f64() {
                Some(f) if !n.is_i64() && !n.is_u64() => format!("{f:.4}"),
                _ => n.to_string(),
            };
            rows.push((prefix.to_string(), text));
        }
        serde_json::Value::Null => rows.push((prefix.to_string(), "-".into())),
        serde_json::Value::String(text) => rows.push((prefix.to_string(), text.clone())),
        other => rows.push((prefix.to_string(), other.to_string())),
    }
}

/// `hpactl simulate`: exit 2 for a bad file, 1 when the outputs cannot be written.
fn simulate_cmd(file: &Path, out: &Path, compare: Option<&Path>) -> ExitCode {
    use hpa_fixtures::simulate;
    // The base file's runs, then the variant's over the base's load and workload.
    let runs = || -> Result<(Vec<simulate::Run>, String), simulate::SimulateError> {
        let base = simulate::load_file(file)?;
        let mut runs = simulate::simulate(&base, "base")?;
        let mut title = format!("hpactl simulate {}", file.display());
        if let Some(other) = compare {
            let variant = simulate::input::load_variant_file(other, &base)?;
            runs.extend(simulate::simulate(&variant, "compare")?);
            title = format!("{title} vs {}", other.display());
        }
        Ok((runs, title))
    };
    let (runs, title) = match runs() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(EXIT_INVALID);
        }
    };
    match simulate::write_outputs(&runs, out, &title) {
        Ok(()) => {
            outln!(
                "wrote {} and {}",
                out.join("simulation.csv").display(),
                out.join("simulation.svg").display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// What `hpactl record` was asked.
#[derive(Debug, Args)]
struct RecordArgs {
    /// The kubeconfig of the cluster.
    #[arg(long, value_name = "FILE", required_unless_present = "from_samples")]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context (default: its current context).
    #[arg(long)]
    context: Option<String>,
    /// The namespace to record; repeat it to record several at once, one scenario each
    /// (then `--out` is a directory and each scenario is written to `OUT/NAMESPACE.yaml`).
    #[arg(long, short = 'n', value_name = "NS", required = true)]
    namespace: Vec<String>,
    /// Only this HPA (default: every HPA of the namespace).
    #[arg(long, value_name = "NAME")]
    hpa: Option<String>,
    /// How long to record (e.g. 10m).
    #[arg(
        long,
        value_name = "DURATION",
        required_unless_present = "from_samples"
    )]
    duration: Option<GoDuration>,
    /// Time between samples; at least the live controller's sync period (e.g. 30s).
    #[arg(
        long,
        value_name = "DURATION",
        required_unless_present = "from_samples"
    )]
    interval: Option<GoDuration>,
    /// Also keep what was sampled, as `DIR/NAMESPACE.samples.json` (to build the scenarios
    /// again with `--from-samples`).
    #[arg(long, value_name = "DIR")]
    samples: Option<PathBuf>,
    /// Build the scenarios from samples kept with `--samples` instead of reading a cluster.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["samples", "kubeconfig"])]
    from_samples: Option<PathBuf>,
    /// The live controller's flags, written into the scenario so that the replay decides
    /// as it did (repeatable), e.g. `--flag horizontal-pod-autoscaler-tolerance=0.05`.
    #[arg(long = "flag", value_name = "NAME=VALUE")]
    flags: Vec<String>,
    /// kube-controller-manager's log (klog text, `--v=4` or more, e.g. `hpactl cluster kcm`'s
    /// DIR/logs/kube-controller-manager.log), read when the recording ends: every reconcile it
    /// shows is replayed at its time, and expected where the samples around it agree.
    #[arg(long, value_name = "FILE")]
    controller_log: Option<PathBuf>,
    /// The scenario's name (default: recorded-NAMESPACE; with several namespaces,
    /// NAME-NAMESPACE).
    #[arg(long)]
    name: Option<String>,
    /// Where to write the scenario (YAML, or JSON for `*.json`); with several namespaces, the
    /// directory (created) for one `NAMESPACE.yaml` each.
    #[arg(long, short, value_name = "FILE|DIR")]
    out: PathBuf,
}

/// What `hpactl record --samples` keeps of one namespace.
#[derive(serde::Serialize, serde::Deserialize)]
struct KeptSamples {
    server_version: Option<String>,
    samples: Vec<hpa_fixtures::record::Sample>,
}

/// `hpactl record`: exit 2 for a wrong command line, 1 when the cluster cannot be read or
/// the file written.
fn record_cmd(args: RecordArgs) -> ExitCode {
    use hpa_fixtures::record::{self, RecordConfig};
    let mut flags = BTreeMap::new();
    for f in &args.flags {
        let Some((k, v)) = f.split_once('=') else {
            eprintln!("--flag {f}: must be NAME=VALUE");
            return ExitCode::from(EXIT_INVALID);
        };
        flags.insert(k.trim_start_matches("--").to_owned(), v.to_owned());
    }
    if let Err(e) = hpa_config::Options::from_flag_map(&flags) {
        eprintln!("--flag: {e}");
        return ExitCode::from(EXIT_INVALID);
    }
    let interval = args
        .interval
        .map_or(std::time::Duration::from_secs(1), |d| d.to_std());
    let duration = args
        .duration
        .map_or(std::time::Duration::ZERO, |d| d.to_std());
    if interval.is_zero() {
        eprintln!("--interval must be above 0");
        return ExitCode::from(EXIT_INVALID);
    }
    let several = args.namespace.len() > 1;
    if several && args.hpa.is_some() {
        eprintln!("--hpa records one HPA of one namespace; give one --namespace with it");
        return ExitCode::from(EXIT_INVALID);
    }
    let configs: Vec<RecordConfig> = args
        .namespace
        .iter()
        .map(|ns| RecordConfig {
            name: match (&args.name, several) {
                (Some(n), false) => n.clone(),
                (Some(n), true) => format!("{n}-{ns}"),
                (None, _) => format!("recorded-{ns}"),
            },
            namespace: ns.clone(),
            hpa: args.hpa.clone(),
            duration,
            interval,
            flags: flags.clone(),
            server_version: None,
        })
        .collect();
    let outputs: Vec<PathBuf> = if several {
        if let Err(e) = std::fs::create_dir_all(&args.out) {
            eprintln!("{}: {e}", args.out.display());
            return ExitCode::FAILURE;
        }
        args.namespace
            .iter()
            .map(|ns| args.out.join(format!("{ns}.yaml")))
            .collect()
    } else {
        vec![args.out.clone()]
    };
    let rt = match new_runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let result: anyhow::Result<Vec<serde_json::Value>> = rt.block_on(async {
        let recorded: Vec<(Vec<record::Sample>, RecordConfig)> = match &args.from_samples {
            Some(dir) => configs
                .into_iter()
                .map(|mut cfg| {
                    let path = dir.join(format!("{}.samples.json", cfg.namespace));
                    let text = std::fs::read_to_string(&path)
                        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
                    let kept: KeptSamples = serde_json::from_str(&text)
                        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
                    cfg.server_version = kept.server_version;
                    Ok((kept.samples, cfg))
                })
                .collect::<anyhow::Result<_>>()?,
            None => {
                let Some(path) = &args.kubeconfig else {
                    anyhow::bail!("--kubeconfig is required");
                };
                let kubeconfig = kube::config::Kubeconfig::read_from(path)?;
                let options = kube::config::KubeConfigOptions {
                    context: args.context.clone(),
                    ..Default::default()
                };
                let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options).await?;
                // kube retries 429, 503 and 504 answers (up to 15 times, with backoff) unless
                // told not to; client-go and so KCM do not without a `Retry-After`. With it, a
                // metrics API answering 503 held one namespace's sampler for 20 to 47 s and
                // the recording never saw the fault KCM saw (samples are to show what KCM read).
                config.default_retry = false;
                let client = kube::Client::try_from(config)?;
                let version = record::server_version(&client).await;
                // Every namespace on the same clock, each sampled by its own task.
                let runs = configs.into_iter().map(|mut cfg| {
                    cfg.server_version = version.clone();
                    let client = client.clone();
                    async move {
                        let samples = record::record(&client, &cfg).await?;
                        Ok::<_, record::RecordError>((samples, cfg))
                    }
                });
                futures::future::try_join_all(runs).await?
            }
        };
        if let Some(dir) = &args.samples {
            std::fs::create_dir_all(dir).map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
            for (samples, cfg) in &recorded {
                let path = dir.join(format!("{}.samples.json", cfg.namespace));
                let kept = KeptSamples {
                    server_version: cfg.server_version.clone(),
                    samples: samples.clone(),
                };
                std::fs::write(&path, serde_json::to_vec(&kept)?)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            }
        }
        let log = match &args.controller_log {
            Some(path) => Some(
                std::fs::read_to_string(path)
                    .map_err(|e| anyhow::anyhow!("--controller-log {}: {e}", path.display()))?,
            ),
            None => None,
        };
        // The rescales and events of the log depend only on the year its lines are read in
        // (the same for every namespace of one run): read once per year, not per namespace.
        type ByYear = (
            BTreeMap<String, Vec<jiff::Timestamp>>,
            BTreeMap<String, Vec<record::LoggedEvent>>,
        );
        let mut by_year: BTreeMap<i16, ByYear> = BTreeMap::new();
        Ok(recorded
            .iter()
            .map(|(samples, cfg)| match &log {
                Some(text) => {
                    let year = samples
                        .first()
                        .map_or(1970, |s| s.at.to_zoned(jiff::tz::TimeZone::UTC).year());
                    let syncs = record::syncs_from_log(text, year, samples);
                    let (rescales, events) = by_year.entry(year).or_insert_with(|| {
                        (
                            record::rescales_from_log(text, year),
                            record::events_from_log(text, year),
                        )
                    });
                    record::scenario_with_syncs(samples, cfg, &syncs, rescales, Some(events))
                }
                None => record::scenario(samples, cfg),
            })
            .collect())
    });
    let docs = match result {
        Ok(d) => d,
        Err(e) => {
            eprintln!("hpactl record: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    for (doc, out) in docs.iter().zip(&outputs) {
        let json = out.extension().is_some_and(|e| e == "json");
        let written = std::fs::File::create(out)
            .map_err(anyhow::Error::from)
            .and_then(|f| write_doc(std::io::BufWriter::new(f), doc, json));
        match written {
            Ok(()) => eprintln!("wrote {}", out.display()),
            Err(e) => {
                eprintln!("{}: {e:#}", out.display());
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
