//! `hpactl drive`: plays a workload into a real cluster in wall-clock time, for whichever HPA
//! controller runs there (upstream's kube-controller-manager, this one, or both with one in
//! `--shadow`).
//!
//! No kubelet, scheduler or workload controller runs in the harness's clusters; the driver plays
//! them, as objects only. For every unit of the [`plan::Plan`]:
//!
//! - it creates the namespace, the scale target (status set through the status subresource),
//!   the pods and the HPA;
//! - every tick (1 s) it reads the targets' `spec.replicas` (one list per kind) and follows
//!   them as a ReplicaSet and the kubelet would: new pods start Running and not Ready and turn
//!   Ready the workload's `readyAfter` later; on a scale-down the pods not Ready go first, then
//!   the newest; the target's status counts the pods and the Ready ones;
//! - it moves metric values in the aggregated metrics server (`Cluster::metrics_step`) when the
//!   load timelines step or the Ready pods change, as `hpactl simulate` spreads load
//!   (`docs/simulate-format.md`, "From load to metrics"), timestamped when they changed;
//! - it arms the plan's metric API failures for their windows and applies its HPA edits.
//!
//! Given the plan (a seed) and the controller's decisions, what it does is determined; the
//! controller's decisions are what a recording keeps.

pub mod plan;

// Each Ready pod's share of a unit's load, as `hpactl simulate` spreads it.
use hpa_fixtures::simulate::engine::pod_shares as shares;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::time::Duration;

use jiff::Timestamp;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

use crate::apply::Applier;
use crate::control_plane::{Cluster, ClusterError};
use plan::{Plan, TargetKind, Unit};

/// The label on every object the driver creates (targets are listed by it).
pub const DRIVE_LABEL: &str = "hpa-drive";

/// What a drive did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct DriveReport {
    /// Units (HPAs).
    pub units: usize,
    /// Seconds driven.
    pub seconds: u64,
    /// Changes of a target's `spec.replicas` the driver followed.
    pub scale_changes: usize,
    /// Pods created.
    pub pods_created: usize,
    /// Pods deleted.
    pub pods_deleted: usize,
    /// Pods turned Ready.
    pub pods_ready: usize,
    /// Metric value changes pushed to the metrics server.
    pub metric_updates: usize,
    /// Fault windows armed.
    pub faults_armed: usize,
    /// HPA edits applied.
    pub edits: usize,
    /// Changes of a unit's inputs that were not yet fully applied when its quiet window
    /// (see [`SyncClock`]) closed: a reconcile may have read them half-applied.
    pub late_changes: usize,
}

/// One pod the driver plays.
#[derive(Debug, Clone)]
struct PodState {
    name: String,
    created: Timestamp,
    ready_at: Timestamp,
    ready: bool,
}

/// What the driver keeps per unit.
#[derive(Debug, Default)]
struct UnitState {
    pods: Vec<PodState>,
    next_pod: usize,
    spec_replicas: Option<i64>,
    status: Option<(i64, i64)>,
    /// The metric values last pushed, as the objects (without timestamps).
    pushed: BTreeMap<String, Value>,
    edits_done: usize,
    /// The drive's time when this unit's inputs were last brought up to date.
    offset: Duration,
}

fn quantity(milli: f64) -> String {
    let m = milli.round().max(0.0) as i64;
    if m % 1000 == 0 {
        format!("{}", m / 1000)
    } else {
        format!("{m}m")
    }
}

/// Bytes from milli-bytes, as metrics-server reports memory (whole bytes).
fn bytes(milli: f64) -> String {
    format!("{}", (milli / 1000.0).round().max(0.0) as i64)
}

fn api_err(what: String) -> impl FnOnce(kube::Error) -> ClusterError {
    move |source| ClusterError::Api {
        what,
        source: Box::new(source),
    }
}

fn resource(kind: TargetKind) -> ApiResource {
    let (group, version) = kind
        .api_version()
        .split_once('/')
        .unwrap_or(("", kind.api_version()));
    ApiResource {
        plural: kind.plural().to_string(),
        ..ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind.kind()))
    }
}

fn pod_template(unit: &Unit) -> Value {
    let requests: serde_json::Map<String, Value> = unit
        .workload
        .requests
        .iter()
        .map(|(k, milli)| {
            let v = if k == "memory" {
                bytes(*milli as f64)
            } else {
                quantity(*milli as f64)
            };
            (k.clone(), json!(v))
        })
        .collect();
    json!({
        "metadata": {"labels": {"app": unit.target_name()}},
        "spec": {"containers": [{
            "name": unit.workload.container,
            "image": "registry.invalid/drive:1",
            "resources": {"requests": requests},
        }]},
    })
}

/// The scale target's object, `replicas` in its spec.
fn target_object(unit: &Unit, replicas: i32) -> Value {
    let name = unit.target_name();
    let metadata =
        json!({"name": name, "namespace": unit.namespace, "labels": {DRIVE_LABEL: "true"}});
    let selector = json!({"matchLabels": {"app": name}});
    let mut obj = json!({
        "apiVersion": unit.target.api_version(),
        "kind": unit.target.kind(),
        "metadata": metadata,
    });
    obj["spec"] = match unit.target {
        TargetKind::Deployment | TargetKind::ReplicaSet => {
            json!({"replicas": replicas, "selector": selector, "template": pod_template(unit)})
        }
        TargetKind::StatefulSet => json!({
            "replicas": replicas, "serviceName": name, "selector": selector,
            "template": pod_template(unit),
        }),
        TargetKind::ReplicationController => json!({
            "replicas": replicas, "selector": {"app": name}, "template": pod_template(unit),
        }),
        TargetKind::Widget => json!({"replicas": replicas}),
    };
    obj
}

/// The target's status for `pods` pods of which `ready` are Ready, as its controller would
/// write it (the fields each kind's validation relates).
fn target_status(unit: &Unit, pods: i64, ready: i64) -> Value {
    match unit.target {
        TargetKind::Deployment => json!({
            "replicas": pods, "updatedReplicas": pods, "readyReplicas": ready,
            "availableReplicas": ready, "observedGeneration": 1,
        }),
        TargetKind::StatefulSet => json!({
            "replicas": pods, "currentReplicas": pods, "updatedReplicas": pods,
            "readyReplicas": ready, "availableReplicas": ready, "observedGeneration": 1,
        }),
        TargetKind::ReplicaSet | TargetKind::ReplicationController => json!({
            "replicas": pods, "fullyLabeledReplicas": pods, "readyReplicas": ready,
            "availableReplicas": ready, "observedGeneration": 1,
        }),
        TargetKind::Widget => json!({
            "replicas": pods, "selector": format!("app={}", unit.target_name()),
        }),
    }
}

fn pod_object(unit: &Unit, name: &str) -> Value {
    let mut template = pod_template(unit);
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": unit.namespace,
            "labels": template["metadata"]["labels"].take(),
        },
        "spec": template["spec"].take(),
    })
}

fn pod_status(pod: &PodState) -> Value {
    let ready_time = if pod.ready { pod.ready_at } else { pod.created };
    json!({
        "phase": "Running",
        "startTime": format!("{:.0}", pod.created),
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": format!("{:.0}", pod.created)},
            {"type": "Ready", "status": if pod.ready { "True" } else { "False" },
             "lastTransitionTime": format!("{:.0}", ready_time)},
        ],
    })
}

/// When the controller under test reconciles each unit, read as it runs from its log
/// (kube-controller-manager at `--v=4`: `hpa_fixtures::record::reconcile_line`). The driver
/// then changes a unit's inputs only well between two of its reconciles (at least
/// [`QUIET_AFTER`] after one and [`QUIET_BEFORE`] before the next, at the cadence seen), so a
/// recorder sampling every second sees which inputs each reconcile read. Without it, changes
/// happen whenever the workload calls for them.
#[derive(Debug)]
pub struct SyncClock {
    path: std::path::PathBuf,
    offset: u64,
    partial: String,
    year: i16,
    /// HPA key or `Kind/namespace/name` → unit.
    index: BTreeMap<String, usize>,
    /// Per unit: the start of its last reconcile and the one before.
    last: Vec<(Option<Timestamp>, Option<Timestamp>)>,
    period: Duration,
}

/// The least time after a reconcile before the driver changes that unit's inputs.
pub const QUIET_AFTER: Duration = Duration::from_millis(1200);
/// The least time before the next expected reconcile in which it still changes them.
pub const QUIET_BEFORE: Duration = Duration::from_millis(2000);

impl SyncClock {
    /// Follows the log at `path` (from its current end) for `plan`'s units; `period` is the
    /// sync period until two reconciles of a unit show the cadence.
    pub fn new(path: &std::path::Path, plan: &Plan, period: Duration) -> Self {
        let offset = std::fs::metadata(path).map_or(0, |m| m.len());
        let mut index = BTreeMap::new();
        for (i, u) in plan.units.iter().enumerate() {
            index.insert(format!("{}/{}", u.namespace, u.hpa_name()), i);
            index.insert(
                format!("{}/{}/{}", u.target.kind(), u.namespace, u.target_name()),
                i,
            );
        }
        SyncClock {
            path: path.to_path_buf(),
            offset,
            partial: String::new(),
            year: Timestamp::now().to_zoned(jiff::tz::TimeZone::UTC).year(),
            index,
            last: vec![(None, None); plan.units.len()],
            period,
        }
    }

    /// Reads what the log gained since the last poll.
    pub fn poll(&mut self) {
        use std::io::{Read as _, Seek as _};
        let Ok(mut f) = std::fs::File::open(&self.path) else {
            return;
        };
        if f.seek(std::io::SeekFrom::Start(self.offset)).is_err() {
            return;
        }
        let mut buf = String::new();
        let Ok(n) = f.read_to_string(&mut buf) else {
            return;
        };
        self.offset += n as u64;
        self.partial.push_str(&buf);
        let complete = match self.partial.rfind('\n') {
            Some(i) => self.partial[..=i].to_string(),
            None => return,
        };
        self.partial = self.partial[complete.len()..].to_string();
        for line in complete.lines() {
            let Some((at, subject)) = hpa_fixtures::record::reconcile_line(line, self.year) else {
                continue;
            };
            let key = match subject {
                hpa_fixtures::record::LogSubject::Hpa(k) => k,
                hpa_fixtures::record::LogSubject::Target {
                    kind,
                    namespace,
                    name,
                } => format!("{kind}/{namespace}/{name}"),
            };
            let Some(&unit) = self.index.get(&key) else {
                continue;
            };
            let (last, before) = &mut self.last[unit];
            // Lines less than a second after a reconcile's first belong to it.
            if last.is_some_and(|l| at.duration_since(l) <= jiff::SignedDuration::from_secs(1)) {
                continue;
            }
            *before = *last;
            *last = Some(at);
        }
    }

    /// Whether `unit`'s inputs may change at `now`.
    ///
    /// kube-controller-manager requeues an HPA one sync period after it was dequeued (its
    /// own re-add and its informer's resync both wait a period), and its first log line of a
    /// reconcile comes after the metrics were read: two lines can be closer than a period by
    /// as much as one reconcile's reading took. So the next reconcile is expected one period
    /// after the last line, or sooner when the cadence seen is shorter, and nothing changes
    /// in the [`QUIET_BEFORE`] before that.
    pub fn quiet(&self, unit: usize, now: Timestamp) -> bool {
        let Some((Some(last), before)) = self.last.get(unit) else {
            return true;
        };
        let period = before
            .map(|b| last.duration_since(b))
            .and_then(|d| Duration::try_from(d).ok())
            .filter(|d| *d >= Duration::from_secs(1))
            .map_or(self.period, |seen| seen.min(self.period));
        let Ok(since) = Duration::try_from(now.duration_since(*last)) else {
            return false;
        };
        // Past the next reconcile's time (late, or not logged yet): wait for it, unless it is
        // long overdue.
        if since + QUIET_BEFORE > period {
            return since > 3 * period;
        }
        since >= QUIET_AFTER
    }
}

/// Runs `plan` against `cluster` until its duration has passed or `shutdown` completes;
/// with `clock`, each unit's inputs change only between its reconciles.
pub async fn drive(
    cluster: &Cluster,
    plan: &Plan,
    mut clock: Option<SyncClock>,
    shutdown: impl Future<Output = ()>,
) -> Result<DriveReport, ClusterError> {
    let client = cluster.admin_client().await?;
    let mut report = DriveReport {
        units: plan.units.len(),
        ..DriveReport::default()
    };
    let mut states: Vec<UnitState> = plan.units.iter().map(|_| UnitState::default()).collect();
    let origin = Timestamp::now();
    setup(cluster, &client, plan, &mut states, origin, &mut report).await?;
    let start = tokio::time::Instant::now();
    let mut shutdown = std::pin::pin!(shutdown);
    // With a clock, ticks are finer so that changes land in the quiet windows.
    let tick_every = if clock.is_some() {
        Duration::from_millis(250)
    } else {
        Duration::from_secs(1)
    };
    let mut interval = tokio::time::interval(tick_every);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut armed: Vec<Value> = Vec::new();
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            _ = interval.tick() => {}
        }
        let elapsed = start.elapsed();
        if elapsed >= plan.duration {
            break;
        }
        tick(
            cluster,
            &client,
            plan,
            &mut states,
            elapsed,
            clock.as_mut(),
            &mut armed,
            &mut report,
        )
        .await?;
    }
    // Disarm what is still armed.
    if !armed.is_empty() {
        cluster.metrics_step(&json!({"faults": []})).await?;
    }
    report.seconds = start.elapsed().as_secs();
    Ok(report)
}

async fn setup(
    cluster: &Cluster,
    client: &kube::Client,
    plan: &Plan,
    states: &mut [UnitState],
    now: Timestamp,
    report: &mut DriveReport,
) -> Result<(), ClusterError> {
    let mut applier = Applier::new(client.clone());
    if plan.units.iter().any(|u| u.target == TargetKind::Widget) {
        applier.apply(plan::widget_crd()).await?;
        crate::load::wait_established(client, &format!("widgets.{}", plan::WIDGET_GROUP)).await?;
        applier.forget_kinds();
    }
    let started = now - jiff::SignedDuration::from_mins(10);
    let ready_since = now - jiff::SignedDuration::from_mins(9);
    let mut metrics = MetricDelta::default();
    for (unit, state) in plan.units.iter().zip(states.iter_mut()) {
        crate::load::ensure_namespace(&mut applier, &unit.namespace).await?;
        let replicas = unit.workload.replicas;
        for _ in 0..replicas {
            let name = format!("{}-{}", unit.target_name(), state.next_pod);
            state.next_pod += 1;
            let pod = PodState {
                name,
                created: started,
                ready_at: ready_since,
                ready: true,
            };
            let mut obj = pod_object(unit, &pod.name);
            obj["status"] = pod_status(&pod);
            applier.apply(obj).await?;
            state.pods.push(pod);
            report.pods_created += 1;
        }
        let mut target = target_object(unit, replicas);
        let n = i64::from(replicas);
        target["status"] = target_status(unit, n, n);
        applier.apply(target).await?;
        state.status = Some((n, n));
        state.spec_replicas = Some(n);
        metrics.extend(metric_changes(unit, state, Duration::ZERO, now, report));
    }
    // The metrics before the HPAs, so no HPA reads a pod without them.
    push(cluster, &metrics, &[]).await?;
    for unit in &plan.units {
        let hpa = serde_json::to_value(&unit.hpa).unwrap_or_default();
        applier.apply(hpa).await?;
    }
    Ok(())
}

/// Metric objects to store and to delete in the metrics server.
#[derive(Debug, Default)]
struct MetricDelta {
    apply: Vec<Value>,
    delete: Vec<Value>,
}

impl MetricDelta {
    fn extend(&mut self, other: MetricDelta) {
        self.apply.extend(other.apply);
        self.delete.extend(other.delete);
    }

    fn is_empty(&self) -> bool {
        self.apply.is_empty() && self.delete.is_empty()
    }
}

/// Sends a metrics delta with the faults that must stay armed (a step replaces them).
async fn push(
    cluster: &Cluster,
    delta: &MetricDelta,
    faults: &[Value],
) -> Result<(), ClusterError> {
    cluster
        .metrics_step(&json!({"apply": delta.apply, "delete": delta.delete, "faults": faults}))
        .await
}

/// The metric objects `unit` should have now (its Ready pods' samples, its object and
/// external values, and the pods that select them), keyed by identity.
fn desired_metrics(unit: &Unit, state: &UnitState, offset: Duration) -> BTreeMap<String, Value> {
    let ns = &unit.namespace;
    let ready: Vec<&PodState> = {
        let mut r: Vec<&PodState> = state.pods.iter().filter(|p| p.ready).collect();
        r.sort_by_key(|p| (p.created, p.name.clone()));
        r
    };
    let load = |key: &str| unit.load.get(key).map(|s| s.at(offset));
    let window = format!("{}s", unit.workload.metrics_window.as_secs());
    let mut out = BTreeMap::new();
    let labels = json!({"app": unit.target_name()});
    // Every pod, Ready or not, as the metrics server's pod lister sees it (custom metrics are
    // selected by the labels of the pods they describe).
    for p in &state.pods {
        out.insert(
            format!("pod/{}", p.name),
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": p.name, "namespace": ns, "labels": labels}}),
        );
    }
    // Resource metrics: every Ready pod reports cpu and memory (a share of the load, or a
    // small constant where the plan has no such load).
    let cpu = shares(load("cpu").unwrap_or(0.0), ready.len(), unit.workload.skew);
    let memory = shares(
        load("memory").unwrap_or(0.0),
        ready.len(),
        unit.workload.skew,
    );
    for (i, p) in ready.iter().enumerate() {
        let cpu = if unit.load.contains_key("cpu") {
            cpu[i]
        } else {
            10.0
        };
        let mem = if unit.load.contains_key("memory") {
            memory[i]
        } else {
            64.0 * 1024.0 * 1024.0 * 1000.0
        };
        out.insert(
            format!("podmetrics/{}", p.name),
            json!({"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics",
                   "metadata": {"name": p.name, "namespace": ns, "labels": labels},
                   "window": window,
                   "containers": [{"name": unit.workload.container,
                                   "usage": {"cpu": quantity(cpu), "memory": bytes(mem)}}]}),
        );
    }
    for m in unit.hpa.spec.metrics.as_deref().unwrap_or_default() {
        match m.type_.as_str() {
            "Pods" => {
                let Some(pods) = &m.pods else { continue };
                let name = &pods.metric.name;
                let per = shares(load(name).unwrap_or(0.0), ready.len(), unit.workload.skew);
                for (i, p) in ready.iter().enumerate() {
                    out.insert(
                        format!("custom/{name}/{}", p.name),
                        json!({"apiVersion": "custom.metrics.k8s.io/v1beta2", "kind": "MetricValue",
                               "describedObject": {"apiVersion": "v1", "kind": "Pod", "name": p.name, "namespace": ns},
                               "metric": {"name": name},
                               "windowSeconds": unit.workload.metrics_window.as_secs(),
                               "value": quantity(per[i])}),
                    );
                }
            }
            "Object" => {
                let Some(o) = &m.object else { continue };
                let name = &o.metric.name;
                let d = &o.described_object;
                out.insert(
                    format!("object/{name}/{}/{}", d.kind, d.name),
                    json!({"apiVersion": "custom.metrics.k8s.io/v1beta2", "kind": "MetricValue",
                           "describedObject": {"apiVersion": d.api_version.clone().unwrap_or_default(),
                                               "kind": d.kind, "name": d.name, "namespace": ns},
                           "metric": {"name": name},
                           "windowSeconds": unit.workload.metrics_window.as_secs(),
                           "value": quantity(load(name).unwrap_or(0.0))}),
                );
            }
            "External" => {
                let Some(e) = &m.external else { continue };
                let name = &e.metric.name;
                let labels = e
                    .metric
                    .selector
                    .as_ref()
                    .and_then(|s| s.match_labels.clone())
                    .unwrap_or_default();
                out.insert(
                    format!("external/{name}"),
                    json!({"apiVersion": "external.metrics.k8s.io/v1beta1", "kind": "ExternalMetricValue",
                           "metadata": {"namespace": ns},
                           "metricName": name, "metricLabels": labels,
                           "window": unit.workload.metrics_window.as_secs(),
                           "value": quantity(load(name).unwrap_or(0.0))}),
                );
            }
            _ => {}
        }
    }
    out
}

/// The time field each metric object carries.
fn stamp(obj: &mut Value, now: Timestamp) {
    let t = format!("{:.0}", now);
    if let Some("PodMetrics" | "ExternalMetricValue" | "MetricValue") = obj["kind"].as_str() {
        obj["timestamp"] = json!(t);
    }
}

/// What changed in `unit`'s metrics since the last push: changed or new objects (stamped
/// `now`) and removed ones.
fn metric_changes(
    unit: &Unit,
    state: &mut UnitState,
    offset: Duration,
    now: Timestamp,
    report: &mut DriveReport,
) -> MetricDelta {
    let desired = desired_metrics(unit, state, offset);
    let mut delta = MetricDelta::default();
    for (key, obj) in &desired {
        if state.pushed.get(key) != Some(obj) {
            let mut stamped = obj.clone();
            stamp(&mut stamped, now);
            delta.apply.push(stamped);
            if !key.starts_with("pod/") {
                report.metric_updates += 1;
            }
        }
    }
    for (key, obj) in &state.pushed {
        if !desired.contains_key(key) {
            let name = obj
                .pointer("/metadata/name")
                .or_else(|| obj.pointer("/describedObject/name"));
            delta.delete.push(json!({
                "apiVersion": obj["apiVersion"], "kind": obj["kind"],
                "namespace": unit.namespace, "name": name,
            }));
        }
    }
    // MetricValues are deleted by replacing them: the fixture names them by what they
    // describe, so only PodMetrics and Pods need a delete.
    delta
        .delete
        .retain(|d| matches!(d["kind"].as_str(), Some("PodMetrics" | "Pod")));
    state.pushed = desired;
    delta
}

/// The faults armed at each unit's offset (the drive's time when its inputs last changed), as
/// a scenario step's `faults`.
fn active_faults(plan: &Plan, states: &[UnitState]) -> Vec<Value> {
    plan.units
        .iter()
        .zip(states)
        .flat_map(|(u, s)| u.faults.iter().map(move |f| (u, f, s.offset)))
        .filter(|(_, f, offset)| f.from <= *offset && *offset < f.until)
        .map(|(u, f, _)| (u, f))
        .flat_map(|(u, f)| {
            ["get", "list"].into_iter().map(move |verb| {
                json!({
                    "verb": verb,
                    "path": format!("^/apis/{}/[^/]+/namespaces/{}/", regex_escape(&f.group), regex_escape(&u.namespace)),
                    "status": f.status,
                })
            })
        })
        .collect()
}

fn regex_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            let escape = matches!(
                c,
                '.' | '*' | '+' | '?' | '(' | ')' | '[' | ']' | '{' | '}' | '|' | '^' | '$' | '\\'
            );
            escape.then_some('\\').into_iter().chain(std::iter::once(c))
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
async fn tick(
    cluster: &Cluster,
    client: &kube::Client,
    plan: &Plan,
    states: &mut [UnitState],
    offset: Duration,
    mut clock: Option<&mut SyncClock>,
    armed: &mut Vec<Value>,
    report: &mut DriveReport,
) -> Result<(), ClusterError> {
    // The targets' spec.replicas, one list per kind.
    let mut replicas: BTreeMap<(String, String), i64> = BTreeMap::new();
    let kinds: BTreeSet<TargetKind> = plan.units.iter().map(|u| u.target).collect();
    for kind in kinds {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource(kind));
        let list = api
            .list(&ListParams::default().labels(&format!("{DRIVE_LABEL}=true")))
            .await
            .map_err(api_err(format!("listing {}", kind.plural())))?;
        for o in list {
            let r = o.data["spec"]["replicas"].as_i64().unwrap_or(1);
            replicas.insert(
                (
                    o.metadata.namespace.clone().unwrap_or_default(),
                    o.metadata.name.clone().unwrap_or_default(),
                ),
                r,
            );
        }
    }
    for i in 0..plan.units.len() {
        let unit = &plan.units[i];
        // Each unit's window is checked when its turn comes (a tick over many units takes
        // time) and its changes are pushed at once, so they land inside the window.
        let now = Timestamp::now();
        if let Some(c) = clock.as_deref_mut() {
            c.poll();
            if !c.quiet(i, now) {
                continue;
            }
        }
        let writes = |r: &DriveReport| r.pods_created + r.pods_deleted + r.pods_ready + r.edits;
        let writes_before = writes(report);
        let status_before = states[i].status;
        let state = &mut states[i];
        state.offset = offset;
        let ns = unit.namespace.clone();
        let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), &ns);
        if let Some(&want) = replicas.get(&(ns.clone(), unit.target_name().to_string())) {
            if state.spec_replicas != Some(want) {
                report.scale_changes += 1;
                state.spec_replicas = Some(want);
            }
            let want = usize::try_from(want.max(0)).unwrap_or(0);
            while state.pods.len() < want {
                let name = format!("{}-{}", unit.target_name(), state.next_pod);
                state.next_pod += 1;
                let pod = PodState {
                    name,
                    created: now,
                    ready_at: now
                        + jiff::SignedDuration::try_from(unit.workload.ready_after)
                            .unwrap_or_default(),
                    ready: false,
                };
                let obj: k8s_openapi::api::core::v1::Pod =
                    serde_json::from_value(pod_object(unit, &pod.name)).unwrap_or_default();
                let mut created = pods
                    .create(&PostParams::default(), &obj)
                    .await
                    .map_err(api_err(format!("creating pod {ns}/{}", pod.name)))?;
                created.status = serde_json::from_value(pod_status(&pod)).ok();
                pods.replace_status(&pod.name, &PostParams::default(), &created)
                    .await
                    .map_err(api_err(format!(
                        "setting the status of pod {ns}/{}",
                        pod.name
                    )))?;
                state.pods.push(pod);
                report.pods_created += 1;
            }
            while state.pods.len() > want {
                // Not Ready first, then the newest.
                let victim = state
                    .pods
                    .iter()
                    .enumerate()
                    .max_by_key(|(_, p)| (!p.ready, p.created, p.name.clone()))
                    .map(|(i, _)| i)
                    .unwrap_or(0);
                let pod = state.pods.remove(victim);
                pods.delete(&pod.name, &DeleteParams::default().grace_period(0))
                    .await
                    .map_err(api_err(format!("deleting pod {ns}/{}", pod.name)))?;
                report.pods_deleted += 1;
            }
        }
        for pod in state
            .pods
            .iter_mut()
            .filter(|p| !p.ready && p.ready_at <= now)
        {
            pod.ready = true;
            pods.patch_status(
                &pod.name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": pod_status(pod)})),
            )
            .await
            .map_err(api_err(format!("making pod {ns}/{} Ready", pod.name)))?;
            report.pods_ready += 1;
        }
        let n = state.pods.len() as i64;
        let ready = state.pods.iter().filter(|p| p.ready).count() as i64;
        if state.status != Some((n, ready)) {
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), &ns, &resource(unit.target));
            api.patch_status(
                unit.target_name(),
                &PatchParams::default(),
                &Patch::Merge(json!({"status": target_status(unit, n, ready)})),
            )
            .await
            .map_err(api_err(format!(
                "setting the status of {} {ns}/{}",
                unit.target.kind(),
                unit.target_name()
            )))?;
            state.status = Some((n, ready));
        }
        while let Some(edit) = unit.edits.get(state.edits_done) {
            if edit.at > offset {
                break;
            }
            let hpas: Api<k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler> =
                Api::namespaced(client.clone(), &ns);
            hpas.patch(
                unit.hpa_name(),
                &PatchParams::default(),
                &Patch::Merge(&edit.patch),
            )
            .await
            .map_err(api_err(format!("editing HPA {ns}/{}", unit.hpa_name())))?;
            state.edits_done += 1;
            report.edits += 1;
        }
        let status_changed = state.status != status_before;
        let delta = metric_changes(unit, state, offset, now, report);
        let faults = active_faults(plan, states);
        let changed = faults != *armed || !delta.is_empty();
        if changed {
            if faults.len() > armed.len() {
                report.faults_armed += (faults.len() - armed.len()) / 2;
            }
            push(cluster, &delta, &faults).await?;
            *armed = faults;
        }
        let changed = changed || status_changed || writes(report) != writes_before;
        if changed && let Some(c) = clock.as_deref_mut() {
            c.poll();
            if !c.quiet(i, Timestamp::now()) {
                report.late_changes += 1;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn shares_spread_as_simulate_does() {
        assert_eq!(shares(300.0, 3, 0.0), vec![100.0, 100.0, 100.0]);
        let s = shares(300.0, 3, 0.5);
        assert_eq!(s, vec![50.0, 100.0, 150.0]);
        assert!(shares(10.0, 0, 0.0).is_empty());
    }

    #[test]
    fn the_sync_clock_keeps_changes_between_reconciles() {
        let plan = plan::generate(&plan::GenerateOptions {
            seed: 1,
            hpas: 2,
            duration: Duration::from_secs(60),
            minor: 37,
            namespace_prefix: "d".into(),
        });
        let path = std::env::temp_dir().join(format!("sync-clock-{}.log", std::process::id()));
        std::fs::write(&path, "old line\n").unwrap();
        let mut clock = SyncClock::new(&path, &plan, Duration::from_secs(5));
        let t0 = Timestamp::now();
        let line = |t: Timestamp, rest: &str| {
            format!(
                "I{} 1 horizontal.go:958] {rest}\n",
                t.strftime("%m%d %H:%M:%S%.6f")
            )
        };
        let at = |ms: i64| t0 + jiff::SignedDuration::from_millis(ms);
        let u0 = &plan.units[0];
        let text = format!(
            "{}{}{}",
            line(
                at(0),
                &format!(
                    "\"Proposing\" scaleTarget=\"{}/{}/{}\"",
                    u0.target.kind(),
                    u0.namespace,
                    u0.target_name()
                )
            ),
            line(
                at(30),
                &format!(
                    "\"Successfully updated status\" HPA=\"{}/{}\"",
                    u0.namespace,
                    u0.hpa_name()
                )
            ),
            line(
                at(4000),
                &format!(
                    "\"Proposing\" scaleTarget=\"{}/{}/{}\"",
                    u0.target.kind(),
                    u0.namespace,
                    u0.target_name()
                )
            ),
        );
        use std::io::Write as _;
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        clock.poll();
        // Unit 0: reconciled at 0 s and 4 s (a 4 s cadence): quiet from 5.2 s to 6.0 s.
        assert!(!clock.quiet(0, at(4500)));
        assert!(clock.quiet(0, at(5300)));
        assert!(!clock.quiet(0, at(6500)));
        // Overdue (not logged yet): wait, unless long overdue.
        assert!(!clock.quiet(0, at(9000)));
        assert!(clock.quiet(0, at(17000)));
        // Unit 1: never reconciled yet: any time.
        assert!(clock.quiet(1, at(100)));
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn quantities_are_written_as_upstream_parses_them() {
        assert_eq!(quantity(1500.0), "1500m");
        assert_eq!(quantity(2000.0), "2");
        assert_eq!(bytes(1024.0 * 1000.0), "1024");
    }

    #[test]
    fn faults_match_only_their_namespace_and_group() {
        let plan = plan::generate(&plan::GenerateOptions {
            seed: 3,
            hpas: 30,
            duration: Duration::from_secs(600),
            minor: 37,
            namespace_prefix: "d".into(),
        });
        let (unit, fault) = plan
            .units
            .iter()
            .find_map(|u| u.faults.first().map(|f| (u, f)))
            .unwrap();
        let at = |d: Duration| -> Vec<UnitState> {
            plan.units
                .iter()
                .map(|_| UnitState {
                    offset: d,
                    ..UnitState::default()
                })
                .collect()
        };
        let armed = active_faults(&plan, &at(fault.from));
        let re = regex::Regex::new(
            armed.iter().find(|f| f["verb"] == "list").unwrap()["path"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        let group = fault.group.clone();
        assert!(re.is_match(&format!(
            "/apis/{group}/v1beta1/namespaces/{}/pods",
            unit.namespace
        )));
        assert!(!re.is_match(&format!(
            "/apis/{group}/v1beta1/namespaces/{}x/pods",
            unit.namespace
        )));
        assert!(
            active_faults(&plan, &at(fault.until))
                .iter()
                .all(|f| f["path"] != armed[0]["path"])
        );
    }
}
