//! The HPA's decision without the API: the pure core of upstream
//! `pkg/controller/podautoscaler/horizontal.go` (`reconcileAutoscaler` after the metrics are
//! read, `normalizeDesiredReplicas*`, `stabilizeRecommendation*`, `convertDesiredReplicasWithBehaviorRate`,
//! `tolerancesForHpa`, `setCondition`, `setStatus`).
//!
//! [`decide`] turns a [`DecisionInput`] (with the [`MetricsOutcome`] of the metrics) into a
//! [`Decision`], normalized with and without `spec.behavior` ([`behavior`],
//! [`recommendations`]; the result is a [`Normalization`]) over the per-HPA state
//! ([`HpaState`], its scale events [`TimestampedScaleEvent`]s); conditions, events and status
//! ([`conditions`], [`events`], [`status`]), what the replica calculation recorded
//! ([`calculation`]), per-HPA tolerances ([`tolerance`]), the metrics' `action`/`error`
//! labels ([`labels`]), the errors a failure keeps as its cause ([`error_source`]), Go
//! `fmt` emulation ([`gofmt`]) and Go's float-to-integer conversions ([`goconv`]); and this
//! controller's own annotations ([`annotations`], no upstream counterpart): pause ([`pause`])
//! metric fallback ([`fallback`], after KEP-5679) and a per-HPA sync period ([`sync_period`],
//! after KEP-6003). The types other crates use most are re-exported here.
//!
//! No HTTP client, async runtime or metrics registry: the controller (`hpa-horizontal`) reads
//! the API and applies what is decided here; `hack/test.sh` checks the dependency tree.

pub mod annotations;
pub mod behavior;
pub mod calculation;
pub mod conditions;
pub mod decision;
pub mod error_source;
pub mod events;
pub mod fallback;
pub mod goconv;
pub mod gofmt;
pub mod labels;
pub mod metric_source;
mod normalize;
pub mod pause;
pub mod pod_selection;
pub mod recommendations;
pub mod scale_events;
pub mod state;
pub mod status;
pub mod sync_period;
pub mod tolerance;

pub use annotations::InvalidAnnotation;
pub use conditions::{HpaCondition, MetricFailureReason};
pub use decision::{
    Branch, Decision, DecisionConfig, DecisionInput, MetricFailure, MetricResult, MetricsOutcome,
    Outcome, decide,
};
pub use error_source::ErrorSource;
pub use events::HpaEvent;
pub use fallback::{MetricFallback, MetricFallbackStatus};
pub use labels::{ActionLabel, ErrorKind, ErrorLabel};
pub use normalize::Normalization;
pub use pause::Pause;
pub use scale_events::TimestampedScaleEvent;
pub use state::HpaState;
pub use tolerance::Tolerances;
