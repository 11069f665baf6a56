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
        "0.001", "0.002", "0.004", "0.008", "0.016", "0.032", "0.064", "0.128", "0.256", "0.512",
        "1.024", "2.048", "4.096", "8.192", "16.384", "+Inf",
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
