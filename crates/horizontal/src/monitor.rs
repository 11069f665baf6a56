//! The controller's Prometheus metrics (spec §9.1).
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
//! whether upstream deletes the series too (see spec §9.1); keeping the series bounded is the
//! deliberate choice here.

use std::time::Duration;

use hpa_config::KubeVersion;
use hpa_decision::labels::{ActionLabel, ErrorLabel};
use prometheus::{
    CounterVec, Gauge, GaugeVec, HistogramOpts, HistogramVec, Opts, Registry, exponential_buckets,
};

/// The metrics subsystem.
pub const SUBSYSTEM: &str = "horizontal_pod_autoscaler_controller";

const ALPHA: &str = "[ALPHA] ";
const BETA: &str = "[BETA] ";

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
    opts_at(ALPHA, name, help)
}

fn opts_at(stability: &str, name: &str, help: &str) -> Opts {
    Opts::new(name, format!("{stability}{help}")).subsystem(SUBSYSTEM)
}

fn hist_opts(stability: &str, name: &str, help: &str) -> Result<HistogramOpts, prometheus::Error> {
    Ok(HistogramOpts::new(name, format!("{stability}{help}"))
        .subsystem(SUBSYSTEM)
        .buckets(exponential_buckets(0.001, 2.0, 15)?))
}

impl Monitor {
    /// Create the six metrics and register them into `registry` (upstream registers once
    /// into the legacy registry; registering twice into one registry is an error).
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        Self::register_at(registry, KubeVersion::V1_35)
    }

    /// [`Monitor::register`] with the stability levels of Kubernetes `version`.
    pub fn register_at(
        registry: &Registry,
        version: KubeVersion,
    ) -> Result<Self, prometheus::Error> {
        let promoted = if version.at_least(KubeVersion::V1_36) {
            BETA
        } else {
            ALPHA
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
    pub fn per_hpa_series(&self) -> usize {
        use prometheus::core::Collector as _;
        self.desired_replicas
            .collect()
            .iter()
            .map(|family| family.get_metric().len())
            .sum()
    }

    /// The value of the controlled-HPA gauge.
    pub fn num_hpas(&self) -> f64 {
        self.num_hpas.get()
    }
}

#[cfg(test)]
mod tests {
    use prometheus::{Encoder, TextEncoder};

    use super::*;

    fn render(registry: &Registry, name: &str) -> String {
        let families: Vec<_> = registry
            .gather()
            .into_iter()
            .filter(|f| f.name() == name)
            .collect();
        let mut buf = Vec::new();
        TextEncoder::new().encode(&families, &mut buf).unwrap();
        String::from_utf8(buf).unwrap()
    }

    fn dedent(s: &str) -> String {
        s.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(|l| format!("{l}\n"))
            .collect()
    }

    // Expected texts from upstream monitor/metrics_test.go.

    #[test]
    fn reconciliations_total() {
        let r = Registry::new();
        let m = Monitor::register(&r).unwrap();
        m.observe_reconciliation_result(
            ActionLabel::ScaleUp,
            ErrorLabel::None,
            Duration::from_millis(100),
        );
        assert_eq!(
            render(
                &r,
                "horizontal_pod_autoscaler_controller_reconciliations_total"
            ),
            dedent(
                r#"
            # HELP horizontal_pod_autoscaler_controller_reconciliations_total [ALPHA] Number of reconciliations of HPA controller. The label 'action' should be either 'scale_down', 'scale_up', or 'none'. Also, the label 'error' should be either 'spec', 'internal', or 'none'. Note that if both spec and internal errors happen during a reconciliation, the first one to occur is reported in `error` label.
            # TYPE horizontal_pod_autoscaler_controller_reconciliations_total counter
            horizontal_pod_autoscaler_controller_reconciliations_total{action="scale_up",error="none"} 1
            "#
            )
        );
    }

    #[test]
    fn reconciliation_duration() {
        let r = Registry::new();
        let m = Monitor::register(&r).unwrap();
        m.observe_reconciliation_result(
            ActionLabel::ScaleDown,
            ErrorLabel::Internal,
            Duration::from_millis(150),
        );
        let mut want = String::from(
            "# HELP horizontal_pod_autoscaler_controller_reconciliation_duration_seconds [ALPHA] The time(seconds) that the HPA controller takes to reconcile once. The label 'action' should be either 'scale_down', 'scale_up', or 'none'. Also, the label 'error' should be either 'spec', 'internal', or 'none'. Note that if both spec and internal errors happen during a reconciliation, the first one to occur is reported in `error` label.\n# TYPE horizontal_pod_autoscaler_controller_reconciliation_duration_seconds histogram\n",
        );
        let les = [
            "0.001", "0.002", "0.004", "0.008", "0.016", "0.032", "0.064", "0.128", "0.256",
            "0.512", "1.024", "2.048", "4.096", "8.192", "16.384", "+Inf",
        ];
        for (i, le) in les.iter().enumerate() {
            let count = if i >= 8 { 1 } else { 0 };
            want.push_str(&format!(
                "horizontal_pod_autoscaler_controller_reconciliation_duration_seconds_bucket{{action=\"scale_down\",error=\"internal\",le=\"{le}\"}} {count}\n"
            ));
        }
        want.push_str("horizontal_pod_autoscaler_controller_reconciliation_duration_seconds_sum{action=\"scale_down\",error=\"internal\"} 0.15\n");
        want.push_str("horizontal_pod_autoscaler_controller_reconciliation_duration_seconds_count{action=\"scale_down\",error=\"internal\"} 1\n");
        assert_eq!(
            render(
                &r,
                "horizontal_pod_autoscaler_controller_reconciliation_duration_seconds"
            ),
            want
        );
    }

    #[test]
    fn metric_computation() {
        let r = Registry::new();
        let m = Monitor::register(&r).unwrap();
        m.observe_metric_computation_result(
            ActionLabel::None,
            ErrorLabel::Spec,
            Duration::from_millis(50),
            "Resource",
        );
        assert_eq!(
            render(
                &r,
                "horizontal_pod_autoscaler_controller_metric_computation_total"
            ),
            dedent(
                r#"
            # HELP horizontal_pod_autoscaler_controller_metric_computation_total [ALPHA] Number of metric computations. The label 'action' should be either 'scale_down', 'scale_up', or 'none'. Also, the label 'error' should be either 'spec', 'internal', or 'none'. The label 'metric_type' corresponds to HPA.spec.metrics[*].type
            # TYPE horizontal_pod_autoscaler_controller_metric_computation_total counter
            horizontal_pod_autoscaler_controller_metric_computation_total{action="none",error="spec",metric_type="Resource"} 1
            "#
            )
        );
        m.observe_metric_computation_result(
            ActionLabel::ScaleUp,
            ErrorLabel::None,
            Duration::from_millis(25),
            "Pods",
        );
        let text = render(
            &r,
            "horizontal_pod_autoscaler_controller_metric_computation_duration_seconds",
        );
        assert!(text.starts_with("# HELP horizontal_pod_autoscaler_controller_metric_computation_duration_seconds [ALPHA] The time(seconds) that the HPA controller takes to calculate one metric. The label 'action' should be either 'scale_down', 'scale_up', or 'none'. The label 'error' should be either 'spec', 'internal', or 'none'. The label 'metric_type' corresponds to HPA.spec.metrics[*].type\n# TYPE horizontal_pod_autoscaler_controller_metric_computation_duration_seconds histogram\n"), "{text}");
        assert!(text.contains("horizontal_pod_autoscaler_controller_metric_computation_duration_seconds_bucket{action=\"scale_up\",error=\"none\",metric_type=\"Pods\",le=\"0.016\"} 0\n"));
        assert!(text.contains("horizontal_pod_autoscaler_controller_metric_computation_duration_seconds_bucket{action=\"scale_up\",error=\"none\",metric_type=\"Pods\",le=\"0.032\"} 1\n"));
        assert!(text.contains("horizontal_pod_autoscaler_controller_metric_computation_duration_seconds_sum{action=\"scale_up\",error=\"none\",metric_type=\"Pods\"} 0.025\n"));
        assert!(text.contains("horizontal_pod_autoscaler_controller_metric_computation_duration_seconds_count{action=\"scale_up\",error=\"none\",metric_type=\"Pods\"} 1\n"));
    }

    #[test]
    fn hpa_count_and_desired_replicas() {
        let r = Registry::new();
        let m = Monitor::register(&r).unwrap();
        m.observe_hpa_addition();
        m.observe_hpa_addition();
        m.observe_hpa_deletion();
        assert_eq!(
            render(
                &r,
                "horizontal_pod_autoscaler_controller_num_horizontal_pod_autoscalers"
            ),
            dedent(
                r#"
            # HELP horizontal_pod_autoscaler_controller_num_horizontal_pod_autoscalers [ALPHA] Current number of controlled HPA objects.
            # TYPE horizontal_pod_autoscaler_controller_num_horizontal_pod_autoscalers gauge
            horizontal_pod_autoscaler_controller_num_horizontal_pod_autoscalers 1
            "#
            )
        );
        m.observe_desired_replicas("default", "test-hpa", 5);
        m.observe_desired_replicas("kube-system", "system-hpa", 10);
        assert_eq!(
            render(&r, "horizontal_pod_autoscaler_controller_desired_replicas"),
            dedent(
                r#"
            # HELP horizontal_pod_autoscaler_controller_desired_replicas [ALPHA] Current desired replica count for HPA objects.
            # TYPE horizontal_pod_autoscaler_controller_desired_replicas gauge
            horizontal_pod_autoscaler_controller_desired_replicas{hpa_name="system-hpa",namespace="kube-system"} 10
            horizontal_pod_autoscaler_controller_desired_replicas{hpa_name="test-hpa",namespace="default"} 5
            "#
            )
        );
    }

    #[test]
    fn from_1_36_the_four_reconcile_metrics_are_beta() {
        for (version, promoted) in [
            (KubeVersion::V1_35, "[ALPHA] "),
            (KubeVersion::V1_36, "[BETA] "),
            (KubeVersion::V1_37, "[BETA] "),
        ] {
            let r = Registry::new();
            let m = Monitor::register_at(&r, version).unwrap();
            m.observe_reconciliation_result(
                ActionLabel::None,
                ErrorLabel::None,
                Duration::from_millis(1),
            );
            m.observe_metric_computation_result(
                ActionLabel::None,
                ErrorLabel::None,
                Duration::from_millis(1),
                "Resource",
            );
            m.observe_hpa_addition();
            m.observe_desired_replicas("ns", "h", 1);
            let mut buf = Vec::new();
            TextEncoder::new().encode(&r.gather(), &mut buf).unwrap();
            let text = String::from_utf8(buf).unwrap();
            for name in [
                "reconciliations_total",
                "reconciliation_duration_seconds",
                "metric_computation_total",
                "metric_computation_duration_seconds",
            ] {
                assert!(
                    text.contains(&format!("# HELP {SUBSYSTEM}_{name} {promoted}")),
                    "{version} {name}: {text}"
                );
            }
            for name in ["num_horizontal_pod_autoscalers", "desired_replicas"] {
                assert!(
                    text.contains(&format!("# HELP {SUBSYSTEM}_{name} [ALPHA] ")),
                    "{version} {name}: {text}"
                );
            }
        }
    }

    #[test]
    fn double_registration_fails() {
        let r = Registry::new();
        Monitor::register(&r).unwrap();
        assert!(Monitor::register(&r).is_err());
    }
}
