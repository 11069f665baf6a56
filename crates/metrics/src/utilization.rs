//! Utilization helpers, mirroring upstream `pkg/controller/podautoscaler/metrics/utilization.go`
//! (`GetResourceUtilizationRatio`, `GetMetricUsageRatio`). Arithmetic is Go's: wrapping `int64`,
//! truncating division, truncation to `int32` for the percentage.

use std::collections::HashMap;

use crate::error::UtilizationError;
use crate::types::PodMetricsInfo;

/// Go `GetResourceUtilizationRatio`: returns `(utilization ratio, current utilization percent,
/// raw average value)`. Metrics of pods without a request are ignored; the ratio uses the
/// truncated integer percentage.
pub fn get_resource_utilization_ratio(
    metrics: &PodMetricsInfo,
    requests: &HashMap<String, i64>,
    target_utilization: i32,
) -> Result<(f64, i32, i64), UtilizationError> {
    let mut metrics_total: i64 = 0;
    let mut requests_total: i64 = 0;
    let mut entries: i64 = 0;
    for (pod, metric) in metrics {
        let Some(request) = requests.get(pod) else {
            continue;
        };
        metrics_total = metrics_total.wrapping_add(metric.value);
        requests_total = requests_total.wrapping_add(*request);
        entries += 1;
    }
    if requests_total == 0 {
        return Err(UtilizationError::NoMatchingPods);
    }
    let current = metrics_total.wrapping_mul(100).wrapping_div(requests_total) as i32;
    Ok((
        f64::from(current) / f64::from(target_utilization),
        current,
        metrics_total.wrapping_div(entries),
    ))
}

/// Go `GetMetricUsageRatio`: returns `(usage ratio, current average usage)` over every entry.
///
/// Upstream callers never pass an empty map (Go would panic dividing by zero); here an empty map
/// yields `(0.0 / target, 0)`.
pub fn get_metric_usage_ratio(metrics: &PodMetricsInfo, target_usage: i64) -> (f64, i64) {
    let total = metrics
        .values()
        .fold(0i64, |acc, m| acc.wrapping_add(m.value));
    let current = if metrics.is_empty() {
        0
    } else {
        total.wrapping_div(metrics.len() as i64)
    };
    (current as f64 / target_usage as f64, current)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::PodMetric;
    use std::time::Duration;

    fn info(values: &[(&str, i64)]) -> PodMetricsInfo {
        values
            .iter()
            .map(|(n, v)| {
                (
                    n.to_string(),
                    PodMetric {
                        timestamp: jiff::Timestamp::UNIX_EPOCH,
                        window: Duration::from_secs(60),
                        value: *v,
                    },
                )
            })
            .collect()
    }

    fn reqs(values: &[(&str, i64)]) -> HashMap<String, i64> {
        values.iter().map(|(n, v)| (n.to_string(), *v)).collect()
    }

    #[test]
    fn utilization_truncates_percent() {
        // 100 of 300 → 33 %, ratio from the truncated integer.
        let (ratio, util, raw) =
            get_resource_utilization_ratio(&info(&[("a", 100)]), &reqs(&[("a", 300)]), 50).unwrap();
        assert_eq!(util, 33);
        assert_eq!(ratio, 33.0 / 50.0);
        assert_eq!(raw, 100);
    }

    #[test]
    fn utilization_ignores_pods_without_requests() {
        let m = info(&[("a", 500), ("b", 700), ("extra", 10_000)]);
        let r = reqs(&[("a", 1000), ("b", 1000)]);
        let (ratio, util, raw) = get_resource_utilization_ratio(&m, &r, 60).unwrap();
        assert_eq!(util, 60);
        assert_eq!(ratio, 1.0);
        assert_eq!(raw, 600);
    }

    #[test]
    fn utilization_errors_without_known_pods() {
        let err =
            get_resource_utilization_ratio(&info(&[("x", 1)]), &reqs(&[("a", 1)]), 50).unwrap_err();
        assert_eq!(err.to_string(), "no metrics returned matched known pods");
        let zero = get_resource_utilization_ratio(&info(&[("a", 1)]), &reqs(&[("a", 0)]), 50);
        assert_eq!(zero, Err(UtilizationError::NoMatchingPods));
    }

    #[test]
    fn usage_ratio_averages_all_entries() {
        let (ratio, cur) = get_metric_usage_ratio(&info(&[("a", 10_000), ("b", 5_001)]), 5_000);
        assert_eq!(cur, 7_500);
        assert_eq!(ratio, 1.5);
        assert_eq!(get_metric_usage_ratio(&info(&[]), 10), (0.0, 0));
    }
}
