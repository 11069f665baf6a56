//! `computeStatusForExternalMetric`: an External metric with an `AverageValue` or `Value`
//! target.

use hpa_decision::conditions::MetricFailureReason;
use hpa_decision::decision::{MetricFailure, metric_names};
use hpa_decision::gofmt::{GoArg, sprintf};
use hpa_replica_calculator::{ExternalMetric, MetricTarget, ReplicaQuery};
use k8s_openapi::api::autoscaling::v2::{ExternalMetricStatus, MetricSpec, MetricStatus};

use super::{Failures, Measured, MetricComputer, calculate, current, identifier, proposal};

/// One External metric: an `averageValue` target is checked first (the value per ready pod),
/// then a `value` target (the metric's total).
pub(super) async fn measure(
    computer: &MetricComputer<'_>,
    spec: &MetricSpec,
    ctx: &ReplicaQuery<'_>,
) -> Result<Measured, MetricFailure> {
    let name = spec
        .external
        .as_ref()
        .map_or("", |src| src.metric.name.as_str());
    let outer = |e: &str| {
        sprintf(
            "failed to get %s external metric value: %v",
            &[GoArg::str(name), GoArg::error(e)],
        )
    };
    let Some(src) = spec.external.as_ref() else {
        return Err(
            Failures::unwrapped(MetricFailureReason::FailedGetExternalMetric).missing_source(),
        );
    };
    let fail = Failures {
        reason: MetricFailureReason::FailedGetExternalMetric,
        outer: &outer,
    };
    let selector = src.metric.selector.as_ref();
    let metric = ExternalMetric {
        metric_name: name,
        metric_selector: selector,
    };
    let target = match (&src.target.average_value, &src.target.value) {
        (Some(v), _) => MetricTarget::ExternalAverageValue {
            metric,
            average_value: fail.quantity(v)?,
        },
        (None, Some(v)) => MetricTarget::ExternalValue {
            metric,
            value: fail.quantity(v)?,
        },
        (None, None) => {
            return Err(fail.failure_text(
                "invalid external metric source: neither a value target nor an average value target was set",
            ));
        }
    };
    let r = calculate(computer, ctx, &fail, &target).await?;
    let status = MetricStatus {
        type_: "External".to_owned(),
        external: Some(ExternalMetricStatus {
            metric: identifier(name, selector),
            current: current(&target, &r),
        }),
        ..Default::default()
    };
    let metric_name = metric_names::external(name, selector, computer.selector_style);
    Ok((status, proposal(r, metric_name)))
}
