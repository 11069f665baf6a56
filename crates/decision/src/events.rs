//! The events the controller records on an HPA (`reconcileAutoscaler`'s `eventRecorder.Event` calls), as a typed catalogue.
//!
//! Mirrors the `eventRecorder.Event` / `Eventf` calls of upstream
//! `pkg/controller/podautoscaler/horizontal.go`. `Event(...)` call sites pass the text
//! verbatim (no `fmt` reinterpretation); `Eventf(...)` ones are rendered with Go `fmt`.

use std::fmt;

use crate::annotations::InvalidAnnotation;
use crate::conditions::{
    MetricFailureReason, ambiguous_selector_message, invalid_selector_message,
};
use crate::fallback::{MetricFallback, go_seconds};
use crate::gofmt::{GoArg, sprintf};

/// The source component of every event.
pub const EVENT_SOURCE_COMPONENT: &str = "horizontal-pod-autoscaler";

/// Core event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// `Normal`.
    Normal,
    /// `Warning`.
    Warning,
}

impl EventType {
    /// The API string.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// Every event the controller emits, with the values its message needs.
#[derive(Debug, Clone, PartialEq)]
pub enum HpaEvent {
    /// Warning `FailedGetScale`: the apiVersion parse, RESTMapping or scale GET error text.
    FailedGetScale {
        /// `err.Error()`.
        err: String,
    },
    /// Warning `SelectorRequired`: `selector is required`.
    SelectorRequired,
    /// Warning `InvalidSelector`.
    InvalidSelector {
        /// The `labels.Parse` error text.
        err: String,
    },
    /// Warning `AmbiguousSelector`.
    AmbiguousSelector {
        /// The raw selector string.
        selector: String,
        /// The HPA keys whose selectors match the pods.
        hpas: Vec<String>,
    },
    /// Warning `FailedGet*Metric` / `InvalidMetricSourceType`, once per failing metric.
    FailedGetMetric {
        /// The per-type reason.
        reason: MetricFailureReason,
        /// `err.Error()` of the per-type error.
        err: String,
    },
    /// Warning `FailedComputeMetricsReplicas`.
    FailedComputeMetricsReplicas {
        /// `err.Error()` of the aggregated error.
        err: String,
    },
    /// Warning `FailedRescale`: `New size: %d; reason: %s; error: %v`.
    FailedRescale {
        /// The desired replica count.
        new_size: i32,
        /// The rescale reason.
        reason: String,
        /// The scale PUT error text.
        err: String,
    },
    /// Normal `SuccessfulRescale`: `New size: %d; reason: %s`.
    SuccessfulRescale {
        /// The new replica count.
        new_size: i32,
        /// The rescale reason.
        reason: String,
    },
    /// Warning `FailedUpdateStatus`.
    FailedUpdateStatus {
        /// The status PUT error text.
        err: String,
    },
    /// Warning `InvalidAnnotation`: one of this controller's annotations has a value that is
    /// not valid and is ignored (no upstream counterpart, see [`crate::annotations`]).
    InvalidAnnotation(InvalidAnnotation),
    /// Normal `MetricFallbackActivated`: a metric's fallback came into effect (no upstream
    /// counterpart; KEP-5679's `ExternalMetricFallbackActivated`, see [`crate::fallback`]).
    MetricFallbackActivated {
        /// The metric's fallback.
        fallback: MetricFallback,
        /// From the first failed read of the streak to this one.
        failing_for: jiff::SignedDuration,
        /// Failed reads in a row.
        failures: u32,
    },
    /// Normal `MetricFallbackCleared`: a metric whose fallback was in effect was read again
    /// (no upstream counterpart, see [`crate::fallback`]).
    MetricFallbackCleared {
        /// The metric's fallback.
        fallback: MetricFallback,
        /// From the first failed read of the streak to this read.
        failing_for: jiff::SignedDuration,
        /// Failed reads in a row.
        failures: u32,
    },
}

impl HpaEvent {
    /// `Normal` or `Warning`.
    pub fn event_type(&self) -> EventType {
        match self {
            HpaEvent::SuccessfulRescale { .. }
            | HpaEvent::MetricFallbackActivated { .. }
            | HpaEvent::MetricFallbackCleared { .. } => EventType::Normal,
            _ => EventType::Warning,
        }
    }

    /// The event reason.
    pub fn reason(&self) -> &'static str {
        match self {
            HpaEvent::FailedGetScale { .. } => "FailedGetScale",
            HpaEvent::SelectorRequired => "SelectorRequired",
            HpaEvent::InvalidSelector { .. } => "InvalidSelector",
            HpaEvent::AmbiguousSelector { .. } => "AmbiguousSelector",
            HpaEvent::FailedGetMetric { reason, .. } => reason.as_str(),
            HpaEvent::FailedComputeMetricsReplicas { .. } => "FailedComputeMetricsReplicas",
            HpaEvent::FailedRescale { .. } => "FailedRescale",
            HpaEvent::SuccessfulRescale { .. } => "SuccessfulRescale",
            HpaEvent::FailedUpdateStatus { .. } => "FailedUpdateStatus",
            HpaEvent::InvalidAnnotation(_) => "InvalidAnnotation",
            HpaEvent::MetricFallbackActivated { .. } => "MetricFallbackActivated",
            HpaEvent::MetricFallbackCleared { .. } => "MetricFallbackCleared",
        }
    }

    /// The event message.
    pub fn message(&self) -> String {
        match self {
            HpaEvent::FailedGetScale { err }
            | HpaEvent::FailedGetMetric { err, .. }
            | HpaEvent::FailedComputeMetricsReplicas { err }
            | HpaEvent::FailedUpdateStatus { err } => err.clone(),
            HpaEvent::SelectorRequired => "selector is required".to_owned(),
            HpaEvent::InvalidSelector { err } => invalid_selector_message(err),
            HpaEvent::AmbiguousSelector { selector, hpas } => {
                ambiguous_selector_message(selector, hpas)
            }
            HpaEvent::FailedRescale {
                new_size,
                reason,
                err,
            } => sprintf(
                "New size: %d; reason: %s; error: %v",
                &[
                    GoArg::int32(*new_size),
                    GoArg::str(reason.as_str()),
                    GoArg::error(err.as_str()),
                ],
            ),
            HpaEvent::SuccessfulRescale { new_size, reason } => sprintf(
                "New size: %d; reason: %s",
                &[GoArg::int32(*new_size), GoArg::str(reason.as_str())],
            ),
            HpaEvent::InvalidAnnotation(e) => e.to_string(),
            HpaEvent::MetricFallbackActivated {
                fallback,
                failing_for,
                failures,
            } => format!(
                "fallback activated for {} after {} of consecutive failures ({failures} in a row), using {}",
                fallback.describe(),
                go_seconds(*failing_for),
                fallback.action_text()
            ),
            HpaEvent::MetricFallbackCleared {
                fallback,
                failing_for,
                failures,
            } => format!(
                "fallback cleared for {}: the metric was read again after {} of consecutive failures ({failures} in a row)",
                fallback.describe(),
                go_seconds(*failing_for)
            ),
        }
    }
}

impl fmt::Display for HpaEvent {
    /// `<type> <reason>: <message>`, for logs and explanations.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.event_type().as_str(),
            self.reason(),
            self.message()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue_depth() -> MetricFallback {
        MetricFallback {
            index: 1,
            metric: "External/queue_depth".into(),
            threshold: crate::fallback::FallbackThreshold::Failures(3),
            action: crate::fallback::FallbackAction::Replicas(10),
        }
    }

    #[test]
    fn catalogue() {
        struct Case {
            event: HpaEvent,
            type_: &'static str,
            reason: &'static str,
            message: &'static str,
        }
        let cases = vec![
            Case {
                event: HpaEvent::FailedGetScale {
                    err: "unexpected GroupVersion string: a/b/c".into(),
                },
                type_: "Warning",
                reason: "FailedGetScale",
                message: "unexpected GroupVersion string: a/b/c",
            },
            Case {
                event: HpaEvent::SelectorRequired,
                type_: "Warning",
                reason: "SelectorRequired",
                message: "selector is required",
            },
            Case {
                event: HpaEvent::InvalidSelector { err: "x".into() },
                type_: "Warning",
                reason: "InvalidSelector",
                message: "couldn't convert selector into a corresponding internal selector object: x",
            },
            Case {
                event: HpaEvent::AmbiguousSelector {
                    selector: "app=a".into(),
                    hpas: vec!["ns/a".into(), "ns/b".into()],
                },
                type_: "Warning",
                reason: "AmbiguousSelector",
                message: "pods by selector app=a are controlled by multiple HPAs: [ns/a ns/b]",
            },
            Case {
                event: HpaEvent::FailedGetMetric {
                    reason: MetricFailureReason::InvalidMetricSourceType,
                    err: "unknown metric source type \"CheddarCheese\"".into(),
                },
                type_: "Warning",
                reason: "InvalidMetricSourceType",
                message: "unknown metric source type \"CheddarCheese\"",
            },
            Case {
                event: HpaEvent::FailedComputeMetricsReplicas {
                    err: "selector is required".into(),
                },
                type_: "Warning",
                reason: "FailedComputeMetricsReplicas",
                message: "selector is required",
            },
            Case {
                event: HpaEvent::FailedRescale {
                    new_size: 3,
                    reason: "All metrics below target".into(),
                    err: "conflict".into(),
                },
                type_: "Warning",
                reason: "FailedRescale",
                message: "New size: 3; reason: All metrics below target; error: conflict",
            },
            Case {
                event: HpaEvent::SuccessfulRescale {
                    new_size: 10,
                    reason: "Current number of replicas above Spec.MaxReplicas".into(),
                },
                type_: "Normal",
                reason: "SuccessfulRescale",
                message: "New size: 10; reason: Current number of replicas above Spec.MaxReplicas",
            },
            Case {
                event: HpaEvent::FailedUpdateStatus {
                    err: "forbidden".into(),
                },
                type_: "Warning",
                reason: "FailedUpdateStatus",
                message: "forbidden",
            },
            Case {
                event: HpaEvent::InvalidAnnotation(InvalidAnnotation {
                    annotation: crate::pause::PAUSED,
                    value: "yes".into(),
                    reason: "must be \"true\" or \"false\"".into(),
                }),
                type_: "Warning",
                reason: "InvalidAnnotation",
                message: "annotation kube-hpa-controller.io/paused has the invalid value \"yes\": must be \"true\" or \"false\"; it is ignored",
            },
            Case {
                event: HpaEvent::MetricFallbackActivated {
                    fallback: queue_depth(),
                    failing_for: jiff::SignedDuration::from_secs(180),
                    failures: 13,
                },
                type_: "Normal",
                reason: "MetricFallbackActivated",
                message: "fallback activated for spec.metrics[1] (External/queue_depth) after 3m0s of consecutive failures (13 in a row), using the fallback replica count 10",
            },
            Case {
                event: HpaEvent::MetricFallbackCleared {
                    fallback: queue_depth(),
                    failing_for: jiff::SignedDuration::from_secs(195),
                    failures: 14,
                },
                type_: "Normal",
                reason: "MetricFallbackCleared",
                message: "fallback cleared for spec.metrics[1] (External/queue_depth): the metric was read again after 3m15s of consecutive failures (14 in a row)",
            },
        ];
        for case in cases {
            let e = &case.event;
            assert_eq!(
                (e.event_type().as_str(), e.reason(), e.message().as_str()),
                (case.type_, case.reason, case.message)
            );
        }
    }

    #[test]
    fn event_messages_are_not_reinterpreted() {
        // recorder.Event passes the text verbatim.
        let e = HpaEvent::FailedComputeMetricsReplicas { err: "50%d".into() };
        assert_eq!(e.message(), "50%d");
    }
}
