//! Shadow mode: compare this controller's decision with what the active controller
//! (kube-controller-manager) last wrote, without writing anything.
//!
//! No upstream counterpart. The comparison is pure ([`compare`]); [`ShadowStore`] keeps the
//! last comparison and the last [`DIFFERENCES_PER_HPA`] differences of every HPA for
//! `/debug/shadow`.
//!
//! The other side is only compared when its status is *newer than the inputs* of this
//! decision. The HPA status records what the active controller read: `currentReplicas` (the
//! target's `spec.replicas` it saw) and `currentMetrics` (the values it read). When both
//! equal what this decision read, the active controller has run since the inputs last
//! changed, and its `desiredReplicas` and condition reasons are compared with ours. When
//! either differs, it has not run since the inputs changed (or it has just scaled the
//! target and not yet synced again); the comparison is `pending`, naming the input.

use std::collections::VecDeque;

use dashmap::DashMap;
use jiff::Timestamp;
use k8s_openapi::api::autoscaling::v2::{HorizontalPodAutoscalerStatus, MetricStatus};
use serde::{Deserialize, Serialize};

use crate::trace::DecisionTrace;

/// How many differences are kept per HPA.
pub const DIFFERENCES_PER_HPA: usize = 10;

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
}

impl PendingReason {
    /// The `reason` label.
    pub fn as_str(self) -> &'static str {
        match self {
            PendingReason::NoStatus => "no_status",
            PendingReason::TargetChanged => "target_changed",
            PendingReason::MetricsChanged => "metrics_changed",
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

fn compared_conditions(status: &HorizontalPodAutoscalerStatus) -> Vec<String> {
    let mut out: Vec<String> = status
        .conditions
        .iter()
        .flatten()
        .filter(|c| COMPARED_CONDITIONS.contains(&c.type_.as_str()))
        .map(|c| format!("{}={}", c.type_, c.reason.as_deref().unwrap_or("")))
        .collect();
    out.sort();
    out
}

fn metrics_equal(a: Option<&Vec<MetricStatus>>, b: Option<&Vec<MetricStatus>>) -> bool {
    let norm = |m: Option<&Vec<MetricStatus>>| m.filter(|v| !v.is_empty()).cloned();
    norm(a) == norm(b)
}

/// Compare this controller's decision with the other side's last status.
///
/// `theirs` is the HPA status as read at the start of the reconcile (written by the active
/// controller); `target_replicas` the target's `spec.replicas` read by this reconcile;
/// `ours` the status this controller would have written and `our_target` the target's
/// replicas after its (unwritten) rescale.
pub fn compare(
    hpa: &str,
    time: Timestamp,
    theirs: &HorizontalPodAutoscalerStatus,
    target_replicas: i32,
    ours: &HorizontalPodAutoscalerStatus,
    our_target: i32,
) -> ShadowComparison {
    let their_side = Side {
        desired_replicas: theirs.desired_replicas,
        target_replicas,
        current_replicas: theirs.current_replicas.unwrap_or(0),
        conditions: compared_conditions(theirs),
    };
    let our_side = Side {
        desired_replicas: ours.desired_replicas,
        target_replicas: our_target,
        current_replicas: ours.current_replicas.unwrap_or(0),
        conditions: compared_conditions(ours),
    };
    let pending = if theirs.conditions.as_ref().is_none_or(Vec::is_empty) {
        Some((
            PendingReason::NoStatus,
            "the other controller has not written a status for this HPA yet".to_owned(),
        ))
    } else if their_side.current_replicas != target_replicas {
        Some((
            PendingReason::TargetChanged,
            format!(
                "the other controller has not run since the inputs changed: its status was computed with the target at {} replicas, the target now has {}",
                their_side.current_replicas, target_replicas
            ),
        ))
    } else if !metrics_equal(
        theirs.current_metrics.as_ref(),
        ours.current_metrics.as_ref(),
    ) {
        Some((
            PendingReason::MetricsChanged,
            "the other controller has not run since the inputs changed: the metric values it recorded differ from the ones read now".to_owned(),
        ))
    } else {
        None
    };
    if let Some((reason, summary)) = pending {
        return ShadowComparison {
            hpa: hpa.to_owned(),
            time,
            result: ShadowResult::Pending,
            pending: Some(reason),
            summary,
            differences: Vec::new(),
            ours: our_side,
            theirs: their_side,
            trace: None,
        };
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
    let (result, summary) = if differences.is_empty() {
        (
            ShadowResult::Agree,
            format!(
                "same inputs (target at {target_replicas} replicas, same metric values): both decided {} replicas with the same condition reasons",
                our_side.desired_replicas
            ),
        )
    } else {
        (
            ShadowResult::Differ,
            format!(
                "same inputs (target at {target_replicas} replicas, same metric values), different decision: {}",
                differences.join("; ")
            ),
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
        trace: None,
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
        let mut entry = self.records.entry(comparison.hpa.clone()).or_default();
        let mut latest = comparison.clone();
        latest.trace = None;
        entry.latest = Some(latest);
        if comparison.result == ShadowResult::Differ {
            entry.differences.push_back(comparison);
            while entry.differences.len() > DIFFERENCES_PER_HPA {
                entry.differences.pop_front();
            }
        }
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
    use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscalerCondition;

    use super::*;

    fn status(
        current: i32,
        desired: i32,
        reasons: &[(&str, &str)],
    ) -> HorizontalPodAutoscalerStatus {
        HorizontalPodAutoscalerStatus {
            current_replicas: Some(current),
            desired_replicas: desired,
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

    fn now() -> Timestamp {
        "2026-01-01T00:00:00Z".parse().unwrap()
    }

    const OK: &[(&str, &str)] = &[
        ("AbleToScale", "ReadyForNewScale"),
        ("ScalingActive", "ValidMetricFound"),
        ("ScalingLimited", "DesiredWithinRange"),
    ];

    #[test]
    fn agree_on_same_inputs() {
        let c = compare("ns/a", now(), &status(3, 3, OK), 3, &status(3, 3, OK), 3);
        assert_eq!(c.result, ShadowResult::Agree);
        assert!(c.differences.is_empty());
    }

    #[test]
    fn differ_names_each_difference() {
        let ours = status(3, 5, OK);
        let c = compare("ns/a", now(), &status(3, 3, OK), 3, &ours, 5);
        assert_eq!(c.result, ShadowResult::Differ);
        assert_eq!(
            c.differences,
            vec![
                "desiredReplicas: ours 5, theirs 3".to_owned(),
                "target replicas: ours 5, theirs 3".to_owned()
            ]
        );
    }

    #[test]
    fn lagging_other_side_is_pending_not_differ() {
        // The target moved to 6 since the other side computed with 3.
        let c = compare("ns/a", now(), &status(3, 3, OK), 6, &status(6, 6, OK), 6);
        assert_eq!(c.result, ShadowResult::Pending);
        assert_eq!(c.pending, Some(PendingReason::TargetChanged));
        let none = HorizontalPodAutoscalerStatus::default();
        let c = compare("ns/a", now(), &none, 3, &status(3, 3, OK), 3);
        assert_eq!(c.pending, Some(PendingReason::NoStatus));
    }

    #[test]
    fn store_keeps_ten_differences() {
        let store = ShadowStore::new();
        for i in 0..12 {
            let c = compare(
                "ns/a",
                now(),
                &status(3, 3, OK),
                3,
                &status(3, 4 + i, OK),
                3,
            );
            store.record(c);
        }
        let r = store.get("ns/a").unwrap();
        assert_eq!(r.differences.len(), DIFFERENCES_PER_HPA);
        assert_eq!(r.differences[0].ours.desired_replicas, 6);
        store.forget("ns/a");
        assert!(store.get("ns/a").is_none());
    }
}
