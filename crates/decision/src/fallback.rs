//! Metric fallback through the annotation `kube-hpa-controller.io/metric-fallback`: after a
//! metric of `spec.metrics` has failed for long enough, it counts as a fallback replica count
//! (or is computed from a fallback value) instead of failing, until it is read again.
//!
//! No upstream counterpart in code: this follows KEP-5679 ("Fallback for HPA on failure to
//! retrieve metrics", kubernetes/enhancements#5680; its code PR kubernetes/kubernetes#137325
//! was closed unmerged), on native `autoscaling/v2` HPAs through an annotation instead of the
//! KEP's `spec.metrics[].external.fallback` field. An HPA without the annotation is decided
//! exactly as upstream decides it, and keeps no state here.
//!
//! # The annotation
//!
//! One annotation holds a JSON list with one entry per metric that has a fallback:
//!
//! ```text
//! kube-hpa-controller.io/metric-fallback: |
//!   [{"metric": "External/queue_depth", "failureDurationSeconds": 180, "replicas": 10},
//!    {"metric": 2, "failures": 3, "value": "500"}]
//! ```
//!
//! - `metric` names one metric of `spec.metrics`: by its index (a JSON integer, from 0), or as
//!   `Type/name` ([`metric_identity`]: `Resource/cpu`, `ContainerResource/app/cpu`,
//!   `Pods/qps`, `Object/requests`, `External/queue_depth`, the columns `hpactl simulate`
//!   writes). A name two metrics share (two External metrics of one name with other
//!   selectors) must be given by index. The name is the safer of the two: a metric added or
//!   moved in `spec.metrics` shifts the indexes, and a name that then matches nothing makes the
//!   annotation invalid rather than silently moving the fallback to another metric.
//! - The threshold, at most one of: `failureDurationSeconds` (KEP-5679's final text: the
//!   metric has been failing at every read for at least this many seconds since its first
//!   failure; 1 to 86400) or `failures` (the issue's count: this many consecutive failed
//!   reads, this one included; 1 to 10000). Neither: `failureDurationSeconds` 180, the KEP's
//!   default.
//! - The fallback, exactly one of: `replicas` (KEP-5679: the metric proposes this count,
//!   1 or more) or `value` (not in the KEP: the metric is computed as if the metrics API had
//!   answered this quantity, a string such as `"500"` or `"1500m"`, or a JSON number, 0 or
//!   more; for Object and External metrics only, whose API answers one value: the target's
//!   arithmetic applies as for a value read, per pod for an `AverageValue` target, against
//!   the ready pods for a `Value` one).
//!
//! One JSON document, not one annotation per metric: the HPA's own `autoscaling/v1` form keeps
//! its v2-only fields the same way (`autoscaling.alpha.kubernetes.io/metrics` and
//! `.../behavior` hold JSON), a metric is named once with all of its settings, and the whole is
//! checked at once. It is checked strictly ([`parse_metric_fallback`]): unknown keys, a metric
//! named twice or not found, a setting out of range, or a `value` for a Resource,
//! ContainerResource or Pods metric make the whole annotation invalid: a Warning event
//! `InvalidAnnotation` names it and the value once ([`crate::annotations`]), and the HPA is
//! decided as without it (no fallback at all; a partly applied annotation would hide the
//! mistake).
//!
//! # Semantics
//!
//! - **Failures are counted per metric**, for the metrics that have a fallback, in memory
//!   ([`crate::state::HpaState`], forgotten with the HPA): the time of the first of the
//!   consecutive failures and their number. They are counted only when the metrics are read
//!   (the `FromMetrics` branch; a selector failure reads no metric and counts nothing). A
//!   restart or a new leader starts over: the failures before it are not known, so the
//!   threshold is reached that much later (KEP-5679 keeps `firstFailureTime` in the HPA's
//!   status; an annotation-driven controller leaves the status as upstream writes it).
//! - **In effect** from the failed read at which the threshold is reached: the metric then
//!   proposes the fallback's count (or the count computed from the fallback value) under the
//!   name `Type/name (fallback)`, and is combined with the other metrics as usual
//!   (KEP-5679: the largest proposal wins; a metric still failing without a fallback blocks a
//!   scale-down as upstream's rule says), then `minReplicas`/`maxReplicas`, the behavior's
//!   stabilization windows and policies apply as to any proposal. The read's failure is still
//!   reported as always (its Warning `FailedGet*Metric` event), but no longer counts as an
//!   invalid metric (no `FailedComputeMetricsReplicas`, no reconcile error for it).
//! - **Cleared at the first successful read**: the count starts over, the metric proposes
//!   what it reads.
//! - **Condition and events**: while the annotation is valid, `MetricFallbackActive` is `True`
//!   (reason `FallbackInEffect`, the message names the metrics, since when they fail and
//!   their fallback) when a fallback is in effect, else `False` (`NoFallbackInEffect`); it is
//!   removed when the annotation is (or becomes invalid). A Normal event
//!   `MetricFallbackActivated` when a fallback comes into effect and `MetricFallbackCleared`
//!   when it clears, once each (KEP-5679's condition is `ExternalMetricFallbackActive` and its
//!   event `ExternalMetricFallbackActivated`: here every metric type can fall back).
//!
//! # Differences from KEP-5679
//!
//! - An annotation instead of a `spec` field, and no status fields (the KEP's per-metric
//!   `fallbackStatus` and `firstFailureTime`): the status stays what upstream writes, the first
//!   failure is in the condition's message and the decision trace, and the count is in memory
//!   only (a restart starts over, see above).
//! - Every metric type, not only External ones (in-cluster metrics APIs fail too).
//! - `failureDurationSeconds` from 1 s (the KEP's minimum is 180 s, kept as the default), and a
//!   count of failed reads (`failures`, as KEDA's `fallback.failureThreshold`) as the other
//!   threshold: the KEP moved from a count to a duration so that the wait does not depend on
//!   the sync period; a count gives the metric N chances to be read whatever the period.
//! - A fallback `value` besides `replicas`, for the metrics whose API answers one value (the
//!   KEP's final text has only a replica count).
//! - `MetricFallbackActive` / `MetricFallbackActivated` for the KEP's
//!   `ExternalMetricFallbackActive` / `ExternalMetricFallbackActivated`, the condition only on
//!   HPAs with the annotation, and an event `MetricFallbackCleared` when a fallback clears.

use std::fmt::Write as _;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::autoscaling::v2::{HorizontalPodAutoscaler, MetricSpec, MetricStatus};
use serde::Deserialize;

use crate::annotations::InvalidAnnotation;
use crate::decision::{MetricFailure, MetricProposal, MetricResult};

/// The metric fallback annotation: a JSON list, see the module documentation.
pub const METRIC_FALLBACK: &str = "kube-hpa-controller.io/metric-fallback";
/// KEP-5679's default (and minimum) `failureDurationSeconds`: used when an entry sets no
/// threshold (a shorter one may be set here: see the module documentation's "Differences").
pub const DEFAULT_FAILURE_DURATION_SECONDS: i64 = 180;
/// The largest `failureDurationSeconds`: a day.
pub const MAX_FAILURE_DURATION_SECONDS: i64 = 86_400;
/// The largest `failures`.
pub const MAX_FAILURES: u32 = 10_000;

/// When a metric's fallback comes into effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FallbackThreshold {
    /// `failureDurationSeconds`: failing at every read for at least this long since the first
    /// of the consecutive failures (KEP-5679).
    Duration(SignedDuration),
    /// `failures`: this many consecutive failed reads.
    Failures(u32),
}

/// What a metric whose fallback is in effect proposes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FallbackAction {
    /// `replicas`: this count (KEP-5679).
    Replicas(i32),
    /// `value`: computed as if the metrics API had answered this value (Object and External).
    Value {
        /// The value in milli-units.
        milli: i64,
        /// The value as written.
        text: String,
    },
}

/// One entry of the annotation, checked against `spec.metrics`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricFallback {
    /// The index in `spec.metrics`.
    pub index: usize,
    /// The metric's `Type/name` ([`metric_identity`]).
    pub metric: String,
    /// When it comes into effect.
    pub threshold: FallbackThreshold,
    /// What the metric proposes then.
    pub action: FallbackAction,
}

impl MetricFallback {
    /// `spec.metrics[i] (Type/name)`, as messages name the metric.
    pub fn describe(&self) -> String {
        format!("spec.metrics[{}] ({})", self.index, self.metric)
    }

    /// The name a fallback proposal is reported under (`ValidMetricFound`, the rescale
    /// reason): `Type/name (fallback)`.
    pub fn proposal_name(&self) -> String {
        format!("{} (fallback)", self.metric)
    }

    /// `the fallback replica count 10` / `the fallback value 500`.
    pub fn action_text(&self) -> String {
        match &self.action {
            FallbackAction::Replicas(n) => format!("the fallback replica count {n}"),
            FallbackAction::Value { text, .. } => format!("the fallback value {text}"),
        }
    }
}

/// `Type/name` of a metric: `Resource/cpu`, `ContainerResource/app/cpu` (container, then
/// resource), `Pods/qps`, `Object/requests`, `External/queue_depth`; `Type/` when the source
/// the type names is missing.
pub fn metric_identity(m: &MetricSpec) -> String {
    let name = match m.type_.as_str() {
        "Resource" => m.resource.as_ref().map(|r| r.name.clone()),
        "ContainerResource" => m
            .container_resource
            .as_ref()
            .map(|r| format!("{}/{}", r.container, r.name)),
        "Pods" => m.pods.as_ref().map(|r| r.metric.name.clone()),
        "Object" => m.object.as_ref().map(|r| r.metric.name.clone()),
        "External" => m.external.as_ref().map(|r| r.metric.name.clone()),
        _ => None,
    };
    format!("{}/{}", m.type_, name.unwrap_or_default())
}

/// What the fallback annotation of one HPA says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FallbackAnnotation {
    /// The fallbacks, in the annotation's order (empty without a valid annotation).
    pub fallbacks: Vec<MetricFallback>,
    /// The annotation, when set with a value that is not valid (ignored).
    pub invalid: Option<InvalidAnnotation>,
}

/// Read and check the fallback annotation of `hpa`.
pub fn fallback_annotation(hpa: &HorizontalPodAutoscaler) -> FallbackAnnotation {
    let Some(value) = hpa
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(METRIC_FALLBACK))
    else {
        return FallbackAnnotation::default();
    };
    let metrics = hpa.spec.metrics.as_deref().unwrap_or_default();
    match parse_metric_fallback(value, metrics) {
        Ok(fallbacks) => FallbackAnnotation {
            fallbacks,
            invalid: None,
        },
        Err(e) => FallbackAnnotation {
            fallbacks: Vec::new(),
            invalid: Some(e),
        },
    }
}

/// One entry as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawEntry {
    metric: serde_json::Value,
    #[serde(default)]
    failure_duration_seconds: Option<serde_json::Value>,
    #[serde(default)]
    failures: Option<serde_json::Value>,
    #[serde(default)]
    replicas: Option<serde_json::Value>,
    #[serde(default)]
    value: Option<serde_json::Value>,
}

/// A JSON integer in `lo..=hi`.
fn integer(v: &serde_json::Value, lo: i64, hi: i64) -> Option<i64> {
    v.as_i64().filter(|n| (lo..=hi).contains(n))
}

/// The value of `kube-hpa-controller.io/metric-fallback` checked against `metrics`
/// (`spec.metrics`): a non-empty JSON list of entries, each naming a different metric. See
/// the module documentation for the keys and their ranges.
pub fn parse_metric_fallback(
    value: &str,
    metrics: &[MetricSpec],
) -> Result<Vec<MetricFallback>, InvalidAnnotation> {
    let invalid = |reason: String| InvalidAnnotation {
        annotation: METRIC_FALLBACK,
        value: value.to_owned(),
        reason: reason.into(),
    };
    let entries: Vec<RawEntry> = serde_json::from_str(value).map_err(|e| {
        invalid(format!(
            "must be a JSON list of {{\"metric\": ..., \"replicas\" or \"value\": ...}}: {e}"
        ))
    })?;
    if entries.is_empty() {
        return Err(invalid("must name at least one metric".to_owned()));
    }
    let mut out: Vec<MetricFallback> = Vec::with_capacity(entries.len());
    for (n, e) in entries.into_iter().enumerate() {
        let at = |what: String| invalid(format!("entry {n}: {what}"));
        let index = crate::annotations::metric_index(&e.metric, metrics).map_err(at)?;
        if let Some(prev) = out.iter().position(|f| f.index == index) {
            return Err(at(format!(
                "spec.metrics[{index}] already has a fallback (entry {prev})"
            )));
        }
        let spec = &metrics[index];
        let threshold = match (&e.failure_duration_seconds, &e.failures) {
            (Some(_), Some(_)) => {
                return Err(at(
                    "set failureDurationSeconds or failures, not both".to_owned()
                ));
            }
            (Some(d), None) => FallbackThreshold::Duration(SignedDuration::from_secs(
                integer(d, 1, MAX_FAILURE_DURATION_SECONDS).ok_or_else(|| {
                    at(format!(
                        "failureDurationSeconds must be a whole number from 1 to {MAX_FAILURE_DURATION_SECONDS}"
                    ))
                })?,
            )),
            (None, Some(c)) => FallbackThreshold::Failures(
                integer(c, 1, i64::from(MAX_FAILURES))
                    .and_then(|c| u32::try_from(c).ok())
                    .ok_or_else(|| {
                        at(format!(
                            "failures must be a whole number from 1 to {MAX_FAILURES}"
                        ))
                    })?,
            ),
            (None, None) => FallbackThreshold::Duration(SignedDuration::from_secs(
                DEFAULT_FAILURE_DURATION_SECONDS,
            )),
        };
        let action = match (&e.replicas, &e.value) {
            (Some(r), None) => FallbackAction::Replicas(
                integer(r, 1, i64::from(i32::MAX))
                    .and_then(|r| i32::try_from(r).ok())
                    .ok_or_else(|| at("replicas must be a whole number, 1 or more".to_owned()))?,
            ),
            (None, Some(v)) => {
                if !matches!(spec.type_.as_str(), "Object" | "External") {
                    return Err(at(format!(
                        "value is for Object and External metrics; a {} metric takes replicas",
                        spec.type_
                    )));
                }
                let text = match v {
                    serde_json::Value::String(s) => s.clone(),
                    serde_json::Value::Number(n) => n.to_string(),
                    _ => String::new(),
                };
                let milli = parse_value(&text).ok_or_else(|| {
                    at(
                        "value must be a quantity of 0 or more, such as \"500\" or \"1500m\""
                            .to_owned(),
                    )
                })?;
                FallbackAction::Value { milli, text }
            }
            _ => return Err(at("set replicas or value (one of the two)".to_owned())),
        };
        out.push(MetricFallback {
            index,
            metric: metric_identity(spec),
            threshold,
            action,
        });
    }
    Ok(out)
}

/// A quantity of 0 or more whose milli-value fits in 64 bits, in milli-units.
fn parse_value(text: &str) -> Option<i64> {
    let q: hpa_quantity::Quantity = text.parse().ok()?;
    if q.sign() < 0 || q.as_approximate_f64() * 1000.0 >= 9.0e18 {
        return None;
    }
    Some(q.milli_value())
}

/// The consecutive failures of one metric with a fallback, as kept in
/// [`crate::state::HpaState`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureRecord {
    /// The index in `spec.metrics`.
    pub index: usize,
    /// The metric's `Type/name` (a record whose metric moved or changed is dropped).
    pub metric: String,
    /// The first failed read of the streak.
    pub first_failure: Timestamp,
    /// Failed reads in a row, the first one included.
    pub failures: u32,
    /// Whether the threshold has been reached.
    pub in_effect: bool,
}

/// A fallback coming into or out of effect at this read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FallbackTransition {
    /// The threshold was reached at this failed read.
    Activated,
    /// The metric was read while its fallback was in effect.
    Cleared {
        /// From the first failed read of the streak that ended to this read.
        failing_for: SignedDuration,
        /// How many reads failed in a row.
        failures: u32,
    },
}

/// What one read made of a metric with a fallback.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricFallbackStatus {
    /// The metric's fallback.
    pub fallback: MetricFallback,
    /// The first failed read of the current streak (`None`: read at this sync).
    pub first_failure: Option<Timestamp>,
    /// Failed reads in a row, this one included (0 when read).
    pub failures: u32,
    /// From the first failed read of the streak to this one (0 when read).
    pub failing_for: SignedDuration,
    /// Whether the fallback is in effect at this read.
    pub in_effect: bool,
    /// Whether it came into or out of effect at this read.
    pub transition: Option<FallbackTransition>,
    /// The read's failure, when the fallback replaced it (set by
    /// [`crate::decision::MetricsOutcome::with_fallbacks`]).
    pub replaced: Option<MetricFailure>,
    /// For a `value` fallback in effect: the metric computed from the value, by the caller
    /// (the replica calculator); taken by [`crate::decision::MetricsOutcome::with_fallbacks`].
    pub value_result: Option<MetricResult>,
}

impl MetricFallbackStatus {
    /// The status entry and outcome that replace the metric's failure while the fallback is in
    /// effect: `replicas` proposes its count (with a zero-value status entry, as a failed
    /// metric has), `value` the caller's result (renamed `Type/name (fallback)`); `None` when
    /// not in effect, or when the caller did not compute a `value` fallback.
    pub(crate) fn replacement(
        &mut self,
    ) -> Option<(MetricStatus, Result<MetricProposal, MetricFailure>)> {
        if !self.in_effect {
            return None;
        }
        let name = self.fallback.proposal_name();
        match self.fallback.action {
            FallbackAction::Replicas(replicas) => Some((
                MetricStatus::default(),
                Ok(MetricProposal {
                    replicas,
                    metric_name: name,
                    timestamp: None,
                    detail: None,
                }),
            )),
            FallbackAction::Value { .. } => {
                let r = self.value_result.take()?;
                Some((
                    r.status,
                    r.outcome.map(|p| MetricProposal {
                        metric_name: name,
                        ..p
                    }),
                ))
            }
        }
    }
}

/// One read of a metric with a fallback: the record after it and what it made of the
/// metric. `failed` is whether the read failed; `previous` the metric's record before it.
pub fn observe(
    fallback: &MetricFallback,
    previous: Option<&FailureRecord>,
    failed: bool,
    now: Timestamp,
) -> (Option<FailureRecord>, MetricFallbackStatus) {
    let mut status = MetricFallbackStatus {
        fallback: fallback.clone(),
        first_failure: None,
        failures: 0,
        failing_for: SignedDuration::ZERO,
        in_effect: false,
        transition: None,
        replaced: None,
        value_result: None,
    };
    let previous = previous.filter(|p| p.index == fallback.index && p.metric == fallback.metric);
    if !failed {
        if let Some(p) = previous.filter(|p| p.in_effect) {
            status.transition = Some(FallbackTransition::Cleared {
                failing_for: now.duration_since(p.first_failure),
                failures: p.failures,
            });
        }
        return (None, status);
    }
    let mut record = previous.cloned().unwrap_or(FailureRecord {
        index: fallback.index,
        metric: fallback.metric.clone(),
        first_failure: now,
        failures: 0,
        in_effect: false,
    });
    record.failures = record.failures.saturating_add(1);
    let failing_for = now.duration_since(record.first_failure);
    let reached = match fallback.threshold {
        FallbackThreshold::Duration(d) => failing_for >= d,
        FallbackThreshold::Failures(n) => record.failures >= n,
    };
    if reached && !record.in_effect {
        record.in_effect = true;
        status.transition = Some(FallbackTransition::Activated);
    }
    status.first_failure = Some(record.first_failure);
    status.failures = record.failures;
    status.failing_for = failing_for;
    status.in_effect = record.in_effect;
    (Some(record), status)
}

/// Go's `time.Duration.String()` for a whole number of seconds (`45s`, `3m0s`, `1h0m5s`).
pub fn go_seconds(d: SignedDuration) -> String {
    let secs = d.as_secs();
    let (sign, secs) = if secs < 0 {
        ("-", secs.unsigned_abs())
    } else {
        ("", secs.unsigned_abs())
    };
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let mut out = sign.to_owned();
    if h > 0 {
        let _ = write!(out, "{h}h{m}m{s}s");
    } else if m > 0 {
        let _ = write!(out, "{m}m{s}s");
    } else {
        let _ = write!(out, "{s}s");
    }
    out
}

/// A fallback in effect, as the `MetricFallbackActive` condition reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveFallback {
    /// The metric's fallback.
    pub fallback: MetricFallback,
    /// The first failed read of the streak.
    pub since: Timestamp,
}

/// The `MetricFallbackActive=True` message: every fallback in effect, the same at every sync
/// of one streak (no count, so the status is not rewritten at every failed read).
pub fn active_message(active: &[ActiveFallback]) -> String {
    let parts: Vec<String> = active
        .iter()
        .map(|a| {
            format!(
                "{} failing since {}, {}",
                a.fallback.describe(),
                a.since,
                match &a.fallback.action {
                    FallbackAction::Replicas(n) => format!("counted as {n} replicas"),
                    FallbackAction::Value { text, .. } => format!("read as {text}"),
                }
            )
        })
        .collect();
    format!(
        "the metric fallback of {METRIC_FALLBACK} is in effect: {}",
        parts.join("; ")
    )
}

/// The `MetricFallbackActive=False` message.
pub fn inactive_message() -> String {
    format!("no metric fallback of {METRIC_FALLBACK} is in effect")
}

#[cfg(test)]
mod tests;
