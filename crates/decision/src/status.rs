//! Building the new HPA status and deciding whether it changed (`setStatus`, `setCurrentReplicasAndMetricsInStatus`, `updateStatusIfNeeded`).
//!
//! Mirrors upstream `pkg/controller/podautoscaler/horizontal.go` `setStatus`,
//! `setCurrentReplicasAndMetricsInStatus` and the `apiequality.Semantic.DeepEqual` test of
//! `updateStatusIfNeeded`. Semantic equality follows apimachinery's rules: quantities
//! compare by value, times by instant, and a nil slice or map equals an empty one; fields
//! that are plain (non-pointer) Go values treat "absent" like their zero value.

use jiff::Timestamp;
use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HorizontalPodAutoscalerCondition, HorizontalPodAutoscalerStatus,
    MetricIdentifier, MetricStatus, MetricValueStatus,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};

/// Upstream `setStatus`: replace the status wholesale. `currentReplicas`,
/// `desiredReplicas` and `currentMetrics` are the given values; `lastScaleTime` is kept, or
/// set to `now` when `rescale` (a scale update succeeded in this reconcile); the
/// conditions are kept as mutated so far; `observedGeneration` is dropped (upstream sets it
/// only from 1.37 with `HPAGeneration`, which the caller then writes over this).
///
/// `currentReplicas == 0` is stored as absent, like Go's `omitempty`.
pub fn set_status(
    status: &mut HorizontalPodAutoscalerStatus,
    current_replicas: i32,
    desired_replicas: i32,
    metric_statuses: Option<Vec<MetricStatus>>,
    rescale: bool,
    now: Timestamp,
) {
    let last_scale_time = if rescale {
        Some(Time(now))
    } else {
        status.last_scale_time.take()
    };
    *status = HorizontalPodAutoscalerStatus {
        conditions: status.conditions.take(),
        current_metrics: metric_statuses,
        current_replicas: (current_replicas != 0).then_some(current_replicas),
        desired_replicas,
        last_scale_time,
        observed_generation: None,
    };
}

/// Upstream `setCurrentReplicasAndMetricsInStatus`: [`set_status`] keeping the previous
/// `desiredReplicas` and without a rescale (the metric-failure and rescale-failure paths).
pub fn set_current_replicas_and_metrics_in_status(
    status: &mut HorizontalPodAutoscalerStatus,
    current_replicas: i32,
    metric_statuses: Option<Vec<MetricStatus>>,
    now: Timestamp,
) {
    let desired = status.desired_replicas;
    set_status(
        status,
        current_replicas,
        desired,
        metric_statuses,
        false,
        now,
    );
}

/// `apiequality.Semantic.DeepEqual(original, new)` for an HPA status: when true,
/// `updateStatusIfNeeded` makes no API call.
pub fn status_semantically_equal(
    a: &HorizontalPodAutoscalerStatus,
    b: &HorizontalPodAutoscalerStatus,
) -> bool {
    a.current_replicas.unwrap_or(0) == b.current_replicas.unwrap_or(0)
        && a.desired_replicas == b.desired_replicas
        // `*int64`, but nil and 0 are taken as equal: a server that does not keep the field
        // (HPAGeneration off in the API server) answers nil to the 0 written for an HPA
        // without a generation, and a strict comparison would write the status every sync.
        && a.observed_generation.unwrap_or(0) == b.observed_generation.unwrap_or(0)
        && opt_time_eq(a.last_scale_time.as_ref(), b.last_scale_time.as_ref())
        && slice_eq(
            a.current_metrics.as_deref(),
            b.current_metrics.as_deref(),
            metric_status_eq,
        )
        && slice_eq(
            a.conditions.as_deref(),
            b.conditions.as_deref(),
            condition_eq,
        )
}

fn slice_eq<T>(a: Option<&[T]>, b: Option<&[T]>, eq: fn(&T, &T) -> bool) -> bool {
    let (a, b) = (a.unwrap_or(&[]), b.unwrap_or(&[]));
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| eq(x, y))
}

fn str_eq(a: Option<&String>, b: Option<&String>) -> bool {
    a.map_or("", String::as_str) == b.map_or("", String::as_str)
}

/// `*metav1.Time` (lastScaleTime): nil differs from any time.
fn opt_time_eq(a: Option<&Time>, b: Option<&Time>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => x.0 == y.0,
        _ => false,
    }
}

/// Go's zero `time.Time` (what an absent non-pointer `metav1.Time` is).
fn go_zero_time() -> Timestamp {
    // 0001-01-01T00:00:00Z is within jiff's range.
    Timestamp::from_second(-62_135_596_800).unwrap_or(Timestamp::MIN)
}

/// A non-pointer `metav1.Time` (condition lastTransitionTime): absent means the zero time.
fn value_time_eq(a: Option<&Time>, b: Option<&Time>) -> bool {
    let z = go_zero_time();
    a.map_or(z, |t| t.0) == b.map_or(z, |t| t.0)
}

fn condition_eq(
    a: &HorizontalPodAutoscalerCondition,
    b: &HorizontalPodAutoscalerCondition,
) -> bool {
    a.type_ == b.type_
        && a.status == b.status
        && value_time_eq(
            a.last_transition_time.as_ref(),
            b.last_transition_time.as_ref(),
        )
        && str_eq(a.reason.as_ref(), b.reason.as_ref())
        && str_eq(a.message.as_ref(), b.message.as_ref())
        && a.observed_generation == b.observed_generation
}

/// `resource.Quantity` semantic equality: by value (`Cmp`). A quantity that does not parse
/// (which the API server would never return) falls back to comparing the text.
pub fn quantity_semantic_eq(a: &Quantity, b: &Quantity) -> bool {
    match (
        hpa_quantity::Quantity::from_k8s(a),
        hpa_quantity::Quantity::from_k8s(b),
    ) {
        (Ok(x), Ok(y)) => x == y,
        _ => a.0 == b.0,
    }
}

fn opt_quantity_eq(a: Option<&Quantity>, b: Option<&Quantity>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => quantity_semantic_eq(x, y),
        _ => false,
    }
}

fn value_status_eq(a: &MetricValueStatus, b: &MetricValueStatus) -> bool {
    a.average_utilization == b.average_utilization
        && opt_quantity_eq(a.average_value.as_ref(), b.average_value.as_ref())
        && opt_quantity_eq(a.value.as_ref(), b.value.as_ref())
}

fn selector_eq(a: Option<&LabelSelector>, b: Option<&LabelSelector>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => {
            let empty = Default::default();
            x.match_labels.as_ref().unwrap_or(&empty) == y.match_labels.as_ref().unwrap_or(&empty)
                && slice_eq(
                    x.match_expressions.as_deref(),
                    y.match_expressions.as_deref(),
                    |p, q| {
                        p.key == q.key
                            && p.operator == q.operator
                            && p.values.as_deref().unwrap_or(&[])
                                == q.values.as_deref().unwrap_or(&[])
                    },
                )
        }
        _ => false,
    }
}

fn identifier_eq(a: &MetricIdentifier, b: &MetricIdentifier) -> bool {
    a.name == b.name && selector_eq(a.selector.as_ref(), b.selector.as_ref())
}

fn object_ref_eq(a: &CrossVersionObjectReference, b: &CrossVersionObjectReference) -> bool {
    a.kind == b.kind && a.name == b.name && str_eq(a.api_version.as_ref(), b.api_version.as_ref())
}

fn opt_eq<T>(a: Option<&T>, b: Option<&T>, eq: impl Fn(&T, &T) -> bool) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => eq(x, y),
        _ => false,
    }
}

fn metric_status_eq(a: &MetricStatus, b: &MetricStatus) -> bool {
    a.type_ == b.type_
        && opt_eq(a.object.as_ref(), b.object.as_ref(), |x, y| {
            object_ref_eq(&x.described_object, &y.described_object)
                && identifier_eq(&x.metric, &y.metric)
                && value_status_eq(&x.current, &y.current)
        })
        && opt_eq(a.pods.as_ref(), b.pods.as_ref(), |x, y| {
            identifier_eq(&x.metric, &y.metric) && value_status_eq(&x.current, &y.current)
        })
        && opt_eq(a.resource.as_ref(), b.resource.as_ref(), |x, y| {
            x.name == y.name && value_status_eq(&x.current, &y.current)
        })
        && opt_eq(
            a.container_resource.as_ref(),
            b.container_resource.as_ref(),
            |x, y| {
                x.name == y.name
                    && x.container == y.container
                    && value_status_eq(&x.current, &y.current)
            },
        )
        && opt_eq(a.external.as_ref(), b.external.as_ref(), |x, y| {
            identifier_eq(&x.metric, &y.metric) && value_status_eq(&x.current, &y.current)
        })
}

#[cfg(test)]
mod tests {
    use jiff::SignedDuration;
    use k8s_openapi::api::autoscaling::v2::ResourceMetricStatus;

    use super::*;
    use crate::conditions::{HpaCondition, set_condition};

    fn now() -> Timestamp {
        "2025-06-01T12:00:00Z".parse().unwrap()
    }

    fn cpu(avg: &str, util: i32) -> MetricStatus {
        MetricStatus {
            type_: "Resource".into(),
            resource: Some(ResourceMetricStatus {
                name: "cpu".into(),
                current: MetricValueStatus {
                    average_utilization: Some(util),
                    average_value: Some(Quantity(avg.into())),
                    value: None,
                },
            }),
            ..Default::default()
        }
    }

    #[test]
    fn set_status_replaces_and_keeps_last_scale_time() {
        let earlier = now() - SignedDuration::from_mins(3);
        let mut s = HorizontalPodAutoscalerStatus {
            current_replicas: Some(3),
            desired_replicas: 5,
            last_scale_time: Some(Time(earlier)),
            observed_generation: Some(4),
            current_metrics: Some(vec![cpu("100m", 10)]),
            conditions: None,
        };
        set_condition(
            s.conditions.get_or_insert_default(),
            &HpaCondition::SucceededGetScale,
            now(),
        );
        set_status(&mut s, 4, 4, None, false, now());
        assert_eq!(s.current_replicas, Some(4));
        assert_eq!(s.desired_replicas, 4);
        assert_eq!(s.last_scale_time, Some(Time(earlier)));
        assert_eq!(s.observed_generation, None);
        assert_eq!(s.current_metrics, None);
        assert_eq!(s.conditions.as_ref().map(Vec::len), Some(1));
        set_status(&mut s, 4, 6, None, true, now());
        assert_eq!(s.last_scale_time, Some(Time(now())));
        // The failure path keeps the previous desired count.
        set_current_replicas_and_metrics_in_status(
            &mut s,
            0,
            Some(vec![MetricStatus::default()]),
            now(),
        );
        assert_eq!((s.current_replicas, s.desired_replicas), (None, 6));
        assert_eq!(s.last_scale_time, Some(Time(now())));
        assert_eq!(
            s.current_metrics.as_ref().map(|m| m[0].type_.as_str()),
            Some("")
        );
    }

    #[test]
    fn semantic_equality() {
        let base = HorizontalPodAutoscalerStatus {
            current_replicas: Some(2),
            desired_replicas: 2,
            current_metrics: Some(vec![cpu("1500m", 50)]),
            ..Default::default()
        };
        // Quantities by value.
        let mut same = base.clone();
        same.current_metrics = Some(vec![cpu("1.5", 50)]);
        assert!(status_semantically_equal(&base, &same));
        let mut other = base.clone();
        other.current_metrics = Some(vec![cpu("1501m", 50)]);
        assert!(!status_semantically_equal(&base, &other));
        // nil vs empty slices, absent vs zero replicas, absent vs empty strings.
        let a = HorizontalPodAutoscalerStatus {
            conditions: None,
            current_metrics: None,
            ..Default::default()
        };
        let b = HorizontalPodAutoscalerStatus {
            conditions: Some(vec![]),
            current_metrics: Some(vec![]),
            current_replicas: Some(0),
            ..Default::default()
        };
        assert!(status_semantically_equal(&a, &b));
        // A steady condition update does not change the status; a flip does.
        let mut c1 = base.clone();
        set_condition(
            c1.conditions.get_or_insert_default(),
            &HpaCondition::SucceededGetScale,
            now(),
        );
        let mut c2 = c1.clone();
        set_condition(
            c2.conditions.get_or_insert_default(),
            &HpaCondition::SucceededGetScale,
            now() + SignedDuration::from_secs(15),
        );
        assert!(status_semantically_equal(&c1, &c2));
        set_condition(
            c2.conditions.get_or_insert_default(),
            &HpaCondition::FailedGetScale { err: "x".into() },
            now() + SignedDuration::from_secs(30),
        );
        assert!(!status_semantically_equal(&c1, &c2));
        // lastScaleTime pointer: nil differs from set.
        let mut t = base.clone();
        t.last_scale_time = Some(Time(now()));
        assert!(!status_semantically_equal(&base, &t));
        // observedGeneration is a pointer too, but nil and 0 are equal (no status write per
        // sync against a server that drops the field).
        let mut g = base.clone();
        g.observed_generation = Some(1);
        assert!(!status_semantically_equal(&base, &g));
        g.observed_generation = Some(0);
        assert!(base.observed_generation.is_none());
        assert!(status_semantically_equal(&base, &g));
    }
}
