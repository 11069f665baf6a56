//! The events the controller records on an HPA (`reconcileAutoscaler`'s `eventRecorder.Event` calls), as a typed catalogue.
//!
//! Mirrors the `eventRecorder.Event` / `Eventf` calls of upstream
//! `pkg/controller/podautoscaler/horizontal.go`. `Event(...)` call sites pass the text
//! verbatim (no `fmt` reinterpretation); `Eventf(...)` ones are rendered with Go `fmt`.

use std::fmt;

use crate::conditions::{
    MetricFailureReason, ambiguous_selector_message, invalid_selector_message,
};
use crate::gofmt::{GoArg, sprintf};
use crate::pause::InvalidAnnotation;

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
    /// not valid and is ignored (no upstream counterpart, see [`crate::pause`]).
    InvalidAnnotation(InvalidAnnotation),
}

impl HpaEvent {
    /// `Normal` or `Warning`.
    pub fn event_type(&self) -> EventType {
        match self {
            HpaEvent::SuccessfulRescale { .. } => EventType::Normal,
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
                    reason: "must be \"true\" or \"false\"",
                }),
                type_: "Warning",
                reason: "InvalidAnnotation",
                message: "annotation kube-hpa-controller.io/paused has the invalid value \"yes\": must be \"true\" or \"false\"; it is ignored",
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
