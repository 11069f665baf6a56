//! The API client against a loopback fake API: client-side QPS/burst really delays requests
//! (tokio paused time), client-go's REST client metrics are counted, the user agent is sent,
//! and a bad `--kubeconfig` fails clearly.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube_hpa_controller::client::{
    ClientError, TokioClock, build_client, client_from_config, user_agent,
};
use kube_hpa_controller::metrics::RestClientMetrics;
use prometheus::Registry;

fn sample_sum(registry: &Registry, name: &str) -> (u64, f64) {
    for family in registry.gather() {
        if family.name() == name {
            let h = family.get_metric()[0].get_histogram();
            return (h.get_sample_count(), h.get_sample_sum());
        }
    }
    panic!("{name} not gathered");
}

#[tokio::test(start_paused = true)]
async fn qps_and_burst_delay_requests_and_metrics_count_them() {
    let (addr, seen) = common::fake_api().await;
    let registry = Registry::new();
    let metrics = RestClientMetrics::new(&registry).unwrap();
    // 2 QPS, burst 3: three requests at once, then one every 500ms.
    let client = client_from_config(
        common::config_for(addr),
        Some((2.0, 3)),
        Some(metrics.clone()),
        TokioClock::new(),
    )
    .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let start = tokio::time::Instant::now();
    let mut at = Vec::new();
    for _ in 0..5 {
        let cm = api.get("x").await.unwrap();
        assert_eq!(cm.data.unwrap()["k"], "v");
        at.push(start.elapsed());
    }
    // Virtual time: the first three do not wait; the 4th waits 0.5s, the 5th 0.5s more.
    // (tokio timers round up to the next millisecond.)
    let ms = |d: Duration| d.as_millis();
    assert_eq!(ms(at[2]), 0, "{at:?}");
    assert!((500..=502).contains(&ms(at[3])), "{at:?}");
    assert!((1000..=1004).contains(&ms(at[4])), "{at:?}");
    assert_eq!(seen.lock().unwrap().gets, 5);

    let host = addr.to_string();
    assert_eq!(
        metrics
            .requests
            .with_label_values(&["200", "GET", &host])
            .get(),
        5
    );
    let (count, sum) = sample_sum(&registry, "rest_client_rate_limiter_duration_seconds");
    assert_eq!(count, 5);
    assert!((1.0..1.01).contains(&sum), "waited {sum}s in total");
    let (count, _) = sample_sum(&registry, "rest_client_request_duration_seconds");
    assert_eq!(count, 5);
}

#[tokio::test]
async fn user_agent_is_sent_and_errors_are_counted() {
    let (addr, seen) = common::fake_api().await;
    let registry = Registry::new();
    let metrics = RestClientMetrics::new(&registry).unwrap();
    let client = client_from_config(
        common::config_for(addr),
        None,
        Some(metrics.clone()),
        TokioClock::new(),
    )
    .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    api.get("x").await.unwrap();
    assert_eq!(
        seen.lock().unwrap().user_agents,
        vec![format!("kube-hpa-controller/{}", env!("CARGO_PKG_VERSION"))]
    );
    assert_eq!(user_agent(), seen.lock().unwrap().user_agents[0]);
    // A 404 is a response: counted with its code.
    assert!(api.get("missing").await.is_err());
    assert_eq!(
        metrics
            .requests
            .with_label_values(&["404", "GET", &addr.to_string()])
            .get(),
        1
    );

    // No server at all: counted as `<error>`.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let mut config = common::config_for(dead);
    config.default_retry = false;
    let client =
        client_from_config(config, None, Some(metrics.clone()), TokioClock::new()).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    assert!(api.get("x").await.is_err());
    assert_eq!(
        metrics
            .requests
            .with_label_values(&["<error>", "GET", &dead.to_string()])
            .get(),
        1
    );
}

#[tokio::test]
async fn bad_kubeconfig_path_is_a_clear_error() {
    let parsed = hpa_config::Options::parse_args([
        "kube-hpa-controller",
        "--kubeconfig=/nonexistent/kubeconfig",
    ])
    .unwrap();
    let Err(err) = build_client(&parsed.options, &Registry::new()).await else {
        panic!("a missing kubeconfig must fail");
    };
    assert!(matches!(err, ClientError::Kubeconfig { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.starts_with(
            r#"invalid --kubeconfig "/nonexistent/kubeconfig": failed to read kubeconfig"#
        ),
        "{text}"
    );
}

#[tokio::test]
async fn build_client_uses_kubeconfig_and_master_override() {
    let (addr, seen) = common::fake_api().await;
    let dir = std::env::temp_dir().join(format!("khc-client-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("kubeconfig");
    // The file points nowhere useful; --master overrides its server.
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:1\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\nusers:\n- name: u\n  user:\n    token: abc\n",
    )
    .unwrap();
    let parsed = hpa_config::Options::parse_args([
        "kube-hpa-controller".to_string(),
        format!("--kubeconfig={}", path.display()),
        format!("--master=http://{addr}"),
        "--kube-api-content-type=application/json".to_string(),
    ])
    .unwrap();
    let registry = Registry::new();
    let client = build_client(&parsed.options, &registry).await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    api.get("x").await.unwrap();
    assert_eq!(seen.lock().unwrap().gets, 1);
    let names: Vec<String> = registry
        .gather()
        .iter()
        .map(|f| f.name().to_string())
        .collect();
    for n in [
        "rest_client_requests_total",
        "rest_client_request_duration_seconds",
        "rest_client_rate_limiter_duration_seconds",
    ] {
        assert!(names.contains(&n.to_string()), "{n} in {names:?}");
    }
    // An unsupported content type is refused before anything is built.
    let parsed = hpa_config::Options::parse_args([
        "kube-hpa-controller",
        "--kube-api-content-type=application/yaml",
    ])
    .unwrap();
    assert!(matches!(
        build_client(&parsed.options, &Registry::new()).await,
        Err(ClientError::ContentType(_))
    ));
    std::fs::remove_dir_all(&dir).ok();
}

/// An API server whose first `resets` connections are reset after the request arrives (no
/// answer: an API server restarting); later ones answer a ConfigMap. Returns its address
/// and the number of requests received.
async fn resetting_api(
    resets: usize,
) -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    use std::sync::atomic::Ordering;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let received = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = received.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let counter = counter.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16 * 1024];
                let mut got = Vec::new();
                loop {
                    let Ok(n) = sock.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    got.extend_from_slice(&buf[..n]);
                    if !got.windows(4).any(|w| w == b"\r\n\r\n") {
                        continue;
                    }
                    got.clear();
                    let nth = counter.fetch_add(1, Ordering::SeqCst);
                    if nth < resets {
                        // RST instead of FIN: linger 0, then close.
                        let _ = sock.set_zero_linger();
                        return;
                    }
                    let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"default"},"data":{"k":"v"}}"#;
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                        body.len()
                    );
                    if sock.write_all(head.as_bytes()).await.is_err()
                        || sock.write_all(body.as_bytes()).await.is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    (addr, received)
}

/// client-go retries a GET whose connection was reset before any answer, as if answered
/// `Retry-After: 1` (`isErrRetryableFunc` in `rest/request.go`), so an API server restart
/// does not fail the reads of a reconcile; a write is not retried (not idempotent).
#[tokio::test]
async fn a_get_is_retried_after_a_connection_reset_and_a_write_is_not() {
    use std::sync::atomic::Ordering;
    let (addr, received) = resetting_api(2).await;
    let client =
        client_from_config(common::config_for(addr), None, None, TokioClock::new()).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let start = std::time::Instant::now();
    let cm = api.get("x").await.unwrap();
    assert_eq!(cm.data.unwrap()["k"], "v");
    assert_eq!(
        received.load(Ordering::SeqCst),
        3,
        "two resets, then the answer"
    );
    let waited = start.elapsed();
    assert!(
        (Duration::from_secs(2)..Duration::from_secs(5)).contains(&waited),
        "about one second per retry: {waited:?}"
    );

    let (addr, received) = resetting_api(1).await;
    let client =
        client_from_config(common::config_for(addr), None, None, TokioClock::new()).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("x".into());
    let err = api
        .replace("x", &Default::default(), &cm)
        .await
        .expect_err("a PUT is not retried");
    assert_eq!(received.load(Ordering::SeqCst), 1, "{err}");
}

/// A loopback API for the size metrics: a GET of a fixed body, a POST answered with its
/// own body, and a watch that sends one event and then stays open.
async fn size_api() -> std::net::SocketAddr {
    use axum::routing::{get, post};
    const OBJECT: &str = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"default"},"data":{"k":"v"}}"#;
    async fn watch() -> axum::body::Body {
        let event = format!("{{\"type\":\"ADDED\",\"object\":{OBJECT}}}\n");
        let first = futures::stream::once(async move {
            Ok::<_, std::convert::Infallible>(bytes::Bytes::from(event))
        });
        axum::body::Body::from_stream(futures::StreamExt::chain(first, futures::stream::pending()))
    }
    let app = axum::Router::new()
        .route(
            "/api/v1/namespaces/default/configmaps/x",
            get(|| async { OBJECT }),
        )
        .route(
            "/api/v1/namespaces/default/configmaps",
            post(|body: bytes::Bytes| async move { body }).get(watch),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// `rest_client_request_size_bytes` observes each request's body length (0 for a GET) and
/// `rest_client_response_size_bytes` the response body's length, as client-go's
/// `Request.request`/`Request.Do` do; a watch is observed in neither and its stream is not
/// held back (its first event arrives while the server keeps the stream open).
#[tokio::test]
async fn request_and_response_sizes_follow_client_go() {
    use futures::StreamExt;
    let addr = size_api().await;
    let registry = Registry::new();
    let metrics = RestClientMetrics::new(&registry).unwrap();
    let client = client_from_config(
        common::config_for(addr),
        None,
        Some(metrics.clone()),
        TokioClock::new(),
    )
    .unwrap();
    let host = addr.to_string();
    let size = |h: &prometheus::HistogramVec, verb: &str| {
        let h = h.with_label_values(&[verb, &host]);
        (h.get_sample_count(), h.get_sample_sum())
    };

    let text = client
        .request_text(
            http::Request::get("/api/v1/namespaces/default/configmaps/x")
                .body(Vec::new())
                .unwrap(),
        )
        .await
        .unwrap();
    assert!(text.len() > 64, "{text}");
    assert_eq!(size(&metrics.request_size, "GET"), (1, 0.0));
    assert_eq!(size(&metrics.response_size, "GET"), (1, text.len() as f64));

    let body = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"y"}}"#.to_vec();
    let echoed = client
        .request_text(
            http::Request::post("/api/v1/namespaces/default/configmaps")
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(body.clone())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(echoed.as_bytes(), body.as_slice());
    assert_eq!(size(&metrics.request_size, "POST"), (1, body.len() as f64));
    assert_eq!(size(&metrics.response_size, "POST"), (1, body.len() as f64));

    let events = client
        .request_events::<ConfigMap>(
            http::Request::get("/api/v1/namespaces/default/configmaps?watch=true")
                .body(Vec::new())
                .unwrap(),
        )
        .await
        .unwrap();
    let mut events = Box::pin(events);
    let first = tokio::time::timeout(Duration::from_secs(10), events.next())
        .await
        .expect("the first event arrives while the stream stays open")
        .unwrap()
        .unwrap();
    assert!(
        matches!(first, kube::core::WatchEvent::Added(_)),
        "{first:?}"
    );
    drop(events);
    // The watch added no observation to the GET's.
    assert_eq!(size(&metrics.request_size, "GET"), (1, 0.0));
    assert_eq!(size(&metrics.response_size, "GET"), (1, text.len() as f64));
    assert_eq!(
        metrics
            .requests
            .with_label_values(&["200", "GET", &host])
            .get(),
        2,
        "the watch is counted in rest_client_requests_total"
    );
}
