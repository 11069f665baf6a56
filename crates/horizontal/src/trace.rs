//! Decision traces: why an HPA did what it did, rendered from the [`Decision`] and the
//! [`Outcome`] that also render its status and events (no second computation).
//!
//! No upstream counterpart (KEP-6107 "decision trace" is provisional upstream). The JSON
//! shape is versioned by [`TRACE_VERSION`] and documented in `docs/decision-trace.md`; it is
//! served at `/debug/hpa/NAMESPACE/NAME` and read by `hpactl explain`. [`TraceStore`] keeps
//! the last [`TRACES_PER_HPA`] traces of every HPA and forgets an HPA when it is deleted.

use dashmap::DashMap;
use jiff::Timestamp;
use k8s_openapi::api::autoscaling::v2::{
    HorizontalPodAutoscaler, MetricSpec, MetricStatus, MetricTarget, MetricValueStatus,
};
use serde::{Deserialize, Serialize};

use hpa_decision::Pause;
use hpa_decision::behavior::PolicyType;
use hpa_decision::decision::{Branch, Decision, Outcome, RescaleResult};

/// The `version` of every trace this build writes.
pub const TRACE_VERSION: &str = "hpa.trace/v1";

/// How many decisions are kept per HPA.
pub const TRACES_PER_HPA: usize = 10;

/// How many pods of each kind (unready, missing, ignored) a trace names; the counts are
/// always whole.
pub const PODS_NAMED: usize = 50;

/// Why an unready pod's sample was not counted as is, when the calculator did not say.
pub const WHY_UNREADY: &str = "Pending, or (cpu only) its sample is not trusted yet: not Ready, or started within --horizontal-pod-autoscaler-cpu-initialization-period without a full metric window since it became Ready";
/// Why a missing pod was filled in (its only reason).
pub const WHY_MISSING: &str = hpa_replica_calculator::WHY_NO_SAMPLE;
/// Why an ignored pod was left out.
pub const WHY_IGNORED: &str = "being deleted, or Failed";

/// One decision of one HPA, top to bottom.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DecisionTrace {
    /// [`TRACE_VERSION`].
    pub version: String,
    /// `namespace/name` of the HPA.
    pub hpa: String,
    /// When the decision was made.
    pub time: Timestamp,
    /// Whether this trace is a fresh computation without the controller's history (made by
    /// `hpactl explain` against a cluster) rather than a running controller's decision.
    #[serde(default)]
    pub without_history: bool,
    /// The HPA's `metadata.generation` as the reconcile read it (the spec it decided from;
    /// absent for an HPA without one, and in traces written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// A fingerprint of the HPA's `spec` as the reconcile read it (16 hex digits; equal for
    /// equal specs within one build of this controller): tells an edit apart where the API
    /// server keeps no `metadata.generation` for HPAs (before 1.37).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_fingerprint: Option<String>,
    /// The scale target as read.
    pub target: TargetTrace,
    /// `spec.minReplicas` (defaulted) and `spec.maxReplicas`.
    pub min_replicas: i32,
    /// `spec.maxReplicas`.
    pub max_replicas: i32,
    /// Which path the reconcile took: `ScalingDisabled`, `AboveMax`, `BelowMin`,
    /// `FromMetrics`, or `FailedGetScale` (stopped before deciding).
    pub branch: String,
    /// The tolerance band the metrics were computed with.
    pub tolerance: Option<ToleranceTrace>,
    /// Every metric of `spec.metrics`, in order.
    pub metrics: Vec<MetricTrace>,
    /// The metric whose proposal was used (the largest), if any.
    pub winner: Option<WinnerTrace>,
    /// The aggregated metric error, if any metric failed.
    pub metrics_error: Option<String>,
    /// The count the metrics asked for, before stabilization and limits.
    pub prenormalized: Option<i32>,
    /// The stabilization window (when metrics were used).
    pub stabilization: Option<StabilizationTrace>,
    /// The rate limit (behavior policies or the legacy 2x/4 rule).
    pub rate_limit: Option<RateLimitTrace>,
    /// The min/max clamp and which bound produced the final count.
    pub clamp: ClampTrace,
    /// The final desired replica count (`status.desiredReplicas`).
    pub desired_replicas: i32,
    /// Whether the scale was to be written, and why.
    pub rescale: bool,
    /// `rescaleReason` (the event's reason text).
    pub rescale_reason: String,
    /// What was written.
    pub write: WriteTrace,
    /// The conditions as written (or as they would be in shadow mode).
    pub conditions: Vec<ConditionTrace>,
    /// The events emitted (or, in shadow mode, that the active controller emits).
    pub events: Vec<EventTrace>,
    /// The error returned by the reconcile, if any.
    pub error: Option<String>,
    /// The pause in effect (`kube-hpa-controller.io/paused` or `paused-replicas`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause: Option<PauseTrace>,
    /// This controller's annotations set with a value that is not valid, ignored.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub invalid_annotations: Vec<InvalidAnnotationTrace>,
    /// The HPA's own sync period in seconds (`kube-hpa-controller.io/sync-period`), if set
    /// and valid: the HPA is reconciled again this long after this decision instead of the
    /// global period (`hpa_decision::sync_period`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_period_seconds: Option<u64>,
    /// The pod selection strategy (`kube-hpa-controller.io/pod-selection-strategy`), if set
    /// and valid, and the pods it left out (`hpa_decision::pod_selection`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_selection: Option<PodSelectionTrace>,
}

/// The pod selection strategy by annotation (no upstream counterpart;
/// `hpa_decision::pod_selection`, after KEP-5325).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSelectionTrace {
    /// `LabelSelector` or `OwnerReferences`.
    pub strategy: String,
    /// The pods the target's label selector matched that the target does not own, left out
    /// (`OwnerReferences` only, when the metrics were read).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub excluded_pods: Vec<String>,
    /// `OwnerReferences` only: the metrics were to be read but the pods' owners were not
    /// known (the pods could not be listed or a ReplicaSet's owner could not be read), so
    /// which pods were left out is not known.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub owners_unknown: bool,
}

/// A pause by annotation (no upstream counterpart; `hpa_decision::pause`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PauseTrace {
    /// The annotation that pauses the HPA (`kube-hpa-controller.io/paused` or
    /// `kube-hpa-controller.io/paused-replicas`).
    pub annotation: String,
    /// `paused-replicas`: its value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_replicas: Option<i32>,
    /// `paused-replicas`: the count the target is pinned to (the value clamped to
    /// `[minReplicas, maxReplicas]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned_replicas: Option<i32>,
}

/// One of this controller's annotations with a value that is not valid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InvalidAnnotationTrace {
    /// The annotation.
    pub annotation: String,
    /// Its value.
    pub value: String,
    /// Why it is not valid (the Warning event's message).
    pub message: String,
}

/// The scale target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetTrace {
    /// `kind/namespace/name`.
    pub reference: String,
    /// `scale.spec.replicas`.
    pub spec_replicas: i32,
    /// `scale.status.replicas`.
    pub status_replicas: i32,
    /// Whether the scale subresource was read (`false` on the `FailedGetScale` path, where
    /// the replica counts mean nothing).
    #[serde(default = "read_default")]
    pub read: bool,
}

fn read_default() -> bool {
    true
}

/// The tolerance band: a usage ratio inside `[low, high]` keeps the current count.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToleranceTrace {
    /// Scale-down tolerance.
    pub scale_down: f64,
    /// Scale-up tolerance.
    pub scale_up: f64,
    /// `1 - scaleDown`.
    pub low: f64,
    /// `1 + scaleUp`.
    pub high: f64,
}

/// A pod that was not counted as ready, with why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodNote {
    /// `metadata.name`.
    pub name: String,
    /// Why it was treated so.
    pub why: String,
}

/// How the listed pods were counted (pod-based metrics).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodsTrace {
    /// Pods whose sample counted as is.
    pub ready: usize,
    /// Pods whose sample was dropped (filled in with 0 on a scale-up).
    pub unready: Vec<PodNote>,
    /// Pods without a sample (filled in: the target on a scale-down, 0 on a scale-up).
    pub missing: Vec<PodNote>,
    /// Pods left out entirely.
    pub ignored: Vec<PodNote>,
    /// How many pods were unready (`unready` names at most [`PODS_NAMED`]).
    pub unready_count: usize,
    /// How many pods had no sample.
    pub missing_count: usize,
    /// How many pods were ignored.
    pub ignored_count: usize,
}

/// One metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetricTrace {
    /// `spec.metrics[i].type`.
    #[serde(rename = "type")]
    pub type_: String,
    /// The metric's name (`cpu`, the custom or external metric name).
    pub name: String,
    /// The target (`spec.metrics[i].<source>.target`).
    pub target: Option<MetricTarget>,
    /// The value(s) read, as written to `status.currentMetrics`.
    pub current: Option<MetricValueStatus>,
    /// The individual values read (External metrics: one per series), milli-units.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values_milli: Vec<i64>,
    /// current / target.
    pub usage_ratio: Option<f64>,
    /// The ratio after missing/unready pods were filled in, when that happened.
    pub recomputed_usage_ratio: Option<f64>,
    /// Whether the ratio was inside the tolerance band (the count was kept).
    pub within_tolerance: Option<bool>,
    /// How pods were counted (pod-based metrics).
    pub pods: Option<PodsTrace>,
    /// The ready pods the ratio was multiplied by (Object/External `Value` targets).
    pub ready_pods: Option<i64>,
    /// The replica count this metric asked for.
    pub proposal: Option<i32>,
    /// The name the proposal is reported under (`cpu resource utilization (percentage of
    /// request)`).
    pub proposal_name: Option<String>,
    /// Why it could not be computed (with a fallback in effect: why it could not be read).
    pub error: Option<MetricErrorTrace>,
    /// The metric's fallback (`kube-hpa-controller.io/metric-fallback`), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<MetricFallbackTrace>,
    /// The API group the metric was read from when routed by the annotation
    /// `kube-hpa-controller.io/metric-source` (`hpa_decision::metric_source`, after KEP-6382;
    /// KEP-6382's `status.currentMetrics[].*.metric.source.apiGroup`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_group: Option<String>,
}

/// A metric's fallback and its failures at this read (no upstream counterpart, after
/// KEP-5679; `hpa_decision::fallback`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetricFallbackTrace {
    /// The threshold `failureDurationSeconds`, when it is the one set (or defaulted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_duration_seconds: Option<i64>,
    /// The threshold `failures`, when it is the one set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failures: Option<u32>,
    /// The fallback replica count, when that is the fallback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// The fallback value as written, when that is the fallback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// The first failed read of the current streak (absent when read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_failure: Option<Timestamp>,
    /// Failed reads in a row, this one included (0 when read).
    pub failed_reads: u32,
    /// Whether the fallback is in effect at this read (`proposal` is then the fallback's).
    pub in_effect: bool,
    /// `activated` or `cleared` when it came into or out of effect at this read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transition: Option<String>,
}

impl MetricFallbackTrace {
    fn new(f: &hpa_decision::MetricFallbackStatus) -> Self {
        use hpa_decision::fallback::{FallbackAction, FallbackThreshold, FallbackTransition};
        let (failure_duration_seconds, failures) = match f.fallback.threshold {
            FallbackThreshold::Duration(d) => (Some(d.as_secs()), None),
            FallbackThreshold::Failures(n) => (None, Some(n)),
        };
        let (replicas, value) = match &f.fallback.action {
            FallbackAction::Replicas(n) => (Some(*n), None),
            FallbackAction::Value { text, .. } => (None, Some(text.clone())),
        };
        MetricFallbackTrace {
            failure_duration_seconds,
            failures,
            replicas,
            value,
            first_failure: f.first_failure,
            failed_reads: f.failures,
            in_effect: f.in_effect,
            transition: f.transition.map(|t| {
                match t {
                    FallbackTransition::Activated => "activated",
                    FallbackTransition::Cleared { .. } => "cleared",
                }
                .to_owned()
            }),
        }
    }
}

/// A metric's failure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetricErrorTrace {
    /// The event and condition reason (`FailedGetResourceMetric`, ...).
    pub reason: String,
    /// The error text.
    pub message: String,
}

/// The metric whose proposal won.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WinnerTrace {
    /// Index in `metrics`.
    pub index: usize,
    /// The proposal's name.
    pub name: String,
    /// Its proposal.
    pub replicas: i32,
}

/// One recorded recommendation of the stabilization window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecommendationTrace {
    /// The recommended count.
    pub replicas: i32,
    /// When it was recorded.
    pub time: Timestamp,
    /// Whether it was inside the scale-up window.
    pub in_up_window: bool,
    /// Whether it was inside the scale-down window.
    pub in_down_window: bool,
}

/// The stabilization step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StabilizationTrace {
    /// Scale-up window, seconds (0 without `spec.behavior`).
    pub up_window_seconds: i64,
    /// Scale-down window, seconds.
    pub down_window_seconds: i64,
    /// The recommendations recorded before this decision (this decision's own is added
    /// after).
    pub recommendations: Vec<RecommendationTrace>,
    /// The count after stabilization (the one applied).
    pub stabilized: i32,
    /// `AbleToScale` reason: `ReadyForNewScale` when stabilization changed nothing.
    pub reason: String,
}

/// One behavior policy and the limit it allows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyTrace {
    /// `Pods` or `Percent`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `value`.
    pub value: i32,
    /// `periodSeconds`.
    pub period_seconds: i32,
    /// Replicas at the start of the period.
    pub period_start: i32,
    /// The count the policy allows.
    pub limit: Option<i32>,
    /// Whether `selectPolicy` picked this policy (its limit is the combined one).
    #[serde(default)]
    pub selected: bool,
}

/// The rate limit step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RateLimitTrace {
    /// `behavior` (the policies of `spec.behavior`) or `legacy` (max(2 x current, 4)).
    pub kind: String,
    /// `scaleUp` or `scaleDown` (behavior only; `none` when no change was asked).
    pub direction: String,
    /// `selectPolicy` of the direction (behavior only).
    pub select_policy: Option<String>,
    /// Every policy with its own limit.
    pub policies: Vec<PolicyTrace>,
    /// The combined limit.
    pub limit: Option<i32>,
}

/// The min/max clamp.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClampTrace {
    /// `minReplicas`.
    pub min: i32,
    /// `maxReplicas`.
    pub max: i32,
    /// `ScalingLimited` reason: which bound produced the final count
    /// (`DesiredWithinRange`, `ScaleUpLimit`, `ScaleDownLimit`, `TooManyReplicas`,
    /// `TooFewReplicas`).
    pub bound_by: Option<String>,
}

/// What was written to the API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WriteTrace {
    /// `notAttempted`, `succeeded`, `failed: ...` or `shadow` (decided, not written).
    pub scale: String,
    /// Whether the status changed (written unless in shadow mode).
    pub status_changed: bool,
    /// Whether this controller writes nothing (shadow mode).
    pub shadow: bool,
}

/// A condition as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConditionTrace {
    /// `type`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `status`.
    pub status: String,
    /// `reason`.
    pub reason: String,
    /// `message`.
    pub message: String,
}

/// An event as emitted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventTrace {
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `reason`.
    pub reason: String,
    /// `message`.
    pub message: String,
}

/// What the reconcile knew besides the decision.
#[derive(Debug, Clone, Copy)]
pub struct TraceContext<'a> {
    /// The HPA as read.
    pub hpa: &'a HorizontalPodAutoscaler,
    /// `scale.status.replicas`.
    pub status_replicas: i32,
    /// What the scale write did.
    pub rescale: &'a RescaleResult,
    /// Whether nothing is written (shadow mode).
    pub shadow: bool,
}

fn metric_name(spec: Option<&MetricSpec>, status: Option<&MetricStatus>) -> String {
    if let Some(s) = spec {
        if let Some(r) = &s.resource {
            return r.name.clone();
        }
        if let Some(r) = &s.container_resource {
            return format!("{}/{}", r.container, r.name);
        }
        if let Some(p) = &s.pods {
            return p.metric.name.clone();
        }
        if let Some(o) = &s.object {
            return o.metric.name.clone();
        }
        if let Some(e) = &s.external {
            return e.metric.name.clone();
        }
    }
    status.map(|s| s.type_.clone()).unwrap_or_default()
}

fn metric_target(spec: &MetricSpec) -> Option<MetricTarget> {
    spec.resource
        .as_ref()
        .map(|r| r.target.clone())
        .or_else(|| spec.container_resource.as_ref().map(|r| r.target.clone()))
        .or_else(|| spec.pods.as_ref().map(|r| r.target.clone()))
        .or_else(|| spec.object.as_ref().map(|r| r.target.clone()))
        .or_else(|| spec.external.as_ref().map(|r| r.target.clone()))
}

pub(crate) fn metric_current(status: &MetricStatus) -> Option<MetricValueStatus> {
    status
        .resource
        .as_ref()
        .map(|r| r.current.clone())
        .or_else(|| {
            status
                .container_resource
                .as_ref()
                .map(|r| r.current.clone())
        })
        .or_else(|| status.pods.as_ref().map(|r| r.current.clone()))
        .or_else(|| status.object.as_ref().map(|r| r.current.clone()))
        .or_else(|| status.external.as_ref().map(|r| r.current.clone()))
}

fn notes<'a>(
    names: impl IntoIterator<Item = &'a String>,
    reasons: &std::collections::BTreeMap<String, &'static str>,
    why: &str,
) -> Vec<PodNote> {
    names
        .into_iter()
        .take(PODS_NAMED)
        .map(|n| PodNote {
            name: n.clone(),
            why: reasons.get(n).copied().unwrap_or(why).to_owned(),
        })
        .collect()
}

fn branch_str(b: Branch) -> &'static str {
    match b {
        Branch::ScalingDisabled => "ScalingDisabled",
        Branch::AboveMax => "AboveMax",
        Branch::BelowMin => "BelowMin",
        Branch::FromMetrics => "FromMetrics",
    }
}

/// [`DecisionTrace::spec_fingerprint`]: a hash of the spec's JSON.
pub fn spec_fingerprint(hpa: &HorizontalPodAutoscaler) -> String {
    use std::hash::{Hash as _, Hasher as _};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(&hpa.spec)
        .unwrap_or_default()
        .hash(&mut h);
    format!("{:016x}", h.finish())
}

impl DecisionTrace {
    /// The trace of one reconcile: `decision` and the `outcome` it rendered.
    pub fn new(decision: &Decision, outcome: &Outcome, ctx: TraceContext<'_>) -> Self {
        let tolerance = decision.tolerances.map(|t| ToleranceTrace {
            scale_down: t.scale_down,
            scale_up: t.scale_up,
            low: 1.0 - t.scale_down,
            high: 1.0 + t.scale_up,
        });
        let specs: &[MetricSpec] = ctx.hpa.spec.metrics.as_deref().unwrap_or_default();
        let mut metrics = Vec::new();
        let mut winner = None;
        let sources = hpa_decision::metric_source::metric_source_annotation(ctx.hpa);
        if let Some(m) = &decision.metrics {
            let statuses = m.statuses.as_deref().unwrap_or_default();
            for (i, (ty, result)) in m.per_metric.iter().enumerate() {
                let spec = specs.get(i);
                let status = statuses.get(i);
                let mut t = MetricTrace {
                    type_: ty.clone(),
                    name: metric_name(spec, status),
                    target: spec.and_then(metric_target),
                    current: status.and_then(metric_current),
                    values_milli: Vec::new(),
                    usage_ratio: None,
                    recomputed_usage_ratio: None,
                    within_tolerance: None,
                    pods: None,
                    ready_pods: None,
                    proposal: None,
                    proposal_name: None,
                    error: None,
                    fallback: None,
                    api_group: sources.group_of(i).map(str::to_owned),
                };
                if let Some(f) = m.fallbacks.iter().find(|f| f.fallback.index == i) {
                    t.fallback = Some(MetricFallbackTrace::new(f));
                    t.error = f.replaced.as_ref().map(|r| MetricErrorTrace {
                        reason: r.reason.as_str().to_owned(),
                        message: r.error.clone(),
                    });
                }
                match result {
                    Ok(p) => {
                        t.proposal = Some(p.replicas);
                        t.proposal_name = Some(p.metric_name.clone());
                        if let Some(d) = &p.detail {
                            t.usage_ratio = Some(d.usage_ratio);
                            t.recomputed_usage_ratio = d.recomputed_usage_ratio;
                            t.within_tolerance = tolerance
                                .map(|b| b.low <= d.usage_ratio && d.usage_ratio <= b.high);
                            t.values_milli = d.values.clone();
                            t.ready_pods = d.ready_pods;
                            t.pods = d.pods.as_ref().map(|g| PodsTrace {
                                ready: g.ready_pod_count,
                                unready: notes(&g.unready_pods, &g.reasons, WHY_UNREADY),
                                missing: notes(&g.missing_pods, &g.reasons, WHY_MISSING),
                                ignored: notes(&g.ignored_pods, &g.reasons, WHY_IGNORED),
                                unready_count: g.unready_pods.len(),
                                missing_count: g.missing_pods.len(),
                                ignored_count: g.ignored_pods.len(),
                            });
                        }
                        if !m.is_total_failure()
                            && winner.is_none()
                            && p.metric_name == m.metric_name
                            && p.replicas == m.replicas
                        {
                            winner = Some(WinnerTrace {
                                index: i,
                                name: p.metric_name.clone(),
                                replicas: p.replicas,
                            });
                        }
                    }
                    Err(f) => {
                        t.error = Some(MetricErrorTrace {
                            reason: f.reason.as_str().to_owned(),
                            message: f.error.clone(),
                        });
                    }
                }
                metrics.push(t);
            }
        }
        let n = decision.normalization.as_ref();
        let stabilization = n.map(|n| {
            let (up, down) = n.windows_seconds;
            let now = decision.now;
            // The stabilization functions' own test: a record counts when it is after
            // `now - window` (the legacy path has no scale-up window).
            let within = |t: Timestamp, secs: i64| {
                t > hpa_decision::recommendations::minus(now, jiff::SignedDuration::from_secs(secs))
            };
            StabilizationTrace {
                up_window_seconds: up,
                down_window_seconds: down,
                recommendations: n
                    .recommendations
                    .iter()
                    .map(|r| RecommendationTrace {
                        replicas: r.recommendation,
                        time: r.timestamp,
                        in_up_window: n.with_behavior && within(r.timestamp, up),
                        in_down_window: within(r.timestamp, down),
                    })
                    .collect(),
                stabilized: n.stabilized,
                reason: n.stabilization.as_str().to_owned(),
            }
        });
        let rate_limit = n.map(|n| {
            if n.with_behavior {
                let direction = if n.stabilized > decision.current_replicas {
                    "scaleUp"
                } else if n.stabilized < decision.current_replicas {
                    "scaleDown"
                } else {
                    "none"
                };
                let rules = decision.behavior.as_ref().and_then(|b| match direction {
                    "scaleUp" => Some(&b.scale_up),
                    "scaleDown" => Some(&b.scale_down),
                    _ => None,
                });
                RateLimitTrace {
                    kind: "behavior".to_owned(),
                    direction: direction.to_owned(),
                    select_policy: rules.map(|r| r.select_policy.as_str().to_owned()),
                    policies: n
                        .policies
                        .iter()
                        .map(|p| PolicyTrace {
                            type_: match &p.policy.type_ {
                                PolicyType::Pods => "Pods".to_owned(),
                                PolicyType::Percent => "Percent".to_owned(),
                                PolicyType::Other(s) => s.clone(),
                            },
                            value: p.policy.value,
                            period_seconds: p.policy.period_seconds,
                            period_start: p.period_start,
                            limit: p.limit,
                            selected: p.selected,
                        })
                        .collect(),
                    limit: n.rate_limit,
                }
            } else {
                RateLimitTrace {
                    kind: "legacy".to_owned(),
                    direction: "scaleUp".to_owned(),
                    select_policy: None,
                    policies: Vec::new(),
                    limit: n.rate_limit,
                }
            }
        });
        let conditions = outcome
            .status
            .conditions
            .iter()
            .flatten()
            .map(|c| ConditionTrace {
                type_: c.type_.clone(),
                status: c.status.clone(),
                reason: c.reason.clone().unwrap_or_default(),
                message: c.message.clone().unwrap_or_default(),
            })
            .collect();
        let events = outcome
            .events
            .iter()
            .chain(&outcome.events_after_status)
            .map(|e| EventTrace {
                type_: e.event_type().as_str().to_owned(),
                reason: e.reason().to_owned(),
                message: e.message(),
            })
            .collect();
        let scale = if ctx.shadow {
            if decision.rescale {
                "shadow".to_owned()
            } else {
                "notAttempted".to_owned()
            }
        } else {
            match ctx.rescale {
                RescaleResult::NotAttempted => "notAttempted".to_owned(),
                RescaleResult::Succeeded => "succeeded".to_owned(),
                RescaleResult::Failed(e) => format!("failed: {e}"),
                RescaleResult::Shadowed => "shadow".to_owned(),
            }
        };
        DecisionTrace {
            version: TRACE_VERSION.to_owned(),
            hpa: decision.key.clone(),
            time: decision.now,
            without_history: false,
            generation: ctx.hpa.metadata.generation,
            spec_fingerprint: Some(spec_fingerprint(ctx.hpa)),
            target: TargetTrace {
                reference: decision.reference.clone(),
                spec_replicas: decision.current_replicas,
                status_replicas: ctx.status_replicas,
                read: true,
            },
            min_replicas: decision.min_replicas,
            max_replicas: decision.max_replicas,
            branch: branch_str(decision.branch).to_owned(),
            tolerance,
            metrics,
            winner,
            metrics_error: decision.metrics.as_ref().and_then(|m| m.error.clone()),
            prenormalized: decision.prenormalized,
            stabilization,
            rate_limit,
            clamp: ClampTrace {
                min: decision.min_replicas,
                max: decision.max_replicas,
                bound_by: n.map(|n| n.limit.as_str().to_owned()),
            },
            desired_replicas: outcome.desired_replicas,
            rescale: decision.rescale,
            rescale_reason: decision.rescale_reason.clone(),
            write: WriteTrace {
                scale,
                status_changed: outcome.status_changed,
                shadow: ctx.shadow,
            },
            conditions,
            events,
            error: outcome.error.clone(),
            pause: decision.pause.map(|p| PauseTrace {
                annotation: p.annotation().to_owned(),
                requested_replicas: match p {
                    Pause::Pinned { requested, .. } => Some(requested),
                    Pause::Paused => None,
                },
                pinned_replicas: p.pinned_replicas(),
            }),
            invalid_annotations: decision
                .invalid_annotations
                .iter()
                .map(|a| InvalidAnnotationTrace {
                    annotation: a.annotation.to_owned(),
                    value: a.value.clone(),
                    message: a.to_string(),
                })
                .collect(),
            sync_period_seconds: decision.sync_period.map(|p| p.as_secs()),
            pod_selection: decision.pod_selection.map(|strategy| PodSelectionTrace {
                strategy: strategy.as_str().to_owned(),
                excluded_pods: decision
                    .metrics
                    .as_ref()
                    .and_then(|m| m.excluded_pods.clone())
                    .unwrap_or_default(),
                owners_unknown: strategy
                    == hpa_decision::pod_selection::PodSelectionStrategy::OwnerReferences
                    && decision
                        .metrics
                        .as_ref()
                        .is_some_and(|m| m.excluded_pods.is_none()),
            }),
        }
    }

    /// Whether the HPA was paused by annotation at this decision.
    pub fn paused(&self) -> bool {
        self.pause.is_some()
    }

    /// Whether the pod selection strategy (`kube-hpa-controller.io/pod-selection-strategy`)
    /// left pods out of this decision (or may have: the owners could not be read).
    pub fn pods_left_out(&self) -> bool {
        self.pod_selection
            .as_ref()
            .is_some_and(|p| !p.excluded_pods.is_empty() || p.owners_unknown)
    }

    /// Whether a metric was read from another API group
    /// (`kube-hpa-controller.io/metric-source`) at this decision.
    pub fn metric_routed(&self) -> bool {
        self.metrics.iter().any(|m| m.api_group.is_some())
    }

    /// Whether a metric's fallback (`kube-hpa-controller.io/metric-fallback`) was in effect at
    /// this decision.
    pub fn fallback_in_effect(&self) -> bool {
        self.metrics
            .iter()
            .any(|m| m.fallback.as_ref().is_some_and(|f| f.in_effect))
    }
}

impl DecisionTrace {
    /// The trace of a reconcile that stopped at the scale target (upstream's
    /// `FailedGetScale`: bad `apiVersion`, unknown kind, scale GET failed). No decision was
    /// made; `status` is the status with the `AbleToScale=False FailedGetScale` condition set,
    /// and `event` the Warning emitted, as the reconcile rendered them.
    #[allow(clippy::too_many_arguments)]
    pub fn failed_get_scale(
        key: &str,
        hpa: &HorizontalPodAutoscaler,
        now: Timestamp,
        err: &str,
        status: &k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscalerStatus,
        status_changed: bool,
        event: &hpa_decision::events::HpaEvent,
        shadow: bool,
    ) -> Self {
        let min = hpa_decision::decision::min_replicas(hpa);
        let max = hpa_decision::decision::max_replicas(hpa);
        DecisionTrace {
            version: TRACE_VERSION.to_owned(),
            hpa: key.to_owned(),
            time: now,
            without_history: false,
            generation: hpa.metadata.generation,
            spec_fingerprint: Some(spec_fingerprint(hpa)),
            target: TargetTrace {
                reference: hpa_decision::decision::scale_target_reference(hpa),
                spec_replicas: 0,
                status_replicas: 0,
                read: false,
            },
            min_replicas: min,
            max_replicas: max,
            branch: "FailedGetScale".to_owned(),
            tolerance: None,
            metrics: Vec::new(),
            winner: None,
            metrics_error: None,
            prenormalized: None,
            stabilization: None,
            rate_limit: None,
            clamp: ClampTrace {
                min,
                max,
                bound_by: None,
            },
            desired_replicas: status.desired_replicas,
            rescale: false,
            rescale_reason: String::new(),
            write: WriteTrace {
                scale: "notAttempted".to_owned(),
                status_changed,
                shadow,
            },
            conditions: status
                .conditions
                .iter()
                .flatten()
                .map(|c| ConditionTrace {
                    type_: c.type_.clone(),
                    status: c.status.clone(),
                    reason: c.reason.clone().unwrap_or_default(),
                    message: c.message.clone().unwrap_or_default(),
                })
                .collect(),
            events: vec![EventTrace {
                type_: event.event_type().as_str().to_owned(),
                reason: event.reason().to_owned(),
                message: event.message(),
            }],
            error: Some(err.to_owned()),
            pause: None,
            invalid_annotations: Vec::new(),
            sync_period_seconds: None,
            pod_selection: None,
        }
    }
}

/// The last [`TRACES_PER_HPA`] traces of every HPA, newest last.
///
/// An HPA's traces are kept together as one compressed block of JSON lines (oldest first)
/// rather than as the tree of small strings and vectors a [`DecisionTrace`] is. Consecutive
/// traces of one HPA differ in little more than their times and values, and a compressor
/// finds what they repeat when they are compressed together: ten steady-state traces of a cpu
/// HPA (22.6 KB of JSON) take about 1.6 KB this way, against about 30 KB as structures.
/// Recording a trace decompresses the block, drops the oldest line beyond
/// [`TRACES_PER_HPA`], appends the new one and compresses again, once per reconcile; traces
/// are decoded only when read (the debug endpoints, `hpactl explain`).
///
/// The block is LZ4's block format (`lz4_flex`), its uncompressed size in front. Deflate at
/// its fastest level kept the same ten traces in 1.5 KB, but compressing and inflating them
/// took about 35 µs against 5 µs, and its compressor zeroes some 300 KB of tables per call:
/// about a fifth of a replica's CPU in `perf` of `hpactl bench` (10 pods per HPA,
/// `docs/benchmarks.md`).
#[derive(Debug, Default)]
pub struct TraceStore {
    traces: DashMap<String, Box<[u8]>>,
}

/// The largest uncompressed block accepted (a guard against a corrupt entry, far above ten
/// traces).
const MAX_BLOCK_BYTES: usize = 64 << 20;

/// The JSON lines of a block, oldest first (none if the block cannot be decompressed).
fn decompress_lines(block: &[u8]) -> Vec<u8> {
    let Ok((size, compressed)) = lz4_flex::block::uncompressed_size(block) else {
        return Vec::new();
    };
    if size > MAX_BLOCK_BYTES {
        return Vec::new();
    }
    lz4_flex::block::decompress(compressed, size).unwrap_or_default()
}

/// The traces of a block, oldest first; a line that does not parse is skipped.
fn decode_all(block: &[u8]) -> Vec<DecisionTrace> {
    decompress_lines(block)
        .split(|b| *b == b'\n')
        .filter(|line| !line.is_empty())
        .filter_map(|line| serde_json::from_slice(line).ok())
        .collect()
}

/// The newest trace of a block.
fn decode_latest(block: &[u8]) -> Option<DecisionTrace> {
    let lines = decompress_lines(block);
    let last = lines
        .split(|b| *b == b'\n')
        .rfind(|line| !line.is_empty())?;
    serde_json::from_slice(last).ok()
}

/// `block`'s lines (none when it is empty: a new HPA) with `line` appended and the oldest
/// dropped beyond [`TRACES_PER_HPA`], compressed again.
fn append(block: &[u8], line: &[u8]) -> Box<[u8]> {
    let mut lines = if block.is_empty() {
        Vec::new()
    } else {
        decompress_lines(block)
    };
    let kept = lines.iter().filter(|b| **b == b'\n').count();
    if kept >= TRACES_PER_HPA {
        // Drop the oldest lines so that TRACES_PER_HPA - 1 remain before the new one.
        let drop = kept + 1 - TRACES_PER_HPA;
        let cut = lines
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .nth(drop - 1)
            .map_or(lines.len(), |(i, _)| i + 1);
        lines.drain(..cut);
    }
    lines.extend_from_slice(line);
    lines.push(b'\n');
    lz4_flex::block::compress_prepend_size(&lines).into_boxed_slice()
}

impl TraceStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Keep `trace` for its HPA, dropping the oldest beyond [`TRACES_PER_HPA`].
    pub fn record(&self, trace: DecisionTrace) {
        // serde_json escapes newlines inside strings, so a trace is always one line.
        let line = match serde_json::to_vec(&trace) {
            Ok(line) => line,
            Err(error) => {
                tracing::warn!(HPA = %trace.hpa, %error, "decision trace not kept");
                return;
            }
        };
        let mut entry = self.traces.entry(trace.hpa).or_default();
        *entry = append(&entry, &line);
    }

    /// The traces of `key` (`namespace/name`), oldest first.
    pub fn get(&self, key: &str) -> Vec<DecisionTrace> {
        self.traces
            .get(key)
            .map(|b| decode_all(&b))
            .unwrap_or_default()
    }

    /// The latest trace of `key`.
    pub fn latest_of(&self, key: &str) -> Option<DecisionTrace> {
        self.traces.get(key).and_then(|b| decode_latest(&b))
    }

    /// The keys with traces, sorted.
    pub fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self.traces.iter().map(|e| e.key().clone()).collect();
        keys.sort();
        keys
    }

    /// The latest trace of every HPA, sorted by key.
    pub fn latest(&self) -> Vec<DecisionTrace> {
        let mut out: Vec<DecisionTrace> = self
            .traces
            .iter()
            .filter_map(|e| decode_latest(e.value()))
            .collect();
        out.sort_by(|a, b| a.hpa.cmp(&b.hpa));
        out
    }

    /// Forget an HPA (deleted).
    pub fn forget(&self, key: &str) {
        self.traces.remove(key);
    }

    /// How many HPAs have traces.
    pub fn len(&self) -> usize {
        self.traces.len()
    }

    /// Whether no HPA has traces.
    pub fn is_empty(&self) -> bool {
        self.traces.is_empty()
    }
}

#[cfg(test)]
mod tests;
