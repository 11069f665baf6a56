//! Batched pod metrics (`--metrics-batch-window`): Resource and ContainerResource metrics
//! listed once per namespace per window, Pods metrics once per namespace, metric name and
//! metric selector per window, and shared by every HPA reconciled in that window.
//!
//! No upstream counterpart: upstream's `restMetricsClient` asks the metrics APIs once per HPA
//! and metric, with the HPA's label selector. Here the list has no label selector, and each
//! HPA keeps what its selector would have returned: the items whose pod (from the pod cache;
//! for PodMetrics, the item's own labels when the pod is not cached, as metrics-server
//! copies them) matches, in the list's order. What an HPA then computes from them is what
//! [`hpa_metrics::resource_metric_result`] and [`hpa_metrics::raw_metric_result`]
//! compute for the per-HPA answer. Object and External metrics, and clients that cannot list
//! a namespace, go to the inner client per HPA. A failed list is not kept: the next HPA asks
//! again. Metrics are up to one window old (on the controller's clock).

use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hpa_config::Clock;
use hpa_metrics::wire::{ContainerMetrics, MetricValue, PodMetrics};
use hpa_metrics::{MetricsClient, MetricsError, PodMetricsInfo, Selector};
use hpa_metrics::{raw_metric_result, resource_metric_result};
use k8s_openapi::api::autoscaling::v2::CrossVersionObjectReference;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use crate::caches::CachePodLister;

/// One kept list: when it was fetched, and its contents.
type Kept<V> = Option<(jiff::Timestamp, Arc<V>)>;

/// The list of one key: the kept one (read without waiting), and the lock its fetches take
/// (one fetch at a time; the HPAs that need a new list wait for that one).
struct Slot<V> {
    kept: Mutex<Kept<V>>,
    fetching: tokio::sync::Mutex<()>,
    /// When an HPA last asked for this key (eviction).
    used: Mutex<Option<jiff::Timestamp>>,
}

impl<V> Default for Slot<V> {
    fn default() -> Self {
        Slot {
            kept: Mutex::new(None),
            fetching: tokio::sync::Mutex::new(()),
            used: Mutex::new(None),
        }
    }
}

impl<V> Slot<V> {
    fn kept(&self) -> Kept<V> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn keep(&self, at: jiff::Timestamp, value: Arc<V>) {
        *self.kept.lock().unwrap_or_else(|p| p.into_inner()) = Some((at, value));
    }
}

/// The age of a list fetched at `at`, if not in the future.
fn age(now: jiff::Timestamp, at: jiff::Timestamp) -> Option<Duration> {
    let age = now.duration_since(at);
    (age >= jiff::SignedDuration::ZERO).then(|| age.unsigned_abs())
}

/// Lists kept for one window, by key. A list younger than three quarters of the window is
/// shared as it is. The first HPA to read an older one fetches a new one (refresh-ahead),
/// holding the key's fetch lock, while the others keep reading the kept one until it is a
/// window old; from then on they wait for the fetch in flight (or start one). So no list is
/// used once it is a window old, and in a steady state HPAs rarely wait for a fetch.
///
/// A key no HPA has asked for during a whole window (its namespace deleted, its metric no
/// longer used) is dropped at the next sweep, made at most once a window by a caller of
/// [`Batches::get`], so the map holds only keys in use.
struct Batches<K, V> {
    slots: Mutex<HashMap<K, Arc<Slot<V>>>>,
    /// When the last sweep of unused keys ran.
    swept: Mutex<Option<jiff::Timestamp>>,
}

impl<K: Eq + Hash + Clone, V> Batches<K, V> {
    fn new() -> Self {
        Batches {
            slots: Mutex::new(HashMap::new()),
            swept: Mutex::new(None),
        }
    }

    /// The number of keys held.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.slots.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Drops the keys not asked for during the last `window` (at most once a window). A key
    /// whose fetch is in flight is kept; an HPA still holding a dropped slot finishes with it.
    fn sweep(&self, now: jiff::Timestamp, window: Duration) {
        {
            let mut swept = self.swept.lock().unwrap_or_else(|p| p.into_inner());
            match *swept {
                Some(at) if age(now, at).is_none_or(|a| a < window) => return,
                _ => *swept = Some(now),
            }
        }
        self.slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|_, slot| {
                let used = *slot.used.lock().unwrap_or_else(|p| p.into_inner());
                let recent = used.is_some_and(|at| age(now, at).is_none_or(|a| a < window));
                recent || slot.fetching.try_lock().is_err()
            });
    }

    /// The list of `key` for an HPA reconciled now: the kept one, or a new one from `fetch`
    /// (kept when it succeeds); `None` when `fetch` cannot list.
    async fn get<F, Fut>(
        &self,
        key: &K,
        now: impl Fn() -> jiff::Timestamp,
        window: Duration,
        fetch: F,
    ) -> Result<Option<Arc<V>>, MetricsError>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<Option<V>, MetricsError>>,
    {
        self.sweep(now(), window);
        let slot = self
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(key.clone())
            .or_default()
            .clone();
        *slot.used.lock().unwrap_or_else(|p| p.into_inner()) = Some(now());
        let refresh_ahead = window - window / 4;
        let kept = slot.kept();
        let fresh = |kept: &Kept<V>, limit: Duration| {
            kept.as_ref()
                .filter(|(at, _)| age(now(), *at).is_some_and(|a| a < limit))
                .map(|(_, v)| v.clone())
        };
        if let Some(v) = fresh(&kept, refresh_ahead) {
            return Ok(Some(v));
        }
        // Older than three quarters of a window: refresh ahead if no fetch is in flight,
        // else share the kept list while it is younger than a window.
        let _fetching = match slot.fetching.try_lock() {
            Ok(guard) => guard,
            Err(_) => {
                if let Some(v) = fresh(&kept, window) {
                    return Ok(Some(v));
                }
                let guard = slot.fetching.lock().await;
                // The fetch this HPA waited for may have brought a list.
                if let Some(v) = fresh(&slot.kept(), refresh_ahead) {
                    return Ok(Some(v));
                }
                guard
            }
        };
        let at = now();
        match fetch().await? {
            Some(value) => {
                let value = Arc::new(value);
                slot.keep(at, value.clone());
                Ok(Some(value))
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
    /// Kept only for a pod the pod cache did not hold when the list came (an orphan, selected
    /// by these labels); the others are selected through the cache.
    labels: Option<Labels>,
    timestamp: Option<Time>,
    window: Option<Arc<str>>,
    containers: Box<[(Arc<str>, Usage)]>,
}

/// A pod's labels, as key-value pairs.
type Labels = Box<[(Box<str>, Box<str>)]>;

/// One container's usage by resource.
type Usage = Box<[(Arc<str>, Quantity)]>;

/// One shared copy of the strings a namespace's PodMetrics repeat (windows, container and
/// resource names).
#[derive(Default)]
struct Interner(HashSet<Arc<str>>);

impl Interner {
    fn intern(&mut self, s: String) -> Arc<str> {
        if let Some(shared) = self.0.get(s.as_str()) {
            return shared.clone();
        }
        let shared: Arc<str> = s.into();
        self.0.insert(shared.clone());
        shared
    }
}

impl KeptPodMetrics {
    fn of(m: PodMetrics, orphan: bool, strings: &mut Interner) -> Self {
        KeptPodMetrics {
            name: m.metadata.name.unwrap_or_default().into(),
            labels: orphan.then(|| {
                m.metadata
                    .labels
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k.into(), v.into()))
                    .collect()
            }),
            timestamp: m.timestamp,
            window: m.window.map(|w| strings.intern(w)),
            containers: m
                .containers
                .into_iter()
                .map(|c| {
                    (
                        strings.intern(c.name),
                        c.usage
                            .into_iter()
                            .map(|(k, v)| (strings.intern(k), v))
                            .collect(),
                    )
                })
                .collect(),
        }
    }

    fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .flatten()
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

/// One namespace's PodMetrics as a window keeps them: sorted by pod name, one per name (the
/// last listed, as a map by name would keep), with the labels of those whose pod the cache
/// did not hold when they were listed (selected by their own labels, as metrics-server copies
/// them from its pods).
#[derive(Debug)]
struct NamespacePodMetrics {
    pods: Box<[KeptPodMetrics]>,
    /// The positions in `pods` of the orphans (those with labels), found once per list so a
    /// reconcile does not scan the namespace's list for them.
    orphans: Box<[usize]>,
}

impl NamespacePodMetrics {
    fn new(mut pods: Vec<KeptPodMetrics>) -> Self {
        // Stable, so that of equal names the last listed comes last and is the one kept.
        pods.sort_by(|a, b| a.name.cmp(&b.name));
        let mut kept: Vec<KeptPodMetrics> = Vec::with_capacity(pods.len());
        for m in pods {
            match kept.last_mut() {
                Some(last) if last.name == m.name => *last = m,
                _ => kept.push(m),
            }
        }
        let orphans = kept
            .iter()
            .enumerate()
            .filter(|(_, m)| m.labels.is_some())
            .map(|(i, _)| i)
            .collect();
        NamespacePodMetrics {
            pods: kept.into_boxed_slice(),
            orphans,
        }
    }

    fn get(&self, name: &str) -> Option<&KeptPodMetrics> {
        self.pods
            .binary_search_by(|m| m.name.as_ref().cmp(name))
            .ok()
            .map(|i| &self.pods[i])
    }

    fn orphans(&self) -> impl Iterator<Item = &KeptPodMetrics> {
        self.orphans.iter().filter_map(|&i| self.pods.get(i))
    }
}

/// A [`MetricsClient`] that batches pod metrics per namespace and window over `inner`.
pub struct BatchedMetricsClient {
    inner: Arc<dyn MetricsClient>,
    pods: CachePodLister,
    clock: Arc<dyn Clock>,
    window: Duration,
    resource: Batches<String, NamespacePodMetrics>,
    custom: Batches<(String, String, String), Vec<MetricValue>>,
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
}

#[async_trait::async_trait]
impl MetricsClient for BatchedMetricsClient {
    /// A metric routed to another API group is read per HPA by the inner client's route: the
    /// batches hold the default groups' answers only.
    fn for_api_group(&self, api_group: &str) -> Option<Arc<dyn MetricsClient>> {
        self.inner.for_api_group(api_group)
    }

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
                        .map(|items| {
                            let mut strings = Interner::default();
                            let pods = items
                                .into_iter()
                                .map(|m| {
                                    let orphan = !self.pods.contains(
                                        namespace,
                                        m.metadata.name.as_deref().unwrap_or_default(),
                                    );
                                    KeptPodMetrics::of(m, orphan, &mut strings)
                                })
                                .collect();
                            NamespacePodMetrics::new(pods)
                        }))
                },
            )
            .await?;
        let Some(list) = list else {
            return self
                .inner
                .get_resource_metric(resource, namespace, selector, container)
                .await;
        };
        // The selected pods' metrics, and the orphans the selector matches, in name order
        // (the order of the API's list).
        let mut selected: Vec<&KeptPodMetrics> = self
            .pods
            .matching_names(namespace, selector)
            .iter()
            .filter_map(|name| list.get(name.as_str()))
            .chain(
                list.orphans()
                    .filter(|m| selector.matches_lookup(|k| m.label(k))),
            )
            .collect();
        selected.sort_by(|a, b| a.name.cmp(&b.name));
        selected.dedup_by(|a, b| a.name == b.name);
        let selected: Vec<PodMetrics> = selected
            .into_iter()
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
            .pods
            .matching_names(namespace, selector)
            .into_iter()
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

    struct Clock(AtomicI64);

    impl Clock {
        fn now(&self) -> jiff::Timestamp {
            jiff::Timestamp::from_second(self.0.load(Ordering::SeqCst)).unwrap()
        }
        fn set(&self, s: i64) {
            self.0.store(s, Ordering::SeqCst);
        }
    }

    async fn get(
        b: &Batches<&'static str, usize>,
        clock: &Clock,
        fetches: &AtomicUsize,
        gate: Option<&tokio::sync::Notify>,
    ) -> usize {
        let v = b
            .get(
                &"ns",
                || clock.now(),
                Duration::from_secs(20),
                || async {
                    if let Some(g) = gate {
                        g.notified().await;
                    }
                    Ok(Some(fetches.fetch_add(1, Ordering::SeqCst) + 1))
                },
            )
            .await
            .unwrap()
            .unwrap();
        *v
    }

    fn pod_metrics(name: &str, cpu: &str, app: &str) -> PodMetrics {
        PodMetrics {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                labels: Some([("app".to_owned(), app.to_owned())].into()),
                ..Default::default()
            },
            timestamp: None,
            window: Some("30s".to_owned()),
            containers: vec![ContainerMetrics {
                name: "main".to_owned(),
                usage: [("cpu".to_owned(), Quantity(cpu.to_owned()))].into(),
            }],
        }
    }

    /// 1,000 namespaces whose HPAs were deleted: their keys are dropped once unused for a
    /// window, and the map returns to the keys in use.
    #[tokio::test]
    async fn keys_unused_for_a_window_are_dropped() {
        let b: Batches<String, usize> = Batches::new();
        let clock = Clock(AtomicI64::new(1_000));
        let window = Duration::from_secs(20);
        let ask = |key: String| {
            let b = &b;
            let clock = &clock;
            async move {
                b.get(&key, || clock.now(), window, || async { Ok(Some(1)) })
                    .await
                    .unwrap();
            }
        };
        ask("kept".to_owned()).await;
        let before = b.len();
        for i in 0..1_000 {
            ask(format!("ns-{i}")).await;
        }
        assert_eq!(b.len(), before + 1_000);
        // Half a window on, the deleted namespaces are not asked for again, "kept" is.
        clock.set(1_010);
        ask("kept".to_owned()).await;
        assert_eq!(b.len(), before + 1_000, "a sweep at most once a window");
        clock.set(1_025);
        ask("kept".to_owned()).await;
        assert_eq!(b.len(), before, "only the key in use is left");
    }

    #[test]
    fn a_namespace_list_is_kept_by_name_with_labels_only_for_orphans() {
        let mut strings = Interner::default();
        let list = NamespacePodMetrics::new(vec![
            KeptPodMetrics::of(pod_metrics("web-b", "100m", "web"), false, &mut strings),
            KeptPodMetrics::of(pod_metrics("web-a", "200m", "web"), true, &mut strings),
            // A second entry for a name: the last listed is kept, as a map by name keeps it.
            KeptPodMetrics::of(pod_metrics("web-b", "300m", "web"), false, &mut strings),
        ]);
        let names: Vec<&str> = list.pods.iter().map(|m| m.name.as_ref()).collect();
        assert_eq!(names, ["web-a", "web-b"]);
        let b = list.get("web-b").unwrap().to_pod_metrics();
        assert_eq!(b.containers[0].usage["cpu"], Quantity("300m".to_owned()));
        assert_eq!(b.window.as_deref(), Some("30s"));
        assert!(list.get("web-c").is_none());
        // Only the orphan keeps its labels, and is the only one offered for label selection.
        let orphans: Vec<&str> = list.orphans().map(|m| m.name.as_ref()).collect();
        assert_eq!(orphans, ["web-a"]);
        assert_eq!(list.get("web-a").unwrap().label("app"), Some("web"));
        assert_eq!(list.get("web-b").unwrap().label("app"), None);
        // Windows and container and resource names are one shared copy.
        let (a, b) = (list.get("web-a").unwrap(), list.get("web-b").unwrap());
        assert!(Arc::ptr_eq(
            a.window.as_ref().unwrap(),
            b.window.as_ref().unwrap()
        ));
        assert!(Arc::ptr_eq(&a.containers[0].0, &b.containers[0].0));
        assert!(Arc::ptr_eq(
            &a.containers[0].1[0].0,
            &b.containers[0].1[0].0
        ));
    }

    #[tokio::test]
    async fn shared_until_three_quarters_of_the_window_then_refreshed_ahead() {
        let (b, clock, fetches) = (
            Batches::new(),
            Clock(AtomicI64::new(0)),
            AtomicUsize::new(0),
        );
        assert_eq!(get(&b, &clock, &fetches, None).await, 1);
        clock.set(14);
        assert_eq!(get(&b, &clock, &fetches, None).await, 1);
        clock.set(15);
        assert_eq!(
            get(&b, &clock, &fetches, None).await,
            2,
            "refreshed at 3/4 window"
        );
        clock.set(29);
        assert_eq!(get(&b, &clock, &fetches, None).await, 2);
        assert_eq!(fetches.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn others_keep_the_list_while_one_refreshes_but_never_past_a_window() {
        let b = Arc::new(Batches::new());
        let clock = Arc::new(Clock(AtomicI64::new(0)));
        let fetches = Arc::new(AtomicUsize::new(0));
        let gate = Arc::new(tokio::sync::Notify::new());
        assert_eq!(get(&b, &clock, &fetches, None).await, 1);
        clock.set(16);
        let refresher = {
            let (b, clock, fetches, gate) =
                (b.clone(), clock.clone(), fetches.clone(), gate.clone());
            tokio::spawn(async move { get(&b, &clock, &fetches, Some(&gate)).await })
        };
        // Let the refresher take the fetch lock and wait at the gate.
        while b
            .slots
            .lock()
            .unwrap()
            .get("ns")
            .is_none_or(|s| s.fetching.try_lock().is_ok())
        {
            tokio::task::yield_now().await;
        }
        // Younger than a window: the kept list, without waiting.
        assert_eq!(get(&b, &clock, &fetches, None).await, 1);
        // A window old: wait for the fetch in flight and use its list.
        clock.set(20);
        let waiter = {
            let (b, clock, fetches) = (b.clone(), clock.clone(), fetches.clone());
            tokio::spawn(async move { get(&b, &clock, &fetches, None).await })
        };
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        gate.notify_one();
        assert_eq!(refresher.await.unwrap(), 2);
        assert_eq!(waiter.await.unwrap(), 2);
        assert_eq!(fetches.load(Ordering::SeqCst), 2);
    }
}
