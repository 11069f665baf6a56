//! `hpactl cluster load SCENARIO`: a scenario's objects (`docs/scenario-format.md`, `objects`)
//! created in the real cluster, with the scenario's times moved to now.
//!
//! - Every RFC 3339 time in an object (outside labels and annotations) moves by
//!   `now - scenario.start`, so pods started "an hour before the scenario" started an hour ago.
//! - Metric objects (`PodMetrics`, `MetricValue`, `ExternalMetricValue`) go to the aggregated
//!   metrics server, with the pods whose labels select them, before any HPA exists.
//! - Everything else is created through the API, status through the `status` subresource
//!   (`crate::apply`), in an order a controller can follow: namespaces (and their `default`
//!   ServiceAccount, which the ServiceAccount admission plugin requires of a pod and no
//!   ServiceAccount controller creates here), CRDs (waited for until Established), scale
//!   targets, pods, then HPAs.
//! - Not loaded: the scenario's `steps` (a real cluster runs on its own clock; a test changes
//!   it through the API and [`Cluster::metrics_step`]), `apis` (the real discovery is served),
//!   `serverVersion` (the cluster's own version answers) and `metricsGroups` (a second provider
//!   is a process of its own, [`Cluster::add_metrics_provider`]).
//! - Owner references that name an object of the scenario by its `uid` are rewritten to the
//!   `uid` the server gave that object (owners are created first).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use hpa_fixtures::scenario::Scenario;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use serde_json::{Value, json};

use crate::apply::{Applier, describe};
use crate::control_plane::{Cluster, ClusterError};

/// What a load created.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct LoadReport {
    /// Objects created in the cluster, by kind.
    pub created: std::collections::BTreeMap<String, usize>,
    /// Metric objects (and pods) handed to the aggregated metrics server.
    pub metrics_objects: usize,
    /// How far the scenario's times moved, in seconds.
    pub shifted_seconds: i64,
}

const METRIC_KINDS: [&str; 3] = ["PodMetrics", "MetricValue", "ExternalMetricValue"];

fn kind(obj: &Value) -> &str {
    obj.get("kind").and_then(Value::as_str).unwrap_or("")
}

/// Moves every RFC 3339 time in `v` by `by` (labels and annotations are left alone).
pub fn shift_times(v: &mut Value, by: SignedDuration) {
    match v {
        Value::String(s) => {
            if s.len() >= 20
                && s.as_bytes().get(10) == Some(&b'T')
                && let Ok(t) = s.parse::<Timestamp>()
                && let Ok(moved) = t.checked_add(by)
            {
                *s = format_like(s, moved);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| shift_times(i, by)),
        Value::Object(map) => {
            for (k, item) in map.iter_mut() {
                if k != "labels" && k != "annotations" {
                    shift_times(item, by);
                }
            }
        }
        _ => {}
    }
}

/// `t` written with the precision of `original` (whole seconds stay whole seconds, as
/// `metav1.Time` writes them; `MicroTime` keeps its fraction).
fn format_like(original: &str, t: Timestamp) -> String {
    if original.contains('.') {
        format!("{t:.6}")
    } else {
        format!("{:.0}", t.round(jiff::Unit::Second).unwrap_or(t))
    }
}

/// Objects ordered for creation: CRDs, scale targets and the rest, pods, HPAs last.
fn has_owner_references(obj: &Value) -> bool {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|r| !r.is_empty())
}

fn creation_rank(obj: &Value) -> u8 {
    match kind(obj) {
        "Namespace" => 0,
        "CustomResourceDefinition" => 1,
        "Pod" => 3,
        "HorizontalPodAutoscaler" => 4,
        _ => 2,
    }
}

impl Cluster {
    /// Creates `scenario`'s objects in the cluster with the administrator's credentials and
    /// hands its metric objects to the aggregated metrics server.
    pub async fn load(&self, scenario: &Scenario) -> Result<LoadReport, ClusterError> {
        let now = Timestamp::now();
        let by = now.duration_since(scenario.start);
        let mut objects: Vec<Value> = scenario.objects.clone();
        for o in &mut objects {
            shift_times(o, by);
            // Namespaced objects left without a namespace are in `default`, as the format says.
            if kind(o) != "Namespace"
                && kind(o) != "CustomResourceDefinition"
                && o.pointer("/metadata/namespace").is_none()
                && let Some(md) = o.get_mut("metadata").and_then(Value::as_object_mut)
            {
                md.insert("namespace".into(), json!("default"));
            }
        }
        let mut report = LoadReport {
            shifted_seconds: by.as_secs(),
            ..LoadReport::default()
        };

        // Metrics first, with the pods that select them, so no HPA sees a pod without them.
        let handed: Vec<Value> = objects
            .iter()
            .filter(|o| METRIC_KINDS.contains(&kind(o)) || kind(o) == "Pod")
            .cloned()
            .collect();
        if !handed.is_empty() {
            report.metrics_objects = handed.len();
            self.metrics_step(&json!({ "apply": handed })).await?;
        }

        let client = self.admin_client().await?;
        let mut applier = Applier::new(client.clone());
        let mut cluster_objects: Vec<Value> = objects
            .into_iter()
            .filter(|o| !METRIC_KINDS.contains(&kind(o)))
            .collect();
        // Owners before the objects that name them (a Deployment before its ReplicaSet).
        cluster_objects.sort_by_key(|o| (creation_rank(o), has_owner_references(o)));

        let namespaces: BTreeSet<String> = cluster_objects
            .iter()
            .filter_map(|o| o.pointer("/metadata/namespace").and_then(Value::as_str))
            .map(str::to_string)
            .collect();
        let declared: BTreeSet<String> = cluster_objects
            .iter()
            .filter(|o| kind(o) == "Namespace")
            .filter_map(|o| o.pointer("/metadata/name").and_then(Value::as_str))
            .map(str::to_string)
            .collect();
        for ns in namespaces.union(&declared) {
            ensure_namespace(&mut applier, ns).await?;
        }

        let mut crds_created = false;
        // The server gives every object its own uid: the scenario's are mapped to them, and
        // the owner references that name a scenario's uid are rewritten to the server's
        // (the `OwnerReferences` pod selection strategy follows them by uid).
        let mut uids: BTreeMap<String, String> = BTreeMap::new();
        for mut obj in cluster_objects {
            let k = kind(&obj).to_string();
            if k == "Namespace" {
                // Created (with its ServiceAccount) above.
                *report.created.entry(k).or_default() += 1;
                continue;
            }
            if k != "CustomResourceDefinition" && crds_created {
                // New kinds are served only once their CRDs are Established.
                applier.forget_kinds();
                crds_created = false;
            }
            let name = obj
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            tracing::debug!(object = %describe(&obj), "creating");
            let scenario_uid = obj
                .pointer("/metadata/uid")
                .and_then(Value::as_str)
                .map(str::to_owned);
            if let Some(refs) = obj
                .pointer_mut("/metadata/ownerReferences")
                .and_then(Value::as_array_mut)
            {
                for r in refs {
                    if let Some(server) = r
                        .get("uid")
                        .and_then(Value::as_str)
                        .and_then(|u| uids.get(u))
                    {
                        r["uid"] = json!(server);
                    }
                }
            }
            let created = applier.apply(obj).await?;
            if let (Some(theirs), Some(ours)) = (
                scenario_uid,
                created.pointer("/metadata/uid").and_then(Value::as_str),
            ) {
                uids.insert(theirs, ours.to_owned());
            }
            if k == "CustomResourceDefinition" {
                wait_established(&client, &name).await?;
                crds_created = true;
            }
            *report.created.entry(k).or_default() += 1;
        }
        Ok(report)
    }
}

/// Creates namespace `ns` (if missing) and its `default` ServiceAccount.
pub(crate) async fn ensure_namespace(applier: &mut Applier, ns: &str) -> Result<(), ClusterError> {
    applier
        .apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
        .await?;
    applier
        .apply(json!({
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "default", "namespace": ns},
        }))
        .await?;
    Ok(())
}

/// Waits until a CRD is Established and discovery serves each of its served versions' kind.
/// Established alone is not enough: a CRD deleted and created again under the same name is
/// Established a moment before its group's discovery document lists the kind again (seen in
/// the scenario sweep: `404 page not found` for the kind right after Established).
pub async fn wait_established(client: &kube::Client, name: &str) -> Result<(), ClusterError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut last = "not Established".to_string();
    for _ in 0..120 {
        let crd = api.get(name).await.map_err(|source| ClusterError::Api {
            what: format!("reading CustomResourceDefinition {name}"),
            source: Box::new(source),
        })?;
        let established = crd
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            });
        if established {
            let mut served = true;
            for v in crd.spec.versions.iter().filter(|v| v.served) {
                let gvk = kube::core::GroupVersionKind::gvk(
                    &crd.spec.group,
                    &v.name,
                    &crd.spec.names.kind,
                );
                if let Err(e) = kube::discovery::pinned_kind(client, &gvk).await {
                    served = false;
                    last = format!(
                        "Established, but discovery does not serve {}/{} {} yet: {e}",
                        crd.spec.group, v.name, crd.spec.names.kind
                    );
                    break;
                }
            }
            if served {
                return Ok(());
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Err(ClusterError::NotReady {
        component: format!("CustomResourceDefinition {name}"),
        seconds: 30,
        reason: last,
        log: String::new(),
        tail: String::new(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn times_move_and_keep_their_precision() {
        let mut v = json!({
            "metadata": {"name": "p", "labels": {"t": "2024-12-31T23:00:00Z"},
                         "creationTimestamp": "2024-12-31T23:00:00Z"},
            "status": {"startTime": "2024-12-31T23:00:00Z",
                       "conditions": [{"lastTransitionTime": "2024-12-31T23:00:30Z"}]},
            "timestamp": "2024-12-31T23:59:45.123456Z",
            "window": "30s",
            "value": "2024",
        });
        shift_times(&mut v, SignedDuration::from_hours(24));
        assert_eq!(v["status"]["startTime"], "2025-01-01T23:00:00Z");
        assert_eq!(
            v["status"]["conditions"][0]["lastTransitionTime"],
            "2025-01-01T23:00:30Z"
        );
        assert_eq!(v["timestamp"], "2025-01-01T23:59:45.123456Z");
        assert_eq!(v["metadata"]["labels"]["t"], "2024-12-31T23:00:00Z");
        assert_eq!(v["window"], "30s");
        assert_eq!(v["value"], "2024");
    }

    #[test]
    fn hpas_come_last_and_crds_first() {
        let mut objs = [
            json!({"kind": "HorizontalPodAutoscaler"}),
            json!({"kind": "Pod"}),
            json!({"kind": "Deployment"}),
            json!({"kind": "CustomResourceDefinition"}),
        ];
        objs.sort_by_key(creation_rank);
        let kinds: Vec<&str> = objs.iter().map(kind).collect();
        assert_eq!(
            kinds,
            [
                "CustomResourceDefinition",
                "Deployment",
                "Pod",
                "HorizontalPodAutoscaler"
            ]
        );
    }
}
