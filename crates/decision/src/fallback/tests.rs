//! The annotation's parsing and checks, the metric identities, and the counting of one metric's
//! failures up to its threshold and back.

use k8s_openapi::api::autoscaling::v2::{
    ContainerResourceMetricSource, CrossVersionObjectReference, ExternalMetricSource,
    MetricIdentifier, MetricTarget, ObjectMetricSource, PodsMetricSource, ResourceMetricSource,
};

use super::*;

fn resource(name: &str) -> MetricSpec {
    MetricSpec {
        type_: "Resource".into(),
        resource: Some(ResourceMetricSource {
            name: name.into(),
            target: MetricTarget {
                type_: "Utilization".into(),
                average_utilization: Some(50),
                ..Default::default()
            },
        }),
        ..Default::default()
    }
}

fn external(name: &str, queue: Option<&str>) -> MetricSpec {
    MetricSpec {
        type_: "External".into(),
        external: Some(ExternalMetricSource {
            metric: MetricIdentifier {
                name: name.into(),
                selector: queue.map(|q| {
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
                        match_labels: Some([("queue".to_owned(), q.to_owned())].into()),
                        ..Default::default()
                    }
                }),
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

fn others() -> Vec<MetricSpec> {
    vec![
        MetricSpec {
            type_: "ContainerResource".into(),
            container_resource: Some(ContainerResourceMetricSource {
                container: "app".into(),
                name: "cpu".into(),
                target: MetricTarget::default(),
            }),
            ..Default::default()
        },
        MetricSpec {
            type_: "Pods".into(),
            pods: Some(PodsMetricSource {
                metric: MetricIdentifier {
                    name: "qps".into(),
                    selector: None,
                },
                target: MetricTarget::default(),
            }),
            ..Default::default()
        },
        MetricSpec {
            type_: "Object".into(),
            object: Some(ObjectMetricSource {
                described_object: CrossVersionObjectReference::default(),
                metric: MetricIdentifier {
                    name: "requests".into(),
                    selector: None,
                },
                target: MetricTarget::default(),
            }),
            ..Default::default()
        },
        MetricSpec {
            type_: "Pods".into(),
            ..Default::default()
        },
    ]
}

#[test]
fn identities_are_type_and_name() {
    let mut all = vec![resource("cpu"), external("queue_depth", Some("a"))];
    all.extend(others());
    let ids: Vec<String> = all.iter().map(metric_identity).collect();
    assert_eq!(
        ids,
        vec![
            "Resource/cpu",
            "External/queue_depth",
            "ContainerResource/app/cpu",
            "Pods/qps",
            "Object/requests",
            "Pods/"
        ]
    );
}

#[test]
fn entries_name_a_metric_by_type_and_name_or_by_index() {
    let metrics = vec![resource("cpu"), external("queue_depth", None)];
    let got = parse_metric_fallback(
        r#"[{"metric": "External/queue_depth", "failureDurationSeconds": 60, "replicas": 10},
            {"metric": 0, "failures": 3, "replicas": 4}]"#,
        &metrics,
    )
    .unwrap();
    assert_eq!(
        got,
        vec![
            MetricFallback {
                index: 1,
                metric: "External/queue_depth".into(),
                threshold: FallbackThreshold::Duration(SignedDuration::from_secs(60)),
                action: FallbackAction::Replicas(10),
            },
            MetricFallback {
                index: 0,
                metric: "Resource/cpu".into(),
                threshold: FallbackThreshold::Failures(3),
                action: FallbackAction::Replicas(4),
            },
        ]
    );
    // No threshold: KEP-5679's 180 s. A value, as a string or a JSON number.
    let got = parse_metric_fallback(r#"[{"metric": 1, "value": "1500m"}]"#, &metrics).unwrap();
    assert_eq!(
        (got[0].threshold, &got[0].action),
        (
            FallbackThreshold::Duration(SignedDuration::from_secs(180)),
            &FallbackAction::Value {
                milli: 1500,
                text: "1500m".into()
            }
        )
    );
    let got = parse_metric_fallback(r#"[{"metric": 1, "value": 30}]"#, &metrics).unwrap();
    assert_eq!(
        got[0].action,
        FallbackAction::Value {
            milli: 30_000,
            text: "30".into()
        }
    );
    assert_eq!(got[0].describe(), "spec.metrics[1] (External/queue_depth)");
    assert_eq!(got[0].proposal_name(), "External/queue_depth (fallback)");
}

#[test]
fn every_mistake_makes_the_whole_annotation_invalid() {
    let mut metrics = vec![
        resource("cpu"),
        external("queue_depth", Some("a")),
        external("queue_depth", Some("b")),
    ];
    metrics.extend(others());
    let cases: &[(&str, &str)] = &[
        ("", "must be a JSON list of"),
        ("{\"metric\": 0, \"replicas\": 2}", "must be a JSON list of"),
        ("[]", "must name at least one metric"),
        (
            r#"[{"metric": 0, "replica": 2}]"#,
            "must be a JSON list of {\"metric\": ..., \"replicas\" or \"value\": ...}: unknown field `replica`",
        ),
        (
            r#"[{"metric": 7, "replicas": 2}]"#,
            "entry 0: metric 7 is not an index of spec.metrics (it has 7 metrics)",
        ),
        (
            r#"[{"metric": -1, "replicas": 2}]"#,
            "entry 0: metric -1 is not an index",
        ),
        (
            r#"[{"metric": "External/queue", "replicas": 2}]"#,
            "entry 0: no metric of spec.metrics is \"External/queue\"",
        ),
        (
            r#"[{"metric": "External/queue_depth", "replicas": 2}]"#,
            "entry 0: \"External/queue_depth\" is spec.metrics[1] and [2]: name it by index",
        ),
        (
            r#"[{"metric": true, "replicas": 2}]"#,
            "entry 0: metric must be an index of spec.metrics or a Type/name string",
        ),
        (
            r#"[{"metric": 0, "replicas": 2}, {"metric": "Resource/cpu", "replicas": 3}]"#,
            "entry 1: spec.metrics[0] already has a fallback (entry 0)",
        ),
        (
            r#"[{"metric": 0, "failures": 2, "failureDurationSeconds": 60, "replicas": 2}]"#,
            "entry 0: set failureDurationSeconds or failures, not both",
        ),
        (
            r#"[{"metric": 0, "failureDurationSeconds": 0, "replicas": 2}]"#,
            "entry 0: failureDurationSeconds must be a whole number from 1 to 86400",
        ),
        (
            r#"[{"metric": 0, "failureDurationSeconds": 86401, "replicas": 2}]"#,
            "entry 0: failureDurationSeconds must be a whole number from 1 to 86400",
        ),
        (
            r#"[{"metric": 0, "failureDurationSeconds": "60", "replicas": 2}]"#,
            "entry 0: failureDurationSeconds must be a whole number",
        ),
        (
            r#"[{"metric": 0, "failures": 0, "replicas": 2}]"#,
            "entry 0: failures must be a whole number from 1 to 10000",
        ),
        (
            r#"[{"metric": 0, "failures": 2.5, "replicas": 2}]"#,
            "entry 0: failures must be a whole number from 1 to 10000",
        ),
        (
            r#"[{"metric": 0}]"#,
            "entry 0: set replicas or value (one of the two)",
        ),
        (
            r#"[{"metric": 1, "replicas": 2, "value": "3"}]"#,
            "entry 0: set replicas or value (one of the two)",
        ),
        (
            r#"[{"metric": 0, "replicas": 0}]"#,
            "entry 0: replicas must be a whole number, 1 or more",
        ),
        (
            r#"[{"metric": 0, "replicas": 2147483648}]"#,
            "entry 0: replicas must be a whole number, 1 or more",
        ),
        (
            r#"[{"metric": 0, "value": "3"}]"#,
            "entry 0: value is for Object and External metrics; a Resource metric takes replicas",
        ),
        (
            r#"[{"metric": "ContainerResource/app/cpu", "value": "3"}]"#,
            "a ContainerResource metric takes replicas",
        ),
        (
            r#"[{"metric": "Pods/qps", "value": "3"}]"#,
            "a Pods metric takes replicas",
        ),
        (
            r#"[{"metric": 1, "value": "-3"}]"#,
            "entry 0: value must be a quantity of 0 or more",
        ),
        (
            r#"[{"metric": 1, "value": "lots"}]"#,
            "value must be a quantity",
        ),
        (
            r#"[{"metric": 1, "value": true}]"#,
            "value must be a quantity",
        ),
        (
            r#"[{"metric": 1, "value": "10E"}]"#,
            "value must be a quantity",
        ),
    ];
    for (value, reason) in cases {
        let e = parse_metric_fallback(value, &metrics).unwrap_err();
        assert_eq!((e.annotation, e.value.as_str()), (METRIC_FALLBACK, *value));
        assert!(
            e.reason.contains(reason),
            "{value}: {:?} does not contain {reason:?}",
            e.reason
        );
    }
    // Object metrics take a value.
    assert!(
        parse_metric_fallback(r#"[{"metric": "Object/requests", "value": "3"}]"#, &metrics).is_ok()
    );
    let e = parse_metric_fallback("[]", &metrics).unwrap_err();
    assert_eq!(
        e.to_string(),
        "annotation kube-hpa-controller.io/metric-fallback has the invalid value \"[]\": must name at least one metric; it is ignored"
    );
}

#[test]
fn off_unless_set_and_invalid_when_the_spec_no_longer_has_the_metric() {
    let mut h = HorizontalPodAutoscaler::default();
    h.spec.metrics = Some(vec![resource("cpu")]);
    assert_eq!(fallback_annotation(&h), FallbackAnnotation::default());
    h.metadata.annotations = Some(
        [(
            METRIC_FALLBACK.to_owned(),
            r#"[{"metric": "Resource/cpu", "replicas": 3}]"#.to_owned(),
        )]
        .into(),
    );
    let a = fallback_annotation(&h);
    assert_eq!((a.fallbacks.len(), a.invalid), (1, None));
    h.spec.metrics = Some(vec![resource("memory")]);
    let a = fallback_annotation(&h);
    assert!(a.fallbacks.is_empty());
    assert!(
        a.invalid
            .unwrap()
            .reason
            .contains("no metric of spec.metrics")
    );
}

fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_735_689_600 + secs).unwrap()
}

fn fallback(threshold: FallbackThreshold) -> MetricFallback {
    MetricFallback {
        index: 1,
        metric: "External/queue_depth".into(),
        threshold,
        action: FallbackAction::Replicas(10),
    }
}

/// Reads at the given seconds (`true`: failed), each observed after the one before; the
/// status of each.
fn reads(f: &MetricFallback, reads: &[(i64, bool)]) -> Vec<MetricFallbackStatus> {
    let mut record = None;
    reads
        .iter()
        .map(|&(at, failed)| {
            let (r, s) = observe(f, record.as_ref(), failed, t(at));
            record = r;
            s
        })
        .collect()
}

#[test]
fn a_duration_threshold_counts_from_the_first_consecutive_failure() {
    let f = fallback(FallbackThreshold::Duration(SignedDuration::from_secs(180)));
    let mut seq: Vec<(i64, bool)> = (0..=13).map(|i| (i * 15, true)).collect();
    seq.push((210, false));
    seq.push((225, true));
    let s = reads(&f, &seq);
    // 0 s .. 165 s: failing, not yet (165 < 180).
    for (i, st) in s[..12].iter().enumerate() {
        assert!(!st.in_effect, "read {i}");
        assert_eq!(st.transition, None);
        assert_eq!(st.first_failure, Some(t(0)));
        assert_eq!(st.failures, u32::try_from(i).unwrap() + 1);
    }
    // 180 s: 180 s of failures, the 13th failed read: in effect, once.
    assert_eq!(
        (s[12].in_effect, s[12].transition, s[12].failures),
        (true, Some(FallbackTransition::Activated), 13)
    );
    assert_eq!(s[12].failing_for, SignedDuration::from_secs(180));
    assert_eq!((s[13].in_effect, s[13].transition), (true, None));
    // 210 s: read: cleared, with the streak's length.
    assert_eq!(
        (s[14].in_effect, s[14].first_failure, s[14].failures),
        (false, None, 0)
    );
    assert_eq!(
        s[14].transition,
        Some(FallbackTransition::Cleared {
            failing_for: SignedDuration::from_secs(210),
            failures: 14
        })
    );
    // 225 s: a new streak starts over.
    assert_eq!(
        (s[15].in_effect, s[15].first_failure, s[15].failures),
        (false, Some(t(225)), 1)
    );
}

#[test]
fn a_count_threshold_counts_failed_reads_and_a_read_clears_it() {
    let f = fallback(FallbackThreshold::Failures(3));
    let s = reads(
        &f,
        &[
            (0, true),
            (15, true),
            (30, false),
            (45, true),
            (60, true),
            (75, true),
            (90, true),
        ],
    );
    let effect: Vec<bool> = s.iter().map(|s| s.in_effect).collect();
    assert_eq!(effect, vec![false, false, false, false, false, true, true]);
    assert_eq!(
        s[2].transition, None,
        "not in effect before: nothing cleared"
    );
    assert_eq!(s[5].transition, Some(FallbackTransition::Activated));
    assert_eq!(s[5].first_failure, Some(t(45)));
    // A threshold of one failure: in effect at the first.
    let s = reads(&fallback(FallbackThreshold::Failures(1)), &[(0, true)]);
    assert_eq!(s[0].transition, Some(FallbackTransition::Activated));
}

#[test]
fn a_record_of_another_metric_is_not_continued() {
    let f = fallback(FallbackThreshold::Failures(2));
    let (record, _) = observe(&f, None, true, t(0));
    let mut moved = record.clone().unwrap();
    moved.metric = "External/other".into();
    let (_, s) = observe(&f, Some(&moved), true, t(15));
    assert_eq!((s.failures, s.in_effect), (1, false));
    let (_, s) = observe(&f, record.as_ref(), true, t(15));
    assert_eq!((s.failures, s.in_effect), (2, true));
}

#[test]
fn replacements_while_in_effect() {
    let f = fallback(FallbackThreshold::Failures(1));
    let (_, mut s) = observe(&f, None, true, t(0));
    let (status, outcome) = s.replacement().unwrap();
    assert_eq!(status, MetricStatus::default());
    let p = outcome.unwrap();
    assert_eq!(
        (p.replicas, p.metric_name.as_str(), p.timestamp),
        (10, "External/queue_depth (fallback)", None)
    );
    // A value fallback proposes what the caller computed, renamed.
    let mut v = fallback(FallbackThreshold::Failures(1));
    v.action = FallbackAction::Value {
        milli: 30_000,
        text: "30".into(),
    };
    let (_, mut s) = observe(&v, None, true, t(0));
    assert_eq!(s.replacement(), None, "not computed by the caller");
    s.value_result = Some(MetricResult {
        metric_type: "External".into(),
        status: MetricStatus {
            type_: "External".into(),
            ..Default::default()
        },
        outcome: Ok(MetricProposal {
            replicas: 6,
            metric_name: "external metric queue_depth(nil)".into(),
            timestamp: Some(t(0)),
            detail: None,
        }),
    });
    let (status, outcome) = s.replacement().unwrap();
    assert_eq!(status.type_, "External");
    let p = outcome.unwrap();
    assert_eq!(
        (p.replicas, p.metric_name.as_str(), p.timestamp),
        (6, "External/queue_depth (fallback)", Some(t(0)))
    );
    // Not in effect: nothing replaced.
    let (_, mut s) = observe(&fallback(FallbackThreshold::Failures(2)), None, true, t(0));
    assert_eq!(s.replacement(), None);
}

#[test]
fn go_duration_texts() {
    let s = |n| go_seconds(SignedDuration::from_secs(n));
    assert_eq!(
        (s(0), s(45), s(180), s(195), s(3600), s(3665)),
        (
            "0s".into(),
            "45s".into(),
            "3m0s".into(),
            "3m15s".into(),
            "1h0m0s".into(),
            "1h1m5s".into()
        )
    );
}

#[test]
fn condition_messages_name_every_fallback_in_effect() {
    let mut v = fallback(FallbackThreshold::Failures(1));
    v.index = 2;
    v.metric = "Object/requests".into();
    v.action = FallbackAction::Value {
        milli: 500_000,
        text: "500".into(),
    };
    let active = vec![
        ActiveFallback {
            fallback: fallback(FallbackThreshold::Failures(1)),
            since: t(0),
        },
        ActiveFallback {
            fallback: v,
            since: t(15),
        },
    ];
    assert_eq!(
        active_message(&active),
        "the metric fallback of kube-hpa-controller.io/metric-fallback is in effect: spec.metrics[1] (External/queue_depth) failing since 2025-01-01T00:00:00Z, counted as 10 replicas; spec.metrics[2] (Object/requests) failing since 2025-01-01T00:00:15Z, read as 500"
    );
    assert_eq!(
        inactive_message(),
        "no metric fallback of kube-hpa-controller.io/metric-fallback is in effect"
    );
}
