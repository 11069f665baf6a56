//! From kube-rs's generated protobuf messages (`k8s-pb`) to the `k8s-openapi` types the rest
//! of this project uses, for the fields the controller keeps. Pure: no I/O.
//!
//! No upstream counterpart: client-go decodes protobuf straight into its Go types
//! (`generated.pb.go` of each API group). Here a type converts exactly the fields its cache
//! reads (for a pod, those `hpa-horizontal`'s `PodProjection` keeps, plus owner references);
//! everything else is left unset, and what JSON leaves out (`omitempty`: an empty map or list)
//! is `None` here too, so a pod read either way projects to the same value (tested against a
//! real API server in `hpa-cluster`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::api::core::v1 as pb_core;
use k8s_pb::apimachinery::pkg::api::resource::Quantity as PbQuantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as pb_meta;

use crate::envelope::{self, EnvelopeError};

/// A type an informer reads in protobuf: its list and item messages and the conversion.
pub trait Wire: Sized {
    /// The item's kind in the envelope (`Pod`).
    const KIND: &'static str;
    /// The list's kind in the envelope (`PodList`).
    const LIST_KIND: &'static str;
    /// The generated list message.
    type PbList: prost::Message + Default;
    /// The generated item message.
    type PbItem: prost::Message + Default;
    /// The list's metadata and items.
    fn split_list(list: Self::PbList) -> (Option<pb_meta::ListMeta>, Vec<Self::PbItem>);
    /// The kept fields of one item.
    fn from_pb(item: Self::PbItem) -> Result<Self, EnvelopeError>;
}

/// Decodes an enveloped list: `(resourceVersion, continue, items)`.
pub fn decode_list<K: Wire>(bytes: &[u8]) -> Result<(String, String, Vec<K>), EnvelopeError> {
    let list: K::PbList = envelope::decode(K::LIST_KIND, bytes)?;
    let (meta, items) = K::split_list(list);
    let meta = meta.unwrap_or_default();
    let items = items
        .into_iter()
        .map(K::from_pb)
        .collect::<Result<Vec<_>, _>>()?;
    Ok((
        meta.resource_version.unwrap_or_default(),
        meta.r#continue.unwrap_or_default(),
        items,
    ))
}

/// A protobuf `Time` (seconds and nanoseconds since the epoch) as `k8s-openapi`'s.
pub fn time(t: pb_meta::Time) -> Result<meta::Time, EnvelopeError> {
    let seconds = t.seconds.unwrap_or(0);
    let nanos = t.nanos.unwrap_or(0);
    jiff::Timestamp::new(seconds, nanos)
        .map(meta::Time)
        .map_err(|e| EnvelopeError::Decode {
            what: "Time",
            message: format!("{seconds}s {nanos}ns: {e}"),
        })
}

fn opt_time(t: Option<pb_meta::Time>) -> Result<Option<meta::Time>, EnvelopeError> {
    t.map(time).transpose()
}

/// A map as JSON has it: absent when empty (`omitempty`).
fn map<V, W>(m: BTreeMap<String, V>, f: impl Fn(V) -> W) -> Option<BTreeMap<String, W>> {
    (!m.is_empty()).then(|| m.into_iter().map(|(k, v)| (k, f(v))).collect())
}

fn quantity(q: PbQuantity) -> Quantity {
    Quantity(q.string.unwrap_or_default())
}

/// The object metadata a cache keeps: name, namespace, uid, resourceVersion, generation,
/// creationTimestamp, labels, deletionTimestamp and owner references.
pub fn object_meta(m: Option<pb_meta::ObjectMeta>) -> Result<meta::ObjectMeta, EnvelopeError> {
    let Some(m) = m else {
        return Ok(meta::ObjectMeta::default());
    };
    let owners: Vec<meta::OwnerReference> = m
        .owner_references
        .into_iter()
        .map(|o| meta::OwnerReference {
            api_version: o.api_version.unwrap_or_default(),
            kind: o.kind.unwrap_or_default(),
            name: o.name.unwrap_or_default(),
            uid: o.uid.unwrap_or_default(),
            controller: o.controller,
            block_owner_deletion: o.block_owner_deletion,
        })
        .collect();
    Ok(meta::ObjectMeta {
        name: m.name,
        namespace: m.namespace,
        uid: m.uid,
        resource_version: m.resource_version,
        generation: m.generation,
        creation_timestamp: opt_time(m.creation_timestamp)?,
        labels: map(m.labels, |v| v),
        deletion_timestamp: opt_time(m.deletion_timestamp)?,
        owner_references: (!owners.is_empty()).then_some(owners),
        ..Default::default()
    })
}

fn requirements(r: Option<pb_core::ResourceRequirements>) -> Option<core::ResourceRequirements> {
    r.map(|r| core::ResourceRequirements {
        requests: map(r.requests, quantity),
        ..Default::default()
    })
}

fn container(c: pb_core::Container) -> core::Container {
    core::Container {
        name: c.name.unwrap_or_default(),
        resources: requirements(c.resources),
        restart_policy: c.restart_policy,
        ..Default::default()
    }
}

impl Wire for core::Pod {
    const KIND: &'static str = "Pod";
    const LIST_KIND: &'static str = "PodList";
    type PbList = pb_core::PodList;
    type PbItem = pb_core::Pod;

    fn split_list(list: pb_core::PodList) -> (Option<pb_meta::ListMeta>, Vec<pb_core::Pod>) {
        (list.metadata, list.items)
    }

    /// Metadata ([`object_meta`]); each container's and init container's name, requests and
    /// restart policy, the pod-level requests and the overhead; phase, start time and every
    /// condition's type, status and last transition time.
    fn from_pb(p: pb_core::Pod) -> Result<Self, EnvelopeError> {
        let spec = p.spec.map(|s| {
            let init: Vec<core::Container> = s.init_containers.into_iter().map(container).collect();
            core::PodSpec {
                containers: s.containers.into_iter().map(container).collect(),
                init_containers: (!init.is_empty()).then_some(init),
                resources: requirements(s.resources),
                overhead: map(s.overhead, quantity),
                ..Default::default()
            }
        });
        let status = match p.status {
            None => None,
            Some(s) => {
                let conditions = s
                    .conditions
                    .into_iter()
                    .map(|c| {
                        Ok(core::PodCondition {
                            type_: c.r#type.unwrap_or_default(),
                            status: c.status.unwrap_or_default(),
                            last_transition_time: opt_time(c.last_transition_time)?,
                            ..Default::default()
                        })
                    })
                    .collect::<Result<Vec<_>, EnvelopeError>>()?;
                Some(core::PodStatus {
                    phase: s.phase,
                    start_time: opt_time(s.start_time)?,
                    conditions: (!conditions.is_empty()).then_some(conditions),
                    ..Default::default()
                })
            }
        };
        Ok(core::Pod {
            metadata: object_meta(p.metadata)?,
            spec,
            status,
        })
    }
}

/// The built-in scale targets the scale-target cache reads in protobuf, as the
/// `DynamicObject`s its projection reads (`hpa-horizontal`'s `scale_projection`): metadata
/// ([`object_meta`]), `spec.replicas`, `status.replicas` and the selector (a `LabelSelector`
/// for the apps kinds; for a ReplicationController its label map and the template's labels,
/// which it defaults to).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScaleTarget {
    /// `apps/v1` Deployment.
    Deployment,
    /// `apps/v1` ReplicaSet.
    ReplicaSet,
    /// `apps/v1` StatefulSet.
    StatefulSet,
    /// `v1` ReplicationController.
    ReplicationController,
}

impl ScaleTarget {
    /// The kind served at `group`/`version`/`resource`, if it is one of these.
    pub fn of(group: &str, version: &str, resource: &str) -> Option<Self> {
        match (group, version, resource) {
            ("apps", "v1", "deployments") => Some(ScaleTarget::Deployment),
            ("apps", "v1", "replicasets") => Some(ScaleTarget::ReplicaSet),
            ("apps", "v1", "statefulsets") => Some(ScaleTarget::StatefulSet),
            ("", "v1", "replicationcontrollers") => Some(ScaleTarget::ReplicationController),
            _ => None,
        }
    }

    fn kind(self) -> &'static str {
        match self {
            ScaleTarget::Deployment => "Deployment",
            ScaleTarget::ReplicaSet => "ReplicaSet",
            ScaleTarget::StatefulSet => "StatefulSet",
            ScaleTarget::ReplicationController => "ReplicationController",
        }
    }

    fn list_kind(self) -> &'static str {
        match self {
            ScaleTarget::Deployment => "DeploymentList",
            ScaleTarget::ReplicaSet => "ReplicaSetList",
            ScaleTarget::StatefulSet => "StatefulSetList",
            ScaleTarget::ReplicationController => "ReplicationControllerList",
        }
    }

    fn api_version(self) -> &'static str {
        match self {
            ScaleTarget::ReplicationController => "v1",
            _ => "apps/v1",
        }
    }

    fn object(
        self,
        meta: Option<pb_meta::ObjectMeta>,
        spec: serde_json::Map<String, serde_json::Value>,
        status_replicas: Option<i32>,
    ) -> Result<kube::api::DynamicObject, EnvelopeError> {
        let mut data = serde_json::Map::new();
        data.insert("spec".into(), serde_json::Value::Object(spec));
        let mut status = serde_json::Map::new();
        if let Some(r) = status_replicas {
            status.insert("replicas".into(), r.into());
        }
        data.insert("status".into(), serde_json::Value::Object(status));
        Ok(kube::api::DynamicObject {
            types: Some(kube::core::TypeMeta {
                api_version: self.api_version().into(),
                kind: self.kind().into(),
            }),
            metadata: object_meta(meta)?,
            data: serde_json::Value::Object(data),
        })
    }

    fn apps_spec(
        replicas: Option<i32>,
        selector: Option<pb_meta::LabelSelector>,
    ) -> serde_json::Map<String, serde_json::Value> {
        let mut spec = serde_json::Map::new();
        if let Some(r) = replicas {
            spec.insert("replicas".into(), r.into());
        }
        if let Some(sel) = selector {
            let mut s = serde_json::Map::new();
            if !sel.match_labels.is_empty() {
                s.insert("matchLabels".into(), serde_json::json!(sel.match_labels));
            }
            let exprs: Vec<serde_json::Value> = sel
                .match_expressions
                .into_iter()
                .map(|e| {
                    let mut m = serde_json::Map::new();
                    m.insert("key".into(), e.key.unwrap_or_default().into());
                    m.insert("operator".into(), e.operator.unwrap_or_default().into());
                    if !e.values.is_empty() {
                        m.insert("values".into(), serde_json::json!(e.values));
                    }
                    serde_json::Value::Object(m)
                })
                .collect();
            if !exprs.is_empty() {
                s.insert("matchExpressions".into(), exprs.into());
            }
            spec.insert("selector".into(), serde_json::Value::Object(s));
        }
        spec
    }

    fn decode_raw(self, raw: &[u8]) -> Result<kube::api::DynamicObject, EnvelopeError> {
        use k8s_pb::api::apps::v1 as apps;
        // The apps kinds differ only in their message types: the same fields are kept.
        macro_rules! apps_object {
            ($message:ty) => {{
                let d: $message = envelope::message(self.kind(), raw)?;
                let spec = d.spec.unwrap_or_default();
                let status = d.status.and_then(|s| s.replicas);
                self.object(
                    d.metadata,
                    Self::apps_spec(spec.replicas, spec.selector),
                    status,
                )
            }};
        }
        match self {
            ScaleTarget::Deployment => apps_object!(apps::Deployment),
            ScaleTarget::ReplicaSet => apps_object!(apps::ReplicaSet),
            ScaleTarget::StatefulSet => apps_object!(apps::StatefulSet),
            ScaleTarget::ReplicationController => {
                let d: pb_core::ReplicationController = envelope::message(self.kind(), raw)?;
                let spec = d.spec.unwrap_or_default();
                let mut out = serde_json::Map::new();
                if let Some(r) = spec.replicas {
                    out.insert("replicas".into(), r.into());
                }
                if !spec.selector.is_empty() {
                    out.insert("selector".into(), serde_json::json!(spec.selector));
                }
                let template_labels = spec
                    .template
                    .and_then(|t| t.metadata)
                    .map(|m| m.labels)
                    .filter(|l| !l.is_empty());
                if let Some(labels) = template_labels {
                    out.insert(
                        "template".into(),
                        serde_json::json!({"metadata": {"labels": labels}}),
                    );
                }
                let status = d.status.and_then(|s| s.replicas);
                self.object(d.metadata, out, status)
            }
        }
    }
}

/// A list of any kind: its metadata and its items' raw messages (each item is a message of
/// field 2, the way every generated `*List` is laid out).
#[derive(Clone, PartialEq, prost::Message)]
struct AnyList {
    #[prost(message, optional, tag = "1")]
    metadata: Option<pb_meta::ListMeta>,
    #[prost(bytes = "vec", repeated, tag = "2")]
    items: Vec<Vec<u8>>,
}

impl crate::watcher::Codec<kube::api::DynamicObject> for ScaleTarget {
    fn list(
        &self,
        bytes: &[u8],
    ) -> Result<crate::watcher::Page<kube::api::DynamicObject>, EnvelopeError> {
        let list: AnyList = envelope::decode(self.list_kind(), bytes)?;
        let meta = list.metadata.unwrap_or_default();
        let items = list
            .items
            .iter()
            .map(|item| self.decode_raw(item))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((
            meta.resource_version.unwrap_or_default(),
            meta.r#continue.unwrap_or_default(),
            items,
        ))
    }

    fn item(&self, bytes: &[u8]) -> Result<kube::api::DynamicObject, EnvelopeError> {
        self.decode_raw(&envelope::open_kind(self.kind(), bytes)?)
    }
}

/// A protobuf `Status` (an error answer, or a watch's `ERROR` event) as kube's.
pub fn status(s: pb_meta::Status) -> kube::core::Status {
    let code = s.code.and_then(|c| u16::try_from(c).ok()).unwrap_or(0);
    kube::core::Status {
        status: match s.status.as_deref() {
            Some("Success") => Some(kube::core::response::StatusSummary::Success),
            Some("Failure") => Some(kube::core::response::StatusSummary::Failure),
            _ => None,
        },
        code,
        message: s.message.unwrap_or_default(),
        metadata: None,
        reason: s.reason.unwrap_or_default(),
        details: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message as _;

    fn pb_pod() -> pb_core::Pod {
        let req = |cpu: &str| pb_core::ResourceRequirements {
            requests: [(
                "cpu".to_string(),
                PbQuantity {
                    string: Some(cpu.into()),
                },
            )]
            .into(),
            ..Default::default()
        };
        pb_core::Pod {
            metadata: Some(pb_meta::ObjectMeta {
                name: Some("web-1".into()),
                namespace: Some("default".into()),
                resource_version: Some("42".into()),
                labels: [("app".to_string(), "web".to_string())].into(),
                annotations: [("big".to_string(), "x".repeat(100))].into(),
                owner_references: vec![pb_meta::OwnerReference {
                    api_version: Some("apps/v1".into()),
                    kind: Some("ReplicaSet".into()),
                    name: Some("web-abc".into()),
                    uid: Some("u-1".into()),
                    controller: Some(true),
                    block_owner_deletion: None,
                }],
                ..Default::default()
            }),
            spec: Some(pb_core::PodSpec {
                containers: vec![pb_core::Container {
                    name: Some("app".into()),
                    image: Some("web:1".into()),
                    resources: Some(req("250m")),
                    ..Default::default()
                }],
                init_containers: vec![pb_core::Container {
                    name: Some("proxy".into()),
                    restart_policy: Some("Always".into()),
                    resources: Some(pb_core::ResourceRequirements::default()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: Some(pb_core::PodStatus {
                phase: Some("Running".into()),
                start_time: Some(pb_meta::Time {
                    seconds: Some(1_700_000_000),
                    nanos: Some(0),
                }),
                conditions: vec![pb_core::PodCondition {
                    r#type: Some("Ready".into()),
                    status: Some("True".into()),
                    last_transition_time: Some(pb_meta::Time {
                        seconds: Some(1_700_000_010),
                        nanos: None,
                    }),
                    message: Some("ignored".into()),
                    ..Default::default()
                }],
                pod_ip: Some("10.0.0.1".into()),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn a_pod_keeps_what_the_controller_reads_as_json_would_give_it() {
        let got = core::Pod::from_pb(pb_pod()).expect("converts");
        let want: core::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-1", "namespace": "default", "resourceVersion": "42",
                "labels": {"app": "web"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "name": "web-abc", "uid": "u-1", "controller": true}]},
            "spec": {
                "containers": [{"name": "app", "resources": {"requests": {"cpu": "250m"}}}],
                "initContainers": [{"name": "proxy", "restartPolicy": "Always", "resources": {}}]
            },
            "status": {"phase": "Running", "startTime": "2023-11-14T22:13:20Z",
                "conditions": [{"type": "Ready", "status": "True",
                    "lastTransitionTime": "2023-11-14T22:13:30Z"}]}
        }))
        .expect("json");
        assert_eq!(got, want);
    }

    #[test]
    fn a_list_decodes_with_its_resource_version_and_continue_token() {
        let list = pb_core::PodList {
            metadata: Some(pb_meta::ListMeta {
                resource_version: Some("77".into()),
                r#continue: Some("next".into()),
                ..Default::default()
            }),
            items: vec![pb_pod(), pb_pod()],
        };
        let bytes = envelope::wrap("v1", "PodList", &list);
        let (rv, cont, items) = decode_list::<core::Pod>(&bytes).expect("decodes");
        assert_eq!((rv.as_str(), cont.as_str(), items.len()), ("77", "next", 2));
        // A Pod where a PodList was asked for is refused, not misread.
        let pod = envelope::wrap("v1", "Pod", &pb_pod());
        assert!(matches!(
            decode_list::<core::Pod>(&pod),
            Err(EnvelopeError::Kind { .. })
        ));
    }

    #[test]
    fn an_impossible_time_is_an_error() {
        let mut p = pb_pod();
        if let Some(s) = p.status.as_mut() {
            s.start_time = Some(pb_meta::Time {
                seconds: Some(i64::MAX),
                nanos: None,
            });
        }
        assert!(matches!(
            core::Pod::from_pb(p),
            Err(EnvelopeError::Decode { what: "Time", .. })
        ));
        let _ = pb_pod().encode_to_vec();
    }

    #[test]
    fn a_status_keeps_code_reason_and_message() {
        let s = status(pb_meta::Status {
            status: Some("Failure".into()),
            message: Some("too old resource version: 1 (2)".into()),
            reason: Some("Expired".into()),
            code: Some(410),
            ..Default::default()
        });
        assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
        assert!(s.is_failure());
        assert_eq!(
            status(pb_meta::Status {
                code: Some(-1),
                ..Default::default()
            })
            .code,
            0
        );
    }

    #[test]
    fn scale_targets_keep_replicas_and_selectors_as_json_has_them() {
        use crate::watcher::Codec as _;
        use k8s_pb::api::apps::v1 as apps;
        let deployment = apps::Deployment {
            metadata: Some(pb_meta::ObjectMeta {
                name: Some("web".into()),
                namespace: Some("default".into()),
                uid: Some("u".into()),
                resource_version: Some("9".into()),
                creation_timestamp: Some(pb_meta::Time {
                    seconds: Some(1_700_000_000),
                    nanos: Some(0),
                }),
                ..Default::default()
            }),
            spec: Some(apps::DeploymentSpec {
                replicas: Some(3),
                selector: Some(pb_meta::LabelSelector {
                    match_labels: [("app".to_string(), "web".to_string())].into(),
                    match_expressions: vec![pb_meta::LabelSelectorRequirement {
                        key: Some("tier".into()),
                        operator: Some("In".into()),
                        values: vec!["a".into(), "b".into()],
                    }],
                }),
                ..Default::default()
            }),
            status: Some(apps::DeploymentStatus {
                replicas: Some(2),
                ..Default::default()
            }),
        };
        let list = apps::DeploymentList {
            metadata: Some(pb_meta::ListMeta {
                resource_version: Some("10".into()),
                ..Default::default()
            }),
            items: vec![deployment.clone(), apps::Deployment::default()],
        };
        let target = ScaleTarget::of("apps", "v1", "deployments").expect("built in");
        let (rv, cont, items) = target
            .list(&envelope::wrap("apps/v1", "DeploymentList", &list))
            .expect("decodes");
        assert_eq!((rv.as_str(), cont.as_str(), items.len()), ("10", "", 2));
        assert_eq!(
            items[0].data,
            serde_json::json!({
                "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"},
                    "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}},
                "status": {"replicas": 2}
            })
        );
        assert_eq!(items[0].metadata.uid.as_deref(), Some("u"));
        assert!(items[0].metadata.creation_timestamp.is_some());
        // An empty object has no replicas: the projection's defaults apply, as for JSON.
        assert_eq!(items[1].data, serde_json::json!({"spec": {}, "status": {}}));
        let one = target
            .item(&envelope::wrap("apps/v1", "Deployment", &deployment))
            .expect("decodes");
        assert_eq!(one.data, items[0].data);
        assert!(matches!(
            target.item(&envelope::wrap("apps/v1", "StatefulSet", &deployment)),
            Err(EnvelopeError::Kind { .. })
        ));
        assert_eq!(ScaleTarget::of("apps", "v1beta2", "deployments"), None);
    }

    #[test]
    fn a_replication_controller_keeps_its_label_map_and_template_labels() {
        use crate::watcher::Codec as _;
        let rc = pb_core::ReplicationController {
            metadata: Some(pb_meta::ObjectMeta {
                name: Some("old".into()),
                ..Default::default()
            }),
            spec: Some(pb_core::ReplicationControllerSpec {
                replicas: Some(1),
                selector: Default::default(),
                template: Some(pb_core::PodTemplateSpec {
                    metadata: Some(pb_meta::ObjectMeta {
                        labels: [("app".to_string(), "old".to_string())].into(),
                        ..Default::default()
                    }),
                    spec: None,
                }),
                ..Default::default()
            }),
            status: None,
        };
        let target = ScaleTarget::of("", "v1", "replicationcontrollers").expect("built in");
        let obj = target
            .item(&envelope::wrap("v1", "ReplicationController", &rc))
            .expect("decodes");
        assert_eq!(
            obj.data,
            serde_json::json!({"spec": {"replicas": 1, "template": {"metadata": {"labels": {"app": "old"}}}},
                "status": {}})
        );
    }
}
