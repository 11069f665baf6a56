//! The pure core of one reconcile: a [`Decision`] value from which the status, conditions,
//! events, error text and log lines are rendered (spec §3.2 steps 6-13, §3.3, §6).
//!
//! Mirrors upstream `pkg/controller/podautoscaler/horizontal.go` `reconcileAutoscaler` (from
//! the successful scale GET on), the aggregation part of `computeReplicasForMetrics`, the
//! selector failures of `validateAndParseSelector`, and the rescale / `setStatus` tail. The
//! I/O (scale GET and PUT, metric fetching, status PUT) stays with the caller:
//!
//! 1. after the scale GET, [`Branch::classify`] tells whether metrics are needed;
//! 2. the caller computes each metric ([`MetricResult`]) and aggregates them with
//!    [`MetricsOutcome::from_results`] (or reports a selector failure);
//! 3. [`decide`] normalizes and records everything in a [`Decision`];
//! 4. the caller writes the scale if [`Decision::rescale`], then [`Decision::complete`]
//!    renders the new status, the events, the error and the monitor action.

use std::fmt::Write as _;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::autoscaling::v2::{
    HorizontalPodAutoscaler, HorizontalPodAutoscalerStatus, MetricStatus,
};

use crate::behavior::EffectiveBehavior;
use crate::conditions::{
    HpaCondition, MetricFailureReason, invalid_selector_message, set_condition_observed,
};
use crate::events::HpaEvent;
use crate::gofmt::{GoArg, quote, sprintf};
use crate::labels::{ActionLabel, ErrorLabel};
use crate::normalize::Normalization;
use crate::state::HpaState;
use crate::status::{
    set_current_replicas_and_metrics_in_status, set_status, status_semantically_equal,
};
use crate::tolerance::HpaTolerances;

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
        .find(|c| c.type_ == "ScaledToZero")
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

/// One metric's failure.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricFailure {
    /// The event and condition reason.
    pub reason: MetricFailureReason,
    /// The error the event and the `ScalingActive` condition show (the per-type inner
    /// error, e.g. `failed to get cpu utilization: ...`).
    pub condition_error: String,
    /// The error returned upward (e.g. `failed to get cpu resource metric value: ...`).
    pub error: String,
    /// Whether the error wraps upstream's `errSpec` (unknown metric source type): the
    /// metric-computation error label is then `spec`.
    pub spec_error: bool,
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
            spec_error: true,
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
            Err(f) if f.spec_error => ErrorLabel::Spec,
            Err(_) => ErrorLabel::Internal,
        }
    }
}

/// Why `validateAndParseSelector` (or the pod listing) failed.
#[derive(Debug, Clone, PartialEq)]
pub enum SelectorFailure {
    /// The scale's selector is empty.
    Missing,
    /// The selector does not parse; the parse error text.
    Invalid(String),
    /// More than one HPA controls the pods.
    Ambiguous {
        /// The raw selector string.
        selector: String,
        /// The controlling HPA keys, `namespace/name`.
        hpas: Vec<String>,
    },
    /// Listing pods failed (no event, no condition); the error text.
    PodList(String),
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
    /// The `ScalingActive` condition set.
    pub condition: Option<HpaCondition>,
    /// The events emitted while computing (one per failing metric, or the selector's).
    pub events: Vec<HpaEvent>,
    /// How many metrics failed.
    pub invalid_metrics: usize,
    /// Every metric's type and proposal or failure, in spec order (empty on selector
    /// failure).
    pub per_metric: Vec<(String, Result<MetricProposal, MetricFailure>)>,
}

impl MetricsOutcome {
    /// The aggregation of `computeReplicasForMetrics` (spec §3.3 steps 3-7): the maximum of
    /// the valid proposals (the first seeds it, a 0 is replaced by any later one, ties keep
    /// the earlier name); the error `invalid metrics (%v invalid out of %v), first error is:
    /// %v`; and the rule for acting: all invalid, or some invalid while the valid ones would
    /// scale below `spec_replicas`, gives -1 with the first failure's condition; otherwise
    /// `ScalingActive=True ValidMetricFound`.
    pub fn from_results(spec_replicas: i32, results: Vec<MetricResult>) -> Self {
        let total = results.len();
        let mut replicas = 0i32;
        let mut metric_name = String::new();
        let mut timestamp = None;
        let mut invalid = 0usize;
        let mut first: Option<(HpaCondition, String)> = None;
        let mut events = Vec::new();
        let mut statuses = Vec::with_capacity(total);
        let mut per_metric = Vec::with_capacity(total);
        for r in results {
            per_metric.push((r.metric_type.clone(), r.outcome.clone()));
            match r.outcome {
                Ok(p) => {
                    if replicas == 0 || p.replicas > replicas {
                        replicas = p.replicas;
                        metric_name = p.metric_name;
                        timestamp = p.timestamp;
                    }
                }
                Err(f) => {
                    events.push(HpaEvent::FailedGetMetric {
                        reason: f.reason,
                        err: f.condition_error.clone(),
                    });
                    if first.is_none() {
                        first = Some((
                            HpaCondition::FailedComputeMetric {
                                reason: f.reason,
                                err: f.condition_error,
                            },
                            f.error,
                        ));
                    }
                    invalid += 1;
                }
            }
            statuses.push(r.status);
        }
        let error = first.as_ref().map(|(_, e)| {
            sprintf(
                "invalid metrics (%v invalid out of %v), first error is: %v",
                &[
                    GoArg::int(invalid as i64),
                    GoArg::int(total as i64),
                    GoArg::error(e.as_str()),
                ],
            )
        });
        if invalid >= total || (invalid > 0 && replicas < spec_replicas) {
            return MetricsOutcome {
                replicas: -1,
                metric_name: String::new(),
                timestamp: None,
                statuses: Some(statuses),
                error,
                condition: Some(first.map_or(HpaCondition::Empty, |(c, _)| c)),
                events,
                invalid_metrics: invalid,
                per_metric,
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
            events,
            invalid_metrics: invalid,
            per_metric,
        }
    }

    /// A selector failure (spec §3.4): -1, no statuses, the failure's event and condition
    /// (none for a pod-list error) and its error text.
    pub fn selector_failure(failure: SelectorFailure) -> Self {
        let (event, condition, error) = match failure {
            SelectorFailure::Missing => (
                Some(HpaEvent::SelectorRequired),
                Some(HpaCondition::MissingSelector),
                "selector is required".to_owned(),
            ),
            SelectorFailure::Invalid(err) => {
                let msg = invalid_selector_message(&err);
                (
                    Some(HpaEvent::InvalidSelector { err: err.clone() }),
                    Some(HpaCondition::InvalidSelector { err }),
                    msg,
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
                )
            }
            SelectorFailure::PodList(err) => (None, None, err),
        };
        MetricsOutcome {
            replicas: -1,
            metric_name: String::new(),
            timestamp: None,
            statuses: None,
            error: Some(error),
            condition,
            events: event.into_iter().collect(),
            invalid_metrics: 0,
            per_metric: Vec::new(),
        }
    }

    /// Whether the controller cannot act on these metrics (`-1` with an error).
    pub fn is_total_failure(&self) -> bool {
        self.error.is_some() && self.replicas == -1
    }
}

/// Controller settings the decision reads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DecisionConfig {
    /// `--horizontal-pod-autoscaler-downscale-stabilization` (5m by default).
    pub downscale_stabilization_window: SignedDuration,
    /// When a target at zero replicas is autoscaled.
    pub zero_replicas: ZeroReplicas,
    /// `HPAGeneration` (1.37, kubernetes#138228, #138653): `status.observedGeneration` and
    /// each condition set in a reconcile record the HPA's `metadata.generation`.
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
    pub tolerances: Option<HpaTolerances>,
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
    pub tolerances: Option<HpaTolerances>,
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
    /// `status.observedGeneration` and into every condition set.
    pub observed_generation: Option<i64>,
}

/// Decide one reconcile (`reconcileAutoscaler` after the scale GET). `metrics` is required
/// for [`Branch::FromMetrics`]; if it is missing there, the metrics are treated as an empty
/// list (upstream's degenerate `len(metricSpecs) == 0` path).
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
    state.record_initial_recommendation(input.key, current, input.now);
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
        conditions: vec![HpaCondition::SucceededGetScale],
        events: Vec::new(),
        scaled_to_zero_after_rescale: None,
        observed_generation: config
            .observed_generation
            .then(|| hpa.metadata.generation.unwrap_or(0)),
    };
    match branch {
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
                return d;
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
    /// metric-level `spec` error loses its wrapping on the way up, spec §9.1).
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
        {
            let conditions = status.conditions.get_or_insert_with(Vec::new);
            for c in &self.conditions {
                set_condition_observed(conditions, c, now, self.observed_generation);
            }
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
                    set_condition_observed(
                        status.conditions.get_or_insert_with(Vec::new),
                        &c,
                        now,
                        self.observed_generation,
                    );
                }
                set_condition_observed(
                    status.conditions.get_or_insert_with(Vec::new),
                    &HpaCondition::SucceededRescale {
                        replicas: self.desired_replicas,
                    },
                    now,
                    self.observed_generation,
                );
                events.push(HpaEvent::SuccessfulRescale {
                    new_size: self.desired_replicas,
                    reason: self.rescale_reason.clone(),
                });
                if written {
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
                set_condition_observed(
                    status.conditions.get_or_insert_with(Vec::new),
                    &HpaCondition::FailedUpdateScale { err: err.clone() },
                    now,
                    self.observed_generation,
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

/// The `metricNameProposal` texts of `computeStatusFor*` (spec §3.5), used in
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
mod tests {
    use k8s_openapi::api::autoscaling::v2::{
        CrossVersionObjectReference, HPAScalingPolicy, HPAScalingRules,
        HorizontalPodAutoscalerBehavior, HorizontalPodAutoscalerSpec,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::conditions::LimitReason;

    fn now() -> Timestamp {
        "2025-06-01T12:00:00Z".parse().unwrap()
    }

    fn hpa(
        min: Option<i32>,
        max: i32,
        behavior: Option<HorizontalPodAutoscalerBehavior>,
    ) -> HorizontalPodAutoscaler {
        HorizontalPodAutoscaler {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("default".into()),
                ..Default::default()
            },
            spec: HorizontalPodAutoscalerSpec {
                min_replicas: min,
                max_replicas: max,
                scale_target_ref: CrossVersionObjectReference {
                    api_version: Some("apps/v1".into()),
                    kind: "Deployment".into(),
                    name: "web".into(),
                },
                behavior,
                metrics: None,
            },
            status: None,
        }
    }

    fn ok(replicas: i32, name: &str) -> MetricResult {
        MetricResult {
            metric_type: "Resource".into(),
            status: MetricStatus {
                type_: "Resource".into(),
                ..Default::default()
            },
            outcome: Ok(MetricProposal {
                replicas,
                metric_name: name.into(),
                timestamp: Some(now()),
                detail: None,
            }),
        }
    }

    fn failed(reason: MetricFailureReason, inner: &str, outer: &str) -> MetricResult {
        MetricResult {
            metric_type: "External".into(),
            status: MetricStatus::default(),
            outcome: Err(MetricFailure {
                reason,
                condition_error: inner.into(),
                error: outer.into(),
                spec_error: false,
            }),
        }
    }

    fn input<'a>(h: &'a HorizontalPodAutoscaler, current: i32) -> DecisionInput<'a> {
        DecisionInput {
            key: "default/web",
            hpa: h,
            current_replicas: current,
            now: now(),
            tolerances: None,
        }
    }

    #[test]
    fn branches() {
        assert_eq!(Branch::classify(0, 1, 10), Branch::ScalingDisabled);
        assert_eq!(Branch::classify(0, 0, 10), Branch::FromMetrics);
        assert_eq!(Branch::classify(11, 1, 10), Branch::AboveMax);
        assert_eq!(Branch::classify(1, 2, 10), Branch::BelowMin);
        assert_eq!(Branch::classify(5, 2, 10), Branch::FromMetrics);
    }

    fn with_zero_state(
        min: i32,
        metric_type: &str,
        scaled_to_zero: Option<&str>,
    ) -> HorizontalPodAutoscaler {
        let mut h = hpa(Some(min), 10, None);
        h.spec.metrics = Some(vec![k8s_openapi::api::autoscaling::v2::MetricSpec {
            type_: metric_type.into(),
            ..Default::default()
        }]);
        h.status = scaled_to_zero.map(|st| HorizontalPodAutoscalerStatus {
            conditions: Some(vec![
                k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscalerCondition {
                    type_: "ScaledToZero".into(),
                    status: st.into(),
                    ..Default::default()
                },
            ]),
            ..Default::default()
        });
        h
    }

    #[test]
    fn zero_replicas_rules_per_version() {
        let v135 = DecisionConfig::default();
        let on = DecisionConfig {
            zero_replicas: ZeroReplicas::ScaledToZeroCondition { gate: true },
            ..DecisionConfig::default()
        };
        let off = DecisionConfig {
            zero_replicas: ZeroReplicas::ScaledToZeroCondition { gate: false },
            ..DecisionConfig::default()
        };
        let manual = with_zero_state(0, "External", None);
        let ours = with_zero_state(0, "External", Some("True"));
        let ours_cpu = with_zero_state(0, "Resource", Some("True"));
        let ours_min = with_zero_state(2, "Resource", Some("True"));
        let was_ours = with_zero_state(0, "Object", Some("False"));
        // 1.35: minReplicas alone decides.
        assert_eq!(Branch::for_hpa(&manual, 0, &v135), Branch::FromMetrics);
        assert_eq!(
            Branch::for_hpa(&ours_min, 0, &v135),
            Branch::ScalingDisabled
        );
        // 1.36+: the condition decides, read only with the gate on.
        assert_eq!(Branch::for_hpa(&manual, 0, &on), Branch::ScalingDisabled);
        assert_eq!(Branch::for_hpa(&ours, 0, &on), Branch::FromMetrics);
        assert_eq!(Branch::for_hpa(&ours, 0, &off), Branch::ScalingDisabled);
        assert_eq!(Branch::for_hpa(&ours_cpu, 0, &on), Branch::ScalingDisabled);
        assert_eq!(Branch::for_hpa(&ours_min, 0, &on), Branch::FromMetrics);
        assert_eq!(Branch::for_hpa(&was_ours, 0, &on), Branch::ScalingDisabled);
        // Above zero nothing changes.
        assert_eq!(Branch::for_hpa(&manual, 3, &on), Branch::FromMetrics);
    }

    #[test]
    fn scaled_to_zero_condition_after_a_rescale() {
        let on = DecisionConfig {
            downscale_stabilization_window: SignedDuration::ZERO,
            zero_replicas: ZeroReplicas::ScaledToZeroCondition { gate: true },
            observed_generation: false,
        };
        let h = with_zero_state(0, "External", None);
        let state = HpaState::new();
        let d = decide(
            &state,
            &on,
            input(&h, 3),
            Some(MetricsOutcome::from_results(3, vec![ok(0, "q")])),
        );
        assert_eq!(
            (d.desired_replicas, d.scaled_to_zero_after_rescale),
            (0, Some(true))
        );
        let out = d.complete(
            &state,
            &HorizontalPodAutoscalerStatus::default(),
            RescaleResult::Succeeded,
        );
        let c = out
            .status
            .conditions
            .unwrap()
            .into_iter()
            .find(|c| c.type_ == "ScaledToZero")
            .unwrap();
        assert_eq!(
            (c.status.as_str(), c.reason.as_deref(), c.message.as_deref()),
            (
                "True",
                Some("ScaledToZero"),
                Some("the HPA controller scaled the workload to zero")
            )
        );
        // A failed scale write sets no ScaledToZero condition.
        let out = d.complete(
            &state,
            &HorizontalPodAutoscalerStatus::default(),
            RescaleResult::Failed("boom".into()),
        );
        assert!(
            !out.status
                .conditions
                .unwrap()
                .iter()
                .any(|c| c.type_ == "ScaledToZero")
        );
        // Any other rescale: False/NotScaledToZero; no rescale, no condition.
        let d = decide(
            &state,
            &on,
            input(&h, 3),
            Some(MetricsOutcome::from_results(3, vec![ok(5, "q")])),
        );
        assert_eq!(d.scaled_to_zero_after_rescale, Some(false));
        let d = decide(
            &state,
            &on,
            input(&h, 5),
            Some(MetricsOutcome::from_results(5, vec![ok(5, "q")])),
        );
        assert_eq!((d.rescale, d.scaled_to_zero_after_rescale), (false, None));
        // 1.35 never writes it.
        let d = decide(
            &HpaState::new(),
            &DecisionConfig::default(),
            input(&h, 3),
            Some(MetricsOutcome::from_results(3, vec![ok(0, "q")])),
        );
        assert_eq!(d.scaled_to_zero_after_rescale, None);
    }

    #[test]
    fn aggregation_rules() {
        // Max of proposals, ties keep the earlier name, zero is replaced.
        let m = MetricsOutcome::from_results(3, vec![ok(0, "a"), ok(4, "b"), ok(4, "c")]);
        assert_eq!((m.replicas, m.metric_name.as_str()), (4, "b"));
        assert_eq!(
            m.condition,
            Some(HpaCondition::ValidMetricFound { metric: "b".into() })
        );
        // Some invalid, valid ones scale up: act, keep the partial error.
        let m = MetricsOutcome::from_results(
            3,
            vec![
                failed(
                    MetricFailureReason::FailedGetExternalMetric,
                    "inner",
                    "outer",
                ),
                ok(5, "cpu"),
            ],
        );
        assert_eq!(m.replicas, 5);
        assert_eq!(
            m.error.as_deref(),
            Some("invalid metrics (1 invalid out of 2), first error is: outer")
        );
        assert_eq!(m.events.len(), 1);
        assert!(!m.is_total_failure());
        // Some invalid, valid ones scale down: cannot act.
        let m = MetricsOutcome::from_results(
            5,
            vec![
                failed(
                    MetricFailureReason::FailedGetExternalMetric,
                    "inner",
                    "outer",
                ),
                ok(2, "cpu"),
            ],
        );
        assert!(m.is_total_failure());
        assert_eq!(
            m.condition.as_ref().map(HpaCondition::reason),
            Some("FailedGetExternalMetric")
        );
        assert_eq!(
            m.condition.as_ref().map(HpaCondition::message).as_deref(),
            Some("the HPA was unable to compute the replica count: inner")
        );
        assert_eq!(m.statuses.as_ref().map(Vec::len), Some(2));
        // Empty spec: -1 with no error and the empty condition.
        let m = MetricsOutcome::from_results(5, vec![]);
        assert_eq!(
            (m.replicas, m.error.clone(), m.condition.clone()),
            (-1, None, Some(HpaCondition::Empty))
        );
    }

    #[test]
    fn worked_example_message_chain() {
        // Spec §3.5 worked example (CPU utilization, metrics-server down).
        let inner = "failed to get cpu utilization: unable to get metrics for resource cpu: unable to fetch metrics from resource metrics API: boom";
        let outer = format!("failed to get cpu resource metric value: {inner}");
        let h = hpa(Some(1), 10, None);
        let state = HpaState::new();
        let m = MetricsOutcome::from_results(
            3,
            vec![failed(
                MetricFailureReason::FailedGetResourceMetric,
                inner,
                &outer,
            )],
        );
        let d = decide(&state, &DecisionConfig::default(), input(&h, 3), Some(m));
        assert_eq!(
            d.failure.as_deref(),
            Some(format!("failed to compute desired number of replicas based on listed metrics for Deployment/default/web: invalid metrics (1 invalid out of 1), first error is: {outer}").as_str())
        );
        let prev = HorizontalPodAutoscalerStatus {
            desired_replicas: 4,
            current_replicas: Some(4),
            ..Default::default()
        };
        let o = d.complete(&state, &prev, RescaleResult::NotAttempted);
        assert_eq!(
            o.events,
            vec![HpaEvent::FailedGetMetric {
                reason: MetricFailureReason::FailedGetResourceMetric,
                err: inner.into()
            }]
        );
        assert_eq!(
            o.events_after_status,
            vec![HpaEvent::FailedComputeMetricsReplicas {
                err: format!("invalid metrics (1 invalid out of 1), first error is: {outer}")
            }]
        );
        // Previous desired kept; current updated; one zero-value metric status.
        assert_eq!(
            (o.status.desired_replicas, o.status.current_replicas),
            (4, Some(3))
        );
        assert_eq!(
            o.status
                .current_metrics
                .as_ref()
                .map(|v| v[0].type_.as_str()),
            Some("")
        );
        let conds = o.status.conditions.clone().unwrap();
        assert_eq!(
            conds
                .iter()
                .map(|c| (
                    c.type_.as_str(),
                    c.status.as_str(),
                    c.reason.as_deref().unwrap()
                ))
                .collect::<Vec<_>>(),
            vec![
                ("AbleToScale", "True", "SucceededGetScale"),
                ("ScalingActive", "False", "FailedGetResourceMetric")
            ]
        );
        assert_eq!(o.action, ActionLabel::None);
        assert_eq!(o.error_label(), ErrorLabel::Internal);
    }

    #[test]
    fn scale_up_legacy_path() {
        let h = hpa(Some(1), 10, None);
        let state = HpaState::new();
        let m = MetricsOutcome::from_results(
            3,
            vec![ok(50, "cpu resource utilization (percentage of request)")],
        );
        let d = decide(&state, &DecisionConfig::default(), input(&h, 3), Some(m));
        assert_eq!(
            d.rescale_reason,
            "cpu resource utilization (percentage of request) above target"
        );
        assert_eq!((d.desired_replicas, d.rescale), (6, true));
        assert_eq!(
            d.normalization.as_ref().unwrap().limit,
            LimitReason::ScaleUpLimit
        );
        let text = d.explain();
        assert!(
            text.contains(
                "metric[0] Resource: cpu resource utilization (percentage of request) proposes 50"
            ),
            "{text}"
        );
        assert!(text.contains("normalize: prenormalized=50 stabilized=50 (ReadyForNewScale) rate_limit=Some(6) -> 6 (ScaleUpLimit)"), "{text}");
        let o = d.complete(
            &state,
            &HorizontalPodAutoscalerStatus::default(),
            RescaleResult::Succeeded,
        );
        assert_eq!(o.action, ActionLabel::ScaleUp);
        assert_eq!(o.status.desired_replicas, 6);
        assert_eq!(o.status.last_scale_time.as_ref().map(|t| t.0), Some(now()));
        assert_eq!(
            o.events,
            vec![HpaEvent::SuccessfulRescale {
                new_size: 6,
                reason: "cpu resource utilization (percentage of request) above target".into()
            }]
        );
        let conds = o.status.conditions.unwrap();
        assert_eq!(
            conds
                .iter()
                .map(|c| (c.type_.as_str(), c.reason.as_deref().unwrap()))
                .collect::<Vec<_>>(),
            vec![
                ("AbleToScale", "SucceededRescale"),
                ("ScalingActive", "ValidMetricFound"),
                ("ScalingLimited", "ScaleUpLimit")
            ]
        );
        assert_eq!(
            conds[0].message.as_deref(),
            Some("the HPA controller was able to update the target scale to 6")
        );
        assert!(o.status_changed);
        // No behavior: no scale events.
        assert!(state.scale_up_events("default/web").is_empty());
        assert!(d.log_lines()[0].starts_with("\"Proposing desired replicas\" desiredReplicas=50 metric=\"cpu resource utilization (percentage of request)\" timestamp=\"2025-06-01 12:00:00 +0000 UTC\""));
    }

    #[test]
    fn steady_state_writes_nothing() {
        let h = hpa(Some(1), 10, None);
        let state = HpaState::new();
        let run = |prev: &HorizontalPodAutoscalerStatus| {
            let m = MetricsOutcome::from_results(3, vec![ok(3, "cpu resource")]);
            let d = decide(&state, &DecisionConfig::default(), input(&h, 3), Some(m));
            assert!(!d.rescale);
            d.complete(&state, prev, RescaleResult::NotAttempted)
        };
        let first = run(&HorizontalPodAutoscalerStatus::default());
        assert!(first.status_changed);
        assert_eq!(first.status.desired_replicas, 3);
        let second = run(&first.status);
        assert!(!second.status_changed);
        let d = decide(
            &state,
            &DecisionConfig::default(),
            input(&h, 3),
            Some(MetricsOutcome::from_results(3, vec![ok(3, "cpu resource")])),
        );
        assert_eq!(
            d.log_lines()[1],
            "\"Decided not to scale\" scaleTarget=\"Deployment/default/web\" desiredReplicas=3 lastScaleTime=<nil>"
        );
    }

    #[test]
    fn branch_b_and_behavior_scale_events() {
        let behavior = HorizontalPodAutoscalerBehavior {
            scale_down: Some(HPAScalingRules {
                policies: Some(vec![HPAScalingPolicy {
                    type_: "Pods".into(),
                    value: 1,
                    period_seconds: 60,
                }]),
                ..Default::default()
            }),
            scale_up: None,
        };
        let h = hpa(Some(1), 5, Some(behavior));
        let state = HpaState::new();
        let d = decide(&state, &DecisionConfig::default(), input(&h, 8), None);
        assert_eq!(
            (d.branch, d.desired_replicas, d.rescale),
            (Branch::AboveMax, 5, true)
        );
        assert_eq!(d.rescale_reason, REASON_ABOVE_MAX);
        let o = d.complete(
            &state,
            &HorizontalPodAutoscalerStatus::default(),
            RescaleResult::Succeeded,
        );
        assert_eq!(o.action, ActionLabel::ScaleDown);
        assert_eq!(o.status.current_metrics, None);
        // Branch b stores a scale event when behavior is set (spec §13 item 10).
        assert_eq!(state.scale_down_events("default/web")[0].replica_change, 3);
        assert_eq!(o.status.conditions.as_ref().map(Vec::len), Some(1));
    }

    #[test]
    fn scaling_disabled_and_rescale_failure() {
        let h = hpa(Some(2), 10, None);
        let state = HpaState::new();
        let d = decide(&state, &DecisionConfig::default(), input(&h, 0), None);
        assert!(!d.rescale);
        let o = d.complete(
            &state,
            &HorizontalPodAutoscalerStatus::default(),
            RescaleResult::NotAttempted,
        );
        assert_eq!(o.status.desired_replicas, 0);
        assert_eq!(
            o.status.conditions.as_ref().unwrap()[1].reason.as_deref(),
            Some("ScalingDisabled")
        );

        let d = decide(&state, &DecisionConfig::default(), input(&h, 1), None);
        assert_eq!(d.rescale_reason, REASON_BELOW_MIN);
        let prev = HorizontalPodAutoscalerStatus {
            desired_replicas: 7,
            ..Default::default()
        };
        let o = d.complete(&state, &prev, RescaleResult::Failed("conflict".into()));
        assert_eq!(
            o.error.as_deref(),
            Some("failed to rescale Deployment/default/web: conflict")
        );
        assert_eq!(
            o.events,
            vec![HpaEvent::FailedRescale {
                new_size: 2,
                reason: REASON_BELOW_MIN.into(),
                err: "conflict".into()
            }]
        );
        assert_eq!(o.status.desired_replicas, 7);
        assert_eq!(o.status.last_scale_time, None);
        assert_eq!(o.action, ActionLabel::None);
    }

    #[test]
    fn selector_failures() {
        let m = MetricsOutcome::selector_failure(SelectorFailure::Missing);
        assert_eq!(m.error.as_deref(), Some("selector is required"));
        assert_eq!(m.events, vec![HpaEvent::SelectorRequired]);
        let m = MetricsOutcome::selector_failure(SelectorFailure::Ambiguous {
            selector: "app=web".into(),
            hpas: vec!["default/a".into(), "default/b".into()],
        });
        assert_eq!(
            m.error.as_deref(),
            Some("pods by selector app=web are controlled by multiple HPAs: [default/a default/b]")
        );
        assert_eq!(m.statuses, None);
        let m = MetricsOutcome::selector_failure(SelectorFailure::PodList("list failed".into()));
        assert!(m.events.is_empty() && m.condition.is_none());
    }

    #[test]
    fn minreplicas_zero_scales_to_zero() {
        let h = hpa(Some(0), 10, None);
        let state = HpaState::new();
        // With a zero window the initial recommendation (recorded earlier in the same
        // reconcile, at the same virtual instant) is already outside the window, as upstream.
        let m = MetricsOutcome::from_results(2, vec![ok(0, "external metric q(nil)")]);
        let cfg = DecisionConfig {
            downscale_stabilization_window: SignedDuration::ZERO,
            ..DecisionConfig::default()
        };
        let d = decide(&state, &cfg, input(&h, 2), Some(m));
        assert_eq!(
            (d.desired_replicas, d.rescale_reason.as_str()),
            (0, REASON_ALL_METRICS_BELOW)
        );
        assert_eq!(d.rescale_metric, "");
    }

    fn conds(o: &Outcome) -> Vec<(String, String, String)> {
        o.status
            .conditions
            .iter()
            .flatten()
            .map(|c| {
                (
                    c.type_.clone(),
                    c.status.clone(),
                    c.reason.clone().unwrap_or_default(),
                )
            })
            .collect()
    }

    fn want(list: &[(&str, &str, &str)]) -> Vec<(String, String, String)> {
        list.iter()
            .map(|(a, b, c)| ((*a).to_owned(), (*b).to_owned(), (*c).to_owned()))
            .collect()
    }

    fn cheddar() -> MetricResult {
        MetricResult {
            metric_type: "CheddarCheese".into(),
            status: MetricStatus::default(),
            outcome: Err(MetricFailure::unknown_metric_source_type("CheddarCheese")),
        }
    }

    fn external_failed() -> MetricResult {
        let inner = "unable to get external metric default/qps/&LabelSelector{MatchLabels:map[string]string{},MatchExpressions:[]LabelSelectorRequirement{},}: something went wrong";
        let mut r = failed(
            MetricFailureReason::FailedGetExternalMetric,
            &format!("failed to get external metric qps: {inner}"),
            &format!(
                "failed to get qps external metric value: failed to get external metric qps: {inner}"
            ),
        );
        r.metric_type = "External".into();
        r
    }

    /// Ports of upstream controller tests, driven through the decision core with the
    /// proposals their fixtures produce: CPU levels 100,300,500,250,250 mCPU on 1-CPU requests
    /// at a 50% target give ceil(0.56 * 5) = 3; levels 300,400,500 at a 30% target give
    /// ceil(1.33 * 3) = 4.
    #[test]
    fn upstream_no_scale_down_one_metric_invalid() {
        // TestNoScaleDownOneMetricInvalid: min 2, max 6, spec replicas 5.
        let h = hpa(Some(2), 6, None);
        let state = HpaState::new();
        let results = vec![
            ok(3, "cpu resource utilization (percentage of request)"),
            cheddar(),
        ];
        assert_eq!(results[0].action_label(5), ActionLabel::ScaleDown);
        assert_eq!(
            (results[1].action_label(5), results[1].error_label()),
            (ActionLabel::None, ErrorLabel::Spec)
        );
        let m = MetricsOutcome::from_results(5, results);
        let d = decide(&state, &DecisionConfig::default(), input(&h, 5), Some(m));
        let prev = HorizontalPodAutoscalerStatus {
            current_replicas: Some(5),
            desired_replicas: 5,
            ..Default::default()
        };
        let o = d.complete(&state, &prev, RescaleResult::NotAttempted);
        assert_eq!(o.status.desired_replicas, 5);
        assert_eq!(
            conds(&o),
            want(&[
                ("AbleToScale", "True", "SucceededGetScale"),
                ("ScalingActive", "False", "InvalidMetricSourceType")
            ])
        );
        assert_eq!(
            (o.action, o.error_label()),
            (ActionLabel::None, ErrorLabel::Internal)
        );
        assert_eq!(
            o.events,
            vec![HpaEvent::FailedGetMetric {
                reason: MetricFailureReason::InvalidMetricSourceType,
                err: "unknown metric source type \"CheddarCheese\"".into()
            }]
        );
    }

    #[test]
    fn upstream_no_scale_down_one_metric_empty() {
        // TestNoScaleDownOneMetricEmpty.
        let h = hpa(Some(2), 6, None);
        let state = HpaState::new();
        let m = MetricsOutcome::from_results(
            5,
            vec![
                ok(3, "cpu resource utilization (percentage of request)"),
                external_failed(),
            ],
        );
        let d = decide(&state, &DecisionConfig::default(), input(&h, 5), Some(m));
        let o = d.complete(
            &state,
            &HorizontalPodAutoscalerStatus {
                desired_replicas: 5,
                ..Default::default()
            },
            RescaleResult::NotAttempted,
        );
        assert_eq!(o.status.desired_replicas, 5);
        assert_eq!(
            conds(&o),
            want(&[
                ("AbleToScale", "True", "SucceededGetScale"),
                ("ScalingActive", "False", "FailedGetExternalMetric")
            ])
        );
        assert_eq!(
            (o.action, o.error_label()),
            (ActionLabel::None, ErrorLabel::Internal)
        );
    }

    #[test]
    fn upstream_scale_up_one_metric_empty() {
        // TestScaleUpOneMetricEmpty: spec replicas 3, CPU proposes 4, External fails.
        let h = hpa(Some(2), 6, None);
        let state = HpaState::new();
        let m = MetricsOutcome::from_results(
            3,
            vec![
                ok(4, "cpu resource utilization (percentage of request)"),
                external_failed(),
            ],
        );
        let d = decide(&state, &DecisionConfig::default(), input(&h, 3), Some(m));
        assert_eq!((d.desired_replicas, d.rescale), (4, true));
        let o = d.complete(
            &state,
            &HorizontalPodAutoscalerStatus::default(),
            RescaleResult::Succeeded,
        );
        assert_eq!(o.status.desired_replicas, 4);
        assert_eq!(
            (o.action, o.error_label()),
            (ActionLabel::ScaleUp, ErrorLabel::Internal)
        );
        assert_eq!(
            conds(&o),
            want(&[
                ("AbleToScale", "True", "SucceededRescale"),
                ("ScalingActive", "True", "ValidMetricFound"),
                ("ScalingLimited", "False", "DesiredWithinRange")
            ])
        );
        // The failing metric's event is still emitted (spec §13 item 13).
        assert_eq!(o.events[0].reason(), "FailedGetExternalMetric");
        assert_eq!(o.events[1].reason(), "SuccessfulRescale");
    }

    #[test]
    fn upstream_scale_up_both_metrics_empty() {
        // TestScaleUpBothMetricsEmpty: only an unknown metric type.
        let h = hpa(Some(2), 6, None);
        let state = HpaState::new();
        let m = MetricsOutcome::from_results(3, vec![cheddar()]);
        let d = decide(&state, &DecisionConfig::default(), input(&h, 3), Some(m));
        let o = d.complete(
            &state,
            &HorizontalPodAutoscalerStatus {
                desired_replicas: 3,
                ..Default::default()
            },
            RescaleResult::NotAttempted,
        );
        assert_eq!(o.status.desired_replicas, 3);
        assert_eq!(
            conds(&o),
            want(&[
                ("AbleToScale", "True", "SucceededGetScale"),
                ("ScalingActive", "False", "InvalidMetricSourceType")
            ])
        );
        assert_eq!(
            o.error.as_deref(),
            Some(
                "failed to compute desired number of replicas based on listed metrics for Deployment/default/web: invalid metrics (1 invalid out of 1), first error is: unknown metric source type \"CheddarCheese\""
            )
        );
    }

    #[test]
    fn metric_name_texts() {
        use std::collections::BTreeMap;

        use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

        use crate::gofmt::SelectorStyle;

        let sel = LabelSelector {
            match_labels: Some(BTreeMap::from([(
                "queue".to_owned(),
                "worker_tasks".to_owned(),
            )])),
            match_expressions: None,
        };
        assert_eq!(
            metric_names::external("qps", Some(&sel), SelectorStyle::GoGoString),
            "external metric qps(&LabelSelector{MatchLabels:map[string]string{queue: worker_tasks,},MatchExpressions:[]LabelSelectorRequirement{},})"
        );
        assert_eq!(
            metric_names::external("qps", None, SelectorStyle::GoGoString),
            "external metric qps(nil)"
        );
        assert_eq!(metric_names::object("Service", "rps"), "Service metric rps");
        assert_eq!(metric_names::pods("qps"), "pods metric qps");
        assert_eq!(metric_names::resource("memory"), "memory resource");
        assert_eq!(
            metric_names::resource_utilization("cpu"),
            "cpu resource utilization (percentage of request)"
        );
        assert_eq!(
            metric_names::container_resource_utilization("cpu"),
            "cpu container resource utilization (percentage of request)"
        );
    }

    #[test]
    fn go_time_strings() {
        assert_eq!(go_time_string(None), "0001-01-01 00:00:00 +0000 UTC");
        assert_eq!(
            go_time_string(Some("2025-06-01T12:00:00.5Z".parse().unwrap())),
            "2025-06-01 12:00:00.5 +0000 UTC"
        );
    }

    #[test]
    fn metric_labels() {
        let r = ok(5, "x");
        assert_eq!(
            (r.action_label(3), r.error_label()),
            (ActionLabel::ScaleUp, ErrorLabel::None)
        );
        let mut f = failed(MetricFailureReason::InvalidMetricSourceType, "e", "e");
        if let Err(x) = &mut f.outcome {
            x.spec_error = true;
        }
        assert_eq!(
            (f.action_label(3), f.error_label()),
            (ActionLabel::None, ErrorLabel::Spec)
        );
        let (e, err) = status_update_failure("web", "forbidden");
        assert_eq!(e.reason(), "FailedUpdateStatus");
        assert_eq!(err, "failed to update status for web: forbidden");
    }
}
