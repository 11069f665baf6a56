//! REST metrics client against a loopback HTTP server answering with recorded metrics-API JSON
//! (`tests/data/`). Expectations come from upstream `pkg/controller/podautoscaler/metrics/client.go` semantics: milli-values
//! rounded up, pods with a missing container or resource left out, first item's timestamp,
//! default window of one minute for custom metrics, and upstream's error texts.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use hpa_metrics::{MetricsClient, MetricsError, RestMetricsClient, Selector};
use k8s_openapi::api::autoscaling::v2::CrossVersionObjectReference;

#[derive(Clone)]
struct Canned {
    status: u16,
    content_type: &'static str,
    body: String,
}

#[derive(Clone, Default)]
struct Fake {
    routes: Arc<Mutex<HashMap<String, Canned>>>,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Fake {
    fn json(&self, path: &str, file: &str) {
        self.answer(path, 200, "application/json", &data(file));
    }

    fn answer(&self, path: &str, status: u16, content_type: &'static str, body: &str) {
        self.routes.lock().unwrap().insert(
            path.to_string(),
            Canned {
                status,
                content_type,
                body: body.to_string(),
            },
        );
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

fn data(file: &str) -> String {
    let path = format!("{}/tests/data/{file}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

async fn handle(State(fake): State<Fake>, uri: Uri) -> Response {
    fake.seen.lock().unwrap().push(uri.to_string());
    let canned = fake.routes.lock().unwrap().get(uri.path()).cloned();
    match canned {
        Some(c) => (
            StatusCode::from_u16(c.status).unwrap(),
            [(header::CONTENT_TYPE, c.content_type)],
            c.body,
        )
            .into_response(),
        None => (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "404 page not found\n",
        )
            .into_response(),
    }
}

async fn start() -> (Fake, RestMetricsClient) {
    let fake = Fake::default();
    let app = axum::Router::new()
        .fallback(handle)
        .with_state(fake.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let mut config = kube::Config::new(format!("http://{addr}").parse().unwrap());
    // kube retries 429/503/504 by default (client-go does not without Retry-After).
    config.default_retry = false;
    let client = kube::Client::try_from(config).unwrap();
    (fake, RestMetricsClient::new(client))
}

fn ts(s: &str) -> jiff::Timestamp {
    s.parse().unwrap()
}

fn sel(s: &str) -> Selector {
    s.parse().unwrap()
}

const PODS: &str = "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods";

#[tokio::test]
async fn resource_metrics_sum_containers_and_skip_incomplete_pods() {
    let (fake, client) = start().await;
    fake.json(PODS, "pod-metrics.json");

    let (cpu, t) = client
        .get_resource_metric("cpu", "default", &sel("app=web"), None)
        .await
        .unwrap();
    assert_eq!(t, ts("2024-05-01T10:00:15Z"));
    assert_eq!(cpu.len(), 3, "the pod without containers is left out");
    let a1 = &cpu["web-7d9c7b8b5-a1"];
    // 123456789n → 124m (rounded up), 2001000n → 3m.
    assert_eq!(a1.value, 127);
    assert_eq!(a1.window, Duration::from_millis(15_012));
    assert_eq!(a1.timestamp, ts("2024-05-01T10:00:15Z"));
    assert_eq!(cpu["web-7d9c7b8b5-b2"].value, 251);
    assert_eq!(cpu["web-7d9c7b8b5-b2"].window, Duration::from_secs(60));
    assert_eq!(cpu["web-7d9c7b8b5-c3"].value, 500);
    assert_eq!(
        cpu["web-7d9c7b8b5-c3"].timestamp,
        ts("2024-05-01T10:00:17Z")
    );

    let (mem, _) = client
        .get_resource_metric("memory", "default", &sel("app=web"), None)
        .await
        .unwrap();
    // b2's sidecar reports no memory: the whole pod is left out.
    assert_eq!(mem.len(), 2);
    assert_eq!(
        mem["web-7d9c7b8b5-a1"].value,
        (104_860 * 1024 + 20 * 1024 * 1024) * 1000
    );
    assert_eq!(mem["web-7d9c7b8b5-c3"].value, 64 * 1024 * 1024 * 1000);

    assert_eq!(
        fake.seen(),
        vec![
            format!("{PODS}?labelSelector=app%3Dweb"),
            format!("{PODS}?labelSelector=app%3Dweb"),
        ]
    );
}

#[tokio::test]
async fn resource_metrics_for_one_container() {
    let (fake, client) = start().await;
    fake.json(PODS, "pod-metrics.json");

    let (app, _) = client
        .get_resource_metric("cpu", "default", &sel("app=web"), Some("app"))
        .await
        .unwrap();
    assert_eq!(app.len(), 3);
    assert_eq!(app["web-7d9c7b8b5-a1"].value, 124);
    assert_eq!(app["web-7d9c7b8b5-b2"].value, 250);
    assert_eq!(app["web-7d9c7b8b5-c3"].value, 500);

    // The sidecar is missing from c3 and d4, and b2's sidecar has no memory: only a1 remains.
    let (sidecar, t) = client
        .get_resource_metric("memory", "default", &sel("app=web"), Some("sidecar"))
        .await
        .unwrap();
    assert_eq!(t, ts("2024-05-01T10:00:15Z"));
    assert_eq!(sidecar.len(), 1);
    assert_eq!(sidecar["web-7d9c7b8b5-a1"].value, 20 * 1024 * 1024 * 1000);

    // An empty selector sends no labelSelector parameter.
    client
        .get_resource_metric("cpu", "default", &Selector::everything(), None)
        .await
        .unwrap();
    assert_eq!(fake.seen().last().unwrap(), PODS);
}

#[tokio::test]
async fn resource_metrics_errors() {
    let (fake, client) = start().await;
    let err = client
        .get_resource_metric("cpu", "default", &sel("app=web"), None)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "unable to fetch metrics from resource metrics API: the server could not find the requested resource (get pods.metrics.k8s.io)"
    );

    fake.json(PODS, "pod-metrics-empty.json");
    let err = client
        .get_resource_metric("cpu", "default", &sel("app=web"), None)
        .await
        .unwrap_err();
    assert_eq!(err, MetricsError::NoResourceMetrics);
    assert_eq!(
        err.to_string(),
        "no metrics returned from resource metrics API"
    );

    fake.answer(
        PODS,
        503,
        "text/plain; charset=utf-8",
        "service unavailable\n",
    );
    let err = client
        .get_resource_metric("cpu", "default", &sel("app=web"), None)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "unable to fetch metrics from resource metrics API: the server is currently unable to handle the request (get pods.metrics.k8s.io)"
    );

    fake.answer(PODS, 500, "text/plain", "boom");
    let err = client
        .get_resource_metric("cpu", "default", &sel("app=web"), None)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "unable to fetch metrics from resource metrics API: an error on the server (\"boom\") has prevented the request from succeeding (get pods.metrics.k8s.io)"
    );
}

/// A 200 answer that does not decode: the error reads as the decoder's text, and the
/// decoder's typed error stays reachable below the fetch error.
#[tokio::test]
async fn an_undecodable_answer_keeps_the_decoder_error_as_its_source() {
    use std::error::Error as _;
    let (fake, client) = start().await;
    fake.answer(PODS, 200, "application/json", "{\"items\": 7}");
    let err = client
        .get_resource_metric("cpu", "default", &sel("app=web"), None)
        .await
        .unwrap_err();
    let MetricsError::ResourceFetch(fetch) = &err else {
        panic!("not a fetch error: {err:?}");
    };
    assert_eq!(fetch.status, None);
    let decoder = fetch
        .source()
        .and_then(|e| e.downcast_ref::<serde_json::Error>())
        .expect("the decoder's error is the fetch error's source");
    assert_eq!(decoder.to_string(), fetch.message);
    assert_eq!(
        err.source().map(ToString::to_string),
        Some(fetch.message.clone())
    );
}

const POD_METRIC_V2: &str =
    "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/http_requests_per_second";
const POD_METRIC_V1: &str =
    "/apis/custom.metrics.k8s.io/v1beta1/namespaces/default/pods/*/http_requests_per_second";

#[tokio::test]
async fn custom_pod_metrics_v1beta2() {
    let (fake, client) = start().await;
    fake.json("/apis", "apis-custom-v1beta2.json");
    fake.json(POD_METRIC_V2, "custom-v1beta2-pods.json");

    let (m, t) = client
        .get_raw_metric(
            "http_requests_per_second",
            "default",
            &sel("app=web"),
            &sel("verb=GET"),
        )
        .await
        .unwrap();
    assert_eq!(t, ts("2024-05-01T10:00:20Z"));
    assert_eq!(m["web-7d9c7b8b5-a1"].value, 1500);
    assert_eq!(m["web-7d9c7b8b5-a1"].window, Duration::from_secs(30));
    assert_eq!(m["web-7d9c7b8b5-b2"].value, 2000);
    assert_eq!(m["web-7d9c7b8b5-b2"].window, Duration::from_secs(60));
    assert_eq!(m["web-7d9c7b8b5-b2"].timestamp, ts("2024-05-01T10:00:21Z"));

    // The discovered version is cached: one discovery for two calls.
    client
        .get_raw_metric(
            "http_requests_per_second",
            "default",
            &sel("app=web"),
            &Selector::everything(),
        )
        .await
        .unwrap();
    assert_eq!(
        fake.seen(),
        vec![
            "/apis".to_string(),
            format!("{POD_METRIC_V2}?labelSelector=app%3Dweb&metricLabelSelector=verb%3DGET"),
            format!("{POD_METRIC_V2}?labelSelector=app%3Dweb"),
        ]
    );
}

#[tokio::test]
async fn custom_pod_metrics_v1beta1_and_rediscovery_after_invalidation() {
    let (fake, client) = start().await;
    fake.json("/apis", "apis-custom-v1beta1.json");
    fake.json(POD_METRIC_V1, "custom-v1beta1-pods.json");
    fake.json(POD_METRIC_V2, "custom-v1beta2-pods.json");

    let (m, t) = client
        .get_raw_metric(
            "http_requests_per_second",
            "default",
            &sel("app=web"),
            &Selector::everything(),
        )
        .await
        .unwrap();
    assert_eq!(t, ts("2024-05-01T10:00:22Z"));
    assert_eq!(m["web-7d9c7b8b5-a1"].value, 3300);
    assert_eq!(m["web-7d9c7b8b5-a1"].window, Duration::from_secs(60));
    // "0.0005" is half a milli-unit: rounded up to 1.
    assert_eq!(m["web-7d9c7b8b5-b2"].value, 1);

    // The server now prefers v1beta2, but the cached v1beta1 is used until invalidated.
    fake.json("/apis", "apis-custom-v1beta2.json");
    let (m, _) = client
        .get_raw_metric(
            "http_requests_per_second",
            "default",
            &sel("app=web"),
            &Selector::everything(),
        )
        .await
        .unwrap();
    assert_eq!(m["web-7d9c7b8b5-a1"].value, 3300);
    client.available_apis().invalidate().await;
    let (m, _) = client
        .get_raw_metric(
            "http_requests_per_second",
            "default",
            &sel("app=web"),
            &Selector::everything(),
        )
        .await
        .unwrap();
    assert_eq!(m["web-7d9c7b8b5-a1"].value, 1500);
    let paths: Vec<String> = fake
        .seen()
        .iter()
        .map(|u| u.split('?').next().unwrap().to_string())
        .collect();
    assert_eq!(
        paths,
        vec![
            "/apis",
            POD_METRIC_V1,
            POD_METRIC_V1,
            "/apis",
            POD_METRIC_V2
        ]
    );
}

#[tokio::test]
async fn custom_metrics_errors() {
    let (fake, client) = start().await;
    fake.json("/apis", "apis-no-custom.json");
    let err = client
        .get_raw_metric(
            "http_requests_per_second",
            "default",
            &sel("app=web"),
            &Selector::everything(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "unable to fetch metrics from custom metrics API: no custom metrics API (custom.metrics.k8s.io) registered"
    );

    // Errors are not cached: the next call discovers again.
    fake.json("/apis", "apis-custom-v1beta2.json");
    fake.answer(
        POD_METRIC_V2,
        503,
        "text/plain; charset=utf-8",
        "service unavailable",
    );
    let err = client
        .get_raw_metric(
            "http_requests_per_second",
            "default",
            &sel("app=web"),
            &Selector::everything(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "unable to fetch metrics from custom metrics API: the server is currently unable to handle the request (get pods.custom.metrics.k8s.io *)"
    );

    fake.json(POD_METRIC_V2, "custom-empty.json");
    let err = client
        .get_raw_metric(
            "http_requests_per_second",
            "default",
            &sel("app=web"),
            &Selector::everything(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "no metrics returned from custom metrics API"
    );
}

fn deployment() -> CrossVersionObjectReference {
    CrossVersionObjectReference {
        api_version: Some("apps/v1".into()),
        kind: "Deployment".into(),
        name: "web".into(),
    }
}

const OBJECT_V2: &str =
    "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/deployments.apps/web/queue_depth";

#[tokio::test]
async fn custom_object_metric() {
    let (fake, client) = start().await;
    fake.json("/apis", "apis-custom-v1beta2.json");
    fake.json("/apis/apps/v1", "apps-v1-resources.json");
    fake.json(OBJECT_V2, "custom-v1beta2-object.json");

    let (v, t) = client
        .get_object_metric("queue_depth", "default", &deployment(), &sel("queue=jobs"))
        .await
        .unwrap();
    assert_eq!(v, 12_000_000);
    assert_eq!(t, ts("2024-05-01T10:00:24Z"));
    let (v, _) = client
        .get_object_metric(
            "queue_depth",
            "default",
            &deployment(),
            &Selector::everything(),
        )
        .await
        .unwrap();
    assert_eq!(v, 12_000_000);
    assert_eq!(
        fake.seen(),
        vec![
            // The custom metrics version, then the RESTMapper's discovery of `apps`.
            "/apis".to_string(),
            "/apis".to_string(),
            "/apis/apps/v1".to_string(),
            format!("{OBJECT_V2}?metricLabelSelector=queue%3Djobs"),
            OBJECT_V2.to_string(),
        ],
        "discovery and mapping are cached"
    );

    // The object is mapped by group and kind, in any served version: a describedObject
    // written with a version the server does not serve still maps to deployments.apps.
    let old_version = CrossVersionObjectReference {
        api_version: Some("apps/v1beta1".into()),
        ..deployment()
    };
    let (v, _) = client
        .get_object_metric(
            "queue_depth",
            "default",
            &old_version,
            &Selector::everything(),
        )
        .await
        .unwrap();
    assert_eq!(v, 12_000_000);

    fake.json(OBJECT_V2, "custom-v1beta2-two-objects.json");
    let err = client
        .get_object_metric(
            "queue_depth",
            "default",
            &deployment(),
            &Selector::everything(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "unable to fetch metrics from custom metrics API: the custom metrics API server returned 2 results when we asked for exactly one"
    );

    fake.json(OBJECT_V2, "custom-empty.json");
    let err = client
        .get_object_metric(
            "queue_depth",
            "default",
            &deployment(),
            &Selector::everything(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "unable to fetch metrics from custom metrics API: the custom metrics API server returned 0 results when we asked for exactly one"
    );

    fake.answer(OBJECT_V2, 404, "application/json", &data("status-404.json"));
    let err = client
        .get_object_metric(
            "queue_depth",
            "default",
            &deployment(),
            &Selector::everything(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "unable to fetch metrics from custom metrics API: the server could not find the metric queue_depth for deployments.apps web"
    );

    let widget = CrossVersionObjectReference {
        api_version: Some("apps/v1".into()),
        kind: "Widget".into(),
        name: "w".into(),
    };
    let err = client
        .get_object_metric("queue_depth", "default", &widget, &Selector::everything())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "unable to fetch metrics from custom metrics API: unable to map kind Widget.apps to resource: no matches for kind \"Widget\" in group \"apps\""
    );
}

#[tokio::test]
async fn custom_namespace_metric_ignores_object_name() {
    let (fake, client) = start().await;
    fake.json("/apis", "apis-custom-v1beta1.json");
    let path = "/apis/custom.metrics.k8s.io/v1beta1/namespaces/default/metrics/tenant_load";
    fake.json(path, "custom-v1beta1-namespace.json");
    let ns = CrossVersionObjectReference {
        api_version: Some("v1".into()),
        kind: "Namespace".into(),
        name: "some-other-namespace".into(),
    };
    let (v, t) = client
        .get_object_metric("tenant_load", "default", &ns, &Selector::everything())
        .await
        .unwrap();
    assert_eq!(v, 750);
    assert_eq!(t, ts("2024-05-01T10:00:25Z"));
    assert_eq!(fake.seen(), vec!["/apis".to_string(), path.to_string()]);
}

const EXTERNAL: &str =
    "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_messages_ready";

#[tokio::test]
async fn external_metric() {
    let (fake, client) = start().await;
    fake.json(EXTERNAL, "external.json");
    let (values, t) = client
        .get_external_metric(
            "queue_messages_ready",
            "default",
            &sel("queue in (worker_tasks,worker_tasks_low)"),
        )
        .await
        .unwrap();
    assert_eq!(values, vec![42_000, 1_500]);
    assert_eq!(t, ts("2024-05-01T10:00:26Z"));
    assert_eq!(
        fake.seen(),
        vec![format!(
            "{EXTERNAL}?labelSelector=queue+in+%28worker_tasks%2Cworker_tasks_low%29"
        )]
    );

    fake.json(EXTERNAL, "external-empty.json");
    let err = client
        .get_external_metric("queue_messages_ready", "default", &Selector::everything())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "no metrics returned from external metrics API"
    );

    fake.answer(EXTERNAL, 500, "text/plain", "adapter exploded");
    let err = client
        .get_external_metric("queue_messages_ready", "default", &Selector::everything())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "unable to fetch metrics from external metrics API: an error on the server (\"adapter exploded\") has prevented the request from succeeding (get queue_messages_ready.external.metrics.k8s.io)"
    );

    fake.answer(EXTERNAL, 404, "application/json", "{}");
    let err = client
        .get_external_metric("queue_messages_ready", "default", &Selector::everything())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "unable to fetch metrics from external metrics API: the server could not find the requested resource (get queue_messages_ready.external.metrics.k8s.io)"
    );
}
