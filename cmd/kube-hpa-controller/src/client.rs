//! The Kubernetes API client of the process: where the API server is, client-side rate
//! limiting, the user agent and client-go's REST client metrics.
//!
//! Mirrors what kube-controller-manager does in `cmd/kube-controller-manager/app/options`
//! (`clientcmd.BuildConfigFromFlags(master, kubeconfig)` and the `--kube-api-*` settings) and
//! client-go's `rest` package: `RESTClientFor` (QPS/burst defaults, a token bucket that a
//! request *waits* on, never rejected by), `Request.tryThrottle` (watches are not throttled),
//! and the metrics hooks of `tools/metrics` (`RequestLatency`, `RateLimiterLatency`,
//! `RequestResult`).
//!
//! kube has no client-side limiter, so this module adds one as a tower layer over kube's own
//! HTTP stack (`ClientBuilder::try_from(Config)` + [`kube::client::ClientBuilder::with_layer`]).
//! kube's own retries (`Config::default_retry`) are turned off for every client built here;
//! the layer retries as client-go's `Request.request` with `withRetry` does (an answer with
//! `Retry-After`, 429 or 5xx, and a GET whose connection was reset or closed before any
//! answer, as if answered `Retry-After: 1`; at most [`MAX_RETRIES`] times, each attempt
//! throttled and counted), bounds each request by a timeout, keeps writes behind the [`WriteFence`], and
//! words transport failures as Go does (`crate::tls`). The process builds one client per
//! purpose, as KCM does ([`build_clients`]). The request duration runs from before the first
//! throttle wait to the last response's headers; watches (`?watch=true`) skip the throttle,
//! the timeout and the duration histogram but are counted in `rest_client_requests_total`.
//! `rest_client_request_size_bytes` observes each attempt's body length (0 for a GET), as
//! `Request.request` does after each `client.Do`; `rest_client_response_size_bytes` the final
//! response's body length, counted as the body streams through ([`SizedBody`], nothing
//! buffered) and observed at its end, as `Request.Do` observes `len(result.body)` once per
//! call; client-go's `Request.Watch` observes neither, so watches are in neither. Metric labels: `verb`/`method` is the HTTP method
//! (`GET`, `PUT`, ...), `host` the API server's `host:port` as configured, `code` the status
//! or `<error>` when no response came.
//!
//! Content type: `--kube-api-content-type=application/vnd.kubernetes.protobuf` (the default, as
//! KCM's) makes the pod informer and the built-in scale targets' caches list and watch in
//! protobuf (`hpa-protobuf`, which takes JSON where a server answers JSON); every other request
//! is JSON, kube's only encoding (said once at V(2)). `application/json` reads everything as JSON; any other value is refused, as client-go
//! would find no serializer for it.

use std::future::Future;
use std::num::NonZeroU32;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use governor::clock::Clock as _;
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use http::{HeaderValue, Request, Response};
use kube::client::ClientBuilder;
use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};
use tower::{Layer, Service};

use crate::fence::WriteFence;
use crate::metrics::{ERROR_CODE, RestClientMetrics};

/// client-go's `rest.DefaultQPS`, used when `--kube-api-qps` is 0.
pub const DEFAULT_QPS: f32 = 5.0;
/// client-go's `rest.DefaultBurst`, used when `--kube-api-burst` is 0.
pub const DEFAULT_BURST: i32 = 10;
/// The JSON content type, the only one kube speaks.
pub const CONTENT_TYPE_JSON: &str = "application/json";
/// The protobuf content type, KCM's default; JSON is used instead.
pub const CONTENT_TYPE_PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// The `User-Agent` every request carries: `kube-hpa-controller/<version>`.
pub fn user_agent() -> String {
    format!("kube-hpa-controller/{}", env!("CARGO_PKG_VERSION"))
}

/// Why no client could be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// `--kubeconfig` names a file that cannot be read or used.
    #[error("invalid --kubeconfig {path:?}: {source}")]
    Kubeconfig {
        /// The flag's value.
        path: String,
        /// What kube's loader said.
        #[source]
        source: KubeconfigError,
    },
    /// `--master` is not a URL.
    #[error("invalid --master {master:?}: {reason}")]
    Master {
        /// The flag's value.
        master: String,
        /// Why it does not parse.
        reason: String,
    },
    /// Neither flag, no in-cluster environment and no default kubeconfig (client-go's
    /// `ErrEmptyConfig` text).
    #[error(
        "invalid configuration: no configuration has been provided, try setting KUBERNETES_MASTER environment variable"
    )]
    NoConfiguration,
    /// `--kube-api-content-type` is neither JSON nor protobuf.
    #[error(
        "--kube-api-content-type: unsupported content type {0:?}: kube-hpa-controller speaks \"application/vnd.kubernetes.protobuf\" (its informers' lists and watches; JSON elsewhere) and \"application/json\""
    )]
    ContentType(String),
    /// `--kube-api-burst` is not positive while QPS limits (client-go's words).
    #[error(
        "burst is required to be greater than 0 when RateLimiter is not set and QPS is set to greater than 0"
    )]
    Burst,
    /// The metrics could not be registered (e.g. registered twice).
    #[error("registering REST client metrics: {0}")]
    Metrics(#[from] prometheus::Error),
    /// kube refused the configuration (TLS material, auth plugin, ...).
    #[error("{0}")]
    Kube(#[from] kube::Error),
}

/// Loads the client configuration as `clientcmd.BuildConfigFromFlags(master, kubeconfig)`:
/// with neither flag, the in-cluster config, falling back to the default loading rules
/// (`$KUBECONFIG`, `~/.kube/config`); with `--kubeconfig`, that file only; `--master`
/// overrides the server of whichever config is used (with no kubeconfig file found, it is
/// used with the in-cluster credentials when in a pod, else alone).
pub async fn load_config(kubeconfig: &str, master: &str) -> Result<kube::Config, ClientError> {
    let master = (!master.is_empty()).then_some(master);
    if let Some(m) = master {
        // Fail early on a value that is no URL whatever the scheme.
        server_url(m, true)?;
    }
    if kubeconfig.is_empty() && master.is_none() {
        tracing::warn!(
            "Neither --kubeconfig nor --master was specified.  Using the inClusterConfig.  This might not work."
        );
        match kube::Config::incluster() {
            Ok(c) => return Ok(c),
            Err(e) => tracing::warn!(
                "error creating inClusterConfig, falling back to default config: {e}"
            ),
        }
    }
    let loaded = if kubeconfig.is_empty() {
        Kubeconfig::read().ok()
    } else {
        Some(
            Kubeconfig::read_from(kubeconfig).map_err(|source| ClientError::Kubeconfig {
                path: kubeconfig.to_string(),
                source,
            })?,
        )
    };
    let mut config = match loaded {
        Some(mut kc) => {
            if let Some(m) = master {
                // The override applies to whichever cluster the current context picks.
                for named in &mut kc.clusters {
                    if let Some(cluster) = named.cluster.as_mut() {
                        let tls = cluster.certificate_authority.is_some()
                            || cluster.certificate_authority_data.is_some()
                            || cluster.insecure_skip_tls_verify == Some(true);
                        cluster.server = Some(server_url(m, tls)?.to_string());
                    }
                }
            }
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(|source| ClientError::Kubeconfig {
                    path: if kubeconfig.is_empty() {
                        "<default loading rules>".to_string()
                    } else {
                        kubeconfig.to_string()
                    },
                    source,
                })?
        }
        None => match master {
            Some(m) => match kube::Config::incluster() {
                Ok(c) => c,
                Err(_) => kube::Config::new(server_url(m, false)?),
            },
            None => return Err(ClientError::NoConfiguration),
        },
    };
    if let Some(m) = master {
        let tls = config.root_cert.is_some()
            || config.root_cert_file.is_some()
            || config.accept_invalid_certs
            || config.auth_info.client_certificate.is_some()
            || config.auth_info.client_certificate_data.is_some();
        config.cluster_url = server_url(m, tls)?;
    }
    Ok(config)
}

/// `--master` as a URL, as client-go's `DefaultServerURL`: a value without a scheme gets
/// `https://` when the configuration has TLS settings, else `http://`.
pub fn server_url(master: &str, tls: bool) -> Result<http::Uri, ClientError> {
    let bad = |reason: String| ClientError::Master {
        master: master.to_string(),
        reason,
    };
    let with_scheme = if master.contains("://") {
        master.to_string()
    } else if tls {
        format!("https://{master}")
    } else {
        format!("http://{master}")
    };
    let uri = with_scheme
        .parse::<http::Uri>()
        .map_err(|e| bad(e.to_string()))?;
    if uri.host().is_none_or(str::is_empty) {
        return Err(bad("no host".to_string()));
    }
    Ok(uri)
}

/// QPS and burst as client-go's `RESTClientFor` settles them: 0 means the default (5 QPS,
/// burst 10); a negative QPS means no limiter (`None`).
pub fn effective_limits(qps: f32, burst: i32) -> Result<Option<(f64, u32)>, ClientError> {
    let qps = if qps == 0.0 { DEFAULT_QPS } else { qps };
    let burst = if burst == 0 { DEFAULT_BURST } else { burst };
    if qps.is_nan() || qps < 0.0 {
        return Ok(None);
    }
    if burst <= 0 {
        return Err(ClientError::Burst);
    }
    Ok(Some((f64::from(qps), burst.unsigned_abs())))
}

/// Checks `--kube-api-content-type`; says once (at V(2)) when protobuf is asked for, which the
/// informers' lists and watches use and the other requests do not.
pub fn check_content_type(content_type: &str) -> Result<(), ClientError> {
    match content_type {
        CONTENT_TYPE_JSON => Ok(()),
        CONTENT_TYPE_PROTOBUF => {
            static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
            if SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
                return Ok(());
            }
            crate::v!(
                2,
                content_type,
                "kube-api-content-type is protobuf: pods and built-in scale targets are listed and watched in protobuf, other requests use application/json"
            );
            Ok(())
        }
        other => Err(ClientError::ContentType(other.to_string())),
    }
}

/// What one of the process's clients is for. kube-controller-manager builds one client-go
/// REST client per purpose (`ClientBuilder.ClientOrDie(name)` for the HPA clientset,
/// `scale.NewForConfig` for the scale client, one per metrics API, `"shared-informers"` for
/// the informers and `resourcelock.NewFromKubeconfig` for leader election), and each REST
/// client has a token bucket of its own (`rest.RESTClientFor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientPurpose {
    /// HPA status updates, events and discovery (`horizontal-pod-autoscaler`).
    Hpa,
    /// The `scale` subresource.
    Scale,
    /// `metrics.k8s.io`.
    ResourceMetrics,
    /// `custom.metrics.k8s.io`.
    CustomMetrics,
    /// `external.metrics.k8s.io`.
    ExternalMetrics,
    /// The informers' lists and watches (`shared-informers`).
    Informers,
    /// The Lease and its events (`leader-election`).
    LeaderElection,
}

impl ClientPurpose {
    /// The name appended to the user agent, as `rest.AddUserAgent` does.
    pub fn name(self) -> &'static str {
        match self {
            ClientPurpose::Hpa
            | ClientPurpose::Scale
            | ClientPurpose::ResourceMetrics
            | ClientPurpose::CustomMetrics
            | ClientPurpose::ExternalMetrics => "horizontal-pod-autoscaler",
            ClientPurpose::Informers => "shared-informers",
            ClientPurpose::LeaderElection => "leader-election",
        }
    }
}

/// client-go's `maxRetries` for a request answered with `Retry-After`
/// (`rest.Request.maxRetries`, 10 by default).
pub const MAX_RETRIES: u32 = 10;

/// The per-request timeout of every client but leader election's. client-go sets none by
/// default (`rest.Config.Timeout` 0); the API server ends a request that is not a watch
/// after its `--request-timeout`, one minute by default, so waiting longer than that can
/// only mean the server or the network is gone.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// The leader-election client's per-request timeout: `renewDeadline / 2`, at least one
/// second (client-go `resourcelock.NewFromKubeconfig`).
pub fn leader_election_timeout(renew_deadline: Duration) -> Duration {
    (renew_deadline / 2).max(Duration::from_secs(1))
}

/// How one client is built.
#[derive(Debug, Clone)]
pub struct ClientSettings {
    /// QPS and burst as [`effective_limits`] returns them (`None`: no limiter).
    pub limits: Option<(f64, u32)>,
    /// Where requests are counted, if anywhere.
    pub metrics: Option<RestClientMetrics>,
    /// The limiter's clock.
    pub clock: TokioClock,
    /// The timeout of each request that is not a watch, retries included.
    pub request_timeout: Option<Duration>,
    /// The fence writes must pass, if any.
    pub fence: Option<WriteFence>,
    /// Appended to the user agent (`kube-hpa-controller/VERSION/NAME`), if any.
    pub name: Option<&'static str>,
}

impl ClientSettings {
    /// Settings with the given limits and metrics, the default request timeout, no fence.
    pub fn new(limits: Option<(f64, u32)>, metrics: Option<RestClientMetrics>) -> Self {
        ClientSettings {
            limits,
            metrics,
            clock: TokioClock::new(),
            request_timeout: Some(DEFAULT_REQUEST_TIMEOUT),
            fence: None,
            name: None,
        }
    }
}

/// Every client of the process, one per purpose, each with its own token bucket.
#[derive(Clone)]
pub struct Clients {
    /// HPA status, events, discovery (write-fenced).
    pub hpa: kube::Client,
    /// The `scale` subresource (write-fenced).
    pub scale: kube::Client,
    /// The three metrics APIs.
    pub metrics: hpa_metrics::MetricsApiClients,
    /// Informers.
    pub informers: kube::Client,
    /// Leader election (not fenced: it renews the lease).
    pub leader_election: kube::Client,
    /// The fence of the writing clients.
    pub fence: WriteFence,
    /// The API server's base URL, for messages.
    pub server: http::Uri,
}

impl std::fmt::Debug for Clients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clients")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

/// Builds the API client from the flags: configuration as [`load_config`], the
/// `--kube-api-qps`/`--kube-api-burst` token bucket and the REST client metrics (registered
/// into `registry`) as one tower layer over kube's HTTP stack, and the user agent.
pub async fn build_client(
    opts: &hpa_config::Options,
    registry: &prometheus::Registry,
) -> Result<kube::Client, ClientError> {
    check_content_type(&opts.generic.kube_api_content_type)?;
    let metrics = RestClientMetrics::new(registry)?;
    build_client_with_metrics(opts, metrics).await
}

/// As [`build_client`], reporting into metrics that are already registered: for a second
/// client (e.g. the leader-election one) next to the first. Each client has its own token
/// bucket, as each client-go REST client does.
pub async fn build_client_with_metrics(
    opts: &hpa_config::Options,
    metrics: RestClientMetrics,
) -> Result<kube::Client, ClientError> {
    check_content_type(&opts.generic.kube_api_content_type)?;
    let config = load_config(&opts.misc.kubeconfig, &opts.misc.master).await?;
    let limits = effective_limits(opts.generic.kube_api_qps, opts.generic.kube_api_burst)?;
    client_with(config, ClientSettings::new(limits, Some(metrics)))
}

/// Builds every client of the process from the flags (see [`Clients`]): the configuration
/// is loaded once, each client gets its own token bucket of `--kube-api-qps` and
/// `--kube-api-burst`, none retries but as client-go does, and the HPA and scale clients
/// pass their writes through `fence`.
pub async fn build_clients(
    opts: &hpa_config::Options,
    metrics: RestClientMetrics,
    fence: WriteFence,
) -> Result<Clients, ClientError> {
    check_content_type(&opts.generic.kube_api_content_type)?;
    let mut config = load_config(&opts.misc.kubeconfig, &opts.misc.master).await?;
    // Once for all seven clients.
    let expired_ca = check_authorities(&mut config);
    let limits = effective_limits(opts.generic.kube_api_qps, opts.generic.kube_api_burst)?;
    let renew_deadline = opts.leader_election.renew_deadline.to_std();
    let make = |purpose: ClientPurpose| {
        let mut settings = ClientSettings::new(limits, Some(metrics.clone()));
        settings.name = Some(purpose.name());
        match purpose {
            ClientPurpose::Hpa | ClientPurpose::Scale => settings.fence = Some(fence.clone()),
            ClientPurpose::LeaderElection => {
                settings.request_timeout = Some(leader_election_timeout(renew_deadline));
            }
            _ => {}
        }
        client_with_checked(config.clone(), settings, expired_ca.clone())
    };
    Ok(Clients {
        hpa: make(ClientPurpose::Hpa)?,
        scale: make(ClientPurpose::Scale)?,
        metrics: hpa_metrics::MetricsApiClients {
            resource: make(ClientPurpose::ResourceMetrics)?,
            custom: make(ClientPurpose::CustomMetrics)?,
            external: make(ClientPurpose::ExternalMetrics)?,
        },
        informers: make(ClientPurpose::Informers)?,
        leader_election: make(ClientPurpose::LeaderElection)?,
        fence,
        server: config.cluster_url.clone(),
    })
}

/// Builds a client from an already loaded configuration: `limits` as returned by
/// [`effective_limits`], `metrics` counted per request when given, the limiter reading
/// `clock`; the default request timeout, no fence.
pub fn client_from_config(
    config: kube::Config,
    limits: Option<(f64, u32)>,
    metrics: Option<RestClientMetrics>,
    clock: TokioClock,
) -> Result<kube::Client, ClientError> {
    let mut settings = ClientSettings::new(limits, metrics);
    settings.clock = clock;
    client_with(config, settings)
}

/// Builds a client from a loaded configuration and its settings. kube's own retries of
/// 429/503/504 are turned off (`Config::default_retry`): the layer retries as client-go
/// does. A CA certificate of the configuration that has expired is refused as Go's
/// `crypto/x509` refuses it.
pub fn client_with(
    mut config: kube::Config,
    settings: ClientSettings,
) -> Result<kube::Client, ClientError> {
    let expired_ca = check_authorities(&mut config);
    client_with_checked(config, settings, expired_ca)
}

/// Checks the configuration's CA certificates as Go's `crypto/x509` would: expired ones are
/// dropped; when every one has expired, that authority is returned and every request of the
/// client is refused with Go's words.
fn check_authorities(config: &mut kube::Config) -> Option<crate::tls::ExpiredCa> {
    if config.cluster_url.scheme_str() != Some("https") {
        return None;
    }
    let roots = config.root_cert.take()?;
    let (kept, expired) = crate::tls::split_expired(&roots, jiff::Timestamp::now());
    if !expired.is_empty() && kept.is_empty() {
        // Every authority has expired: Go refuses every server; so does this client.
        config.root_cert = Some(roots);
        expired.into_iter().next()
    } else {
        // Go would not build a chain through an expired authority; the valid ones stay.
        config.root_cert = Some(kept);
        None
    }
}

/// [`client_with`] for a configuration whose authorities were already checked.
fn client_with_checked(
    mut config: kube::Config,
    settings: ClientSettings,
    expired_ca: Option<crate::tls::ExpiredCa>,
) -> Result<kube::Client, ClientError> {
    config.default_retry = false;
    let ua = match settings.name {
        Some(name) => format!("{}/{name}", user_agent()),
        None => user_agent(),
    };
    if let Ok(ua) = HeaderValue::from_str(&ua) {
        config
            .headers
            .retain(|(name, _)| name != http::header::USER_AGENT);
        config.headers.push((http::header::USER_AGENT, ua));
    }
    // client-go's `sanitize` labels requests with the base URL's host (with port if given).
    let host = config
        .cluster_url
        .authority()
        .map_or_else(|| "none".to_string(), |a| a.as_str().to_string());
    let base = config
        .cluster_url
        .to_string()
        .trim_end_matches('/')
        .to_string();
    let layer = RestClientLayer::with_settings(settings, host, base, expired_ca);
    let builder = ClientBuilder::try_from(config)?;
    Ok(builder.with_layer(&layer).build())
}

/// A monotonic clock over tokio's `Instant`, so the limiter follows tokio's paused time in
/// tests and real time otherwise.
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    origin: tokio::time::Instant,
}

impl TokioClock {
    /// A clock counting from now.
    pub fn new() -> Self {
        TokioClock {
            origin: tokio::time::Instant::now(),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl governor::clock::Clock for TokioClock {
    type Instant = Nanos;
    fn now(&self) -> Nanos {
        Nanos::from(tokio::time::Instant::now().saturating_duration_since(self.origin))
    }
}

type Limiter = RateLimiter<NotKeyed, InMemoryState, TokioClock, NoOpMiddleware<Nanos>>;

/// client-go's token bucket: `qps` tokens a second, at most `burst` at once, full at start.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    limiter: Arc<Limiter>,
    clock: TokioClock,
}

/// The longest refill period a bucket uses: a QPS below one token a year (e.g.
/// `--kube-api-qps=1e-30`) behaves as one token a year rather than overflowing.
const MAX_TOKEN_PERIOD: Duration = Duration::from_secs(365 * 24 * 3600);

impl TokenBucket {
    /// A bucket of `burst` tokens refilled at `qps` a second (`qps` > 0, `burst` > 0). Any
    /// `qps` works: a tiny one is capped at one token a year, an infinite or huge one
    /// means one token a nanosecond.
    pub fn new(qps: f64, burst: u32, clock: TokioClock) -> Self {
        let burst = NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN);
        let period = if qps.is_finite() && qps > 0.0 {
            Duration::try_from_secs_f64(1.0 / qps)
                .unwrap_or(MAX_TOKEN_PERIOD)
                .clamp(Duration::from_nanos(1), MAX_TOKEN_PERIOD)
        } else {
            Duration::from_nanos(1)
        };
        let quota = Quota::with_period(period)
            .unwrap_or_else(|| Quota::per_second(NonZeroU32::MAX))
            .allow_burst(burst);
        TokenBucket {
            limiter: Arc::new(RateLimiter::direct_with_clock(quota, clock)),
            clock,
        }
    }

    /// Waits until a token is free and takes it (`flowcontrol.RateLimiter.Wait`).
    pub async fn wait(&self) {
        loop {
            match self.limiter.check() {
                Ok(()) => return,
                Err(not_until) => {
                    let wait = not_until.wait_time_from(self.clock.now());
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }
}

/// The tower layer: throttles each request on the token bucket, retries as client-go does,
/// bounds each request by its timeout, keeps writes behind the fence, words transport
/// errors as Go does, and reports client-go's REST client metrics.
#[derive(Debug, Clone)]
pub struct RestClientLayer {
    inner: Arc<LayerState>,
}

#[derive(Debug)]
struct LayerState {
    bucket: Option<TokenBucket>,
    metrics: Option<RestClientMetrics>,
    host: String,
    base: String,
    request_timeout: Option<Duration>,
    fence: Option<WriteFence>,
    expired_ca: Option<crate::tls::ExpiredCa>,
}

impl RestClientLayer {
    /// A layer with the given limits (`None`: no limiter), metrics and `host` label, the
    /// default request timeout and no fence.
    pub fn new(
        limits: Option<(f64, u32)>,
        metrics: Option<RestClientMetrics>,
        host: String,
        clock: TokioClock,
    ) -> Self {
        let mut settings = ClientSettings::new(limits, metrics);
        settings.clock = clock;
        Self::with_settings(settings, host.clone(), format!("https://{host}"), None)
    }

    fn with_settings(
        settings: ClientSettings,
        host: String,
        base: String,
        expired_ca: Option<crate::tls::ExpiredCa>,
    ) -> Self {
        RestClientLayer {
            inner: Arc::new(LayerState {
                bucket: settings
                    .limits
                    .map(|(qps, burst)| TokenBucket::new(qps, burst, settings.clock)),
                metrics: settings.metrics,
                host,
                base,
                request_timeout: settings.request_timeout,
                fence: settings.fence,
                expired_ca,
            }),
        }
    }
}

impl<S> Layer<S> for RestClientLayer {
    type Service = RestClientService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        RestClientService {
            inner: Arc::new(tokio::sync::Mutex::new(inner)),
            state: self.inner.clone(),
        }
    }
}

/// The service made by [`RestClientLayer`].
#[derive(Debug)]
pub struct RestClientService<S> {
    inner: Arc<tokio::sync::Mutex<S>>,
    state: Arc<LayerState>,
}

impl<S> Clone for RestClientService<S> {
    fn clone(&self) -> Self {
        RestClientService {
            inner: self.inner.clone(),
            state: self.state.clone(),
        }
    }
}

/// A watch request (`?watch=true` or `?watch=1`): client-go does not throttle these.
fn is_watch<B>(req: &Request<B>) -> bool {
    req.uri().query().is_some_and(|q| {
        q.split('&')
            .any(|kv| matches!(kv, "watch=true" | "watch=1" | "watch=True"))
    })
}

/// A request that changes state: the fence applies to it.
fn is_write(method: &http::Method) -> bool {
    matches!(
        *method,
        http::Method::POST | http::Method::PUT | http::Method::PATCH | http::Method::DELETE
    )
}

/// Go's `net/http` spelling of a method in a `*url.Error` (`Get`, `Put`, ...).
fn go_op(method: &http::Method) -> String {
    let m = method.as_str();
    let mut out = String::with_capacity(m.len());
    for (i, c) in m.chars().enumerate() {
        if i == 0 {
            out.push(c.to_ascii_uppercase());
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// An error of this layer, worded as client-go words it (`Get "URL": cause`).
#[derive(Debug, thiserror::Error)]
#[error("{text}")]
pub struct RequestError {
    text: String,
    #[source]
    source: Option<BoxError>,
}

/// `Retry-After` as client-go reads it (`retryAfterSeconds`: whole seconds only) on a 429 or
/// a 5xx answer (`checkWait`).
fn retry_after(status: http::StatusCode, headers: &http::HeaderMap) -> Option<Duration> {
    if status != http::StatusCode::TOO_MANY_REQUESTS && !status.is_server_error() {
        return None;
    }
    let secs: i64 = headers
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(u64::try_from(secs).unwrap_or(0)))
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<S, RB> Service<Request<kube::client::Body>> for RestClientService<S>
where
    S: Service<Request<kube::client::Body>, Response = Response<RB>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError> + 'static,
    RB: http_body::Body + Unpin + Send + 'static,
{
    type Response = Response<SizedBody<RB>>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Readiness of the inner service is awaited per attempt in `call`.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<kube::client::Body>) -> Self::Future {
        let state = self.state.clone();
        let inner = self.inner.clone();
        Box::pin(async move {
            let watch = is_watch(&req);
            let url = format!("{}{}", state.base, req.uri());
            let op = go_op(req.method());
            let start = tokio::time::Instant::now();
            let limit = if watch { None } else { state.request_timeout };
            let attempts = send_with_retries(&state, &inner, req, watch, &op, &url);
            let result = match limit {
                Some(limit) => match tokio::time::timeout(limit, attempts).await {
                    Ok(r) => r,
                    Err(_) => Err(RequestError {
                        text: format!(
                            "{op} \"{url}\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
                        ),
                        source: None,
                    }),
                },
                None => attempts.await,
            };
            let verb = op.to_ascii_uppercase();
            let metrics = state.metrics.as_ref().filter(|_| !watch);
            if let Some(m) = metrics {
                m.request_duration
                    .with_label_values(&[verb.as_str(), state.host.as_str()])
                    .observe(start.elapsed().as_secs_f64());
            }
            // client-go observes the response size in `Request.Do` once the body is read; a
            // watch (`Request.Watch`) is never observed, and neither is a request that got no
            // response.
            let observer = metrics.map(|m| {
                m.response_size
                    .with_label_values(&[verb.as_str(), state.host.as_str()])
            });
            result
                .map(|response| response.map(|body| SizedBody::new(body, observer)))
                .map_err(|e| Box::new(e) as BoxError)
        })
    }
}

/// Throttle, fence, send; again after a `Retry-After` answer, at most [`MAX_RETRIES`]
/// times (client-go's `Request.request` with `withRetry`). Each attempt is throttled and
/// counted, as client-go counts each.
async fn send_with_retries<S, RB>(
    state: &LayerState,
    inner: &tokio::sync::Mutex<S>,
    req: Request<kube::client::Body>,
    watch: bool,
    op: &str,
    url: &str,
) -> Result<Response<RB>, RequestError>
where
    S: Service<Request<kube::client::Body>, Response = Response<RB>>,
    S::Error: Into<BoxError>,
{
    let verb = req.method().as_str().to_string();
    let write = is_write(req.method());
    let mut next = Some(req);
    let mut retries = 0u32;
    loop {
        let Some(req) = next.take() else {
            return Err(RequestError {
                text: format!("{op} \"{url}\": the request body cannot be sent again"),
                source: None,
            });
        };
        if !watch && let Some(bucket) = &state.bucket {
            let throttle_start = tokio::time::Instant::now();
            bucket.wait().await;
            let waited = throttle_start.elapsed();
            if let Some(m) = &state.metrics {
                m.rate_limiter_duration
                    .with_label_values(&[verb.as_str(), state.host.as_str()])
                    .observe(waited.as_secs_f64());
            }
            if waited > Duration::from_millis(50) {
                log_throttle_wait(waited, &verb, url);
            }
        }
        if let Some(ca) = &state.expired_ca {
            // client-go's `client.Do` fails in the TLS handshake, after which the request
            // size is observed as for any attempt.
            observe_request_size(state, &verb, request_size(&req, watch));
            count(state, ERROR_CODE, &verb);
            return Err(RequestError {
                text: format!("{op} \"{url}\": {}", ca.go_error()),
                source: None,
            });
        }
        if write && let Some(fence) = &state.fence {
            fence.check_write().map_err(|e| RequestError {
                text: format!("{op} \"{url}\": {e}"),
                source: Some(Box::new(e)),
            })?;
        }
        // Keep a copy for a retry when the body allows it.
        next = clone_request(&req);
        let size = request_size(&req, watch);
        let fut = {
            let mut svc = inner.lock().await;
            std::future::poll_fn(|cx| svc.poll_ready(cx))
                .await
                .map_err(|e| transport_error(op, url, e.into()))?;
            svc.call(req)
        };
        let sent = fut.await.map_err(Into::<BoxError>::into);
        observe_request_size(state, &verb, size);
        let response = match sent {
            Ok(r) => r,
            Err(e) => {
                count(state, ERROR_CODE, &verb);
                // client-go's `isErrRetryableFunc` (`Request.request`): a GET that failed
                // with a reset or closed connection before any answer is retried as if
                // answered `Retry-After: 1`, within the same budget.
                if verb == "GET"
                    && !watch
                    && retries < MAX_RETRIES
                    && next.is_some()
                    && retryable_read_error(e.as_ref())
                {
                    retries += 1;
                    crate::v!(
                        4,
                        delay = "1s",
                        attempt = retries,
                        url = %url,
                        err = %e,
                        "Got a Retry-After response"
                    );
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
                return Err(transport_error(op, url, e));
            }
        };
        count(state, response.status().as_str(), &verb);
        if watch || retries >= MAX_RETRIES || next.is_none() {
            return Ok(response);
        }
        let Some(wait) = retry_after(response.status(), response.headers()) else {
            return Ok(response);
        };
        retries += 1;
        crate::v!(
            4,
            delay = ?wait,
            attempt = retries,
            url = %url,
            "Got a Retry-After response"
        );
        drop(response);
        tokio::time::sleep(wait).await;
    }
}

/// apimachinery's `IsConnectionReset`, `IsProbableEOF` and `IsHTTP2ConnectionLost` for the
/// errors of this HTTP stack: anywhere in the chain, an I/O error of kind connection reset,
/// broken pipe or unexpected EOF, or hyper's "connection closed before message completed"
/// (Go's `EOF` from a connection the server closed), a GOAWAY, a closed connection.
fn retryable_read_error(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(err);
    while let Some(e) = cur {
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::BrokenPipe
                    | std::io::ErrorKind::UnexpectedEof
            )
        {
            return true;
        }
        let text = e.to_string().to_ascii_lowercase();
        if [
            "connection closed before message completed",
            "connection reset by peer",
            "broken pipe",
            "unexpected eof",
            "use of closed network connection",
            "goaway",
            "client connection lost",
        ]
        .iter()
        .any(|m| text.contains(m))
        {
            return true;
        }
        cur = e.source();
    }
    false
}

/// client-go's log of a wait in the client-side rate limiter (`tryThrottleWithInfo`): at V(3)
/// when it exceeded 50 ms; past one second also through its throttled logger, at V(2) at most
/// once a second when `-v` ≥ 2, else at V(0) at most once every 10 s.
fn log_throttle_wait(waited: Duration, verb: &str, url: &str) {
    const REASON: &str = "client-side throttling, not priority and fairness";
    crate::v!(3, delay = ?waited, reason = REASON, verb, URL = url, "Waited before sending request");
    if waited <= Duration::from_secs(1) {
        return;
    }
    static LAST: std::sync::Mutex<[Option<std::time::Instant>; 2]> =
        std::sync::Mutex::new([None, None]);
    let (slot, level, interval) = if crate::logging::v_enabled(2) {
        (0, 2, Duration::from_secs(1))
    } else {
        (1, 0, Duration::from_secs(10))
    };
    let now = std::time::Instant::now();
    let due = {
        let mut last = LAST
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let due = last[slot].is_none_or(|t| now.duration_since(t) >= interval);
        if due {
            last[slot] = Some(now);
        }
        due
    };
    if due {
        crate::v!(level, delay = ?waited, reason = REASON, verb, URL = url, "Waited before sending request");
    }
}

/// The body length client-go would observe for this attempt in
/// `rest_client_request_size_bytes` (`Request.request`: the request's `ContentLength`, 0 for a
/// request without a body, nothing when the length is unknown); nothing for a watch, which
/// `Request.Watch` sends without observing.
fn request_size(req: &Request<kube::client::Body>, watch: bool) -> Option<u64> {
    if watch {
        return None;
    }
    http_body::Body::size_hint(req.body()).exact()
}

fn observe_request_size(state: &LayerState, verb: &str, size: Option<u64>) {
    if let (Some(m), Some(size)) = (&state.metrics, size) {
        m.request_size
            .with_label_values(&[verb, state.host.as_str()])
            .observe(size as f64);
    }
}

/// A response body that counts its bytes as they are read and observes the total in
/// `rest_client_response_size_bytes` once: at the end of the stream, or when it is dropped
/// after some bytes (client-go observes the bytes read when reading failed part way) or with
/// nothing left to read. Nothing is buffered: frames pass through as they come. Without
/// an observer (a watch, or no metrics) it only passes frames through.
#[derive(Debug)]
pub struct SizedBody<B: http_body::Body> {
    inner: B,
    bytes: u64,
    observer: Option<prometheus::Histogram>,
}

impl<B: http_body::Body> SizedBody<B> {
    /// Wraps `inner`, observing its size into `observer` if given.
    pub fn new(inner: B, observer: Option<prometheus::Histogram>) -> Self {
        SizedBody {
            inner,
            bytes: 0,
            observer,
        }
    }

    /// Observes the bytes read so far, once.
    fn finish(&mut self) {
        if let Some(h) = self.observer.take() {
            h.observe(self.bytes as f64);
        }
    }
}

impl<B: http_body::Body> Drop for SizedBody<B> {
    fn drop(&mut self) {
        // A body read part way, or one with nothing left to read (an empty body its reader
        // never polled).
        if self.bytes > 0 || self.inner.is_end_stream() {
            self.finish();
        }
    }
}

impl<B> http_body::Body for SizedBody<B>
where
    B: http_body::Body + Unpin,
{
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    let len = bytes::Buf::remaining(data);
                    this.bytes = this.bytes.saturating_add(len as u64);
                }
                if this.inner.is_end_stream() {
                    this.finish();
                }
            }
            Poll::Ready(None) => this.finish(),
            Poll::Ready(Some(Err(_))) | Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

fn count(state: &LayerState, code: &str, verb: &str) {
    if let Some(m) = &state.metrics {
        m.requests
            .with_label_values(&[code, verb, state.host.as_str()])
            .inc();
    }
}

fn clone_request(req: &Request<kube::client::Body>) -> Option<Request<kube::client::Body>> {
    let body = req.body().try_clone()?;
    let mut out = Request::new(body);
    *out.method_mut() = req.method().clone();
    *out.uri_mut() = req.uri().clone();
    *out.version_mut() = req.version();
    *out.headers_mut() = req.headers().clone();
    if let Some(ext) = req.extensions().get::<&'static str>() {
        out.extensions_mut().insert(*ext);
    }
    Some(out)
}

/// A transport failure in Go's words: `Get "URL": dial tcp HOST:PORT: connect: connection
/// refused`, `... tls: failed to verify certificate: x509: ...`, or the deepest cause kube
/// gives.
fn transport_error(op: &str, url: &str, err: BoxError) -> RequestError {
    let authority = url
        .parse::<http::Uri>()
        .ok()
        .and_then(|u| {
            let host = u.host()?.to_string();
            let port = u.port_u16().unwrap_or(if u.scheme_str() == Some("http") {
                80
            } else {
                443
            });
            Some(format!("{host}:{port}"))
        })
        .unwrap_or_default();
    let cause = crate::tls::go_transport_cause(err.as_ref(), &authority);
    RequestError {
        text: format!("{op} \"{url}\": {cause}"),
        source: Some(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_follow_rest_client_for() {
        assert_eq!(effective_limits(20.0, 30).unwrap(), Some((20.0, 30)));
        assert_eq!(effective_limits(0.0, 0).unwrap(), Some((5.0, 10)));
        assert_eq!(effective_limits(-1.0, 0).unwrap(), None);
        assert!(matches!(
            effective_limits(10.0, -1),
            Err(ClientError::Burst)
        ));
    }

    #[test]
    fn master_without_scheme_is_defaulted_like_client_go() {
        assert_eq!(
            server_url("10.0.0.1:6443", true).unwrap().to_string(),
            "https://10.0.0.1:6443/"
        );
        assert_eq!(
            server_url("10.0.0.1:8080", false).unwrap().to_string(),
            "http://10.0.0.1:8080/"
        );
        assert_eq!(
            server_url("https://api.example:6443", false)
                .unwrap()
                .to_string(),
            "https://api.example:6443/"
        );
        assert!(matches!(
            server_url("http://", true),
            Err(ClientError::Master { .. })
        ));
    }

    #[test]
    fn content_types() {
        assert!(check_content_type("application/json").is_ok());
        assert!(check_content_type("application/vnd.kubernetes.protobuf").is_ok());
        assert!(matches!(
            check_content_type("application/yaml"),
            Err(ClientError::ContentType(_))
        ));
    }

    #[test]
    fn watch_detection() {
        let r = |u: &str| Request::get(u).body(()).unwrap();
        assert!(is_watch(&r("/api/v1/pods?watch=true&resourceVersion=1")));
        assert!(is_watch(&r("/api/v1/pods?resourceVersion=1&watch=1")));
        assert!(!is_watch(&r("/api/v1/pods?limit=500")));
        assert!(!is_watch(&r("/api/v1/pods")));
    }

    #[tokio::test(start_paused = true)]
    async fn bucket_starts_full_then_paces_at_qps() {
        let bucket = TokenBucket::new(2.0, 3, TokioClock::new());
        let start = tokio::time::Instant::now();
        for _ in 0..3 {
            bucket.wait().await;
        }
        assert_eq!(start.elapsed(), Duration::ZERO);
        bucket.wait().await;
        assert_eq!(start.elapsed(), Duration::from_millis(500));
        bucket.wait().await;
        assert_eq!(start.elapsed(), Duration::from_secs(1));
    }
}
