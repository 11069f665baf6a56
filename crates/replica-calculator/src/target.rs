//! What one calculation is asked: the metric measured and its target, one variant per upstream
//! `Get*Replicas` method of `pkg/controller/podautoscaler/replica_calculator.go` (the
//! `computeStatusFor*Metric` functions of `horizontal.go` choose the method from the metric
//! source and its target the same way). [`ReplicaCalculator::calculate`] dispatches on it.
//!
//! [`ReplicaCalculator::calculate`]: crate::ReplicaCalculator::calculate

use crate::calculator::{ExternalMetric, ObjectMetric, PodsMetric, ResourceMetric};

/// A metric and its target: which of upstream's seven `Get*Replicas` methods computes the
/// proposal, with that method's arguments beyond the shared [`ReplicaQuery`].
///
/// Values (`value`, `average_value`) are milli-units, as `Quantity.MilliValue()`;
/// `utilization` is an integer percent of the pods' requests.
///
/// [`ReplicaQuery`]: crate::ReplicaQuery
#[derive(Debug, Clone, Copy)]
pub enum MetricTarget<'a> {
    /// A Resource or ContainerResource metric with a `Utilization` target: upstream
    /// `GetResourceReplicas` ([`ReplicaCalculator::get_resource_replicas`]).
    ///
    /// [`ReplicaCalculator::get_resource_replicas`]: crate::ReplicaCalculator::get_resource_replicas
    ResourceUtilization {
        /// The resource (and container) measured.
        metric: ResourceMetric<'a>,
        /// The target utilization, integer percent of the requests.
        utilization: i32,
    },
    /// A Resource or ContainerResource metric with an `AverageValue` target: upstream
    /// `GetRawResourceReplicas` ([`ReplicaCalculator::get_raw_resource_replicas`]).
    ///
    /// [`ReplicaCalculator::get_raw_resource_replicas`]: crate::ReplicaCalculator::get_raw_resource_replicas
    ResourceAverageValue {
        /// The resource (and container) measured.
        metric: ResourceMetric<'a>,
        /// The target usage per pod, milli-units.
        average_value: i64,
    },
    /// A Pods metric (its target is always an `AverageValue`): upstream `GetMetricReplicas`
    /// ([`ReplicaCalculator::get_metric_replicas`]).
    ///
    /// [`ReplicaCalculator::get_metric_replicas`]: crate::ReplicaCalculator::get_metric_replicas
    PodsAverageValue {
        /// The metric measured on every pod.
        metric: PodsMetric<'a>,
        /// The target value per pod, milli-units.
        average_value: i64,
    },
    /// An Object metric with a `Value` target: upstream `GetObjectMetricReplicas`
    /// ([`ReplicaCalculator::get_object_metric_replicas`]).
    ///
    /// [`ReplicaCalculator::get_object_metric_replicas`]: crate::ReplicaCalculator::get_object_metric_replicas
    ObjectValue {
        /// The object and the metric describing it.
        metric: ObjectMetric<'a>,
        /// The target value of the object's metric, milli-units.
        value: i64,
    },
    /// An Object metric with an `AverageValue` target: upstream
    /// `GetObjectPerPodMetricReplicas`
    /// ([`ReplicaCalculator::get_object_per_pod_metric_replicas`]).
    ///
    /// [`ReplicaCalculator::get_object_per_pod_metric_replicas`]: crate::ReplicaCalculator::get_object_per_pod_metric_replicas
    ObjectAverageValue {
        /// The object and the metric describing it.
        metric: ObjectMetric<'a>,
        /// The target value per replica, milli-units.
        average_value: i64,
    },
    /// An External metric with a `Value` target: upstream `GetExternalMetricReplicas`
    /// ([`ReplicaCalculator::get_external_metric_replicas`]).
    ///
    /// [`ReplicaCalculator::get_external_metric_replicas`]: crate::ReplicaCalculator::get_external_metric_replicas
    ExternalValue {
        /// The external metric.
        metric: ExternalMetric<'a>,
        /// The target for the sum of the metric's series, milli-units.
        value: i64,
    },
    /// An External metric with an `AverageValue` target: upstream
    /// `GetExternalPerPodMetricReplicas`
    /// ([`ReplicaCalculator::get_external_per_pod_metric_replicas`]).
    ///
    /// [`ReplicaCalculator::get_external_per_pod_metric_replicas`]: crate::ReplicaCalculator::get_external_per_pod_metric_replicas
    ExternalAverageValue {
        /// The external metric.
        metric: ExternalMetric<'a>,
        /// The target for the sum of the metric's series per replica, milli-units.
        average_value: i64,
    },
}
