//! `computeStatusForObjectMetric`: an Object metric with a `Value` or `AverageValue` target.

use hpa_decision::conditions::MetricFailureReason;
use hpa_decision::decision::{MetricFailure, metric_names};
use hpa_decision::gofmt::{GoArg, sprintf};
use hpa_replica_calculator::{MetricTarget, ObjectMetric, ReplicaQuery};
use k8s_openapi::api::autoscaling::v2::{MetricSpec, MetricStatus, ObjectMetricStatus};

use super::{Failures, Measured, MetricComputer, calculate, current, identifier, proposal};

/// One Object metric: the target's `type` chooses between its `value` (the object's metric
/// against the target, scaled by the ready pods) and its `averageValue` (the metric divided
/// among the current replicas).
pub(super) async fn measure(
    computer: &MetricComputer<'_>,
    spec: &MetricSpec,
    ctx: &ReplicaQuery<'_>,
) -> Result<Measured, MetricFailure> {
    let outer = |e: &str| sprintf("failed to get object metric value: %v", &[GoArg::error(e)]);
    let fail = Failures {
        reason: MetricFailureReason::FailedGetObjectMetric,
        outer: &outer,
    };
    let Some(src) = spec.object.as_ref() else {
        return Err(fail.missing_source());
    };
    let metric_selector = fail.metric_selector(src.metric.selector.as_ref())?;
    let name = src.metric.name.as_str();
    let metric = ObjectMetric {
        metric_name: name,
        object_ref: &src.described_object,
        metric_selector: &metric_selector,
    };
    let spec_target = &src.target;
    let target_fields = (
        spec_target.type_.as_str(),
        &spec_target.value,
        &spec_target.average_value,
    );
    let (target, metric_name) = match target_fields {
        ("Value", Some(v), _) => (
            MetricTarget::ObjectValue {
                metric,
                value: fail.quantity(v)?,
            },
            metric_names::object(&src.described_object.kind, name),
        ),
        // Upstream names an AverageValue Object metric as it names an External one.
        ("AverageValue", _, Some(v)) => (
            MetricTarget::ObjectAverageValue {
                metric,
                average_value: fail.quantity(v)?,
            },
            metric_names::external(name, src.metric.selector.as_ref(), computer.selector_style),
        ),
        _ => {
            return Err(fail.failure_text(
                "invalid object metric source: neither a value target nor an average value target was set",
            ));
        }
    };
    let r = calculate(computer, ctx, &fail, &target).await?;
    let status = MetricStatus {
        type_: "Object".to_owned(),
        object: Some(ObjectMetricStatus {
            described_object: src.described_object.clone(),
            metric: identifier(name, src.metric.selector.as_ref()),
            current: current(&target, &r),
        }),
        ..Default::default()
    };
    Ok((status, proposal(r, metric_name)))
}
