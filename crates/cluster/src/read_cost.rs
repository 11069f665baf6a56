//! `hpactl cluster read-cost --dir DIR`: what kube-apiserver spends serving this controller's
//! informer reads in JSON and in protobuf (issue 23 item 5), measured from `/proc` on a
//! populated cluster.
//!
//! No upstream counterpart. For each resource the controller caches in bulk (pods; Deployments,
//! the scale targets' cache) and each encoding, rounds alternate between the encodings so that
//! drift (garbage collection, the watch cache) lands on both: one round is a full list in pages
//! of 500, as an informer lists (`hpa-protobuf::list_all` for pods, the controller's own
//! decoding; the same pages undecoded for Deployments), and the apiserver's CPU over it. The
//! watch is measured the same way: `updates` pod label patches with one pod watcher open in
//! each encoding, and with none (rounds alternating), the difference being what the watch
//! cost.

use std::time::Instant;

use futures::StreamExt as _;
use http_body_util::BodyExt as _;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::watcher::Event;
use serde::Serialize;

use crate::control_plane::{Cluster, ClusterError};

/// What to measure.
#[derive(Debug, Clone)]
pub struct ReadCostConfig {
    /// Full lists per resource and encoding.
    pub lists: u32,
    /// Pod updates per watch measurement (0: no watch measurement); `lists` rounds of it.
    pub updates: u32,
}

/// One resource in one encoding.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ListCost {
    /// `pods` or `deployments`.
    pub resource: String,
    /// `json` or `protobuf`.
    pub encoding: String,
    /// Objects in one full list.
    pub objects: usize,
    /// Whether the server answered in the encoding asked for.
    pub answered_as_asked: bool,
    /// Bytes of one full list.
    pub bytes_per_list: u64,
    /// kube-apiserver CPU seconds per full list (the mean over the rounds).
    pub apiserver_cpu_s_per_list: f64,
    /// The median over the rounds (the apiserver's garbage collection lands on some rounds
    /// and not others).
    pub apiserver_cpu_s_median: f64,
    /// Each round's, in order.
    pub apiserver_cpu_s_rounds: Vec<f64>,
    /// Wall seconds per full list, this client's decoding included.
    pub wall_s_per_list: f64,
}

/// The pod watch in one encoding (means over the rounds).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct WatchCost {
    /// `none`, `json` or `protobuf`.
    pub watcher: String,
    /// Pod updates made.
    pub updates: u32,
    /// kube-apiserver CPU seconds from the first update to the watcher's last event (the mean
    /// over the rounds).
    pub apiserver_cpu_s: f64,
    /// The median over the rounds.
    pub apiserver_cpu_s_median: f64,
    /// Each round's, in order.
    pub apiserver_cpu_s_rounds: Vec<f64>,
}

/// The whole measurement.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ReadCostReport {
    /// The cluster's release.
    pub release: String,
    /// Lists per resource and encoding.
    pub lists: Vec<ListCost>,
    /// The watch: with no watcher, then one per encoding.
    pub watch: Vec<WatchCost>,
}

const ENCODINGS: [(&str, hpa_protobuf::Encoding); 2] = [
    ("json", hpa_protobuf::Encoding::Json),
    ("protobuf", hpa_protobuf::Encoding::Protobuf),
];

fn api_err(what: &str) -> impl Fn(kube::Error) -> ClusterError + '_ {
    move |source| ClusterError::Api {
        what: what.to_string(),
        source: Box::new(source),
    }
}

/// The continue token of a list page in either encoding.
fn continue_token(protobuf: bool, bytes: &[u8]) -> String {
    #[derive(Clone, PartialEq, prost::Message)]
    struct Head {
        #[prost(message, optional, tag = "1")]
        metadata: Option<k8s_pb::apimachinery::pkg::apis::meta::v1::ListMeta>,
    }
    #[derive(serde::Deserialize)]
    struct JsonHead {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta,
    }
    if protobuf {
        hpa_protobuf::envelope::open(bytes)
            .ok()
            .and_then(|(_, raw)| hpa_protobuf::envelope::message::<Head>("list", &raw).ok())
            .and_then(|h| h.metadata)
            .and_then(|m| m.r#continue)
            .unwrap_or_default()
    } else {
        serde_json::from_slice::<JsonHead>(bytes)
            .ok()
            .and_then(|h| h.metadata.continue_)
            .unwrap_or_default()
    }
}

/// A full paged list of `path`, undecoded: `(objects unknown, bytes, answered as asked)`.
async fn raw_list(
    client: &kube::Client,
    path: &str,
    protobuf: bool,
) -> Result<(u64, bool), ClusterError> {
    let accept = if protobuf {
        "application/vnd.kubernetes.protobuf, application/json"
    } else {
        "application/json"
    };
    let mut token = String::new();
    let mut bytes = 0u64;
    let mut as_asked = true;
    loop {
        let mut pairs = vec![("limit", "500")];
        if !token.is_empty() {
            pairs.push(("continue", token.as_str()));
        }
        let uri = format!("{path}{}", hpa_protobuf::watcher::query(&pairs));
        let req = http::Request::get(&uri)
            .header(http::header::ACCEPT, accept)
            .body(kube::client::Body::empty())
            .map_err(|e| api_err(&uri)(kube::Error::HttpError(e)))?;
        let res = client.send(req).await.map_err(api_err(&uri))?;
        let ct = res
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        as_asked &= ct.starts_with("application/vnd.kubernetes.protobuf") == protobuf;
        let body = res
            .into_body()
            .collect()
            .await
            .map_err(api_err(&uri))?
            .to_bytes();
        bytes += body.len() as u64;
        token = continue_token(ct.starts_with("application/vnd.kubernetes.protobuf"), &body);
        if token.is_empty() {
            return Ok((bytes, as_asked));
        }
    }
}

/// The median of `v` (0 when empty).
fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

impl Cluster {
    fn apiserver_cpu(&self) -> Result<f64, ClusterError> {
        Ok(self
            .component("kube-apiserver")?
            .and_then(|r| hpa_fixtures::bench::proc_usage(&r.pid.to_string()))
            .map_or(0.0, |u| u.0))
    }

    /// Measures the informer reads in both encodings (module docs).
    pub async fn read_cost(&self, config: &ReadCostConfig) -> Result<ReadCostReport, ClusterError> {
        let client = self.admin_client().await?;
        let deployments_objects =
            Api::<k8s_openapi::api::apps::v1::Deployment>::all(client.clone())
                .list_metadata(&ListParams::default())
                .await
                .map_err(api_err("listing deployments"))?
                .items
                .len();
        let mut sums: Vec<ListCost> = Vec::new();
        for resource in ["pods", "deployments"] {
            for (name, _) in ENCODINGS {
                sums.push(ListCost {
                    resource: resource.into(),
                    encoding: name.into(),
                    objects: 0,
                    answered_as_asked: true,
                    bytes_per_list: 0,
                    apiserver_cpu_s_per_list: 0.0,
                    apiserver_cpu_s_median: 0.0,
                    apiserver_cpu_s_rounds: Vec::new(),
                    wall_s_per_list: 0.0,
                });
            }
        }
        for _ in 0..config.lists {
            for cost in sums.iter_mut() {
                let protobuf = cost.encoding == "protobuf";
                let cpu0 = self.apiserver_cpu()?;
                let t0 = Instant::now();
                if cost.resource == "pods" {
                    let cfg = hpa_protobuf::Config {
                        encoding: if protobuf {
                            hpa_protobuf::Encoding::Protobuf
                        } else {
                            hpa_protobuf::Encoding::Json
                        },
                        ..Default::default()
                    };
                    let (pods, as_protobuf) = hpa_protobuf::list_all::<Pod>(&client, &cfg)
                        .await
                        .map_err(api_err("listing pods"))?;
                    cost.objects = pods.len();
                    cost.answered_as_asked &= as_protobuf == protobuf;
                } else {
                    let (bytes, as_asked) =
                        raw_list(&client, "/apis/apps/v1/deployments", protobuf).await?;
                    cost.bytes_per_list = bytes;
                    cost.objects = deployments_objects;
                    cost.answered_as_asked &= as_asked;
                }
                cost.wall_s_per_list += t0.elapsed().as_secs_f64();
                let cpu = self.apiserver_cpu()? - cpu0;
                cost.apiserver_cpu_s_per_list += cpu;
                cost.apiserver_cpu_s_rounds.push(cpu);
                if cost.resource == "pods" {
                    // The bytes of the same pages, undecoded (a second, unmeasured list).
                    let (bytes, _) = raw_list(&client, "/api/v1/pods", protobuf).await?;
                    cost.bytes_per_list = bytes;
                }
            }
        }
        let n = f64::from(config.lists.max(1));
        for c in &mut sums {
            c.apiserver_cpu_s_per_list /= n;
            c.apiserver_cpu_s_median = median(&c.apiserver_cpu_s_rounds);
            c.wall_s_per_list /= n;
        }
        // The watch: rounds alternate none, json, protobuf; the mean of each.
        let mut watch: Vec<WatchCost> = Vec::new();
        if config.updates > 0 {
            let rounds = config.lists.max(1);
            for _ in 0..rounds {
                for watcher in ["none", "json", "protobuf"] {
                    let w = self.watch_cost(&client, watcher, config.updates).await?;
                    match watch.iter_mut().find(|x| x.watcher == watcher) {
                        Some(x) => {
                            x.updates += w.updates;
                            x.apiserver_cpu_s += w.apiserver_cpu_s;
                            x.apiserver_cpu_s_rounds.push(w.apiserver_cpu_s);
                        }
                        None => watch.push(w),
                    }
                }
            }
            for w in &mut watch {
                w.updates /= rounds;
                w.apiserver_cpu_s /= f64::from(rounds);
                w.apiserver_cpu_s_median = median(&w.apiserver_cpu_s_rounds);
            }
        }
        Ok(ReadCostReport {
            release: self.state().release.to_string(),
            lists: sums,
            watch,
        })
    }

    async fn watch_cost(
        &self,
        client: &kube::Client,
        watcher: &str,
        updates: u32,
    ) -> Result<WatchCost, ClusterError> {
        let pods = Api::<Pod>::all(client.clone())
            .list_metadata(&ListParams::default().limit(updates))
            .await
            .map_err(api_err("listing pods"))?
            .items;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel::<()>();
        let task = match watcher {
            "none" => {
                drop(ready_tx);
                None
            }
            _ => {
                let cfg = hpa_protobuf::Config {
                    encoding: if watcher == "protobuf" {
                        hpa_protobuf::Encoding::Protobuf
                    } else {
                        hpa_protobuf::Encoding::Json
                    },
                    ..Default::default()
                };
                let client = client.clone();
                Some(tokio::spawn(async move {
                    let mut ready = Some(ready_tx);
                    let mut events = std::pin::pin!(hpa_protobuf::watcher::<Pod>(client, cfg));
                    while let Some(ev) = events.next().await {
                        match ev {
                            Ok(Event::InitDone) => {
                                if let Some(r) = ready.take() {
                                    let _ = r.send(());
                                }
                            }
                            Ok(Event::Apply(_)) if ready.is_none() => {
                                let _ = tx.send(());
                            }
                            _ => {}
                        }
                    }
                }))
            }
        };
        let _ = ready_rx.await;
        let stamp = uuid::Uuid::new_v4().simple().to_string();
        let cpu0 = self.apiserver_cpu()?;
        let mut writes = futures::stream::iter(pods.iter().map(|p| {
            let api = Api::<Pod>::namespaced(
                client.clone(),
                p.metadata.namespace.as_deref().unwrap_or("default"),
            );
            let name = p.metadata.name.clone().unwrap_or_default();
            let patch = serde_json::json!({"metadata": {"labels": {"read-cost": stamp.clone()}}});
            async move {
                api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map(|_| ())
            }
        }))
        .buffer_unordered(16);
        let mut made = 0u32;
        while let Some(r) = writes.next().await {
            r.map_err(api_err("patching a pod"))?;
            made += 1;
        }
        if let Some(task) = task {
            let mut seen = 0u32;
            let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
            while seen < made {
                match tokio::time::timeout_at(deadline, rx.recv()).await {
                    Ok(Some(())) => seen += 1,
                    _ => break,
                }
            }
            task.abort();
        }
        let cpu = self.apiserver_cpu()? - cpu0;
        Ok(WatchCost {
            watcher: watcher.into(),
            updates: made,
            apiserver_cpu_s: cpu,
            apiserver_cpu_s_median: cpu,
            apiserver_cpu_s_rounds: vec![cpu],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&[]), 0.0);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    #[test]
    fn continue_tokens_are_read_from_either_encoding() {
        let json =
            br#"{"kind":"PodList","metadata":{"resourceVersion":"5","continue":"abc"},"items":[]}"#;
        assert_eq!(continue_token(false, json), "abc");
        let list = k8s_pb::api::core::v1::PodList {
            metadata: Some(k8s_pb::apimachinery::pkg::apis::meta::v1::ListMeta {
                r#continue: Some("xyz".into()),
                ..Default::default()
            }),
            items: vec![],
        };
        let pb = hpa_protobuf::envelope::wrap("v1", "PodList", &list);
        assert_eq!(continue_token(true, &pb), "xyz");
        assert_eq!(continue_token(true, b"garbage"), "");
    }
}
