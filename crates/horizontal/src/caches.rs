//! The controller's informer caches: `autoscaling/v2` HorizontalPodAutoscalers and `v1` Pods
//! (spec §2.2), with the HPA add/update/delete handlers (spec §2.3).
//!
//! Mirrors the shared informers upstream `pkg/controller/podautoscaler/horizontal.go`
//! (`NewHorizontalController`) registers on: the HPA informer with its handlers and the pod
//! lister used by the replica calculator and the ambiguous-selector check. Here each cache is a
//! `kube::runtime` watcher feeding a reflector store; the HPA watcher's events are also handed
//! to a [`HpaEventHandler`]. A relist (watch restart) that no longer contains an object is
//! reported as a deletion, as client-go's `DeletedFinalStateUnknown` tombstones are.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::StreamExt;
use hpa_metrics::Selector;
use hpa_replica_calculator::{PodListError, PodLister};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::{ObjectRef, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};

/// What the HPA informer tells the controller (upstream's `ResourceEventHandlerFuncs`).
pub trait HpaEventHandler: Send + Sync + 'static {
    /// An HPA appeared in the cache (`AddFunc`).
    fn on_add(&self, hpa: &HorizontalPodAutoscaler);
    /// An HPA changed, or a resync re-delivered it (`UpdateFunc`).
    fn on_update(&self, hpa: &HorizontalPodAutoscaler);
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
    pods: Store<Pod>,
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
    hpas: Writer<HorizontalPodAutoscaler>,
    pods: Writer<Pod>,
}

impl std::fmt::Debug for CacheWriters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheWriters").finish_non_exhaustive()
    }
}

impl Caches {
    /// Empty caches and their writers.
    pub fn new() -> (Caches, CacheWriters) {
        let hpas = Writer::default();
        let pods = Writer::default();
        (
            Caches {
                hpas: hpas.as_reader(),
                pods: pods.as_reader(),
                synced: Arc::new(tokio::sync::OnceCell::new()),
            },
            CacheWriters { hpas, pods },
        )
    }

    /// Spawns the two watchers (all namespaces) on the current runtime. The HPA events go to
    /// `handler` after the cache has applied them. The tasks run until aborted.
    pub fn start(
        client: kube::Client,
        writers: CacheWriters,
        handler: Arc<dyn HpaEventHandler>,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        let CacheWriters {
            hpas: mut hpa_writer,
            pods: mut pod_writer,
        } = writers;
        let hpa_api: Api<HorizontalPodAutoscaler> = Api::all(client.clone());
        let pod_api: Api<Pod> = Api::all(client);
        let hpa_task = tokio::spawn(async move {
            let mut known: BTreeSet<String> = BTreeSet::new();
            let mut relisted: BTreeSet<String> = BTreeSet::new();
            let mut stream = watcher(hpa_api, watcher::Config::default())
                .default_backoff()
                .boxed();
            while let Some(event) = stream.next().await {
                let event = match event {
                    Ok(e) => e,
                    Err(error) => {
                        tracing::warn!(%error, "HPA watch failed");
                        continue;
                    }
                };
                hpa_writer.apply_watcher_event(&event);
                match &event {
                    watcher::Event::Apply(hpa) => {
                        let key = object_key(hpa);
                        if known.insert(key) {
                            handler.on_add(hpa);
                        } else {
                            handler.on_update(hpa);
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
                            handler.on_update(hpa);
                        }
                    }
                    watcher::Event::InitDone => {
                        let gone: Vec<String> = known.difference(&relisted).cloned().collect();
                        for key in gone {
                            known.remove(&key);
                            handler.on_delete(&key);
                        }
                    }
                }
            }
        });
        let pod_task = tokio::spawn(async move {
            let mut stream = watcher(pod_api, watcher::Config::default())
                .default_backoff()
                .boxed();
            while let Some(event) = stream.next().await {
                match event {
                    Ok(e) => pod_writer.apply_watcher_event(&e),
                    Err(error) => tracing::warn!(%error, "Pod watch failed"),
                }
            }
        });
        vec![hpa_task, pod_task]
    }

    /// Waits until both caches have completed their first list
    /// (`cache.WaitForNamedCacheSync`). Fails only if the writers were dropped.
    pub async fn wait_for_sync(&self) -> Result<(), String> {
        self.synced
            .get_or_try_init(|| async {
                tracing::info!("Waiting for caches to sync for HPA");
                self.hpas
                    .wait_until_ready()
                    .await
                    .map_err(|e| e.to_string())?;
                self.pods
                    .wait_until_ready()
                    .await
                    .map_err(|e| e.to_string())?;
                tracing::info!("Caches are synced for HPA");
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
        versions(&self.hpas)
    }

    /// `namespace/name` → `resourceVersion` of every cached Pod.
    pub fn pod_versions(&self) -> BTreeMap<String, String> {
        versions(&self.pods)
    }

    /// A [`PodLister`] over the Pod cache.
    pub fn pod_lister(&self) -> CachePodLister {
        CachePodLister {
            pods: self.pods.clone(),
        }
    }
}

fn versions<K>(store: &Store<K>) -> BTreeMap<String, String>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    store
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

/// The pod lister backed by the Pod cache (`podLister.Pods(ns).List(selector)`).
#[derive(Clone)]
pub struct CachePodLister {
    pods: Store<Pod>,
}

impl std::fmt::Debug for CachePodLister {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachePodLister").finish_non_exhaustive()
    }
}

impl PodLister for CachePodLister {
    fn list(&self, namespace: &str, selector: &Selector) -> Result<Vec<Arc<Pod>>, PodListError> {
        let empty = BTreeMap::new();
        let mut pods = self.pods.state_filter(|p| {
            p.metadata.namespace.as_deref() == Some(namespace)
                && selector.matches(p.metadata.labels.as_ref().unwrap_or(&empty))
        });
        // A deterministic order (the informer's indexer order is a Go map's, unspecified).
        pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        Ok(pods)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        assert_eq!(split_key("default/web"), Ok(("default", "web")));
        assert_eq!(split_key("web"), Ok(("", "web")));
        assert!(split_key("a/b/c").is_err());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn concurrent_waiters_all_see_the_sync() {
        let (caches, mut writers) = Caches::new();
        let waiter = |c: Caches| tokio::spawn(async move { c.wait_for_sync().await });
        let a = waiter(caches.clone());
        let b = waiter(caches.clone());
        // Let both waiters poll (and park) before the caches become ready.
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(!a.is_finished() && !b.is_finished());
        writers.hpas.apply_watcher_event(&watcher::Event::Init);
        writers.hpas.apply_watcher_event(&watcher::Event::InitDone);
        writers.pods.apply_watcher_event(&watcher::Event::Init);
        writers.pods.apply_watcher_event(&watcher::Event::InitDone);
        let both = async { (a.await, b.await) };
        let (ra, rb) = tokio::time::timeout(std::time::Duration::from_secs(5), both)
            .await
            .expect("both waiters are woken");
        assert_eq!(ra.unwrap(), Ok(()));
        assert_eq!(rb.unwrap(), Ok(()));
    }
}
