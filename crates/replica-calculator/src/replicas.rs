//! The pure replica arithmetic of upstream `pkg/controller/podautoscaler/replica_calculator.go`:
//! the bodies of `GetResourceReplicas`, `calcPlainMetricReplicas`, `getUsageRatioReplicaCount`,
//! `getReadyPodsCount`, `GetObjectPerPodMetricReplicas`, `GetExternalMetricReplicas` and
//! `GetExternalPerPodMetricReplicas` once the metrics and pods have been fetched.
//!
//! Everything here takes values (pods, samples, tolerances, `now`) and never performs I/O; the
//! async shell in [`crate::calculator`] fetches and delegates here. Integer arithmetic follows
//! Go: wrapping `int64`, truncating division, and float-to-int conversions as documented in
//! `hpa_decision::goconv`.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use hpa_decision::calculation::CalculationDetail;
use hpa_decision::goconv::{ceil_to_i32, f64_to_i32, f64_to_i64};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;

use crate::error::CalculatorError;

use crate::group_pods::{
    GO_ZERO_TIME, ReadinessConfig, group_pods, is_pod_ready, remove_metrics_for_pods,
};
use crate::requests::calculate_requests;
use crate::{PodMetric, PodMetricsInfo, get_metric_usage_ratio, get_resource_utilization_ratio};
use hpa_decision::tolerance::Tolerances;

/// The configuration of a calculator that is not per-HPA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CalculatorConfig {
    /// The readiness rules for CPU samples.
    pub readiness: ReadinessConfig,
    /// Feature gate `PodLevelResources` (beta, on by default since v1.34): use
    /// `spec.resources.requests` as a pod's request when set.
    pub pod_level_resources_enabled: bool,
    /// Kubernetes 1.37's Object metric error text (kubernetes#139029): `unable to get metric
    /// M on KIND NS/NAME: ERR` instead of the misordered `unable to get metric M: KIND on NS
    /// NAME/ERR` of 1.35 and 1.36.
    pub object_metric_error_fixed: bool,
}

impl Default for CalculatorConfig {
    /// Upstream production defaults: CPU initialization period 5m, initial readiness delay 30s,
    /// `PodLevelResources` on.
    fn default() -> Self {
        Self {
            readiness: ReadinessConfig {
                cpu_initialization_period: Duration::from_secs(5 * 60),
                delay_of_initial_readiness_status: Duration::from_secs(30),
            },
            pod_level_resources_enabled: true,
            object_metric_error_fixed: false,
        }
    }
}

/// What was observed for a pod-based calculation: the listed pods, their samples and the
/// evaluation time (upstream's `time.Now()` inside `groupPods`).
#[derive(Debug, Clone)]
pub struct PodSample<'a> {
    /// The pods matched by the HPA's selector, in lister order.
    pub pods: &'a [Arc<Pod>],
    /// The samples by pod name; may include pods not in `pods` ("superfluous" samples).
    pub metrics: PodMetricsInfo,
    /// The evaluation time.
    pub now: Timestamp,
}

/// A resource utilization target (`Resource` / `ContainerResource` with type `Utilization`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceTarget<'a> {
    /// The resource name, e.g. `cpu`.
    pub resource: &'a str,
    /// The container for `ContainerResource`; `None` (or empty) sums the pod.
    pub container: Option<&'a str>,
    /// The target utilization, percent of the request.
    pub target_utilization: i32,
}

/// The outcome of a utilization calculation.
#[derive(Debug, Clone, PartialEq)]
pub struct UtilizationProposal {
    /// The proposed replica count.
    pub replica_count: i32,
    /// The current utilization (integer percent, truncated) before any fill-in.
    pub utilization: i32,
    /// The average raw usage per pod (milli-units) before any fill-in.
    pub raw_utilization: i64,
    /// How the count was reached.
    pub detail: CalculationDetail,
}

/// The outcome of a usage (value / average value) calculation.
#[derive(Debug, Clone, PartialEq)]
pub struct UsageProposal {
    /// The proposed replica count.
    pub replica_count: i32,
    /// The usage reported in the HPA status (milli-units; per pod for average-value targets).
    pub usage: i64,
    /// How the count was reached.
    pub detail: CalculationDetail,
}

fn fill(metrics: &mut PodMetricsInfo, pods: &BTreeSet<String>, value: impl Fn(&str) -> i64) {
    for pod in pods {
        metrics.insert(
            pod.clone(),
            PodMetric {
                timestamp: GO_ZERO_TIME,
                window: Duration::ZERO,
                value: value(pod),
            },
        );
    }
}

/// Whether the recomputed ratio keeps the current count: too small a change, or the fill-ins
/// flipped the scale direction.
fn keeps_current(tolerances: &Tolerances, usage_ratio: f64, new_usage_ratio: f64) -> bool {
    tolerances.is_within(new_usage_ratio)
        || (usage_ratio < 1.0 && new_usage_ratio > 1.0)
        || (usage_ratio > 1.0 && new_usage_ratio < 1.0)
}

/// Whether a recomputed count moves against the direction of the new ratio (the number of
/// samples changed the direction), in which case the current count is kept.
fn contradicts_direction(new_usage_ratio: f64, new_replicas: i32, current_replicas: i32) -> bool {
    (new_usage_ratio < 1.0 && new_replicas > current_replicas)
        || (new_usage_ratio > 1.0 && new_replicas < current_replicas)
}

/// Steps after fetching of upstream `GetResourceReplicas`: group pods, drop ignored and unready
/// samples, compute requests and utilization; if pods are missing samples, or unready pods exist
/// on a scale-up, fill them in conservatively (missing: `max(100, target)`% of their request on a
/// scale-down, 0 on a scale-up; unready: 0) and recompute, keeping the current count when the
/// change is within tolerance or changes direction.
pub fn resource_replicas(
    current_replicas: i32,
    target: &ResourceTarget<'_>,
    tolerances: Tolerances,
    sample: PodSample<'_>,
    config: &CalculatorConfig,
) -> Result<UtilizationProposal, CalculatorError> {
    let PodSample {
        pods,
        mut metrics,
        now,
    } = sample;
    if pods.is_empty() {
        return Err(CalculatorError::NoPods);
    }
    let groups = group_pods(
        pods.iter().map(AsRef::as_ref),
        &metrics,
        target.resource,
        &config.readiness,
        now,
    );
    remove_metrics_for_pods(&mut metrics, &groups.ignored_pods);
    remove_metrics_for_pods(&mut metrics, &groups.unready_pods);
    if metrics.is_empty() {
        return Err(CalculatorError::NoMetricsForTargetedPods);
    }

    let requests = calculate_requests(
        pods.iter().map(AsRef::as_ref),
        target.container,
        target.resource,
        config.pod_level_resources_enabled,
    )?;
    let (usage_ratio, utilization, raw_utilization) =
        get_resource_utilization_ratio(&metrics, &requests, target.target_utilization)?;
    let mut detail = CalculationDetail {
        usage_ratio,
        pods: Some(groups.clone()),
        ..CalculationDetail::default()
    };
    let proposal = |replica_count, detail: &CalculationDetail| UtilizationProposal {
        replica_count,
        utilization,
        raw_utilization,
        detail: detail.clone(),
    };

    let scale_up_with_unready = !groups.unready_pods.is_empty() && usage_ratio > 1.0;
    if !scale_up_with_unready && groups.missing_pods.is_empty() {
        if tolerances.is_within(usage_ratio) {
            return Ok(proposal(current_replicas, &detail));
        }
        return Ok(proposal(
            ceil_to_i32(usage_ratio * groups.ready_pod_count as f64),
            &detail,
        ));
    }

    if !groups.missing_pods.is_empty() {
        if usage_ratio < 1.0 {
            // Scale-down: a missing pod uses 100% of its request, or the target if above 100%.
            let fallback_utilization = i64::from(target.target_utilization.max(100));
            fill(&mut metrics, &groups.missing_pods, |pod| {
                requests
                    .get(pod)
                    .copied()
                    .unwrap_or(0)
                    .wrapping_mul(fallback_utilization)
                    / 100
            });
        } else if usage_ratio > 1.0 {
            // Scale-up: a missing pod uses nothing.
            fill(&mut metrics, &groups.missing_pods, |_| 0);
        }
    }
    if scale_up_with_unready {
        fill(&mut metrics, &groups.unready_pods, |_| 0);
    }

    let (new_usage_ratio, _, _) =
        get_resource_utilization_ratio(&metrics, &requests, target.target_utilization)?;
    detail.recomputed_usage_ratio = Some(new_usage_ratio);
    if keeps_current(&tolerances, usage_ratio, new_usage_ratio) {
        return Ok(proposal(current_replicas, &detail));
    }
    let new_replicas = ceil_to_i32(new_usage_ratio * metrics.len() as f64);
    if contradicts_direction(new_usage_ratio, new_replicas, current_replicas) {
        return Ok(proposal(current_replicas, &detail));
    }
    Ok(proposal(new_replicas, &detail))
}

/// Upstream `calcPlainMetricReplicas` (raw resource `AverageValue` and `Pods` metrics): like
/// [`resource_replicas`] on plain per-pod averages, without requests. A missing pod counts as
/// exactly the target on a scale-down and 0 on a scale-up; nothing is filled in at a ratio of
/// exactly 1. Pass `resource = ""` for custom metrics (no CPU readiness rules).
pub fn plain_metric_replicas(
    current_replicas: i32,
    target_usage: i64,
    resource: &str,
    tolerances: Tolerances,
    sample: PodSample<'_>,
    config: &CalculatorConfig,
) -> Result<UsageProposal, CalculatorError> {
    let PodSample {
        pods,
        mut metrics,
        now,
    } = sample;
    if pods.is_empty() {
        return Err(CalculatorError::NoPods);
    }
    let groups = group_pods(
        pods.iter().map(AsRef::as_ref),
        &metrics,
        resource,
        &config.readiness,
        now,
    );
    remove_metrics_for_pods(&mut metrics, &groups.ignored_pods);
    remove_metrics_for_pods(&mut metrics, &groups.unready_pods);
    if metrics.is_empty() {
        return Err(CalculatorError::NoMetricsForTargetedPods);
    }

    let (usage_ratio, usage) = get_metric_usage_ratio(&metrics, target_usage);
    let mut detail = CalculationDetail {
        usage_ratio,
        pods: Some(groups.clone()),
        ..CalculationDetail::default()
    };
    let proposal = |replica_count, detail: &CalculationDetail| UsageProposal {
        replica_count,
        usage,
        detail: detail.clone(),
    };

    let scale_up_with_unready = !groups.unready_pods.is_empty() && usage_ratio > 1.0;
    if !scale_up_with_unready && groups.missing_pods.is_empty() {
        if tolerances.is_within(usage_ratio) {
            return Ok(proposal(current_replicas, &detail));
        }
        return Ok(proposal(
            ceil_to_i32(usage_ratio * groups.ready_pod_count as f64),
            &detail,
        ));
    }

    if !groups.missing_pods.is_empty() {
        if usage_ratio < 1.0 {
            fill(&mut metrics, &groups.missing_pods, |_| target_usage);
        } else if usage_ratio > 1.0 {
            fill(&mut metrics, &groups.missing_pods, |_| 0);
        }
    }
    if scale_up_with_unready {
        fill(&mut metrics, &groups.unready_pods, |_| 0);
    }

    let (new_usage_ratio, _) = get_metric_usage_ratio(&metrics, target_usage);
    detail.recomputed_usage_ratio = Some(new_usage_ratio);
    if keeps_current(&tolerances, usage_ratio, new_usage_ratio) {
        return Ok(proposal(current_replicas, &detail));
    }
    let new_replicas = ceil_to_i32(new_usage_ratio * metrics.len() as f64);
    if contradicts_direction(new_usage_ratio, new_replicas, current_replicas) {
        return Ok(proposal(current_replicas, &detail));
    }
    Ok(proposal(new_replicas, &detail))
}

/// Upstream `getReadyPodsCount`: the number of listed pods that are `Running` and Ready; an
/// empty list is an error.
pub fn ready_pods_count(pods: &[Arc<Pod>]) -> Result<i64, CalculatorError> {
    if pods.is_empty() {
        return Err(CalculatorError::NoPods);
    }
    let ready = pods
        .iter()
        .filter(|pod| {
            let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
            running && is_pod_ready(pod)
        })
        .count();
    Ok(i64::try_from(ready).unwrap_or(i64::MAX))
}

/// Upstream `getUsageRatioReplicaCount` (Object and External `Value` targets). With
/// `current_replicas != 0`: keep the count within tolerance, else
/// `ceil(usage_ratio × ready pods)`, clamped to `i32::MAX` (the clamp compares the un-ceiled
/// product). With 0 current replicas (scale from zero): `ceil(usage_ratio)` with no tolerance, no
/// pod listing and no clamp. `ready_pods` is only called when needed (upstream lists pods lazily);
/// its error is wrapped as `unable to calculate ready pods: ...`.
/// Also returns the ready-pod count when it was needed.
fn usage_ratio_replica_count(
    current_replicas: i32,
    usage_ratio: f64,
    tolerances: Tolerances,
    ready_pods: impl FnOnce() -> Result<i64, CalculatorError>,
) -> Result<(i32, Option<i64>), CalculatorError> {
    if current_replicas == 0 {
        return Ok((ceil_to_i32(usage_ratio), None));
    }
    if tolerances.is_within(usage_ratio) {
        return Ok((current_replicas, None));
    }
    let ready = ready_pods().map_err(|e| CalculatorError::ReadyPods(Box::new(e)))?;
    let replicas = usage_ratio * ready as f64;
    if replicas > f64::from(i32::MAX) {
        Ok((i32::MAX, Some(ready)))
    } else {
        Ok((ceil_to_i32(replicas), Some(ready)))
    }
}

/// The arithmetic of upstream `GetObjectMetricReplicas` (Object metric, `Value` target).
pub fn object_metric_replicas(
    current_replicas: i32,
    target_usage: i64,
    usage: i64,
    tolerances: Tolerances,
    ready_pods: impl FnOnce() -> Result<i64, CalculatorError>,
) -> Result<UsageProposal, CalculatorError> {
    let usage_ratio = usage as f64 / target_usage as f64;
    let (replica_count, ready) =
        usage_ratio_replica_count(current_replicas, usage_ratio, tolerances, ready_pods)?;
    Ok(UsageProposal {
        replica_count,
        usage,
        detail: CalculationDetail {
            usage_ratio,
            ready_pods: ready,
            ..CalculationDetail::default()
        },
    })
}

/// The arithmetic of upstream `GetObjectPerPodMetricReplicas` (Object metric, `AverageValue`
/// target): the ratio is against `target × status_replicas`; outside tolerance the count is
/// `ceil(usage / target)`. The reported usage is the per-pod average, rounded up. No pod
/// readiness is considered.
pub fn object_per_pod_metric_replicas(
    status_replicas: i32,
    target_average_usage: i64,
    usage: i64,
    tolerances: Tolerances,
) -> UsageProposal {
    let mut replica_count = status_replicas;
    let usage_ratio = usage as f64 / (target_average_usage as f64 * f64::from(replica_count));
    if !tolerances.is_within(usage_ratio) {
        replica_count = ceil_to_i32(usage as f64 / target_average_usage as f64);
    }
    UsageProposal {
        replica_count,
        usage: f64_to_i64((usage as f64 / f64::from(status_replicas)).ceil()),
        detail: CalculationDetail {
            usage_ratio,
            ..CalculationDetail::default()
        },
    }
}

/// The sum of upstream `GetExternalMetricReplicas`: in order, a positive value that would
/// overflow caps the total at `i64::MAX` and stops; negative values are added with wrapping.
pub fn sum_external_values(values: &[i64]) -> i64 {
    let mut usage: i64 = 0;
    for &value in values {
        if value > 0 && usage > i64::MAX - value {
            return i64::MAX;
        }
        usage = usage.wrapping_add(value);
    }
    usage
}

/// The sum of upstream `GetExternalPerPodMetricReplicas`: wrapping addition; as soon as the
/// running total is negative it becomes `i64::MAX` and summing stops.
pub fn sum_external_per_pod_values(values: &[i64]) -> i64 {
    let mut usage: i64 = 0;
    for &value in values {
        usage = usage.wrapping_add(value);
        if usage < 0 {
            return i64::MAX;
        }
    }
    usage
}

/// The arithmetic of upstream `GetExternalMetricReplicas` (External metric, `Value` target).
pub fn external_metric_replicas(
    current_replicas: i32,
    target_usage: i64,
    values: &[i64],
    tolerances: Tolerances,
    ready_pods: impl FnOnce() -> Result<i64, CalculatorError>,
) -> Result<UsageProposal, CalculatorError> {
    let usage = sum_external_values(values);
    let usage_ratio = usage as f64 / target_usage as f64;
    let (replica_count, ready) =
        usage_ratio_replica_count(current_replicas, usage_ratio, tolerances, ready_pods)?;
    Ok(UsageProposal {
        replica_count,
        usage,
        detail: CalculationDetail {
            usage_ratio,
            ready_pods: ready,
            values: values.to_vec(),
            ..CalculationDetail::default()
        },
    })
}

/// The arithmetic of upstream `GetExternalPerPodMetricReplicas` (External metric,
/// `AverageValue` target), with its overflow clamps: the count is capped at `i32::MAX`, and a
/// usage at or above `2^63` as float64 is reported as `i64::MAX`.
pub fn external_per_pod_metric_replicas(
    status_replicas: i32,
    target_usage_per_pod: i64,
    values: &[i64],
    tolerances: Tolerances,
) -> UsageProposal {
    let usage = sum_external_per_pod_values(values);
    let mut replica_count = status_replicas;
    let usage_ratio = usage as f64 / (target_usage_per_pod as f64 * f64::from(replica_count));
    if !tolerances.is_within(usage_ratio) {
        let replicas = (usage as f64 / target_usage_per_pod as f64).ceil();
        replica_count = if replicas > f64::from(i32::MAX) {
            i32::MAX
        } else {
            f64_to_i32(replicas)
        };
    }
    let usage = if usage as f64 >= i64::MAX as f64 {
        i64::MAX
    } else {
        f64_to_i64((usage as f64 / f64::from(status_replicas)).ceil())
    };
    UsageProposal {
        replica_count,
        usage,
        detail: CalculationDetail {
            usage_ratio,
            values: values.to_vec(),
            ..CalculationDetail::default()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hpa_decision::gofmt::{SelectorStyle, label_selector_plus_v};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
    use std::collections::BTreeMap;

    #[test]
    fn scale_from_zero_uses_the_ceiled_ratio_without_listing_pods() {
        let r = usage_ratio_replica_count(0, 2.1, Tolerances::default(), || {
            panic!("pods must not be listed")
        });
        assert_eq!(r.unwrap(), (3, None));
        let r = usage_ratio_replica_count(0, 1.05, Tolerances::default(), || unreachable!());
        assert_eq!(r.unwrap(), (2, None));
        let r = usage_ratio_replica_count(0, 0.0, Tolerances::default(), || unreachable!());
        assert_eq!(r.unwrap(), (0, None));
    }

    #[test]
    fn within_tolerance_does_not_list_pods() {
        let r = usage_ratio_replica_count(4, 1.05, Tolerances::default(), || unreachable!());
        assert_eq!(r.unwrap(), (4, None));
    }

    #[test]
    fn ready_pod_errors_are_wrapped() {
        let err = usage_ratio_replica_count(4, 2.0, Tolerances::default(), || {
            Err(CalculatorError::NoPods)
        })
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "unable to calculate ready pods: no pods returned by selector while calculating replica count"
        );
    }

    #[test]
    fn external_sums_follow_their_overflow_rules() {
        assert_eq!(sum_external_values(&[i64::MAX, 1]), i64::MAX);
        assert_eq!(sum_external_values(&[5, -7, 3]), 1);
        assert_eq!(sum_external_values(&[i64::MAX, -1, 1]), i64::MAX);
        assert_eq!(sum_external_per_pod_values(&[5, -7, 3]), i64::MAX);
        assert_eq!(sum_external_per_pod_values(&[i64::MAX, 1]), i64::MAX);
        assert_eq!(sum_external_per_pod_values(&[]), 0);
    }

    #[test]
    fn external_per_pod_usage_clamp_triggers_at_two_to_the_63_as_float() {
        // 9223372036854775296 rounds to 2^63 as float64 → reported as MaxInt64.
        let p = external_per_pod_metric_replicas(
            3,
            i64::MAX,
            &[9_223_372_036_854_775_296],
            Tolerances::default(),
        );
        assert_eq!(p.usage, i64::MAX);
        let p = external_per_pod_metric_replicas(4, 1000, &[8000], Tolerances::default());
        assert_eq!((p.replica_count, p.usage), (8, 2000));
    }

    #[test]
    fn object_per_pod_with_zero_status_replicas_uses_go_amd64_conversion() {
        let p = object_per_pod_metric_replicas(0, 1000, 2500, Tolerances::default());
        // ratio is +Inf → recomputed count ceil(2.5) = 3; usage int64(+Inf) on amd64.
        assert_eq!((p.replica_count, p.usage), (3, i64::MIN));
    }

    #[test]
    fn label_selector_renders_like_go() {
        // The external-metric error's `%+v` of the selector: the gogo-protobuf `String()`.
        let go_label_selector_string =
            |s: Option<&LabelSelector>| label_selector_plus_v(s, SelectorStyle::GoGoString);
        assert_eq!(go_label_selector_string(None), "nil");
        let selector = LabelSelector {
            match_labels: Some(BTreeMap::from([
                ("b".to_owned(), "2".to_owned()),
                ("a".to_owned(), "1".to_owned()),
            ])),
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "env".to_owned(),
                operator: "In".to_owned(),
                values: Some(vec!["prod".to_owned(), "stage".to_owned()]),
            }]),
        };
        assert_eq!(
            go_label_selector_string(Some(&selector)),
            "&LabelSelector{MatchLabels:map[string]string{a: 1,b: 2,},MatchExpressions:[]LabelSelectorRequirement{LabelSelectorRequirement{Key:env,Operator:In,Values:[prod stage],},},}"
        );
        assert_eq!(
            go_label_selector_string(Some(&LabelSelector::default())),
            "&LabelSelector{MatchLabels:map[string]string{},MatchExpressions:[]LabelSelectorRequirement{},}"
        );
    }
}
