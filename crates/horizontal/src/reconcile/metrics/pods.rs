//! `computeStatusForPodsMetric`: a Pods metric with an `AverageValue` target.

use hpa_decision::conditions::MetricFailureReason;
use hpa_decision::decision::{MetricFailure, metric_names};
use hpa_decision::gofmt::{GoArg, sprintf};
use hpa_replica_calculator::{MetricTarget, PodsMetric, ReplicaQuery};
use k8s_openapi::api::autoscaling::v2::{MetricSpec, MetricStatus, PodsMetricStatus};

use super::{Failures, Measured, MetricComputer, calculate, current, identifier, proposal};

/// One Pods metric: the average per pod against the target average value.
pub(super) async fn measure(
    computer: &MetricComputer<'_>,
    spec: &MetricSpec,
    ctx: &ReplicaQuery<'_>,
) -> Result<Measured, MetricFailure> {
    let outer = |e: &str| sprintf("failed to get pods metric value: %v", &[GoArg::error(e)]);
    let fail = Failures {
        reason: MetricFailureReason::FailedGetPodsMetric,
        outer: &outer,
    };
    let Some(src) = spec.pods.as_ref() else {
        return Err(fail.missing_source());
    };
    let metric_selector = fail.metric_selector(src.metric.selector.as_ref())?;
    // A missing target reads as zero (Go's nil `MilliValue` would panic; API validation
    // requires it).
    let target_usage = match &src.target.average_value {
        Some(q) => fail.quantity(q)?,
        None => 0,
    };
    let target = MetricTarget::PodsAverageValue {
        metric: PodsMetric {
            metric_name: &src.metric.name,
            metric_selector: &metric_selector,
        },
        average_value: target_usage,
    };
    let r = calculate(computer, ctx, &fail, &target).await?;
    let status = MetricStatus {
        type_: "Pods".to_owned(),
        pods: Some(PodsMetricStatus {
            metric: identifier(&src.metric.name, src.metric.selector.as_ref()),
            current: current(&target, &r),
        }),
        ..Default::default()
    };
    Ok((status, proposal(r, metric_names::pods(&src.metric.name))))
}
