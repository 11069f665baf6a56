//! `computeStatusForObjectMetric`: an Object metric with a `Value` or `AverageValue` target.

use hpa_decision::conditions::MetricFailureReason;
use hpa_decision::decision::{MetricFailure, MetricProposal, metric_names};
use hpa_decision::gofmt::GoArg;
use hpa_metrics::Selector;
use hpa_replica_calculator::{ObjectMetricReplicasRequest, ObjectPerPodMetricReplicasRequest};
use k8s_openapi::api::autoscaling::v2::{
    MetricSpec, MetricStatus, MetricValueStatus, ObjectMetricStatus,
};

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
    const REASON: MetricFailureReason = MetricFailureReason::FailedGetObjectMetric;
    let outer = |e: &str| wrap("failed to get object metric value: %v", &[GoArg::error(e)]);
    let Some(src) = spec.object.as_ref() else {
        return Err(missing_source(REASON, outer));
    };
    let metric_selector = Selector::from_optional_label_selector(src.metric.selector.as_ref())
        .map_err(|e| {
            let e = e.to_string();
            failure(REASON, e.clone(), outer(&e))
        })?;
    let target = &src.target;
    if target.type_ == "Value"
        && let Some(v) = &target.value
    {
        let target_usage = quantity(v).map_err(|e| failure(REASON, e.clone(), outer(&e)))?;
        let r = computer
            .calculator
            .get_object_metric_replicas(ObjectMetricReplicasRequest {
                current_replicas: ctx.spec_replicas,
                target_usage,
                metric_name: &src.metric.name,
                tolerances: ctx.tolerances,
                namespace: ctx.namespace,
                object_ref: &src.described_object,
                selector: ctx.selector,
                metric_selector: &metric_selector,
            })
            .await
            .map_err(|e| {
                let e = e.to_string();
                failure(REASON, e.clone(), outer(&e))
            })?;
        *status = MetricStatus {
            type_: "Object".to_owned(),
            object: Some(ObjectMetricStatus {
                described_object: src.described_object.clone(),
                metric: identifier(&src.metric.name, src.metric.selector.as_ref()),
                current: MetricValueStatus {
                    value: Some(milli_quantity(r.usage)),
                    ..Default::default()
                },
            }),
            ..Default::default()
        };
        return Ok(MetricProposal {
            replicas: r.replica_count,
            metric_name: metric_names::object(&src.described_object.kind, &src.metric.name),
            timestamp: r.timestamp,
            detail: Some(r.detail),
        });
    }
    if target.type_ == "AverageValue"
        && let Some(v) = &target.average_value
    {
        let target_usage = quantity(v).map_err(|e| failure(REASON, e.clone(), outer(&e)))?;
        let r = computer
            .calculator
            .get_object_per_pod_metric_replicas(ObjectPerPodMetricReplicasRequest {
                status_replicas: ctx.status_replicas,
                target_average_usage: target_usage,
                metric_name: &src.metric.name,
                tolerances: ctx.tolerances,
                namespace: ctx.namespace,
                object_ref: &src.described_object,
                metric_selector: &metric_selector,
            })
            .await
            .map_err(|e| {
                named_fetch_failure(
                    REASON,
                    "failed to get %s object metric: %v",
                    &src.metric.name,
                    e,
                    outer,
                )
            })?;
        *status = MetricStatus {
            type_: "Object".to_owned(),
            object: Some(ObjectMetricStatus {
                described_object: src.described_object.clone(),
                metric: identifier(&src.metric.name, src.metric.selector.as_ref()),
                current: MetricValueStatus {
                    average_value: Some(milli_quantity(r.usage)),
                    ..Default::default()
                },
            }),
            ..Default::default()
        };
        return Ok(MetricProposal {
            replicas: r.replica_count,
            metric_name: metric_names::external(
                &src.metric.name,
                src.metric.selector.as_ref(),
                computer.selector_style,
            ),
            timestamp: r.timestamp,
            detail: Some(r.detail),
        });
    }
    let e =
        "invalid object metric source: neither a value target nor an average value target was set";
    Err(failure(REASON, e.to_owned(), outer(e)))
}
