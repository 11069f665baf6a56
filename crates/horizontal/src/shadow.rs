//! Shadow mode: compare this controller's decision with what the active controller
//! (kube-controller-manager) last wrote, without writing anything.
//!
//! No upstream counterpart. The comparison is pure ([`compare`]); [`ShadowStore`] keeps the
//! last comparison and the last [`DIFFERENCES_PER_HPA`] differences of every HPA for
//! `/debug/shadow`.
//!
//! The other side is only compared when its status is *newer than the inputs* of the
//! decision it is compared with. The HPA status records what the active controller read:
//! `currentReplicas` (the target's `spec.replicas` it saw) and `currentMetrics` (the values
//! it read). The decision compared is this controller's newest kept decision made from
//! those same inputs (the current one, or an earlier one when the active controller has
//! just scaled the target); its `desiredReplicas`, the target's replicas after it, and the
//! condition reasons are compared. When no kept decision saw those inputs, the active
//! controller has not run since the inputs changed: the comparison is `pending`, naming the
//! input (target replicas or metric values).

use std::collections::VecDeque;

use dashmap::DashMap;
use jiff::Timestamp;
use k8s_openapi::api::autoscaling::v2::{HorizontalPodAutoscalerStatus, MetricValueStatus};
use serde::{Deserialize, Serialize};

use crate::trace::DecisionTrace;

/// How many differences are kept per HPA.
pub const DIFFERENCES_PER_HPA: usize = 10;

/// Condition reasons that say the decision was held by its history: a stabilization window
/// or a scaling policy's period.
pub const HISTORY_REASONS: [&str; 4] = [
    "AbleToScale=ScaleDownStabilized",
    "AbleToScale=ScaleUpStabilized",
    "ScalingLimited=ScaleUpLimit",
    "ScalingLimited=ScaleDownLimit",
];

/// The condition types compared (their reasons).
pub const COMPARED_CONDITIONS: [&str; 3] = ["AbleToScale", "ScalingActive", "ScalingLimited"];

/// The outcome of one comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ShadowResult {
    /// Same desired replicas, target replicas and condition reasons.
    Agree,
    /// A real difference on the same inputs.
    Differ,
    /// Not compared: the other controller has not run since the inputs changed.
    Pending,
}

impl ShadowResult {
    /// The `result` label (`agree`, `differ`) or `pending`.
    pub fn as_str(self) -> &'static str {
        match self {
            ShadowResult::Agree => "agree",
            ShadowResult::Differ => "differ",
            ShadowResult::Pending => "pending",
        }
    }
}

/// Why a comparison was not made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PendingReason {
    /// The HPA has no status from the other controller yet.
    NoStatus,
    /// The target's replicas differ from the `currentReplicas` the other side recorded.
    TargetChanged,
    /// The metric values differ from the `currentMetrics` the other side recorded.
    MetricsChanged,
    /// The status records no usable value of a metric: an average per pod over a target at
    /// 0 replicas (upstream divides by 0 and writes `-9223372036854775808m` whatever the
    /// metric read), so no decision can be matched with it.
    MetricsUnrecorded,
    /// Same inputs, but a decision that rests on the history (a stabilization window or a
    /// scaling policy's period held it, on either side) and differs: each controller fills
    /// its history at its own reconcile times, so the same inputs can rightly be decided
    /// differently (the recorded scenarios check these decisions at upstream's own times).
    History,
    /// Same target replicas and metric values, a different decision, and the pods changed
    /// around it: this controller's decisions next to the one compared counted the HPA's pods
    /// differently (ready, unready, missing, ignored; the ready pods an Object or External
    /// `Value` target multiplies by). A status records no pod counts, so which pods the other
    /// side counted is not known.
    PodsChanged,
    /// Same inputs, a different decision, and the HPA's spec changed around it (its
    /// `metadata.generation`): the other side's status may come from the spec before, which
    /// a status records only from 1.37 (`status.observedGeneration`, then matched exactly).
    SpecChanged,
    /// This controller's decision was paused by the `kube-hpa-controller.io/paused` or
    /// `paused-replicas` annotation, which the active controller does not read: nothing to
    /// compare (no upstream counterpart, `hpa_decision::pause`).
    Paused,
    /// A metric's fallback (`kube-hpa-controller.io/metric-fallback`) was in effect at this
    /// controller's decision: the active controller, which does not read the annotation,
    /// decides without the metric (no upstream counterpart, `hpa_decision::fallback`).
    Fallback,
    /// The `OwnerReferences` pod selection strategy
    /// (`kube-hpa-controller.io/pod-selection-strategy`) left pods out of this controller's
    /// decision, which the active controller counts (no upstream counterpart,
    /// `hpa_decision::pod_selection`). A decision that left no pod out is compared.
    PodSelection,
    /// A metric of this controller's decision was read from another API group
    /// (`kube-hpa-controller.io/metric-source`), which the active controller reads from the
    /// default one (no upstream counterpart, `hpa_decision::metric_source`).
    MetricSource,
}

impl PendingReason {
    /// The `reason` label.
    pub fn as_str(self) -> &'static str {
        match self {
            PendingReason::NoStatus => "no_status",
            PendingReason::TargetChanged => "target_changed",
            PendingReason::MetricsChanged => "metrics_changed",
            PendingReason::MetricsUnrecorded => "metrics_unrecorded",
            PendingReason::History => "history",
            PendingReason::PodsChanged => "pods_changed",
            PendingReason::SpecChanged => "spec_changed",
            PendingReason::Paused => "paused",
            PendingReason::Fallback => "fallback",
            PendingReason::PodSelection => "pod_selection",
            PendingReason::MetricSource => "metric_source",
        }
    }
}

/// One side's decision, as far as it can be compared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Side {
    /// `status.desiredReplicas`.
    pub desired_replicas: i32,
    /// The target's replicas after the decision (the other side: as read now).
    pub target_replicas: i32,
    /// `status.currentReplicas` (what the side read as the target's replicas).
    pub current_replicas: i32,
    /// `type=reason` of the compared conditions, sorted by type.
    pub conditions: Vec<String>,
}

/// One comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShadowComparison {
    /// `namespace/name`.
    pub hpa: String,
    /// When this controller decided.
    pub time: Timestamp,
    /// The result.
    pub result: ShadowResult,
    /// Why not compared (pending only).
    pub pending: Option<PendingReason>,
    /// One sentence: what agreed, differed, or which input changed.
    pub summary: String,
    /// What differs, one line each (differ only).
    pub differences: Vec<String>,
    /// This controller's side.
    pub ours: Side,
    /// The active controller's side, as last written.
    pub theirs: Side,
    /// This controller's trace of the decision.
    pub trace: Option<DecisionTrace>,
}

fn compared<'a>(conditions: impl Iterator<Item = (&'a str, &'a str)>) -> Vec<String> {
    let mut out: Vec<String> = conditions
        .filter(|(t, _)| COMPARED_CONDITIONS.contains(t))
        .map(|(t, r)| format!("{t}={r}"))
        .collect();
    out.sort();
    out
}

fn their_conditions(status: &HorizontalPodAutoscalerStatus) -> Vec<String> {
    compared(
        status
            .conditions
            .iter()
            .flatten()
            .map(|c| (c.type_.as_str(), c.reason.as_deref().unwrap_or(""))),
    )
}

fn our_conditions(trace: &DecisionTrace) -> Vec<String> {
    compared(
        trace
            .conditions
            .iter()
            .map(|c| (c.type_.as_str(), c.reason.as_str())),
    )
}

/// The metric values a status records, one per metric (`None` for a failed one).
fn their_metrics(status: &HorizontalPodAutoscalerStatus) -> Vec<Option<MetricValueStatus>> {
    status
        .current_metrics
        .iter()
        .flatten()
        .map(crate::trace::metric_current)
        .collect()
}

fn our_metrics(trace: &DecisionTrace) -> Vec<Option<MetricValueStatus>> {
    trace.metrics.iter().map(|m| m.current.clone()).collect()
}

/// How a decision counted the HPA's pods, per metric: what the replica calculator's pod
/// grouping (upstream's `groupPods`) and its ready-pod count read, which a status does not
/// record.
fn pod_view(trace: &DecisionTrace) -> Vec<PodView<'_>> {
    trace
        .metrics
        .iter()
        .map(|m| PodView {
            counts: m
                .pods
                .as_ref()
                .map(|p| [p.ready, p.unready_count, p.missing_count, p.ignored_count]),
            named: m
                .pods
                .as_ref()
                .map(|p| [&p.unready, &p.missing, &p.ignored]),
            ready_pods: m.ready_pods,
        })
        .collect()
}

/// A decision's time, pod counts per metric (ready/unready/missing/ignored, or the ready
/// pods of a `Value` target) and desired replicas, in a few words.
fn describe_pods(t: &DecisionTrace) -> String {
    let metrics: Vec<String> = t
        .metrics
        .iter()
        .map(|m| match (&m.pods, m.ready_pods) {
            (Some(p), _) => format!(
                "{}/{}/{}/{}",
                p.ready, p.unready_count, p.missing_count, p.ignored_count
            ),
            (None, Some(r)) => format!("ready {r}"),
            (None, None) => "-".to_owned(),
        })
        .collect();
    format!(
        "{} [{}] -> {}",
        t.time,
        metrics.join(" "),
        t.desired_replicas
    )
}

/// One metric's [`pod_view`].
#[derive(PartialEq)]
struct PodView<'a> {
    counts: Option<[usize; 4]>,
    named: Option<[&'a Vec<crate::trace::PodNote>; 3]>,
    ready_pods: Option<i64>,
}

fn same_metrics(a: &[Option<MetricValueStatus>], b: &[Option<MetricValueStatus>]) -> bool {
    let norm = |v: &[Option<MetricValueStatus>]| -> Vec<MetricValueStatus> {
        v.iter().map(|m| m.clone().unwrap_or_default()).collect()
    };
    norm(a) == norm(b)
}

/// How long after the other side's rescale this controller still decides "at its moment"
/// ([`their_rescale`]): beyond it, the history kept since has moved on too far to stand for
/// the history at that moment.
pub const THEIR_RESCALE_RECENT: jiff::SignedDuration = jiff::SignedDuration::from_secs(30);

/// The other side's last rescale, as its status records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TheirRescale {
    /// The target's replicas it read (`status.currentReplicas`).
    pub from: i32,
    /// The replicas it scaled to (`status.desiredReplicas`).
    pub to: i32,
    /// When it stored the scale event, as well as the status tells (see [`their_rescale`]).
    pub scaled_at: Timestamp,
    /// The earliest and the latest moment it can have decided at, oldest first (one when
    /// they coincide).
    pub moments: Vec<Timestamp>,
}

/// The other side's last rescale, when its status (`theirs`, read at `now`) says it has just
/// rescaled the target to the `target_now` replicas: an `AbleToScale=SucceededRescale`
/// condition, `desiredReplicas` other than `currentReplicas` and equal to the target's, and
/// a `lastScaleTime` at most [`THEIR_RESCALE_RECENT`] old.
///
/// Upstream takes `time.Now()` for its stabilization window and policy periods while
/// deciding, again for the scale event it stores after the scale write, and again for
/// `lastScaleTime` (`setStatus`), which the API writes to the second. So it decided within
/// `[lastScaleTime, lastScaleTime + 1 s)` (less the scale write's latency): the moments are
/// both ends of that second (the later one no later than `now`), and the scale event is
/// put at its middle.
pub fn their_rescale(
    theirs: &HorizontalPodAutoscalerStatus,
    target_now: i32,
    now: Timestamp,
) -> Option<TheirRescale> {
    let rescaled = theirs.conditions.as_deref().is_some_and(|cs| {
        cs.iter()
            .any(|c| c.type_ == "AbleToScale" && c.reason.as_deref() == Some("SucceededRescale"))
    });
    let from = theirs.current_replicas.unwrap_or(0);
    let to = theirs.desired_replicas;
    let at = theirs.last_scale_time.as_ref()?.0;
    if !rescaled
        || from == to
        || target_now != to
        || at > now
        || now.duration_since(at) > THEIR_RESCALE_RECENT
    {
        return None;
    }
    let second = jiff::SignedDuration::from_secs(1);
    let latest = (at + second - jiff::SignedDuration::from_nanos(1)).min(now);
    let mut moments = vec![at];
    if latest > at {
        moments.push(latest);
    }
    Some(TheirRescale {
        from,
        to,
        scaled_at: (at + second / 2).min(now),
        moments,
    })
}

/// An annotation of this controller that the active controller does not read, and the
/// decisions it makes incomparable (no upstream counterpart).
struct NotRead {
    /// Whether a decision was shaped by it.
    applies: fn(&DecisionTrace) -> bool,
    /// The `reason` it is counted under.
    reason: PendingReason,
    /// The summary for this controller's latest decision.
    latest: &'static str,
    /// The summary for the decision made at that time from the other controller's inputs.
    at: fn(Timestamp) -> String,
}

/// The annotations the active controller does not read, in the order they are checked.
const NOT_READ: [NotRead; 4] = [
    // A pause: the active controller knows nothing of it.
    NotRead {
        applies: DecisionTrace::paused,
        reason: PendingReason::Paused,
        latest: "not compared: this controller's decision is paused by annotation, which the other controller does not read",
        at: |t| {
            format!(
                "not compared: this controller's decision at {t} from the other controller's inputs was paused by annotation, which the other controller does not read"
            )
        },
    },
    // A metric's fallback in effect: the active controller has none.
    NotRead {
        applies: DecisionTrace::fallback_in_effect,
        reason: PendingReason::Fallback,
        latest: "not compared: a metric's fallback (annotation kube-hpa-controller.io/metric-fallback) is in effect in this controller's decision, which the other controller does not read",
        at: |t| {
            format!(
                "not compared: a metric's fallback (annotation kube-hpa-controller.io/metric-fallback) was in effect in this controller's decision at {t} from the other controller's inputs"
            )
        },
    },
    // Pods left out: the active controller counts every selected pod.
    NotRead {
        applies: DecisionTrace::pods_left_out,
        reason: PendingReason::PodSelection,
        latest: "not compared: the pod selection strategy (annotation kube-hpa-controller.io/pod-selection-strategy) left pods out of this controller's decision, which the other controller counts",
        at: |t| {
            format!(
                "not compared: the pod selection strategy (annotation kube-hpa-controller.io/pod-selection-strategy) left pods out of this controller's decision at {t} from the other controller's inputs"
            )
        },
    },
    // A metric read from another API group: the active controller reads the default group.
    NotRead {
        applies: DecisionTrace::metric_routed,
        reason: PendingReason::MetricSource,
        latest: "not compared: a metric was read from another API group (annotation kube-hpa-controller.io/metric-source) in this controller's decision, where the other controller reads the default group",
        at: |t| {
            format!(
                "not compared: a metric was read from another API group (annotation kube-hpa-controller.io/metric-source) in this controller's decision at {t} from the other controller's inputs"
            )
        },
    },
];

/// The first annotation of [`NOT_READ`] that shaped `trace`.
fn not_read_by_the_other_side(trace: &DecisionTrace) -> Option<&'static NotRead> {
    NOT_READ.iter().find(|n| (n.applies)(trace))
}

/// Compare this controller's decisions with the other side's last status.
///
/// `theirs` is the HPA status as read at the start of the reconcile (written by the active
/// controller), `target_now` the target's `spec.replicas` read by this reconcile, and
/// `ours` this controller's kept decisions of the HPA, oldest first, the current one last.
/// The decision compared is the newest of `ours` made from the inputs the other side
/// recorded (the same target replicas and metric values); without one, the other side has
/// not run since the inputs changed and the result is [`ShadowResult::Pending`].
///
/// `at_their_moment` are this controller's decisions made, but not kept, at the moments the
/// other side's last rescale can have been decided at ([`their_rescale`]), from the replicas
/// it scaled from and the history as it stood then: one made from the same inputs that
/// decided as the other side did is an agreement (a decision held by a stabilization window
/// or a policy period depends on the moment it is made).
pub fn compare(
    hpa: &str,
    time: Timestamp,
    theirs: &HorizontalPodAutoscalerStatus,
    target_now: i32,
    ours: &[DecisionTrace],
    at_their_moment: &[DecisionTrace],
) -> ShadowComparison {
    let their_conds = their_conditions(theirs);
    let current = theirs.current_replicas.unwrap_or(0);
    // It rescaled (its status says so) but the target as read here still has the count it
    // read: this controller has not seen the scale write yet (the HPA's watch event came
    // first). The target has what it decided.
    let rescaled_unseen = target_now == current
        && theirs.desired_replicas != current
        && their_conds
            .iter()
            .any(|c| c == "AbleToScale=SucceededRescale");
    let their_side = Side {
        desired_replicas: theirs.desired_replicas,
        target_replicas: if rescaled_unseen {
            theirs.desired_replicas
        } else {
            target_now
        },
        current_replicas: current,
        conditions: their_conds,
    };
    let their_values = their_metrics(theirs);
    let latest = ours.last();
    let side_of = |t: &DecisionTrace| Side {
        desired_replicas: t.desired_replicas,
        target_replicas: if t.rescale {
            t.desired_replicas
        } else {
            t.target.spec_replicas
        },
        current_replicas: t.target.spec_replicas,
        conditions: our_conditions(t),
    };
    let pending = |reason: PendingReason, summary: String, ours: Side| ShadowComparison {
        hpa: hpa.to_owned(),
        time,
        result: ShadowResult::Pending,
        pending: Some(reason),
        summary,
        differences: Vec::new(),
        ours,
        theirs: their_side.clone(),
        trace: None,
    };
    let latest_side = latest.map(side_of).unwrap_or(Side {
        desired_replicas: 0,
        target_replicas: target_now,
        current_replicas: target_now,
        conditions: Vec::new(),
    });
    // A decision shaped by an annotation the active controller does not read is not compared.
    if let Some(n) = latest.and_then(not_read_by_the_other_side) {
        return pending(n.reason, n.latest.to_owned(), latest_side);
    }
    if theirs.conditions.as_ref().is_none_or(Vec::is_empty) {
        return pending(
            PendingReason::NoStatus,
            "the other controller has not written a status for this HPA yet".to_owned(),
            latest_side,
        );
    }
    // After the other side's reconcile the target has its desiredReplicas (it rescaled) or
    // its currentReplicas (it did not): anything else means it rescaled again since this
    // status, which it has not written yet.
    if target_now != their_side.desired_replicas && target_now != their_side.current_replicas {
        return pending(
            PendingReason::TargetChanged,
            format!(
                "not compared: the target has {target_now} replicas, neither the {} the other controller's status read nor the {} it decided: it rescaled since and has not written that status yet",
                their_side.current_replicas, their_side.desired_replicas
            ),
            latest_side,
        );
    }
    if their_side.current_replicas == 0
        && their_values.iter().flatten().any(|v| {
            v.average_value
                .as_ref()
                .is_some_and(|q| q.0.starts_with('-'))
        })
    {
        return pending(
            PendingReason::MetricsUnrecorded,
            "not compared: the other controller's status has no usable metric value (an average per pod over a target at 0 replicas is written as -2^63, whatever it read)".to_owned(),
            latest_side,
        );
    }
    // The spec it decided from, where its status records it (1.37's observedGeneration).
    let their_generation = theirs.observed_generation;
    let same_spec = |t: &DecisionTrace| match (their_generation, t.generation) {
        (Some(g), Some(ours)) => g == ours,
        _ => true,
    };
    let same_values = |t: &DecisionTrace| {
        t.target.read
            && t.target.spec_replicas == their_side.current_replicas
            && same_metrics(&our_metrics(t), &their_values)
    };
    let same_inputs = |t: &DecisionTrace| same_values(t) && same_spec(t);
    if let Some(alike) = at_their_moment
        .iter()
        .find(|t| same_inputs(t) && side_of(t) == their_side)
    {
        return ShadowComparison {
            hpa: hpa.to_owned(),
            time,
            result: ShadowResult::Agree,
            pending: None,
            summary: format!(
                "same inputs (target at {} replicas, the same metric values) at the other controller's moment: decided at {}, within the second its lastScaleTime records, this controller also scales to {} replicas with the same condition reasons",
                their_side.current_replicas, alike.time, alike.desired_replicas
            ),
            differences: Vec::new(),
            ours: side_of(alike),
            theirs: their_side,
            trace: Some(alike.clone()),
        };
    }
    let matched_at = ours.iter().rposition(same_inputs);
    if matched_at.is_none() && ours.iter().any(same_values) {
        return pending(
            PendingReason::SpecChanged,
            format!(
                "not compared: the other controller's status was computed from generation {} of the HPA's spec, which none of this controller's last {} decisions with the same inputs read",
                their_generation.unwrap_or_default(),
                ours.len()
            ),
            latest_side,
        );
    }
    let Some(at) = matched_at else {
        let replicas_seen = ours
            .iter()
            .any(|t| t.target.read && t.target.spec_replicas == their_side.current_replicas);
        return if replicas_seen {
            pending(
                PendingReason::MetricsChanged,
                format!(
                    "not compared: the other controller has not run since the inputs changed (the metric values it recorded with the target at {} replicas were not read by any of this controller's last {} decisions)",
                    their_side.current_replicas,
                    ours.len()
                ),
                latest_side,
            )
        } else {
            pending(
                PendingReason::TargetChanged,
                format!(
                    "not compared: the other controller has not run since the inputs changed (its status was computed with the target at {} replicas; the target now has {}, and none of this controller's last {} decisions saw {})",
                    their_side.current_replicas,
                    target_now,
                    ours.len(),
                    their_side.current_replicas
                ),
                latest_side,
            )
        };
    };
    let matched = &ours[at];
    let our_side = side_of(matched);
    if let Some(n) = not_read_by_the_other_side(matched) {
        return pending(n.reason, (n.at)(matched.time), our_side);
    }
    let mut differences = Vec::new();
    if our_side.desired_replicas != their_side.desired_replicas {
        differences.push(format!(
            "desiredReplicas: ours {}, theirs {}",
            our_side.desired_replicas, their_side.desired_replicas
        ));
    }
    if our_side.target_replicas != their_side.target_replicas {
        differences.push(format!(
            "target replicas: ours {}, theirs {}",
            our_side.target_replicas, their_side.target_replicas
        ));
    }
    if our_side.conditions != their_side.conditions {
        differences.push(format!(
            "conditions: ours [{}], theirs [{}]",
            our_side.conditions.join(" "),
            their_side.conditions.join(" ")
        ));
    }
    let basis = format!(
        "same inputs (target at {} replicas, the same metric values; this controller decided at {})",
        our_side.current_replicas, matched.time
    );
    // A difference on an input the status does not record. The pods changed: a decision of
    // this controller in the stretch where the other side may have reconciled counted the
    // pods otherwise (its status does not record which pods it counted). That stretch is
    // every decision made from the same inputs up to the one compared (the other side writes
    // a status only when it changes, so its last reconcile with these inputs is anywhere in
    // there), the one just before it, and all after it. Or either side was held by its
    // history, with the same metric verdict (ScalingActive): not a difference in how the
    // inputs were read.
    let run_start = ours[..at]
        .iter()
        .rposition(|t| !same_inputs(t))
        .map_or(0, |i| i + 1);
    let neighbours = &ours[run_start.min(at.saturating_sub(1))..];
    let view = pod_view(matched);
    // The spec changed in that stretch (an edit between the other side's reconcile and this
    // controller's; by generation, or by the spec's fingerprint where the API server keeps no
    // generation for HPAs): its status may come from the spec before.
    let spec = |t: &DecisionTrace| (t.generation, t.spec_fingerprint.clone());
    if !differences.is_empty()
        && their_generation.is_none()
        && neighbours.iter().any(|t| spec(t) != spec(matched))
    {
        let summary = format!(
            "{basis}: not compared: the HPA's spec changed around this decision, and a status from before 1.37 does not record which spec the other controller decided from: {}",
            differences.join("; ")
        );
        return ShadowComparison {
            differences,
            trace: Some(matched.clone()),
            ..pending(PendingReason::SpecChanged, summary, our_side)
        };
    }
    // While the pods changed, a decision of that stretch from the same inputs that counted
    // the pods otherwise than the one compared and decided as the other side did is an
    // agreement: the other side counted them as that one did.
    let alike = || {
        ours[run_start..at]
            .iter()
            .rev()
            .find(|t| pod_view(t) != view && side_of(t) == their_side)
    };
    if let Some(alike) = (!differences.is_empty()).then(alike).flatten() {
        return ShadowComparison {
            hpa: hpa.to_owned(),
            time,
            result: ShadowResult::Agree,
            pending: None,
            summary: format!(
                "same inputs (target at {} replicas, the same metric values), while the pods changed: this controller's decision at {} counted them otherwise than its latest from these inputs, and both decided {} replicas with the same condition reasons",
                our_side.current_replicas, alike.time, alike.desired_replicas
            ),
            differences: Vec::new(),
            ours: side_of(alike),
            theirs: their_side,
            trace: Some(alike.clone()),
        };
    }
    let held = |c: &[String]| c.iter().any(|r| HISTORY_REASONS.contains(&r.as_str()));
    // Held by its stabilization window even where the conditions no longer say so: a
    // rescale's AbleToScale=SucceededRescale replaces the ScaleDownStabilized it set.
    let stabilized = matched
        .stabilization
        .as_ref()
        .zip(matched.prenormalized)
        .is_some_and(|(s, p)| s.stabilized != p);
    let active = |c: &[String]| -> Vec<String> {
        c.iter()
            .filter(|r| r.starts_with("ScalingActive="))
            .cloned()
            .collect()
    };
    let unrecorded = if differences.is_empty() {
        None
    } else if neighbours.iter().any(|t| pod_view(t) != view) {
        Some((
            PendingReason::PodsChanged,
            "the pods changed around this decision (this controller's decisions next to it counted them otherwise) and a status does not record which pods the other controller counted",
        ))
    } else if (stabilized || held(&our_side.conditions) || held(&their_side.conditions))
        && active(&our_side.conditions) == active(&their_side.conditions)
    {
        Some((
            PendingReason::History,
            "a decision held by its history (stabilization window or policy period), which each controller fills at its own reconcile times",
        ))
    } else {
        None
    };
    if let Some((reason, why)) = unrecorded {
        let mut summary = format!("{basis}: not compared: {why}: {}", differences.join("; "));
        if reason == PendingReason::PodsChanged {
            // What each decision of the stretch counted and decided, to read back from the
            // log (V(4)) why none decided as the other side did.
            let counted: Vec<String> = neighbours.iter().map(describe_pods).collect();
            summary.push_str(&format!(
                "; this controller's decisions: {}",
                counted.join(", ")
            ));
        }
        return ShadowComparison {
            differences,
            trace: Some(matched.clone()),
            ..pending(reason, summary, our_side)
        };
    }
    let (result, summary) = if differences.is_empty() {
        (
            ShadowResult::Agree,
            format!(
                "{basis}: both decided {} replicas with the same condition reasons",
                our_side.desired_replicas
            ),
        )
    } else {
        (
            ShadowResult::Differ,
            format!("{basis}, different decision: {}", differences.join("; ")),
        )
    };
    ShadowComparison {
        hpa: hpa.to_owned(),
        time,
        result,
        pending: None,
        summary,
        differences,
        ours: our_side,
        theirs: their_side,
        trace: Some(matched.clone()),
    }
}

/// The shadow state of one HPA.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShadowRecord {
    /// The last comparison (without its trace).
    pub latest: Option<ShadowComparison>,
    /// The last differences, oldest first, each with its trace.
    pub differences: VecDeque<ShadowComparison>,
    /// The active controller's status last compared with.
    #[serde(skip)]
    status: Option<StatusSeen>,
}

/// One status the active controller wrote, as far as shadow mode compared it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct StatusSeen {
    /// A hash of the status.
    fingerprint: u64,
    /// Whether a comparison with it agreed or differed (it is counted then).
    decided: bool,
    /// Why the last comparison with it was not made, while undecided.
    pending: Option<PendingReason>,
}

/// How one status the active controller wrote ended up in shadow mode: the first comparison
/// with it that agreed or differed or, for a status replaced before any did, why the last
/// one was not made. Each status the active controller writes is counted once (it writes
/// only statuses that changed), when it is decided or replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusOutcome {
    /// Compared: agreed or differed.
    Compared(ShadowResult),
    /// Replaced without a comparison; the last reason (`None`: never compared at all).
    NotCompared(Option<PendingReason>),
}

impl StatusOutcome {
    /// The `result` and `reason` labels.
    pub fn labels(self) -> [&'static str; 2] {
        match self {
            StatusOutcome::Compared(r) => [r.as_str(), ""],
            StatusOutcome::NotCompared(r) => ["not_compared", r.map_or("", |r| r.as_str())],
        }
    }
}

/// A fingerprint of a status, to tell the active controller's writes apart.
pub fn status_fingerprint(status: &HorizontalPodAutoscalerStatus) -> u64 {
    use std::hash::{Hash as _, Hasher as _};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(status)
        .unwrap_or_default()
        .hash(&mut h);
    h.finish()
}

/// The shadow comparisons of every HPA.
#[derive(Debug, Default)]
pub struct ShadowStore {
    records: DashMap<String, ShadowRecord>,
}

impl ShadowStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Keep a comparison: always as the latest; with its trace among the differences when
    /// it is one.
    pub fn record(&self, comparison: ShadowComparison) {
        self.record_status(comparison, None);
    }

    /// [`record`](Self::record) a comparison with the status of fingerprint `status`
    /// ([`status_fingerprint`]); returns the outcomes of the active controller's statuses
    /// that this comparison settles (the previous status, replaced undecided; this one,
    /// decided for the first time).
    pub fn record_status(
        &self,
        comparison: ShadowComparison,
        status: Option<u64>,
    ) -> Vec<StatusOutcome> {
        let mut entry = self.records.entry(comparison.hpa.clone()).or_default();
        let mut outcomes = Vec::new();
        if let Some(fingerprint) = status {
            match entry.status {
                Some(seen) if seen.fingerprint == fingerprint => {}
                previous => {
                    if let Some(p) = previous.filter(|p| !p.decided) {
                        outcomes.push(StatusOutcome::NotCompared(p.pending));
                    }
                    entry.status = Some(StatusSeen {
                        fingerprint,
                        decided: false,
                        pending: None,
                    });
                }
            }
            if let Some(seen) = entry.status.as_mut().filter(|s| !s.decided) {
                match comparison.result {
                    ShadowResult::Pending => seen.pending = comparison.pending,
                    result => {
                        seen.decided = true;
                        outcomes.push(StatusOutcome::Compared(result));
                    }
                }
            }
        }
        let mut latest = comparison.clone();
        latest.trace = None;
        entry.latest = Some(latest);
        if comparison.result == ShadowResult::Differ {
            entry.differences.push_back(comparison);
            while entry.differences.len() > DIFFERENCES_PER_HPA {
                entry.differences.pop_front();
            }
        }
        outcomes
    }

    /// Whether a comparison with the status of fingerprint `status` of `key` has agreed or
    /// differed already (the status is settled: no further comparison counts for it).
    pub fn is_decided(&self, key: &str, status: u64) -> bool {
        self.records.get(key).is_some_and(|r| {
            r.status
                .is_some_and(|s| s.fingerprint == status && s.decided)
        })
    }

    /// Every HPA's record, sorted by key.
    pub fn all(&self) -> Vec<(String, ShadowRecord)> {
        let mut out: Vec<(String, ShadowRecord)> = self
            .records
            .iter()
            .map(|e| (e.key().clone(), e.value().clone()))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// One HPA's record.
    pub fn get(&self, key: &str) -> Option<ShadowRecord> {
        self.records.get(key).map(|r| r.clone())
    }

    /// Forget a deleted HPA.
    pub fn forget(&self, key: &str) {
        self.records.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::autoscaling::v2::{
        HorizontalPodAutoscalerCondition, MetricStatus, ResourceMetricStatus,
    };

    use super::*;

    const OK: &[(&str, &str)] = &[
        ("AbleToScale", "SucceededRescale"),
        ("ScalingActive", "ValidMetricFound"),
        ("ScalingLimited", "DesiredWithinRange"),
    ];

    fn now() -> Timestamp {
        "2026-01-01T00:00:00Z".parse().unwrap()
    }

    fn cpu(utilization: i32) -> MetricValueStatus {
        MetricValueStatus {
            average_utilization: Some(utilization),
            ..Default::default()
        }
    }

    fn theirs(
        current: i32,
        desired: i32,
        utilization: i32,
        reasons: &[(&str, &str)],
    ) -> HorizontalPodAutoscalerStatus {
        HorizontalPodAutoscalerStatus {
            current_replicas: Some(current),
            desired_replicas: desired,
            current_metrics: Some(vec![MetricStatus {
                type_: "Resource".into(),
                resource: Some(ResourceMetricStatus {
                    name: "cpu".into(),
                    current: cpu(utilization),
                }),
                ..Default::default()
            }]),
            conditions: Some(
                reasons
                    .iter()
                    .map(|(t, r)| HorizontalPodAutoscalerCondition {
                        type_: (*t).to_owned(),
                        status: "True".to_owned(),
                        reason: Some((*r).to_owned()),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }
    }

    /// One of our decisions: the target at `current`, cpu at `utilization`, `desired`.
    fn ours(current: i32, utilization: i32, desired: i32) -> DecisionTrace {
        let conditions: Vec<serde_json::Value> = OK
            .iter()
            .map(|(t, r)| serde_json::json!({"type": t, "status": "True", "reason": r, "message": ""}))
            .collect();
        serde_json::from_value(serde_json::json!({
            "version": crate::trace::TRACE_VERSION,
            "hpa": "ns/a",
            "time": "2026-01-01T00:00:00Z",
            "target": {"reference": "Deployment/ns/a", "specReplicas": current, "statusReplicas": current},
            "minReplicas": 1, "maxReplicas": 10, "branch": "FromMetrics", "tolerance": null,
            "metrics": [{
                "type": "Resource", "name": "cpu", "target": null,
                "current": {"averageUtilization": utilization},
                "usageRatio": null, "recomputedUsageRatio": null, "withinTolerance": null,
                "pods": null, "readyPods": null, "proposal": desired, "proposalName": null, "error": null
            }],
            "winner": null, "metricsError": null, "prenormalized": desired, "stabilization": null,
            "rateLimit": null, "clamp": {"min": 1, "max": 10, "boundBy": "DesiredWithinRange"},
            "desiredReplicas": desired, "rescale": desired != current, "rescaleReason": "",
            "write": {"scale": "shadow", "statusChanged": true, "shadow": true},
            "conditions": conditions, "events": [], "error": null
        }))
        .unwrap()
    }

    #[test]
    fn agree_with_the_decision_made_from_the_same_inputs() {
        // The other side scaled 2 -> 4; we decided the same at 2, and now see 4.
        let c = compare(
            "ns/a",
            now(),
            &theirs(2, 4, 100, OK),
            4,
            &[ours(2, 100, 4), ours(4, 50, 4)],
            &[],
        );
        assert_eq!(c.result, ShadowResult::Agree, "{}", c.summary);
        assert_eq!(c.ours.current_replicas, 2);
        assert!(c.trace.is_some());
    }

    #[test]
    fn differ_names_each_difference() {
        let c = compare(
            "ns/a",
            now(),
            &theirs(2, 2, 100, OK),
            2,
            &[ours(2, 100, 4)],
            &[],
        );
        assert_eq!(c.result, ShadowResult::Differ);
        assert_eq!(
            c.differences,
            vec![
                "desiredReplicas: ours 4, theirs 2".to_owned(),
                "target replicas: ours 4, theirs 2".to_owned()
            ]
        );
    }

    fn paused(mut t: DecisionTrace) -> DecisionTrace {
        t.pause = Some(crate::trace::PauseTrace {
            annotation: hpa_decision::pause::PAUSED.to_owned(),
            requested_replicas: None,
            pinned_replicas: None,
        });
        t
    }

    #[test]
    fn a_paused_decision_is_not_compared() {
        // It would differ (ours 4, theirs 2) but this controller is paused: pending, paused.
        let c = compare(
            "ns/a",
            now(),
            &theirs(2, 2, 100, OK),
            2,
            &[paused(ours(2, 100, 2))],
            &[],
        );
        assert_eq!(
            (c.result, c.pending),
            (ShadowResult::Pending, Some(PendingReason::Paused)),
            "{}",
            c.summary
        );
        assert_eq!(PendingReason::Paused.as_str(), "paused");
        // Paused at the decision made from the other side's inputs, unpaused since: the same.
        let c = compare(
            "ns/a",
            now(),
            &theirs(2, 4, 100, OK),
            4,
            &[paused(ours(2, 100, 2)), ours(4, 50, 4)],
            &[],
        );
        assert_eq!(c.pending, Some(PendingReason::Paused), "{}", c.summary);
        // Not paused: compared (and differs).
        let c = compare(
            "ns/a",
            now(),
            &theirs(2, 4, 100, OK),
            4,
            &[ours(2, 100, 2), ours(4, 50, 4)],
            &[],
        );
        assert_eq!(c.result, ShadowResult::Differ, "{}", c.summary);
    }

    fn with_fallback(mut t: DecisionTrace, in_effect: bool) -> DecisionTrace {
        t.metrics[0].fallback = Some(crate::trace::MetricFallbackTrace {
            failure_duration_seconds: Some(180),
            failures: None,
            replicas: Some(10),
            value: None,
            first_failure: Some(now()),
            failed_reads: 13,
            in_effect,
            transition: None,
        });
        t
    }

    #[test]
    fn a_decision_with_a_fallback_in_effect_is_not_compared() {
        // It would differ (ours 4, theirs 2): a fallback in effect, pending.
        let c = compare(
            "ns/a",
            now(),
            &theirs(2, 2, 100, OK),
            2,
            &[with_fallback(ours(2, 100, 2), true)],
            &[],
        );
        assert_eq!(
            (c.result, c.pending),
            (ShadowResult::Pending, Some(PendingReason::Fallback)),
            "{}",
            c.summary
        );
        assert_eq!(PendingReason::Fallback.as_str(), "fallback");
        // In effect at the decision made from the other side's inputs, cleared since.
        let c = compare(
            "ns/a",
            now(),
            &theirs(2, 4, 100, OK),
            4,
            &[with_fallback(ours(2, 100, 2), true), ours(4, 50, 4)],
            &[],
        );
        assert_eq!(c.pending, Some(PendingReason::Fallback), "{}", c.summary);
        // A fallback configured and not in effect: compared (and differs).
        let c = compare(
            "ns/a",
            now(),
            &theirs(2, 4, 100, OK),
            4,
            &[with_fallback(ours(2, 100, 2), false), ours(4, 50, 4)],
            &[],
        );
        assert_eq!(c.result, ShadowResult::Differ, "{}", c.summary);
    }

    fn with_pods_left_out(mut t: DecisionTrace, left_out: &[&str]) -> DecisionTrace {
        t.pod_selection = Some(crate::trace::PodSelectionTrace {
            strategy: "OwnerReferences".into(),
            excluded_pods: left_out.iter().map(|p| (*p).to_owned()).collect(),
            owners_unknown: false,
        });
        t
    }

    #[test]
    fn a_decision_that_left_pods_out_is_not_compared() {
        // It would differ (ours 4, theirs 2): pods left out, pending.
        let c = compare(
            "ns/a",
            now(),
            &theirs(2, 2, 100, OK),
            2,
            &[with_pods_left_out(ours(2, 100, 2), &["job-1"])],
            &[],
        );
        assert_eq!(
            (c.result, c.pending),
            (ShadowResult::Pending, Some(PendingReason::PodSelection)),
            "{}",
            c.summary
        );
        assert_eq!(PendingReason::PodSelection.as_str(), "pod_selection");
        // Left out at the decision made from the other side's inputs.
        let c = compare(
            "ns/a",
            now(),
            &theirs(2, 4, 100, OK),
            4,
            &[
                with_pods_left_out(ours(2, 100, 2), &["job-1"]),
                ours(4, 50, 4),
            ],
            &[],
        );
        assert_eq!(
            c.pending,
            Some(PendingReason::PodSelection),
            "{}",
            c.summary
        );
        // The strategy set, no pod left out: compared (and differs).
        let c = compare(
            "ns/a",
            now(),
            &theirs(2, 4, 100, OK),
            4,
            &[with_pods_left_out(ours(2, 100, 2), &[]), ours(4, 50, 4)],
            &[],
        );
        assert_eq!(c.result, ShadowResult::Differ, "{}", c.summary);
    }

    #[test]
    fn a_decision_with_a_routed_metric_is_not_compared() {
        let mut routed = ours(2, 100, 2);
        routed.metrics[0].api_group = Some("external.metrics.keda.sh".into());
        let c = compare(
            "ns/a",
            now(),
            &theirs(2, 2, 100, OK),
            2,
            &[routed.clone()],
            &[],
        );
        assert_eq!(
            (c.result, c.pending),
            (ShadowResult::Pending, Some(PendingReason::MetricSource)),
            "{}",
            c.summary
        );
        assert_eq!(PendingReason::MetricSource.as_str(), "metric_source");
        let c = compare(
            "ns/a",
            now(),
            &theirs(2, 4, 100, OK),
            4,
            &[routed, ours(4, 50, 4)],
            &[],
        );
        assert_eq!(
            c.pending,
            Some(PendingReason::MetricSource),
            "{}",
            c.summary
        );
    }

    #[test]
    fn a_lagging_other_side_is_pending_and_says_which_input() {
        // It last ran with the target at 7, which none of our decisions saw.
        let c = compare(
            "ns/a",
            now(),
            &theirs(7, 7, 100, OK),
            2,
            &[ours(2, 100, 4)],
            &[],
        );
        assert_eq!(c.result, ShadowResult::Pending);
        assert_eq!(c.pending, Some(PendingReason::TargetChanged));
        // Same replicas, other metric values.
        let c = compare(
            "ns/a",
            now(),
            &theirs(2, 2, 60, OK),
            2,
            &[ours(2, 100, 4)],
            &[],
        );
        assert_eq!(c.pending, Some(PendingReason::MetricsChanged));
        let none = HorizontalPodAutoscalerStatus::default();
        let c = compare("ns/a", now(), &none, 2, &[ours(2, 100, 4)], &[]);
        assert_eq!(c.pending, Some(PendingReason::NoStatus));
    }

    #[test]
    fn store_keeps_ten_differences() {
        let store = ShadowStore::new();
        for i in 0..12 {
            let c = compare(
                "ns/a",
                now(),
                &theirs(2, 2, 100, OK),
                2,
                &[ours(2, 100, 3 + i)],
                &[],
            );
            store.record(c);
        }
        let r = store.get("ns/a").unwrap();
        assert_eq!(r.differences.len(), DIFFERENCES_PER_HPA);
        assert_eq!(r.differences[0].ours.desired_replicas, 5);
        assert!(r.latest.unwrap().trace.is_none());
        store.forget("ns/a");
        assert!(store.get("ns/a").is_none());
    }

    #[test]
    fn each_status_of_the_active_controller_is_settled_once() {
        let store = ShadowStore::new();
        let lagging = theirs(7, 7, 100, OK);
        let written = theirs(2, 4, 100, OK);
        let decisions = [ours(2, 100, 4), ours(4, 50, 4)];
        let fp = |s: &HorizontalPodAutoscalerStatus| Some(status_fingerprint(s));
        // The first status: pending twice, then replaced before any comparison was made.
        for _ in 0..2 {
            let c = compare("ns/a", now(), &lagging, 4, &decisions, &[]);
            assert!(store.record_status(c, fp(&lagging)).is_empty());
        }
        // The next one agrees at once: the first is settled as not compared, this one as
        // agreeing; comparing it again counts nothing.
        let c = compare("ns/a", now(), &written, 4, &decisions, &[]);
        assert_eq!(
            store.record_status(c, fp(&written)),
            vec![
                StatusOutcome::NotCompared(Some(PendingReason::TargetChanged)),
                StatusOutcome::Compared(ShadowResult::Agree)
            ]
        );
        let c = compare("ns/a", now(), &written, 4, &decisions, &[]);
        assert!(store.record_status(c, fp(&written)).is_empty());
        assert_eq!(
            StatusOutcome::NotCompared(Some(PendingReason::MetricsChanged)).labels(),
            ["not_compared", "metrics_changed"]
        );
        assert_eq!(
            StatusOutcome::Compared(ShadowResult::Differ).labels(),
            ["differ", ""]
        );
    }

    #[test]
    fn a_difference_held_by_history_is_not_compared() {
        // Theirs held at 4 by the downscale window; ours (another history) decided 3.
        let mut held = theirs(4, 4, 100, OK);
        for c in held.conditions.iter_mut().flatten() {
            if c.type_ == "AbleToScale" {
                c.reason = Some("ScaleDownStabilized".into());
            }
        }
        let c = compare("ns/a", now(), &held, 4, &[ours(4, 100, 3)], &[]);
        assert_eq!(c.result, ShadowResult::Pending, "{}", c.summary);
        assert_eq!(c.pending, Some(PendingReason::History));
        assert!(!c.differences.is_empty());
        // Without a history reason on either side it is a difference.
        let c = compare(
            "ns/a",
            now(),
            &theirs(4, 4, 100, OK),
            4,
            &[ours(4, 100, 3)],
            &[],
        );
        assert_eq!(c.result, ShadowResult::Differ);
    }

    #[test]
    fn a_difference_while_the_pods_changed_is_not_compared() {
        // The other side decided 10 at 6 replicas. Our decision from the same inputs counted
        // 3 ready pods; the next one (after its rescale) counted 6: it reconciled in between.
        let mut before = ours(6, 100, 6);
        before.metrics[0].ready_pods = Some(3);
        let mut after = ours(10, 100, 10);
        after.metrics[0].ready_pods = Some(6);
        let status = theirs(6, 10, 100, OK);
        let c = compare("ns/a", now(), &status, 10, &[before.clone(), after], &[]);
        assert_eq!(c.result, ShadowResult::Pending, "{}", c.summary);
        assert_eq!(c.pending, Some(PendingReason::PodsChanged));
        assert_eq!(c.ours.desired_replicas, 6);
        // The summary says what each decision there counted and decided.
        assert!(
            c.summary
                .contains("this controller's decisions: 2026-01-01T00:00:00Z [ready 3] -> 6, 2026-01-01T00:00:00Z [ready 6] -> 10"),
            "{}",
            c.summary
        );
        assert!(!c.differences.is_empty());
        // The pods changed just before the decision compared: likewise.
        let mut earlier = ours(6, 90, 6);
        earlier.metrics[0].ready_pods = Some(2);
        let c = compare("ns/a", now(), &status, 10, &[earlier, before.clone()], &[]);
        assert_eq!(c.pending, Some(PendingReason::PodsChanged), "{}", c.summary);
        // The same pods all along: a difference.
        let mut same = ours(10, 100, 10);
        same.metrics[0].ready_pods = Some(3);
        let c = compare("ns/a", now(), &status, 10, &[before.clone(), same], &[]);
        assert_eq!(c.result, ShadowResult::Differ, "{}", c.summary);
        // Pods that changed earlier than the decision before the one compared do not count.
        let mut long_ago = ours(6, 80, 6);
        long_ago.metrics[0].ready_pods = Some(1);
        let c = compare(
            "ns/a",
            now(),
            &status,
            6,
            &[long_ago, before.clone(), before.clone()],
            &[],
        );
        assert_eq!(c.result, ShadowResult::Differ, "{}", c.summary);
        // Agreement is agreement, whatever the pods did.
        let mut agreed = ours(6, 100, 10);
        agreed.metrics[0].ready_pods = Some(3);
        let c = compare(
            "ns/a",
            now(),
            &status,
            10,
            &[agreed, ours(10, 100, 10)],
            &[],
        );
        assert_eq!(c.result, ShadowResult::Agree, "{}", c.summary);
    }

    #[test]
    fn the_pods_are_compared_over_every_decision_from_the_same_inputs() {
        // The other side decided 10 at 6 replicas and wrote it once; it reconciled again
        // later without a new status, so it may have decided anywhere in our decisions from
        // those inputs.
        let status = theirs(6, 10, 100, OK);
        let with_ready = |desired: i32, ready: i64| {
            let mut t = ours(6, 100, desired);
            t.metrics[0].ready_pods = Some(ready);
            t
        };
        // The pods changed early in that stretch, further back than the decision just
        // before the one compared: not compared.
        let c = compare(
            "ns/a",
            now(),
            &status,
            10,
            &[with_ready(6, 6), with_ready(6, 3), with_ready(6, 3)],
            &[],
        );
        assert_eq!(c.pending, Some(PendingReason::PodsChanged), "{}", c.summary);
        // A decision of that stretch that counted the pods otherwise decided as it did: agree,
        // with that decision as ours.
        let c = compare(
            "ns/a",
            now(),
            &status,
            10,
            &[with_ready(10, 6), with_ready(6, 3), with_ready(6, 3)],
            &[],
        );
        assert_eq!(c.result, ShadowResult::Agree, "{}", c.summary);
        assert_eq!(c.ours.desired_replicas, 10);
        assert!(c.differences.is_empty());
        assert_eq!(c.trace.unwrap().metrics[0].ready_pods, Some(6));
        // One that decided as it did with the pods counted as the one compared (so it was
        // something else, the history, that decided): not an agreement.
        let c = compare(
            "ns/a",
            now(),
            &status,
            10,
            &[with_ready(10, 3), with_ready(6, 6), with_ready(6, 3)],
            &[],
        );
        assert_eq!(c.pending, Some(PendingReason::PodsChanged), "{}", c.summary);
        // Nor one made from other inputs.
        let mut other = with_ready(10, 6);
        other.metrics[0].current = Some(cpu(90));
        let c = compare(
            "ns/a",
            now(),
            &status,
            10,
            &[other, with_ready(6, 3), with_ready(6, 3)],
            &[],
        );
        assert_eq!(c.result, ShadowResult::Differ, "{}", c.summary);
    }

    #[test]
    fn a_difference_across_a_spec_edit_is_not_compared() {
        // The other side decided 4 at 4 replicas from the spec before an edit (generation 1);
        // this controller's decisions from the same values read generation 2.
        let status = theirs(4, 4, 100, OK);
        // A decision at 4 replicas from spec generation `generation` or fingerprint `spec`.
        let from = |desired: i32, generation: Option<i64>, spec: Option<&str>| {
            let mut t = ours(4, 100, desired);
            t.generation = generation;
            t.spec_fingerprint = spec.map(str::to_owned);
            t
        };
        let gen1 = || from(4, Some(1), None);
        let gen2 = || from(6, Some(2), None);
        let check = |status: &HorizontalPodAutoscalerStatus, ours: &[DecisionTrace]| {
            compare("ns/a", now(), status, 4, ours, &[])
        };
        // A status without observedGeneration (before 1.37): the generation changed in the
        // stretch compared.
        let c = check(&status, &[gen1(), gen2()]);
        assert_eq!(c.pending, Some(PendingReason::SpecChanged), "{}", c.summary);
        // Without an edit there it is a difference.
        let c = check(&status, &[gen2(), gen2()]);
        assert_eq!(c.result, ShadowResult::Differ, "{}", c.summary);
        // An API server without HPA generations (before 1.37): the spec's fingerprint tells.
        let spec_b = || from(6, None, Some("b"));
        let c = check(&status, &[from(4, None, Some("a")), spec_b()]);
        assert_eq!(c.pending, Some(PendingReason::SpecChanged), "{}", c.summary);
        let c = check(&status, &[spec_b(), spec_b()]);
        assert_eq!(c.result, ShadowResult::Differ, "{}", c.summary);
        // With observedGeneration the decision from that generation is the one compared.
        let mut recorded = status.clone();
        recorded.observed_generation = Some(1);
        let c = check(&recorded, &[gen1(), gen2()]);
        assert_eq!(c.result, ShadowResult::Agree, "{}", c.summary);
        // ... and none from it: not compared, whatever the others decided.
        let c = check(&recorded, &[gen2(), gen2()]);
        assert_eq!(c.pending, Some(PendingReason::SpecChanged), "{}", c.summary);
        assert_eq!(c.result, ShadowResult::Pending);
    }

    #[test]
    fn a_decision_its_stabilization_window_raised_is_held_by_history() {
        // The metrics asked for 4; a recommendation of 6 in this controller's window made it
        // 6, and the rescale's SucceededRescale hides the ScaleDownStabilized it set.
        let mut held = ours(4, 100, 6);
        held.prenormalized = Some(4);
        held.stabilization = Some(
            serde_json::from_value(serde_json::json!({
                "upWindowSeconds": 0, "downWindowSeconds": 300,
                "recommendations": [], "stabilized": 6, "reason": "ScaleDownStabilized"
            }))
            .unwrap(),
        );
        let c = compare(
            "ns/a",
            now(),
            &theirs(4, 4, 100, OK),
            4,
            &[held.clone()],
            &[],
        );
        assert_eq!(c.pending, Some(PendingReason::History), "{}", c.summary);
        // Not held (the window gave what the metrics asked for): a difference.
        held.prenormalized = Some(6);
        let c = compare("ns/a", now(), &theirs(4, 4, 100, OK), 4, &[held], &[]);
        assert_eq!(c.result, ShadowResult::Differ, "{}", c.summary);
    }

    #[test]
    fn an_average_over_zero_replicas_cannot_be_matched() {
        let mut zero = theirs(0, 3, 100, OK);
        zero.current_replicas = None;
        zero.current_metrics = Some(vec![MetricStatus {
            type_: "Object".into(),
            object: Some(k8s_openapi::api::autoscaling::v2::ObjectMetricStatus {
                current: MetricValueStatus {
                    average_value: Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity(
                        "-9223372036854775808m".into(),
                    )),
                    ..Default::default()
                },
                ..Default::default()
            }),
            ..Default::default()
        }]);
        let c = compare("ns/a", now(), &zero, 3, &[ours(0, 100, 0)], &[]);
        assert_eq!(
            c.pending,
            Some(PendingReason::MetricsUnrecorded),
            "{}",
            c.summary
        );
    }

    #[test]
    fn a_rescale_whose_scale_write_is_not_seen_yet_is_compared_with_what_it_decided() {
        // Its status says it rescaled 2 -> 4; the target as read here still has 2.
        let c = compare(
            "ns/a",
            now(),
            &theirs(2, 4, 100, OK),
            2,
            &[ours(2, 100, 4)],
            &[],
        );
        assert_eq!(c.result, ShadowResult::Agree, "{}", c.summary);
        assert_eq!(c.theirs.target_replicas, 4);
    }

    fn rescaled_at(
        mut status: HorizontalPodAutoscalerStatus,
        at: &str,
    ) -> HorizontalPodAutoscalerStatus {
        status.last_scale_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            at.parse().unwrap(),
        ));
        status
    }

    #[test]
    fn their_rescale_is_pinned_to_the_second_its_last_scale_time_records() {
        let t = |s: &str| -> Timestamp { s.parse().unwrap() };
        let status = rescaled_at(theirs(4, 1, 100, OK), "2026-01-01T00:01:00Z");
        let r = their_rescale(&status, 1, t("2026-01-01T00:01:02Z")).unwrap();
        assert_eq!((r.from, r.to), (4, 1));
        assert_eq!(
            r.moments,
            [
                t("2026-01-01T00:01:00Z"),
                t("2026-01-01T00:01:00.999999999Z")
            ]
        );
        assert_eq!(r.scaled_at, t("2026-01-01T00:01:00.5Z"));
        // Seen within that second: nothing after now.
        let r = their_rescale(&status, 1, t("2026-01-01T00:01:00.2Z")).unwrap();
        assert_eq!(
            r.moments,
            [t("2026-01-01T00:01:00Z"), t("2026-01-01T00:01:00.2Z")]
        );
        assert_eq!(r.scaled_at, t("2026-01-01T00:01:00.2Z"));
        // Not a rescale it has just made: the target has other replicas, the status says it
        // did not rescale, the rescale is too old, or from the future.
        assert_eq!(their_rescale(&status, 4, t("2026-01-01T00:01:02Z")), None);
        let held = [
            ("AbleToScale", "ScaleDownStabilized"),
            ("ScalingActive", "ValidMetricFound"),
            ("ScalingLimited", "DesiredWithinRange"),
        ];
        let not_rescaled = rescaled_at(theirs(4, 1, 100, &held), "2026-01-01T00:01:00Z");
        assert_eq!(
            their_rescale(&not_rescaled, 1, t("2026-01-01T00:01:02Z")),
            None
        );
        assert_eq!(their_rescale(&status, 1, t("2026-01-01T00:01:31Z")), None);
        assert_eq!(their_rescale(&status, 1, t("2026-01-01T00:00:59Z")), None);
        assert_eq!(
            their_rescale(&theirs(4, 1, 100, OK), 1, t("2026-01-01T00:01:02Z")),
            None
        );
    }

    #[test]
    fn a_decision_at_their_moment_that_decides_as_they_did_agrees() {
        // Our kept decision from the same inputs was held by its window (4 -> 4); at the
        // moment the other side decided, the window had let go: 4 -> 2, as it did.
        let mut held = ours(4, 50, 4);
        held.prenormalized = Some(2);
        held.stabilization = Some(
            serde_json::from_value(serde_json::json!({
                "upWindowSeconds": 0, "downWindowSeconds": 60,
                "recommendations": [], "stabilized": 4, "reason": "ScaleDownStabilized"
            }))
            .unwrap(),
        );
        let status = theirs(4, 2, 50, OK);
        let c = compare("ns/a", now(), &status, 2, &[held.clone()], &[]);
        assert_eq!(c.pending, Some(PendingReason::History), "{}", c.summary);
        let at_their_moment = ours(4, 50, 2);
        let c = compare(
            "ns/a",
            now(),
            &status,
            2,
            &[held.clone()],
            std::slice::from_ref(&at_their_moment),
        );
        assert_eq!(c.result, ShadowResult::Agree, "{}", c.summary);
        assert!(
            c.summary.contains("at the other controller's moment"),
            "{}",
            c.summary
        );
        // One that decided otherwise, or from other inputs, changes nothing.
        for other in [ours(4, 50, 3), ours(4, 60, 2), ours(5, 50, 2)] {
            let c = compare("ns/a", now(), &status, 2, &[held.clone()], &[other]);
            assert_eq!(c.pending, Some(PendingReason::History), "{}", c.summary);
        }
    }
}
