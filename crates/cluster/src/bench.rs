//! `hpactl bench --dir DIR --controller kcm|self`: one HPA controller against a populated real
//! cluster (`hpactl cluster populate`), measured from the outside, so that this controller and
//! upstream's kube-controller-manager are compared on the same cluster state (issue 23).
//!
//! No upstream counterpart. One controller runs at a time (two would both act). It starts,
//! runs for a warm-up (its first pass writes every HPA's status), then for the measured
//! window; every figure is a difference across that window:
//!
//! - **Requests**: the kube-apiserver's own `apiserver_request_total` by verb, resource and
//!   subresource, plus the aggregated metrics server's `requests_total` (the aggregator's
//!   proxied requests are not in the apiserver's counter). Only one controller runs, so the
//!   difference is its requests plus the cluster's own background (the apiserver's loopback
//!   traffic and the aggregator's availability checks, this bench's scrapes); that background
//!   is measured over a quiet window before the controller starts and subtracted, scaled to
//!   the window's length.
//! - **Reconciles**: `horizontal_pod_autoscaler_controller_reconciliations_total` from the
//!   controller's own `/metrics` (both controllers export it), per HPA per sync period.
//! - **CPU and memory**: user + system CPU seconds of the controller, of kube-apiserver and of
//!   etcd (`/proc/PID/stat`), and the controller's peak RSS over its whole run (`VmHWM`; each
//!   run starts a fresh controller process).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use hpa_fixtures::bench::{flag_value, proc_usage, request_key};
use hpa_fixtures::scrape::samples;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use serde::Serialize;

use crate::control_plane::{Cluster, ClusterError, free_ports};
use crate::process::{self, ProcessRecord};

/// This controller's component name in the cluster directory when the bench runs it.
pub const SELF: &str = "kube-hpa-controller";

/// The counter both controllers export, one sample per reconcile.
const RECONCILES: &str = "horizontal_pod_autoscaler_controller_reconciliations_total";

/// Paths both controllers serve without authorization during a bench.
const ALWAYS_ALLOW: &str = "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics";

/// Which controller runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Controller {
    /// Upstream's kube-controller-manager of the cluster's release, HPA controller only.
    Kcm,
    /// This controller's binary at the path.
    SelfBinary(PathBuf),
}

/// A real-cluster bench.
#[derive(Debug, Clone)]
pub struct RealBenchConfig {
    /// The controller.
    pub controller: Controller,
    /// Flags added to the controller's command line.
    pub flags: Vec<String>,
    /// How long the controller runs, once ready, before the measurement starts (its first pass
    /// writes every HPA's status; a warm-up leaves the steady state to be measured).
    pub warmup: Duration,
    /// How long the measurement lasts.
    pub duration: Duration,
    /// The quiet window before the controller starts, measuring the cluster's own requests.
    pub baseline: Duration,
    /// Where to write a CPU profile of kube-apiserver taken over the measured window (its
    /// `/debug/pprof/profile`, gzipped protobuf, for `go tool pprof`); none when `None`.
    pub apiserver_profile: Option<PathBuf>,
    /// How many replicas of this controller run at once (1: one, without leader election).
    /// More than one run with `--leader-elect=true` (unless `flags` say otherwise), each its
    /// own process and serving port, as a Deployment's replicas do; with `--shards=N` in
    /// `flags` the bench first grants what sharding needs beyond `config/rbac.yaml`
    /// ([`shard_rbac`]). Reconciles and CPU are summed over the replicas, the peak RSS is the
    /// largest; [`RealBenchReport::replicas`] has each. Upstream's controller runs alone.
    pub replicas: usize,
}

/// One replica's share of a run ([`RealBenchReport::replicas`]).
#[derive(Debug, Clone, Serialize)]
pub struct ReplicaUsage {
    /// Its component name in the cluster directory (its log is `NAME.log` there).
    pub name: String,
    /// Its reconciles in the window (`None` when its `/metrics` could not be read).
    pub reconciles: Option<u64>,
    /// Its CPU seconds in the window.
    pub cpu_s: f64,
    /// Its peak resident memory, MiB.
    pub peak_rss_mib: f64,
}

/// What a real-cluster bench measured (`hpactl bench --dir --json`); the keys shared with the
/// fixture-server bench mean the same.
#[derive(Debug, Clone, Serialize)]
pub struct RealBenchReport {
    /// `kcm` or `self`.
    pub controller: String,
    /// The cluster's release.
    pub release: String,
    /// HPAs in the cluster.
    pub hpas: usize,
    /// Pods in the cluster.
    pub pods: usize,
    /// The sync period the controller was given (15 s unless the flags set it).
    pub sync_period_s: f64,
    /// Seconds the controller ran before the measurement.
    pub warmup_s: f64,
    /// How long the measurement lasted.
    pub duration_s: f64,
    /// Reconciles in the window, as the controller counted them (0 when unread).
    pub reconciles: u64,
    /// Reconciles the controller counted (`horizontal_pod_autoscaler_controller_reconciliations_total`).
    pub reconciles_from_metrics: Option<u64>,
    /// Reconciles per HPA per sync period: 1.0 is every HPA every period.
    pub reconciles_per_hpa_per_sync: Option<f64>,
    /// Requests per HPA per sync period, by `verb resource` and `total`, as the apiserver
    /// counted them, background subtracted.
    pub requests_per_hpa_per_sync: BTreeMap<String, f64>,
    /// What `requests_per_hpa_per_sync` divides by.
    pub per_sync_basis: String,
    /// Requests during the run by the same keys, background subtracted (rounded, never
    /// below 0).
    pub requests: BTreeMap<String, u64>,
    /// The background subtracted, requests per second by key.
    pub background_per_s: BTreeMap<String, f64>,
    /// CPU seconds of the controller (as `cpu_s` in the fixture bench).
    pub cpu_s: f64,
    /// `cpu_s` per reconcile.
    pub cpu_s_per_reconcile: Option<f64>,
    /// CPU seconds of the aggregated metrics server during the window (the fixture bench's
    /// server).
    pub server_cpu_s: f64,
    /// Upstream's cost model for the same cluster: one scale GET plus one metrics call per
    /// metric, per HPA per sync.
    pub upstream_requests_per_hpa_per_sync: f64,
    /// The same figure under the name the comparison table uses.
    pub controller_cpu_s: f64,
    /// Peak resident memory of the controller, MiB.
    pub peak_rss_mib: f64,
    /// CPU seconds of kube-apiserver during the run.
    pub apiserver_cpu_s: f64,
    /// CPU seconds of etcd during the run.
    pub etcd_cpu_s: f64,
    /// kube-apiserver's CPU seconds per second in the quiet window before the controller
    /// started: what it spends with no controller (its own loops, garbage collection).
    pub apiserver_idle_cpu_s_per_s: f64,
    /// etcd's CPU seconds per second in the quiet window.
    pub etcd_idle_cpu_s_per_s: f64,
    /// The apiserver's own watch-cache consistency checks completed in the measured window,
    /// by resource ([`consistency_checks`]): a check of a large resource inflates
    /// `apiserver_cpu_s` and `etcd_cpu_s` whichever controller runs.
    pub apiserver_consistency_checks: BTreeMap<String, u64>,
    /// Seconds from start until the controller was ready (`/healthz` ok; every replica's).
    pub startup_s: f64,
    /// Each replica of this controller (one entry for a single controller).
    pub replicas: Vec<ReplicaUsage>,
}

/// What `--shards=shards` needs beyond `config/rbac.yaml`, as the chart grants it to the
/// ServiceAccount `kube-system/kube-hpa-controller` for the default Lease
/// `kube-system/kube-hpa-controller`: `list` and `delete` of Leases in the Lease namespace, and
/// `get` and `update` of the shards' history ConfigMaps (16 per shard).
pub fn shard_rbac(shards: usize) -> Vec<serde_json::Value> {
    let names: Vec<String> = (0..shards)
        .flat_map(|s| (0..16).map(move |b| format!("{SELF}-shard-{s}-history-{b}")))
        .collect();
    let meta =
        serde_json::json!({"name": "kube-hpa-controller-shards", "namespace": "kube-system"});
    vec![
        serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta,
            "rules": [
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                 "verbs": ["list", "delete"]},
                {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": names,
                 "verbs": ["get", "update"]},
            ],
        }),
        serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                        "name": "kube-hpa-controller-shards"},
            "subjects": [{"kind": "ServiceAccount", "name": "kube-hpa-controller",
                          "namespace": "kube-system"}],
        }),
    ]
}

/// The aggregated metrics server's `requests_total` by report key (`list pods.metrics.k8s.io`,
/// discovery as `get discovery`): the requests the aggregator proxied to it, which the
/// apiserver's `apiserver_request_total` does not count.
pub fn metrics_server_requests(text: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for (labels, value) in samples(text, "requests_total") {
        let get = |k: &str| labels.get(k).map_or("", String::as_str);
        let key = request_key(get("verb"), get("group"), get("resource"));
        *out.entry(key).or_insert(0.0) += value;
    }
    out
}

/// `apiserver_request_total` by report key (`verb resource`), from Prometheus text.
pub fn apiserver_requests(text: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for (labels, value) in samples(text, "apiserver_request_total") {
        let get = |k: &str| labels.get(k).map_or("", String::as_str);
        let resource = match (get("resource"), get("subresource")) {
            ("", _) => continue, // non-resource requests (/metrics, /healthz, discovery)
            (r, "") => r.to_string(),
            (r, s) => format!("{r}/{s}"),
        };
        let key = request_key(&get("verb").to_ascii_lowercase(), get("group"), &resource);
        *out.entry(key).or_insert(0.0) += value;
    }
    out
}

/// `apiserver_storage_consistency_checks_total` by resource (`pods`, `deployments.apps`): the
/// apiserver's own periodic re-reads of each resource from etcd, compared with its watch
/// cache (the `DetectCacheInconsistency` feature, once every 5 to 7.5 minutes per resource).
/// Neither controller's doing, but its CPU lands in whatever window it falls in: at 100,000
/// pods one check of `pods` costs kube-apiserver about 5 s and etcd the LIST.
pub fn consistency_checks(text: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for (labels, value) in samples(text, "apiserver_storage_consistency_checks_total") {
        let get = |k: &str| labels.get(k).map_or("", String::as_str);
        let key = match get("group") {
            "" => get("resource").to_string(),
            group => format!("{}.{group}", get("resource")),
        };
        *out.entry(key).or_insert(0.0) += value;
    }
    out
}

/// What one scrape counted.
struct Counters {
    /// Requests by report key (the apiserver's and the metrics server's).
    requests: BTreeMap<String, f64>,
    /// Consistency checks by resource ([`consistency_checks`]).
    consistency_checks: BTreeMap<String, f64>,
}

/// `after - before` by key, only the keys that grew.
fn grown(before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>) -> BTreeMap<String, u64> {
    after
        .iter()
        .filter_map(|(k, v)| {
            let n = (v - before.get(k).copied().unwrap_or(0.0)).round();
            (n > 0.0).then(|| (k.clone(), n as u64))
        })
        .collect()
}

fn cpu_of(record: Option<&ProcessRecord>) -> f64 {
    record
        .and_then(|r| proc_usage(&r.pid.to_string()))
        .map_or(0.0, |u| u.0)
}

impl Cluster {
    /// A client of a controller's serving port on loopback, with the administrator's
    /// credentials (its self-signed certificate is not verified: loopback, and only for
    /// `/healthz` and `/metrics`).
    pub(crate) async fn serving_client(&self, port: u16) -> Result<kube::Client, ClusterError> {
        let path = self.admin_kubeconfig();
        let err = |message: String| ClusterError::Kubeconfig {
            path: path.clone(),
            message,
        };
        let kc = kube::config::Kubeconfig::read_from(&path).map_err(|e| err(e.to_string()))?;
        let mut config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .map_err(|e| err(e.to_string()))?;
        config.cluster_url = format!("https://127.0.0.1:{port}")
            .parse()
            .map_err(|e: http::uri::InvalidUri| err(e.to_string()))?;
        config.accept_invalid_certs = true;
        config.root_cert = None;
        kube::Client::try_from(config).map_err(|e| err(e.to_string()))
    }

    async fn get_text(client: &kube::Client, path: &str) -> Result<String, ClusterError> {
        let req = http::Request::get(path)
            .body(Vec::new())
            .map_err(|e| ClusterError::Api {
                what: format!("GET {path}"),
                source: Box::new(kube::Error::Service(e.into())),
            })?;
        client
            .request_text(req)
            .await
            .map_err(|source| ClusterError::Api {
                what: format!("GET {path}"),
                source: Box::new(source),
            })
    }

    /// A CPU profile of kube-apiserver over `duration` (`/debug/pprof/profile`, which the
    /// apiserver serves to its administrator while `--profiling` is on, its default), written
    /// to `path` as the apiserver sent it.
    async fn apiserver_profile(
        &self,
        admin: &kube::Client,
        duration: Duration,
        path: &std::path::Path,
    ) -> Result<(), ClusterError> {
        use http_body_util::BodyExt as _;
        let uri = format!("/debug/pprof/profile?seconds={}", duration.as_secs().max(1));
        let api_err = |source: kube::Error| ClusterError::Api {
            what: format!("GET {uri}"),
            source: Box::new(source),
        };
        let req = http::Request::get(uri.as_str())
            .body(kube::client::Body::empty())
            .map_err(|e| api_err(kube::Error::Service(e.into())))?;
        let res = admin.send(req).await.map_err(api_err)?;
        let status = res.status();
        let body = res
            .into_body()
            .collect()
            .await
            .map_err(|e| api_err(kube::Error::Service(e.into())))?
            .to_bytes();
        if !status.is_success() {
            return Err(api_err(kube::Error::Service(
                format!("{status}: {}", String::from_utf8_lossy(&body)).into(),
            )));
        }
        std::fs::write(path, &body).map_err(|source| ClusterError::File {
            path: path.to_path_buf(),
            source,
        })
    }

    /// The apiserver's and the aggregated metrics server's request counters by report key,
    /// and the apiserver's consistency checks by resource.
    async fn request_counts(&self, admin: &kube::Client) -> Result<Counters, ClusterError> {
        let text = Self::get_text(admin, "/metrics").await?;
        let mut requests = apiserver_requests(&text);
        for (k, v) in metrics_server_requests(&self.metrics_server_counters().await?) {
            *requests.entry(k).or_insert(0.0) += v;
        }
        Ok(Counters {
            requests,
            consistency_checks: consistency_checks(&text),
        })
    }

    /// The reconciles a controller counted so far (0 before its first: a counter with labels
    /// has no sample until then; `None`, logged, when its `/metrics` could not be read).
    pub(crate) async fn reconciles(&self, serving: &kube::Client) -> Option<u64> {
        match Self::get_text(serving, "/metrics").await {
            Ok(text) => {
                Some(hpa_fixtures::scrape::counter_sum(&text, RECONCILES).map_or(0, |n| n as u64))
            }
            Err(e) => {
                tracing::warn!(error = %e, "the controller's /metrics could not be read");
                None
            }
        }
    }

    /// Starts this controller's binary as component `name`, serving on `port`, with
    /// `--leader-elect=LEADER_ELECT` unless `flags` set it, and waits for its `/healthz`.
    pub(crate) async fn start_self(
        &self,
        name: &str,
        binary: &std::path::Path,
        port: u16,
        flags: &[String],
        leader_elect: bool,
    ) -> Result<ProcessRecord, ClusterError> {
        self.stop_component(name, Duration::from_secs(10))?;
        let mut args = vec![format!(
            "--kubeconfig={}",
            self.controller_kubeconfig().display()
        )];
        if flag_value(flags, "leader-elect").is_none() {
            args.push(format!("--leader-elect={leader_elect}"));
        }
        args.extend([
            "--bind-address=127.0.0.1".to_string(),
            format!("--secure-port={port}"),
            format!(
                "--cert-dir={}",
                self.dir().join(format!("{name}-certs")).display()
            ),
            ALWAYS_ALLOW.to_string(),
            "--v=2".to_string(),
        ]);
        args.extend(flags.iter().cloned());
        let record = process::spawn(self.dir(), name, binary, &args, &[])?;
        let client = self.serving_client(port).await?;
        self.wait_until_ready(&record, || {
            let client = client.clone();
            async move {
                match Self::get_text(&client, "/healthz").await {
                    Ok(t) if t.trim() == "ok" => Ok(()),
                    Ok(t) => Err(format!("GET /healthz: {t}")),
                    Err(e) => Err(e.to_string()),
                }
            }
        })
        .await?;
        Ok(record)
    }

    /// Runs one controller against the cluster as it stands and measures it.
    pub async fn bench(&self, config: &RealBenchConfig) -> Result<RealBenchReport, ClusterError> {
        let admin = self.admin_client().await?;
        let list_err = |what: &str| {
            let what = what.to_string();
            move |source| ClusterError::Api {
                what: what.clone(),
                source: Box::new(source),
            }
        };
        let hpa_list = Api::<HorizontalPodAutoscaler>::all(admin.clone())
            .list(&ListParams::default())
            .await
            .map_err(list_err("listing HPAs"))?
            .items;
        let hpas = hpa_list.len();
        let metrics_total: usize = hpa_list
            .iter()
            .map(|h| h.spec.metrics.as_ref().map_or(0, Vec::len))
            .sum();
        drop(hpa_list);
        let pods = Api::<Pod>::all(admin.clone())
            .list_metadata(&ListParams::default())
            .await
            .map_err(list_err("listing pods"))?
            .items
            .len();
        let sync_period_s = flag_value(&config.flags, "horizontal-pod-autoscaler-sync-period")
            .and_then(|v| v.parse::<hpa_config::GoDuration>().ok())
            .map_or(15.0, |d| d.to_std().as_secs_f64());

        // The cluster's own requests, with no controller running.
        self.stop_kcm()?;
        self.stop_component(SELF, Duration::from_secs(10))?;
        let apiserver = self.component("kube-apiserver")?;
        let etcd = self.component("etcd")?;
        let metrics_server = self.component("metrics-server")?;
        let quiet_start = self.request_counts(&admin).await?;
        let quiet_cpu = (cpu_of(apiserver.as_ref()), cpu_of(etcd.as_ref()));
        let quiet = Instant::now();
        tokio::time::sleep(config.baseline).await;
        let quiet_end = self.request_counts(&admin).await?;
        let quiet_s = quiet.elapsed().as_secs_f64();
        let apiserver_idle_cpu_s_per_s = (cpu_of(apiserver.as_ref()) - quiet_cpu.0) / quiet_s;
        let etcd_idle_cpu_s_per_s = (cpu_of(etcd.as_ref()) - quiet_cpu.1) / quiet_s;
        let background_per_s: BTreeMap<String, f64> = quiet_end
            .requests
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    (v - quiet_start.requests.get(k).copied().unwrap_or(0.0)) / quiet_s,
                )
            })
            .filter(|(_, v)| *v > 0.0)
            .collect();

        let replicas = config.replicas.max(1);
        if replicas > 1 {
            if matches!(config.controller, Controller::Kcm) {
                return Err(ClusterError::Bench {
                    message: "upstream's kube-controller-manager runs alone: --replicas is for \
                              this controller"
                        .into(),
                });
            }
            let shards = flag_value(&config.flags, "shards").and_then(|v| v.parse::<usize>().ok());
            if let Some(shards) = shards.filter(|n| *n > 1) {
                let mut applier = crate::apply::Applier::new(admin.clone());
                for obj in shard_rbac(shards) {
                    applier.apply(obj).await?;
                }
            }
        }

        let started = Instant::now();
        // (component name, process, serving port) of each controller process.
        let mut running: Vec<(String, ProcessRecord, u16)> = Vec::new();
        let name = match &config.controller {
            Controller::Kcm => "kcm",
            Controller::SelfBinary(_) => "self",
        };
        let starting = async {
            match &config.controller {
                Controller::Kcm => {
                    let mut flags = vec![ALWAYS_ALLOW.to_string()];
                    flags.extend(config.flags.iter().cloned());
                    let record = self.start_kcm(&flags).await?;
                    let port = self.state().ports.controller_manager;
                    running.push((crate::kcm::KCM.to_string(), record, port));
                }
                Controller::SelfBinary(path) => {
                    for i in 0..replicas {
                        let component = if replicas == 1 {
                            SELF.to_string()
                        } else {
                            format!("{SELF}-{i}")
                        };
                        let [port] = free_ports::<1>()?;
                        let record = self
                            .start_self(&component, path, port, &config.flags, replicas > 1)
                            .await?;
                        running.push((component, record, port));
                    }
                }
            }
            Ok::<_, ClusterError>(())
        }
        .await;
        let stop_all = |running: &[(String, ProcessRecord, u16)]| -> Result<(), ClusterError> {
            for (component, _, _) in running {
                self.stop_component(component, Duration::from_secs(10))?;
            }
            Ok(())
        };
        if let Err(e) = starting {
            stop_all(&running)?;
            return Err(e);
        }
        let startup_s = started.elapsed().as_secs_f64();
        let measured = async {
            let mut serving = Vec::new();
            for (_, _, port) in &running {
                serving.push(self.serving_client(*port).await?);
            }
            tokio::time::sleep(config.warmup).await;
            let warmup_s = started.elapsed().as_secs_f64() - startup_s;
            let mut reconciles_before = Vec::new();
            for client in &serving {
                reconciles_before.push(self.reconciles(client).await);
            }
            let before = self.request_counts(&admin).await?;
            let controller_before: Vec<f64> =
                running.iter().map(|(_, r, _)| cpu_of(Some(r))).collect();
            let apiserver_before = cpu_of(apiserver.as_ref());
            let etcd_before = cpu_of(etcd.as_ref());
            let server_before = cpu_of(metrics_server.as_ref());
            let measuring = Instant::now();
            match &config.apiserver_profile {
                Some(path) => {
                    let (_, profile) = tokio::join!(
                        tokio::time::sleep(config.duration),
                        self.apiserver_profile(&admin, config.duration, path)
                    );
                    profile?;
                }
                None => tokio::time::sleep(config.duration).await,
            }
            let mut usage = Vec::new();
            for (i, ((component, record, _), client)) in running.iter().zip(&serving).enumerate() {
                let after = self.reconciles(client).await;
                let (cpu_after, hwm_kib) = proc_usage(&record.pid.to_string()).unwrap_or((0.0, 0));
                usage.push(ReplicaUsage {
                    name: component.clone(),
                    reconciles: match (reconciles_before[i], after) {
                        (Some(b), Some(a)) => Some(a.saturating_sub(b)),
                        _ => None,
                    },
                    cpu_s: cpu_after - controller_before[i],
                    peak_rss_mib: hwm_kib as f64 / 1024.0,
                });
            }
            let after = self.request_counts(&admin).await?;
            let apiserver_cpu_s = cpu_of(apiserver.as_ref()) - apiserver_before;
            let etcd_cpu_s = cpu_of(etcd.as_ref()) - etcd_before;
            let server_cpu_s = cpu_of(metrics_server.as_ref()) - server_before;
            let duration_s = measuring.elapsed().as_secs_f64();
            Ok::<_, ClusterError>((
                warmup_s,
                duration_s,
                before,
                after,
                usage,
                apiserver_cpu_s,
                etcd_cpu_s,
                server_cpu_s,
            ))
        }
        .await;
        stop_all(&running)?;
        let (warmup_s, duration_s, before, after, usage, apiserver_cpu_s, etcd_cpu_s, server_cpu_s) =
            measured?;
        // Summed over the replicas; unknown when one could not be read.
        let reconciles: Option<u64> = usage.iter().map(|u| u.reconciles).sum();
        let controller_cpu_s: f64 = usage.iter().map(|u| u.cpu_s).sum();
        let peak_rss_mib = usage.iter().map(|u| u.peak_rss_mib).fold(0.0, f64::max);
        let run_s = duration_s;

        let apiserver_consistency_checks =
            grown(&before.consistency_checks, &after.consistency_checks);
        let (before, after) = (before.requests, after.requests);
        let mut requests = BTreeMap::new();
        for (k, v) in &after {
            let delta = v
                - before.get(k).copied().unwrap_or(0.0)
                - background_per_s.get(k).copied().unwrap_or(0.0) * run_s;
            let n = delta.round().max(0.0) as u64;
            if n > 0 {
                requests.insert(k.clone(), n);
            }
        }
        // Per HPA per sync: over what the controller counted when it could be read; else
        // every HPA once per period of the run.
        let periods = duration_s / sync_period_s;
        let (basis, syncs) = match reconciles.filter(|n| *n > 0) {
            Some(n) => ("reconciles (controller metrics)", n as f64),
            None => (
                "nominal syncs (HPAs × duration / sync period)",
                hpas as f64 * periods.max(1.0),
            ),
        };
        let per = |n: u64| if syncs > 0.0 { n as f64 / syncs } else { 0.0 };
        let mut per_sync: BTreeMap<String, f64> =
            requests.iter().map(|(k, v)| (k.clone(), per(*v))).collect();
        per_sync.insert("total".into(), per(requests.values().sum()));
        let reconciles_per_hpa_per_sync = reconciles
            .filter(|_| hpas > 0 && periods > 0.0)
            .map(|n| n as f64 / hpas as f64 / periods);
        Ok(RealBenchReport {
            controller: name.to_string(),
            release: self.state().release.to_string(),
            hpas,
            pods,
            sync_period_s,
            warmup_s,
            duration_s,
            reconciles: reconciles.unwrap_or(0),
            reconciles_from_metrics: reconciles,
            reconciles_per_hpa_per_sync,
            requests_per_hpa_per_sync: per_sync,
            per_sync_basis: basis.to_string(),
            requests,
            background_per_s,
            cpu_s: controller_cpu_s,
            cpu_s_per_reconcile: reconciles
                .filter(|n| *n > 0)
                .map(|n| controller_cpu_s / n as f64),
            server_cpu_s,
            upstream_requests_per_hpa_per_sync: if hpas == 0 {
                0.0
            } else {
                1.0 + metrics_total as f64 / hpas as f64
            },
            controller_cpu_s,
            peak_rss_mib,
            apiserver_cpu_s,
            etcd_cpu_s,
            apiserver_idle_cpu_s_per_s,
            etcd_idle_cpu_s_per_s,
            apiserver_consistency_checks,
            startup_s,
            replicas: usage,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_apiserver_requests_by_verb_and_resource() {
        let text = r#"
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="apps",resource="deployments",scope="resource",subresource="scale",verb="GET",version="v1"} 120
apiserver_request_total{code="404",component="apiserver",dry_run="",group="apps",resource="deployments",scope="resource",subresource="scale",verb="GET",version="v1"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="cluster",subresource="",verb="LIST",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="metrics.k8s.io",resource="pods",scope="namespace",subresource="",verb="LIST",version="v1beta1"} 40
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="",scope="",subresource="/metrics",verb="GET",version=""} 9
apiserver_request_total{code="200",component="a\"b",dry_run="",group="autoscaling",resource="horizontalpodautoscalers",scope="resource",subresource="status",verb="PUT",version="v2"} 1e+00
"#;
        let got = apiserver_requests(text);
        let want: BTreeMap<String, f64> = [
            ("get deployments/scale", 123.0),
            ("list pods", 2.0),
            ("list pods.metrics.k8s.io", 40.0),
            ("put horizontalpodautoscalers/status", 1.0),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn reads_consistency_checks_by_resource() {
        let text = r#"
# TYPE apiserver_storage_consistency_checks_total counter
apiserver_storage_consistency_checks_total{group="",resource="pods",status="success"} 3
apiserver_storage_consistency_checks_total{group="",resource="pods",status="error"} 1
apiserver_storage_consistency_checks_total{group="apps",resource="deployments",status="success"} 2
"#;
        let before = consistency_checks(text);
        assert_eq!(before.get("pods"), Some(&4.0));
        assert_eq!(before.get("deployments.apps"), Some(&2.0));
        let after = consistency_checks(&text.replace("} 3", "} 4"));
        let want: BTreeMap<String, u64> = [("pods".to_string(), 1)].into_iter().collect();
        assert_eq!(grown(&before, &after), want);
    }
}
