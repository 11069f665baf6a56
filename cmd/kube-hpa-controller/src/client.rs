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
//! The layer is the outermost one, so kube's own retries of 429/503/504 (inside it) are
//! neither throttled again nor counted separately, unlike client-go's retries. The request
//! duration runs from before the throttle wait to the response headers; watches
//! (`?watch=true`) skip the throttle and the duration histogram but are counted in
//! `rest_client_requests_total`. Metric labels: `verb`/`method` is the HTTP method
//! (`GET`, `PUT`, ...), `host` the API server's `host:port` as configured, `code` the status
//! or `<error>` when no response came.
//!
//! Content type: kube speaks JSON only. `--kube-api-content-type=application/json` is used as
//! is; the default `application/vnd.kubernetes.protobuf` is accepted and JSON is used instead
//! (said once at V(2)); any other value is refused, as client-go would find no serializer for
//! it.

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
        "--kube-api-content-type: unsupported content type {0:?}: kube-hpa-controller speaks \"application/json\" (\"application/vnd.kubernetes.protobuf\" is accepted and served as JSON)"
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

/// Checks `--kube-api-content-type`; says once (at V(2)) when protobuf is asked for and JSON
/// is used.
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
                "kube-api-content-type is protobuf, but this client speaks JSON only; using application/json"
            );
            Ok(())
        }
        other => Err(ClientError::ContentType(other.to_string())),
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
    client_from_config(config, limits, Some(metrics), TokioClock::new())
}

/// Builds a client from an already loaded configuration: `limits` as returned by
/// [`effective_limits`], `metrics` counted per request when given, the limiter reading
/// `clock`.
pub fn client_from_config(
    mut config: kube::Config,
    limits: Option<(f64, u32)>,
    metrics: Option<RestClientMetrics>,
    clock: TokioClock,
) -> Result<kube::Client, ClientError> {
    if let Ok(ua) = HeaderValue::from_str(&user_agent()) {
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
    let layer = RestClientLayer::new(limits, metrics, host, clock);
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

impl TokenBucket {
    /// A bucket of `burst` tokens refilled at `qps` a second (`qps` > 0, `burst` > 0).
    pub fn new(qps: f64, burst: u32, clock: TokioClock) -> Self {
        let burst = NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN);
        let period = if qps.is_finite() && qps > 0.0 {
            Duration::from_secs_f64((1.0 / qps).max(1e-9))
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

/// The tower layer: throttles each request on the token bucket and reports client-go's
/// REST client metrics.
#[derive(Debug, Clone)]
pub struct RestClientLayer {
    inner: Arc<LayerState>,
}

#[derive(Debug)]
struct LayerState {
    bucket: Option<TokenBucket>,
    metrics: Option<RestClientMetrics>,
    host: String,
}

impl RestClientLayer {
    /// A layer with the given limits (`None`: no limiter), metrics and `host` label.
    pub fn new(
        limits: Option<(f64, u32)>,
        metrics: Option<RestClientMetrics>,
        host: String,
        clock: TokioClock,
    ) -> Self {
        RestClientLayer {
            inner: Arc::new(LayerState {
                bucket: limits.map(|(qps, burst)| TokenBucket::new(qps, burst, clock)),
                metrics,
                host,
            }),
        }
    }
}

impl<S> Layer<S> for RestClientLayer {
    type Service = RestClientService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        RestClientService {
            inner,
            state: self.inner.clone(),
        }
    }
}

/// The service made by [`RestClientLayer`].
#[derive(Debug, Clone)]
pub struct RestClientService<S> {
    inner: S,
    state: Arc<LayerState>,
}

/// A watch request (`?watch=true` or `?watch=1`): client-go does not throttle these.
fn is_watch<B>(req: &Request<B>) -> bool {
    req.uri().query().is_some_and(|q| {
        q.split('&')
            .any(|kv| matches!(kv, "watch=true" | "watch=1" | "watch=True"))
    })
}

impl<S, B, RB> Service<Request<B>> for RestClientService<S>
where
    S: Service<Request<B>, Response = Response<RB>>,
    S::Future: Send + 'static,
    S::Error: 'static,
{
    type Response = Response<RB>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<RB>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let state = self.state.clone();
        let verb = req.method().as_str().to_string();
        let watch = is_watch(&req);
        let uri = req.uri().clone();
        // kube's stack below is lazy (hyper sends when the future is first polled), so the
        // request leaves only after the token is taken below.
        let fut = self.inner.call(req);
        Box::pin(async move {
            let start = tokio::time::Instant::now();
            if !watch && let Some(bucket) = &state.bucket {
                bucket.wait().await;
                let waited = start.elapsed();
                if let Some(m) = &state.metrics {
                    m.rate_limiter_duration
                        .with_label_values(&[verb.as_str(), state.host.as_str()])
                        .observe(waited.as_secs_f64());
                }
                if waited > Duration::from_millis(50) {
                    crate::v!(
                        3,
                        "Waited for {:?} due to client-side throttling, not priority and fairness, request: {}:{}",
                        waited,
                        verb,
                        uri
                    );
                }
            }
            let result = fut.await;
            if let Some(m) = &state.metrics {
                let code = match &result {
                    Ok(resp) => resp.status().as_u16().to_string(),
                    Err(_) => ERROR_CODE.to_string(),
                };
                m.requests
                    .with_label_values(&[code.as_str(), verb.as_str(), state.host.as_str()])
                    .inc();
                if !watch {
                    m.request_duration
                        .with_label_values(&[verb.as_str(), state.host.as_str()])
                        .observe(start.elapsed().as_secs_f64());
                }
            }
            result
        })
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
