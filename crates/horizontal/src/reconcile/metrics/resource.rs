//! `computeStatusForResourceMetric` and `computeStatusForContainerResourceMetric`: a
//! Resource or ContainerResource metric with an `AverageValue` or `Utilization` target.

use hpa_decision::conditions::MetricFailureReason;
use hpa_decision::decision::{MetricFailure, metric_names};
use hpa_decision::gofmt::{GoArg, sprintf};
use hpa_replica_calculator::{MetricTarget, ReplicaQuery, ResourceMetric};
use k8s_openapi::api::autoscaling::v2::{
    ContainerResourceMetricStatus, MetricSpec, MetricStatus, ResourceMetricStatus,
};

use super::{Failures, Measured, MetricComputer, calculate, current, proposal};

/// One Resource metric, or with `container_metric` one ContainerResource metric: an
/// `averageValue` target is checked first (raw usage per pod), then an
/// `averageUtilization` one (percent of the requests).
pub(super) async fn measure(
    computer: &MetricComputer<'_>,
    spec: &MetricSpec,
    ctx: &ReplicaQuery<'_>,
    container_metric: bool,
) -> Result<Measured, MetricFailure> {
    let (reason, resource, container, target) = if container_metric {
        let reason = MetricFailureReason::FailedGetContainerResourceMetric;
        let Some(src) = spec.container_resource.as_ref() else {
            return Err(Failures::unwrapped(reason).missing_source());
        };
        (
            reason,
            src.name.as_str(),
            Some(src.container.as_str()),
            &src.target,
        )
    } else {
        let reason = MetricFailureReason::FailedGetResourceMetric;
        let Some(src) = spec.resource.as_ref() else {
            return Err(Failures::unwrapped(reason).missing_source());
        };
        (reason, src.name.as_str(), None, &src.target)
    };
    let outer = |e: &str| match container {
        Some(c) => sprintf(
            "failed to get %s container metric value: %v",
            &[GoArg::str(c), GoArg::error(e)],
        ),
        None => sprintf(
            "failed to get %s resource metric value: %v",
            &[GoArg::str(resource), GoArg::error(e)],
        ),
    };
    let fail = Failures {
        reason,
        outer: &outer,
    };
    let metric = ResourceMetric {
        resource,
        container,
    };
    let (target, metric_name) = if let Some(v) = &target.average_value {
        let target = MetricTarget::ResourceAverageValue {
            metric,
            average_value: fail.quantity(v)?,
        };
        (target, metric_names::resource(resource))
    } else if let Some(utilization) = target.average_utilization {
        let target = MetricTarget::ResourceUtilization {
            metric,
            utilization,
        };
        let metric_name = if container.is_some() {
            metric_names::container_resource_utilization(resource)
        } else {
            metric_names::resource_utilization(resource)
        };
        (target, metric_name)
    } else {
        return Err(fail.failure_text(
            "invalid resource metric source: neither an average utilization target nor an average value (usage) target was set",
        ));
    };
    let r = calculate(computer, ctx, &fail, &target).await?;
    let current = current(&target, &r);
    let status = match container {
        Some(c) => MetricStatus {
            type_: "ContainerResource".to_owned(),
            container_resource: Some(ContainerResourceMetricStatus {
                name: resource.to_owned(),
                container: c.to_owned(),
                current,
            }),
            ..Default::default()
        },
        None => MetricStatus {
            type_: "Resource".to_owned(),
            resource: Some(ResourceMetricStatus {
                name: resource.to_owned(),
                current,
            }),
            ..Default::default()
        },
    };
    Ok((status, proposal(r, metric_name)))
}
