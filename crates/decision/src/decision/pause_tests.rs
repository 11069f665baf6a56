//! The paused decision ([`crate::pause`]): no write while paused, the pinned write once, the
//! status still updated, invalid values reported once and ignored, and no jump at unpause.

use std::collections::BTreeMap;

use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HorizontalPodAutoscalerBehavior, HorizontalPodAutoscalerSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;
use crate::pause::{PAUSED, PAUSED_REPLICAS};

const KEY: &str = "default/web";

fn t0() -> Timestamp {
    "2025-06-01T12:00:00Z".parse().unwrap()
}

fn at(secs: i64) -> Timestamp {
    t0() + SignedDuration::from_secs(secs)
}

fn hpa(
    min: i32,
    max: i32,
    behavior: Option<HorizontalPodAutoscalerBehavior>,
    annotations: &[(&str, &str)],
) -> HorizontalPodAutoscaler {
    HorizontalPodAutoscaler {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("default".into()),
            annotations: (!annotations.is_empty()).then(|| {
                annotations
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect::<BTreeMap<_, _>>()
            }),
            ..Default::default()
        },
        spec: HorizontalPodAutoscalerSpec {
            min_replicas: Some(min),
            max_replicas: max,
            scale_target_ref: CrossVersionObjectReference {
                api_version: Some("apps/v1".into()),
                kind: "Deployment".into(),
                name: "web".into(),
            },
            behavior,
            metrics: None,
        },
        status: None,
    }
}

fn cpu(replicas: i32) -> MetricsOutcome {
    let name = "cpu resource utilization (percentage of request)";
    MetricsOutcome::from_results(
        0,
        vec![MetricResult {
            metric_type: "Resource".into(),
            status: MetricStatus {
                type_: "Resource".into(),
                ..Default::default()
            },
            outcome: Ok(MetricProposal {
                replicas,
                metric_name: name.into(),
                timestamp: Some(t0()),
                detail: None,
            }),
        }],
    )
}

/// One reconcile at `t0 + secs` with the target at `current` and the metrics asking for
/// `proposal`; the scale write succeeds when asked for.
struct Run<'a> {
    state: &'a HpaState,
    config: DecisionConfig,
    status: HorizontalPodAutoscalerStatus,
}

impl Run<'_> {
    fn sync(
        &mut self,
        h: &HorizontalPodAutoscaler,
        current: i32,
        proposal: i32,
        secs: i64,
    ) -> (Decision, Outcome) {
        let d = decide(
            self.state,
            &self.config,
            DecisionInput {
                key: KEY,
                hpa: h,
                current_replicas: current,
                now: at(secs),
                tolerances: None,
            },
            Some(cpu(proposal)),
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

fn run(state: &HpaState) -> Run<'_> {
    Run {
        state,
        config: DecisionConfig::default(),
        status: HorizontalPodAutoscalerStatus::default(),
    }
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

#[test]
fn paused_writes_nothing_and_still_updates_the_status() {
    let state = HpaState::new();
    let mut r = run(&state);
    let h = hpa(1, 10, None, &[(PAUSED, "true")]);
    let (d, o) = r.sync(&h, 3, 8, 0);
    assert_eq!(d.pause, Some(Pause::Paused));
    assert!(
        !d.rescale,
        "paused: no scale write although the metrics ask for 8"
    );
    assert_eq!(d.normalization, None);
    assert_eq!(
        (o.status.current_replicas, o.status.desired_replicas),
        (Some(3), 3)
    );
    assert_eq!(o.status.current_metrics.as_ref().map(Vec::len), Some(1));
    assert_eq!(
        condition(&o, "AbleToScale"),
        Some((
            "False",
            "ScalingPaused",
            "scaling is paused by the annotation kube-hpa-controller.io/paused: the HPA controller does not update the target scale"
        ))
    );
    assert_eq!(
        condition(&o, "ScalingActive").map(|c| c.1),
        Some("ValidMetricFound")
    );
    assert_eq!(condition(&o, "ScalingLimited"), None, "no limit applies");
    assert!(o.events.is_empty());
    assert_eq!((o.action, o.error.as_deref()), (ActionLabel::None, None));
    assert!(
        state.recommendations(KEY).is_empty(),
        "no history while paused"
    );
    assert_eq!(
        d.log_lines(),
        vec![
            "\"Scaling is paused\" scaleTarget=\"Deployment/default/web\" annotation=\"kube-hpa-controller.io/paused\" desiredReplicas=3"
        ]
    );
    // The same inputs a sync later: nothing to write in the status either (the condition's
    // lastTransitionTime is not stamped again).
    let (_, o) = r.sync(&h, 3, 8, 15);
    assert!(!o.status_changed);
    // Branch b or c while paused: not brought into the range.
    let (d, _) = r.sync(&h, 12, 8, 30);
    assert_eq!((d.branch, d.rescale), (Branch::AboveMax, false));
}

#[test]
fn paused_false_is_not_paused() {
    let state = HpaState::new();
    let h = hpa(1, 10, None, &[(PAUSED, "FALSE")]);
    let (d, o) = run(&state).sync(&h, 3, 6, 0);
    assert_eq!((d.pause, d.rescale, d.desired_replicas), (None, true, 6));
    assert_eq!(
        condition(&o, "AbleToScale").map(|c| c.1),
        Some("SucceededRescale")
    );
}

#[test]
fn pinned_writes_the_count_once_then_leaves_the_target() {
    let state = HpaState::new();
    let mut r = run(&state);
    let behavior = HorizontalPodAutoscalerBehavior::default();
    let h = hpa(1, 10, Some(behavior.clone()), &[(PAUSED_REPLICAS, "2")]);
    let (d, o) = r.sync(&h, 5, 8, 0);
    assert_eq!((d.rescale, d.desired_replicas), (true, 2));
    assert_eq!(
        o.events,
        vec![HpaEvent::SuccessfulRescale {
            new_size: 2,
            reason: "paused at 2 replicas by the annotation kube-hpa-controller.io/paused-replicas"
                .into()
        }]
    );
    assert_eq!(o.status.desired_replicas, 2);
    assert_eq!(
        o.status.last_scale_time,
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(t0()))
    );
    assert_eq!(
        condition(&o, "AbleToScale"),
        Some((
            "False",
            "ScalingPaused",
            "scaling is paused by the annotation kube-hpa-controller.io/paused-replicas: the HPA controller scales the target to 2 replicas once and then leaves it"
        ))
    );
    assert!(
        state.scale_down_events(KEY).is_empty(),
        "the pinned write is not a scale event"
    );
    // At the pinned count: nothing to write.
    let (d, _) = r.sync(&h, 2, 8, 15);
    assert!(!d.rescale);
    // Scaled by hand while pinned: left there.
    let (d, o) = r.sync(&h, 4, 8, 30);
    assert_eq!((d.rescale, o.status.desired_replicas), (false, 4));
    // Another count: written once more.
    let h3 = hpa(1, 10, Some(behavior), &[(PAUSED_REPLICAS, "3")]);
    let (d, _) = r.sync(&h3, 4, 8, 45);
    assert_eq!((d.rescale, d.desired_replicas), (true, 3));
}

#[test]
fn a_failed_pinned_write_is_reported_and_tried_again() {
    let state = HpaState::new();
    let h = hpa(1, 10, None, &[(PAUSED_REPLICAS, "2")]);
    let cfg = DecisionConfig::default();
    let input = |secs| DecisionInput {
        key: KEY,
        hpa: &h,
        current_replicas: 5,
        now: at(secs),
        tolerances: None,
    };
    let d = decide(&state, &cfg, input(0), Some(cpu(5)));
    let o = d.complete(
        &state,
        &HorizontalPodAutoscalerStatus::default(),
        RescaleResult::Failed("conflict".into()),
    );
    assert_eq!(
        condition(&o, "AbleToScale").map(|c| c.1),
        Some("FailedUpdateScale")
    );
    assert_eq!(o.events[0].reason(), "FailedRescale");
    let d = decide(&state, &cfg, input(15), Some(cpu(5)));
    assert_eq!((d.rescale, d.desired_replicas), (true, 2));
}

#[test]
fn a_pin_is_clamped_and_zero_needs_min_replicas_zero() {
    let state = HpaState::new();
    let (d, o) = run(&state).sync(&hpa(2, 10, None, &[(PAUSED_REPLICAS, "0")]), 5, 5, 0);
    assert_eq!((d.rescale, d.desired_replicas), (true, 2));
    assert!(condition(&o, "AbleToScale").is_some_and(|c| c.2.contains("(0 asked, clamped")));
    let state = HpaState::new();
    let (d, _) = run(&state).sync(&hpa(1, 4, None, &[(PAUSED_REPLICAS, "9")]), 2, 5, 0);
    assert_eq!(d.desired_replicas, 4);
    // minReplicas 0 under 1.36's rule: pinned to zero, with ScaledToZero=True so that the HPA
    // autoscales it from zero again once unpaused.
    let state = HpaState::new();
    let mut r = run(&state);
    r.config.zero_replicas = ZeroReplicas::ScaledToZeroCondition { gate: true };
    let mut h = hpa(0, 10, None, &[(PAUSED_REPLICAS, "0")]);
    h.spec.metrics = Some(vec![k8s_openapi::api::autoscaling::v2::MetricSpec {
        type_: "External".into(),
        ..Default::default()
    }]);
    let (d, o) = r.sync(&h, 3, 3, 0);
    assert_eq!((d.rescale, d.desired_replicas), (true, 0));
    assert_eq!(
        condition(&o, "ScaledToZero").map(|c| c.1),
        Some("ScaledToZero")
    );
    h.metadata.annotations = None;
    h.status = Some(o.status);
    assert_eq!(
        Branch::for_hpa(&h, 0, &r.config),
        Branch::FromMetrics,
        "unpaused at zero: autoscaled from there"
    );
}

#[test]
fn an_invalid_value_is_warned_once_and_ignored() {
    let state = HpaState::new();
    let mut r = run(&state);
    let warning = |value: &str| {
        HpaEvent::InvalidAnnotation(InvalidAnnotation {
            annotation: PAUSED,
            value: value.into(),
            reason: "must be \"true\" or \"false\"".into(),
        })
    };
    let h = hpa(1, 10, None, &[(PAUSED, "yes")]);
    let (d, o) = r.sync(&h, 3, 6, 0);
    assert_eq!((d.pause, d.rescale), (None, true), "behaves as without it");
    assert_eq!(o.events[0], warning("yes"));
    assert_eq!(d.invalid_annotations.len(), 1);
    let (d, o) = r.sync(&h, 6, 6, 15);
    assert!(o.events.is_empty(), "reported once: {:?}", o.events);
    assert_eq!(
        d.invalid_annotations.len(),
        1,
        "still shown in the decision"
    );
    let h2 = hpa(1, 10, None, &[(PAUSED, "no")]);
    let (_, o) = r.sync(&h2, 6, 6, 30);
    assert_eq!(o.events, vec![warning("no")], "another value: reported");
    let fixed = hpa(1, 10, None, &[]);
    let (_, o) = r.sync(&fixed, 6, 6, 45);
    assert!(o.events.is_empty());
    let (_, o) = r.sync(&h2, 6, 6, 60);
    assert_eq!(o.events, vec![warning("no")], "set again: reported again");
    // An invalid pin with a valid paused: paused, the pin's value reported.
    let h = hpa(1, 10, None, &[(PAUSED, "true"), (PAUSED_REPLICAS, "-1")]);
    let (d, o) = r.sync(&h, 6, 9, 75);
    assert_eq!((d.pause, d.rescale), (Some(Pause::Paused), false));
    assert_eq!(o.events.len(), 1);
    assert_eq!(o.events[0].reason(), "InvalidAnnotation");
    assert!(o.events[0].message().contains(PAUSED_REPLICAS));
}

/// Behavior defaults: scale-up `Pods 4` or `Percent 100` per 15 s (the larger), scale-down
/// `Percent 100` per 15 s after a 300 s window. A pinned write from 10 to 2 replicas, kept as
/// a scale event, would put the scale-up period's start at 10 and allow 20 at the first
/// decision after the pause; from the current 2 the policies allow max(2 + 4, 2 × 2) = 6.
#[test]
fn unpause_is_not_let_further_by_the_pinned_write() {
    let state = HpaState::new();
    let mut r = run(&state);
    let behavior = Some(HorizontalPodAutoscalerBehavior::default());
    let active = hpa(1, 30, behavior.clone(), &[]);
    let pinned = hpa(1, 30, behavior, &[(PAUSED_REPLICAS, "2")]);
    let (d, _) = r.sync(&active, 10, 10, 0);
    assert!(!d.rescale);
    let (d, _) = r.sync(&pinned, 10, 10, 5);
    assert_eq!((d.rescale, d.desired_replicas), (true, 2));
    let (d, o) = r.sync(&active, 2, 20, 10);
    assert_eq!((d.rescale, d.desired_replicas), (true, 6));
    assert_eq!(
        condition(&o, "ScalingLimited").map(|c| c.1),
        Some("ScaleUpLimit")
    );
    let n = d.normalization.as_ref().unwrap();
    assert_eq!(
        n.recommendations,
        vec![crate::recommendations::TimestampedRecommendation {
            recommendation: 2,
            timestamp: at(10)
        }],
        "the history starts at the unpause, with the current replicas"
    );
}

/// Without `spec.behavior` the downscale window takes the largest recommendation in it: one of
/// 10 from before the pause would raise a target scaled to 4 by hand while paused back up to
/// 8 (`max(2 × 4, 4)`) though the metrics ask for 3. After the pause only the current 4 is in
/// the window: the target stays at 4.
#[test]
fn unpause_is_not_held_by_recommendations_from_before_the_pause() {
    let state = HpaState::new();
    let mut r = run(&state);
    let active = hpa(1, 30, None, &[]);
    let paused = hpa(1, 30, None, &[(PAUSED, "True")]);
    let (d, _) = r.sync(&active, 10, 10, 0);
    assert!(!d.rescale);
    let (d, _) = r.sync(&paused, 10, 10, 15);
    assert!(!d.rescale);
    let (d, _) = r.sync(&paused, 4, 3, 30);
    assert!(!d.rescale, "scaled by hand to 4 while paused");
    let (d, o) = r.sync(&active, 4, 3, 45);
    assert_eq!((d.rescale, d.desired_replicas), (false, 4));
    assert_eq!(
        condition(&o, "AbleToScale").map(|c| c.1),
        Some("ScaleDownStabilized"),
        "held by the current replicas recorded at the unpause"
    );
    // A window (5 minutes) after the unpause the metrics' own recommendations decide.
    for secs in (60..345).step_by(15) {
        let (d, _) = r.sync(&active, 4, 3, secs);
        assert!(!d.rescale, "at {secs}s");
    }
    let (d, _) = r.sync(&active, 4, 3, 345);
    assert_eq!((d.rescale, d.desired_replicas), (true, 3));
}
