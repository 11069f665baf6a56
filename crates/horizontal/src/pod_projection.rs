//! What the controller keeps of a Pod: what the replica calculator, the selector checks and
//! the batched metrics read, nothing else. Pure: no I/O.
//!
//! No upstream counterpart (KCM's informer keeps whole pods, less `managedFields`). Kept:
//! name, resourceVersion, labels, the controller owner reference (for the `OwnerReferences`
//! pod selection strategy, `hpa_decision::pod_selection`), deletionTimestamp, phase, startTime, the first `Ready`
//! condition (status and lastTransitionTime), and the requests the calculator adds up
//! (`resourcehelpers.PodRequests` and `calculatePodRequestsFromContainers`): each container's
//! and init container's name, requests and whether it is a restartable sidecar, the pod-level
//! requests and the overhead. A kept pod is about a tenth of the size of a `Pod` value, and
//! pods with equal labels, equal requests or the same owner (the pods of one template) share
//! one copy.
//! [`PodProjection::to_pod`] gives the calculator a `Pod` holding exactly those fields, so
//! everything it computes is what it computes from the whole pod.

use std::collections::{BTreeMap, HashSet};
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{
    Container, Pod, PodCondition, PodSpec, PodStatus, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

/// Requests by resource name (quantities as written), in name order.
type Requests = Box<[(Box<str>, Box<str>)]>;

fn requests_of(list: Option<&BTreeMap<String, Quantity>>) -> Option<Requests> {
    list.map(|l| {
        l.iter()
            .map(|(k, v)| (Box::from(k.as_str()), Box::from(v.0.as_str())))
            .collect()
    })
}

fn requests_map(r: &Requests) -> BTreeMap<String, Quantity> {
    r.iter()
        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
        .collect()
}

/// Labels, sorted by key.
type Labels = [(Box<str>, Box<str>)];

/// Shares equal values between pods: the pods of one template have the same labels and the
/// same requests, so each distinct set is kept once. Values no pod holds any more are dropped
/// as the set grows.
#[derive(Debug)]
pub struct Interner<T: ?Sized + Eq + Hash> {
    set: Mutex<(HashSet<Arc<T>>, usize)>,
}

impl<T: ?Sized + Eq + Hash> Default for Interner<T> {
    fn default() -> Self {
        Interner {
            set: Mutex::new((HashSet::new(), 1024)),
        }
    }
}

impl<T: ?Sized + Eq + Hash> Interner<T> {
    /// The shared copy of `value`.
    fn intern(&self, value: Arc<T>) -> Arc<T> {
        let mut g = self.set.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(kept) = g.0.get(&value) {
            return kept.clone();
        }
        if g.0.len() >= g.1 {
            g.0.retain(|v| Arc::strong_count(v) > 1);
            g.1 = (g.0.len() * 2).max(1024);
        }
        g.0.insert(value.clone());
        value
    }
}

/// The interners of a pod cache.
#[derive(Debug, Default)]
pub struct PodInterners {
    labels: Interner<Labels>,
    specs: Interner<SpecRequests>,
    owners: Interner<ControllerRef>,
}

/// The controller owner reference (`metav1.GetControllerOf`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ControllerRef {
    api_version: Box<str>,
    kind: Box<str>,
    name: Box<str>,
    uid: Box<str>,
}

/// A container as the request arithmetic sees it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ContainerRequests {
    name: Box<str>,
    requests: Option<Requests>,
    restart_policy: Option<Box<str>>,
}

impl ContainerRequests {
    fn of(c: &Container) -> Self {
        ContainerRequests {
            name: c.name.as_str().into(),
            requests: requests_of(c.resources.as_ref().and_then(|r| r.requests.as_ref())),
            restart_policy: c.restart_policy.as_deref().map(Box::from),
        }
    }

    fn to_container(&self) -> Container {
        Container {
            name: self.name.to_string(),
            resources: self.requests.as_ref().map(|r| ResourceRequirements {
                requests: Some(requests_map(r)),
                ..Default::default()
            }),
            restart_policy: self.restart_policy.as_deref().map(str::to_owned),
            ..Default::default()
        }
    }
}

/// The first `Ready` condition (`podutil.GetPodCondition(status, PodReady)`).
#[derive(Debug, Clone, PartialEq)]
struct Ready {
    status: Box<str>,
    last_transition_time: Option<Time>,
}

/// The spec fields the request arithmetic reads.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SpecRequests {
    containers: Box<[ContainerRequests]>,
    init_containers: Option<Box<[ContainerRequests]>>,
    pod_level: Option<Requests>,
    overhead: Option<Requests>,
}

/// A pod as the controller keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct PodProjection {
    name: Box<str>,
    resource_version: Box<str>,
    /// Sorted by key; shared between pods with the same labels.
    labels: Arc<Labels>,
    deletion_timestamp: Option<Time>,
    phase: Option<Box<str>>,
    start_time: Option<Time>,
    ready: Option<Ready>,
    /// Shared between pods with the same requests.
    spec: Option<Arc<SpecRequests>>,
    /// Shared between the pods of one owner.
    controller: Option<Arc<ControllerRef>>,
}

impl PodProjection {
    /// Projects a pod, sharing its labels and requests through `interners`.
    pub fn of(pod: &Pod, interners: &PodInterners) -> Self {
        let meta = &pod.metadata;
        let status = pod.status.as_ref();
        PodProjection {
            name: meta.name.as_deref().unwrap_or("").into(),
            resource_version: meta.resource_version.as_deref().unwrap_or("").into(),
            labels: interners.labels.intern(
                meta.labels
                    .iter()
                    .flatten()
                    .map(|(k, v)| (Box::from(k.as_str()), Box::from(v.as_str())))
                    .collect(),
            ),
            controller: meta
                .owner_references
                .iter()
                .flatten()
                .find(|r| r.controller == Some(true))
                .map(|r| {
                    interners.owners.intern(Arc::new(ControllerRef {
                        api_version: r.api_version.as_str().into(),
                        kind: r.kind.as_str().into(),
                        name: r.name.as_str().into(),
                        uid: r.uid.as_str().into(),
                    }))
                }),
            deletion_timestamp: meta.deletion_timestamp.clone(),
            phase: status.and_then(|s| s.phase.as_deref()).map(Box::from),
            start_time: status.and_then(|s| s.start_time.clone()),
            ready: status
                .and_then(|s| s.conditions.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
                .map(|c| Ready {
                    status: c.status.as_str().into(),
                    last_transition_time: c.last_transition_time.clone(),
                }),
            spec: pod.spec.as_ref().map(|s| {
                interners.specs.intern(Arc::new(SpecRequests {
                    containers: s.containers.iter().map(ContainerRequests::of).collect(),
                    init_containers: s
                        .init_containers
                        .as_ref()
                        .map(|cs| cs.iter().map(ContainerRequests::of).collect()),
                    pod_level: requests_of(s.resources.as_ref().and_then(|r| r.requests.as_ref())),
                    overhead: requests_of(s.overhead.as_ref()),
                }))
            }),
        }
    }

    /// `metadata.resourceVersion`.
    pub fn resource_version(&self) -> &str {
        &self.resource_version
    }

    /// The value of label `key`.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .binary_search_by(|(k, _)| k.as_ref().cmp(key))
            .ok()
            .map(|i| self.labels[i].1.as_ref())
    }

    /// Whether `selector` matches the pod's labels.
    pub fn matches(&self, selector: &hpa_metrics::Selector) -> bool {
        selector.matches_lookup(|k| self.label(k))
    }

    /// A matcher of `selector` against many pods that matches each run of pods sharing one
    /// label set once ([`SelectorMatcher`]).
    pub(crate) fn matcher(selector: &hpa_metrics::Selector) -> SelectorMatcher<'_> {
        SelectorMatcher {
            selector,
            last: None,
        }
    }

    /// The pod as the calculator reads it: exactly the kept fields.
    pub fn to_pod(&self, namespace: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(self.name.to_string()),
                namespace: (!namespace.is_empty()).then(|| namespace.to_owned()),
                resource_version: Some(self.resource_version.to_string()),
                labels: (!self.labels.is_empty()).then(|| {
                    self.labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect()
                }),
                owner_references: self.controller.as_ref().map(|c| {
                    vec![OwnerReference {
                        api_version: c.api_version.to_string(),
                        kind: c.kind.to_string(),
                        name: c.name.to_string(),
                        uid: c.uid.to_string(),
                        controller: Some(true),
                        block_owner_deletion: None,
                    }]
                }),
                deletion_timestamp: self.deletion_timestamp.clone(),
                ..Default::default()
            },
            spec: self.spec.as_ref().map(|s| PodSpec {
                containers: s.containers.iter().map(|c| c.to_container()).collect(),
                init_containers: s
                    .init_containers
                    .as_ref()
                    .map(|cs| cs.iter().map(|c| c.to_container()).collect()),
                resources: s.pod_level.as_ref().map(|r| ResourceRequirements {
                    requests: Some(requests_map(r)),
                    ..Default::default()
                }),
                overhead: s.overhead.as_ref().map(requests_map),
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: self.phase.as_deref().map(str::to_owned),
                start_time: self.start_time.clone(),
                conditions: self.ready.as_ref().map(|r| {
                    vec![PodCondition {
                        type_: "Ready".to_owned(),
                        status: r.status.to_string(),
                        last_transition_time: r.last_transition_time.clone(),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            }),
        }
    }
}

/// One selector matched against the pods of a namespace in name order.
///
/// A selector reads labels only, and the pods of one template share one interned label set
/// ([`PodInterners`]); listed in name order they come in runs (`web-6d9f-abcde`,
/// `web-6d9f-fghij`, ...). The matcher remembers the last label set it matched and its answer,
/// so a namespace of 1,000 pods from 100 templates costs about 100 matches rather than 1,000
/// (three scans of the namespace per reconcile: the selector check, the replica calculator's
/// pods and the batched metrics' pod names). A label set is recognised by identity, never by
/// content, so the answer is always the selector's own on those very labels.
pub(crate) struct SelectorMatcher<'s> {
    selector: &'s hpa_metrics::Selector,
    last: Option<(Arc<Labels>, bool)>,
}

impl SelectorMatcher<'_> {
    /// Whether the selector matches `pod`'s labels.
    pub(crate) fn matches(&mut self, pod: &PodProjection) -> bool {
        if let Some((labels, hit)) = &self.last
            && Arc::ptr_eq(labels, &pod.labels)
        {
            return *hit;
        }
        let hit = pod.matches(self.selector);
        self.last = Some((pod.labels.clone(), hit));
        hit
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn full_pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "web-1", "namespace": "default", "resourceVersion": "9",
                "labels": {"app": "web", "tier": "fe"}, "annotations": {"a": "b"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-x", "uid": "u"}]},
            "spec": {
                "containers": [
                    {"name": "app", "image": "web:1", "env": [{"name": "A", "value": "1"}],
                     "resources": {"requests": {"cpu": "100m", "memory": "1Gi"}, "limits": {"cpu": "1"}}},
                    {"name": "log", "image": "log:1"}],
                "initContainers": [{"name": "side", "image": "s", "restartPolicy": "Always",
                    "resources": {"requests": {"cpu": "50m"}}}],
                "resources": {"requests": {"cpu": "1"}},
                "overhead": {"cpu": "10m"},
                "nodeName": "n1"},
            "status": {"phase": "Running", "startTime": "2025-01-01T00:00:00Z", "podIP": "10.0.0.1",
                "conditions": [
                    {"type": "Initialized", "status": "True"},
                    {"type": "Ready", "status": "False", "lastTransitionTime": "2025-01-01T00:00:30Z", "reason": "x"},
                    {"type": "Ready", "status": "True"}]},
        }))
        .unwrap()
    }

    #[test]
    fn keeps_what_the_calculator_reads() {
        let pod = full_pod();
        let p = PodProjection::of(&pod, &PodInterners::default());
        let back = p.to_pod("default");
        assert_eq!(back.metadata.labels, pod.metadata.labels);
        assert_eq!(back.metadata.annotations, None);
        let spec = back.spec.as_ref().unwrap();
        assert_eq!(spec.containers.len(), 2);
        assert_eq!(
            spec.containers[0].resources.as_ref().unwrap().requests,
            pod.spec.as_ref().unwrap().containers[0]
                .resources
                .as_ref()
                .unwrap()
                .requests
        );
        assert!(spec.containers[1].resources.is_none());
        assert_eq!(
            spec.init_containers.as_ref().unwrap()[0]
                .restart_policy
                .as_deref(),
            Some("Always")
        );
        assert_eq!(spec.overhead, pod.spec.as_ref().unwrap().overhead);
        let status = back.status.as_ref().unwrap();
        // Only the first Ready condition, as the calculator reads it.
        let conditions = status.conditions.as_ref().unwrap();
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].status, "False");
        assert!(conditions[0].last_transition_time.is_some());
        // The request arithmetic gives the same answers on the kept pod.
        for resource in ["cpu", "memory"] {
            assert_eq!(
                hpa_replica_calculator::pod_requests(&back, resource).unwrap(),
                hpa_replica_calculator::pod_requests(&pod, resource).unwrap()
            );
            assert_eq!(
                hpa_replica_calculator::calculate_pod_requests_from_containers(
                    &back, None, resource
                )
                .map_err(|e| e.to_string()),
                hpa_replica_calculator::calculate_pod_requests_from_containers(
                    &pod, None, resource
                )
                .map_err(|e| e.to_string())
            );
        }
    }

    #[test]
    fn labels_match_as_the_map_does() {
        let pod = full_pod();
        let p = PodProjection::of(&pod, &PodInterners::default());
        let labels = pod.metadata.labels.clone().unwrap();
        for (sel, want) in [
            ("app=web", true),
            ("app=db", false),
            ("tier in (fe,be)", true),
            ("!zone", true),
            ("app", true),
            ("app!=web", false),
        ] {
            let s: hpa_metrics::Selector = sel.parse().unwrap();
            assert_eq!(p.matches(&s), want, "{sel}");
            assert_eq!(s.matches(&labels), want, "{sel} on the pod's own labels");
        }
        assert_eq!(p.label("tier"), Some("fe"));
        assert_eq!(p.label("nope"), None);
    }

    /// The matcher answers as the selector does on every pod, whether the pods come in runs
    /// of one label set, alternate, or hold equal labels not shared (different interners).
    #[test]
    fn the_matcher_answers_as_the_selector_does() {
        let interners = PodInterners::default();
        let other = PodInterners::default();
        let with = |labels: serde_json::Value, interners: &PodInterners| {
            let pod: Pod = serde_json::from_value(json!({"metadata": {"labels": labels}})).unwrap();
            PodProjection::of(&pod, interners)
        };
        let web = json!({"app": "web"});
        let db = json!({"app": "db", "tier": "be"});
        let pods = [
            with(web.clone(), &interners),
            with(web.clone(), &interners),
            with(db.clone(), &interners),
            with(web.clone(), &interners),
            with(web.clone(), &other),
            with(db, &other),
            with(json!({}), &interners),
        ];
        // Pods of one interner with equal labels share them: that is what the matcher uses.
        assert!(Arc::ptr_eq(&pods[0].labels, &pods[1].labels));
        assert!(Arc::ptr_eq(&pods[0].labels, &pods[3].labels));
        assert!(!Arc::ptr_eq(&pods[3].labels, &pods[4].labels));
        for sel in ["app=web", "app!=web", "tier", "!tier", "app in (db)", "app"] {
            let s: hpa_metrics::Selector = sel.parse().unwrap();
            let mut m = PodProjection::matcher(&s);
            let got: Vec<bool> = pods.iter().map(|p| m.matches(p)).collect();
            let want: Vec<bool> = pods.iter().map(|p| p.matches(&s)).collect();
            assert_eq!(got, want, "{sel}");
        }
        let web_sel: hpa_metrics::Selector = "app=web".parse().unwrap();
        let mut m = PodProjection::matcher(&web_sel);
        let got: Vec<bool> = pods.iter().map(|p| m.matches(p)).collect();
        assert_eq!(got, [true, true, false, true, true, false, false]);
    }

    #[test]
    fn keeps_the_controller_reference_alone_and_shares_it() {
        // full_pod's reference is not a controller's: nothing is kept.
        let interners = PodInterners::default();
        let back = PodProjection::of(&full_pod(), &interners).to_pod("default");
        assert_eq!(back.metadata.owner_references, None);
        let owned = |name: &str| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": name, "ownerReferences": [
                {"apiVersion": "v1", "kind": "Other", "name": "o", "uid": "o-1"},
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-x", "uid": "u",
                 "controller": true, "blockOwnerDeletion": true}]}}))
            .unwrap()
        };
        let a = PodProjection::of(&owned("a"), &interners);
        let b = PodProjection::of(&owned("b"), &interners);
        assert!(Arc::ptr_eq(
            a.controller.as_ref().unwrap(),
            b.controller.as_ref().unwrap()
        ));
        let refs = a.to_pod("default").metadata.owner_references.unwrap();
        assert_eq!(refs.len(), 1);
        assert_eq!(
            (
                refs[0].kind.as_str(),
                refs[0].name.as_str(),
                refs[0].uid.as_str()
            ),
            ("ReplicaSet", "web-x", "u")
        );
        assert_eq!(
            hpa_decision::pod_selection::controller_of(&a.to_pod("default")).map(|r| &r.uid),
            hpa_decision::pod_selection::controller_of(&owned("a")).map(|r| &r.uid)
        );
    }

    #[test]
    fn a_bare_pod() {
        let pod = Pod::default();
        let back = PodProjection::of(&pod, &PodInterners::default()).to_pod("");
        assert!(back.spec.is_none());
        assert_eq!(back.metadata.labels, None);
    }
}
