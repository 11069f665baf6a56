//! Upstream's log levels on the steady-state path: at `-v=2` (the common production setting)
//! a reconcile that changes nothing writes no line. Upstream logs "Proposing desired
//! replicas" and "Decided not to scale" at V(4) and the event broadcaster's "Event occurred"
//! at V(3); before round 3 they showed at `-v=2`, about 1,300 lines a second at 10,000 HPAs.
//! (Its own test binary: the verbosity is process-wide.)

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use common::Capture;
use std::sync::Arc;
use std::time::Duration;

use hpa_fixtures::scenario;
use hpa_fixtures::server::FixtureServer;
use hpa_fixtures::store::{ObjectKey, Store};
use hpa_horizontal::{ControllerConfig, ControllerParts, HorizontalController};
use hpa_metrics::{AvailableApis, RestMetricsClient};
use kube_hpa_controller::logging::{KlogFormat, filter_directives, set_verbosity};

const EXAMPLE: &str = "../../test-fixtures/scenarios/resource/cpu-utilization-scale-up.yaml";

fn hpa_version(store: &Store) -> String {
    store
        .get(&ObjectKey::new(
            "autoscaling",
            "horizontalpodautoscalers",
            "default",
            "web",
        ))
        .unwrap()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn until(mut f: impl FnMut() -> bool) {
    tokio::time::timeout(Duration::from_secs(10), async {
        while !f() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("condition not reached");
}

/// A subscriber writing the binary's JSON lines, filtered as at `-v=v`, into a capture.
fn capturing(v: i32) -> (Capture, impl tracing::Subscriber + Send + Sync) {
    let capture = Capture::default();
    let writer = capture.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter_directives(v)))
        .with_ansi(false)
        .event_format(KlogFormat::Json)
        .with_writer(move || writer.clone())
        .finish();
    (capture, subscriber)
}

/// The fixture server on `store` and the controller against it (the scenario's flags), its
/// caches synced.
async fn start(s: &scenario::Scenario, store: &Store) -> (FixtureServer, HorizontalController) {
    let server = FixtureServer::start_local(store.clone()).await.unwrap();
    let client = server.client().unwrap();
    let options = hpa_config::Options::from_flag_map(&s.flags)
        .unwrap()
        .options;
    let apis = AvailableApis::new();
    let c = HorizontalController::new(ControllerParts {
        metrics_client: Arc::new(RestMetricsClient::with_available_apis(
            client.clone(),
            apis.clone(),
        )),
        client,
        available_apis: Some(apis),
        scale_client: None,
        config: ControllerConfig::from_options(&options),
        clock: Arc::new(store.virtual_clock().unwrap().clone()),
        registry: prometheus::Registry::new(),
        workqueue_metrics: None,
        log_emissions: false,
    })
    .unwrap();
    c.start_caches();
    c.wait_for_cache_sync().await.unwrap();
    (server, c)
}

#[tokio::test(flavor = "current_thread")]
async fn a_steady_state_reconcile_writes_no_line_at_v2() {
    set_verbosity(2);
    let (capture, subscriber) = capturing(2);
    // The current-thread runtime polls every task of the controller on this thread.
    let _guard = tracing::subscriber::set_default(subscriber);

    let s = scenario::load_file(std::path::Path::new(EXAMPLE)).unwrap();
    let store = Store::from_scenario(&s).unwrap();
    let (server, c) = start(&s, &store).await;

    // The first reconcile scales 2 -> 4: "Successfully rescaled" (V(0)) and the status write
    // (V(2)) are upstream's lines for it.
    c.reconcile_key("default/web").await.unwrap();
    let want = hpa_version(&store);
    until(|| c.hpa_versions().get("default/web") == Some(&want)).await;
    // The target now has 4 replicas and the same metrics: the next reconciles change nothing.
    let mut d = store
        .get(&ObjectKey::new("apps", "deployments", "default", "web"))
        .unwrap();
    d["status"]["replicas"] = serde_json::json!(4);
    store.put_object(d).unwrap();
    c.reconcile_key("default/web").await.unwrap();
    let want = hpa_version(&store);
    until(|| c.hpa_versions().get("default/web") == Some(&want)).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = capture.lines();
    assert!(
        before.iter().any(|l| l.contains("Successfully rescaled")),
        "{before:#?}"
    );
    assert!(
        !before
            .iter()
            .any(|l| l.contains("Proposing desired replicas") || l.contains("Event occurred")),
        "V(4) and V(3) lines at -v=2: {before:#?}"
    );

    for _ in 0..5 {
        c.reconcile_key("default/web").await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after = capture.lines();
    assert_eq!(
        after[before.len()..].to_vec(),
        Vec::<String>::new(),
        "steady-state reconciles wrote lines at -v=2"
    );
    c.stop();
    server.stop().await.unwrap();
}

/// A metrics API answering 503 writes upstream's lines at `-v=2` and not kube-client's own
/// `failed with status 503 Service Unavailable` error per request, which client-go has only
/// from V(6) (seen beside KCM 1.36.3 with an injected fault). At `-v=6` it is there: the
/// filter names the target kube-client really logs under.
#[tokio::test(flavor = "current_thread")]
async fn a_metrics_api_answering_503_writes_no_client_library_error_below_v6() {
    let s = scenario::load_file(std::path::Path::new(EXAMPLE)).unwrap();
    let store = Store::from_scenario(&s).unwrap();
    store.arm_faults(vec![hpa_fixtures::ArmedFault {
        verb: hpa_fixtures::RequestVerb::List,
        path: regex::Regex::new("^/apis/metrics.k8s.io/").unwrap(),
        status: 503,
        remaining: None,
        message: None,
    }]);
    let (server, c) = start(&s, &store).await;

    // The process-wide -v stays 2 (the other test's); the filter alone differs.
    set_verbosity(2);
    for (v, shows) in [(2, false), (6, true)] {
        let (capture, subscriber) = capturing(v);
        let guard = tracing::subscriber::set_default(subscriber);
        let _ = c.reconcile_key("default/web").await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        drop(guard);
        let lines = capture.lines();
        assert_eq!(
            lines.iter().any(|l| l.contains("failed with status 503")),
            shows,
            "-v={v}: {lines:#?}"
        );
        let status = store.get(&ObjectKey::new(
            "autoscaling",
            "horizontalpodautoscalers",
            "default",
            "web",
        ));
        let conditions = status.unwrap()["status"]["conditions"].to_string();
        assert!(
            conditions.contains("FailedGetResourceMetric"),
            "the reconcile read the metrics API and failed: {conditions}"
        );
    }
    c.stop();
    server.stop().await.unwrap();
}
