//! The HPA's decision without the API: the pure core of upstream
//! `pkg/controller/podautoscaler/horizontal.go` (`reconcileAutoscaler` after the metrics are
//! read, `normalizeDesiredReplicas*`, `stabilizeRecommendation*`, `convertDesiredReplicasWithBehaviorRate`,
//! `tolerancesForHpa`, `setCondition`, `setStatus`).
//!
//! Normalization with and without `spec.behavior` ([`normalize`], [`behavior`],
//! [`recommendations`], [`scale_events`]) over the per-HPA state ([`state`]), conditions,
//! events and status ([`conditions`], [`events`], [`status`]), the [`decision::Decision`]
//! record and what the replica calculation recorded in it ([`calculation`]), per-HPA
//! tolerances ([`tolerance`]), the metrics' `action`/`error` labels ([`labels`]), the errors
//! a failure keeps as its cause ([`error_source`]) and Go `fmt` emulation ([`gofmt`]).
//!
//! No HTTP client, async runtime or metrics registry: the controller (`hpa-horizontal`) reads
//! the API and applies what is decided here; `hack/test.sh` checks the dependency tree.

pub mod behavior;
pub mod calculation;
pub mod conditions;
pub mod decision;
pub mod error_source;
pub mod events;
pub mod gofmt;
pub mod labels;
pub mod normalize;
pub mod recommendations;
pub mod scale_events;
pub mod state;
pub mod status;
pub mod tolerance;
