//! The horizontal pod autoscaler controller: the I/O shell of upstream
//! `pkg/controller/podautoscaler/horizontal.go` around the pure decision of the
//! `hpa-decision` crate, and the Prometheus metrics of its `monitor/` package ([`monitor`]).
//!
//! The I/O shell around it: the informer caches and handlers ([`caches`]), the scale target
//! through discovery and the scale subresource ([`scale_client`]), read from watch caches
//! of projections by default ([`scale_cache`], [`scale_projection`]), the event recorder with
//! client-go's correlation ([`recorder`]), one reconcile ([`reconcile`]) and the controller
//! with its queue and workers ([`controller`]), and the registry of every HPA's selector
//! ([`selectors`]); with `--metrics-batch-window`, pod metrics
//! batched per namespace ([`metrics_batch`]).
//!
//! Beyond upstream: every decision is kept as a [`trace::DecisionTrace`] (rendered as text
//! by [`explain`], exported as dashboard series by [`explain_metrics`]), and shadow mode
//! compares decisions with the active controller's status without writing ([`shadow`]).

//! The public surface: the controller and what builds it ([`HorizontalController`],
//! [`ControllerParts`], [`ControllerConfig`]), its errors, the scale client the binary wires
//! in ([`KubeScaleClient`]), the recorder's emissions ([`EmittedEvent`]), the traces and their
//! text ([`DecisionTrace`], [`TraceStore`], [`explain`]), shadow comparisons ([`ShadowStore`]),
//! the controller's Prometheus metrics ([`monitor`]) and the per-metric computation shared with
//! `hpactl simulate` ([`MetricComputer`]). The caches, projections, selector registry, metric
//! batching and dashboard series are internal.

pub use controller::{
    ControllerConfig, ControllerError, ControllerParts, HorizontalController, ReconcileError,
    resolve_version,
};
pub use reconcile::{MetricComputer, MetricContext};
pub use recorder::{EmittedEvent, Recorder};
pub use scale_client::KubeScaleClient;
pub use shadow::{ShadowRecord, ShadowStore};
pub use trace::{DecisionTrace, TRACE_VERSION, TraceStore};

mod caches;
pub mod controller;
pub mod explain;
mod explain_metrics;
mod metrics_batch;
pub mod monitor;
mod pod_projection;
pub mod reconcile;
pub mod recorder;
mod scale_cache;
pub mod scale_client;
mod scale_projection;
mod selectors;
pub mod shadow;
pub mod trace;
