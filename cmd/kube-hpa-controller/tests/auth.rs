//! Delegated auth against a loopback fake API answering TokenReview and
//! SubjectAccessReview: status codes and bodies as the apiserver's filters answer, the
//! requests' shape, always-allowed paths and groups, and the 10 s caches (paused time).

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use http::{HeaderMap, HeaderValue, Method, StatusCode};
use http_body_util::BodyExt;
use kube_hpa_controller::auth::{AlwaysAllowPaths, Authn, DelegatingAuth, UserInfo};
use kube_hpa_controller::client::{TokioClock, client_from_config};
use kube_hpa_controller::serving::{Readiness, SecureServer, ServingState, serving_cert};

fn bearer(t: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        http::header::AUTHORIZATION,
        HeaderValue::from_str(&format!("Bearer {t}")).unwrap(),
    );
    h
}

async fn auth_for(addr: std::net::SocketAddr) -> DelegatingAuth {
    let client =
        || client_from_config(common::config_for(addr), None, None, TokioClock::new()).unwrap();
    let paths: Vec<String> = ["/healthz", "/readyz", "/livez"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    DelegatingAuth::new(
        Some(client()),
        Some(client()),
        AlwaysAllowPaths::new(&paths).unwrap(),
    )
}

async fn body_json(resp: axum::response::Response) -> (StatusCode, serde_json::Value) {
    let status = resp.status();
    assert_eq!(
        resp.headers()[http::header::CONTENT_TYPE],
        "application/json"
    );
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap())
}

#[tokio::test]
async fn statuses_and_bodies_follow_the_apiserver_filters() {
    let (addr, seen) = common::fake_api().await;
    let auth = auth_for(addr).await;

    // A token the review rejects: 401 Unauthorized Status.
    let resp = auth
        .check(&Method::GET, "/metrics", &bearer("wrong"))
        .await
        .unwrap_err();
    let (code, v) = body_json(resp).await;
    assert_eq!(code, StatusCode::UNAUTHORIZED);
    assert_eq!(
        v,
        serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Unauthorized", "reason": "Unauthorized", "code": 401})
    );
    // Even an always-allowed path answers 401 to a bad token (authentication runs first).
    assert!(
        auth.check(&Method::GET, "/healthz", &bearer("wrong"))
            .await
            .is_err()
    );

    // Accepted token, allowed by the SAR.
    let user = auth
        .check(&Method::GET, "/metrics", &bearer("good"))
        .await
        .unwrap();
    assert_eq!(user.name, "alice");
    assert_eq!(user.groups, vec!["devs", "system:authenticated"]);
    {
        let s = seen.lock().unwrap();
        let tr = s.token_reviews.last().unwrap();
        assert_eq!(tr["apiVersion"], "authentication.k8s.io/v1");
        assert_eq!(tr["kind"], "TokenReview");
        assert_eq!(tr["spec"]["token"], "good");
        let sar = s.sars.last().unwrap();
        assert_eq!(sar["apiVersion"], "authorization.k8s.io/v1");
        assert_eq!(sar["kind"], "SubjectAccessReview");
        assert_eq!(sar["spec"]["user"], "alice");
        assert_eq!(sar["spec"]["uid"], "u-1");
        assert_eq!(
            sar["spec"]["groups"],
            serde_json::json!(["devs", "system:authenticated"])
        );
        assert_eq!(
            sar["spec"]["nonResourceAttributes"],
            serde_json::json!({"path": "/metrics", "verb": "get"})
        );
    }

    // Denied with a reason: 403 Forbidden Status quoting it.
    let resp = auth
        .check(&Method::GET, "/metrics", &bearer("bob"))
        .await
        .unwrap_err();
    let (code, v) = body_json(resp).await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    assert_eq!(
        v,
        serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "forbidden: User \"bob\" cannot get path \"/metrics\": bob is not welcome",
            "reason": "Forbidden", "details": {}, "code": 403})
    );

    // No token: system:anonymous, asked about and forbidden.
    let resp = auth
        .check(&Method::GET, "/metrics", &HeaderMap::new())
        .await
        .unwrap_err();
    let (code, v) = body_json(resp).await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    assert_eq!(
        v["message"],
        "forbidden: User \"system:anonymous\" cannot get path \"/metrics\""
    );
    assert_eq!(
        seen.lock().unwrap().sars.last().unwrap()["spec"]["groups"],
        serde_json::json!(["system:unauthenticated"])
    );

    // Always-allowed paths and system:masters need no SAR.
    let sars = seen.lock().unwrap().sars.len();
    assert!(
        auth.check(&Method::GET, "/healthz", &HeaderMap::new())
            .await
            .is_ok()
    );
    assert!(
        auth.check(&Method::GET, "/metrics", &bearer("admin"))
            .await
            .is_ok()
    );
    assert_eq!(seen.lock().unwrap().sars.len(), sars);
}

#[tokio::test(start_paused = true)]
async fn reviews_are_cached_for_ten_seconds() {
    let (addr, seen) = common::fake_api().await;
    let auth = auth_for(addr).await;
    let counts = || {
        let s = seen.lock().unwrap();
        (s.token_reviews.len(), s.sars.len())
    };
    assert!(
        auth.check(&Method::GET, "/metrics", &bearer("good"))
            .await
            .is_ok()
    );
    assert!(
        auth.check(&Method::GET, "/metrics", &bearer("wrong"))
            .await
            .is_err()
    );
    assert!(
        auth.check(&Method::GET, "/metrics", &bearer("bob"))
            .await
            .is_err()
    );
    assert_eq!(counts(), (3, 2));
    // Within 10s: all answers come from the caches, rejections and denials included.
    tokio::time::advance(Duration::from_secs(9)).await;
    assert!(
        auth.check(&Method::GET, "/metrics", &bearer("good"))
            .await
            .is_ok()
    );
    assert!(
        auth.check(&Method::GET, "/metrics", &bearer("wrong"))
            .await
            .is_err()
    );
    assert!(
        auth.check(&Method::GET, "/metrics", &bearer("bob"))
            .await
            .is_err()
    );
    assert_eq!(counts(), (3, 2));
    // After 10s: asked again.
    tokio::time::advance(Duration::from_secs(2)).await;
    assert!(
        auth.check(&Method::GET, "/metrics", &bearer("good"))
            .await
            .is_ok()
    );
    assert_eq!(counts(), (4, 3));
    // A different path is a different decision.
    assert!(
        auth.check(&Method::GET, "/metrics/slis", &bearer("good"))
            .await
            .is_err()
    );
    assert_eq!(counts(), (4, 4));
}

#[tokio::test]
async fn review_errors_are_401_and_500() {
    // An API that is not there: the token review fails (401), and so would the SAR (500).
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let mut config = common::config_for(dead);
    config.default_retry = false;
    let client = client_from_config(config, None, None, TokioClock::new()).unwrap();
    let auth = DelegatingAuth::new(
        Some(client.clone()),
        Some(client),
        AlwaysAllowPaths::default(),
    );
    assert_eq!(
        auth.authenticate(&bearer("good")).await,
        Authn::Unauthorized
    );
    let resp = auth
        .check(&Method::GET, "/metrics", &HeaderMap::new())
        .await
        .unwrap_err();
    assert_eq!(resp.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let _ = UserInfo::anonymous();
}

#[tokio::test]
async fn metrics_over_https_with_a_reviewed_token() {
    let (addr, _) = common::fake_api().await;
    let auth = Arc::new(auth_for(addr).await);
    let cfg = kube_hpa_controller::serving::ServingConfig {
        bind_address: "127.0.0.1".parse().unwrap(),
        secure_port: 0,
        cert_dir: String::new(),
        tls_cert_file: String::new(),
        tls_private_key_file: String::new(),
    };
    let server =
        SecureServer::bind_addr("127.0.0.1:0".parse().unwrap(), serving_cert(&cfg).unwrap())
            .await
            .unwrap();
    let (saddr, cert) = (
        server.local_addr().unwrap(),
        server.chain().last().unwrap().clone(),
    );
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let state = ServingState::new(prometheus::Registry::new(), Readiness::new(), auth);
    let task = tokio::spawn(server.run(state, async move {
        let _ = rx.await;
    }));
    let (code, _, body) = common::https_get(saddr, &cert, "/metrics", Some("good")).await;
    assert_eq!(code, StatusCode::OK);
    assert!(body.contains("process_start_time_seconds"));
    let (code, _, _) = common::https_get(saddr, &cert, "/metrics", Some("wrong")).await;
    assert_eq!(code, StatusCode::UNAUTHORIZED);
    let (code, _, _) = common::https_get(saddr, &cert, "/metrics", None).await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    let (code, _, _) = common::https_get(saddr, &cert, "/livez", None).await;
    assert_eq!(code, StatusCode::OK);
    tx.send(()).unwrap();
    task.await.unwrap();
}

#[tokio::test]
async fn a_bad_review_kubeconfig_is_refused_in_upstream_words() {
    let parsed = hpa_config::Options::parse_args([
        "kube-hpa-controller",
        "--authorization-kubeconfig=/nonexistent/authz",
    ])
    .unwrap();
    let err = DelegatingAuth::from_flags(&parsed.options.auth)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(
            "failed to get delegated authorization kubeconfig: failed to read kubeconfig"
        ),
        "{err}"
    );
}

/// `/debug/hpa/...` and `/debug/shadow` are authorized as `/metrics` is: a SubjectAccessReview
/// of `get` on the non-resource path, and `--authorization-always-allow-paths` lets them
/// through in the same way.
#[tokio::test]
async fn debug_traces_are_authorized_like_metrics() {
    let (addr, seen) = common::fake_api().await;
    let serve = |auth: DelegatingAuth| async move {
        let cfg = kube_hpa_controller::serving::ServingConfig {
            bind_address: "127.0.0.1".parse().unwrap(),
            secure_port: 0,
            cert_dir: String::new(),
            tls_cert_file: String::new(),
            tls_private_key_file: String::new(),
        };
        let server =
            SecureServer::bind_addr("127.0.0.1:0".parse().unwrap(), serving_cert(&cfg).unwrap())
                .await
                .unwrap();
        let out = (
            server.local_addr().unwrap(),
            server.chain().last().unwrap().clone(),
        );
        let state = ServingState::new(
            prometheus::Registry::new(),
            Readiness::new(),
            Arc::new(auth),
        )
        .with_debug(kube_hpa_controller::debug::DebugStores::new());
        tokio::spawn(server.run(state, std::future::pending()));
        out
    };
    let (saddr, cert) = serve(auth_for(addr).await).await;
    // alice may get /metrics only: the trace path is reviewed under its own name and denied.
    let (code, _, _) =
        common::https_get(saddr, &cert, "/debug/hpa/default/web", Some("good")).await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    {
        let s = seen.lock().unwrap();
        let attrs = &s.sars.last().unwrap()["spec"]["nonResourceAttributes"];
        assert_eq!(attrs["path"], "/debug/hpa/default/web");
        assert_eq!(attrs["verb"], "get");
    }
    let (code, _, _) = common::https_get(saddr, &cert, "/debug/shadow", None).await;
    assert_eq!(code, StatusCode::FORBIDDEN);

    // Always allowed: served without a review (no decision yet: 404 with a JSON reason).
    let client =
        || client_from_config(common::config_for(addr), None, None, TokioClock::new()).unwrap();
    let paths: Vec<String> = ["/debug/*"].iter().map(|s| s.to_string()).collect();
    let open = DelegatingAuth::new(
        Some(client()),
        Some(client()),
        AlwaysAllowPaths::new(&paths).unwrap(),
    );
    let (saddr, cert) = serve(open).await;
    let sars = seen.lock().unwrap().sars.len();
    let (code, _, body) = common::https_get(saddr, &cert, "/debug/hpa/default/web", None).await;
    assert_eq!(code, StatusCode::NOT_FOUND, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["version"], "hpa.trace/v1");
    let (code, _, body) = common::https_get(saddr, &cert, "/debug/hpa", None).await;
    assert_eq!(code, StatusCode::OK);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["items"], serde_json::json!([]));
    let (code, _, body) = common::https_get(saddr, &cert, "/debug/shadow", None).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&body).unwrap()["shadow"],
        false
    );
    assert_eq!(seen.lock().unwrap().sars.len(), sars);
}
