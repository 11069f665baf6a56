//! Decision traces of the recorded scenarios: every scenario (but the fault-injection ones,
//! whose written status differs from the decision on purpose) runs step by step against the
//! in-process fixture API, as the replay runner runs it, and after each step the latest trace
//! of each synced HPA must say what upstream's expectation says: the desired replicas, the
//! condition reasons and the scale writes. Across all scenarios, the traces must cover every
//! branch: each metric type, failures, both stabilization directions, each behavior policy
//! limit and the legacy limit, min/max, and the three no-metric branches.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hpa_config::Options;
use hpa_fixtures::scenario::{self, Scenario, Step};
use hpa_fixtures::server::in_process_client;
use hpa_fixtures::store::{Store, split_api_version};
use hpa_horizontal::{
    ControllerConfig, ControllerParts, DecisionTrace, HorizontalController, KubeScaleClient,
};
use hpa_metrics::{AvailableApis, DeferredRestMapper, RestMetricsClient};
use serde_json::Value;

const SCENARIOS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../test-fixtures/scenarios");
const CACHE_WAIT: Duration = Duration::from_secs(10);

fn with_default_namespaces(store: &Store, step: &Step) -> Step {
    let mut step = step.clone();
    for obj in &mut step.apply {
        let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
        let (group, _) = split_api_version(api_version);
        let namespaced = store.find_kind(group, kind).is_some_and(|rt| rt.namespaced);
        if namespaced
            && let Some(md) = obj.get_mut("metadata").and_then(Value::as_object_mut)
            && !md.contains_key("namespace")
        {
            md.insert("namespace".to_owned(), Value::String("default".to_owned()));
        }
    }
    step
}

fn versions(store: &Store, group: &str, resource: &str) -> BTreeMap<String, String> {
    store
        .list(group, resource, None)
        .0
        .iter()
        .map(|o| {
            let s = |p: &str| {
                o.pointer(p)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned()
            };
            let (ns, name) = (s("/metadata/namespace"), s("/metadata/name"));
            let key = if ns.is_empty() {
                name
            } else {
                format!("{ns}/{name}")
            };
            (key, s("/metadata/resourceVersion"))
        })
        .collect()
}

async fn caught_up(controller: &HorizontalController, store: &Store) {
    let deadline = tokio::time::Instant::now() + CACHE_WAIT;
    loop {
        // As the replay runner: the scale target caches that have listed must hold the
        // store's targets too (a cache still listing is not read).
        let targets_caught_up = controller
            .scale_target_versions()
            .unwrap_or_default()
            .into_iter()
            .all(|((group, resource), have)| {
                have.into_iter().collect::<BTreeMap<_, _>>() == versions(store, &group, &resource)
            });
        if controller.hpa_versions() == versions(store, "autoscaling", "horizontalpodautoscalers")
            && controller.pod_versions() == versions(store, "", "pods")
            && targets_caught_up
        {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "caches did not catch up"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// The controller of `flags` over `store` (in process, on the store's virtual clock), with
/// its caches synced.
async fn controller_for(store: &Store, flags: &BTreeMap<String, String>) -> HorizontalController {
    let parsed = Options::from_flag_map(flags).unwrap();
    let clock = store.virtual_clock().cloned().unwrap();
    let client = in_process_client(store.clone());
    let apis = AvailableApis::new();
    let mapper = DeferredRestMapper::with_clock(client.clone(), Arc::new(clock.clone()));
    let metrics = RestMetricsClient::with_rest_mapper(client.clone(), apis.clone(), mapper.clone());
    let scale = KubeScaleClient::with_rest_mapper(client.clone(), mapper);
    let controller = HorizontalController::new(ControllerParts {
        client,
        metrics_client: Arc::new(metrics),
        available_apis: Some(apis),
        scale_client: Some(Arc::new(scale)),
        config: ControllerConfig::from_options(&parsed.options),
        clock: Arc::new(clock),
        registry: prometheus::Registry::new(),
        workqueue_metrics: None,
        log_emissions: false,
    })
    .unwrap();
    controller.start_caches();
    tokio::time::timeout(CACHE_WAIT, controller.wait_for_cache_sync())
        .await
        .unwrap()
        .unwrap();
    controller
}

/// Runs `scenario`; returns every step's traces (one per synced key), the mismatches with
/// the step's expectations, and how many expectations were compared.
async fn run(scenario: &Scenario) -> (Vec<DecisionTrace>, Vec<String>, usize) {
    let store = Store::from_scenario(scenario).unwrap();
    let controller = controller_for(&store, &scenario.flags).await;
    let mut traces = Vec::new();
    let mut mismatches = Vec::new();
    let mut compared = 0;
    for (i, step) in scenario.steps.iter().enumerate() {
        store
            .apply_step(scenario.start, &with_default_namespaces(&store, step))
            .unwrap();
        caught_up(&controller, &store).await;
        let mut step_traces: BTreeMap<String, DecisionTrace> = BTreeMap::new();
        for key in &step.sync {
            let before = controller.traces().get(key).len();
            let _ = controller.reconcile_key(key).await;
            caught_up(&controller, &store).await;
            let kept = controller.traces().get(key);
            // A reconcile that stopped before deciding (scale GET failed) keeps no trace.
            if (kept.len() > before || kept.len() == hpa_horizontal::TRACES_PER_HPA)
                && let Some(t) = kept.last()
                && t.time == store.now()
            {
                step_traces.insert(key.clone(), t.clone());
            }
        }
        let Some(expect) = &step.expect else {
            traces.extend(step_traces.into_values());
            continue;
        };
        let at = format!("{} step {i}", scenario.name);
        if let Some(scales) = &expect.scale {
            let written: Vec<i32> = step_traces
                .values()
                .filter(|t| t.write.scale == "succeeded")
                .map(|t| t.desired_replicas)
                .collect();
            let want: Vec<i32> = scales.iter().map(|s| s.replicas).collect();
            if step.sync.len() == 1 {
                compared += 1;
            }
            if step.sync.len() == 1 && written != want {
                mismatches.push(format!("{at}: scale writes {written:?}, expected {want:?}"));
            }
        }
        for (key, partial) in expect.hpa.iter().flatten() {
            let Some(t) = step_traces.get(key) else {
                continue;
            };
            let status = &partial["status"];
            compared += usize::from(status.get("desiredReplicas").is_some());
            if let Some(d) = status.get("desiredReplicas").and_then(Value::as_i64)
                && i64::from(t.desired_replicas) != d
            {
                mismatches.push(format!(
                    "{at} {key}: trace desiredReplicas {}, expected {d}",
                    t.desired_replicas
                ));
            }
            for c in status
                .get("conditions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                compared += 1;
                let ty = c["type"].as_str().unwrap_or("");
                let found = t.conditions.iter().find(|tc| tc.type_ == ty);
                let ok = found.is_some_and(|tc| {
                    c.get("reason")
                        .and_then(Value::as_str)
                        .is_none_or(|r| r == tc.reason)
                        && c.get("status")
                            .and_then(Value::as_str)
                            .is_none_or(|s| s == tc.status)
                });
                if !ok {
                    mismatches.push(format!(
                        "{at} {key}: trace condition {found:?}, expected {c}"
                    ));
                }
            }
        }
        traces.extend(step_traces.into_values());
    }
    controller.stop();
    (traces, mismatches, compared)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traces_of_every_scenario_agree_with_upstream_and_cover_every_branch() {
    let files = scenario::collect_files(&[Path::new(SCENARIOS).to_path_buf()]).unwrap();
    let mut all = Vec::new();
    let mut mismatches = Vec::new();
    let mut ran = 0;
    let mut compared = 0;
    for file in files {
        let dir = file
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if dir.starts_with("faults") {
            continue;
        }
        let s = scenario::load_file(&file).unwrap();
        let (traces, m, c) = run(&s).await;
        ran += 1;
        compared += c;
        all.extend(traces);
        mismatches.extend(m);
    }
    assert!(ran > 50, "only {ran} scenarios ran");
    assert!(compared > 300, "only {compared} expectations compared");
    eprintln!(
        "{ran} scenarios, {} traces, {compared} expectations compared",
        all.len()
    );
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));

    // Coverage of every branch.
    let mut seen: BTreeSet<String> = BTreeSet::new();
    for t in &all {
        seen.insert(format!("branch {}", t.branch));
        for m in &t.metrics {
            // A metric fallen back to a replica count (`kube-hpa-controller.io/metric-fallback`)
            // proposes that count: no value was read, so there is no ratio.
            let fallback_replicas = m
                .fallback
                .as_ref()
                .is_some_and(|f| f.in_effect && f.replicas.is_some());
            if m.proposal.is_some() && !fallback_replicas {
                seen.insert(format!("metric {}", m.type_));
                // A per-pod average over a target at 0 replicas has no finite ratio
                // (upstream divides by 0: NaN or +Inf), recorded from KCM 1.37.
                assert!(
                    m.usage_ratio.is_some() || t.target.status_replicas == 0,
                    "{}: {m:?}",
                    t.hpa
                );
                assert!(
                    m.current.is_some() && m.target.is_some(),
                    "{}: {m:?}",
                    t.hpa
                );
            }
            if let Some(e) = &m.error {
                seen.insert(format!("error {}", e.reason));
            }
            if let Some(p) = &m.pods {
                // Every pod not counted as ready says why, in the calculator's words.
                for note in p.unready.iter().chain(&p.missing).chain(&p.ignored) {
                    assert!(
                        ![hpa_horizontal::WHY_UNREADY, hpa_horizontal::WHY_IGNORED]
                            .contains(&note.why.as_str()),
                        "{}: {note:?}",
                        t.hpa
                    );
                }
                if !p.unready.is_empty() {
                    seen.insert("pods unready".into());
                }
                if !p.missing.is_empty() {
                    seen.insert("pods missing".into());
                }
                if !p.ignored.is_empty() {
                    seen.insert("pods ignored".into());
                }
            }
            if m.ready_pods.is_some() {
                seen.insert("ready pods".into());
            }
            if !m.values_milli.is_empty() {
                seen.insert("external values".into());
            }
        }
        if let Some(st) = &t.stabilization {
            seen.insert(format!("stabilization {}", st.reason));
        }
        if let Some(rl) = &t.rate_limit {
            seen.insert(format!("rate limit {}", rl.kind));
            for p in &rl.policies {
                seen.insert(format!("{} policy {}", rl.direction, p.type_));
            }
        }
        if let Some(b) = &t.clamp.bound_by {
            seen.insert(format!("bound {b}"));
        }
    }
    for want in [
        "branch FromMetrics",
        "branch AboveMax",
        "branch BelowMin",
        "branch ScalingDisabled",
        "branch FailedGetScale",
        "metric Resource",
        "metric ContainerResource",
        "metric Pods",
        "metric Object",
        "metric External",
        "error FailedGetResourceMetric",
        "error FailedGetExternalMetric",
        "pods unready",
        "pods missing",
        "ready pods",
        "external values",
        "stabilization ScaleDownStabilized",
        "stabilization ScaleUpStabilized",
        "stabilization ReadyForNewScale",
        "rate limit legacy",
        "rate limit behavior",
        "scaleUp policy Pods",
        "scaleUp policy Percent",
        "scaleDown policy Pods",
        "scaleDown policy Percent",
        "bound DesiredWithinRange",
        "bound ScaleUpLimit",
        "bound ScaleDownLimit",
        "bound TooManyReplicas",
        "bound TooFewReplicas",
    ] {
        assert!(
            seen.contains(want),
            "no trace shows {want:?}; seen: {seen:?}"
        );
    }
}

/// Shadow mode with `spec.behavior`: the active controller's rescale, observed as a change of
/// the target, counts in the shadow's policy periods, so the shadow holds the next scale-up
/// as the active controller does (and agrees), instead of allowing it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_counts_the_active_controllers_rescales_in_its_policies() {
    let file = Path::new(SCENARIOS).join("resource/cpu-utilization-scale-up.yaml");
    let mut s = scenario::load_file(&file).unwrap();
    // One pod per minute up; 2 pods at twice the target ask for 4.
    s.objects[0]["spec"]["behavior"] = serde_json::json!({
        "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                    "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]}
    });
    let mut flags = s.flags.clone();
    flags.insert("shadow".into(), "true".into());
    let store = Store::from_scenario(&s).unwrap();
    let clock = store.virtual_clock().cloned().unwrap();
    let controller = controller_for(&store, &flags).await;
    let key = "default/web";
    let latest = |c: &HorizontalController| c.traces().latest_of(key).unwrap();

    controller.reconcile_key(key).await.unwrap();
    let first = latest(&controller);
    assert_eq!((first.prenormalized, first.desired_replicas), (Some(4), 3));
    assert_eq!(first.write.scale, "shadow");
    assert_eq!(
        first.rate_limit.as_ref().unwrap().policies[0].limit,
        Some(3)
    );

    // The active controller (this test) makes the same decision: scale to 3, status.
    let client = in_process_client(store.clone());
    let deployments: kube::Api<k8s_openapi::api::apps::v1::Deployment> =
        kube::Api::namespaced(client.clone(), "default");
    let mut scale = deployments.get_scale("web").await.unwrap();
    scale.spec.get_or_insert_with(Default::default).replicas = Some(3);
    deployments
        .replace_scale("web", &Default::default(), &scale)
        .await
        .unwrap();
    let hpas: kube::Api<k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler> =
        kube::Api::namespaced(client, "default");
    let mut hpa = hpas.get("web").await.unwrap();
    hpa.status = Some(
        serde_json::from_value(serde_json::json!({
            "currentReplicas": 2, "desiredReplicas": 3,
            "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu",
                "current": {"averageUtilization": 100, "averageValue": "100m"}}}],
            "conditions": [
                {"type": "AbleToScale", "status": "True", "reason": "SucceededRescale"},
                {"type": "ScalingActive", "status": "True", "reason": "ValidMetricFound"},
                {"type": "ScalingLimited", "status": "True", "reason": "ScaleUpLimit"}
            ]
        }))
        .unwrap(),
    );
    hpas.replace_status("web", &Default::default(), &hpa)
        .await
        .unwrap();
    caught_up(&controller, &store).await;

    // 15 s later: the rescale of 1 is within the 60 s period, so it starts at 2 and the
    // limit stays 3.
    clock.advance(jiff::SignedDuration::from_secs(15));
    controller.reconcile_key(key).await.unwrap();
    let second = latest(&controller);
    assert_eq!(second.target.spec_replicas, 3);
    let policy = &second.rate_limit.as_ref().unwrap().policies[0];
    assert_eq!(
        (policy.period_start, policy.limit),
        (2, Some(3)),
        "{second:?}"
    );
    assert_eq!(second.desired_replicas, 3);
    assert_eq!(second.clamp.bound_by.as_deref(), Some("ScaleUpLimit"));
    // And the active controller's status agrees with the first decision.
    let record = controller.shadow_comparisons().get(key).unwrap();
    let latest = record.latest.unwrap();
    assert_eq!(
        latest.result,
        hpa_horizontal::ShadowResult::Agree,
        "{}",
        latest.summary
    );
    controller.stop();
}
