//! Scale-event storage for the behavior rate limits (`storeScaleEvent`, `getReplicasChangePerPeriod`).
//!
//! Mirrors upstream `pkg/controller/podautoscaler/horizontal.go`: `timestampedScaleEvent`,
//! `getReplicasChangePerPeriod`, `markScaleEventsOutdated`, `getLongestPolicyPeriod` and the
//! per-direction body of `storeScaleEvent`. Functions work on one HPA's list for one
//! direction; locking is the caller's (see [`crate::state`]).

use jiff::Timestamp;

use crate::behavior::ScalingPolicy;
use crate::recommendations::{minus_secs, recorded_before};

/// One successful scale change in one direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampedScaleEvent {
    /// The magnitude of the change (always stored non-negative: `new - prev` for scale-up,
    /// `prev - new` for scale-down).
    pub replica_change: i32,
    /// When the scale update succeeded.
    pub timestamp: Timestamp,
    /// Older than the direction's longest policy period at the last store: the slot may be
    /// reused.
    pub outdated: bool,
}

/// Upstream `getReplicasChangePerPeriod`: the sum of `replica_change` over events strictly
/// after `now - period_seconds` (wrapping like Go's int32 addition).
pub fn replicas_change_per_period(
    period_seconds: i32,
    events: &[TimestampedScaleEvent],
    now: Timestamp,
) -> i32 {
    let cutoff = minus_secs(now, period_seconds);
    events
        .iter()
        .filter(|e| e.timestamp > cutoff)
        .fold(0i32, |acc, e| acc.wrapping_add(e.replica_change))
}

/// Upstream `getLongestPolicyPeriod`: the largest `periodSeconds`, 0 without policies.
pub fn longest_policy_period(policies: &[ScalingPolicy]) -> i32 {
    policies.iter().map(|p| p.period_seconds).fold(0, i32::max)
}

/// Upstream `markScaleEventsOutdated`: flag every event before `now - longest_period`
/// (a record made at `t` counts as made just before `t`, see the note in
/// `recommendations.rs`) as outdated (flags are never cleared).
pub fn mark_scale_events_outdated(
    events: &mut [TimestampedScaleEvent],
    longest_period: i32,
    now: Timestamp,
) {
    let cutoff = minus_secs(now, longest_period);
    for e in events.iter_mut() {
        if recorded_before(e.timestamp, cutoff) {
            e.outdated = true;
        }
    }
}

/// The per-direction body of upstream `storeScaleEvent`: mark outdated events, then put the
/// new event `{replica_change, now, false}` into the *last* outdated slot, or append.
pub fn store_scale_event(
    events: &mut Vec<TimestampedScaleEvent>,
    policies: &[ScalingPolicy],
    replica_change: i32,
    now: Timestamp,
) {
    mark_scale_events_outdated(events, longest_policy_period(policies), now);
    let slot = events.iter().rposition(|e| e.outdated);
    let event = TimestampedScaleEvent {
        replica_change,
        timestamp: now,
        outdated: false,
    };
    match slot {
        Some(i) => events[i] = event,
        None => events.push(event),
    }
}

#[cfg(test)]
mod tests {
    use jiff::SignedDuration;

    use super::*;
    use crate::behavior::tests::generate_scaling_rules;

    fn now() -> Timestamp {
        "2025-06-01T12:00:00Z".parse().unwrap()
    }

    fn ev(change: i32, secs_ago: i64, outdated: bool) -> TimestampedScaleEvent {
        TimestampedScaleEvent {
            replica_change: change,
            timestamp: now() - SignedDuration::from_secs(secs_ago),
            outdated,
        }
    }

    /// Upstream TestStoreScaleEvents (the same table drives both directions upstream; the
    /// per-direction storage is identical).
    #[test]
    fn store_scale_events_table() {
        struct Case {
            name: &'static str,
            prev: Vec<TimestampedScaleEvent>,
            want: Vec<(i32, bool)>,
            rules: Option<(i32, i32, i32, i32)>,
            want_change: i32,
        }
        let cases = vec![
            Case {
                name: "empty entries with default behavior",
                prev: vec![],
                want: vec![],
                rules: None,
                want_change: 0,
            },
            Case {
                name: "empty entries with two-policy-behavior",
                prev: vec![],
                want: vec![(5, false)],
                rules: Some((10, 60, 100, 60)),
                want_change: 0,
            },
            Case {
                name: "one outdated entry to be kept untouched without behavior",
                prev: vec![ev(7, 61, false)],
                want: vec![(7, false)],
                rules: None,
                want_change: 0,
            },
            Case {
                name: "one outdated entry to be replaced with behavior",
                prev: vec![ev(7, 61, false)],
                want: vec![(5, false)],
                rules: Some((10, 60, 100, 60)),
                want_change: 0,
            },
            Case {
                name: "one actual entry to be not touched with behavior",
                prev: vec![ev(7, 58, false)],
                want: vec![(7, false), (5, false)],
                rules: Some((10, 60, 100, 60)),
                want_change: 7,
            },
            Case {
                name: "two entries, one of them to be replaced",
                prev: vec![ev(7, 61, false), ev(6, 59, false)],
                want: vec![(5, false), (6, false)],
                rules: Some((10, 60, 0, 0)),
                want_change: 6,
            },
            Case {
                name: "replace one entry, use policies with different periods",
                prev: vec![
                    ev(8, 29, false),
                    ev(6, 59, false),
                    ev(7, 61, false),
                    ev(9, 61, false),
                ],
                want: vec![(8, false), (6, false), (7, true), (5, false)],
                rules: Some((10, 60, 100, 30)),
                want_change: 14,
            },
            Case {
                name: "two entries, both actual",
                prev: vec![ev(7, 58, false), ev(6, 59, false)],
                want: vec![(7, false), (6, false), (5, false)],
                rules: Some((10, 120, 100, 30)),
                want_change: 13,
            },
        ];
        for mut c in cases {
            assert_eq!(
                replicas_change_per_period(60, &c.prev, now()),
                c.want_change,
                "{}",
                c.name
            );
            // Without behavior upstream stores nothing (the caller's check, see state.rs).
            if let Some((pods, pp, pct, pcp)) = c.rules {
                let rules = generate_scaling_rules(pods, pp, pct, pcp, 0);
                store_scale_event(&mut c.prev, &rules.policies, 5, now());
            }
            let got: Vec<(i32, bool)> = c
                .prev
                .iter()
                .map(|e| (e.replica_change, e.outdated))
                .collect();
            assert_eq!(got, c.want, "{}", c.name);
        }
    }

    #[test]
    fn change_per_period_is_strictly_after_cutoff() {
        let events = [ev(3, 60, false), ev(4, 59, false)];
        assert_eq!(replicas_change_per_period(60, &events, now()), 4);
        assert_eq!(replicas_change_per_period(61, &events, now()), 7);
    }
}
