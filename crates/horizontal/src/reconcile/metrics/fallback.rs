//! `computeReplicasForMetrics`' loop over `spec.metrics` with this controller's metric
//! fallbacks (`kube-hpa-controller.io/metric-fallback`, [`hpa_decision::fallback`], after
//! KEP-5679): each metric computed as upstream computes it, the failures of the metrics with a
//! fallback counted, a `value` fallback in effect computed by the same replica calculator as if
//! the metrics API had answered that value, and the whole aggregated. Upstream's loop is the
//! same without the annotation (no fallback: nothing counted, nothing replaced). Shared by the
//! controller and `hpactl simulate`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hpa_decision::decision::{MetricResult, MetricsOutcome};
use hpa_decision::fallback::{FallbackAction, fallback_annotation};
use hpa_decision::metric_source::metric_source_annotation;
use hpa_decision::state::HpaState;
use hpa_metrics::{MetricsClient, MetricsError, PodMetricsInfo, Selector};
use hpa_replica_calculator::ReplicaQuery;
use jiff::Timestamp;
use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HorizontalPodAutoscaler, MetricSpec,
};

use super::MetricComputer;

/// A metrics API that answers a metric's fallback value: the one value of an External metric,
/// the value of an Object metric, at the time of the read. The annotation allows a `value` for
/// those two types only; the pod metrics are never asked for.
struct FallbackValue {
    milli: i64,
    at: Timestamp,
}

#[async_trait::async_trait]
impl MetricsClient for FallbackValue {
    async fn get_resource_metric<'a>(
        &self,
        _resource: &str,
        _namespace: &str,
        _selector: &Selector,
        _container: Option<&'a str>,
    ) -> Result<(PodMetricsInfo, Timestamp), MetricsError> {
        Err(MetricsError::NoResourceMetrics)
    }

    async fn get_raw_metric(
        &self,
        _metric_name: &str,
        _namespace: &str,
        _selector: &Selector,
        _metric_selector: &Selector,
    ) -> Result<(PodMetricsInfo, Timestamp), MetricsError> {
        Err(MetricsError::NoCustomMetrics)
    }

    async fn get_object_metric(
        &self,
        _metric_name: &str,
        _namespace: &str,
        _object: &CrossVersionObjectReference,
        _metric_selector: &Selector,
    ) -> Result<(i64, Timestamp), MetricsError> {
        Ok((self.milli, self.at))
    }

    async fn get_external_metric(
        &self,
        _metric_name: &str,
        _namespace: &str,
        _selector: &Selector,
    ) -> Result<(Vec<i64>, Timestamp), MetricsError> {
        Ok((vec![self.milli], self.at))
    }
}

impl MetricComputer<'_> {
    /// Every metric of `hpa` (`computeReplicasForMetric` in spec order, each passed to
    /// `observe` with the time it took), then the aggregation of `computeReplicasForMetrics`
    /// with the HPA's metric fallbacks: the failures of the metrics that have one are counted in
    /// `state` under `key` (with `record` false, as they would be, nothing kept: a decision
    /// that is only compared), and the metrics whose fallback is in effect propose it.
    pub async fn compute_replicas_for_metrics(
        &self,
        hpa: &HorizontalPodAutoscaler,
        key: &str,
        state: &HpaState,
        ctx: &ReplicaQuery<'_>,
        record: bool,
        mut observe: impl FnMut(&MetricSpec, &MetricResult, Duration),
    ) -> MetricsOutcome {
        let specs = hpa.spec.metrics.as_deref().unwrap_or_default();
        let sources = metric_source_annotation(hpa);
        let mut results = Vec::with_capacity(specs.len());
        for (index, spec) in specs.iter().enumerate() {
            let start = Instant::now();
            let r = match sources.group_of(index) {
                None => self.compute_replicas_for_metric(spec, ctx).await,
                // Read from another API group (`hpa_decision::metric_source`, KEP-6382).
                Some(group) => {
                    let routed = self.calculator.for_api_group(group);
                    MetricComputer {
                        calculator: &routed,
                        selector_style: self.selector_style,
                    }
                    .compute_replicas_for_metric(spec, ctx)
                    .await
                }
            };
            observe(spec, &r, start.elapsed());
            results.push(r);
        }
        let fallbacks = fallback_annotation(hpa).fallbacks;
        let mut statuses =
            state.observe_metric_failures(key, ctx.now, &fallbacks, &results, record);
        for s in statuses.iter_mut().filter(|s| s.in_effect) {
            if let (FallbackAction::Value { milli, .. }, Some(spec)) =
                (&s.fallback.action, specs.get(s.fallback.index))
            {
                s.value_result = Some(self.compute_fallback_value(spec, *milli, ctx).await);
            }
        }
        MetricsOutcome::with_fallbacks(ctx.spec_replicas, results, statuses)
    }

    /// `spec` computed as if the metrics API had answered `milli` (an Object or External
    /// metric's fallback value): the same target arithmetic, tolerance and ready pods.
    async fn compute_fallback_value(
        &self,
        spec: &MetricSpec,
        milli: i64,
        ctx: &ReplicaQuery<'_>,
    ) -> MetricResult {
        let calculator = self
            .calculator
            .with_metrics_client(Arc::new(FallbackValue { milli, at: ctx.now }));
        MetricComputer {
            calculator: &calculator,
            selector_style: self.selector_style,
        }
        .compute_replicas_for_metric(spec, ctx)
        .await
    }
}
