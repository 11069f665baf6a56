//! The process around the controller: what `kube-controller-manager`'s `Run` does for it.
//!
//! Mirrors `cmd/kube-controller-manager/app/controllermanager.go` (`Run`): logging, the
//! client, secure serving of `/metrics` and health, leader election, then the controller
//! until a signal or the loss of the lease. Exit status: 0 after SIGTERM/SIGINT (the lease is
//! released first), 1 when leadership is lost or start-up fails.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hpa_config::options::DEFAULT_LEASE_NAME;
use hpa_config::{Options, SystemClock};
use hpa_horizontal::controller::{ControllerConfig, ControllerParts, HorizontalController};
use hpa_horizontal::scale_client::KubeScaleClient;
use hpa_metrics::{AvailableApis, DeferredRestMapper, RestMetricsClient};
use hpa_workqueue::WorkqueueMetrics;
use prometheus::Registry;
use tokio::sync::watch;

use crate::auth::DelegatingAuth;
use crate::client::build_client_with_metrics;
use crate::leader_election::{
    ElectionConfig, KubeLeaseLock, LeaderElector, LeaderMetrics, RenewOutcome, new_identity,
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
    Controller(#[from] hpa_horizontal::controller::ControllerError),
}

/// Completes on SIGTERM or SIGINT.
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

/// Runs the process until `stop` completes or leadership is lost.
pub async fn run(
    options: Options,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<Outcome, AppError> {
    let registry = Registry::new();
    let rest_metrics = RestClientMetrics::new(&registry)?;
    let client = build_client_with_metrics(&options, rest_metrics.clone()).await?;

    // One stop signal, observed by every part.
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        stop.await;
        let _ = stop_tx.send(true);
    });
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|v| *v).await;
    };

    let readiness = Readiness::new();
    let auth = Arc::new(DelegatingAuth::from_flags(&options.auth).await?);
    let serving = ServingConfig::from_flags(&options.serving)?;
    if let Some(server) = SecureServer::bind(&serving).await? {
        let state = ServingState::new(registry.clone(), readiness.clone(), auth);
        tokio::spawn(server.run(state, stopped(stop_rx.clone())));
    }

    if !options.hpa_controller_enabled() {
        tracing::warn!(
            "\"horizontal-pod-autoscaler-controller\" is disabled by --controllers; serving health and metrics only"
        );
        readiness.set_ready();
        stopped(stop_rx.clone()).await;
        return Ok(Outcome::Stopped);
    }

    let available_apis = AvailableApis::new();
    // KCM's one deferred discovery RESTMapper (reset every 30s), shared by the scale and
    // custom-metrics clients.
    let rest_mapper = DeferredRestMapper::new(client.clone());
    let metrics_client = RestMetricsClient::with_rest_mapper(
        client.clone(),
        available_apis.clone(),
        rest_mapper.clone(),
    );
    let scale_client = KubeScaleClient::with_rest_mapper(client.clone(), rest_mapper);
    let controller = HorizontalController::new(ControllerParts {
        client: client.clone(),
        metrics_client: Arc::new(metrics_client),
        available_apis: Some(available_apis),
        scale_client: Some(Arc::new(scale_client)),
        config: ControllerConfig::from_options(&options),
        clock: Arc::new(SystemClock),
        registry: registry.clone(),
        workqueue_metrics: Some(WorkqueueMetrics::register(&registry)?),
        log_emissions: false,
    })?;
    let workers = usize::try_from(options.hpa.concurrent_syncs).unwrap_or(1);

    let le = &options.leader_election;
    if !le.leader_elect {
        return run_controller(&controller, workers, &readiness, stopped(stop_rx.clone())).await;
    }

    // Standing by for the lease counts as ready, as KCM's /readyz does.
    readiness.set_ready();
    let leader_metrics = LeaderMetrics::new(&registry)?;
    let identity = new_identity();
    tracing::info!(identity = %identity, lease = %format!("{}/{}", le.resource_namespace, le.resource_name), "leader election");
    let lock = KubeLeaseLock::new(client, &le.resource_namespace, &le.resource_name, identity);
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
    );
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
    let _ = halt_tx.send(true);
    match outcome {
        RenewOutcome::Lost => {
            tracing::error!("leaderelection lost");
            controller.stop();
            Ok(Outcome::LeaderElectionLost)
        }
        RenewOutcome::Shutdown => {
            // Finish in-flight reconciles, then hand the lease over at once.
            let drain = tokio::time::timeout(std_duration(le.renew_deadline), run).await;
            if drain.is_err() {
                tracing::warn!("workers did not finish within the renew deadline");
            }
            controller.stop();
            elector.release().await;
            Ok(Outcome::Stopped)
        }
    }
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
    Ok(Outcome::Stopped)
}
