//! The pure core of one reconcile: a [`Decision`] value from which the status, conditions,
//! events, error text and log lines are rendered (`reconcileAutoscaler` after the scale read, `computeReplicasForMetrics`, `setStatus`).
//!
//! Mirrors upstream `pkg/controller/podautoscaler/horizontal.go` `reconcileAutoscaler` (from
//! the successful scale GET on), the aggregation part of `computeReplicasForMetrics`, the
//! selector failures of `validateAndParseSelector`, and the rescale / `setStatus` tail. The
//! I/O (scale GET and PUT, metric fetching, status PUT) stays with the caller:
//!
//! 1. after the scale GET, [`Branch::for_hpa`] tells whether metrics are needed;
//! 2. the caller computes each metric ([`MetricResult`]) and aggregates them with
//!    [`MetricsOutcome::from_results`] (or reports a selector failure); with this controller's
//!    metric fallbacks ([`crate::fallback`]), it counts the failures
//!    ([`HpaState::observe_metric_failures`]) and aggregates with
//!    [`MetricsOutcome::with_fallbacks`];
//! 3. [`decide`] normalizes and records everything in a [`Decision`];
//! 4. the caller writes the scale if [`Decision::rescale`], then [`Decision::complete`]
//!    renders the new status, the events, the error and the monitor action.

use std::fmt::Write as _;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::autoscaling::v2::{
    HorizontalPodAutoscaler, HorizontalPodAutoscalerStatus, MetricStatus,
};

use crate::annotations::InvalidAnnotation;
use crate::behavior::EffectiveBehavior;
use crate::conditions::{
    ConditionType, HpaCondition, MetricFailureReason, invalid_selector_message, remove_condition,
    set_condition,
};
use crate::error_source::ErrorSource;
use crate::events::HpaEvent;
use crate::fallback::{
    ActiveFallback, FallbackTransition, MetricFallbackStatus, fallback_annotation,
};
use crate::gofmt::{GoArg, quote, sprintf};
use crate::labels::{ActionLabel, ErrorKind, ErrorLabel};
use crate::metric_source::metric_source_annotation;
use crate::normalize::Normalization;
use crate::pause::{Pause, pause_annotations};
use crate::pod_selection::{PodSelectionStrategy, pod_selection_annotation};
use crate::state::HpaState;
use crate::status::{
    set_current_replicas_and_metrics_in_status, set_status, status_semantically_equal,
};
use crate::sync_period::sync_period_annotation;
use crate::tolerance::Tolerances;

/// `rescaleReason` of branch b.
pub const REASON_ABOVE_MAX: &str = "Current number of replicas above Spec.MaxReplicas";
/// `rescaleReason` of branch c.
pub const REASON_BELOW_MIN: &str = "Current number of replicas below Spec.MinReplicas";
/// `rescaleReason` when the metrics ask for fewer replicas.
pub const REASON_ALL_METRICS_BELOW: &str = "All metrics below target";

/// The branch of `reconcileAutoscaler` step 10 (first match wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Branch {
    /// a. `current == 0` and the version's rule does not allow scaling from zero
    /// ([`ZeroReplicas`]; 1.35: `minReplicas != 0`): autoscaling disabled, nothing written.
    ScalingDisabled,
    /// b. `current > maxReplicas`: scale to max without metrics.
    AboveMax,
    /// c. `current < minReplicas`: scale to min without metrics.
    BelowMin,
    /// d. compute from metrics (includes `current == 0` when [`ZeroReplicas`] allows it).
    FromMetrics,
}

impl Branch {
    /// Pick the branch as 1.35 does (a target at zero is scaled only when `minReplicas` is 0).
    pub fn classify(current: i32, min_replicas: i32, max_replicas: i32) -> Self {
        Branch::classify_zero(current, min_replicas, max_replicas, min_replicas == 0)
    }

    /// Pick the branch for `hpa` under `config`'s rule for targets at zero.
    pub fn for_hpa(hpa: &HorizontalPodAutoscaler, current: i32, config: &DecisionConfig) -> Self {
        let min = min_replicas(hpa);
        let allow_from_zero = match config.zero_replicas {
            ZeroReplicas::MinReplicasZero => min == 0,
            ZeroReplicas::ScaledToZeroCondition { gate } => {
                // `shouldComputeMetricsForZeroReplicas`: the condition counts only with the
                // gate on; from zero with minReplicas 0 needs an Object or External metric.
                let scaled_to_zero = gate && scaled_to_zero_condition(hpa);
                // (min != 0 && scaledToZero) || (scaledToZero && hasObjectOrExternal)
                scaled_to_zero && (min != 0 || has_object_or_external_metrics(hpa))
            }
        };
        Branch::classify_zero(current, min, max_replicas(hpa), allow_from_zero)
    }

    fn classify_zero(
        current: i32,
        min_replicas: i32,
        max_replicas: i32,
        allow_from_zero: bool,
    ) -> Self {
        if current == 0 && !allow_from_zero {
            Branch::ScalingDisabled
        } else if current == 0 {
            Branch::FromMetrics
        } else if current > max_replicas {
            Branch::AboveMax
        } else if current < min_replicas {
            Branch::BelowMin
        } else {
            Branch::FromMetrics
        }
    }

    /// Whether the caller must compute metrics before [`decide`].
    pub fn needs_metrics(self) -> bool {
        self == Branch::FromMetrics
    }
}

/// Whether `spec.metrics` has an Object or External metric (`hasObjectOrExternalMetrics`).
pub fn has_object_or_external_metrics(hpa: &HorizontalPodAutoscaler) -> bool {
    hpa.spec
        .metrics
        .as_deref()
        .unwrap_or_default()
        .iter()
        .any(|m| m.type_ == "Object" || m.type_ == "External")
}

/// Whether the HPA's `ScaledToZero` condition is `True` (`getScaledToZeroConditionStatus`).
pub fn scaled_to_zero_condition(hpa: &HorizontalPodAutoscaler) -> bool {
    hpa.status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default()
        .iter()
        .find(|c| c.type_ == ConditionType::ScaledToZero.as_str())
        .is_some_and(|c| c.status == "True")
}

/// `spec.minReplicas`, 1 when unset.
pub fn min_replicas(hpa: &HorizontalPodAutoscaler) -> i32 {
    hpa.spec.min_replicas.unwrap_or(1)
}

/// `spec.maxReplicas`.
pub fn max_replicas(hpa: &HorizontalPodAutoscaler) -> i32 {
    hpa.spec.max_replicas
}

/// The `reference` used in error texts and logs: `kind/namespace/name` of the target.
pub fn scale_target_reference(hpa: &HorizontalPodAutoscaler) -> String {
    let (kind, name) = (
        hpa.spec.scale_target_ref.kind.as_str(),
        hpa.spec.scale_target_ref.name.as_str(),
    );
    let ns = hpa.metadata.namespace.as_deref().unwrap_or("");
    sprintf(
        "%s/%s/%s",
        &[GoArg::str(kind), GoArg::str(ns), GoArg::str(name)],
    )
}

/// One metric's successful proposal.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricProposal {
    /// The proposed replica count.
    pub replicas: i32,
    /// `metricNameProposal`, e.g. `cpu resource utilization (percentage of request)`.
    pub metric_name: String,
    /// The metric's timestamp (`None` is Go's zero time).
    pub timestamp: Option<Timestamp>,
    /// How the calculator reached the count (usage ratio, pods counted, values read).
    pub detail: Option<crate::calculation::CalculationDetail>,
}

/// One metric's failure. `Display` is the error returned upward ([`MetricFailure::error`]);
/// `source()` is the error it wraps (the replica calculator's, which wraps the metrics
/// client's), when there is one.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricFailure {
    /// The event and condition reason.
    pub reason: MetricFailureReason,
    /// The error the event and the `ScalingActive` condition show (the per-type inner
    /// error, e.g. `failed to get cpu utilization: ...`).
    pub condition_error: String,
    /// The error returned upward (e.g. `failed to get cpu resource metric value: ...`).
    pub error: String,
    /// `Spec` when the error wraps upstream's `errSpec` (unknown metric source type), else
    /// `Internal`: the metric-computation `error` label.
    pub kind: ErrorKind,
    /// The typed error behind `condition_error` (`None` where upstream builds the error from
    /// a text, e.g. an unknown metric source type).
    pub source: Option<ErrorSource>,
}

impl std::fmt::Display for MetricFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.error)
    }
}

impl std::error::Error for MetricFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_ref().map(ErrorSource::as_error)
    }
}

impl MetricFailure {
    /// The failure of a metric whose `type` is none of the five known ones:
    /// `unknown metric source type %q`, wrapped with upstream's `errSpec` (so the
    /// metric-computation error label is `spec`), reason `InvalidMetricSourceType`.
    pub fn unknown_metric_source_type(metric_type: &str) -> Self {
        let err = sprintf("unknown metric source type %q", &[GoArg::str(metric_type)]);
        MetricFailure {
            reason: MetricFailureReason::InvalidMetricSourceType,
            condition_error: err.clone(),
            error: err,
            kind: ErrorKind::Spec,
            source: None,
        }
    }
}

/// What computing one `spec.metrics[i]` produced.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricResult {
    /// The raw `spec.metrics[i].type` (the `metric_type` label).
    pub metric_type: String,
    /// The status entry (a zero value for failed metrics, as upstream).
    pub status: MetricStatus,
    /// The proposal or the failure.
    pub outcome: Result<MetricProposal, MetricFailure>,
}

impl MetricResult {
    /// The metric-computation `action` label: the proposal compared with the HPA's
    /// *previous* `status.currentReplicas`; `none` on error.
    pub fn action_label(&self, previous_current_replicas: i32) -> ActionLabel {
        match &self.outcome {
            Ok(p) => ActionLabel::compare(p.replicas, previous_current_replicas),
            Err(_) => ActionLabel::None,
        }
    }

    /// The metric-computation `error` label.
    pub fn error_label(&self) -> ErrorLabel {
        match &self.outcome {
            Ok(_) => ErrorLabel::None,
            Err(f) => f.kind.label(),
        }
    }
}

/// Why `validateAndParseSelector` (or the pod listing) failed.
#[derive(Debug, Clone, PartialEq)]
pub enum SelectorFailure {
    /// The scale's selector is empty.
    Missing,
    /// The selector does not parse; the parse error.
    Invalid(ErrorSource),
    /// More than one HPA controls the pods.
    Ambiguous {
        /// The raw selector string.
        selector: String,
        /// The controlling HPA keys, `namespace/name`.
        hpas: Vec<String>,
    },
    /// Listing pods failed (no event, no condition); the lister's error.
    PodList(ErrorSource),
}

/// The result of `computeReplicasForMetrics`: `replicas == -1` with an error means
/// "cannot act".
#[derive(Debug, Clone, PartialEq)]
pub struct MetricsOutcome {
    /// The maximum proposal, or -1.
    pub replicas: i32,
    /// The winning metric's name (`""` when none).
    pub metric_name: String,
    /// The winning metric's timestamp.
    pub timestamp: Option<Timestamp>,
    /// `status.currentMetrics` (one entry per spec metric; `None` on selector failure).
    pub statuses: Option<Vec<MetricStatus>>,
    /// The aggregated error, if any metric (or the selector) failed.
    pub error: Option<String>,
    /// The error `error` wraps: the first failed metric's [`MetricFailure`], or the selector's
    /// parse error or the pod lister's error (`None` for the selector failures upstream builds
    /// from a text).
    pub error_source: Option<ErrorSource>,
    /// The `ScalingActive` condition set.
    pub condition: Option<HpaCondition>,
    /// The events emitted while computing (one per failing metric, or the selector's).
    pub events: Vec<HpaEvent>,
    /// How many metrics failed.
    pub invalid_metrics: usize,
    /// Every metric's type and proposal or failure, in spec order (empty on selector
    /// failure). A metric whose fallback is in effect has the fallback's proposal (or the
    /// failure of computing it from a fallback value).
    pub per_metric: Vec<(String, Result<MetricProposal, MetricFailure>)>,
    /// What this read made of each metric with a fallback
    /// (`kube-hpa-controller.io/metric-fallback`, [`crate::fallback`]; no upstream
    /// counterpart), in the annotation's order; empty without the annotation.
    pub fallbacks: Vec<MetricFallbackStatus>,
    /// With the `OwnerReferences` pod selection strategy ([`crate::pod_selection`]; no
    /// upstream counterpart): the names of the pods the target's label selector matched but
    /// the target does not own, left out of the calculation. `None` with upstream's
    /// `LabelSelector` strategy.
    pub excluded_pods: Option<Vec<String>>,
}

impl MetricsOutcome {
    /// The aggregation of `computeReplicasForMetrics`: the maximum of
    /// the valid proposals (the first seeds it, a 0 is replaced by any later one, ties keep
    /// the earlier name); the error `invalid metrics (%v invalid out of %v), first error is:
    /// %v`; and the rule for acting: all invalid, or some invalid while the valid ones would
    /// scale below `spec_replicas`, gives -1 with the first failure's condition; otherwise
    /// `ScalingActive=True ValidMetricFound`.
    pub fn from_results(spec_replicas: i32, results: Vec<MetricResult>) -> Self {
        Self::with_fallbacks(spec_replicas, results, Vec::new())
    }

    /// [`from_results`](Self::from_results) with this controller's metric fallbacks
    /// ([`crate::fallback`]; no upstream counterpart): `fallbacks` is what this read made of
    /// each metric with a fallback ([`HpaState::observe_metric_failures`], with the results of
    /// `value` fallbacks in effect filled in by the caller). A metric whose fallback is in
    /// effect has its failure reported as always (its `FailedGet*Metric` event) and then
    /// proposes the fallback instead of failing; a fallback coming into or out of effect adds
    /// its event after the metric's. Without fallbacks this is exactly upstream's aggregation.
    pub fn with_fallbacks(
        spec_replicas: i32,
        results: Vec<MetricResult>,
        mut fallbacks: Vec<MetricFallbackStatus>,
    ) -> Self {
        let total = results.len();
        let mut replicas = 0i32;
        let mut metric_name = String::new();
        let mut timestamp = None;
        let mut invalid = 0usize;
        let mut first: Option<MetricFailure> = None;
        let mut events = Vec::new();
        let mut statuses = Vec::with_capacity(total);
        let mut per_metric = Vec::with_capacity(total);
        for (i, r) in results.into_iter().enumerate() {
            let (mut status, mut outcome) = (r.status, r.outcome);
            if let Err(f) = &outcome {
                events.push(HpaEvent::FailedGetMetric {
                    reason: f.reason,
                    err: f.condition_error.clone(),
                });
            }
            if let Some(fb) = fallbacks.iter_mut().find(|f| f.fallback.index == i) {
                if let Some((s, o)) = fb.replacement() {
                    fb.replaced = outcome.err();
                    (status, outcome) = (s, o);
                }
                events.extend(fallback_event(fb));
            }
            per_metric.push((r.metric_type, outcome.clone()));
            match outcome {
                Ok(p) => {
                    if replicas == 0 || p.replicas > replicas {
                        replicas = p.replicas;
                        metric_name = p.metric_name;
                        timestamp = p.timestamp;
                    }
                }
                Err(f) => {
                    if first.is_none() {
                        first = Some(f);
                    }
                    invalid += 1;
                }
            }
            statuses.push(status);
        }
        let error = first.as_ref().map(|e| {
            sprintf(
                "invalid metrics (%v invalid out of %v), first error is: %v",
                &[
                    GoArg::int(invalid as i64),
                    GoArg::int(total as i64),
                    GoArg::error(e.error.as_str()),
                ],
            )
        });
        let error_source = first.as_ref().map(|f| ErrorSource::new(f.clone()));
        if invalid >= total || (invalid > 0 && replicas < spec_replicas) {
            return MetricsOutcome {
                replicas: -1,
                metric_name: String::new(),
                timestamp: None,
                statuses: Some(statuses),
                error,
                error_source,
                condition: Some(first.map_or(HpaCondition::Empty, |f| {
                    HpaCondition::FailedComputeMetric {
                        reason: f.reason,
                        err: f.condition_error,
                    }
                })),
                events,
                invalid_metrics: invalid,
                per_metric,
                fallbacks,
                excluded_pods: None,
            };
        }
        MetricsOutcome {
            condition: Some(HpaCondition::ValidMetricFound {
                metric: metric_name.clone(),
            }),
            replicas,
            metric_name,
            timestamp,
            statuses: Some(statuses),
            error,
            error_source,
            events,
            invalid_metrics: invalid,
            per_metric,
            fallbacks,
            excluded_pods: None,
        }
    }

    /// A selector failure (`validateAndParseSelector`): -1, no statuses, the failure's event and condition
    /// (none for a pod-list error) and its error text.
    pub fn selector_failure(failure: SelectorFailure) -> Self {
        let (event, condition, error, error_source) = match failure {
            SelectorFailure::Missing => (
                Some(HpaEvent::SelectorRequired),
                Some(HpaCondition::MissingSelector),
                "selector is required".to_owned(),
                None,
            ),
            SelectorFailure::Invalid(source) => {
                let err = source.to_string();
                let msg = invalid_selector_message(&err);
                (
                    Some(HpaEvent::InvalidSelector { err: err.clone() }),
                    Some(HpaCondition::InvalidSelector { err }),
                    msg,
                    Some(source),
                )
            }
            SelectorFailure::Ambiguous { selector, hpas } => {
                let msg = crate::conditions::ambiguous_selector_message(&selector, &hpas);
                (
                    Some(HpaEvent::AmbiguousSelector {
                        selector: selector.clone(),
                        hpas: hpas.clone(),
                    }),
                    Some(HpaCondition::AmbiguousSelector { selector, hpas }),
                    msg,
                    None,
                )
            }
            SelectorFailure::PodList(source) => (None, None, source.to_string(), Some(source)),
        };
        MetricsOutcome {
            replicas: -1,
            metric_name: String::new(),
            timestamp: None,
            statuses: None,
            error: Some(error),
            error_source,
            condition,
            events: event.into_iter().collect(),
            invalid_metrics: 0,
            per_metric: Vec::new(),
            fallbacks: Vec::new(),
            excluded_pods: None,
        }
    }

    /// Whether the controller cannot act on these metrics (`-1` with an error).
    pub fn is_total_failure(&self) -> bool {
        self.error.is_some() && self.replicas == -1
    }

    /// The fallbacks in effect at this read.
    pub fn active_fallbacks(&self) -> Vec<ActiveFallback> {
        self.fallbacks
            .iter()
            .filter(|f| f.in_effect)
            .filter_map(|f| {
                Some(ActiveFallback {
                    fallback: f.fallback.clone(),
                    since: f.first_failure?,
                })
            })
            .collect()
    }
}

/// The event of a fallback coming into or out of effect at this read, if it did.
fn fallback_event(fb: &MetricFallbackStatus) -> Option<HpaEvent> {
    match fb.transition? {
        FallbackTransition::Activated => Some(HpaEvent::MetricFallbackActivated {
            fallback: fb.fallback.clone(),
            failing_for: fb.failing_for,
            failures: fb.failures,
        }),
        FallbackTransition::Cleared {
            failing_for,
            failures,
        } => Some(HpaEvent::MetricFallbackCleared {
            fallback: fb.fallback.clone(),
            failing_for,
            failures,
        }),
    }
}

/// Controller settings the decision reads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DecisionConfig {
    /// `--horizontal-pod-autoscaler-downscale-stabilization` (5m by default).
    pub downscale_stabilization_window: SignedDuration,
    /// When a target at zero replicas is autoscaled.
    pub zero_replicas: ZeroReplicas,
    /// `HPAGeneration` (1.37, kubernetes#138228): `status.observedGeneration` records the HPA's
    /// `metadata.generation` on every `setStatus`. Conditions get none (1.37.2's
    /// `setConditionInList` leaves their `observedGeneration`, kubernetes#138653's field, as it
    /// was).
    pub observed_generation: bool,
}

impl Default for DecisionConfig {
    fn default() -> Self {
        DecisionConfig {
            downscale_stabilization_window: SignedDuration::from_mins(5),
            zero_replicas: ZeroReplicas::MinReplicasZero,
            observed_generation: false,
        }
    }
}

/// When a target whose `spec.replicas` is 0 is autoscaled (otherwise `ScalingActive=False
/// ScalingDisabled`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZeroReplicas {
    /// Kubernetes 1.35: whenever `minReplicas` is 0.
    MinReplicasZero,
    /// Kubernetes 1.36 and later (kubernetes#135118): only when this controller scaled it to
    /// zero, as its `ScaledToZero=True` condition shows (and, with `minReplicas: 0`, an
    /// Object or External metric exists); `gate` is `HPAScaleToZero`, without which the
    /// condition is neither read nor written.
    ScaledToZeroCondition {
        /// `HPAScaleToZero`.
        gate: bool,
    },
}

/// What one reconcile saw, after a successful scale GET.
#[derive(Debug, Clone, Copy)]
pub struct DecisionInput<'a> {
    /// The queue key, `namespace/name`.
    pub key: &'a str,
    /// The HPA as read from the cache.
    pub hpa: &'a HorizontalPodAutoscaler,
    /// `scale.spec.replicas`.
    pub current_replicas: i32,
    /// The decision time (from the `Clock`).
    pub now: Timestamp,
    /// The tolerances the metrics were computed with ([`crate::tolerance::tolerances_for_hpa`]),
    /// recorded for explanation.
    pub tolerances: Option<Tolerances>,
}

/// Everything one reconcile decided, before the scale write.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The queue key.
    pub key: String,
    /// `kind/namespace/name` of the target.
    pub reference: String,
    /// The decision time.
    pub now: Timestamp,
    /// `scale.spec.replicas`.
    pub current_replicas: i32,
    /// Effective `minReplicas`.
    pub min_replicas: i32,
    /// `maxReplicas`.
    pub max_replicas: i32,
    /// The tolerances the metrics were computed with, if the caller recorded them.
    pub tolerances: Option<Tolerances>,
    /// `status.lastScaleTime` as seen (before this reconcile).
    pub last_scale_time: Option<Timestamp>,
    /// The defaulted behavior, when `spec.behavior` is set.
    pub behavior: Option<EffectiveBehavior>,
    /// The branch taken.
    pub branch: Branch,
    /// The metrics' outcome (branch d only).
    pub metrics: Option<MetricsOutcome>,
    /// The prenormalized desired count (branch d, when the metrics allow acting).
    pub prenormalized: Option<i32>,
    /// The metric that produced the prenormalized count (`""` if none was above 0).
    pub rescale_metric: String,
    /// `rescaleReason` (empty when the prenormalized count equals the current one).
    pub rescale_reason: String,
    /// The normalization steps (branch d, when acting).
    pub normalization: Option<Normalization>,
    /// The desired count before the "no rescale means current" rule.
    pub desired_replicas: i32,
    /// Whether to write the scale.
    pub rescale: bool,
    /// The error to return after a total metric failure
    /// (`failed to compute desired number of replicas based on listed metrics for %s: %v`).
    pub failure: Option<String>,
    /// The conditions to set, in order, before the rescale step.
    pub conditions: Vec<HpaCondition>,
    /// The events emitted before the rescale step, in order.
    pub events: Vec<HpaEvent>,
    /// 1.36+ with `HPAScaleToZero`: the `ScaledToZero` condition to set after a successful
    /// rescale (`true`: `ScaledToZero`, `false`: `NotScaledToZero`).
    pub scaled_to_zero_after_rescale: Option<bool>,
    /// 1.37 with `HPAGeneration`: the HPA's `metadata.generation` (0 when absent), written as
    /// `status.observedGeneration`.
    pub observed_generation: Option<i64>,
    /// The pause in effect (`kube-hpa-controller.io/paused` or `paused-replicas`; no upstream
    /// counterpart, see [`crate::pause`]).
    pub pause: Option<Pause>,
    /// This controller's annotations set with a value that is not valid, ignored (each is
    /// reported once with a Warning event, see [`crate::annotations`]).
    pub invalid_annotations: Vec<InvalidAnnotation>,
    /// Whether the HPA has a valid `kube-hpa-controller.io/metric-fallback` annotation (no
    /// upstream counterpart, see [`crate::fallback`]): its `MetricFallbackActive` condition is
    /// kept, and removed without it.
    pub fallback_configured: bool,
    /// The HPA's own sync period (`kube-hpa-controller.io/sync-period`, after KEP-6003; see
    /// [`crate::sync_period`]): when it is reconciled again, not how it is decided.
    pub sync_period: Option<std::time::Duration>,
    /// The HPA's pod selection strategy (`kube-hpa-controller.io/pod-selection-strategy`,
    /// after KEP-5325; see [`crate::pod_selection`]) when set and valid.
    pub pod_selection: Option<PodSelectionStrategy>,
}

/// Decide one reconcile (`reconcileAutoscaler` after the scale GET). `metrics` is required
/// for [`Branch::FromMetrics`]; if it is missing there, the metrics are treated as an empty
/// list (upstream's degenerate `len(metricSpecs) == 0` path).
///
/// A paused HPA ([`crate::pause`]) is decided by `decide_paused` instead of the branches:
/// same metrics and `ScalingActive` condition, no normalization, no history. An HPA with a
/// valid metric fallback annotation ([`crate::fallback`]) gets its `MetricFallbackActive`
/// condition whenever the metrics were read.
pub fn decide(
    state: &HpaState,
    config: &DecisionConfig,
    input: DecisionInput<'_>,
    metrics: Option<MetricsOutcome>,
) -> Decision {
    let hpa = input.hpa;
    let current = input.current_replicas;
    let min = min_replicas(hpa);
    let max = max_replicas(hpa);
    let behavior = hpa
        .spec
        .behavior
        .as_ref()
        .map(|b| EffectiveBehavior::new(b, config.downscale_stabilization_window));
    let annotations = pause_annotations(hpa);
    let fallback = fallback_annotation(hpa);
    let sync_period = sync_period_annotation(hpa);
    let pod_selection = pod_selection_annotation(hpa);
    let metric_source = metric_source_annotation(hpa);
    let mut invalid = annotations.invalid;
    invalid.extend(fallback.invalid);
    invalid.extend(sync_period.invalid);
    invalid.extend(pod_selection.invalid);
    invalid.extend(metric_source.invalid);
    if annotations.pause.is_some() {
        // A paused HPA keeps no history: see "Unpausing" in `crate::pause`.
        state.forget_history(input.key);
    } else {
        state.set_pinned(input.key, None);
        state.record_initial_recommendation(input.key, current, input.now);
    }
    let warnings = state.new_warnings(input.key, &invalid);
    let branch = Branch::for_hpa(hpa, current, config);
    let mut d = Decision {
        key: input.key.to_owned(),
        reference: scale_target_reference(hpa),
        now: input.now,
        current_replicas: current,
        min_replicas: min,
        max_replicas: max,
        tolerances: input.tolerances,
        last_scale_time: hpa
            .status
            .as_ref()
            .and_then(|st| st.last_scale_time.as_ref())
            .map(|t| t.0),
        behavior,
        branch,
        metrics: None,
        prenormalized: None,
        rescale_metric: String::new(),
        rescale_reason: String::new(),
        normalization: None,
        desired_replicas: 0,
        rescale: true,
        failure: None,
        // A paused HPA's AbleToScale is ScalingPaused alone: set after SucceededGetScale, it
        // would stamp a new lastTransitionTime (True, then False) at every sync.
        conditions: vec![
            annotations
                .pause
                .map_or(HpaCondition::SucceededGetScale, HpaCondition::ScalingPaused),
        ],
        events: warnings
            .into_iter()
            .map(HpaEvent::InvalidAnnotation)
            .collect(),
        scaled_to_zero_after_rescale: None,
        observed_generation: config
            .observed_generation
            .then(|| hpa.metadata.generation.unwrap_or(0)),
        pause: annotations.pause,
        invalid_annotations: invalid,
        fallback_configured: !fallback.fallbacks.is_empty(),
        sync_period: sync_period.period,
        pod_selection: pod_selection.strategy,
    };
    if let Some(pause) = d.pause {
        decide_paused(&mut d, state, pause, metrics);
    } else {
        decide_branch(&mut d, state, config, input, metrics);
    }
    // The metrics were read (not a selector failure): say whether a fallback is in effect.
    if d.fallback_configured
        && let Some(m) = d.metrics.as_ref().filter(|m| m.statuses.is_some())
    {
        d.conditions
            .push(HpaCondition::MetricFallbackActive(m.active_fallbacks()));
    }
    if let ZeroReplicas::ScaledToZeroCondition { gate: true } = config.zero_replicas
        && d.rescale
    {
        d.scaled_to_zero_after_rescale = Some(
            current > 0
                && d.desired_replicas == 0
                && min == 0
                && has_object_or_external_metrics(hpa),
        );
    }
    d
}

/// A paused HPA's decision (no upstream counterpart, see [`crate::pause`]): the branch's
/// metrics and `ScalingActive` condition as usual, then no normalization; the desired count is
/// the current one, or the pinned count until the target has had it once.
fn decide_paused(
    d: &mut Decision,
    state: &HpaState,
    pause: Pause,
    metrics: Option<MetricsOutcome>,
) {
    let current = d.current_replicas;
    match d.branch {
        Branch::ScalingDisabled => d.conditions.push(HpaCondition::ScalingDisabled),
        Branch::AboveMax | Branch::BelowMin => {}
        Branch::FromMetrics => {
            let m = metrics.unwrap_or_else(|| MetricsOutcome::from_results(current, Vec::new()));
            d.events.extend(m.events.iter().cloned());
            if let Some(c) = &m.condition {
                d.conditions.push(c.clone());
            }
            if !m.is_total_failure() && m.replicas > 0 {
                d.rescale_metric = m.metric_name.clone();
            }
            d.metrics = Some(m);
        }
    }
    d.desired_replicas = match pause.pinned_replicas() {
        // Reached (by the pinned write, or it was there): from now on left where it is.
        Some(n) if n == current => {
            state.set_pinned(&d.key, Some(n));
            current
        }
        Some(n) if state.pinned(&d.key) == Some(n) => current,
        Some(n) => n,
        None => current,
    };
    d.rescale = d.desired_replicas != current;
    if d.rescale {
        d.rescale_reason = pause.rescale_reason();
    }
}

/// `reconcileAutoscaler` step 10: the branch's desired count.
fn decide_branch(
    d: &mut Decision,
    state: &HpaState,
    config: &DecisionConfig,
    input: DecisionInput<'_>,
    metrics: Option<MetricsOutcome>,
) {
    let hpa = input.hpa;
    let current = input.current_replicas;
    let (min, max) = (d.min_replicas, d.max_replicas);
    match d.branch {
        Branch::ScalingDisabled => {
            d.rescale = false;
            d.conditions.push(HpaCondition::ScalingDisabled);
        }
        Branch::AboveMax => {
            d.rescale_reason = REASON_ABOVE_MAX.to_owned();
            d.desired_replicas = max;
        }
        Branch::BelowMin => {
            d.rescale_reason = REASON_BELOW_MIN.to_owned();
            d.desired_replicas = min;
        }
        Branch::FromMetrics => {
            let m = metrics.unwrap_or_else(|| MetricsOutcome::from_results(current, Vec::new()));
            d.events.extend(m.events.iter().cloned());
            if let Some(c) = &m.condition {
                d.conditions.push(c.clone());
            }
            if m.is_total_failure() {
                d.rescale = false;
                d.desired_replicas = current;
                d.failure = Some(sprintf(
                    "failed to compute desired number of replicas based on listed metrics for %s: %v",
                    &[
                        GoArg::str(d.reference.as_str()),
                        GoArg::error(m.error.as_deref().unwrap_or("")),
                    ],
                ));
                d.metrics = Some(m);
                return;
            }
            let mut desired = 0;
            if m.replicas > desired {
                desired = m.replicas;
                d.rescale_metric = m.metric_name.clone();
            }
            if desired > current {
                d.rescale_reason =
                    sprintf("%s above target", &[GoArg::str(d.rescale_metric.as_str())]);
            }
            if desired < current {
                d.rescale_reason = REASON_ALL_METRICS_BELOW.to_owned();
            }
            d.prenormalized = Some(desired);
            let n = match &d.behavior {
                None => state.normalize(
                    input.key,
                    current,
                    desired,
                    min,
                    max,
                    config.downscale_stabilization_window,
                    input.now,
                ),
                Some(b) => state
                    .normalize_with_behaviors(input.key, b, current, desired, min, max, input.now),
            };
            d.conditions.push(n.able_to_scale_condition());
            d.conditions.push(n.scaling_limited_condition());
            d.desired_replicas = n.desired;
            // From zero because this controller scaled it there, minReplicas raised since:
            // at least minReplicas (1.36+).
            if let ZeroReplicas::ScaledToZeroCondition { gate: true } = config.zero_replicas
                && current == 0
                && min != 0
                && scaled_to_zero_condition(hpa)
                && d.desired_replicas < min
            {
                d.desired_replicas = min;
                if d.rescale_reason.is_empty() {
                    d.rescale_reason = REASON_BELOW_MIN.to_owned();
                }
            }
            d.rescale = d.desired_replicas != current;
            d.normalization = Some(n);
            d.metrics = Some(m);
        }
    }
}

/// What the caller's scale write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RescaleResult {
    /// No write was made (the decision did not ask for one).
    NotAttempted,
    /// The scale PUT succeeded.
    Succeeded,
    /// The scale PUT failed with this error text.
    Failed(String),
    /// Shadow mode: the write was decided and not made. Rendered as a successful write (the
    /// status and events the active controller writes), but no scale event is stored: the
    /// shadow records the target's changes as it observes them.
    Shadowed,
}

/// The rendered result of one reconcile.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The new status (write it only if `status_changed`).
    pub status: HorizontalPodAutoscalerStatus,
    /// Whether the status differs semantically from the previous one.
    pub status_changed: bool,
    /// Events to emit before the status update, in order.
    pub events: Vec<HpaEvent>,
    /// Events to emit after the status update attempt (`FailedComputeMetricsReplicas`).
    pub events_after_status: Vec<HpaEvent>,
    /// The error to return, if any (before a status-update error replaces it).
    pub error: Option<String>,
    /// The reconciliation `action` label.
    pub action: ActionLabel,
    /// The reported desired count (`status.desiredReplicas`).
    pub desired_replicas: i32,
}

impl Outcome {
    /// The reconciliation `error` label: `internal` whenever an error is returned (a
    /// metric-level `spec` error loses its wrapping on the way up, as `monitor.ObserveReconciliationResult` sees it).
    pub fn error_label(&self) -> ErrorLabel {
        if self.error.is_some() {
            ErrorLabel::Internal
        } else {
            ErrorLabel::None
        }
    }
}

impl Decision {
    /// The V(4) log lines upstream emits for this decision, in klog's structured text form
    /// (message and key/value pairs, without the klog header): "Proposing desired
    /// replicas" (branch d) and "Decided not to scale".
    pub fn log_lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(p) = self.pause {
            // No upstream counterpart: a paused HPA proposes nothing and decides nothing.
            out.push(format!(
                "\"Scaling is paused\" scaleTarget={} annotation={} desiredReplicas={}",
                quote(&self.reference),
                quote(p.annotation()),
                self.desired_replicas
            ));
            return out;
        }
        if let Some(m) = &self.metrics
            && !m.is_total_failure()
        {
            out.push(format!(
                "\"Proposing desired replicas\" desiredReplicas={} metric={} timestamp={} scaleTarget={}",
                m.replicas,
                quote(&m.metric_name),
                quote(&go_time_string(m.timestamp)),
                quote(&self.reference)
            ));
        }
        if !self.rescale && self.failure.is_none() {
            // klog prints the *metav1.Time through its String(); an absent time is
            // rendered as `<nil>` here (approximation).
            let last = self
                .last_scale_time
                .map_or_else(|| "<nil>".to_owned(), |t| quote(&go_time_string(Some(t))));
            out.push(format!(
                "\"Decided not to scale\" scaleTarget={} desiredReplicas={} lastScaleTime={}",
                quote(&self.reference),
                self.desired_replicas,
                last
            ));
        }
        out
    }

    /// A multi-line human explanation of the decision (inputs, each metric, each
    /// normalization step and the bound that applied).
    pub fn explain(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{}: target {} current={} min={} max={} behavior={}",
            self.key,
            self.reference,
            self.current_replicas,
            self.min_replicas,
            self.max_replicas,
            self.behavior.is_some()
        );
        let _ = writeln!(s, "branch: {:?}", self.branch);
        if let Some(p) = self.pause {
            let _ = writeln!(s, "paused: {}", p.message());
        }
        for a in &self.invalid_annotations {
            let _ = writeln!(s, "ignored: {a}");
        }
        for f in self.metrics.iter().flat_map(|m| &m.fallbacks) {
            let _ = writeln!(
                s,
                "fallback {}: {} failures over {}{}",
                f.fallback.describe(),
                f.failures,
                crate::fallback::go_seconds(f.failing_for),
                if f.in_effect {
                    format!(", in effect: {}", f.fallback.action_text())
                } else {
                    String::new()
                }
            );
        }
        if let Some(t) = &self.tolerances {
            let _ = writeln!(s, "tolerances: down={} up={}", t.scale_down, t.scale_up);
        }
        if let Some(m) = &self.metrics {
            for (i, (ty, r)) in m.per_metric.iter().enumerate() {
                match r {
                    Ok(p) => {
                        let _ = writeln!(
                            s,
                            "metric[{i}] {ty}: {} proposes {}",
                            p.metric_name, p.replicas
                        );
                    }
                    Err(f) => {
                        let _ = writeln!(s, "metric[{i}] {ty}: {} {}", f.reason.as_str(), f.error);
                    }
                }
            }
            let _ = writeln!(
                s,
                "metrics: proposal={} from {:?} ({} invalid){}",
                m.replicas,
                m.metric_name,
                m.invalid_metrics,
                m.error
                    .as_ref()
                    .map(|e| format!("; error: {e}"))
                    .unwrap_or_default()
            );
        }
        if let Some(n) = &self.normalization {
            let _ = writeln!(
                s,
                "normalize: prenormalized={} stabilized={} ({}) rate_limit={:?} -> {} ({})",
                n.prenormalized,
                n.stabilized,
                n.stabilization.as_str(),
                n.rate_limit,
                n.desired,
                n.limit.as_str()
            );
        }
        let _ = writeln!(
            s,
            "desired={} rescale={} reason={:?}",
            self.desired_replicas, self.rescale, self.rescale_reason
        );
        if let Some(f) = &self.failure {
            let _ = writeln!(s, "failure: {f}");
        }
        s
    }

    /// Render the status, events and error once the scale write (if any) is done. On a
    /// successful rescale this stores the scale event (behavior only) in `state`.
    pub fn complete(
        &self,
        state: &HpaState,
        previous: &HorizontalPodAutoscalerStatus,
        rescale: RescaleResult,
    ) -> Outcome {
        let now = self.now;
        let mut status = previous.clone();
        for c in &self.conditions {
            self.set_condition(&mut status, c);
        }
        if !self.fallback_configured
            && let Some(conditions) = status.conditions.as_mut()
        {
            // No (valid) fallback annotation: no condition about it (`crate::fallback`).
            remove_condition(conditions, ConditionType::MetricFallbackActive);
        }
        let mut events = self.events.clone();
        let metric_statuses = self.metrics.as_ref().and_then(|m| m.statuses.clone());
        let current = self.current_replicas;

        if let Some(failure) = &self.failure {
            set_current_replicas_and_metrics_in_status(&mut status, current, metric_statuses, now);
            let err = self
                .metrics
                .as_ref()
                .and_then(|m| m.error.clone())
                .unwrap_or_default();
            return self.outcome(
                previous,
                status,
                events,
                vec![HpaEvent::FailedComputeMetricsReplicas { err }],
                Some(failure.clone()),
                ActionLabel::None,
            );
        }

        let mut action = ActionLabel::None;
        let written = rescale == RescaleResult::Succeeded;
        let desired = match (self.rescale, rescale) {
            (true, RescaleResult::Succeeded | RescaleResult::Shadowed) => {
                if let Some(zero) = self.scaled_to_zero_after_rescale {
                    let c = if zero {
                        HpaCondition::ScaledToZero
                    } else {
                        HpaCondition::NotScaledToZero
                    };
                    self.set_condition(&mut status, &c);
                }
                if let Some(pause) = self.pause {
                    // The pinned write: AbleToScale stays ScalingPaused, and no scale event is
                    // stored (see "Unpausing" in `crate::pause`); the target has had the pinned
                    // count once.
                    state.set_pinned(&self.key, pause.pinned_replicas());
                } else {
                    self.set_condition(
                        &mut status,
                        &HpaCondition::SucceededRescale {
                            replicas: self.desired_replicas,
                        },
                    );
                }
                events.push(HpaEvent::SuccessfulRescale {
                    new_size: self.desired_replicas,
                    reason: self.rescale_reason.clone(),
                });
                if written && self.pause.is_none() {
                    state.store_scale_event(
                        &self.key,
                        self.behavior.as_ref(),
                        current,
                        self.desired_replicas,
                        now,
                    );
                }
                action = if self.desired_replicas > current {
                    ActionLabel::ScaleUp
                } else {
                    ActionLabel::ScaleDown
                };
                self.desired_replicas
            }
            (true, RescaleResult::Failed(err)) => {
                events.push(HpaEvent::FailedRescale {
                    new_size: self.desired_replicas,
                    reason: self.rescale_reason.clone(),
                    err: err.clone(),
                });
                self.set_condition(
                    &mut status,
                    &HpaCondition::FailedUpdateScale { err: err.clone() },
                );
                set_current_replicas_and_metrics_in_status(
                    &mut status,
                    current,
                    metric_statuses,
                    now,
                );
                let error = sprintf(
                    "failed to rescale %s: %v",
                    &[
                        GoArg::str(self.reference.as_str()),
                        GoArg::error(err.as_str()),
                    ],
                );
                return self.outcome(previous, status, events, vec![], Some(error), action);
            }
            // Not rescaling (or the caller did not write): report the current count.
            _ => current,
        };
        let rescaled = action != ActionLabel::None;
        set_status(
            &mut status,
            current,
            desired,
            metric_statuses,
            rescaled,
            now,
        );
        let error = self.metrics.as_ref().and_then(|m| m.error.clone());
        self.outcome(previous, status, events, vec![], error, action)
    }

    /// `setCondition` on `status` at this decision's time. Upstream's `setConditionInList`
    /// never sets a condition's `observedGeneration` (1.37.2: the type has the field, the
    /// controller leaves it as it was).
    fn set_condition(&self, status: &mut HorizontalPodAutoscalerStatus, condition: &HpaCondition) {
        set_condition(
            status.conditions.get_or_insert_with(Vec::new),
            condition,
            self.now,
        );
    }

    fn outcome(
        &self,
        previous: &HorizontalPodAutoscalerStatus,
        status: HorizontalPodAutoscalerStatus,
        events: Vec<HpaEvent>,
        events_after_status: Vec<HpaEvent>,
        error: Option<String>,
        action: ActionLabel,
    ) -> Outcome {
        // Every path here went through setStatus, which 1.37 gives the generation.
        let mut status = status;
        if self.observed_generation.is_some() {
            status.observed_generation = self.observed_generation;
        }
        Outcome {
            status_changed: !status_semantically_equal(previous, &status),
            desired_replicas: status.desired_replicas,
            status,
            events,
            events_after_status,
            error,
            action,
        }
    }
}

/// The `metricNameProposal` texts of `computeStatusFor*`, used in
/// `ValidMetricFound` messages and in `%s above target` rescale reasons.
pub mod metric_names {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

    use crate::gofmt::{GoArg, SelectorStyle, label_selector_plus_v, sprintf};

    /// Object Value target: `%s metric %s` (describedObject.kind, metric name).
    pub fn object(described_kind: &str, metric: &str) -> String {
        sprintf(
            "%s metric %s",
            &[GoArg::str(described_kind), GoArg::str(metric)],
        )
    }

    /// External metrics and Object AverageValue targets (upstream really says
    /// "external" for both): `external metric %s(%+v)` with the `*LabelSelector`.
    pub fn external(
        metric: &str,
        selector: Option<&LabelSelector>,
        style: SelectorStyle,
    ) -> String {
        sprintf(
            "external metric %s(%+v)",
            &[
                GoArg::str(metric),
                GoArg::str(label_selector_plus_v(selector, style)),
            ],
        )
    }

    /// Pods metrics: `pods metric %s`.
    pub fn pods(metric: &str) -> String {
        sprintf("pods metric %s", &[GoArg::str(metric)])
    }

    /// Resource and ContainerResource AverageValue targets: `%s resource`.
    pub fn resource(resource: &str) -> String {
        sprintf("%s resource", &[GoArg::str(resource)])
    }

    /// Resource Utilization targets: `%s resource utilization (percentage of request)`.
    pub fn resource_utilization(resource: &str) -> String {
        sprintf(
            "%s resource utilization (percentage of request)",
            &[GoArg::str(resource)],
        )
    }

    /// ContainerResource Utilization targets:
    /// `%s container resource utilization (percentage of request)`.
    pub fn container_resource_utilization(resource: &str) -> String {
        sprintf(
            "%s container resource utilization (percentage of request)",
            &[GoArg::str(resource)],
        )
    }
}

/// The event and error of a failed status update (`updateStatus`): Warning
/// `FailedUpdateStatus` with the error text, and `failed to update status for %s: %v`.
pub fn status_update_failure(hpa_name: &str, err: &str) -> (HpaEvent, String) {
    (
        HpaEvent::FailedUpdateStatus {
            err: err.to_owned(),
        },
        sprintf(
            "failed to update status for %s: %v",
            &[GoArg::str(hpa_name), GoArg::error(err)],
        ),
    )
}

/// Go's `time.Time.String()` for a UTC instant: `2006-01-02 15:04:05.999999999 +0000 UTC`
/// (`None`, Go's zero time, prints `0001-01-01 00:00:00 +0000 UTC`).
pub fn go_time_string(t: Option<Timestamp>) -> String {
    let Some(t) = t else {
        return "0001-01-01 00:00:00 +0000 UTC".to_owned();
    };
    let base = jiff::fmt::strtime::format("%Y-%m-%d %H:%M:%S", t).unwrap_or_default();
    let nanos = t.subsec_nanosecond();
    if nanos == 0 {
        format!("{base} +0000 UTC")
    } else {
        let frac = format!("{nanos:09}");
        format!("{base}.{} +0000 UTC", frac.trim_end_matches('0'))
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod pause_tests;

#[cfg(test)]
mod fallback_tests;
