//! The real-cluster harness: upstream's etcd, kube-apiserver and kube-controller-manager of a
//! given release, built from upstream's Go modules by `hack/kube.sh`, run on loopback, with the
//! fixture server as the aggregated metrics APIs behind the real aggregator.
//!
//! No upstream counterpart as a package; it plays the part of upstream's
//! `hack/local-up-cluster.sh` and `test/integration/framework` (a control plane in one
//! command) and of kubeadm's bootstrap (certificates, kubeconfigs, RBAC), for this project's
//! tests and its comparisons with kube-controller-manager. `hpactl cluster` is its CLI.
//!
//! - [`binaries`]: where `hack/kube.sh` put the binaries of a release.
//! - [`pki`]: the certificates and keys.
//! - [`process`]: background processes recorded by pid in the cluster directory.
//! - [`control_plane`]: `up` and `down`, the cluster directory's state, restarts, etcd
//!   compaction.
//! - [`kcm`]: upstream's kube-controller-manager with only its HPA controller.
//! - [`load`]: a scenario's objects in the real cluster, times moved to now.
//! - [`populate`]: a generated cluster of many HPAs created many requests at a time.
//! - [`metrics_server`]: the aggregated metrics server process.
//! - [`drive`]: a workload played into a cluster in wall-clock time (`hpactl drive`).
//! - [`mod@bench`]: one HPA controller (upstream's or this one) measured against a populated
//!   cluster from the outside (`hpactl bench --dir`).
//! - [`read_cost`]: what kube-apiserver spends on the informers' lists and watches in JSON
//!   and in protobuf (`hpactl cluster read-cost`).
//! - [`soak`]: this controller for an hour under churn and an apiserver restart, its memory
//!   sampled (`hpactl cluster soak`).
//! - [`apply`], [`kubeconfig`]: creating objects; writing kubeconfigs.

pub mod apply;
pub mod bench;
pub mod binaries;
pub mod control_plane;
pub mod drive;
pub mod kcm;
pub mod kubeconfig;
pub mod load;
pub mod metrics_server;
pub mod pki;
pub mod populate;
pub mod process;
pub mod read_cost;
pub mod soak;

pub use binaries::{KubeBinaries, KubeRelease, TESTED_RELEASES};
pub use control_plane::{Cluster, ClusterError, ClusterState, UpOptions, down, up};
pub use load::LoadReport;
pub use populate::PopulateReport;
