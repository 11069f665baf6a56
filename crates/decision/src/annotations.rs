//! What every annotation of this controller shares: the prefix and the report of a value that
//! is not valid.
//!
//! No upstream counterpart: the built-in controller reads no annotation of an
//! `autoscaling/v2` HPA. Each feature has its own module ([`crate::pause`],
//! [`crate::fallback`]); an HPA without any of them is decided exactly as upstream decides it.
//!
//! A value that is not valid is reported once per HPA and value with a Warning event
//! `InvalidAnnotation` naming the annotation and the value ([`InvalidAnnotation`];
//! [`crate::state::HpaState::new_warnings`] remembers what was reported), and the HPA behaves
//! as without that annotation. The event is not repeated at every sync: the event recorder's
//! spam filter lets 25 Warning events of one HPA through and then one per 5 minutes, so a
//! Warning at every sync would crowd out the HPA's other Warnings; the value is shown in every
//! decision trace instead.

use std::borrow::Cow;

use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::fallback::metric_identity;
use crate::gofmt::quote;

/// The prefix of every annotation this controller reads.
pub const ANNOTATION_PREFIX: &str = "kube-hpa-controller.io/";

/// An annotation whose value is not valid: the HPA behaves as without it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("annotation {annotation} has the invalid value {}: {reason}; it is ignored", quote(.value))]
pub struct InvalidAnnotation {
    /// The annotation's name.
    pub annotation: &'static str,
    /// The value as set.
    pub value: String,
    /// What a valid value is (or what is wrong with this one).
    pub reason: Cow<'static, str>,
}

/// The index in `metrics` (`spec.metrics`) of the metric an annotation's entry names: a JSON
/// integer (an index) or a `Type/name` string ([`metric_identity`]) that exactly one metric
/// has. The error says why not (the caller prefixes the entry).
pub fn metric_index(metric: &serde_json::Value, metrics: &[MetricSpec]) -> Result<usize, String> {
    match metric {
        serde_json::Value::Number(num) => num
            .as_u64()
            .and_then(|i| usize::try_from(i).ok())
            .filter(|&i| i < metrics.len())
            .ok_or_else(|| {
                format!(
                    "metric {num} is not an index of spec.metrics (it has {} metrics)",
                    metrics.len()
                )
            }),
        serde_json::Value::String(name) => {
            let found: Vec<usize> = metrics
                .iter()
                .enumerate()
                .filter(|(_, m)| metric_identity(m) == *name)
                .map(|(i, _)| i)
                .collect();
            match found.as_slice() {
                [i] => Ok(*i),
                [] => Err(format!(
                    "no metric of spec.metrics is {name:?} (Type/name, e.g. External/queue_depth, or an index)"
                )),
                [first, rest @ ..] => {
                    let others: Vec<String> = rest.iter().map(usize::to_string).collect();
                    Err(format!(
                        "{name:?} is spec.metrics[{first}] and [{}]: name it by index",
                        others.join("], [")
                    ))
                }
            }
        }
        _ => Err("metric must be an index of spec.metrics or a Type/name string".to_owned()),
    }
}
