//! The fixture API server against the real kube-apiserver: the same scenario is loaded into a
//! real control plane (`hpactl cluster`, upstream's etcd and kube-apiserver of each release
//! in `KUBE_VERSIONS`, default 1.37.2) and into a fixture server, the same requests are sent
//! to both, and their answers are compared after normalization. The requests are those this
//! controller (`crates/horizontal`, `crates/metrics`, the leader election of
//! `cmd/kube-hpa-controller`) and `kubectl` make. Every difference found is either fixed in
//! the fixture server or listed, with its reason, in `docs/real-cluster-differences.md`;
//! the documented ones are normalized away here by name (`Documented`), so a new difference
//! fails the test.
//!
//! A second test loads every scenario under `test-fixtures/scenarios/` into a real cluster,
//! object by object, and checks that the objects the real API server refuses are exactly the
//! documented ones (scenario objects are stored "as given" by the fixture server by design).
//!
//! Ignored by a plain `cargo test`: `hack/test.sh` runs these with `--ignored` once
//! `hack/kube.sh build` has built the binaries.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../../../hack/tests/real_cluster_common.rs"]
mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::{cluster_up, releases, repo, runtime};
use hpa_cluster::apply::Applier;
use hpa_cluster::{Cluster, KubeRelease};
use hpa_fixtures::{FixtureServer, Scenario, Store};
use serde_json::{Value, json};

const IGNORED: &str = "real cluster: run by hack/test.sh after hack/kube.sh build";

// ---------------------------------------------------------------------------------------------
// Sending the same request to both servers
// ---------------------------------------------------------------------------------------------

/// One answer: the HTTP status and the body (JSON, or the text as a JSON string).
#[derive(Debug, Clone)]
struct Answer {
    status: u16,
    body: Value,
}

/// One request.
#[derive(Debug, Clone)]
struct Req {
    method: http::Method,
    path: String,
    body: Option<Value>,
    content_type: &'static str,
    accept: &'static str,
}

fn get(path: impl Into<String>) -> Req {
    Req {
        method: http::Method::GET,
        path: path.into(),
        body: None,
        content_type: "application/json",
        accept: "application/json",
    }
}

fn put(path: impl Into<String>, body: Value) -> Req {
    Req {
        method: http::Method::PUT,
        body: Some(body),
        ..get(path)
    }
}

fn post(path: impl Into<String>, body: Value) -> Req {
    Req {
        method: http::Method::POST,
        body: Some(body),
        ..get(path)
    }
}

fn patch(path: impl Into<String>, content_type: &'static str, body: Value) -> Req {
    Req {
        method: http::Method::PATCH,
        body: Some(body),
        content_type,
        ..get(path)
    }
}

async fn send(client: &kube::Client, req: &Req) -> Answer {
    let body = req
        .body
        .as_ref()
        .map(|b| b.to_string().into_bytes())
        .unwrap_or_default();
    let request = http::Request::builder()
        .method(req.method.clone())
        .uri(&req.path)
        .header(http::header::ACCEPT, req.accept)
        .header(http::header::CONTENT_TYPE, req.content_type)
        .body(kube::client::Body::from(body))
        .unwrap();
    let response = tokio::time::timeout(Duration::from_secs(60), client.send(request))
        .await
        .unwrap_or_else(|_| panic!("{} {}: no answer in 60 s", req.method, req.path))
        .unwrap_or_else(|e| panic!("{} {}: {e}", req.method, req.path));
    let status = response.status().as_u16();
    let bytes = response.into_body().collect_bytes().await.unwrap();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Answer { status, body }
}

/// A watch read to its end (`timeoutSeconds` in the path bounds it): the HTTP status and the
/// events, in order.
async fn send_watch(client: &kube::Client, path: &str) -> (u16, Vec<Value>) {
    let answer = send(client, &get(path)).await;
    let events = match &answer.body {
        Value::String(text) => text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{path}: {e}: {l}")))
            .collect(),
        // One event only: it parsed as a single JSON document.
        one => vec![one.clone()],
    };
    (answer.status, events)
}

// ---------------------------------------------------------------------------------------------
// Normalization
// ---------------------------------------------------------------------------------------------

/// Server-set metadata that differs between any two servers (and between two runs of the same
/// server) and that no client compares: identity, versions, creation time, field managers.
/// `generation` is kept (the controller copies it into `status.observedGeneration`).
const SERVER_METADATA: &[&str] = &[
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "managedFields",
    "selfLink",
];

/// Is `s` an RFC 3339 time? Times are compared by their form only (whole seconds, or the
/// number of fraction digits): the real cluster's objects were shifted to its wall clock by
/// `Cluster::load`, the fixture's sit on the scenario's virtual clock.
fn time_form(s: &str) -> Option<String> {
    let b = s.as_bytes();
    if s.len() >= 20
        && b.get(4) == Some(&b'-')
        && b.get(10) == Some(&b'T')
        && s.ends_with('Z')
        && s.parse::<jiff::Timestamp>().is_ok()
    {
        let digits = s
            .split_once('.')
            .map(|(_, f)| f.trim_end_matches('Z').len())
            .unwrap_or(0);
        Some(format!("<time .{digits}>"))
    } else {
        None
    }
}

/// Replaces every run of digits with `N` (resourceVersions inside messages).
fn digits_to_n(s: &str) -> String {
    let mut out = String::new();
    let mut in_digits = false;
    for c in s.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push('N');
            }
            in_digits = true;
        } else {
            in_digits = false;
            out.push(c);
        }
    }
    out
}

/// The normalization every answer gets.
fn normalize(v: &mut Value) {
    match v {
        Value::String(s) => {
            if let Some(form) = time_form(s) {
                *s = form;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(normalize),
        Value::Object(map) => {
            if let Some(Value::Object(md)) = map.get_mut("metadata") {
                for f in SERVER_METADATA {
                    md.remove(*f);
                }
                // List metadata: a continue token is opaque, only its presence matters.
                if let Some(c) = md.get_mut("continue") {
                    *c = json!("<token>");
                }
            }
            if map.get("kind") == Some(&json!("Status")) {
                if let Some(Value::Object(d)) = map.get_mut("details") {
                    d.remove("uid");
                }
                // "too old resource version: 12 (345)", "Too large resource version: ..."
                if let Some(Value::String(m)) = map.get_mut("message")
                    && m.contains("resource version")
                {
                    *m = digits_to_n(m);
                }
            }
            for (_, item) in map.iter_mut() {
                normalize(item);
            }
        }
        _ => {}
    }
}

/// Removes the JSON pointer `path` (`*` matches every array item or map entry).
fn strip(v: &mut Value, path: &str) {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    strip_parts(v, &parts);
}

fn strip_parts(v: &mut Value, parts: &[&str]) {
    let Some((first, rest)) = parts.split_first() else {
        return;
    };
    if rest.is_empty() {
        match v {
            Value::Object(m) if *first == "*" => m.clear(),
            Value::Object(m) => {
                m.remove(*first);
            }
            Value::Array(a) if *first == "*" => a.clear(),
            _ => {}
        }
        return;
    }
    match v {
        Value::Object(m) if *first == "*" => m.values_mut().for_each(|i| strip_parts(i, rest)),
        Value::Object(m) => {
            if let Some(i) = m.get_mut(*first) {
                strip_parts(i, rest);
            }
        }
        Value::Array(a) if *first == "*" => a.iter_mut().for_each(|i| strip_parts(i, rest)),
        Value::Array(a) => {
            if let Some(i) = first.parse::<usize>().ok().and_then(|n| a.get_mut(n)) {
                strip_parts(i, rest);
            }
        }
        _ => {}
    }
}

/// Fields the real API server sets by defaulting or admission and that nothing reads: not the
/// controller (its projections of pods and scale targets, `crates/horizontal/src/
/// {pod_projection,scale_projection}.rs`, and the HPA), not the metrics clients, not
/// `kubectl get`/`describe` of these kinds. The fixture server stores objects as given and
/// does not invent them (`docs/real-cluster-differences.md`, "Defaulting of other kinds").
/// Paths are relative to an object.
const DEFAULTED_UNREAD: &[&str] = &[
    // Pod spec defaults (`pkg/apis/core/v1/defaults.go`) and the ServiceAccount and
    // DefaultTolerationSeconds admission plugins.
    "/spec/dnsPolicy",
    "/spec/enableServiceLinks",
    "/spec/preemptionPolicy",
    "/spec/priority",
    "/spec/restartPolicy",
    "/spec/schedulerName",
    "/spec/securityContext",
    "/spec/serviceAccount",
    "/spec/serviceAccountName",
    "/spec/terminationGracePeriodSeconds",
    "/spec/tolerations",
    "/spec/volumes",
    "/spec/containers/*/imagePullPolicy",
    "/spec/containers/*/terminationMessagePath",
    "/spec/containers/*/terminationMessagePolicy",
    "/spec/containers/*/volumeMounts",
    "/status/qosClass",
    // The same defaults inside workload templates.
    "/spec/template/metadata/creationTimestamp",
    "/spec/template/spec/dnsPolicy",
    "/spec/template/spec/restartPolicy",
    "/spec/template/spec/schedulerName",
    "/spec/template/spec/securityContext",
    "/spec/template/spec/terminationGracePeriodSeconds",
    "/spec/template/spec/containers/*/imagePullPolicy",
    "/spec/template/spec/containers/*/terminationMessagePath",
    "/spec/template/spec/containers/*/terminationMessagePolicy",
    // Workload spec defaults (`pkg/apis/apps/v1/defaults.go`).
    "/spec/strategy",
    "/spec/revisionHistoryLimit",
    "/spec/progressDeadlineSeconds",
    "/spec/podManagementPolicy",
    "/spec/updateStrategy",
    "/spec/persistentVolumeClaimRetentionPolicy",
    "/spec/minReadySeconds",
    // The ReplicationController's `spec.template.metadata.labels` copy to `metadata.labels`
    // is read by nobody here (the selector is what counts).
    "/metadata/labels",
];

/// The normalization of one object answer (`Answer::body` of a GET/PUT/POST of a stored
/// object, or of a list: applied to each item).
fn normalize_object(v: &mut Value) {
    normalize(v);
    // Items of a typed list carry no kind: the list's kind names it.
    let list_kind = v["kind"]
        .as_str()
        .unwrap_or("")
        .trim_end_matches("List")
        .to_string();
    if let Some(items) = v.get_mut("items").and_then(Value::as_array_mut) {
        items
            .iter_mut()
            .for_each(|i| strip_defaulted(i, &list_kind));
    } else if v.get("kind") != Some(&json!("Status")) {
        let kind = v["kind"].as_str().unwrap_or("").to_string();
        strip_defaulted(v, &kind);
    }
}

/// Go's `encoding/json` writes some unset fields of these kinds as zero values (a struct as
/// `{}`, a `metav1.Time` as `null`, an `int32` as `0`); the fixture stores the objects as given
/// and leaves them out. Readers treat both alike (documented). Removed where zero only, so
/// that a set value is still compared.
const ZERO_WHEN_UNSET: &[&str] = &[
    "/spec/containers/*/resources",
    "/spec/template/spec/containers/*/resources",
    "/status/conditions/*/lastProbeTime",
    "/status/availableReplicas",
];

fn strip_if_zero(v: &mut Value, path: &str) {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    strip_zero_parts(v, &parts);
}

fn strip_zero_parts(v: &mut Value, parts: &[&str]) {
    let Some((first, rest)) = parts.split_first() else {
        return;
    };
    let zero = |x: &Value| x.is_null() || *x == json!({}) || *x == json!(0);
    match v {
        Value::Object(m) if rest.is_empty() && m.get(*first).is_some_and(zero) => {
            m.remove(*first);
        }
        Value::Object(m) if rest.is_empty() => {}
        Value::Object(m) => {
            if let Some(i) = m.get_mut(*first) {
                strip_zero_parts(i, rest);
            }
        }
        Value::Array(a) if *first == "*" => a.iter_mut().for_each(|i| strip_zero_parts(i, rest)),
        _ => {}
    }
}

fn strip_defaulted(v: &mut Value, kind: &str) {
    for p in ZERO_WHEN_UNSET {
        strip_if_zero(v, p);
    }
    let kind = kind.to_string();
    if matches!(
        kind.as_str(),
        "Pod" | "Deployment" | "StatefulSet" | "ReplicaSet" | "ReplicationController"
    ) {
        for p in DEFAULTED_UNREAD {
            // Labels are compared for all kinds except the ReplicationController.
            if *p == "/metadata/labels" && kind != "ReplicationController" {
                continue;
            }
            strip(v, p);
        }
    }
}

/// Every difference between two normalized values, as `path: real ≠ fixture` lines.
fn diff(path: &str, real: &Value, fixture: &Value, out: &mut Vec<String>) {
    match (real, fixture) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                let p = format!("{path}/{k}");
                match (a.get(k), b.get(k)) {
                    (Some(x), Some(y)) => diff(&p, x, y, out),
                    (Some(x), None) => out.push(format!("{p}: real {x}, fixture absent")),
                    (None, Some(y)) => out.push(format!("{p}: real absent, fixture {y}")),
                    (None, None) => {}
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                diff(&format!("{path}/{i}"), x, y, out);
            }
        }
        _ if real != fixture => out.push(format!("{path}: real {real}, fixture {fixture}")),
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------
// The comparison session
// ---------------------------------------------------------------------------------------------

/// Both servers, and the differences found so far.
struct Sides {
    real: kube::Client,
    fixture: kube::Client,
    findings: Vec<String>,
    compared: usize,
    documented: usize,
}

impl Sides {
    /// Sends `req` to both and compares the answers after `norm`.
    async fn compare_with(
        &mut self,
        case: &str,
        req: &Req,
        norm: &dyn Fn(&mut Value),
    ) -> (Answer, Answer) {
        let real = send(&self.real, req).await;
        let fixture = send(&self.fixture, req).await;
        self.check(case, req, &real, &fixture, norm);
        (real, fixture)
    }

    async fn compare(&mut self, case: &str, req: &Req) -> (Answer, Answer) {
        self.compare_with(case, req, &normalize_object).await
    }

    /// Sends `real_req` to the real server and `fixture_req` to the fixture (the same request
    /// but for what must differ, such as the resourceVersion each server gave), and compares.
    async fn compare_pair(
        &mut self,
        case: &str,
        real_req: &Req,
        fixture_req: &Req,
    ) -> (Answer, Answer) {
        let real = send(&self.real, real_req).await;
        let fixture = send(&self.fixture, fixture_req).await;
        self.check(case, real_req, &real, &fixture, &normalize_object);
        (real, fixture)
    }

    fn check(
        &mut self,
        case: &str,
        req: &Req,
        real: &Answer,
        fixture: &Answer,
        norm: &dyn Fn(&mut Value),
    ) {
        self.compared += 1;
        let (mut r, mut f) = (real.body.clone(), fixture.body.clone());
        norm(&mut r);
        norm(&mut f);
        let mut out = Vec::new();
        if real.status != fixture.status {
            out.push(format!(
                "HTTP status: real {}, fixture {}",
                real.status, fixture.status
            ));
        }
        diff("", &r, &f, &mut out);
        if !out.is_empty() {
            self.findings.push(format!(
                "{case} ({} {}):\n    {}\n    real body:    {}\n    fixture body: {}",
                req.method,
                req.path,
                out.join("\n    "),
                truncate(&r),
                truncate(&f)
            ));
        }
    }

    /// A comparison whose difference is documented (`docs/real-cluster-differences.md`,
    /// row `doc`): it must still differ; if the two agree now, the documentation is stale.
    async fn documented(&mut self, case: &str, doc: &str, req: &Req) {
        let real = send(&self.real, req).await;
        let fixture = send(&self.fixture, req).await;
        self.documented_pair(case, doc, req, &real, &fixture);
    }

    fn documented_pair(
        &mut self,
        case: &str,
        doc: &str,
        req: &Req,
        real: &Answer,
        fixture: &Answer,
    ) {
        self.compared += 1;
        let before = self.findings.len();
        self.check(case, req, real, fixture, &normalize_object);
        if self.findings.len() == before {
            self.findings.push(format!(
                "{case}: documented as \"{doc}\" but now answered alike; update \
                 docs/real-cluster-differences.md and this test"
            ));
        } else {
            self.findings.truncate(before);
            self.documented += 1;
        }
    }
}

fn truncate(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 100_000 {
        format!("{}…", &s[..100_000])
    } else {
        s
    }
}

// ---------------------------------------------------------------------------------------------
// The scenario both servers hold
// ---------------------------------------------------------------------------------------------

const SCENARIO: &str = r#"
name: differential
serverVersion: "1.37"
objects:
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: web, labels: {app: web}}
  spec:
    replicas: 2
    selector: {matchLabels: {app: web}}
    template:
      metadata: {labels: {app: web}}
      spec: {containers: [{name: app, image: app, resources: {requests: {cpu: 100m}}}]}
  status: {replicas: 2, readyReplicas: 2, availableReplicas: 2, updatedReplicas: 2, observedGeneration: 1}
- apiVersion: apps/v1
  kind: StatefulSet
  metadata: {name: db}
  spec:
    replicas: 1
    serviceName: db
    selector: {matchLabels: {app: db}}
    template:
      metadata: {labels: {app: db}}
      spec: {containers: [{name: db, image: db}]}
  status: {replicas: 1, readyReplicas: 1}
- apiVersion: apps/v1
  kind: ReplicaSet
  metadata: {name: rs}
  spec:
    replicas: 3
    selector: {matchExpressions: [{key: app, operator: In, values: [rs]}]}
    template:
      metadata: {labels: {app: rs}}
      spec: {containers: [{name: app, image: app}]}
  status: {replicas: 3}
- apiVersion: v1
  kind: ReplicationController
  metadata: {name: rc}
  spec:
    replicas: 1
    selector: {app: rc}
    template:
      metadata: {labels: {app: rc}}
      spec: {containers: [{name: app, image: app}]}
  status: {replicas: 1}
- apiVersion: apiextensions.k8s.io/v1
  kind: CustomResourceDefinition
  metadata: {name: widgets.example.com}
  spec:
    group: example.com
    scope: Namespaced
    names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
    versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
      subresources:
        status: {}
        scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas, labelSelectorPath: .status.selector}
- apiVersion: example.com/v1
  kind: Widget
  metadata: {name: w}
  spec: {replicas: 2}
  status: {replicas: 2, selector: app=widget}
- apiVersion: v1
  kind: Pod
  metadata: {name: web-1, labels: {app: web}}
  spec: {containers: [{name: app, image: app, resources: {requests: {cpu: 100m}}}]}
  status:
    phase: Running
    startTime: '2024-12-31T23:00:00Z'
    conditions:
    - {type: Ready, status: 'True', lastTransitionTime: '2024-12-31T23:00:30Z'}
- apiVersion: v1
  kind: Pod
  metadata: {name: web-2, labels: {app: web}}
  spec: {containers: [{name: app, image: app, resources: {requests: {cpu: 100m}}}]}
  status:
    phase: Running
    startTime: '2024-12-31T23:00:00Z'
    conditions:
    - {type: Ready, status: 'True', lastTransitionTime: '2024-12-31T23:00:30Z'}
- apiVersion: v1
  kind: Pod
  metadata: {name: db-0, labels: {app: db}}
  spec: {containers: [{name: db, image: db}]}
  status: {phase: Pending}
- apiVersion: autoscaling/v2
  kind: HorizontalPodAutoscaler
  metadata: {name: web}
  spec:
    scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
    minReplicas: 1
    maxReplicas: 10
    metrics:
    - type: Resource
      resource: {name: cpu, target: {type: Utilization, averageUtilization: 50}}
    behavior:
      scaleDown:
        policies: [{type: Pods, value: 1, periodSeconds: 60}]
- apiVersion: autoscaling/v2
  kind: HorizontalPodAutoscaler
  metadata: {name: db}
  spec:
    scaleTargetRef: {apiVersion: apps/v1, kind: StatefulSet, name: db}
    maxReplicas: 5
    metrics:
    - type: Pods
      pods:
        metric: {name: packets-per-second}
        target: {type: AverageValue, averageValue: "1k"}
    - type: Object
      object:
        describedObject: {apiVersion: apps/v1, kind: Deployment, name: web}
        metric: {name: requests-per-second}
        target: {type: Value, value: "10"}
    - type: External
      external:
        metric: {name: queue_length, selector: {matchLabels: {queue: jobs}}}
        target: {type: AverageValue, averageValue: "30"}
- apiVersion: autoscaling/v2
  kind: HorizontalPodAutoscaler
  metadata: {name: w}
  spec:
    scaleTargetRef: {apiVersion: example.com/v1, kind: Widget, name: w}
    minReplicas: 2
    maxReplicas: 4
- apiVersion: metrics.k8s.io/v1beta1
  kind: PodMetrics
  metadata: {name: web-1, labels: {app: web}}
  timestamp: '2024-12-31T23:59:45Z'
  window: 30s
  containers: [{name: app, usage: {cpu: 150m, memory: 10Mi}}]
- apiVersion: metrics.k8s.io/v1beta1
  kind: PodMetrics
  metadata: {name: web-2, labels: {app: web}}
  timestamp: '2024-12-31T23:59:45Z'
  window: 30s
  containers: [{name: app, usage: {cpu: 50m, memory: 10Mi}}]
- apiVersion: custom.metrics.k8s.io/v1beta2
  kind: MetricValue
  describedObject: {apiVersion: v1, kind: Pod, name: db-0, namespace: default}
  metric: {name: packets-per-second}
  timestamp: '2024-12-31T23:59:45Z'
  value: "1500"
- apiVersion: custom.metrics.k8s.io/v1beta2
  kind: MetricValue
  describedObject: {apiVersion: apps/v1, kind: Deployment, name: web, namespace: default}
  metric: {name: requests-per-second}
  timestamp: '2024-12-31T23:59:45Z'
  value: "25"
- apiVersion: external.metrics.k8s.io/v1beta1
  kind: ExternalMetricValue
  metadata: {namespace: default}
  metricName: queue_length
  metricLabels: {queue: jobs}
  timestamp: '2024-12-31T23:59:45Z'
  value: "90"
steps:
- at: 0s
"#;

// ---------------------------------------------------------------------------------------------
// The differential test
// ---------------------------------------------------------------------------------------------

#[test]
#[ignore = "real cluster: run by hack/test.sh after hack/kube.sh build"]
fn fixture_server_answers_as_the_real_apiserver() {
    let _ = IGNORED;
    for release in releases() {
        runtime().block_on(differential(release));
    }
}

async fn differential(release: KubeRelease) {
    // The fixture server plays the cluster's own version (HPA generation from 1.37, ...).
    let text = SCENARIO.replace(
        "serverVersion: \"1.37\"",
        &format!("serverVersion: \"1.{}\"", release.minor),
    );
    let scenario: Scenario = hpa_fixtures::scenario::load_str(&text, "differential.yaml")
        .unwrap_or_else(|e| panic!("{e}"));
    let cluster = cluster_up(release, "differential").await;
    cluster.load(&scenario).await.unwrap();
    let store = Store::from_scenario(&scenario).unwrap();
    let server = FixtureServer::start_local(store).await.unwrap();
    let mut s = Sides {
        real: cluster.admin_client().await.unwrap(),
        fixture: server.client().unwrap(),
        findings: Vec::new(),
        compared: 0,
        documented: 0,
    };

    discovery(&mut s).await;
    version(&mut s, release).await;
    reads(&mut s).await;
    lists(&mut s).await;
    watches(&mut s).await;
    scale(&mut s).await;
    hpa_status(&mut s).await;
    hpa_writes(&mut s).await;
    events(&mut s).await;
    leases(&mut s).await;
    metrics(&mut s).await;
    too_old_watch(&mut s, &cluster, server.store()).await;

    server.stop().await.unwrap();
    eprintln!(
        "{release}: {} comparisons, {} documented differences, {} undocumented",
        s.compared,
        s.documented,
        s.findings.len()
    );
    assert!(
        s.findings.is_empty(),
        "{release}: the fixture server answers differently from kube-apiserver \
         (fix it, or document it in docs/real-cluster-differences.md and normalize it here):\n\n{}",
        s.findings.join("\n\n")
    );
}

/// `/api`, `/apis`, `/apis/GROUP` and `/apis/GROUP/VERSION`. The real server serves many more
/// groups and resources (it is a whole cluster; the fixture serves what the HPA controller and
/// `kubectl` use): each group, version and resource the fixture serves must be served alike by
/// the real one, field by field, except `storageVersionHash` (a hash of the storage version
/// read only by the storage version migrator).
async fn discovery(s: &mut Sides) {
    // `/api`: serverAddressByClientCIDRs names each server's own address.
    s.compare_with("/api", &get("/api"), &|v: &mut Value| {
        normalize(v);
        strip(v, "/serverAddressByClientCIDRs/*/serverAddress");
    })
    .await;

    // `/apis`: the groups the fixture serves, with their versions and preferred version.
    let real = send(&s.real, &get("/apis")).await;
    let fixture = send(&s.fixture, &get("/apis")).await;
    let fixture_groups: BTreeSet<String> = fixture.body["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap().to_string())
        .collect();
    let only_served = |a: &Answer| {
        let mut b = a.body.clone();
        if let Some(gs) = b["groups"].as_array_mut() {
            gs.retain(|g| fixture_groups.contains(g["name"].as_str().unwrap_or("")));
            gs.sort_by_key(|g| g["name"].as_str().unwrap_or("").to_string());
        }
        Answer {
            status: a.status,
            body: b,
        }
    };
    s.check(
        "/apis (the fixture's groups)",
        &get("/apis"),
        &only_served(&real),
        &only_served(&fixture),
        &normalize,
    );

    for group in &fixture_groups {
        s.compare_with(
            &format!("/apis/{group}"),
            &get(format!("/apis/{group}")),
            &normalize,
        )
        .await;
    }

    let mut group_versions = vec!["/api/v1".to_string()];
    for g in fixture.body["groups"].as_array().unwrap() {
        for v in g["versions"].as_array().unwrap() {
            group_versions.push(format!("/apis/{}", v["groupVersion"].as_str().unwrap()));
        }
    }
    for path in group_versions {
        let real = send(&s.real, &get(&path)).await;
        let fixture = send(&s.fixture, &get(&path)).await;
        let served: BTreeSet<String> = fixture.body["resources"]
            .as_array()
            .map(|rs| {
                rs.iter()
                    .map(|r| r["name"].as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default();
        let only_served = |a: &Answer| {
            let mut b = a.body.clone();
            if let Some(rs) = b["resources"].as_array_mut() {
                rs.retain(|r| served.contains(r["name"].as_str().unwrap_or("")));
                rs.sort_by_key(|r| r["name"].as_str().unwrap_or("").to_string());
                for r in rs.iter_mut() {
                    strip(r, "/storageVersionHash");
                }
            }
            Answer {
                status: a.status,
                body: b,
            }
        };
        s.check(
            &format!("{path} (the fixture's resources)"),
            &get(&path),
            &only_served(&real),
            &only_served(&fixture),
            &normalize,
        );
    }

    // Versions and resources of kube-apiserver's own groups nobody serves: a 404 Status.
    for path in [
        "/apis/apps/v2",
        "/api/v2",
        "/apis/apps/v1/nosuchresources",
        "/apis/apps/v1/namespaces/default/nosuchresources/x",
    ] {
        s.compare(&format!("unserved {path}"), &get(path)).await;
    }
    // Unknown groups, versions an aggregated or custom resource group does not serve, and
    // unknown resources of a custom resource group: Go's plain-text `404 page not found`.
    for path in [
        "/apis/nosuch.example.com",
        "/apis/nosuch.example.com/v1",
        "/apis/custom.metrics.k8s.io/v1beta3",
        "/apis/example.com/v2",
        "/apis/example.com/v1/namespaces/default/nosuchresources",
        "/apis/metrics.k8s.io/v1beta2/namespaces/default/pods",
        "/apis/external.metrics.k8s.io/v1/namespaces/default/queue_length",
    ] {
        s.compare(&format!("unserved {path}"), &get(path)).await;
    }
}

/// `/version`: what the controller reads is `major`/`minor` (and kubectl prints
/// `gitVersion`); the build fields name each binary's own build.
async fn version(s: &mut Sides, release: KubeRelease) {
    let _ = release;
    s.compare_with("/version", &get("/version"), &|v: &mut Value| {
        for f in [
            "gitVersion",
            "gitCommit",
            "gitTreeState",
            "buildDate",
            "goVersion",
            "compiler",
            "platform",
        ] {
            strip(v, &format!("/{f}"));
        }
    })
    .await;
}

/// GETs of single objects, present and missing, in every version.
async fn reads(s: &mut Sides) {
    for path in [
        "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers/web",
        "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers/db",
        "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers/w",
        "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers/web",
        "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers/db",
        "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers/web/status",
        "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers/nope",
        "/apis/autoscaling/v2/namespaces/nonamespace/horizontalpodautoscalers/web",
        "/api/v1/namespaces/default/pods/web-1",
        "/api/v1/namespaces/default/pods/db-0",
        "/api/v1/namespaces/default/pods/nope",
        "/apis/apps/v1/namespaces/default/deployments/web",
        "/apis/apps/v1/namespaces/default/statefulsets/db",
        "/apis/apps/v1/namespaces/default/replicasets/rs",
        "/api/v1/namespaces/default/replicationcontrollers/rc",
        "/apis/example.com/v1/namespaces/default/widgets/w",
        "/apis/apps/v1/namespaces/default/deployments/nope",
        "/apis/example.com/v1/namespaces/default/widgets/nope",
        "/api/v1/namespaces/default",
        "/api/v1/namespaces/nonamespace",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/nosuch.example.com",
    ] {
        s.compare(&format!("get {path}"), &get(path)).await;
    }
    // The CRD, as the scale-target cache reads its scale paths: spec as given.
    s.compare_with(
        "get the CRD",
        &get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com"),
        &|v: &mut Value| {
            normalize(v);
            // status (acceptedNames, conditions, storedVersions) is the apiextensions
            // controllers' and nothing here reads it; spec defaults (conversion strategy)
            // likewise.
            strip(v, "/status");
            strip(v, "/spec/conversion");
        },
    )
    .await;
}

/// LISTs as reflectors and kubectl make them.
async fn lists(s: &mut Sides) {
    for path in [
        "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers",
        "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers",
        "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers?limit=500&resourceVersion=0",
        "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers?limit=1",
        "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers?limit=1&resourceVersion=0",
        "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers?fieldSelector=metadata.name%3Dweb",
        "/api/v1/namespaces/default/pods?labelSelector=app%3Dweb",
        "/api/v1/namespaces/default/pods?labelSelector=app+in+%28web%2Cdb%29",
        "/api/v1/namespaces/default/pods?labelSelector=app%3Dnope",
        "/api/v1/namespaces/default/pods?labelSelector=%21app",
        "/api/v1/namespaces/default/pods?fieldSelector=metadata.name%3Dweb-1",
        "/api/v1/namespaces/default/pods?fieldSelector=status.phase%3DRunning",
        "/api/v1/namespaces/default/pods?fieldSelector=status.phase%21%3DRunning",
        "/api/v1/namespaces/default/pods?fieldSelector=spec.nodeName%3D",
        "/api/v1/namespaces/default/pods?fieldSelector=spec.replicas%3D1",
        "/api/v1/namespaces/default/pods?labelSelector=app%3D%3D%3Dweb",
        "/api/v1/namespaces/default/pods?labelSelector=app+in+web",
        "/api/v1/namespaces/default/pods?limit=notanumber",
        "/api/v1/namespaces/default/pods?resourceVersion=notanumber",
        "/apis/apps/v1/namespaces/default/deployments",
        "/apis/apps/v1/namespaces/default/deployments?fieldSelector=metadata.namespace%3Ddefault",
        "/apis/apps/v1/namespaces/default/statefulsets",
        "/apis/apps/v1/namespaces/default/replicasets",
        "/api/v1/namespaces/default/replicationcontrollers",
        "/apis/example.com/v1/namespaces/default/widgets",
        "/apis/coordination.k8s.io/v1/namespaces/default/leases",
        "/api/v1/namespaces/default/events",
    ] {
        s.compare(&format!("list {path}"), &get(path)).await;
    }

    // Paging: the second page from the first page's continue token.
    let first = "/api/v1/namespaces/default/pods?limit=2";
    let (real, fixture) = s.compare("list pods, first page", &get(first)).await;
    let token = |a: &Answer| {
        a.body["metadata"]["continue"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    let (rt, ft) = (token(&real), token(&fixture));
    if !rt.is_empty() && !ft.is_empty() {
        s.compare_pair(
            "list pods, second page",
            &get(format!("{first}&continue={rt}")),
            &get(format!("{first}&continue={ft}")),
        )
        .await;
    }
    s.documented(
        "list pods with a malformed continue token",
        "continue tokens",
        &get("/api/v1/namespaces/default/pods?limit=2&continue=bm90IGEgdG9rZW4"),
    )
    .await;

    // All namespaces: compare the `default` items only (the real cluster has kube-system's).
    s.compare_with(
        "list HPAs in all namespaces",
        &get("/apis/autoscaling/v2/horizontalpodautoscalers"),
        &|v: &mut Value| {
            if let Some(items) = v["items"].as_array_mut() {
                items.retain(|i| i["metadata"]["namespace"] == "default");
            }
            normalize_object(v);
        },
    )
    .await;
}

/// WATCHes: from now with bookmarks, from a list's resourceVersion, of one object, with the
/// initial events, from a resourceVersion too old, and changes made while a watch is open.
async fn watches(s: &mut Sides) {
    // Without a resourceVersion: the current objects as ADDED.
    watch_compare(
        s,
        "watch HPAs without resourceVersion",
        "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers?watch=true&timeoutSeconds=1",
        "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers?watch=true&timeoutSeconds=1",
    )
    .await;
    watch_compare(
        s,
        "watch pods with a label selector from 0",
        "/api/v1/namespaces/default/pods?watch=true&resourceVersion=0&labelSelector=app%3Dweb&timeoutSeconds=1",
        "/api/v1/namespaces/default/pods?watch=true&resourceVersion=0&labelSelector=app%3Dweb&timeoutSeconds=1",
    )
    .await;
    // sendInitialEvents (the streaming list): ADDED, then the initial-events-end bookmark.
    watch_compare(
        s,
        "watch deployments with sendInitialEvents",
        "/apis/apps/v1/namespaces/default/deployments?watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1",
        "/apis/apps/v1/namespaces/default/deployments?watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1",
    )
    .await;
    // A resourceVersion that is not a number.
    watch_compare(
        s,
        "watch pods from an unparsable resourceVersion",
        "/api/v1/namespaces/default/pods?watch=true&resourceVersion=abc&timeoutSeconds=1",
        "/api/v1/namespaces/default/pods?watch=true&resourceVersion=abc&timeoutSeconds=1",
    )
    .await;

    // From a list's resourceVersion, with bookmarks, while an HPA's status changes and a pod
    // leaves the selector: what the reflectors see.
    let list_rv = |a: &Answer| {
        a.body["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let hpas = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers";
    let pods = "/api/v1/namespaces/default/pods";
    let (rr, fr) = (
        list_rv(&send(&s.real, &get(hpas)).await),
        list_rv(&send(&s.fixture, &get(hpas)).await),
    );
    let (rp, fp) = (
        list_rv(&send(&s.real, &get(pods)).await),
        list_rv(&send(&s.fixture, &get(pods)).await),
    );
    // 4 s: long enough for the bookmark the cacher sends 2 s before a watch's deadline.
    let q = "watch=true&allowWatchBookmarks=true&timeoutSeconds=4";
    let real_hpa = {
        let c = s.real.clone();
        let p = format!("{hpas}?{q}&resourceVersion={rr}");
        tokio::spawn(async move { send_watch(&c, &p).await })
    };
    let fixture_hpa = {
        let c = s.fixture.clone();
        let p = format!("{hpas}?{q}&resourceVersion={fr}");
        tokio::spawn(async move { send_watch(&c, &p).await })
    };
    let real_one = {
        let c = s.real.clone();
        let p = format!("{hpas}/web?{q}&resourceVersion={rr}");
        tokio::spawn(async move { send_watch(&c, &p).await })
    };
    let fixture_one = {
        let c = s.fixture.clone();
        let p = format!("{hpas}/web?{q}&resourceVersion={fr}");
        tokio::spawn(async move { send_watch(&c, &p).await })
    };
    let real_pods = {
        let c = s.real.clone();
        let p = format!("{pods}?{q}&labelSelector=app%3Dweb&resourceVersion={rp}");
        tokio::spawn(async move { send_watch(&c, &p).await })
    };
    let fixture_pods = {
        let c = s.fixture.clone();
        let p = format!("{pods}?{q}&labelSelector=app%3Dweb&resourceVersion={fp}");
        tokio::spawn(async move { send_watch(&c, &p).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    for client in [s.real.clone(), s.fixture.clone()] {
        // The HPA `db`'s status changes; pod web-2 leaves the selector.
        let hpa = send(&client, &get(format!("{hpas}/db"))).await.body;
        let mut next = hpa.clone();
        next["status"] = json!({"currentReplicas": 1, "desiredReplicas": 2});
        let a = send(&client, &put(format!("{hpas}/db/status"), next)).await;
        assert_eq!(a.status, 200, "{a:?}");
        let a = send(
            &client,
            &patch(
                format!("{pods}/web-2"),
                "application/merge-patch+json",
                json!({"metadata": {"labels": {"app": "other"}}}),
            ),
        )
        .await;
        assert_eq!(a.status, 200, "{a:?}");
    }
    let events = |v: (u16, Vec<Value>)| {
        let (status, evs) = v;
        json!({"status": status, "events": evs})
    };
    for (case, real, fixture) in [
        (
            "watch HPAs from the list's resourceVersion",
            real_hpa,
            fixture_hpa,
        ),
        (
            "watch one HPA by name from the list's resourceVersion",
            real_one,
            fixture_one,
        ),
        (
            "watch pods with a selector while one leaves it",
            real_pods,
            fixture_pods,
        ),
    ] {
        let r = events(real.await.unwrap());
        let f = events(fixture.await.unwrap());
        // A 4 s watch with bookmarks gets at least one before its end from both.
        let bookmarked = |v: &Value| {
            json!(
                v["events"]
                    .as_array()
                    .is_some_and(|evs| evs.iter().any(|e| e["type"] == "BOOKMARK"))
            )
        };
        if r.get("events").is_some() && r["events"].is_array() {
            s.check(
                &format!("{case}: a bookmark before the deadline"),
                &get("(watch)"),
                &Answer {
                    status: 200,
                    body: bookmarked(&r),
                },
                &Answer {
                    status: 200,
                    body: bookmarked(&f),
                },
                &normalize,
            );
        }
        s.check(
            case,
            &get("(watch)"),
            &Answer {
                status: 200,
                body: r,
            },
            &Answer {
                status: 200,
                body: f,
            },
            &normalize_watch,
        );
    }
    // web-2 back in the selector, for what follows.
    for client in [s.real.clone(), s.fixture.clone()] {
        send(
            &client,
            &patch(
                format!("{pods}/web-2"),
                "application/merge-patch+json",
                json!({"metadata": {"labels": {"app": "web"}}}),
            ),
        )
        .await;
    }
}

/// A watch from a resourceVersion the server no longer has: the real one after an etcd
/// compaction, the fixture after its history was cut to one change per resource. Both answer
/// with one ERROR event (410 Expired) inside a 200.
async fn too_old_watch(s: &mut Sides, cluster: &Cluster, store: &Store) {
    let pods = "/api/v1/namespaces/default/pods";
    for client in [s.real.clone(), s.fixture.clone()] {
        // Two more changes, so that the first of them is evicted from the fixture's history.
        for app in ["web2", "web"] {
            send(
                &client,
                &patch(
                    format!("{pods}/web-2"),
                    "application/merge-patch+json",
                    json!({"metadata": {"labels": {"extra": app}}}),
                ),
            )
            .await;
        }
    }
    // The real watch cache serves old resourceVersions from etcd's history; after a
    // compaction and a restart (the cache then starts after the compaction) it cannot.
    cluster.compact_etcd().await.unwrap();
    cluster.restart_component("kube-apiserver").await.unwrap();
    s.real = cluster.admin_client().await.unwrap();
    store.set_history_limit(1);
    watch_compare(
        s,
        "watch pods from a too old resourceVersion",
        &format!("{pods}?watch=true&resourceVersion=2&allowWatchBookmarks=true&timeoutSeconds=1"),
        &format!("{pods}?watch=true&resourceVersion=2&allowWatchBookmarks=true&timeoutSeconds=1"),
    )
    .await;
}

/// Watch events normalized: objects as objects are. A BOOKMARK's object is compared by its
/// `kind`, `apiVersion` and `metadata` only: the real server sends a zero-valued object of the
/// kind (`"spec": {...}, "status": {}` for a Deployment), the fixture none of that, and
/// clients read only `metadata.resourceVersion` and the initial-events-end annotation
/// (documented).
fn normalize_watch(v: &mut Value) {
    if let Some(evs) = v["events"].as_array_mut() {
        // Plain bookmarks (not the initial-events-end one): how many and when is the
        // cacher's timing (1-2 in the last 2 s of a watch, in 1 s buckets); a watch of 2 s or
        // less gets none from the real server and one from the fixture (documented).
        // Whether a longer watch gets one is checked separately.
        evs.retain(|e| {
            e["type"] != "BOOKMARK"
                || e.pointer("/object/metadata/annotations/k8s.io~1initial-events-end")
                    .is_some()
        });
        for e in evs.iter_mut() {
            let bookmark = e["type"] == "BOOKMARK";
            if let Some(o) = e.get_mut("object") {
                if bookmark && let Some(m) = o.as_object_mut() {
                    m.retain(|k, _| matches!(k.as_str(), "kind" | "apiVersion" | "metadata"));
                }
                normalize_object(o);
            }
        }
    }
    normalize(v);
}

async fn watch_compare(s: &mut Sides, case: &str, real_path: &str, fixture_path: &str) {
    let (rs, re) = send_watch(&s.real, real_path).await;
    let (fs, fe) = send_watch(&s.fixture, fixture_path).await;
    let r = Answer {
        status: rs,
        body: json!({"events": re}),
    };
    let f = Answer {
        status: fs,
        body: json!({"events": fe}),
    };
    s.check(case, &get(real_path), &r, &f, &normalize_watch);
}

/// The scale subresource of every kind: GET, PUT with the current resourceVersion, without
/// one, with a stale one (409), with invalid replicas (422), of a missing object (404).
async fn scale(s: &mut Sides) {
    let targets = [
        "/apis/apps/v1/namespaces/default/deployments/web",
        "/apis/apps/v1/namespaces/default/statefulsets/db",
        "/apis/apps/v1/namespaces/default/replicasets/rs",
        "/api/v1/namespaces/default/replicationcontrollers/rc",
        "/apis/example.com/v1/namespaces/default/widgets/w",
    ];
    for base in targets {
        let path = format!("{base}/scale");
        let (real, fixture) = s.compare(&format!("get {path}"), &get(&path)).await;
        // PUT with each side's current resourceVersion, one more replica.
        let bump = |a: &Answer| {
            let mut b = a.body.clone();
            let n = b["spec"]["replicas"].as_i64().unwrap_or(0);
            b["spec"]["replicas"] = json!(n + 1);
            b
        };
        let (real_put, fixture_put) = s
            .compare_pair(
                &format!("put {path} with the current resourceVersion"),
                &put(&path, bump(&real)),
                &put(&path, bump(&fixture)),
            )
            .await;
        // The object itself after the scale write (spec.replicas, generation).
        s.compare(
            &format!("get {base} after its scale was written"),
            &get(base),
        )
        .await;
        // The first PUT's resourceVersion again: stale now.
        s.compare_pair(
            &format!("put {path} with a stale resourceVersion"),
            &put(&path, bump(&real)),
            &put(&path, bump(&fixture)),
        )
        .await;
        // No resourceVersion: unconditional.
        let unconditional = |a: &Answer| {
            let mut b = bump(a);
            strip(&mut b, "/metadata/resourceVersion");
            b
        };
        s.compare_pair(
            &format!("put {path} without resourceVersion"),
            &put(&path, unconditional(&real_put)),
            &put(&path, unconditional(&fixture_put)),
        )
        .await;
        let negative = |a: &Answer| {
            let mut b = a.body.clone();
            b["spec"]["replicas"] = json!(-1);
            strip(&mut b, "/metadata/resourceVersion");
            b
        };
        s.compare_pair(
            &format!("put {path} with negative replicas"),
            &put(&path, negative(&real_put)),
            &put(&path, negative(&fixture_put)),
        )
        .await;
        let renamed = |a: &Answer| {
            let mut b = a.body.clone();
            b["metadata"]["name"] = json!("other");
            strip(&mut b, "/metadata/resourceVersion");
            b
        };
        s.compare_pair(
            &format!("put {path} with another name in the body"),
            &put(&path, renamed(&real_put)),
            &put(&path, renamed(&fixture_put)),
        )
        .await;
        // A merge patch of the scale (kubectl scale).
        s.compare(
            &format!("patch {path}"),
            &patch(
                &path,
                "application/merge-patch+json",
                json!({"spec": {"replicas": 2}}),
            ),
        )
        .await;
    }
    for path in [
        "/apis/apps/v1/namespaces/default/deployments/nope/scale",
        "/apis/example.com/v1/namespaces/default/widgets/nope/scale",
    ] {
        s.compare(&format!("get {path}"), &get(path)).await;
        s.compare(
            &format!("put {path}"),
            &put(
                path,
                json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                       "metadata": {"name": "nope", "namespace": "default"},
                       "spec": {"replicas": 1}}),
            ),
        )
        .await;
    }
    // A kind without a scale subresource.
    s.compare(
        "get pods/scale",
        &get("/api/v1/namespaces/default/pods/web-1/scale"),
    )
    .await;
}

/// PUT of the HPA status as the controller writes it: valid, stale, invalid.
async fn hpa_status(s: &mut Sides) {
    let path = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers/web";
    let status_path = format!("{path}/status");
    let real = send(&s.real, &get(path)).await;
    let fixture = send(&s.fixture, &get(path)).await;
    let with_status = |a: &Answer, status: Value| {
        let mut b = a.body.clone();
        b["status"] = status;
        b
    };
    let status = json!({
        "observedGeneration": 1,
        "lastScaleTime": "2025-01-01T00:00:00Z",
        "currentReplicas": 2,
        "desiredReplicas": 3,
        "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu",
            "current": {"averageUtilization": 100, "averageValue": "100m"}}}],
        "conditions": [
            {"type": "AbleToScale", "status": "True", "lastTransitionTime": "2025-01-01T00:00:00Z",
             "reason": "SucceededRescale", "message": "the HPA controller was able to update the target scale to 3"},
            {"type": "ScalingActive", "status": "True", "lastTransitionTime": "2025-01-01T00:00:00Z",
             "reason": "ValidMetricFound", "message": "the HPA was able to successfully calculate a replica count from cpu resource utilization (percentage of request)"},
        ],
    });
    let (real_put, fixture_put) = s
        .compare_pair(
            "put HPA status",
            &put(&status_path, with_status(&real, status.clone())),
            &put(&status_path, with_status(&fixture, status.clone())),
        )
        .await;
    // The HPA as a reader sees it after the write, in both versions.
    s.compare("get the HPA after its status write", &get(path))
        .await;
    s.compare(
        "get the HPA as autoscaling/v1 after its status write",
        &get("/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers/web"),
    )
    .await;
    // The same write again, with the now stale resourceVersion.
    s.compare_pair(
        "put HPA status with a stale resourceVersion",
        &put(&status_path, with_status(&real, status.clone())),
        &put(&status_path, with_status(&fixture, status.clone())),
    )
    .await;
    // A status write does not change the spec.
    let spec_change = |a: &Answer| {
        let mut b = a.body.clone();
        b["spec"]["maxReplicas"] = json!(99);
        b
    };
    let (real_put, fixture_put) = s
        .compare_pair(
            "put HPA status with a changed spec",
            &put(&status_path, spec_change(&real_put)),
            &put(&status_path, spec_change(&fixture_put)),
        )
        .await;
    // Invalid values.
    for (case, field, value) in [
        ("negative currentReplicas", "currentReplicas", json!(-1)),
        ("negative desiredReplicas", "desiredReplicas", json!(-2)),
        (
            "a condition without type",
            "conditions",
            json!([{"status": "True"}]),
        ),
        (
            "a condition with a bad status",
            "conditions",
            json!([{"type": "AbleToScale", "status": "Maybe"}]),
        ),
    ] {
        let bad = |a: &Answer| {
            let mut b = a.body.clone();
            strip(&mut b, "/metadata/resourceVersion");
            b["status"][field] = value.clone();
            b
        };
        s.compare_pair(
            &format!("put HPA status with {case}"),
            &put(&status_path, bad(&real_put)),
            &put(&status_path, bad(&fixture_put)),
        )
        .await;
    }
    // autoscaling/v1 status write.
    let v1 = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers/web";
    let real = send(&s.real, &get(v1)).await;
    let fixture = send(&s.fixture, &get(v1)).await;
    let v1_status =
        json!({"currentReplicas": 2, "desiredReplicas": 2, "currentCPUUtilizationPercentage": 40});
    s.compare_pair(
        "put autoscaling/v1 HPA status",
        &put(
            format!("{v1}/status"),
            with_status(&real, v1_status.clone()),
        ),
        &put(format!("{v1}/status"), with_status(&fixture, v1_status)),
    )
    .await;
    s.compare("get the HPA after the v1 status write", &get(path))
        .await;
    // Status of a missing HPA.
    s.compare(
        "put status of a missing HPA",
        &put(
            "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers/nope/status",
            json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                   "metadata": {"name": "nope", "namespace": "default"},
                   "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxReplicas": 2},
                   "status": {"currentReplicas": 1, "desiredReplicas": 1}}),
        ),
    )
    .await;
}

/// Creates and updates of HPAs (kubectl), valid and invalid.
async fn hpa_writes(s: &mut Sides) {
    let hpas = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers";
    let hpa = |name: &str, spec: Value| {
        json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
               "metadata": {"name": name}, "spec": spec})
    };
    let target = json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"});
    s.compare(
        "create an HPA",
        &post(
            hpas,
            hpa(
                "created",
                json!({"scaleTargetRef": target, "maxReplicas": 3}),
            ),
        ),
    )
    .await;
    s.compare(
        "create an HPA that exists",
        &post(
            hpas,
            hpa(
                "created",
                json!({"scaleTargetRef": target, "maxReplicas": 3}),
            ),
        ),
    )
    .await;
    s.compare(
        "create an autoscaling/v1 HPA",
        &post(
            "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers",
            json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
                   "metadata": {"name": "created-v1"},
                   "spec": {"scaleTargetRef": target, "maxReplicas": 3, "targetCPUUtilizationPercentage": 70}}),
        ),
    )
    .await;
    s.compare(
        "get the autoscaling/v1 HPA as v2",
        &get(format!("{hpas}/created-v1")),
    )
    .await;
    for (case, spec) in [
        (
            "maxReplicas 0",
            json!({"scaleTargetRef": target, "maxReplicas": 0}),
        ),
        (
            "minReplicas above maxReplicas",
            json!({"scaleTargetRef": target, "minReplicas": 5, "maxReplicas": 3}),
        ),
        (
            "no scaleTargetRef name",
            json!({"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment"}, "maxReplicas": 3}),
        ),
        (
            "an unknown metric type",
            json!({"scaleTargetRef": target, "maxReplicas": 3, "metrics": [{"type": "CheddarCheese"}]}),
        ),
        (
            "a utilization target of 0",
            json!({"scaleTargetRef": target, "maxReplicas": 3, "metrics": [
            {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 0}}}]}),
        ),
        (
            "a malformed scaleTargetRef apiVersion",
            json!({"scaleTargetRef": {"apiVersion": "a/b/c", "kind": "Deployment", "name": "web"}, "maxReplicas": 3}),
        ),
    ] {
        s.documented(
            &format!("create an HPA with {case}"),
            "HPA spec validation",
            &post(
                hpas,
                hpa(
                    &format!("invalid-{}", case.replace(' ', "-").replace('`', "")),
                    spec,
                ),
            ),
        )
        .await;
    }
    s.compare(
        "create an HPA in another namespace than the path's",
        &post(
            hpas,
            json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "x", "namespace": "other"},
            "spec": {"scaleTargetRef": target, "maxReplicas": 3}}),
        ),
    )
    .await;
    s.compare(
        "create an HPA with a mismatched apiVersion",
        &post(
            hpas,
            json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "x"}, "spec": {"scaleTargetRef": target, "maxReplicas": 3}}),
        ),
    )
    .await;
    s.compare(
        "merge-patch an HPA's spec",
        &patch(
            format!("{hpas}/created"),
            "application/merge-patch+json",
            json!({"spec": {"maxReplicas": 4}}),
        ),
    )
    .await;
    s.compare(
        "delete an HPA",
        &Req {
            method: http::Method::DELETE,
            ..get(format!("{hpas}/created"))
        },
    )
    .await;
    s.compare(
        "delete a missing HPA",
        &Req {
            method: http::Method::DELETE,
            ..get(format!("{hpas}/created"))
        },
    )
    .await;
}

/// Events: core v1 as this controller's recorder writes them (create, then the strategic
/// merge patch of a repeat), events.k8s.io/v1 as a new-style recorder writes them, and
/// invalid ones.
async fn events(s: &mut Sides) {
    let events = "/api/v1/namespaces/default/events";
    let reference = json!({"kind": "HorizontalPodAutoscaler", "namespace": "default", "name": "web",
        "uid": "0a1b2c3d-0000-4000-8000-000000000001", "apiVersion": "autoscaling/v2", "resourceVersion": "1"});
    let event = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "web.1810d4c1a0b2c3d4", "namespace": "default"},
        "involvedObject": reference,
        "reason": "SuccessfulRescale",
        "message": "New size: 3; reason: cpu resource utilization (percentage of request) above target",
        "source": {"component": "horizontal-pod-autoscaler"},
        "firstTimestamp": "2025-01-01T00:00:00Z",
        "lastTimestamp": "2025-01-01T00:00:00Z",
        "count": 1,
        "type": "Normal",
        "eventTime": null,
        "reportingComponent": "horizontal-pod-autoscaler",
        "reportingInstance": "",
    });
    s.compare(
        "create a core v1 Event as the recorder does",
        &post(events, event.clone()),
    )
    .await;
    s.compare(
        "patch the Event as the recorder does for a repeat",
        &patch(
            format!("{events}/web.1810d4c1a0b2c3d4"),
            "application/strategic-merge-patch+json",
            json!({"count": 2, "lastTimestamp": "2025-01-01T00:00:30Z", "message": "New size: 3; reason: cpu resource utilization (percentage of request) above target"}),
        ),
    )
    .await;
    s.compare(
        "patch a missing Event",
        &patch(
            format!("{events}/nope"),
            "application/strategic-merge-patch+json",
            json!({"count": 2}),
        ),
    )
    .await;
    s.compare(
        "get the Event as events.k8s.io/v1",
        &get("/apis/events.k8s.io/v1/namespaces/default/events/web.1810d4c1a0b2c3d4"),
    )
    .await;
    // The leader election's event on its Lease (client-go `resourcelock.LeaseLock`).
    s.compare(
        "create the leader election's Event",
        &post(events, json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "kube-hpa-controller.1810d4c1a0b2c3d5", "namespace": "default"},
            "involvedObject": {"kind": "Lease", "namespace": "default", "name": "kube-hpa-controller", "apiVersion": "coordination.k8s.io/v1"},
            "reason": "LeaderElection", "message": "me became leader",
            "source": {"component": "kube-hpa-controller_me"},
            "firstTimestamp": "2025-01-01T00:00:00Z", "lastTimestamp": "2025-01-01T00:00:00Z",
            "count": 1, "type": "Normal", "reportingComponent": "", "reportingInstance": ""})),
    )
    .await;
    let mut other_ns = event.clone();
    other_ns["metadata"]["name"] = json!("web.other-namespace");
    other_ns["involvedObject"]["namespace"] = json!("kube-system");
    s.compare(
        "create a core v1 Event regarding another namespace",
        &post(events, other_ns),
    )
    .await;
    let mut no_reason = event.clone();
    no_reason["metadata"]["name"] = json!("web.no-reason");
    strip(&mut no_reason, "/reason");
    s.compare(
        "create a core v1 Event without a reason",
        &post(events, no_reason),
    )
    .await;

    let new_events = "/apis/events.k8s.io/v1/namespaces/default/events";
    let new_event = json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "web.1810d4c1a0b2c3d6", "namespace": "default"},
        "eventTime": "2025-01-01T00:00:00.123456Z",
        "reportingController": "horizontal-pod-autoscaler",
        "reportingInstance": "horizontal-pod-autoscaler-node-1",
        "action": "Scaling",
        "reason": "SuccessfulRescale",
        "regarding": reference,
        "note": "New size: 3; reason: cpu resource utilization (percentage of request) above target",
        "type": "Normal",
    });
    s.compare(
        "create an events.k8s.io/v1 Event",
        &post(new_events, new_event.clone()),
    )
    .await;
    s.compare(
        "get the events.k8s.io/v1 Event as core v1",
        &get(format!("{events}/web.1810d4c1a0b2c3d6")),
    )
    .await;
    let mut no_time = new_event.clone();
    no_time["metadata"]["name"] = json!("web.no-time");
    strip(&mut no_time, "/eventTime");
    s.compare(
        "create an events.k8s.io/v1 Event without eventTime",
        &post(new_events, no_time),
    )
    .await;
    let mut no_controller = new_event.clone();
    no_controller["metadata"]["name"] = json!("web.no-controller");
    strip(&mut no_controller, "/reportingController");
    s.compare(
        "create an events.k8s.io/v1 Event without reportingController",
        &post(new_events, no_controller),
    )
    .await;
    // The core Events list, as kubectl describe reads it (fieldSelector on the involved
    // object).
    s.compare(
        "list Events of an HPA",
        &get(format!("{events}?fieldSelector=involvedObject.name%3Dweb%2CinvolvedObject.namespace%3Ddefault%2CinvolvedObject.kind%3DHorizontalPodAutoscaler")),
    )
    .await;
}

/// The Lease as the leader election writes it: create, update with the current
/// resourceVersion, update with a stale one, create of an existing one.
async fn leases(s: &mut Sides) {
    let leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "kube-hpa-controller", "namespace": "default"},
        "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15,
                 "acquireTime": "2025-01-01T00:00:00.123456Z", "renewTime": "2025-01-01T00:00:00.123456Z",
                 "leaseTransitions": 0},
    });
    let (real, fixture) = s
        .compare("create the Lease", &post(leases, lease.clone()))
        .await;
    s.compare("create the Lease again", &post(leases, lease.clone()))
        .await;
    let renew = |a: &Answer, t: &str| {
        let mut b = a.body.clone();
        b["spec"]["renewTime"] = json!(t);
        b
    };
    let path = format!("{leases}/kube-hpa-controller");
    s.compare_pair(
        "renew the Lease",
        &put(&path, renew(&real, "2025-01-01T00:00:02.000001Z")),
        &put(&path, renew(&fixture, "2025-01-01T00:00:02.000001Z")),
    )
    .await;
    s.compare_pair(
        "renew the Lease with a stale resourceVersion",
        &put(&path, renew(&real, "2025-01-01T00:00:04.000000Z")),
        &put(&path, renew(&fixture, "2025-01-01T00:00:04.000000Z")),
    )
    .await;
    // metav1.MicroTime is parsed with exactly six fraction digits.
    for (case, time) in [
        ("nanoseconds", "2025-01-01T00:00:00.123456789Z"),
        ("whole seconds", "2025-01-01T00:00:00Z"),
        ("milliseconds", "2025-01-01T00:00:00.123Z"),
        ("an offset", "2025-01-01T01:00:00.123456+01:00"),
    ] {
        let mut other = lease.clone();
        other["metadata"]["name"] = json!(format!("lease-{}", case.replace(' ', "-")));
        other["spec"]["renewTime"] = json!(time);
        s.compare(
            &format!("create a Lease with a renewTime in {case}"),
            &post(leases, other),
        )
        .await;
    }
    s.compare("get the Lease", &get(&path)).await;
}

/// The metrics APIs. In the real cluster they are served by the fixture server itself behind
/// the aggregator, so what can differ is the aggregator's own behaviour: discovery, unknown
/// groups and versions, and how errors are passed through.
async fn metrics(s: &mut Sides) {
    for path in [
        "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods?labelSelector=app%3Dweb",
        "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/web-1",
        "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/nope",
        "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods?labelSelector=app%3D%3D%3Dweb",
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/%2A/packets-per-second?labelSelector=app%3Ddb",
        "/apis/custom.metrics.k8s.io/v1beta1/namespaces/default/pods/%2A/packets-per-second?labelSelector=app%3Ddb",
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/%2A/nosuch-metric?labelSelector=app%3Ddb",
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/deployments.apps/web/requests-per-second",
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/deployments.apps/web/nosuch-metric",
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/%2A/packets-per-second?labelSelector=app+in+db",
        "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_length?labelSelector=queue%3Djobs",
        "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/nosuch_metric",
        "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_length?labelSelector=queue%3D%3D%3Djobs",
    ] {
        s.compare_with(&format!("metrics {path}"), &get(path), &normalize)
            .await;
    }
}

// ---------------------------------------------------------------------------------------------
// Every scenario through a real cluster
// ---------------------------------------------------------------------------------------------

const METRIC_KINDS: [&str; 3] = ["PodMetrics", "MetricValue", "ExternalMetricValue"];

fn kind(obj: &Value) -> &str {
    obj.get("kind").and_then(Value::as_str).unwrap_or("")
}

fn creation_rank(obj: &Value) -> u8 {
    match kind(obj) {
        "Namespace" => 0,
        "CustomResourceDefinition" => 1,
        "Pod" => 3,
        "HorizontalPodAutoscaler" => 4,
        _ => 2,
    }
}

/// The scenario objects the real API server refuses, each as
/// `FILE: KIND NAMESPACE/NAME: VERB: REASON MESSAGE`, found by creating every object (in
/// `Cluster::load`'s order and with its time shift) one by one and deleting them again.
#[test]
#[ignore = "real cluster: run by hack/test.sh after hack/kube.sh build"]
fn every_scenario_object_a_real_apiserver_refuses_is_documented() {
    for release in releases() {
        runtime().block_on(sweep(release));
    }
}

async fn sweep(release: KubeRelease) {
    let cluster = cluster_up(release, "sweep").await;
    let client = cluster.admin_client().await.unwrap();
    // A scenario recorded from KCM of one version holds what that version's API server
    // stored (e.g. `minReplicas: 0`, which 1.35 and 1.36 refuse by default): it is loaded only
    // into a server of that version.
    let recorded = repo().join("test-fixtures/scenarios/upstream-recorded");
    let files: Vec<_> =
        hpa_fixtures::scenario::collect_files(&[repo().join("test-fixtures/scenarios")])
            .unwrap()
            .into_iter()
            .filter(|f| {
                f.strip_prefix(&recorded)
                    .ok()
                    .and_then(|rest| rest.iter().next())
                    .and_then(|v| v.to_str())
                    .and_then(|v| v.parse::<KubeRelease>().ok())
                    .is_none_or(|v| v.minor == release.minor)
            })
            .collect();
    let mut refused: BTreeSet<String> = BTreeSet::new();
    let mut objects = 0;
    for file in &files {
        let rel = file.strip_prefix(repo()).unwrap().display().to_string();
        let scenario = hpa_fixtures::scenario::load_file(file).unwrap();
        let by = jiff::Timestamp::now().duration_since(scenario.start);
        let mut objs: Vec<Value> = scenario
            .objects
            .iter()
            .filter(|o| !METRIC_KINDS.contains(&kind(o)))
            .cloned()
            .collect();
        // Objects a step applies must be storable too.
        for step in &scenario.steps {
            objs.extend(
                step.apply
                    .iter()
                    .filter(|o| !METRIC_KINDS.contains(&kind(o)))
                    .cloned(),
            );
        }
        for o in &mut objs {
            // A deletionTimestamp is set by a DELETE, never stored by a write (a pod recorded
            // while terminating): the sweep checks the rest of the object.
            if let Some(md) = o.get_mut("metadata").and_then(Value::as_object_mut) {
                md.remove("deletionTimestamp");
            }
            hpa_cluster::load::shift_times(o, by);
            if kind(o) != "Namespace"
                && kind(o) != "CustomResourceDefinition"
                && o.pointer("/metadata/namespace").is_none()
                && let Some(md) = o.get_mut("metadata").and_then(Value::as_object_mut)
            {
                md.insert("namespace".into(), json!("default"));
            }
        }
        objs.sort_by_key(creation_rank);
        let mut applier = Applier::new(client.clone());
        let mut created: Vec<Value> = Vec::new();
        for ns in objs
            .iter()
            .filter_map(|o| o.pointer("/metadata/namespace").and_then(Value::as_str))
            .chain(
                objs.iter()
                    .filter(|o| kind(o) == "Namespace")
                    .filter_map(|o| o.pointer("/metadata/name").and_then(Value::as_str)),
            )
            .map(str::to_string)
            .collect::<BTreeSet<_>>()
        {
            for obj in [
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
                json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": ns}}),
            ] {
                applier.apply(obj).await.unwrap();
            }
        }
        for obj in objs {
            if kind(&obj) == "Namespace" {
                continue;
            }
            objects += 1;
            let what = hpa_cluster::apply::describe(&obj);
            match applier.apply(obj.clone()).await {
                Ok(_) => {
                    if kind(&obj) == "CustomResourceDefinition" {
                        // Established and its kind in discovery (re-created CRDs lag there).
                        hpa_cluster::load::wait_established(
                            &client,
                            obj.pointer("/metadata/name")
                                .and_then(Value::as_str)
                                .unwrap(),
                        )
                        .await
                        .unwrap();
                        applier.forget_kinds();
                    }
                    created.push(obj);
                }
                Err(e) => {
                    let message = match &e {
                        hpa_cluster::apply::ApplyError::Api { verb, source, .. } => match source
                            .as_ref()
                        {
                            kube::Error::Api(st) => format!("{verb}: {} {}", st.reason, st.message),
                            other => format!("{verb}: {other}"),
                        },
                        other => other.to_string(),
                    };
                    refused.insert(format!("{rel}: {what}: {message}"));
                }
            }
        }
        // Delete what was created, newest first.
        for obj in created.iter().rev() {
            delete(&client, obj).await;
        }
    }
    eprintln!(
        "sweep {release}: {} scenarios, {objects} objects, {} refused",
        files.len(),
        refused.len()
    );
    let mut documented: BTreeSet<String> =
        DOCUMENTED_REFUSALS.iter().map(|s| s.to_string()).collect();
    if release.minor < 37 {
        // HPAScaleToZero is off by default before 1.37: an HPA with minReplicas 0 is refused.
        documented.extend(REFUSED_WITHOUT_SCALE_TO_ZERO.iter().map(|(file, hpa)| {
            format!(
                "test-fixtures/scenarios/{file}: HorizontalPodAutoscaler default/{hpa}: create: \
                 Invalid HorizontalPodAutoscaler.autoscaling \"{hpa}\" is invalid: \
                 spec.minReplicas: Invalid value: 0: must be greater than or equal to 1"
            )
        }));
    }
    let new: Vec<&String> = refused.difference(&documented).collect();
    let gone: Vec<&String> = documented.difference(&refused).collect();
    assert!(
        new.is_empty() && gone.is_empty(),
        "{release}: the scenario objects a real API server refuses changed; update \
         DOCUMENTED_REFUSALS and docs/real-cluster-differences.md.\nnewly refused:\n  {}\nno longer refused:\n  {}",
        new.iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n  "),
        gone.iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n  "),
    );
}

/// The scenarios (file, HPA) whose HPA has `minReplicas: 0`, which a server without
/// HPAScaleToZero (1.35 and 1.36 by default) refuses.
const REFUSED_WITHOUT_SCALE_TO_ZERO: &[(&str, &str)] = &[
    ("branches/min-replicas-zero-scales-from-zero.yaml", "worker"),
    ("branches/min-replicas-zero-stays-at-zero.yaml", "worker"),
    (
        "metrics/external-value-scale-from-zero-ignores-tolerance.yaml",
        "web",
    ),
    ("metrics/object-value-scale-to-zero-and-back.yaml", "web"),
    ("versions/manual-zero-not-scaled-up-1-37.yaml", "worker"),
    (
        "versions/scaled-to-zero-condition-and-back-1-37.yaml",
        "web",
    ),
    (
        "versions/scaled-to-zero-condition-and-back-gate-on-1-36.yaml",
        "web",
    ),
    (
        "versions/scaled-to-zero-ignored-gate-off-1-37.yaml",
        "worker",
    ),
    (
        "versions/scaled-to-zero-scales-from-zero-1-37.yaml",
        "worker",
    ),
    (
        "versions/zero-replicas-disable-scaling-gate-off-1-36.yaml",
        "web",
    ),
];

/// The refusals of `every_scenario_object_a_real_apiserver_refuses_is_documented` on every
/// version, as `docs/real-cluster-differences.md` lists them.
const DOCUMENTED_REFUSALS: &[&str] = &[
    "test-fixtures/scenarios/faults-io/invalid-scale-target-api-version.yaml: HorizontalPodAutoscaler default/web: create: Invalid HorizontalPodAutoscaler.autoscaling \"web\" is invalid: spec.scaleTargetRef.apiVersion: Invalid value: \"apps/v1/extra\": unexpected GroupVersion string: apps/v1/extra",
    "test-fixtures/scenarios/metrics/invalid-metric-source-type.yaml: HorizontalPodAutoscaler default/web: create: Invalid HorizontalPodAutoscaler.autoscaling \"web\" is invalid: spec.metrics[0].type: Unsupported value: \"CheddarCheese\": supported values: \"ContainerResource\", \"External\", \"Object\", \"Pods\", \"Resource\"",
    "test-fixtures/scenarios/metrics/metric-targets-not-set.yaml: HorizontalPodAutoscaler default/web: create: Invalid HorizontalPodAutoscaler.autoscaling \"web\" is invalid: [spec.metrics[0].resource.target.averageUtilization: Required value: must set either a target raw value or a target utilization, spec.metrics[1].object.target.averageValue: Required value: must set either a target value or averageValue, spec.metrics[2].external.target.averageValue: Required value: must set either a target value for metric or a per-pod target]",
    "test-fixtures/scenarios/multi/invalid-type-no-scale-down.yaml: HorizontalPodAutoscaler default/web: create: Invalid HorizontalPodAutoscaler.autoscaling \"web\" is invalid: spec.metrics[1].type: Unsupported value: \"CheddarCheese\": supported values: \"ContainerResource\", \"External\", \"Object\", \"Pods\", \"Resource\"",
    "test-fixtures/scenarios/multi/invalid-type-scale-up-allowed.yaml: HorizontalPodAutoscaler default/web: create: Invalid HorizontalPodAutoscaler.autoscaling \"web\" is invalid: spec.metrics[1].type: Unsupported value: \"CheddarCheese\": supported values: \"ContainerResource\", \"External\", \"Object\", \"Pods\", \"Resource\"",
    "test-fixtures/scenarios/smoke/invalid-api-version.yaml: HorizontalPodAutoscaler default/web: create: Invalid HorizontalPodAutoscaler.autoscaling \"web\" is invalid: spec.scaleTargetRef.apiVersion: Invalid value: \"a/b/c\": unexpected GroupVersion string: a/b/c",
];

async fn delete(client: &kube::Client, obj: &Value) {
    let api_version = obj["apiVersion"].as_str().unwrap();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = kube::core::GroupVersionKind::gvk(group, version, kind(obj));
    let Ok((ar, caps)) = kube::discovery::pinned_kind(client, &gvk).await else {
        return;
    };
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap();
    let api: kube::Api<kube::api::DynamicObject> = match caps.scope {
        kube::discovery::Scope::Namespaced => kube::Api::namespaced_with(
            client.clone(),
            obj.pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("default"),
            &ar,
        ),
        kube::discovery::Scope::Cluster => kube::Api::all_with(client.clone(), &ar),
    };
    // Background propagation: the default for ReplicationControllers (orphan) adds a
    // finalizer that only the garbage collector, not running here, would remove.
    let dp = kube::api::DeleteParams {
        grace_period_seconds: Some(0),
        propagation_policy: Some(kube::api::PropagationPolicy::Background),
        ..Default::default()
    };
    let _ = api.delete(name, &dp).await;
    if kind(obj) == "CustomResourceDefinition" {
        wait_crd_gone(client, name).await;
    }
}

/// Waits until a CRD is gone (its Established wait is `hpa_cluster::load::wait_established`).
async fn wait_crd_gone(client: &kube::Client, name: &str) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let api: kube::Api<CustomResourceDefinition> = kube::Api::all(client.clone());
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        if api.get_opt(name).await.unwrap().is_none() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("CustomResourceDefinition {name}: not gone within 60 s");
}
