//! `hpactl generate` and smoke runs of `hpactl bench` on a tiny cluster: the generated file
//! replays with no write, the bench prints the JSON keys the benchmarks document, and with the
//! controller binary it reads the reconciles from the binary's own metrics. No figure is
//! asserted (benchmarks are commands, not tests).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers panic on failure

use std::process::{Command, Output};

#[path = "../../../hack/tests/sibling_binary.rs"]
mod sibling_binary;

fn hpactl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hpactl"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running hpactl: {e}"))
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn generated_yaml_and_json_replay_without_writes() {
    let dir = std::env::temp_dir().join(format!("hpactl-generate-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (file, metrics) in [("a.yaml", "cpu,pods+external"), ("b.json", "memory+object")] {
        let path = dir.join(file);
        let out = hpactl(&[
            "generate",
            "--hpas",
            "4",
            "--namespaces",
            "2",
            "--pods-per-hpa",
            "2",
            "--metrics",
            metrics,
            "--expect-steady",
            "--name",
            file,
            "-o",
            path.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", text(&out));
    }
    let out = hpactl(&["replay", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).ends_with("2 passed, 0 failed\n"),
        "{}",
        text(&out)
    );
    // Deterministic: the same flags write the same file.
    let again = dir.join("again.yaml");
    hpactl(&[
        "generate",
        "--hpas",
        "4",
        "--namespaces",
        "2",
        "--pods-per-hpa",
        "2",
        "--metrics",
        "cpu,pods+external",
        "--expect-steady",
        "--name",
        "a.yaml",
        "-o",
        again.to_str().unwrap(),
    ]);
    assert_eq!(
        std::fs::read(dir.join("a.yaml")).unwrap(),
        std::fs::read(&again).unwrap()
    );
    let bad = hpactl(&["generate", "--metrics", "gpu"]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bench_smoke_prints_the_documented_keys() {
    let out = hpactl(&[
        "bench",
        "--hpas",
        "3",
        "--pods-per-hpa",
        "2",
        "--namespaces",
        "1",
        "--duration",
        "2s",
        "--json",
        "--",
        "--horizontal-pod-autoscaler-sync-period=1s",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for key in [
        "hpas",
        "pods",
        "sync_period_s",
        "duration_s",
        "requests_per_hpa_per_sync",
        "full_pass_s",
        "reconcile_interval_s",
        "cpu_s_per_reconcile",
        "peak_rss_mib",
        "upstream_requests_per_hpa_per_sync",
    ] {
        assert!(v.get(key).is_some(), "{key} missing in {v}");
    }
    assert_eq!(v["hpas"], 3);
    assert_eq!(v["pods"], 6);
    assert_eq!(v["sync_period_s"], 1.0);
    assert_eq!(v["upstream_requests_per_hpa_per_sync"], 2.0);
    assert!(v["requests_per_hpa_per_sync"].get("total").is_some());
    for key in ["p50", "p99", "max"] {
        assert!(v["reconcile_interval_s"].get(key).is_some());
    }

    let out = hpactl(&[
        "bench",
        "--hpas",
        "2",
        "--pods-per-hpa",
        "2",
        "--namespaces",
        "1",
        "--server-only",
        "--duration",
        "200ms",
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["pods"], 4);
    assert_eq!(v["pods_per_list"], 2);
    assert_eq!(v["pods_per_namespace_list"], 4);
    assert!(v["pod_metrics_namespace_lists_per_s"].as_f64().unwrap() > 0.0);
}

/// With the controller binary, the bench reads the reconciles it counted from its `/metrics`
/// (served on a loopback port the bench chose) and divides requests by them, at `--v=2`, where
/// the controller writes no line per reconcile.
#[test]
fn bench_of_the_binary_counts_reconciles_from_its_metrics() {
    let binary =
        sibling_binary::sibling_binary(env!("CARGO_BIN_EXE_hpactl"), "kube-hpa-controller");
    let out = hpactl(&[
        "bench",
        "--hpas",
        "3",
        "--pods-per-hpa",
        "2",
        "--namespaces",
        "1",
        "--duration",
        "5s",
        "--binary",
        binary.to_str().unwrap(),
        "--json",
        "--",
        "--horizontal-pod-autoscaler-sync-period=1s",
        "--v=2",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["per_sync_basis"], "reconciles (controller metrics)",
        "{v}"
    );
    let counted = v["reconciles_from_metrics"].as_u64().unwrap_or(0);
    // Three HPAs every second for about five seconds (the first pass after the caches sync).
    assert!((3..=30).contains(&counted), "{counted} reconciles in {v}");
}
