//! Scale targets read from watch caches instead of one GET of `/scale` per reconcile.
//!
//! No upstream counterpart: upstream's `scaleForResourceMappings` GETs the scale subresource
//! every time. Here, the first read of a resource (group, version, resource) starts one
//! cluster-wide list and watch of it; each object is kept as a [`ScaleProjection`] (what a
//! `Scale` holds), indexed by namespace. Built-in workloads (Deployments, StatefulSets,
//! ReplicaSets, ReplicationControllers) are projected with the API server's own rules; a
//! custom resource through its CRD's `subresources.scale` paths (the CRD is read, then watched).
//!
//! A read is answered from the cache only while the cache is *healthy*: it has listed, its
//! watch has had no error since, and it has heard from the server (an event, a bookmark, or
//! the end of a watch at its `timeoutSeconds`) within [`SILENCE_BOUND`]. Otherwise, and for an
//! object the cache does not hold or cannot project, the read is the GET upstream does. Any
//! error of the watch (refused, expired with 410, a network fault, silence) makes the cache
//! *stale*: it is then read with GETs until it has listed again (after a backoff), and a
//! custom resource's CRD changing its scale paths does the same. So a decision never rests on
//! a scale older than [`SILENCE_BOUND`] plus the watch's delivery delay. A resource whose CRD
//! declares no scale subresource, or whose first list is refused (RBAC), is read with GETs for
//! good. Every change of state is logged; `kube_hpa_controller_scale_target_cache_state`
//! shows each resource's state and `kube_hpa_controller_scale_target_reads_total` counts reads
//! by source. Writes, and the re-read after a conflict, go to the API
//! ([`ScaleClient::get_scale_live`]): a cache can be behind the object a PUT conflicted with.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::autoscaling::v1::Scale;
use kube::api::{ApiResource, DynamicObject, ListParams, WatchEvent, WatchParams};
use prometheus::{IntCounterVec, IntGaugeVec, Opts, Registry};
use tokio::time::Instant;

use crate::scale_client::{ReadSource, ResourceMapping, ScaleClient, ScaleError};
use crate::scale_projection::{ScaleProjection, ScaleSource, builtin_source, crd_scale_paths};

/// How long each watch request lasts (`timeoutSeconds`): the server ends it then and it is
/// started again from the last resourceVersion, so a healthy watch is heard from at least
/// this often even when nothing changes.
pub const WATCH_TIMEOUT_SECS: u32 = 30;

/// How long a cache may go without hearing from its watch (an event, a bookmark, the end of a
/// watch request) before it stops answering and relists: a connection that died silently.
pub const SILENCE_BOUND: Duration = Duration::from_secs(40);

/// The first wait before listing again after a failure; doubled on each failure up to
/// [`MAX_BACKOFF`], reset by a successful list.
const FIRST_BACKOFF: Duration = Duration::from_millis(800);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Objects per page of a (re)list.
const LIST_PAGE: u32 = 500;

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

/// Whether a resource's cache answers reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheState {
    /// Finding out how to project, or listing for the first time: reads are GETs.
    Starting,
    /// Listed, and the watch is healthy: reads are answered from the cache.
    Synced,
    /// The watch failed (or went silent, or the CRD's scale paths changed): reads are GETs
    /// until the resource has listed again.
    Stale,
    /// Read with GETs for good (no scale paths, or the first list refused).
    Unavailable,
}

impl CacheState {
    /// The `state` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            CacheState::Starting => "starting",
            CacheState::Synced => "synced",
            CacheState::Stale => "stale",
            CacheState::Unavailable => "unavailable",
        }
    }

    const ALL: [CacheState; 4] = [
        CacheState::Starting,
        CacheState::Synced,
        CacheState::Stale,
        CacheState::Unavailable,
    ];
}

/// The scale cache's own metrics (no upstream counterpart).
#[derive(Debug, Clone)]
pub struct ScaleCacheMetrics {
    /// `kube_hpa_controller_scale_target_reads_total{source}`: scale reads of reconciles,
    /// `cache` or `get`.
    reads: IntCounterVec,
    /// `kube_hpa_controller_scale_target_cache_state{resource,state}`: 1 for each resource's
    /// current state, 0 for the others.
    state: IntGaugeVec,
}

impl ScaleCacheMetrics {
    /// Registers the metrics into `registry`.
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let reads = IntCounterVec::new(
            Opts::new(
                "kube_hpa_controller_scale_target_reads_total",
                "Scale target reads of reconciles by source: the scale target cache (cache) or a GET of the scale subresource (get).",
            ),
            &["source"],
        )?;
        let state = IntGaugeVec::new(
            Opts::new(
                "kube_hpa_controller_scale_target_cache_state",
                "The state of each resource's scale target cache (starting, synced, stale, unavailable): 1 for the current state. Only a synced cache answers reads.",
            ),
            &["resource", "state"],
        )?;
        registry.register(Box::new(reads.clone()))?;
        registry.register(Box::new(state.clone()))?;
        Ok(ScaleCacheMetrics { reads, state })
    }

    /// Counts one scale read from `source`.
    pub fn observe_read(&self, source: ReadSource) {
        let label = match source {
            ReadSource::Cache => "cache",
            ReadSource::Api => "get",
        };
        self.reads.with_label_values(&[label]).inc();
    }

    fn set_state(&self, resource: &str, now: CacheState) {
        for s in CacheState::ALL {
            self.state
                .with_label_values(&[resource, s.as_str()])
                .set(i64::from(s == now));
        }
    }
}

/// The cache of one resource.
#[derive(Debug)]
struct ResourceCache {
    /// `resource.group`, for logs and the state metric.
    resource: String,
    state: RwLock<CacheState>,
    objects: RwLock<Objects>,
    /// When the watch was last heard from.
    heard: Mutex<Instant>,
    metrics: Option<ScaleCacheMetrics>,
}

impl ResourceCache {
    fn new(resource: String, metrics: Option<ScaleCacheMetrics>) -> Self {
        if let Some(m) = &metrics {
            m.set_state(&resource, CacheState::Starting);
        }
        ResourceCache {
            resource,
            state: RwLock::new(CacheState::Starting),
            objects: RwLock::new(HashMap::new()),
            heard: Mutex::new(Instant::now()),
            metrics,
        }
    }

    fn state(&self) -> CacheState {
        *self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Moves to `to`, logging the change (`reason`: why).
    fn set_state(&self, to: CacheState, reason: &str) {
        let from = {
            let mut state = self.state.write().unwrap_or_else(|p| p.into_inner());
            std::mem::replace(&mut *state, to)
        };
        if from == to {
            tracing::debug!(resource = %self.resource, state = to.as_str(), reason, "Scale target cache");
            return;
        }
        if let Some(m) = &self.metrics {
            m.set_state(&self.resource, to);
        }
        match to {
            CacheState::Synced => tracing::info!(
                resource = %self.resource,
                from = from.as_str(),
                "Scale target cache: listed; scale reads of this resource come from the cache"
            ),
            CacheState::Stale => tracing::warn!(
                resource = %self.resource,
                reason,
                "Scale target cache: watch unhealthy; the scale of this resource is read with a GET until it has listed again"
            ),
            CacheState::Unavailable => tracing::info!(
                resource = %self.resource,
                reason,
                "Scale target cache: the scale of this resource is read with a GET per reconcile"
            ),
            CacheState::Starting => {}
        }
    }

    fn heard(&self) {
        *self.heard.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    /// Whether reads may be answered: listed, no watch error since, heard from recently.
    fn answers(&self) -> bool {
        self.state() == CacheState::Synced
            && self
                .heard
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .elapsed()
                <= SILENCE_BOUND
    }

    fn put(&self, obj: &DynamicObject, source: &ScaleSource) {
        let (ns, name) = slot(obj);
        let entry = Entry::of(obj, source);
        self.write().entry(ns).or_default().insert(name, entry);
    }

    fn remove(&self, obj: &DynamicObject) {
        let (ns, name) = slot(obj);
        let mut objects = self.write();
        if let Some(names) = objects.get_mut(&ns) {
            names.remove(&name);
            if names.is_empty() {
                objects.remove(&ns);
            }
        }
    }

    fn replace(&self, fresh: Objects) {
        *self.write() = fresh;
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

fn slot(o: &DynamicObject) -> (String, String) {
    (
        o.metadata.namespace.clone().unwrap_or_default(),
        o.metadata.name.clone().unwrap_or_default(),
    )
}

/// (group, version, resource).
type ResourceKey = (String, String, String);

/// The watch caches of scale targets, one per resource, started on first use.
pub struct ScaleTargetCache {
    client: kube::Client,
    encoding: hpa_protobuf::Encoding,
    metrics: Option<ScaleCacheMetrics>,
    resources: Mutex<HashMap<ResourceKey, Arc<ResourceCache>>>,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl std::fmt::Debug for ScaleTargetCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScaleTargetCache").finish_non_exhaustive()
    }
}

impl ScaleTargetCache {
    /// An empty cache whose watches list and watch through `client` (the informers'),
    /// showing each resource's state in `metrics`. The built-in kinds (apps/v1 Deployments,
    /// ReplicaSets and StatefulSets, v1 ReplicationControllers) are read in `encoding`
    /// (`hpa-protobuf`); custom resources in JSON, their only encoding.
    pub fn new(
        client: kube::Client,
        metrics: Option<ScaleCacheMetrics>,
        encoding: hpa_protobuf::Encoding,
    ) -> Self {
        ScaleTargetCache {
            client,
            encoding,
            metrics,
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
        let cache = Arc::new(ResourceCache::new(
            mapping.group_resource(),
            self.metrics.clone(),
        ));
        resources.insert(key, cache.clone());
        drop(resources);
        let source = KubeListWatch::new(self.client.clone(), mapping.clone(), self.encoding);
        let task = tokio::spawn({
            let cache = cache.clone();
            async move { run(&source, &cache).await }
        });
        self.tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(task);
        cache
    }

    /// The scale of `namespace/name` from the cache of `mapping`'s resource, if that cache
    /// answers (listed, watch healthy), holds the object and could project it.
    pub fn scale(&self, namespace: &str, mapping: &ResourceMapping, name: &str) -> Option<Scale> {
        let cache = self.resource(mapping);
        if !cache.answers() {
            return None;
        }
        cache.scale(namespace, name)
    }

    /// For every resource whose cache answers: (group, resource) and
    /// `namespace/name` → resourceVersion (the replay runner's wait).
    pub fn versions(&self) -> Vec<((String, String), BTreeMap<String, String>)> {
        let resources = self.resources.lock().unwrap_or_else(|p| p.into_inner());
        resources
            .iter()
            .filter(|(_, c)| c.answers())
            .map(|((g, _, r), c)| ((g.clone(), r.clone()), c.versions()))
            .collect()
    }

    /// Each resource's `resource.group` and state.
    pub fn states(&self) -> BTreeMap<String, CacheState> {
        let resources = self.resources.lock().unwrap_or_else(|p| p.into_inner());
        resources
            .values()
            .map(|c| (c.resource.clone(), c.state()))
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

/// Whether an API error means "this client may not (or cannot) list this": before the first
/// list, the cache then gives the resource up rather than retrying forever.
fn refused(code: u16) -> bool {
    matches!(code, 401 | 403 | 404 | 405)
}

/// Why a resource cannot be projected or listed.
#[derive(Debug)]
enum SourceError {
    /// For good: the resource is read with GETs.
    Refused(String),
    /// Worth another try after a backoff.
    Failed(String),
}

/// A watch event of the scale target's resource, or of its CRD.
type Events = BoxStream<'static, Result<WatchEvent<DynamicObject>, kube::Error>>;

/// What the cache needs from the API: how to project (the CRD's paths), pages of a list, and
/// watches. Behind a trait so the state machine is tested without a server.
#[async_trait::async_trait]
trait ListWatch: Send + Sync {
    /// How objects are projected, and the CRD (for a custom resource) with its
    /// resourceVersion, to watch for changes of the paths.
    async fn source(&self) -> Result<(ScaleSource, Option<String>), SourceError>;
    /// One page of the list.
    async fn list(
        &self,
        continue_token: Option<String>,
    ) -> Result<kube::core::ObjectList<DynamicObject>, kube::Error>;
    /// The resource's watch from `rv`.
    async fn watch(&self, rv: &str) -> Result<Events, kube::Error>;
    /// The CRD's watch from `rv` (custom resources only).
    async fn watch_crd(&self, rv: &str) -> Result<Events, kube::Error>;
    /// The scale paths of the watched version in a CRD.
    fn paths_of(&self, crd: &DynamicObject) -> Option<ScaleSource>;
}

/// [`ListWatch`] over the API.
struct KubeListWatch {
    mapping: ResourceMapping,
    api: kube::Api<DynamicObject>,
    crds: kube::Api<DynamicObject>,
    /// A built-in kind read in protobuf: its decoding, the client and the resource's path.
    protobuf: Option<(
        Arc<hpa_protobuf::convert::ScaleTarget>,
        kube::Client,
        String,
    )>,
}

impl KubeListWatch {
    fn new(
        client: kube::Client,
        mapping: ResourceMapping,
        encoding: hpa_protobuf::Encoding,
    ) -> Self {
        let protobuf = match encoding {
            hpa_protobuf::Encoding::Json => None,
            hpa_protobuf::Encoding::Protobuf => hpa_protobuf::convert::ScaleTarget::of(
                &mapping.group,
                &mapping.version,
                &mapping.resource,
            )
            .map(|target| {
                let path = if mapping.group.is_empty() {
                    format!("/api/{}/{}", mapping.version, mapping.resource)
                } else {
                    format!(
                        "/apis/{}/{}/{}",
                        mapping.group, mapping.version, mapping.resource
                    )
                };
                (Arc::new(target), client.clone(), path)
            }),
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
        let crd = ApiResource {
            group: "apiextensions.k8s.io".into(),
            version: "v1".into(),
            api_version: "apiextensions.k8s.io/v1".into(),
            kind: "CustomResourceDefinition".into(),
            plural: "customresourcedefinitions".into(),
        };
        KubeListWatch {
            api: kube::Api::all_with(client.clone(), &resource),
            crds: kube::Api::all_with(client, &crd),
            mapping,
            protobuf,
        }
    }

    fn crd_name(&self) -> String {
        format!("{}.{}", self.mapping.resource, self.mapping.group)
    }

    /// The protobuf reads' pages and watch timeout, as [`KubeListWatch::watch_params`]'.
    fn protobuf_config() -> hpa_protobuf::Config {
        hpa_protobuf::Config {
            encoding: hpa_protobuf::Encoding::Protobuf,
            page_size: LIST_PAGE,
            timeout_secs: WATCH_TIMEOUT_SECS,
        }
    }

    fn watch_params() -> WatchParams {
        WatchParams {
            timeout: Some(WATCH_TIMEOUT_SECS),
            bookmarks: true,
            ..WatchParams::default()
        }
    }
}

#[async_trait::async_trait]
impl ListWatch for KubeListWatch {
    async fn source(&self) -> Result<(ScaleSource, Option<String>), SourceError> {
        if let Some(source) = builtin_source(&self.mapping.group, &self.mapping.resource) {
            return Ok((source, None));
        }
        let crd = self.crds.get(&self.crd_name()).await.map_err(|e| {
            let message = format!(
                "reading its CustomResourceDefinition: {}",
                hpa_metrics::kube_error_message(&e)
            );
            match &e {
                kube::Error::Api(s) if refused(s.code) => SourceError::Refused(message),
                _ => SourceError::Failed(message),
            }
        })?;
        let source = self.paths_of(&crd).ok_or_else(|| {
            SourceError::Refused(format!(
                "its CustomResourceDefinition declares no scale subresource for version {}",
                self.mapping.version
            ))
        })?;
        Ok((source, crd.metadata.resource_version.clone()))
    }

    async fn list(
        &self,
        continue_token: Option<String>,
    ) -> Result<kube::core::ObjectList<DynamicObject>, kube::Error> {
        if let Some((target, client, path)) = &self.protobuf {
            let config = Self::protobuf_config();
            let (list, _) = hpa_protobuf::list_page(
                client,
                target.as_ref(),
                path,
                &config,
                continue_token.as_deref(),
            )
            .await?;
            return Ok(list);
        }
        let mut lp = ListParams::default().limit(LIST_PAGE);
        lp.continue_token = continue_token;
        self.api.list(&lp).await
    }

    async fn watch(&self, rv: &str) -> Result<Events, kube::Error> {
        if let Some((target, client, path)) = &self.protobuf {
            let config = Self::protobuf_config();
            return hpa_protobuf::watch(client, target.clone(), path, &config, rv).await;
        }
        Ok(self.api.watch(&Self::watch_params(), rv).await?.boxed())
    }

    async fn watch_crd(&self, rv: &str) -> Result<Events, kube::Error> {
        let wp = Self::watch_params().fields(&format!("metadata.name={}", self.crd_name()));
        Ok(self.crds.watch(&wp, rv).await?.boxed())
    }

    fn paths_of(&self, crd: &DynamicObject) -> Option<ScaleSource> {
        crd_scale_paths(&crd.data, &self.mapping.version).map(ScaleSource::Custom)
    }
}

/// Doubling waits between failed attempts, reset by a successful list.
struct Backoff(Duration);

impl Backoff {
    fn next(&mut self) -> Duration {
        let wait = self.0;
        self.0 = (self.0 * 2).min(MAX_BACKOFF);
        wait
    }
}

/// Lists `lw` into `cache` and keeps it current, forever: whenever the watch breaks the
/// cache is stale (reads are GETs) until a new list; gives up (reads are GETs for good) when
/// the CRD or the first list is refused.
async fn run(lw: &dyn ListWatch, cache: &ResourceCache) {
    let mut backoff = Backoff(FIRST_BACKOFF);
    loop {
        let (source, crd_rv) = match lw.source().await {
            Ok(s) => s,
            Err(SourceError::Refused(reason)) if cache.state() == CacheState::Starting => {
                cache.set_state(CacheState::Unavailable, &reason);
                return;
            }
            Err(SourceError::Refused(reason) | SourceError::Failed(reason)) => {
                stale(cache, &reason);
                tokio::time::sleep(backoff.next()).await;
                continue;
            }
        };
        let rv = match list(lw, &source).await {
            Ok((objects, rv)) => {
                cache.replace(objects);
                cache.heard();
                cache.set_state(CacheState::Synced, "listed");
                backoff = Backoff(FIRST_BACKOFF);
                rv
            }
            Err(kube::Error::Api(status))
                if cache.state() == CacheState::Starting && refused(status.code) =>
            {
                let reason = format!("list refused: {}", status.message);
                cache.set_state(CacheState::Unavailable, &reason);
                return;
            }
            Err(error) => {
                stale(cache, &format!("list failed: {error}"));
                tokio::time::sleep(backoff.next()).await;
                continue;
            }
        };
        let broken = watch(lw, cache, &source, rv, crd_rv).await;
        match broken.then {
            Then::GiveUp => {
                cache.set_state(CacheState::Unavailable, &broken.reason);
                return;
            }
            Then::RelistNow => cache.set_state(CacheState::Stale, &broken.reason),
            Then::RelistLater => {
                cache.set_state(CacheState::Stale, &broken.reason);
                tokio::time::sleep(backoff.next()).await;
            }
        }
    }
}

/// Marks `cache` stale unless it has not listed yet (it then stays starting).
fn stale(cache: &ResourceCache, reason: &str) {
    if cache.state() == CacheState::Starting {
        tracing::debug!(resource = %cache.resource, reason, "Scale target cache: not listed yet");
    } else {
        cache.set_state(CacheState::Stale, reason);
    }
}

/// Every page of the list, projected, and the list's resourceVersion.
async fn list(lw: &dyn ListWatch, source: &ScaleSource) -> Result<(Objects, String), kube::Error> {
    let mut objects = Objects::new();
    let mut continue_token = None;
    loop {
        let page = lw.list(continue_token).await?;
        for obj in &page.items {
            let (ns, name) = slot(obj);
            objects
                .entry(ns)
                .or_default()
                .insert(name, Entry::of(obj, source));
        }
        continue_token = page.metadata.continue_.filter(|c| !c.is_empty());
        if continue_token.is_none() {
            return Ok((objects, page.metadata.resource_version.unwrap_or_default()));
        }
    }
}

/// What to do after a watch stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Then {
    /// Relist at once (410 Expired, a CRD change).
    RelistNow,
    /// Relist after the backoff.
    RelistLater,
    /// Give the resource up (its CRD may not be watched): read with GETs for good.
    GiveUp,
}

/// Why a watch stopped, and what to do next.
struct Broken {
    reason: String,
    then: Then,
}

impl Broken {
    fn after_backoff(reason: String) -> Self {
        Broken {
            reason,
            then: Then::RelistLater,
        }
    }

    fn now(reason: String) -> Self {
        Broken {
            reason,
            then: Then::RelistNow,
        }
    }

    /// A watch `Status`: 410 Expired relists at once, anything else after the backoff.
    fn status(code: u16, reason: String) -> Self {
        if code == 410 {
            Broken::now(reason)
        } else {
            Broken::after_backoff(reason)
        }
    }
}

/// Watches from `rv` (and the CRD from `crd_rv`), applying events to `cache`, starting the
/// watch again whenever the server ends it, until something breaks it.
async fn watch(
    lw: &dyn ListWatch,
    cache: &ResourceCache,
    source: &ScaleSource,
    mut rv: String,
    mut crd_rv: Option<String>,
) -> Broken {
    loop {
        let mut events = match tokio::time::timeout(SILENCE_BOUND, lw.watch(&rv)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return Broken::after_backoff(format!("watch refused: {e}")),
            Err(_) => return Broken::after_backoff("watch request not answered".into()),
        };
        let mut crd_events: Events = match &crd_rv {
            None => futures::stream::pending().boxed(),
            Some(v) => match tokio::time::timeout(SILENCE_BOUND, lw.watch_crd(v)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    let mut broken = Broken::after_backoff(format!(
                        "watch of the CustomResourceDefinition refused: {e}"
                    ));
                    // Without watch of customresourcedefinitions (an RBAC of before it was
                    // needed) the scale paths could change unseen.
                    if matches!(&e, kube::Error::Api(s) if refused(s.code)) {
                        broken.then = Then::GiveUp;
                    }
                    return broken;
                }
                Err(_) => {
                    return Broken::after_backoff(
                        "watch of the CustomResourceDefinition not answered".into(),
                    );
                }
            },
        };
        cache.heard();
        loop {
            tokio::select! {
                next = tokio::time::timeout(SILENCE_BOUND, events.next()) => match next {
                    Err(_) => {
                        return Broken::after_backoff(format!(
                            "nothing heard from the watch for {} s",
                            SILENCE_BOUND.as_secs()
                        ));
                    }
                    // Ended at its timeoutSeconds: start it again from where it was.
                    Ok(None) => {
                        cache.heard();
                        break;
                    }
                    Ok(Some(Ok(event))) => match event {
                        WatchEvent::Added(obj) | WatchEvent::Modified(obj) => {
                            rv = obj.metadata.resource_version.clone().unwrap_or_default();
                            cache.put(&obj, source);
                            cache.heard();
                        }
                        WatchEvent::Deleted(obj) => {
                            rv = obj.metadata.resource_version.clone().unwrap_or_default();
                            cache.remove(&obj);
                            cache.heard();
                        }
                        WatchEvent::Bookmark(b) => {
                            rv = b.metadata.resource_version;
                            cache.heard();
                        }
                        WatchEvent::Error(status) => {
                            let reason = format!("watch error {}: {}", status.code, status.message);
                            return Broken::status(status.code, reason);
                        }
                    },
                    Ok(Some(Err(e))) => return Broken::after_backoff(format!("watch failed: {e}")),
                },
                next = crd_events.next() => match next {
                    None => break,
                    Some(Ok(WatchEvent::Added(crd) | WatchEvent::Modified(crd))) => {
                        crd_rv = crd.metadata.resource_version.clone();
                        if lw.paths_of(&crd).as_ref() != Some(source) {
                            return Broken::now(
                                "its CustomResourceDefinition changed the scale paths".into(),
                            );
                        }
                    }
                    Some(Ok(WatchEvent::Deleted(_))) => {
                        return Broken::after_backoff("its CustomResourceDefinition was deleted".into());
                    }
                    Some(Ok(WatchEvent::Bookmark(b))) => crd_rv = Some(b.metadata.resource_version),
                    Some(Ok(WatchEvent::Error(status))) => {
                        let reason = format!(
                            "watch of the CustomResourceDefinition: error {}: {}",
                            status.code, status.message
                        );
                        return Broken::status(status.code, reason);
                    }
                    Some(Err(e)) => {
                        return Broken::after_backoff(format!(
                            "watch of the CustomResourceDefinition failed: {e}"
                        ));
                    }
                },
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
        self.get_scale_from(namespace, mapping, name)
            .await
            .map(|(scale, _)| scale)
    }

    async fn get_scale_from(
        &self,
        namespace: &str,
        mapping: &ResourceMapping,
        name: &str,
    ) -> Result<(Scale, ReadSource), ScaleError> {
        match self.cache.scale(namespace, mapping, name) {
            Some(scale) => Ok((scale, ReadSource::Cache)),
            None => self
                .inner
                .get_scale(namespace, mapping, name)
                .await
                .map(|scale| (scale, ReadSource::Api)),
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
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::collections::VecDeque;

    use super::*;
    use kube::core::{ListMeta, ObjectList, TypeMeta};
    use serde_json::json;

    use crate::scale_projection::ScalePaths;

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

    fn page(items: Vec<DynamicObject>, rv: &str) -> ObjectList<DynamicObject> {
        ObjectList {
            types: TypeMeta::default(),
            metadata: ListMeta {
                resource_version: Some(rv.into()),
                ..ListMeta::default()
            },
            items,
        }
    }

    fn api_error(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(Box::new(
            kube::core::Status::failure(&format!("{reason} ({code})"), reason).with_code(code),
        ))
    }

    /// One scripted watch request: refused, or these events then the end (`ends`) or
    /// silence.
    enum Watch {
        Refused(u16),
        Events(Vec<WatchEvent<DynamicObject>>, bool),
    }

    /// A [`ListWatch`] answering from scripts; an exhausted script is silence (a request
    /// never answered).
    #[derive(Default)]
    struct Scripted {
        sources: Mutex<VecDeque<ScaleSource>>,
        lists: Mutex<VecDeque<Result<ObjectList<DynamicObject>, u16>>>,
        watches: Mutex<VecDeque<Watch>>,
        crd_watches: Mutex<VecDeque<Watch>>,
        /// The resourceVersions watched from.
        watched_from: Mutex<Vec<String>>,
        listed: Mutex<usize>,
    }

    impl Scripted {
        fn lists(self, l: Vec<Result<ObjectList<DynamicObject>, u16>>) -> Self {
            *self.lists.lock().unwrap() = l.into();
            self
        }
        fn watches(self, w: Vec<Watch>) -> Self {
            *self.watches.lock().unwrap() = w.into();
            self
        }
        fn listed(&self) -> usize {
            *self.listed.lock().unwrap()
        }
    }

    async fn silence<T>() -> T {
        futures::future::pending().await
    }

    fn stream_of(w: Watch) -> Result<Events, kube::Error> {
        match w {
            Watch::Refused(code) => Err(api_error(code, "Forbidden")),
            Watch::Events(events, ends) => {
                let items = futures::stream::iter(events.into_iter().map(Ok));
                Ok(if ends {
                    items.boxed()
                } else {
                    items.chain(futures::stream::pending()).boxed()
                })
            }
        }
    }

    #[async_trait::async_trait]
    impl ListWatch for Scripted {
        async fn source(&self) -> Result<(ScaleSource, Option<String>), SourceError> {
            let mut sources = self.sources.lock().unwrap();
            match sources.len() {
                0 => Ok((ScaleSource::Apps, None)),
                1 => Ok((sources[0].clone(), Some("c1".into()))),
                _ => Ok((sources.pop_front().unwrap(), Some("c1".into()))),
            }
        }
        async fn list(
            &self,
            _continue_token: Option<String>,
        ) -> Result<ObjectList<DynamicObject>, kube::Error> {
            let next = self.lists.lock().unwrap().pop_front();
            *self.listed.lock().unwrap() += 1;
            match next {
                Some(Ok(l)) => Ok(l),
                Some(Err(code)) => Err(api_error(code, "Forbidden")),
                None => silence().await,
            }
        }
        async fn watch(&self, rv: &str) -> Result<Events, kube::Error> {
            self.watched_from.lock().unwrap().push(rv.to_owned());
            let next = self.watches.lock().unwrap().pop_front();
            match next {
                Some(w) => stream_of(w),
                None => silence().await,
            }
        }
        async fn watch_crd(&self, _rv: &str) -> Result<Events, kube::Error> {
            let next = self.crd_watches.lock().unwrap().pop_front();
            match next {
                Some(w) => stream_of(w),
                None => Ok(futures::stream::pending().boxed()),
            }
        }
        fn paths_of(&self, crd: &DynamicObject) -> Option<ScaleSource> {
            crd_scale_paths(&crd.data, "v1").map(ScaleSource::Custom)
        }
    }

    fn start(lw: Scripted) -> (Arc<Scripted>, Arc<ResourceCache>) {
        let lw = Arc::new(lw);
        let cache = Arc::new(ResourceCache::new("deployments.apps".into(), None));
        tokio::spawn({
            let (lw, cache) = (lw.clone(), cache.clone());
            async move { run(lw.as_ref(), &cache).await }
        });
        (lw, cache)
    }

    /// Polls `cond` (every 10 ms of the test's clock) for up to 5 minutes of it.
    async fn until(what: &str, cond: impl Fn() -> bool) {
        for _ in 0..30_000 {
            if cond() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("never: {what}");
    }

    fn replicas(cache: &ResourceCache, ns: &str) -> Option<i32> {
        cache
            .answers()
            .then(|| cache.scale(ns, "web"))
            .flatten()
            .and_then(|s| s.spec.and_then(|s| s.replicas))
    }

    #[tokio::test(start_paused = true)]
    async fn answers_after_the_list_and_follows_the_watch() {
        let (lw, cache) = start(
            Scripted::default()
                .lists(vec![Ok(page(
                    vec![
                        deployment("a", "web", "1", 2),
                        deployment("b", "web", "2", 3),
                    ],
                    "2",
                ))])
                .watches(vec![
                    Watch::Events(
                        vec![
                            WatchEvent::Modified(deployment("a", "web", "5", 4)),
                            WatchEvent::Deleted(deployment("b", "web", "6", 3)),
                        ],
                        true,
                    ),
                    // The server ended the watch at its timeout: watched again from "6",
                    // without a relist, and still answering.
                    Watch::Events(vec![], false),
                ]),
        );
        until("watched twice", || {
            lw.watched_from.lock().unwrap().len() == 2
        })
        .await;
        assert_eq!(cache.state(), CacheState::Synced);
        assert_eq!(replicas(&cache, "a"), Some(4));
        assert_eq!(replicas(&cache, "b"), None);
        assert_eq!(*lw.watched_from.lock().unwrap(), ["2", "6"]);
        assert_eq!(lw.listed(), 1);
        assert_eq!(
            cache.versions(),
            BTreeMap::from([("a/web".to_owned(), "5".to_owned())])
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_refused_first_list_gives_the_resource_up() {
        let (_lw, cache) = start(Scripted::default().lists(vec![Err(403)]));
        until("unavailable", || cache.state() == CacheState::Unavailable).await;
        assert!(!cache.answers());
    }

    /// The case: the list succeeds, every watch is refused with 403. The cache must
    /// not go on answering with what it listed.
    #[tokio::test(start_paused = true)]
    async fn a_refused_watch_makes_the_cache_stale_until_it_has_listed_again() {
        let (lw, cache) = start(
            Scripted::default()
                .lists(vec![
                    Ok(page(vec![deployment("a", "web", "1", 2)], "1")),
                    // The relist after the backoff is refused too (RBAC changed)...
                    Err(403),
                    // ... then works.
                    Ok(page(vec![deployment("a", "web", "9", 8)], "9")),
                ])
                .watches(vec![Watch::Refused(403), Watch::Events(vec![], false)]),
        );
        until("stale", || cache.state() == CacheState::Stale).await;
        assert_eq!(replicas(&cache, "a"), None, "a stale cache does not answer");
        until("listed 3 times", || lw.listed() == 3).await;
        until("synced", || cache.state() == CacheState::Synced).await;
        assert_eq!(replicas(&cache, "a"), Some(8));
    }

    #[tokio::test(start_paused = true)]
    async fn an_expired_watch_relists_at_once() {
        let gone =
            kube::core::Status::failure("too old resource version", "Expired").with_code(410);
        let (lw, cache) = start(
            Scripted::default()
                .lists(vec![
                    Ok(page(vec![deployment("a", "web", "1", 2)], "1")),
                    Ok(page(vec![deployment("a", "web", "7", 5)], "7")),
                ])
                .watches(vec![
                    Watch::Events(vec![WatchEvent::Error(Box::new(gone))], false),
                    Watch::Events(vec![], false),
                ]),
        );
        until("relisted", || {
            lw.listed() == 2 && cache.state() == CacheState::Synced
        })
        .await;
        assert_eq!(replicas(&cache, "a"), Some(5));
        assert_eq!(*lw.watched_from.lock().unwrap(), ["1", "7"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_watch_stops_answering_within_the_bound() {
        let (lw, cache) = start(
            Scripted::default()
                .lists(vec![
                    Ok(page(vec![deployment("a", "web", "1", 2)], "1")),
                    Ok(page(vec![deployment("a", "web", "3", 6)], "3")),
                ])
                // A watch that never says anything again: no event, bookmark or end.
                .watches(vec![
                    Watch::Events(vec![], false),
                    Watch::Events(vec![], false),
                ]),
        );
        until("synced", || cache.answers()).await;
        let synced_at = Instant::now();
        until("not answering", || !cache.answers()).await;
        assert!(synced_at.elapsed() <= SILENCE_BOUND + Duration::from_millis(20));
        until("relisted", || lw.listed() == 2 && cache.answers()).await;
        assert_eq!(replicas(&cache, "a"), Some(6));
    }

    #[tokio::test(start_paused = true)]
    async fn bookmarks_keep_a_quiet_watch_answering() {
        let bookmark = |rv: &str| {
            WatchEvent::Bookmark(
                serde_json::from_value(json!({
                    "apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"resourceVersion": rv}
                }))
                .unwrap(),
            )
        };
        let (lw, cache) = start(
            Scripted::default()
                .lists(vec![Ok(page(vec![deployment("a", "web", "1", 2)], "1"))])
                .watches(vec![
                    Watch::Events(vec![bookmark("4")], true),
                    Watch::Events(vec![], false),
                ]),
        );
        until("watched twice", || {
            lw.watched_from.lock().unwrap().len() == 2
        })
        .await;
        assert!(cache.answers());
        assert_eq!(*lw.watched_from.lock().unwrap(), ["1", "4"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_crd_changing_its_scale_paths_makes_the_cache_relist_with_them() {
        let paths = |spec: &str| ScalePaths {
            spec_replicas: spec.into(),
            status_replicas: ".status.replicas".into(),
            label_selector: None,
        };
        let widget = |rv: &str| -> DynamicObject {
            serde_json::from_value(json!({
                "apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"namespace": "a", "name": "web", "resourceVersion": rv},
                "spec": {"replicas": 2, "size": 7}, "status": {"replicas": 2},
            }))
            .unwrap()
        };
        let crd: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com", "resourceVersion": "c2"},
            "spec": {"versions": [{"name": "v1", "subresources": {"scale": {
                "specReplicasPath": ".spec.size", "statusReplicasPath": ".status.replicas"}}}]},
        }))
        .unwrap();
        let lw = Scripted::default()
            .lists(vec![
                Ok(page(vec![widget("1")], "1")),
                Ok(page(vec![widget("1")], "2")),
            ])
            .watches(vec![
                Watch::Events(vec![], false),
                Watch::Events(vec![], false),
            ]);
        *lw.sources.lock().unwrap() = vec![
            ScaleSource::Custom(paths(".spec.replicas")),
            ScaleSource::Custom(paths(".spec.size")),
        ]
        .into();
        *lw.crd_watches.lock().unwrap() =
            vec![Watch::Events(vec![WatchEvent::Modified(crd)], false)].into();
        let (lw, cache) = start(lw);
        until("relisted", || lw.listed() == 2 && cache.answers()).await;
        assert_eq!(
            replicas(&cache, "a"),
            Some(7),
            "projected through the new path"
        );
    }

    /// An RBAC of before the CRD was watched: the custom resource is read with GETs for good
    /// rather than answered from paths that could change unseen.
    #[tokio::test(start_paused = true)]
    async fn a_refused_crd_watch_gives_the_resource_up() {
        let lw = Scripted::default()
            .lists(vec![Ok(page(vec![], "1"))])
            .watches(vec![Watch::Events(vec![], false)]);
        *lw.sources.lock().unwrap() = vec![ScaleSource::Custom(ScalePaths {
            spec_replicas: ".spec.replicas".into(),
            status_replicas: ".status.replicas".into(),
            label_selector: None,
        })]
        .into();
        *lw.crd_watches.lock().unwrap() = vec![Watch::Refused(403)].into();
        let (_lw, cache) = start(lw);
        until("unavailable", || cache.state() == CacheState::Unavailable).await;
    }

    #[test]
    fn an_object_that_cannot_be_projected_is_held_without_a_scale() {
        let cache = ResourceCache::new("deployments.apps".into(), None);
        let mut bad = deployment("a", "web", "1", 2);
        bad.data["spec"]["replicas"] = json!("two");
        cache.put(&bad, &ScaleSource::Apps);
        assert!(cache.scale("a", "web").is_none());
        assert_eq!(cache.versions().len(), 1);
    }

    #[test]
    fn every_state_change_is_shown_in_the_metric() {
        let registry = Registry::new();
        let metrics = ScaleCacheMetrics::register(&registry).unwrap();
        let cache = ResourceCache::new("deployments.apps".into(), Some(metrics.clone()));
        let current = || {
            let mut on: Vec<String> = Vec::new();
            for f in registry.gather() {
                if f.name() != "kube_hpa_controller_scale_target_cache_state" {
                    continue;
                }
                for m in f.get_metric() {
                    if m.get_gauge().get_value() == 1.0 {
                        on.extend(
                            m.get_label()
                                .iter()
                                .filter(|l| l.name() == "state")
                                .map(|l| l.value().to_owned()),
                        );
                    }
                }
            }
            on
        };
        assert_eq!(current(), ["starting"]);
        cache.set_state(CacheState::Synced, "listed");
        assert_eq!(current(), ["synced"]);
        cache.set_state(CacheState::Stale, "watch refused");
        assert_eq!(current(), ["stale"]);
        metrics.observe_read(ReadSource::Cache);
        metrics.observe_read(ReadSource::Api);
        metrics.observe_read(ReadSource::Api);
        assert_eq!(metrics.reads.with_label_values(&["get"]).get(), 2);
        assert_eq!(metrics.reads.with_label_values(&["cache"]).get(), 1);
    }
}
