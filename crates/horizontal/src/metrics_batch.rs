//! Batched pod metrics (`--metrics-batch-window`): Resource and ContainerResource metrics
//! listed once per namespace per window, Pods metrics once per namespace, metric name and
//! metric selector per window, and shared by every HPA reconciled in that window.
//!
//! No upstream counterpart: upstream's `restMetricsClient` asks the metrics APIs once per HPA
//! and metric, with the HPA's label selector. Here the list has no label selector, and each
//! HPA keeps what its selector would have returned: the items whose pod (from the pod cache;
//! for PodMetrics, the item's own labels when the pod is not cached, as metrics-server
//! copies them) matches, in the list's order. What an HPA then computes from them is what
//! [`hpa_metrics::rest::resource_metric_result`] and [`hpa_metrics::rest::raw_metric_result`]
//! compute for the per-HPA answer. Object and External metrics, and clients that cannot list
//! a namespace, go to the inner client per HPA. A failed list is not kept: the next HPA asks
//! again. Metrics are up to one window old (on the controller's clock).

use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hpa_config::Clock;
use hpa_metrics::rest::{raw_metric_result, resource_metric_result};
use hpa_metrics::wire::{ContainerMetrics, MetricValue, PodMetrics};
use hpa_metrics::{MetricsClient, MetricsError, PodMetricsInfo, Selector};
use k8s_openapi::api::autoscaling::v2::CrossVersionObjectReference;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use crate::caches::CachePodLister;

/// One kept list: when it was fetched, and its items.
type Slot<V> = Arc<tokio::sync::Mutex<Option<(jiff::Timestamp, Arc<Vec<V>>)>>>;

/// Lists kept for one window, by key; one fetch at a time per key (the HPAs of a namespace
/// reconciled together wait for one list).
struct Batches<K, V> {
    slots: Mutex<HashMap<K, Slot<V>>>,
}

impl<K: Eq + Hash + Clone, V> Batches<K, V> {
    fn new() -> Self {
        Batches {
            slots: Mutex::new(HashMap::new()),
        }
    }

    /// The list of `key` fetched less than `window` ago, or a fresh one from `fetch` (kept
    /// when it succeeds); `None` when `fetch` cannot list.
    async fn get<F, Fut>(
        &self,
        key: &K,
        now: impl Fn() -> jiff::Timestamp,
        window: Duration,
        fetch: F,
    ) -> Result<Option<Arc<Vec<V>>>, MetricsError>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<Option<Vec<V>>, MetricsError>>,
    {
        let slot = self
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(key.clone())
            .or_default()
            .clone();
        let mut kept = slot.lock().await;
        if let Some((at, items)) = kept.as_ref() {
            let age = now().duration_since(*at);
            if age >= jiff::SignedDuration::ZERO && age.unsigned_abs() < window {
                return Ok(Some(items.clone()));
            }
        }
        match fetch().await? {
            Some(items) => {
                let items = Arc::new(items);
                *kept = Some((now(), items.clone()));
                Ok(Some(items))
            }
            None => Ok(None),
        }
    }
}

/// What a kept PodMetrics holds: what the per-HPA answer's computation reads (name,
/// labels for pods the cache does not hold, timestamp, window, per-container usage), a
/// fraction of a `PodMetrics` value; a window keeps one list per namespace.
#[derive(Debug)]
struct KeptPodMetrics {
    name: Box<str>,
    labels: Box<[(Box<str>, Box<str>)]>,
    timestamp: Option<Time>,
    window: Option<Box<str>>,
    containers: Box<[(Box<str>, Usage)]>,
}

/// One container's usage by resource.
type Usage = Box<[(Box<str>, Quantity)]>;

impl KeptPodMetrics {
    fn of(m: PodMetrics) -> Self {
        KeptPodMetrics {
            name: m.metadata.name.unwrap_or_default().into(),
            labels: m
                .metadata
                .labels
                .into_iter()
                .flatten()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
            timestamp: m.timestamp,
            window: m.window.map(Into::into),
            containers: m
                .containers
                .into_iter()
                .map(|c| {
                    (
                        c.name.into(),
                        c.usage.into_iter().map(|(k, v)| (k.into(), v)).collect(),
                    )
                })
                .collect(),
        }
    }

    fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k.as_ref() == key)
            .map(|(_, v)| v.as_ref())
    }

    /// The PodMetrics the API served, as far as the computation reads it.
    fn to_pod_metrics(&self) -> PodMetrics {
        PodMetrics {
            metadata: ObjectMeta {
                name: Some(self.name.to_string()),
                ..Default::default()
            },
            timestamp: self.timestamp.clone(),
            window: self.window.as_deref().map(str::to_owned),
            containers: self
                .containers
                .iter()
                .map(|(name, usage)| ContainerMetrics {
                    name: name.to_string(),
                    usage: usage
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.clone()))
                        .collect(),
                })
                .collect(),
        }
    }
}

/// A [`MetricsClient`] that batches pod metrics per namespace and window over `inner`.
pub struct BatchedMetricsClient {
    inner: Arc<dyn MetricsClient>,
    pods: CachePodLister,
    clock: Arc<dyn Clock>,
    window: Duration,
    resource: Batches<String, KeptPodMetrics>,
    custom: Batches<(String, String, String), MetricValue>,
}

impl std::fmt::Debug for BatchedMetricsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchedMetricsClient")
            .field("window", &self.window)
            .finish_non_exhaustive()
    }
}

impl BatchedMetricsClient {
    /// Batches over `inner` for `window`, selecting pods through `pods`, on `clock`.
    pub fn new(
        inner: Arc<dyn MetricsClient>,
        pods: CachePodLister,
        clock: Arc<dyn Clock>,
        window: Duration,
    ) -> Self {
        BatchedMetricsClient {
            inner,
            pods,
            clock,
            window,
            resource: Batches::new(),
            custom: Batches::new(),
        }
    }

    fn now(&self) -> jiff::Timestamp {
        self.clock.now()
    }

    /// The names of the cached pods of `namespace` and whether each matches `selector`.
    fn pod_matches(&self, namespace: &str, selector: &Selector) -> HashMap<String, bool> {
        self.pods.selected(namespace, selector)
    }
}

#[async_trait::async_trait]
impl MetricsClient for BatchedMetricsClient {
    async fn get_resource_metric<'a>(
        &self,
        resource: &str,
        namespace: &str,
        selector: &Selector,
        container: Option<&'a str>,
    ) -> Result<(PodMetricsInfo, jiff::Timestamp), MetricsError> {
        let list = self
            .resource
            .get(
                &namespace.to_owned(),
                || self.now(),
                self.window,
                || async {
                    Ok(self
                        .inner
                        .list_namespace_pod_metrics(namespace)
                        .await?
                        .map(|items| items.into_iter().map(KeptPodMetrics::of).collect()))
                },
            )
            .await?;
        let Some(list) = list else {
            return self
                .inner
                .get_resource_metric(resource, namespace, selector, container)
                .await;
        };
        let pods = self.pod_matches(namespace, selector);
        let selected: Vec<PodMetrics> = list
            .iter()
            .filter(|m| match pods.get(m.name.as_ref()) {
                Some(matches) => *matches,
                None => selector.matches_lookup(|k| m.label(k)),
            })
            .map(KeptPodMetrics::to_pod_metrics)
            .collect();
        resource_metric_result(&selected, resource, container)
    }

    async fn get_raw_metric(
        &self,
        metric_name: &str,
        namespace: &str,
        selector: &Selector,
        metric_selector: &Selector,
    ) -> Result<(PodMetricsInfo, jiff::Timestamp), MetricsError> {
        let key = (
            namespace.to_owned(),
            metric_name.to_owned(),
            metric_selector.to_string(),
        );
        let list = self
            .custom
            .get(
                &key,
                || self.now(),
                self.window,
                || {
                    self.inner
                        .list_namespace_raw_metric(metric_name, namespace, metric_selector)
                },
            )
            .await?;
        let Some(list) = list else {
            return self
                .inner
                .get_raw_metric(metric_name, namespace, selector, metric_selector)
                .await;
        };
        let selected: HashSet<String> = self
            .pod_matches(namespace, selector)
            .into_iter()
            .filter_map(|(name, matches)| matches.then_some(name))
            .collect();
        let items: Vec<&MetricValue> = list
            .iter()
            .filter(|m| selected.contains(&m.described_object.name))
            .collect();
        raw_metric_result(items.iter().copied())
    }

    async fn get_object_metric(
        &self,
        metric_name: &str,
        namespace: &str,
        object: &CrossVersionObjectReference,
        metric_selector: &Selector,
    ) -> Result<(i64, jiff::Timestamp), MetricsError> {
        self.inner
            .get_object_metric(metric_name, namespace, object, metric_selector)
            .await
    }

    async fn get_external_metric(
        &self,
        metric_name: &str,
        namespace: &str,
        selector: &Selector,
    ) -> Result<(Vec<i64>, jiff::Timestamp), MetricsError> {
        self.inner
            .get_external_metric(metric_name, namespace, selector)
            .await
    }
}
