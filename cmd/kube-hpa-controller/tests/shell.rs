//! The shell's clients against a scripted loopback server: client-go's retry rule (only a
//! `Retry-After` answer, at most ten times), a 503 failing a metric at once and counted
//! once, the write fence, request timeouts, Go-shaped transport errors, a refused expired
//! CA, any `--kube-api-qps`, and the secure port's connection timeouts.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use hpa_metrics::{AvailableApis, MetricsApiClients, MetricsClient, RestMetricsClient};
use http::StatusCode;
use kube_hpa_controller::client::{ClientSettings, client_with};
use kube_hpa_controller::fence::WriteFence;
use kube_hpa_controller::metrics::RestClientMetrics;
use prometheus::Registry;
use tokio::io::AsyncReadExt;

/// What the scripted server answers: a list of (status, Retry-After) for successive
/// requests, the last one repeated.
#[derive(Clone)]
struct Script {
    answers: Arc<Vec<(u16, Option<&'static str>)>>,
    hits: Arc<AtomicUsize>,
    methods: Arc<Mutex<Vec<String>>>,
}

async fn scripted(State(s): State<Script>, req: axum::extract::Request) -> Response {
    let n = s.hits.fetch_add(1, Ordering::SeqCst);
    s.methods.lock().unwrap().push(req.method().to_string());
    let (code, retry) = s.answers[n.min(s.answers.len() - 1)];
    let mut resp = (
        StatusCode::from_u16(code).unwrap(),
        [(http::header::CONTENT_TYPE, "application/json")],
        if code == 200 {
            r#"{"kind":"PodMetricsList","apiVersion":"metrics.k8s.io/v1beta1","metadata":{},"items":[]}"#.to_string()
        } else {
            format!(
                r#"{{"kind":"Status","apiVersion":"v1","status":"Failure","message":"scripted {code}","code":{code}}}"#
            )
        },
    )
        .into_response();
    if let Some(r) = retry {
        resp.headers_mut()
            .insert(http::header::RETRY_AFTER, r.parse().unwrap());
    }
    resp
}

async fn script_server(answers: Vec<(u16, Option<&'static str>)>) -> (SocketAddr, Script) {
    let script = Script {
        answers: Arc::new(answers),
        hits: Arc::default(),
        methods: Arc::default(),
    };
    let app = Router::new()
        .route("/{*path}", any(scripted))
        .with_state(script.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (addr, script)
}

fn settings(metrics: &RestClientMetrics) -> ClientSettings {
    ClientSettings::new(Some((1000.0, 1000)), Some(metrics.clone()))
}

fn count(registry: &Registry, code: &str) -> u64 {
    registry
        .gather()
        .iter()
        .filter(|f| f.name() == "rest_client_requests_total")
        .flat_map(|f| f.get_metric().iter())
        .filter(|m| {
            m.get_label()
                .iter()
                .any(|l| l.name() == "code" && l.value() == code)
        })
        .map(|m| m.get_counter().get_value() as u64)
        .sum()
}

fn default_config(addr: SocketAddr) -> kube::Config {
    // As loaded from a kubeconfig: kube's defaults, retries on, which the client turns off.
    let c = kube::Config::new(format!("http://{addr}").parse().unwrap());
    assert!(c.default_retry, "kube's default is to retry");
    c
}

#[tokio::test]
async fn a_503_from_a_metrics_api_fails_the_metric_at_once_and_is_counted_once() {
    let (addr, script) = script_server(vec![(503, None)]).await;
    let registry = Registry::new();
    let metrics = RestClientMetrics::new(&registry).unwrap();
    let client = client_with(default_config(addr), settings(&metrics)).unwrap();
    let mc =
        RestMetricsClient::with_clients(MetricsApiClients::shared(client), AvailableApis::new());
    let selector = hpa_metrics::Selector::everything();
    let started = std::time::Instant::now();
    let err = mc
        .get_resource_metric("cpu", "default", &selector, None)
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(err.to_string().contains("scripted 503"), "{err}");
    assert_eq!(
        script.hits.load(Ordering::SeqCst),
        1,
        "one request, no retry"
    );
    assert_eq!(count(&registry, "503"), 1);
}

#[tokio::test]
async fn a_429_with_retry_after_is_retried_then_succeeds() {
    let (addr, script) = script_server(vec![(429, Some("0")), (503, Some("0")), (200, None)]).await;
    let registry = Registry::new();
    let metrics = RestClientMetrics::new(&registry).unwrap();
    let client = client_with(default_config(addr), settings(&metrics)).unwrap();
    let req = http::Request::get("/apis/metrics.k8s.io/v1beta1/pods")
        .body(kube::client::Body::empty())
        .unwrap();
    let resp = client.send(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(script.hits.load(Ordering::SeqCst), 3);
    assert_eq!(count(&registry, "429"), 1);
    assert_eq!(count(&registry, "503"), 1);
    assert_eq!(count(&registry, "200"), 1);
}

#[tokio::test]
async fn retry_after_is_honoured_at_most_ten_times() {
    let (addr, script) = script_server(vec![(429, Some("0"))]).await;
    let registry = Registry::new();
    let metrics = RestClientMetrics::new(&registry).unwrap();
    let client = client_with(default_config(addr), settings(&metrics)).unwrap();
    let req = http::Request::put("/api/v1/namespaces/a/x")
        .body(kube::client::Body::from(b"{}".to_vec()))
        .unwrap();
    let resp = client.send(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        script.hits.load(Ordering::SeqCst),
        11,
        "first try + 10 retries"
    );
    assert_eq!(count(&registry, "429"), 11);
}

#[tokio::test]
async fn retry_after_waits_the_seconds_the_server_asks_for() {
    let (addr, script) = script_server(vec![(503, Some("1")), (200, None)]).await;
    let metrics = RestClientMetrics::new(&Registry::new()).unwrap();
    let client = client_with(default_config(addr), settings(&metrics)).unwrap();
    let started = std::time::Instant::now();
    let req = http::Request::get("/api")
        .body(kube::client::Body::empty())
        .unwrap();
    assert_eq!(client.send(req).await.unwrap().status(), StatusCode::OK);
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert_eq!(script.hits.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_closed_fence_stops_writes_but_not_reads() {
    let (addr, script) = script_server(vec![(200, None)]).await;
    let metrics = RestClientMetrics::new(&Registry::new()).unwrap();
    let fence = WriteFence::leased(Duration::from_secs(10));
    let mut s = settings(&metrics);
    s.fence = Some(fence.clone());
    let client = client_with(default_config(addr), s).unwrap();
    let put = || {
        http::Request::put("/apis/apps/v1/namespaces/a/deployments/d/scale")
            .body(kube::client::Body::from(b"{}".to_vec()))
            .unwrap()
    };
    // Never renewed: refused without a request.
    let err = client.send(put()).await.unwrap_err().to_string();
    assert!(err.contains("has not acquired the leader lease"), "{err}");
    assert_eq!(script.hits.load(Ordering::SeqCst), 0);
    fence.renewed(tokio::time::Instant::now());
    client.send(put()).await.unwrap();
    assert_eq!(script.hits.load(Ordering::SeqCst), 1);
    fence.close();
    let err = client.send(put()).await.unwrap_err().to_string();
    assert!(err.contains("shutting down"), "{err}");
    let get = http::Request::get("/api")
        .body(kube::client::Body::empty())
        .unwrap();
    client.send(get).await.unwrap();
    assert_eq!(script.hits.load(Ordering::SeqCst), 2);
    assert_eq!(
        script.methods.lock().unwrap().as_slice(),
        ["PUT".to_string(), "GET".to_string()]
    );
}

/// Shadow mode: the fence of the writing clients never opens, whatever the lease does; reads
/// go through.
#[tokio::test]
async fn a_read_only_fence_refuses_every_write() {
    let (addr, script) = script_server(vec![(200, None)]).await;
    let metrics = RestClientMetrics::new(&Registry::new()).unwrap();
    let fence = WriteFence::read_only();
    let mut s = settings(&metrics);
    s.fence = Some(fence.clone());
    let client = client_with(default_config(addr), s).unwrap();
    fence.renewed(tokio::time::Instant::now());
    for method in ["PUT", "POST", "PATCH", "DELETE"] {
        let req = http::Request::builder()
            .method(method)
            .uri("/apis/apps/v1/namespaces/a/deployments/d/scale")
            .body(kube::client::Body::from(b"{}".to_vec()))
            .unwrap();
        let err = client.send(req).await.unwrap_err().to_string();
        assert!(err.contains("shadow mode"), "{method}: {err}");
    }
    assert_eq!(script.hits.load(Ordering::SeqCst), 0);
    let get = http::Request::get("/api")
        .body(kube::client::Body::empty())
        .unwrap();
    client.send(get).await.unwrap();
    assert_eq!(script.hits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_request_that_gets_no_answer_times_out() {
    // Accepts, reads, never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            held.push(s);
        }
    });
    let metrics = RestClientMetrics::new(&Registry::new()).unwrap();
    let mut s = settings(&metrics);
    s.request_timeout = Some(Duration::from_millis(300));
    let client = client_with(default_config(addr), s).unwrap();
    let req = http::Request::get("/api")
        .body(kube::client::Body::empty())
        .unwrap();
    let err = client.send(req).await.unwrap_err();
    let text = hpa_metrics::kube_error_message(&err);
    assert_eq!(
        text,
        format!(
            "Get \"http://{addr}/api\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
        )
    );
}

#[tokio::test]
async fn a_refused_connection_reads_as_go_dial_error() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let metrics = RestClientMetrics::new(&Registry::new()).unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let client = client_with(default_config(addr), settings(&metrics)).unwrap();
    let req = http::Request::get("/apis/apps/v1/namespaces/a/deployments/d/scale")
        .body(kube::client::Body::empty())
        .unwrap();
    let err = client.send(req).await.unwrap_err();
    assert_eq!(
        hpa_metrics::kube_error_message(&err),
        format!(
            "Get \"http://127.0.0.1:{port}/apis/apps/v1/namespaces/a/deployments/d/scale\": dial tcp 127.0.0.1:{port}: connect: connection refused"
        )
    );
}

#[tokio::test]
async fn any_qps_works_or_is_refused_clearly() {
    let (addr, _script) = script_server(vec![(200, None)]).await;
    for qps in ["1e-30", "0.0000001", "1e30", "inf", "-1", "3.5"] {
        let parsed = hpa_config::Options::parse_args([
            "kube-hpa-controller".to_string(),
            format!("--master=http://{addr}"),
            format!("--kube-api-qps={qps}"),
        ]);
        let Ok(parsed) = parsed else {
            // A clear flag error is fine too.
            continue;
        };
        let client = kube_hpa_controller::client::build_client(&parsed.options, &Registry::new())
            .await
            .unwrap_or_else(|e| panic!("qps {qps}: {e}"));
        let req = http::Request::get("/api")
            .body(kube::client::Body::empty())
            .unwrap();
        // The first request takes a token of the full bucket: no wait whatever the QPS.
        let resp = tokio::time::timeout(Duration::from_secs(5), client.send(req))
            .await
            .unwrap_or_else(|_| panic!("qps {qps}: the first request waited"));
        assert_eq!(resp.unwrap().status(), StatusCode::OK, "qps {qps}");
    }
}

fn ca_and_leaf(
    ca_not_after: (i32, u8, u8),
) -> (Vec<u8>, kube_hpa_controller::serving::ServingCert) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "test-ca");
    ca.not_before = rcgen::date_time_ymd(2020, 1, 1);
    ca.not_after = rcgen::date_time_ymd(ca_not_after.0, ca_not_after.1, ca_not_after.2);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let mut leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    leaf.subject_alt_names = vec![rcgen::SanType::IpAddress("127.0.0.1".parse().unwrap())];
    leaf.not_before = rcgen::date_time_ymd(2020, 1, 1);
    leaf.not_after = rcgen::date_time_ymd(2099, 1, 1);
    let leaf_cert = leaf.signed_by(&leaf_key, &issuer).unwrap();
    let serving = kube_hpa_controller::serving::ServingCert {
        chain: vec![leaf_cert.der().clone()],
        key: rustls::pki_types::PrivateKeyDer::try_from(leaf_key.serialize_der()).unwrap(),
    };
    (ca_cert.der().to_vec(), serving)
}

async fn tls_server(cert: kube_hpa_controller::serving::ServingCert) -> SocketAddr {
    let server =
        kube_hpa_controller::serving::SecureServer::bind_addr("127.0.0.1:0".parse().unwrap(), cert)
            .await
            .unwrap();
    let addr = server.local_addr().unwrap();
    let state = kube_hpa_controller::serving::ServingState::new(
        Registry::new(),
        kube_hpa_controller::serving::Readiness::new(),
        Arc::new(allow_health()),
    );
    tokio::spawn(server.run(state, std::future::pending()));
    addr
}

#[tokio::test]
async fn an_expired_kubeconfig_ca_is_refused_as_go_refuses_it() {
    let metrics = RestClientMetrics::new(&Registry::new()).unwrap();
    for (not_after, ok) in [((2099, 1, 1), true), ((2021, 1, 1), false)] {
        let (ca, cert) = ca_and_leaf(not_after);
        let addr = tls_server(cert).await;
        let mut config = kube::Config::new(format!("https://{addr}").parse().unwrap());
        config.root_cert = Some(vec![ca]);
        let client = client_with(config, settings(&metrics)).unwrap();
        let req = http::Request::get("/healthz")
            .body(kube::client::Body::empty())
            .unwrap();
        let result = client.send(req).await;
        if ok {
            assert_eq!(result.unwrap().status(), StatusCode::OK);
        } else {
            let text = hpa_metrics::kube_error_message(&result.unwrap_err());
            assert!(
                text.starts_with(&format!("Get \"https://{addr}/healthz\": tls: failed to verify certificate: x509: certificate signed by unknown authority (possibly because of \"x509: certificate has expired or is not yet valid: current time ")),
                "{text}"
            );
            assert!(
                text.ends_with("is after 2021-01-01T00:00:00Z\" while trying to verify candidate authority certificate \"test-ca\")"),
                "{text}"
            );
        }
    }
}

#[tokio::test]
async fn the_secure_port_closes_silent_and_idle_connections() {
    let (ca, cert) = ca_and_leaf((2099, 1, 1));
    let server =
        kube_hpa_controller::serving::SecureServer::bind_addr("127.0.0.1:0".parse().unwrap(), cert)
            .await
            .unwrap()
            .with_timeouts(kube_hpa_controller::serving::ConnTimeouts {
                read_header: Duration::from_millis(300),
                idle: Duration::from_millis(600),
            });
    let addr = server.local_addr().unwrap();
    let state = kube_hpa_controller::serving::ServingState::new(
        Registry::new(),
        kube_hpa_controller::serving::Readiness::new(),
        Arc::new(allow_health()),
    );
    tokio::spawn(server.run(state, std::future::pending()));

    // No handshake at all: closed after the header timeout.
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let started = std::time::Instant::now();
    let mut buf = [0u8; 16];
    let n = tokio::time::timeout(Duration::from_secs(10), tcp.read(&mut buf))
        .await
        .expect("the server kept a silent connection open")
        .unwrap_or(0);
    assert_eq!(n, 0);
    assert!(started.elapsed() >= Duration::from_millis(300));

    // One request on a kept-alive connection, then nothing: closed after the idle timeout.
    use tokio::io::AsyncWriteExt;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from(ca))
        .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(
            rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap(),
            tcp,
        )
        .await
        .unwrap();
    tls.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !got.ends_with(b"ok") {
        let n = tls.read(&mut buf).await.unwrap();
        assert!(n > 0, "closed before answering");
        got.extend_from_slice(&buf[..n]);
    }
    let answered = std::time::Instant::now();
    let n = tokio::time::timeout(Duration::from_secs(10), tls.read(&mut buf))
        .await
        .expect("the server kept an idle connection open")
        .unwrap_or(0);
    assert_eq!(n, 0);
    let idle = answered.elapsed();
    assert!(idle >= Duration::from_millis(550), "closed after {idle:?}");
}

fn allow_health() -> kube_hpa_controller::auth::DelegatingAuth {
    kube_hpa_controller::auth::DelegatingAuth::new(
        None,
        None,
        kube_hpa_controller::auth::AlwaysAllowPaths::new(&["/healthz".to_string()]).unwrap(),
    )
}
