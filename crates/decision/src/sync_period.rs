//! A sync period of its own for one HPA through the annotation
//! `kube-hpa-controller.io/sync-period`.
//!
//! No upstream counterpart in code: this follows KEP-6003 ("Configurable HPA sync period",
//! kubernetes/enhancements#6003; its prototype kubernetes/kubernetes#138222 was closed
//! unmerged), on native `autoscaling/v2` HPAs through an annotation instead of the KEP's
//! `spec.syncPeriodSeconds` field. An HPA without the annotation is re-added every
//! `--horizontal-pod-autoscaler-sync-period` exactly as upstream re-adds it.
//!
//! # The annotation
//!
//! `kube-hpa-controller.io/sync-period: "5s"`: how long after a reconcile the HPA is
//! reconciled again. The value is either a Go duration of whole seconds made of `h`, `m` and
//! `s` parts (`"5s"`, `"1m"`, `"1m30s"`, `"1h"`) or a bare number of seconds (`"5"`, KEP-6003's
//! `syncPeriodSeconds`); from 1 s to 3600 s (the KEP's range), no sign, no spaces, no fraction
//! (`"500ms"` and `"1.5s"` are refused: the KEP allows no sub-second period). A value that is
//! not valid is reported once per HPA and value with a Warning event `InvalidAnnotation`
//! ([`crate::annotations`]), and the HPA keeps the global period.
//!
//! # Semantics (KEP-6003)
//!
//! The period replaces the global one wherever the controller re-adds the HPA with the sync
//! period's delay: after each reconcile (the worker's post-process re-add), on an update
//! without a spec change, and at the handler's resync. It is read from the HPA as cached at
//! the re-add, so an edit of the annotation takes effect at the next re-add (an update event
//! re-adds at once with the new period; a key already waiting keeps the earlier of its two
//! ready times). It is best effort: the queue's de-duplication and its worker count are
//! unchanged, so a reconcile that takes longer than the period is followed by the next one
//! as soon as it completes, never by a pile of them. It changes when the HPA is decided, not
//! how: the decision, its trace and its comparison in shadow mode are those of the same
//! inputs at another instant.
pub use crate::annotations::{ANNOTATION_PREFIX, InvalidAnnotation};

use std::time::Duration;

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;

/// The HPA's own sync period: a Go duration of whole seconds (`"5s"`, `"1m"`) or a number of
/// seconds, 1 s to 3600 s.
pub const SYNC_PERIOD: &str = "kube-hpa-controller.io/sync-period";

/// The shortest period accepted (KEP-6003: more than 0 s, no sub-second period).
pub const MIN_SYNC_PERIOD: Duration = Duration::from_secs(1);
/// The longest period accepted (KEP-6003: at most 3600 s).
pub const MAX_SYNC_PERIOD: Duration = Duration::from_secs(3600);

/// What the sync period annotation of one HPA says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncPeriodAnnotation {
    /// The period, when set and valid.
    pub period: Option<Duration>,
    /// The annotation, when set with a value that is not valid (ignored).
    pub invalid: Vec<InvalidAnnotation>,
}

/// The value of `kube-hpa-controller.io/sync-period`.
pub fn parse_sync_period(value: &str) -> Result<Duration, InvalidAnnotation> {
    let invalid = |reason: &'static str| InvalidAnnotation {
        annotation: SYNC_PERIOD,
        value: value.to_owned(),
        reason: reason.into(),
    };
    const SYNTAX: &str = "must be a whole number of seconds from 1 to 3600, as a duration such as \"5s\", \"1m\" or \"1m30s\" or as a number of seconds such as \"5\"";
    let secs = parse_seconds(value).ok_or_else(|| invalid(SYNTAX))?;
    if !(MIN_SYNC_PERIOD.as_secs()..=MAX_SYNC_PERIOD.as_secs()).contains(&secs) {
        return Err(invalid("must be from 1s to 1h (3600 seconds)"));
    }
    Ok(Duration::from_secs(secs))
}

/// Whole seconds of `value`: digits alone, or `h`/`m`/`s` parts of digits (each unit at most
/// once, in that order, as Go prints them; Go's parser also takes other orders, this one does
/// not need to). `None` on anything else or on overflow.
fn parse_seconds(value: &str) -> Option<u64> {
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return value.parse().ok();
    }
    let mut rest = value;
    let mut total: u64 = 0;
    let mut last_unit = 0;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let n: u64 = rest[..digits].parse().ok()?;
        let (unit, scale) = match rest.as_bytes().get(digits)? {
            b'h' => (1, 3600),
            b'm' => (2, 60),
            b's' => (3, 1),
            _ => return None,
        };
        // "1ms" is a millisecond in Go: refused with the other sub-second units.
        if unit == 2 && rest.as_bytes().get(digits + 1) == Some(&b's') {
            return None;
        }
        if unit <= last_unit {
            return None;
        }
        last_unit = unit;
        total = total.checked_add(n.checked_mul(scale)?)?;
        rest = &rest[digits + 1..];
    }
    Some(total)
}

/// Read and check the sync period annotation of `hpa`.
pub fn sync_period_annotation(hpa: &HorizontalPodAutoscaler) -> SyncPeriodAnnotation {
    let Some(value) = hpa
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SYNC_PERIOD))
    else {
        return SyncPeriodAnnotation::default();
    };
    match parse_sync_period(value) {
        Ok(period) => SyncPeriodAnnotation {
            period: Some(period),
            invalid: Vec::new(),
        },
        Err(e) => SyncPeriodAnnotation {
            period: None,
            invalid: vec![e],
        },
    }
}

/// The period `hpa` is re-added at: its own when the annotation is valid, else `global`.
pub fn sync_period_or(hpa: &HorizontalPodAutoscaler, global: Duration) -> Duration {
    sync_period_annotation(hpa).period.unwrap_or(global)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn hpa(value: Option<&str>) -> HorizontalPodAutoscaler {
        HorizontalPodAutoscaler {
            metadata: ObjectMeta {
                annotations: value.map(|v| [(SYNC_PERIOD.to_owned(), v.to_owned())].into()),
                ..ObjectMeta::default()
            },
            ..HorizontalPodAutoscaler::default()
        }
    }

    #[test]
    fn accepts_go_durations_and_seconds() {
        for (v, secs) in [
            ("5s", 5),
            ("1m", 60),
            ("1m30s", 90),
            ("90s", 90),
            ("1h", 3600),
            ("1s", 1),
            ("5", 5),
            ("3600", 3600),
            ("0h5s", 5),
        ] {
            assert_eq!(parse_sync_period(v), Ok(Duration::from_secs(secs)), "{v}");
        }
    }

    #[test]
    fn refuses_the_rest() {
        for v in [
            "",
            "0",
            "0s",
            "3601",
            "1h1s",
            "61m",
            "500ms",
            "1.5s",
            "5 s",
            " 5s",
            "+5s",
            "-5s",
            "s",
            "5x",
            "5us",
            "1s1m",
            "5s5s",
            "1d",
            "99999999999999999999s",
            "5S",
        ] {
            let e = parse_sync_period(v).expect_err(v);
            assert_eq!(e.annotation, SYNC_PERIOD);
            assert_eq!(e.value, v);
        }
        assert!(
            parse_sync_period("0s")
                .unwrap_err()
                .to_string()
                .contains("from 1s to 1h")
        );
    }

    #[test]
    fn annotation_or_global() {
        let global = Duration::from_secs(15);
        assert_eq!(sync_period_annotation(&hpa(None)), Default::default());
        assert_eq!(sync_period_or(&hpa(None), global), global);
        assert_eq!(
            sync_period_or(&hpa(Some("5s")), global),
            Duration::from_secs(5)
        );
        let bad = sync_period_annotation(&hpa(Some("fast")));
        assert_eq!(bad.period, None);
        assert_eq!(bad.invalid.len(), 1);
        assert_eq!(sync_period_or(&hpa(Some("fast")), global), global);
    }
}
