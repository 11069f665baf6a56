//! `hpactl cluster`: a real control plane on loopback (the `hpa-cluster` crate): upstream's
//! etcd and kube-apiserver of a release built by `hack/kube.sh`, the fixture server as the
//! aggregated metrics APIs, and, on demand, upstream's kube-controller-manager with only its
//! HPA controller.
//!
//! Exit status: 0 success, 1 the cluster could not be started, used or stopped, 2 a wrong
//! command line or an invalid scenario file.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use hpa_cluster::{Cluster, KubeRelease, UpOptions};

use crate::out::outln;
use crate::{EXIT_INVALID, init_logging_with, new_runtime};

/// `hpactl cluster ...`.
#[derive(Debug, Args)]
pub struct ClusterArgs {
    #[command(subcommand)]
    command: ClusterCommand,
}

#[derive(Debug, Subcommand)]
enum ClusterCommand {
    /// Start etcd, kube-apiserver and the aggregated metrics server in the background; write
    /// DIR/admin.kubeconfig and DIR/controller.kubeconfig (this controller's ServiceAccount,
    /// bound by config/rbac.yaml). Needs `hack/kube.sh build VERSION` first.
    Up {
        /// The Kubernetes release whose binaries run (1.35.4, 1.36.3, 1.37.2).
        #[arg(long, value_name = "VERSION")]
        kube_version: KubeRelease,
        /// The cluster directory (certificates, data, logs, kubeconfigs).
        #[arg(long, value_name = "DIR")]
        dir: PathBuf,
        /// Run etcd with --unsafe-no-fsync (faster on slow disks; for throwaway clusters).
        #[arg(long)]
        etcd_unsafe_no_fsync: bool,
        /// Write an audit log of every write request to DIR/logs/audit.log.
        #[arg(long)]
        audit: bool,
        /// More kube-apiserver flags (repeatable), e.g. --apiserver-flag=--v=2.
        #[arg(
            long = "apiserver-flag",
            value_name = "--NAME=VALUE",
            allow_hyphen_values = true
        )]
        apiserver_flags: Vec<String>,
    },
    /// Stop every process of the cluster in DIR (by pid).
    Down {
        /// The cluster directory.
        #[arg(long, value_name = "DIR")]
        dir: PathBuf,
    },
    /// Create a scenario's objects in the cluster (status through the status subresources,
    /// times moved to now) and hand its metric objects to the aggregated metrics server.
    Load {
        /// The scenario file.
        #[arg(value_name = "SCENARIO")]
        scenario: PathBuf,
        /// The cluster directory.
        #[arg(long, value_name = "DIR")]
        dir: PathBuf,
    },
    /// Create a generated cluster (as `hpactl generate` makes: HPAs, their Deployments and pods,
    /// status set through the API) many requests at a time, and the pods' metrics in the
    /// aggregated server: the cluster `hpactl bench --dir` measures.
    Populate {
        /// The cluster directory.
        #[arg(long, value_name = "DIR")]
        dir: PathBuf,
        /// Number of HPAs (each with a Deployment).
        #[arg(long, default_value_t = 1000)]
        hpas: usize,
        /// Pods per Deployment.
        #[arg(long, default_value_t = 10)]
        pods_per_hpa: usize,
        /// Namespaces the HPAs are spread over.
        #[arg(long, default_value_t = 100)]
        namespaces: usize,
        /// The HPAs' metrics, as `hpactl generate --metrics` takes them.
        #[arg(long, default_value = "cpu")]
        metrics: hpa_fixtures::generate::MetricMix,
        /// Seed of the per-pod variation.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Requests in flight at once.
        #[arg(long, default_value_t = 64)]
        concurrency: usize,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run this controller on a populated cluster for a long time under churn (HPAs,
    /// Deployments and pods deleted and created again, pod metrics moving) with one
    /// kube-apiserver restart, sampling its memory and reconciles; report RSS flatness, error
    /// lines and coverage after recovery, and draw the RSS curve.
    Soak {
        /// The cluster directory.
        #[arg(long, value_name = "DIR")]
        dir: PathBuf,
        /// This controller's binary (default: the kube-hpa-controller beside hpactl).
        #[arg(long, value_name = "PATH")]
        binary: Option<PathBuf>,
        /// The populated cluster's shape (as given to `cluster populate`).
        #[arg(long, default_value_t = 1000)]
        hpas: usize,
        /// Pods per Deployment (as given to `cluster populate`).
        #[arg(long, default_value_t = 10)]
        pods_per_hpa: usize,
        /// Namespaces (as given to `cluster populate`).
        #[arg(long, default_value_t = 100)]
        namespaces: usize,
        /// The HPAs' metrics (as given to `cluster populate`).
        #[arg(long, default_value = "cpu")]
        metrics: hpa_fixtures::generate::MetricMix,
        /// Seed (as given to `cluster populate`).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// How long the controller runs.
        #[arg(long, default_value = "60m", value_name = "DURATION")]
        duration: hpa_config::GoDuration,
        /// Time between churns.
        #[arg(long, default_value = "1m", value_name = "DURATION")]
        churn_every: hpa_config::GoDuration,
        /// HPAs (with their Deployments and pods) deleted and created again per churn.
        #[arg(long, default_value_t = 100)]
        churn_hpas: usize,
        /// Pods whose CPU usage moves per churn.
        #[arg(long, default_value_t = 2000)]
        metric_pods: usize,
        /// When kube-apiserver is restarted, from the controller's start (0s: never).
        #[arg(long, default_value = "30m", value_name = "DURATION")]
        restart_apiserver_at: hpa_config::GoDuration,
        /// Time between samples of the controller's memory and reconcile counter.
        #[arg(long, default_value = "10s", value_name = "DURATION")]
        sample_every: hpa_config::GoDuration,
        /// Requests in flight at once while churning.
        #[arg(long, default_value_t = 32)]
        concurrency: usize,
        /// Write the chart (SVG) here.
        #[arg(long, value_name = "FILE")]
        svg: Option<PathBuf>,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// Controller flags (after `--`).
        #[arg(last = true, value_name = "CONTROLLER FLAGS")]
        flags: Vec<String>,
    },
    /// Measure what kube-apiserver spends on this controller's informer reads (full lists of
    /// pods and Deployments in pages of 500, a pod watch) in JSON and in protobuf, on a
    /// populated cluster.
    ReadCost {
        /// The cluster directory.
        #[arg(long, value_name = "DIR")]
        dir: PathBuf,
        /// Rounds: full lists per resource and encoding, and watch measurements per watcher
        /// (alternating).
        #[arg(long, default_value_t = 5)]
        lists: u32,
        /// Pod updates per watch measurement (0: no watch measurement).
        #[arg(long, default_value_t = 1000)]
        updates: u32,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Start upstream's kube-controller-manager of the cluster's release with only the HPA
    /// controller (flags after `--` are added, e.g. -- --horizontal-pod-autoscaler-sync-period=5s),
    /// or stop it with --stop.
    Kcm {
        /// The cluster directory.
        #[arg(long, value_name = "DIR")]
        dir: PathBuf,
        /// Stop it instead.
        #[arg(long)]
        stop: bool,
        /// kube-controller-manager flags (after `--`).
        #[arg(last = true, value_name = "KCM FLAGS")]
        flags: Vec<String>,
    },
    /// Print the cluster's state: release, ports, kubeconfigs and which processes run.
    Status {
        /// The cluster directory.
        #[arg(long, value_name = "DIR")]
        dir: PathBuf,
    },
    /// Serve the metrics APIs of the cluster in DIR as an aggregated API server (started by
    /// `cluster up`; runs until SIGTERM).
    #[command(hide = true)]
    ServeMetrics {
        /// The cluster directory.
        #[arg(long, value_name = "DIR")]
        dir: PathBuf,
        /// ALIAS=API: serve the metrics API API (external.metrics.k8s.io or
        /// custom.metrics.k8s.io) under the group ALIAS too, as a second provider
        /// (with --port and --control-port).
        #[arg(long, value_name = "ALIAS=API", requires_all = ["port", "control_port"])]
        metrics_group: Option<String>,
        /// The second provider's serving port (with --metrics-group).
        #[arg(long, requires = "metrics_group")]
        port: Option<u16>,
        /// The second provider's control port (with --metrics-group).
        #[arg(long, requires = "metrics_group")]
        control_port: Option<u16>,
    },
}

/// Runs `hpactl cluster`.
pub fn run(args: ClusterArgs) -> ExitCode {
    // The readiness probes' refused connections are expected while a component starts: the
    // client's own error log stays off unless RUST_LOG asks for it.
    init_logging_with("info,kube_client=off");
    let runtime = match new_runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let result: Result<(), hpa_cluster::ClusterError> = match args.command {
        ClusterCommand::Up {
            kube_version,
            dir,
            etcd_unsafe_no_fsync,
            audit,
            apiserver_flags,
        } => {
            let hpactl = match std::env::current_exe() {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("hpactl cluster up: finding this program: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let options = UpOptions {
                dir,
                release: kube_version,
                metrics_server: vec![
                    hpactl.display().to_string(),
                    "cluster".into(),
                    "serve-metrics".into(),
                ],
                apiserver_flags,
                etcd_unsafe_no_fsync,
                audit,
            };
            runtime.block_on(hpa_cluster::up(&options)).map(|c| {
                outln!("cluster {} is up: {}", c.state().release, c.server_url());
                outln!("  admin:      {}", c.admin_kubeconfig().display());
                outln!("  controller: {}", c.controller_kubeconfig().display());
                outln!("  logs:       {}", c.dir().join("logs").display());
                outln!(
                    "  stop with:  hpactl cluster down --dir {}",
                    c.dir().display()
                );
            })
        }
        ClusterCommand::Down { dir } => hpa_cluster::down(&dir).map(|stopped| {
            if stopped.is_empty() {
                outln!("nothing was running in {}", dir.display());
            } else {
                outln!("stopped {}", stopped.join(", "));
            }
        }),
        ClusterCommand::Load { scenario, dir } => {
            let scenario = match hpa_fixtures::scenario::load_file(&scenario) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("{e}");
                    return ExitCode::from(EXIT_INVALID);
                }
            };
            runtime.block_on(async {
                let cluster = Cluster::open(&dir)?;
                let report = cluster.load(&scenario).await?;
                outln!(
                    "loaded {}: created {}; {} objects to the metrics server; times moved by {} s",
                    scenario.name,
                    created_summary(&report.created),
                    report.metrics_objects,
                    report.shifted_seconds
                );
                Ok(())
            })
        }
        ClusterCommand::Populate {
            dir,
            hpas,
            pods_per_hpa,
            namespaces,
            metrics,
            seed,
            concurrency,
            json,
        } => {
            let scenario = match populated_scenario(hpas, pods_per_hpa, namespaces, metrics, seed) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("{e}");
                    return ExitCode::from(EXIT_INVALID);
                }
            };
            runtime.block_on(async {
                let cluster = Cluster::open(&dir)?;
                let report = cluster
                    .populate(&scenario, concurrency, |kind, n, took| {
                        eprintln!("populate: {n} {kind} in {:.1} s", took.as_secs_f64());
                    })
                    .await?;
                if json {
                    outln!(
                        "{}",
                        serde_json::to_string_pretty(&report).unwrap_or_default()
                    );
                } else {
                    outln!(
                        "populated in {:.1} s: created {}; {} objects to the metrics server",
                        report.total_s,
                        created_summary(&report.created),
                        report.metrics_objects
                    );
                }
                Ok(())
            })
        }
        ClusterCommand::Soak {
            dir,
            binary,
            hpas,
            pods_per_hpa,
            namespaces,
            metrics,
            seed,
            duration,
            churn_every,
            churn_hpas,
            metric_pods,
            restart_apiserver_at,
            sample_every,
            concurrency,
            svg,
            json,
            flags,
        } => {
            let scenario = match populated_scenario(hpas, pods_per_hpa, namespaces, metrics, seed) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("{e}");
                    return ExitCode::from(EXIT_INVALID);
                }
            };
            let binary = binary.unwrap_or_else(crate::controller_beside_hpactl);
            let restart = restart_apiserver_at.to_std();
            let soak = hpa_cluster::soak::SoakConfig {
                binary,
                flags,
                duration: duration.to_std(),
                churn_every: churn_every.to_std().max(std::time::Duration::from_secs(1)),
                churn_hpas,
                metric_pods,
                restart_apiserver_at: (!restart.is_zero()).then_some(restart),
                sample_every: sample_every.to_std().max(std::time::Duration::from_secs(1)),
                concurrency,
            };
            runtime.block_on(async {
                let cluster = Cluster::open(&dir)?;
                let report = cluster
                    .soak(&scenario, &soak, |line| eprintln!("soak: {line}"))
                    .await?;
                if let Some(path) = &svg {
                    let title = format!(
                        "kube-hpa-controller soak: {} HPAs on kube-apiserver {}, {:.0} min",
                        report.hpas,
                        report.release,
                        report.duration_s / 60.0
                    );
                    match hpa_cluster::soak::chart(&report, &title)
                        .map_err(|e| e.to_string())
                        .and_then(|text| std::fs::write(path, text).map_err(|e| e.to_string()))
                    {
                        Ok(()) => eprintln!("soak: chart written to {}", path.display()),
                        Err(e) => eprintln!("soak: {}: {e}", path.display()),
                    }
                }
                if json {
                    outln!(
                        "{}",
                        serde_json::to_string_pretty(&report).unwrap_or_default()
                    );
                    return Ok(());
                }
                let f = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
                outln!("hpas                                  {}", report.hpas);
                outln!(
                    "duration_s                            {:.0}",
                    report.duration_s
                );
                outln!(
                    "churns                                {} ({} HPAs, {} pod metrics moved)",
                    report.churns,
                    report.churned_hpas,
                    report.moved_metrics
                );
                outln!(
                    "apiserver stopped / ready at s        {} / {}",
                    f(report.apiserver_stopped_at_s),
                    f(report.apiserver_ready_at_s)
                );
                outln!(
                    "rss_mib minutes 10-20                 {}",
                    f(report.rss_mib_minutes_10_20)
                );
                outln!(
                    "rss_mib last 10 minutes               {}",
                    f(report.rss_mib_last_10_minutes)
                );
                outln!(
                    "rss_change                            {}",
                    f(report.rss_change)
                );
                outln!(
                    "error lines (restart window)          {} ({})",
                    report.error_lines.len(),
                    report.error_lines_in_restart_window
                );
                for l in &report.error_lines {
                    outln!("  {l}");
                }
                outln!(
                    "reconciles/HPA/sync after recovery    {} (lowest interval {})",
                    f(report.reconciles_per_hpa_per_sync_after_recovery),
                    f(report.lowest_interval_reconciles_per_hpa_per_sync_after_recovery)
                );
                Ok(())
            })
        }
        ClusterCommand::ReadCost {
            dir,
            lists,
            updates,
            json,
        } => runtime.block_on(async {
            let cluster = Cluster::open(&dir)?;
            let config = hpa_cluster::read_cost::ReadCostConfig { lists, updates };
            let report = cluster.read_cost(&config).await?;
            if json {
                outln!(
                    "{}",
                    serde_json::to_string_pretty(&report).unwrap_or_default()
                );
                return Ok(());
            }
            outln!(
                "{:<12} {:<9} {:>8} {:>12} {:>13} {:>15} {:>10}",
                "resource",
                "encoding",
                "objects",
                "bytes/list",
                "apiserver s",
                "(median)",
                "wall s"
            );
            for c in &report.lists {
                outln!(
                    "{:<12} {:<9} {:>8} {:>12} {:>13.3} {:>15.3} {:>10.3}{}",
                    c.resource,
                    c.encoding,
                    c.objects,
                    c.bytes_per_list,
                    c.apiserver_cpu_s_per_list,
                    c.apiserver_cpu_s_median,
                    c.wall_s_per_list,
                    if c.answered_as_asked {
                        ""
                    } else {
                        "  (answered in another encoding)"
                    }
                );
            }
            for w in &report.watch {
                outln!(
                    "pod watch {:<9} {} updates: kube-apiserver {:.3} s (median {:.3} s)",
                    w.watcher,
                    w.updates,
                    w.apiserver_cpu_s,
                    w.apiserver_cpu_s_median
                );
            }
            Ok(())
        }),
        ClusterCommand::Kcm { dir, stop, flags } => runtime.block_on(async {
            let cluster = Cluster::open(&dir)?;
            if stop {
                cluster.stop_kcm()?;
                outln!("kube-controller-manager stopped");
            } else {
                let r = cluster.start_kcm(&flags).await?;
                outln!(
                    "kube-controller-manager {} (HPA controller only) runs as pid {}; log: {}",
                    cluster.state().release,
                    r.pid,
                    r.log.display()
                );
            }
            Ok(())
        }),
        ClusterCommand::Status { dir } => Cluster::open(&dir).and_then(|c| {
            let s = c.state();
            outln!("release     {}", s.release);
            outln!("server      {}", c.server_url());
            outln!("admin       {}", c.admin_kubeconfig().display());
            outln!("controller  {}", c.controller_kubeconfig().display());
            for name in hpa_cluster::control_plane::COMPONENTS {
                match c.component(name)? {
                    Some(r) => outln!("{name:<24}running, pid {}", r.pid),
                    None => outln!("{name:<24}not running"),
                }
            }
            Ok(())
        }),
        ClusterCommand::ServeMetrics {
            dir,
            metrics_group,
            port,
            control_port,
        } => {
            let provider = match (metrics_group, port, control_port) {
                (Some(g), Some(port), Some(control_port)) => match g.split_once('=') {
                    Some((group, api))
                        if matches!(api, "custom.metrics.k8s.io" | "external.metrics.k8s.io")
                            && hpa_decision::metric_source::is_dns_subdomain(group)
                            && !hpa_decision::metric_source::DEFAULT_METRICS_GROUPS
                                .contains(&group) =>
                    {
                        Some(hpa_cluster::metrics_server::ProviderOptions {
                            group: group.to_owned(),
                            api: api.to_owned(),
                            port,
                            control_port,
                        })
                    }
                    _ => {
                        eprintln!(
                            "hpactl cluster serve-metrics: --metrics-group {g:?}: expected ALIAS=API, ALIAS a DNS subdomain other than the metrics groups, API custom.metrics.k8s.io or external.metrics.k8s.io"
                        );
                        return ExitCode::from(2);
                    }
                },
                _ => None,
            };
            runtime.block_on(hpa_cluster::metrics_server::serve_metrics(
                &dir,
                provider,
                terminated(),
            ))
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hpactl cluster: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Completes on SIGTERM or SIGINT.
async fn terminated() {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        _ => {
            eprintln!("cannot listen for signals; serving until killed");
            std::future::pending::<()>().await;
        }
    }
}

/// The generated cluster `cluster populate` creates (and `cluster soak` regenerates to churn):
/// `hpactl generate`'s, named for its shape.
fn populated_scenario(
    hpas: usize,
    pods_per_hpa: usize,
    namespaces: usize,
    metrics: hpa_fixtures::generate::MetricMix,
    seed: u64,
) -> Result<hpa_fixtures::Scenario, String> {
    let config = hpa_fixtures::generate::GenerateConfig {
        name: format!("populate-{hpas}x{pods_per_hpa}"),
        hpas,
        pods_per_hpa,
        namespaces,
        metrics,
        seed,
        ..hpa_fixtures::generate::GenerateConfig::default()
    };
    let doc = hpa_fixtures::generate(&config).map_err(|e| e.to_string())?;
    hpa_fixtures::scenario::scenario_from_value(doc, "(generated)").map_err(|e| e.to_string())
}

/// `3 Deployment, 3 Pod` (or `nothing`): what a load or populate created, by kind.
fn created_summary(created: &std::collections::BTreeMap<String, usize>) -> String {
    if created.is_empty() {
        return "nothing".to_string();
    }
    let kinds: Vec<String> = created.iter().map(|(k, n)| format!("{n} {k}")).collect();
    kinds.join(", ")
}
