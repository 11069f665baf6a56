//! `hpactl cluster up` / `down`: etcd and kube-apiserver on loopback, bootstrapped, with the
//! fixture server as the aggregated metrics APIs; the state every later command reads is in
//! `DIR/cluster.json`.
//!
//! The apiserver's flags are kubeadm's (`cmd/kubeadm/app/phases/controlplane/manifests.go`,
//! `getAPIServerCommand`) with what loopback needs (`../shared/real-control-plane.md`):
//! `--endpoint-reconciler-type=none` (a loopback address cannot be the `kubernetes`
//! Endpoints), etcd over plain HTTP on loopback, and the request-header flags for the
//! aggregator. What `up` does after `/readyz` is what a kubeadm cluster would already have plus
//! this project's install: `config/rbac.yaml` and `config/flowschema.yaml` applied, a token for its ServiceAccount in
//! `controller.kubeconfig`, and the metrics `APIService`s (their Service is
//! `type: ExternalName` to `localhost`: Endpoints may not point at loopback).

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, PostParams};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::apply::{Applier, ApplyError};
use crate::binaries::{BinariesError, KubeBinaries, KubeRelease};
use crate::kubeconfig::{self, Credentials};
use crate::pki::{self, Pki, PkiPaths};
use crate::process::{self, ProcessError, ProcessRecord};

/// This project's RBAC, applied to every cluster so that the real apiserver enforces it.
pub const RBAC_YAML: &str = include_str!("../../../config/rbac.yaml");
/// This project's FlowSchema (API Priority and Fairness), applied with the RBAC so that the
/// controller's requests are classified as an install classifies them.
pub const FLOWSCHEMA_YAML: &str = include_str!("../../../config/flowschema.yaml");
/// The namespace of the metrics Service and of this controller's ServiceAccount.
pub const SYSTEM_NAMESPACE: &str = "kube-system";
/// The ExternalName Service the metrics `APIService`s point at.
pub const METRICS_SERVICE: &str = "hpa-fixture-metrics";
/// This controller's ServiceAccount (`config/rbac.yaml`).
pub const CONTROLLER_SERVICE_ACCOUNT: &str = "kube-hpa-controller";
/// Validity asked of the controller's token (one year; the apiserver may shorten it).
const TOKEN_SECONDS: i64 = 365 * 24 * 3600;
/// How long each component may take to become ready.
const READY_TIMEOUT: Duration = Duration::from_secs(90);

/// The components, in start order (`down` stops them in reverse).
pub const COMPONENTS: [&str; 4] = [
    "etcd",
    "kube-apiserver",
    "metrics-server",
    "kube-controller-manager",
];

/// Why a cluster could not be brought up, used or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The binaries are not built.
    #[error(transparent)]
    Binaries(#[from] BinariesError),
    /// The certificates could not be made.
    #[error(transparent)]
    Pki(#[from] pki::PkiError),
    /// A process could not be started or stopped.
    #[error(transparent)]
    Process(#[from] ProcessError),
    /// A file of the cluster directory.
    #[error("{path}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// `DIR/cluster.json` is missing or unreadable.
    #[error(
        "{path}: no cluster here ({reason}); run: hpactl cluster up --kube-version VERSION --dir {dir}"
    )]
    NoCluster {
        /// The state file.
        path: PathBuf,
        /// The cluster directory.
        dir: String,
        /// Why.
        reason: String,
    },
    /// A cluster already runs in the directory.
    #[error(
        "{dir}: a cluster is already running here ({component} pid {pid}); run: hpactl cluster down --dir {dir}"
    )]
    AlreadyUp {
        /// The directory.
        dir: String,
        /// A live component.
        component: String,
        /// Its pid.
        pid: u32,
    },
    /// A component did not become ready in time.
    #[error(
        "{component} did not become ready within {seconds} s: {reason}\n--- last lines of {log}:\n{tail}"
    )]
    NotReady {
        /// The component.
        component: String,
        /// The wait.
        seconds: u64,
        /// The last error seen.
        reason: String,
        /// Its log.
        log: String,
        /// The log's last lines.
        tail: String,
    },
    /// A component exited while starting.
    #[error("{component} exited while starting\n--- last lines of {log}:\n{tail}")]
    Exited {
        /// The component.
        component: String,
        /// Its log.
        log: String,
        /// The log's last lines.
        tail: String,
    },
    /// No free loopback port.
    #[error("no free loopback port: {0}")]
    Ports(std::io::Error),
    /// A kubeconfig could not be used.
    #[error("kubeconfig {path}: {message}")]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// Creating an object failed.
    #[error("{0}")]
    Apply(Box<ApplyError>),
    /// An API request failed.
    #[error("{what}: {source}")]
    Api {
        /// What was asked.
        what: String,
        /// The answer.
        source: Box<kube::Error>,
    },
    /// A bench was asked what it cannot do.
    #[error("bench: {message}")]
    Bench {
        /// Why.
        message: String,
    },
    /// A YAML manifest did not parse.
    #[error("{what}: {message}")]
    Manifest {
        /// Which manifest.
        what: &'static str,
        /// The parser's message.
        message: String,
    },
}

impl From<ApplyError> for ClusterError {
    fn from(e: ApplyError) -> Self {
        ClusterError::Apply(Box::new(e))
    }
}

/// What `up` is given.
#[derive(Debug, Clone)]
pub struct UpOptions {
    /// The cluster directory (created; must not hold a running cluster).
    pub dir: PathBuf,
    /// The Kubernetes release (its binaries built by `hack/kube.sh build`).
    pub release: KubeRelease,
    /// The program and leading arguments that run the aggregated metrics server for a
    /// cluster directory (`hpactl cluster serve-metrics`); `--dir DIR` is appended.
    pub metrics_server: Vec<String>,
    /// More kube-apiserver flags (`--name=value`), after the harness's own.
    pub apiserver_flags: Vec<String>,
    /// Run etcd with `--unsafe-no-fsync` (faster on slow disks; the data is thrown away).
    pub etcd_unsafe_no_fsync: bool,
    /// Write an audit log of every write request (Metadata level) to `DIR/logs/audit.log`
    /// ([`AUDIT_POLICY`]); the tests use it to tell which credentials wrote what.
    pub audit: bool,
}

/// The audit policy of [`UpOptions::audit`]: every create, update, patch and delete at the
/// Metadata level (user, with the ServiceAccount token's credential id, verb, URI, times).
pub const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    verbs: [create, update, patch, delete]
  - level: None
";

/// The ports a cluster listens on, all on 127.0.0.1.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct Ports {
    /// etcd's client port.
    pub etcd_client: u16,
    /// etcd's peer port.
    pub etcd_peer: u16,
    /// kube-apiserver's secure port.
    pub apiserver: u16,
    /// The aggregated metrics server's port.
    pub metrics: u16,
    /// The metrics server's control port.
    pub metrics_control: u16,
    /// kube-controller-manager's secure port.
    pub controller_manager: u16,
}

/// `DIR/cluster.json`: what every command after `up` needs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClusterState {
    /// The release.
    pub release: KubeRelease,
    /// Where its binaries are.
    pub bin_dir: PathBuf,
    /// The ports.
    pub ports: Ports,
    /// The bearer token of the metrics server's control port.
    pub metrics_control_token: String,
}

/// A cluster directory whose state was read.
#[derive(Debug, Clone)]
pub struct Cluster {
    dir: PathBuf,
    state: ClusterState,
}

fn state_path(dir: &Path) -> PathBuf {
    dir.join("cluster.json")
}

fn file_err(path: &Path) -> impl Fn(std::io::Error) -> ClusterError + '_ {
    move |source| ClusterError::File {
        path: path.to_path_buf(),
        source,
    }
}

/// Distinct free loopback ports (bound together, then released).
pub(crate) fn free_ports<const N: usize>() -> Result<[u16; N], ClusterError> {
    let mut held = Vec::with_capacity(N);
    let mut ports = [0u16; N];
    for port in &mut ports {
        let l = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
            .map_err(ClusterError::Ports)?;
        *port = l.local_addr().map_err(ClusterError::Ports)?.port();
        held.push(l);
    }
    Ok(ports)
}

/// A random token for the metrics server's control port (two v4 UUIDs: 244 random bits
/// from the OS).
fn random_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

impl Cluster {
    /// Reads `DIR/cluster.json`.
    pub fn open(dir: &Path) -> Result<Self, ClusterError> {
        let path = state_path(dir);
        let no_cluster = |reason: String| ClusterError::NoCluster {
            path: path.clone(),
            dir: dir.display().to_string(),
            reason,
        };
        let bytes = std::fs::read(&path).map_err(|e| no_cluster(e.to_string()))?;
        let state: ClusterState =
            serde_json::from_slice(&bytes).map_err(|e| no_cluster(e.to_string()))?;
        Ok(Cluster {
            dir: dir.to_path_buf(),
            state,
        })
    }

    /// The cluster directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The state `up` recorded.
    pub fn state(&self) -> &ClusterState {
        &self.state
    }

    /// `https://127.0.0.1:PORT`.
    pub fn server_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.state.ports.apiserver)
    }

    /// `DIR/admin.kubeconfig` (client certificate in `system:masters`).
    pub fn admin_kubeconfig(&self) -> PathBuf {
        self.dir.join("admin.kubeconfig")
    }

    /// `DIR/controller.kubeconfig` (the ServiceAccount token `config/rbac.yaml` binds).
    pub fn controller_kubeconfig(&self) -> PathBuf {
        self.dir.join("controller.kubeconfig")
    }

    /// `DIR/logs/audit.log` (written when the cluster was brought up with
    /// [`UpOptions::audit`]).
    pub fn audit_log(&self) -> PathBuf {
        process::log_dir(&self.dir).join("audit.log")
    }

    /// Writes a kubeconfig with a new token of this controller's ServiceAccount to `path`
    /// (each token has its own credential id in the audit log); returns the token.
    pub async fn write_controller_kubeconfig(&self, path: &Path) -> Result<String, ClusterError> {
        self.write_service_account_kubeconfig(SYSTEM_NAMESPACE, CONTROLLER_SERVICE_ACCOUNT, path)
            .await
    }

    /// Writes a kubeconfig with a new token (TokenRequest) of the ServiceAccount
    /// `namespace/name` to `path`: what a pod running as that ServiceAccount is given, for the
    /// processes a test runs in a pod's place (no kubelet runs here). Returns the token.
    pub async fn write_service_account_kubeconfig(
        &self,
        namespace: &str,
        name: &str,
        path: &Path,
    ) -> Result<String, ClusterError> {
        let client = self.admin_client().await?;
        let token = service_account_token(&client, namespace, name).await?;
        let ca_path = self.pki().file("ca.crt");
        let ca = std::fs::read_to_string(&ca_path).map_err(file_err(&ca_path))?;
        let text =
            kubeconfig::kubeconfig(&self.server_url(), &ca, name, &Credentials::Token(&token));
        kubeconfig::write(path, &text).map_err(file_err(path))?;
        Ok(token)
    }

    /// `DIR/kcm.kubeconfig` (client certificate `system:kube-controller-manager`).
    pub fn kcm_kubeconfig(&self) -> PathBuf {
        self.dir.join("kcm.kubeconfig")
    }

    /// The PKI files.
    pub fn pki(&self) -> PkiPaths {
        PkiPaths::new(&self.dir)
    }

    /// The binaries of the cluster's release.
    pub fn binaries(&self) -> KubeBinaries {
        KubeBinaries {
            release: self.state.release,
            dir: self.state.bin_dir.clone(),
        }
    }

    /// A client from a kubeconfig of this cluster.
    pub async fn client_from(&self, kubeconfig_path: &Path) -> Result<kube::Client, ClusterError> {
        client_from_kubeconfig(kubeconfig_path).await
    }

    /// A client with the administrator's credentials.
    pub async fn admin_client(&self) -> Result<kube::Client, ClusterError> {
        client_from_kubeconfig(&self.admin_kubeconfig()).await
    }

    /// The record of a running component.
    pub fn component(&self, name: &str) -> Result<Option<ProcessRecord>, ClusterError> {
        Ok(process::read_record(&self.dir, name)?.filter(process::alive))
    }

    /// Stops one component (SIGTERM, then SIGKILL after `grace`).
    pub fn stop_component(&self, name: &str, grace: Duration) -> Result<(), ClusterError> {
        if let Some(r) = process::read_record(&self.dir, name)? {
            process::stop(&self.dir, &r, grace)?;
        }
        Ok(())
    }

    /// Restarts a component with its recorded command line (stopping it first if it runs),
    /// and waits until it is ready again.
    pub async fn restart_component(&self, name: &str) -> Result<(), ClusterError> {
        let record = process::read_record(&self.dir, name)?.ok_or_else(|| {
            ClusterError::Process(ProcessError::File {
                path: process::run_dir(&self.dir).join(format!("{name}.json")),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "not started"),
            })
        })?;
        process::stop(&self.dir, &record, Duration::from_secs(10))?;
        let record = process::restart(&self.dir, &record)?;
        self.wait_ready(&record).await
    }

    async fn wait_ready(&self, record: &ProcessRecord) -> Result<(), ClusterError> {
        match record.name.as_str() {
            "etcd" => self.wait_etcd(record).await,
            "kube-apiserver" => self.wait_apiserver(record).await,
            "metrics-server" => self.wait_metrics_server(record).await,
            _ => Ok(()),
        }
    }

    /// Waits until `probe` succeeds, failing early when the process exits and after
    /// a bounded wait with the last probe error and the end of the component's log.
    pub async fn wait_until_ready<F, Fut>(
        &self,
        record: &ProcessRecord,
        mut probe: F,
    ) -> Result<(), ClusterError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<(), String>>,
    {
        let start = tokio::time::Instant::now();
        let mut reason = "not probed yet".to_string();
        while start.elapsed() < READY_TIMEOUT {
            if !process::alive(record) {
                return Err(ClusterError::Exited {
                    component: record.name.clone(),
                    log: record.log.display().to_string(),
                    tail: process::log_tail(record, 30),
                });
            }
            match probe().await {
                Ok(()) => return Ok(()),
                Err(r) => reason = r,
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        Err(ClusterError::NotReady {
            component: record.name.clone(),
            seconds: READY_TIMEOUT.as_secs(),
            reason,
            log: record.log.display().to_string(),
            tail: process::log_tail(record, 30),
        })
    }

    async fn wait_etcd(&self, record: &ProcessRecord) -> Result<(), ClusterError> {
        let url = format!("http://127.0.0.1:{}/health", self.state.ports.etcd_client);
        self.wait_until_ready(record, || {
            let url = url.clone();
            async move {
                let body = http_get(&url, None).await?;
                if body.contains("\"health\":\"true\"") {
                    Ok(())
                } else {
                    Err(format!("GET /health: {body}"))
                }
            }
        })
        .await
    }

    async fn wait_apiserver(&self, record: &ProcessRecord) -> Result<(), ClusterError> {
        let client = self.admin_client().await?;
        self.wait_until_ready(record, || {
            let client = client.clone();
            async move {
                let req = http::Request::get("/readyz")
                    .body(Vec::new())
                    .map_err(|e| e.to_string())?;
                match client.request_text(req).await {
                    Ok(t) if t.trim() == "ok" => Ok(()),
                    Ok(t) => Err(format!("GET /readyz: {t}")),
                    Err(e) => Err(format!("GET /readyz: {e}")),
                }
            }
        })
        .await
    }

    async fn wait_metrics_server(&self, record: &ProcessRecord) -> Result<(), ClusterError> {
        let url = format!(
            "http://127.0.0.1:{}/healthz",
            self.state.ports.metrics_control
        );
        self.wait_until_ready(record, || {
            let url = url.clone();
            async move { http_get(&url, None).await.map(|_| ()) }
        })
        .await
    }

    /// Sends a scenario step (`apply`, `delete`, `faults`) to the aggregated metrics server.
    pub async fn metrics_step(&self, step: &Value) -> Result<(), ClusterError> {
        let url = format!(
            "http://127.0.0.1:{}/fixture/v1/step",
            self.state.ports.metrics_control
        );
        http_post(&url, &self.state.metrics_control_token, step)
            .await
            .map_err(|message| ClusterError::Api {
                what: "handing objects to the metrics server".into(),
                source: Box::new(kube::Error::Service(message.into())),
            })
    }

    /// Starts a second metrics provider ([`crate::metrics_server::ProviderOptions`]): the
    /// aggregated metrics server again (`command`, e.g. `hpactl cluster serve-metrics`;
    /// `--dir`, `--metrics-group`, `--port` and `--control-port` are appended) serving `api`
    /// under `group` on ports of its own, registered with `APIService`s for that group (behind
    /// the same ExternalName Service, at its own port), and waits until they are Available.
    /// The controller needs RBAC on the group (as a provider's install grants it).
    pub async fn add_metrics_provider(
        &self,
        command: &[String],
        group: &str,
        api: &str,
    ) -> Result<MetricsProvider, ClusterError> {
        let [port, control_port] = free_ports::<2>()?;
        let (program, leading) = command
            .split_first()
            .ok_or_else(|| ClusterError::Manifest {
                what: "the metrics provider command",
                message: "empty".into(),
            })?;
        let mut args: Vec<String> = leading.to_vec();
        args.extend([
            format!("--dir={}", self.dir().display()),
            format!("--metrics-group={group}={api}"),
            format!("--port={port}"),
            format!("--control-port={control_port}"),
        ]);
        let name = format!("metrics-provider-{group}");
        let record = process::spawn(self.dir(), &name, Path::new(program), &args, &[])?;
        let provider = MetricsProvider {
            control_port,
            token: self.state.metrics_control_token.clone(),
            record,
        };
        let url = format!("http://127.0.0.1:{control_port}/healthz");
        self.wait_until_ready(&provider.record, || {
            let url = url.clone();
            async move { http_get(&url, None).await.map(|_| ()) }
        })
        .await?;
        let ca = std::fs::read_to_string(self.pki().file("ca.crt"))
            .map_err(file_err(&self.pki().file("ca.crt")))?;
        let client = self.admin_client().await?;
        let versions: &[(&str, i32)] = if api == "custom.metrics.k8s.io" {
            &[("v1beta1", 100), ("v1beta2", 200)]
        } else {
            &[("v1beta1", 100)]
        };
        let services: Vec<Value> = versions
            .iter()
            .map(|(version, priority)| apiservice(group, version, *priority, &ca, i32::from(port)))
            .collect();
        let mut applier = Applier::new(client.clone());
        for a in services.iter().cloned() {
            applier.apply(a).await?;
        }
        let names: Vec<String> = services
            .iter()
            .filter_map(|a| a.pointer("/metadata/name").and_then(Value::as_str))
            .map(str::to_string)
            .collect();
        wait_available(&client, &names, &provider.record).await?;
        Ok(provider)
    }

    /// The aggregated metrics server's request counters (Prometheus text).
    pub async fn metrics_server_counters(&self) -> Result<String, ClusterError> {
        let url = format!(
            "http://127.0.0.1:{}/metrics",
            self.state.ports.metrics_control
        );
        http_get(&url, Some(&self.state.metrics_control_token))
            .await
            .map_err(|message| ClusterError::Api {
                what: "reading the metrics server's counters".into(),
                source: Box::new(kube::Error::Service(message.into())),
            })
    }

    /// Compacts etcd at its current revision (etcd's JSON gateway, `/v3/kv/compaction`):
    /// afterwards a watch from an older resourceVersion is answered `410 Gone` once the
    /// apiserver's watch cache no longer holds it.
    pub async fn compact_etcd(&self) -> Result<u64, ClusterError> {
        let base = format!("http://127.0.0.1:{}", self.state.ports.etcd_client);
        let err = |message: String| ClusterError::Api {
            what: "compacting etcd".into(),
            source: Box::new(kube::Error::Service(message.into())),
        };
        // A range read of one key gives the store's current revision in its header.
        let status = http_post_raw(&format!("{base}/v3/kv/range"), &json!({"key": "AA=="}))
            .await
            .map_err(err)?;
        let v: Value = serde_json::from_str(&status).map_err(|e| err(e.to_string()))?;
        let revision: u64 = v
            .pointer("/header/revision")
            .and_then(|r| r.as_str().and_then(|s| s.parse().ok()).or(r.as_u64()))
            .ok_or_else(|| err(format!("no revision in {status}")))?;
        http_post_raw(
            &format!("{base}/v3/kv/compaction"),
            &json!({"revision": revision.to_string(), "physical": true}),
        )
        .await
        .map_err(err)?;
        Ok(revision)
    }
}

/// A client from a kubeconfig file, as kubectl reads it.
pub async fn client_from_kubeconfig(path: &Path) -> Result<kube::Client, ClusterError> {
    let err = |message: String| ClusterError::Kubeconfig {
        path: path.to_path_buf(),
        message,
    };
    let kc = kube::config::Kubeconfig::read_from(path).map_err(|e| err(e.to_string()))?;
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .map_err(|e| err(e.to_string()))?;
    kube::Client::try_from(config).map_err(|e| err(e.to_string()))
}

/// A GET over plain HTTP on loopback (etcd's and the metrics server's health and control
/// endpoints), bounded to 30 s.
async fn http_get(url: &str, token: Option<&str>) -> Result<String, String> {
    http_request("GET", url, token, None).await
}

async fn http_post(url: &str, token: &str, body: &Value) -> Result<(), String> {
    http_request("POST", url, Some(token), Some(body))
        .await
        .map(|_| ())
}

async fn http_post_raw(url: &str, body: &Value) -> Result<String, String> {
    http_request("POST", url, None, Some(body)).await
}

async fn http_request(
    method: &str,
    url: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> Result<String, String> {
    use http_body_util::{BodyExt as _, Full};
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;
    let fail = |e: &dyn std::fmt::Display| format!("{method} {url}: {e}");
    let mut req = http::Request::builder()
        .method(method)
        .uri(url)
        .header(http::header::CONTENT_TYPE, "application/json");
    if let Some(t) = token {
        req = req.header(http::header::AUTHORIZATION, format!("Bearer {t}"));
    }
    let body = body.map(Value::to_string).unwrap_or_default();
    let req = req
        .body(Full::new(bytes::Bytes::from(body)))
        .map_err(|e| fail(&e))?;
    let client = Client::builder(TokioExecutor::new()).build_http();
    let exchange = async {
        let resp = client.request(req).await.map_err(|e| fail(&e))?;
        let status = resp.status();
        let bytes = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| fail(&e))?
            .to_bytes();
        Ok::<_, String>((status, String::from_utf8_lossy(&bytes).into_owned()))
    };
    let (status, text) = tokio::time::timeout(Duration::from_secs(30), exchange)
        .await
        .map_err(|_| fail(&"timed out"))??;
    if status.is_success() {
        Ok(text)
    } else {
        Err(fail(&format!("{status}: {}", text.trim())))
    }
}

fn etcd_args(dir: &Path, ports: &Ports, no_fsync: bool) -> Vec<String> {
    let client = format!("http://127.0.0.1:{}", ports.etcd_client);
    let peer = format!("http://127.0.0.1:{}", ports.etcd_peer);
    let mut args = vec![
        "--name=hpa-cluster".to_string(),
        format!("--data-dir={}", dir.join("etcd").display()),
        format!("--listen-client-urls={client}"),
        format!("--advertise-client-urls={client}"),
        format!("--listen-peer-urls={peer}"),
        format!("--initial-advertise-peer-urls={peer}"),
        format!("--initial-cluster=hpa-cluster={peer}"),
        "--initial-cluster-state=new".to_string(),
        // Room for 10,000 HPAs with their pods and events.
        "--quota-backend-bytes=8589934592".to_string(),
        "--log-level=warn".to_string(),
    ];
    if no_fsync {
        args.push("--unsafe-no-fsync=true".to_string());
    }
    args
}

fn apiserver_args(dir: &Path, ports: &Ports, extra: &[String]) -> Vec<String> {
    let pki = PkiPaths::new(dir);
    let f = |name: &str| pki.file(name).display().to_string();
    let mut args = vec![
        format!("--etcd-servers=http://127.0.0.1:{}", ports.etcd_client),
        "--bind-address=127.0.0.1".to_string(),
        format!("--secure-port={}", ports.apiserver),
        "--advertise-address=127.0.0.1".to_string(),
        "--endpoint-reconciler-type=none".to_string(),
        "--service-cluster-ip-range=10.96.0.0/16".to_string(),
        "--authorization-mode=Node,RBAC".to_string(),
        "--enable-admission-plugins=NodeRestriction".to_string(),
        "--allow-privileged=true".to_string(),
        "--enable-bootstrap-token-auth=true".to_string(),
        format!("--client-ca-file={}", f("ca.crt")),
        format!("--tls-cert-file={}", f("apiserver.crt")),
        format!("--tls-private-key-file={}", f("apiserver.key")),
        format!("--service-account-issuer={}", pki::SERVICE_ACCOUNT_ISSUER),
        format!("--service-account-key-file={}", f("sa.pub")),
        format!("--service-account-signing-key-file={}", f("sa.key")),
        format!("--proxy-client-cert-file={}", f("front-proxy-client.crt")),
        format!("--proxy-client-key-file={}", f("front-proxy-client.key")),
        format!("--requestheader-client-ca-file={}", f("front-proxy-ca.crt")),
        format!(
            "--requestheader-allowed-names={}",
            pki::FRONT_PROXY_CLIENT_CN
        ),
        "--requestheader-username-headers=X-Remote-User".to_string(),
        "--requestheader-group-headers=X-Remote-Group".to_string(),
        "--requestheader-extra-headers-prefix=X-Remote-Extra-".to_string(),
        format!("--cert-dir={}", dir.join("apiserver-certs").display()),
    ];
    args.extend(extra.iter().cloned());
    args
}

/// Brings a cluster up in `options.dir`: certificates, etcd, kube-apiserver (waiting for
/// `/readyz`), the kubeconfigs, this project's RBAC and the controller's token, and the
/// aggregated metrics server with its `APIService`s (waiting until they are Available). On
/// failure, whatever was started is stopped again.
pub async fn up(options: &UpOptions) -> Result<Cluster, ClusterError> {
    let binaries = KubeBinaries::locate(options.release)?;
    let dir = &options.dir;
    std::fs::create_dir_all(dir).map_err(file_err(dir))?;
    let dir = std::fs::canonicalize(dir).map_err(file_err(dir))?;
    for r in process::records(&dir)? {
        if process::alive(&r) {
            return Err(ClusterError::AlreadyUp {
                dir: dir.display().to_string(),
                component: r.name,
                pid: r.pid,
            });
        }
    }
    // A previous cluster's data and records are gone; its logs are kept, appended to.
    for stale in ["etcd", "run", "apiserver-certs", "kcm-certs"] {
        let p = dir.join(stale);
        if p.exists() {
            std::fs::remove_dir_all(&p).map_err(file_err(&p))?;
        }
    }
    let metrics_name = format!("{METRICS_SERVICE}.{SYSTEM_NAMESPACE}.svc");
    let pki = Pki::generate(&metrics_name)?;
    pki.write(&PkiPaths::new(&dir))?;
    let [
        etcd_client,
        etcd_peer,
        apiserver,
        metrics,
        metrics_control,
        controller_manager,
    ] = free_ports::<6>()?;
    let state = ClusterState {
        release: options.release,
        bin_dir: binaries.dir.clone(),
        ports: Ports {
            etcd_client,
            etcd_peer,
            apiserver,
            metrics,
            metrics_control,
            controller_manager,
        },
        metrics_control_token: random_token(),
    };
    let path = state_path(&dir);
    let text = serde_json::to_string_pretty(&state).unwrap_or_default();
    pki::write_file(&path, &text, true).map_err(file_err(&path))?;
    let cluster = Cluster {
        dir: dir.clone(),
        state,
    };
    let server = cluster.server_url();
    let kc = |user: &str, credentials: &Credentials<'_>| {
        kubeconfig::kubeconfig(&server, &pki.ca.cert_pem, user, credentials)
    };
    let write_kc = |path: PathBuf, text: String| {
        kubeconfig::write(&path, &text).map_err(|source| ClusterError::File { path, source })
    };
    write_kc(
        cluster.admin_kubeconfig(),
        kc(
            "kubernetes-admin",
            &Credentials::Certificate {
                cert_pem: &pki.admin.cert_pem,
                key_pem: &pki.admin.key_pem,
            },
        ),
    )?;
    write_kc(
        cluster.kcm_kubeconfig(),
        kc(
            "system:kube-controller-manager",
            &Credentials::Certificate {
                cert_pem: &pki.controller_manager.cert_pem,
                key_pem: &pki.controller_manager.key_pem,
            },
        ),
    )?;

    match start_and_bootstrap(&cluster, options, &binaries).await {
        Ok(()) => Ok(cluster),
        Err(e) => {
            let _ = down(&dir);
            Err(e)
        }
    }
}

async fn start_and_bootstrap(
    cluster: &Cluster,
    options: &UpOptions,
    binaries: &KubeBinaries,
) -> Result<(), ClusterError> {
    let dir = cluster.dir();
    let ports = cluster.state.ports;
    tracing::info!(dir = %dir.display(), release = %options.release, "starting etcd");
    let etcd = process::spawn(
        dir,
        "etcd",
        &binaries.path("etcd"),
        &etcd_args(dir, &ports, options.etcd_unsafe_no_fsync),
        &[],
    )?;
    cluster.wait_etcd(&etcd).await?;
    tracing::info!(port = ports.apiserver, "starting kube-apiserver");
    let mut flags = Vec::new();
    if options.audit {
        let policy = dir.join("audit-policy.yaml");
        std::fs::write(&policy, AUDIT_POLICY).map_err(file_err(&policy))?;
        flags.push(format!("--audit-policy-file={}", policy.display()));
        flags.push(format!(
            "--audit-log-path={}",
            cluster.audit_log().display()
        ));
        flags.push("--audit-log-mode=blocking".to_string());
    }
    flags.extend(options.apiserver_flags.iter().cloned());
    let apiserver = process::spawn(
        dir,
        "kube-apiserver",
        &binaries.path("kube-apiserver"),
        &apiserver_args(dir, &ports, &flags),
        &[],
    )?;
    cluster.wait_apiserver(&apiserver).await?;
    let client = cluster.admin_client().await?;
    bootstrap_rbac(&client).await?;
    cluster
        .write_controller_kubeconfig(&cluster.controller_kubeconfig())
        .await?;
    let pki_ca = std::fs::read_to_string(cluster.pki().file("ca.crt"))
        .map_err(file_err(&cluster.pki().file("ca.crt")))?;

    let (program, leading) =
        options
            .metrics_server
            .split_first()
            .ok_or_else(|| ClusterError::Manifest {
                what: "the metrics server command",
                message: "empty".into(),
            })?;
    let mut args: Vec<String> = leading.to_vec();
    args.push(format!("--dir={}", dir.display()));
    tracing::info!(
        port = ports.metrics,
        "starting the aggregated metrics server"
    );
    let metrics = process::spawn(dir, "metrics-server", Path::new(program), &args, &[])?;
    cluster.wait_metrics_server(&metrics).await?;
    register_metrics_apis(&client, &pki_ca, ports.metrics).await?;
    wait_apiservices_available(&client, &metrics).await
}

/// Applies `config/rbac.yaml` (and the `default` ServiceAccount of `kube-system`, which the
/// ServiceAccount controller would create) and `config/flowschema.yaml`.
async fn bootstrap_rbac(client: &kube::Client) -> Result<(), ClusterError> {
    let mut applier = Applier::new(client.clone());
    for (what, yaml) in [
        ("config/rbac.yaml", RBAC_YAML),
        ("config/flowschema.yaml", FLOWSCHEMA_YAML),
    ] {
        let docs: Vec<Value> =
            serde_saphyr::from_multiple(yaml).map_err(|e| ClusterError::Manifest {
                what,
                message: e.to_string(),
            })?;
        for doc in docs.into_iter().filter(|d| !d.is_null()) {
            applier.apply(doc).await?;
        }
    }
    Ok(())
}

/// A token of the ServiceAccount `namespace/name` (TokenRequest; no token controller runs).
async fn service_account_token(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<String, ClusterError> {
    let body = json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": TOKEN_SECONDS},
    });
    let url = format!("/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token");
    let req = http::Request::post(url)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(body.to_string().into_bytes())
        .map_err(|e| ClusterError::Api {
            what: "TokenRequest".into(),
            source: Box::new(kube::Error::HttpError(e)),
        })?;
    let answer: Value = client
        .request(req)
        .await
        .map_err(|source| ClusterError::Api {
            what: format!("a token for ServiceAccount {namespace}/{name}"),
            source: Box::new(source),
        })?;
    answer
        .pointer("/status/token")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| ClusterError::Manifest {
            what: "the TokenRequest answer",
            message: "no status.token".into(),
        })
}

/// A second metrics provider started by [`Cluster::add_metrics_provider`].
#[derive(Debug)]
pub struct MetricsProvider {
    control_port: u16,
    token: String,
    /// Its process.
    pub record: ProcessRecord,
}

impl MetricsProvider {
    /// Sends a scenario step (`apply`, `delete`, `faults`) to this provider.
    pub async fn step(&self, step: &Value) -> Result<(), ClusterError> {
        let url = format!("http://127.0.0.1:{}/fixture/v1/step", self.control_port);
        http_post(&url, &self.token, step)
            .await
            .map_err(|message| ClusterError::Api {
                what: "handing objects to the metrics provider".into(),
                source: Box::new(kube::Error::Service(message.into())),
            })
    }
}

/// One metrics `APIService`, behind the ExternalName Service to `localhost` at `port`.
fn apiservice(group: &str, version: &str, priority: i32, ca_pem: &str, port: i32) -> Value {
    json!({
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": format!("{version}.{group}")},
        "spec": {
            "group": group,
            "version": version,
            "service": {"namespace": SYSTEM_NAMESPACE, "name": METRICS_SERVICE, "port": port},
            "caBundle": kubeconfig::base64(ca_pem.as_bytes()),
            "groupPriorityMinimum": 100,
            "versionPriority": priority,
        },
    })
}

/// The metrics APIs' `APIService`s, as metrics-server's and custom-metrics-apiserver's
/// manifests register them, behind one ExternalName Service to `localhost`.
fn metrics_apiservices(ca_pem: &str, port: i32) -> Vec<Value> {
    [
        ("metrics.k8s.io", "v1beta1", 100),
        ("custom.metrics.k8s.io", "v1beta1", 100),
        ("custom.metrics.k8s.io", "v1beta2", 200),
        ("external.metrics.k8s.io", "v1beta1", 100),
    ]
    .into_iter()
    .map(|(group, version, priority)| apiservice(group, version, priority, ca_pem, port))
    .collect()
}

async fn register_metrics_apis(
    client: &kube::Client,
    ca_pem: &str,
    port: u16,
) -> Result<(), ClusterError> {
    let api_err = |what: &str| {
        let what = what.to_string();
        move |source| ClusterError::Api {
            what,
            source: Box::new(source),
        }
    };
    // kube-system exists once the apiserver is ready; a fresh namespace would need creating.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces
        .get_opt(SYSTEM_NAMESPACE)
        .await
        .map_err(api_err("reading namespace kube-system"))?
        .is_none()
    {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": SYSTEM_NAMESPACE}}))
            .map_err(|e| ClusterError::Manifest {
                what: "namespace",
                message: e.to_string(),
            })?;
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .map_err(api_err("creating namespace kube-system"))?;
    }
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": METRICS_SERVICE, "namespace": SYSTEM_NAMESPACE},
        "spec": {
            "type": "ExternalName",
            "externalName": "localhost",
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
        },
    }))
    .map_err(|e| ClusterError::Manifest {
        what: "the metrics Service",
        message: e.to_string(),
    })?;
    let mut applier = Applier::new(client.clone());
    applier
        .apply(serde_json::to_value(&service).unwrap_or_default())
        .await?;
    for apiservice in metrics_apiservices(ca_pem, i32::from(port)) {
        applier.apply(apiservice).await?;
    }
    Ok(())
}

async fn wait_apiservices_available(
    client: &kube::Client,
    metrics: &ProcessRecord,
) -> Result<(), ClusterError> {
    let names: Vec<String> = metrics_apiservices("", 0)
        .iter()
        .filter_map(|a| a.pointer("/metadata/name").and_then(Value::as_str))
        .map(str::to_string)
        .collect();
    wait_available(client, &names, metrics).await
}

/// Waits until the `APIService`s `names` are Available.
async fn wait_available(
    client: &kube::Client,
    names: &[String],
    metrics: &ProcessRecord,
) -> Result<(), ClusterError> {
    let api: Api<APIService> = Api::all(client.clone());
    let start = tokio::time::Instant::now();
    let mut reason = String::new();
    while start.elapsed() < READY_TIMEOUT {
        let mut all = true;
        for name in names {
            let available = match api.get(name).await {
                Ok(a) => {
                    let cond = a
                        .status
                        .and_then(|s| s.conditions)
                        .unwrap_or_default()
                        .into_iter()
                        .find(|c| c.type_ == "Available");
                    match cond {
                        Some(c) if c.status == "True" => true,
                        Some(c) => {
                            reason = format!(
                                "APIService {name}: {} {}",
                                c.reason.unwrap_or_default(),
                                c.message.unwrap_or_default()
                            );
                            false
                        }
                        None => {
                            reason = format!("APIService {name}: no Available condition yet");
                            false
                        }
                    }
                }
                Err(e) => {
                    reason = format!("APIService {name}: {e}");
                    false
                }
            };
            all &= available;
        }
        if all {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Err(ClusterError::NotReady {
        component: "the metrics APIServices".into(),
        seconds: READY_TIMEOUT.as_secs(),
        reason,
        log: metrics.log.display().to_string(),
        tail: process::log_tail(metrics, 20),
    })
}

/// Stops every component of the cluster in `dir`, in reverse start order; the names of those
/// that were running.
pub fn down(dir: &Path) -> Result<Vec<String>, ClusterError> {
    let mut stopped = Vec::new();
    let mut records = process::records(dir)?;
    // Reverse start order; components this module does not know (none today) first.
    records.sort_by_key(|r| {
        std::cmp::Reverse(
            COMPONENTS
                .iter()
                .position(|c| *c == r.name)
                .unwrap_or(COMPONENTS.len()),
        )
    });
    for r in records {
        if process::alive(&r) {
            stopped.push(r.name.clone());
        }
        process::stop(dir, &r, Duration::from_secs(10))?;
    }
    Ok(stopped)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn rbac_yaml_parses_and_binds_the_service_account() {
        let docs: Vec<Value> = serde_saphyr::from_multiple(RBAC_YAML).unwrap();
        assert!(docs.iter().any(|d| d["kind"] == "ServiceAccount"
            && d["metadata"]["name"] == CONTROLLER_SERVICE_ACCOUNT
            && d["metadata"]["namespace"] == SYSTEM_NAMESPACE));
    }

    #[test]
    fn ports_are_distinct() {
        let p = free_ports::<6>().unwrap();
        let mut sorted = p.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 6);
    }

    #[test]
    fn tokens_differ() {
        let (a, b) = (random_token(), random_token());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
    }

    #[test]
    fn apiservices_point_at_the_external_name_service() {
        let a = metrics_apiservices("CA", 4443);
        assert_eq!(a.len(), 4);
        assert_eq!(a[2]["metadata"]["name"], "v1beta2.custom.metrics.k8s.io");
        assert_eq!(a[2]["spec"]["service"]["port"], 4443);
        assert_eq!(a[2]["spec"]["versionPriority"], 200);
    }
}
