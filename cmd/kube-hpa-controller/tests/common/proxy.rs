//! A loopback HTTP proxy in front of the fixture API server that notes every write it
//! forwards (with the wall-clock time it forwarded it) and can stop forwarding: the Lease
//! requests alone (a lease update that hangs) or everything (an API server that stopped
//! answering). Requests it stops are held open, never answered.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use http::{Request, Response, Uri};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};

/// One write the proxy forwarded.
#[derive(Debug, Clone)]
pub struct ForwardedWrite {
    /// When it was forwarded (wall clock).
    pub at: jiff::Timestamp,
    /// The HTTP method.
    pub method: String,
    /// The path.
    pub path: String,
}

/// The proxy's switches and record.
#[derive(Debug, Default)]
pub struct ProxyState {
    /// Hold every request for a Lease.
    pub freeze_leases: AtomicBool,
    /// Hold every request.
    pub freeze_all: AtomicBool,
    /// The writes forwarded, in order.
    pub writes: Mutex<Vec<ForwardedWrite>>,
}

impl ProxyState {
    /// The forwarded writes other than the Lease's and events.
    pub fn controller_writes(&self) -> Vec<ForwardedWrite> {
        self.writes
            .lock()
            .unwrap()
            .iter()
            .filter(|w| !w.path.contains("/leases") && !w.path.contains("/events"))
            .cloned()
            .collect()
    }
}

/// Starts the proxy in front of `upstream` (`host:port`); returns its address.
pub async fn start(upstream: String) -> (SocketAddr, Arc<ProxyState>) {
    let state = Arc::new(ProxyState::default());
    let client: Client<HttpConnector, Incoming> =
        Client::builder(TokioExecutor::new()).build_http();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let st = state.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let client = client.clone();
            let st = st.clone();
            let upstream = upstream.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req: Request<Incoming>| {
                    let client = client.clone();
                    let st = st.clone();
                    let upstream = upstream.clone();
                    async move { Ok::<_, Infallible>(forward(req, &client, &st, &upstream).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tcp), svc)
                    .await;
            });
        }
    });
    (addr, state)
}

async fn forward(
    mut req: Request<Incoming>,
    client: &Client<HttpConnector, Incoming>,
    st: &ProxyState,
    upstream: &str,
) -> Response<http_body_util::combinators::BoxBody<bytes::Bytes, hyper::Error>> {
    use http_body_util::BodyExt;
    let path = req.uri().path().to_string();
    if st.freeze_all.load(Ordering::SeqCst)
        || (path.contains("/leases") && st.freeze_leases.load(Ordering::SeqCst))
    {
        std::future::pending::<()>().await;
    }
    let pq = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    *req.uri_mut() = format!("http://{upstream}{pq}").parse::<Uri>().unwrap();
    if req.method() != http::Method::GET {
        st.writes.lock().unwrap().push(ForwardedWrite {
            at: jiff::Timestamp::now(),
            method: req.method().to_string(),
            path,
        });
    }
    match client.request(req).await {
        Ok(resp) => resp.map(|b| b.boxed()),
        Err(_) => Response::builder()
            .status(502)
            .body(
                http_body_util::Empty::new()
                    .map_err(|never| match never {})
                    .boxed(),
            )
            .unwrap(),
    }
}
