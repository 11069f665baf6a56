//! `computeStatusForPodsMetric`: a Pods metric with an `AverageValue` target.

use hpa_decision::conditions::MetricFailureReason;
use hpa_decision::decision::{MetricFailure, MetricProposal, metric_names};
use hpa_decision::gofmt::GoArg;
use hpa_metrics::Selector;
use hpa_replica_calculator::MetricReplicasRequest;
use k8s_openapi::api::autoscaling::v2::{
    MetricSpec, MetricStatus, MetricValueStatus, PodsMetricStatus,
};

use super::{
    MetricComputer, MetricContext, failure, identifier, milli_quantity, missing_source,
    target_milli, wrap,
};

pub(super) async fn measure(
    computer: &MetricComputer<'_>,
    spec: &MetricSpec,
    ctx: &MetricContext<'_>,
    status: &mut MetricStatus,
) -> Result<MetricProposal, MetricFailure> {
    const REASON: MetricFailureReason = MetricFailureReason::FailedGetPodsMetric;
    let outer = |e: &str| wrap("failed to get pods metric value: %v", &[GoArg::error(e)]);
    let Some(src) = spec.pods.as_ref() else {
        return Err(missing_source(REASON, outer));
    };
    let metric_selector = Selector::from_optional_label_selector(src.metric.selector.as_ref())
        .map_err(|e| {
            let e = e.to_string();
            failure(REASON, e.clone(), outer(&e))
        })?;
    let target_usage = target_milli(&src.target, |t| t.average_value.as_ref())
        .map_err(|e| failure(REASON, e.clone(), outer(&e)))?;
    let r = computer
        .calculator
        .get_metric_replicas(
            MetricReplicasRequest {
                current_replicas: ctx.spec_replicas,
                target_usage,
                metric_name: &src.metric.name,
                tolerances: ctx.tolerances,
                namespace: ctx.namespace,
                selector: ctx.selector,
                metric_selector: &metric_selector,
            },
            ctx.now,
        )
        .await
        .map_err(|e| {
            let e = e.to_string();
            failure(REASON, e.clone(), outer(&e))
        })?;
    *status = MetricStatus {
        type_: "Pods".to_owned(),
        pods: Some(PodsMetricStatus {
            metric: identifier(&src.metric.name, src.metric.selector.as_ref()),
            current: MetricValueStatus {
                average_value: Some(milli_quantity(r.usage)),
                ..Default::default()
            },
        }),
        ..Default::default()
    };
    Ok(MetricProposal {
        replicas: r.replica_count,
        metric_name: metric_names::pods(&src.metric.name),
        timestamp: r.timestamp,
        detail: Some(r.detail),
    })
}
