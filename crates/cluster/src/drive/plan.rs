//! What `hpactl drive` plays: a plan of units, each one HPA with its own namespace, scale
//! target, pods and load timelines, plus the metric API failures and HPA edits to inject. A
//! plan comes from a seed ([`generate`]) or from an `hpactl simulate` file
//! (`docs/simulate-format.md`, [`from_simulation`]); a plan is data, so the same seed gives the
//! same plan, and the driver's only other input is what the controller under test decides.
//!
//! Times are offsets from the start of the drive. Load values change only at their points (no
//! ramps in generated plans), so between two changes a recorder sees inputs that stand still.

use std::collections::BTreeMap;
use std::time::Duration;

use hpa_fixtures::simulate::{LoadPoint, LoadSeries, SimulationFile, Workload};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use serde_json::{Value, json};

/// The kinds of scale target a unit may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum TargetKind {
    /// `apps/v1` Deployment.
    Deployment,
    /// `apps/v1` StatefulSet.
    StatefulSet,
    /// `apps/v1` ReplicaSet.
    ReplicaSet,
    /// `v1` ReplicationController.
    ReplicationController,
    /// `drive.hpa.example/v1` Widget, a custom resource with a scale subresource.
    Widget,
}

impl TargetKind {
    /// Every kind, in the order generated plans cycle through them.
    pub const ALL: [TargetKind; 5] = [
        TargetKind::Deployment,
        TargetKind::StatefulSet,
        TargetKind::ReplicaSet,
        TargetKind::ReplicationController,
        TargetKind::Widget,
    ];

    /// `apiVersion`.
    pub fn api_version(self) -> &'static str {
        match self {
            TargetKind::Deployment | TargetKind::StatefulSet | TargetKind::ReplicaSet => "apps/v1",
            TargetKind::ReplicationController => "v1",
            TargetKind::Widget => WIDGET_API_VERSION,
        }
    }

    /// `kind`.
    pub fn kind(self) -> &'static str {
        match self {
            TargetKind::Deployment => "Deployment",
            TargetKind::StatefulSet => "StatefulSet",
            TargetKind::ReplicaSet => "ReplicaSet",
            TargetKind::ReplicationController => "ReplicationController",
            TargetKind::Widget => "Widget",
        }
    }

    /// The resource (plural).
    pub fn plural(self) -> &'static str {
        match self {
            TargetKind::Deployment => "deployments",
            TargetKind::StatefulSet => "statefulsets",
            TargetKind::ReplicaSet => "replicasets",
            TargetKind::ReplicationController => "replicationcontrollers",
            TargetKind::Widget => "widgets",
        }
    }

    /// The kind named by a `scaleTargetRef`, if the driver can play it.
    pub fn from_ref(api_version: &str, kind: &str) -> Option<Self> {
        TargetKind::ALL
            .into_iter()
            .find(|k| k.kind() == kind && k.api_version() == api_version)
    }
}

/// The custom resource's group.
pub const WIDGET_GROUP: &str = "drive.hpa.example";
/// The custom resource's `apiVersion`.
pub const WIDGET_API_VERSION: &str = "drive.hpa.example/v1";

/// The CRD of [`TargetKind::Widget`]: a scale subresource whose selector is in
/// `status.selector`, as the usual operators declare it.
pub fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{WIDGET_GROUP}")},
        "spec": {
            "group": WIDGET_GROUP,
            "scope": "Namespaced",
            "names": {"kind": "Widget", "listKind": "WidgetList", "plural": "widgets", "singular": "widget"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                "subresources": {
                    "status": {},
                    "scale": {
                        "specReplicasPath": ".spec.replicas",
                        "statusReplicasPath": ".status.replicas",
                        "labelSelectorPath": ".status.selector",
                    },
                },
            }],
        },
    })
}

/// A window in which the metrics APIs fail for a unit's namespace.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FaultWindow {
    /// From.
    #[serde(with = "secs")]
    pub from: Duration,
    /// Until.
    #[serde(with = "secs")]
    pub until: Duration,
    /// The HTTP status answered (a `Status` body).
    pub status: u16,
    /// Which metrics API: `metrics.k8s.io`, `custom.metrics.k8s.io` or
    /// `external.metrics.k8s.io`.
    pub group: String,
}

/// A merge patch of a unit's HPA at a time.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct HpaEdit {
    /// When.
    #[serde(with = "secs")]
    pub at: Duration,
    /// The JSON merge patch of the HPA.
    pub patch: Value,
}

mod secs {
    pub fn serialize<S: serde::Serializer>(
        d: &std::time::Duration,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{}s", d.as_secs()))
    }
}

/// One HPA with everything around it.
#[derive(Debug, Clone)]
pub struct Unit {
    /// Its namespace (one unit per namespace, so that `hpactl record` records it alone).
    pub namespace: String,
    /// The HPA (`autoscaling/v2`), its `scaleTargetRef` naming the target.
    pub hpa: HorizontalPodAutoscaler,
    /// The target's kind.
    pub target: TargetKind,
    /// The workload: initial replicas, requests, readiness delay, metric window, skew.
    pub workload: Workload,
    /// Total load per load key (resource name or metric name; `docs/simulate-format.md`).
    pub load: BTreeMap<String, LoadSeries>,
    /// Metric API failures.
    pub faults: Vec<FaultWindow>,
    /// HPA edits.
    pub edits: Vec<HpaEdit>,
}

impl Unit {
    /// The target's name.
    pub fn target_name(&self) -> &str {
        &self.hpa.spec.scale_target_ref.name
    }

    /// The HPA's name.
    pub fn hpa_name(&self) -> &str {
        self.hpa.metadata.name.as_deref().unwrap_or("hpa")
    }
}

/// A whole drive.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The units.
    pub units: Vec<Unit>,
    /// How long it runs.
    pub duration: Duration,
    /// The controller flags the plan is written for (short windows and sync period); the
    /// driver prints them, and recordings carry them.
    pub flags: BTreeMap<String, String>,
}

/// What to generate.
#[derive(Debug, Clone)]
pub struct GenerateOptions {
    /// The seed.
    pub seed: u64,
    /// How many HPAs.
    pub hpas: usize,
    /// How long.
    pub duration: Duration,
    /// The Kubernetes minor version of the cluster (scale to zero from 1.37 where the gate is on
    /// by default; configurable tolerance in every supported version).
    pub minor: u32,
    /// Namespace prefix (`drive` gives `drive-000`, `drive-001`, ...).
    pub namespace_prefix: String,
}

/// The sync period generated plans are written for.
pub const SYNC_PERIOD: &str = "5s";

/// The metrics of a generated unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MetricKind {
    CpuUtilization,
    CpuAverageValue,
    MemoryUtilization,
    MemoryAverageValue,
    ContainerCpuUtilization,
    PodsAverageValue,
    ObjectValue,
    ObjectAverageValue,
    ExternalValue,
    ExternalAverageValue,
}

const METRIC_KINDS: [MetricKind; 10] = [
    MetricKind::CpuUtilization,
    MetricKind::CpuAverageValue,
    MetricKind::MemoryUtilization,
    MetricKind::MemoryAverageValue,
    MetricKind::ContainerCpuUtilization,
    MetricKind::PodsAverageValue,
    MetricKind::ObjectValue,
    MetricKind::ObjectAverageValue,
    MetricKind::ExternalValue,
    MetricKind::ExternalAverageValue,
];

/// Per-pod load at the target, in milli-units, for a metric: what the load timeline moves
/// around (a total of `replicas × target` is "at target").
fn per_pod_target_milli(kind: MetricKind) -> f64 {
    match kind {
        // 50% of 200m.
        MetricKind::CpuUtilization | MetricKind::ContainerCpuUtilization => 100.0,
        MetricKind::CpuAverageValue => 150.0,
        // 60% of 256Mi, in milli-bytes.
        MetricKind::MemoryUtilization => 0.6 * 256.0 * 1024.0 * 1024.0 * 1000.0,
        MetricKind::MemoryAverageValue => 128.0 * 1024.0 * 1024.0 * 1000.0,
        MetricKind::PodsAverageValue => 10_000.0,
        MetricKind::ObjectValue | MetricKind::ObjectAverageValue => 20_000.0,
        MetricKind::ExternalValue | MetricKind::ExternalAverageValue => 5_000.0,
    }
}

fn load_key(kind: MetricKind) -> &'static str {
    match kind {
        MetricKind::CpuUtilization
        | MetricKind::CpuAverageValue
        | MetricKind::ContainerCpuUtilization => "cpu",
        MetricKind::MemoryUtilization | MetricKind::MemoryAverageValue => "memory",
        MetricKind::PodsAverageValue => "requests_per_second",
        MetricKind::ObjectValue | MetricKind::ObjectAverageValue => "ingress_requests",
        MetricKind::ExternalValue | MetricKind::ExternalAverageValue => "queue_messages",
    }
}

/// The metric of `kind`; an Object metric describes the scale target itself (what a
/// prometheus-adapter rule on a workload's requests gives).
fn metric_spec(kind: MetricKind, target: TargetKind, name: &str) -> Value {
    let milli = |m: f64| format!("{}m", m.round() as i64);
    let described =
        json!({"apiVersion": target.api_version(), "kind": target.kind(), "name": name});
    match kind {
        MetricKind::CpuUtilization => json!({"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": 50}}}),
        MetricKind::CpuAverageValue => json!({"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "AverageValue", "averageValue": "150m"}}}),
        MetricKind::MemoryUtilization => json!({"type": "Resource", "resource": {"name": "memory",
            "target": {"type": "Utilization", "averageUtilization": 60}}}),
        MetricKind::MemoryAverageValue => json!({"type": "Resource", "resource": {"name": "memory",
            "target": {"type": "AverageValue", "averageValue": "128Mi"}}}),
        MetricKind::ContainerCpuUtilization => json!({"type": "ContainerResource",
            "containerResource": {"name": "cpu", "container": "app",
                "target": {"type": "Utilization", "averageUtilization": 50}}}),
        MetricKind::PodsAverageValue => json!({"type": "Pods", "pods": {
            "metric": {"name": "requests_per_second"},
            "target": {"type": "AverageValue", "averageValue": "10"}}}),
        MetricKind::ObjectValue => json!({"type": "Object", "object": {
            "describedObject": described,
            "metric": {"name": "ingress_requests"},
            "target": {"type": "Value", "value": "20"}}}),
        MetricKind::ObjectAverageValue => json!({"type": "Object", "object": {
            "describedObject": described,
            "metric": {"name": "ingress_requests"},
            "target": {"type": "AverageValue", "averageValue": milli(per_pod_target_milli(kind))}}}),
        MetricKind::ExternalValue => json!({"type": "External", "external": {
            "metric": {"name": "queue_messages", "selector": {"matchLabels": {"queue": "work"}}},
            "target": {"type": "Value", "value": "5"}}}),
        MetricKind::ExternalAverageValue => json!({"type": "External", "external": {
            "metric": {"name": "queue_messages", "selector": {"matchLabels": {"queue": "work"}}},
            "target": {"type": "AverageValue", "averageValue": "5"}}}),
    }
}

/// A behavior: none (the defaults), or random policies, select policies and stabilization
/// windows short enough to matter in a few minutes.
fn behavior(rng: &mut fastrand::Rng) -> Option<Value> {
    if rng.u8(0..4) == 0 {
        return None;
    }
    let mut rules = serde_json::Map::new();
    for dir in ["scaleUp", "scaleDown"] {
        if rng.bool() {
            continue;
        }
        let mut rule = serde_json::Map::new();
        if rng.bool() {
            let window = [0, 10, 20, 30, 45][rng.usize(0..5)];
            rule.insert("stabilizationWindowSeconds".into(), json!(window));
        }
        let policies: Vec<Value> = (0..rng.usize(1..3))
            .map(|_| {
                let period = [10, 15, 30][rng.usize(0..3)];
                if rng.bool() {
                    let pods = rng.i32(1..4);
                    json!({"type": "Pods", "value": pods, "periodSeconds": period})
                } else {
                    let percent = [10, 50, 100, 200][rng.usize(0..4)];
                    json!({"type": "Percent", "value": percent, "periodSeconds": period})
                }
            })
            .collect();
        rule.insert("policies".into(), Value::Array(policies));
        let select = ["Max", "Min", "Max", "Disabled"][rng.usize(0..4)];
        rule.insert("selectPolicy".into(), json!(select));
        if rng.u8(0..3) == 0 {
            let tolerance = ["0.05", "0.2", "0"][rng.usize(0..3)];
            rule.insert("tolerance".into(), json!(tolerance));
        }
        rules.insert(dir.into(), Value::Object(rule));
    }
    Some(Value::Object(rules))
}

/// A load timeline for `key`: `replicas × per-pod target × factor`, the factor stepping every
/// 20 to 60 s between 0.3 and 2.5 (sometimes 0, for scale to zero's metrics).
fn timeline(
    rng: &mut fastrand::Rng,
    per_pod: f64,
    replicas: i32,
    duration: Duration,
    zero: bool,
) -> LoadSeries {
    let mut points = Vec::new();
    let mut at = Duration::ZERO;
    while at < duration {
        let factor = if zero && rng.u8(0..5) == 0 {
            0.0
        } else {
            0.3 + rng.f64() * 2.2
        };
        points.push(LoadPoint {
            at,
            milli: (per_pod * f64::from(replicas.max(1)) * factor).round(),
            ramp: false,
        });
        at += Duration::from_secs(rng.u64(20..=60));
    }
    LoadSeries { points }
}

/// A seeded plan: `hpas` units over every target kind and metric type, with behaviors,
/// tolerances, readiness delays, metric failures and HPA edits.
pub fn generate(options: &GenerateOptions) -> Plan {
    let mut rng = fastrand::Rng::with_seed(options.seed);
    let secs = options.duration.as_secs().max(60);
    let mut units = Vec::with_capacity(options.hpas);
    for i in 0..options.hpas {
        // Every metric kind in turn; the target kinds shift by one every ten HPAs, so each
        // metric kind meets every target kind.
        let first = METRIC_KINDS[i % METRIC_KINDS.len()];
        let target = TargetKind::ALL[(i + i / METRIC_KINDS.len()) % TargetKind::ALL.len()];
        let namespace = format!("{}-{i:03}", options.namespace_prefix);
        let mut kinds = vec![first];
        if rng.u8(0..3) == 0 {
            let second = METRIC_KINDS[rng.usize(0..METRIC_KINDS.len())];
            if load_key(second) != load_key(first) {
                kinds.push(second);
            }
        }
        let only_object_or_external = kinds.iter().all(|k| {
            matches!(
                k,
                MetricKind::ObjectValue
                    | MetricKind::ObjectAverageValue
                    | MetricKind::ExternalValue
                    | MetricKind::ExternalAverageValue
            )
        });
        // Scale to zero (HPAScaleToZero, on by default from 1.37) needs Object or External
        // metrics only.
        let to_zero = options.minor >= 37 && only_object_or_external && rng.bool();
        let min_replicas = if to_zero { 0 } else { rng.i32(1..3) };
        let max_replicas = rng.i32(5..13);
        let replicas = rng.i32(min_replicas.max(1)..=4.min(max_replicas));
        let name = format!("app{i}");
        let mut spec = json!({
            "scaleTargetRef": {"apiVersion": target.api_version(), "kind": target.kind(), "name": name},
            "minReplicas": min_replicas,
            "maxReplicas": max_replicas,
            "metrics": kinds.iter().map(|k| metric_spec(*k, target, &name)).collect::<Vec<_>>(),
        });
        if let Some(b) = behavior(&mut rng) {
            spec["behavior"] = b;
        }
        let hpa: HorizontalPodAutoscaler = serde_json::from_value(json!({
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
        }))
        .unwrap_or_default();
        let mut requests = BTreeMap::new();
        requests.insert("cpu".to_string(), 200);
        requests.insert("memory".to_string(), 256 * 1024 * 1024 * 1000);
        let workload = Workload {
            replicas,
            container: "app".into(),
            requests,
            ready_after: Duration::from_secs(rng.u64(3..=20)),
            metrics_window: Duration::from_secs(30),
            skew: [0.0, 0.0, 0.2, 0.5][rng.usize(0..4)],
        };
        let mut load = BTreeMap::new();
        for k in &kinds {
            load.entry(load_key(*k).to_string()).or_insert_with(|| {
                timeline(
                    &mut rng,
                    per_pod_target_milli(*k),
                    replicas,
                    options.duration,
                    to_zero,
                )
            });
        }
        let mut faults = Vec::new();
        if rng.u8(0..4) == 0 {
            let from = rng.u64(30..secs.max(31));
            let group = match kinds[0] {
                MetricKind::PodsAverageValue
                | MetricKind::ObjectValue
                | MetricKind::ObjectAverageValue => "custom.metrics.k8s.io",
                MetricKind::ExternalValue | MetricKind::ExternalAverageValue => {
                    "external.metrics.k8s.io"
                }
                _ => "metrics.k8s.io",
            };
            faults.push(FaultWindow {
                from: Duration::from_secs(from),
                until: Duration::from_secs(from + rng.u64(10..40)),
                status: [500, 503, 404][rng.usize(0..3)],
                group: group.to_string(),
            });
        }
        let mut edits = Vec::new();
        if rng.u8(0..3) == 0 {
            let at = Duration::from_secs(rng.u64(30..secs.max(31)));
            let patch = match rng.u8(0..3) {
                0 => {
                    let max = rng.i32(min_replicas.max(1) + 1..=15);
                    json!({"spec": {"maxReplicas": max}})
                }
                1 => {
                    let min = (min_replicas.max(1) + 1).min(max_replicas);
                    json!({"spec": {"minReplicas": min}})
                }
                _ => {
                    let b = behavior(&mut rng).unwrap_or(Value::Null);
                    json!({"spec": {"behavior": b}})
                }
            };
            edits.push(HpaEdit { at, patch });
        }
        units.push(Unit {
            namespace,
            hpa,
            target,
            workload,
            load,
            faults,
            edits,
        });
    }
    Plan {
        units,
        duration: options.duration,
        flags: generated_flags(),
    }
}

/// The controller flags generated plans are written for: a 5 s sync period, a 30 s downscale
/// stabilization window, a 30 s CPU initialization period and a 10 s readiness delay, so a few
/// minutes hold many decisions.
pub fn generated_flags() -> BTreeMap<String, String> {
    [
        ("horizontal-pod-autoscaler-sync-period", SYNC_PERIOD),
        ("horizontal-pod-autoscaler-downscale-stabilization", "30s"),
        ("horizontal-pod-autoscaler-cpu-initialization-period", "30s"),
        ("horizontal-pod-autoscaler-initial-readiness-delay", "10s"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// Why a simulation file cannot be driven.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: hpas[{index}]: {message}")]
pub struct PlanError {
    /// The file.
    pub file: String,
    /// The HPA's position.
    pub index: usize,
    /// What is wrong.
    pub message: String,
}

/// A plan from an `hpactl simulate` file: one unit per HPA, each on its own copy of the
/// workload under the file's load, in the HPA's namespace (or `drive-NNN`); the target kind
/// is the HPA's `scaleTargetRef`'s. No faults or edits.
pub fn from_simulation(file: &SimulationFile, namespace_prefix: &str) -> Result<Plan, PlanError> {
    let mut units = Vec::with_capacity(file.hpas.len());
    let mut namespaces = std::collections::BTreeSet::new();
    for (index, hpa) in file.hpas.iter().enumerate() {
        let err = |message: String| PlanError {
            file: file.file.clone(),
            index,
            message,
        };
        let r = &hpa.spec.scale_target_ref;
        let api_version = r.api_version.as_deref().unwrap_or("");
        let target = TargetKind::from_ref(api_version, &r.kind).ok_or_else(|| {
            err(format!(
                "scaleTargetRef {api_version} {}: the driver plays a Deployment, StatefulSet, ReplicaSet (apps/v1), ReplicationController (v1) or {WIDGET_API_VERSION} Widget",
                r.kind
            ))
        })?;
        let namespace = hpa
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| format!("{namespace_prefix}-{index:03}"));
        if !namespaces.insert(namespace.clone()) {
            return Err(err(format!(
                "namespace {namespace} holds another HPA: the driver plays one HPA per namespace"
            )));
        }
        let mut hpa = hpa.clone();
        hpa.metadata.namespace = Some(namespace.clone());
        units.push(Unit {
            namespace,
            hpa,
            target,
            workload: file.workload.clone(),
            load: file.load.clone(),
            faults: Vec::new(),
            edits: Vec::new(),
        });
    }
    let mut flags = generated_flags();
    flags.extend(file.flags.clone());
    Ok(Plan {
        units,
        duration: file.duration,
        flags,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn options(seed: u64) -> GenerateOptions {
        GenerateOptions {
            seed,
            hpas: 40,
            duration: Duration::from_secs(600),
            minor: 37,
            namespace_prefix: "drive".into(),
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_plan() {
        let a = generate(&options(7));
        let b = generate(&options(7));
        let c = generate(&options(8));
        let show = |p: &Plan| {
            p.units
                .iter()
                .map(|u| {
                    format!(
                        "{:?}{:?}{:?}{:?}",
                        serde_json::to_string(&u.hpa).unwrap(),
                        u.load,
                        u.faults,
                        u.edits
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(show(&a), show(&b));
        assert_ne!(show(&a), show(&c));
    }

    #[test]
    fn plans_cover_every_target_kind_and_metric_type() {
        let plan = generate(&options(1));
        let kinds: std::collections::BTreeSet<TargetKind> =
            plan.units.iter().map(|u| u.target).collect();
        assert_eq!(kinds.len(), 5);
        let types: std::collections::BTreeSet<String> = plan
            .units
            .iter()
            .flat_map(|u| u.hpa.spec.metrics.clone().unwrap_or_default())
            .map(|m| m.type_)
            .collect();
        assert_eq!(types.len(), 5, "{types:?}");
        assert!(plan.units.iter().any(|u| u.hpa.spec.behavior.is_some()));
        assert!(plan.units.iter().any(|u| !u.faults.is_empty()));
        assert!(plan.units.iter().any(|u| !u.edits.is_empty()));
        assert!(
            plan.units
                .iter()
                .any(|u| u.hpa.spec.min_replicas == Some(0))
        );
        for u in &plan.units {
            let min = u.hpa.spec.min_replicas.unwrap_or(1);
            assert!(
                min <= u.workload.replicas.max(1) && u.workload.replicas <= u.hpa.spec.max_replicas,
                "{u:?}"
            );
            for series in u.load.values() {
                assert!(series.points.iter().all(|p| p.milli >= 0.0));
            }
        }
    }
}
