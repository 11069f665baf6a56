//! The HPA replica calculator: a port of upstream
//! `pkg/controller/podautoscaler/replica_calculator.go`.
//!
//! * [`group_pods`](mod@group_pods): which pods' samples count (ignored, unready, missing, ready).
//! * [`requests`]: per-pod resource requests (containers, restartable init containers,
//!   pod-level requests).
//! * [`replicas`]: the pure arithmetic for every metric type, with upstream's conversions,
//!   fill-ins, direction checks, tolerances and overflow clamps.
//! * [`tolerances`]: the scale-up / scale-down tolerances.
//! * [`error`]: [`CalculatorError`], whose messages equal upstream's.
//! * [`calculator`]: [`ReplicaCalculator`], the async shell that fetches through
//!   [`hpa_metrics::MetricsClient`] and a [`PodLister`] and delegates to the pure functions.
//!   Its seven methods are upstream's seven `Get*Replicas`; each takes the shared
//!   [`ReplicaQuery`] (namespace, replicas, pod selector, tolerances, time), the metric measured
//!   ([`ResourceMetric`], [`PodsMetric`], [`ObjectMetric`] or [`ExternalMetric`]) and the target
//!   number, and returns a [`MetricReplicas`] (the count, the usage and, for a utilization
//!   target, the utilization for the status; the timestamp; the trace detail).
//!   [`ReplicaCalculator::calculate`] takes the metric and its target as one
//!   [`MetricTarget`] (one variant per method) and calls the matching method.
//!
//! Numeric fidelity: `int64` arithmetic wraps as in Go, divisions truncate, and where upstream
//! converts an out-of-range float (NaN, ±Inf, beyond the integer range) without a guard, the
//! result is what Go produces on amd64: the minimum integer. Where upstream clamps (to
//! `math.MaxInt32` / `math.MaxInt64`), so does this crate.

mod calculator;
#[cfg(test)]
mod calculator_tests;
mod error;
mod goconv;
pub mod group_pods;
mod pod_lister;
pub mod replicas;
pub mod requests;
mod target;
mod tolerances;
#[cfg(test)]
mod upstream_tests;

pub use error::CalculatorError;
pub use group_pods::{GO_ZERO_TIME, ReadinessConfig, group_pods};
pub use hpa_decision::calculation::{CalculationDetail, PodGroups};
pub use replicas::{
    CalculatorConfig, PodSample, ResourceTarget, UsageProposal, UtilizationProposal,
};
pub use tolerances::Tolerances;

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
