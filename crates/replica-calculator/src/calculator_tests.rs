//! Tests of the async shell ([`crate::calculator`]) with `mockall` mocks of the metrics client
//! and the pod lister: every upstream case of `replica_calculator_test.go` once more end to end
//! (fetch, wrap, compute, timestamps), plus the arguments passed to the clients, error texts and
//! the lazy pod listing.

use std::sync::Arc;

use hpa_metrics::{FetchError, MetricsError, MockMetricsClient, Selector};
use jiff::Timestamp;
use k8s_openapi::api::autoscaling::v2::CrossVersionObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::calculator::{
    ExternalMetric, MetricReplicas, ObjectMetric, PodsMetric, ReplicaCalculator, ReplicaQuery,
    ResourceMetric,
};
use crate::pod_lister::{MockPodLister, PodListError};
use crate::target::MetricTarget;
use crate::upstream_tests::{
    MetricCase, MetricType, ResourceCase, TEST_NAMESPACE, assert_no_failures, metric_cases, now,
    resource_cases, resource_mismatch, run_metric_pure, run_resource_pure, test_config,
};
use hpa_decision::tolerance::Tolerances;

/// The timestamp the mocked metrics client reports (upstream's fakes use the zero time; a
/// distinct value shows which methods pass it through).
fn metrics_ts() -> Timestamp {
    Timestamp::constant(1_767_225_000, 0)
}

fn pod_selector() -> Selector {
    "name=test-pod".parse().expect("selector")
}

/// The scale target's side of a calculation in the test namespace at [`now`], with `replicas`
/// both in `spec` and in `status` (upstream's tests pass `currentReplicas` for both).
fn query(selector: &Selector, replicas: i32, tolerances: Tolerances) -> ReplicaQuery<'_> {
    ReplicaQuery {
        namespace: TEST_NAMESPACE,
        spec_replicas: replicas,
        status_replicas: replicas,
        selector,
        tolerances,
        now: now(),
        ownership: None,
    }
}

fn deployment() -> CrossVersionObjectReference {
    CrossVersionObjectReference {
        api_version: Some("apps/v1".to_owned()),
        kind: "Deployment".to_owned(),
        name: "some-deployment".to_owned(),
    }
}

fn label_value_selector() -> LabelSelector {
    LabelSelector {
        match_labels: Some([("label".to_owned(), "value".to_owned())].into()),
        match_expressions: None,
    }
}

fn lister_for(pods: Vec<Arc<k8s_openapi::api::core::v1::Pod>>) -> MockPodLister {
    let mut lister = MockPodLister::new();
    lister
        .expect_list()
        .withf(|ns, sel| ns == TEST_NAMESPACE && sel.to_string() == "name=test-pod")
        .returning(move |_, _| Ok(pods.clone()));
    lister
}

fn calculator(metrics: MockMetricsClient, lister: MockPodLister) -> ReplicaCalculator {
    ReplicaCalculator::new(Arc::new(metrics), Arc::new(lister), test_config())
}

async fn run_resource_shell(case: &ResourceCase) -> Result<(i32, i32, i64), String> {
    let mut metrics = MockMetricsClient::new();
    let sample = case.scenario.resource_metrics();
    let container = case.scenario.container;
    metrics
        .expect_get_resource_metric()
        .withf(move |resource, ns, sel, c| {
            resource == "cpu"
                && ns == TEST_NAMESPACE
                && sel.to_string() == "name=test-pod"
                && *c == container
        })
        .times(1)
        .returning(move |_, _, _, _| match &sample {
            Some(m) => Ok((m.clone(), metrics_ts())),
            None => Err(MetricsError::NoResourceMetrics),
        });
    let calc = calculator(metrics, lister_for(case.scenario.pods()));
    let selector = pod_selector();
    let got = calc
        .get_resource_replicas(
            &query(
                &selector,
                case.scenario.current_replicas,
                case.tolerances.unwrap_or_default(),
            ),
            &ResourceMetric {
                resource: "cpu",
                container: case.scenario.container,
            },
            case.target_utilization,
        )
        .await
        .map_err(|e| e.to_string())?;
    assert_eq!(got.timestamp, Some(metrics_ts()), "{}", case.name);
    let utilization = got
        .utilization
        .expect("a utilization target reports the utilization");
    Ok((got.replica_count, utilization, got.usage))
}

#[tokio::test]
async fn resource_replicas_upstream_cases_through_the_shell() {
    let mut failures = Vec::new();
    for case in resource_cases() {
        let got = run_resource_shell(&case).await;
        failures.extend(resource_mismatch(&case, &got));
        // The pure core and the shell agree (the shell only adds fetching).
        if case.scenario.resource_metrics().is_some() && run_resource_pure(&case) != got {
            failures.push(format!("{}: pure and shell differ", case.name));
        }
    }
    assert_no_failures(&failures);
}

async fn run_metric_shell(case: &MetricCase) -> MetricReplicas {
    let s = &case.scenario;
    let levels = s.metric_levels.clone();
    let mut metrics = MockMetricsClient::new();
    let tolerances = case.tolerances.unwrap_or_default();
    let selector = pod_selector();
    let everything = Selector::everything();
    let object = deployment();
    let metric_selector = label_value_selector();
    match case.metric_type {
        MetricType::Object | MetricType::ObjectPerPod => {
            metrics
                .expect_get_object_metric()
                .withf(|name, ns, obj, _| {
                    name == "qps" && ns == TEST_NAMESPACE && obj.name == "some-deployment"
                })
                .times(1)
                .returning(move |_, _, _, _| Ok((levels[0], metrics_ts())));
        }
        MetricType::External | MetricType::ExternalPerPod => {
            metrics
                .expect_get_external_metric()
                .withf(|name, ns, sel| {
                    name == "qps" && ns == TEST_NAMESPACE && sel.to_string() == "label=value"
                })
                .times(1)
                .returning(move |_, _, _| Ok((levels.clone(), metrics_ts())));
        }
        MetricType::Pods => {
            let sample = s.pods_metrics();
            metrics
                .expect_get_raw_metric()
                .withf(|name, ns, sel, _| {
                    name == "qps" && ns == TEST_NAMESPACE && sel.to_string() == "name=test-pod"
                })
                .times(1)
                .returning(move |_, _, _, _| Ok((sample.clone(), metrics_ts())));
        }
    }
    let calc = calculator(metrics, lister_for(s.pods()));
    let query = query(&selector, s.current_replicas, tolerances);
    let object_metric = ObjectMetric {
        metric_name: "qps",
        object_ref: &object,
        metric_selector: &everything,
    };
    let external_metric = ExternalMetric {
        metric_name: "qps",
        metric_selector: Some(&metric_selector),
    };
    let result = match case.metric_type {
        MetricType::Object => {
            calc.get_object_metric_replicas(&query, &object_metric, case.target)
                .await
        }
        MetricType::ObjectPerPod => {
            calc.get_object_per_pod_metric_replicas(&query, &object_metric, case.target)
                .await
        }
        MetricType::External => {
            calc.get_external_metric_replicas(&query, &external_metric, case.target)
                .await
        }
        MetricType::ExternalPerPod => {
            calc.get_external_per_pod_metric_replicas(&query, &external_metric, case.target)
                .await
        }
        MetricType::Pods => {
            calc.get_metric_replicas(
                &query,
                &PodsMetric {
                    metric_name: "qps",
                    metric_selector: &everything,
                },
                case.target,
            )
            .await
        }
    };
    result.unwrap_or_else(|e| panic!("{}: {e}", case.name))
}

#[tokio::test]
async fn metric_replicas_upstream_cases_through_the_shell() {
    for case in metric_cases() {
        let got = run_metric_shell(&case).await;
        assert_eq!(
            case.expected,
            (got.replica_count, got.usage),
            "{}",
            case.name
        );
        assert_eq!(
            run_metric_pure(&case).expect("pure"),
            (got.replica_count, got.usage),
            "{}",
            case.name
        );
        // Object / External `Value` results carry Go's zero time; the others the metric's.
        let want_ts = match case.metric_type {
            MetricType::Object | MetricType::External => None,
            _ => Some(metrics_ts()),
        };
        assert_eq!(want_ts, got.timestamp, "{}", case.name);
    }
}

fn failing_fetch() -> FetchError {
    FetchError::other("boom")
}

#[tokio::test]
async fn resource_fetch_errors_are_wrapped() {
    let mut metrics = MockMetricsClient::new();
    metrics
        .expect_get_resource_metric()
        .returning(|_, _, _, _| Err(MetricsError::ResourceFetch(failing_fetch())));
    let mut lister = MockPodLister::new();
    lister.expect_list().times(0);
    let calc = calculator(metrics, lister);
    let selector = pod_selector();
    let err = calc
        .get_raw_resource_replicas(
            &query(&selector, 1, Tolerances::default()),
            &ResourceMetric {
                resource: "memory",
                container: Some(""),
            },
            100,
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "unable to get metrics for resource memory: unable to fetch metrics from resource metrics API: boom"
    );
}

#[tokio::test]
async fn raw_resource_replicas_pass_the_container_and_apply_cpu_readiness() {
    // Two pods; pod 1 is not ready (Ready=False, zero start and transition times) so its CPU
    // sample is dropped; the scale-up then fills it in with 0.
    let scenario = crate::upstream_tests::Scenario {
        current_replicas: 2,
        readiness: vec!["True", "False"],
        ..Default::default()
    };
    let pods = scenario.pods();
    let sample: hpa_metrics::PodMetricsInfo = [("test-pod-0", 3000), ("test-pod-1", 3000)]
        .into_iter()
        .map(|(n, v)| {
            (
                n.to_owned(),
                hpa_metrics::PodMetric {
                    timestamp: crate::GO_ZERO_TIME,
                    window: std::time::Duration::from_secs(60),
                    value: v,
                },
            )
        })
        .collect();
    let mut metrics = MockMetricsClient::new();
    metrics
        .expect_get_resource_metric()
        .withf(|r, _, _, c| r == "cpu" && *c == Some("app"))
        .returning(move |_, _, _, _| Ok((sample.clone(), metrics_ts())));
    let calc = calculator(metrics, lister_for(pods));
    let selector = pod_selector();
    let got = calc
        .get_raw_resource_replicas(
            &query(&selector, 2, Tolerances::default()),
            &ResourceMetric {
                resource: "cpu",
                container: Some("app"),
            },
            1000,
        )
        .await
        .unwrap();
    // usage 3000 (ready pod only), ratio 3; with the unready pod at 0: 1500/1000 × 2 = 3.
    assert_eq!(
        (got.replica_count, got.usage, got.timestamp),
        (3, 3000, Some(metrics_ts()))
    );
    // The trace detail: first ratio 3 (ready pod only), 1.5 after the fill-in; one ready
    // pod, the other unready.
    assert_eq!(got.detail.usage_ratio, 3.0);
    assert_eq!(got.detail.recomputed_usage_ratio, Some(1.5));
    let pods = got.detail.pods.unwrap();
    assert_eq!(pods.ready_pod_count, 1);
    assert!(pods.reasons["test-pod-1"].starts_with("cpu: "), "{pods:?}");
    assert_eq!(
        pods.unready_pods.into_iter().collect::<Vec<_>>(),
        vec!["test-pod-1".to_owned()]
    );
    assert!(pods.missing_pods.is_empty() && pods.ignored_pods.is_empty());
}

#[tokio::test]
async fn pods_metric_errors_are_wrapped() {
    let mut metrics = MockMetricsClient::new();
    metrics
        .expect_get_raw_metric()
        .returning(|_, _, _, _| Err(MetricsError::NoCustomMetrics));
    let calc = calculator(metrics, MockPodLister::new());
    let selector = pod_selector();
    let err = calc
        .get_metric_replicas(
            &query(&selector, 1, Tolerances::default()),
            &PodsMetric {
                metric_name: "qps",
                metric_selector: &Selector::everything(),
            },
            1,
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "unable to get metric qps: no metrics returned from custom metrics API"
    );
}

#[tokio::test]
async fn object_metric_errors_keep_upstreams_argument_order() {
    for (per_pod, fixed) in [(false, false), (true, false), (false, true), (true, true)] {
        let mut metrics = MockMetricsClient::new();
        metrics
            .expect_get_object_metric()
            .returning(|_, _, _, _| Err(MetricsError::CustomFetch(failing_fetch())));
        let mut config = test_config();
        config.object_metric_error_fixed = fixed;
        let calc =
            ReplicaCalculator::new(Arc::new(metrics), Arc::new(MockPodLister::new()), config);
        let object = deployment();
        let everything = Selector::everything();
        let selector = pod_selector();
        let query = ReplicaQuery {
            namespace: "default",
            ..query(&selector, 1, Tolerances::default())
        };
        let metric = ObjectMetric {
            metric_name: "qps",
            object_ref: &object,
            metric_selector: &everything,
        };
        let err = if per_pod {
            calc.get_object_per_pod_metric_replicas(&query, &metric, 1)
                .await
        } else {
            calc.get_object_metric_replicas(&query, &metric, 1).await
        }
        .unwrap_err();
        let want = if fixed {
            // 1.37 (kubernetes#139029).
            "unable to get metric qps on Deployment default/some-deployment: unable to fetch metrics from custom metrics API: boom"
        } else {
            "unable to get metric qps: Deployment on default some-deployment/unable to fetch metrics from custom metrics API: boom"
        };
        assert_eq!(err.to_string(), want);
    }
}

#[tokio::test]
async fn object_metric_within_tolerance_does_not_list_pods() {
    let mut metrics = MockMetricsClient::new();
    metrics
        .expect_get_object_metric()
        .returning(|_, _, _, _| Ok((1050, metrics_ts())));
    let mut lister = MockPodLister::new();
    lister.expect_list().times(0);
    let calc = calculator(metrics, lister);
    let got = calc
        .get_object_metric_replicas(
            &query(&pod_selector(), 4, Tolerances::default()),
            &ObjectMetric {
                metric_name: "qps",
                object_ref: &deployment(),
                metric_selector: &Selector::everything(),
            },
            1000,
        )
        .await
        .unwrap();
    assert_eq!(
        (got.replica_count, got.usage, got.timestamp),
        (4, 1050, None)
    );
}

#[tokio::test]
async fn ready_pod_listing_errors_are_wrapped_twice() {
    let mut metrics = MockMetricsClient::new();
    metrics
        .expect_get_external_metric()
        .returning(|_, _, _| Ok((vec![5000], metrics_ts())));
    let mut lister = MockPodLister::new();
    lister
        .expect_list()
        .times(1)
        .returning(|_, _| Err(PodListError::new("cache not synced")));
    let calc = calculator(metrics, lister);
    let err = calc
        .get_external_metric_replicas(
            &query(&pod_selector(), 2, Tolerances::default()),
            &ExternalMetric {
                metric_name: "qps",
                metric_selector: None,
            },
            1000,
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "unable to calculate ready pods: unable to get pods while calculating replica count: cache not synced"
    );
}

#[tokio::test]
async fn external_metric_errors_render_the_selector_like_go() {
    let mut metrics = MockMetricsClient::new();
    metrics
        .expect_get_external_metric()
        .returning(|_, _, _| Err(MetricsError::NoExternalMetrics));
    let calc = calculator(metrics, MockPodLister::new());
    let selector = label_value_selector();
    let err = calc
        .get_external_per_pod_metric_replicas(
            &query(&pod_selector(), 1, Tolerances::default()),
            &ExternalMetric {
                metric_name: "qps",
                metric_selector: Some(&selector),
            },
            1,
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "unable to get external metric test-namespace/qps/&LabelSelector{MatchLabels:map[string]string{label: value,},MatchExpressions:[]LabelSelectorRequirement{},}: no metrics returned from external metrics API"
    );
}

#[tokio::test]
async fn invalid_external_metric_selector_is_returned_unwrapped() {
    let mut metrics = MockMetricsClient::new();
    metrics.expect_get_external_metric().times(0);
    let calc = calculator(metrics, MockPodLister::new());
    let selector = LabelSelector {
        match_labels: None,
        match_expressions: Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
                key: "a".to_owned(),
                operator: "Bogus".to_owned(),
                values: None,
            },
        ]),
    };
    let err = calc
        .get_external_metric_replicas(
            &query(&pod_selector(), 1, Tolerances::default()),
            &ExternalMetric {
                metric_name: "qps",
                metric_selector: Some(&selector),
            },
            1,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, crate::CalculatorError::MetricSelector(_)),
        "{err:?}"
    );
}

#[tokio::test]
async fn resource_replicas_report_list_errors_and_empty_lists() {
    for (listed, want) in [
        (
            Err(PodListError::new("boom")),
            "unable to get pods while calculating replica count: boom",
        ),
        (
            Ok(vec![]),
            "no pods returned by selector while calculating replica count",
        ),
    ] {
        let mut metrics = MockMetricsClient::new();
        metrics
            .expect_get_resource_metric()
            .returning(|_, _, _, _| Ok((Default::default(), metrics_ts())));
        let mut lister = MockPodLister::new();
        lister.expect_list().return_once(move |_, _| listed);
        let calc = calculator(metrics, lister);
        let selector = pod_selector();
        let err = calc
            .get_resource_replicas(
                &query(&selector, 1, Tolerances::default()),
                &ResourceMetric {
                    resource: "cpu",
                    container: None,
                },
                50,
            )
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), want);
    }
}

/// The metrics-client call a `Get*Replicas` method makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fetch {
    Resource,
    Pods,
    Object,
    External,
}

/// Three ready pods requesting 1 CPU per container, with CPU samples and per-pod `qps`.
fn dispatch_scenario() -> crate::upstream_tests::Scenario {
    crate::upstream_tests::Scenario {
        current_replicas: 3,
        requests: crate::upstream_tests::cpu_requests(3, "1.0"),
        levels: crate::upstream_tests::levels(&[300, 500, 700]),
        metric_levels: vec![300, 500, 700],
        ..Default::default()
    }
}

/// A calculator whose metrics client answers `fetch` exactly once and fails the test on any
/// other call, and whose pod lister must be called exactly `listings` times.
fn strict_calculator(fetch: Fetch, listings: usize) -> ReplicaCalculator {
    let scenario = dispatch_scenario();
    let mut metrics = MockMetricsClient::new();
    let times = |kind: Fetch| usize::from(kind == fetch);
    let resource = scenario.resource_metrics().expect("cpu samples");
    metrics
        .expect_get_resource_metric()
        .times(times(Fetch::Resource))
        .returning(move |_, _, _, _| Ok((resource.clone(), metrics_ts())));
    let pods = scenario.pods_metrics();
    metrics
        .expect_get_raw_metric()
        .times(times(Fetch::Pods))
        .returning(move |_, _, _, _| Ok((pods.clone(), metrics_ts())));
    metrics
        .expect_get_object_metric()
        .times(times(Fetch::Object))
        .returning(|_, _, _, _| Ok((5000, metrics_ts())));
    metrics
        .expect_get_external_metric()
        .times(times(Fetch::External))
        .returning(|_, _, _| Ok((vec![2000, 3000], metrics_ts())));
    metrics.expect_list_namespace_pod_metrics().times(0);
    metrics.expect_list_namespace_raw_metric().times(0);
    let mut lister = MockPodLister::new();
    let listed = scenario.pods();
    lister
        .expect_list()
        .withf(|ns, sel| ns == TEST_NAMESPACE && sel.to_string() == "name=test-pod")
        .times(listings)
        .returning(move |_, _| Ok(listed.clone()));
    calculator(metrics, lister)
}

#[tokio::test]
async fn calculate_calls_the_method_its_target_names() {
    let selector = pod_selector();
    let everything = Selector::everything();
    let object = deployment();
    let metric_selector = label_value_selector();
    // `spec` and `status` replicas differ, so a per-pod method is told apart by its count.
    let query = ReplicaQuery {
        status_replicas: 2,
        ..query(&selector, 3, Tolerances::default())
    };
    let resource = ResourceMetric {
        resource: "cpu",
        container: None,
    };
    let pods = PodsMetric {
        metric_name: "qps",
        metric_selector: &everything,
    };
    let object_metric = ObjectMetric {
        metric_name: "qps",
        object_ref: &object,
        metric_selector: &everything,
    };
    let external = ExternalMetric {
        metric_name: "qps",
        metric_selector: Some(&metric_selector),
    };

    // Each target, the fetch and pod listings its method makes, and that method called
    // directly (on a calculator of its own, so every mock counts one call only).
    let cases: Vec<(MetricTarget<'_>, Fetch, usize, MetricReplicas)> = vec![
        (
            MetricTarget::ResourceUtilization {
                metric: resource,
                utilization: 30,
            },
            Fetch::Resource,
            1,
            strict_calculator(Fetch::Resource, 1)
                .get_resource_replicas(&query, &resource, 30)
                .await
                .unwrap(),
        ),
        (
            MetricTarget::ResourceAverageValue {
                metric: resource,
                average_value: 400,
            },
            Fetch::Resource,
            1,
            strict_calculator(Fetch::Resource, 1)
                .get_raw_resource_replicas(&query, &resource, 400)
                .await
                .unwrap(),
        ),
        (
            MetricTarget::PodsAverageValue {
                metric: pods,
                average_value: 400,
            },
            Fetch::Pods,
            1,
            strict_calculator(Fetch::Pods, 1)
                .get_metric_replicas(&query, &pods, 400)
                .await
                .unwrap(),
        ),
        (
            MetricTarget::ObjectValue {
                metric: object_metric,
                value: 1000,
            },
            Fetch::Object,
            1,
            strict_calculator(Fetch::Object, 1)
                .get_object_metric_replicas(&query, &object_metric, 1000)
                .await
                .unwrap(),
        ),
        (
            MetricTarget::ObjectAverageValue {
                metric: object_metric,
                average_value: 1000,
            },
            Fetch::Object,
            0,
            strict_calculator(Fetch::Object, 0)
                .get_object_per_pod_metric_replicas(&query, &object_metric, 1000)
                .await
                .unwrap(),
        ),
        (
            MetricTarget::ExternalValue {
                metric: external,
                value: 1000,
            },
            Fetch::External,
            1,
            strict_calculator(Fetch::External, 1)
                .get_external_metric_replicas(&query, &external, 1000)
                .await
                .unwrap(),
        ),
        (
            MetricTarget::ExternalAverageValue {
                metric: external,
                average_value: 1000,
            },
            Fetch::External,
            0,
            strict_calculator(Fetch::External, 0)
                .get_external_per_pod_metric_replicas(&query, &external, 1000)
                .await
                .unwrap(),
        ),
    ];
    // Methods sharing a fetch give different results here, so equal results below show
    // which method ran, not only which fetch.
    for (a, b) in [(0, 1), (3, 4), (5, 6)] {
        assert_ne!(
            cases[a].3, cases[b].3,
            "{:?} / {:?}",
            cases[a].0, cases[b].0
        );
    }
    for (target, fetch, listings, direct) in &cases {
        // Dropping the calculator checks the mocks' call counts.
        let calc = strict_calculator(*fetch, *listings);
        let got = calc.calculate(&query, target).await.unwrap();
        drop(calc);
        assert_eq!(&got, direct, "{target:?}");
    }
    // Only a utilization target reports a utilization; Value targets report Go's zero time.
    let utilizations: Vec<_> = cases.iter().map(|c| c.3.utilization.is_some()).collect();
    assert_eq!(
        utilizations,
        [true, false, false, false, false, false, false]
    );
    let zero_times: Vec<_> = cases.iter().map(|c| c.3.timestamp.is_none()).collect();
    assert_eq!(zero_times, [false, false, false, true, false, true, false]);
}

/// With an ownership (the `OwnerReferences` pod selection strategy), a Pods metric counts only
/// the samples of the pods the target owns: a pod of another owner is left out with its
/// sample, and so is a sample of a pod the lister does not hold.
#[tokio::test]
async fn ownership_leaves_out_other_owners_pods_and_unknown_samples() {
    use hpa_decision::pod_selection::PodOwnership;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    let pod = |name: &str, owner_uid: &str| {
        let mut p = (*dispatch_scenario().pods()[0]).clone();
        p.metadata.name = Some(name.to_owned());
        p.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: format!("rs-{owner_uid}"),
            uid: owner_uid.into(),
            controller: Some(true),
            block_owner_deletion: None,
        }]);
        Arc::new(p)
    };
    let sample = |v: i64| hpa_metrics::PodMetric {
        timestamp: metrics_ts(),
        window: std::time::Duration::from_secs(60),
        value: v,
    };
    let mut metrics = MockMetricsClient::new();
    metrics
        .expect_get_raw_metric()
        .returning(move |_, _, _, _| {
            Ok((
                [
                    ("own-1".to_owned(), sample(10_000)),
                    ("own-2".to_owned(), sample(10_000)),
                    ("job-1".to_owned(), sample(90_000)),
                    ("gone".to_owned(), sample(90_000)),
                ]
                .into(),
                metrics_ts(),
            ))
        });
    let calc = calculator(
        metrics,
        lister_for(vec![
            pod("own-1", "rs-a"),
            pod("own-2", "rs-a"),
            pod("job-1", "job"),
        ]),
    );
    let selector = pod_selector();
    let everything = Selector::everything();
    let ownership = PodOwnership {
        target_uid: "target".into(),
        owned_replica_sets: ["rs-a".to_owned()].into(),
        foreign_replica_sets: ["job".to_owned()].into(),
    };
    let pods_metric = PodsMetric {
        metric_name: "qps",
        metric_selector: &everything,
    };
    let owned = ReplicaQuery {
        ownership: Some(&ownership),
        ..query(&selector, 2, Tolerances::default())
    };
    // 10 a pod against 10: the current 2.
    let r = calc
        .get_metric_replicas(&owned, &pods_metric, 10_000)
        .await
        .unwrap();
    assert_eq!((r.replica_count, r.usage), (2, 10_000));
    // Without it, upstream's arithmetic over every sample: (10 + 10 + 90 + 90) / 4 = 50.
    let r = calc
        .get_metric_replicas(
            &query(&selector, 2, Tolerances::default()),
            &pods_metric,
            10_000,
        )
        .await
        .unwrap();
    assert_eq!(r.usage, 50_000);
}
