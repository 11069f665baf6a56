//! `hpactl cluster soak --dir DIR`: this controller for a long run on a populated cluster under
//! churn, with one kube-apiserver restart, its memory sampled (issue 23 item 4).
//!
//! No upstream counterpart. On a cluster `hpactl cluster populate` made (the same `--hpas`,
//! `--pods-per-hpa`, `--namespaces`, `--metrics` and `--seed`, so the objects are regenerated here), the
//! controller runs for `duration`; every `churn_every` the next `churn_hpas` HPAs are deleted
//! with their Deployments and pods and created again (status included, times now), and the CPU
//! usage of `metric_pods` pods moves (within ±8% of its populated value, so HPAs stay near
//! their targets); at `restart_apiserver_at` kube-apiserver is stopped and started again. Every
//! `sample_every` the controller's resident memory (`VmRSS`) and its reconcile counter are read.
//! At the end: the RSS of the last ten minutes against minutes 10 to 20, the controller's error
//! lines (klog's `E` lines) outside the restart window, and reconciles per HPA per sync period
//! after recovery, per sample interval and overall.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt, TryStreamExt};
use hpa_fixtures::scenario::Scenario;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};
use serde::Serialize;
use serde_json::{Value, json};

use crate::apply::Applier;
use crate::bench::SELF;
use crate::control_plane::{Cluster, ClusterError, free_ports};
use crate::load::shift_times;
use crate::process;

/// What a soak does.
#[derive(Debug, Clone)]
pub struct SoakConfig {
    /// This controller's binary.
    pub binary: PathBuf,
    /// Flags added to its command line.
    pub flags: Vec<String>,
    /// How long it runs.
    pub duration: Duration,
    /// Time between churns.
    pub churn_every: Duration,
    /// HPAs (with their Deployment and pods) deleted and created again per churn.
    pub churn_hpas: usize,
    /// Pods whose CPU usage moves per churn.
    pub metric_pods: usize,
    /// When kube-apiserver is restarted (from the controller's start), if at all.
    pub restart_apiserver_at: Option<Duration>,
    /// Time between samples.
    pub sample_every: Duration,
    /// Requests in flight at once while churning.
    pub concurrency: usize,
}

/// One sample.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SoakSample {
    /// Seconds since the controller started.
    pub t_s: f64,
    /// The controller's resident memory, MiB.
    pub rss_mib: f64,
    /// Its reconcile counter, if `/metrics` answered.
    pub reconciles: Option<u64>,
}

/// What a soak measured (`--json`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SoakReport {
    /// The cluster's release.
    pub release: String,
    /// HPAs in the cluster.
    pub hpas: usize,
    /// The sync period the controller was given (15 s unless the flags set it).
    pub sync_period_s: f64,
    /// How long the controller ran.
    pub duration_s: f64,
    /// Every sample.
    pub samples: Vec<SoakSample>,
    /// Churns made.
    pub churns: usize,
    /// HPAs deleted and created again, in all.
    pub churned_hpas: usize,
    /// Pod metric values moved, in all.
    pub moved_metrics: usize,
    /// Seconds from the controller's start at which kube-apiserver was stopped.
    pub apiserver_stopped_at_s: Option<f64>,
    /// Seconds from the controller's start at which it was ready again.
    pub apiserver_ready_at_s: Option<f64>,
    /// Mean RSS over minutes 10 to 20, MiB.
    pub rss_mib_minutes_10_20: Option<f64>,
    /// Mean RSS over the last 10 minutes, MiB.
    pub rss_mib_last_10_minutes: Option<f64>,
    /// The last ten minutes' RSS over minutes 10 to 20's, minus one.
    pub rss_change: Option<f64>,
    /// The controller's error lines outside the restart window (its start to 2 minutes after
    /// the apiserver was ready again).
    pub error_lines: Vec<String>,
    /// Error lines inside the restart window.
    pub error_lines_in_restart_window: usize,
    /// Reconciles per HPA per sync period from 2 minutes after recovery to the end.
    pub reconciles_per_hpa_per_sync_after_recovery: Option<f64>,
    /// The lowest of the same over consecutive windows of at least a minute (where the
    /// counter answered at both ends).
    pub lowest_interval_reconciles_per_hpa_per_sync_after_recovery: Option<f64>,
}

/// How long after the apiserver is ready again errors still count as the restart's, and
/// coverage is not yet judged.
const RECOVERY: Duration = Duration::from_secs(120);

fn kind(obj: &Value) -> &str {
    obj.get("kind").and_then(Value::as_str).unwrap_or("")
}

/// The objects of one HPA of a generated cluster: the HPA, its Deployment, its pods and their
/// metrics (labelled `app: NAME`).
#[derive(Debug, Clone, Default)]
struct Unit {
    namespace: String,
    objects: Vec<Value>,
}

fn units(scenario: &Scenario) -> Vec<Unit> {
    let mut by: BTreeMap<(String, String), Unit> = BTreeMap::new();
    for o in &scenario.objects {
        let ns = o
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let app = match kind(o) {
            "HorizontalPodAutoscaler" => o.pointer("/metadata/name"),
            _ => o.pointer("/metadata/labels/app"),
        }
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
        if app.is_empty() {
            continue;
        }
        let unit = by.entry((ns.clone(), app)).or_insert_with(|| Unit {
            namespace: ns,
            objects: Vec::new(),
        });
        unit.objects.push(o.clone());
    }
    by.into_values().collect()
}

/// Moves each container's CPU usage written in millicores (as `hpactl generate` writes it)
/// within ±8% of its value; other forms are left as they are.
fn move_cpu(pod_metrics: &mut Value, rng: &mut fastrand::Rng) {
    let Some(containers) = pod_metrics
        .get_mut("containers")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for c in containers {
        let milli = c
            .pointer("/usage/cpu")
            .and_then(Value::as_str)
            .and_then(|v| v.strip_suffix('m'))
            .and_then(|v| v.parse::<f64>().ok());
        if let Some(milli) = milli {
            let f = 0.92 + rng.f64() * 0.16;
            c["usage"]["cpu"] = json!(format!("{}m", (milli * f).round() as i64));
        }
    }
}

/// klog's error lines (`E` and the month-day digits).
fn is_error_line(line: &str) -> bool {
    let b = line.as_bytes();
    b.len() > 5 && b[0] == b'E' && b[1..5].iter().all(u8::is_ascii_digit)
}

/// Mean of the samples' RSS with `from <= t < to` (seconds).
fn mean_rss(samples: &[SoakSample], from: f64, to: f64) -> Option<f64> {
    let v: Vec<f64> = samples
        .iter()
        .filter(|s| s.t_s >= from && s.t_s < to)
        .map(|s| s.rss_mib)
        .collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Reconciles per HPA per sync period between two `(seconds, reconcile counter)` samples.
fn rate(
    (t0, r0): (f64, u64),
    (t1, r1): (f64, u64),
    hpas: usize,
    sync_period_s: f64,
) -> Option<f64> {
    let periods = (t1 - t0) / sync_period_s;
    (periods > 0.0 && hpas > 0).then(|| r1.saturating_sub(r0) as f64 / hpas as f64 / periods)
}

/// Reconciles per HPA per sync period over the samples from `from` seconds on: overall, and
/// the lowest over consecutive windows of at least a minute.
fn coverage(
    samples: &[SoakSample],
    from: f64,
    hpas: usize,
    sync_period_s: f64,
) -> (Option<f64>, Option<f64>) {
    let after: Vec<(f64, u64)> = samples
        .iter()
        .filter(|s| s.t_s >= from)
        .filter_map(|s| s.reconciles.map(|r| (s.t_s, r)))
        .collect();
    if hpas == 0 || after.len() < 2 {
        return (None, None);
    }
    let rate = |a, b| rate(a, b, hpas, sync_period_s);
    let overall = rate(after[0], after[after.len() - 1]);
    // Consecutive windows of at least a minute (batched reconciles come in bursts, so a
    // sample interval shorter than the sync period says little on its own).
    let mut lowest: Option<f64> = None;
    let mut i = 0;
    while let Some(j) = (i + 1..after.len()).find(|&j| after[j].0 - after[i].0 >= 60.0) {
        if let Some(r) = rate(after[i], after[j]) {
            lowest = Some(lowest.map_or(r, |m| m.min(r)));
        }
        i = j;
    }
    (overall, lowest)
}

impl Cluster {
    /// Runs the soak (module docs). `scenario` is the generated cluster the populate made.
    pub async fn soak(
        &self,
        scenario: &Scenario,
        config: &SoakConfig,
        progress: impl Fn(&str),
    ) -> Result<SoakReport, ClusterError> {
        let units = units(scenario);
        let hpas = units.len();
        let sync_period_s =
            hpa_fixtures::bench::flag_value(&config.flags, "horizontal-pod-autoscaler-sync-period")
                .and_then(|v| v.parse::<hpa_config::GoDuration>().ok())
                .map_or(15.0, |d| d.to_std().as_secs_f64());
        let admin = self.admin_client().await?;
        self.stop_kcm()?;
        let [port] = free_ports::<1>()?;
        let record = self
            .start_self(SELF, &config.binary, port, &config.flags, false)
            .await?;
        let log_path = process::log_dir(self.dir()).join(format!("{SELF}.log"));
        let log_start = std::fs::metadata(&log_path).map_or(0, |m| m.len());
        let serving = self.serving_client(port).await?;
        let started = Instant::now();
        let wall_start = Timestamp::now();
        progress(&format!("{SELF} started (pid {}); {hpas} HPAs", record.pid));

        let mut samples = Vec::new();
        let mut next_sample = Duration::ZERO;
        let mut next_churn = config.churn_every;
        let mut churns = 0usize;
        let mut churned_hpas = 0usize;
        let mut moved_metrics = 0usize;
        let mut cursor = 0usize;
        let mut metric_cursor = 0usize;
        let mut restart = config.restart_apiserver_at;
        let mut stopped_at = None;
        let mut ready_at = None;
        let by_shift = Timestamp::now().duration_since(scenario.start);
        let pod_metrics: Vec<&Value> = units
            .iter()
            .flat_map(|u| u.objects.iter().filter(|o| kind(o) == "PodMetrics"))
            .collect();
        let mut rng = fastrand::Rng::with_seed(23);
        let result = async {
            loop {
                let now = started.elapsed();
                if now >= config.duration {
                    break;
                }
                if now >= next_sample {
                    let rss = hpa_fixtures::bench::vm_rss_kib(&record.pid.to_string()).unwrap_or(0) as f64 / 1024.0;
                    let reconciles = self.reconciles(&serving).await;
                    samples.push(SoakSample {
                        t_s: now.as_secs_f64(),
                        rss_mib: rss,
                        reconciles,
                    });
                    next_sample += config.sample_every;
                }
                if let Some(at) = restart
                    && now >= at
                {
                    restart = None;
                    progress("restarting kube-apiserver");
                    stopped_at = Some(started.elapsed().as_secs_f64());
                    self.restart_component("kube-apiserver").await?;
                    ready_at = Some(started.elapsed().as_secs_f64());
                    progress(&format!(
                        "kube-apiserver ready again after {:.1} s",
                        ready_at.unwrap_or(0.0) - stopped_at.unwrap_or(0.0)
                    ));
                }
                if now >= next_churn && hpas > 0 {
                    next_churn += config.churn_every;
                    let n = config.churn_hpas.min(hpas);
                    let picked: Vec<&Unit> =
                        (0..n).map(|k| &units[(cursor + k) % hpas]).collect();
                    cursor = (cursor + n) % hpas;
                    let t = Instant::now();
                    self.churn(&admin, &picked, by_shift, config.concurrency)
                        .await?;
                    churns += 1;
                    churned_hpas += n;
                    // Move some pods' CPU usage within ±8% of the populated value.
                    let m = config.metric_pods.min(pod_metrics.len());
                    let shift = Timestamp::now().duration_since(scenario.start);
                    let moved: Vec<Value> = (0..m)
                        .map(|k| {
                            let mut o = pod_metrics[(metric_cursor + k) % pod_metrics.len()].clone();
                            shift_times(&mut o, shift);
                            move_cpu(&mut o, &mut rng);
                            o
                        })
                        .collect();
                    metric_cursor = (metric_cursor + m) % pod_metrics.len().max(1);
                    for chunk in moved.chunks(5_000) {
                        self.metrics_step(&json!({ "apply": chunk })).await?;
                    }
                    moved_metrics += m;
                    progress(&format!(
                        "churn {churns}: {n} HPAs with their Deployments and pods deleted and created again, {m} pod metrics moved, in {:.1} s",
                        t.elapsed().as_secs_f64()
                    ));
                }
                let wake = next_sample.min(next_churn).min(config.duration);
                let wake = restart.map_or(wake, |r| wake.min(r));
                let sleep = wake.saturating_sub(started.elapsed());
                tokio::time::sleep(sleep.max(Duration::from_millis(50))).await;
            }
            Ok::<(), ClusterError>(())
        }
        .await;
        let duration_s = started.elapsed().as_secs_f64();
        self.stop_component(SELF, Duration::from_secs(10))?;
        result?;

        let log = std::fs::read(&log_path).unwrap_or_default();
        let log = String::from_utf8_lossy(log.get(log_start as usize..).unwrap_or_default());
        // Error lines by time of writing: klog's `E1126 14:00:00.000000`; the restart window in
        // wall-clock terms (klog's lines carry the local time).
        let window = stopped_at.zip(ready_at).map(|(s, r)| {
            (
                wall_start + jiff::SignedDuration::from_secs_f64(s),
                wall_start
                    + jiff::SignedDuration::from_secs_f64(r)
                    + jiff::SignedDuration::try_from(RECOVERY).unwrap_or_default(),
            )
        });
        let mut error_lines = Vec::new();
        let mut in_window = 0usize;
        for line in log.lines().filter(|l| is_error_line(l)) {
            let at = klog_time(line, wall_start);
            match (window, at) {
                (Some((a, b)), Some(t)) if t >= a && t <= b => in_window += 1,
                _ => error_lines.push(line.to_string()),
            }
        }
        let from_10 = mean_rss(&samples, 600.0, 1200.0);
        let last_10 = mean_rss(&samples, duration_s - 600.0, f64::INFINITY);
        let recovered = ready_at.map_or(0.0, |r| r + RECOVERY.as_secs_f64());
        let (overall, lowest) = coverage(&samples, recovered, hpas, sync_period_s);
        Ok(SoakReport {
            release: self.state().release.to_string(),
            hpas,
            sync_period_s,
            duration_s,
            samples,
            churns,
            churned_hpas,
            moved_metrics,
            apiserver_stopped_at_s: stopped_at,
            apiserver_ready_at_s: ready_at,
            rss_mib_minutes_10_20: from_10,
            rss_mib_last_10_minutes: last_10,
            rss_change: from_10.zip(last_10).map(|(a, b)| b / a - 1.0),
            error_lines,
            error_lines_in_restart_window: in_window,
            reconciles_per_hpa_per_sync_after_recovery: overall,
            lowest_interval_reconciles_per_hpa_per_sync_after_recovery: lowest,
        })
    }

    /// Deletes `units`' HPAs, Deployments and pods, then creates them again.
    async fn churn(
        &self,
        admin: &kube::Client,
        units: &[&Unit],
        by: jiff::SignedDuration,
        concurrency: usize,
    ) -> Result<(), ClusterError> {
        let dp = DeleteParams::default();
        // The HPAs first, then their targets and pods (as a user removes an app), so that no
        // HPA is reconciled against a target deleted under it.
        for phase in [&["HorizontalPodAutoscaler"][..], &["Deployment", "Pod"][..]] {
            self.delete_phase(admin, units, phase, &dp, concurrency)
                .await?;
        }
        self.recreate(admin, units, by, concurrency).await
    }

    async fn delete_phase(
        &self,
        admin: &kube::Client,
        units: &[&Unit],
        kinds: &[&str],
        dp: &DeleteParams,
        concurrency: usize,
    ) -> Result<(), ClusterError> {
        let deletes = units.iter().flat_map(|u| {
            u.objects
                .iter()
                .filter(|o| kinds.contains(&kind(o)))
                .map(|o| {
                    (
                        kind(o).to_string(),
                        u.namespace.clone(),
                        o.pointer("/metadata/name")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                    )
                })
        });
        stream::iter(deletes.map(|(k, ns, name)| {
            let admin = admin.clone();
            let dp = dp.clone();
            async move {
                let r = match k.as_str() {
                    "HorizontalPodAutoscaler" => {
                        Api::<HorizontalPodAutoscaler>::namespaced(admin, &ns)
                            .delete(&name, &dp)
                            .await
                            .map(|_| ())
                    }
                    "Deployment" => Api::<Deployment>::namespaced(admin, &ns)
                        .delete(&name, &dp)
                        .await
                        .map(|_| ()),
                    _ => Api::<Pod>::namespaced(admin, &ns)
                        .delete(&name, &dp)
                        .await
                        .map(|_| ()),
                };
                match r {
                    Ok(()) => Ok(()),
                    Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
                    Err(e) => Err(ClusterError::Api {
                        what: format!("deleting {k} {ns}/{name}"),
                        source: Box::new(e),
                    }),
                }
            }
        }))
        .buffer_unordered(concurrency.max(1))
        .try_collect::<Vec<()>>()
        .await?;
        Ok(())
    }

    /// Creates `units`' objects again in populate's order: Deployments, pods, then HPAs.
    async fn recreate(
        &self,
        admin: &kube::Client,
        units: &[&Unit],
        by: jiff::SignedDuration,
        concurrency: usize,
    ) -> Result<(), ClusterError> {
        let applier = Applier::new(admin.clone());
        for phase in ["Deployment", "Pod", "HorizontalPodAutoscaler"] {
            let objs: Vec<Value> = units
                .iter()
                .flat_map(|u| u.objects.iter().filter(|o| kind(o) == phase).cloned())
                .map(|mut o| {
                    shift_times(&mut o, by);
                    if phase == "Pod"
                        && let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut)
                    {
                        spec.entry("automountServiceAccountToken")
                            .or_insert(Value::Bool(false));
                    }
                    o
                })
                .collect();
            stream::iter(objs.into_iter().map(|mut o| {
                let mut applier = applier.clone();
                if phase == "HorizontalPodAutoscaler" {
                    // A new HPA has no status; the controller writes it.
                    if let Some(m) = o.as_object_mut() {
                        m.remove("status");
                    }
                }
                async move {
                    // The controller may write the object between its creation and its
                    // status: apply again from the object as it now stands.
                    let mut attempt = 0;
                    loop {
                        match applier.apply(o.clone()).await {
                            Ok(_) => return Ok(()),
                            Err(crate::apply::ApplyError::Api { source, .. })
                                if attempt < 5
                                    && matches!(&*source, kube::Error::Api(s) if s.code == 409) =>
                            {
                                attempt += 1;
                            }
                            Err(e) => return Err(e),
                        }
                    }
                }
            }))
            .buffer_unordered(concurrency.max(1))
            .try_collect::<Vec<()>>()
            .await?;
        }
        Ok(())
    }
}

/// The wall-clock time of a klog line (`E1126 14:00:00.123456 ...`, the system's local time),
/// in the year of `around`.
fn klog_time(line: &str, around: Timestamp) -> Option<Timestamp> {
    let month: i8 = line.get(1..3)?.parse().ok()?;
    let day: i8 = line.get(3..5)?.parse().ok()?;
    let hms = line.get(6..21)?;
    let tz = jiff::tz::TimeZone::system();
    let year = around.to_zoned(tz.clone()).year();
    let text = format!("{year:04}-{month:02}-{day:02}T{hms}");
    let civil: jiff::civil::DateTime = text.parse().ok()?;
    civil.to_zoned(tz).ok().map(|z| z.timestamp())
}

type Panel<'a, 'b> = plotters::chart::ChartContext<
    'a,
    plotters::backend::SVGBackend<'b>,
    plotters::coord::cartesian::Cartesian2d<
        plotters::coord::types::RangedCoordf64,
        plotters::coord::types::RangedCoordf64,
    >,
>;

/// One panel of the chart: minutes across, `0..y_max` up, its mesh drawn.
fn panel<'a, 'b>(
    area: &'a plotters::drawing::DrawingArea<
        plotters::backend::SVGBackend<'b>,
        plotters::coord::Shift,
    >,
    caption: &str,
    x_max: f64,
    y_max: f64,
) -> Result<Panel<'a, 'b>, String> {
    use plotters::prelude::*;
    let mut c = ChartBuilder::on(area)
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .caption(caption, ("sans-serif", 15))
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(|e| e.to_string())?;
    c.configure_mesh()
        .x_desc("minutes")
        .draw()
        .map_err(|e| e.to_string())?;
    Ok(c)
}

/// The vertical line at the apiserver's restart (`at` seconds), full height.
fn restart_line<'c, 'a, 'b>(
    c: &'c mut Panel<'a, 'b>,
    at: f64,
    y_max: f64,
) -> Result<&'c mut plotters::chart::SeriesAnno<'a, plotters::backend::SVGBackend<'b>>, String> {
    use plotters::prelude::*;
    c.draw_series(LineSeries::new(
        [(at / 60.0, 0.0), (at / 60.0, y_max)],
        RESTART_RED.stroke_width(1),
    ))
    .map_err(|e| e.to_string())
}

const RESTART_RED: plotters::style::RGBColor = plotters::style::RGBColor(214, 39, 40);

/// The soak's chart: RSS over time above, reconciles per HPA per sync period per sample
/// interval below, the apiserver restart marked; SVG text.
pub fn chart(report: &SoakReport, title: &str) -> Result<String, String> {
    use plotters::prelude::*;
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (1000, 620)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let root = root
            .titled(title, ("sans-serif", 20))
            .map_err(|e| err(&e))?;
        let (top, bottom) = root.split_vertically(330);
        let x_max = (report.duration_s / 60.0).max(1.0);
        let rss_max = report
            .samples
            .iter()
            .map(|s| s.rss_mib)
            .fold(1.0_f64, f64::max)
            * 1.15;
        let blue = RGBColor(31, 119, 180);
        let red = RESTART_RED;
        let mut c = panel(
            &top,
            "controller resident memory (VmRSS), MiB",
            x_max,
            rss_max,
        )?;
        c.draw_series(LineSeries::new(
            report.samples.iter().map(|s| (s.t_s / 60.0, s.rss_mib)),
            blue.stroke_width(2),
        ))
        .map_err(|e| err(&e))?;
        if let Some(at) = report.apiserver_stopped_at_s {
            restart_line(&mut c, at, rss_max)?
                .label("kube-apiserver restarted")
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], red));
            c.configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(|e| err(&e))?;
        }
        let rates: Vec<(f64, f64)> = report
            .samples
            .windows(2)
            .filter_map(|w| {
                let (a, b) = (&w[0], &w[1]);
                let r = rate(
                    (a.t_s, a.reconciles?),
                    (b.t_s, b.reconciles?),
                    report.hpas,
                    report.sync_period_s,
                )?;
                Some((b.t_s / 60.0, r))
            })
            .collect();
        let y_max = rates.iter().map(|r| r.1).fold(1.2_f64, f64::max);
        let mut c = panel(
            &bottom,
            "reconciles per HPA per sync period (1.0: every HPA every period)",
            x_max,
            y_max,
        )?;
        c.draw_series(LineSeries::new(rates, blue.stroke_width(1)))
            .map_err(|e| err(&e))?;
        if let Some(at) = report.apiserver_stopped_at_s {
            restart_line(&mut c, at, y_max)?;
        }
        root.present().map_err(|e| err(&e))?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t: f64, rss: f64, r: Option<u64>) -> SoakSample {
        SoakSample {
            t_s: t,
            rss_mib: rss,
            reconciles: r,
        }
    }

    #[test]
    fn cpu_usage_moves_within_eight_percent_and_only_in_millicores() {
        let mut rng = fastrand::Rng::with_seed(1);
        for _ in 0..100 {
            let mut o = json!({"containers": [
                {"name": "a", "usage": {"cpu": "100m", "memory": "1Mi"}},
                {"name": "b", "usage": {"cpu": "1"}}]});
            move_cpu(&mut o, &mut rng);
            let a = o["containers"][0]["usage"]["cpu"].as_str().unwrap();
            let milli: i64 = a.strip_suffix('m').unwrap().parse().unwrap();
            assert!((92..=108).contains(&milli), "{a}");
            assert_eq!(o["containers"][0]["usage"]["memory"], "1Mi");
            assert_eq!(o["containers"][1]["usage"]["cpu"], "1");
        }
        let mut none = json!({"kind": "PodMetrics"});
        move_cpu(&mut none, &mut rng);
        assert_eq!(none, json!({"kind": "PodMetrics"}));
    }

    #[test]
    fn error_lines_are_klogs_e_lines() {
        assert!(is_error_line("E1126 14:00:00.123456    42 x.rs:1] boom"));
        assert!(!is_error_line("I1126 14:00:00.123456    42 x.rs:1] fine"));
        assert!(!is_error_line("Error: leaderelection lost"));
        let t = klog_time(
            "E1126 14:00:00.123456    42 x.rs:1] boom",
            "2026-11-26T00:00:00Z".parse().unwrap(),
        );
        assert_eq!(t, Some("2026-11-26T14:00:00.123456Z".parse().unwrap()));
    }

    #[test]
    fn rss_means_and_coverage_over_their_windows() {
        let s: Vec<SoakSample> = (0..=12u32)
            .map(|i| {
                sample(
                    f64::from(i) * 150.0,
                    100.0 + f64::from(i),
                    Some(u64::from(i) * 1000),
                )
            })
            .collect();
        // Minutes 10-20: samples at 600, 750, 900, 1050 s.
        assert_eq!(
            mean_rss(&s, 600.0, 1200.0),
            Some((104.0 + 105.0 + 106.0 + 107.0) / 4.0)
        );
        assert_eq!(mean_rss(&s, 5000.0, 6000.0), None);
        // 1000 reconciles per 150 s for 100 HPAs at 15 s: 1.0 per HPA per period.
        let (overall, lowest) = coverage(&s, 300.0, 100, 15.0);
        assert!((overall.unwrap() - 1.0).abs() < 1e-9);
        assert!((lowest.unwrap() - 1.0).abs() < 1e-9);
        // Windows of a minute or more: 0-150, 150-300, ...; one with 100 reconciles in 150 s.
        let mut gap = s.clone();
        for x in gap.iter_mut().skip(5) {
            x.reconciles = x.reconciles.map(|r| r - 900);
        }
        let (_, lowest) = coverage(&gap, 0.0, 100, 15.0);
        assert!((lowest.unwrap() - 0.1).abs() < 1e-9, "{lowest:?}");
        assert_eq!(coverage(&s, 0.0, 0, 15.0), (None, None));
    }

    #[test]
    fn a_generated_cluster_splits_into_one_unit_per_hpa() {
        let doc = hpa_fixtures::generate(&hpa_fixtures::generate::GenerateConfig {
            hpas: 3,
            pods_per_hpa: 2,
            namespaces: 2,
            ..Default::default()
        })
        .unwrap();
        let scenario = hpa_fixtures::scenario::scenario_from_value(doc, "(generated)").unwrap();
        let u = units(&scenario);
        assert_eq!(u.len(), 3);
        for unit in &u {
            let kinds: Vec<&str> = unit.objects.iter().map(kind).collect();
            assert_eq!(
                kinds
                    .iter()
                    .filter(|k| **k == "HorizontalPodAutoscaler")
                    .count(),
                1
            );
            assert_eq!(kinds.iter().filter(|k| **k == "Deployment").count(), 1);
            assert_eq!(kinds.iter().filter(|k| **k == "Pod").count(), 2);
            assert_eq!(kinds.iter().filter(|k| **k == "PodMetrics").count(), 2);
        }
    }

    #[test]
    fn the_chart_draws() {
        let report = SoakReport {
            release: "1.37.2".into(),
            hpas: 10,
            sync_period_s: 15.0,
            duration_s: 300.0,
            samples: (0..10u32)
                .map(|i| sample(f64::from(i) * 30.0, 50.0, Some(u64::from(i) * 20)))
                .collect(),
            churns: 1,
            churned_hpas: 1,
            moved_metrics: 1,
            apiserver_stopped_at_s: Some(120.0),
            apiserver_ready_at_s: Some(130.0),
            rss_mib_minutes_10_20: None,
            rss_mib_last_10_minutes: None,
            rss_change: None,
            error_lines: vec![],
            error_lines_in_restart_window: 0,
            reconciles_per_hpa_per_sync_after_recovery: None,
            lowest_interval_reconciles_per_hpa_per_sync_after_recovery: None,
        };
        let svg = chart(&report, "soak").unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..50]);
        assert!(svg.contains("kube-apiserver restarted"));
    }
}
