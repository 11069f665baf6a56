//! Errors of the replica calculator. Every `Display` text equals the one upstream
//! `pkg/controller/podautoscaler/replica_calculator.go` produces (its `fmt.Errorf` formats), so
//! HPA conditions and events read the same.

use hpa_metrics::{QuantityError, SelectorError};

use crate::{MetricsError, PodListError, UtilizationError};

fn object_metric_text(
    fixed_format: bool,
    metric_name: &str,
    kind: &str,
    namespace: &str,
    name: &str,
    source: &MetricsError,
) -> String {
    if fixed_format {
        format!("unable to get metric {metric_name} on {kind} {namespace}/{name}: {source}")
    } else {
        format!("unable to get metric {metric_name}: {kind} on {namespace} {name}/{source}")
    }
}

/// An error from a replica calculation.
#[derive(Debug, thiserror::Error)]
pub enum CalculatorError {
    /// The resource metrics API failed (`GetResourceReplicas`, `GetRawResourceReplicas`).
    #[error("unable to get metrics for resource {resource}: {source}")]
    ResourceMetrics {
        /// The resource name (`cpu`, `memory`, ...).
        resource: String,
        /// The metrics client error.
        source: Box<MetricsError>,
    },
    /// The custom metrics API failed for a Pods metric (`GetMetricReplicas`).
    #[error("unable to get metric {metric_name}: {source}")]
    PodsMetric {
        /// The metric name.
        metric_name: String,
        /// The metrics client error.
        source: Box<MetricsError>,
    },
    /// The custom metrics API failed for an Object metric. Up to 1.36 upstream's format is
    /// `"unable to get metric %s: %v on %s %s/%s"` with the arguments (metric, kind, namespace,
    /// name, error), which renders as `unable to get metric qps: Deployment on default web/<err>`;
    /// reproduced verbatim. From 1.37 (kubernetes#139029, `fixed_format`) it is
    /// `"unable to get metric %s on %s %s/%s: %w"`: `unable to get metric qps on Deployment
    /// default/web: <err>`.
    #[error("{}", object_metric_text(*fixed_format, metric_name, kind, namespace, name, source))]
    ObjectMetric {
        /// 1.37's argument order.
        fixed_format: bool,
        /// The metric name.
        metric_name: String,
        /// `describedObject.kind`.
        kind: String,
        /// The HPA's namespace.
        namespace: String,
        /// `describedObject.name`.
        name: String,
        /// The metrics client error.
        source: Box<MetricsError>,
    },
    /// The external metrics API failed. `selector` is the Go `%+v` rendering of the
    /// `*metav1.LabelSelector` (upstream `%+v`, the gogo-protobuf `String()`:
    /// `hpa_decision::gofmt::label_selector_plus_v` with `SelectorStyle::GoGoString`).
    #[error("unable to get external metric {namespace}/{metric_name}/{selector}: {source}")]
    ExternalMetric {
        /// The HPA's namespace.
        namespace: String,
        /// The metric name.
        metric_name: String,
        /// The Go rendering of the metric selector.
        selector: String,
        /// The metrics client error.
        source: Box<MetricsError>,
    },
    /// The metric selector of an External metric could not be converted
    /// (`metav1.LabelSelectorAsSelector`); upstream returns that error unwrapped.
    #[error(transparent)]
    MetricSelector(SelectorError),
    /// Listing pods from the informer cache failed.
    #[error("unable to get pods while calculating replica count: {0}")]
    ListPods(#[source] PodListError),
    /// The pod selector matched no pods.
    #[error("no pods returned by selector while calculating replica count")]
    NoPods,
    /// Every sample belonged to an ignored or unready pod.
    #[error("did not receive metrics for targeted pods (pods might be unready)")]
    NoMetricsForTargetedPods,
    /// Counting ready pods failed (Object `Value` and External `Value` metrics).
    #[error("unable to calculate ready pods: {0}")]
    ReadyPods(#[source] Box<CalculatorError>),
    /// A container considered for the request sum has no request for the resource.
    #[error("missing request for {resource} in container {container} of Pod {pod}")]
    MissingRequest {
        /// The resource name.
        resource: String,
        /// The container name.
        container: String,
        /// The pod name.
        pod: String,
    },
    /// Pod-level requests are in use but give no value for the resource.
    #[error("missing pod-level request for {resource} in Pod {pod}")]
    MissingPodLevelRequest {
        /// The resource name.
        resource: String,
        /// The pod name.
        pod: String,
    },
    /// A ContainerResource metric names a container the pod does not have.
    #[error("container {container} not found in Pod {pod}")]
    ContainerNotFound {
        /// The container name from the HPA.
        container: String,
        /// The pod name.
        pod: String,
    },
    /// A request quantity could not be read (cannot happen with API-validated pods; upstream has
    /// no equivalent because Go decodes quantities while reading the object).
    #[error(
        "invalid request {quantity:?} for {resource} in container {container} of Pod {pod}: {}",
        source.kind
    )]
    InvalidRequest {
        /// The resource name.
        resource: String,
        /// The container name (empty for pod-level requests and overhead).
        container: String,
        /// The pod name.
        pod: String,
        /// The quantity text.
        quantity: String,
        /// Why it could not be read.
        source: Box<QuantityError>,
    },
    /// The utilization helper failed (`no metrics returned matched known pods`); unwrapped as
    /// upstream does.
    #[error(transparent)]
    Utilization(#[from] UtilizationError),
}
