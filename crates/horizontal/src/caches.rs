//! The controller's informer caches: `autoscaling/v2` HorizontalPodAutoscalers and `v1` Pods
//! (`NewHorizontalController`), with the HPA handlers `enqueueHPA`, `updateHPA` and `deleteHPA`.
//!
//! Mirrors the shared informers upstream `pkg/controller/podautoscaler/horizontal.go`
//! (`NewHorizontalController`) registers on: the HPA informer with its handlers and the pod
//! lister used by the replica calculator and the ambiguous-selector check. Here each cache is a
//! `kube::runtime` watcher feeding a reflector store; the HPA watcher's events are also handed
//! to a [`HpaEventHandler`]. A relist (watch restart) that no longer contains an object is
//! reported as a deletion, as client-go's `DeletedFinalStateUnknown` tombstones are.
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

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::{Stream, StreamExt};
use hpa_metrics::Selector;
use hpa_replica_calculator::{PodListError, PodLister};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::{ObjectRef, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};

use crate::pod_projection::{PodInterners, PodProjection};

/// What the HPA informer tells the controller (upstream's `ResourceEventHandlerFuncs`).
pub trait HpaEventHandler: Send + Sync + 'static {
    /// An HPA appeared in the cache (`AddFunc`).
    fn on_add(&self, hpa: &HorizontalPodAutoscaler);
    /// An HPA changed, or a resync re-delivered it (`UpdateFunc`); `old_generation` is the
    /// cached object's `metadata.generation` before this event (the same object's on a
    /// resync).
    fn on_update(&self, old_generation: Option<i64>, hpa: &HorizontalPodAutoscaler);
    /// An HPA left the cache (`DeleteFunc`); `key` is `namespace/name`.
    fn on_delete(&self, key: &str);
}

/// `namespace/name` of an object (client-go's `MetaNamespaceKeyFunc`).
pub fn object_key<K: Resource>(obj: &K) -> String {
    let meta = obj.meta();
    let name = meta.name.as_deref().unwrap_or("");
    match meta.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_owned(),
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
    hpas: Store<HorizontalPodAutoscaler>,
    pods: Arc<PodIndex>,
    /// Serialises [`Caches::wait_for_sync`]: kube's `Store::wait_until_ready` keeps a single
    /// waker, so of several concurrent waiters only the last one polled would be woken.
    synced: Arc<tokio::sync::OnceCell<()>>,
}

impl std::fmt::Debug for Caches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caches").finish_non_exhaustive()
    }
}

/// The writers of the caches, consumed by [`Caches::start`].
pub struct CacheWriters {
    pub(crate) hpas: Writer<HorizontalPodAutoscaler>,
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

/// namespace → name → pod.
type Namespaces = HashMap<String, BTreeMap<String, Arc<PodProjection>>>;

/// The Pod cache, indexed by namespace: namespace → name → pod (name order, so lists need no
/// sort), each pod kept as a [`PodProjection`]. A namespace without pods has no entry.
#[derive(Default)]
pub struct PodIndex {
    by_namespace: RwLock<Namespaces>,
    /// The relist being received (between `Init` and `InitDone`).
    relist: std::sync::Mutex<Option<Namespaces>>,
    ready: tokio::sync::watch::Sender<bool>,
    interners: PodInterners,
}

impl std::fmt::Debug for PodIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PodIndex").finish_non_exhaustive()
    }
}

fn pod_slot(pod: &Pod) -> (String, String) {
    (
        pod.metadata.namespace.clone().unwrap_or_default(),
        pod.metadata.name.clone().unwrap_or_default(),
    )
}

impl PodIndex {
    /// Applies one watch event (the reflector's store update).
    pub fn apply(&self, event: watcher::Event<Pod>) {
        match event {
            watcher::Event::Apply(pod) => {
                let (ns, name) = pod_slot(&pod);
                self.write()
                    .entry(ns)
                    .or_default()
                    .insert(name, Arc::new(PodProjection::of(&pod, &self.interners)));
            }
            watcher::Event::Delete(pod) => {
                let (ns, name) = pod_slot(&pod);
                let mut g = self.write();
                if let Some(pods) = g.get_mut(&ns) {
                    pods.remove(&name);
                    if pods.is_empty() {
                        g.remove(&ns);
                    }
                }
            }
            watcher::Event::Init => {
                *self.relist.lock().unwrap_or_else(|p| p.into_inner()) = Some(HashMap::new());
            }
            watcher::Event::InitApply(pod) => {
                let (ns, name) = pod_slot(&pod);
                let mut relist = self.relist.lock().unwrap_or_else(|p| p.into_inner());
                relist
                    .get_or_insert_with(HashMap::new)
                    .entry(ns)
                    .or_default()
                    .insert(name, Arc::new(PodProjection::of(&pod, &self.interners)));
            }
            watcher::Event::InitDone => {
                let fresh = self
                    .relist
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .take()
                    .unwrap_or_default();
                *self.write() = fresh;
                self.ready.send_replace(true);
            }
        }
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Namespaces> {
        self.by_namespace.write().unwrap_or_else(|p| p.into_inner())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Namespaces> {
        self.by_namespace.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The pods of `namespace` that `keep` accepts, in name order, as the calculator reads
    /// them ([`PodProjection::to_pod`]).
    pub fn list_namespace(
        &self,
        namespace: &str,
        keep: impl Fn(&PodProjection) -> bool,
    ) -> Vec<Arc<Pod>> {
        self.read().get(namespace).map_or_else(Vec::new, |pods| {
            pods.values()
                .filter(|p| keep(p))
                .map(|p| Arc::new(p.to_pod(namespace)))
                .collect()
        })
    }

    /// The names of the pods of `namespace` that `selector` matches, in name order.
    pub fn names_matching(&self, namespace: &str, selector: &Selector) -> Vec<String> {
        self.read().get(namespace).map_or_else(Vec::new, |pods| {
            pods.iter()
                .filter(|(_, p)| p.matches(selector))
                .map(|(name, _)| name.clone())
                .collect()
        })
    }

    /// Whether pod `namespace/name` is cached.
    pub fn contains(&self, namespace: &str, name: &str) -> bool {
        self.read()
            .get(namespace)
            .is_some_and(|pods| pods.contains_key(name))
    }

    /// The number of namespaces with cached pods (tests check the index drops empty ones).
    #[cfg(test)]
    pub fn namespaces(&self) -> usize {
        self.read().len()
    }

    /// Whether the first list has been received.
    async fn wait_until_ready(&self) {
        let mut rx = self.ready.subscribe();
        let _ = rx.wait_for(|r| *r).await;
    }

    fn versions(&self) -> BTreeMap<String, String> {
        self.read()
            .iter()
            .flat_map(|(ns, pods)| {
                pods.iter().map(move |(name, p)| {
                    (
                        if ns.is_empty() {
                            name.clone()
                        } else {
                            format!("{ns}/{name}")
                        },
                        p.resource_version().to_owned(),
                    )
                })
            })
            .collect()
    }
}

impl Caches {
    /// Empty caches and their writers.
    pub fn new() -> (Caches, CacheWriters) {
        let hpas = Writer::default();
        let pods = Arc::new(PodIndex::default());
        (
            Caches {
                hpas: hpas.as_reader(),
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
            hpas: hpa_writer,
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
            tokio::spawn(run_hpa_informer(hpa_events, hpa_writer, handler, resync)),
            tokio::spawn(run_pod_informer(pod_events, pods)),
        ]
    }

    /// Waits until both caches have completed their first list
    /// (`cache.WaitForNamedCacheSync`). Fails only if the writers were dropped.
    pub async fn wait_for_sync(&self) -> Result<(), String> {
        self.synced
            .get_or_try_init(|| async {
                tracing::info!("Waiting for caches to sync");
                self.hpas
                    .wait_until_ready()
                    .await
                    .map_err(|e| e.to_string())?;
                self.pods.wait_until_ready().await;
                tracing::info!("Caches are synced");
                Ok::<(), String>(())
            })
            .await
            .map(|_| ())
    }

    /// The cached HPA `namespace/name` (the lister's `Get`).
    pub fn hpa(&self, namespace: &str, name: &str) -> Option<Arc<HorizontalPodAutoscaler>> {
        self.hpas.get(&ObjectRef::new(name).within(namespace))
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
    mut writer: Writer<HorizontalPodAutoscaler>,
    handler: Arc<dyn HpaEventHandler>,
    resync: Duration,
) where
    S: Stream<Item = Result<watcher::Event<HorizontalPodAutoscaler>, watcher::Error>> + Send,
{
    let mut events = std::pin::pin!(events);
    let store = writer.as_reader();
    let mut known: BTreeSet<String> = BTreeSet::new();
    let mut relisted: BTreeSet<String> = BTreeSet::new();
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
                for hpa in store.state() {
                    handler.on_update(hpa.metadata.generation, &hpa);
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
        let old_generation = match &event {
            watcher::Event::Apply(hpa) | watcher::Event::InitApply(hpa) => store
                .get(&ObjectRef::from_obj(hpa))
                .and_then(|old| old.metadata.generation),
            _ => None,
        };
        writer.apply_watcher_event(&event);
        match &event {
            watcher::Event::Apply(hpa) => {
                let key = object_key(hpa);
                if known.insert(key) {
                    handler.on_add(hpa);
                } else {
                    handler.on_update(old_generation, hpa);
                }
            }
            watcher::Event::Delete(hpa) => {
                let key = object_key(hpa);
                known.remove(&key);
                handler.on_delete(&key);
            }
            watcher::Event::Init => relisted.clear(),
            watcher::Event::InitApply(hpa) => {
                let key = object_key(hpa);
                relisted.insert(key.clone());
                if known.insert(key) {
                    handler.on_add(hpa);
                } else {
                    handler.on_update(old_generation, hpa);
                }
            }
            watcher::Event::InitDone => {
                let gone: Vec<String> = known.difference(&relisted).cloned().collect();
                for key in gone {
                    known.remove(&key);
                    handler.on_delete(&key);
                }
                relisted.clear();
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
        Ok(self.pods.list_namespace(namespace, |p| p.matches(selector)))
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
