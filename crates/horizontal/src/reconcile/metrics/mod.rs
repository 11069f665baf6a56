//! The per-metric half of a reconcile: upstream `computeReplicasForMetric` and the
//! `computeStatusFor{Object,Pods,Resource,ContainerResource,External}Metric` functions of
//! `pkg/controller/podautoscaler/horizontal.go`, one file per metric source type
//! ([`resource`] also serves ContainerResource), over a replica calculator. Every source
//! takes the same path: read the spec's target into a [`MetricTarget`] (which of upstream's
//! `Get*Replicas` methods answers it), compute it with the calculator and wrap a failure as
//! upstream does for that method (`calculate`, [`Failures`]), then build the status entry
//! (`current` reads its fields from the target) and the proposal.

mod external;
mod fallback;
mod object;
mod pods;
mod resource;

use hpa_decision::conditions::MetricFailureReason;
use hpa_decision::decision::{MetricFailure, MetricProposal, MetricResult};
use hpa_decision::error_source::ErrorSource;
use hpa_decision::gofmt::{GoArg, sprintf};
use hpa_decision::labels::ErrorKind;
use hpa_metrics::{Quantity, Selector};
use hpa_replica_calculator::{MetricReplicas, MetricTarget, ReplicaCalculator, ReplicaQuery};
use k8s_openapi::api::autoscaling::v2::{
    MetricIdentifier, MetricSpec, MetricStatus, MetricValueStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// The per-metric half of a reconcile (`computeReplicasForMetric` and the
/// `computeStatusFor*Metric` functions) over a replica calculator: shared by the controller
/// and by `hpactl simulate`, which feeds the calculator simulated pods and metrics.
#[derive(Debug, Clone, Copy)]
pub struct MetricComputer<'a> {
    /// The calculator the proposals come from.
    pub calculator: &'a ReplicaCalculator,
    /// How `%+v` of a `*LabelSelector` prints in External metric names.
    pub selector_style: hpa_decision::gofmt::SelectorStyle,
}

impl MetricComputer<'_> {
    /// `computeReplicasForMetric`: one metric, with upstream's per-type error wrapping.
    pub async fn compute_replicas_for_metric(
        &self,
        spec: &MetricSpec,
        ctx: &ReplicaQuery<'_>,
    ) -> MetricResult {
        let measured = match spec.type_.as_str() {
            "Object" => object::measure(self, spec, ctx).await,
            "Pods" => pods::measure(self, spec, ctx).await,
            "Resource" => resource::measure(self, spec, ctx, false).await,
            "ContainerResource" => resource::measure(self, spec, ctx, true).await,
            "External" => external::measure(self, spec, ctx).await,
            other => Err(MetricFailure::unknown_metric_source_type(other)),
        };
        // A failed metric's status entry is a zero value, as upstream's.
        let (status, outcome) = match measured {
            Ok((status, proposal)) => (status, Ok(proposal)),
            Err(failure) => (MetricStatus::default(), Err(failure)),
        };
        MetricResult {
            metric_type: spec.type_.clone(),
            status,
            outcome,
        }
    }
}

/// What measuring one metric yields: its `status.currentMetrics` entry and its proposal.
type Measured = (MetricStatus, MetricProposal);

/// How one source type's failures read: the event and condition reason, and upstream's
/// outer `fmt.Errorf` around the per-type error (the returned error; the event and the
/// condition show the inner one).
struct Failures<'a> {
    reason: MetricFailureReason,
    outer: &'a (dyn Fn(&str) -> String + Sync),
}

/// The outer layer of a source whose errors are returned as the event shows them.
fn unwrapped(err: &str) -> String {
    err.to_owned()
}

impl Failures<'static> {
    /// Failures of a source type whose returned error is the event's and condition's (no
    /// outer layer).
    fn unwrapped(reason: MetricFailureReason) -> Self {
        Failures {
            reason,
            outer: &unwrapped,
        }
    }
}

impl Failures<'_> {
    /// The event and condition show `err`; the returned error wraps it in the outer layer and
    /// keeps it as the failure's source.
    fn failure(&self, err: impl std::error::Error + Send + Sync + 'static) -> MetricFailure {
        let condition_error = err.to_string();
        self.build(condition_error, None, Some(ErrorSource::new(err)))
    }

    /// A failure upstream builds from a text alone (`fmt.Errorf` with no error argument).
    fn failure_text(&self, text: &str) -> MetricFailure {
        self.build(text.to_owned(), None, None)
    }

    /// A failure whose event and condition show `err` wrapped as `format` (e.g. `failed to
    /// get %s usage: %v` with the resource name); `err` is kept as the source.
    fn wrapped(
        &self,
        format: &str,
        name: &str,
        err: impl std::error::Error + Send + Sync + 'static,
    ) -> MetricFailure {
        let condition_error = sprintf(format, &[GoArg::str(name), GoArg::error(err.to_string())]);
        self.build(condition_error, None, Some(ErrorSource::new(err)))
    }

    /// A failed fetch of a named metric: the event and condition show the calculator's error
    /// as is, the returned error wraps it as `format` (e.g. `failed to get %s external
    /// metric: %v`) and then in the outer layer, as upstream's two `fmt.Errorf` layers do.
    fn named_fetch(
        &self,
        format: &str,
        name: &str,
        err: impl std::error::Error + Send + Sync + 'static,
    ) -> MetricFailure {
        let condition_error = err.to_string();
        let inner = sprintf(
            format,
            &[GoArg::str(name), GoArg::error(condition_error.as_str())],
        );
        self.build(condition_error, Some(inner), Some(ErrorSource::new(err)))
    }

    /// The failure whose event and condition show `condition_error` and whose returned error
    /// is the outer layer around `inner` (by default the condition's text).
    fn build(
        &self,
        condition_error: String,
        inner: Option<String>,
        source: Option<ErrorSource>,
    ) -> MetricFailure {
        MetricFailure {
            reason: self.reason,
            error: (self.outer)(inner.as_deref().unwrap_or(&condition_error)),
            condition_error,
            kind: ErrorKind::Internal,
            source,
        }
    }

    /// The metric's `type` names a source that is absent (API validation prevents this; Go
    /// would dereference nil). Reported as a failure of that type.
    fn missing_source(&self) -> MetricFailure {
        self.failure_text("must populate information for the given metric source")
    }

    /// A target quantity in milli-units.
    fn quantity(
        &self,
        q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity,
    ) -> Result<i64, MetricFailure> {
        Quantity::from_k8s(q)
            .map(|q| q.milli_value())
            .map_err(|e| self.failure(e))
    }

    /// A metric's label selector, parsed.
    fn metric_selector(&self, selector: Option<&LabelSelector>) -> Result<Selector, MetricFailure> {
        Selector::from_optional_label_selector(selector).map_err(|e| self.failure(e))
    }
}

/// Computes `target` (upstream's `Get*Replicas` call of `computeStatusFor*Metric`), wrapping
/// a failure as that function does: the texts differ by method, so they are chosen by the
/// target's variant.
async fn calculate(
    computer: &MetricComputer<'_>,
    ctx: &ReplicaQuery<'_>,
    fail: &Failures<'_>,
    target: &MetricTarget<'_>,
) -> Result<MetricReplicas, MetricFailure> {
    computer
        .calculator
        .calculate(ctx, target)
        .await
        .map_err(|e| match target {
            MetricTarget::ResourceUtilization { metric, .. } => {
                fail.wrapped("failed to get %s utilization: %v", metric.resource, e)
            }
            MetricTarget::ResourceAverageValue { metric, .. } => {
                fail.wrapped("failed to get %s usage: %v", metric.resource, e)
            }
            // Upstream returns these two methods' errors without a per-method layer.
            MetricTarget::PodsAverageValue { .. } | MetricTarget::ObjectValue { .. } => {
                fail.failure(e)
            }
            MetricTarget::ObjectAverageValue { metric, .. } => {
                fail.named_fetch("failed to get %s object metric: %v", metric.metric_name, e)
            }
            MetricTarget::ExternalValue { metric, .. } => fail.named_fetch(
                "failed to get external metric %s: %v",
                metric.metric_name,
                e,
            ),
            MetricTarget::ExternalAverageValue { metric, .. } => fail.named_fetch(
                "failed to get %s external metric: %v",
                metric.metric_name,
                e,
            ),
        })
}

/// The `current` of a status entry: the target's kind chooses the fields, `value` for a
/// `Value` target, `averageValue` for an `AverageValue` one, `averageUtilization` and
/// `averageValue` (the raw usage per pod) for a `Utilization` one.
fn current(target: &MetricTarget<'_>, r: &MetricReplicas) -> MetricValueStatus {
    let milli = || Some(Quantity::from_milli(r.usage).to_k8s());
    match target {
        MetricTarget::ResourceUtilization { metric, .. } => MetricValueStatus {
            average_utilization: r.utilization,
            average_value: Some(resource_quantity(metric.resource, r.usage)),
            value: None,
        },
        MetricTarget::ResourceAverageValue { metric, .. } => MetricValueStatus {
            average_value: Some(resource_quantity(metric.resource, r.usage)),
            ..Default::default()
        },
        MetricTarget::PodsAverageValue { .. }
        | MetricTarget::ObjectAverageValue { .. }
        | MetricTarget::ExternalAverageValue { .. } => MetricValueStatus {
            average_value: milli(),
            ..Default::default()
        },
        MetricTarget::ObjectValue { .. } | MetricTarget::ExternalValue { .. } => {
            MetricValueStatus {
                value: milli(),
                ..Default::default()
            }
        }
    }
}

/// `buildQuantity` (v1.34+, kubernetes#132351): resource metric values print in BinarySI for
/// memory (`156250Ki`) and DecimalSI otherwise.
fn resource_quantity(
    resource: &str,
    milli: i64,
) -> k8s_openapi::apimachinery::pkg::api::resource::Quantity {
    let format = if resource == "memory" {
        hpa_metrics::Format::BinarySI
    } else {
        hpa_metrics::Format::DecimalSI
    };
    Quantity::from_milli_with_format(milli, format).to_k8s()
}

/// The proposal of a calculation under `metric_name`.
fn proposal(r: MetricReplicas, metric_name: String) -> MetricProposal {
    MetricProposal {
        replicas: r.replica_count,
        metric_name,
        timestamp: r.timestamp,
        detail: Some(r.detail),
    }
}

/// The `metric` of a status entry: the metric's name and selector as the spec gives them.
fn identifier(name: &str, selector: Option<&LabelSelector>) -> MetricIdentifier {
    MetricIdentifier {
        name: name.to_owned(),
        selector: selector.cloned(),
    }
}

#[cfg(test)]
mod tests;
