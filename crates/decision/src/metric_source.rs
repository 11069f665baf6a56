//! A second metrics provider through the annotation `kube-hpa-controller.io/metric-source`: a
//! Pods, Object or External metric read from another API group that serves the same API.
//!
//! No upstream counterpart in code: this follows KEP-6382 ("Per-Metric Source Routing for
//! HPA", kubernetes/enhancements#6382, an alpha target for 1.39), on native `autoscaling/v2`
//! HPAs through an annotation instead of the KEP's `metric.source.apiGroup` field. The problem
//! it solves: the aggregation layer lets one APIService serve `custom.metrics.k8s.io` and one
//! serve `external.metrics.k8s.io`, so KEDA and prometheus-adapter cannot both serve external
//! metrics; a provider registered under a group of its own (`external.metrics.keda.sh`) can be
//! read beside the default one. An HPA without the annotation reads every metric from the
//! default groups, exactly as upstream does.
//!
//! # The annotation
//!
//! One annotation holds a JSON list with one entry per routed metric:
//!
//! ```text
//! kube-hpa-controller.io/metric-source: |
//!   [{"metric": "External/queue_depth", "apiGroup": "external.metrics.keda.sh"},
//!    {"metric": 1, "apiGroup": "modelserver.example.com"}]
//! ```
//!
//! - `metric` names one metric of `spec.metrics` as the metric fallback annotation does
//!   (`crate::fallback`): its index, or `Type/name` when no other metric has that name.
//! - `apiGroup` (KEP-6382's `source.apiGroup`): a DNS subdomain (lower-case letters, digits,
//!   `-` and `.`, at most 253 characters, each label at most 63), not one of the default
//!   groups (`metrics.k8s.io`, `custom.metrics.k8s.io`, `external.metrics.k8s.io`: KEP-6382's
//!   validation).
//! - Only `Pods`, `Object` and `External` metrics can be routed: resource metrics always come
//!   from `metrics.k8s.io` (KEP-6382).
//!
//! Checked strictly, as a whole: unknown keys, a metric named twice or not found, a metric of
//! another type or a group that is not valid make the whole annotation invalid: a Warning event
//! `InvalidAnnotation` names it and the value once (`crate::annotations`), and every metric is
//! read from its default group.
//!
//! # Semantics (KEP-6382)
//!
//! The group changes where a metric is read, not how: the same paths under
//! `/apis/GROUP/VERSION`, the same answers (`MetricValueList` for Pods and Object metrics,
//! `ExternalMetricValueList` for External ones), the same arithmetic. An External metric is
//! read at version `v1beta1` (as the default group: upstream's external client has no
//! discovery); a Pods or Object metric at the group's preferred version among `v1beta2` and
//! `v1beta1`, discovered with `GET /apis` and cached as the default custom metrics group's
//! version is (forgotten every sync period). A failure names the group (`get
//! queue_depth.external.metrics.keda.sh`) in the events and conditions upstream writes for a
//! failed metric. The controller needs `get` and `list` on the group (RBAC, granted by the
//! provider's install, as KEP-6382 says).

use k8s_openapi::api::autoscaling::v2::{HorizontalPodAutoscaler, MetricSpec};
use serde::Deserialize;

pub use crate::annotations::{ANNOTATION_PREFIX, InvalidAnnotation};

/// Routes metrics of `spec.metrics` to other API groups: a JSON list of
/// `{"metric": ..., "apiGroup": ...}`.
pub const METRIC_SOURCE: &str = "kube-hpa-controller.io/metric-source";

/// The default groups, which a route may not name (KEP-6382's validation).
pub const DEFAULT_METRICS_GROUPS: [&str; 3] = [
    "metrics.k8s.io",
    "custom.metrics.k8s.io",
    "external.metrics.k8s.io",
];

/// One routed metric.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricSource {
    /// Its index in `spec.metrics`.
    pub index: usize,
    /// The API group it is read from.
    pub api_group: String,
}

/// What the metric source annotation of one HPA says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetricSourceAnnotation {
    /// The routes, in the annotation's order (empty without a valid annotation).
    pub sources: Vec<MetricSource>,
    /// The annotation, when set with a value that is not valid (ignored).
    pub invalid: Option<InvalidAnnotation>,
}

impl MetricSourceAnnotation {
    /// The API group `spec.metrics[index]` is read from, when routed.
    pub fn group_of(&self, index: usize) -> Option<&str> {
        self.sources
            .iter()
            .find(|s| s.index == index)
            .map(|s| s.api_group.as_str())
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawEntry {
    metric: serde_json::Value,
    api_group: String,
}

/// Whether `group` is a DNS-1123 subdomain (Kubernetes' `IsDNS1123Subdomain`).
pub fn is_dns_subdomain(group: &str) -> bool {
    !group.is_empty()
        && group.len() <= 253
        && group.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b.len() <= 63
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
                && b[0] != b'-'
                && b[b.len() - 1] != b'-'
        })
}

/// The value of `kube-hpa-controller.io/metric-source` checked against `metrics`
/// (`spec.metrics`).
pub fn parse_metric_source(
    value: &str,
    metrics: &[MetricSpec],
) -> Result<Vec<MetricSource>, InvalidAnnotation> {
    let invalid = |reason: String| InvalidAnnotation {
        annotation: METRIC_SOURCE,
        value: value.to_owned(),
        reason: reason.into(),
    };
    let entries: Vec<RawEntry> = serde_json::from_str(value).map_err(|e| {
        invalid(format!(
            "must be a JSON list of {{\"metric\": ..., \"apiGroup\": ...}}: {e}"
        ))
    })?;
    if entries.is_empty() {
        return Err(invalid("must name at least one metric".to_owned()));
    }
    let mut out: Vec<MetricSource> = Vec::with_capacity(entries.len());
    for (n, e) in entries.into_iter().enumerate() {
        let at = |what: String| invalid(format!("entry {n}: {what}"));
        let index = crate::annotations::metric_index(&e.metric, metrics).map_err(at)?;
        if let Some(prev) = out.iter().position(|s| s.index == index) {
            return Err(at(format!(
                "spec.metrics[{index}] already has a source (entry {prev})"
            )));
        }
        let type_ = metrics[index].type_.as_str();
        if !matches!(type_, "Pods" | "Object" | "External") {
            return Err(at(format!(
                "spec.metrics[{index}] is a {type_} metric: only Pods, Object and External metrics can be read from another API group (resource metrics come from metrics.k8s.io)"
            )));
        }
        if !is_dns_subdomain(&e.api_group) {
            return Err(at(format!(
                "apiGroup {:?} is not a DNS subdomain (lower-case letters, digits, '-' and '.')",
                e.api_group
            )));
        }
        if DEFAULT_METRICS_GROUPS.contains(&e.api_group.as_str()) {
            return Err(at(format!(
                "apiGroup {:?} is a default metrics group: leave the metric out instead",
                e.api_group
            )));
        }
        out.push(MetricSource {
            index,
            api_group: e.api_group,
        });
    }
    Ok(out)
}

/// Read and check the metric source annotation of `hpa`.
pub fn metric_source_annotation(hpa: &HorizontalPodAutoscaler) -> MetricSourceAnnotation {
    let Some(value) = hpa
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(METRIC_SOURCE))
    else {
        return MetricSourceAnnotation::default();
    };
    let metrics = hpa.spec.metrics.as_deref().unwrap_or_default();
    match parse_metric_source(value, metrics) {
        Ok(sources) => MetricSourceAnnotation {
            sources,
            invalid: None,
        },
        Err(e) => MetricSourceAnnotation {
            sources: Vec::new(),
            invalid: Some(e),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metrics() -> Vec<MetricSpec> {
        serde_json::from_value(serde_json::json!([
            {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}},
            {"type": "External", "external": {"metric": {"name": "queue_depth"}, "target": {"type": "Value", "value": "10"}}},
            {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "5"}}},
            {"type": "External", "external": {"metric": {"name": "twice"}, "target": {"type": "Value", "value": "1"}}},
            {"type": "External", "external": {"metric": {"name": "twice"}, "target": {"type": "Value", "value": "2"}}},
        ]))
        .unwrap()
    }

    #[test]
    fn routes_by_name_or_index() {
        let s = parse_metric_source(
            r#"[{"metric": "External/queue_depth", "apiGroup": "external.metrics.keda.sh"},
                {"metric": 2, "apiGroup": "modelserver.example.com"},
                {"metric": 4, "apiGroup": "a-b.c"}]"#,
            &metrics(),
        )
        .unwrap();
        assert_eq!(
            s,
            vec![
                MetricSource {
                    index: 1,
                    api_group: "external.metrics.keda.sh".into()
                },
                MetricSource {
                    index: 2,
                    api_group: "modelserver.example.com".into()
                },
                MetricSource {
                    index: 4,
                    api_group: "a-b.c".into()
                },
            ]
        );
        let a = MetricSourceAnnotation {
            sources: s,
            invalid: None,
        };
        assert_eq!(a.group_of(1), Some("external.metrics.keda.sh"));
        assert_eq!(a.group_of(0), None);
    }

    #[test]
    fn refuses_what_kep_6382_refuses_and_names_why() {
        for (value, why) in [
            ("", "must be a JSON list"),
            ("[]", "at least one metric"),
            (r#"[{"metric": 1}]"#, "apiGroup"),
            (
                r#"[{"metric": 1, "apiGroup": "x.io", "extra": 1}]"#,
                "unknown field",
            ),
            (
                r#"[{"metric": 0, "apiGroup": "x.io"}]"#,
                "is a Resource metric",
            ),
            (r#"[{"metric": 9, "apiGroup": "x.io"}]"#, "not an index"),
            (
                r#"[{"metric": "External/nope", "apiGroup": "x.io"}]"#,
                "no metric",
            ),
            (
                r#"[{"metric": "External/twice", "apiGroup": "x.io"}]"#,
                "name it by index",
            ),
            (
                r#"[{"metric": 1, "apiGroup": "x.io"}, {"metric": "External/queue_depth", "apiGroup": "y.io"}]"#,
                "already has a source",
            ),
            (
                r#"[{"metric": 1, "apiGroup": "External.Metrics"}]"#,
                "not a DNS subdomain",
            ),
            (
                r#"[{"metric": 1, "apiGroup": "-x.io"}]"#,
                "not a DNS subdomain",
            ),
            (
                r#"[{"metric": 1, "apiGroup": "x..io"}]"#,
                "not a DNS subdomain",
            ),
            (r#"[{"metric": 1, "apiGroup": ""}]"#, "not a DNS subdomain"),
            (
                r#"[{"metric": 1, "apiGroup": "external.metrics.k8s.io"}]"#,
                "default metrics group",
            ),
            (
                r#"[{"metric": 2, "apiGroup": "custom.metrics.k8s.io"}]"#,
                "default metrics group",
            ),
        ] {
            let e = parse_metric_source(value, &metrics()).expect_err(value);
            assert_eq!(e.annotation, METRIC_SOURCE);
            assert!(e.to_string().contains(why), "{value}: {e}");
        }
        assert!(is_dns_subdomain(&format!("{}.io", "a".repeat(63))));
        assert!(!is_dns_subdomain(&format!("{}.io", "a".repeat(64))));
    }

    #[test]
    fn an_invalid_annotation_routes_nothing() {
        let mut hpa = HorizontalPodAutoscaler::default();
        hpa.spec.metrics = Some(metrics());
        assert_eq!(
            metric_source_annotation(&hpa),
            MetricSourceAnnotation::default()
        );
        hpa.metadata.annotations = Some(
            [(
                METRIC_SOURCE.to_owned(),
                r#"[{"metric": 0, "apiGroup": "x.io"}]"#.to_owned(),
            )]
            .into(),
        );
        let a = metric_source_annotation(&hpa);
        assert!(a.sources.is_empty());
        assert!(a.invalid.is_some());
        assert_eq!(a.group_of(0), None);
    }
}
