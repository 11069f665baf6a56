//! Active-active shards (`--shards`, crates/sharding) on a real control plane: upstream's
//! kube-apiserver of each release in `KUBE_VERSIONS`, this controller's RBAC
//! (`config/rbac.yaml`) plus what `--shards` needs (as the chart grants it: `list` and `delete`
//! of Leases, the shards' history ConfigMaps), three replicas each with a token of its own,
//! one killed with SIGKILL. The API server's audit log says who wrote what.
//!
//! Ignored by a plain `cargo test`: `hack/test.sh` runs it after `hack/kube.sh build`.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../../../hack/tests/real_cluster_common.rs"]
mod common;
#[path = "../../../hack/tests/free_ports.rs"]
mod free_ports;
#[path = "../../../hack/tests/shard_leases.rs"]
mod shard_leases;
#[path = "../../../hack/tests/sibling_binary.rs"]
mod sibling_binary;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use common::{cluster_up_with, eventually, kubectl, releases, run, runtime};
use free_ports::free_ports;
use hpa_cluster::process::{self, ProcessRecord};
use hpa_cluster::{Cluster, KubeRelease};
use hpa_fixtures::{GenerateConfig, Wave, generate};
use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};
use shard_leases::leases;

const SHARDS: u32 = 3;
const HPAS: usize = 300;
const PERIOD: Duration = Duration::from_secs(5);
const LEASE: Duration = Duration::from_secs(8);
const WAIT: Duration = Duration::from_secs(90);

/// What `--shards=3` needs beyond `config/rbac.yaml`, as the chart renders it (as a `List`
/// for `kubectl apply`).
fn shard_rbac() -> String {
    serde_json::json!({"apiVersion": "v1", "kind": "List",
        "items": hpa_cluster::bench::shard_rbac(SHARDS as usize)})
    .to_string()
}

fn start(cluster: &Cluster, name: &str, kubeconfig: &Path, port: u16) -> ProcessRecord {
    let controller =
        sibling_binary::sibling_binary(env!("CARGO_BIN_EXE_hpactl"), "kube-hpa-controller");
    let args: Vec<String> = vec![
        format!("--kubeconfig={}", kubeconfig.display()),
        "--bind-address=127.0.0.1".into(),
        format!("--secure-port={port}"),
        "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics,/debug/*".into(),
        "--v=2".into(),
        format!("--shards={SHARDS}"),
        "--horizontal-pod-autoscaler-sync-period=5s".into(),
        "--leader-elect=true".into(),
        "--leader-elect-lease-duration=8s".into(),
        "--leader-elect-renew-deadline=5s".into(),
        "--leader-elect-retry-period=1s".into(),
    ];
    process::spawn(cluster.dir(), name, &controller, &args, &[]).unwrap()
}

/// Status and scale writes per HPA: (time, the writer's token credential id).
fn writes(cluster: &Cluster) -> BTreeMap<String, Vec<(Timestamp, String)>> {
    let text = std::fs::read_to_string(cluster.audit_log()).unwrap();
    let mut out: BTreeMap<String, Vec<(Timestamp, String)>> = BTreeMap::new();
    for e in text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
    {
        let verb = e["verb"].as_str().unwrap_or_default();
        let code = e["responseStatus"]["code"].as_i64().unwrap_or(0);
        if !matches!(verb, "update" | "patch") || !(200..300).contains(&code) {
            continue;
        }
        if e["user"]["username"].as_str()
            != Some("system:serviceaccount:kube-system:kube-hpa-controller")
        {
            continue;
        }
        let r = &e["objectRef"];
        let (Some(ns), Some(name)) = (r["namespace"].as_str(), r["name"].as_str()) else {
            continue;
        };
        // Generated HPAs scale the Deployment of their own name.
        let is_hpa_write = matches!(
            (r["resource"].as_str(), r["subresource"].as_str()),
            (Some("horizontalpodautoscalers"), Some("status"))
                | (Some("deployments"), Some("scale"))
        );
        if !is_hpa_write {
            continue;
        }
        let credential = e["user"]["extra"]["authentication.kubernetes.io/credential-id"][0]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let at: Timestamp = e["requestReceivedTimestamp"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        out.entry(format!("{ns}/{name}"))
            .or_default()
            .push((at, credential));
    }
    for w in out.values_mut() {
        w.sort();
    }
    out
}

/// Issue 26, item 2: three replicas share 300 HPAs on a real API server; one is killed; its
/// shards are taken within two lease durations; `hpactl explain --lease` finds each HPA's
/// owner; and the audit log shows no HPA written by two replicas within one sync period.
#[test]
#[ignore = "real cluster: run by hack/test.sh after hack/kube.sh build"]
fn three_replicas_share_the_hpas_on_a_real_api_server() {
    let rt = runtime();
    for release in releases() {
        rt.block_on(shards(release));
    }
}

async fn shards(release: KubeRelease) {
    let c = cluster_up_with(release, "shards", true).await;
    kubectl(&c, &["apply", "-f", "-"], Some(&shard_rbac()));
    let value = generate(&GenerateConfig {
        name: "shards".into(),
        hpas: HPAS,
        namespaces: 3,
        pods_per_hpa: 1,
        seed: 26,
        start: Timestamp::now(),
        wave: Some(Wave {
            steps: 60,
            interval: SignedDuration::from_secs(2),
            amplitude: 0.5,
        }),
        ..GenerateConfig::default()
    })
    .unwrap();
    let scenario = hpa_fixtures::scenario::scenario_from_value(value.clone(), "shards").unwrap();
    c.populate(&scenario, 16, |_, _, _| {}).await.unwrap();
    let client = c.admin_client().await.unwrap();

    let ports = free_ports(3);
    let mut replicas = Vec::new();
    for (i, port) in ports.iter().enumerate() {
        let kubeconfig = c.dir().join(format!("replica-{i}.kubeconfig"));
        c.write_controller_kubeconfig(&kubeconfig).await.unwrap();
        replicas.push(start(&c, &format!("replica-{i}"), &kubeconfig, *port));
    }
    // The load wave: every metric moves every 2 s, so reconciles write statuses and scales.
    let wave = {
        let c2 = c.cluster.clone();
        let steps: Vec<Value> = value["steps"].as_array().cloned().unwrap_or_default();
        tokio::spawn(async move {
            for step in steps {
                tokio::time::sleep(Duration::from_secs(2)).await;
                let _ = c2.metrics_step(&json!({"apply": step["apply"]})).await;
            }
        })
    };

    let (holders, identity_ports) =
        eventually(WAIT, "every shard held by a replica of its own", || async {
            for r in &replicas {
                assert!(process::alive(r), "{}", process::log_tail(r, 40));
            }
            let (shards, ports) = leases(&client, "kube-system").await;
            let holders: BTreeSet<&String> = shards.values().collect();
            if shards.len() == SHARDS as usize && holders.len() == SHARDS as usize {
                Ok((shards.clone(), ports))
            } else {
                Err(format!("{shards:?}"))
            }
        })
        .await;
    let balanced = Timestamp::now();

    // hpactl explain finds the owner of an HPA through the Leases.
    let key = "ns-001/app-00001";
    let shard = hpa_sharding::shard_of(key, SHARDS);
    let admin = c.admin_kubeconfig().display().to_string();
    let out = eventually(
        WAIT,
        "hpactl explain --lease to read the owner's decision",
        || async {
            let out = run(
                Path::new(env!("CARGO_BIN_EXE_hpactl")),
                &[
                    "explain",
                    key,
                    "--lease",
                    "kube-system/kube-hpa-controller",
                    "--kubeconfig",
                    &admin,
                    "--insecure-skip-tls-verify",
                ],
                None,
            );
            if out.status.success() {
                Ok(out)
            } else {
                Err(String::from_utf8_lossy(&out.stderr).into_owned())
            }
        },
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "{key} is shard {shard} of {SHARDS}, held by {} at https://127.0.0.1:{}",
            holders[&shard], identity_ports[&holders[&shard]]
        )),
        "{stderr}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("HPA {key}: decision at ")));

    tokio::time::sleep(PERIOD * 3).await;
    let victim = replicas.remove(0);
    let victim_identity = identity_ports
        .iter()
        .find(|(_, p)| **p == ports[0])
        .map(|(id, _)| id.clone())
        .unwrap();
    let lost: BTreeSet<u32> = holders
        .iter()
        .filter(|(_, h)| **h == victim_identity)
        .map(|(s, _)| *s)
        .collect();
    process::kill(&victim);
    let killed = Instant::now();
    let killed_at = Timestamp::now();
    eventually(WAIT, "the lost replica's shards to be taken", || async {
        let (shards, _) = leases(&client, "kube-system").await;
        if lost
            .iter()
            .all(|s| shards.get(s).is_some_and(|h| *h != victim_identity))
        {
            Ok(())
        } else {
            Err(format!("{shards:?}"))
        }
    })
    .await;
    let taken = killed.elapsed();
    assert!(
        taken <= LEASE * 2,
        "shards taken {taken:?} after the kill, over two lease durations"
    );
    tokio::time::sleep(PERIOD * 4).await;
    for r in &replicas {
        assert!(process::alive(r), "{}", process::log_tail(r, 40));
        process::kill(r);
    }
    wave.abort();
    // The audit log is written asynchronously in batches.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let per_hpa = writes(&c);
    let period = SignedDuration::try_from(PERIOD).unwrap();
    let mut handed_over = 0;
    let mut writers = BTreeSet::new();
    for (key, ws) in &per_hpa {
        let ws: Vec<&(Timestamp, String)> = ws.iter().filter(|(t, _)| *t >= balanced).collect();
        for w in &ws {
            writers.insert(w.1.clone());
        }
        for pair in ws.windows(2) {
            let ((t1, u1), (t2, u2)) = (pair[0], pair[1]);
            if u1 != u2 {
                let gap = t2.duration_since(*t1);
                assert!(
                    gap >= period,
                    "{release}: {key} written by {u1} then by {u2} {gap:?} later"
                );
                if *t1 < killed_at && *t2 > killed_at {
                    handed_over += 1;
                }
            }
        }
    }
    eprintln!(
        "{release}: shards taken {taken:?} after the kill; {} HPAs written by {} replicas; {handed_over} handed over",
        per_hpa.len(),
        writers.len()
    );
    assert_eq!(writers.len(), 3, "each replica wrote (one token each)");
    assert!(
        handed_over >= 10,
        "{release}: only {handed_over} HPAs changed writer at the kill"
    );
}
