//! The horizontal pod autoscaler controller: the I/O shell of upstream
//! `pkg/controller/podautoscaler/horizontal.go` (and the Prometheus metrics of its `monitor/`
//! package) around the pure decision of the `hpa-decision` crate.
//!
//! The public surface, re-exported here:
//!
//! - the controller and what builds it: [`HorizontalController`] (`NewHorizontalController`,
//!   `Run`, `reconcileKey`), [`ControllerParts`], [`ControllerConfig`], the version it behaves
//!   as ([`resolve_version`], [`ResolvedVersion`], [`ResolveVersionError`]), what its caches hold
//!   ([`ResourceVersions`]) and its errors ([`ControllerError`], [`ReconcileError`]);
//! - the scale subresource client the binary wires in ([`ScaleClient`], [`KubeScaleClient`],
//!   [`ScaleError`]);
//! - the event recorder with client-go's correlation ([`Recorder`]) and what it emitted
//!   ([`EmittedEvent`], [`CorrelatorSizes`]);
//! - the per-metric computation shared with `hpactl simulate` ([`MetricComputer`], over the
//!   calculator's `hpa_replica_calculator::ReplicaQuery`).
//!
//! Beyond upstream: every decision is kept as a [`DecisionTrace`] in a [`TraceStore`] (the
//! [`trace`] module holds its parts) and rendered as text by [`render_text`]; shadow mode
//! compares decisions with the active controller's status without writing ([`ShadowStore`],
//! [`ShadowRecord`], [`ShadowResult`]; the [`shadow`] module holds the comparison's parts).
//!
//! Everything else is internal: the informer caches and handlers, the scale target caches and
//! projections, the selector registry, the metric batching of `--metrics-batch-window`, the
//! Prometheus metrics and the dashboard series of the traces; each module's own docs name the
//! upstream code it mirrors.

pub use controller::{
    ControllerConfig, ControllerError, ControllerParts, HorizontalController, ResolveVersionError,
    ResolvedVersion, ResourceVersions, resolve_version,
};
pub use explain::render_text;
pub use fence::{FenceError, refused_by_fence};
pub use pod_projection::{PodInterners, PodProjection};
pub use reconcile::{MetricComputer, ReconcileError};
pub use recorder::{CorrelatorSizes, EmittedEvent, Recorder};
pub use scale_client::{KubeScaleClient, ScaleClient, ScaleError};
pub use shadow::{ShadowRecord, ShadowResult, ShadowStore};
pub use shards::HistoryFactory;
pub use trace::{
    DecisionTrace, TRACE_VERSION, TRACES_PER_HPA, TraceStore, WHY_IGNORED, WHY_UNREADY,
};

mod caches;
mod controller;
mod explain;
mod explain_metrics;
mod fence;
mod metrics_batch;
mod monitor;
mod pod_owners;
mod pod_projection;
mod reconcile;
mod recorder;
mod scale_cache;
mod scale_client;
mod scale_projection;
mod selectors;
pub mod shadow;
mod shards;
pub mod trace;
