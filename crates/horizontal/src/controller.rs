//! The controller's structure: caches, event handlers, the rate-limited queue and the workers
//! (`horizontal.go`: `NewHorizontalController`, `Run`, `worker`, `processNextWorkItem`).
//!
//! Mirrors upstream `pkg/controller/podautoscaler/horizontal.go`: `NewHorizontalController`
//! (wiring, the `horizontalpodautoscaler` queue with the fixed-interval HPA rate limiter),
//! `enqueueHPA` / `updateHPA` / `deleteHPA`, `Run`, `worker` and `processNextWorkItem` (the
//! post-process `AddRateLimited` re-add), plus the custom-metrics discovery invalidation that
//! `cmd/kube-controller-manager/app/autoscaling.go` starts. The reconcile itself is in
//! [`crate::reconcile`].

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dashmap::DashMap;
use hpa_config::{Clock, Feature, FeatureGates, HpaControllerConfiguration, KubeVersion};
use hpa_metrics::{AvailableApis, DeferredRestMapper, MetricsClient};
use hpa_replica_calculator::{CalculatorConfig, ReadinessConfig, ReplicaCalculator};
use hpa_workqueue::{
    FixedItemIntervalRateLimiter, QueueConfig, RateLimitingQueue, WorkqueueMetrics,
};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;

use crate::caches::{CacheWriters, Caches, HpaEventHandler, object_key, split_key};
use crate::explain_metrics::ExplainMetrics;
use crate::metrics_batch::BatchedMetricsClient;
use crate::monitor::Monitor;
use crate::reconcile::{ReconcileError, Reconciler, StatusWriter};
use crate::recorder::Recorder;
use crate::scale_cache::{CachedScaleClient, ScaleCacheMetrics, ScaleTargetCache};
use crate::scale_client::{KubeScaleClient, ScaleClient};
use crate::selectors::{HpaKey, HpaSelectorRegistry};
use crate::shadow::ShadowStore;
use crate::trace::TraceStore;
use hpa_decision::decision::{Decision, DecisionConfig, ZeroReplicas};
use hpa_decision::gofmt::SelectorStyle;
use hpa_decision::state::HpaState;
use hpa_decision::sync_period::sync_period_annotation;

/// The queue name, also the `name` label of the workqueue metrics.
pub const QUEUE_NAME: &str = "horizontalpodautoscaler";

/// Cached objects' `resourceVersion`s by `namespace/name`.
pub type ResourceVersions = BTreeMap<String, String>;

/// Everything the controller reads from its flags.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// The HPA flags.
    pub hpa: HpaControllerConfiguration,
    /// The feature gates.
    pub gates: FeatureGates,
    /// How `%+v` of a `*LabelSelector` prints in External metric names.
    pub selector_style: SelectorStyle,
    /// Shadow mode (`--shadow`): decide, compare with the active controller's status, and
    /// write nothing (no scale, no status, no event).
    pub shadow: bool,
    /// `--scale-target-cache`: scale reads from watch caches of the targets' resources.
    pub scale_target_cache: bool,
    /// `--metrics-batch-window`: zero fetches pod metrics per HPA.
    pub metrics_batch_window: Duration,
    /// Keep each HPA's last [`Decision`] for [`HorizontalController::last_decision`] (the
    /// embedded demo's view). Off in the binary, which explains itself through the decision
    /// traces: one `Decision` per HPA is memory 10,000 HPAs need not pay.
    pub keep_last_decisions: bool,
    /// The API server is older than 1.37 (its HPAs have no generation, its types no
    /// condition `observedGeneration`): 1.37's observedGeneration fields are not written even
    /// when behaving as 1.37 (`--emulated-version` newer than the cluster).
    pub server_before_1_37: bool,
    /// `--kube-api-content-type=application/vnd.kubernetes.protobuf` (KCM's default): the pod
    /// informer and the built-in scale targets' caches list and watch in protobuf, taking JSON
    /// where the server answers JSON (`hpa-protobuf`); any other value reads JSON.
    pub informer_protobuf: bool,
}

impl ControllerConfig {
    /// The configuration of a set of parsed flags, behaving as `--emulated-version` if given,
    /// else as 1.35 (the binary and the replay runner use [`ControllerConfig::at_version`]
    /// with the version [`resolve_version`] finds).
    pub fn from_options(options: &hpa_config::Options) -> Self {
        let version = options.emulated_version().unwrap_or_default();
        let gates = options
            .feature_gates_at(version)
            .map(|(g, _)| g)
            .unwrap_or_else(|_| options.feature_gates());
        ControllerConfig::with_gates(options, gates)
    }

    /// The configuration of a set of parsed flags, behaving as `version`: its feature-gate
    /// defaults and lock-ins (a locked gate set otherwise is refused in component-base's
    /// words), with component-base's warnings to log.
    pub fn at_version(
        options: &hpa_config::Options,
        version: KubeVersion,
    ) -> Result<(Self, Vec<String>), hpa_config::feature_gates::FeatureGateError> {
        let (gates, warnings) = options.feature_gates_at(version)?;
        Ok((ControllerConfig::with_gates(options, gates), warnings))
    }

    /// [`ControllerConfig::at_version`] at the version [`resolve_version`] chose, knowing
    /// whether the API server is older than 1.37.
    pub fn for_resolved(
        options: &hpa_config::Options,
        resolved: &ResolvedVersion,
    ) -> Result<(Self, Vec<String>), hpa_config::feature_gates::FeatureGateError> {
        let (mut config, warnings) = Self::at_version(options, resolved.version)?;
        config.server_before_1_37 = resolved.server_before_1_37;
        Ok((config, warnings))
    }

    /// The configuration of a set of parsed flags with the feature gates already resolved.
    fn with_gates(options: &hpa_config::Options, gates: FeatureGates) -> Self {
        ControllerConfig {
            hpa: options.hpa_configuration(),
            gates,
            selector_style: SelectorStyle::default(),
            shadow: options.shadow.shadow,
            scale_target_cache: options.cost.scale_target_cache,
            metrics_batch_window: go_to_std(options.cost.metrics_batch_window),
            keep_last_decisions: false,
            server_before_1_37: false,
            informer_protobuf: options.generic.kube_api_content_type
                == hpa_protobuf::watcher::PROTOBUF,
        }
    }

    /// What the informers ask for: protobuf for the pods and the built-in scale targets
    /// when `--kube-api-content-type` is protobuf.
    pub fn informer_encoding(&self) -> hpa_protobuf::Encoding {
        if self.informer_protobuf {
            hpa_protobuf::Encoding::Protobuf
        } else {
            hpa_protobuf::Encoding::Json
        }
    }

    /// The Kubernetes version this controller behaves as.
    pub fn version(&self) -> KubeVersion {
        self.gates.version()
    }

    /// The replica calculator's settings: the readiness periods, pod-level requests, and the
    /// object metric error of the version behaved as.
    pub fn calculator_config(&self) -> CalculatorConfig {
        CalculatorConfig {
            readiness: ReadinessConfig {
                cpu_initialization_period: go_to_std(self.hpa.cpu_initialization_period),
                delay_of_initial_readiness_status: go_to_std(self.hpa.initial_readiness_delay),
            },
            pod_level_resources_enabled: self.gates.enabled(Feature::PodLevelResources),
            object_metric_error_fixed: self.version().at_least(KubeVersion::V1_37),
        }
    }

    /// The decision's settings: the downscale stabilization window, the zero-replicas rule
    /// and observedGeneration of the version behaved as.
    pub fn decision_config(&self) -> DecisionConfig {
        DecisionConfig {
            downscale_stabilization_window: jiff::SignedDuration::from_nanos(
                self.hpa.downscale_stabilization_window.as_nanos(),
            ),
            zero_replicas: if self.version().at_least(KubeVersion::V1_36) {
                ZeroReplicas::ScaledToZeroCondition {
                    gate: self.gates.enabled(Feature::HpaScaleToZero),
                }
            } else {
                ZeroReplicas::MinReplicasZero
            },
            observed_generation: self.gates.enabled(Feature::HpaGeneration)
                && !self.server_before_1_37,
        }
    }

    /// The sync period as a std duration.
    pub fn sync_period(&self) -> Duration {
        Duration::from_nanos(self.hpa.sync_period.as_nanos().max(0) as u64)
    }
}

/// The version to behave as, as [`resolve_version`] chose it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedVersion {
    /// The version to behave as.
    pub version: KubeVersion,
    /// A warning to log: the server's version was clamped into 1.35..1.37.
    pub warning: Option<String>,
    /// The API server reported a version older than 1.37 (see
    /// [`ControllerConfig::server_before_1_37`]).
    pub server_before_1_37: bool,
}

/// Why [`resolve_version`] could not choose a version.
#[derive(Debug, thiserror::Error)]
pub enum ResolveVersionError {
    /// No `--emulated-version`, and the API server's `/version` could not be read.
    #[error(
        "failed to read the API server's version (GET /version), needed to choose which kube-controller-manager version to behave as (or give --emulated-version): {message}"
    )]
    ServerVersion {
        /// The client's error, as client-go prints it.
        message: String,
        /// The client's error.
        source: kube::Error,
    },
}

/// The version to behave as: `--emulated-version` when given, else the API server's
/// (`GET /version`) clamped into 1.35..1.37, with the warning to log when it was clamped.
/// The server's version is read in both cases (with the flag, a failure only means it is not
/// known).
pub async fn resolve_version(
    options: &hpa_config::Options,
    client: &kube::Client,
) -> Result<ResolvedVersion, ResolveVersionError> {
    let info = client.apiserver_version().await;
    let before_1_37 = |major: &str, minor: &str| matches!(KubeVersion::server_major_minor(major, minor), Some((1, m)) if m < 37);
    if let Some(version) = options.emulated_version() {
        return Ok(ResolvedVersion {
            version,
            warning: None,
            server_before_1_37: info.as_ref().is_ok_and(|i| before_1_37(&i.major, &i.minor)),
        });
    }
    let info = info.map_err(|source| ResolveVersionError::ServerVersion {
        message: hpa_metrics::kube_error_message(&source),
        source,
    })?;
    let (version, warning) = KubeVersion::for_server(&info.major, &info.minor, &info.git_version);
    Ok(ResolvedVersion {
        version,
        warning,
        server_before_1_37: before_1_37(&info.major, &info.minor),
    })
}

/// What [`HorizontalController::new`] needs.
pub struct ControllerParts {
    /// The API client (HPA status, events; scale unless `scale_client` is given; the
    /// informers unless [`HorizontalController::with_informer_client`] gives theirs).
    pub client: kube::Client,
    /// The metrics client (a `RestMetricsClient` over the same client in production).
    pub metrics_client: Arc<dyn MetricsClient>,
    /// The custom-metrics version cache to invalidate every sync period, if any.
    pub available_apis: Option<AvailableApis>,
    /// The scale client; `None` builds a [`KubeScaleClient`] over `client`.
    pub scale_client: Option<Arc<dyn ScaleClient>>,
    /// Flags.
    pub config: ControllerConfig,
    /// The time source of every decision.
    pub clock: Arc<dyn Clock>,
    /// Where the controller's metrics are registered.
    pub registry: prometheus::Registry,
    /// The workqueue metrics, if the process exposes them.
    pub workqueue_metrics: Option<WorkqueueMetrics>,
    /// Keep every emitted event in memory (replay).
    pub log_emissions: bool,
}

impl std::fmt::Debug for ControllerParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerParts")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Why the controller could not be built or run.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// Registering the metrics failed.
    #[error("registering metrics: {0}")]
    Metrics(#[from] prometheus::Error),
    /// The caches never synced.
    #[error("caches did not sync: {0}")]
    CacheSync(String),
}

/// What every clone of a [`HorizontalController`] handle shares with the workers and the
/// informers' event handlers (it is the handler: `enqueueHPA`, `updateHPA`, `deleteHPA`).
pub(crate) struct ControllerState {
    /// One reconcile and everything it reads and writes.
    pub(crate) reconciler: Reconciler,
    /// The client the HPA, Pod and scale target informers list and watch with.
    informer_client: kube::Client,
    /// The scale target caches (`--scale-target-cache`), stopped with the controller.
    scale_targets: Option<Arc<ScaleTargetCache>>,
    /// The caches' write halves, taken by the first [`HorizontalController::start_caches`].
    writers: Mutex<Option<CacheWriters>>,
    /// The informers' tasks, aborted by [`HorizontalController::stop`].
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// The `horizontalpodautoscaler` rate-limited queue of `namespace/name` keys.
    pub(crate) queue: RateLimitingQueue<String>,
    /// The custom-metrics discovery invalidated every sync period, if any.
    available_apis: Option<AvailableApis>,
}

/// The horizontal pod autoscaler controller. Cheap to clone (a handle).
#[derive(Clone)]
pub struct HorizontalController {
    /// The state every clone of the handle shares.
    pub(crate) inner: Arc<ControllerState>,
}

impl std::fmt::Debug for HorizontalController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HorizontalController")
            .field("config", &self.inner.reconciler.config)
            .finish_non_exhaustive()
    }
}

impl HpaEventHandler for ControllerState {
    fn on_add(&self, hpa: &HorizontalPodAutoscaler) {
        // 1.37 (kubernetes#138294): a new HPA is reconciled at once (`queue.Add`); before,
        // one sync period later.
        self.enqueue(
            hpa,
            self.reconciler
                .config
                .version()
                .at_least(KubeVersion::V1_37),
        );
    }

    fn on_update(&self, old_generation: Option<i64>, hpa: &HorizontalPodAutoscaler) {
        // `updateHPA`: rate-limited, except in 1.37 with HPAGeneration when the spec changed
        // (the generation moved), which is reconciled at once (kubernetes#138294).
        let spec_changed = self
            .reconciler
            .config
            .version()
            .at_least(KubeVersion::V1_37)
            && self.reconciler.config.gates.enabled(Feature::HpaGeneration)
            && old_generation != hpa.metadata.generation;
        // Shadow mode writes nothing, so an update is the active controller's status write
        // (or a spec change): reconciled at once, it reads the inputs the active controller
        // has just read (before they change again), and its decision can be compared.
        self.enqueue(hpa, spec_changed || self.reconciler.config.shadow);
    }

    fn on_resync(&self, hpa: &HorizontalPodAutoscaler) {
        // `updateHPA` for the handler's resync (the same object again): rate-limited, in shadow
        // mode too. Nothing was written, so there is nothing to compare at once; reconciled
        // now, a shadow kept a second chain of reconciles one period apart beside its own
        // (2.3 times KCM's reconciles and metrics reads beside KCM 1.36.3).
        self.enqueue(hpa, false);
    }

    fn on_delete(&self, key: &str) {
        self.queue.forget(&key.to_owned());
        if let Ok((ns, name)) = split_key(key)
            && self.reconciler.selectors.remove(&HpaKey::new(ns, name))
        {
            self.reconciler.monitor.observe_hpa_deletion();
        }
    }
}

impl ControllerState {
    /// `enqueueHPA`: re-add in one sync period (`now`: at once, `queue.Add`); register with
    /// the `Nothing` selector.
    fn enqueue(&self, hpa: &HorizontalPodAutoscaler, now: bool) {
        let key = object_key(hpa);
        // With --shards, only the HPAs of the shards this replica owns (a shard taken later
        // queues its HPAs then).
        let owned = self.reconciler.sharded.get().is_none_or(|s| s.owns(&key));
        if owned {
            if now {
                self.queue.add(key);
            } else {
                self.add_at_sync_period(key, Some(hpa));
            }
        }
        let hpa_key = HpaKey::new(
            hpa.metadata.namespace.clone().unwrap_or_default(),
            hpa.metadata.name.clone().unwrap_or_default(),
        );
        if self.reconciler.selectors.register_if_absent(hpa_key) {
            self.reconciler.monitor.observe_hpa_addition();
        }
    }
}

impl ControllerState {
    /// Re-adds `key` one sync period from now: `AddRateLimited` (the global period, the HPA
    /// queue's fixed-interval limiter), or `AddAfter` the HPA's own period when `hpa` (as
    /// cached at this re-add) has a valid `kube-hpa-controller.io/sync-period`
    /// ([`hpa_decision::sync_period`], after KEP-6003). A key already waiting keeps the
    /// earlier of its two ready times, so the handler's resync (every global period) neither
    /// undoes a shorter period nor, re-adding at the HPA's longer one, brings it forward.
    fn add_at_sync_period(&self, key: String, hpa: Option<&HorizontalPodAutoscaler>) {
        match hpa.and_then(|h| sync_period_annotation(h).period) {
            Some(period) => self.queue.add_after(key, period),
            None => self.queue.add_rate_limited(key),
        }
    }

    /// The worker's post-process re-add of `key`, at the period of the HPA as cached now.
    fn requeue(&self, key: String) {
        let hpa = split_key(&key)
            .ok()
            .and_then(|(ns, name)| self.reconciler.caches.hpa(ns, name));
        self.add_at_sync_period(key, hpa.as_deref());
    }
}

impl HorizontalController {
    /// Builds the controller (registers its metrics, creates the queue). Needs a Tokio
    /// runtime. The caches are not started yet: see [`HorizontalController::start_caches`].
    pub fn new(parts: ControllerParts) -> Result<Self, ControllerError> {
        Self::with_informer_client(parts, None)
    }

    /// As [`HorizontalController::new`], with the informers listing and watching through
    /// `informer_client` (KCM's `shared-informers` client, with a token bucket of its own)
    /// when given.
    pub fn with_informer_client(
        parts: ControllerParts,
        informer_client: Option<kube::Client>,
    ) -> Result<Self, ControllerError> {
        let monitor = Monitor::register_at(&parts.registry, parts.config.version())?;
        let explain_metrics = ExplainMetrics::register(&parts.registry)?;
        let scale_reads = ScaleCacheMetrics::register(&parts.registry)?;
        let (caches, writers) = Caches::new();
        let calc_config = parts.config.calculator_config();
        // `--metrics-batch-window`: pod metrics listed once per namespace (and metric) per
        // window and shared; zero asks per HPA, as upstream.
        let metrics_client: Arc<dyn MetricsClient> = if parts.config.metrics_batch_window.is_zero()
        {
            parts.metrics_client.clone()
        } else {
            Arc::new(BatchedMetricsClient::new(
                parts.metrics_client.clone(),
                caches.pod_lister(),
                parts.clock.clone(),
                parts.config.metrics_batch_window,
            ))
        };
        let calculator =
            ReplicaCalculator::new(metrics_client, Arc::new(caches.pod_lister()), calc_config);
        let queue_config = match parts.workqueue_metrics {
            Some(m) => QueueConfig::named(QUEUE_NAME, m),
            None => QueueConfig::default(),
        };
        let queue = RateLimitingQueue::with_config(
            FixedItemIntervalRateLimiter::default_hpa(parts.config.sync_period()),
            queue_config,
        );
        let decision_config = parts.config.decision_config();
        let scale_client = parts.scale_client.unwrap_or_else(|| {
            Arc::new(KubeScaleClient::with_rest_mapper(
                parts.client.clone(),
                DeferredRestMapper::with_clock(parts.client.clone(), parts.clock.clone()),
            ))
        });
        let informer_client = informer_client.unwrap_or_else(|| parts.client.clone());
        // `--scale-target-cache`: reads through watch caches (listing and watching with the
        // informers' client), writes and anything the caches cannot answer through the API.
        let scale_targets = parts.config.scale_target_cache.then(|| {
            Arc::new(ScaleTargetCache::new(
                informer_client.clone(),
                Some(scale_reads.clone()),
                parts.config.informer_encoding(),
            ))
        });
        let scale_client: Arc<dyn ScaleClient> = match &scale_targets {
            Some(cache) => Arc::new(CachedScaleClient::new(scale_client, cache.clone())),
            None => scale_client,
        };
        let status_writer = StatusWriter::new(
            parts.client.clone(),
            parts
                .config
                .gates
                .enabled(Feature::StaleControllerConsistencyHpa),
        );
        let reconciler = Reconciler {
            recorder: Recorder::new(
                parts.client.clone(),
                parts.clock.clone(),
                parts.log_emissions,
            ),
            scale_client,
            calculator,
            caches,
            pod_owners: crate::pod_owners::PodOwners::new(parts.client.clone()),
            state: HpaState::new(),
            selectors: HpaSelectorRegistry::new(),
            monitor,
            clock: parts.clock,
            config: parts.config,
            decision_config,
            last_decisions: DashMap::new(),
            status_writer,
            traces: Arc::new(TraceStore::new()),
            shadow: Arc::new(ShadowStore::new()),
            explain_metrics,
            scale_reads,
            history: std::sync::OnceLock::new(),
            sharded: std::sync::OnceLock::new(),
        };
        let inner = ControllerState {
            reconciler,
            informer_client,
            scale_targets,
            writers: Mutex::new(Some(writers)),
            tasks: Mutex::new(Vec::new()),
            queue,
            available_apis: parts.available_apis,
        };
        Ok(HorizontalController {
            inner: Arc::new(inner),
        })
    }

    /// Starts the HPA and Pod watchers (with the handlers) and the handler resync, once.
    pub fn start_caches(&self) {
        let Some(writers) = self
            .inner
            .writers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        else {
            return;
        };
        let handler: Arc<dyn HpaEventHandler> = self.inner.clone();
        // The handler's resync (every sync period, every cached HPA to `UpdateFunc`) runs in
        // the HPA informer's task, ordered with its deletions.
        let config = &self.inner.reconciler.config;
        let tasks = Caches::start(
            self.inner.informer_client.clone(),
            writers,
            handler,
            config.sync_period(),
            config.informer_encoding(),
        );
        self.inner
            .tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(tasks);
    }

    /// Waits for the first list of both caches (`WaitForNamedCacheSync("HPA", ...)`).
    pub async fn wait_for_cache_sync(&self) -> Result<(), ControllerError> {
        self.inner
            .reconciler
            .caches
            .wait_for_sync()
            .await
            .map_err(ControllerError::CacheSync)
    }

    /// The HPA cache's resourceVersions, by `namespace/name` (the replay runner compares them
    /// with the store's).
    pub fn hpa_versions(&self) -> ResourceVersions {
        self.inner.reconciler.caches.hpa_versions()
    }

    /// The Pod cache's resourceVersions, by `namespace/name`.
    pub fn pod_versions(&self) -> ResourceVersions {
        self.inner.reconciler.caches.pod_versions()
    }

    /// The resourceVersions of every scale target cache that has listed, by `(group,
    /// resource)` then `namespace/name`; `None` unless `--scale-target-cache` is on.
    pub fn scale_target_versions(&self) -> Option<Vec<((String, String), ResourceVersions)>> {
        self.scale_targets().map(ScaleTargetCache::versions)
    }

    /// Each scale target cache's `resource.group` and state (`starting`, `synced`, `stale`,
    /// `unavailable`); `None` unless `--scale-target-cache` is on.
    pub fn scale_target_states(&self) -> Option<BTreeMap<String, &'static str>> {
        self.scale_targets().map(|c| {
            c.states()
                .into_iter()
                .map(|(r, s)| (r, s.as_str()))
                .collect()
        })
    }

    /// The cached HPA `namespace/name`, if the HPA cache holds it.
    pub fn cached_hpa(&self, namespace: &str, name: &str) -> Option<Arc<HorizontalPodAutoscaler>> {
        self.inner.reconciler.caches.hpa(namespace, name)
    }

    /// The scale target caches, when `--scale-target-cache` is on.
    pub(crate) fn scale_targets(&self) -> Option<&ScaleTargetCache> {
        self.inner.scale_targets.as_deref()
    }

    /// The per-HPA state (recommendations and scale events).
    pub fn state(&self) -> &HpaState {
        &self.inner.reconciler.state
    }

    /// The recorder (its emission log, when enabled).
    pub fn recorder(&self) -> &Recorder {
        &self.inner.reconciler.recorder
    }

    /// The work queue.
    pub fn queue(&self) -> &RateLimitingQueue<String> {
        &self.inner.queue
    }

    /// The last decisions of every HPA, as traces (served at `/debug/hpa`).
    pub fn traces(&self) -> Arc<TraceStore> {
        self.inner.reconciler.traces.clone()
    }

    /// The shadow comparisons (served at `/debug/shadow`; empty unless in shadow mode).
    pub fn shadow_comparisons(&self) -> Arc<ShadowStore> {
        self.inner.reconciler.shadow.clone()
    }

    /// Persists every HPA's recommendations and scale events in `history` for the next
    /// leader, and restores what it holds when [`HorizontalController::run`] starts (before
    /// the first reconcile). Ignored in shadow mode and once set.
    pub fn set_history(&self, history: Arc<hpa_history::History>) {
        if !self.inner.reconciler.config.shadow {
            let _ = self.inner.reconciler.history.set(history);
        }
    }

    /// Whether this controller runs in shadow mode.
    pub fn is_shadow(&self) -> bool {
        self.inner.reconciler.config.shadow
    }

    /// The decision of the last reconcile of `key` that got as far as the scale (kept only
    /// with [`ControllerConfig::keep_last_decisions`]).
    pub fn last_decision(&self, key: &str) -> Option<Decision> {
        self.inner
            .reconciler
            .last_decisions
            .get(key)
            .map(|d| d.clone())
    }

    /// `Run`: start the caches if needed, wait for their sync, invalidate the custom-metrics
    /// discovery every sync period, and run `workers` workers until `shutdown` completes;
    /// then shut the queue down and cancel the reconciles in flight (their API calls are
    /// dropped), as the cancelled context of KCM's `Run` does: no key is taken after
    /// `shutdown`, and queued keys are not drained.
    pub async fn run(
        &self,
        workers: usize,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), ControllerError> {
        tracing::info!("Starting HPA controller");
        self.start_caches();
        let mut shutdown = std::pin::pin!(shutdown);
        tokio::select! {
            r = self.wait_for_cache_sync() => r?,
            () = &mut shutdown => {
                self.inner.queue.shut_down();
                tracing::info!("Shutting down HPA controller");
                return Ok(());
            }
        }
        // The previous leader's history, before the first decision.
        let history_task = match self.inner.reconciler.history.get() {
            Some(history) => {
                let state = &self.inner.reconciler.state;
                tokio::select! {
                    restored = history.restore(self.inner.reconciler.clock.now()) => {
                        for (key, h) in restored {
                            // An HPA deleted meanwhile is never reconciled again: its history
                            // goes (from the ConfigMap too, at the next flush).
                            let exists = split_key(&key).is_ok_and(|(namespace, name)| {
                                self.inner.reconciler.caches.hpa(namespace, name).is_some()
                            });
                            if !exists {
                                history.forget(&key);
                                continue;
                            }
                            state.set_recommendations(&key, h.recommendations);
                            state.set_scale_events(&key, h.scale_up_events, h.scale_down_events);
                        }
                    }
                    () = &mut shutdown => {
                        self.inner.queue.shut_down();
                        tracing::info!("Shutting down HPA controller");
                        return Ok(());
                    }
                }
                let period = self.inner.reconciler.config.sync_period();
                Some(tokio::spawn(
                    history.clone().run(period, std::future::pending::<()>()),
                ))
            }
            None => None,
        };
        let invalidation = self.inner.available_apis.clone().map(|apis| {
            let period = self.inner.reconciler.config.sync_period();
            tokio::spawn(async move {
                if !period.is_zero() {
                    apis.periodically_invalidate(period).await;
                }
            })
        });
        let inner = self.inner.clone();
        let pool = tokio::spawn(hpa_workqueue::run_workers(
            self.inner.queue.queue().clone(),
            workers.max(1),
            move |key: String| {
                let inner = inner.clone();
                async move {
                    // With --shards, a key of a shard given up since it was queued is dropped.
                    if let Some(sharded) = inner.reconciler.sharded.get()
                        && !sharded.owns(&key)
                    {
                        return Ok(());
                    }
                    // Every write of the reconcile is for this HPA (the write fence per shard
                    // reads it).
                    let (deleted, result) =
                        hpa_sharding::scope::for_hpa(&key, inner.reconciler.reconcile_key(&key))
                            .await;
                    if !deleted {
                        // The post-process re-add (covers a resync add during processing),
                        // at the HPA's own sync period if it has one.
                        inner.requeue(key);
                    }
                    result
                }
            },
        ));
        shutdown.await;
        self.inner.queue.shut_down();
        pool.abort();
        let _ = pool.await;
        if let Some(task) = invalidation {
            task.abort();
        }
        if let Some(task) = history_task {
            task.abort();
        }
        self.stop_shards();
        // `defer a.eventBroadcaster.Shutdown()`: events still queued are tried once more,
        // a write being retried is given up on.
        self.inner.reconciler.recorder.shutdown();
        tracing::info!("Shutting down HPA controller");
        Ok(())
    }

    /// Stops the cache tasks.
    pub fn stop(&self) {
        for task in self
            .inner
            .tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            task.abort();
        }
        if let Some(cache) = &self.inner.scale_targets {
            cache.stop();
        }
        self.inner.queue.shut_down();
        self.inner.reconciler.recorder.shutdown();
    }

    /// The function workers call for one key (`reconcileKey`), without the re-add.
    pub async fn reconcile_key(&self, key: &str) -> Result<(), ReconcileError> {
        self.inner.reconciler.reconcile_key(key).await.1
    }
}

fn go_to_std(d: hpa_config::GoDuration) -> Duration {
    Duration::from_nanos(d.as_nanos().max(0) as u64)
}

#[cfg(test)]
mod tests;
