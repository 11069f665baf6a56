//! The process around the controller: what `kube-controller-manager`'s `Run` does for it.
//!
//! Mirrors `cmd/kube-controller-manager/app/controllermanager.go` (`Run`): logging, the
//! client, secure serving of `/metrics` and health, leader election, then the controller
//! until a signal or the loss of the lease. Exit status: 0 after SIGTERM/SIGINT (the lease is
//! released first), 1 when leadership is lost or start-up fails (the API server not healthy
//! within 10 s included, as KCM's `WaitForAPIServer`).
//!
//! With `--shards` there is no single leader: every replica runs its caches and workers and
//! a coordinator takes and renews shard Leases (`hpa-sharding`); the workers reconcile the
//! HPAs of the shards held, each write fenced by its shard's Lease. Exit status 0 after a
//! signal (the shards released first).
//!
//! Shutdown (`Run`'s cancelled context): the first SIGTERM closes the write fence at once (no
//! write leaves after it), stops taking keys, cancels the reconciles in flight with their API
//! calls, releases the lease (bounded by [`RELEASE_TIMEOUT`]) and exits 0; a second SIGTERM
//! exits 1 at once, as component-base's `SetupSignalHandler` does.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hpa_build_info::BUILD_INFO;
use hpa_config::options::DEFAULT_LEASE_NAME;
use hpa_config::{KubeVersion, Options, SystemClock};
use hpa_horizontal::{
    ControllerConfig, ControllerParts, HistoryFactory, HorizontalController, KubeScaleClient,
    resolve_version,
};
use hpa_metrics::{AvailableApis, DeferredRestMapper, RestMetricsClient};
use hpa_sharding::{
    Coordinator, CoordinatorConfig, ShardBy, ShardFences, ShardHandler, ShardMetrics,
};
use hpa_workqueue::{Stability, WorkqueueMetrics};
use prometheus::Registry;
use tokio::sync::watch;

use crate::auth::DelegatingAuth;
use crate::client::{Clients, build_clients};
use crate::fence::WriteFence;
use crate::leader_election::{
    ElectionConfig, KubeLeaseLock, LeaderElector, LeaderHealth, LeaderMetrics, RenewOutcome,
    new_identity,
};
use crate::metrics::RestClientMetrics;
use crate::serving::{Readiness, SecureServer, ServingConfig, ServingState};

/// Why the process stopped, and so its exit status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A signal asked it to stop; everything shut down in order (exit 0).
    Stopped,
    /// Leadership was lost: stop at once, as KCM does (exit 1).
    LeaderElectionLost,
}

/// A start-up failure, with the words an operator needs.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// Logging could not be set up.
    #[error("logging: {0}")]
    Logging(#[from] crate::logging::LoggingError),
    /// The API client could not be built (bad kubeconfig, no configuration, ...).
    #[error("{0}")]
    Client(#[from] crate::client::ClientError),
    /// Serving could not start (certificate, bind).
    #[error("secure serving: {0}")]
    Serving(#[from] crate::serving::ServeError),
    /// Delegated authentication/authorization could not be set up.
    #[error("{0}")]
    Auth(#[from] crate::auth::AuthError),
    /// Metrics could not be registered.
    #[error("metrics: {0}")]
    Metrics(#[from] prometheus::Error),
    /// The controller could not start.
    #[error("{0}")]
    Controller(#[from] hpa_horizontal::ControllerError),
    /// The API server did not answer `/healthz` with `ok` in time (KCM's
    /// `WaitForAPIServer`).
    #[error("failed to wait for apiserver being healthy: {0}")]
    ApiServer(String),
    /// The version to behave as could not be chosen (`/version` unreadable), or the feature
    /// gates are not valid at that version (component-base's words).
    #[error("{0}")]
    Version(String),
}

/// How long the lease release at shutdown may take: the whole shutdown stays within two
/// seconds even when the API server stopped answering.
pub const RELEASE_TIMEOUT: Duration = Duration::from_secs(1);

/// How long the cancelled workers may take to stop at shutdown.
pub const DRAIN_TIMEOUT: Duration = Duration::from_millis(200);

/// How long the `LeaderElection` events may take to be written before the process exits.
pub const EVENT_FLUSH_TIMEOUT: Duration = Duration::from_millis(200);

/// How long KCM waits for the API server's `/healthz` at start
/// (`genericcontrollermanager.WaitForAPIServer(client, 10*time.Second)`).
pub const API_SERVER_WAIT: Duration = Duration::from_secs(10);

/// Completes on SIGTERM or SIGINT. A second signal after that ends the process at once
/// with status 1 (component-base's `SetupSignalHandler`).
pub async fn termination_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
                tokio::spawn(async move {
                    tokio::select! {
                        _ = term.recv() => {}
                        _ = tokio::signal::ctrl_c() => {}
                    }
                    eprintln!("Error: received a second termination signal, exiting");
                    std::process::exit(1);
                });
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

fn std_duration(d: hpa_config::GoDuration) -> Duration {
    d.to_std()
}

/// `WaitForAPIServer`: polls `/healthz` every second until it answers 200, for at most
/// `timeout`; the error says why the last attempt failed.
pub async fn wait_for_api_server(
    client: &kube::Client,
    server: &http::Uri,
    timeout: Duration,
) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + timeout;
    let url = format!("{}/healthz", server.to_string().trim_end_matches('/'));
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let last_err = match tokio::time::timeout(left, healthz(client)).await {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(e)) => e,
            Err(_) => format!(
                "failed to get apiserver /healthz status: Get \"{url}\": context deadline exceeded"
            ),
        };
        let now = tokio::time::Instant::now();
        if now + Duration::from_secs(1) > deadline {
            return Err(format!("timed out waiting for the condition: {last_err}"));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn healthz(client: &kube::Client) -> Result<(), String> {
    let request = http::Request::get("/healthz")
        .body(kube::client::Body::empty())
        .map_err(|e| e.to_string())?;
    let response = client.send(request).await.map_err(|e| {
        format!(
            "failed to get apiserver /healthz status: {}",
            hpa_metrics::kube_error_message(&e)
        )
    })?;
    let status = response.status();
    let body = response
        .into_body()
        .collect_bytes()
        .await
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    if status == http::StatusCode::OK {
        return Ok(());
    }
    tracing::warn!("APIServer isn't healthy yet: {body}. Waiting a little while.");
    Err(format!("APIServer isn't healthy: {body}"))
}

/// Runs the process until `stop` completes or leadership is lost.
pub async fn run(
    options: Options,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<Outcome, AppError> {
    let registry = Registry::new();
    let rest_metrics = RestClientMetrics::new(&registry)?;
    let le = options.leader_election.clone();
    // --shards: one fence per shard, opened by that shard's Lease.
    let shard_by = ShardBy::parse(&options.sharding.shard_by).unwrap_or_default();
    let shard_fences = (options.sharding.shards > 1
        && le.leader_elect
        && options.hpa_controller_enabled())
    .then(|| {
        Arc::new(
            ShardFences::new(options.sharding.shards, std_duration(le.renew_deadline))
                .sharded_by(shard_by),
        )
    });
    let fence = if let Some(fences) = &shard_fences {
        WriteFence::sharded(fences.clone(), options.shadow.shadow)
    } else if options.shadow.shadow {
        // Shadow mode: the scale and HPA clients never write, whatever the lease.
        WriteFence::read_only()
    } else if le.leader_elect && options.hpa_controller_enabled() {
        WriteFence::leased(std_duration(le.renew_deadline))
    } else {
        WriteFence::open()
    };
    crate::fence::FenceMetrics::register(&fence, &registry)?;
    let clients = build_clients(&options, rest_metrics.clone(), fence.clone()).await?;

    // One stop signal, observed by every part. The fence closes first: no write leaves
    // after the signal.
    let (stop_tx, stop_rx) = watch::channel(false);
    {
        let fence = fence.clone();
        tokio::spawn(async move {
            stop.await;
            fence.close();
            let _ = stop_tx.send(true);
        });
    }
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|v| *v).await;
    };

    let readiness = Readiness::new();
    let health = LeaderHealth::default();
    let auth = Arc::new(DelegatingAuth::from_flags(&options.auth).await?);
    let serving = ServingConfig::from_flags(&options.serving)?;
    let debug = crate::debug::DebugStores::new();
    let mut serving_addr = None;
    if let Some(server) = SecureServer::bind(&serving).await? {
        serving_addr = server.local_addr().ok();
        let mut state =
            ServingState::new(registry.clone(), readiness.clone(), auth).with_debug(debug.clone());
        if le.leader_elect {
            state = state.with_leader_health(health.clone());
        }
        tokio::spawn(server.run(state, stopped(stop_rx.clone())));
    }

    {
        let mut stop = std::pin::pin!(stopped(stop_rx.clone()));
        tokio::select! {
            waited = wait_for_api_server(&clients.hpa, &clients.server, API_SERVER_WAIT) => {
                waited.map_err(AppError::ApiServer)?;
            }
            () = &mut stop => return Ok(Outcome::Stopped),
        }
    }

    if !options.hpa_controller_enabled() {
        // No version is resolved for a controller that does not run: the build and the gates
        // are those of --emulated-version, else of the newest version this binary knows.
        let version = options.emulated_version().unwrap_or(KubeVersion::NEWEST);
        crate::metrics::register_build_info(&registry, &BUILD_INFO, stability_at(version))?;
        if let Ok((gates, _)) = options.feature_gates_at(version) {
            crate::metrics::register_feature_gates(&registry, &gates)?;
        }
        // kube-controller-manager's words and level for a controller left out of --controllers.
        tracing::info!(
            controller = "horizontal-pod-autoscaler-controller",
            "Warning: controller is disabled"
        );
        readiness.set_ready();
        stopped(stop_rx.clone()).await;
        return Ok(Outcome::Stopped);
    }

    let resolved = resolve_version(&options, &clients.hpa)
        .await
        .map_err(|e| AppError::Version(e.to_string()))?;
    let version = resolved.version;
    if let Some(warning) = &resolved.warning {
        tracing::warn!("{warning}");
    }
    let (config, gate_warnings) = ControllerConfig::for_resolved(&options, &resolved)
        .map_err(|e| AppError::Version(format!("--feature-gates: {e}")))?;
    if resolved.server_before_1_37 && version.at_least(KubeVersion::V1_37) {
        tracing::warn!(
            "behaving as {version} against an API server older than 1.37: status.observedGeneration is not written"
        );
    }
    for warning in gate_warnings {
        tracing::warn!("{warning}");
    }
    tracing::info!(
        version = %version,
        source = if options.emulated_version().is_some() { "--emulated-version" } else { "the API server's /version" },
        "behaving as the HPA controller of kube-controller-manager {version}"
    );
    let stability = stability_at(version);
    // What component-base registers at init, here once the version behaved as is known.
    crate::metrics::register_build_info(&registry, &BUILD_INFO, stability)?;
    crate::metrics::register_feature_gates(&registry, &config.gates)?;
    let controller = build_controller(config, &clients, &registry, stability)?;
    let lease_name = if le.resource_name.is_empty() {
        DEFAULT_LEASE_NAME.to_string()
    } else {
        le.resource_name.clone()
    };
    if let Some(fences) = shard_fences {
        let persist = options.history.persist_hpa_history && !options.shadow.shadow;
        let history: Option<HistoryFactory> = if persist {
            let metrics = hpa_history::HistoryMetrics::register(&registry)?;
            let client = clients.hpa.clone();
            let namespace = le.resource_namespace.clone();
            let base = lease_name.clone();
            Some(Box::new(move |shard| {
                // Each shard's ConfigMaps beside its Lease: LEASE-shard-I-history-N.
                let store = hpa_history::ConfigMapStore::new(
                    client.clone(),
                    &namespace,
                    &hpa_sharding::coordinator::shard_lease_name(&base, shard),
                );
                Arc::new(
                    hpa_history::History::with_metrics(store, metrics.clone())
                        .with_fenced_check(hpa_horizontal::refused_by_fence),
                )
            }))
        } else {
            None
        };
        controller.set_shards(options.sharding.shards, shard_by, history);
        debug.set(&controller);
        let workers = usize::try_from(options.hpa.concurrent_syncs).unwrap_or(1);
        let coordinator = Coordinator::new(
            clients.leader_election.clone(),
            CoordinatorConfig {
                namespace: le.resource_namespace.clone(),
                name: lease_name,
                identity: new_identity(),
                shards: options.sharding.shards,
                by: shard_by,
                lease_duration: std_duration(le.lease_duration),
                renew_deadline: std_duration(le.renew_deadline),
                retry_period: std_duration(le.retry_period),
                address: serving_addr.map(|a| advertised_address(&options, a)),
            },
            fences,
        )
        .with_metrics(ShardMetrics::register(&registry, options.sharding.shards)?);
        return run_sharded(
            &controller,
            coordinator,
            workers,
            &readiness,
            stop_rx.clone(),
        )
        .await;
    }
    if options.history.persist_hpa_history && !options.shadow.shadow {
        // The history ConfigMaps sit beside the Lease (LEASE-history-N), written through the
        // HPA client: its writes pass the fence as the status writes do.
        let store = hpa_history::ConfigMapStore::new(
            clients.hpa.clone(),
            &le.resource_namespace,
            &lease_name,
        );
        let history = hpa_history::History::new(store, &registry)?
            .with_fenced_check(hpa_horizontal::refused_by_fence);
        controller.set_history(Arc::new(history));
    }
    debug.set(&controller);
    let workers = usize::try_from(options.hpa.concurrent_syncs).unwrap_or(1);

    if !le.leader_elect {
        return run_controller(&controller, workers, &readiness, stopped(stop_rx.clone())).await;
    }

    // Standing by for the lease counts as ready, as KCM's /readyz does.
    readiness.set_ready();
    let leader_metrics = LeaderMetrics::new(&registry)?;
    let identity = new_identity();
    tracing::info!(identity = %identity, lease = %format!("{}/{}", le.resource_namespace, le.resource_name), "leader election");
    let mut lock = KubeLeaseLock::new(
        clients.leader_election.clone(),
        &le.resource_namespace,
        &le.resource_name,
        identity,
    );
    if options.shadow.shadow {
        lock = lock.without_events();
    }
    let mut elector = LeaderElector::new(
        lock,
        ElectionConfig {
            lease_duration: std_duration(le.lease_duration),
            renew_deadline: std_duration(le.renew_deadline),
            retry_period: std_duration(le.retry_period),
            name: if le.resource_name.is_empty() {
                DEFAULT_LEASE_NAME.to_string()
            } else {
                le.resource_name.clone()
            },
        },
        Arc::new(SystemClock),
        Some(leader_metrics),
    )
    .with_fence(fence.clone())
    .with_health(health);
    let mut stop_acquire = Box::pin(stopped(stop_rx.clone()));
    if !elector.acquire(&mut stop_acquire).await {
        return Ok(Outcome::Stopped);
    }

    // Leading: the controller runs until the lease is lost or a signal arrives.
    let (halt_tx, halt_rx) = watch::channel(false);
    let run = {
        let controller = controller.clone();
        let readiness = readiness.clone();
        tokio::spawn(async move {
            run_controller(&controller, workers, &readiness, stopped(halt_rx)).await
        })
    };
    let mut stop_renew = Box::pin(stopped(stop_rx.clone()));
    let outcome = elector.renew(&mut stop_renew).await;
    fence.close();
    let _ = halt_tx.send(true);
    // `stopped leading` reaches the server if it can within a moment.
    elector.flush_events(EVENT_FLUSH_TIMEOUT).await;
    match outcome {
        RenewOutcome::Lost => {
            // 1.36's words ("leaderelection lost" in 1.35).
            tracing::error!("leaderelection lost/stopped");
            controller.stop();
            Ok(Outcome::LeaderElectionLost)
        }
        RenewOutcome::Shutdown => {
            // The workers were cancelled; hand the lease over at once.
            if tokio::time::timeout(DRAIN_TIMEOUT, run).await.is_err() {
                tracing::warn!("workers did not stop in time");
            }
            controller.stop();
            if tokio::time::timeout(RELEASE_TIMEOUT, elector.release())
                .await
                .is_err()
            {
                tracing::error!(err = "context deadline exceeded", "Failed to release lease");
            }
            Ok(Outcome::Stopped)
        }
    }
}

/// The stability of the metrics that went from alpha to beta in Kubernetes 1.36 (the
/// workqueue's, `kubernetes_build_info`) at the version behaved as.
fn stability_at(version: KubeVersion) -> Stability {
    if version.at_least(KubeVersion::V1_36) {
        Stability::Beta
    } else {
        Stability::Alpha
    }
}

/// The controller over the process's clients: HPA status and events through the HPA client,
/// the scale subresource through the scale client, each metrics API through its own, the
/// informers through theirs.
fn build_controller(
    config: ControllerConfig,
    clients: &Clients,
    registry: &Registry,
    workqueue_stability: Stability,
) -> Result<HorizontalController, AppError> {
    let available_apis = AvailableApis::new();
    // KCM's one deferred discovery RESTMapper (reset every 30 s), shared by the scale and
    // custom-metrics clients; discovery goes through the HPA client.
    let rest_mapper = DeferredRestMapper::new(clients.hpa.clone());
    let metrics_client = RestMetricsClient::with_parts(
        clients.metrics.clone(),
        available_apis.clone(),
        rest_mapper.clone(),
    );
    let scale_client = KubeScaleClient::with_rest_mapper(clients.scale.clone(), rest_mapper);
    Ok(HorizontalController::with_informer_client(
        ControllerParts {
            client: clients.hpa.clone(),
            metrics_client: Arc::new(metrics_client),
            available_apis: Some(available_apis),
            scale_client: Some(Arc::new(scale_client)),
            config,
            clock: Arc::new(SystemClock),
            registry: registry.clone(),
            workqueue_metrics: Some(WorkqueueMetrics::register_with(
                registry,
                workqueue_stability,
            )?),
            log_emissions: false,
        },
        Some(clients.informers.clone()),
    )?)
}

/// Where this replica's `/debug` is reached, for its member Lease (`hpactl explain` reads
/// it): the pod's IP (`POD_IP`, from the downward API in the chart), else the bind address
/// unless it is unspecified, else the host name; and the port served on.
fn advertised_address(options: &Options, bound: std::net::SocketAddr) -> String {
    let host = std::env::var("POD_IP")
        .ok()
        .filter(|ip| !ip.is_empty())
        .or_else(|| {
            let ip = options.serving.bind_address;
            (!ip.is_unspecified()).then(|| ip.to_string())
        })
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty())
        })
        .unwrap_or_else(|| "localhost".to_string());
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host
    };
    format!("https://{host}:{}", bound.port())
}

/// With `--shards`: the caches, then the coordinator taking and renewing shards and the
/// workers reconciling theirs, until the stop signal (which closed the fence first); then
/// every shard is released and the member Lease deleted, so that the other replicas take
/// over at once.
async fn run_sharded(
    controller: &HorizontalController,
    coordinator: Coordinator,
    workers: usize,
    readiness: &Readiness,
    stop_rx: watch::Receiver<bool>,
) -> Result<Outcome, AppError> {
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|v| *v).await;
    };
    readiness.set_not_ready("caches not synced");
    controller.start_caches();
    {
        let mut stop = std::pin::pin!(stopped(stop_rx.clone()));
        tokio::select! {
            synced = controller.wait_for_cache_sync() => synced?,
            () = &mut stop => {
                controller.stop();
                return Ok(Outcome::Stopped);
            }
        }
    }
    // A replica holding no shard is still ready: it stands by, as a leader-election
    // candidate does.
    readiness.set_ready();
    let handler: Arc<dyn ShardHandler> = Arc::new(controller.clone());
    let coordination = tokio::spawn(coordinator.run(handler, stopped(stop_rx.clone())));
    controller.run(workers, stopped(stop_rx)).await?;
    if tokio::time::timeout(RELEASE_TIMEOUT, coordination)
        .await
        .is_err()
    {
        tracing::error!(
            err = "context deadline exceeded",
            "Failed to release the shard Leases"
        );
    }
    controller.stop();
    Ok(Outcome::Stopped)
}

/// Starts the caches, reports ready once they synced, and runs the workers until `stop`
/// (`run`'s own wait for the caches then returns at once).
async fn run_controller(
    controller: &HorizontalController,
    workers: usize,
    readiness: &Readiness,
    stop: impl Future<Output = ()>,
) -> Result<Outcome, AppError> {
    readiness.set_not_ready("caches not synced");
    controller.start_caches();
    let mut stop = std::pin::pin!(stop);
    tokio::select! {
        synced = controller.wait_for_cache_sync() => synced?,
        () = &mut stop => {
            controller.stop();
            return Ok(Outcome::Stopped);
        }
    }
    readiness.set_ready();
    controller.run(workers, stop).await?;
    controller.stop();
    Ok(Outcome::Stopped)
}
