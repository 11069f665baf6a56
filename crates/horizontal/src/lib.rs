//! The horizontal pod autoscaler controller: the pure decision core of upstream
//! `pkg/controller/podautoscaler/horizontal.go` and its `monitor/` package.
//!
//! This crate currently holds everything that decides without talking to the API:
//! normalization with and without `spec.behavior` ([`normalize`], [`behavior`],
//! [`recommendations`], [`scale_events`]), the per-HPA state and selector registry
//! ([`state`]), conditions, events and status ([`conditions`], [`events`], [`status`]),
//! the [`decision::Decision`] record, per-HPA tolerances ([`tolerance`]), Go `fmt`
//! emulation ([`gofmt`]) and the Prometheus metrics ([`monitor`]).
//!
//! The I/O shell around it: the informer caches and handlers ([`caches`]), the scale target
//! through discovery and the scale subresource ([`scale_client`]), read from watch caches
//! of projections by default ([`scale_cache`], [`scale_projection`]), the event recorder with
//! client-go's correlation ([`recorder`]), one reconcile ([`reconcile`]) and the controller
//! with its queue and workers ([`controller`]); with `--metrics-batch-window`, pod metrics
//! batched per namespace ([`metrics_batch`]).
//!
//! Beyond upstream: every decision is kept as a [`trace::DecisionTrace`] (rendered as text
//! by [`explain`], exported as dashboard series by [`explain_metrics`]), and shadow mode
//! compares decisions with the active controller's status without writing ([`shadow`]).

pub use controller::{ControllerConfig, ControllerParts, HorizontalController, ReconcileError};

pub mod behavior;
pub mod caches;
pub mod conditions;
pub mod controller;
pub mod decision;
pub mod events;
pub mod explain;
pub mod explain_metrics;
pub mod gofmt;
pub mod metrics_batch;
pub mod monitor;
pub mod normalize;
pub mod pod_projection;
pub mod recommendations;
pub mod reconcile;
pub mod recorder;
pub mod scale_cache;
pub mod scale_client;
pub mod scale_events;
pub mod scale_projection;
pub mod shadow;
pub mod state;
pub mod status;
pub mod tolerance;
pub mod trace;
