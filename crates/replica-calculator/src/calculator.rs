//! The async shell of the replica calculator: upstream `ReplicaCalculator` and its methods
//! `GetResourceReplicas`, `GetRawResourceReplicas`, `GetMetricReplicas`,
//! `GetObjectMetricReplicas`, `GetObjectPerPodMetricReplicas`, `GetExternalMetricReplicas` and
//! `GetExternalPerPodMetricReplicas` in `pkg/controller/podautoscaler/replica_calculator.go`.
//!
//! Each method fetches through [`MetricsClient`] and [`PodLister`], wraps fetch errors with
//! upstream's texts, and hands the values to the pure functions of [`crate::replicas`]. Time is
//! an explicit `now` argument; nothing here reads the wall clock.

use std::sync::Arc;

use hpa_metrics::{MetricsClient, Selector};
use jiff::Timestamp;
use k8s_openapi::api::autoscaling::v2::CrossVersionObjectReference;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::CalculationDetail;
use crate::error::CalculatorError;
use crate::pod_lister::PodLister;
use crate::replicas::{
    self, CalculatorConfig, PodSample, ResourceTarget, go_label_selector_string,
};
use crate::tolerances::Tolerances;

/// The outcome of [`ReplicaCalculator::get_resource_replicas`].
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceReplicas {
    /// The proposed replica count.
    pub replica_count: i32,
    /// The current utilization, integer percent of the requests (before fill-ins).
    pub utilization: i32,
    /// The average usage per pod in milli-units (before fill-ins).
    pub raw_utilization: i64,
    /// The timestamp of the metrics (the first item's).
    pub timestamp: Timestamp,
    /// How the count was reached (usage ratio, pods counted).
    pub detail: CalculationDetail,
}

/// The outcome of the usage-based methods.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricReplicas {
    /// The proposed replica count.
    pub replica_count: i32,
    /// The usage for the HPA status, milli-units (per pod for average-value targets).
    pub usage: i64,
    /// The metrics' timestamp; `None` where upstream returns Go's zero time (Object and
    /// External `Value` targets, a long-standing upstream quirk).
    pub timestamp: Option<Timestamp>,
    /// How the count was reached (usage ratio, pods counted, values read).
    pub detail: CalculationDetail,
}

/// Arguments of [`ReplicaCalculator::get_resource_replicas`] (Resource / ContainerResource with
/// a `Utilization` target).
#[derive(Debug, Clone, Copy)]
pub struct ResourceReplicasRequest<'a> {
    /// The scale target's current replica count.
    pub current_replicas: i32,
    /// The target utilization, percent.
    pub target_utilization: i32,
    /// The resource name, e.g. `cpu`.
    pub resource: &'a str,
    /// The HPA's tolerances.
    pub tolerances: Tolerances,
    /// The HPA's namespace.
    pub namespace: &'a str,
    /// The scale target's pod selector.
    pub selector: &'a Selector,
    /// The container of a ContainerResource metric; `None` for Resource metrics.
    pub container: Option<&'a str>,
}

/// Arguments of [`ReplicaCalculator::get_raw_resource_replicas`] (Resource / ContainerResource
/// with an `AverageValue` target).
#[derive(Debug, Clone, Copy)]
pub struct RawResourceReplicasRequest<'a> {
    /// The scale target's current replica count.
    pub current_replicas: i32,
    /// The target average usage per pod, milli-units.
    pub target_usage: i64,
    /// The resource name.
    pub resource: &'a str,
    /// The HPA's tolerances.
    pub tolerances: Tolerances,
    /// The HPA's namespace.
    pub namespace: &'a str,
    /// The scale target's pod selector.
    pub selector: &'a Selector,
    /// The container of a ContainerResource metric; `None` for Resource metrics.
    pub container: Option<&'a str>,
}

/// Arguments of [`ReplicaCalculator::get_metric_replicas`] (Pods metrics).
#[derive(Debug, Clone, Copy)]
pub struct MetricReplicasRequest<'a> {
    /// The scale target's current replica count.
    pub current_replicas: i32,
    /// The target average value per pod, milli-units.
    pub target_usage: i64,
    /// The metric name.
    pub metric_name: &'a str,
    /// The HPA's tolerances.
    pub tolerances: Tolerances,
    /// The HPA's namespace.
    pub namespace: &'a str,
    /// The scale target's pod selector.
    pub selector: &'a Selector,
    /// The metric's label selector.
    pub metric_selector: &'a Selector,
}

/// Arguments of [`ReplicaCalculator::get_object_metric_replicas`] (Object metric, `Value`
/// target).
#[derive(Debug, Clone, Copy)]
pub struct ObjectMetricReplicasRequest<'a> {
    /// The scale target's current replica count.
    pub current_replicas: i32,
    /// The target value, milli-units.
    pub target_usage: i64,
    /// The metric name.
    pub metric_name: &'a str,
    /// The HPA's tolerances.
    pub tolerances: Tolerances,
    /// The HPA's namespace.
    pub namespace: &'a str,
    /// The described object.
    pub object_ref: &'a CrossVersionObjectReference,
    /// The scale target's pod selector (to count ready pods).
    pub selector: &'a Selector,
    /// The metric's label selector.
    pub metric_selector: &'a Selector,
}

/// Arguments of [`ReplicaCalculator::get_object_per_pod_metric_replicas`] (Object metric,
/// `AverageValue` target).
#[derive(Debug, Clone, Copy)]
pub struct ObjectPerPodMetricReplicasRequest<'a> {
    /// The scale target's `status.replicas`.
    pub status_replicas: i32,
    /// The target average value per pod, milli-units.
    pub target_average_usage: i64,
    /// The metric name.
    pub metric_name: &'a str,
    /// The HPA's tolerances.
    pub tolerances: Tolerances,
    /// The HPA's namespace.
    pub namespace: &'a str,
    /// The described object.
    pub object_ref: &'a CrossVersionObjectReference,
    /// The metric's label selector.
    pub metric_selector: &'a Selector,
}

/// Arguments of [`ReplicaCalculator::get_external_metric_replicas`] (External metric, `Value`
/// target).
#[derive(Debug, Clone, Copy)]
pub struct ExternalMetricReplicasRequest<'a> {
    /// The scale target's current replica count.
    pub current_replicas: i32,
    /// The target total value, milli-units.
    pub target_usage: i64,
    /// The metric name.
    pub metric_name: &'a str,
    /// The HPA's tolerances.
    pub tolerances: Tolerances,
    /// The HPA's namespace.
    pub namespace: &'a str,
    /// The metric's label selector as written in the HPA (`None` when unset).
    pub metric_selector: Option<&'a LabelSelector>,
    /// The scale target's pod selector (to count ready pods).
    pub pod_selector: &'a Selector,
}

/// Arguments of [`ReplicaCalculator::get_external_per_pod_metric_replicas`] (External metric,
/// `AverageValue` target).
#[derive(Debug, Clone, Copy)]
pub struct ExternalPerPodMetricReplicasRequest<'a> {
    /// The scale target's `status.replicas`.
    pub status_replicas: i32,
    /// The target average value per pod, milli-units.
    pub target_usage_per_pod: i64,
    /// The metric name.
    pub metric_name: &'a str,
    /// The HPA's tolerances.
    pub tolerances: Tolerances,
    /// The HPA's namespace.
    pub namespace: &'a str,
    /// The metric's label selector as written in the HPA (`None` when unset).
    pub metric_selector: Option<&'a LabelSelector>,
}

/// Computes replica proposals for every metric type (upstream `ReplicaCalculator`).
#[derive(Clone)]
pub struct ReplicaCalculator {
    metrics_client: Arc<dyn MetricsClient>,
    pod_lister: Arc<dyn PodLister>,
    config: CalculatorConfig,
}

impl std::fmt::Debug for ReplicaCalculator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicaCalculator")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl ReplicaCalculator {
    /// A calculator over the given clients (upstream `NewReplicaCalculator`).
    pub fn new(
        metrics_client: Arc<dyn MetricsClient>,
        pod_lister: Arc<dyn PodLister>,
        config: CalculatorConfig,
    ) -> Self {
        Self {
            metrics_client,
            pod_lister,
            config,
        }
    }

    /// The configuration in use.
    pub fn config(&self) -> &CalculatorConfig {
        &self.config
    }

    fn list_pods(
        &self,
        namespace: &str,
        selector: &Selector,
    ) -> Result<Vec<Arc<Pod>>, CalculatorError> {
        self.pod_lister
            .list(namespace, selector)
            .map_err(CalculatorError::ListPods)
    }

    /// Upstream `GetResourceReplicas`: the replica count for a utilization target.
    pub async fn get_resource_replicas(
        &self,
        req: ResourceReplicasRequest<'_>,
        now: Timestamp,
    ) -> Result<ResourceReplicas, CalculatorError> {
        let container = req.container.filter(|c| !c.is_empty());
        let (metrics, timestamp) = self
            .metrics_client
            .get_resource_metric(req.resource, req.namespace, req.selector, container)
            .await
            .map_err(|source| CalculatorError::ResourceMetrics {
                resource: req.resource.to_owned(),
                source: Box::new(source),
            })?;
        let pods = self.list_pods(req.namespace, req.selector)?;
        let target = ResourceTarget {
            resource: req.resource,
            container,
            target_utilization: req.target_utilization,
        };
        let proposal = replicas::resource_replicas(
            req.current_replicas,
            &target,
            req.tolerances,
            PodSample {
                pods: &pods,
                metrics,
                now,
            },
            &self.config,
        )?;
        Ok(ResourceReplicas {
            replica_count: proposal.replica_count,
            utilization: proposal.utilization,
            raw_utilization: proposal.raw_utilization,
            timestamp,
            detail: proposal.detail,
        })
    }

    /// Upstream `GetRawResourceReplicas`: the replica count for an average-value resource target
    /// (no requests involved; CPU readiness rules apply when the resource is `cpu`).
    pub async fn get_raw_resource_replicas(
        &self,
        req: RawResourceReplicasRequest<'_>,
        now: Timestamp,
    ) -> Result<MetricReplicas, CalculatorError> {
        let container = req.container.filter(|c| !c.is_empty());
        let (metrics, timestamp) = self
            .metrics_client
            .get_resource_metric(req.resource, req.namespace, req.selector, container)
            .await
            .map_err(|source| CalculatorError::ResourceMetrics {
                resource: req.resource.to_owned(),
                source: Box::new(source),
            })?;
        let pods = self.list_pods(req.namespace, req.selector)?;
        let proposal = replicas::plain_metric_replicas(
            req.current_replicas,
            req.target_usage,
            req.resource,
            req.tolerances,
            PodSample {
                pods: &pods,
                metrics,
                now,
            },
            &self.config,
        )?;
        Ok(MetricReplicas {
            replica_count: proposal.replica_count,
            usage: proposal.usage,
            timestamp: Some(timestamp),
            detail: proposal.detail,
        })
    }

    /// Upstream `GetMetricReplicas`: the replica count for a Pods metric (no readiness rules).
    pub async fn get_metric_replicas(
        &self,
        req: MetricReplicasRequest<'_>,
        now: Timestamp,
    ) -> Result<MetricReplicas, CalculatorError> {
        let (metrics, timestamp) = self
            .metrics_client
            .get_raw_metric(
                req.metric_name,
                req.namespace,
                req.selector,
                req.metric_selector,
            )
            .await
            .map_err(|source| CalculatorError::PodsMetric {
                metric_name: req.metric_name.to_owned(),
                source: Box::new(source),
            })?;
        let pods = self.list_pods(req.namespace, req.selector)?;
        let proposal = replicas::plain_metric_replicas(
            req.current_replicas,
            req.target_usage,
            "",
            req.tolerances,
            PodSample {
                pods: &pods,
                metrics,
                now,
            },
            &self.config,
        )?;
        Ok(MetricReplicas {
            replica_count: proposal.replica_count,
            usage: proposal.usage,
            timestamp: Some(timestamp),
            detail: proposal.detail,
        })
    }

    fn object_metric_error(
        &self,
        metric_name: &str,
        namespace: &str,
        object_ref: &CrossVersionObjectReference,
        source: hpa_metrics::MetricsError,
    ) -> CalculatorError {
        CalculatorError::ObjectMetric {
            fixed_format: self.config.object_metric_error_fixed,
            metric_name: metric_name.to_owned(),
            kind: object_ref.kind.clone(),
            namespace: namespace.to_owned(),
            name: object_ref.name.clone(),
            source: Box::new(source),
        }
    }

    /// Upstream `GetObjectMetricReplicas`: the replica count for an Object metric with a `Value`
    /// target, scaled by the number of ready pods. The returned timestamp is always `None`.
    pub async fn get_object_metric_replicas(
        &self,
        req: ObjectMetricReplicasRequest<'_>,
    ) -> Result<MetricReplicas, CalculatorError> {
        let (usage, _timestamp) = self
            .metrics_client
            .get_object_metric(
                req.metric_name,
                req.namespace,
                req.object_ref,
                req.metric_selector,
            )
            .await
            .map_err(|source| {
                self.object_metric_error(req.metric_name, req.namespace, req.object_ref, source)
            })?;
        let proposal = replicas::object_metric_replicas(
            req.current_replicas,
            req.target_usage,
            usage,
            req.tolerances,
            || replicas::ready_pods_count(&self.list_pods(req.namespace, req.selector)?),
        )?;
        Ok(MetricReplicas {
            replica_count: proposal.replica_count,
            usage: proposal.usage,
            timestamp: None,
            detail: proposal.detail,
        })
    }

    /// Upstream `GetObjectPerPodMetricReplicas`: the replica count for an Object metric with an
    /// `AverageValue` target.
    pub async fn get_object_per_pod_metric_replicas(
        &self,
        req: ObjectPerPodMetricReplicasRequest<'_>,
    ) -> Result<MetricReplicas, CalculatorError> {
        let (usage, timestamp) = self
            .metrics_client
            .get_object_metric(
                req.metric_name,
                req.namespace,
                req.object_ref,
                req.metric_selector,
            )
            .await
            .map_err(|source| {
                self.object_metric_error(req.metric_name, req.namespace, req.object_ref, source)
            })?;
        let proposal = replicas::object_per_pod_metric_replicas(
            req.status_replicas,
            req.target_average_usage,
            usage,
            req.tolerances,
        );
        Ok(MetricReplicas {
            replica_count: proposal.replica_count,
            usage: proposal.usage,
            timestamp: Some(timestamp),
            detail: proposal.detail,
        })
    }

    async fn external_values(
        &self,
        metric_name: &str,
        namespace: &str,
        metric_selector: Option<&LabelSelector>,
    ) -> Result<(Vec<i64>, Timestamp), CalculatorError> {
        let selector = Selector::from_optional_label_selector(metric_selector)
            .map_err(|e| CalculatorError::MetricSelector(e.to_string()))?;
        self.metrics_client
            .get_external_metric(metric_name, namespace, &selector)
            .await
            .map_err(|source| CalculatorError::ExternalMetric {
                namespace: namespace.to_owned(),
                metric_name: metric_name.to_owned(),
                selector: go_label_selector_string(metric_selector),
                source: Box::new(source),
            })
    }

    /// Upstream `GetExternalMetricReplicas`: the replica count for an External metric with a
    /// `Value` target (the sum of all series), scaled by the number of ready pods. The returned
    /// timestamp is always `None`.
    pub async fn get_external_metric_replicas(
        &self,
        req: ExternalMetricReplicasRequest<'_>,
    ) -> Result<MetricReplicas, CalculatorError> {
        let (values, _timestamp) = self
            .external_values(req.metric_name, req.namespace, req.metric_selector)
            .await?;
        let proposal = replicas::external_metric_replicas(
            req.current_replicas,
            req.target_usage,
            &values,
            req.tolerances,
            || replicas::ready_pods_count(&self.list_pods(req.namespace, req.pod_selector)?),
        )?;
        Ok(MetricReplicas {
            replica_count: proposal.replica_count,
            usage: proposal.usage,
            timestamp: None,
            detail: proposal.detail,
        })
    }

    /// Upstream `GetExternalPerPodMetricReplicas`: the replica count for an External metric with
    /// an `AverageValue` target.
    pub async fn get_external_per_pod_metric_replicas(
        &self,
        req: ExternalPerPodMetricReplicasRequest<'_>,
    ) -> Result<MetricReplicas, CalculatorError> {
        let (values, timestamp) = self
            .external_values(req.metric_name, req.namespace, req.metric_selector)
            .await?;
        let proposal = replicas::external_per_pod_metric_replicas(
            req.status_replicas,
            req.target_usage_per_pod,
            &values,
            req.tolerances,
        );
        Ok(MetricReplicas {
            replica_count: proposal.replica_count,
            usage: proposal.usage,
            timestamp: Some(timestamp),
            detail: proposal.detail,
        })
    }
}
