//! Scale targets read from watch caches instead of one GET of `/scale` per reconcile.
//!
//! No upstream counterpart: upstream's `scaleForResourceMappings` GETs the scale subresource
//! every time. Here, the first read of a resource (group, version, resource) starts one
//! cluster-wide watch of it; each object is kept as a [`ScaleProjection`] (what a `Scale`
//! holds), indexed by namespace. A read is answered from the cache once the watch has
//! listed; before that, for an object the cache does not hold (or cannot project), and for
//! a resource it cannot watch, the read is the GET upstream does, so a decision never rests
//! on less than the API's answer. Built-in workloads (Deployments, StatefulSets,
//! ReplicaSets, ReplicationControllers) are projected with the API server's own rules; a
//! custom resource through its CRD's `subresources.scale` paths (one GET of the CRD). A
//! resource whose CRD or list is refused (RBAC), or that is not a CRD, is read with GETs,
//! logged once. Writes, and the re-read after a conflict, go to the API
//! ([`ScaleClient::get_scale_live`]): a cache can be behind the object a PUT conflicted with.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};

use futures::{Stream, StreamExt};
use k8s_openapi::api::autoscaling::v1::Scale;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;

use crate::scale_client::{ResourceMapping, ScaleClient, ScaleError};
use crate::scale_projection::{ScaleProjection, ScaleSource, builtin_source, crd_scale_paths};

/// One cached object: its resourceVersion, and its projection unless it could not be
/// projected (its scale is then read with a GET).
#[derive(Debug)]
struct Entry {
    resource_version: String,
    projection: Option<ScaleProjection>,
}

impl Entry {
    fn of(obj: &DynamicObject, source: &ScaleSource) -> Entry {
        let projection = ScaleProjection::project(&obj.metadata, &obj.data, source)
            .map_err(|error| {
                tracing::debug!(
                    name = obj.metadata.name.as_deref().unwrap_or(""),
                    %error,
                    "scale target not projected; its scale is read with a GET"
                );
            })
            .ok();
        Entry {
            resource_version: obj.metadata.resource_version.clone().unwrap_or_default(),
            projection,
        }
    }
}

/// namespace → name → entry.
type Objects = HashMap<String, HashMap<String, Entry>>;

/// Whether a resource's cache can answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Finding out how to project, or listing.
    Starting,
    /// Listed; answers reads.
    Synced,
    /// Read with GETs (no scale paths, or list/watch refused).
    Unavailable,
}

/// The cache of one resource.
#[derive(Debug)]
struct ResourceCache {
    phase: RwLock<Phase>,
    objects: RwLock<Objects>,
    /// The relist being received (between `Init` and `InitDone`).
    relist: Mutex<Option<Objects>>,
}

impl ResourceCache {
    fn new() -> Self {
        ResourceCache {
            phase: RwLock::new(Phase::Starting),
            objects: RwLock::new(HashMap::new()),
            relist: Mutex::new(None),
        }
    }

    fn phase(&self) -> Phase {
        *self.phase.read().unwrap_or_else(|p| p.into_inner())
    }

    fn set_phase(&self, phase: Phase) {
        *self.phase.write().unwrap_or_else(|p| p.into_inner()) = phase;
    }

    fn apply(&self, event: watcher::Event<DynamicObject>, source: &ScaleSource) {
        let slot = |o: &DynamicObject| {
            (
                o.metadata.namespace.clone().unwrap_or_default(),
                o.metadata.name.clone().unwrap_or_default(),
            )
        };
        match event {
            watcher::Event::Apply(obj) => {
                let (ns, name) = slot(&obj);
                let entry = Entry::of(&obj, source);
                self.write().entry(ns).or_default().insert(name, entry);
            }
            watcher::Event::Delete(obj) => {
                let (ns, name) = slot(&obj);
                let mut objects = self.write();
                if let Some(names) = objects.get_mut(&ns) {
                    names.remove(&name);
                    if names.is_empty() {
                        objects.remove(&ns);
                    }
                }
            }
            watcher::Event::Init => {
                *self.relist.lock().unwrap_or_else(|p| p.into_inner()) = Some(HashMap::new());
            }
            watcher::Event::InitApply(obj) => {
                let (ns, name) = slot(&obj);
                let entry = Entry::of(&obj, source);
                self.relist
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get_or_insert_with(HashMap::new)
                    .entry(ns)
                    .or_default()
                    .insert(name, entry);
            }
            watcher::Event::InitDone => {
                let fresh = self
                    .relist
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .take()
                    .unwrap_or_default();
                *self.write() = fresh;
                self.set_phase(Phase::Synced);
            }
        }
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Objects> {
        self.objects.write().unwrap_or_else(|p| p.into_inner())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Objects> {
        self.objects.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The cached scale of `namespace/name`, if held and projected.
    fn scale(&self, namespace: &str, name: &str) -> Option<Scale> {
        let objects = self.read();
        let entry = objects.get(namespace)?.get(name)?;
        entry.projection.as_ref().map(|p| p.to_scale(namespace))
    }

    fn versions(&self) -> BTreeMap<String, String> {
        self.read()
            .iter()
            .flat_map(|(ns, names)| {
                names.iter().map(move |(name, e)| {
                    let key = if ns.is_empty() {
                        name.clone()
                    } else {
                        format!("{ns}/{name}")
                    };
                    (key, e.resource_version.clone())
                })
            })
            .collect()
    }
}

/// (group, version, resource).
type ResourceKey = (String, String, String);

/// The watch caches of scale targets, one per resource, started on first use.
pub struct ScaleTargetCache {
    client: kube::Client,
    resources: Mutex<HashMap<ResourceKey, Arc<ResourceCache>>>,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl std::fmt::Debug for ScaleTargetCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScaleTargetCache").finish_non_exhaustive()
    }
}

impl ScaleTargetCache {
    /// An empty cache whose watches list and watch through `client` (the informers').
    pub fn new(client: kube::Client) -> Self {
        ScaleTargetCache {
            client,
            resources: Mutex::new(HashMap::new()),
            tasks: Mutex::new(Vec::new()),
        }
    }

    /// The cache of `mapping`'s resource, starting its watch (on the current runtime) if this
    /// is the first use.
    fn resource(&self, mapping: &ResourceMapping) -> Arc<ResourceCache> {
        let key = (
            mapping.group.clone(),
            mapping.version.clone(),
            mapping.resource.clone(),
        );
        let mut resources = self.resources.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(cache) = resources.get(&key) {
            return cache.clone();
        }
        let cache = Arc::new(ResourceCache::new());
        resources.insert(key, cache.clone());
        drop(resources);
        let task = tokio::spawn(run_resource(
            self.client.clone(),
            mapping.clone(),
            cache.clone(),
        ));
        self.tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(task);
        cache
    }

    /// The scale of `namespace/name` from the cache of `mapping`'s resource, if that cache
    /// has listed, holds the object and could project it.
    pub fn scale(&self, namespace: &str, mapping: &ResourceMapping, name: &str) -> Option<Scale> {
        let cache = self.resource(mapping);
        if cache.phase() != Phase::Synced {
            return None;
        }
        cache.scale(namespace, name)
    }

    /// For every resource whose cache has listed: (group, resource) and
    /// `namespace/name` → resourceVersion (the replay runner's wait).
    pub fn versions(&self) -> Vec<((String, String), BTreeMap<String, String>)> {
        let resources = self.resources.lock().unwrap_or_else(|p| p.into_inner());
        resources
            .iter()
            .filter(|(_, c)| c.phase() == Phase::Synced)
            .map(|((g, _, r), c)| ((g.clone(), r.clone()), c.versions()))
            .collect()
    }

    /// Stops every watch.
    pub fn stop(&self) {
        for task in self
            .tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            task.abort();
        }
    }
}

impl Drop for ScaleTargetCache {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether an API error means "this client may not (or cannot) list this": the cache then
/// gives the resource up, rather than retrying forever.
fn refused(code: u16) -> bool {
    matches!(code, 401 | 403 | 404 | 405)
}

/// How the objects of `mapping` are projected: built-in rules, or the CRD's scale paths.
async fn scale_source(
    client: &kube::Client,
    mapping: &ResourceMapping,
) -> Result<ScaleSource, String> {
    if let Some(source) = builtin_source(&mapping.group, &mapping.resource) {
        return Ok(source);
    }
    let path = format!(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{}.{}",
        mapping.resource, mapping.group
    );
    let request = http::Request::get(path)
        .header(http::header::ACCEPT, "application/json")
        .body(Vec::new())
        .map_err(|e| e.to_string())?;
    let crd: Value = client.request(request).await.map_err(|e| {
        format!(
            "reading its CustomResourceDefinition: {}",
            hpa_metrics::kube_error_message(&e)
        )
    })?;
    crd_scale_paths(&crd, &mapping.version)
        .map(ScaleSource::Custom)
        .ok_or_else(|| {
            format!(
                "its CustomResourceDefinition declares no scale subresource for version {}",
                mapping.version
            )
        })
}

/// Finds how to project `mapping`'s objects, then lists and watches them into `cache` until
/// aborted; gives up (the resource is read with GETs) when that is refused.
async fn run_resource(client: kube::Client, mapping: ResourceMapping, cache: Arc<ResourceCache>) {
    let gr = mapping.group_resource();
    let source = match scale_source(&client, &mapping).await {
        Ok(s) => s,
        Err(reason) => {
            give_up(&cache, &gr, &reason);
            return;
        }
    };
    let api_version = if mapping.group.is_empty() {
        mapping.version.clone()
    } else {
        format!("{}/{}", mapping.group, mapping.version)
    };
    let resource = ApiResource {
        group: mapping.group.clone(),
        version: mapping.version.clone(),
        api_version,
        kind: String::new(),
        plural: mapping.resource.clone(),
    };
    let api: kube::Api<DynamicObject> = kube::Api::all_with(client, &resource);
    let events = watcher(api, watcher::Config::default()).default_backoff();
    run_watch(events, &cache, &source, &gr).await;
}

fn give_up(cache: &ResourceCache, gr: &str, reason: &str) {
    tracing::info!(
        resource = gr,
        reason,
        "Scale target cache: the scale of this resource is read with a GET per reconcile"
    );
    cache.set_phase(Phase::Unavailable);
}

/// Applies watch events to `cache` until the stream ends; a list refused before the first
/// sync gives the resource up.
async fn run_watch<S>(events: S, cache: &ResourceCache, source: &ScaleSource, gr: &str)
where
    S: Stream<Item = Result<watcher::Event<DynamicObject>, watcher::Error>>,
{
    let mut events = std::pin::pin!(events);
    let mut logged = false;
    while let Some(event) = events.next().await {
        match event {
            Ok(e) => cache.apply(e, source),
            Err(watcher::Error::InitialListFailed(kube::Error::Api(status)))
                if cache.phase() == Phase::Starting && refused(status.code) =>
            {
                let reason = format!("list refused: {}", status.message);
                give_up(cache, gr, &reason);
                return;
            }
            Err(error) => {
                if !logged {
                    tracing::warn!(resource = gr, %error, "Scale target watch failed");
                    logged = true;
                }
            }
        }
    }
}

/// A [`ScaleClient`] whose scale reads come from a [`ScaleTargetCache`] where it can answer,
/// and from `inner` (the API) otherwise; mappings, writes and live reads go to `inner`.
pub struct CachedScaleClient {
    inner: Arc<dyn ScaleClient>,
    cache: Arc<ScaleTargetCache>,
}

impl std::fmt::Debug for CachedScaleClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedScaleClient").finish_non_exhaustive()
    }
}

impl CachedScaleClient {
    /// Reads through `cache`, falling back to `inner`.
    pub fn new(inner: Arc<dyn ScaleClient>, cache: Arc<ScaleTargetCache>) -> Self {
        CachedScaleClient { inner, cache }
    }
}

#[async_trait::async_trait]
impl ScaleClient for CachedScaleClient {
    async fn rest_mappings(
        &self,
        group: &str,
        kind: &str,
    ) -> Result<Vec<ResourceMapping>, ScaleError> {
        self.inner.rest_mappings(group, kind).await
    }

    async fn get_scale(
        &self,
        namespace: &str,
        mapping: &ResourceMapping,
        name: &str,
    ) -> Result<Scale, ScaleError> {
        match self.cache.scale(namespace, mapping, name) {
            Some(scale) => Ok(scale),
            None => self.inner.get_scale(namespace, mapping, name).await,
        }
    }

    async fn get_scale_live(
        &self,
        namespace: &str,
        mapping: &ResourceMapping,
        name: &str,
    ) -> Result<Scale, ScaleError> {
        self.inner.get_scale_live(namespace, mapping, name).await
    }

    async fn update_scale(
        &self,
        namespace: &str,
        mapping: &ResourceMapping,
        scale: &Scale,
    ) -> Result<Scale, ScaleError> {
        self.inner.update_scale(namespace, mapping, scale).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(ns: &str, name: &str, rv: &str, replicas: i32) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"namespace": ns, "name": name, "resourceVersion": rv,
                         "managedFields": [{"manager": "kubectl"}],
                         "annotations": {"big": "x".repeat(1000)}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}}},
            "status": {"replicas": replicas},
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn answers_after_the_list_and_follows_the_watch() {
        let cache = ResourceCache::new();
        let source = ScaleSource::Apps;
        let events = futures::stream::iter(vec![
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(deployment("a", "web", "1", 2))),
            Ok(watcher::Event::InitApply(deployment("b", "web", "2", 3))),
        ]);
        run_watch(events, &cache, &source, "deployments.apps").await;
        // Not listed yet: no answers (reads go to the API).
        assert_eq!(cache.phase(), Phase::Starting);
        let events = futures::stream::iter(vec![
            Ok(watcher::Event::InitDone),
            Ok(watcher::Event::Apply(deployment("a", "web", "5", 4))),
            Ok(watcher::Event::Delete(deployment("b", "web", "2", 3))),
        ]);
        run_watch(events, &cache, &source, "deployments.apps").await;
        assert_eq!(cache.phase(), Phase::Synced);
        let scale = cache.scale("a", "web").unwrap();
        assert_eq!(scale.metadata.resource_version.as_deref(), Some("5"));
        assert_eq!(scale.spec.unwrap().replicas, Some(4));
        assert_eq!(scale.status.unwrap().selector.as_deref(), Some("app=web"));
        assert!(cache.scale("b", "web").is_none());
        assert_eq!(
            cache.versions(),
            BTreeMap::from([("a/web".to_owned(), "5".to_owned())])
        );
    }

    #[tokio::test]
    async fn a_refused_list_gives_the_resource_up() {
        let cache = ResourceCache::new();
        let status = kube::core::Status::failure("deployments.apps is forbidden", "Forbidden")
            .with_code(403);
        let events = futures::stream::iter(vec![Err(watcher::Error::InitialListFailed(
            kube::Error::Api(Box::new(status)),
        ))]);
        run_watch(events, &cache, &ScaleSource::Apps, "deployments.apps").await;
        assert_eq!(cache.phase(), Phase::Unavailable);
    }

    #[test]
    fn an_object_that_cannot_be_projected_is_held_without_a_scale() {
        let cache = ResourceCache::new();
        let mut bad = deployment("a", "web", "1", 2);
        bad.data["spec"]["replicas"] = json!("two");
        cache.apply(watcher::Event::Init, &ScaleSource::Apps);
        cache.apply(watcher::Event::InitApply(bad), &ScaleSource::Apps);
        cache.apply(watcher::Event::InitDone, &ScaleSource::Apps);
        assert!(cache.scale("a", "web").is_none());
        assert_eq!(cache.versions().len(), 1);
    }
}
