//! The secure (HTTPS) endpoint: `/metrics`, `/healthz`, `/livez`, `/readyz`, and this
//! project's `/debug/hpa` and `/debug/shadow` ([`crate::debug`]).
//!
//! Mirrors apiserver's `SecureServingOptions` as kube-controller-manager uses them
//! (`--bind-address`, an unspecified one meaning every interface and address family;
//! `--secure-port` with 0 meaning "don't serve"; `--tls-cert-file` / `--tls-private-key-file`;
//! otherwise `MaybeDefaultWithSelfSignedCerts`: a CA-signed certificate for `localhost` and
//! `127.0.0.1`, kept in `--cert-dir` as `kube-hpa-controller.{crt,key}` when that is set,
//! else in memory), the healthz handlers of
//! `staging/src/k8s.io/apiserver/pkg/server/healthz/healthz.go` (`ok`; on failure every check
//! as `[+]name ok` / `[-]name failed: reason withheld` and `<endpoint> check failed` with
//! status 500; `?verbose`, `?exclude=<check>`; `/<endpoint>/<check>` sub-paths, which do show
//! the reason), and component-base's legacy registry handler for `/metrics` (the given
//! registry plus the process collector). Every request goes through [`DelegatingAuth`] first.
//!
//! Checks: `ping` everywhere; `/readyz` adds `controller`, the [`Readiness`] flag the
//! controller sets. HTTP/1.1 only (KCM also speaks HTTP/2); open connections are dropped at
//! shutdown.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::{HeaderValue, StatusCode};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use prometheus::{Encoder, Registry, TextEncoder};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use crate::auth::DelegatingAuth;

/// The readiness check's name in `/readyz` output.
pub const READY_CHECK: &str = "controller";

/// Why serving could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// `--secure-port` is outside 0..=65535.
    #[error(
        "--secure-port {0} must be between 0 and 65535, inclusive. 0 for turning off secure port"
    )]
    Port(i64),
    /// Only one of the certificate and key files is given.
    #[error("both --tls-cert-file and --tls-private-key-file must be given, or neither")]
    HalfPair,
    /// A certificate or key file cannot be read or parsed.
    #[error("failed to load {path:?}: {reason}")]
    Pem {
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// Certificate generation failed.
    #[error("unable to generate self signed cert: {0}")]
    Generate(String),
    /// rustls refused the certificate/key pair.
    #[error("invalid serving certificate: {0}")]
    Tls(#[from] rustls::Error),
    /// The listener could not be bound.
    #[error("failed to listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Secure serving settings from the flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServingConfig {
    /// `--bind-address`.
    pub bind_address: IpAddr,
    /// `--secure-port`; 0 = don't serve.
    pub secure_port: u16,
    /// `--cert-dir`: where a generated pair is kept (empty: in memory only).
    pub cert_dir: String,
    /// `--tls-cert-file` (empty: self-signed).
    pub tls_cert_file: String,
    /// `--tls-private-key-file`.
    pub tls_private_key_file: String,
}

impl ServingConfig {
    /// From the parsed flags.
    pub fn from_flags(flags: &hpa_config::options::ServingFlags) -> Result<Self, ServeError> {
        let port =
            u16::try_from(flags.secure_port).map_err(|_| ServeError::Port(flags.secure_port))?;
        Ok(ServingConfig {
            bind_address: flags.bind_address,
            secure_port: port,
            cert_dir: flags.cert_dir.clone(),
            tls_cert_file: flags.tls_cert_file.clone(),
            tls_private_key_file: flags.tls_private_key_file.clone(),
        })
    }
}

/// The readiness the controller reports: not ready (with a reason) until it says so.
#[derive(Debug, Clone)]
pub struct Readiness {
    state: Arc<RwLock<Result<(), String>>>,
}

impl Default for Readiness {
    fn default() -> Self {
        Readiness::new()
    }
}

impl Readiness {
    /// Not ready yet ("starting").
    pub fn new() -> Self {
        Readiness {
            state: Arc::new(RwLock::new(Err("starting".to_string()))),
        }
    }

    /// Ready: caches synced, or standing by for the lease.
    pub fn set_ready(&self) {
        if let Ok(mut s) = self.state.write() {
            *s = Ok(());
        }
    }

    /// Not ready, because of `reason`.
    pub fn set_not_ready(&self, reason: impl Into<String>) {
        if let Ok(mut s) = self.state.write() {
            *s = Err(reason.into());
        }
    }

    /// `Ok` when ready, else the reason.
    pub fn check(&self) -> Result<(), String> {
        match self.state.read() {
            Ok(s) => s.clone(),
            Err(_) => Err("readiness state poisoned".to_string()),
        }
    }
}

/// What the endpoints serve.
#[derive(Debug, Clone)]
pub struct ServingState {
    registry: Registry,
    process: Registry,
    readiness: Readiness,
    auth: Arc<DelegatingAuth>,
    leader: Option<crate::leader_election::LeaderHealth>,
    debug: crate::debug::DebugStores,
}

impl axum::extract::FromRef<ServingState> for crate::debug::DebugStores {
    fn from_ref(state: &ServingState) -> Self {
        state.debug.clone()
    }
}

impl ServingState {
    /// Serves `registry` (plus this process's `process_*` metrics), the given readiness and
    /// delegated auth.
    pub fn new(registry: Registry, readiness: Readiness, auth: Arc<DelegatingAuth>) -> Self {
        let process = Registry::new();
        if let Err(e) = crate::metrics::register_process_metrics(&process) {
            tracing::warn!(error = %e, "process metrics unavailable");
        }
        ServingState {
            registry,
            process,
            readiness,
            auth,
            leader: None,
            debug: crate::debug::DebugStores::new(),
        }
    }

    /// Serves the decision traces and shadow comparisons of `debug`.
    pub fn with_debug(mut self, debug: crate::debug::DebugStores) -> Self {
        self.debug = debug;
        self
    }

    /// Adds KCM's `leaderElection` check to `/healthz` and `/livez`
    /// (`NewLeaderHealthzAdaptor`).
    pub fn with_leader_health(mut self, health: crate::leader_election::LeaderHealth) -> Self {
        self.leader = Some(health);
        self
    }
}

/// The endpoints as a router (plain HTTP; [`SecureServer`] puts TLS in front).
pub fn router(state: ServingState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .route("/healthz/{check}", get(healthz_check))
        .route("/livez/{check}", get(livez_check))
        .route("/readyz/{check}", get(readyz_check))
        .route("/debug/hpa", get(crate::debug::list))
        .route("/debug/hpa/{namespace}/{name}", get(crate::debug::one))
        .route("/debug/shadow", get(crate::debug::shadow))
        .layer(middleware::from_fn_with_state(state.clone(), authenticate))
        .with_state(state)
}

async fn authenticate(State(state): State<ServingState>, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    match state.auth.check(req.method(), &path, req.headers()).await {
        Ok(_) => next.run(req).await,
        Err(resp) => resp,
    }
}

async fn metrics(State(state): State<ServingState>) -> Response {
    let mut families = state.registry.gather();
    // The process collector only where the caller registered none of its own.
    let own: Vec<String> = families.iter().map(|f| f.name().to_string()).collect();
    families.extend(
        state
            .process
            .gather()
            .into_iter()
            .filter(|f| !own.iter().any(|n| n == f.name())),
    );
    families.sort_by(|a, b| a.name().cmp(b.name()));
    let encoder = TextEncoder::new();
    let mut out = Vec::new();
    if let Err(e) = encoder.encode(&families, &mut out) {
        return (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response();
    }
    let mut resp = out.into_response();
    if let Ok(v) = HeaderValue::from_str(encoder.format_type()) {
        resp.headers_mut().insert(http::header::CONTENT_TYPE, v);
    }
    resp
}

type Check = (&'static str, Result<(), String>);

fn checks(state: &ServingState, endpoint: &str) -> Vec<Check> {
    let mut out: Vec<Check> = vec![("ping", Ok(()))];
    if let Some(leader) = &state.leader
        && endpoint != "readyz"
    {
        out.push(("leaderElection", leader.check()));
    }
    if endpoint == "readyz" {
        out.push((READY_CHECK, state.readiness.check()));
    }
    out
}

fn text(code: StatusCode, body: String) -> Response {
    let mut resp = (code, body).into_response();
    let h = resp.headers_mut();
    h.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    resp
}

fn health(state: &ServingState, endpoint: &str, req: &Request) -> Response {
    let mut excluded = query_values(req, "exclude");
    let mut lines = String::new();
    let mut failed = Vec::new();
    let mut failed_names = Vec::new();
    for (name, result) in checks(state, endpoint) {
        if let Some(i) = excluded.iter().position(|e| e == name) {
            excluded.remove(i);
            lines.push_str(&format!("[+]{name} excluded: ok\n"));
            continue;
        }
        match result {
            Ok(()) => lines.push_str(&format!("[+]{name} ok\n")),
            Err(reason) => {
                lines.push_str(&format!("[-]{name} failed: reason withheld\n"));
                failed.push(format!("[-]{name} failed: {reason}\n"));
                failed_names.push(name);
            }
        }
    }
    if !excluded.is_empty() {
        excluded.sort();
        excluded.dedup();
        let quoted: Vec<String> = excluded.iter().map(|e| format!("{e:?}")).collect();
        lines.push_str(&format!(
            "warn: some health checks cannot be excluded: no matches for {}\n",
            quoted.join(",")
        ));
        crate::v!(
            6,
            "cannot exclude some health checks, no health checks are installed matching {}",
            quoted.join(",")
        );
    }
    if !failed.is_empty() {
        // apiserver's healthz handler: the failed checks' names, the endpoint, then each
        // failure with its reason.
        crate::v!(
            2,
            "{} check failed: {}\n{}",
            failed_names.join(","),
            endpoint,
            failed.concat()
        );
        return text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("{lines}{endpoint} check failed\n"),
        );
    }
    if has_query_key(req, "verbose") {
        text(StatusCode::OK, format!("{lines}{endpoint} check passed\n"))
    } else {
        text(StatusCode::OK, "ok".to_string())
    }
}

fn health_check(state: &ServingState, endpoint: &str, name: &str) -> Response {
    match checks(state, endpoint)
        .into_iter()
        .find(|(n, _)| *n == name)
    {
        Some((_, Ok(()))) => text(StatusCode::OK, "ok".to_string()),
        Some((_, Err(reason))) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("internal server error: {reason}\n"),
        ),
        None => text(StatusCode::NOT_FOUND, "404 page not found\n".to_string()),
    }
}

/// The values of query parameter `key` (as Go's `URL.Query()[key]`, undecoded).
fn query_values(req: &Request, key: &str) -> Vec<String> {
    req.uri()
        .query()
        .map(|q| {
            q.split('&')
                .filter_map(|kv| {
                    let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                    (k == key).then(|| v.to_string())
                })
                .collect()
        })
        .unwrap_or_default()
}

fn has_query_key(req: &Request, key: &str) -> bool {
    req.uri()
        .query()
        .is_some_and(|q| q.split('&').any(|kv| kv.split('=').next() == Some(key)))
}

async fn healthz(State(s): State<ServingState>, req: Request) -> Response {
    health(&s, "healthz", &req)
}
async fn livez(State(s): State<ServingState>, req: Request) -> Response {
    health(&s, "livez", &req)
}
async fn readyz(State(s): State<ServingState>, req: Request) -> Response {
    health(&s, "readyz", &req)
}
async fn healthz_check(State(s): State<ServingState>, Path(c): Path<String>) -> Response {
    health_check(&s, "healthz", &c)
}
async fn livez_check(State(s): State<ServingState>, Path(c): Path<String>) -> Response {
    health_check(&s, "livez", &c)
}
async fn readyz_check(State(s): State<ServingState>, Path(c): Path<String>) -> Response {
    health_check(&s, "readyz", &c)
}

/// A certificate chain and its key, DER.
#[derive(Debug)]
pub struct ServingCert {
    /// The chain, leaf first.
    pub chain: Vec<CertificateDer<'static>>,
    /// The private key.
    pub key: PrivateKeyDer<'static>,
}

/// Base name of the certificate pair written to `--cert-dir` (`<name>.crt`, `<name>.key`),
/// as KCM's `ServerCert.PairName`.
pub const PAIR_NAME: &str = "kube-hpa-controller";

/// Loads `--tls-cert-file` / `--tls-private-key-file`; without them, the pair in
/// `--cert-dir` when both files can be read, else a freshly generated self-signed pair
/// (written to `--cert-dir` when set, kept in memory otherwise), as
/// `SecureServingOptions.MaybeDefaultWithSelfSignedCerts("localhost", nil, [127.0.0.1])`.
pub fn serving_cert(config: &ServingConfig) -> Result<ServingCert, ServeError> {
    match (
        config.tls_cert_file.is_empty(),
        config.tls_private_key_file.is_empty(),
    ) {
        (true, true) => {}
        (false, false) => {
            return load_pair(&config.tls_cert_file, &config.tls_private_key_file);
        }
        _ => return Err(ServeError::HalfPair),
    }
    if config.cert_dir.is_empty() {
        let generated = self_signed(config.bind_address)?;
        tracing::info!("Generated self-signed cert in-memory");
        return Ok(generated.cert);
    }
    let dir = std::path::Path::new(&config.cert_dir);
    let crt = dir.join(format!("{PAIR_NAME}.crt"));
    let key = dir.join(format!("{PAIR_NAME}.key"));
    let (crt_s, key_s) = (crt.display().to_string(), key.display().to_string());
    if std::fs::File::open(&crt).is_ok() && std::fs::File::open(&key).is_ok() {
        return load_pair(&crt_s, &key_s);
    }
    let generated = self_signed(config.bind_address)?;
    let write = |path: &std::path::Path, text: &str, mode: u32| -> Result<(), ServeError> {
        let err = |e: std::io::Error| ServeError::Pem {
            path: path.display().to_string(),
            reason: e.to_string(),
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(err)?;
        }
        std::fs::write(path, text).map_err(err)?;
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(err)
    };
    write(&crt, &generated.cert_pem, 0o644)?;
    write(&key, &generated.key_pem, 0o600)?;
    tracing::info!("Generated self-signed cert ({crt_s}, {key_s})");
    Ok(generated.cert)
}

fn load_pair(cert_file: &str, key_file: &str) -> Result<ServingCert, ServeError> {
    let pem_err = |path: &str, e: &dyn std::fmt::Display| ServeError::Pem {
        path: path.to_string(),
        reason: e.to_string(),
    };
    let chain = CertificateDer::pem_file_iter(cert_file)
        .map_err(|e| pem_err(cert_file, &e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_err(cert_file, &e))?;
    if chain.is_empty() {
        return Err(pem_err(cert_file, &"no certificate found"));
    }
    let key = PrivateKeyDer::from_pem_file(key_file).map_err(|e| pem_err(key_file, &e))?;
    Ok(ServingCert { chain, key })
}

struct Generated {
    cert: ServingCert,
    cert_pem: String,
    key_pem: String,
}

/// certutil's `GenerateSelfSignedCertKey("localhost", ...)`: a CA `localhost-ca@<unix>` and
/// a serving certificate `localhost@<unix>` it signs, for `localhost`, `127.0.0.1` and the
/// bind address when it is a specific one, valid one year; the chain is leaf then CA.
fn self_signed(bind: IpAddr) -> Result<Generated, ServeError> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose,
    };
    let gen_err = |e: rcgen::Error| ServeError::Generate(e.to_string());
    let now = jiff::Timestamp::now();
    let stamp = now.as_second();
    let day = |t: jiff::Timestamp| {
        let d = t.to_zoned(jiff::tz::TimeZone::UTC).date();
        rcgen::date_time_ymd(
            i32::from(d.year()),
            d.month().unsigned_abs(),
            d.day().unsigned_abs(),
        )
    };
    let not_before = day(now);
    let not_after = day(now + jiff::SignedDuration::from_hours(24 * 365));

    let ca_key = KeyPair::generate().map_err(gen_err)?;
    let mut ca = CertificateParams::default();
    ca.distinguished_name
        .push(DnType::CommonName, format!("localhost-ca@{stamp}"));
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    ca.not_before = not_before;
    ca.not_after = not_after;
    let ca_cert = ca.self_signed(&ca_key).map_err(gen_err)?;

    let mut names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    if !bind.is_unspecified() && !names.contains(&bind.to_string()) {
        names.push(bind.to_string());
    }
    let mut leaf = CertificateParams::new(names).map_err(gen_err)?;
    leaf.distinguished_name
        .push(DnType::CommonName, format!("localhost@{stamp}"));
    leaf.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf.not_before = not_before;
    leaf.not_after = not_after;
    let leaf_key = KeyPair::generate().map_err(gen_err)?;
    let issuer = Issuer::from_params(&ca, &ca_key);
    let leaf_cert = leaf.signed_by(&leaf_key, &issuer).map_err(gen_err)?;

    let key = PrivateKeyDer::try_from(leaf_key.serialize_der())
        .map_err(|e| ServeError::Generate(e.to_string()))?;
    Ok(Generated {
        cert_pem: format!("{}{}", leaf_cert.pem(), ca_cert.pem()),
        key_pem: leaf_key.serialize_pem(),
        cert: ServingCert {
            chain: vec![leaf_cert.der().clone(), ca_cert.der().clone()],
            key,
        },
    })
}

/// Binds `addr`; an unspecified address listens on every interface and address family (Go's
/// `net.Listen("tcp", ":port")`): `[::]` (dual-stack), or `0.0.0.0` where IPv6 is off.
async fn listen(addr: SocketAddr) -> Result<TcpListener, ServeError> {
    if addr.ip().is_unspecified() {
        let v6 = SocketAddr::new(IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED), addr.port());
        if let Ok(l) = TcpListener::bind(v6).await {
            return Ok(l);
        }
    }
    TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })
}

/// The connection timeouts of `k8s.io/apiserver`'s secure serving (`secure_serving.go`:
/// `ReadHeaderTimeout` 32 s, covering the TLS handshake and the request header; `IdleTimeout`
/// 90 s between requests on a kept-alive connection).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnTimeouts {
    /// From accept (or from the first byte of a later request) to a complete header.
    pub read_header: Duration,
    /// Between the end of a response and the first byte of the next request.
    pub idle: Duration,
}

impl Default for ConnTimeouts {
    fn default() -> Self {
        ConnTimeouts {
            read_header: Duration::from_secs(32),
            idle: Duration::from_secs(90),
        }
    }
}

/// A bound HTTPS listener, ready to serve.
pub struct SecureServer {
    listener: TcpListener,
    acceptor: TlsAcceptor,
    chain: Vec<CertificateDer<'static>>,
    timeouts: ConnTimeouts,
}

impl std::fmt::Debug for SecureServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecureServer")
            .field("local_addr", &self.listener.local_addr().ok())
            .finish_non_exhaustive()
    }
}

impl SecureServer {
    /// Binds `--bind-address:--secure-port` with the serving certificate; `None` when the
    /// port is 0.
    pub async fn bind(config: &ServingConfig) -> Result<Option<SecureServer>, ServeError> {
        if config.secure_port == 0 {
            return Ok(None);
        }
        let addr = SocketAddr::new(config.bind_address, config.secure_port);
        Self::bind_addr(addr, serving_cert(config)?).await.map(Some)
    }

    /// Binds `addr` (port 0 picks a free one) with `cert`.
    pub async fn bind_addr(addr: SocketAddr, cert: ServingCert) -> Result<Self, ServeError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let chain = cert.chain.clone();
        let mut tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(cert.chain, cert.key)?;
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let listener = listen(addr).await?;
        Ok(SecureServer {
            listener,
            acceptor: TlsAcceptor::from(Arc::new(tls)),
            chain,
            timeouts: ConnTimeouts::default(),
        })
    }

    /// Uses other connection timeouts (tests).
    pub fn with_timeouts(mut self, timeouts: ConnTimeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// The bound address.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The served chain, leaf first (for a generated pair: leaf, then its CA, which a
    /// client can trust).
    pub fn chain(&self) -> &[CertificateDer<'static>] {
        &self.chain
    }

    /// Serves until `shutdown` resolves; open connections are then dropped.
    pub async fn run(self, state: ServingState, shutdown: impl Future<Output = ()>) {
        let app = router(state);
        let mut conns = JoinSet::new();
        let mut shutdown = std::pin::pin!(shutdown);
        match self.listener.local_addr() {
            Ok(addr) => tracing::info!("Serving securely on {addr}"),
            Err(e) => tracing::info!(error = %e, "Serving securely"),
        }
        loop {
            tokio::select! {
                _ = &mut shutdown => break,
                accepted = self.listener.accept() => {
                    let (tcp, peer) = match accepted {
                        Ok(a) => a,
                        Err(e) => {
                            tracing::warn!(error = %e, "accept failed");
                            continue;
                        }
                    };
                    let acceptor = self.acceptor.clone();
                    let app = app.clone();
                    let timeouts = self.timeouts;
                    conns.spawn(serve_connection(tcp, peer, acceptor, app, timeouts));
                }
                Some(_) = conns.join_next(), if !conns.is_empty() => {}
            }
        }
        conns.abort_all();
        match self.listener.local_addr() {
            Ok(addr) => tracing::info!("Stopped listening on {addr}"),
            Err(_) => tracing::info!("Stopped listening on the secure port"),
        }
    }
}

/// One connection: the TLS handshake and the first header within `read_header`, then
/// requests until the client closes, a later header takes longer than `read_header` from its
/// first byte, or no request starts within `idle` of the last response.
async fn serve_connection(
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
    acceptor: TlsAcceptor,
    app: Router,
    timeouts: ConnTimeouts,
) {
    let activity = conn_timeout::Activity::new();
    let io = conn_timeout::TrackedIo::new(tcp, activity.clone());
    let tls = match tokio::time::timeout(timeouts.read_header, acceptor.accept(io)).await {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => {
            crate::v!(5, peer = %peer, error = %e, "TLS handshake error");
            return;
        }
        Err(_) => {
            crate::v!(5, peer = %peer, "TLS handshake timeout");
            return;
        }
    };
    let svc = TowerToHyperService::new(conn_timeout::TrackRequests::new(app, activity.clone()));
    let conn = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), svc);
    tokio::select! {
        result = conn => {
            if let Err(e) = result {
                crate::v!(4, peer = %peer, error = %e, "connection error");
            }
        }
        () = activity.expired(timeouts) => {
            crate::v!(4, peer = %peer, "closing connection: header or idle timeout");
        }
    }
}

/// Serves the endpoints on `--bind-address:--secure-port` over HTTPS until `shutdown`
/// resolves; returns at once when `--secure-port` is 0.
pub async fn serve(
    config: &ServingConfig,
    state: ServingState,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    match SecureServer::bind(config).await? {
        Some(server) => {
            server.run(state, shutdown).await;
            Ok(())
        }
        None => Ok(()),
    }
}

/// The bookkeeping behind [`ConnTimeouts`]: the connection's reads and its requests.
mod conn_timeout {
    use std::future::Future;
    use std::io;
    use std::pin::Pin;
    use std::sync::{Arc, Mutex};
    use std::task::{Context, Poll};

    use axum::Router;
    use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
    use tokio::time::Instant;
    use tower::Service;

    use super::ConnTimeouts;

    #[derive(Debug)]
    struct State {
        /// When the wait for a header began: accept, or the first byte after a response.
        header_since: Option<Instant>,
        /// When the last response ended (no request in progress); `None` before the first.
        idle_since: Option<Instant>,
        in_flight: usize,
    }

    /// Shared between the connection's IO and its service.
    #[derive(Debug, Clone)]
    pub(super) struct Activity(Arc<Mutex<State>>);

    impl Activity {
        pub(super) fn new() -> Self {
            Activity(Arc::new(Mutex::new(State {
                header_since: Some(Instant::now()),
                idle_since: None,
                in_flight: 0,
            })))
        }

        fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
            f(&mut self.0.lock().unwrap_or_else(|p| p.into_inner()))
        }

        fn bytes_read(&self) {
            self.with(|s| {
                if s.in_flight == 0 && s.header_since.is_none() {
                    s.header_since = Some(Instant::now());
                    s.idle_since = None;
                }
            });
        }

        fn request_started(&self) {
            self.with(|s| {
                s.in_flight += 1;
                s.header_since = None;
                s.idle_since = None;
            });
        }

        fn request_ended(&self) {
            self.with(|s| {
                s.in_flight = s.in_flight.saturating_sub(1);
                if s.in_flight == 0 {
                    s.idle_since = Some(Instant::now());
                    s.header_since = None;
                }
            });
        }

        /// Completes when a timeout of `timeouts` has passed.
        pub(super) async fn expired(&self, timeouts: ConnTimeouts) {
            loop {
                let deadline = self.with(|s| {
                    if s.in_flight > 0 {
                        None
                    } else if let Some(t) = s.header_since {
                        Some(t + timeouts.read_header)
                    } else {
                        s.idle_since.map(|t| t + timeouts.idle)
                    }
                });
                match deadline {
                    Some(d) if Instant::now() >= d => return,
                    Some(d) => tokio::time::sleep_until(d).await,
                    // A request is being served: look again in a while.
                    None => tokio::time::sleep(timeouts.read_header.min(timeouts.idle)).await,
                }
            }
        }
    }

    /// The connection's byte stream, noting when bytes arrive.
    pub(super) struct TrackedIo<T> {
        inner: T,
        activity: Activity,
    }

    impl<T> TrackedIo<T> {
        pub(super) fn new(inner: T, activity: Activity) -> Self {
            TrackedIo { inner, activity }
        }
    }

    impl<T: AsyncRead + Unpin> AsyncRead for TrackedIo<T> {
        fn poll_read(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            let before = buf.filled().len();
            let result = Pin::new(&mut self.inner).poll_read(cx, buf);
            if matches!(result, Poll::Ready(Ok(()))) && buf.filled().len() > before {
                self.activity.bytes_read();
            }
            result
        }
    }

    impl<T: AsyncWrite + Unpin> AsyncWrite for TrackedIo<T> {
        fn poll_write(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            Pin::new(&mut self.inner).poll_write(cx, buf)
        }
        fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.inner).poll_flush(cx)
        }
        fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.inner).poll_shutdown(cx)
        }
    }

    /// The router, noting when each request starts (its header is complete) and ends.
    #[derive(Clone)]
    pub(super) struct TrackRequests {
        app: Router,
        activity: Activity,
    }

    impl TrackRequests {
        pub(super) fn new(app: Router, activity: Activity) -> Self {
            TrackRequests { app, activity }
        }
    }

    impl<B> Service<http::Request<B>> for TrackRequests
    where
        Router: Service<
                http::Request<B>,
                Response = axum::response::Response,
                Error = std::convert::Infallible,
            >,
        <Router as Service<http::Request<B>>>::Future: Send + 'static,
    {
        type Response = axum::response::Response;
        type Error = std::convert::Infallible;
        type Future =
            Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send + 'static>>;

        fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Service::<http::Request<B>>::poll_ready(&mut self.app, cx)
        }

        fn call(&mut self, req: http::Request<B>) -> Self::Future {
            self.activity.request_started();
            let activity = self.activity.clone();
            let fut = Service::<http::Request<B>>::call(&mut self.app, req);
            Box::pin(async move {
                let out = fut.await;
                activity.request_ended();
                out
            })
        }
    }
}
