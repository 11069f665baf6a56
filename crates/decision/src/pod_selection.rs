//! Only the target's own pods: the annotation `kube-hpa-controller.io/pod-selection-strategy`
//! and the ownership test behind it.
//!
//! No upstream counterpart in code: this follows KEP-5325 ("HPA - Improve pod selection
//! accuracy across workload types", kubernetes/enhancements#5325; its implementation
//! kubernetes/kubernetes#132628 was closed unmerged), on native `autoscaling/v2` HPAs through an
//! annotation instead of the KEP's `spec.podSelectionStrategy` field. An HPA without the
//! annotation (or with `LabelSelector`) uses every pod its target's label selector matches,
//! exactly as upstream does (`podLister.Pods(namespace).List(selector)` in
//! `pkg/controller/podautoscaler/replica_calculator.go`).
//!
//! # The annotation
//!
//! `kube-hpa-controller.io/pod-selection-strategy`: `"LabelSelector"` (the default, upstream's
//! behaviour) or `"OwnerReferences"`, the KEP's two values, spelled exactly so. A value that is
//! not valid is reported once per HPA and value with a Warning event `InvalidAnnotation`
//! ([`crate::annotations`]), and the HPA uses its label selector alone.
//!
//! # Semantics (KEP-5325's `OwnerReferences`)
//!
//! The pods are still first selected by the target's label selector; of those, a pod is kept
//! when its controller owner reference (the one with `controller: true`, what
//! `metav1.GetControllerOf` returns and what the garbage collector follows) names the target
//! itself by `uid` (a StatefulSet's, ReplicaSet's or ReplicationController's pods, a custom
//! resource that creates pods), or names an owner whose own controller reference names the
//! target by `uid` (a Deployment's pods, through their ReplicaSet; any target that owns
//! ReplicaSets, such as an Argo Rollout). Every other pod is left out: a Job's or another
//! workload's pods that share the labels, and a pod without a controller. The target's `uid`
//! is the one its scale subresource reports.
//!
//! A pod left out is left out of everything the label-selected pods feed upstream: the
//! resource and Pods metrics' samples (its metric is dropped with it), the ready pods an
//! Object or External `Value` target multiplies by, the missing and unready pods' rules, and
//! the ambiguous-selector check (as the KEP's `validateAndFilterPods` applies it to the
//! filtered pods). The pods left out are listed in the decision trace.
//!
//! Where it differs from the KEP: the chain is followed through one intermediate owner, which
//! must be an `apps/v1` ReplicaSet (the KEP walks any chain through a dynamic client); the
//! ReplicaSets' owners are read with a GET each and kept for a bounded time (the KEP's
//! TTL cache), so a ReplicaSet adopted by another owner is seen within that time.

pub use crate::annotations::{ANNOTATION_PREFIX, InvalidAnnotation};

use std::collections::HashSet;

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

/// The HPA's pod selection strategy: `"LabelSelector"` or `"OwnerReferences"`.
pub const POD_SELECTION_STRATEGY: &str = "kube-hpa-controller.io/pod-selection-strategy";

/// KEP-5325's pod selection strategies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodSelectionStrategy {
    /// Every pod the target's label selector matches (upstream's behaviour).
    LabelSelector,
    /// Only the label-selected pods the target owns through owner references.
    OwnerReferences,
}

impl PodSelectionStrategy {
    /// The value as written in the annotation.
    pub fn as_str(self) -> &'static str {
        match self {
            PodSelectionStrategy::LabelSelector => "LabelSelector",
            PodSelectionStrategy::OwnerReferences => "OwnerReferences",
        }
    }
}

/// What the pod selection annotation of one HPA says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodSelectionAnnotation {
    /// The strategy, when set and valid.
    pub strategy: Option<PodSelectionStrategy>,
    /// The annotation, when set with a value that is not valid (ignored).
    pub invalid: Vec<InvalidAnnotation>,
}

impl PodSelectionAnnotation {
    /// Whether only the target's own pods are used.
    pub fn owner_references(&self) -> bool {
        self.strategy == Some(PodSelectionStrategy::OwnerReferences)
    }
}

/// The value of `kube-hpa-controller.io/pod-selection-strategy`.
pub fn parse_pod_selection_strategy(
    value: &str,
) -> Result<PodSelectionStrategy, InvalidAnnotation> {
    match value {
        "LabelSelector" => Ok(PodSelectionStrategy::LabelSelector),
        "OwnerReferences" => Ok(PodSelectionStrategy::OwnerReferences),
        _ => Err(InvalidAnnotation {
            annotation: POD_SELECTION_STRATEGY,
            value: value.to_owned(),
            reason: "must be \"LabelSelector\" or \"OwnerReferences\"".into(),
        }),
    }
}

/// Read and check the pod selection annotation of `hpa`.
pub fn pod_selection_annotation(hpa: &HorizontalPodAutoscaler) -> PodSelectionAnnotation {
    let Some(value) = hpa
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(POD_SELECTION_STRATEGY))
    else {
        return PodSelectionAnnotation::default();
    };
    match parse_pod_selection_strategy(value) {
        Ok(strategy) => PodSelectionAnnotation {
            strategy: Some(strategy),
            invalid: Vec::new(),
        },
        Err(e) => PodSelectionAnnotation {
            strategy: None,
            invalid: vec![e],
        },
    }
}

/// The controller owner reference of `pod` (`metav1.GetControllerOf`): the first with
/// `controller: true`.
pub fn controller_of(pod: &Pod) -> Option<&OwnerReference> {
    pod.metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|r| r.controller == Some(true))
}

/// Whether an owner reference names an `apps/v1` ReplicaSet, the one intermediate owner
/// followed ([`PodOwnership`]).
pub fn is_replica_set(owner: &OwnerReference) -> bool {
    owner.kind == "ReplicaSet" && owner.api_version == "apps/v1"
}

/// Which pods the target owns, for the `OwnerReferences` strategy: the target's `uid` and the
/// ReplicaSets the caller resolved (it reads them from the API): the `uid`s of those whose
/// controller is the target and of those whose controller is not. Pure: [`PodOwnership::owns`]
/// looks at the pod alone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodOwnership {
    /// The target's `metadata.uid`.
    pub target_uid: String,
    /// The `uid`s of the ReplicaSets controlled by the target.
    pub owned_replica_sets: HashSet<String>,
    /// The `uid`s of the ReplicaSets read and found not controlled by the target.
    pub foreign_replica_sets: HashSet<String>,
}

impl PodOwnership {
    /// Whether `pod` is the target's own: its controller is the target, or a ReplicaSet in
    /// [`Self::owned_replica_sets`]. A pod of a ReplicaSet that was not resolved (one that
    /// appeared after the owners were read, such as a rollout's new ReplicaSet a moment
    /// earlier) counts, as the label selector alone would count it, until the next read
    /// resolves it.
    pub fn owns(&self, pod: &Pod) -> bool {
        controller_of(pod).is_some_and(|owner| {
            (!self.target_uid.is_empty() && owner.uid == self.target_uid)
                || (is_replica_set(owner)
                    && (self.owned_replica_sets.contains(&owner.uid)
                        || !self.foreign_replica_sets.contains(&owner.uid)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn hpa(value: Option<&str>) -> HorizontalPodAutoscaler {
        HorizontalPodAutoscaler {
            metadata: ObjectMeta {
                annotations: value
                    .map(|v| [(POD_SELECTION_STRATEGY.to_owned(), v.to_owned())].into()),
                ..ObjectMeta::default()
            },
            ..HorizontalPodAutoscaler::default()
        }
    }

    fn owner(api_version: &str, kind: &str, uid: &str, controller: Option<bool>) -> OwnerReference {
        OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: format!("{kind}-name"),
            uid: uid.into(),
            controller,
            block_owner_deletion: None,
        }
    }

    fn pod(owners: Vec<OwnerReference>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                owner_references: Some(owners),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    #[test]
    fn reads_the_two_strategies_and_refuses_the_rest() {
        assert_eq!(
            pod_selection_annotation(&hpa(None)),
            PodSelectionAnnotation::default()
        );
        let a = pod_selection_annotation(&hpa(Some("OwnerReferences")));
        assert_eq!(a.strategy, Some(PodSelectionStrategy::OwnerReferences));
        assert!(a.owner_references() && a.invalid.is_empty());
        let a = pod_selection_annotation(&hpa(Some("LabelSelector")));
        assert_eq!(a.strategy, Some(PodSelectionStrategy::LabelSelector));
        assert!(!a.owner_references());
        for v in ["", "ownerreferences", "OwnerReferences ", "Owner", "true"] {
            let a = pod_selection_annotation(&hpa(Some(v)));
            assert_eq!(a.strategy, None, "{v:?}");
            assert_eq!(a.invalid.len(), 1);
            assert_eq!(a.invalid[0].annotation, POD_SELECTION_STRATEGY);
            assert_eq!(a.invalid[0].value, v);
            assert!(!a.owner_references());
        }
        assert!(
            parse_pod_selection_strategy("x")
                .unwrap_err()
                .to_string()
                .contains("\"LabelSelector\" or \"OwnerReferences\"")
        );
    }

    #[test]
    fn owns_the_targets_pods_directly_or_through_its_replica_sets() {
        let ownership = PodOwnership {
            target_uid: "t".into(),
            owned_replica_sets: ["rs-1".to_owned()].into(),
            foreign_replica_sets: ["rs-2".to_owned()].into(),
        };
        // Owned by the target itself (a StatefulSet's pod).
        assert!(ownership.owns(&pod(vec![owner("apps/v1", "StatefulSet", "t", Some(true))])));
        // Through a ReplicaSet the target controls (a Deployment's pod).
        assert!(ownership.owns(&pod(vec![owner(
            "apps/v1",
            "ReplicaSet",
            "rs-1",
            Some(true)
        )])));
        // A ReplicaSet of another owner, a Job, no controller, nothing at all.
        assert!(!ownership.owns(&pod(vec![owner(
            "apps/v1",
            "ReplicaSet",
            "rs-2",
            Some(true)
        )])));
        assert!(!ownership.owns(&pod(vec![owner("batch/v1", "Job", "j", Some(true))])));
        assert!(!ownership.owns(&pod(vec![owner("apps/v1", "ReplicaSet", "rs-1", None)])));
        assert!(!ownership.owns(&pod(vec![owner(
            "apps/v1",
            "StatefulSet",
            "t",
            Some(false)
        )])));
        assert!(!ownership.owns(&Pod::default()));
        // A ReplicaSet not resolved yet (a rollout's new one) counts until it is read.
        assert!(ownership.owns(&pod(vec![owner(
            "apps/v1",
            "ReplicaSet",
            "rs-3",
            Some(true)
        )])));
        // A uid of an owned ReplicaSet named by another kind is not followed.
        assert!(!ownership.owns(&pod(vec![owner("batch/v1", "Job", "rs-1", Some(true))])));
        // The first controller reference decides; a non-controller reference is not one.
        assert!(ownership.owns(&pod(vec![
            owner("batch/v1", "Job", "j", None),
            owner("apps/v1", "ReplicaSet", "rs-1", Some(true)),
        ])));
        // A target without a uid owns nothing directly.
        let no_uid = PodOwnership::default();
        assert!(!no_uid.owns(&pod(vec![owner("apps/v1", "StatefulSet", "", Some(true))])));
    }
}
