//! The controller's informer caches: `autoscaling/v2` HorizontalPodAutoscalers and `v1` Pods
//! (`NewHorizontalController`), with the HPA handlers `enqueueHPA`, `updateHPA` and `deleteHPA`.
//!
//! Mirrors the shared informers upstream `pkg/controller/podautoscaler/horizontal.go`
//! (`NewHorizontalController`) registers on: the HPA informer with its handlers and the pod
//! lister used by the replica calculator and the ambiguous-selector check. Here each cache is a
//! watcher (`kube::runtime`'s for HPAs, `hpa-protobuf`'s for pods) feeding a namespaced index
//! that a relist updates in place, object by object, as client-go's `DeltaFIFO.Replace` and
//! `processDeltas` update the informer's indexer (an object listed again unchanged keeps its
//! entry: [`index`]); the HPA watcher's events are also handed to a [`HpaEventHandler`]. A
//! relist (watch restart) that no longer contains an object is reported as a deletion, as
//! client-go's `DeletedFinalStateUnknown` tombstones are.
//!
//! As KCM's shared informer factory (`cmd/kube-controller-manager/app/controllermanager.go`,
//! `informers.WithTransform(trim managedFields)`), every cached object is stored without
//! `metadata.managedFields`; pods are kept as [`PodProjection`]s (what the calculator and the
//! selector checks read). Pods are indexed by namespace (the informer's `NamespaceIndex`
//! that `podLister.Pods(ns).List` uses), so a list reads one namespace, never the cluster.
//! The handler's periodic resync (`AddEventHandlerWithResyncPeriod`) runs in the same task
//! as the watch events, so its `UpdateFunc` calls are ordered with `DeleteFunc` as the
//! informer's single listener delivers them: a resync never re-delivers an HPA whose
//! deletion was already handled.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use hpa_metrics::Selector;
use hpa_replica_calculator::{PodListError, PodLister};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};

use crate::pod_projection::{PodInterners, PodProjection};

mod index;

use index::{NamespacedIndex, Readiness, Versioned};

/// What the HPA informer tells the controller (upstream's `ResourceEventHandlerFuncs`).
pub trait HpaEventHandler: Send + Sync + 'static {
    /// An HPA appeared in the cache (`AddFunc`).
    fn on_add(&self, hpa: &HorizontalPodAutoscaler);
    /// An HPA changed, or a resync re-delivered it (`UpdateFunc`); `old_generation` is the
    /// cached object's `metadata.generation` before this event (the same object's on a
    /// resync).
    fn on_update(&self, old_generation: Option<i64>, hpa: &HorizontalPodAutoscaler);
    /// The handler's resync re-delivered a cached HPA unchanged (client-go calls `UpdateFunc`
    /// with the same object twice); by default, [`on_update`](Self::on_update) with its own
    /// generation.
    fn on_resync(&self, hpa: &HorizontalPodAutoscaler) {
        self.on_update(hpa.metadata.generation, hpa);
    }
    /// An HPA left the cache (`DeleteFunc`); `key` is `namespace/name`.
    fn on_delete(&self, key: &str);
}

/// `namespace/name` of an object (client-go's `MetaNamespaceKeyFunc`).
pub fn object_key<K: Resource>(obj: &K) -> String {
    let (ns, name) = slot(obj);
    key_of(ns, name)
}

/// `namespace/name`, or `name` without a namespace.
fn key_of(ns: &str, name: &str) -> String {
    if ns.is_empty() {
        name.to_owned()
    } else {
        format!("{ns}/{name}")
    }
}

/// Splits `namespace/name` (client-go's `SplitMetaNamespaceKey`).
pub fn split_key(key: &str) -> Result<(&str, &str), String> {
    let parts: Vec<&str> = key.split('/').collect();
    match parts.as_slice() {
        [name] => Ok(("", name)),
        [ns, name] => Ok((ns, name)),
        _ => Err(format!("unexpected key format: {key:?}")),
    }
}

/// Read access to the HPA and Pod caches.
#[derive(Clone)]
pub struct Caches {
    hpas: Arc<HpaIndex>,
    pods: Arc<PodIndex>,
    /// Makes [`Caches::wait_for_sync`] log "Waiting for caches to sync" and "Caches are
    /// synced" once, however many wait.
    synced: Arc<tokio::sync::OnceCell<()>>,
}

impl std::fmt::Debug for Caches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caches").finish_non_exhaustive()
    }
}

/// The writers of the caches, consumed by [`Caches::start`].
pub struct CacheWriters {
    pub(crate) hpas: Arc<HpaIndex>,
    pub(crate) pods: Arc<PodIndex>,
}

impl std::fmt::Debug for CacheWriters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheWriters").finish_non_exhaustive()
    }
}

/// KCM's informer transform: drop `metadata.managedFields` before caching.
pub fn trim_managed_fields<K: Resource>(obj: &mut K) {
    obj.meta_mut().managed_fields = None;
}

/// The Pod cache, indexed by namespace: namespace → name → pod (name order, so lists need no
/// sort), each pod kept as a [`PodProjection`], updated in place by a relist
/// ([`NamespacedIndex`]).
#[derive(Default)]
pub struct PodIndex {
    pods: NamespacedIndex<Arc<PodProjection>>,
    ready: Readiness,
    interners: PodInterners,
}

impl std::fmt::Debug for PodIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PodIndex").finish_non_exhaustive()
    }
}

impl Versioned for Arc<PodProjection> {
    fn resource_version(&self) -> &str {
        PodProjection::resource_version(self)
    }
}

impl Versioned for Arc<HorizontalPodAutoscaler> {
    fn resource_version(&self) -> &str {
        self.metadata.resource_version.as_deref().unwrap_or("")
    }
}

/// `(namespace, name)` of an object.
fn slot<K: Resource>(obj: &K) -> (&str, &str) {
    let meta = obj.meta();
    (
        meta.namespace.as_deref().unwrap_or(""),
        meta.name.as_deref().unwrap_or(""),
    )
}

impl PodIndex {
    /// Applies one watch event (the informer's indexer update).
    pub fn apply(&self, event: watcher::Event<Pod>) {
        match event {
            watcher::Event::Apply(pod) | watcher::Event::InitApply(pod) => {
                let (ns, name) = slot(&pod);
                let rv = pod.metadata.resource_version.as_deref().unwrap_or("");
                self.pods.upsert(ns, name, rv, || {
                    Arc::new(PodProjection::of(&pod, &self.interners))
                });
            }
            watcher::Event::Delete(pod) => {
                let (ns, name) = slot(&pod);
                self.pods.remove(ns, name);
            }
            watcher::Event::Init => self.pods.begin_relist(),
            watcher::Event::InitDone => {
                self.pods.end_relist();
                self.ready.synced();
            }
        }
    }

    /// The pods of `namespace` that `selector` matches, in name order, as the calculator
    /// reads them ([`PodProjection::to_pod`]).
    pub fn list_matching(&self, namespace: &str, selector: &Selector) -> Vec<Arc<Pod>> {
        let mut out = Vec::new();
        let mut matcher = PodProjection::matcher(selector);
        self.pods.for_each_in(namespace, |_, p| {
            if matcher.matches(p) {
                out.push(Arc::new(p.to_pod(namespace)));
            }
        });
        out
    }

    /// The names of the pods of `namespace` that `selector` matches, in name order.
    pub fn names_matching(&self, namespace: &str, selector: &Selector) -> Vec<String> {
        let mut out = Vec::new();
        let mut matcher = PodProjection::matcher(selector);
        self.pods.for_each_in(namespace, |name, p| {
            if matcher.matches(p) {
                out.push(name.to_owned());
            }
        });
        out
    }

    /// Whether pod `namespace/name` is cached.
    pub fn contains(&self, namespace: &str, name: &str) -> bool {
        self.pods.contains(namespace, name)
    }

    /// The number of namespaces with cached pods (tests check the index drops empty ones).
    #[cfg(test)]
    pub fn namespaces(&self) -> usize {
        self.pods.namespaces()
    }

    /// Waits for the first list; an error if the informer stopped before it.
    async fn wait_until_ready(&self) -> Result<(), index::Stopped> {
        self.ready.wait().await
    }

    fn versions(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        self.pods.for_each(|ns, name, p| {
            out.insert(key_of(ns, name), p.resource_version().to_owned());
        });
        out
    }
}

/// The HPA cache: namespace → name → HPA (without `managedFields`), updated in place by a
/// relist ([`NamespacedIndex`]); ready once the first list is complete.
#[derive(Default)]
pub struct HpaIndex {
    hpas: NamespacedIndex<Arc<HorizontalPodAutoscaler>>,
    ready: Readiness,
}

impl std::fmt::Debug for HpaIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HpaIndex").finish_non_exhaustive()
    }
}

impl HpaIndex {
    /// Applies one watch event; for `Apply` and `InitApply`, returns the HPA as cached after
    /// it.
    pub fn apply(
        &self,
        event: watcher::Event<HorizontalPodAutoscaler>,
    ) -> Option<Arc<HorizontalPodAutoscaler>> {
        match event {
            watcher::Event::Apply(hpa) | watcher::Event::InitApply(hpa) => {
                let (ns, name) = slot(&hpa);
                let rv = hpa.metadata.resource_version.as_deref().unwrap_or("");
                // A copy, not the decoded object: deserialized `Vec`s keep the capacity they
                // grew to (four `MetricSpec`s for one), a clone has what it holds. Stored as
                // decoded, 1,000 HPAs cost 9 MiB more peak RSS (`hpactl bench --hpas 1000`).
                Some(self.hpas.upsert(ns, name, rv, || Arc::new(hpa.clone())))
            }
            watcher::Event::Delete(hpa) => {
                let (ns, name) = slot(&hpa);
                self.hpas.remove(ns, name);
                None
            }
            watcher::Event::Init => {
                self.hpas.begin_relist();
                None
            }
            watcher::Event::InitDone => {
                self.end_relist();
                None
            }
        }
    }

    /// The relist is complete (`InitDone`): the cache is synced; returns the `namespace/name`
    /// of every HPA the relist no longer held (client-go's `DeletedFinalStateUnknown`).
    pub fn end_relist(&self) -> Vec<String> {
        let gone = self
            .hpas
            .end_relist()
            .into_iter()
            .map(|(ns, name, _)| key_of(&ns, &name))
            .collect();
        self.ready.synced();
        gone
    }

    /// `namespace/name`, if cached.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<HorizontalPodAutoscaler>> {
        self.hpas.get(namespace, name)
    }

    /// Every cached HPA.
    pub fn state(&self) -> Vec<Arc<HorizontalPodAutoscaler>> {
        self.hpas.values()
    }

    /// Waits for the first list; an error if the informer stopped before it.
    async fn wait_until_ready(&self) -> Result<(), index::Stopped> {
        self.ready.wait().await
    }
}

impl Caches {
    /// Empty caches and their writers.
    pub fn new() -> (Caches, CacheWriters) {
        let hpas = Arc::new(HpaIndex::default());
        let pods = Arc::new(PodIndex::default());
        (
            Caches {
                hpas: hpas.clone(),
                pods: pods.clone(),
                synced: Arc::new(tokio::sync::OnceCell::new()),
            },
            CacheWriters { hpas, pods },
        )
    }

    /// Spawns the two watchers (all namespaces) on the current runtime. The HPA events go to
    /// `handler` after the cache has applied them, and every `resync` period (unless zero)
    /// every cached HPA goes to `on_update`, in the same task. The pods are listed and watched
    /// in `pod_encoding` (`hpa-protobuf`: protobuf costs the API server about a third of JSON's
    /// CPU for a list of pods); the HPAs in JSON (autoscaling/v2 is served in protobuf too, but
    /// an HPA cache is a tenth of the pods' at ten pods an HPA, and an HPA is read whole, spec
    /// and status, which `hpa-protobuf` does not convert). The tasks run until aborted.
    pub fn start(
        client: kube::Client,
        writers: CacheWriters,
        handler: Arc<dyn HpaEventHandler>,
        resync: Duration,
        pod_encoding: hpa_protobuf::Encoding,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        let CacheWriters {
            hpas: hpa_index,
            pods,
        } = writers;
        let hpa_api: Api<HorizontalPodAutoscaler> = Api::all(client.clone());
        let hpa_events = watcher(hpa_api, watcher::Config::default()).default_backoff();
        let pod_config = hpa_protobuf::Config {
            encoding: pod_encoding,
            ..Default::default()
        };
        let pod_events = hpa_protobuf::watcher::<Pod>(client, pod_config).default_backoff();
        vec![
            tokio::spawn(run_hpa_informer(hpa_events, hpa_index, handler, resync)),
            tokio::spawn(run_pod_informer(pod_events, pods)),
        ]
    }

    /// Waits until both caches have completed their first list
    /// (`cache.WaitForNamedCacheSync`). Fails only if an informer stopped before its first
    /// list.
    pub async fn wait_for_sync(&self) -> Result<(), String> {
        self.synced
            .get_or_try_init(|| async {
                tracing::info!("Waiting for caches to sync");
                self.hpas
                    .wait_until_ready()
                    .await
                    .map_err(|e| format!("HPA cache: {e}"))?;
                self.pods
                    .wait_until_ready()
                    .await
                    .map_err(|e| format!("Pod cache: {e}"))?;
                tracing::info!("Caches are synced");
                Ok::<(), String>(())
            })
            .await
            .map(|_| ())
    }

    /// The cached HPA `namespace/name` (the lister's `Get`).
    pub fn hpa(&self, namespace: &str, name: &str) -> Option<Arc<HorizontalPodAutoscaler>> {
        self.hpas.get(namespace, name)
    }

    /// Every cached HPA.
    pub fn hpas(&self) -> Vec<Arc<HorizontalPodAutoscaler>> {
        self.hpas.state()
    }

    /// `namespace/name` → `resourceVersion` of every cached HPA (for the replay runner's wait).
    pub fn hpa_versions(&self) -> BTreeMap<String, String> {
        self.hpas
            .state()
            .iter()
            .map(|o| {
                (
                    object_key(o.as_ref()),
                    o.meta().resource_version.clone().unwrap_or_default(),
                )
            })
            .collect()
    }

    /// `namespace/name` → `resourceVersion` of every cached Pod.
    pub fn pod_versions(&self) -> BTreeMap<String, String> {
        self.pods.versions()
    }

    /// A [`PodLister`] over the Pod cache.
    pub fn pod_lister(&self) -> CachePodLister {
        CachePodLister {
            pods: self.pods.clone(),
        }
    }
}

/// The HPA informer's loop: apply each watch event to the cache (without `managedFields`),
/// then hand it to `handler`;
/// every `resync` (unless zero), hand every cached HPA to `on_update`. One task does both,
/// so the handler sees a resync and a deletion in the order they happened.
pub async fn run_hpa_informer<S>(
    events: S,
    index: Arc<HpaIndex>,
    handler: Arc<dyn HpaEventHandler>,
    resync: Duration,
) where
    S: Stream<Item = Result<watcher::Event<HorizontalPodAutoscaler>, watcher::Error>> + Send,
{
    let _stopped = index.ready.stop_on_drop();
    let mut events = std::pin::pin!(events);
    let mut ticker = (!resync.is_zero()).then(|| {
        let mut t = tokio::time::interval_at(tokio::time::Instant::now() + resync, resync);
        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        t
    });
    loop {
        let tick = async {
            match ticker.as_mut() {
                Some(t) => {
                    t.tick().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        let event = tokio::select! {
            biased;
            event = events.next() => match event {
                Some(e) => e,
                None => return,
            },
            () = tick => {
                // The handler's resync: every cached HPA, as it is now, to `UpdateFunc`.
                for hpa in index.state() {
                    handler.on_resync(&hpa);
                }
                continue;
            }
        };
        let event = match event {
            Ok(e) => e.modify(trim_managed_fields),
            Err(error) => {
                log_watch_error("*v2.HorizontalPodAutoscaler", &error);
                continue;
            }
        };
        match event {
            watcher::Event::Apply(hpa) | watcher::Event::InitApply(hpa) => {
                let (ns, name) = slot(&hpa);
                // `None`: not cached before this event (`AddFunc`); otherwise the cached
                // object's generation (`UpdateFunc`'s old object).
                let old = index.get(ns, name).map(|old| old.metadata.generation);
                let Some(hpa) = index.apply(watcher::Event::Apply(hpa)) else {
                    continue;
                };
                match old {
                    None => handler.on_add(&hpa),
                    Some(old_generation) => handler.on_update(old_generation, &hpa),
                }
            }
            watcher::Event::Delete(hpa) => {
                let key = object_key(&hpa);
                index.apply(watcher::Event::Delete(hpa));
                handler.on_delete(&key);
            }
            watcher::Event::Init => {
                index.apply(watcher::Event::Init);
            }
            watcher::Event::InitDone => {
                for key in index.end_relist() {
                    handler.on_delete(&key);
                }
            }
        }
    }
}

/// The Pod informer's loop: apply each watch event to the namespace index, without
/// `managedFields`.
pub async fn run_pod_informer<S>(events: S, index: Arc<PodIndex>)
where
    S: Stream<Item = Result<watcher::Event<Pod>, watcher::Error>> + Send,
{
    let _stopped = index.ready.stop_on_drop();
    let mut events = std::pin::pin!(events);
    while let Some(event) = events.next().await {
        match event {
            Ok(e) => index.apply(e.modify(trim_managed_fields)),
            Err(error) => log_watch_error("*v1.Pod", &error),
        }
    }
}

/// The pod lister backed by the Pod cache (`podLister.Pods(ns).List(selector)`).
#[derive(Clone)]
pub struct CachePodLister {
    pods: Arc<PodIndex>,
}

impl std::fmt::Debug for CachePodLister {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachePodLister").finish_non_exhaustive()
    }
}

impl CachePodLister {
    /// The names of the cached pods of `namespace` that `selector` matches, in name order.
    pub fn matching_names(&self, namespace: &str, selector: &Selector) -> Vec<String> {
        self.pods.names_matching(namespace, selector)
    }

    /// Whether the cache holds pod `namespace/name`.
    pub fn contains(&self, namespace: &str, name: &str) -> bool {
        self.pods.contains(namespace, name)
    }
}

impl PodLister for CachePodLister {
    fn list(&self, namespace: &str, selector: &Selector) -> Result<Vec<Arc<Pod>>, PodListError> {
        // One namespace, from the index, already in name order (the informer's indexer order
        // is a Go map's, unspecified; this one is deterministic).
        Ok(self.pods.list_matching(namespace, selector))
    }
}

/// A watcher's error logged as client-go's reflector logs it (`tools/cache/reflector.go`): a
/// list or a watch that could not start is an error (`Failed to watch`, through
/// `HandleError`); an expired watch is closed at V(4) and relisted; any other end of a watch
/// is `Warning: watch ended with error` at V(0).
fn log_watch_error(type_description: &str, error: &watcher::Error) {
    match error {
        watcher::Error::InitialListFailed(_) | watcher::Error::WatchStartFailed(_) => {
            tracing::error!(reflector = "informers", r#type = type_description, %error, "Failed to watch");
        }
        watcher::Error::WatchError(status) if status.code == 410 => {
            tracing::trace!(v = 4, reflector = "informers", r#type = type_description, err = %error, "Watch closed");
        }
        _ => {
            tracing::info!(reflector = "informers", r#type = type_description, err = %error, "Warning: watch ended with error");
        }
    }
}

#[cfg(test)]
mod tests;
