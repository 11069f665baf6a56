//! Metric fallback in the decision ([`crate::fallback`]): the threshold reached and cleared
//! through [`HpaState::observe_metric_failures`], the fallback combined with the other metrics
//! by [`MetricsOutcome::with_fallbacks`], the `MetricFallbackActive` condition and the events,
//! an invalid annotation, and an HPA without one decided as before.

use std::collections::BTreeMap;

use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, ExternalMetricSource, HorizontalPodAutoscalerSpec,
    MetricIdentifier, MetricSpec, MetricTarget, ResourceMetricSource,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;
use crate::fallback::{FallbackAction, METRIC_FALLBACK};

const KEY: &str = "default/web";
const CPU: &str = "cpu resource utilization (percentage of request)";

fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(1_735_689_600 + secs).unwrap()
}

fn cpu_spec() -> MetricSpec {
    MetricSpec {
        type_: "Resource".into(),
        resource: Some(ResourceMetricSource {
            name: "cpu".into(),
            target: MetricTarget {
                type_: "Utilization".into(),
                average_utilization: Some(50),
                ..Default::default()
            },
        }),
        ..Default::default()
    }
}

fn external_spec(name: &str) -> MetricSpec {
    MetricSpec {
        type_: "External".into(),
        external: Some(ExternalMetricSource {
            metric: MetricIdentifier {
                name: name.into(),
                selector: None,
            },
            target: MetricTarget {
                type_: "AverageValue".into(),
                average_value: Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity(
                    "5".into(),
                )),
                ..Default::default()
            },
        }),
        ..Default::default()
    }
}

fn hpa(metrics: Vec<MetricSpec>, fallback: Option<&str>) -> HorizontalPodAutoscaler {
    HorizontalPodAutoscaler {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("default".into()),
            annotations: fallback
                .map(|v| BTreeMap::from([(METRIC_FALLBACK.to_owned(), v.to_owned())])),
            ..Default::default()
        },
        spec: HorizontalPodAutoscalerSpec {
            min_replicas: Some(1),
            max_replicas: 20,
            scale_target_ref: CrossVersionObjectReference {
                api_version: Some("apps/v1".into()),
                kind: "Deployment".into(),
                name: "web".into(),
            },
            behavior: None,
            metrics: Some(metrics),
        },
        status: None,
    }
}

fn ok(type_: &str, replicas: i32, name: &str) -> MetricResult {
    MetricResult {
        metric_type: type_.into(),
        status: MetricStatus {
            type_: type_.into(),
            ..Default::default()
        },
        outcome: Ok(MetricProposal {
            replicas,
            metric_name: name.into(),
            timestamp: Some(at(0)),
            detail: None,
        }),
    }
}

fn failed(name: &str) -> MetricResult {
    let inner = format!("unable to get external metric default/{name}/nil: the server is down");
    MetricResult {
        metric_type: "External".into(),
        status: MetricStatus::default(),
        outcome: Err(MetricFailure {
            reason: MetricFailureReason::FailedGetExternalMetric,
            condition_error: inner.clone(),
            error: format!("failed to get {name} external metric value: {inner}"),
            kind: ErrorKind::Internal,
            source: None,
        }),
    }
}

/// The reconcile's steps around the decision, as the controller takes them: the failures
/// observed, `value` fallbacks computed (`value` stands for the replica calculator: the
/// result for a metric's fallback value), the metrics aggregated, decided and rendered.
struct Run<'a> {
    state: &'a HpaState,
    status: HorizontalPodAutoscalerStatus,
}

impl Run<'_> {
    fn sync(
        &mut self,
        h: &HorizontalPodAutoscaler,
        current: i32,
        results: Vec<MetricResult>,
        secs: i64,
        value: impl Fn(usize) -> MetricResult,
    ) -> (Decision, Outcome) {
        let fallbacks = crate::fallback::fallback_annotation(h).fallbacks;
        let mut statuses =
            self.state
                .observe_metric_failures(KEY, at(secs), &fallbacks, &results, true);
        for s in &mut statuses {
            if s.in_effect && matches!(s.fallback.action, FallbackAction::Value { .. }) {
                s.value_result = Some(value(s.fallback.index));
            }
        }
        let m = MetricsOutcome::with_fallbacks(current, results, statuses);
        let d = decide(
            self.state,
            &DecisionConfig::default(),
            DecisionInput {
                key: KEY,
                hpa: h,
                current_replicas: current,
                now: at(secs),
                tolerances: None,
            },
            Some(m),
        );
        let rescale = if d.rescale {
            RescaleResult::Succeeded
        } else {
            RescaleResult::NotAttempted
        };
        let o = d.complete(self.state, &self.status, rescale);
        self.status = o.status.clone();
        (d, o)
    }
}

fn no_value(_: usize) -> MetricResult {
    unreachable!("no value fallback")
}

fn condition<'a>(o: &'a Outcome, type_: &str) -> Option<(&'a str, &'a str, &'a str)> {
    o.status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_)
        .map(|c| {
            (
                c.status.as_str(),
                c.reason.as_deref().unwrap_or(""),
                c.message.as_deref().unwrap_or(""),
            )
        })
}

fn reasons(o: &Outcome) -> Vec<&'static str> {
    o.events.iter().map(HpaEvent::reason).collect()
}

#[test]
fn a_failing_metric_counts_as_its_fallback_from_the_threshold_until_it_is_read() {
    let state = HpaState::new();
    let mut r = Run {
        state: &state,
        status: HorizontalPodAutoscalerStatus::default(),
    };
    let h = hpa(
        vec![cpu_spec(), external_spec("queue_depth")],
        Some(r#"[{"metric": "External/queue_depth", "failures": 2, "replicas": 10}]"#),
    );
    // 0 s: the first failure, below the threshold: upstream's partial failure (cpu's 4 at 4
    // replicas is acted on; the reconcile returns the aggregated error).
    let (d, o) = r.sync(
        &h,
        4,
        vec![ok("Resource", 4, CPU), failed("queue_depth")],
        0,
        no_value,
    );
    assert_eq!((d.rescale, d.desired_replicas), (false, 4));
    assert_eq!(reasons(&o), vec!["FailedGetExternalMetric"]);
    assert!(
        o.error
            .as_ref()
            .unwrap()
            .starts_with("invalid metrics (1 invalid out of 2)")
    );
    assert_eq!(
        condition(&o, "MetricFallbackActive"),
        Some((
            "False",
            "NoFallbackInEffect",
            "no metric fallback of kube-hpa-controller.io/metric-fallback is in effect"
        ))
    );
    // 15 s: the second failure in a row: the metric proposes 10, the largest; without
    // spec.behavior the scale-up is limited to max(2 x 4, 4) = 8.
    let (d, o) = r.sync(
        &h,
        4,
        vec![ok("Resource", 4, CPU), failed("queue_depth")],
        15,
        no_value,
    );
    assert_eq!(d.prenormalized, Some(10));
    assert_eq!((d.rescale, d.desired_replicas), (true, 8));
    assert_eq!(
        d.rescale_reason,
        "External/queue_depth (fallback) above target"
    );
    assert_eq!(
        reasons(&o),
        vec![
            "FailedGetExternalMetric",
            "MetricFallbackActivated",
            "SuccessfulRescale"
        ]
    );
    assert_eq!(
        o.events[1].message(),
        "fallback activated for spec.metrics[1] (External/queue_depth) after 15s of consecutive failures (2 in a row), using the fallback replica count 10"
    );
    assert_eq!(o.events[1].event_type().as_str(), "Normal");
    assert_eq!(o.error, None, "the metric is no longer an invalid one");
    assert_eq!(
        condition(&o, "ScalingActive"),
        Some((
            "True",
            "ValidMetricFound",
            "the HPA was able to successfully calculate a replica count from External/queue_depth (fallback)"
        ))
    );
    assert_eq!(
        condition(&o, "MetricFallbackActive"),
        Some((
            "True",
            "FallbackInEffect",
            "the metric fallback of kube-hpa-controller.io/metric-fallback is in effect: spec.metrics[1] (External/queue_depth) failing since 2025-01-01T00:00:00Z, counted as 10 replicas"
        ))
    );
    let m = d.metrics.as_ref().unwrap();
    assert_eq!(m.fallbacks.len(), 1);
    assert_eq!(
        m.fallbacks[0].replaced.as_ref().map(|f| f.reason),
        Some(MetricFailureReason::FailedGetExternalMetric)
    );
    assert_eq!(m.statuses.as_ref().unwrap()[1], MetricStatus::default());
    assert!(d.explain().contains(
        "fallback spec.metrics[1] (External/queue_depth): 2 failures over 15s, in effect: the fallback replica count 10"
    ));
    // 30 s: still failing: 10, and no second event; the condition is as it was.
    let (d, o) = r.sync(
        &h,
        8,
        vec![ok("Resource", 4, CPU), failed("queue_depth")],
        30,
        no_value,
    );
    assert_eq!(d.desired_replicas, 10);
    assert_eq!(
        reasons(&o),
        vec!["FailedGetExternalMetric", "SuccessfulRescale"]
    );
    // 45 s: read again (it asks for 3): cleared; the downscale stabilization window holds 10.
    let (d, o) = r.sync(
        &h,
        10,
        vec![
            ok("Resource", 4, CPU),
            ok("External", 3, "external metric queue_depth(nil)"),
        ],
        45,
        no_value,
    );
    assert_eq!((d.prenormalized, d.desired_replicas), (Some(4), 10));
    assert_eq!(reasons(&o), vec!["MetricFallbackCleared"]);
    assert_eq!(
        o.events[0].message(),
        "fallback cleared for spec.metrics[1] (External/queue_depth): the metric was read again after 45s of consecutive failures (3 in a row)"
    );
    assert_eq!(
        condition(&o, "MetricFallbackActive").map(|c| (c.0, c.1)),
        Some(("False", "NoFallbackInEffect"))
    );
    assert!(state.metric_failures(KEY).is_empty());
    // 60 s: failing again: the count starts over (one failure, not in effect).
    let (d, o) = r.sync(
        &h,
        10,
        vec![ok("Resource", 4, CPU), failed("queue_depth")],
        60,
        no_value,
    );
    assert!(!d.metrics.unwrap().fallbacks[0].in_effect);
    assert_eq!(reasons(&o), vec!["FailedGetExternalMetric"]);
    // Forgotten with the HPA.
    assert_eq!(state.metric_failures(KEY).len(), 1);
    state.forget(KEY);
    assert!(state.metric_failures(KEY).is_empty());
}

#[test]
fn a_fallback_is_combined_with_the_other_metrics_as_any_proposal() {
    let state = HpaState::new();
    let mut r = Run {
        state: &state,
        status: HorizontalPodAutoscalerStatus::default(),
    };
    let annotation = r#"[{"metric": 1, "failures": 1, "replicas": 2}]"#;
    // A smaller fallback does not win: cpu's 6 does.
    let h = hpa(vec![cpu_spec(), external_spec("a")], Some(annotation));
    let (d, _) = r.sync(
        &h,
        5,
        vec![ok("Resource", 6, CPU), failed("a")],
        0,
        no_value,
    );
    assert_eq!((d.prenormalized, d.rescale_metric.as_str()), (Some(6), CPU));
    // A third metric failing without a fallback: still an invalid metric, and upstream's rule
    // holds: no scale-down while a metric is invalid (max(3, 2) = 3 < 5 replicas).
    let state = HpaState::new();
    let mut r = Run {
        state: &state,
        status: HorizontalPodAutoscalerStatus::default(),
    };
    let h = hpa(
        vec![cpu_spec(), external_spec("a"), external_spec("b")],
        Some(annotation),
    );
    let (d, o) = r.sync(
        &h,
        5,
        vec![ok("Resource", 3, CPU), failed("a"), failed("b")],
        0,
        no_value,
    );
    let m = d.metrics.as_ref().unwrap();
    assert_eq!((m.replicas, m.invalid_metrics), (-1, 1));
    assert!(
        m.error
            .as_ref()
            .unwrap()
            .contains("failed to get b external metric value")
    );
    assert!(!d.rescale);
    assert_eq!(
        condition(&o, "ScalingActive").map(|c| (c.0, c.1)),
        Some(("False", "FailedGetExternalMetric"))
    );
    assert_eq!(
        condition(&o, "MetricFallbackActive").map(|c| c.0),
        Some("True")
    );
    // The same above the current count: acted on (upstream's partial failure).
    let state = HpaState::new();
    let mut r = Run {
        state: &state,
        status: HorizontalPodAutoscalerStatus::default(),
    };
    let (d, _) = r.sync(
        &h,
        1,
        vec![ok("Resource", 1, CPU), failed("a"), failed("b")],
        15,
        no_value,
    );
    assert_eq!((d.rescale, d.desired_replicas), (true, 2));
}

#[test]
fn a_value_fallback_proposes_what_the_value_computes_to() {
    let state = HpaState::new();
    let mut r = Run {
        state: &state,
        status: HorizontalPodAutoscalerStatus::default(),
    };
    let h = hpa(
        vec![external_spec("queue_depth")],
        Some(r#"[{"metric": 0, "failures": 1, "value": "30"}]"#),
    );
    // The caller computes the value: 30 over an AverageValue target of 5 is 6 replicas, its
    // status entry shows the value.
    let value = |i: usize| {
        assert_eq!(i, 0);
        let mut r = ok("External", 6, "external metric queue_depth(nil)");
        r.status.type_ = "External".into();
        r
    };
    let (d, o) = r.sync(&h, 2, vec![failed("queue_depth")], 0, value);
    assert_eq!((d.prenormalized, d.desired_replicas), (Some(6), 4));
    let m = d.metrics.as_ref().unwrap();
    assert_eq!(m.statuses.as_ref().unwrap()[0].type_, "External");
    assert_eq!(m.metric_name, "External/queue_depth (fallback)");
    assert_eq!(
        o.events[1].message(),
        "fallback activated for spec.metrics[0] (External/queue_depth) after 0s of consecutive failures (1 in a row), using the fallback value 30"
    );
    assert!(
        condition(&o, "MetricFallbackActive")
            .unwrap()
            .2
            .ends_with("read as 30")
    );
    // The value cannot be computed (say, no pods for a Value target): the metric fails with
    // that error, the fallback still in effect.
    let (d, o) = r.sync(&h, 4, vec![failed("queue_depth")], 15, |_| failed("x"));
    let m = d.metrics.as_ref().unwrap();
    assert!(m.is_total_failure());
    assert!(
        m.error
            .as_ref()
            .unwrap()
            .contains("failed to get x external metric value")
    );
    assert!(m.fallbacks[0].in_effect);
    assert_eq!(reasons(&o), vec!["FailedGetExternalMetric"]);
    assert_eq!(
        o.events_after_status
            .iter()
            .map(HpaEvent::reason)
            .collect::<Vec<_>>(),
        vec!["FailedComputeMetricsReplicas"]
    );
}

#[test]
fn an_invalid_annotation_is_warned_once_ignored_and_its_condition_removed() {
    let state = HpaState::new();
    let mut r = Run {
        state: &state,
        status: HorizontalPodAutoscalerStatus::default(),
    };
    let metrics = vec![cpu_spec(), external_spec("queue_depth")];
    let valid = hpa(
        metrics.clone(),
        Some(r#"[{"metric": 1, "failures": 3, "replicas": 10}]"#),
    );
    let (_, o) = r.sync(
        &valid,
        4,
        vec![ok("Resource", 4, CPU), failed("queue_depth")],
        0,
        no_value,
    );
    assert!(condition(&o, "MetricFallbackActive").is_some());
    assert_eq!(state.metric_failures(KEY).len(), 1);
    let invalid = hpa(metrics.clone(), Some(r#"[{"metric": 1, "replicas": 0}]"#));
    let (d, o) = r.sync(
        &invalid,
        4,
        vec![ok("Resource", 4, CPU), failed("queue_depth")],
        15,
        no_value,
    );
    assert_eq!(d.invalid_annotations.len(), 1);
    assert_eq!(
        o.events[0].message(),
        r#"annotation kube-hpa-controller.io/metric-fallback has the invalid value "[{\"metric\": 1, \"replicas\": 0}]": entry 0: replicas must be a whole number, 1 or more; it is ignored"#
    );
    assert_eq!(
        reasons(&o),
        vec!["InvalidAnnotation", "FailedGetExternalMetric"]
    );
    assert_eq!(condition(&o, "MetricFallbackActive"), None, "removed");
    assert!(state.metric_failures(KEY).is_empty(), "no count kept");
    let (_, o) = r.sync(
        &invalid,
        4,
        vec![ok("Resource", 4, CPU), failed("queue_depth")],
        30,
        no_value,
    );
    assert_eq!(reasons(&o), vec!["FailedGetExternalMetric"], "warned once");
    // Valid again: counted from the first failure seen with it.
    let (d, _) = r.sync(
        &valid,
        4,
        vec![ok("Resource", 4, CPU), failed("queue_depth")],
        45,
        no_value,
    );
    assert_eq!(d.metrics.unwrap().fallbacks[0].failures, 1);
}

#[test]
fn without_the_annotation_nothing_changes() {
    let h = hpa(vec![cpu_spec(), external_spec("queue_depth")], None);
    let results = || vec![ok("Resource", 4, CPU), failed("queue_depth")];
    assert_eq!(
        MetricsOutcome::with_fallbacks(4, results(), Vec::new()),
        MetricsOutcome::from_results(4, results())
    );
    let state = HpaState::new();
    let mut r = Run {
        state: &state,
        status: HorizontalPodAutoscalerStatus::default(),
    };
    for secs in [0, 15, 600] {
        let (d, o) = r.sync(&h, 4, results(), secs, no_value);
        assert!(!d.fallback_configured);
        assert!(d.metrics.unwrap().fallbacks.is_empty());
        assert_eq!(condition(&o, "MetricFallbackActive"), None);
        assert_eq!(
            o.status.conditions.as_ref().map(Vec::len),
            Some(3),
            "AbleToScale, ScalingActive, ScalingLimited"
        );
    }
    assert!(state.metric_failures(KEY).is_empty());
}

#[test]
fn a_selector_failure_reads_no_metric_and_leaves_the_condition() {
    let state = HpaState::new();
    let h = hpa(
        vec![external_spec("queue_depth")],
        Some(r#"[{"metric": 0, "failures": 1, "replicas": 10}]"#),
    );
    let mut r = Run {
        state: &state,
        status: HorizontalPodAutoscalerStatus::default(),
    };
    let (_, o) = r.sync(&h, 2, vec![failed("queue_depth")], 0, no_value);
    assert_eq!(
        condition(&o, "MetricFallbackActive").map(|c| c.0),
        Some("True")
    );
    let d = decide(
        &state,
        &DecisionConfig::default(),
        DecisionInput {
            key: KEY,
            hpa: &h,
            current_replicas: 4,
            now: at(15),
            tolerances: None,
        },
        Some(MetricsOutcome::selector_failure(SelectorFailure::Missing)),
    );
    assert!(
        !d.conditions
            .iter()
            .any(|c| matches!(c, HpaCondition::MetricFallbackActive(_)))
    );
    let o = d.complete(&state, &r.status, RescaleResult::NotAttempted);
    assert_eq!(
        condition(&o, "MetricFallbackActive").map(|c| c.0),
        Some("True"),
        "left as it was"
    );
}
