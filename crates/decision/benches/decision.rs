//! The pure part of one reconcile, without I/O: a Resource cpu HPA (behavior set) over 10
//! pods and their samples: the replica calculator's `resource_replicas`, the aggregation of
//! the metric results, `decide` (normalization with behaviors, recommendations, conditions)
//! and `complete` (the status). The clock moves 15 s per decision, as the sync period does,
//! so the recommendation and scale-event windows roll as in production.
//! Run: `cargo bench -p hpa-decision --bench decision`.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use hpa_decision::decision::{
    DecisionConfig, DecisionInput, MetricProposal, MetricResult, MetricsOutcome, RescaleResult,
    decide,
};
use hpa_decision::state::HpaState;
use hpa_metrics::{PodMetric, PodMetricsInfo};
use hpa_replica_calculator::resource_replicas;
use hpa_replica_calculator::{CalculatorConfig, PodSample, ResourceTarget, Tolerances};
use k8s_openapi::api::autoscaling::v2::{HorizontalPodAutoscaler, MetricStatus};
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

fn hpa() -> HorizontalPodAutoscaler {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 1, "maxReplicas": 100,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 50}}}],
            "behavior": {
                "scaleUp": {"stabilizationWindowSeconds": 60, "selectPolicy": "Max",
                    "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15},
                                 {"type": "Pods", "value": 4, "periodSeconds": 15}]},
                "scaleDown": {"stabilizationWindowSeconds": 300, "selectPolicy": "Min",
                    "policies": [{"type": "Percent", "value": 10, "periodSeconds": 60}]}}},
        "status": {"currentReplicas": 10, "desiredReplicas": 10, "conditions": []},
    }))
    .unwrap()
}

fn pods() -> Vec<Arc<Pod>> {
    (0..10)
        .map(|i| {
            Arc::new(
                serde_json::from_value(json!({
                    "metadata": {"name": format!("web-{i}"), "namespace": "default",
                        "labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "app",
                        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]},
                    "status": {"phase": "Running", "startTime": "2024-12-31T00:00:00Z",
                        "conditions": [{"type": "Ready", "status": "True",
                            "lastTransitionTime": "2024-12-31T00:00:30Z"}]},
                }))
                .unwrap(),
            )
        })
        .collect()
}

fn samples(now: jiff::Timestamp, step: u64) -> PodMetricsInfo {
    (0..10)
        .map(|i| {
            (
                format!("web-{i}"),
                PodMetric {
                    timestamp: now,
                    window: Duration::from_secs(30),
                    // A load that moves a little around the target.
                    value: 45 + ((i + step) % 12) as i64,
                },
            )
        })
        .collect()
}

fn bench_decision(c: &mut Criterion) {
    let hpa = hpa();
    let pods = pods();
    let state = HpaState::new();
    let config = DecisionConfig::default();
    let calc = CalculatorConfig::default();
    let previous = hpa.status.clone().unwrap();
    let mut now: jiff::Timestamp = "2025-01-01T00:00:00Z".parse().unwrap();
    let mut step = 0u64;
    c.bench_function("decision: Resource cpu, 10 pods, behavior", |b| {
        b.iter(|| {
            step += 1;
            now += jiff::SignedDuration::from_secs(15);
            let proposal = resource_replicas(
                10,
                &ResourceTarget {
                    resource: "cpu",
                    container: None,
                    target_utilization: 50,
                },
                Tolerances::new(0.1, 0.1),
                PodSample {
                    pods: &pods,
                    metrics: samples(now, step),
                    now,
                },
                &calc,
            )
            .unwrap();
            let outcome = MetricsOutcome::from_results(
                10,
                vec![MetricResult {
                    metric_type: "Resource".to_owned(),
                    status: MetricStatus::default(),
                    outcome: Ok(MetricProposal {
                        replicas: proposal.replica_count,
                        metric_name: "cpu resource utilization (percentage of request)".to_owned(),
                        timestamp: Some(now),
                        // As the reconcile keeps it for the trace.
                        detail: Some(proposal.detail.clone()),
                    }),
                }],
            );
            let decision = decide(
                &state,
                &config,
                DecisionInput {
                    key: "default/web",
                    hpa: &hpa,
                    current_replicas: 10,
                    now,
                    tolerances: Some(Tolerances {
                        scale_down: 0.1,
                        scale_up: 0.1,
                    }),
                },
                Some(outcome),
            );
            let done = decision.complete(&state, &previous, RescaleResult::NotAttempted);
            black_box(done);
        })
    });
}

criterion_group!(benches, bench_decision);
criterion_main!(benches);
