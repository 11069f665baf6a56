//! The owners of an HPA's pods, for the `OwnerReferences` pod selection strategy
//! (`kube-hpa-controller.io/pod-selection-strategy`, after KEP-5325; the pure rule is
//! [`hpa_decision::pod_selection`]).
//!
//! No upstream counterpart: KEP-5325's implementation (kubernetes/kubernetes#132628, closed
//! unmerged) read the owners through a dynamic client with a TTL cache; this reads the one
//! intermediate owner it follows, an `apps/v1` ReplicaSet, with a metadata-only GET
//! (`Accept: …;as=PartialObjectMetadata`) through the controller's own client (its QPS and
//! burst), and keeps each ReplicaSet's controller for [`OWNER_TTL`] ([`NO_OWNER_TTL`] for one
//! without a controller). A ReplicaSet is read
//! again when the pods name it with another `uid` (deleted and created again under the same
//! name) or when the time is up; a ReplicaSet that no longer exists (or exists with another
//! `uid` than the pods name) owns nothing. With only
//! HPAs without the annotation, nothing is read.
//!
//! What it costs: one GET per ReplicaSet with pods per [`OWNER_TTL`] (a Deployment has one
//! ReplicaSet with pods, two during a rollout): 1,000 annotated HPAs over Deployments make
//! about 3.3 GETs per second. A failed GET fails the HPA's metrics as a failed pod list does
//! (the reconcile returns the error and is retried with the queue's backoff): the pods' owners
//! are not guessed.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use dashmap::DashMap;
use hpa_decision::pod_selection::{PodOwnership, controller_of, is_replica_set};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use tokio::time::Instant;

/// How long a ReplicaSet's controller is kept before it is read again: a ReplicaSet adopted
/// by another owner (after an orphaning delete of its old one) is seen within this time.
pub const OWNER_TTL: Duration = Duration::from_secs(300);

/// How long a ReplicaSet found without a controller (or not found) is kept: an orphaned
/// ReplicaSet is adopted again within seconds by a Deployment created again, and until then its
/// pods are left out.
pub const NO_OWNER_TTL: Duration = Duration::from_secs(15);

/// A ReplicaSet whose owner could not be read.
#[derive(Debug, thiserror::Error)]
#[error(
    "unable to read the owner of ReplicaSet {namespace}/{name} (pod selection strategy OwnerReferences): {message}"
)]
pub struct OwnerLookupError {
    /// The ReplicaSet's namespace.
    pub namespace: String,
    /// The ReplicaSet's name.
    pub name: String,
    /// The GET's error as client-go words it (an API error's message).
    pub message: String,
    /// The GET's error.
    #[source]
    pub source: kube::Error,
}

#[derive(Debug, Clone)]
struct Owner {
    /// The `uid` the pods named the ReplicaSet by when it was read.
    asked: String,
    /// The ReplicaSet's `uid` as read (`None`: it did not exist).
    uid: Option<String>,
    /// The `uid` of its controller.
    controller: Option<String>,
    read_at: Instant,
}

/// Reads and keeps the controllers of the ReplicaSets that own pods.
pub(crate) struct PodOwners {
    client: kube::Client,
    owners: DashMap<(String, String), Owner>,
    ttl: Duration,
    /// The size at which entries older than the TTL are dropped (doubles with what is kept).
    sweep_at: AtomicUsize,
}

const SWEEP_AT: usize = 4096;

impl PodOwners {
    pub(crate) fn new(client: kube::Client) -> Self {
        Self {
            client,
            owners: DashMap::new(),
            ttl: OWNER_TTL,
            sweep_at: AtomicUsize::new(SWEEP_AT),
        }
    }

    /// Which of `pods` (in `namespace`) the target with `target_uid` owns, with the names of
    /// the pods it does not own.
    pub(crate) async fn ownership(
        &self,
        namespace: &str,
        target_uid: &str,
        pods: &[Arc<Pod>],
    ) -> Result<(PodOwnership, Vec<String>), OwnerLookupError> {
        let mut ownership = PodOwnership {
            target_uid: target_uid.to_owned(),
            owned_replica_sets: HashSet::new(),
            foreign_replica_sets: HashSet::new(),
        };
        let mut asked = HashSet::new();
        for pod in pods {
            let Some(owner) = controller_of(pod) else {
                continue;
            };
            if owner.uid == target_uid || !is_replica_set(owner) || !asked.insert(&owner.uid) {
                continue;
            }
            let controller = self
                .replica_set_controller(namespace, &owner.name, &owner.uid)
                .await?;
            if !target_uid.is_empty() && controller.as_deref() == Some(target_uid) {
                ownership.owned_replica_sets.insert(owner.uid.clone());
            } else {
                ownership.foreign_replica_sets.insert(owner.uid.clone());
            }
        }
        let left_out = pods
            .iter()
            .filter(|p| !ownership.owns(p))
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect();
        Ok((ownership, left_out))
    }

    /// The controller `uid` of ReplicaSet `namespace/name` if it is the one with `uid`.
    async fn replica_set_controller(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
    ) -> Result<Option<String>, OwnerLookupError> {
        let key = (namespace.to_owned(), name.to_owned());
        if let Some(kept) = self.owners.get(&key)
            && kept.read_at.elapsed()
                < if kept.controller.is_some() {
                    self.ttl
                } else {
                    NO_OWNER_TTL
                }
            && kept.asked == uid
        {
            return Ok((kept.uid.as_deref() == Some(uid))
                .then(|| kept.controller.clone())
                .flatten());
        }
        let api: Api<ReplicaSet> = Api::namespaced(self.client.clone(), namespace);
        let read = api
            .get_metadata_opt(name)
            .await
            .map_err(|source| OwnerLookupError {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                message: hpa_metrics::kube_error_message(&source),
                source,
            })?;
        let owner = match read {
            Some(rs) => Owner {
                asked: uid.to_owned(),
                controller: rs
                    .metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .find(|r| r.controller == Some(true))
                    .map(|r| r.uid.clone()),
                uid: rs.metadata.uid,
                read_at: Instant::now(),
            },
            None => Owner {
                asked: uid.to_owned(),
                uid: None,
                controller: None,
                read_at: Instant::now(),
            },
        };
        // One per ReplicaSet read: V(4), as upstream's per-object lines are.
        tracing::trace!(
            v = 4,
            ReplicaSet = %format_args!("{namespace}/{name}"),
            controller = ?owner.controller,
            "read the owner of a ReplicaSet for the OwnerReferences pod selection strategy"
        );
        let controller = (owner.uid.as_deref() == Some(uid))
            .then(|| owner.controller.clone())
            .flatten();
        if self.owners.len() >= self.sweep_at.load(Ordering::Relaxed) {
            let ttl = self.ttl;
            self.owners.retain(|_, o| o.read_at.elapsed() < ttl);
            self.sweep_at
                .store((self.owners.len() * 2).max(SWEEP_AT), Ordering::Relaxed);
        }
        self.owners.insert(key, owner);
        Ok(controller)
    }
}
