//! What of one HPA's history a later decision can still read, and how it is stored.
//!
//! Upstream (`pkg/controller/podautoscaler/horizontal.go`) keeps `recommendations`,
//! `scaleUpEvents` and `scaleDownEvents` in the leader's memory only, and its decisions read
//! them through `stabilizeRecommendation`, `stabilizeRecommendationWithBehaviors` (the highest
//! recommendation after `now - downscale window`, the lowest after `now - upscale window`) and
//! `getReplicasChangePerPeriod` (the sum of the scale events after `now - period`). A snapshot
//! keeps exactly what those can still use, so that restoring it makes every later decision the
//! one the uninterrupted leader would have made:
//!
//! - entries at or before `now - keep_for` ([`horizon`]: the longest window or period) are
//!   out of every window from now on and are dropped;
//! - a recommendation is dropped when a later one (in time) is at least as high *and* a later
//!   one is at most as low: whenever it is inside a window, so are those, so neither the
//!   window's highest nor its lowest value depends on it ([`compress`]). In steady state
//!   (the same recommendation every sync) one entry remains;
//! - scale events marked outdated (only their slots are reused) are dropped.

use std::collections::BTreeMap;

use hpa_decision::behavior::EffectiveBehavior;
use hpa_decision::recommendations::TimestampedRecommendation;
use hpa_decision::scale_events::{TimestampedScaleEvent, longest_policy_period};
use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

/// The stored form's version; a bucket of another version is ignored (and rewritten).
pub const FORMAT_VERSION: u32 = 1;

/// What of one HPA's recommendations and scale events later decisions can still read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HpaHistory {
    /// How long after its time an entry can still be in a window or period of this HPA.
    pub keep_for: SignedDuration,
    /// The recommendations, oldest first.
    pub recommendations: Vec<TimestampedRecommendation>,
    /// The scale-up events, oldest first.
    pub scale_up_events: Vec<TimestampedScaleEvent>,
    /// The scale-down events, oldest first.
    pub scale_down_events: Vec<TimestampedScaleEvent>,
}

/// The longest a recorded entry of an HPA can matter: its behavior's stabilization windows
/// and policy periods, or, without a behavior, the downscale stabilization window
/// (`--horizontal-pod-autoscaler-downscale-stabilization`), the only window it has.
pub fn horizon(
    behavior: Option<&EffectiveBehavior>,
    downscale_window: SignedDuration,
) -> SignedDuration {
    match behavior {
        None => downscale_window,
        Some(b) => {
            let longest = [
                b.scale_up_window_seconds,
                b.scale_down_window_seconds,
                longest_policy_period(&b.scale_up.policies),
                longest_policy_period(&b.scale_down.policies),
            ]
            .into_iter()
            .fold(0, i32::max);
            SignedDuration::from_secs(i64::from(longest))
        }
    }
}

/// Drops the recommendations no window can need any more (see the module doc): the result
/// gives every window ending now or later the same highest and lowest value as `recs`.
/// Oldest first.
pub fn compress(recs: &[TimestampedRecommendation]) -> Vec<TimestampedRecommendation> {
    let mut sorted: Vec<TimestampedRecommendation> = recs.to_vec();
    // Stable: entries of one instant keep their order, the later one counting as later.
    sorted.sort_by_key(|r| r.timestamp);
    let mut kept = Vec::with_capacity(sorted.len());
    // Walking from the newest: the highest and lowest of the entries after this one.
    let mut later_max: Option<i32> = None;
    let mut later_min: Option<i32> = None;
    for r in sorted.iter().rev() {
        let covered_high = later_max.is_some_and(|m| m >= r.recommendation);
        let covered_low = later_min.is_some_and(|m| m <= r.recommendation);
        if !(covered_high && covered_low) {
            kept.push(*r);
        }
        later_max = Some(later_max.map_or(r.recommendation, |m| m.max(r.recommendation)));
        later_min = Some(later_min.map_or(r.recommendation, |m| m.min(r.recommendation)));
    }
    kept.reverse();
    kept
}

impl HpaHistory {
    /// What of an HPA's history to keep at `now`, given its [`horizon`].
    pub fn capture(
        recommendations: &[TimestampedRecommendation],
        scale_up_events: &[TimestampedScaleEvent],
        scale_down_events: &[TimestampedScaleEvent],
        keep_for: SignedDuration,
        now: Timestamp,
    ) -> Self {
        let cutoff = hpa_decision::recommendations::minus(now, keep_for);
        let recent: Vec<TimestampedRecommendation> = recommendations
            .iter()
            .filter(|r| r.timestamp > cutoff)
            .copied()
            .collect();
        let events = |events: &[TimestampedScaleEvent]| {
            let mut kept: Vec<TimestampedScaleEvent> = events
                .iter()
                .filter(|e| !e.outdated && e.timestamp > cutoff)
                .copied()
                .collect();
            kept.sort_by_key(|e| e.timestamp);
            kept
        };
        Self {
            keep_for,
            recommendations: compress(&recent),
            scale_up_events: events(scale_up_events),
            scale_down_events: events(scale_down_events),
        }
    }

    /// This history as it stands at `now`: what a new leader may restore. Entries older than
    /// its `keep_for` are dropped.
    pub fn usable_at(&self, now: Timestamp) -> Self {
        Self::capture(
            &self.recommendations,
            &self.scale_up_events,
            &self.scale_down_events,
            self.keep_for,
            now,
        )
    }

    /// Nothing to keep.
    pub fn is_empty(&self) -> bool {
        self.recommendations.is_empty()
            && self.scale_up_events.is_empty()
            && self.scale_down_events.is_empty()
    }
}

/// One HPA's entry in a stored bucket: times in nanoseconds since the Unix epoch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct StoredHpa {
    /// [`HpaHistory::keep_for`], seconds.
    keep: i64,
    /// `[time, recommendation]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    rec: Vec<(i64, i32)>,
    /// `[time, replica change]` of the scale-up events.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    up: Vec<(i64, i32)>,
    /// `[time, replica change]` of the scale-down events.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    down: Vec<(i64, i32)>,
}

/// One bucket's stored form (the ConfigMap's `history` key).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct StoredBucket {
    version: u32,
    /// By HPA key (`namespace/name`).
    hpas: BTreeMap<String, StoredHpa>,
}

/// Why a stored bucket could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// Not the JSON of a bucket.
    #[error("not a stored history: {0}")]
    Json(#[from] serde_json::Error),
    /// Written by another format version.
    #[error(
        "stored history format version {found}, this controller reads version {FORMAT_VERSION}"
    )]
    Version {
        /// The version found.
        found: u32,
    },
    /// A time out of range (no 64-bit nanosecond count is, for the time library in use;
    /// reported rather than trusted).
    #[error("HPA {key}: time {nanos} ns is out of range")]
    Time {
        /// The HPA.
        key: String,
        /// The stored value.
        nanos: i64,
    },
}

fn nanos(t: Timestamp) -> i64 {
    i64::try_from(t.as_nanosecond()).unwrap_or(if t > Timestamp::UNIX_EPOCH {
        i64::MAX
    } else {
        i64::MIN
    })
}

/// Encodes a bucket's histories (by HPA key) as the ConfigMap's `history` value.
pub fn encode(hpas: &BTreeMap<String, HpaHistory>) -> String {
    let stored = StoredBucket {
        version: FORMAT_VERSION,
        hpas: hpas
            .iter()
            .filter(|(_, h)| !h.is_empty())
            .map(|(k, h)| {
                (
                    k.clone(),
                    StoredHpa {
                        keep: h.keep_for.as_secs(),
                        rec: h
                            .recommendations
                            .iter()
                            .map(|r| (nanos(r.timestamp), r.recommendation))
                            .collect(),
                        up: h
                            .scale_up_events
                            .iter()
                            .map(|e| (nanos(e.timestamp), e.replica_change))
                            .collect(),
                        down: h
                            .scale_down_events
                            .iter()
                            .map(|e| (nanos(e.timestamp), e.replica_change))
                            .collect(),
                    },
                )
            })
            .collect(),
    };
    // A map of strings to plain structs always serializes.
    serde_json::to_string(&stored).unwrap_or_default()
}

/// Decodes a ConfigMap's `history` value.
pub fn decode(text: &str) -> Result<BTreeMap<String, HpaHistory>, DecodeError> {
    let stored: StoredBucket = serde_json::from_str(text)?;
    if stored.version != FORMAT_VERSION {
        return Err(DecodeError::Version {
            found: stored.version,
        });
    }
    let mut out = BTreeMap::new();
    for (key, h) in stored.hpas {
        let time = |n: i64| {
            Timestamp::from_nanosecond(i128::from(n)).map_err(|_| DecodeError::Time {
                key: key.clone(),
                nanos: n,
            })
        };
        let recommendations = h
            .rec
            .iter()
            .map(|&(t, r)| {
                Ok(TimestampedRecommendation {
                    recommendation: r,
                    timestamp: time(t)?,
                })
            })
            .collect::<Result<Vec<_>, DecodeError>>()?;
        let events = |list: &[(i64, i32)]| {
            list.iter()
                .map(|&(t, change)| {
                    Ok(TimestampedScaleEvent {
                        replica_change: change,
                        timestamp: time(t)?,
                        outdated: false,
                    })
                })
                .collect::<Result<Vec<_>, DecodeError>>()
        };
        let history = HpaHistory {
            keep_for: SignedDuration::from_secs(h.keep.clamp(0, 24 * 3600)),
            recommendations,
            scale_up_events: events(&h.up)?,
            scale_down_events: events(&h.down)?,
        };
        out.insert(key, history);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use hpa_decision::recommendations::minus;
    use proptest::prelude::*;

    use super::*;

    fn t0() -> Timestamp {
        "2026-11-27T12:00:00Z".parse().unwrap()
    }

    fn rec(secs: i64, r: i32) -> TimestampedRecommendation {
        TimestampedRecommendation {
            recommendation: r,
            timestamp: t0() + SignedDuration::from_secs(secs),
        }
    }

    fn ev(secs: i64, change: i32, outdated: bool) -> TimestampedScaleEvent {
        TimestampedScaleEvent {
            replica_change: change,
            timestamp: t0() + SignedDuration::from_secs(secs),
            outdated,
        }
    }

    /// Upstream's windows: highest and lowest recommendation after `cutoff`.
    fn window(recs: &[TimestampedRecommendation], cutoff: Timestamp) -> (Option<i32>, Option<i32>) {
        let inside = recs.iter().filter(|r| r.timestamp > cutoff);
        (
            inside.clone().map(|r| r.recommendation).max(),
            inside.map(|r| r.recommendation).min(),
        )
    }

    #[test]
    fn steady_state_keeps_one_entry() {
        let recs: Vec<_> = (0..20).map(|i| rec(i * 15, 4)).collect();
        assert_eq!(compress(&recs), vec![rec(285, 4)]);
    }

    #[test]
    fn keeps_the_peaks_a_window_can_still_see() {
        // 8 then 3 then 5: the 8 is the highest of any window holding it; the 3 the lowest.
        let recs = vec![rec(0, 6), rec(15, 8), rec(30, 3), rec(45, 5)];
        assert_eq!(compress(&recs), vec![rec(15, 8), rec(30, 3), rec(45, 5)]);
    }

    proptest! {
        /// Every window that ends now or later, of any length, sees the same highest and
        /// lowest value in the compressed list as in the full one.
        #[test]
        fn compression_keeps_every_windows_extremes(
            entries in proptest::collection::vec((0i64..600, 0i32..12), 0..40),
            cutoff in -10i64..700,
        ) {
            let recs: Vec<_> = entries.iter().map(|&(s, r)| rec(s, r)).collect();
            let compressed = compress(&recs);
            let c = t0() + SignedDuration::from_secs(cutoff);
            prop_assert_eq!(window(&compressed, c), window(&recs, c));
            prop_assert!(compressed.len() <= recs.len());
        }
    }

    #[test]
    fn capture_drops_what_no_window_or_period_can_use() {
        let now = t0() + SignedDuration::from_secs(400);
        let h = HpaHistory::capture(
            &[rec(0, 9), rec(100, 5), rec(390, 5)],
            &[ev(50, 4, false), ev(200, 2, false), ev(300, 1, true)],
            &[],
            SignedDuration::from_secs(300),
            now,
        );
        // cutoff = 100 s: the entry at exactly 100 s is out (upstream: after the cutoff).
        assert_eq!(h.recommendations, vec![rec(390, 5)]);
        assert_eq!(h.scale_up_events, vec![ev(200, 2, false)]);
        assert!(h.scale_down_events.is_empty());
        let later = h.usable_at(now + SignedDuration::from_secs(100));
        assert_eq!(later.recommendations, vec![rec(390, 5)]);
        assert!(later.scale_up_events.is_empty(), "200 s is out at 500 s");
        assert!(h.usable_at(now + SignedDuration::from_secs(300)).is_empty());
        assert_eq!(
            minus(now, h.keep_for),
            t0() + SignedDuration::from_secs(100)
        );
    }

    #[test]
    fn horizon_is_the_longest_window_or_period() {
        use hpa_decision::behavior::{PolicyType, ScalingPolicy, ScalingRules, SelectPolicy};
        let rules = |window: i32, period: i32| ScalingRules {
            stabilization_window_seconds: Some(window),
            select_policy: SelectPolicy::Max,
            policies: vec![ScalingPolicy {
                type_: PolicyType::Pods,
                value: 4,
                period_seconds: period,
            }],
            tolerance: None,
        };
        let b = EffectiveBehavior {
            scale_up: rules(0, 60),
            scale_down: rules(300, 600),
            scale_up_window_seconds: 0,
            scale_down_window_seconds: 300,
        };
        assert_eq!(
            horizon(Some(&b), SignedDuration::from_mins(5)),
            SignedDuration::from_secs(600)
        );
        assert_eq!(
            horizon(None, SignedDuration::from_mins(2)),
            SignedDuration::from_mins(2)
        );
    }

    #[test]
    fn round_trips_and_refuses_bad_input() {
        let mut hpas = BTreeMap::new();
        hpas.insert(
            "ns/web".to_string(),
            HpaHistory {
                keep_for: SignedDuration::from_secs(300),
                recommendations: vec![rec(1, 3)],
                scale_up_events: vec![ev(2, 4, false)],
                scale_down_events: vec![ev(3, 1, false)],
            },
        );
        hpas.insert(
            "ns/empty".to_string(),
            HpaHistory {
                keep_for: SignedDuration::from_secs(300),
                recommendations: vec![],
                scale_up_events: vec![],
                scale_down_events: vec![],
            },
        );
        let text = encode(&hpas);
        let back = decode(&text).unwrap();
        assert_eq!(back.len(), 1, "empty histories are not stored: {text}");
        assert_eq!(back["ns/web"], hpas["ns/web"]);

        assert!(matches!(decode("{"), Err(DecodeError::Json(_))));
        assert!(matches!(
            decode(r#"{"version":2,"hpas":{}}"#),
            Err(DecodeError::Version { found: 2 })
        ));
    }
}
