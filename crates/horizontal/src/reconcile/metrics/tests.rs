//! The per-source wrapping of calculator failures (`computeStatusFor*Metric` and
//! `computeReplicasForMetric` in upstream `horizontal.go`): every target kind reaches its own
//! calculator method, and a failed fetch reads with that method's texts.

use std::sync::Arc;

use hpa_decision::conditions::MetricFailureReason;
use hpa_metrics::{FetchError, MetricsError, MockMetricsClient, Selector};
use hpa_replica_calculator::{
    CalculatorConfig, PodListError, PodLister, ReplicaCalculator, ReplicaQuery, Tolerances,
};
use jiff::Timestamp;
use k8s_openapi::api::autoscaling::v2::{
    ContainerResourceMetricSource, CrossVersionObjectReference, ExternalMetricSource,
    MetricIdentifier, MetricSpec, MetricTarget, ObjectMetricSource, PodsMetricSource,
    ResourceMetricSource,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::MetricComputer;

/// Every fetch fails before pods are listed, so listing is a test failure.
struct NoListing;

impl PodLister for NoListing {
    fn list(&self, _: &str, _: &Selector) -> Result<Vec<Arc<Pod>>, PodListError> {
        Err(PodListError::new("pods listed after a failed fetch"))
    }
}

/// A metrics client on which every fetch fails, each at most once.
fn failing_metrics() -> MockMetricsClient {
    let boom = || FetchError::other("boom");
    let mut metrics = MockMetricsClient::new();
    metrics
        .expect_get_resource_metric()
        .times(..=1)
        .returning(move |_, _, _, _| Err(MetricsError::ResourceFetch(boom())));
    metrics
        .expect_get_raw_metric()
        .times(..=1)
        .returning(|_, _, _, _| Err(MetricsError::NoCustomMetrics));
    metrics
        .expect_get_object_metric()
        .times(..=1)
        .returning(move |_, _, _, _| Err(MetricsError::CustomFetch(boom())));
    metrics
        .expect_get_external_metric()
        .times(..=1)
        .returning(|_, _, _| Err(MetricsError::NoExternalMetrics));
    metrics
}

fn target(type_: &str, value: Option<&str>, average_value: Option<&str>) -> MetricTarget {
    MetricTarget {
        type_: type_.to_owned(),
        value: value.map(|v| Quantity(v.to_owned())),
        average_value: average_value.map(|v| Quantity(v.to_owned())),
        average_utilization: None,
    }
}

fn utilization(percent: i32) -> MetricTarget {
    MetricTarget {
        average_utilization: Some(percent),
        ..target("Utilization", None, None)
    }
}

fn qps() -> MetricIdentifier {
    MetricIdentifier {
        name: "qps".to_owned(),
        selector: None,
    }
}

fn object(target: MetricTarget) -> MetricSpec {
    MetricSpec {
        type_: "Object".to_owned(),
        object: Some(ObjectMetricSource {
            described_object: CrossVersionObjectReference {
                api_version: Some("apps/v1".to_owned()),
                kind: "Deployment".to_owned(),
                name: "some-deployment".to_owned(),
            },
            metric: qps(),
            target,
        }),
        ..Default::default()
    }
}

fn external(target: MetricTarget) -> MetricSpec {
    MetricSpec {
        type_: "External".to_owned(),
        external: Some(ExternalMetricSource {
            metric: qps(),
            target,
        }),
        ..Default::default()
    }
}

fn resource(name: &str, target: MetricTarget) -> MetricSpec {
    MetricSpec {
        type_: "Resource".to_owned(),
        resource: Some(ResourceMetricSource {
            name: name.to_owned(),
            target,
        }),
        ..Default::default()
    }
}

#[tokio::test]
async fn each_target_kind_fails_with_its_methods_texts() {
    const CPU: &str = "unable to get metrics for resource cpu: unable to fetch metrics from resource metrics API: boom";
    const MEMORY: &str = "unable to get metrics for resource memory: unable to fetch metrics from resource metrics API: boom";
    const OBJECT: &str = "unable to get metric qps: Deployment on default some-deployment/unable to fetch metrics from custom metrics API: boom";
    const EXTERNAL: &str = "unable to get external metric default/qps/nil: no metrics returned from external metrics API";
    use MetricFailureReason::*;
    // (spec, reason, the event / condition error, the returned error); upstream's texts.
    let cases = [
        (
            resource("cpu", utilization(50)),
            FailedGetResourceMetric,
            format!("failed to get cpu utilization: {CPU}"),
            format!("failed to get cpu resource metric value: failed to get cpu utilization: {CPU}"),
        ),
        (
            resource("memory", target("AverageValue", None, Some("100Mi"))),
            FailedGetResourceMetric,
            format!("failed to get memory usage: {MEMORY}"),
            format!("failed to get memory resource metric value: failed to get memory usage: {MEMORY}"),
        ),
        (
            MetricSpec {
                type_: "ContainerResource".to_owned(),
                container_resource: Some(ContainerResourceMetricSource {
                    name: "cpu".to_owned(),
                    container: "app".to_owned(),
                    target: utilization(50),
                }),
                ..Default::default()
            },
            FailedGetContainerResourceMetric,
            format!("failed to get cpu utilization: {CPU}"),
            format!("failed to get app container metric value: failed to get cpu utilization: {CPU}"),
        ),
        (
            MetricSpec {
                type_: "Pods".to_owned(),
                pods: Some(PodsMetricSource {
                    metric: qps(),
                    target: target("AverageValue", None, Some("1")),
                }),
                ..Default::default()
            },
            FailedGetPodsMetric,
            "unable to get metric qps: no metrics returned from custom metrics API".to_owned(),
            "failed to get pods metric value: unable to get metric qps: no metrics returned from custom metrics API".to_owned(),
        ),
        (
            object(target("Value", Some("1"), None)),
            FailedGetObjectMetric,
            OBJECT.to_owned(),
            format!("failed to get object metric value: {OBJECT}"),
        ),
        (
            object(target("AverageValue", None, Some("1"))),
            FailedGetObjectMetric,
            OBJECT.to_owned(),
            format!("failed to get object metric value: failed to get qps object metric: {OBJECT}"),
        ),
        (
            external(target("Value", Some("1"), None)),
            FailedGetExternalMetric,
            EXTERNAL.to_owned(),
            format!("failed to get qps external metric value: failed to get external metric qps: {EXTERNAL}"),
        ),
        (
            external(target("AverageValue", None, Some("1"))),
            FailedGetExternalMetric,
            EXTERNAL.to_owned(),
            format!("failed to get qps external metric value: failed to get qps external metric: {EXTERNAL}"),
        ),
    ];
    let selector: Selector = "app=web".parse().unwrap();
    let query = ReplicaQuery {
        namespace: "default",
        spec_replicas: 2,
        status_replicas: 2,
        selector: &selector,
        tolerances: Tolerances::default(),
        now: Timestamp::UNIX_EPOCH,
        ownership: None,
    };
    for (spec, reason, condition_error, error) in cases {
        let calculator = ReplicaCalculator::new(
            Arc::new(failing_metrics()),
            Arc::new(NoListing),
            CalculatorConfig::default(),
        );
        let computer = MetricComputer {
            calculator: &calculator,
            selector_style: Default::default(),
        };
        let result = computer.compute_replicas_for_metric(&spec, &query).await;
        let Err(failure) = result.outcome else {
            panic!("{}: no failure: {:?}", spec.type_, result.outcome);
        };
        assert_eq!(failure.reason, reason, "{error}");
        assert_eq!(failure.condition_error.to_string(), condition_error);
        assert_eq!(failure.error.to_string(), error);
    }
}
