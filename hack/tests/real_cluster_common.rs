//! Helpers of the real-cluster tests of `cmd/hpactl` (included with `#[path]`, as
//! `sibling_binary.rs` is): the releases under test, a cluster per test taken down when
//! dropped, kubectl and helm runs, polling. Used by every `cmd/hpactl/tests/real_cluster*.rs`.

#![allow(dead_code)]

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use hpa_cluster::{Cluster, KubeRelease, UpOptions};

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The releases under test: `KUBE_VERSIONS` (comma-separated), default 1.37.2.
pub fn releases() -> Vec<KubeRelease> {
    std::env::var("KUBE_VERSIONS")
        .unwrap_or_else(|_| "1.37.2".into())
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(|v| {
            v.parse()
                .unwrap_or_else(|e| panic!("KUBE_VERSIONS: {v:?}: {e}"))
        })
        .collect()
}

/// A cluster for one test, taken down when dropped (its directory kept when the test failed
/// or `HPA_KEEP_CLUSTER` is set).
pub struct TestCluster {
    pub cluster: Cluster,
    path: PathBuf,
}

impl std::ops::Deref for TestCluster {
    type Target = Cluster;
    fn deref(&self) -> &Cluster {
        &self.cluster
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        let _ = hpa_cluster::down(self.cluster.dir());
        if std::thread::panicking() {
            // The processes a test started (not etcd's, the apiserver's or metrics' own):
            // their last lines, where the test's output is all that is kept.
            let logs = self.cluster.dir().join("logs");
            let mut files: Vec<_> = std::fs::read_dir(&logs)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    let stem = p.file_stem().and_then(|s| s.to_str()).unwrap_or("");
                    !matches!(stem, "etcd" | "kube-apiserver" | "metrics-server")
                })
                .collect();
            files.sort();
            for path in files {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                eprintln!("--- last lines of {}:", path.display());
                for line in &lines[lines.len().saturating_sub(8)..] {
                    eprintln!("{}", line.chars().take(400).collect::<String>());
                }
            }
        }
        if std::thread::panicking() || std::env::var_os("HPA_KEEP_CLUSTER").is_some() {
            eprintln!(
                "cluster logs kept in {}",
                self.cluster.dir().join("logs").display()
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Brings up upstream's etcd and kube-apiserver of `release` (with `config/rbac.yaml` and
/// `config/flowschema.yaml` applied) and the fixture server as the metrics APIs.
pub async fn cluster_up(release: KubeRelease, name: &str) -> TestCluster {
    cluster_up_with(release, name, false).await
}

/// [`cluster_up`], with the API server's audit log of every write when `audit`
/// (`Cluster::audit_log`).
pub async fn cluster_up_with(release: KubeRelease, name: &str, audit: bool) -> TestCluster {
    let path = std::env::temp_dir().join(format!(
        "hpa-real-{name}-{release}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
            % 1_000_000_007
    ));
    let options = UpOptions {
        dir: path.clone(),
        release,
        metrics_server: vec![
            env!("CARGO_BIN_EXE_hpactl").to_string(),
            "cluster".into(),
            "serve-metrics".into(),
        ],
        apiserver_flags: Vec::new(),
        etcd_unsafe_no_fsync: true,
        audit,
    };
    let started = Instant::now();
    let cluster = hpa_cluster::up(&options)
        .await
        .unwrap_or_else(|e| panic!("hpactl cluster up {release}: {e}"));
    eprintln!("{name}: cluster {release} up in {:?}", started.elapsed());
    TestCluster { cluster, path }
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Runs `program` with `args` and `stdin`; the output, whatever the exit status.
pub fn run(program: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    use std::io::Write as _;
    let mut child = Command::new(program)
        .args(args)
        .stdin(if stdin.is_some() {
            std::process::Stdio::piped()
        } else {
            std::process::Stdio::null()
        })
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", program.display()));
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        pipe.write_all(input.as_bytes()).unwrap();
    }
    child.wait_with_output().unwrap()
}

/// Runs `program` and returns its stdout; panics with its stderr when it fails.
pub fn run_ok(program: &Path, args: &[&str], stdin: Option<&str>) -> String {
    let out = run(program, args, stdin);
    assert!(
        out.status.success(),
        "{} {args:?}: {}\n{}",
        program.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// kubectl of the cluster's release with its admin kubeconfig.
pub fn kubectl(cluster: &Cluster, args: &[&str], stdin: Option<&str>) -> String {
    let kubeconfig = format!("--kubeconfig={}", cluster.admin_kubeconfig().display());
    let mut all = vec![kubeconfig.as_str()];
    all.extend_from_slice(args);
    run_ok(&cluster.binaries().path("kubectl"), &all, stdin)
}

/// helm as `hack/helm.sh build` built it (the tests' helm; panics if it is not built).
pub fn helm_binary() -> PathBuf {
    let out = run(&repo().join("hack/helm.sh"), &["path"], None);
    assert!(
        out.status.success(),
        "no helm for the chart tests: {} (hack/test.sh builds it; or run: hack/helm.sh build)",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim()).join("helm")
}

/// Polls `check` every 500 ms until it returns `Ok`, or panics after `timeout` with `what`
/// and the last state seen.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let start = Instant::now();
    loop {
        match check().await {
            Ok(v) => return v,
            Err(last) if start.elapsed() > timeout => {
                panic!("{what}: not within {timeout:?}; last: {last}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

/// The holder of this controller's Lease `kube-system/kube-hpa-controller` (empty: none).
pub async fn lease_holder(client: &kube::Client) -> String {
    kube::Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
        client.clone(),
        "kube-system",
    )
    .get_opt("kube-hpa-controller")
    .await
    .unwrap()
    .and_then(|l| l.spec)
    .and_then(|s| s.holder_identity)
    .unwrap_or_default()
}
