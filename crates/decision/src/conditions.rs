//! The HPA status conditions: every condition `reconcileAutoscaler` sets, and `setCondition` /
//! `setConditionInList`.
//!
//! Mirrors upstream `pkg/controller/podautoscaler/horizontal.go`: every `setCondition` call
//! site becomes a [`HpaCondition`] variant carrying the values its message needs; the
//! message is rendered with Go `fmt` semantics ([`crate::gofmt`]).
//!
//! Pre-formatted texts (the InvalidSelector, AmbiguousSelector and failed-metric messages)
//! are stored verbatim. Before v1.32 upstream passed them to `setCondition` as the *format*
//! (so a `%` in an error text was reinterpreted); kubernetes/kubernetes#127422
//! ("Go vet fixes for gotip", merged 2024-09, v1.32) changed those call sites to
//! `setCondition(..., "%s", msg)`, which is what this port follows.

use jiff::Timestamp;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscalerCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::gofmt::{GoArg, sprintf};

/// The three condition types the controller maintains, in the order a healthy HPA first
/// gets them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConditionType {
    /// `AbleToScale`: can the controller read and update the target's scale.
    AbleToScale,
    /// `ScalingActive`: can the controller compute a replica count from the metrics.
    ScalingActive,
    /// `ScalingLimited`: was the desired count bound by a limit.
    ScalingLimited,
    /// `ScaledToZero` (1.36+, kubernetes#135118): did this controller scale the target to zero.
    ScaledToZero,
    /// `MetricFallbackActive`: is a metric's fallback in effect (no upstream counterpart; only
    /// on HPAs with `kube-hpa-controller.io/metric-fallback`, see [`crate::fallback`]).
    MetricFallbackActive,
}

impl ConditionType {
    /// The API string (`autoscalingv2.HorizontalPodAutoscalerConditionType`).
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionType::AbleToScale => "AbleToScale",
            ConditionType::ScalingActive => "ScalingActive",
            ConditionType::ScalingLimited => "ScalingLimited",
            ConditionType::ScaledToZero => "ScaledToZero",
            ConditionType::MetricFallbackActive => "MetricFallbackActive",
        }
    }
}

/// A condition's status (core `ConditionStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConditionStatus {
    /// `True`.
    True,
    /// `False`.
    False,
}

impl ConditionStatus {
    /// The API string.
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
        }
    }
}

/// The reason of a failed metric computation; used both as the Warning event reason and
/// as the `ScalingActive=False` condition reason (`computeReplicasForMetric`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetricFailureReason {
    /// `FailedGetObjectMetric`.
    FailedGetObjectMetric,
    /// `FailedGetPodsMetric`.
    FailedGetPodsMetric,
    /// `FailedGetResourceMetric`.
    FailedGetResourceMetric,
    /// `FailedGetContainerResourceMetric`.
    FailedGetContainerResourceMetric,
    /// `FailedGetExternalMetric`.
    FailedGetExternalMetric,
    /// `InvalidMetricSourceType`.
    InvalidMetricSourceType,
}

impl MetricFailureReason {
    /// The reason string.
    pub fn as_str(self) -> &'static str {
        match self {
            MetricFailureReason::FailedGetObjectMetric => "FailedGetObjectMetric",
            MetricFailureReason::FailedGetPodsMetric => "FailedGetPodsMetric",
            MetricFailureReason::FailedGetResourceMetric => "FailedGetResourceMetric",
            MetricFailureReason::FailedGetContainerResourceMetric => {
                "FailedGetContainerResourceMetric"
            }
            MetricFailureReason::FailedGetExternalMetric => "FailedGetExternalMetric",
            MetricFailureReason::InvalidMetricSourceType => "InvalidMetricSourceType",
        }
    }
}

/// Which bound (if any) produced the normalized replica count: the reason of the
/// `ScalingLimited` condition (`normalizeDesiredReplicas`, `normalizeDesiredReplicasWithBehaviors`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LimitReason {
    /// `DesiredWithinRange`: no bound applied.
    DesiredWithinRange,
    /// `ScaleUpLimit`: the scale-up rate (2x/4 legacy, or the scale-up policies).
    ScaleUpLimit,
    /// `ScaleDownLimit`: the scale-down policies (behavior path only).
    ScaleDownLimit,
    /// `TooManyReplicas`: `maxReplicas`.
    TooManyReplicas,
    /// `TooFewReplicas`: `minReplicas`.
    TooFewReplicas,
}

impl LimitReason {
    /// The reason string.
    pub fn as_str(self) -> &'static str {
        match self {
            LimitReason::DesiredWithinRange => "DesiredWithinRange",
            LimitReason::ScaleUpLimit => "ScaleUpLimit",
            LimitReason::ScaleDownLimit => "ScaleDownLimit",
            LimitReason::TooManyReplicas => "TooManyReplicas",
            LimitReason::TooFewReplicas => "TooFewReplicas",
        }
    }

    /// The message upstream pairs with this reason.
    pub fn message(self) -> &'static str {
        match self {
            LimitReason::DesiredWithinRange => "the desired count is within the acceptable range",
            LimitReason::ScaleUpLimit => {
                "the desired replica count is increasing faster than the maximum scale rate"
            }
            LimitReason::ScaleDownLimit => {
                "the desired replica count is decreasing faster than the maximum scale rate"
            }
            LimitReason::TooManyReplicas => {
                "the desired replica count is more than the maximum replica count"
            }
            LimitReason::TooFewReplicas => {
                "the desired replica count is less than the minimum replica count"
            }
        }
    }
}

/// The outcome of the stabilization step: the `AbleToScale=True` reason set by
/// normalization (`normalizeDesiredReplicas`, `normalizeDesiredReplicasWithBehaviors`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StabilizationReason {
    /// `ReadyForNewScale`: stabilization did not change the recommendation.
    ReadyForNewScale,
    /// `ScaleDownStabilized`: a higher recent recommendation was applied.
    ScaleDownStabilized,
    /// `ScaleUpStabilized`: a lower recent recommendation was applied (behavior path).
    ScaleUpStabilized,
}

impl StabilizationReason {
    /// The reason string.
    pub fn as_str(self) -> &'static str {
        match self {
            StabilizationReason::ReadyForNewScale => "ReadyForNewScale",
            StabilizationReason::ScaleDownStabilized => "ScaleDownStabilized",
            StabilizationReason::ScaleUpStabilized => "ScaleUpStabilized",
        }
    }

    /// The message upstream pairs with this reason.
    pub fn message(self) -> &'static str {
        match self {
            StabilizationReason::ReadyForNewScale => "recommended size matches current size",
            StabilizationReason::ScaleDownStabilized => {
                "recent recommendations were higher than current one, applying the highest recent recommendation"
            }
            StabilizationReason::ScaleUpStabilized => {
                "recent recommendations were lower than current one, applying the lowest recent recommendation"
            }
        }
    }
}

/// Every condition the controller sets, with the values its message needs.
#[derive(Debug, Clone, PartialEq)]
pub enum HpaCondition {
    /// `AbleToScale=False FailedGetScale`; `err` is the apiVersion, RESTMapping or scale GET error.
    FailedGetScale {
        /// The error text.
        err: String,
    },
    /// `AbleToScale=True SucceededGetScale`.
    SucceededGetScale,
    /// `AbleToScale=True` set by normalization.
    Stabilization(StabilizationReason),
    /// `AbleToScale=False FailedUpdateScale`.
    FailedUpdateScale {
        /// The scale PUT error text.
        err: String,
    },
    /// `AbleToScale=True SucceededRescale`.
    SucceededRescale {
        /// The new replica count.
        replicas: i32,
    },
    /// `ScalingActive=False ScalingDisabled` (target scaled to zero, minReplicas != 0).
    ScalingDisabled,
    /// `ScalingActive=False InvalidSelector` for an empty scale selector.
    MissingSelector,
    /// `ScalingActive=False InvalidSelector` for an unparsable selector; `err` is the parse error.
    InvalidSelector {
        /// The `labels.Parse` error text.
        err: String,
    },
    /// `ScalingActive=False AmbiguousSelector`.
    AmbiguousSelector {
        /// The raw selector string of the scale.
        selector: String,
        /// The HPA keys (`namespace/name`) whose selectors match the pods.
        hpas: Vec<String>,
    },
    /// `ScalingActive=False <reason>` from the first failing metric.
    FailedComputeMetric {
        /// The per-type reason.
        reason: MetricFailureReason,
        /// The metric's error text.
        err: String,
    },
    /// `ScalingActive=True ValidMetricFound`.
    ValidMetricFound {
        /// The winning metric's name (`metricNameProposal`).
        metric: String,
    },
    /// `ScalingLimited`: status True when `limited`, reason and message from `reason`.
    ScalingLimited {
        /// Whether the normalized count differs from the stabilized one.
        limited: bool,
        /// The limit reported.
        reason: LimitReason,
    },
    /// `ScaledToZero=True ScaledToZero` (1.36+): set after a successful rescale from above
    /// zero to zero (with `minReplicas: 0` and an Object or External metric).
    ScaledToZero,
    /// `ScaledToZero=False NotScaledToZero` (1.36+): set after any other successful rescale.
    NotScaledToZero,
    /// `AbleToScale=False ScalingPaused`: a pause annotation is set (no upstream counterpart,
    /// see [`crate::pause`]).
    ScalingPaused(crate::pause::Pause),
    /// `MetricFallbackActive`: `True FallbackInEffect` with the fallbacks in effect, `False
    /// NoFallbackInEffect` when there are none (no upstream counterpart, see
    /// [`crate::fallback`]).
    MetricFallbackActive(Vec<crate::fallback::ActiveFallback>),
    /// The degenerate condition upstream sets when `spec.metrics` is empty
    /// (`computeReplicasForMetrics`): empty type, status, reason and message.
    Empty,
}

impl HpaCondition {
    /// The condition type, `None` only for [`HpaCondition::Empty`].
    pub fn condition_type(&self) -> Option<ConditionType> {
        use HpaCondition::*;
        Some(match self {
            FailedGetScale { .. }
            | SucceededGetScale
            | Stabilization(_)
            | FailedUpdateScale { .. }
            | SucceededRescale { .. }
            | ScalingPaused(_) => ConditionType::AbleToScale,
            ScalingDisabled
            | MissingSelector
            | InvalidSelector { .. }
            | AmbiguousSelector { .. }
            | FailedComputeMetric { .. }
            | ValidMetricFound { .. } => ConditionType::ScalingActive,
            ScalingLimited { .. } => ConditionType::ScalingLimited,
            ScaledToZero | NotScaledToZero => ConditionType::ScaledToZero,
            MetricFallbackActive(_) => ConditionType::MetricFallbackActive,
            Empty => return None,
        })
    }

    /// The type string as stored (`""` for [`HpaCondition::Empty`]).
    pub fn type_str(&self) -> &'static str {
        self.condition_type().map_or("", ConditionType::as_str)
    }

    /// The status string as stored.
    pub fn status_str(&self) -> &'static str {
        use HpaCondition::*;
        match self {
            SucceededGetScale
            | Stabilization(_)
            | SucceededRescale { .. }
            | ScaledToZero
            | ValidMetricFound { .. } => "True",
            ScalingLimited { limited: true, .. } => "True",
            ScalingLimited { limited: false, .. } => "False",
            MetricFallbackActive(active) if !active.is_empty() => "True",
            MetricFallbackActive(_) => "False",
            FailedGetScale { .. }
            | FailedUpdateScale { .. }
            | ScalingPaused(_)
            | ScalingDisabled
            | MissingSelector
            | InvalidSelector { .. }
            | AmbiguousSelector { .. }
            | NotScaledToZero
            | FailedComputeMetric { .. } => "False",
            Empty => "",
        }
    }

    /// The reason string.
    pub fn reason(&self) -> &'static str {
        use HpaCondition::*;
        match self {
            FailedGetScale { .. } => "FailedGetScale",
            SucceededGetScale => "SucceededGetScale",
            Stabilization(r) => r.as_str(),
            FailedUpdateScale { .. } => "FailedUpdateScale",
            SucceededRescale { .. } => "SucceededRescale",
            ScalingDisabled => "ScalingDisabled",
            MissingSelector | InvalidSelector { .. } => "InvalidSelector",
            AmbiguousSelector { .. } => "AmbiguousSelector",
            FailedComputeMetric { reason, .. } => reason.as_str(),
            ValidMetricFound { .. } => "ValidMetricFound",
            ScalingLimited { reason, .. } => reason.as_str(),
            ScaledToZero => "ScaledToZero",
            NotScaledToZero => "NotScaledToZero",
            ScalingPaused(_) => "ScalingPaused",
            MetricFallbackActive(active) if !active.is_empty() => "FallbackInEffect",
            MetricFallbackActive(_) => "NoFallbackInEffect",
            Empty => "",
        }
    }

    /// The message exactly as upstream (v1.32+) stores it.
    pub fn message(&self) -> String {
        use HpaCondition::*;
        match self {
            FailedGetScale { err } => sprintf(
                "the HPA controller was unable to get the target's current scale: %v",
                &[GoArg::error(err.as_str())],
            ),
            SucceededGetScale => {
                "the HPA controller was able to get the target's current scale".to_owned()
            }
            Stabilization(r) => r.message().to_owned(),
            FailedUpdateScale { err } => sprintf(
                "the HPA controller was unable to update the target scale: %v",
                &[GoArg::error(err.as_str())],
            ),
            SucceededRescale { replicas } => sprintf(
                "the HPA controller was able to update the target scale to %d",
                &[GoArg::int32(*replicas)],
            ),
            ScalingDisabled => {
                "scaling is disabled since the replica count of the target is zero".to_owned()
            }
            MissingSelector => "the HPA target's scale is missing a selector".to_owned(),
            InvalidSelector { err } => invalid_selector_message(err),
            AmbiguousSelector { selector, hpas } => ambiguous_selector_message(selector, hpas),
            FailedComputeMetric { err, .. } => sprintf(
                "the HPA was unable to compute the replica count: %v",
                &[GoArg::error(err.as_str())],
            ),
            ValidMetricFound { metric } => sprintf(
                "the HPA was able to successfully calculate a replica count from %s",
                &[GoArg::str(metric.as_str())],
            ),
            ScalingLimited { reason, .. } => reason.message().to_owned(),
            ScaledToZero => "the HPA controller scaled the workload to zero".to_owned(),
            NotScaledToZero => "the HPA controller did not scale the workload to zero".to_owned(),
            ScalingPaused(p) => p.message(),
            MetricFallbackActive(active) if !active.is_empty() => {
                crate::fallback::active_message(active)
            }
            MetricFallbackActive(_) => crate::fallback::inactive_message(),
            Empty => String::new(),
        }
    }
}

/// `couldn't convert selector into a corresponding internal selector object: %v`, the
/// `InvalidSelector` event message and error text (`validateAndParseSelector`).
pub fn invalid_selector_message(err: &str) -> String {
    sprintf(
        "couldn't convert selector into a corresponding internal selector object: %v",
        &[GoArg::error(err)],
    )
}

/// `pods by selector %v are controlled by multiple HPAs: %v`, the `AmbiguousSelector` event
/// message and error text (`validateAndParseSelector`); `hpas` print as a Go `[]string`.
pub fn ambiguous_selector_message(selector: &str, hpas: &[String]) -> String {
    sprintf(
        "pods by selector %v are controlled by multiple HPAs: %v",
        &[
            GoArg::str(selector),
            GoArg::str(crate::gofmt::string_slice(hpas)),
        ],
    )
}

/// Upstream `setConditionInList`: find the condition of `type_` (append it with only its
/// type when absent, so first-set order is kept), stamp `lastTransitionTime = now` only
/// when the status changes, then overwrite status, reason and message. Returns the
/// condition set.
pub fn set_condition_in_list<'a>(
    conditions: &'a mut Vec<HorizontalPodAutoscalerCondition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: String,
    now: Timestamp,
) -> &'a mut HorizontalPodAutoscalerCondition {
    let idx = match conditions.iter().position(|c| c.type_ == type_) {
        Some(i) => i,
        None => {
            conditions.push(HorizontalPodAutoscalerCondition {
                type_: type_.to_owned(),
                ..Default::default()
            });
            conditions.len() - 1
        }
    };
    let existing = &mut conditions[idx];
    if existing.status != status {
        existing.last_transition_time = Some(Time(now));
    }
    existing.status = status.to_owned();
    existing.reason = Some(reason.to_owned());
    existing.message = Some(message);
    existing
}

/// Remove the condition of `type_`, if present (no upstream counterpart: upstream never removes
/// a condition; this controller removes its own `MetricFallbackActive` when the annotation
/// that asks for it is gone).
pub fn remove_condition(
    conditions: &mut Vec<HorizontalPodAutoscalerCondition>,
    type_: ConditionType,
) {
    conditions.retain(|c| c.type_ != type_.as_str());
}

/// Upstream `setCondition` for one catalogue entry; returns the condition set.
pub fn set_condition<'a>(
    conditions: &'a mut Vec<HorizontalPodAutoscalerCondition>,
    condition: &HpaCondition,
    now: Timestamp,
) -> &'a mut HorizontalPodAutoscalerCondition {
    set_condition_in_list(
        conditions,
        condition.type_str(),
        condition.status_str(),
        condition.reason(),
        condition.message(),
        now,
    )
}

#[cfg(test)]
mod tests;
