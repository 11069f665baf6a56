//! Loopback helpers shared by the integration tests: a fake API server and an HTTPS client.

#![allow(dead_code, clippy::expect_used, clippy::unwrap_used)]

pub mod proxy;
#[path = "../../../../hack/tests/sibling_binary.rs"]
pub mod sibling_binary;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::routing::{get, post};
use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};

/// What the fake API saw.
#[derive(Debug, Default)]
pub struct Seen {
    pub user_agents: Vec<String>,
    pub gets: usize,
    pub token_reviews: Vec<Value>,
    pub sars: Vec<Value>,
}

pub type Shared = Arc<Mutex<Seen>>;

async fn get_configmap(State(seen): State<Shared>, headers: HeaderMap) -> Json<Value> {
    let mut s = seen.lock().unwrap();
    s.gets += 1;
    if let Some(ua) = headers.get(http::header::USER_AGENT) {
        s.user_agents.push(ua.to_str().unwrap().to_string());
    }
    Json(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "x", "namespace": "default"},
        "data": {"k": "v"}
    }))
}

/// TokenReview: "good" is alice in "devs", "admin" is root in system:masters, others fail.
async fn token_review(State(seen): State<Shared>, Json(body): Json<Value>) -> Json<Value> {
    seen.lock().unwrap().token_reviews.push(body.clone());
    let token = body["spec"]["token"].as_str().unwrap_or_default();
    let status = match token {
        "good" => {
            json!({"authenticated": true, "user": {"username": "alice", "uid": "u-1", "groups": ["devs"]}})
        }
        "admin" => {
            json!({"authenticated": true, "user": {"username": "root", "groups": ["system:masters"]}})
        }
        "bob" => json!({"authenticated": true, "user": {"username": "bob"}}),
        _ => json!({"authenticated": false, "error": "invalid token"}),
    };
    Json(json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "metadata": {},
        "spec": body["spec"].clone(),
        "status": status,
    }))
}

/// SubjectAccessReview: alice may `get /metrics`; bob is denied with a reason; others get
/// no opinion.
async fn sar(State(seen): State<Shared>, Json(body): Json<Value>) -> Json<Value> {
    seen.lock().unwrap().sars.push(body.clone());
    let spec = &body["spec"];
    let user = spec["user"].as_str().unwrap_or_default();
    let path = spec["nonResourceAttributes"]["path"]
        .as_str()
        .unwrap_or_default();
    let verb = spec["nonResourceAttributes"]["verb"]
        .as_str()
        .unwrap_or_default();
    let status = if user == "alice" && path == "/metrics" && verb == "get" {
        json!({"allowed": true})
    } else if user == "bob" {
        json!({"allowed": false, "denied": true, "reason": "bob is not welcome"})
    } else {
        json!({"allowed": false})
    };
    Json(json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "metadata": {},
        "spec": spec.clone(),
        "status": status,
    }))
}

/// Starts the fake API on a loopback port.
pub async fn fake_api() -> (SocketAddr, Shared) {
    let seen = Shared::default();
    let app = Router::new()
        .route(
            "/api/v1/namespaces/default/configmaps/x",
            get(get_configmap),
        )
        .route(
            "/apis/authentication.k8s.io/v1/tokenreviews",
            post(token_review),
        )
        .route(
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            post(sar),
        )
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (addr, seen)
}

/// A kube config for the fake API with no timers (so paused time only moves for the code
/// under test).
pub fn config_for(addr: SocketAddr) -> kube::Config {
    let mut c = kube::Config::new(format!("http://{addr}").parse().unwrap());
    c.connect_timeout = None;
    c.read_timeout = None;
    c.write_timeout = None;
    c
}

/// GETs `path` over HTTPS from `addr`, trusting only `cert`; returns status, headers, body.
pub async fn https_get(
    addr: SocketAddr,
    cert: &CertificateDer<'static>,
    path: &str,
    bearer: Option<&str>,
) -> (StatusCode, HeaderMap, String) {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let tls = connector
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .expect("TLS handshake with the serving certificate");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut req = Request::get(path).header(http::header::HOST, "localhost");
    if let Some(t) = bearer {
        req = req.header(http::header::AUTHORIZATION, format!("Bearer {t}"));
    }
    let resp = sender
        .send_request(req.body(Empty::<Bytes>::new()).unwrap())
        .await
        .unwrap();
    let status = resp.status();
    let headers = resp.headers().clone();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, headers, String::from_utf8(body.to_vec()).unwrap())
}

/// The last certificate of the chain `addr` presents (the CA of a generated pair), read
/// without verifying it.
pub async fn presented_ca(addr: SocketAddr) -> CertificateDer<'static> {
    #[derive(Debug)]
    struct AcceptAll(Arc<rustls::crypto::CryptoProvider>);
    impl rustls::client::danger::ServerCertVerifier for AcceptAll {
        fn verify_server_cert(
            &self,
            _: &CertificateDer<'_>,
            _: &[CertificateDer<'_>],
            _: &ServerName<'_>,
            _: &[u8],
            _: rustls::pki_types::UnixTime,
        ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
            Ok(rustls::client::danger::ServerCertVerified::assertion())
        }
        fn verify_tls12_signature(
            &self,
            m: &[u8],
            c: &CertificateDer<'_>,
            d: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls12_signature(
                m,
                c,
                d,
                &self.0.signature_verification_algorithms,
            )
        }
        fn verify_tls13_signature(
            &self,
            m: &[u8],
            c: &CertificateDer<'_>,
            d: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls13_signature(
                m,
                c,
                d,
                &self.0.signature_verification_algorithms,
            )
        }
        fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
            self.0.signature_verification_algorithms.supported_schemes()
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAll(provider)))
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let tls = connector
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    let (_, conn) = tls.get_ref();
    conn.peer_certificates()
        .unwrap()
        .last()
        .unwrap()
        .clone()
        .into_owned()
}

/// A log writer for tests: keeps everything written, shared between its clones.
#[derive(Clone, Default)]
pub struct Capture(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Capture {
    /// Everything written so far.
    pub fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }

    /// Everything written so far, by line.
    pub fn lines(&self) -> Vec<String> {
        self.text().lines().map(str::to_owned).collect()
    }
}

/// The fields of `--version=raw`'s `version.Info{Name:"value", ...}` line.
pub fn raw_fields(line: &str) -> Vec<(String, String)> {
    let body = line
        .trim()
        .strip_prefix("version.Info{")
        .and_then(|b| b.strip_suffix('}'))
        .unwrap_or_else(|| panic!("not a version.Info line: {line}"));
    body.split(", ")
        .map(|field| {
            let (name, value) = field.split_once(':').unwrap();
            let value = value.strip_prefix('"').unwrap().strip_suffix('"').unwrap();
            (name.to_string(), value.to_string())
        })
        .collect()
}

/// The labels of one exposition line (`name{a="x",b="y"} 1`), unescaped.
pub fn exposition_labels(line: &str) -> Vec<(String, String)> {
    let Some(open) = line.find('{') else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut chars = line[open + 1..].chars();
    loop {
        let name: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if name.is_empty() || name.starts_with('}') {
            return out;
        }
        assert_eq!(chars.next(), Some('"'), "{line}");
        let mut value = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some('n') => value.push('\n'),
                    Some(other) => value.push(other),
                    None => break,
                },
                '"' => break,
                c => value.push(c),
            }
        }
        out.push((name.trim_start_matches(',').to_string(), value));
        match chars.next() {
            Some(',') => {
                // A trailing comma before the closing brace is allowed.
                let rest = chars.as_str();
                if rest.starts_with('}') {
                    return out;
                }
                chars = rest.chars();
            }
            _ => return out,
        }
    }
}
