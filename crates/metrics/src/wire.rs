//! JSON wire types of the three metrics APIs, as far as the HPA reads them:
//! `metrics.k8s.io/v1beta1` `PodMetricsList` (`staging/src/k8s.io/metrics/pkg/apis/metrics/v1beta1/types.go`),
//! `custom.metrics.k8s.io/{v1beta1,v1beta2}` `MetricValueList`
//! (`staging/src/k8s.io/metrics/pkg/apis/custom_metrics/{v1beta1,v1beta2}/types.go`) and
//! `external.metrics.k8s.io/v1beta1` `ExternalMetricValueList`
//! (`staging/src/k8s.io/metrics/pkg/apis/external_metrics/v1beta1/types.go`).
//!
//! The `k8s-metrics` crate's `PodMetrics` is not used: its `usage` has fixed, required `cpu` and
//! `memory` fields, so it can neither carry other resources nor represent a container that lacks
//! one, which upstream handles explicitly.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use serde::{Deserialize, Serialize};

/// Go's zero `time.Time` (`0001-01-01T00:00:00Z`), used where the API sent no timestamp.
pub fn go_zero_time() -> jiff::Timestamp {
    jiff::Timestamp::new(-62_135_596_800, 0).unwrap_or(jiff::Timestamp::MIN)
}

/// `metrics.k8s.io/v1beta1` `PodMetricsList`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodMetricsList {
    /// `apiVersion`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// `kind`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The pods' metrics.
    #[serde(default)]
    pub items: Vec<PodMetrics>,
}

/// `metrics.k8s.io/v1beta1` `PodMetrics`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodMetrics {
    /// Object metadata (the pod's name and namespace).
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// When the sample was taken.
    #[serde(default)]
    pub timestamp: Option<Time>,
    /// Go `metav1.Duration` string, e.g. `30s`.
    #[serde(default)]
    pub window: Option<String>,
    /// Per-container usage.
    #[serde(default)]
    pub containers: Vec<ContainerMetrics>,
}

/// `metrics.k8s.io/v1beta1` `ContainerMetrics`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ContainerMetrics {
    /// Container name.
    #[serde(default)]
    pub name: String,
    /// Resource name → quantity.
    #[serde(default)]
    pub usage: BTreeMap<String, K8sQuantity>,
}

/// `ObjectReference` as used by `describedObject`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DescribedObject {
    /// Kind of the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Namespace of the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name of the object.
    #[serde(default)]
    pub name: String,
    /// API version of the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
}

/// `custom.metrics.k8s.io/v1beta2` `MetricIdentifier`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MetricIdentifier {
    /// Metric name.
    #[serde(default)]
    pub name: String,
    /// Metric label selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
}

/// A custom metric value in either wire version; `v1beta1` uses `metricName` and `window`,
/// `v1beta2` uses `metric.name` and `windowSeconds`. Both are accepted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetricValue {
    /// The object the metric describes.
    #[serde(default)]
    pub described_object: DescribedObject,
    /// v1beta2 metric identifier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<MetricIdentifier>,
    /// v1beta1 metric name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric_name: Option<String>,
    /// v1beta1 metric selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// When the value was produced.
    #[serde(default)]
    pub timestamp: Option<Time>,
    /// v1beta2 window in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_seconds: Option<i64>,
    /// v1beta1 window in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<i64>,
    /// The value.
    pub value: K8sQuantity,
}

impl MetricValue {
    /// The window in seconds, whichever version sent it (v1beta1 `window` converts to v1beta2
    /// `windowSeconds` upstream).
    pub fn window_seconds(&self) -> Option<i64> {
        self.window_seconds.or(self.window)
    }
}

/// `custom.metrics.k8s.io` `MetricValueList`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetricValueList {
    /// `apiVersion` (decides the wire version, as Go's universal decoder does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// `kind`; must be `MetricValueList`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The values.
    #[serde(default)]
    pub items: Vec<MetricValue>,
}

/// `external.metrics.k8s.io/v1beta1` `ExternalMetricValue`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExternalMetricValue {
    /// Metric name.
    #[serde(default)]
    pub metric_name: String,
    /// Labels identifying the series.
    #[serde(default)]
    pub metric_labels: BTreeMap<String, String>,
    /// When the value was produced.
    #[serde(default)]
    pub timestamp: Option<Time>,
    /// Window in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<i64>,
    /// The value.
    pub value: K8sQuantity,
}

/// `external.metrics.k8s.io/v1beta1` `ExternalMetricValueList`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExternalMetricValueList {
    /// `apiVersion`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// `kind`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The values.
    #[serde(default)]
    pub items: Vec<ExternalMetricValue>,
}

/// The `metav1.Status` fields an error response may carry.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct Status {
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
}
