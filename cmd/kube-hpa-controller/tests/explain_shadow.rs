//! Issue 13 end to end, with the built binaries: `hpactl explain` reads the decisions of a
//! running `kube-hpa-controller` serving a scenario, and computes one afresh; a
//! `--shadow` controller against the fixture server writes nothing (asserted from the
//! server's write log) while a scripted "active controller" (this test) writes lagging,
//! differing and agreeing statuses.
//!
//! Every wait is a bounded poll of something observable; child processes are killed when
//! their guard drops, and their logs are printed when a test fails.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;
#[path = "../../../hack/tests/free_ports.rs"]
mod free_ports;

use free_ports::free_port;
use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use hpa_fixtures::serve::OffsetClock;
use hpa_fixtures::server::FixtureServer;
use hpa_fixtures::store::Store;
use http::StatusCode;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::api::PostParams;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};
use rustls::pki_types::CertificateDer;
use serde_json::{Value, json};

const SCENARIO: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../test-fixtures/scenarios/resource/cpu-utilization-scale-up.yaml"
);
/// The scenario's expected event message (upstream's).
const RESCALE_MESSAGE: &str =
    "New size: 4; reason: cpu resource utilization (percentage of request) above target";
const WAIT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(150);

struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "explain-{tag}-{}-{}",
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

struct Proc {
    name: String,
    child: Child,
    log: PathBuf,
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
            .unwrap_or_else(|e| panic!("starting {name}: {e}"));
        Proc {
            name: name.to_string(),
            child,
            log,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn assert_running(&mut self) {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!("{} exited early with {status}:\n{}", self.name, self.log());
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("----- {} log -----\n{}", self.name, self.log());
        }
    }
}

async fn eventually<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(POLL).await;
    }
}

/// `hpactl`, next to this package's binary (`common::sibling_binary`).
fn hpactl() -> PathBuf {
    common::sibling_binary::sibling_binary(env!("CARGO_BIN_EXE_kube-hpa-controller"), "hpactl")
}

async fn client_for(kubeconfig: &Path) -> Client {
    let kc = Kubeconfig::read_from(kubeconfig).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    config.default_retry = false;
    Client::try_from(config).unwrap()
}

/// Starts `kube-hpa-controller` on the scenario's API with `extra` flags.
fn controller(kubeconfig: &Path, port: u16, dir: &Scratch, extra: &[&str]) -> Proc {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kube-hpa-controller"));
    cmd.arg("--kubeconfig").arg(kubeconfig).args([
        "--bind-address=127.0.0.1",
        &format!("--secure-port={port}"),
        "--authorization-always-allow-paths=/healthz,/metrics,/debug/*",
        "--horizontal-pod-autoscaler-sync-period=1s",
        "--horizontal-pod-autoscaler-downscale-stabilization=0s",
        "--leader-elect-lease-duration=4s",
        "--leader-elect-renew-deadline=3s",
        "--leader-elect-retry-period=500ms",
        "--leader-elect-resource-namespace=default",
    ]);
    cmd.args(extra);
    Proc::spawn("kube-hpa-controller", cmd, dir.path("controller.log"))
}

/// The CA of the controller's generated serving certificate, once it listens.
async fn serving_ca(proc: &mut Proc, addr: SocketAddr) -> CertificateDer<'static> {
    eventually("the secure port to accept connections", async || {
        proc.assert_running();
        tokio::net::TcpStream::connect(addr).await.ok()
    })
    .await;
    common::presented_ca(addr).await
}

async fn get_json(
    addr: SocketAddr,
    ca: &CertificateDer<'static>,
    path: &str,
) -> (StatusCode, Value) {
    let (code, _, body) = common::https_get(addr, ca, path, None).await;
    (code, serde_json::from_str(&body).unwrap_or(Value::Null))
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} failed with {}:\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hpactl_explain_reads_the_running_controller_and_computes_afresh() {
    let dir = Scratch::new("explain");
    let kubeconfig = dir.path("kubeconfig");
    let mut cmd = Command::new(hpactl());
    cmd.arg("serve")
        .arg(SCENARIO)
        .args(["--addr", "127.0.0.1:0", "--kubeconfig-out"])
        .arg(&kubeconfig);
    let mut server = Proc::spawn("hpactl serve", cmd, dir.path("serve.log"));
    let client = eventually("hpactl serve to write its kubeconfig", async || {
        server.assert_running();
        Kubeconfig::read_from(&kubeconfig).ok()?;
        let client = client_for(&kubeconfig).await;
        client.apiserver_version().await.ok()?;
        Some(client)
    })
    .await;

    // No controller has run yet: the fresh computation says what it would do, writes
    // nothing, and says it has no history.
    let out = run(Command::new(hpactl())
        .args(["explain", "default/web", "--kubeconfig"])
        .arg(&kubeconfig));
    let fresh = String::from_utf8(out.stdout).unwrap();
    assert!(fresh.contains("No history"), "{fresh}");
    assert!(
        fresh.contains(
            "[0] cpu resource utilization (percentage of request): 4 replicas  <- the largest, used"
        ),
        "{fresh}"
    );
    assert!(
        fresh.contains("scale: 2 -> 4 decided, not written"),
        "{fresh}"
    );
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let replicas = |d: Deployment| d.spec.replicas;
    assert_eq!(replicas(deployments.get("web").await.unwrap()), Some(2));

    let port = free_port();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    // A 3 s sync period keeps the first decision among the last 10 for 30 s, however slow
    // the machine is between the scale-up and the explain below.
    let mut c = controller(
        &kubeconfig,
        port,
        &dir,
        &[
            "--leader-elect=false",
            "--horizontal-pod-autoscaler-sync-period=3s",
        ],
    );
    eventually("the Deployment to be scaled to 4", async || {
        c.assert_running();
        (replicas(deployments.get("web").await.ok()?) == Some(4)).then_some(())
    })
    .await;
    let ca = serving_ca(&mut c, addr).await;
    let ca_file = dir.path("ca.pem");
    std::fs::write(
        &ca_file,
        format!(
            "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
            base64_lines(&ca)
        ),
    )
    .unwrap();

    // The first kept decision is the scale-up, as upstream writes it.
    let url = format!("https://127.0.0.1:{port}");
    let out = run(Command::new(hpactl())
        .args([
            "explain",
            "default/web",
            "--all",
            "--controller",
            &url,
            "--kubeconfig",
        ])
        .arg(&kubeconfig)
        .arg("--certificate-authority")
        .arg(&ca_file));
    let text = String::from_utf8(out.stdout).unwrap();
    let first = text.split("\nHPA default/web").next().unwrap();
    for want in [
        "HPA default/web: decision at ",
        "Target Deployment/default/web: spec.replicas 2, status.replicas 2; minReplicas 1, maxReplicas 10",
        "target: average utilization 50% of request",
        "read:   average utilization 100%, average value 100m",
        "pods:   2 ready, 0 unready, 0 missing, 0 ignored",
        "usage ratio 2.000 (outside tolerance)",
        "[0] cpu resource utilization (percentage of request): 4 replicas  <- the largest, used",
        "scale-up limit (no spec.behavior): max(2 x current, 4) = 4",
        "bounds: minReplicas 1, maxReplicas 10: DesiredWithinRange",
        "=> desired replicas 4",
        "scale: 2 -> 4\n",
        "condition AbleToScale=True SucceededRescale:",
        "condition ScalingActive=True ValidMetricFound:",
        "condition ScalingLimited=False DesiredWithinRange:",
        &format!("event Normal SuccessfulRescale: {RESCALE_MESSAGE}"),
    ] {
        assert!(first.contains(want), "missing {want:?} in:\n{first}");
    }
    assert!(first.contains("(decision 1 of the last "), "{first}");

    // JSON, and the kubectl plugin name (a copy of hpactl), with --insecure-skip-tls-verify.
    let plugin = dir.path("kubectl-hpa_explain");
    std::fs::copy(hpactl(), &plugin).unwrap();
    let out = run(Command::new(&plugin)
        .args([
            "default/web",
            "-o",
            "json",
            "--insecure-skip-tls-verify",
            "--controller",
            &url,
            "--kubeconfig",
        ])
        .arg(&kubeconfig));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["version"], "hpa.trace/v1");
    assert_eq!(v["hpa"], "default/web");
    assert_eq!(v["desiredReplicas"], 4);

    // Without trusting the self-signed certificate, it says what to do.
    let out = Command::new(hpactl())
        .args([
            "explain",
            "default/web",
            "--controller",
            &url,
            "--kubeconfig",
        ])
        .arg(&kubeconfig)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--certificate-authority"));
    // An HPA without decisions: exit 1 and the server's reason.
    let out = Command::new(hpactl())
        .args([
            "explain",
            "default/nope",
            "--insecure-skip-tls-verify",
            "--controller",
            &url,
            "--kubeconfig",
        ])
        .arg(&kubeconfig)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("404"),
        "{out:?}"
    );

    // The dashboard series of this project's prefix.
    let (code, _, body) = common::https_get(addr, &ca, "/metrics", None).await;
    assert_eq!(code, StatusCode::OK);
    assert!(body.contains(
        r#"kube_hpa_controller_metric_proposal_replicas{hpa_name="web",metric_index="0",metric_name="cpu",metric_type="Resource",namespace="default"} 4"#
    ), "{body}");
    assert!(body.contains(
        r#"kube_hpa_controller_winning_metric{hpa_name="web",metric_index="0",metric_name="cpu",metric_type="Resource",namespace="default"} 1"#
    ), "{body}");
    // The list, in brief.
    let (code, list) = get_json(addr, &ca, "/debug/hpa").await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(list["version"], "hpa.trace/v1");
    let item = &list["items"][0];
    assert_eq!(item["hpa"], "default/web");
    assert_eq!(item["desiredReplicas"], 4);
    assert_eq!(
        item["winner"],
        "cpu resource utilization (percentage of request)"
    );
    // Deleting the HPA removes its series and its traces.
    Api::<HorizontalPodAutoscaler>::namespaced(client.clone(), "default")
        .delete("web", &Default::default())
        .await
        .unwrap();
    eventually("the HPA's series and traces to go", async || {
        let (_, _, body) = common::https_get(addr, &ca, "/metrics", None).await;
        let (code, _) = get_json(addr, &ca, "/debug/hpa/default/web").await;
        (!body.contains("kube_hpa_controller_metric_proposal_replicas{")
            && code == StatusCode::NOT_FOUND)
            .then_some(())
    })
    .await;
}

/// Base64 of a DER certificate in 64-column lines (PEM body).
fn base64_lines(der: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in der.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out.as_bytes()
        .chunks(64)
        .map(|l| String::from_utf8(l.to_vec()).unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The status upstream's controller writes for the scenario (its expectation), with the
/// replica counts and reasons given.
fn active_status(current: i32, desired: i32, able_reason: &str) -> Value {
    json!({
        "currentReplicas": current,
        "desiredReplicas": desired,
        "currentMetrics": [{
            "type": "Resource",
            "resource": {"name": "cpu", "current": {"averageUtilization": 100, "averageValue": "100m"}}
        }],
        "conditions": [
            {"type": "AbleToScale", "status": "True", "reason": able_reason, "message": "", "lastTransitionTime": "2025-01-01T00:00:00Z"},
            {"type": "ScalingActive", "status": "True", "reason": "ValidMetricFound", "message": "", "lastTransitionTime": "2025-01-01T00:00:00Z"},
            {"type": "ScalingLimited", "status": "False", "reason": "DesiredWithinRange", "message": "", "lastTransitionTime": "2025-01-01T00:00:00Z"}
        ]
    })
}

/// The scripted active controller: PUT the HPA's status.
async fn write_status(client: &Client, status: Value) {
    let api: Api<HorizontalPodAutoscaler> = Api::namespaced(client.clone(), "default");
    let mut hpa = api.get("web").await.unwrap();
    hpa.status = Some(serde_json::from_value(status).unwrap());
    api.replace_status("web", &PostParams::default(), &hpa)
        .await
        .unwrap();
}

async fn latest_shadow(addr: SocketAddr, ca: &CertificateDer<'static>) -> Option<Value> {
    let (code, v) = get_json(addr, ca, "/debug/shadow").await;
    if code != StatusCode::OK {
        return None;
    }
    let item = v["items"]
        .as_array()?
        .iter()
        .find(|i| i["hpa"] == "default/web")?
        .clone();
    Some(item)
}

fn sample(body: &str, series: &str) -> f64 {
    body.lines()
        .find_map(|l| {
            l.strip_prefix(series)?
                .strip_prefix(' ')?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadow_writes_nothing_and_tells_lag_from_difference() {
    let dir = Scratch::new("shadow");
    let scenario = hpa_fixtures::scenario::load_file(Path::new(SCENARIO)).unwrap();
    let store = Store::new(Arc::new(OffsetClock::new(scenario.start)));
    store.load_scenario(&scenario).unwrap();
    let server = FixtureServer::start_local(store.clone()).await.unwrap();
    let kubeconfig = dir.path("kubeconfig");
    std::fs::write(&kubeconfig, server.kubeconfig()).unwrap();
    let client = client_for(&kubeconfig).await;
    let mark = store.write_mark();

    let port = free_port();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    // Leader election on: the shadow's Lease is its own (kube-hpa-controller-shadow).
    let mut c = controller(&kubeconfig, port, &dir, &["--shadow", "--v=2"]);
    let ca = serving_ca(&mut c, addr).await;

    // 1. Nothing written by the active controller yet: not compared.
    let item = eventually("a first shadow comparison", async || {
        c.assert_running();
        latest_shadow(addr, &ca).await
    })
    .await;
    assert_eq!(item["latest"]["result"], "pending", "{item}");
    assert_eq!(item["latest"]["pending"], "noStatus", "{item}");
    let (_, v) = get_json(addr, &ca, "/debug/shadow").await;
    assert_eq!(v["shadow"], true);
    let (code, traces) = get_json(addr, &ca, "/debug/hpa/default/web").await;
    assert_eq!(code, StatusCode::OK);
    let latest = traces["decisions"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(latest["desiredReplicas"], 4);
    assert_eq!(latest["write"]["scale"], "shadow");

    // 2. The active controller lags: its status is from when the target had 7 replicas.
    let mut own_status_writes = 0;
    write_status(&client, active_status(7, 7, "ReadyForNewScale")).await;
    own_status_writes += 1;
    let item = eventually("a lagging comparison", async || {
        let item = latest_shadow(addr, &ca).await?;
        (item["latest"]["pending"] == "targetChanged").then_some(item)
    })
    .await;
    assert_eq!(item["latest"]["result"], "pending");
    assert!(item["differences"].as_array().unwrap().is_empty(), "{item}");

    // 3. Same inputs (2 replicas, 100% CPU), a different decision: it kept 2.
    write_status(&client, active_status(2, 2, "ReadyForNewScale")).await;
    own_status_writes += 1;
    let item = eventually("a difference", async || {
        let item = latest_shadow(addr, &ca).await?;
        (item["latest"]["result"] == "differ").then_some(item)
    })
    .await;
    let diff = &item["differences"].as_array().unwrap()[0];
    let lines: Vec<&str> = diff["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap())
        .collect();
    assert!(
        lines.contains(&"desiredReplicas: ours 4, theirs 2"),
        "{diff}"
    );
    assert!(
        lines.contains(&"target replicas: ours 4, theirs 2"),
        "{diff}"
    );
    assert_eq!(diff["trace"]["desiredReplicas"], 4);
    assert_eq!(diff["theirs"]["desiredReplicas"], 2);
    // hpactl explain on the shadow: its decision and how it compared.
    let out = run(Command::new(hpactl())
        .args([
            "explain",
            "default/web",
            "--insecure-skip-tls-verify",
            "--controller",
        ])
        .arg(format!("https://127.0.0.1:{port}"))
        .arg("--kubeconfig")
        .arg(&kubeconfig));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("Shadow mode: this controller decided and wrote nothing."),
        "{text}"
    );
    assert!(
        text.contains("scale: 2 -> 4 decided, not written"),
        "{text}"
    );
    assert!(
        text.contains("Compared with the active controller (shadow mode)"),
        "{text}"
    );
    assert!(text.contains("desiredReplicas: ours 4, theirs 2"), "{text}");

    // 4. It scales to 4 and writes upstream's status for the scenario: agree.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let mut scale = deployments.get_scale("web").await.unwrap();
    scale.spec.get_or_insert_with(Default::default).replicas = Some(4);
    deployments
        .replace_scale("web", &PostParams::default(), &scale)
        .await
        .unwrap();
    write_status(&client, active_status(2, 4, "SucceededRescale")).await;
    own_status_writes += 1;
    let item = eventually("agreement", async || {
        let item = latest_shadow(addr, &ca).await?;
        (item["latest"]["result"] == "agree").then_some(item)
    })
    .await;
    assert_eq!(item["latest"]["ours"]["currentReplicas"], 2, "{item}");

    let (_, _, metrics) = common::https_get(addr, &ca, "/metrics", None).await;
    for series in [
        r#"kube_hpa_controller_shadow_comparisons_total{result="agree"}"#,
        r#"kube_hpa_controller_shadow_comparisons_total{result="differ"}"#,
        r#"kube_hpa_controller_shadow_not_compared_total{reason="no_status"}"#,
        r#"kube_hpa_controller_shadow_not_compared_total{reason="target_changed"}"#,
    ] {
        assert!(sample(&metrics, series) >= 1.0, "{series}:\n{metrics}");
    }
    assert!(
        c.log()
            .contains("shadow: decision differs from the active controller's")
    );

    // The write log: only this test's own writes and the shadow's Lease.
    let writes = store.writes_since(mark);
    let mut leases = 0;
    for w in &writes {
        match (
            w.group.as_str(),
            w.resource.as_str(),
            w.subresource.as_deref(),
        ) {
            ("coordination.k8s.io", "leases", None) => {
                assert_eq!(w.name, "kube-hpa-controller-shadow");
                leases += 1;
            }
            ("autoscaling", "horizontalpodautoscalers", Some("status")) => own_status_writes -= 1,
            ("apps", "deployments", Some("scale")) => {
                assert_eq!(
                    w.scale_replicas(),
                    Some(4),
                    "only the test's own scale write"
                );
            }
            _ => panic!("the shadow wrote {:?} {}", w.verb, w.path),
        }
    }
    assert!(leases >= 1);
    assert_eq!(own_status_writes, 0, "status writes other than the test's");
    assert_eq!(writes.iter().filter(|w| w.is_scale()).count(), 1);
    assert!(!writes.iter().any(|w| w.is_event()));
    drop(c);
    server.stop().await.unwrap();
}
