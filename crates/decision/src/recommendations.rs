//! The per-HPA recommendation history and the two stabilization algorithms.
//!
//! Mirrors upstream `pkg/controller/podautoscaler/horizontal.go`: `timestampedRecommendation`,
//! `recordInitialRecommendation`, `stabilizeRecommendation` (legacy path, `normalizeDesiredReplicas`) and
//! `stabilizeRecommendationWithBehaviors` (`normalizeDesiredReplicasWithBehaviors`). The functions work on one
//! HPA's list; locking is the caller's (see [`crate::state`]).

use jiff::{SignedDuration, Timestamp};

use crate::conditions::StabilizationReason;

/// One recorded (unstabilized) recommendation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampedRecommendation {
    /// The recommended replica count.
    pub recommendation: i32,
    /// When it was recorded.
    pub timestamp: Timestamp,
}

/// `now - d`, saturating at the smallest timestamp (Go's `now.Add(-d)`).
pub fn minus(now: Timestamp, d: SignedDuration) -> Timestamp {
    now.checked_sub(d).unwrap_or(Timestamp::MIN)
}

/// Upstream's `t.Before(cutoff)` for a record made by an *earlier* operation.
///
/// Upstream stamps records with `time.Now()`, which strictly increases between
/// operations, so a record is always a little older than any later `now`. With an explicit
/// (possibly virtual) `now`, two operations can share an instant; a record at `t` is
/// therefore treated as made at `t - ε`, which turns "before" into `t <= cutoff` (while
/// "after" stays `t > cutoff`). Without this, a zero stabilization window would still
/// count the initial recommendation recorded earlier in the same reconcile.
pub(crate) fn recorded_before(t: Timestamp, cutoff: Timestamp) -> bool {
    t <= cutoff
}

/// `now - seconds`.
pub(crate) fn minus_secs(now: Timestamp, seconds: i32) -> Timestamp {
    minus(now, SignedDuration::from_secs(i64::from(seconds)))
}

/// Upstream `recordInitialRecommendation`: seed an empty history with the current count,
/// so a fresh HPA (or a new leader) never scales down below it within the window.
pub fn record_initial_recommendation(
    history: &mut Vec<TimestampedRecommendation>,
    current_replicas: i32,
    now: Timestamp,
) {
    if history.is_empty() {
        history.push(TimestampedRecommendation {
            recommendation: current_replicas,
            timestamp: now,
        });
    }
}

/// Store `rec` in the last outdated slot if there is one, otherwise append.
fn record(
    history: &mut Vec<TimestampedRecommendation>,
    old: Option<usize>,
    rec: TimestampedRecommendation,
) {
    match old {
        Some(i) => history[i] = rec,
        None => history.push(rec),
    }
}

/// Upstream `stabilizeRecommendation` (no behavior): the maximum of the prenormalized value
/// and every recommendation not older than `window` (entries strictly before
/// `now - window` are old; the last old slot is reused for the new record).
pub fn stabilize_recommendation(
    history: &mut Vec<TimestampedRecommendation>,
    prenormalized: i32,
    window: SignedDuration,
    now: Timestamp,
) -> i32 {
    let cutoff = minus(now, window);
    let mut max = prenormalized;
    let mut old = None;
    for (i, rec) in history.iter().enumerate() {
        if recorded_before(rec.timestamp, cutoff) {
            old = Some(i);
        } else if rec.recommendation > max {
            max = rec.recommendation;
        }
    }
    record(
        history,
        old,
        TimestampedRecommendation {
            recommendation: prenormalized,
            timestamp: now,
        },
    );
    max
}

/// Upstream `stabilizeRecommendationWithBehaviors`.
///
/// The up-recommendation is the minimum over entries strictly after `now - up_window`, the
/// down-recommendation the maximum over entries strictly after `now - down_window` (both
/// seeded with `desired`); the current count is raised to the first and then lowered to
/// the second. The unstabilized `desired` is recorded, reusing the last slot that is older
/// than both cutoffs. The returned reason depends only on the direction (`desired >=
/// current` is "up").
pub fn stabilize_recommendation_with_behaviors(
    history: &mut Vec<TimestampedRecommendation>,
    current: i32,
    desired: i32,
    up_window_seconds: i32,
    down_window_seconds: i32,
    now: Timestamp,
) -> (i32, StabilizationReason) {
    let up_cutoff = minus_secs(now, up_window_seconds);
    let down_cutoff = minus_secs(now, down_window_seconds);
    let mut up = desired;
    let mut down = desired;
    let mut old = None;
    for (i, rec) in history.iter().enumerate() {
        if rec.timestamp > up_cutoff {
            up = up.min(rec.recommendation);
        }
        if rec.timestamp > down_cutoff {
            down = down.max(rec.recommendation);
        }
        if recorded_before(rec.timestamp, up_cutoff) && recorded_before(rec.timestamp, down_cutoff)
        {
            old = Some(i);
        }
    }
    let mut recommendation = current;
    if recommendation < up {
        recommendation = up;
    }
    if recommendation > down {
        recommendation = down;
    }
    record(
        history,
        old,
        TimestampedRecommendation {
            recommendation: desired,
            timestamp: now,
        },
    );
    let reason = if desired >= current {
        StabilizationReason::ScaleUpStabilized
    } else {
        StabilizationReason::ScaleDownStabilized
    };
    (recommendation, reason)
}

#[cfg(test)]
mod tests;
