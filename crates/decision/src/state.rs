//! The controller's in-memory per-HPA recommendation and scale-event state, shared by all
//! workers (`HorizontalController.recommendations` and `scaleUpEvents`/`scaleDownEvents`, keyed as `reconcileKey` keys them).
//!
//! Mirrors the maps and locks of upstream `pkg/controller/podautoscaler/horizontal.go`:
//! `recommendations` (`recommendationsLock`) and `scaleUpEvents` / `scaleDownEvents`
//! (`scaleUpEventsLock` / `scaleDownEventsLock`). Here each map is a [`DashMap`], whose
//! per-shard locks give the same per-key exclusion; nothing holds two entries of one map at a
//! time, so workers cannot deadlock.

use dashmap::DashMap;
use jiff::{SignedDuration, Timestamp};

use crate::annotations::InvalidAnnotation;
use crate::behavior::EffectiveBehavior;
use crate::decision::MetricResult;
use crate::fallback::{FailureRecord, MetricFallback, MetricFallbackStatus};
use crate::normalize::{
    Normalization, normalize_desired_replicas, normalize_desired_replicas_with_behaviors,
};
use crate::recommendations::{TimestampedRecommendation, record_initial_recommendation};
use crate::scale_events::{TimestampedScaleEvent, store_scale_event};

/// Recommendation history and scale events of every HPA, keyed by `namespace/name`.
///
/// State is lost on restart and on leadership change, as upstream (the maps live only in the controller's memory).
#[derive(Debug, Default)]
pub struct HpaState {
    recommendations: DashMap<String, Vec<TimestampedRecommendation>>,
    scale_up_events: DashMap<String, Vec<TimestampedScaleEvent>>,
    scale_down_events: DashMap<String, Vec<TimestampedScaleEvent>>,
    /// The count a pinned pause (`kube-hpa-controller.io/paused-replicas`) has brought the
    /// target to (no upstream counterpart, see [`crate::pause`]).
    pins: DashMap<String, i32>,
    /// The invalid annotations already reported with a Warning event.
    warned: DashMap<String, Vec<InvalidAnnotation>>,
    /// The consecutive failures of every metric with a fallback
    /// (`kube-hpa-controller.io/metric-fallback`; no upstream counterpart, see
    /// [`crate::fallback`]). Lost on restart and on leadership change: counting starts over.
    metric_failures: DashMap<String, Vec<FailureRecord>>,
}

impl HpaState {
    /// Empty state.
    pub fn new() -> Self {
        Self::default()
    }

    /// Upstream `recordInitialRecommendation`: seed the history of `key` with the current
    /// count when it has none.
    pub fn record_initial_recommendation(&self, key: &str, current_replicas: i32, now: Timestamp) {
        let mut entry = self.recommendations.entry(key.to_owned()).or_default();
        record_initial_recommendation(&mut entry, current_replicas, now);
    }

    /// Upstream `normalizeDesiredReplicas` for `key` (no behavior).
    #[allow(clippy::too_many_arguments)]
    pub fn normalize(
        &self,
        key: &str,
        current: i32,
        prenormalized: i32,
        min_replicas: i32,
        max_replicas: i32,
        downscale_window: SignedDuration,
        now: Timestamp,
    ) -> Normalization {
        let mut history = self.recommendations.entry(key.to_owned()).or_default();
        normalize_desired_replicas(
            &mut history,
            current,
            prenormalized,
            min_replicas,
            max_replicas,
            downscale_window,
            now,
        )
    }

    /// Upstream `normalizeDesiredReplicasWithBehaviors` for `key`.
    #[allow(clippy::too_many_arguments)]
    pub fn normalize_with_behaviors(
        &self,
        key: &str,
        behavior: &EffectiveBehavior,
        current: i32,
        prenormalized: i32,
        min_replicas: i32,
        max_replicas: i32,
        now: Timestamp,
    ) -> Normalization {
        // Snapshot the events first (upstream reads them under read locks after the
        // recommendation lock is released; the order does not matter for one key, which
        // only one worker processes at a time).
        let up = self.scale_up_events(key);
        let down = self.scale_down_events(key);
        let mut history = self.recommendations.entry(key.to_owned()).or_default();
        normalize_desired_replicas_with_behaviors(
            &mut history,
            &up,
            &down,
            behavior,
            current,
            prenormalized,
            min_replicas,
            max_replicas,
            now,
        )
    }

    /// Upstream `storeScaleEvent`, called after a successful scale update: nothing without
    /// a behavior; otherwise a scale-up stores `new - prev` in the up list (slots older than
    /// the longest scale-up policy period are reused), anything else `prev - new` in the
    /// down list.
    pub fn store_scale_event(
        &self,
        key: &str,
        behavior: Option<&EffectiveBehavior>,
        prev_replicas: i32,
        new_replicas: i32,
        now: Timestamp,
    ) {
        let Some(behavior) = behavior else { return };
        if new_replicas > prev_replicas {
            let mut events = self.scale_up_events.entry(key.to_owned()).or_default();
            store_scale_event(
                &mut events,
                &behavior.scale_up.policies,
                new_replicas.wrapping_sub(prev_replicas),
                now,
            );
        } else {
            let mut events = self.scale_down_events.entry(key.to_owned()).or_default();
            store_scale_event(
                &mut events,
                &behavior.scale_down.policies,
                prev_replicas.wrapping_sub(new_replicas),
                now,
            );
        }
    }

    /// Drop everything known about `key` (upstream does this when the lister no longer
    /// has the HPA).
    pub fn forget(&self, key: &str) {
        self.forget_history(key);
        self.pins.remove(key);
        self.warned.remove(key);
        self.metric_failures.remove(key);
    }

    /// Drop the recommendation history and the scale events of `key` (a paused HPA keeps
    /// none, see [`crate::pause`]).
    pub fn forget_history(&self, key: &str) {
        self.recommendations.remove(key);
        self.scale_up_events.remove(key);
        self.scale_down_events.remove(key);
    }

    /// The count a pinned pause of `key` has brought the target to, if it has.
    pub fn pinned(&self, key: &str) -> Option<i32> {
        self.pins.get(key).map(|v| *v)
    }

    /// Record that the target of `key` has the count its pinned pause asks for (`None`: the
    /// HPA is not pinned).
    pub fn set_pinned(&self, key: &str, replicas: Option<i32>) {
        match replicas {
            Some(n) => {
                self.pins.insert(key.to_owned(), n);
            }
            None => {
                self.pins.remove(key);
            }
        }
    }

    /// Of the invalid annotations `key` has now, those not reported yet (a value reported
    /// stays reported while it is set; a value fixed and set again is reported again).
    pub fn new_warnings(&self, key: &str, invalid: &[InvalidAnnotation]) -> Vec<InvalidAnnotation> {
        if invalid.is_empty() {
            self.warned.remove(key);
            return Vec::new();
        }
        let mut warned = self.warned.entry(key.to_owned()).or_default();
        let new = invalid
            .iter()
            .filter(|i| !warned.contains(i))
            .cloned()
            .collect();
        *warned = invalid.to_vec();
        new
    }

    /// One read of the metrics of `key` at `now`, for its metrics with a fallback
    /// (`fallbacks`, [`crate::fallback::fallback_annotation`]): each failed read is counted,
    /// a successful one clears the count, and the records of metrics that no longer have a
    /// fallback are dropped (all of them without the annotation). `results` are the metrics'
    /// results in `spec.metrics` order. With `record` false nothing is kept: what this read
    /// would make of them (a decision that is only compared, in shadow mode).
    pub fn observe_metric_failures(
        &self,
        key: &str,
        now: Timestamp,
        fallbacks: &[MetricFallback],
        results: &[MetricResult],
        record: bool,
    ) -> Vec<MetricFallbackStatus> {
        if fallbacks.is_empty() {
            if record {
                self.metric_failures.remove(key);
            }
            return Vec::new();
        }
        let previous = self.metric_failures(key);
        let mut kept = Vec::new();
        let mut out = Vec::with_capacity(fallbacks.len());
        for f in fallbacks {
            let Some(result) = results.get(f.index) else {
                continue;
            };
            let before = previous.iter().find(|r| r.index == f.index);
            let (after, status) = crate::fallback::observe(f, before, result.outcome.is_err(), now);
            kept.extend(after);
            out.push(status);
        }
        if record {
            self.set_metric_failures(key, kept);
        }
        out
    }

    /// A copy of the failure records of `key`'s metrics with a fallback.
    pub fn metric_failures(&self, key: &str) -> Vec<FailureRecord> {
        self.metric_failures
            .get(key)
            .map(|v| v.clone())
            .unwrap_or_default()
    }

    /// Replace the failure records of `key` (a decision undone, e.g. made again from a newer
    /// scale, puts them back as they were).
    pub fn set_metric_failures(&self, key: &str, records: Vec<FailureRecord>) {
        if records.is_empty() {
            self.metric_failures.remove(key);
        } else {
            self.metric_failures.insert(key.to_owned(), records);
        }
    }

    /// The number of entries over the three per-HPA maps (recommendations, scale-up and
    /// scale-down events).
    pub fn entries(&self) -> usize {
        self.recommendations.len() + self.scale_up_events.len() + self.scale_down_events.len()
    }

    /// A copy of the recommendation history of `key`.
    pub fn recommendations(&self, key: &str) -> Vec<TimestampedRecommendation> {
        self.recommendations
            .get(key)
            .map(|v| v.clone())
            .unwrap_or_default()
    }

    /// A copy of the scale-up events of `key`.
    pub fn scale_up_events(&self, key: &str) -> Vec<TimestampedScaleEvent> {
        self.scale_up_events
            .get(key)
            .map(|v| v.clone())
            .unwrap_or_default()
    }

    /// A copy of the scale-down events of `key`.
    pub fn scale_down_events(&self, key: &str) -> Vec<TimestampedScaleEvent> {
        self.scale_down_events
            .get(key)
            .map(|v| v.clone())
            .unwrap_or_default()
    }

    /// Replace the recommendation history of `key` (simulation and replay seeding).
    pub fn set_recommendations(&self, key: &str, history: Vec<TimestampedRecommendation>) {
        self.recommendations.insert(key.to_owned(), history);
    }

    /// Replace the scale events of `key` (simulation and replay seeding).
    pub fn set_scale_events(
        &self,
        key: &str,
        up: Vec<TimestampedScaleEvent>,
        down: Vec<TimestampedScaleEvent>,
    ) {
        self.scale_up_events.insert(key.to_owned(), up);
        self.scale_down_events.insert(key.to_owned(), down);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::behavior::tests::generate_scaling_rules;

    fn now() -> Timestamp {
        "2025-06-01T12:00:00Z".parse().unwrap()
    }
    #[test]
    fn state_is_per_key_and_forgotten() {
        let s = HpaState::new();
        s.record_initial_recommendation("ns/a", 5, now());
        s.record_initial_recommendation("ns/a", 7, now());
        assert_eq!(s.recommendations("ns/a").len(), 1);
        let n = s.normalize("ns/a", 5, 2, 1, 10, SignedDuration::from_mins(5), now());
        assert_eq!(n.desired, 5, "held by the initial recommendation");
        assert_eq!(s.recommendations("ns/a").len(), 2);
        assert!(s.recommendations("ns/b").is_empty());

        let behavior = EffectiveBehavior {
            scale_up: generate_scaling_rules(4, 60, 0, 0, 0),
            scale_down: generate_scaling_rules(0, 0, 50, 60, 0),
            scale_up_window_seconds: 0,
            scale_down_window_seconds: 0,
        };
        s.store_scale_event("ns/a", None, 5, 8, now());
        assert!(
            s.scale_up_events("ns/a").is_empty(),
            "no behavior, no events"
        );
        s.store_scale_event("ns/a", Some(&behavior), 5, 8, now());
        s.store_scale_event("ns/a", Some(&behavior), 8, 6, now());
        assert_eq!(s.scale_up_events("ns/a")[0].replica_change, 3);
        assert_eq!(s.scale_down_events("ns/a")[0].replica_change, 2);
        // Scale-up limit now counts the +3 and the -2 of this period: start 6-3+2 = 5, +4 = 9.
        let n = s.normalize_with_behaviors("ns/a", &behavior, 6, 20, 1, 100, now());
        assert_eq!((n.desired, n.rate_limit), (9, Some(9)));
        s.forget("ns/a");
        assert!(s.recommendations("ns/a").is_empty());
        assert!(s.scale_up_events("ns/a").is_empty());
        assert!(s.scale_down_events("ns/a").is_empty());
    }

    #[test]
    fn concurrent_workers_on_distinct_keys() {
        let s = Arc::new(HpaState::new());
        let handles: Vec<_> = (0..4)
            .map(|w| {
                let s = Arc::clone(&s);
                std::thread::spawn(move || {
                    for i in 0..200 {
                        let key = format!("ns/hpa-{}", (w * 200 + i) % 16);
                        s.record_initial_recommendation(&key, 3, now());
                        s.normalize(&key, 3, 3, 1, 10, SignedDuration::from_mins(5), now());
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let total: usize = (0..16)
            .map(|i| s.recommendations(&format!("ns/hpa-{i}")).len())
            .sum();
        // 1 initial + 50 normalizations per key (800 calls over 16 keys).
        assert_eq!(total, 16 * 51);
    }
}
