//! `computeStatusForResourceMetric` and `computeStatusForContainerResourceMetric`: a
//! Resource or ContainerResource metric with an `AverageValue` or `Utilization` target.

use hpa_decision::conditions::MetricFailureReason;
use hpa_decision::decision::{MetricFailure, MetricProposal, metric_names};
use hpa_decision::gofmt::GoArg;
use hpa_metrics::Quantity;
use hpa_replica_calculator::ResourceMetric;
use k8s_openapi::api::autoscaling::v2::{
    ContainerResourceMetricStatus, MetricSpec, MetricStatus, MetricValueStatus,
    ResourceMetricStatus,
};

use super::{Failures, Measured, MetricComputer, MetricContext, proposal, wrap};

/// One Resource metric, or with `container_metric` one ContainerResource metric: an
/// `averageValue` target is checked first (raw usage per pod), then an
/// `averageUtilization` one (percent of the requests).
pub(super) async fn measure(
    computer: &MetricComputer<'_>,
    spec: &MetricSpec,
    ctx: &MetricContext<'_>,
    container_metric: bool,
) -> Result<Measured, MetricFailure> {
    let identity = |e: &str| e.to_owned();
    let (reason, resource, container, target) = if container_metric {
        let reason = MetricFailureReason::FailedGetContainerResourceMetric;
        let Some(src) = spec.container_resource.as_ref() else {
            return Err(Failures {
                reason,
                outer: &identity,
            }
            .missing_source());
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
            return Err(Failures {
                reason,
                outer: &identity,
            }
            .missing_source());
        };
        (reason, src.name.as_str(), None, &src.target)
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
    let fail = Failures {
        reason,
        outer: &outer,
    };
    let (current, proposal) = if let Some(v) = &target.average_value {
        let target_usage = fail.quantity(v)?;
        let r = computer
            .calculator
            .get_raw_resource_replicas(
                ctx,
                &ResourceMetric {
                    resource,
                    container,
                },
                target_usage,
            )
            .await
            .map_err(|e| {
                fail.failure(wrap(
                    "failed to get %s usage: %v",
                    &[GoArg::str(resource), GoArg::error(e.to_string())],
                ))
            })?;
        (
            MetricValueStatus {
                average_value: Some(resource_quantity(resource, r.usage)),
                ..Default::default()
            },
            proposal(r, metric_names::resource(resource)),
        )
    } else if let Some(u) = target.average_utilization {
        let r = computer
            .calculator
            .get_resource_replicas(
                ctx,
                &ResourceMetric {
                    resource,
                    container,
                },
                u,
            )
            .await
            .map_err(|e| {
                fail.failure(wrap(
                    "failed to get %s utilization: %v",
                    &[GoArg::str(resource), GoArg::error(e.to_string())],
                ))
            })?;
        (
            MetricValueStatus {
                average_utilization: r.utilization,
                average_value: Some(resource_quantity(resource, r.usage)),
                value: None,
            },
            MetricProposal {
                replicas: r.replica_count,
                metric_name: if container.is_some() {
                    metric_names::container_resource_utilization(resource)
                } else {
                    metric_names::resource_utilization(resource)
                },
                timestamp: r.timestamp,
                detail: Some(r.detail),
            },
        )
    } else {
        return Err(fail.failure(
            "invalid resource metric source: neither an average utilization target nor an average value (usage) target was set",
        ));
    };
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
    Ok((status, proposal))
}

/// `buildQuantity` (v1.34+, kubernetes#132351): resource metric values print in BinarySI for
/// memory (`156250Ki`) and DecimalSI otherwise.
fn resource_quantity(
    resource: &str,
    milli: i64,
) -> k8s_openapi::apimachinery::pkg::api::resource::Quantity {
    let format = if resource == "memory" {
        hpa_metrics::Format::BinarySI
    } else {
        hpa_metrics::Format::DecimalSI
    };
    Quantity::from_milli_with_format(milli, format).to_k8s()
}
