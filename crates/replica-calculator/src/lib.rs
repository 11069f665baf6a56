//! The HPA replica calculator: a port of upstream
//! `pkg/controller/podautoscaler/replica_calculator.go`.
//!
//! The API is [`ReplicaCalculator`], the async shell that fetches through
//! [`hpa_metrics::MetricsClient`] and a [`PodLister`] and hands the values to pure
//! functions. Its seven methods are upstream's seven `Get*Replicas`; each takes the shared
//! [`ReplicaQuery`] (namespace, replicas, pod selector, [`Tolerances`], time), the metric
//! measured ([`ResourceMetric`], [`PodsMetric`], [`ObjectMetric`] or [`ExternalMetric`]) and
//! the target number, and returns a [`MetricReplicas`] (the count, the usage and, for a
//! utilization target, the utilization for the status; the timestamp; the trace detail).
//! [`ReplicaCalculator::calculate`] takes the metric and its target as one [`MetricTarget`]
//! (one variant per method) and calls the matching method. Failures are
//! [`CalculatorError`]s, whose messages equal upstream's.
//!
//! Also public, for the controller's caches and for benches: [`group_pods()`] (which pods'
//! samples count: ignored, unready, missing, ready), [`pod_requests`] and
//! [`calculate_pod_requests_from_containers`] (per-pod resource requests, with restartable
//! init containers and pod-level requests), and [`resource_replicas`] (the pure arithmetic
//! of a utilization target).
//!
//! Modules: `group_pods`, `requests`, `replicas` (the pure arithmetic for every metric type,
//! with upstream's conversions, fill-ins, direction checks, tolerances and overflow clamps),
//! `error`, `target`, `pod_lister` and `calculator` (the shell). [`Tolerances`] and Go's
//! float-to-integer conversions come from `hpa-decision` (`tolerance`, `goconv`), which the
//! decision shares.
//!
//! Numeric fidelity: `int64` arithmetic wraps as in Go, divisions truncate, and where upstream
//! converts an out-of-range float (NaN, ±Inf, beyond the integer range) without a guard, the
//! result is what Go produces on amd64: the minimum integer. Where upstream clamps (to
//! `math.MaxInt32` / `math.MaxInt64`), so does this crate.

mod calculator;
#[cfg(test)]
mod calculator_tests;
mod error;
mod group_pods;
mod pod_lister;
mod replicas;
mod requests;
mod target;
#[cfg(test)]
mod upstream_tests;

pub use error::CalculatorError;
pub use group_pods::{GO_ZERO_TIME, ReadinessConfig, WHY_NO_SAMPLE, group_pods};
pub use hpa_decision::calculation::{CalculationDetail, PodGroups};
pub use hpa_decision::tolerance::Tolerances;
pub use replicas::{
    CalculatorConfig, PodSample, ResourceTarget, UtilizationProposal, resource_replicas,
};
pub use requests::{calculate_pod_requests_from_containers, pod_requests};

pub use calculator::{
    ExternalMetric, MetricReplicas, ObjectMetric, PodsMetric, ReplicaCalculator, ReplicaQuery,
    ResourceMetric,
};
pub use pod_lister::{PodListError, PodLister};
pub use target::MetricTarget;

#[cfg(any(test, feature = "mock"))]
pub use pod_lister::MockPodLister;

pub(crate) use hpa_metrics::{
    MetricsError, PodMetric, PodMetricsInfo, UtilizationError, get_metric_usage_ratio,
    get_resource_utilization_ratio,
};
