//! `computeStatusForObjectMetric`: an Object metric with a `Value` or `AverageValue` target.

use hpa_decision::conditions::MetricFailureReason;
use hpa_decision::decision::{MetricFailure, metric_names};
use hpa_decision::gofmt::GoArg;
use hpa_replica_calculator::ObjectMetric;
use k8s_openapi::api::autoscaling::v2::{MetricSpec, MetricStatus, ObjectMetricStatus};

use super::{
    Failures, Measured, MetricComputer, MetricContext, ValueTarget, identifier, proposal, wrap,
};

/// One Object metric: the target's `type` chooses between its `value` (the object's metric
/// against the target, scaled by the ready pods) and its `averageValue` (the metric divided
/// among the current replicas).
pub(super) async fn measure(
    computer: &MetricComputer<'_>,
    spec: &MetricSpec,
    ctx: &MetricContext<'_>,
) -> Result<Measured, MetricFailure> {
    let outer = |e: &str| wrap("failed to get object metric value: %v", &[GoArg::error(e)]);
    let fail = Failures {
        reason: MetricFailureReason::FailedGetObjectMetric,
        outer: &outer,
    };
    let Some(src) = spec.object.as_ref() else {
        return Err(fail.missing_source());
    };
    let metric_selector = fail.metric_selector(src.metric.selector.as_ref())?;
    let target = &src.target;
    let (kind, target) = match (target.type_.as_str(), &target.value, &target.average_value) {
        ("Value", Some(v), _) => (ValueTarget::Value, v),
        ("AverageValue", _, Some(v)) => (ValueTarget::AverageValue, v),
        _ => {
            return Err(fail.failure_text(
                "invalid object metric source: neither a value target nor an average value target was set",
            ));
        }
    };
    let target_usage = fail.quantity(target)?;
    let name = src.metric.name.as_str();
    let calculator = computer.calculator;
    let metric = ObjectMetric {
        metric_name: name,
        object_ref: &src.described_object,
        metric_selector: &metric_selector,
    };
    let (r, metric_name) = match kind {
        ValueTarget::Value => (
            calculator
                .get_object_metric_replicas(ctx, &metric, target_usage)
                .await
                .map_err(|e| fail.failure(e))?,
            metric_names::object(&src.described_object.kind, name),
        ),
        // Upstream names an AverageValue Object metric as it names an External one.
        ValueTarget::AverageValue => (
            calculator
                .get_object_per_pod_metric_replicas(ctx, &metric, target_usage)
                .await
                .map_err(|e| fail.named_fetch("failed to get %s object metric: %v", name, e))?,
            metric_names::external(name, src.metric.selector.as_ref(), computer.selector_style),
        ),
    };
    let status = MetricStatus {
        type_: "Object".to_owned(),
        object: Some(ObjectMetricStatus {
            described_object: src.described_object.clone(),
            metric: identifier(name, src.metric.selector.as_ref()),
            current: kind.current(r.usage),
        }),
        ..Default::default()
    };
    Ok((status, proposal(r, metric_name)))
}
