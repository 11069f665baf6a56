//! The per-metric half of a reconcile: upstream `computeReplicasForMetric` and the
//! `computeStatusFor{Object,Pods,Resource,ContainerResource,External}Metric` functions of
//! `pkg/controller/podautoscaler/horizontal.go`, one file per metric source type
//! ([`resource`] also serves ContainerResource), over a replica calculator.

mod external;
mod object;
mod pods;
mod resource;

use hpa_decision::conditions::MetricFailureReason;
use hpa_decision::decision::{MetricFailure, MetricResult};
use hpa_decision::gofmt::{GoArg, sprintf};
use hpa_metrics::{Quantity, Selector};
use hpa_replica_calculator::{ReplicaCalculator, Tolerances};
use jiff::Timestamp;
use k8s_openapi::api::autoscaling::v2::{MetricIdentifier, MetricSpec, MetricStatus, MetricTarget};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// What one metric computation needs from the reconcile.
#[derive(Debug, Clone, Copy)]
pub struct MetricContext<'a> {
    /// The HPA's namespace.
    pub namespace: &'a str,
    /// `scale.spec.replicas`.
    pub spec_replicas: i32,
    /// `scale.status.replicas`.
    pub status_replicas: i32,
    /// The scale target's parsed pod selector.
    pub selector: &'a Selector,
    /// The HPA's tolerances.
    pub tolerances: Tolerances,
    /// The decision time.
    pub now: Timestamp,
}

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
        ctx: &MetricContext<'_>,
    ) -> MetricResult {
        let mut status = MetricStatus::default();
        let outcome = match spec.type_.as_str() {
            "Object" => object::measure(self, spec, ctx, &mut status).await,
            "Pods" => pods::measure(self, spec, ctx, &mut status).await,
            "Resource" => resource::measure(self, spec, ctx, &mut status, false).await,
            "ContainerResource" => resource::measure(self, spec, ctx, &mut status, true).await,
            "External" => external::measure(self, spec, ctx, &mut status).await,
            other => Err(MetricFailure::unknown_metric_source_type(other)),
        };
        if outcome.is_err() {
            status = MetricStatus::default();
        }
        MetricResult {
            metric_type: spec.type_.clone(),
            status,
            outcome,
        }
    }
}

fn milli(q: &Quantity) -> i64 {
    q.milli_value()
}

fn quantity(q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity) -> Result<i64, String> {
    Quantity::from_k8s(q)
        .map(|q| milli(&q))
        .map_err(|e| e.to_string())
}

fn milli_quantity(v: i64) -> k8s_openapi::apimachinery::pkg::api::resource::Quantity {
    Quantity::from_milli(v).to_k8s()
}

/// `buildQuantity` (v1.34+, kubernetes#132351): resource metric values print in BinarySI for
/// memory (`156250Ki`) and DecimalSI otherwise.
fn resource_quantity(
    resource: &str,
    v: i64,
) -> k8s_openapi::apimachinery::pkg::api::resource::Quantity {
    let format = if resource == "memory" {
        hpa_metrics::Format::BinarySI
    } else {
        hpa_metrics::Format::DecimalSI
    };
    Quantity::from_milli_with_format(v, format).to_k8s()
}

fn failure(reason: MetricFailureReason, condition_error: String, error: String) -> MetricFailure {
    MetricFailure {
        reason,
        condition_error,
        error,
        spec_error: false,
    }
}

fn wrap(format: &str, args: &[GoArg<'_>]) -> String {
    sprintf(format, args)
}

/// A failed fetch of a named metric: the event and condition carry the calculator's error as
/// is, the returned error wraps it as `format` (e.g. `failed to get %s external metric: %v`)
/// and then in `outer`, as upstream's two `fmt.Errorf` layers do.
fn named_fetch_failure(
    reason: MetricFailureReason,
    format: &str,
    name: &str,
    err: impl ToString,
    outer: impl Fn(&str) -> String,
) -> MetricFailure {
    let e = err.to_string();
    let inner = wrap(format, &[GoArg::str(name), GoArg::error(e.as_str())]);
    failure(reason, e, outer(&inner))
}

fn identifier(name: &str, selector: Option<&LabelSelector>) -> MetricIdentifier {
    MetricIdentifier {
        name: name.to_owned(),
        selector: selector.cloned(),
    }
}

/// The metric's `type` names a source that is absent (API validation prevents this; Go would
/// dereference nil). Reported as a failure of that type.
fn missing_source(reason: MetricFailureReason, outer: impl Fn(&str) -> String) -> MetricFailure {
    let e = "must populate information for the given metric source";
    failure(reason, e.to_owned(), outer(e))
}

/// A target's quantity in milli-units; a missing one reads as zero (Go's nil `MilliValue`
/// would panic; API validation requires it).
fn target_milli(
    target: &MetricTarget,
    pick: impl Fn(&MetricTarget) -> Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
) -> Result<i64, String> {
    match pick(target) {
        Some(q) => quantity(q),
        None => Ok(0),
    }
}
