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

pub use controller::{ControllerConfig, ControllerParts, HorizontalController, ReconcileError};

pub mod caches;
pub mod controller;
pub mod explain;
pub mod explain_metrics;
pub mod metrics_batch;
pub mod monitor;
pub mod pod_projection;
pub mod reconcile;
pub mod recorder;
pub mod scale_cache;
pub mod scale_client;
pub mod scale_projection;
pub mod selectors;
pub mod shadow;
pub mod trace;
