//! The horizontal pod autoscaler controller: the pure decision core of upstream
//! `pkg/controller/podautoscaler/horizontal.go` and its `monitor/` package.
//!
//! This crate currently holds everything that decides without talking to the API:
//! normalization with and without `spec.behavior` ([`normalize`], [`behavior`],
//! [`recommendations`], [`scale_events`]), the per-HPA state and selector registry
//! ([`state`]), conditions, events and status ([`conditions`], [`events`], [`status`]),
//! the [`decision::Decision`] record, per-HPA tolerances ([`tolerance`]), Go `fmt`
//! emulation ([`gofmt`]) and the Prometheus metrics ([`monitor`]).

pub mod behavior;
pub mod conditions;
pub mod decision;
pub mod events;
pub mod gofmt;
pub mod monitor;
pub mod normalize;
pub mod recommendations;
pub mod scale_events;
pub mod state;
pub mod status;
pub mod tolerance;
