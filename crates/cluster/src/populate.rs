//! `hpactl cluster populate`: many HPAs, their Deployments and pods created in the real cluster
//! at once, and the pods' metrics in the aggregated server, for the benches beside
//! kube-controller-manager (issue 23).
//!
//! The objects are `hpactl generate`'s ([`hpa_fixtures::generate()`]), the same cluster the
//! fixture-server benches use; they are created as [`Cluster::load`] creates a scenario's
//! (status through the status subresource, times moved to now), but many requests at a time:
//! namespaces (with their `default` ServiceAccount) first, then every Deployment, every pod
//! and every HPA, each phase `concurrency` requests wide. Metric objects (and the pods that
//! select them) go to the aggregated server first, in chunks, so no HPA sees a pod without its
//! metrics. Objects that already exist are replaced, so a second populate of the same shape is
//! harmless. Pods are created without a ServiceAccount token volume
//! (`automountServiceAccountToken: false`, unless the scenario sets it): no kubelet mounts it,
//! and leaving it out makes each pod cheaper for the apiserver to admit and store.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt, TryStreamExt};
use hpa_fixtures::scenario::Scenario;
use jiff::Timestamp;
use serde_json::{Value, json};

use crate::apply::Applier;
use crate::control_plane::{Cluster, ClusterError};
use crate::load::{ensure_namespace, shift_times};

/// What a populate created, and how long it took.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct PopulateReport {
    /// Objects created in the cluster, by kind.
    pub created: BTreeMap<String, usize>,
    /// Metric objects (and pods) handed to the aggregated metrics server.
    pub metrics_objects: usize,
    /// Seconds spent handing metrics to the aggregated server.
    pub metrics_s: f64,
    /// Seconds spent creating objects in the cluster, by kind.
    pub create_s: BTreeMap<String, f64>,
    /// Seconds in all.
    pub total_s: f64,
}

/// Metric objects handed to the aggregated server per request.
const METRICS_CHUNK: usize = 5_000;

const METRIC_KINDS: [&str; 3] = ["PodMetrics", "MetricValue", "ExternalMetricValue"];

fn kind(obj: &Value) -> &str {
    obj.get("kind").and_then(Value::as_str).unwrap_or("")
}

/// The phases of a populate, in order: kinds created before the next phase starts.
const PHASES: [&[&str]; 3] = [
    &[
        "Deployment",
        "StatefulSet",
        "ReplicaSet",
        "ReplicationController",
    ],
    &["Pod"],
    &["HorizontalPodAutoscaler"],
];

impl Cluster {
    /// Creates `scenario`'s objects (a generated cluster: no CRDs) with `concurrency` requests
    /// in flight, and hands its metric objects to the aggregated server. `progress` is called
    /// after each phase with the kind and how many were created.
    pub async fn populate(
        &self,
        scenario: &Scenario,
        concurrency: usize,
        progress: impl Fn(&str, usize, Duration),
    ) -> Result<PopulateReport, ClusterError> {
        let started = Instant::now();
        let concurrency = concurrency.max(1);
        let by = Timestamp::now().duration_since(scenario.start);
        let mut objects: Vec<Value> = scenario.objects.clone();
        for o in &mut objects {
            shift_times(o, by);
            // No kubelet runs the pods: without a ServiceAccount token volume to add, admission
            // and storage do less per pod (the HPA reads none of it).
            if kind(o) == "Pod"
                && let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut)
            {
                spec.entry("automountServiceAccountToken")
                    .or_insert(Value::Bool(false));
            }
        }
        if let Some(o) = objects
            .iter()
            .find(|o| kind(o) == "CustomResourceDefinition")
        {
            return Err(ClusterError::Api {
                what: crate::apply::describe(o),
                source: Box::new(kube::Error::Service(
                    "populate creates generated clusters, which have no CRDs; use `cluster load`"
                        .into(),
                )),
            });
        }
        let mut report = PopulateReport::default();

        let handed: Vec<Value> = objects
            .iter()
            .filter(|o| METRIC_KINDS.contains(&kind(o)) || kind(o) == "Pod")
            .cloned()
            .collect();
        let t = Instant::now();
        for chunk in handed.chunks(METRICS_CHUNK) {
            self.metrics_step(&json!({ "apply": chunk })).await?;
        }
        report.metrics_objects = handed.len();
        report.metrics_s = t.elapsed().as_secs_f64();
        progress("metrics", handed.len(), t.elapsed());
        drop(handed);

        let client = self.admin_client().await?;
        let mut applier = Applier::new(client);
        let namespaces: BTreeSet<String> = objects
            .iter()
            .filter_map(|o| o.pointer("/metadata/namespace").and_then(Value::as_str))
            .map(str::to_string)
            .collect();
        let t = Instant::now();
        for ns in &namespaces {
            ensure_namespace(&mut applier, ns).await?;
        }
        report.created.insert("Namespace".into(), namespaces.len());
        report
            .create_s
            .insert("Namespace".into(), t.elapsed().as_secs_f64());
        progress("Namespace", namespaces.len(), t.elapsed());

        for phase in PHASES {
            let mut batch: Vec<Value> = objects
                .iter()
                .filter(|o| phase.contains(&kind(o)))
                .cloned()
                .collect();
            if batch.is_empty() {
                continue;
            }
            let t = Instant::now();
            // The first of each kind resolves the kind (discovery) in the shared applier; the
            // clones the concurrent requests use start with it resolved.
            let mut firsts = BTreeSet::new();
            let mut rest = Vec::with_capacity(batch.len());
            for obj in batch.drain(..) {
                if firsts.insert(kind(&obj).to_string()) {
                    applier.apply(obj.clone()).await?;
                    *report.created.entry(kind(&obj).to_string()).or_default() += 1;
                } else {
                    rest.push(obj);
                }
            }
            let counts: Vec<String> = stream::iter(rest.into_iter().map(|obj| {
                let mut applier = applier.clone();
                async move {
                    let k = kind(&obj).to_string();
                    applier.apply(obj).await.map(|_| k)
                }
            }))
            .buffer_unordered(concurrency)
            .try_collect()
            .await?;
            for k in counts {
                *report.created.entry(k).or_default() += 1;
            }
            let name = phase[0].to_string();
            let n: usize = phase
                .iter()
                .map(|k| report.created.get(*k).copied().unwrap_or(0))
                .sum();
            report
                .create_s
                .insert(name.clone(), t.elapsed().as_secs_f64());
            progress(&name, n, t.elapsed());
        }
        report.total_s = started.elapsed().as_secs_f64();
        Ok(report)
    }
}
