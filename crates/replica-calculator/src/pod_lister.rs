//! The pod access the calculator needs: upstream's `corelisters.PodLister`
//! (`podLister.Pods(namespace).List(selector)`), listing from an informer cache.

use std::sync::Arc;

use hpa_metrics::Selector;
use k8s_openapi::api::core::v1::Pod;

/// A failure to list pods from the cache. Its text is wrapped by the calculator as
/// `unable to get pods while calculating replica count: <text>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PodListError {
    /// What went wrong.
    pub message: String,
}

impl PodListError {
    /// An error with the given text.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

/// Lists the pods of a namespace matching a label selector, synchronously, from a cache.
/// The order is the lister's; it only matters for which pod an error names first.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait PodLister: Send + Sync {
    /// The pods in `namespace` whose labels match `selector`.
    fn list(&self, namespace: &str, selector: &Selector) -> Result<Vec<Arc<Pod>>, PodListError>;
}
