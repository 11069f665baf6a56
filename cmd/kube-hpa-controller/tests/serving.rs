//! The secure endpoint over real TLS on loopback: self-signed and file certificates,
//! `/metrics` with the given registry and process metrics, health and readiness answers,
//! `--secure-port 0`.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use http::StatusCode;
use kube_hpa_controller::auth::{AlwaysAllowPaths, DelegatingAuth};
use kube_hpa_controller::serving::{
    Readiness, SecureServer, ServingConfig, ServingState, serve, serving_cert,
};
use prometheus::{IntCounter, Registry};

fn config(cert: &str, key: &str) -> ServingConfig {
    ServingConfig {
        bind_address: "127.0.0.1".parse().unwrap(),
        secure_port: 0,
        cert_dir: String::new(),
        tls_cert_file: cert.into(),
        tls_private_key_file: key.into(),
    }
}

fn open_auth(paths: &[&str]) -> Arc<DelegatingAuth> {
    let paths: Vec<String> = paths.iter().map(|p| p.to_string()).collect();
    Arc::new(DelegatingAuth::new(
        None,
        None,
        AlwaysAllowPaths::new(&paths).unwrap(),
    ))
}

async fn start(
    cfg: &ServingConfig,
    state: ServingState,
) -> (
    std::net::SocketAddr,
    rustls::pki_types::CertificateDer<'static>,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let server =
        SecureServer::bind_addr("127.0.0.1:0".parse().unwrap(), serving_cert(cfg).unwrap())
            .await
            .unwrap();
    let addr = server.local_addr().unwrap();
    // Trust the last of the chain: the CA of a generated pair, or a self-signed leaf.
    let cert = server.chain().last().unwrap().clone();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server.run(state, async move {
        let _ = rx.await;
    }));
    (addr, cert, tx, task)
}

#[tokio::test]
async fn self_signed_https_serves_metrics_and_health() {
    let registry = Registry::new();
    let c = IntCounter::new("my_counter_total", "A test counter.").unwrap();
    registry.register(Box::new(c.clone())).unwrap();
    c.inc();
    let readiness = Readiness::new();
    let state = ServingState::new(
        registry,
        readiness.clone(),
        open_auth(&["/healthz", "/readyz", "/livez", "/metrics", "/readyz/*"]),
    );
    let (addr, cert, stop, task) = start(&config("", ""), state).await;

    let (code, headers, body) = common::https_get(addr, &cert, "/metrics", None).await;
    assert_eq!(code, StatusCode::OK);
    assert!(
        headers[http::header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/plain; version=0.0.4")
    );
    assert!(body.contains("my_counter_total 1"), "{body}");
    for name in [
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_start_time_seconds",
        "process_open_fds",
    ] {
        assert!(body.contains(&format!("# TYPE {name} ")), "{name} missing");
    }

    for path in ["/healthz", "/livez"] {
        let (code, _, body) = common::https_get(addr, &cert, path, None).await;
        assert_eq!((code, body.as_str()), (StatusCode::OK, "ok"), "{path}");
    }

    // Not ready until the controller says so; the reason is withheld from the list and
    // shown on the sub-check.
    let (code, _, body) = common::https_get(addr, &cert, "/readyz", None).await;
    assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        body,
        "[+]ping ok\n[-]controller failed: reason withheld\nreadyz check failed\n"
    );
    readiness.set_not_ready("caches not synced");
    let (code, _, body) = common::https_get(addr, &cert, "/readyz/controller", None).await;
    assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(body, "internal server error: caches not synced\n");

    readiness.set_ready();
    let (code, _, body) = common::https_get(addr, &cert, "/readyz", None).await;
    assert_eq!((code, body.as_str()), (StatusCode::OK, "ok"));
    let (_, _, body) = common::https_get(addr, &cert, "/readyz?verbose", None).await;
    assert_eq!(body, "[+]ping ok\n[+]controller ok\nreadyz check passed\n");
    readiness.set_not_ready("lost the lease");
    let (code, _, body) =
        common::https_get(addr, &cert, "/readyz?exclude=controller&exclude=nope", None).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(body, "ok");
    let (_, _, body) = common::https_get(
        addr,
        &cert,
        "/readyz?verbose&exclude=controller&exclude=nope",
        None,
    )
    .await;
    assert_eq!(
        body,
        "[+]ping ok\n[+]controller excluded: ok\nwarn: some health checks cannot be excluded: no matches for \"nope\"\nreadyz check passed\n"
    );

    stop.send(()).unwrap();
    task.await.unwrap();
}

#[tokio::test]
async fn metrics_need_authorization_unless_always_allowed() {
    let state = ServingState::new(
        Registry::new(),
        Readiness::new(),
        open_auth(&["/healthz", "/readyz", "/livez"]),
    );
    let (addr, cert, stop, task) = start(&config("", ""), state).await;
    // No authorizer: anonymous gets 403 on /metrics, as KCM without an authorization
    // kubeconfig answers.
    let (code, _, body) = common::https_get(addr, &cert, "/metrics", None).await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v["message"],
        r#"forbidden: User "system:anonymous" cannot get path "/metrics""#
    );
    let (code, _, _) = common::https_get(addr, &cert, "/healthz", None).await;
    assert_eq!(code, StatusCode::OK);
    stop.send(()).unwrap();
    task.await.unwrap();
}

#[tokio::test]
async fn certificate_files_are_used_when_given() {
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    let cert = params.self_signed(&key).unwrap();
    let dir = std::env::temp_dir().join(format!("khc-serving-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (crt_path, key_path) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&crt_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    let cfg = config(crt_path.to_str().unwrap(), key_path.to_str().unwrap());
    let state = ServingState::new(Registry::new(), Readiness::new(), open_auth(&["/healthz"]));
    let (addr, served, stop, task) = start(&cfg, state).await;
    assert_eq!(served.as_ref(), cert.der().as_ref());
    let (code, _, body) = common::https_get(addr, cert.der(), "/healthz", None).await;
    assert_eq!((code, body.as_str()), (StatusCode::OK, "ok"));
    stop.send(()).unwrap();
    task.await.unwrap();

    // Half a pair, or a missing file, is refused.
    assert!(serving_cert(&config(crt_path.to_str().unwrap(), "")).is_err());
    let err = serving_cert(&config("/nonexistent.crt", "/nonexistent.key")).unwrap_err();
    assert!(err.to_string().contains("/nonexistent.crt"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn secure_port_zero_does_not_serve() {
    let mut cfg = config("", "");
    cfg.secure_port = 0;
    assert!(SecureServer::bind(&cfg).await.unwrap().is_none());
    let state = ServingState::new(Registry::new(), Readiness::new(), open_auth(&[]));
    // Returns at once even though shutdown never comes.
    serve(&cfg, state, std::future::pending()).await.unwrap();
}

#[tokio::test]
async fn cert_dir_keeps_the_generated_pair() {
    let dir = std::env::temp_dir().join(format!("khc-certdir-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut cfg = config("", "");
    cfg.cert_dir = dir.join("certs").display().to_string();
    let first = serving_cert(&cfg).unwrap();
    // A CA-signed leaf plus its CA, as certutil generates.
    assert_eq!(first.chain.len(), 2);
    let crt = dir.join("certs/kube-hpa-controller.crt");
    let key = dir.join("certs/kube-hpa-controller.key");
    assert!(
        std::fs::read_to_string(&crt)
            .unwrap()
            .contains("BEGIN CERTIFICATE")
    );
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // The next start reuses the files.
    let second = serving_cert(&cfg).unwrap();
    assert_eq!(first.chain, second.chain);
    // And serves them.
    let state = ServingState::new(Registry::new(), Readiness::new(), open_auth(&["/livez"]));
    let (addr, ca, stop, task) = start(&cfg, state).await;
    assert_eq!(ca, first.chain[1]);
    let (code, _, body) = common::https_get(addr, &ca, "/livez", None).await;
    assert_eq!((code, body.as_str()), (StatusCode::OK, "ok"));
    stop.send(()).unwrap();
    task.await.unwrap();
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn serve_from_flags_until_shutdown() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let parsed = hpa_config::Options::parse_args([
        "kube-hpa-controller".to_string(),
        format!("--secure-port={port}"),
        "--bind-address=127.0.0.1".to_string(),
        "--authorization-always-allow-paths=/metrics".to_string(),
    ])
    .unwrap();
    let cfg = ServingConfig::from_flags(&parsed.options.serving).unwrap();
    assert_eq!(cfg.secure_port, port);
    // The caller registered the process collector itself: it is exported once.
    let registry = Registry::new();
    kube_hpa_controller::metrics::register_process_metrics(&registry).unwrap();
    let auth = DelegatingAuth::from_flags(&parsed.options.auth)
        .await
        .unwrap();
    let state = ServingState::new(registry, Readiness::new(), Arc::new(auth));
    // `serve` is `bind` then `run`; bound here first so the test needs no waiting.
    let server = SecureServer::bind(&cfg)
        .await
        .unwrap()
        .expect("port is not 0");
    let chain = server.chain().to_vec();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server.run(state, async move {
        let _ = rx.await;
    }));
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    // The generated chain (leaf, CA) is what the server presents.
    let ca = common::presented_ca(addr).await;
    assert_eq!(chain.len(), 2);
    assert_eq!(ca, chain[1]);
    let (code, _, body) = common::https_get(addr, &ca, "/metrics", None).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(
        body.matches("# TYPE process_cpu_seconds_total counter")
            .count(),
        1,
        "{body}"
    );
    tx.send(()).unwrap();
    task.await.unwrap();
}
