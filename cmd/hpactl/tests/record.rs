//! `hpactl record` end to end: the built controller binary runs against `hpactl serve` of a
//! scenario whose load moves (tests/data/record/moving-load.yaml); `hpactl record` samples it;
//! the recording is a valid scenario without secrets, `hpactl replay` passes it, and fails it
//! once a recorded decision is altered.
//!
//! Every wait is a bounded poll of something observable (the kubeconfig, the HPA's status);
//! the recording itself samples at its own fixed interval. Child processes are killed when
//! their guard drops, and their logs are printed when the test fails.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

#[path = "../../../hack/tests/sibling_binary.rs"]
mod sibling_binary;
use sibling_binary::sibling_binary;

const SERVED: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/record/moving-load.yaml"
);
const WAIT: Duration = Duration::from_secs(60);

struct Proc {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

impl Proc {
    fn spawn(name: &'static str, mut cmd: Command, log: PathBuf) -> Proc {
        let out = File::create(&log).unwrap();
        let err = out.try_clone().unwrap();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {name}: {e}"));
        Proc { name, child, log }
    }

    fn assert_running(&mut self) {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!(
                "{} exited early with {status}:\n{}",
                self.name,
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!(
                "----- {} log -----\n{}",
                self.name,
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
        }
    }
}

fn hpactl() -> &'static str {
    env!("CARGO_BIN_EXE_hpactl")
}

/// `kube-hpa-controller`, next to `hpactl` ([`sibling_binary`]).
fn controller_binary() -> PathBuf {
    sibling_binary(hpactl(), "kube-hpa-controller")
}

/// Polls `check` every 100 ms until it gives a value, failing after [`WAIT`].
fn eventually<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn run(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(hpactl()).args(args).output().unwrap()
}

/// `hpactl record` of namespace `default` through `kubeconfig` into `out`, with `extra`
/// arguments.
fn record(kubeconfig: &Path, duration: &str, interval: &str, extra: &[&str], out: &Path) -> Output {
    Command::new(hpactl())
        .arg("record")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--namespace", "default", "--duration", duration])
        .args(["--interval", interval])
        .args(extra)
        .arg("-o")
        .arg(out)
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Every expected `desiredReplicas` of `default/web`, in step order.
fn expected_desired(doc: &Value) -> Vec<i64> {
    doc["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s.pointer("/expect/hpa/default~1web/status/desiredReplicas"))
        .filter_map(Value::as_i64)
        .collect()
}

#[test]
fn records_a_live_controller_and_replays_it() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("record-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");

    let mut serve = Command::new(hpactl());
    serve
        .arg("serve")
        .arg(SERVED)
        .args(["--addr", "127.0.0.1:0", "--kubeconfig-out"])
        .arg(&kubeconfig);
    let mut server = Proc::spawn("hpactl serve", serve, dir.join("serve.log"));
    eventually("hpactl serve to write its kubeconfig", || {
        server.assert_running();
        let text = std::fs::read_to_string(&kubeconfig).ok()?;
        text.contains("server:").then_some(())
    });

    let mut ctl = Command::new(controller_binary());
    ctl.arg("--kubeconfig").arg(&kubeconfig).args([
        "--leader-elect=false",
        "--secure-port=0",
        "--horizontal-pod-autoscaler-sync-period=1s",
        "--horizontal-pod-autoscaler-downscale-stabilization=0s",
    ]);
    let mut controller = Proc::spawn("kube-hpa-controller", ctl, dir.join("controller.log"));
    // The controller is live once it has written the HPA's status (read with a one-sample
    // recording).
    let probe = dir.join("probe.yaml");
    eventually("the controller's first status write", || {
        controller.assert_running();
        let out = record(&kubeconfig, "0s", "1s", &[], &probe);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        let doc: Value = serde_saphyr::from_str(&std::fs::read_to_string(&probe).ok()?).ok()?;
        doc["objects"]
            .as_array()?
            .iter()
            .any(|o| o.pointer("/status/currentReplicas").is_some())
            .then_some(())
    });

    let recording = dir.join("recorded.yaml");
    let out = record(
        &kubeconfig,
        "30s",
        "3s",
        &[
            "--flag",
            "horizontal-pod-autoscaler-downscale-stabilization=0s",
        ],
        &recording,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    drop(controller);
    drop(server);

    let raw = std::fs::read_to_string(&recording).unwrap();
    // Trimmed: no container env, no managed fields, no server bookkeeping; container images
    // are kept (a real API server requires them to store the scenario's pods again).
    for banned in [
        "SECRET_TOKEN",
        "do-not-record",
        "managedFields",
        "resourceVersion",
    ] {
        assert!(!raw.contains(banned), "{banned} recorded:\n{raw}");
    }
    assert!(raw.contains("image:"), "{raw}");
    let doc: Value = serde_saphyr::from_str(&raw).unwrap();
    // The replay behaves as the live controller did: as the server's version.
    assert_eq!(doc["serverVersion"], "1.37", "{raw}");
    // One step per sample, plus one before a sample for a rescale made in between that its
    // Events single out (timing-dependent: the live controller usually reacts between a
    // sample that sees the new load and the next one).
    let steps = doc["steps"].as_array().unwrap();
    let mut offsets: Vec<&Value> = steps.iter().map(|s| &s["at"]).collect();
    offsets.dedup();
    assert_eq!(offsets.len(), 11, "{raw}");
    for s in steps
        .iter()
        .filter(|s| s.pointer("/expect/events").is_some())
    {
        let events = s.pointer("/expect/events").unwrap();
        assert_eq!(events[0]["reason"], "SuccessfulRescale", "{raw}");
        assert_eq!(
            s.pointer("/expect/scale/0/target").unwrap(),
            "apps/v1/deployments/default/web"
        );
    }
    // The live decisions were recorded: 2 (load on target; unless the controller started
    // after the first load change), then 4 (100%), then 1 (20%).
    let mut phases = expected_desired(&doc);
    phases.dedup();
    assert!(phases == [2, 4, 1] || phases == [4, 1], "{phases:?}\n{raw}");

    let check = run(&["replay".as_ref(), "--check".as_ref(), recording.as_os_str()]);
    assert_eq!(check.status.code(), Some(0), "{}", text(&check));
    let replay = run(&["replay".as_ref(), recording.as_os_str()]);
    assert_eq!(replay.status.code(), Some(0), "{}\n{raw}", text(&replay));
    assert!(text(&replay).contains("PASS recorded-default"));

    // Alter one recorded decision: the replay fails on it.
    let mut altered = doc.clone();
    let step = altered["steps"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|s| {
            s.pointer("/expect/hpa/default~1web/status/desiredReplicas") == Some(&Value::from(4))
        })
        .unwrap();
    step["expect"]["hpa"]["default/web"]["status"]["desiredReplicas"] = Value::from(5);
    let altered_path = dir.join("altered.yaml");
    std::fs::write(&altered_path, serde_saphyr::to_string(&altered).unwrap()).unwrap();
    let replay = run(&["replay".as_ref(), altered_path.as_os_str()]);
    assert_eq!(replay.status.code(), Some(1), "{}", text(&replay));
    let out = text(&replay);
    assert!(
        out.contains("FAIL recorded-default") && out.contains("desiredReplicas"),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
