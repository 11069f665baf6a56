#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use hpa_config::VirtualClock;
use hpa_decision::labels::ErrorKind;
use k8s_openapi::api::autoscaling::v1::{Scale, ScaleSpec, ScaleStatus};
use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HorizontalPodAutoscaler, HorizontalPodAutoscalerSpec,
};
use kube::api::ObjectMeta;
use kube::runtime::watcher;

use super::*;
use crate::caches::run_hpa_informer;
use crate::scale_client::{ResourceMapping, ScaleError};

/// An API server that answers every request with a 503 `Status` (status and event writes
/// fail at once, without retries).
fn unavailable_client() -> kube::Client {
    let service = tower::service_fn(|_req: http::Request<kube::client::Body>| async {
        let body = serde_json::to_vec(&serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "status": "Failure",
            "message": "unavailable", "reason": "ServiceUnavailable", "code": 503
        }))
        .unwrap();
        Ok::<_, std::convert::Infallible>(
            http::Response::builder()
                .status(503)
                .header("content-type", "application/json")
                .body(kube::client::Body::from(body))
                .unwrap(),
        )
    });
    kube::Client::new(service, "default")
}

/// Every target is a Deployment with 3 replicas; updates succeed.
struct ThreeReplicas;

#[async_trait::async_trait]
impl ScaleClient for ThreeReplicas {
    async fn rest_mappings(
        &self,
        _group: &str,
        _kind: &str,
    ) -> Result<Vec<ResourceMapping>, ScaleError> {
        Ok(vec![ResourceMapping {
            group: "apps".into(),
            version: "v1".into(),
            resource: "deployments".into(),
            namespaced: true,
        }])
    }

    async fn get_scale(
        &self,
        namespace: &str,
        _mapping: &ResourceMapping,
        name: &str,
    ) -> Result<Scale, ScaleError> {
        Ok(Scale {
            metadata: ObjectMeta {
                namespace: Some(namespace.into()),
                name: Some(name.into()),
                resource_version: Some("1".into()),
                ..Default::default()
            },
            spec: Some(ScaleSpec { replicas: Some(3) }),
            status: Some(ScaleStatus {
                replicas: 3,
                selector: Some("app=web".into()),
            }),
        })
    }

    async fn update_scale(
        &self,
        _namespace: &str,
        _mapping: &ResourceMapping,
        scale: &Scale,
    ) -> Result<Scale, ScaleError> {
        Ok(scale.clone())
    }
}

fn hpa(i: usize) -> HorizontalPodAutoscaler {
    HorizontalPodAutoscaler {
        metadata: ObjectMeta {
            namespace: Some(format!("ns-{}", i % 7)),
            name: Some(format!("hpa-{i}")),
            uid: Some(format!("uid-{i}")),
            resource_version: Some("1".into()),
            ..Default::default()
        },
        spec: HorizontalPodAutoscalerSpec {
            scale_target_ref: CrossVersionObjectReference {
                api_version: Some("apps/v1".into()),
                kind: "Deployment".into(),
                name: format!("web-{i}"),
            },
            min_replicas: Some(1),
            max_replicas: 2,
            ..Default::default()
        },
        status: None,
    }
}

/// The configuration of `flags` (flag name to value; none: every default).
fn config(flags: &[(&str, &str)]) -> ControllerConfig {
    let options = hpa_config::Options::from_flag_map(
        &flags
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    )
    .unwrap()
    .options;
    ControllerConfig::from_options(&options)
}

/// The parts of a test controller with `config`: an API server that is unavailable, no
/// metrics expected, every target a Deployment with 3 replicas, a virtual clock, a registry
/// of its own. Tests replace what they need with struct update syntax.
fn parts(config: ControllerConfig) -> ControllerParts {
    ControllerParts {
        client: unavailable_client(),
        metrics_client: Arc::new(hpa_metrics::MockMetricsClient::new()),
        available_apis: None,
        scale_client: Some(Arc::new(ThreeReplicas)),
        config,
        clock: Arc::new(VirtualClock::new("2025-01-01T00:00:00Z".parse().unwrap())),
        registry: prometheus::Registry::new(),
        workqueue_metrics: None,
        log_emissions: false,
    }
}

/// What feeds a test's HPA informer: the watch events it would have received.
type HpaEvents = tokio::sync::mpsc::UnboundedSender<
    Result<watcher::Event<HorizontalPodAutoscaler>, watcher::Error>,
>;

/// Takes `controller`'s cache writers and runs its HPA informer (resync every `resync`, zero:
/// none) on the events sent through the returned channel instead of a watch; also returns
/// the pod cache's writer.
fn hpa_informer(
    controller: &HorizontalController,
    resync: Duration,
) -> (
    HpaEvents,
    tokio::task::JoinHandle<()>,
    Arc<crate::caches::PodIndex>,
) {
    let writers = controller.inner.writers.lock().unwrap().take().unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let events = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
    let handler: Arc<dyn HpaEventHandler> = controller.inner.clone();
    let informer = tokio::spawn(run_hpa_informer(events, writers.hpas, handler, resync));
    (tx, informer, writers.pods)
}

/// The informer's initial list: `hpas`, then the end of the list.
fn initial_list(tx: &HpaEvents, hpas: impl IntoIterator<Item = HorizontalPodAutoscaler>) {
    tx.send(Ok(watcher::Event::Init)).unwrap();
    for h in hpas {
        tx.send(Ok(watcher::Event::InitApply(h))).unwrap();
    }
    tx.send(Ok(watcher::Event::InitDone)).unwrap();
}

#[derive(Debug, PartialEq)]
struct Sizes {
    state: usize,
    selectors: usize,
    selector_namespaces: usize,
    last_decisions: usize,
    queued: usize,
    waiting: usize,
    series: usize,
    num_hpas: f64,
    events_pending: usize,
}

fn sizes(c: &HorizontalController) -> Sizes {
    let inner = &c.inner;
    Sizes {
        state: inner.reconciler.state.entries(),
        selectors: inner.reconciler.selectors.len(),
        selector_namespaces: inner.reconciler.selectors.namespaces(),
        last_decisions: inner.reconciler.last_decisions.len(),
        queued: inner.queue.queue().len(),
        waiting: inner.queue.waiting_len(),
        series: inner.reconciler.monitor.per_hpa_series(),
        num_hpas: inner.reconciler.monitor.num_hpas(),
        events_pending: inner.reconciler.recorder.pending(),
    }
}

/// Lets the spawned tasks run until `done` holds (a bounded number of scheduler turns; the
/// clock is paused, so nothing here waits on time).
async fn settle(done: impl Fn() -> bool) {
    for _ in 0..10_000 {
        if done() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("did not settle");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_thousand_hpas_created_and_deleted_leave_no_state_behind() {
    const N: usize = 1000;
    let registry = prometheus::Registry::new();
    let controller = HorizontalController::new(ControllerParts {
        registry: registry.clone(),
        ..parts(ControllerConfig {
            keep_last_decisions: true,
            ..config(&[])
        })
    })
    .unwrap();
    let period = controller.inner.reconciler.config.sync_period();

    // The informers, fed from a channel instead of a watch.
    let (tx, informer, pods) = hpa_informer(&controller, period);
    pods.apply(watcher::Event::Init);
    pods.apply(watcher::Event::InitDone);
    initial_list(&tx, []);

    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let run = {
        let c = controller.clone();
        tokio::spawn(async move {
            c.run(2, async {
                let _ = stopped.await;
            })
            .await
        })
    };
    let before = sizes(&controller);

    for i in 0..N {
        tx.send(Ok(watcher::Event::Apply(hpa(i)))).unwrap();
    }
    settle(|| controller.inner.reconciler.selectors.len() == N).await;
    // One sync period later every HPA has been reconciled (and scaled from 3 to 2).
    tokio::time::sleep(period + Duration::from_millis(1)).await;
    settle(|| controller.inner.reconciler.last_decisions.len() == N).await;
    let during = sizes(&controller);
    assert_eq!(during.selectors, N);
    assert_eq!(during.selector_namespaces, 7);
    assert_eq!(during.series, N);
    assert_eq!(during.num_hpas, N as f64);
    assert!(during.state >= N, "{during:?}");
    controller.recorder().wait_idle().await;
    assert!(controller.recorder().correlator_sizes().observations > 0);

    for i in 0..N {
        tx.send(Ok(watcher::Event::Delete(hpa(i)))).unwrap();
    }
    // The next pass of each key finds it gone and forgets it.
    tokio::time::sleep(period + Duration::from_millis(1)).await;
    settle(|| controller.inner.reconciler.last_decisions.is_empty()).await;
    // Further resyncs and sync periods bring nothing back.
    tokio::time::sleep(period * 3).await;
    controller.recorder().wait_idle().await;
    assert_eq!(sizes(&controller), before);
    // The correlator forgets nothing client-go remembers, but stays within its LRU bound.
    let c = controller.recorder().correlator_sizes();
    assert!(c.aggregates <= crate::recorder::MAX_LRU_CACHE_ENTRIES);
    assert!(c.observations <= crate::recorder::MAX_LRU_CACHE_ENTRIES);
    assert!(c.spam <= crate::recorder::MAX_LRU_CACHE_ENTRIES);
    // No per-HPA series is left in what the registry exposes.
    let exposed = registry
        .gather()
        .iter()
        .filter(|f| f.name().ends_with("desired_replicas"))
        .map(|f| f.get_metric().len())
        .sum::<usize>();
    assert_eq!(exposed, 0);

    stop.send(()).unwrap();
    run.await.unwrap().unwrap();
    informer.abort();
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_delete_at_the_resync_instant_leaves_the_hpa_unregistered() {
    let controller = HorizontalController::new(parts(ControllerConfig {
        keep_last_decisions: true,
        ..config(&[])
    }))
    .unwrap();
    let period = controller.inner.reconciler.config.sync_period();
    let (tx, informer, _) = hpa_informer(&controller, period);
    initial_list(&tx, [hpa(0), hpa(1)]);
    tokio::time::sleep(period - Duration::from_millis(1)).await;
    assert_eq!(controller.inner.reconciler.selectors.len(), 2);
    // The deletion is delivered at the instant the resync is due; resyncs keep coming.
    tx.send(Ok(watcher::Event::Delete(hpa(0)))).unwrap();
    tokio::time::sleep(period * 4).await;
    let gone = crate::selectors::HpaKey::new("ns-0", "hpa-0");
    let kept = crate::selectors::HpaKey::new("ns-1", "hpa-1");
    assert!(!controller.inner.reconciler.selectors.contains(&gone));
    assert!(controller.inner.reconciler.selectors.contains(&kept));
    assert_eq!(controller.inner.reconciler.monitor.num_hpas(), 1.0);
    informer.abort();
}

/// Where `AddFunc` and `UpdateFunc` put an HPA (kubernetes#138294): `(ready, waiting)` after
/// a new HPA, a spec change (generation 1 -> 2), a status-only change (1 -> 1) and the
/// handler's resync, each a different HPA so that the queue's de-duplication does not hide
/// one.
fn enqueue_placements(flags: &[(&str, &str)]) -> Vec<(usize, usize)> {
    let controller = HorizontalController::new(parts(config(flags))).unwrap();
    let inner = &controller.inner;
    let with_generation = |i: usize, g: i64| {
        let mut h = hpa(i);
        h.metadata.generation = Some(g);
        h
    };
    let mut out = Vec::new();
    let mut seen = (0, 0);
    let mut step = |f: &dyn Fn()| {
        f();
        let now = (inner.queue.queue().len(), inner.queue.waiting_len());
        out.push((now.0 - seen.0, now.1 - seen.1));
        seen = now;
    };
    step(&|| inner.on_add(&with_generation(0, 1)));
    step(&|| inner.on_update(Some(1), &with_generation(1, 2)));
    step(&|| inner.on_update(Some(1), &with_generation(2, 1)));
    step(&|| inner.on_resync(&with_generation(3, 1)));
    out
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn new_and_spec_changed_hpas_are_queued_at_once_from_1_37() {
    // 1.35 and 1.36: every add and update waits one sync period (AddRateLimited).
    let later = vec![(0, 1), (0, 1), (0, 1), (0, 1)];
    assert_eq!(enqueue_placements(&[]), later);
    assert_eq!(enqueue_placements(&[("emulated-version", "1.36")]), later);
    // 1.37: a new HPA and a spec change (generation moved) at once; a status-only change or a
    // resync waits.
    assert_eq!(
        enqueue_placements(&[("emulated-version", "1.37")]),
        vec![(1, 0), (1, 0), (0, 1), (0, 1)]
    );
    // 1.37 without HPAGeneration: updates fall back to rate-limited; a new HPA still at once.
    assert_eq!(
        enqueue_placements(&[
            ("emulated-version", "1.37"),
            ("feature-gates", "HPAGeneration=false")
        ]),
        vec![(1, 0), (0, 1), (0, 1), (0, 1)]
    );
    // Shadow mode: an update (the active controller's status write) at once, to compare with
    // what it has just written; a resync, which nothing wrote, waits a period as upstream's.
    assert_eq!(
        enqueue_placements(&[("emulated-version", "1.36"), ("shadow", "true")]),
        vec![(0, 1), (1, 0), (1, 0), (0, 1)]
    );
}

/// `StaleControllerConsistencyHPA` (1.37): a reconcile is deferred while the cached HPA is
/// older than this controller's last status write; before 1.37 it never is.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn reconcile_waits_for_the_informer_to_see_its_own_status_write() {
    for (version, defers) in [("1.36", false), ("1.37", true)] {
        let controller =
            HorizontalController::new(parts(config(&[("emulated-version", version)]))).unwrap();
        let inner = controller.inner.clone();
        let (tx, informer, _) = hpa_informer(&controller, Duration::ZERO);
        let at = |rv: &str| {
            let mut h = hpa(0);
            h.metadata.resource_version = Some(rv.into());
            h
        };
        initial_list(&tx, [at("5")]);
        settle(|| inner.reconciler.caches.hpa("ns-0", "hpa-0").is_some()).await;
        // This controller's last status write to the HPA came back as resourceVersion 7.
        inner
            .reconciler
            .status_writer
            .remember_write("ns-0/hpa-0", "uid-0".into(), 7);
        let (_, first) = inner.reconciler.reconcile_key("ns-0/hpa-0").await;
        let stale = |r: &Result<(), ReconcileError>| {
            r.as_ref()
                .err()
                .is_some_and(|e| e.message.contains("is not ready for reconciliation"))
        };
        assert_eq!(stale(&first), defers, "{version}: {first:?}");
        if defers {
            assert_eq!(
                first.unwrap_err().message,
                "HPA ns-0/hpa-0 is not ready for reconciliation: the informer has not yet observed this controller's status write (resourceVersion 7, cached 5)"
            );
        }
        // Once the informer has the write, the reconcile goes ahead.
        tx.send(Ok(watcher::Event::Apply(at("7")))).unwrap();
        settle(|| {
            inner
                .reconciler
                .caches
                .hpa("ns-0", "hpa-0")
                .is_some_and(|h| h.metadata.resource_version.as_deref() == Some("7"))
        })
        .await;
        let (_, second) = inner.reconciler.reconcile_key("ns-0/hpa-0").await;
        assert!(!stale(&second), "{version}: {second:?}");
        informer.abort();
    }
}

/// Every target is a Deployment with 3 replicas; every scale write is refused.
struct RefusesWrites;

#[async_trait::async_trait]
impl ScaleClient for RefusesWrites {
    async fn rest_mappings(
        &self,
        group: &str,
        kind: &str,
    ) -> Result<Vec<ResourceMapping>, ScaleError> {
        ThreeReplicas.rest_mappings(group, kind).await
    }

    async fn get_scale(
        &self,
        namespace: &str,
        mapping: &ResourceMapping,
        name: &str,
    ) -> Result<Scale, ScaleError> {
        ThreeReplicas.get_scale(namespace, mapping, name).await
    }

    async fn update_scale(
        &self,
        _namespace: &str,
        _mapping: &ResourceMapping,
        _scale: &Scale,
    ) -> Result<Scale, ScaleError> {
        Err(ScaleError::status(
            403,
            "deployments.apps \"web-0\" is forbidden",
        ))
    }
}

/// A failed rescale (3 replicas above `maxReplicas: 2`, no metrics needed) returns upstream's
/// `failed to rescale` text, of kind `internal`, with the scale write's error as its source.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_failed_rescale_keeps_the_write_error_as_its_source() {
    use std::error::Error as _;
    let controller = HorizontalController::new(ControllerParts {
        scale_client: Some(Arc::new(RefusesWrites)),
        ..parts(config(&[]))
    })
    .unwrap();
    let (tx, informer, _) = hpa_informer(&controller, Duration::ZERO);
    initial_list(&tx, [hpa(0)]);
    settle(|| controller.cached_hpa("ns-0", "hpa-0").is_some()).await;
    let err = controller.reconcile_key("ns-0/hpa-0").await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Internal);
    assert_eq!(
        err.to_string(),
        "failed to rescale Deployment/ns-0/web-0: deployments.apps \"web-0\" is forbidden"
    );
    assert_eq!(
        err.source().map(ToString::to_string).as_deref(),
        Some("deployments.apps \"web-0\" is forbidden")
    );
    informer.abort();
}

/// When every metric fails, the reconcile returns upstream's `failed to compute desired number
/// of replicas` text, of kind `internal`, and its sources lead down to the metrics API's
/// answer: the first metric's failure, the calculator's error, the metrics client's error and
/// the request's.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_failed_metric_keeps_every_error_below_it_as_sources() {
    use k8s_openapi::api::autoscaling::v2::{MetricSpec, MetricTarget, ResourceMetricSource};
    let mut metrics_client = hpa_metrics::MockMetricsClient::new();
    metrics_client
        .expect_get_resource_metric()
        .returning(|_, _, _, _| {
            Err(hpa_metrics::MetricsError::ResourceFetch(
                hpa_metrics::FetchError::status(
                    503,
                    "the server is currently unable to handle the request",
                ),
            ))
        });
    let controller = HorizontalController::new(ControllerParts {
        metrics_client: Arc::new(metrics_client),
        ..parts(config(&[]))
    })
    .unwrap();
    let (tx, informer, _) = hpa_informer(&controller, Duration::ZERO);
    let mut with_cpu = hpa(0);
    with_cpu.spec.max_replicas = 5;
    with_cpu.spec.metrics = Some(vec![MetricSpec {
        type_: "Resource".into(),
        resource: Some(ResourceMetricSource {
            name: "cpu".into(),
            target: MetricTarget {
                type_: "Utilization".into(),
                average_utilization: Some(50),
                ..Default::default()
            },
        }),
        ..Default::default()
    }]);
    initial_list(&tx, [with_cpu]);
    settle(|| controller.cached_hpa("ns-0", "hpa-0").is_some()).await;
    let err = controller.reconcile_key("ns-0/hpa-0").await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Internal);
    let fetch = "unable to fetch metrics from resource metrics API: the server is currently unable to handle the request";
    let calculator = format!("unable to get metrics for resource cpu: {fetch}");
    let metric = format!(
        "failed to get cpu resource metric value: failed to get cpu utilization: {calculator}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "failed to compute desired number of replicas based on listed metrics for \
             Deployment/ns-0/web-0: invalid metrics (1 invalid out of 1), first error is: {metric}"
        )
    );
    let mut chain = Vec::new();
    let mut next = std::error::Error::source(&err);
    while let Some(e) = next {
        chain.push(e.to_string());
        next = e.source();
    }
    assert_eq!(
        chain,
        [
            metric,
            calculator,
            fetch.to_owned(),
            "the server is currently unable to handle the request".to_owned(),
        ]
    );
    informer.abort();
}

/// A target read from the scale target cache (3 replicas, resourceVersion 1) whose live
/// object moved on (`live`, resourceVersion 2): a write carrying version 1 conflicts.
struct CachedBehind {
    live: i32,
    live_status: i32,
    writes: std::sync::Mutex<Vec<(String, i32)>>,
}

impl CachedBehind {
    fn new(live: i32, live_status: i32) -> Self {
        CachedBehind {
            live,
            live_status,
            writes: std::sync::Mutex::new(Vec::new()),
        }
    }

    fn scale(name: &str, rv: &str, replicas: i32, status: i32) -> Scale {
        Scale {
            metadata: ObjectMeta {
                namespace: Some("ns-0".into()),
                name: Some(name.into()),
                resource_version: Some(rv.into()),
                ..Default::default()
            },
            spec: Some(ScaleSpec {
                replicas: (replicas != 0).then_some(replicas),
            }),
            status: Some(ScaleStatus {
                replicas: status,
                selector: Some("app=web".into()),
            }),
        }
    }
}

#[async_trait::async_trait]
impl ScaleClient for CachedBehind {
    async fn rest_mappings(
        &self,
        group: &str,
        kind: &str,
    ) -> Result<Vec<ResourceMapping>, ScaleError> {
        ThreeReplicas.rest_mappings(group, kind).await
    }

    async fn get_scale(
        &self,
        _namespace: &str,
        _mapping: &ResourceMapping,
        name: &str,
    ) -> Result<Scale, ScaleError> {
        Ok(Self::scale(name, "1", 3, 3))
    }

    async fn get_scale_from(
        &self,
        namespace: &str,
        mapping: &ResourceMapping,
        name: &str,
    ) -> Result<(Scale, crate::scale_client::ReadSource), ScaleError> {
        let scale = self.get_scale(namespace, mapping, name).await?;
        Ok((scale, crate::scale_client::ReadSource::Cache))
    }

    async fn get_scale_live(
        &self,
        _namespace: &str,
        _mapping: &ResourceMapping,
        name: &str,
    ) -> Result<Scale, ScaleError> {
        Ok(Self::scale(name, "2", self.live, self.live_status))
    }

    async fn update_scale(
        &self,
        _namespace: &str,
        _mapping: &ResourceMapping,
        scale: &Scale,
    ) -> Result<Scale, ScaleError> {
        let rv = scale.metadata.resource_version.clone().unwrap_or_default();
        let replicas = scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
        self.writes.lock().unwrap().push((rv.clone(), replicas));
        if rv == "1" {
            return Err(ScaleError::status(
                409,
                "Operation cannot be fulfilled on deployments.apps \"web-0\": the object has been modified; please apply your changes to the latest version and try again",
            ));
        }
        Ok(scale.clone())
    }
}

/// The cache said 3 replicas (above `maxReplicas: 2`: scale to 2), but someone scaled the
/// target to 0 (autoscaling disabled) since: the write conflicts, and the decision is made
/// again from the live scale, as upstream's (read with a GET in the same reconcile) would
/// have been. Nothing is written over the 0; before this, 2 was written over it.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_conflict_after_a_cached_read_decides_again_from_the_live_scale() {
    let client = Arc::new(CachedBehind::new(0, 0));
    let controller = HorizontalController::new(ControllerParts {
        // The test's client plays the cache (its reads say so).
        scale_client: Some(client.clone()),
        ..parts(config(&[("scale-target-cache", "false")]))
    })
    .unwrap();
    let (tx, informer, _) = hpa_informer(&controller, Duration::ZERO);
    initial_list(&tx, [hpa(0)]);
    settle(|| controller.cached_hpa("ns-0", "hpa-0").is_some()).await;
    let _ = controller.reconcile_key("ns-0/hpa-0").await;
    assert_eq!(*client.writes.lock().unwrap(), [("1".to_owned(), 2)]);
    let trace = controller.traces().latest_of("ns-0/hpa-0").unwrap();
    assert_eq!(
        (
            trace.target.spec_replicas,
            trace.branch.as_str(),
            trace.rescale
        ),
        (0, "ScalingDisabled", false)
    );
    // The recommendation made from the cached 3 is not kept.
    assert!(
        controller
            .state()
            .recommendations("ns-0/hpa-0")
            .iter()
            .all(|r| r.recommendation != 3)
    );
    informer.abort();
}

/// A conflict whose live scale reads the same as the cached one (only the resourceVersion
/// moved) is retried as upstream retries it: the same decision, on the latest version.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_conflict_over_an_unchanged_scale_is_retried_with_the_same_decision() {
    let client = Arc::new(CachedBehind::new(3, 3));
    let controller = HorizontalController::new(ControllerParts {
        // The test's client plays the cache (its reads say so).
        scale_client: Some(client.clone()),
        ..parts(config(&[("scale-target-cache", "false")]))
    })
    .unwrap();
    let (tx, informer, _) = hpa_informer(&controller, Duration::ZERO);
    initial_list(&tx, [hpa(0)]);
    settle(|| controller.cached_hpa("ns-0", "hpa-0").is_some()).await;
    let _ = controller.reconcile_key("ns-0/hpa-0").await;
    assert_eq!(
        *client.writes.lock().unwrap(),
        [("1".to_owned(), 2), ("2".to_owned(), 2)]
    );
    informer.abort();
}

/// What the test API server saw and answered.
#[derive(Default)]
struct Seen {
    /// `METHOD path` of every request.
    requests: Vec<String>,
    /// The objects the status PUTs were answered with.
    stored: Vec<serde_json::Value>,
}

/// An API server that keeps no `status.observedGeneration` (HPAGeneration off in the API
/// server, on in the controller): each status PUT is answered with the object minus that
/// field; other requests are answered with what they sent.
fn server_dropping_observed_generation(seen: Arc<std::sync::Mutex<Seen>>) -> kube::Client {
    use http_body_util::BodyExt;
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let seen = seen.clone();
        async move {
            let line = format!("{} {}", req.method(), req.uri().path());
            let is_status_put =
                req.method() == http::Method::PUT && req.uri().path().ends_with("/status");
            let body = req.into_body().collect().await.unwrap().to_bytes();
            let mut seen = seen.lock().unwrap();
            seen.requests.push(line);
            let (code, body) = if is_status_put {
                let mut hpa: serde_json::Value = serde_json::from_slice(&body).unwrap();
                if let Some(status) = hpa.get_mut("status").and_then(|s| s.as_object_mut()) {
                    status.remove("observedGeneration");
                }
                hpa["metadata"]["resourceVersion"] = serde_json::json!("2");
                seen.stored.push(hpa.clone());
                (200, serde_json::to_vec(&hpa).unwrap())
            } else {
                (201, body.to_vec())
            };
            Ok::<_, std::convert::Infallible>(
                http::Response::builder()
                    .status(code)
                    .header("content-type", "application/json")
                    .body(kube::client::Body::from(body))
                    .unwrap(),
            )
        }
    });
    kube::Client::new(service, "default")
}

/// Every target has 0 replicas (autoscaling disabled: nothing but the status is written).
struct ZeroReplicas;

#[async_trait::async_trait]
impl ScaleClient for ZeroReplicas {
    async fn rest_mappings(
        &self,
        group: &str,
        kind: &str,
    ) -> Result<Vec<ResourceMapping>, ScaleError> {
        ThreeReplicas.rest_mappings(group, kind).await
    }

    async fn get_scale(
        &self,
        _namespace: &str,
        _mapping: &ResourceMapping,
        name: &str,
    ) -> Result<Scale, ScaleError> {
        Ok(CachedBehind::scale(name, "1", 0, 0))
    }

    async fn update_scale(
        &self,
        _namespace: &str,
        _mapping: &ResourceMapping,
        _scale: &Scale,
    ) -> Result<Scale, ScaleError> {
        Err(ScaleError::new("update_scale is not reached"))
    }
}

/// Behaving as 1.37, an HPA without `metadata.generation` gets `status.observedGeneration: 0`
/// (upstream's `&hpa.Generation`). A server that drops the field answers without it; the next
/// reconciles, with the same status otherwise, must not write it again (a strict comparison
/// of nil with 0 would PUT the status every sync).
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_server_that_drops_observed_generation_gets_no_status_write_per_sync() {
    let seen = Arc::new(std::sync::Mutex::new(Seen::default()));
    let controller = HorizontalController::new(ControllerParts {
        client: server_dropping_observed_generation(seen.clone()),
        scale_client: Some(Arc::new(ZeroReplicas)),
        ..parts(config(&[
            ("emulated-version", "1.37"),
            ("scale-target-cache", "false"),
        ]))
    })
    .unwrap();
    let (tx, informer, _) = hpa_informer(&controller, Duration::ZERO);
    let hpa = hpa(0);
    assert_eq!(hpa.metadata.generation, None);
    initial_list(&tx, [hpa]);
    settle(|| controller.cached_hpa("ns-0", "hpa-0").is_some()).await;
    let status_puts = || {
        seen.lock()
            .unwrap()
            .requests
            .iter()
            .filter(|r| r.starts_with("PUT ") && r.ends_with("/status"))
            .count()
    };
    controller.reconcile_key("ns-0/hpa-0").await.unwrap();
    assert_eq!(status_puts(), 1);
    // The informer sees what the server kept.
    let stored: HorizontalPodAutoscaler =
        serde_json::from_value(seen.lock().unwrap().stored[0].clone()).unwrap();
    assert_eq!(stored.status.as_ref().unwrap().observed_generation, None);
    tx.send(Ok(watcher::Event::Apply(stored))).unwrap();
    settle(|| {
        controller
            .cached_hpa("ns-0", "hpa-0")
            .is_some_and(|h| h.metadata.resource_version.as_deref() == Some("2"))
    })
    .await;
    for _ in 0..3 {
        controller.reconcile_key("ns-0/hpa-0").await.unwrap();
    }
    assert_eq!(status_puts(), 1, "{:?}", seen.lock().unwrap().requests);
    informer.abort();
}

/// Every target has 3 replicas; every scale write is refused by the write fence (this
/// instance's lease renewal is late), as the binary's request layer refuses it.
struct FencedWrites;

#[async_trait::async_trait]
impl ScaleClient for FencedWrites {
    async fn rest_mappings(
        &self,
        group: &str,
        kind: &str,
    ) -> Result<Vec<ResourceMapping>, ScaleError> {
        ThreeReplicas.rest_mappings(group, kind).await
    }

    async fn get_scale(
        &self,
        namespace: &str,
        mapping: &ResourceMapping,
        name: &str,
    ) -> Result<Scale, ScaleError> {
        ThreeReplicas.get_scale(namespace, mapping, name).await
    }

    async fn update_scale(
        &self,
        _namespace: &str,
        _mapping: &ResourceMapping,
        _scale: &Scale,
    ) -> Result<Scale, ScaleError> {
        let refused =
            crate::FenceError::NotLeading(Duration::from_secs(11), Duration::from_secs(10));
        Err(ScaleError::caused_by(
            format!(
                "PUT \"https://api/apis/apps/v1/namespaces/ns-0/deployments/web-0/scale\": {refused}"
            ),
            refused,
        ))
    }
}

/// A scale write the fence refused was never sent: no FailedRescale event, no status write
/// (whose FailedUpdateStatus would follow), no recommendation kept; the reconcile fails so
/// that the HPA is requeued. Before, the FailedRescale event was made and left once a late
/// renewal reopened the fence.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_fenced_scale_write_makes_no_event_and_no_status_write() {
    let seen = Arc::new(std::sync::Mutex::new(Seen::default()));
    let controller = HorizontalController::new(ControllerParts {
        client: server_dropping_observed_generation(seen.clone()),
        scale_client: Some(Arc::new(FencedWrites)),
        log_emissions: true,
        ..parts(config(&[("scale-target-cache", "false")]))
    })
    .unwrap();
    let (tx, informer, _) = hpa_informer(&controller, Duration::ZERO);
    initial_list(&tx, [hpa(0)]);
    settle(|| controller.cached_hpa("ns-0", "hpa-0").is_some()).await;
    let err = controller.reconcile_key("ns-0/hpa-0").await.unwrap_err();
    assert!(err.to_string().contains("write refused"), "{err}");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        controller.recorder().emitted_since(0).is_empty(),
        "{:?}",
        controller.recorder().emitted_since(0)
    );
    assert!(
        seen.lock().unwrap().requests.is_empty(),
        "{:?}",
        seen.lock().unwrap().requests
    );
    assert!(
        controller.state().recommendations("ns-0/hpa-0").is_empty(),
        "{:?}",
        controller.state().recommendations("ns-0/hpa-0")
    );
    informer.abort();
}

/// An API server behind a fence that refuses every write (as the binary's request layer does
/// when the lease renewal is late): a write fails with a [`crate::FenceError`] before it is sent.
fn fenced_client() -> kube::Client {
    let service = tower::service_fn(|req: http::Request<kube::client::Body>| async move {
        if req.method() == http::Method::GET {
            return Ok(http::Response::builder()
                .status(404)
                .header("content-type", "application/json")
                .body(kube::client::Body::from(b"{}".to_vec()))
                .unwrap());
        }
        Err::<http::Response<kube::client::Body>, _>(crate::FenceError::NeverLed)
    });
    kube::Client::new(service, "default")
}

/// A status write the fence refused makes no FailedUpdateStatus event.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_fenced_status_write_makes_no_event() {
    let controller = HorizontalController::new(ControllerParts {
        client: fenced_client(),
        scale_client: Some(Arc::new(ZeroReplicas)),
        log_emissions: true,
        ..parts(config(&[("scale-target-cache", "false")]))
    })
    .unwrap();
    let (tx, informer, _) = hpa_informer(&controller, Duration::ZERO);
    initial_list(&tx, [hpa(0)]);
    settle(|| controller.cached_hpa("ns-0", "hpa-0").is_some()).await;
    let err = controller.reconcile_key("ns-0/hpa-0").await.unwrap_err();
    assert!(
        err.to_string().starts_with("failed to update status"),
        "{err}"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    let emitted = controller.recorder().emitted_since(0);
    assert!(
        emitted.iter().all(|e| e.reason != "FailedUpdateStatus"),
        "{emitted:?}"
    );
    informer.abort();
}

/// Every target is a Deployment whose replicas the test sets (`spec` and `status` alike).
struct SetReplicas(std::sync::atomic::AtomicI32);

#[async_trait::async_trait]
impl ScaleClient for SetReplicas {
    async fn rest_mappings(
        &self,
        group: &str,
        kind: &str,
    ) -> Result<Vec<ResourceMapping>, ScaleError> {
        ThreeReplicas.rest_mappings(group, kind).await
    }

    async fn get_scale(
        &self,
        namespace: &str,
        mapping: &ResourceMapping,
        name: &str,
    ) -> Result<Scale, ScaleError> {
        let mut scale = ThreeReplicas.get_scale(namespace, mapping, name).await?;
        let replicas = self.0.load(std::sync::atomic::Ordering::SeqCst);
        scale.spec = Some(ScaleSpec {
            replicas: Some(replicas),
        });
        if let Some(s) = scale.status.as_mut() {
            s.replicas = replicas;
        }
        Ok(scale)
    }

    async fn update_scale(
        &self,
        _namespace: &str,
        _mapping: &ResourceMapping,
        _scale: &Scale,
    ) -> Result<Scale, ScaleError> {
        Err(ScaleError::new("shadow mode writes no scale"))
    }
}

/// Shadow mode, a scale-down held by a 60 s stabilization window: the active controller let
/// go of it a moment after this controller's last decision from the same inputs (its window
/// had a recommendation of 4 from half a second in). Its status's lastScaleTime pins its
/// decision to a second; decided again at the end of that second, from the history kept up
/// to it, this controller scales down as well: an agreement, where the kept decision alone
/// was only "held by history". Nothing of that decision is kept, and the other side's
/// rescale is stored as a scale event at the middle of that second.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn shadow_decides_again_at_the_moment_of_the_active_controllers_rescale() {
    use k8s_openapi::api::autoscaling::v2::{
        ExternalMetricSource, ExternalMetricStatus, HPAScalingRules,
        HorizontalPodAutoscalerBehavior, HorizontalPodAutoscalerCondition,
        HorizontalPodAutoscalerStatus, MetricIdentifier, MetricSpec, MetricStatus, MetricTarget,
        MetricValueStatus,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use std::sync::atomic::{AtomicI32, AtomicI64, Ordering};

    let start: jiff::Timestamp = "2025-01-01T00:00:00Z".parse().unwrap();
    let at = |s: f64| start + jiff::SignedDuration::from_secs_f64(s);
    let clock = Arc::new(VirtualClock::new(start));
    let total = Arc::new(AtomicI64::new(400_000));
    let mut metrics_client = hpa_metrics::MockMetricsClient::new();
    let read = total.clone();
    metrics_client
        .expect_get_external_metric()
        .returning(move |_, _, _| Ok((vec![read.load(Ordering::SeqCst)], start)));
    let replicas = Arc::new(SetReplicas(AtomicI32::new(4)));
    let controller = HorizontalController::new(ControllerParts {
        metrics_client: Arc::new(metrics_client),
        scale_client: Some(replicas.clone()),
        clock: clock.clone(),
        ..parts(config(&[
            ("shadow", "true"),
            ("scale-target-cache", "false"),
        ]))
    })
    .unwrap();
    let (tx, informer, _) = hpa_informer(&controller, Duration::ZERO);
    let mut queue = hpa(0);
    queue.spec.max_replicas = 10;
    queue.spec.metrics = Some(vec![MetricSpec {
        type_: "External".into(),
        external: Some(ExternalMetricSource {
            metric: MetricIdentifier {
                name: "queue".into(),
                selector: None,
            },
            target: MetricTarget {
                type_: "AverageValue".into(),
                average_value: Some(Quantity("100".into())),
                ..Default::default()
            },
        }),
        ..Default::default()
    }]);
    queue.spec.behavior = Some(HorizontalPodAutoscalerBehavior {
        scale_down: Some(HPAScalingRules {
            stabilization_window_seconds: Some(60),
            ..Default::default()
        }),
        scale_up: None,
    });
    initial_list(&tx, [queue.clone()]);
    settle(|| controller.cached_hpa("ns-0", "hpa-0").is_some()).await;
    let key = "ns-0/hpa-0";

    // 400 over 4 replicas: 4, recommended at 0.5 s. Then 100: 1, held by that 4.
    clock.set(at(0.5));
    let _ = controller.reconcile_key(key).await;
    total.store(100_000, Ordering::SeqCst);
    for s in [30.0, 60.2] {
        clock.set(at(s));
        let _ = controller.reconcile_key(key).await;
        assert_eq!(
            controller.traces().latest_of(key).unwrap().desired_replicas,
            4
        );
    }

    // The active controller decided at 60.7 s: 4 -> 1, lastScaleTime 60 s.
    replicas.0.store(1, Ordering::SeqCst);
    let condition = |type_: &str, reason: &str| HorizontalPodAutoscalerCondition {
        type_: type_.into(),
        status: "True".into(),
        reason: Some(reason.into()),
        message: Some(String::new()),
        last_transition_time: Some(Time(start)),
        observed_generation: None,
    };
    let mut written = queue.clone();
    written.metadata.resource_version = Some("2".into());
    written.status = Some(HorizontalPodAutoscalerStatus {
        current_replicas: Some(4),
        desired_replicas: 1,
        last_scale_time: Some(Time(at(60.0))),
        current_metrics: Some(vec![MetricStatus {
            type_: "External".into(),
            external: Some(ExternalMetricStatus {
                metric: MetricIdentifier {
                    name: "queue".into(),
                    selector: None,
                },
                current: MetricValueStatus {
                    average_value: Some(Quantity("25".into())),
                    ..Default::default()
                },
            }),
            ..Default::default()
        }]),
        conditions: Some(vec![
            condition("AbleToScale", "SucceededRescale"),
            condition("ScalingActive", "ValidMetricFound"),
            condition("ScalingLimited", "DesiredWithinRange"),
        ]),
        observed_generation: None,
    });
    tx.send(Ok(watcher::Event::Apply(written))).unwrap();
    settle(|| {
        controller
            .cached_hpa("ns-0", "hpa-0")
            .is_some_and(|h| h.status.is_some())
    })
    .await;
    clock.set(at(61.2));
    let before = controller.state().recommendations(key);
    let _ = controller.reconcile_key(key).await;

    let latest = controller
        .shadow_comparisons()
        .get(key)
        .unwrap()
        .latest
        .unwrap();
    assert_eq!(
        latest.result,
        crate::shadow::ShadowResult::Agree,
        "{}",
        latest.summary
    );
    assert!(
        latest.summary.contains("at the other controller's moment"),
        "{}",
        latest.summary
    );
    assert_eq!(latest.ours.desired_replicas, 1);
    // Nothing of the decisions at its moment is kept: no recommendation but those of the
    // kept decisions, no trace of them.
    let after = controller.state().recommendations(key);
    assert!(
        after
            .iter()
            .all(|r| [0.5, 30.0, 60.2, 61.2].map(at).contains(&r.timestamp)),
        "{before:?} -> {after:?}"
    );
    let times: Vec<jiff::Timestamp> = controller
        .traces()
        .get(key)
        .iter()
        .map(|t| t.time)
        .collect();
    assert_eq!(times, [at(0.5), at(30.0), at(60.2), at(61.2)]);
    // The other side's rescale: a scale-down event of 3 at 60.5 s.
    let down = controller.state().scale_down_events(key);
    assert_eq!(
        down.iter()
            .map(|e| (e.replica_change, e.timestamp))
            .collect::<Vec<_>>(),
        [(3, at(60.5))]
    );
    informer.abort();
}

/// Every target is a Deployment whose replicas the test sets; every scale write is kept and
/// sets them.
#[derive(Default)]
struct KeepsWrites {
    replicas: std::sync::atomic::AtomicI32,
    writes: std::sync::Mutex<Vec<i32>>,
}

#[async_trait::async_trait]
impl ScaleClient for KeepsWrites {
    async fn rest_mappings(
        &self,
        group: &str,
        kind: &str,
    ) -> Result<Vec<ResourceMapping>, ScaleError> {
        ThreeReplicas.rest_mappings(group, kind).await
    }

    async fn get_scale(
        &self,
        namespace: &str,
        mapping: &ResourceMapping,
        name: &str,
    ) -> Result<Scale, ScaleError> {
        let set = SetReplicas(std::sync::atomic::AtomicI32::new(
            self.replicas.load(std::sync::atomic::Ordering::SeqCst),
        ));
        set.get_scale(namespace, mapping, name).await
    }

    async fn update_scale(
        &self,
        _namespace: &str,
        _mapping: &ResourceMapping,
        scale: &Scale,
    ) -> Result<Scale, ScaleError> {
        let n = scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
        self.writes.lock().unwrap().push(n);
        self.replicas.store(n, std::sync::atomic::Ordering::SeqCst);
        Ok(scale.clone())
    }
}

/// The pause annotations through a whole reconcile: `paused: "true"` writes no scale but the
/// status (replicas, metrics, AbleToScale=False ScalingPaused); `paused-replicas` writes its
/// count once and then leaves the target; an invalid value gets one Warning event and is
/// ignored.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn paused_hpas_write_no_scale_a_pin_once_and_warn_once_of_a_bad_value() {
    use k8s_openapi::api::autoscaling::v2::{
        ExternalMetricSource, MetricIdentifier, MetricSpec, MetricTarget,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use std::sync::atomic::Ordering;

    let seen = Arc::new(std::sync::Mutex::new(Seen::default()));
    let start: jiff::Timestamp = "2025-01-01T00:00:00Z".parse().unwrap();
    let mut metrics_client = hpa_metrics::MockMetricsClient::new();
    // 600 in all: at 3 replicas, 200 a replica against a target of 100: 6 replicas.
    metrics_client
        .expect_get_external_metric()
        .returning(move |_, _, _| Ok((vec![600_000], start)));
    let target = Arc::new(KeepsWrites::default());
    target.replicas.store(3, Ordering::SeqCst);
    let controller = HorizontalController::new(ControllerParts {
        client: server_dropping_observed_generation(seen.clone()),
        metrics_client: Arc::new(metrics_client),
        scale_client: Some(target.clone()),
        log_emissions: true,
        ..parts(config(&[("scale-target-cache", "false")]))
    })
    .unwrap();
    let (tx, informer, _) = hpa_informer(&controller, Duration::ZERO);
    let mut h = hpa(0);
    h.spec.max_replicas = 10;
    h.spec.metrics = Some(vec![MetricSpec {
        type_: "External".into(),
        external: Some(ExternalMetricSource {
            metric: MetricIdentifier {
                name: "queue".into(),
                selector: None,
            },
            target: MetricTarget {
                type_: "AverageValue".into(),
                average_value: Some(Quantity("100".into())),
                ..Default::default()
            },
        }),
        ..Default::default()
    }]);
    let key = "ns-0/hpa-0";
    let mut version = 10;
    // The HPA as the informer next sees it: the status last written, these annotations.
    let mut apply = |annotations: &[(&str, &str)]| {
        let mut next = h.clone();
        if let Some(stored) = seen.lock().unwrap().stored.last() {
            let stored: HorizontalPodAutoscaler = serde_json::from_value(stored.clone()).unwrap();
            next.status = stored.status;
        }
        next.metadata.annotations = Some(
            annotations
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        version += 1;
        next.metadata.resource_version = Some(version.to_string());
        tx.send(Ok(watcher::Event::Apply(next))).unwrap();
        version.to_string()
    };
    let status_puts = || {
        seen.lock()
            .unwrap()
            .requests
            .iter()
            .filter(|r| r.starts_with("PUT ") && r.ends_with("/status"))
            .count()
    };
    let last_status = || {
        let stored: HorizontalPodAutoscaler =
            serde_json::from_value(seen.lock().unwrap().stored.last().unwrap().clone()).unwrap();
        stored.status.unwrap()
    };
    let able_to_scale = |s: &k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscalerStatus| {
        let c = s
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "AbleToScale")
            .unwrap();
        (
            c.status.clone(),
            c.reason.clone().unwrap_or_default(),
            c.message.clone().unwrap_or_default(),
        )
    };
    let events = |mark: usize| -> Vec<(String, String, String)> {
        controller
            .recorder()
            .emitted_since(mark)
            .into_iter()
            .map(|e| (e.type_, e.reason, e.message))
            .collect()
    };

    // Paused: the metrics ask for 6; no write, the status all the same.
    let rv = apply(&[("kube-hpa-controller.io/paused", "true")]);
    settle(|| {
        controller
            .cached_hpa("ns-0", "hpa-0")
            .is_some_and(|c| c.metadata.resource_version.as_deref() == Some(rv.as_str()))
    })
    .await;
    controller.reconcile_key(key).await.unwrap();
    assert!(target.writes.lock().unwrap().is_empty());
    assert_eq!(status_puts(), 1);
    let status = last_status();
    assert_eq!(
        (status.current_replicas, status.desired_replicas),
        (Some(3), 3)
    );
    assert_eq!(status.current_metrics.as_ref().map(Vec::len), Some(1));
    assert_eq!(
        able_to_scale(&status),
        (
            "False".to_owned(),
            "ScalingPaused".to_owned(),
            "scaling is paused by the annotation kube-hpa-controller.io/paused: the HPA controller does not update the target scale".to_owned()
        )
    );
    assert!(events(0).is_empty(), "{:?}", events(0));
    assert!(controller.traces().latest_of(key).unwrap().pause.is_some());

    // Pinned to 5: written once.
    let rv = apply(&[("kube-hpa-controller.io/paused-replicas", "5")]);
    settle(|| {
        controller
            .cached_hpa("ns-0", "hpa-0")
            .is_some_and(|c| c.metadata.resource_version.as_deref() == Some(rv.as_str()))
    })
    .await;
    let mark = controller.recorder().emitted_since(0).len();
    controller.reconcile_key(key).await.unwrap();
    assert_eq!(*target.writes.lock().unwrap(), vec![5]);
    assert_eq!(
        events(mark),
        vec![(
            "Normal".to_owned(),
            "SuccessfulRescale".to_owned(),
            "New size: 5; reason: paused at 5 replicas by the annotation kube-hpa-controller.io/paused-replicas".to_owned()
        )]
    );
    let status = last_status();
    assert_eq!(status.desired_replicas, 5);
    assert_eq!(able_to_scale(&status).1, "ScalingPaused");
    // Scaled by hand to 4 while pinned: left there.
    target.replicas.store(4, Ordering::SeqCst);
    controller.reconcile_key(key).await.unwrap();
    assert_eq!(*target.writes.lock().unwrap(), vec![5]);

    // A bad value: one Warning naming it, and the HPA autoscales as without it (6 at 4
    // replicas: 150 a replica against 100).
    let rv = apply(&[("kube-hpa-controller.io/paused", "maybe")]);
    settle(|| {
        controller
            .cached_hpa("ns-0", "hpa-0")
            .is_some_and(|c| c.metadata.resource_version.as_deref() == Some(rv.as_str()))
    })
    .await;
    let mark = controller.recorder().emitted_since(0).len();
    controller.reconcile_key(key).await.unwrap();
    let emitted = events(mark);
    assert_eq!(
        emitted[0],
        (
            "Warning".to_owned(),
            "InvalidAnnotation".to_owned(),
            "annotation kube-hpa-controller.io/paused has the invalid value \"maybe\": must be \"true\" or \"false\"; it is ignored".to_owned()
        )
    );
    assert_eq!(emitted[1].1, "SuccessfulRescale");
    assert_eq!(*target.writes.lock().unwrap(), vec![5, 6]);
    assert_eq!(able_to_scale(&last_status()).1, "SucceededRescale");
    let mark = controller.recorder().emitted_since(0).len();
    controller.reconcile_key(key).await.unwrap();
    assert!(events(mark).is_empty(), "warned once: {:?}", events(mark));
    informer.abort();
}

/// The metric fallback annotation through whole reconciles on a virtual clock: an External
/// metric failing is counted from its first failure and, 30 s later, proposes its fallback's
/// 8 replicas (rate-limited to 6, then 8), with one `MetricFallbackActivated` event and
/// `MetricFallbackActive=True`; read again, it clears (one `MetricFallbackCleared`), and the
/// downscale stabilization window holds the count as for any proposal.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_failing_metric_falls_back_after_its_threshold_and_clears_when_read() {
    use k8s_openapi::api::autoscaling::v2::{
        ExternalMetricSource, HorizontalPodAutoscalerStatus, MetricIdentifier, MetricSpec,
        MetricTarget,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use std::sync::atomic::{AtomicBool, Ordering};

    let seen = Arc::new(std::sync::Mutex::new(Seen::default()));
    let start: jiff::Timestamp = "2025-01-01T00:00:00Z".parse().unwrap();
    let clock = Arc::new(VirtualClock::new(start));
    let down = Arc::new(AtomicBool::new(true));
    let mut metrics_client = hpa_metrics::MockMetricsClient::new();
    let is_down = down.clone();
    // Up: 300 in all, 100 a replica at 3 replicas against a target of 100: 3 replicas.
    metrics_client
        .expect_get_external_metric()
        .returning(move |_, _, _| {
            if is_down.load(Ordering::SeqCst) {
                Err(hpa_metrics::MetricsError::ExternalFetch(
                    hpa_metrics::FetchError::status(503, "the external metrics adapter is down"),
                ))
            } else {
                Ok((vec![300_000], start))
            }
        });
    let target = Arc::new(KeepsWrites::default());
    target.replicas.store(3, Ordering::SeqCst);
    let controller = HorizontalController::new(ControllerParts {
        client: server_dropping_observed_generation(seen.clone()),
        metrics_client: Arc::new(metrics_client),
        scale_client: Some(target.clone()),
        clock: clock.clone(),
        log_emissions: true,
        ..parts(config(&[("scale-target-cache", "false")]))
    })
    .unwrap();
    let (tx, informer, _) = hpa_informer(&controller, Duration::ZERO);
    let mut h = hpa(0);
    h.spec.max_replicas = 20;
    h.spec.metrics = Some(vec![MetricSpec {
        type_: "External".into(),
        external: Some(ExternalMetricSource {
            metric: MetricIdentifier {
                name: "queue".into(),
                selector: None,
            },
            target: MetricTarget {
                type_: "AverageValue".into(),
                average_value: Some(Quantity("100".into())),
                ..Default::default()
            },
        }),
        ..Default::default()
    }]);
    h.metadata.annotations = Some(
        [(
            "kube-hpa-controller.io/metric-fallback".to_owned(),
            r#"[{"metric": "External/queue", "failureDurationSeconds": 30, "replicas": 8}]"#
                .to_owned(),
        )]
        .into(),
    );
    let key = "ns-0/hpa-0";
    let mut version = 10;
    // The HPA as the informer next sees it: with the status last written.
    let mut apply = || {
        let mut next = h.clone();
        if let Some(stored) = seen.lock().unwrap().stored.last() {
            let stored: HorizontalPodAutoscaler = serde_json::from_value(stored.clone()).unwrap();
            next.status = stored.status;
        }
        version += 1;
        next.metadata.resource_version = Some(version.to_string());
        tx.send(Ok(watcher::Event::Apply(next))).unwrap();
        version.to_string()
    };
    let last_status = || -> HorizontalPodAutoscalerStatus {
        let stored: HorizontalPodAutoscaler =
            serde_json::from_value(seen.lock().unwrap().stored.last().unwrap().clone()).unwrap();
        stored.status.unwrap()
    };
    let condition = |s: &HorizontalPodAutoscalerStatus, type_: &str| {
        s.conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == type_)
            .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
    };
    let reasons = |mark: usize| -> Vec<String> {
        controller
            .recorder()
            .emitted_since(mark)
            .into_iter()
            .map(|e| e.reason)
            .collect()
    };
    // One reconcile at `secs`: the events emitted before it (to read those after) and its
    // result.
    let mut sync = |secs: i64| {
        clock.set(start + jiff::SignedDuration::from_secs(secs));
        let rv = apply();
        let controller = &controller;
        let mark = controller.recorder().emitted_since(0).len();
        async move {
            settle(|| {
                controller
                    .cached_hpa("ns-0", "hpa-0")
                    .is_some_and(|c| c.metadata.resource_version.as_deref() == Some(rv.as_str()))
            })
            .await;
            (mark, controller.reconcile_key(key).await)
        }
    };

    // 0 s and 15 s: failing, below the 30 s threshold: upstream's total failure.
    for secs in [0, 15] {
        let (mark, result) = sync(secs).await;
        assert!(result.is_err());
        assert_eq!(
            reasons(mark),
            vec!["FailedGetExternalMetric", "FailedComputeMetricsReplicas"]
        );
        let status = last_status();
        assert_eq!(
            condition(&status, "ScalingActive"),
            Some(("False".into(), "FailedGetExternalMetric".into()))
        );
        assert_eq!(
            condition(&status, "MetricFallbackActive"),
            Some(("False".into(), "NoFallbackInEffect".into()))
        );
    }
    assert!(target.writes.lock().unwrap().is_empty());
    // 30 s: 30 s of failures: 8 replicas, limited to max(2 x 3, 4) = 6.
    let (mark, result) = sync(30).await;
    result.unwrap();
    assert_eq!(*target.writes.lock().unwrap(), vec![6]);
    assert_eq!(
        reasons(mark),
        vec![
            "FailedGetExternalMetric",
            "MetricFallbackActivated",
            "SuccessfulRescale"
        ]
    );
    let activated = controller.recorder().emitted_since(mark)[1].message.clone();
    assert_eq!(
        activated,
        "fallback activated for spec.metrics[0] (External/queue) after 30s of consecutive failures (3 in a row), using the fallback replica count 8"
    );
    let status = last_status();
    assert_eq!(
        condition(&status, "MetricFallbackActive"),
        Some(("True".into(), "FallbackInEffect".into()))
    );
    assert_eq!(
        condition(&status, "ScalingActive"),
        Some(("True".into(), "ValidMetricFound".into()))
    );
    let trace = controller.traces().latest_of(key).unwrap();
    assert!(trace.fallback_in_effect());
    assert_eq!(trace.metrics[0].proposal, Some(8));
    // 45 s: still failing: 8, no second activation.
    let (mark, result) = sync(45).await;
    result.unwrap();
    assert_eq!(*target.writes.lock().unwrap(), vec![6, 8]);
    assert_eq!(
        reasons(mark),
        vec!["FailedGetExternalMetric", "SuccessfulRescale"]
    );
    // 60 s: read again (300 over 8 replicas asks for 3): cleared once; the downscale
    // stabilization window (5 min) holds 8.
    down.store(false, Ordering::SeqCst);
    let (mark, result) = sync(60).await;
    result.unwrap();
    assert_eq!(*target.writes.lock().unwrap(), vec![6, 8]);
    assert_eq!(reasons(mark), vec!["MetricFallbackCleared"]);
    let status = last_status();
    assert_eq!(
        condition(&status, "MetricFallbackActive"),
        Some(("False".into(), "NoFallbackInEffect".into()))
    );
    assert_eq!(
        condition(&status, "AbleToScale"),
        Some(("True".into(), "ScaleDownStabilized".into()))
    );
    let (mark, result) = sync(75).await;
    result.unwrap();
    assert!(reasons(mark).is_empty(), "{:?}", reasons(mark));
    informer.abort();
}

/// Every target is a Deployment with 3 replicas, and each scale read is timed: one per
/// reconcile, by target name.
#[derive(Default)]
struct TimedReads {
    reads: std::sync::Mutex<Vec<(String, tokio::time::Instant)>>,
}

#[async_trait::async_trait]
impl ScaleClient for TimedReads {
    async fn rest_mappings(
        &self,
        group: &str,
        kind: &str,
    ) -> Result<Vec<ResourceMapping>, ScaleError> {
        ThreeReplicas.rest_mappings(group, kind).await
    }

    async fn get_scale(
        &self,
        namespace: &str,
        mapping: &ResourceMapping,
        name: &str,
    ) -> Result<Scale, ScaleError> {
        self.reads
            .lock()
            .unwrap()
            .push((name.to_owned(), tokio::time::Instant::now()));
        ThreeReplicas.get_scale(namespace, mapping, name).await
    }

    async fn update_scale(
        &self,
        namespace: &str,
        mapping: &ResourceMapping,
        scale: &Scale,
    ) -> Result<Scale, ScaleError> {
        ThreeReplicas.update_scale(namespace, mapping, scale).await
    }
}

impl TimedReads {
    /// The intervals between the reconciles of target `name` read after `since`, in whole
    /// seconds.
    fn intervals(&self, name: &str, since: tokio::time::Instant) -> Vec<u64> {
        let times: Vec<_> = self
            .reads
            .lock()
            .unwrap()
            .iter()
            .filter(|(n, t)| n == name && *t >= since)
            .map(|(_, t)| *t)
            .collect();
        times
            .windows(2)
            .map(|w| (w[1] - w[0]).as_secs_f64().round() as u64)
            .collect()
    }
}

/// `kube-hpa-controller.io/sync-period` through the workers and the handler's resync (every
/// 15 s): 5 s and 60 s HPAs are reconciled on their own periods, one without the annotation
/// and one with a bad value on the global 15 s (the bad value warned once); an edit of the
/// annotation takes effect at the next re-add.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_hpa_with_its_own_sync_period_is_reconciled_on_it_and_the_others_on_the_global_one() {
    let reads = Arc::new(TimedReads::default());
    let controller = HorizontalController::new(ControllerParts {
        scale_client: Some(reads.clone()),
        log_emissions: true,
        ..parts(config(&[]))
    })
    .unwrap();
    let period = controller.inner.reconciler.config.sync_period();
    assert_eq!(period, Duration::from_secs(15));
    let annotated = |i: usize, value: Option<&str>| {
        let mut h = hpa(i);
        h.metadata.annotations = value.map(|v| {
            [(
                "kube-hpa-controller.io/sync-period".to_owned(),
                v.to_owned(),
            )]
            .into()
        });
        h
    };
    let (tx, informer, pods) = hpa_informer(&controller, period);
    pods.apply(watcher::Event::Init);
    pods.apply(watcher::Event::InitDone);
    initial_list(
        &tx,
        [
            annotated(0, Some("5s")),
            annotated(1, None),
            annotated(2, Some("1m")),
            annotated(3, Some("fast")),
        ],
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let run = {
        let c = controller.clone();
        tokio::spawn(async move {
            c.run(2, async {
                let _ = stopped.await;
            })
            .await
        })
    };
    let start = tokio::time::Instant::now();
    tokio::time::sleep(Duration::from_secs(241)).await;
    assert_eq!(reads.intervals("web-0", start), vec![5; 47]);
    assert_eq!(reads.intervals("web-1", start), vec![15; 15]);
    // Longer than the global period: the resync every 15 s does not bring it forward.
    assert_eq!(reads.intervals("web-2", start), vec![60; 3]);
    assert_eq!(reads.intervals("web-3", start), vec![15; 15]);
    let warnings: Vec<_> = controller
        .recorder()
        .emitted_since(0)
        .into_iter()
        .filter(|e| e.reason == "InvalidAnnotation")
        .map(|e| e.message)
        .collect();
    assert_eq!(
        warnings,
        vec![
            "annotation kube-hpa-controller.io/sync-period has the invalid value \"fast\": must be a whole number of seconds from 1 to 3600, as a duration such as \"5s\", \"1m\" or \"1m30s\" or as a number of seconds such as \"5\"; it is ignored".to_owned()
        ]
    );
    let trace = controller.traces().latest_of("ns-0/hpa-0").unwrap();
    assert_eq!(trace.sync_period_seconds, Some(5));

    // The annotation removed from the 5 s HPA and set to 3 s on the unannotated one: each
    // takes its new period from its next re-add on.
    let mut h0 = annotated(0, None);
    h0.metadata.resource_version = Some("2".into());
    let mut h1 = annotated(1, Some("3"));
    h1.metadata.resource_version = Some("2".into());
    tx.send(Ok(watcher::Event::Apply(h0))).unwrap();
    tx.send(Ok(watcher::Event::Apply(h1))).unwrap();
    tokio::time::sleep(Duration::from_secs(20)).await;
    let edited = tokio::time::Instant::now();
    tokio::time::sleep(Duration::from_secs(91)).await;
    assert_eq!(reads.intervals("web-0", edited), vec![15; 5]);
    let fast = reads.intervals("web-1", edited);
    assert!(fast.len() >= 29 && fast.iter().all(|&s| s == 3), "{fast:?}");

    stop.send(()).unwrap();
    run.await.unwrap().unwrap();
    informer.abort();
}

/// Issue 27's load, on Tokio's paused clock (it shows the queue keeps each key on its period
/// at this size, not how long reconciles take on a real server): 1,000 HPAs at the global 15 s
/// and 100 annotated at 3 s, 5 workers, the handler's resync every 15 s. Over 2 minutes each
/// is reconciled exactly on its period.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_thousand_hpas_at_15s_and_a_hundred_at_3s_each_keep_their_period() {
    let reads = Arc::new(TimedReads::default());
    let controller = HorizontalController::new(ControllerParts {
        scale_client: Some(reads.clone()),
        ..parts(config(&[]))
    })
    .unwrap();
    let period = controller.inner.reconciler.config.sync_period();
    let (tx, informer, pods) = hpa_informer(&controller, period);
    pods.apply(watcher::Event::Init);
    pods.apply(watcher::Event::InitDone);
    initial_list(
        &tx,
        (0..1100).map(|i| {
            let mut h = hpa(i);
            if i >= 1000 {
                h.metadata.annotations = Some(
                    [(
                        "kube-hpa-controller.io/sync-period".to_owned(),
                        "3s".to_owned(),
                    )]
                    .into(),
                );
            }
            h
        }),
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let run = {
        let c = controller.clone();
        tokio::spawn(async move {
            c.run(5, async {
                let _ = stopped.await;
            })
            .await
        })
    };
    let start = tokio::time::Instant::now();
    tokio::time::sleep(Duration::from_secs(121)).await;
    for i in 0..1100 {
        let (want, n) = if i < 1000 { (15, 7) } else { (3, 39) };
        let got = reads.intervals(&format!("web-{i}"), start);
        assert!(
            got.len() >= n && got.iter().all(|&s| s == want),
            "web-{i}: {got:?}"
        );
    }
    stop.send(()).unwrap();
    run.await.unwrap().unwrap();
    informer.abort();
}
