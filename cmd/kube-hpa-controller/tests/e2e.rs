//! End to end: the built `kube-hpa-controller` binary against `hpactl serve` of a scenario
//! (issue 7, item 7). The target is scaled as the scenario expects; `/metrics` carries the
//! HPA, workqueue, REST client, leader election and process metrics; `/healthz` answers;
//! SIGTERM stops the leader with exit 0 and releases the lease; a second instance stands by
//! while the first leads and takes over once it is stopped; `kubectl describe hpa` shows the
//! conditions and events the binary wrote (ignored, with the reason, where `build.rs` found no
//! `kubectl` on `PATH`).
//!
//! Every wait is a bounded poll of something observable (the API objects through a
//! `kube::Client`, the HTTPS endpoints, the processes' exit status); child processes are
//! killed when their guard drops, and their logs are printed when a test fails.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;
#[path = "../../../hack/tests/free_ports.rs"]
mod free_ports;

use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use free_ports::free_ports;
use http::StatusCode;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Event;
use kube::api::ListParams;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};

/// The scenario: two pods at 100% CPU of request against a 50% target, 2 replicas, so 4.
const SCENARIO: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../test-fixtures/scenarios/resource/cpu-utilization-scale-up.yaml"
);
/// `--leader-elect-resource-name`'s default.
const LEASE: &str = "kube-hpa-controller";
const MASTER_STATUS: &str = r#"leader_election_master_status{name="kube-hpa-controller"}"#;
/// The message of the scenario's expected `SuccessfulRescale` event.
const RESCALE_MESSAGE: &str =
    "New size: 4; reason: cpu resource utilization (percentage of request) above target";
/// `--leader-elect-renew-deadline` below; a stopped leader drains for at most this long.
const RENEW_DEADLINE: Duration = Duration::from_secs(3);
/// Upper bound of every wait (far above what each takes when things work).
const WAIT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(150);

/// A scratch directory under Cargo's per-target temporary directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "e2e-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// A child process, killed (and reaped) when dropped; its stdout and stderr go to a log
/// file that is printed if the test fails.
struct Proc {
    name: String,
    child: Child,
    log: PathBuf,
    exited: Option<ExitStatus>,
}

impl Proc {
    fn spawn(name: &str, mut cmd: Command, log: PathBuf) -> Proc {
        let out = File::create(&log).unwrap();
        let err = out.try_clone().unwrap();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {name} ({cmd:?}): {e}"));
        Proc {
            name: name.to_string(),
            child,
            log,
            exited: None,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The exit status, if it has exited.
    fn try_exit(&mut self) -> Option<ExitStatus> {
        if self.exited.is_none() {
            self.exited = self.child.try_wait().unwrap();
        }
        self.exited
    }

    /// Fails the test (with the log) if the process has exited.
    fn assert_running(&mut self) {
        if let Some(status) = self.try_exit() {
            panic!("{} exited early with {status}:\n{}", self.name, self.log());
        }
    }

    fn sigterm(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -TERM {}", self.child.id());
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.exited.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if std::thread::panicking() {
            eprintln!("----- {} log -----\n{}", self.name, self.log());
        }
    }
}

/// Polls `check` every [`POLL`] until it gives a value, failing after `limit`.
async fn eventually<T>(
    what: &str,
    limit: Duration,
    mut check: impl AsyncFnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// `hpactl`, next to this package's binary (`common::sibling_binary`), found (or built)
/// once.
fn hpactl() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        common::sibling_binary::sibling_binary(env!("CARGO_BIN_EXE_kube-hpa-controller"), "hpactl")
    })
}

/// A running `hpactl serve` of [`SCENARIO`] and a client for it.
struct Fixture {
    kubeconfig: PathBuf,
    /// `host:port` of the API server, as in the kubeconfig.
    host: String,
    client: Client,
    _server: Proc,
}

impl Fixture {
    async fn start(dir: &Scratch) -> Fixture {
        Fixture::start_scenario(dir, Path::new(SCENARIO)).await
    }

    async fn start_scenario(dir: &Scratch, scenario: &Path) -> Fixture {
        let kubeconfig = dir.path("kubeconfig");
        let mut cmd = Command::new(hpactl());
        // No NO_COLOR: the server must itself write no colour codes to a file.
        cmd.env_remove("NO_COLOR");
        cmd.arg("serve")
            .arg(scenario)
            .args(["--addr", "127.0.0.1:0", "--kubeconfig-out"])
            .arg(&kubeconfig);
        let mut server = Proc::spawn("hpactl serve", cmd, dir.path("hpactl.log"));
        // The kubeconfig appears once the server listens; a torn read just polls again.
        let (host, client) = eventually("hpactl serve to write its kubeconfig", WAIT, async || {
            server.assert_running();
            let kc = Kubeconfig::read_from(&kubeconfig).ok()?;
            let mut config =
                kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                    .await
                    .ok()?;
            config.default_retry = false;
            let host = config.cluster_url.authority()?.to_string();
            let client = Client::try_from(config).unwrap();
            // Answering proves the file was read whole.
            client.apiserver_version().await.ok()?;
            Some((host, client))
        })
        .await;
        Fixture {
            kubeconfig,
            host,
            client,
            _server: server,
        }
    }

    async fn lease(&self) -> Option<Lease> {
        Api::<Lease>::namespaced(self.client.clone(), "default")
            .get_opt(LEASE)
            .await
            .unwrap()
    }

    /// The Lease's `acquireTime` (written by the holder that took it last).
    async fn acquire_time(&self) -> jiff::Timestamp {
        self.lease()
            .await
            .unwrap()
            .spec
            .unwrap()
            .acquire_time
            .unwrap()
            .0
    }

    async fn lease_holder(&self) -> Option<String> {
        self.lease()
            .await
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity)
    }

    async fn scale_replicas(&self) -> i32 {
        self.replicas_of("web").await
    }

    /// The replicas of the Deployment `default/name`'s scale.
    async fn replicas_of(&self, name: &str) -> i32 {
        Api::<Deployment>::namespaced(self.client.clone(), "default")
            .get_scale(name)
            .await
            .unwrap()
            .spec
            .and_then(|s| s.replicas)
            .unwrap_or_default()
    }

    async fn hpa(&self) -> HorizontalPodAutoscaler {
        self.hpa_named("web").await
    }

    async fn hpa_named(&self, name: &str) -> HorizontalPodAutoscaler {
        Api::<HorizontalPodAutoscaler>::namespaced(self.client.clone(), "default")
            .get(name)
            .await
            .unwrap()
    }
}

/// A running `kube-hpa-controller` and its secure address.
struct Controller {
    proc: Proc,
    addr: SocketAddr,
}

impl Controller {
    fn start(name: &str, fixture: &Fixture, port: u16, dir: &Scratch) -> Controller {
        Self::start_with(name, &fixture.kubeconfig, port, dir, &[])
    }

    fn start_with(
        name: &str,
        kubeconfig: &Path,
        port: u16,
        dir: &Scratch,
        extra: &[&str],
    ) -> Controller {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kube-hpa-controller"));
        cmd.arg("--kubeconfig").arg(kubeconfig).args([
            "--bind-address=127.0.0.1",
            &format!("--secure-port={port}"),
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
            "--horizontal-pod-autoscaler-sync-period=1s",
            // The scenario's flag.
            "--horizontal-pod-autoscaler-downscale-stabilization=0s",
            "--leader-elect-lease-duration=4s",
            "--leader-elect-renew-deadline=3s",
            "--leader-elect-retry-period=500ms",
            "--leader-elect-resource-namespace=default",
        ]);
        cmd.args(extra);
        Controller {
            proc: Proc::spawn(name, cmd, dir.path(&format!("{name}.log"))),
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
        }
    }

    /// GETs `path` once the port accepts connections (failing if the process exits).
    async fn get(&mut self, path: &str) -> (StatusCode, String) {
        let addr = self.addr;
        let proc = &mut self.proc;
        eventually("the secure port to accept connections", WAIT, async || {
            proc.assert_running();
            tokio::net::TcpStream::connect(addr).await.ok()
        })
        .await;
        let ca = common::presented_ca(addr).await;
        let (code, _, body) = common::https_get(addr, &ca, path, None).await;
        (code, body)
    }

    async fn metrics(&mut self) -> String {
        let (code, body) = self.get("/metrics").await;
        assert_eq!(code, StatusCode::OK, "/metrics: {body}");
        body
    }

    /// Waits for the process to exit, at most `limit`.
    async fn exit_within(&mut self, limit: Duration) -> ExitStatus {
        let proc = &mut self.proc;
        eventually("the process to exit", limit, async || proc.try_exit()).await
    }
}

/// The value of the sample named exactly `series` (name and labels), if present.
fn sample(body: &str, series: &str) -> Option<f64> {
    body.lines().find_map(|line| {
        let value = line.strip_prefix(series)?.strip_prefix(' ')?;
        value.trim().parse().ok()
    })
}

/// Whether `body` declares `name` with `# TYPE` and has a sample of it (or of its
/// `_count`, for summaries and histograms) whose labels contain `labels`.
fn has_metric(body: &str, name: &str, kind: &str, labels: &str) -> bool {
    let declared = body.contains(&format!("# TYPE {name} {kind}\n"));
    let sampled = body.lines().any(|line| {
        let Some(rest) = line
            .strip_prefix(name)
            .map(|r| r.strip_prefix("_count").unwrap_or(r))
        else {
            return false;
        };
        (rest.starts_with('{') || rest.starts_with(' ')) && rest.contains(labels)
    });
    declared && sampled
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scales_the_target_serves_metrics_and_stops_on_sigterm() {
    let dir = Scratch::new("scale");
    let fixture = Fixture::start(&dir).await;
    assert_eq!(
        fixture.scale_replicas().await,
        2,
        "the scenario starts at 2"
    );
    let port = free_ports(1)[0];
    let mut c = Controller::start("controller", &fixture, port, &dir);

    // The scenario's expectation: the Deployment is scaled to 4 and the status says so.
    let started = Instant::now();
    eventually("the Deployment to be scaled to 4", WAIT, async || {
        c.proc.assert_running();
        (fixture.scale_replicas().await == 4).then_some(())
    })
    .await;
    eprintln!("scaled 2 -> 4 {:?} after start", started.elapsed());
    eventually(
        "the HPA status to show 4 desired replicas",
        WAIT,
        async || {
            let status = fixture.hpa().await.status?;
            (status.desired_replicas == 4 && status.last_scale_time.is_some()).then_some(())
        },
    )
    .await;

    let (code, body) = c.get("/healthz").await;
    assert_eq!((code, body.as_str()), (StatusCode::OK, "ok"));

    let body = c.metrics().await;
    assert_eq!(sample(&body, MASTER_STATUS), Some(1.0), "{body}");
    let hpa_metrics = [
        (
            "reconciliations_total",
            "counter",
            r#"action="scale_up",error="none""#,
        ),
        (
            "reconciliation_duration_seconds",
            "histogram",
            r#"action="scale_up",error="none""#,
        ),
        (
            "metric_computation_total",
            "counter",
            r#"action="scale_up",error="none",metric_type="Resource""#,
        ),
        (
            "metric_computation_duration_seconds",
            "histogram",
            r#"action="scale_up",error="none",metric_type="Resource""#,
        ),
        ("num_horizontal_pod_autoscalers", "gauge", ""),
        (
            "desired_replicas",
            "gauge",
            r#"hpa_name="web",namespace="default""#,
        ),
    ];
    for (name, kind, labels) in hpa_metrics {
        let name = format!("horizontal_pod_autoscaler_controller_{name}");
        assert!(
            has_metric(&body, &name, kind, labels),
            "{name}{{{labels}}}:\n{body}"
        );
    }
    assert_eq!(
        sample(
            &body,
            r#"horizontal_pod_autoscaler_controller_desired_replicas{hpa_name="web",namespace="default"}"#
        ),
        Some(4.0)
    );
    let workqueue = [
        ("workqueue_depth", "gauge"),
        ("workqueue_adds_total", "counter"),
        ("workqueue_queue_duration_seconds", "histogram"),
        ("workqueue_work_duration_seconds", "histogram"),
        ("workqueue_unfinished_work_seconds", "gauge"),
        ("workqueue_longest_running_processor_seconds", "gauge"),
        ("workqueue_retries_total", "counter"),
    ];
    for (name, kind) in workqueue {
        assert!(
            has_metric(&body, name, kind, r#"name="horizontalpodautoscaler""#),
            "{name}:\n{body}"
        );
    }
    let host = &fixture.host;
    for method in ["GET", "PUT"] {
        let labels = format!(r#"code="200",host="{host}",method="{method}""#);
        assert!(
            has_metric(&body, "rest_client_requests_total", "counter", &labels),
            "rest_client_requests_total{{{labels}}}:\n{body}"
        );
        let labels = format!(r#"host="{host}",verb="{method}""#);
        assert!(
            has_metric(
                &body,
                "rest_client_request_duration_seconds",
                "histogram",
                &labels
            ),
            "rest_client_request_duration_seconds{{{labels}}}:\n{body}"
        );
    }
    for (name, kind) in [
        ("process_cpu_seconds_total", "counter"),
        ("process_resident_memory_bytes", "gauge"),
        ("process_start_time_seconds", "gauge"),
        ("process_open_fds", "gauge"),
    ] {
        assert!(has_metric(&body, name, kind, ""), "{name}:\n{body}");
    }

    // SIGTERM: exit 0 within the drain bound, the lease released on the way out.
    let holder = fixture.lease_holder().await.unwrap_or_default();
    assert!(!holder.is_empty(), "the leader holds the lease");
    c.proc.sigterm();
    let status = c.exit_within(RENEW_DEADLINE + Duration::from_secs(2)).await;
    assert_eq!(status.code(), Some(0), "{}", c.proc.log());
    let spec = fixture.lease().await.unwrap().spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some(""), "released");
    assert_eq!(spec.lease_duration_seconds, Some(1));

    // What the binary wrote, now still: status conditions and the rescale event.
    let status = fixture.hpa().await.status.unwrap();
    assert_eq!(status.desired_replicas, 4);
    let conditions = status.conditions.unwrap_or_default();
    let find = |t: &str| conditions.iter().find(|c| c.type_ == t).unwrap();
    assert_eq!(find("AbleToScale").status, "True");
    let active = find("ScalingActive");
    assert_eq!(
        (active.status.as_str(), active.reason.as_deref()),
        ("True", Some("ValidMetricFound"))
    );
    let limited = find("ScalingLimited");
    assert_eq!(
        (limited.status.as_str(), limited.reason.as_deref()),
        ("False", Some("DesiredWithinRange"))
    );
    let events = Api::<Event>::namespaced(fixture.client.clone(), "default")
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let rescale = events
        .iter()
        .find(|e| e.reason.as_deref() == Some("SuccessfulRescale"))
        .unwrap_or_else(|| panic!("no SuccessfulRescale event in {events:#?}"));
    assert_eq!(rescale.message.as_deref(), Some(RESCALE_MESSAGE));
    assert_eq!(rescale.type_.as_deref(), Some("Normal"));
    assert_eq!(
        rescale.involved_object.kind.as_deref(),
        Some("HorizontalPodAutoscaler")
    );
    assert_eq!(rescale.involved_object.name.as_deref(), Some("web"));
}

/// `kubectl describe hpa` shows the conditions and the rescale event the binary wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_kubectl), ignore = "kubectl not found on PATH")]
async fn kubectl_describe_hpa_shows_what_the_binary_wrote() {
    let kubectl = env!("HPA_TEST_KUBECTL");
    let dir = Scratch::new("describe");
    let fixture = Fixture::start(&dir).await;
    let port = free_ports(1)[0];
    let mut c = Controller::start("controller", &fixture, port, &dir);
    eventually(
        "the HPA status to show the rescale to 4",
        WAIT,
        async || {
            c.proc.assert_running();
            let status = fixture.hpa().await.status?;
            (status.desired_replicas == 4 && status.last_scale_time.is_some()).then_some(())
        },
    )
    .await;
    // Stopped, so that what kubectl shows stays still.
    c.proc.sigterm();
    let status = c.exit_within(RENEW_DEADLINE + Duration::from_secs(2)).await;
    assert_eq!(status.code(), Some(0), "{}", c.proc.log());
    let status = fixture.hpa().await.status.unwrap();
    let pods = format!(
        "{} current / {} desired",
        status.current_replicas.unwrap_or_default(),
        status.desired_replicas
    );
    let conditions = status.conditions.unwrap_or_default();
    assert_eq!(conditions.len(), 3, "{conditions:#?}");

    let out = Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(&fixture.kubeconfig)
        .arg("--cache-dir")
        .arg(dir.path("kubectl-cache"))
        .args(["describe", "hpa", "web", "--namespace", "default"])
        .env_remove("HTTP_PROXY")
        .env_remove("HTTPS_PROXY")
        .env_remove("http_proxy")
        .env_remove("https_proxy")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "kubectl describe hpa: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains(&pods), "{pods}:\n{text}");
    for c in &conditions {
        let found = text.lines().any(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            words.len() > 3
                && words[..3]
                    == [
                        c.type_.as_str(),
                        c.status.as_str(),
                        c.reason.as_deref().unwrap_or(""),
                    ]
                && line.ends_with(c.message.as_deref().unwrap_or(""))
        });
        assert!(found, "condition {} not shown:\n{text}", c.type_);
    }
    let found = text.lines().any(|line| {
        let words: Vec<&str> = line.split_whitespace().collect();
        words.len() > 4
            && words[..2] == ["Normal", "SuccessfulRescale"]
            && words.contains(&"horizontal-pod-autoscaler")
            && line.ends_with(RESCALE_MESSAGE)
    });
    assert!(found, "the SuccessfulRescale event is not shown:\n{text}");
}

/// Without `--emulated-version` the binary behaves as the version the API server's `/version`
/// reports: against a 1.35 server as 1.35 (no observedGeneration, `[ALPHA]` workqueue
/// metrics), against a 1.37 server (the same scenario with `serverVersion: "1.37"`) as 1.37
/// (status observedGeneration from the generation the server keeps, none in the conditions, as
/// 1.37.2's `setConditionInList` sets none; `[BETA]`
/// workqueue and reconcile metrics), and against a 1.40 server as 1.37 with a warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behaves_as_the_api_servers_version() {
    let base = std::fs::read_to_string(SCENARIO).unwrap();
    for (server, behaves, observed, stability, warns) in [
        ("1.35", "1.35", None, "[ALPHA]", false),
        ("1.37", "1.37", Some(1), "[BETA]", false),
        ("1.40", "1.37", Some(1), "[BETA]", true),
    ] {
        let dir = Scratch::new(&format!("version-{server}"));
        let scenario = dir.path("scenario.yaml");
        std::fs::write(&scenario, format!("serverVersion: \"{server}\"\n{base}")).unwrap();
        let fixture = Fixture::start_scenario(&dir, &scenario).await;
        let port = free_ports(1)[0];
        let mut c = Controller::start("controller", &fixture, port, &dir);
        eventually(
            "the HPA status to show 4 desired replicas",
            WAIT,
            async || {
                c.proc.assert_running();
                let status = fixture.hpa().await.status?;
                (status.desired_replicas == 4).then_some(())
            },
        )
        .await;
        let status = fixture.hpa().await.status.unwrap();
        assert_eq!(status.observed_generation, observed, "server {server}");
        for c in status.conditions.unwrap_or_default() {
            assert_eq!(c.observed_generation, None, "server {server}: {c:?}");
        }
        let body = c.metrics().await;
        for name in [
            "workqueue_depth",
            "horizontal_pod_autoscaler_controller_reconciliations_total",
        ] {
            assert!(
                body.contains(&format!("# HELP {name} {stability} ")),
                "server {server}: {name}:\n{body}"
            );
        }
        let log = c.proc.log();
        assert!(
            log.contains(&format!(
                "behaving as the HPA controller of kube-controller-manager {behaves}"
            )),
            "server {server}:\n{log}"
        );
        assert_eq!(log.contains("newer than the versions"), warns, "{log}");
        c.proc.sigterm();
        c.exit_within(RENEW_DEADLINE + Duration::from_secs(2)).await;
    }
}

/// The series whose name is exactly `name` (no suffix), with their labels and values.
fn series(body: &str, name: &str) -> Vec<(Vec<(String, String)>, f64)> {
    body.lines()
        .filter(|l| l.strip_prefix(name).is_some_and(|r| r.starts_with('{')))
        .map(|l| {
            let value = l.rsplit(' ').next().unwrap().parse().unwrap();
            (common::exposition_labels(l), value)
        })
        .collect()
}

/// What kube-controller-manager exports about itself: `kubernetes_build_info` with exactly
/// the fields `--version=raw` of the same binary prints, `kubernetes_feature_enabled` for the
/// gates at the version behaved as, and the REST client's request and response sizes once
/// requests were made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exports_build_info_feature_gates_and_request_sizes() {
    let dir = Scratch::new("build-info");
    let fixture = Fixture::start(&dir).await;
    let port = free_ports(1)[0];
    let mut c = Controller::start_with(
        "controller",
        &fixture.kubeconfig,
        port,
        &dir,
        &[
            "--emulated-version=1.37",
            "--feature-gates=HPAScaleToZero=false",
        ],
    );
    eventually("the Deployment to be scaled to 4", WAIT, async || {
        c.proc.assert_running();
        (fixture.scale_replicas().await == 4).then_some(())
    })
    .await;
    let body = c.metrics().await;

    // kubernetes_build_info: one series of 1, its labels the fields of --version=raw.
    assert!(
        body.contains("# HELP kubernetes_build_info [BETA] A metric with a constant '1' value labeled by major, minor, git version, git commit, git tree state, build date, Go version, and compiler from which Kubernetes was built, and platform on which it is running.\n# TYPE kubernetes_build_info gauge\n"),
        "{body}"
    );
    let build = series(&body, "kubernetes_build_info");
    assert_eq!(build.len(), 1, "{body}");
    let (labels, value) = &build[0];
    assert_eq!(*value, 1.0);
    let raw = Command::new(env!("CARGO_BIN_EXE_kube-hpa-controller"))
        .arg("--version=raw")
        .output()
        .unwrap();
    assert!(raw.status.success());
    let fields = common::raw_fields(&String::from_utf8_lossy(&raw.stdout));
    let field = |name: &str| fields.iter().find(|(n, _)| n == name).unwrap().1.clone();
    let mut want: Vec<(String, String)> = [
        ("build_date", "BuildDate"),
        ("compiler", "Compiler"),
        ("git_commit", "GitCommit"),
        ("git_tree_state", "GitTreeState"),
        ("git_version", "GitVersion"),
        ("go_version", "GoVersion"),
        ("major", "Major"),
        ("minor", "Minor"),
        ("platform", "Platform"),
    ]
    .into_iter()
    .map(|(label, f)| (label.to_string(), field(f)))
    .collect();
    want.sort();
    assert_eq!(labels, &want, "{body}");

    // kubernetes_feature_enabled: every gate 1.37 has, with --feature-gates applied.
    assert!(
        body.contains("# HELP kubernetes_feature_enabled [BETA] This metric records the data about the stage and enablement of a k8s feature.\n# TYPE kubernetes_feature_enabled gauge\n"),
        "{body}"
    );
    let gates: Vec<String> = body
        .lines()
        .filter(|l| l.starts_with("kubernetes_feature_enabled{"))
        .map(str::to_string)
        .collect();
    assert_eq!(
        gates,
        [
            r#"kubernetes_feature_enabled{name="HPAConfigurableTolerance",stage=""} 1"#,
            r#"kubernetes_feature_enabled{name="HPAGeneration",stage="BETA"} 1"#,
            r#"kubernetes_feature_enabled{name="HPAScaleToZero",stage="BETA"} 0"#,
            r#"kubernetes_feature_enabled{name="PodLevelResources",stage="BETA"} 1"#,
            r#"kubernetes_feature_enabled{name="StaleControllerConsistencyHPA",stage="BETA"} 1"#,
        ],
        "{body}"
    );

    // Sizes: GETs (the scale, discovery, metrics) carry no body and answer with one; the
    // scale PUT carries one.
    let host = &fixture.host;
    let sample_of = |name: &str, verb: &str| {
        sample(&body, &format!(r#"{name}{{host="{host}",verb="{verb}"}}"#))
            .unwrap_or_else(|| panic!("{name} {verb}:\n{body}"))
    };
    assert!(sample_of("rest_client_response_size_bytes_count", "GET") > 0.0);
    assert!(sample_of("rest_client_response_size_bytes_sum", "GET") > 0.0);
    assert!(sample_of("rest_client_request_size_bytes_count", "GET") > 0.0);
    assert_eq!(sample_of("rest_client_request_size_bytes_sum", "GET"), 0.0);
    assert!(sample_of("rest_client_request_size_bytes_sum", "PUT") > 0.0);
    assert!(sample_of("rest_client_response_size_bytes_sum", "PUT") > 0.0);
    for name in [
        "rest_client_request_size_bytes",
        "rest_client_response_size_bytes",
    ] {
        assert!(
            body.contains(&format!(
                r#"{name}_bucket{{host="{host}",verb="GET",le="16777216"}}"#
            )),
            "{name}:\n{body}"
        );
    }
    c.proc.sigterm();
    c.exit_within(RENEW_DEADLINE + Duration::from_secs(2)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_instance_stands_by_then_takes_over_after_sigterm() {
    let dir = Scratch::new("takeover");
    let fixture = Fixture::start(&dir).await;
    let ports = free_ports(2);

    let mut a = Controller::start("controller-a", &fixture, ports[0], &dir);
    let a_id = eventually("A to take the lease", WAIT, async || {
        a.proc.assert_running();
        fixture.lease_holder().await.filter(|h| !h.is_empty())
    })
    .await;

    let mut b = Controller::start("controller-b", &fixture, ports[1], &dir);
    let (code, body) = b.get("/healthz").await;
    assert_eq!((code, body.as_str()), (StatusCode::OK, "ok"));
    eventually("B to report itself a backup", WAIT, async || {
        b.proc.assert_running();
        (sample(&b.metrics().await, MASTER_STATUS) == Some(0.0)).then_some(())
    })
    .await;
    // A keeps renewing while B is up, and B neither takes the lease nor reconciles.
    let renewed = fixture.lease().await.unwrap().spec.unwrap().renew_time;
    eventually("A to renew the lease again", WAIT, async || {
        a.proc.assert_running();
        let spec = fixture.lease().await?.spec?;
        (spec.renew_time != renewed).then_some(())
    })
    .await;
    assert_eq!(fixture.lease_holder().await.as_ref(), Some(&a_id));
    let body = b.metrics().await;
    assert_eq!(sample(&body, MASTER_STATUS), Some(0.0), "{body}");
    assert!(
        !body.contains("horizontal_pod_autoscaler_controller_reconciliations_total{"),
        "a backup does not reconcile:\n{body}"
    );
    assert_eq!(sample(&a.metrics().await, MASTER_STATUS), Some(1.0));

    // A stops: exit 0 within the drain bound, and the lease no longer names it.
    a.proc.sigterm();
    let stopped = Instant::now();
    let status = a.exit_within(RENEW_DEADLINE + Duration::from_secs(2)).await;
    assert_eq!(status.code(), Some(0), "{}", a.proc.log());
    assert_ne!(
        fixture.lease_holder().await.as_ref(),
        Some(&a_id),
        "A released the lease"
    );

    let b_id = eventually("B to take the lease", WAIT, async || {
        b.proc.assert_running();
        fixture.lease_holder().await.filter(|h| !h.is_empty())
    })
    .await;
    eprintln!(
        "B took the lease {:?} after A was sent SIGTERM",
        stopped.elapsed()
    );
    assert_ne!(b_id, a_id);
    eventually("B to report itself the leader and reconcile", WAIT, async || {
        b.proc.assert_running();
        let body = b.metrics().await;
        let reconciled = sample(
            &body,
            r#"horizontal_pod_autoscaler_controller_reconciliations_total{action="none",error="none"}"#,
        );
        (sample(&body, MASTER_STATUS) == Some(1.0) && reconciled.is_some()).then_some(())
    })
    .await;
    assert_eq!(fixture.scale_replicas().await, 4, "scaled by A, kept by B");

    b.proc.sigterm();
    let status = b.exit_within(RENEW_DEADLINE + Duration::from_secs(2)).await;
    assert_eq!(status.code(), Some(0), "{}", b.proc.log());
}

/// A kubeconfig like the fixture's, pointing at `addr` (a proxy in front of it).
fn kubeconfig_via(fixture: &Fixture, addr: SocketAddr, dir: &Scratch, name: &str) -> PathBuf {
    let text = std::fs::read_to_string(&fixture.kubeconfig).unwrap();
    assert!(text.contains(&fixture.host));
    let path = dir.path(name);
    std::fs::write(&path, text.replace(&fixture.host, &addr.to_string())).unwrap();
    path
}

fn signal(proc: &Proc, sig: &str) {
    let status = Command::new("kill")
        .args([sig, &proc.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill {sig}");
}

async fn set_replicas(fixture: &Fixture, replicas: i32) {
    let api = Api::<Deployment>::namespaced(fixture.client.clone(), "default");
    let patch = serde_json::json!({"spec": {"replicas": replicas}});
    api.patch_scale(
        "web",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await
    .unwrap();
}

async fn lease_events(fixture: &Fixture) -> Vec<String> {
    Api::<Event>::namespaced(fixture.client.clone(), "default")
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("LeaderElection"))
        .filter_map(|e| e.message)
        .collect()
}

/// A leader whose requests go through a proxy (leading, the target scaled to 4) and a
/// standby talking to the server directly (reporting itself a backup).
struct Pair {
    fixture: Fixture,
    proxy: std::sync::Arc<common::proxy::ProxyState>,
    a: Controller,
    a_id: String,
    b: Controller,
}

async fn leader_via_proxy_and_standby(dir: &Scratch) -> Pair {
    let fixture = Fixture::start(dir).await;
    let (proxy_addr, proxy) = common::proxy::start(fixture.host.clone()).await;
    let via = kubeconfig_via(&fixture, proxy_addr, dir, "kubeconfig-proxy");
    let ports = free_ports(2);
    let mut a = Controller::start_with("leader", &via, ports[0], dir, &[]);
    let a_id = eventually("A to take the lease", WAIT, async || {
        a.proc.assert_running();
        fixture.lease_holder().await.filter(|h| !h.is_empty())
    })
    .await;
    eventually("A to scale to 4", WAIT, async || {
        a.proc.assert_running();
        (fixture.scale_replicas().await == 4).then_some(())
    })
    .await;
    let mut b = Controller::start("standby", &fixture, ports[1], dir);
    eventually("B to report itself a backup", WAIT, async || {
        b.proc.assert_running();
        (sample(&b.metrics().await, MASTER_STATUS) == Some(0.0)).then_some(())
    })
    .await;
    Pair {
        fixture,
        proxy,
        a,
        a_id,
        b,
    }
}

/// Leads through a proxy that then holds every Lease request: the leader stops at its
/// renew deadline (exit 1), and no scale or status write of it reaches the server after the
/// standby acquired the lease, even when the target is then moved and rescaled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_lease_updates_hang_writes_nothing_after_a_standby_takes_over() {
    let dir = Scratch::new("hang");
    let Pair {
        fixture,
        proxy,
        mut a,
        a_id,
        mut b,
    } = leader_via_proxy_and_standby(&dir).await;

    proxy
        .freeze_leases
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let status = a.exit_within(WAIT).await;
    assert_eq!(status.code(), Some(1), "leadership lost: {}", a.proc.log());
    let b_id = eventually("B to take the lease", WAIT, async || {
        b.proc.assert_running();
        fixture
            .lease_holder()
            .await
            .filter(|h| !h.is_empty() && *h != a_id)
    })
    .await;
    let acquired = fixture.acquire_time().await;
    set_replicas(&fixture, 2).await;
    eventually("B to rescale to 4", WAIT, async || {
        b.proc.assert_running();
        (fixture.scale_replicas().await == 4).then_some(())
    })
    .await;
    let writes = proxy.controller_writes();
    assert!(!writes.is_empty(), "A wrote while leading");
    let late: Vec<_> = writes.iter().filter(|w| w.at >= acquired).collect();
    assert!(
        late.is_empty(),
        "writes of the old leader after {acquired}: {late:?}"
    );

    let events = eventually("the LeaderElection events", WAIT, async || {
        let events = lease_events(&fixture).await;
        (events.len() >= 3).then_some(events)
    })
    .await;
    for expected in [
        format!("{a_id} became leader"),
        format!("{a_id} stopped leading"),
        format!("{b_id} became leader"),
    ] {
        assert!(events.contains(&expected), "{expected} in {events:?}");
    }
    // Log lines carry no colour codes in a file: klog's, and `hpactl serve`'s.
    assert!(!a.proc.log().contains('\u{1b}'), "{}", a.proc.log());
    let served = fixture._server.log();
    assert!(served.contains("serving scenario"), "{served}");
    assert!(!served.contains('\u{1b}'), "{served}");
}

/// A leader frozen (SIGSTOP) past its renew deadline while a standby takes over writes
/// nothing once it resumes, and then stops (exit 1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_leader_writes_nothing_after_it_resumes() {
    let dir = Scratch::new("frozen");
    let Pair {
        fixture,
        proxy,
        mut a,
        a_id,
        mut b,
    } = leader_via_proxy_and_standby(&dir).await;

    signal(&a.proc, "-STOP");
    set_replicas(&fixture, 2).await;
    eventually("B to take the lease", WAIT, async || {
        b.proc.assert_running();
        fixture
            .lease_holder()
            .await
            .filter(|h| !h.is_empty() && *h != a_id)
    })
    .await;
    let acquired = fixture.acquire_time().await;
    eventually("B to rescale to 4", WAIT, async || {
        b.proc.assert_running();
        (fixture.scale_replicas().await == 4).then_some(())
    })
    .await;
    // Move the target again while A resumes: only B may answer it.
    set_replicas(&fixture, 3).await;
    signal(&a.proc, "-CONT");
    let status = a.exit_within(WAIT).await;
    assert_eq!(status.code(), Some(1), "leadership lost: {}", a.proc.log());
    eventually("B to rescale to 4 again", WAIT, async || {
        b.proc.assert_running();
        (fixture.scale_replicas().await == 4).then_some(())
    })
    .await;
    let late: Vec<_> = proxy
        .controller_writes()
        .into_iter()
        .filter(|w| w.at >= acquired)
        .collect();
    assert!(
        late.is_empty(),
        "writes of the frozen leader after {acquired}: {late:?}"
    );
}

/// Copies the scenario's HPA `n` times, so the queue holds hundreds of keys.
async fn many_hpas(fixture: &Fixture, n: usize) {
    let api = Api::<HorizontalPodAutoscaler>::namespaced(fixture.client.clone(), "default");
    let web = fixture.hpa().await;
    for i in 0..n {
        let mut hpa = web.clone();
        hpa.metadata = kube::api::ObjectMeta {
            name: Some(format!("web-{i}")),
            namespace: Some("default".into()),
            ..Default::default()
        };
        hpa.status = None;
        api.create(&kube::api::PostParams::default(), &hpa)
            .await
            .unwrap();
    }
}

/// SIGTERM with hundreds of queued keys: exit 0 within 2 s, and no write leaves after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_hundreds_of_queued_keys_exits_within_two_seconds() {
    let dir = Scratch::new("queued");
    let fixture = Fixture::start(&dir).await;
    many_hpas(&fixture, 300).await;
    let (proxy_addr, proxy) = common::proxy::start(fixture.host.clone()).await;
    let via = kubeconfig_via(&fixture, proxy_addr, &dir, "kubeconfig-proxy");
    let ports = free_ports(1);
    let mut c = Controller::start_with(
        "controller",
        &via,
        ports[0],
        &dir,
        &["--leader-elect=false"],
    );
    eventually("status writes to flow", WAIT, async || {
        c.proc.assert_running();
        (proxy.controller_writes().len() > 20).then_some(())
    })
    .await;
    let signalled = jiff::Timestamp::now();
    c.proc.sigterm();
    let status = c.exit_within(Duration::from_secs(2)).await;
    assert_eq!(status.code(), Some(0), "{}", c.proc.log());
    // The signal takes a moment to be delivered; nothing may leave after that.
    let slack = jiff::SignedDuration::from_millis(500);
    let late: Vec<_> = proxy
        .controller_writes()
        .into_iter()
        .filter(|w| w.at > signalled + slack)
        .collect();
    assert!(late.is_empty(), "writes after SIGTERM: {late:?}");
}

/// SIGTERM while the API server stopped answering: exit 0 within 2 s, lease release
/// included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_a_frozen_api_server_exits_within_two_seconds() {
    let dir = Scratch::new("frozen-api");
    let fixture = Fixture::start(&dir).await;
    let (proxy_addr, proxy) = common::proxy::start(fixture.host.clone()).await;
    let via = kubeconfig_via(&fixture, proxy_addr, &dir, "kubeconfig-proxy");
    let ports = free_ports(1);
    let mut c = Controller::start_with("controller", &via, ports[0], &dir, &[]);
    eventually("the controller to lead and scale", WAIT, async || {
        c.proc.assert_running();
        (fixture.scale_replicas().await == 4).then_some(())
    })
    .await;
    proxy
        .freeze_all
        .store(true, std::sync::atomic::Ordering::SeqCst);
    set_replicas(&fixture, 2).await;
    c.proc.sigterm();
    let status = c.exit_within(Duration::from_secs(2)).await;
    assert_eq!(status.code(), Some(0), "{}", c.proc.log());
}

/// An API server that cannot be reached: exit 1 after KCM's 10 s wait, with the cause.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_api_server_ends_the_process_with_the_cause() {
    let dir = Scratch::new("unreachable");
    let port = free_ports(2);
    let kubeconfig = dir.path("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:{}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user: {{}}\n",
            port[0]
        ),
    )
    .unwrap();
    let mut c = Controller::start_with(
        "controller",
        &kubeconfig,
        port[1],
        &dir,
        &["--leader-elect=false"],
    );
    let started = Instant::now();
    let status = c.exit_within(Duration::from_secs(20)).await;
    let waited = started.elapsed();
    assert_eq!(status.code(), Some(1), "{}", c.proc.log());
    assert!(waited >= Duration::from_secs(9), "{waited:?}");
    let log = c.proc.log();
    let expected = format!(
        "failed to wait for apiserver being healthy: timed out waiting for the condition: failed to get apiserver /healthz status: Get \"http://127.0.0.1:{}/healthz\": dial tcp 127.0.0.1:{}: connect: connection refused",
        port[0], port[0]
    );
    assert!(log.contains(&expected), "{log}");
}

/// The failover scenario of the persisted history.
const HISTORY_SCENARIO: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../test-fixtures/real-cluster/history-failover.yaml"
);

/// Waits until `b` scaled `up` to 10 (4 pods more than the old leader's 6).
async fn b_scales_up_to_10(fixture: &Fixture, b: &mut Controller, what: &str) {
    eventually(what, WAIT, async || {
        b.proc.assert_running();
        (fixture.replicas_of("up").await == 10).then_some(())
    })
    .await;
}

/// A leader (`a`) killed with SIGKILL once it scaled `up` from 2 to 6, and the standby (`b`)
/// that takes over, started with `extra` flags each; returns when `b` leads, with the time
/// `up` reached 6.
async fn kill_the_leader_after_a_scale_up(
    fixture: &Fixture,
    dir: &Scratch,
    extra: &[&str],
    after: Duration,
) -> (Controller, Controller, Instant) {
    let ports = free_ports(2);
    let mut a = Controller::start_with("a", &fixture.kubeconfig, ports[0], dir, extra);
    let a_id = eventually("A to take the lease", WAIT, async || {
        a.proc.assert_running();
        fixture.lease_holder().await.filter(|h| !h.is_empty())
    })
    .await;
    let scaled = eventually("A to scale up from 2 to 6", WAIT, async || {
        a.proc.assert_running();
        (fixture.replicas_of("up").await == 6).then(Instant::now)
    })
    .await;
    let mut b = Controller::start_with("b", &fixture.kubeconfig, ports[1], dir, extra);
    eventually("B to report itself a backup", WAIT, async || {
        b.proc.assert_running();
        (sample(&b.metrics().await, MASTER_STATUS) == Some(0.0)).then_some(())
    })
    .await;
    tokio::time::sleep(after.saturating_sub(scaled.elapsed())).await;
    signal(&a.proc, "-KILL");
    eventually("B to take the lease", WAIT, async || {
        b.proc.assert_running();
        fixture
            .lease_holder()
            .await
            .filter(|h| !h.is_empty() && *h != a_id)
    })
    .await;
    (a, b, scaled)
}

/// Issue 26, item 1, on the fixture server: the leader scales `up` by 4 under a policy of 4
/// pods per 60 s and is killed 10 s later. The new leader, reading the history the old one
/// wrote to its ConfigMaps, adds no pod before those 60 s are over (then it adds 4 more),
/// and scales `down` when the old leader's 30 s downscale window ends, not 30 s after it took
/// over. With `--persist-hpa-history=false` (upstream's memory-only history), the new leader
/// adds 4 pods at once: what the test would see without the persisted history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_keeps_the_policy_period_and_the_window_of_the_old_one() {
    // Upstream's behaviour first: the control.
    {
        let dir = Scratch::new("history-off");
        let fixture = Fixture::start_scenario(&dir, Path::new(HISTORY_SCENARIO)).await;
        let off = ["--persist-hpa-history=false"];
        let (_a, mut b, scaled) =
            kill_the_leader_after_a_scale_up(&fixture, &dir, &off, Duration::from_secs(3)).await;
        b_scales_up_to_10(
            &fixture,
            &mut b,
            "B, with no history, to add 4 pods at once",
        )
        .await;
        assert!(
            scaled.elapsed() < Duration::from_secs(50),
            "without the history, B scaled within the old leader's period ({:?} after)",
            scaled.elapsed()
        );
    }

    let dir = Scratch::new("history");
    let fixture = Fixture::start_scenario(&dir, Path::new(HISTORY_SCENARIO)).await;
    let (_a, mut b, scaled) =
        kill_the_leader_after_a_scale_up(&fixture, &dir, &[], Duration::from_secs(10)).await;
    let took_over = Instant::now();
    // The old leader saw `down`'s metric drop (at 5 s) before it was killed: its last
    // recommendation of 6 came before that status.
    let seen_drop = fixture
        .hpa_named("down")
        .await
        .status
        .and_then(|s| s.current_metrics)
        .and_then(|m| m.into_iter().next())
        .and_then(|m| m.external)
        .map(|e| e.current);
    // 600 over 6 replicas is an average of 100; after the drop, 100 over 6.
    let average = seen_drop.and_then(|c| c.average_value).map(|q| q.0);
    assert!(
        average.as_ref().is_some_and(|a| a != "100"),
        "the old leader saw the drop before it was killed: {average:?}"
    );
    let stored: Vec<String> =
        Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(fixture.client.clone(), "default")
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|cm| cm.data.and_then(|d| d.get("history").cloned()))
            .collect();
    assert!(
        stored
            .iter()
            .any(|h| h.contains("default/up") && h.contains("\"up\"")),
        "the old leader's scale-up event is stored: {stored:?}"
    );

    // Until the policy's period ends, B adds nothing; meanwhile `down` follows the old
    // leader's window.
    let mut down_at = None;
    while scaled.elapsed() < Duration::from_secs(57) {
        b.proc.assert_running();
        assert_eq!(
            fixture.replicas_of("up").await,
            6,
            "B added pods {:?} after the old leader's scale-up, within its 60 s period",
            scaled.elapsed()
        );
        if down_at.is_none() && fixture.replicas_of("down").await < 6 {
            down_at = Some(took_over.elapsed());
        }
        tokio::time::sleep(POLL).await;
    }
    b_scales_up_to_10(&fixture, &mut b, "B to add 4 pods once the period is over").await;
    // The old leader's last recommendation of 6 came just before the drop (5 s after the
    // server started, a few seconds before `up` was scaled), so its 30 s window ends about
    // 20 s after B took over (it was killed 10 s after `up` was scaled, and B waited for the
    // Lease to expire). B's own window would end 30 s after it took over.
    let down_at = down_at.expect("B scaled `down` within the 57 s");
    let since_scaled = took_over.duration_since(scaled) + down_at;
    assert!(
        down_at < Duration::from_secs(27),
        "B scaled `down` {down_at:?} after it took over: it restarted the window instead of \
         continuing the old leader's"
    );
    assert!(
        since_scaled > Duration::from_secs(28),
        "B scaled `down` {since_scaled:?} after `up` was scaled: before the old leader's \
         window ended"
    );
}
