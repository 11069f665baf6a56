//! Every HPA's stabilization and policy history, kept where a new leader finds it.
//!
//! Upstream's HPA controller (`pkg/controller/podautoscaler/horizontal.go`) keeps each HPA's
//! recommendations (read by the stabilization windows) and scale events (read by the behavior
//! policies' periods) in the leader's memory: after a failover or restart the new leader starts
//! empty, so a policy of 4 pods per 60 s can add 8 pods within seconds, and a downscale window
//! restarts from the current replicas. This crate keeps what those can still read
//! ([`snapshot`]) in ConfigMaps ([`store`]), written in batches by the leader and read back by
//! the next one before its first decision ([`persister`]).

pub mod persister;
pub mod snapshot;
pub mod store;

pub use persister::{History, HistoryMetrics};
pub use snapshot::{HpaHistory, horizon};
pub use store::ConfigMapStore;
