//! `computeStatusForExternalMetric`: an External metric with a `Value` or `AverageValue`
//! target.

use hpa_decision::conditions::MetricFailureReason;
use hpa_decision::decision::{MetricFailure, MetricProposal, metric_names};
use hpa_decision::gofmt::GoArg;
use hpa_replica_calculator::{ExternalMetricReplicasRequest, ExternalPerPodMetricReplicasRequest};
use k8s_openapi::api::autoscaling::v2::{
    ExternalMetricStatus, MetricSpec, MetricStatus, MetricValueStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::{
    MetricComputer, MetricContext, failure, identifier, milli_quantity, missing_source,
    named_fetch_failure, quantity, wrap,
};

pub(super) async fn measure(
    computer: &MetricComputer<'_>,
    spec: &MetricSpec,
    ctx: &MetricContext<'_>,
    status: &mut MetricStatus,
) -> Result<MetricProposal, MetricFailure> {
    const REASON: MetricFailureReason = MetricFailureReason::FailedGetExternalMetric;
    let Some(src) = spec.external.as_ref() else {
        return Err(missing_source(REASON, |e| e.to_owned()));
    };
    let name = src.metric.name.as_str();
    let outer = |e: &str| {
        wrap(
            "failed to get %s external metric value: %v",
            &[GoArg::str(name), GoArg::error(e)],
        )
    };
    let selector = src.metric.selector.as_ref();
    let metric_name = metric_names::external(name, selector, computer.selector_style);
    if let Some(v) = &src.target.average_value {
        let target = quantity(v).map_err(|e| failure(REASON, e.clone(), outer(&e)))?;
        let r = computer
            .calculator
            .get_external_per_pod_metric_replicas(ExternalPerPodMetricReplicasRequest {
                status_replicas: ctx.status_replicas,
                target_usage_per_pod: target,
                metric_name: name,
                tolerances: ctx.tolerances,
                namespace: ctx.namespace,
                metric_selector: selector,
            })
            .await
            .map_err(|e| {
                named_fetch_failure(
                    REASON,
                    "failed to get %s external metric: %v",
                    name,
                    e,
                    outer,
                )
            })?;
        *status = external_status(
            name,
            selector,
            MetricValueStatus {
                average_value: Some(milli_quantity(r.usage)),
                ..Default::default()
            },
        );
        return Ok(MetricProposal {
            replicas: r.replica_count,
            metric_name,
            timestamp: r.timestamp,
            detail: Some(r.detail),
        });
    }
    if let Some(v) = &src.target.value {
        let target = quantity(v).map_err(|e| failure(REASON, e.clone(), outer(&e)))?;
        let r = computer
            .calculator
            .get_external_metric_replicas(ExternalMetricReplicasRequest {
                current_replicas: ctx.spec_replicas,
                target_usage: target,
                metric_name: name,
                tolerances: ctx.tolerances,
                namespace: ctx.namespace,
                metric_selector: selector,
                pod_selector: ctx.selector,
            })
            .await
            .map_err(|e| {
                named_fetch_failure(
                    REASON,
                    "failed to get external metric %s: %v",
                    name,
                    e,
                    outer,
                )
            })?;
        *status = external_status(
            name,
            selector,
            MetricValueStatus {
                value: Some(milli_quantity(r.usage)),
                ..Default::default()
            },
        );
        return Ok(MetricProposal {
            replicas: r.replica_count,
            metric_name,
            timestamp: r.timestamp,
            detail: Some(r.detail),
        });
    }
    let e = "invalid external metric source: neither a value target nor an average value target was set";
    Err(failure(REASON, e.to_owned(), outer(e)))
}

fn external_status(
    name: &str,
    selector: Option<&LabelSelector>,
    current: MetricValueStatus,
) -> MetricStatus {
    MetricStatus {
        type_: "External".to_owned(),
        external: Some(ExternalMetricStatus {
            metric: identifier(name, selector),
            current,
        }),
        ..Default::default()
    }
}
