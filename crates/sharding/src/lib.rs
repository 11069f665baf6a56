//! Active-active shards: several replicas of the controller, each reconciling the HPAs that
//! hash into the shards whose Leases it holds.
//!
//! No upstream counterpart: kube-controller-manager runs one leader that does all the work
//! (`tools/leaderelection` in client-go, one Lease). With `--shards=N` this controller splits
//! the HPAs into N shards by a stable hash of `namespace/name` ([`hash`]); each shard has a
//! Lease (`LEASE-shard-I`) taken and renewed with client-go's rules, and each replica announces
//! itself with a member Lease (`LEASE-member-…`) so that every replica knows how many there are
//! and holds at most ⌈N/replicas⌉ shards ([`plan`]). What a replica observed of the Leases
//! and when ([`observe`]) is kept apart from the decisions, which are pure; the Lease I/O is
//! [`coordinator`]. Every write the controller makes carries its HPA or shard
//! ([`scope`]); the process's write fence lets it leave only while this replica holds that
//! shard's Lease within its renew deadline ([`fence`]).

pub mod coordinator;
pub mod fence;
pub mod hash;
pub mod observe;
pub mod plan;
pub mod scope;

pub use coordinator::{Coordinator, CoordinatorConfig, ShardHandler, ShardMetrics};
pub use fence::{ShardFences, ShardRefusal};
pub use hash::{ShardBy, fnv1a64, shard_of};
pub use scope::WriteScope;
