//! Kubernetes' protobuf wire format for this controller's informers (issue 23 item 5): kube
//! speaks JSON only, and kube-apiserver spends about a third of the CPU on a protobuf list of
//! pods or Deployments that it spends on the same list in JSON (docs/benchmarks.md). KCM asks
//! for protobuf by default (`--kube-api-content-type=application/vnd.kubernetes.protobuf`);
//! with this crate so does this controller, for the reads that cost the API server most.
//!
//! - [`envelope`]: the `k8s\0` envelope and the watch stream's frames (pure);
//! - [`convert`]: kube-rs's generated messages (`k8s-pb`) to `k8s-openapi` types, for the
//!   fields the controller keeps (pure);
//! - [`mod@watcher`]: list and watch, `kube::runtime::watcher`'s events and errors, protobuf asked
//!   for and JSON accepted.

pub mod convert;
pub mod envelope;
pub mod watcher;

pub use convert::Wire;
pub use watcher::{Codec, Config, Encoding, Typed, list_all, list_page, watch, watcher};
