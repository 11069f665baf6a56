//! This project's own Prometheus metrics for dashboards and shadow mode, under the
//! `kube_hpa_controller_` prefix (upstream's names, in [`crate::monitor`], stay upstream's).
//!
//! No upstream counterpart. Per-HPA series are rendered from the [`DecisionTrace`] of each
//! decision and removed when the HPA is deleted.

use dashmap::DashMap;
use prometheus::{CounterVec, GaugeVec, Opts, Registry};

use crate::shadow::{ShadowComparison, ShadowResult};
use crate::trace::DecisionTrace;

/// The metric name prefix of this project's own metrics.
pub const PREFIX: &str = "kube_hpa_controller";

/// The dashboard and shadow metrics.
#[derive(Debug)]
pub struct ExplainMetrics {
    proposal: GaugeVec,
    winner: GaugeVec,
    shadow_comparisons: CounterVec,
    shadow_pending: CounterVec,
    shadow_statuses: CounterVec,
    /// The label values of every per-HPA series, by `namespace/name`.
    series: DashMap<String, Vec<[String; 5]>>,
}

fn opts(name: &str, help: &str) -> Opts {
    Opts::new(name, help).namespace(PREFIX)
}

impl ExplainMetrics {
    /// Create and register the metrics.
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let m = ExplainMetrics {
            proposal: GaugeVec::new(
                opts(
                    "metric_proposal_replicas",
                    "The replica count each metric of an HPA asked for at its last decision (absent for a metric that failed).",
                ),
                &[
                    "namespace",
                    "hpa_name",
                    "metric_index",
                    "metric_type",
                    "metric_name",
                ],
            )?,
            winner: GaugeVec::new(
                opts(
                    "winning_metric",
                    "1 for the metric whose proposal an HPA used at its last decision.",
                ),
                &[
                    "namespace",
                    "hpa_name",
                    "metric_index",
                    "metric_type",
                    "metric_name",
                ],
            )?,
            shadow_comparisons: CounterVec::new(
                opts(
                    "shadow_comparisons_total",
                    "Shadow mode: decisions compared with the active controller's last status, by result (agree, differ).",
                ),
                &["result"],
            )?,
            shadow_pending: CounterVec::new(
                opts(
                    "shadow_not_compared_total",
                    "Shadow mode: decisions not compared, by reason: the active controller had not run since the inputs changed (no_status, target_changed, metrics_changed), its status has no usable metric value (metrics_unrecorded: an average over 0 replicas), the decision was held by its history and differs (history: stabilization windows and policy periods are filled at each controller's own reconcile times), or it differs while the pods changed around it (pods_changed: a status does not record which pods were counted) or the HPA's spec did (spec_changed: a status before 1.37 does not record which generation it was computed from; from 1.37 a status is matched with a decision from its observedGeneration), or this controller's decision was paused by the kube-hpa-controller.io/paused or paused-replicas annotation, which the active controller does not read (paused), or had a metric's fallback of the kube-hpa-controller.io/metric-fallback annotation in effect, which the active controller does not have (fallback).",
                ),
                &["reason"],
            )?,
            shadow_statuses: CounterVec::new(
                opts(
                    "shadow_statuses_total",
                    "Shadow mode: the active controller's status writes, each counted once by how shadow mode settled it: result agree or differ (the first comparison with it that was made), or not_compared (replaced before one was; reason: the last one's, no_status, target_changed, metrics_changed, metrics_unrecorded, history, pods_changed, spec_changed, paused or fallback). A status replaced before this controller reconciled the HPA at all is not counted.",
                ),
                &["result", "reason"],
            )?,
            series: DashMap::new(),
        };
        registry.register(Box::new(m.proposal.clone()))?;
        registry.register(Box::new(m.winner.clone()))?;
        registry.register(Box::new(m.shadow_comparisons.clone()))?;
        registry.register(Box::new(m.shadow_pending.clone()))?;
        registry.register(Box::new(m.shadow_statuses.clone()))?;
        Ok(m)
    }

    /// Set the per-metric series of one decision, removing those of the HPA's previous decision
    /// that this one does not have.
    pub fn observe_trace(&self, trace: &DecisionTrace) {
        let (namespace, name) = trace.hpa.split_once('/').unwrap_or(("", &trace.hpa));
        let mut labels = Vec::new();
        for (i, m) in trace.metrics.iter().enumerate() {
            let l = [
                namespace.to_owned(),
                name.to_owned(),
                i.to_string(),
                m.type_.clone(),
                m.name.clone(),
            ];
            let refs: [&str; 5] = [&l[0], &l[1], &l[2], &l[3], &l[4]];
            match m.proposal {
                Some(p) => self.proposal.with_label_values(&refs).set(f64::from(p)),
                None => {
                    let _ = self.proposal.remove_label_values(&refs);
                }
            }
            let won = trace.winner.as_ref().is_some_and(|w| w.index == i);
            self.winner
                .with_label_values(&refs)
                .set(if won { 1.0 } else { 0.0 });
            labels.push(l);
        }
        // Series of the previous decision that this one does not have (the spec changed).
        if let Some(old) = self.series.insert(trace.hpa.clone(), labels.clone()) {
            for l in old.iter().filter(|l| !labels.contains(l)) {
                let refs: [&str; 5] = [&l[0], &l[1], &l[2], &l[3], &l[4]];
                let _ = self.proposal.remove_label_values(&refs);
                let _ = self.winner.remove_label_values(&refs);
            }
        }
    }

    /// Count one shadow comparison.
    pub fn observe_shadow(&self, c: &ShadowComparison) {
        match (c.result, c.pending) {
            (ShadowResult::Pending, Some(reason)) => self
                .shadow_pending
                .with_label_values(&[reason.as_str()])
                .inc(),
            (ShadowResult::Pending, None) => {}
            (result, _) => self
                .shadow_comparisons
                .with_label_values(&[result.as_str()])
                .inc(),
        }
    }

    /// Count one of the active controller's statuses, settled.
    pub fn observe_shadow_status(&self, outcome: crate::shadow::StatusOutcome) {
        self.shadow_statuses
            .with_label_values(&outcome.labels())
            .inc();
    }

    /// Remove the per-HPA series of `key` (`namespace/name`).
    pub fn forget_hpa(&self, key: &str) {
        if let Some((_, labels)) = self.series.remove(key) {
            for l in labels {
                let refs: [&str; 5] = [&l[0], &l[1], &l[2], &l[3], &l[4]];
                let _ = self.proposal.remove_label_values(&refs);
                let _ = self.winner.remove_label_values(&refs);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(metrics: &[(&str, Option<i32>)], winner: Option<usize>) -> DecisionTrace {
        let metrics: Vec<serde_json::Value> = metrics
            .iter()
            .map(|(name, p)| {
                serde_json::json!({"type": "Pods", "name": name, "target": null, "current": null,
                    "usageRatio": null, "recomputedUsageRatio": null, "withinTolerance": null,
                    "pods": null, "readyPods": null, "proposal": p, "proposalName": null, "error": null})
            })
            .collect();
        let winner = winner.map(|i| serde_json::json!({"index": i, "name": "", "replicas": 0}));
        serde_json::from_value(serde_json::json!({
            "version": crate::trace::TRACE_VERSION, "hpa": "ns/a", "time": "2026-01-01T00:00:00Z",
            "target": {"reference": "", "specReplicas": 1, "statusReplicas": 1},
            "minReplicas": 1, "maxReplicas": 10, "branch": "FromMetrics", "tolerance": null,
            "metrics": metrics, "winner": winner, "metricsError": null, "prenormalized": null,
            "stabilization": null, "rateLimit": null,
            "clamp": {"min": 1, "max": 10, "boundBy": null}, "desiredReplicas": 1,
            "rescale": false, "rescaleReason": "",
            "write": {"scale": "notAttempted", "statusChanged": false, "shadow": false},
            "conditions": [], "events": [], "error": null
        }))
        .unwrap()
    }

    fn series(registry: &Registry) -> Vec<String> {
        let mut out = Vec::new();
        for f in registry.gather() {
            for m in f.get_metric() {
                let labels: Vec<String> = m
                    .get_label()
                    .iter()
                    .map(|l| format!("{}={}", l.name(), l.value()))
                    .collect();
                out.push(format!("{} {}", f.name(), labels.join(",")));
            }
        }
        out.sort();
        out
    }

    #[test]
    fn per_hpa_series_follow_the_last_decision_and_go_with_the_hpa() {
        let registry = Registry::new();
        let m = ExplainMetrics::register(&registry).unwrap();
        m.observe_trace(&trace(&[("a", Some(3)), ("b", Some(5))], Some(1)));
        let s = series(&registry);
        assert_eq!(s.len(), 4, "{s:?}");
        assert!(
            s.iter()
                .any(|l| l.contains("winning_metric") && l.contains("metric_name=b"))
        );
        // The spec lost metric b, and a failed: no proposal series left for either.
        m.observe_trace(&trace(&[("a", None)], None));
        let s = series(&registry);
        assert_eq!(s.len(), 1, "{s:?}");
        assert!(s[0].starts_with("kube_hpa_controller_winning_metric"));
        m.forget_hpa("ns/a");
        assert!(series(&registry).is_empty());
    }
}
