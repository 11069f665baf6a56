//! `computeStatusForResourceMetric` and `computeStatusForContainerResourceMetric`: a
//! Resource or ContainerResource metric with a `Utilization` or `AverageValue` target.

use hpa_decision::conditions::MetricFailureReason;
use hpa_decision::decision::{MetricFailure, MetricProposal, metric_names};
use hpa_decision::gofmt::GoArg;
use hpa_replica_calculator::{
    CalculatorError, RawResourceReplicasRequest, ResourceReplicasRequest,
};
use k8s_openapi::api::autoscaling::v2::{
    ContainerResourceMetricStatus, MetricSpec, MetricStatus, MetricValueStatus,
    ResourceMetricStatus,
};

use super::{
    MetricComputer, MetricContext, failure, missing_source, quantity, resource_quantity, wrap,
};

pub(super) async fn measure(
    computer: &MetricComputer<'_>,
    spec: &MetricSpec,
    ctx: &MetricContext<'_>,
    status: &mut MetricStatus,
    container_metric: bool,
) -> Result<MetricProposal, MetricFailure> {
    let (reason, resource, container, target) = if container_metric {
        let Some(src) = spec.container_resource.as_ref() else {
            return Err(missing_source(
                MetricFailureReason::FailedGetContainerResourceMetric,
                |e| e.to_owned(),
            ));
        };
        (
            MetricFailureReason::FailedGetContainerResourceMetric,
            src.name.as_str(),
            Some(src.container.as_str()),
            &src.target,
        )
    } else {
        let Some(src) = spec.resource.as_ref() else {
            return Err(missing_source(
                MetricFailureReason::FailedGetResourceMetric,
                |e| e.to_owned(),
            ));
        };
        (
            MetricFailureReason::FailedGetResourceMetric,
            src.name.as_str(),
            None,
            &src.target,
        )
    };
    let outer = |e: &str| match container {
        Some(c) => wrap(
            "failed to get %s container metric value: %v",
            &[GoArg::str(c), GoArg::error(e)],
        ),
        None => wrap(
            "failed to get %s resource metric value: %v",
            &[GoArg::str(resource), GoArg::error(e)],
        ),
    };
    let fail = |inner: String| failure(reason, inner.clone(), outer(&inner));
    let (current, proposal) = if let Some(v) = &target.average_value {
        let target_usage = quantity(v).map_err(&fail)?;
        let r = computer
            .calculator
            .get_raw_resource_replicas(
                RawResourceReplicasRequest {
                    current_replicas: ctx.spec_replicas,
                    target_usage,
                    resource,
                    tolerances: ctx.tolerances,
                    namespace: ctx.namespace,
                    selector: ctx.selector,
                    container,
                },
                ctx.now,
            )
            .await
            .map_err(|e| {
                fail(wrap(
                    "failed to get %s usage: %v",
                    &[GoArg::str(resource), GoArg::error(e.to_string())],
                ))
            })?;
        (
            MetricValueStatus {
                average_value: Some(resource_quantity(resource, r.usage)),
                ..Default::default()
            },
            MetricProposal {
                replicas: r.replica_count,
                metric_name: metric_names::resource(resource),
                timestamp: r.timestamp,
                detail: Some(r.detail),
            },
        )
    } else if let Some(u) = target.average_utilization {
        let r = computer
            .calculator
            .get_resource_replicas(
                ResourceReplicasRequest {
                    current_replicas: ctx.spec_replicas,
                    target_utilization: u,
                    resource,
                    tolerances: ctx.tolerances,
                    namespace: ctx.namespace,
                    selector: ctx.selector,
                    container,
                },
                ctx.now,
            )
            .await
            .map_err(|e: CalculatorError| {
                fail(wrap(
                    "failed to get %s utilization: %v",
                    &[GoArg::str(resource), GoArg::error(e.to_string())],
                ))
            })?;
        (
            MetricValueStatus {
                average_utilization: Some(r.utilization),
                average_value: Some(resource_quantity(resource, r.raw_utilization)),
                value: None,
            },
            MetricProposal {
                replicas: r.replica_count,
                metric_name: if container.is_some() {
                    metric_names::container_resource_utilization(resource)
                } else {
                    metric_names::resource_utilization(resource)
                },
                timestamp: Some(r.timestamp),
                detail: Some(r.detail),
            },
        )
    } else {
        return Err(fail(
            "invalid resource metric source: neither an average utilization target nor an average value (usage) target was set".to_owned(),
        ));
    };
    *status = match container {
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
    Ok(proposal)
}
