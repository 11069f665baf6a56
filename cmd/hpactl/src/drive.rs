//! `hpactl drive`: plays a seeded (or a simulate file's) workload into a cluster brought up by
//! `hpactl cluster up`, in wall-clock time, for the HPA controller running there
//! (`hpa_cluster::drive`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use hpa_cluster::Cluster;
use hpa_cluster::drive::{self, plan};

use crate::demo::GoDuration;
use crate::out::outln;
use crate::{EXIT_INVALID, init_logging_with, new_runtime};

/// `hpactl drive ...`.
#[derive(Debug, Args)]
pub struct DriveArgs {
    /// The cluster directory (`hpactl cluster up --dir`).
    #[arg(long, value_name = "DIR", required_unless_present = "print_flags")]
    dir: Option<PathBuf>,
    /// Generate the plan from this seed (same seed, same plan).
    #[arg(long, conflicts_with = "file")]
    seed: Option<u64>,
    /// How many HPAs a generated plan has (one per namespace).
    #[arg(long, default_value_t = 20)]
    hpas: usize,
    /// Play the HPAs, workload and load of an `hpactl simulate` file instead
    /// (docs/simulate-format.md; one HPA per namespace).
    #[arg(long, value_name = "FILE")]
    file: Option<PathBuf>,
    /// How long to drive (a file's own duration when not given).
    #[arg(long, value_name = "DURATION")]
    duration: Option<GoDuration>,
    /// The prefix of the namespaces (`drive-000`, `drive-001`, ...).
    #[arg(long, default_value = "drive")]
    namespace_prefix: String,
    /// The log of the controller under test (kube-controller-manager at --v=4, e.g.
    /// DIR/logs/kube-controller-manager.log): change each HPA's inputs only between its
    /// reconciles, so that `hpactl record` sees which inputs each one read.
    #[arg(long, value_name = "FILE")]
    controller_log: Option<PathBuf>,
    /// Print the controller flags the plan is written for (`--name=value`, one a line) and
    /// exit: generated plans' flags, or a file's merged with them.
    #[arg(long)]
    print_flags: bool,
}

/// Runs `hpactl drive`.
pub fn run(args: DriveArgs) -> ExitCode {
    init_logging_with("info,kube_client=off");
    if args.print_flags && args.file.is_none() {
        for (k, v) in plan::generated_flags() {
            outln!("--{k}={v}");
        }
        return ExitCode::SUCCESS;
    }
    let Some(dir) = &args.dir else {
        eprintln!("hpactl drive: --dir is required");
        return ExitCode::from(EXIT_INVALID);
    };
    let cluster = match Cluster::open(dir) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("hpactl drive: {e}");
            return ExitCode::FAILURE;
        }
    };
    let plan = match (&args.file, args.seed) {
        (Some(file), _) => {
            let sim = match hpa_fixtures::simulate::load_file(file) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("{e}");
                    return ExitCode::from(EXIT_INVALID);
                }
            };
            match plan::from_simulation(&sim, &args.namespace_prefix) {
                Ok(mut p) => {
                    if let Some(d) = &args.duration {
                        p.duration = d.to_std();
                    }
                    p
                }
                Err(e) => {
                    eprintln!("{e}");
                    return ExitCode::from(EXIT_INVALID);
                }
            }
        }
        (None, Some(seed)) => plan::generate(&plan::GenerateOptions {
            seed,
            hpas: args.hpas,
            duration: args
                .duration
                .as_ref()
                .map_or(Duration::from_secs(600), |d| d.to_std()),
            minor: cluster.state().release.minor,
            namespace_prefix: args.namespace_prefix.clone(),
        }),
        (None, None) => {
            eprintln!("hpactl drive: give --seed N (a generated plan) or --file SIMULATION.yaml");
            return ExitCode::from(EXIT_INVALID);
        }
    };
    if args.print_flags {
        for (k, v) in &plan.flags {
            outln!("--{k}={v}");
        }
        return ExitCode::SUCCESS;
    }
    if plan.duration.is_zero() {
        eprintln!("hpactl drive: --duration must be above 0");
        return ExitCode::from(EXIT_INVALID);
    }
    let flags: Vec<String> = plan
        .flags
        .iter()
        .map(|(k, v)| format!("--{k}={v}"))
        .collect();
    outln!(
        "driving {} HPAs for {:?}; run the controller with: {}",
        plan.units.len(),
        plan.duration,
        flags.join(" ")
    );
    for u in &plan.units {
        let metrics: Vec<String> = u
            .hpa
            .spec
            .metrics
            .as_deref()
            .unwrap_or_default()
            .iter()
            .map(|m| m.type_.clone())
            .collect();
        outln!(
            "  {}/{}: {} {}, metrics {}, behavior {}, {} fault window(s), {} edit(s)",
            u.namespace,
            u.hpa_name(),
            u.target.kind(),
            u.target_name(),
            metrics.join("+"),
            if u.hpa.spec.behavior.is_some() {
                "set"
            } else {
                "default"
            },
            u.faults.len(),
            u.edits.len()
        );
    }
    let runtime = match new_runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let period = plan
        .flags
        .get("horizontal-pod-autoscaler-sync-period")
        .and_then(|v| v.parse::<GoDuration>().ok())
        .map_or(Duration::from_secs(15), |d| d.to_std());
    let clock = args
        .controller_log
        .as_deref()
        .map(|p| drive::SyncClock::new(p, &plan, period));
    let result = runtime.block_on(drive::drive(&cluster, &plan, clock, async {
        let _ = tokio::signal::ctrl_c().await;
    }));
    match result {
        Ok(report) => {
            outln!("{}", serde_json::to_string(&report).unwrap_or_default());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("hpactl drive: {e}");
            ExitCode::FAILURE
        }
    }
}
