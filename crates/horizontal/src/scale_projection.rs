//! What a scale target's `autoscaling/v1` `Scale` holds, projected from the whole object a
//! watch delivers: spec replicas, status replicas, selector, and the metadata a `Scale`
//! carries (name, uid, resourceVersion, creationTimestamp). Pure: no I/O.
//!
//! Mirrors the API server's scale storage: `scaleFromDeployment`, `scaleFromReplicaSet`,
//! `scaleFromStatefulSet` (`pkg/registry/apps/*/storage/storage.go`), `scaleFromRC`
//! (`pkg/registry/core/replicationcontroller/storage/storage.go`) and
//! `scaleFromCustomResource` (`apiextensions-apiserver/pkg/registry/customresource/etcd.go`,
//! with the CRD version's `subresources.scale` paths). Anything those would refuse (a field
//! of the wrong type, an invalid selector) is a [`ProjectionError`]; the cache then reads
//! that object's scale with a GET, so the error text is the API server's.

use std::collections::BTreeMap;

use hpa_metrics::Selector;
use k8s_openapi::api::autoscaling::v1::{Scale, ScaleSpec, ScaleStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use serde::Deserialize;
use serde_json::Value;

/// Where a resource keeps the fields of its scale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScaleSource {
    /// Deployments, ReplicaSets, StatefulSets: `spec.selector` is a `LabelSelector`.
    Apps,
    /// ReplicationControllers: `spec.selector` is a label map (defaulting to the template's
    /// labels).
    ReplicationController,
    /// A custom resource, through its CRD's `subresources.scale` paths.
    Custom(ScalePaths),
}

/// The `subresources.scale` paths of one CRD version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalePaths {
    /// `specReplicasPath`, e.g. `.spec.replicas`.
    pub spec_replicas: String,
    /// `statusReplicasPath`.
    pub status_replicas: String,
    /// `labelSelectorPath`, if any.
    pub label_selector: Option<String>,
}

/// The built-in scalable resources the cache watches without asking anything else.
pub fn builtin_source(group: &str, resource: &str) -> Option<ScaleSource> {
    match (group, resource) {
        ("apps", "deployments" | "replicasets" | "statefulsets") => Some(ScaleSource::Apps),
        ("", "replicationcontrollers") => Some(ScaleSource::ReplicationController),
        _ => None,
    }
}

/// The `subresources.scale` paths a CustomResourceDefinition declares for `version`.
pub fn crd_scale_paths(crd: &Value, version: &str) -> Option<ScalePaths> {
    let versions = crd.pointer("/spec/versions")?.as_array()?;
    let v = versions
        .iter()
        .find(|v| v.get("name").and_then(Value::as_str) == Some(version))?;
    let scale = v.pointer("/subresources/scale")?;
    let path = |key: &str| scale.get(key).and_then(Value::as_str).map(str::to_owned);
    Some(ScalePaths {
        spec_replicas: path("specReplicasPath")?,
        status_replicas: path("statusReplicasPath")?,
        label_selector: path("labelSelectorPath").filter(|p| !p.is_empty()),
    })
}

/// Why an object has no projection (its scale is then read with a GET).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ProjectionError {
    /// The field path.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

fn bad(field: &str, message: impl Into<String>) -> ProjectionError {
    ProjectionError {
        field: field.to_owned(),
        message: message.into(),
    }
}

/// The part of a scale target a `Scale` holds. The namespace is the cache's key.
#[derive(Debug, Clone, PartialEq)]
pub struct ScaleProjection {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: Option<String>,
    /// `metadata.resourceVersion` (the PUT's optimistic concurrency).
    pub resource_version: String,
    /// `metadata.creationTimestamp`.
    pub creation_timestamp: Option<Time>,
    /// `spec.replicas` of the scale.
    pub spec_replicas: i32,
    /// `status.replicas` of the scale.
    pub status_replicas: i32,
    /// `status.selector` of the scale (`""`: none).
    pub selector: String,
}

impl ScaleProjection {
    /// Projects an object (its metadata and the rest of its fields) through `source`.
    pub fn project(
        meta: &ObjectMeta,
        data: &Value,
        source: &ScaleSource,
    ) -> Result<Self, ProjectionError> {
        let (spec_replicas, status_replicas, selector) = match source {
            ScaleSource::Apps => (
                replicas(data, ".spec.replicas")?.unwrap_or(1),
                replicas(data, ".status.replicas")?.unwrap_or(0),
                label_selector_string(data)?,
            ),
            ScaleSource::ReplicationController => (
                replicas(data, ".spec.replicas")?.unwrap_or(1),
                replicas(data, ".status.replicas")?.unwrap_or(0),
                rc_selector_string(data)?,
            ),
            // The API server reads a missing path as 0 (or no selector). The cache does not:
            // a path missing from an object may be one the CRD no longer declares (the cache
            // relists on a CRD change, but an object can arrive first), so such an object's
            // scale is read with a GET, whose answer is the API server's either way.
            ScaleSource::Custom(paths) => {
                let selector = match &paths.label_selector {
                    None => String::new(),
                    Some(p) => match nested(data, p)? {
                        None | Some(Value::Null) => return Err(bad(p, "not set")),
                        Some(Value::String(s)) => s.clone(),
                        Some(_) => return Err(bad(p, "must be a string")),
                    },
                };
                let required = |p: &str| replicas(data, p)?.ok_or_else(|| bad(p, "not set"));
                (
                    required(&paths.spec_replicas)?,
                    required(&paths.status_replicas)?,
                    selector,
                )
            }
        };
        Ok(ScaleProjection {
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone().unwrap_or_default(),
            creation_timestamp: meta.creation_timestamp.clone(),
            spec_replicas,
            status_replicas,
            selector,
        })
    }

    /// The `Scale` a GET of the scale subresource returns for this object.
    pub fn to_scale(&self, namespace: &str) -> Scale {
        Scale {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: (!namespace.is_empty()).then(|| namespace.to_owned()),
                uid: self.uid.clone(),
                resource_version: Some(self.resource_version.clone()),
                creation_timestamp: self.creation_timestamp.clone(),
                ..Default::default()
            },
            // `ScaleSpec.replicas` is `omitempty`.
            spec: Some(ScaleSpec {
                replicas: (self.spec_replicas != 0).then_some(self.spec_replicas),
            }),
            status: Some(ScaleStatus {
                replicas: self.status_replicas,
                selector: (!self.selector.is_empty()).then(|| self.selector.clone()),
            }),
        }
    }
}

/// apiextensions' `parseJSONPath`: `.spec.replicas` → `spec`, `replicas`.
fn parse_path(path: &str) -> impl Iterator<Item = &str> {
    path.trim_start_matches('.')
        .split('.')
        .filter(|s| !s.is_empty())
}

/// `unstructured.NestedFieldNoCopy`: `None` when a map along the way lacks the key, an error
/// when something along the way is not a map.
fn nested<'a>(obj: &'a Value, path: &str) -> Result<Option<&'a Value>, ProjectionError> {
    let mut cur = obj;
    for part in parse_path(path) {
        match cur {
            Value::Object(m) => match m.get(part) {
                Some(v) => cur = v,
                None => return Ok(None),
            },
            _ => return Err(bad(path, "not a map")),
        }
    }
    Ok(Some(cur))
}

/// `unstructured.NestedInt64` read as an `int32` replica count.
fn replicas(obj: &Value, path: &str) -> Result<Option<i32>, ProjectionError> {
    match nested(obj, path)? {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| bad(path, "must be an int32 replica count")),
    }
}

/// `metav1.LabelSelectorAsSelector(spec.selector).String()`.
fn label_selector_string(obj: &Value) -> Result<String, ProjectionError> {
    let sel = match obj.pointer("/spec/selector") {
        None | Some(Value::Null) => return Ok(String::new()),
        Some(s) => s,
    };
    let ls = LabelSelector::deserialize(sel).map_err(|e| bad(".spec.selector", e.to_string()))?;
    Selector::from_label_selector(&ls)
        .map(|s| s.to_string())
        .map_err(|e| bad(".spec.selector", e.to_string()))
}

/// `labels.SelectorFromSet(rc.spec.selector).String()`, the selector defaulting to the
/// template's labels.
fn rc_selector_string(obj: &Value) -> Result<String, ProjectionError> {
    let set = match obj.pointer("/spec/selector") {
        Some(Value::Object(m)) if !m.is_empty() => Some(m),
        None | Some(Value::Null) | Some(Value::Object(_)) => None,
        Some(_) => return Err(bad(".spec.selector", "must be a map of labels")),
    };
    let set = match set.or_else(|| {
        obj.pointer("/spec/template/metadata/labels")
            .and_then(Value::as_object)
    }) {
        Some(m) => m,
        None => return Ok(String::new()),
    };
    let mut labels = BTreeMap::new();
    for (k, v) in set {
        let v = v
            .as_str()
            .ok_or_else(|| bad(".spec.selector", "must be a map of strings"))?;
        labels.insert(k.clone(), v.to_owned());
    }
    let ls = LabelSelector {
        match_labels: Some(labels),
        match_expressions: None,
    };
    Selector::from_label_selector(&ls)
        .map(|s| s.to_string())
        .map_err(|e| bad(".spec.selector", e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(name: &str, rv: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            uid: Some("u-1".into()),
            resource_version: Some(rv.into()),
            ..Default::default()
        }
    }

    #[test]
    fn deployment_scale_is_the_api_servers() {
        let data = json!({
            "spec": {"replicas": 2, "selector": {
                "matchLabels": {"tier": "fe", "app": "web"},
                "matchExpressions": [{"key": "env", "operator": "In", "values": ["prod", "dev"]}]}},
            "status": {"replicas": 3},
        });
        let p = ScaleProjection::project(&meta("web", "7"), &data, &ScaleSource::Apps).unwrap();
        let scale = p.to_scale("default");
        assert_eq!(
            serde_json::to_value(&scale).unwrap(),
            json!({
                "apiVersion": "autoscaling/v1", "kind": "Scale",
                "metadata": {"name": "web", "namespace": "default", "uid": "u-1", "resourceVersion": "7"},
                "spec": {"replicas": 2},
                "status": {"replicas": 3, "selector": "app=web,env in (dev,prod),tier=fe"},
            })
        );
    }

    #[test]
    fn defaults_and_zero() {
        // A built-in workload without spec.replicas has 1; zero is omitted from the Scale.
        let p = ScaleProjection::project(&meta("w", "1"), &json!({}), &ScaleSource::Apps).unwrap();
        assert_eq!((p.spec_replicas, p.status_replicas), (1, 0));
        let zero = json!({"spec": {"replicas": 0}});
        let p = ScaleProjection::project(&meta("w", "1"), &zero, &ScaleSource::Apps).unwrap();
        assert_eq!(p.to_scale("default").spec.unwrap().replicas, None);
    }

    #[test]
    fn replication_controller_selector() {
        let rc = json!({"spec": {"selector": {"b": "2", "a": "1"}}});
        let p =
            ScaleProjection::project(&meta("rc", "1"), &rc, &ScaleSource::ReplicationController)
                .unwrap();
        assert_eq!(p.selector, "a=1,b=2");
        let defaulted = json!({"spec": {"template": {"metadata": {"labels": {"app": "rc"}}}}});
        let p = ScaleProjection::project(
            &meta("rc", "1"),
            &defaulted,
            &ScaleSource::ReplicationController,
        )
        .unwrap();
        assert_eq!(p.selector, "app=rc");
    }

    #[test]
    fn custom_resource_through_crd_paths() {
        let crd = json!({"spec": {"versions": [{"name": "v1", "subresources": {"scale": {
            "specReplicasPath": ".spec.size", "statusReplicasPath": ".status.count",
            "labelSelectorPath": ".status.selector"}}}]}});
        let paths = crd_scale_paths(&crd, "v1").unwrap();
        assert!(crd_scale_paths(&crd, "v2").is_none());
        let w = json!({"spec": {"size": 5}, "status": {"count": 4, "selector": "app=w"}});
        let p = ScaleProjection::project(&meta("w", "3"), &w, &ScaleSource::Custom(paths.clone()))
            .unwrap();
        assert_eq!(
            (p.spec_replicas, p.status_replicas, p.selector.as_str()),
            (5, 4, "app=w")
        );
        // A path missing from the object is not read as 0 (the API server would, with the
        // CRD's current paths): the object's scale is read with a GET.
        for data in [
            json!({}),
            json!({"spec": {"size": 5}, "status": {"selector": "app=w"}}),
            json!({"spec": {"size": 5}, "status": {"count": 4}}),
            json!({"status": {"count": 4, "selector": "app=w"}}),
        ] {
            let e = ScaleProjection::project(
                &meta("w", "3"),
                &data,
                &ScaleSource::Custom(paths.clone()),
            )
            .unwrap_err();
            assert_eq!(e.message, "not set", "{data}");
        }
    }

    #[test]
    fn bad_fields_are_errors_not_panics() {
        for data in [
            json!({"spec": {"replicas": "two"}}),
            json!({"spec": 3}),
            json!({"spec": {"replicas": 5_000_000_000_i64}}),
            json!({"spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}}),
        ] {
            assert!(
                ScaleProjection::project(&meta("w", "1"), &data, &ScaleSource::Apps).is_err(),
                "{data}"
            );
        }
        assert!(
            ScaleProjection::project(
                &meta("rc", "1"),
                &json!({"spec": {"selector": {"a": 1}}}),
                &ScaleSource::ReplicationController
            )
            .is_err()
        );
    }

    #[test]
    fn builtins() {
        assert_eq!(
            builtin_source("apps", "deployments"),
            Some(ScaleSource::Apps)
        );
        assert_eq!(
            builtin_source("", "replicationcontrollers"),
            Some(ScaleSource::ReplicationController)
        );
        assert_eq!(builtin_source("example.com", "widgets"), None);
    }
}
