//! How a replica calculation reached its count, as recorded in a decision: the usage ratios
//! and pod classification of upstream `GetResourceReplicas` / `calcPlainMetricReplicas` /
//! `groupPods` in `pkg/controller/podautoscaler/replica_calculator.go`. The calculation
//! itself (`hpa-replica-calculator`) fills these; they live here so that a decision record
//! needs no metrics client.

use std::collections::{BTreeMap, BTreeSet};

/// The result of upstream `groupPods` (`hpa_replica_calculator::group_pods()`). Pods are identified by `metadata.name`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodGroups {
    /// Pods whose metric counts as-is.
    pub ready_pod_count: usize,
    /// Pending pods, and (CPU only) pods whose sample is not trusted yet.
    pub unready_pods: BTreeSet<String>,
    /// Pods that are neither ignored nor pending but have no metric entry.
    pub missing_pods: BTreeSet<String>,
    /// Pods being deleted, and failed pods.
    pub ignored_pods: BTreeSet<String>,
    /// Why each unready, missing or ignored pod was put there (for decision traces).
    pub reasons: BTreeMap<String, &'static str>,
}

/// How a proposal was reached, for decision traces: the usage ratio(s) and the pods counted.
/// Filled by the same arithmetic that produces the count; nothing here is recomputed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CalculationDetail {
    /// The usage ratio compared with the tolerance band (current / target).
    pub usage_ratio: f64,
    /// The ratio after missing and unready pods were filled in conservatively (pod-based
    /// metrics only, when a fill-in happened).
    pub recomputed_usage_ratio: Option<f64>,
    /// How the listed pods were counted (pod-based metrics: Resource, ContainerResource, Pods).
    pub pods: Option<PodGroups>,
    /// The number of ready, running pods the ratio was multiplied by (Object and External
    /// `Value` targets, when the count was outside the tolerance).
    pub ready_pods: Option<i64>,
    /// The values read (External metrics: one per series), milli-units.
    pub values: Vec<i64>,
}
