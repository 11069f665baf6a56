//! The controller's Prometheus metrics (`pkg/controller/podautoscaler/monitor/metrics.go`).
//!
//! Mirrors upstream `pkg/controller/podautoscaler/monitor/metrics.go` and `monitor.go`
//! (v1.35, with `num_horizontal_pod_autoscalers` and `desired_replicas`): subsystem
//! `horizontal_pod_autoscaler_controller`, the same labels and buckets, and each metric's
//! stability level, which component-base writes in front of its help text: every metric is
//! `[ALPHA] ` in 1.35; from 1.36 `reconciliations_total`, `reconciliation_duration_seconds`,
//! `metric_computation_total` and `metric_computation_duration_seconds` are `[BETA] `
//! (kubernetes#136178) while the two gauges stay ALPHA. Metrics are registered into a
//! caller-supplied [`prometheus::Registry`].
//!
//! Per-HPA series (`desired_replicas{namespace, hpa_name}`) are removed when the controller
//! forgets a deleted HPA ([`Monitor::forget_hpa`], from the reconcile that finds the HPA gone,
//! where upstream drops the HPA's recommendations and scale events), so they never outlive
//! their HPA. The v1.35 `horizontal.go` call sites of the monitor were not available to check
//! whether upstream deletes the series too (upstream's `monitor` package does not say); keeping the series bounded is the
//! deliberate choice here.

use std::time::Duration;

use hpa_config::KubeVersion;
use hpa_decision::labels::{ActionLabel, ErrorLabel};
use hpa_workqueue::Stability;
use prometheus::{
    CounterVec, Gauge, GaugeVec, HistogramOpts, HistogramVec, Opts, Registry, exponential_buckets,
};

/// The metrics subsystem.
pub const SUBSYSTEM: &str = "horizontal_pod_autoscaler_controller";

const RECONCILIATIONS_HELP: &str = "Number of reconciliations of HPA controller. The label 'action' should be either 'scale_down', 'scale_up', or 'none'. Also, the label 'error' should be either 'spec', 'internal', or 'none'. Note that if both spec and internal errors happen during a reconciliation, the first one to occur is reported in `error` label.";
const RECONCILIATION_DURATION_HELP: &str = "The time(seconds) that the HPA controller takes to reconcile once. The label 'action' should be either 'scale_down', 'scale_up', or 'none'. Also, the label 'error' should be either 'spec', 'internal', or 'none'. Note that if both spec and internal errors happen during a reconciliation, the first one to occur is reported in `error` label.";
const METRIC_COMPUTATION_HELP: &str = "Number of metric computations. The label 'action' should be either 'scale_down', 'scale_up', or 'none'. Also, the label 'error' should be either 'spec', 'internal', or 'none'. The label 'metric_type' corresponds to HPA.spec.metrics[*].type";
const METRIC_COMPUTATION_DURATION_HELP: &str = "The time(seconds) that the HPA controller takes to calculate one metric. The label 'action' should be either 'scale_down', 'scale_up', or 'none'. The label 'error' should be either 'spec', 'internal', or 'none'. The label 'metric_type' corresponds to HPA.spec.metrics[*].type";
const NUM_HPAS_HELP: &str = "Current number of controlled HPA objects.";
const DESIRED_REPLICAS_HELP: &str = "Current desired replica count for HPA objects.";

/// The controller's metrics (upstream `monitor.Monitor`).
#[derive(Debug, Clone)]
pub struct Monitor {
    reconciliations_total: CounterVec,
    reconciliation_duration: HistogramVec,
    metric_computation_total: CounterVec,
    metric_computation_duration: HistogramVec,
    num_hpas: Gauge,
    desired_replicas: GaugeVec,
}

fn opts(name: &str, help: &str) -> Opts {
    opts_at(Stability::Alpha, name, help)
}

fn opts_at(stability: Stability, name: &str, help: &str) -> Opts {
    Opts::new(name, format!("{}{help}", stability.prefix())).subsystem(SUBSYSTEM)
}

fn hist_opts(
    stability: Stability,
    name: &str,
    help: &str,
) -> Result<HistogramOpts, prometheus::Error> {
    Ok(
        HistogramOpts::new(name, format!("{}{help}", stability.prefix()))
            .subsystem(SUBSYSTEM)
            .buckets(exponential_buckets(0.001, 2.0, 15)?),
    )
}

impl Monitor {
    /// [`Monitor::register_at`] with 1.35's stability levels (the tests' default).
    #[cfg(test)]
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        Self::register_at(registry, KubeVersion::V1_35)
    }

    /// Create the six metrics with the stability levels of Kubernetes `version` and register
    /// them into `registry` (upstream registers once into the legacy registry; registering
    /// twice into one registry is an error).
    pub fn register_at(
        registry: &Registry,
        version: KubeVersion,
    ) -> Result<Self, prometheus::Error> {
        let promoted = if version.at_least(KubeVersion::V1_36) {
            Stability::Beta
        } else {
            Stability::Alpha
        };
        let m = Monitor {
            reconciliations_total: CounterVec::new(
                opts_at(promoted, "reconciliations_total", RECONCILIATIONS_HELP),
                &["action", "error"],
            )?,
            reconciliation_duration: HistogramVec::new(
                hist_opts(
                    promoted,
                    "reconciliation_duration_seconds",
                    RECONCILIATION_DURATION_HELP,
                )?,
                &["action", "error"],
            )?,
            metric_computation_total: CounterVec::new(
                opts_at(
                    promoted,
                    "metric_computation_total",
                    METRIC_COMPUTATION_HELP,
                ),
                &["action", "error", "metric_type"],
            )?,
            metric_computation_duration: HistogramVec::new(
                hist_opts(
                    promoted,
                    "metric_computation_duration_seconds",
                    METRIC_COMPUTATION_DURATION_HELP,
                )?,
                &["action", "error", "metric_type"],
            )?,
            num_hpas: Gauge::with_opts(opts("num_horizontal_pod_autoscalers", NUM_HPAS_HELP))?,
            desired_replicas: GaugeVec::new(
                opts("desired_replicas", DESIRED_REPLICAS_HELP),
                &["namespace", "hpa_name"],
            )?,
        };
        registry.register(Box::new(m.reconciliations_total.clone()))?;
        registry.register(Box::new(m.reconciliation_duration.clone()))?;
        registry.register(Box::new(m.metric_computation_total.clone()))?;
        registry.register(Box::new(m.metric_computation_duration.clone()))?;
        registry.register(Box::new(m.num_hpas.clone()))?;
        registry.register(Box::new(m.desired_replicas.clone()))?;
        Ok(m)
    }

    /// `ObserveReconciliationResult`: count one reconcile and observe its duration.
    pub fn observe_reconciliation_result(
        &self,
        action: ActionLabel,
        error: ErrorLabel,
        duration: Duration,
    ) {
        let labels = [action.as_str(), error.as_str()];
        self.reconciliations_total.with_label_values(&labels).inc();
        self.reconciliation_duration
            .with_label_values(&labels)
            .observe(duration.as_secs_f64());
    }

    /// `ObserveMetricComputationResult`: count one metric computation; `metric_type` is the
    /// raw `spec.metrics[i].type`.
    pub fn observe_metric_computation_result(
        &self,
        action: ActionLabel,
        error: ErrorLabel,
        duration: Duration,
        metric_type: &str,
    ) {
        let labels = [action.as_str(), error.as_str(), metric_type];
        self.metric_computation_total
            .with_label_values(&labels)
            .inc();
        self.metric_computation_duration
            .with_label_values(&labels)
            .observe(duration.as_secs_f64());
    }

    /// `ObserveHPAAddition`: one more controlled HPA.
    pub fn observe_hpa_addition(&self) {
        self.num_hpas.inc();
    }

    /// `ObserveHPADeletion`: one fewer controlled HPA.
    pub fn observe_hpa_deletion(&self) {
        self.num_hpas.dec();
    }

    /// `ObserveDesiredReplicas`: set the desired-replicas gauge of one HPA.
    pub fn observe_desired_replicas(&self, namespace: &str, name: &str, replicas: i32) {
        self.desired_replicas
            .with_label_values(&[namespace, name])
            .set(f64::from(replicas));
    }

    /// Removes the desired-replicas series of a deleted HPA, so that per-HPA series do not
    /// outlive their HPA (called once the controller has forgotten the HPA).
    pub fn forget_hpa(&self, namespace: &str, name: &str) {
        // An HPA deleted before its first reconcile has no series: nothing to remove.
        let _ = self
            .desired_replicas
            .remove_label_values(&[namespace, name]);
    }

    /// The number of per-HPA series (`desired_replicas`).
    #[cfg(test)]
    pub fn per_hpa_series(&self) -> usize {
        use prometheus::core::Collector as _;
        self.desired_replicas
            .collect()
            .iter()
            .map(|family| family.get_metric().len())
            .sum()
    }

    /// The value of the controlled-HPA gauge.
    #[cfg(test)]
    pub fn num_hpas(&self) -> f64 {
        self.num_hpas.get()
    }
}

#[cfg(test)]
mod tests;
