//! The async shell of the replica calculator: upstream `ReplicaCalculator` and its methods
//! `GetResourceReplicas`, `GetRawResourceReplicas`, `GetMetricReplicas`,
//! `GetObjectMetricReplicas`, `GetObjectPerPodMetricReplicas`, `GetExternalMetricReplicas` and
//! `GetExternalPerPodMetricReplicas` in `pkg/controller/podautoscaler/replica_calculator.go`.
//!
//! [`ReplicaCalculator::calculate`] takes the metric and its target as one [`MetricTarget`]
//! and calls the matching method; the seven methods stay public under upstream's names. Each
//! method fetches through [`MetricsClient`] and [`PodLister`], wraps fetch errors with
//! upstream's texts, and hands the values to the pure functions of [`crate::replicas`]. Time is
//! an explicit `now` argument; nothing here reads the wall clock.

use std::sync::Arc;

use hpa_decision::gofmt::{SelectorStyle, label_selector_plus_v};
use hpa_decision::pod_selection::PodOwnership;
use hpa_metrics::{MetricsClient, Selector};
use jiff::Timestamp;
use k8s_openapi::api::autoscaling::v2::CrossVersionObjectReference;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::CalculationDetail;
use crate::PodMetricsInfo;
use crate::error::CalculatorError;
use crate::group_pods::remove_metrics_for_pods;
use crate::pod_lister::PodLister;
use crate::replicas::{self, CalculatorConfig, PodSample, ResourceTarget, UsageProposal};
use crate::target::MetricTarget;
use hpa_decision::tolerance::Tolerances;

/// The outcome of every calculation: the proposal and what the HPA status reports.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricReplicas {
    /// The proposed replica count.
    pub replica_count: i32,
    /// The usage for the HPA status, milli-units: the metric's value for `Value` targets, the
    /// value per pod for `AverageValue` targets, and for a utilization target the raw average
    /// usage per pod (upstream's `rawUtilization`); before any fill-in.
    pub usage: i64,
    /// The current utilization, integer percent of the requests before any fill-in: `Some`
    /// only for a utilization target ([`MetricTarget::ResourceUtilization`]).
    pub utilization: Option<i32>,
    /// The metrics' timestamp; `None` where upstream returns Go's zero time (Object and
    /// External `Value` targets, a long-standing upstream quirk).
    pub timestamp: Option<Timestamp>,
    /// How the count was reached (usage ratio, pods counted, values read).
    pub detail: CalculationDetail,
}

/// What every calculation shares: the scale target's side of upstream's method arguments
/// (`namespace`, the pod `selector`, `currentReplicas` or `statusReplicas`, `tolerances`) and
/// the evaluation time. One per reconcile; each method reads the fields it needs.
#[derive(Debug, Clone, Copy)]
pub struct ReplicaQuery<'a> {
    /// The HPA's namespace.
    pub namespace: &'a str,
    /// `scale.spec.replicas`: upstream's `currentReplicas` argument (all methods but the two
    /// per-pod ones).
    pub spec_replicas: i32,
    /// `scale.status.replicas`: upstream's `statusReplicas` argument of
    /// `GetObjectPerPodMetricReplicas` and `GetExternalPerPodMetricReplicas`.
    pub status_replicas: i32,
    /// The scale target's pod selector (pods listed, resource samples fetched, ready pods
    /// counted); unused by the two per-pod methods, as upstream.
    pub selector: &'a Selector,
    /// The HPA's tolerances.
    pub tolerances: Tolerances,
    /// The evaluation time (upstream's `time.Now()` when grouping pods).
    pub now: Timestamp,
    /// With the `OwnerReferences` pod selection strategy (`hpa_decision::pod_selection`, no
    /// upstream counterpart): which pods the target owns. The selected pods it does not own
    /// are left out wherever pods are listed, and their samples dropped. `None`: every
    /// selected pod, as upstream.
    pub ownership: Option<&'a PodOwnership>,
}

/// A Resource or ContainerResource metric: the measured half of
/// [`ReplicaCalculator::get_resource_replicas`] and
/// [`ReplicaCalculator::get_raw_resource_replicas`].
#[derive(Debug, Clone, Copy)]
pub struct ResourceMetric<'a> {
    /// The resource name, e.g. `cpu`.
    pub resource: &'a str,
    /// The container of a ContainerResource metric; `None` (or empty) for Resource metrics.
    pub container: Option<&'a str>,
}

/// A Pods metric: the measured half of [`ReplicaCalculator::get_metric_replicas`].
#[derive(Debug, Clone, Copy)]
pub struct PodsMetric<'a> {
    /// The metric name.
    pub metric_name: &'a str,
    /// The metric's label selector.
    pub metric_selector: &'a Selector,
}

/// An Object metric: the measured half of [`ReplicaCalculator::get_object_metric_replicas`]
/// and [`ReplicaCalculator::get_object_per_pod_metric_replicas`].
#[derive(Debug, Clone, Copy)]
pub struct ObjectMetric<'a> {
    /// The metric name.
    pub metric_name: &'a str,
    /// The described object (upstream's `objectRef`).
    pub object_ref: &'a CrossVersionObjectReference,
    /// The metric's label selector.
    pub metric_selector: &'a Selector,
}

/// An External metric: the measured half of
/// [`ReplicaCalculator::get_external_metric_replicas`] and
/// [`ReplicaCalculator::get_external_per_pod_metric_replicas`].
#[derive(Debug, Clone, Copy)]
pub struct ExternalMetric<'a> {
    /// The metric name.
    pub metric_name: &'a str,
    /// The metric's label selector as written in the HPA (`None` when unset).
    pub metric_selector: Option<&'a LabelSelector>,
}

impl MetricReplicas {
    fn new(proposal: UsageProposal, timestamp: Option<Timestamp>) -> Self {
        Self {
            replica_count: proposal.replica_count,
            usage: proposal.usage,
            utilization: None,
            timestamp,
            detail: proposal.detail,
        }
    }
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

    /// The same calculator over another metrics client, the same pod lister and configuration
    /// (no upstream counterpart: the controller computes a metric's fallback value, as if the
    /// metrics API had answered it, through the same methods).
    pub fn with_metrics_client(&self, metrics_client: Arc<dyn MetricsClient>) -> Self {
        Self {
            metrics_client,
            pod_lister: Arc::clone(&self.pod_lister),
            config: self.config,
        }
    }

    /// The same calculator reading custom and external metrics from `api_group` (the
    /// annotation `kube-hpa-controller.io/metric-source`, after KEP-6382;
    /// `hpa_decision::metric_source`). A metrics client that cannot be routed fails every
    /// read with an error naming the group: a routed metric is never read from the default
    /// group.
    pub fn for_api_group(&self, api_group: &str) -> Self {
        let client = self
            .metrics_client
            .for_api_group(api_group)
            .unwrap_or_else(|| {
                Arc::new(Unroutable {
                    api_group: api_group.to_owned(),
                })
            });
        self.with_metrics_client(client)
    }

    /// The replica count for `target`: the one of upstream's seven `Get*Replicas` methods
    /// that the target's variant names, called with its metric and target number.
    pub async fn calculate(
        &self,
        query: &ReplicaQuery<'_>,
        target: &MetricTarget<'_>,
    ) -> Result<MetricReplicas, CalculatorError> {
        match *target {
            MetricTarget::ResourceUtilization {
                ref metric,
                utilization,
            } => self.get_resource_replicas(query, metric, utilization).await,
            MetricTarget::ResourceAverageValue {
                ref metric,
                average_value,
            } => {
                self.get_raw_resource_replicas(query, metric, average_value)
                    .await
            }
            MetricTarget::PodsAverageValue {
                ref metric,
                average_value,
            } => self.get_metric_replicas(query, metric, average_value).await,
            MetricTarget::ObjectValue { ref metric, value } => {
                self.get_object_metric_replicas(query, metric, value).await
            }
            MetricTarget::ObjectAverageValue {
                ref metric,
                average_value,
            } => {
                self.get_object_per_pod_metric_replicas(query, metric, average_value)
                    .await
            }
            MetricTarget::ExternalValue { ref metric, value } => {
                self.get_external_metric_replicas(query, metric, value)
                    .await
            }
            MetricTarget::ExternalAverageValue {
                ref metric,
                average_value,
            } => {
                self.get_external_per_pod_metric_replicas(query, metric, average_value)
                    .await
            }
        }
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

    /// The query's pods: those its selector matches, less those the target does not own when
    /// the query has an [`PodOwnership`]; with the names of the pods left out.
    fn query_pods(
        &self,
        query: &ReplicaQuery<'_>,
    ) -> Result<(Vec<Arc<Pod>>, Vec<String>), CalculatorError> {
        let pods = self.list_pods(query.namespace, query.selector)?;
        Ok(match query.ownership {
            None => (pods, Vec::new()),
            Some(ownership) => {
                let (kept, left_out): (Vec<_>, Vec<_>) =
                    pods.into_iter().partition(|p| ownership.owns(p));
                let names = left_out
                    .iter()
                    .map(|p| p.metadata.name.clone().unwrap_or_default())
                    .collect();
                (kept, names)
            }
        })
    }

    /// The query's pods, and `metrics` without the samples of the pods left out: with an
    /// [`PodOwnership`], only the samples of the pods kept count (a sample of a pod the cache
    /// does not hold has no known owner).
    fn query_pods_for(
        &self,
        query: &ReplicaQuery<'_>,
        metrics: &mut PodMetricsInfo,
    ) -> Result<Vec<Arc<Pod>>, CalculatorError> {
        let (pods, left_out) = self.query_pods(query)?;
        remove_metrics_for_pods(metrics, &left_out);
        if query.ownership.is_some() {
            let kept: std::collections::HashSet<&str> = pods
                .iter()
                .filter_map(|p| p.metadata.name.as_deref())
                .collect();
            metrics.retain(|name, _| kept.contains(name.as_str()));
        }
        Ok(pods)
    }

    /// Upstream's resource fetch shared by `GetResourceReplicas` and `GetRawResourceReplicas`:
    /// the samples, their timestamp and the listed pods.
    async fn resource_samples(
        &self,
        query: &ReplicaQuery<'_>,
        metric: &ResourceMetric<'_>,
    ) -> Result<(PodMetricsInfo, Timestamp, Vec<Arc<Pod>>), CalculatorError> {
        let container = metric.container.filter(|c| !c.is_empty());
        let (mut metrics, timestamp) = self
            .metrics_client
            .get_resource_metric(metric.resource, query.namespace, query.selector, container)
            .await
            .map_err(|source| CalculatorError::ResourceMetrics {
                resource: metric.resource.to_owned(),
                source: Box::new(source),
            })?;
        let pods = self.query_pods_for(query, &mut metrics)?;
        Ok((metrics, timestamp, pods))
    }

    /// Upstream `GetResourceReplicas`: the replica count for a utilization target (percent of
    /// the pods' requests).
    pub async fn get_resource_replicas(
        &self,
        query: &ReplicaQuery<'_>,
        metric: &ResourceMetric<'_>,
        target_utilization: i32,
    ) -> Result<MetricReplicas, CalculatorError> {
        let (metrics, timestamp, pods) = self.resource_samples(query, metric).await?;
        let target = ResourceTarget {
            resource: metric.resource,
            container: metric.container.filter(|c| !c.is_empty()),
            target_utilization,
        };
        let proposal = replicas::resource_replicas(
            query.spec_replicas,
            &target,
            query.tolerances,
            PodSample {
                pods: &pods,
                metrics,
                now: query.now,
            },
            &self.config,
        )?;
        Ok(MetricReplicas {
            replica_count: proposal.replica_count,
            usage: proposal.raw_utilization,
            utilization: Some(proposal.utilization),
            timestamp: Some(timestamp),
            detail: proposal.detail,
        })
    }

    /// Upstream `GetRawResourceReplicas`: the replica count for an average-value resource target
    /// (`target_usage` per pod, milli-units; no requests involved; CPU readiness rules apply
    /// when the resource is `cpu`).
    pub async fn get_raw_resource_replicas(
        &self,
        query: &ReplicaQuery<'_>,
        metric: &ResourceMetric<'_>,
        target_usage: i64,
    ) -> Result<MetricReplicas, CalculatorError> {
        let (metrics, timestamp, pods) = self.resource_samples(query, metric).await?;
        let proposal = replicas::plain_metric_replicas(
            query.spec_replicas,
            target_usage,
            metric.resource,
            query.tolerances,
            PodSample {
                pods: &pods,
                metrics,
                now: query.now,
            },
            &self.config,
        )?;
        Ok(MetricReplicas::new(proposal, Some(timestamp)))
    }

    /// Upstream `GetMetricReplicas`: the replica count for a Pods metric (`target_usage` per
    /// pod, milli-units; no readiness rules).
    pub async fn get_metric_replicas(
        &self,
        query: &ReplicaQuery<'_>,
        metric: &PodsMetric<'_>,
        target_usage: i64,
    ) -> Result<MetricReplicas, CalculatorError> {
        let (mut metrics, timestamp) = self
            .metrics_client
            .get_raw_metric(
                metric.metric_name,
                query.namespace,
                query.selector,
                metric.metric_selector,
            )
            .await
            .map_err(|source| CalculatorError::PodsMetric {
                metric_name: metric.metric_name.to_owned(),
                source: Box::new(source),
            })?;
        let pods = self.query_pods_for(query, &mut metrics)?;
        let proposal = replicas::plain_metric_replicas(
            query.spec_replicas,
            target_usage,
            "",
            query.tolerances,
            PodSample {
                pods: &pods,
                metrics,
                now: query.now,
            },
            &self.config,
        )?;
        Ok(MetricReplicas::new(proposal, Some(timestamp)))
    }

    /// Upstream's Object fetch shared by `GetObjectMetricReplicas` and
    /// `GetObjectPerPodMetricReplicas`, with its error text.
    async fn object_value(
        &self,
        query: &ReplicaQuery<'_>,
        metric: &ObjectMetric<'_>,
    ) -> Result<(i64, Timestamp), CalculatorError> {
        self.metrics_client
            .get_object_metric(
                metric.metric_name,
                query.namespace,
                metric.object_ref,
                metric.metric_selector,
            )
            .await
            .map_err(|source| CalculatorError::ObjectMetric {
                fixed_format: self.config.object_metric_error_fixed,
                metric_name: metric.metric_name.to_owned(),
                kind: metric.object_ref.kind.clone(),
                namespace: query.namespace.to_owned(),
                name: metric.object_ref.name.clone(),
                source: Box::new(source),
            })
    }

    /// Upstream `GetObjectMetricReplicas`: the replica count for an Object metric with a `Value`
    /// target (`target_usage`, milli-units), scaled by the number of ready pods. The returned
    /// timestamp is always `None`.
    pub async fn get_object_metric_replicas(
        &self,
        query: &ReplicaQuery<'_>,
        metric: &ObjectMetric<'_>,
        target_usage: i64,
    ) -> Result<MetricReplicas, CalculatorError> {
        let (usage, _timestamp) = self.object_value(query, metric).await?;
        let proposal = replicas::object_metric_replicas(
            query.spec_replicas,
            target_usage,
            usage,
            query.tolerances,
            || replicas::ready_pods_count(&self.query_pods(query)?.0),
        )?;
        Ok(MetricReplicas::new(proposal, None))
    }

    /// Upstream `GetObjectPerPodMetricReplicas`: the replica count for an Object metric with an
    /// `AverageValue` target (`target_average_usage` per pod, milli-units), against
    /// `status_replicas`.
    pub async fn get_object_per_pod_metric_replicas(
        &self,
        query: &ReplicaQuery<'_>,
        metric: &ObjectMetric<'_>,
        target_average_usage: i64,
    ) -> Result<MetricReplicas, CalculatorError> {
        let (usage, timestamp) = self.object_value(query, metric).await?;
        let proposal = replicas::object_per_pod_metric_replicas(
            query.status_replicas,
            target_average_usage,
            usage,
            query.tolerances,
        );
        Ok(MetricReplicas::new(proposal, Some(timestamp)))
    }

    /// Upstream's External fetch shared by `GetExternalMetricReplicas` and
    /// `GetExternalPerPodMetricReplicas`, with its error text.
    async fn external_values(
        &self,
        query: &ReplicaQuery<'_>,
        metric: &ExternalMetric<'_>,
    ) -> Result<(Vec<i64>, Timestamp), CalculatorError> {
        let selector = Selector::from_optional_label_selector(metric.metric_selector)
            .map_err(CalculatorError::MetricSelector)?;
        self.metrics_client
            .get_external_metric(metric.metric_name, query.namespace, &selector)
            .await
            .map_err(|source| CalculatorError::ExternalMetric {
                namespace: query.namespace.to_owned(),
                metric_name: metric.metric_name.to_owned(),
                selector: label_selector_plus_v(metric.metric_selector, SelectorStyle::GoGoString),
                source: Box::new(source),
            })
    }

    /// Upstream `GetExternalMetricReplicas`: the replica count for an External metric with a
    /// `Value` target (`target_usage`, milli-units, against the sum of all series), scaled by
    /// the number of ready pods. The returned timestamp is always `None`.
    pub async fn get_external_metric_replicas(
        &self,
        query: &ReplicaQuery<'_>,
        metric: &ExternalMetric<'_>,
        target_usage: i64,
    ) -> Result<MetricReplicas, CalculatorError> {
        let (values, _timestamp) = self.external_values(query, metric).await?;
        let proposal = replicas::external_metric_replicas(
            query.spec_replicas,
            target_usage,
            &values,
            query.tolerances,
            || replicas::ready_pods_count(&self.query_pods(query)?.0),
        )?;
        Ok(MetricReplicas::new(proposal, None))
    }

    /// Upstream `GetExternalPerPodMetricReplicas`: the replica count for an External metric with
    /// an `AverageValue` target (`target_usage_per_pod`, milli-units), against
    /// `status_replicas`.
    pub async fn get_external_per_pod_metric_replicas(
        &self,
        query: &ReplicaQuery<'_>,
        metric: &ExternalMetric<'_>,
        target_usage_per_pod: i64,
    ) -> Result<MetricReplicas, CalculatorError> {
        let (values, timestamp) = self.external_values(query, metric).await?;
        let proposal = replicas::external_per_pod_metric_replicas(
            query.status_replicas,
            target_usage_per_pod,
            &values,
            query.tolerances,
        );
        Ok(MetricReplicas::new(proposal, Some(timestamp)))
    }
}

/// A metrics client for a group its underlying client cannot read from.
struct Unroutable {
    api_group: String,
}

impl Unroutable {
    fn error(&self) -> hpa_metrics::FetchError {
        hpa_metrics::FetchError::other(format!(
            "this metrics client cannot read from API group {}",
            self.api_group
        ))
    }
}

#[async_trait::async_trait]
impl MetricsClient for Unroutable {
    async fn get_resource_metric<'a>(
        &self,
        _resource: &str,
        _namespace: &str,
        _selector: &Selector,
        _container: Option<&'a str>,
    ) -> Result<(PodMetricsInfo, Timestamp), hpa_metrics::MetricsError> {
        Err(hpa_metrics::MetricsError::ResourceFetch(self.error()))
    }

    async fn get_raw_metric(
        &self,
        _metric_name: &str,
        _namespace: &str,
        _selector: &Selector,
        _metric_selector: &Selector,
    ) -> Result<(PodMetricsInfo, Timestamp), hpa_metrics::MetricsError> {
        Err(hpa_metrics::MetricsError::CustomFetch(self.error()))
    }

    async fn get_object_metric(
        &self,
        _metric_name: &str,
        _namespace: &str,
        _object: &CrossVersionObjectReference,
        _metric_selector: &Selector,
    ) -> Result<(i64, Timestamp), hpa_metrics::MetricsError> {
        Err(hpa_metrics::MetricsError::CustomFetch(self.error()))
    }

    async fn get_external_metric(
        &self,
        _metric_name: &str,
        _namespace: &str,
        _selector: &Selector,
    ) -> Result<(Vec<i64>, Timestamp), hpa_metrics::MetricsError> {
        Err(hpa_metrics::MetricsError::ExternalFetch(self.error()))
    }
}
