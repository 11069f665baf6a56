//! Pausing an HPA through its annotations: `kube-hpa-controller.io/paused` and
//! `kube-hpa-controller.io/paused-replicas`.
//!
//! No upstream counterpart: KEP-3428 ("suspend" for HPAs) was closed without code. The
//! annotations follow KEDA's `autoscaling.keda.sh/paused` and `autoscaling.keda.sh/paused-replicas`
//! on a ScaledObject, on native `autoscaling/v2` HPAs; an HPA without them is decided exactly as
//! upstream decides it.
//!
//! # The annotations
//!
//! - `kube-hpa-controller.io/paused: "true"` ([`Pause::Paused`]): the controller writes no scale.
//!   It still reads the target and the metrics and writes the status (`currentReplicas`,
//!   `currentMetrics`, `desiredReplicas` = the current replicas, `ScalingActive` as the metrics
//!   say) with `AbleToScale=False ScalingPaused`, whose message names the annotation
//!   (`ScalingLimited` is left as the last decision before the pause set it: no limit applies).
//!   `"true"` and `"false"` are matched without regard to ASCII case (`"True"`, `"FALSE"`);
//!   nothing else is accepted (no `"1"`, `"yes"`, no surrounding spaces).
//! - `kube-hpa-controller.io/paused-replicas: "N"` ([`Pause::Pinned`]): paused as above, and the
//!   target is scaled to N once; after that it is left where it is (as KEDA does: a scale by
//!   hand while pinned is not undone; that the target has had N is kept in memory, so a restart
//!   or a new leader scales it to N again if it is elsewhere). N is a decimal integer ≥ 0 and is clamped to
//!   `[minReplicas, maxReplicas]` (KEDA does not clamp): this controller never sets a target
//!   outside the HPA's range, so that unpausing starts inside it, where the behavior applies (a
//!   target outside the range is brought to the bound in one write, by upstream's rule, without
//!   the behavior's policies). 0 therefore takes effect only with `minReplicas: 0`, the one
//!   case where this HPA would scale the target to zero itself and autoscale it from there
//!   again; otherwise it pins to `minReplicas` (to hold a target at zero, scale it to zero by
//!   hand: upstream disables autoscaling of a target at zero). The pin is set whatever `paused`
//!   says (as KEDA: `paused: "false"` does not unpause a pinned HPA).
//!
//! A value that is not valid is reported once per HPA and value with a Warning event
//! `InvalidAnnotation` naming the annotation and the value ([`InvalidAnnotation`], see
//! [`crate::annotations`] for why once), and the HPA behaves as without that annotation (KEDA
//! pauses on a `paused` value that is not a boolean).
//!
//! # Unpausing
//!
//! After the pause, the HPA resumes from the target's current replicas as upstream starts with
//! an HPA it has not seen before (a new HPA, a restart, a new leader). While paused, each
//! decision drops the HPA's recommendation history and scale events and records none:
//!
//! - a write made while paused (the pin) or a scale by hand is not the autoscaler's own change:
//!   stored as a scale event, a pin from 10 to 2 replicas would put the scale-up policies'
//!   period start at 10 and let the first decision after the pause go from 2 to 20 at once
//!   (`Percent 100`), where the policies allow 4 from the current 2;
//! - recommendations from before the pause were made for a target that may since have moved:
//!   a stabilization window still holding them would keep the target at a count it was paused
//!   away from.
//!
//! So the first decision after the pause records the current replicas as its initial
//! recommendation (upstream's `recordInitialRecommendation`) and then normalizes as always: a
//! scale-up goes at most as far as the scale-up policies (or, without `spec.behavior`, upstream's
//! `max(2 × current, 4)`) allow from the current replicas with no scale event in their periods,
//! and a scale-down is held by the stabilization window for its length from the unpause (the
//! current replicas are the window's only recommendation until the metrics' own fill it), then
//! limited by the scale-down policies. Nothing from before or during the pause can make it jump
//! further, or hold it.

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;

pub use crate::annotations::{ANNOTATION_PREFIX, InvalidAnnotation};
use crate::decision::{max_replicas, min_replicas};

/// Pauses the HPA: `"true"` or `"false"`.
pub const PAUSED: &str = "kube-hpa-controller.io/paused";
/// Pauses the HPA with the target pinned to a replica count: a decimal integer ≥ 0.
pub const PAUSED_REPLICAS: &str = "kube-hpa-controller.io/paused-replicas";

/// How an HPA is paused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pause {
    /// `kube-hpa-controller.io/paused: "true"`: no scale write.
    Paused,
    /// `kube-hpa-controller.io/paused-replicas`: the target is scaled to `replicas` once.
    Pinned {
        /// The annotation's value.
        requested: i32,
        /// `requested` clamped to `[minReplicas, maxReplicas]`.
        replicas: i32,
    },
}

impl Pause {
    /// The annotation that pauses the HPA.
    pub fn annotation(self) -> &'static str {
        match self {
            Pause::Paused => PAUSED,
            Pause::Pinned { .. } => PAUSED_REPLICAS,
        }
    }

    /// The count the target is pinned to, if any.
    pub fn pinned_replicas(self) -> Option<i32> {
        match self {
            Pause::Paused => None,
            Pause::Pinned { replicas, .. } => Some(replicas),
        }
    }

    /// The `AbleToScale=False ScalingPaused` message: the annotation and, when pinned, the count
    /// (and the clamp, when it applied). The same for every decision of one pause, so that the
    /// status does not change from one sync to the next.
    pub fn message(self) -> String {
        match self {
            Pause::Paused => format!(
                "scaling is paused by the annotation {PAUSED}: the HPA controller does not update the target scale"
            ),
            Pause::Pinned {
                requested,
                replicas,
            } if requested == replicas => format!(
                "scaling is paused by the annotation {PAUSED_REPLICAS}: the HPA controller scales the target to {replicas} replicas once and then leaves it"
            ),
            Pause::Pinned {
                requested,
                replicas,
            } => format!(
                "scaling is paused by the annotation {PAUSED_REPLICAS}: the HPA controller scales the target to {replicas} replicas ({requested} asked, clamped to [minReplicas, maxReplicas]) once and then leaves it"
            ),
        }
    }

    /// The rescale reason of the pinned write (`New size: N; reason: ...`).
    pub fn rescale_reason(self) -> String {
        format!(
            "paused at {} replicas by the annotation {PAUSED_REPLICAS}",
            self.pinned_replicas().unwrap_or_default()
        )
    }
}

/// What the pause annotations of one HPA say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PauseAnnotations {
    /// The pause in effect, if any.
    pub pause: Option<Pause>,
    /// The annotations set with a value that is not valid (ignored).
    pub invalid: Vec<InvalidAnnotation>,
}

/// The value of `kube-hpa-controller.io/paused`: `"true"` or `"false"`, any ASCII case.
pub fn parse_paused(value: &str) -> Result<bool, InvalidAnnotation> {
    if value.eq_ignore_ascii_case("true") {
        Ok(true)
    } else if value.eq_ignore_ascii_case("false") {
        Ok(false)
    } else {
        Err(InvalidAnnotation {
            annotation: PAUSED,
            value: value.to_owned(),
            reason: "must be \"true\" or \"false\"".into(),
        })
    }
}

/// The value of `kube-hpa-controller.io/paused-replicas`: a decimal 32-bit integer ≥ 0 (an
/// optional `+`, no spaces).
pub fn parse_paused_replicas(value: &str) -> Result<i32, InvalidAnnotation> {
    let invalid = |reason: &'static str| InvalidAnnotation {
        annotation: PAUSED_REPLICAS,
        value: value.to_owned(),
        reason: reason.into(),
    };
    let n: i32 = value
        .parse()
        .map_err(|_| invalid("must be a whole number of replicas, 0 or more"))?;
    if n < 0 {
        return Err(invalid("must not be negative"));
    }
    Ok(n)
}

/// Read and check the pause annotations of `hpa`.
pub fn pause_annotations(hpa: &HorizontalPodAutoscaler) -> PauseAnnotations {
    let mut out = PauseAnnotations::default();
    let Some(annotations) = hpa.metadata.annotations.as_ref() else {
        return out;
    };
    let paused = annotations
        .get(PAUSED)
        .map(|v| parse_paused(v))
        .transpose()
        .unwrap_or_else(|e| {
            out.invalid.push(e);
            None
        });
    let pinned = annotations
        .get(PAUSED_REPLICAS)
        .map(|v| parse_paused_replicas(v))
        .transpose()
        .unwrap_or_else(|e| {
            out.invalid.push(e);
            None
        });
    out.pause = match (pinned, paused) {
        (Some(requested), _) => {
            let (min, max) = (min_replicas(hpa), max_replicas(hpa));
            let replicas = if requested < min {
                min
            } else if requested > max {
                max
            } else {
                requested
            };
            Some(Pause::Pinned {
                requested,
                replicas,
            })
        }
        (None, Some(true)) => Some(Pause::Paused),
        (None, Some(false) | None) => None,
    };
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscalerSpec;

    use super::*;

    fn hpa(min: i32, max: i32, annotations: &[(&str, &str)]) -> HorizontalPodAutoscaler {
        let mut h = HorizontalPodAutoscaler {
            spec: HorizontalPodAutoscalerSpec {
                min_replicas: Some(min),
                max_replicas: max,
                ..Default::default()
            },
            ..Default::default()
        };
        if !annotations.is_empty() {
            h.metadata.annotations = Some(
                annotations
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect::<BTreeMap<_, _>>(),
            );
        }
        h
    }

    #[test]
    fn paused_accepts_true_and_false_in_any_ascii_case_and_nothing_else() {
        for v in ["true", "True", "TRUE", "tRuE"] {
            assert_eq!(parse_paused(v), Ok(true), "{v}");
        }
        for v in ["false", "False", "FALSE"] {
            assert_eq!(parse_paused(v), Ok(false), "{v}");
        }
        for v in ["", "1", "0", "yes", "t", " true", "true ", "truee"] {
            let e = parse_paused(v).unwrap_err();
            assert_eq!((e.annotation, e.value.as_str()), (PAUSED, v));
        }
        assert_eq!(
            parse_paused("yes").unwrap_err().to_string(),
            "annotation kube-hpa-controller.io/paused has the invalid value \"yes\": must be \"true\" or \"false\"; it is ignored"
        );
    }

    #[test]
    fn paused_replicas_is_a_whole_number_of_zero_or_more() {
        assert_eq!(parse_paused_replicas("0"), Ok(0));
        assert_eq!(parse_paused_replicas("3"), Ok(3));
        assert_eq!(parse_paused_replicas("+3"), Ok(3));
        assert_eq!(parse_paused_replicas("2147483647"), Ok(i32::MAX));
        for (v, reason) in [
            ("-1", "must not be negative"),
            ("", "must be a whole number of replicas, 0 or more"),
            ("2.5", "must be a whole number of replicas, 0 or more"),
            ("three", "must be a whole number of replicas, 0 or more"),
            (" 3", "must be a whole number of replicas, 0 or more"),
            (
                "2147483648",
                "must be a whole number of replicas, 0 or more",
            ),
        ] {
            let e = parse_paused_replicas(v).unwrap_err();
            assert_eq!(
                (e.annotation, e.value.as_str(), e.reason.as_ref()),
                (PAUSED_REPLICAS, v, reason)
            );
        }
        assert_eq!(
            parse_paused_replicas("-1").unwrap_err().to_string(),
            "annotation kube-hpa-controller.io/paused-replicas has the invalid value \"-1\": must not be negative; it is ignored"
        );
    }

    #[test]
    fn off_unless_set() {
        assert_eq!(
            pause_annotations(&hpa(1, 10, &[])),
            PauseAnnotations::default()
        );
        let other = hpa(1, 10, &[("autoscaling.keda.sh/paused", "true")]);
        assert_eq!(pause_annotations(&other), PauseAnnotations::default());
        let unpaused = hpa(1, 10, &[(PAUSED, "false")]);
        assert_eq!(pause_annotations(&unpaused), PauseAnnotations::default());
    }

    #[test]
    fn the_pin_wins_and_is_clamped_to_the_range() {
        let p = |min, max, a: &[(&str, &str)]| pause_annotations(&hpa(min, max, a)).pause;
        assert_eq!(p(1, 10, &[(PAUSED, "true")]), Some(Pause::Paused));
        let pinned = |requested, replicas| {
            Some(Pause::Pinned {
                requested,
                replicas,
            })
        };
        assert_eq!(p(1, 10, &[(PAUSED_REPLICAS, "3")]), pinned(3, 3));
        assert_eq!(
            p(1, 10, &[(PAUSED, "false"), (PAUSED_REPLICAS, "3")]),
            pinned(3, 3),
            "paused: false does not unpause a pinned HPA"
        );
        assert_eq!(p(2, 10, &[(PAUSED_REPLICAS, "1")]), pinned(1, 2));
        assert_eq!(p(2, 10, &[(PAUSED_REPLICAS, "40")]), pinned(40, 10));
        assert_eq!(p(1, 10, &[(PAUSED_REPLICAS, "0")]), pinned(0, 1));
        assert_eq!(p(0, 10, &[(PAUSED_REPLICAS, "0")]), pinned(0, 0));
    }

    #[test]
    fn an_invalid_value_is_reported_and_ignored() {
        let a = pause_annotations(&hpa(1, 10, &[(PAUSED, "yes")]));
        assert_eq!(a.pause, None);
        assert_eq!(a.invalid.len(), 1);
        // An invalid pin leaves `paused` to decide alone.
        let a = pause_annotations(&hpa(1, 10, &[(PAUSED, "true"), (PAUSED_REPLICAS, "-2")]));
        assert_eq!(a.pause, Some(Pause::Paused));
        assert_eq!(a.invalid[0].annotation, PAUSED_REPLICAS);
        let a = pause_annotations(&hpa(1, 10, &[(PAUSED, "no"), (PAUSED_REPLICAS, "x")]));
        assert_eq!(a.pause, None);
        assert_eq!(
            a.invalid.iter().map(|e| e.annotation).collect::<Vec<_>>(),
            vec![PAUSED, PAUSED_REPLICAS]
        );
        let a = pause_annotations(&hpa(1, 10, &[(PAUSED, "no"), (PAUSED_REPLICAS, "4")]));
        assert_eq!(
            a.pause,
            Some(Pause::Pinned {
                requested: 4,
                replicas: 4
            })
        );
    }

    #[test]
    fn messages_name_the_annotation_and_the_count() {
        assert_eq!(
            Pause::Paused.message(),
            "scaling is paused by the annotation kube-hpa-controller.io/paused: the HPA controller does not update the target scale"
        );
        let pinned = Pause::Pinned {
            requested: 0,
            replicas: 1,
        };
        assert_eq!(
            pinned.message(),
            "scaling is paused by the annotation kube-hpa-controller.io/paused-replicas: the HPA controller scales the target to 1 replicas (0 asked, clamped to [minReplicas, maxReplicas]) once and then leaves it"
        );
        assert_eq!(
            pinned.rescale_reason(),
            "paused at 1 replicas by the annotation kube-hpa-controller.io/paused-replicas"
        );
    }
}
