//! Per-pod metric samples, mirroring `PodMetric` and `PodMetricsInfo` of upstream
//! `pkg/controller/podautoscaler/metrics/interfaces.go`.

use std::collections::HashMap;
use std::time::Duration;

/// One pod's metric sample: when it was taken, over which window, and its value in
/// milli-units (Go `Quantity.MilliValue()` of what the API reported).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodMetric {
    /// Sample timestamp as reported by the metrics API.
    pub timestamp: jiff::Timestamp,
    /// Window the sample was aggregated over.
    pub window: Duration,
    /// Value in milli-units.
    pub value: i64,
}

/// Samples keyed by pod name (upstream `PodMetricsInfo`).
pub type PodMetricsInfo = HashMap<String, PodMetric>;
