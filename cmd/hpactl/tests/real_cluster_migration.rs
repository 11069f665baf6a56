//! `docs/migration.md` run as a test on a real control plane: upstream's kube-apiserver and
//! kube-controller-manager (KCM) of each release in `KUBE_VERSIONS`, this project's Helm chart
//! installed with the guide's commands, in shadow mode beside KCM, switched to active with
//! KCM's HPA controller off, and rolled back. The API server's audit log then says who wrote
//! each HPA's status and scale, and when:
//!
//! - every HPA was written by KCM, then by this controller, then by KCM again, never by both
//!   in between and never by the shadow;
//! - at neither switch was an HPA left unreconciled for more than one sync period beyond its
//!   cadence: the time between the outgoing controller's last write and the incoming one's first
//!   is at most two sync periods (the metrics move every second, so that every reconcile writes
//!   a new status and the writes show each reconcile).
//!
//! No kubelet runs here, so the test plays its part for the chart's Deployments ([`Kubelet`]):
//! it runs `spec.replicas` processes of this controller's binary with the pod template's
//! arguments, as the pod's ServiceAccount (a TokenRequest token, as a pod is given), each on a
//! free loopback port instead of its pod's own network (`--secure-port` is replaced), and
//! SIGTERMs them when their Deployment goes or changes, as the kubelet does. KCM runs as the
//! harness runs it (`hpactl cluster kcm`): only its HPA controller, so turning that controller
//! off (the guide's `--controllers=*,-horizontalpodautoscaling`) is stopping the process.
//!
//! Ignored by a plain `cargo test`: `hack/test.sh` runs it after `hack/kube.sh build` and
//! `hack/helm.sh build`.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../../../hack/tests/real_cluster_common.rs"]
mod common;
#[path = "../../../hack/tests/free_ports.rs"]
mod free_ports;
#[path = "../../../hack/tests/sibling_binary.rs"]
mod sibling_binary;

use free_ports::free_port;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use common::{cluster_up_with, eventually, helm_binary, kubectl, releases, repo, run_ok, runtime};
use hpa_cluster::process::{self, ProcessRecord};
use hpa_cluster::{Cluster, KubeRelease};
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

/// The sync period of both controllers in this test (the guide's default is 15 s; shorter
/// keeps the run short and the bound tight).
const SYNC_SECONDS: i64 = 5;
const NAMESPACE: &str = "kube-system";
const RELEASE: &str = "kube-hpa-controller";
const KCM_USER: &str = "system:serviceaccount:kube-system:horizontal-pod-autoscaler";
const OUR_USER: &str = "system:serviceaccount:kube-system:kube-hpa-controller";
const SHADOW_USER: &str = "system:serviceaccount:kube-system:kube-hpa-controller-shadow";

fn controller_binary() -> PathBuf {
    sibling_binary::sibling_binary(env!("CARGO_BIN_EXE_hpactl"), "kube-hpa-controller")
}

/// `helm ARGS --kubeconfig admin.kubeconfig` on the repository's chart, as the guide
/// writes it (`CHART` stands for the chart's path).
fn helm(cluster: &Cluster, args: &str) -> String {
    let chart = repo()
        .join("charts/kube-hpa-controller")
        .display()
        .to_string();
    let kubeconfig = format!("--kubeconfig={}", cluster.admin_kubeconfig().display());
    let mut a: Vec<&str> = args
        .split_whitespace()
        .map(|w| if w == "CHART" { chart.as_str() } else { w })
        .collect();
    a.push(&kubeconfig);
    run_ok(&helm_binary(), &a, None)
}

/// A process standing in for one pod of a Deployment.
struct PodProcess {
    /// The pod template's arguments and ServiceAccount it was started from.
    spec: Value,
    record: ProcessRecord,
    port: u16,
}

/// The kubelet's part for the chart's Deployments (see the module doc).
#[derive(Default)]
struct Kubelet {
    pods: BTreeMap<String, PodProcess>,
}

impl Kubelet {
    /// Makes the running processes match the chart's Deployments in `kube-system`: stops
    /// (SIGTERM, then waits) those whose Deployment is gone, shrank or changed its pod
    /// template, and starts the missing ones.
    async fn sync(&mut self, cluster: &Cluster) {
        let client = cluster.admin_client().await.unwrap();
        let deployments: Api<Deployment> = Api::namespaced(client, NAMESPACE);
        let listed = deployments
            .list(&ListParams::default().labels(
                "app.kubernetes.io/name in (kube-hpa-controller,kube-hpa-controller-shadow)",
            ))
            .await
            .unwrap();
        let mut wanted: BTreeMap<String, Value> = BTreeMap::new();
        for d in listed.items {
            let name = d.metadata.name.clone().unwrap();
            let spec = d.spec;
            let pod = spec.template.spec.unwrap();
            let container = &pod.containers[0];
            let this = json!({
                "serviceAccount": pod.service_account_name,
                "args": container.args,
            });
            for i in 0..spec.replicas.unwrap_or(1) {
                wanted.insert(format!("{name}-{i}"), this.clone());
            }
        }
        let stale: Vec<String> = self
            .pods
            .iter()
            .filter(|(key, p)| wanted.get(*key) != Some(&p.spec))
            .map(|(key, _)| key.clone())
            .collect();
        for key in &stale {
            process::terminate(&self.pods[key].record);
        }
        for key in stale {
            let p = self.pods.remove(&key).unwrap();
            assert!(
                process::wait_exit(&p.record, Duration::from_secs(30)),
                "pod {key} did not exit within 30 s of SIGTERM"
            );
            eprintln!("kubelet: stopped {key}");
        }
        for (key, spec) in wanted {
            if self.pods.contains_key(&key) {
                continue;
            }
            let account = spec["serviceAccount"].as_str().unwrap();
            let kubeconfig = cluster.dir().join(format!("pod-{key}.kubeconfig"));
            cluster
                .write_service_account_kubeconfig(NAMESPACE, account, &kubeconfig)
                .await
                .unwrap();
            let port = free_port();
            let mut args: Vec<String> = spec["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().to_string())
                .filter(|a| !a.starts_with("--bind-address=") && !a.starts_with("--kubeconfig="))
                .map(|a| {
                    if a.starts_with("--secure-port=") {
                        format!("--secure-port={port}")
                    } else {
                        a
                    }
                })
                .collect();
            let k = kubeconfig.display();
            args.extend([
                format!("--kubeconfig={k}"),
                format!("--authentication-kubeconfig={k}"),
                format!("--authorization-kubeconfig={k}"),
                "--bind-address=127.0.0.1".to_string(),
            ]);
            let record = process::spawn(
                cluster.dir(),
                &format!("pod-{key}"),
                &controller_binary(),
                &args,
                &[],
            )
            .unwrap();
            eprintln!("kubelet: started {key} (pid {}, port {port})", record.pid);
            self.pods.insert(key, PodProcess { spec, record, port });
        }
    }

    fn port_of(&self, key: &str) -> u16 {
        self.pods
            .get(key)
            .unwrap_or_else(|| panic!("no pod {key}"))
            .port
    }
}

/// Moves every pod's CPU usage each second, to 92m + (seconds mod 17)m of its 200m request
/// (46–54% against the HPAs' 50% target: inside the tolerance, so nothing rescales), so that
/// each reconcile reads a new `averageValue` and writes a status, whichever controller runs.
async fn move_metrics(cluster: &Cluster, stop: tokio::sync::watch::Receiver<bool>) {
    let client = cluster.admin_client().await.unwrap();
    let pods: Vec<Pod> = Api::<Pod>::all(client)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.namespace.as_deref() != Some(NAMESPACE))
        .collect();
    assert!(!pods.is_empty(), "no pods to move the metrics of");
    while !*stop.borrow() {
        let now = Timestamp::now();
        let milli = 92 + now.as_second().rem_euclid(17);
        let objects: Vec<Value> = pods
            .iter()
            .map(|p| {
                json!({
                    "apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics",
                    "metadata": {"name": p.metadata.name, "namespace": p.metadata.namespace,
                        "labels": p.metadata.labels},
                    "timestamp": now.to_string(), "window": "30s",
                    "containers": [{"name": "app",
                        "usage": {"cpu": format!("{milli}m"), "memory": "128Mi"}}],
                })
            })
            .collect();
        cluster
            .metrics_step(&json!({ "apply": objects }))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(1000)).await;
    }
}

/// The shadow's `kube_hpa_controller_shadow_comparisons_total` by result, read from its
/// `/metrics` with a token allowed there (the guide's ClusterRoleBinding).
async fn shadow_comparisons(port: u16, token: &str) -> Result<BTreeMap<String, f64>, String> {
    let mut config = kube::Config::new(format!("https://127.0.0.1:{port}").parse().unwrap());
    config.accept_invalid_certs = true;
    let client = kube::Client::try_from(config).map_err(|e| e.to_string())?;
    let req = http::Request::get("/metrics")
        .header("Authorization", format!("Bearer {token}"))
        .body(Vec::new())
        .unwrap();
    let text = client.request_text(req).await.map_err(|e| e.to_string())?;
    let mut by_result = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("kube_hpa_controller_shadow_comparisons_total{")
            && let Some((labels, value)) = rest.split_once("} ")
            && let Some(result) = labels.split(',').find_map(|l| l.strip_prefix("result=\""))
        {
            by_result.insert(
                result.trim_end_matches('"').to_string(),
                value.trim().parse::<f64>().map_err(|e| e.to_string())?,
            );
        }
    }
    Ok(by_result)
}

/// One write of an HPA's status or its target's scale, from the audit log.
#[derive(Clone)]
struct Write {
    at: Timestamp,
    user: String,
    what: String,
}

/// The HPA controllers' (KCM's, this controller's, the shadow's) successful status and scale
/// writes per HPA (`namespace/name`); a scale write is counted for the HPA whose
/// `scaleTargetRef` names that object. (`cluster populate` wrote the first statuses as the
/// admin.)
fn writes_per_hpa(
    cluster: &Cluster,
    targets: &BTreeMap<String, String>,
) -> BTreeMap<String, Vec<Write>> {
    let text = std::fs::read_to_string(cluster.audit_log()).unwrap();
    let mut out: BTreeMap<String, Vec<Write>> = BTreeMap::new();
    for e in text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
    {
        let verb = e["verb"].as_str().unwrap_or_default();
        let code = e["responseStatus"]["code"].as_i64().unwrap_or(0);
        if !matches!(verb, "update" | "patch") || !(200..300).contains(&code) {
            continue;
        }
        let r = &e["objectRef"];
        let (Some(ns), Some(name)) = (r["namespace"].as_str(), r["name"].as_str()) else {
            continue;
        };
        let hpa = match (r["resource"].as_str(), r["subresource"].as_str()) {
            (Some("horizontalpodautoscalers"), Some("status")) => format!("{ns}/{name}"),
            (Some(_), Some("scale")) => match targets.get(&format!("{ns}/{name}")) {
                Some(hpa) => hpa.clone(),
                None => continue,
            },
            _ => continue,
        };
        let user = e["user"]["username"].as_str().unwrap_or_default();
        if ![KCM_USER, OUR_USER, SHADOW_USER].contains(&user) {
            continue;
        }
        let at: Timestamp = e["requestReceivedTimestamp"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        out.entry(hpa).or_default().push(Write {
            at,
            user: user.to_string(),
            what: format!("{verb} {}", e["requestURI"].as_str().unwrap_or_default()),
        });
    }
    for w in out.values_mut() {
        w.sort_by_key(|w| w.at);
    }
    out
}

/// The writes, one per line, for a failure message.
fn show(w: &[Write]) -> String {
    w.iter()
        .map(|x| format!("  {} {} {}", x.at, short(&x.user), x.what))
        .collect::<Vec<_>>()
        .join("\n")
}

fn short(user: &str) -> &str {
    match user {
        KCM_USER => "kcm",
        OUR_USER => "ours",
        SHADOW_USER => "shadow",
        other => other,
    }
}

/// The guide's commands: shadow beside KCM, switch, roll back (see the module doc).
#[test]
#[ignore = "real cluster: run by hack/test.sh after hack/kube.sh build"]
fn migration_guide_shadow_switch_and_roll_back() {
    let rt = runtime();
    for release in releases() {
        rt.block_on(migrate(release));
    }
}

async fn migrate(release: KubeRelease) {
    let c = cluster_up_with(release, "migration", true).await;
    let sync = format!("--horizontal-pod-autoscaler-sync-period={SYNC_SECONDS}s");
    // `hpactl cluster up` applied config/'s RBAC and FlowSchema for its own use; a cluster
    // where the chart is installed has none of them (helm refuses to adopt objects it did not
    // create; docs/migration.md says how to hand raw-manifest objects over to helm).
    let config = repo().join("config").display().to_string();
    kubectl(&c, &["delete", "-k", &config, "--ignore-not-found"], None);

    let dir = c.dir().display().to_string();
    run_ok(
        std::path::Path::new(env!("CARGO_BIN_EXE_hpactl")),
        &[
            "cluster",
            "populate",
            "--dir",
            &dir,
            "--hpas",
            "6",
            "--pods-per-hpa",
            "2",
            "--namespaces",
            "2",
        ],
        None,
    );
    let admin = c.admin_client().await.unwrap();
    let hpas = Api::<HorizontalPodAutoscaler>::all(admin.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert_eq!(hpas.len(), 6);
    let targets: BTreeMap<String, String> = hpas
        .iter()
        .map(|h| {
            let ns = h.metadata.namespace.clone().unwrap();
            (
                format!("{ns}/{}", h.spec.scale_target_ref.name),
                format!("{ns}/{}", h.metadata.name.clone().unwrap()),
            )
        })
        .collect();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mover = {
        let cluster = Cluster::open(c.dir()).unwrap();
        tokio::spawn(async move { move_metrics(&cluster, stop_rx).await })
    };

    // KCM is the HPA controller before the migration.
    c.start_kcm(std::slice::from_ref(&sync)).await.unwrap();
    let mut kubelet = Kubelet::default();

    // Step 1 of the guide: the chart in shadow mode beside KCM.
    helm(
        &c,
        &format!(
            "install {RELEASE} CHART --namespace {NAMESPACE} \
             --set controller.enabled=false --set shadow.enabled=true \
             --set flags.horizontal-pod-autoscaler-sync-period={SYNC_SECONDS}s"
        ),
    );
    kubelet.sync(&c).await;
    assert_eq!(kubelet.pods.len(), 1, "one shadow pod");

    // Step 2: read the shadow's comparisons with a token allowed on /metrics.
    kubectl(
        &c,
        &[
            "-n",
            NAMESPACE,
            "create",
            "serviceaccount",
            "migration-check",
        ],
        None,
    );
    kubectl(
        &c,
        &[
            "create",
            "clusterrolebinding",
            "migration-check",
            "--clusterrole=kube-hpa-controller-metrics-reader",
            "--serviceaccount=kube-system:migration-check",
        ],
        None,
    );
    let token = kubectl(
        &c,
        &["-n", NAMESPACE, "create", "token", "migration-check"],
        None,
    );
    let token = token.trim().to_string();
    let shadow_port = kubelet.port_of("kube-hpa-controller-shadow-0");
    let compared = eventually(
        Duration::from_secs(90),
        "the shadow agrees with KCM on at least 6 statuses",
        || {
            let token = token.clone();
            async move {
                let by = shadow_comparisons(shadow_port, &token).await?;
                if by.get("agree").copied().unwrap_or(0.0) >= 6.0 {
                    Ok(by)
                } else {
                    Err(format!("{by:?}"))
                }
            }
        },
    )
    .await;
    assert_eq!(
        compared.get("differ").copied().unwrap_or(0.0),
        0.0,
        "the shadow differs from KCM: {compared:?}"
    );
    eprintln!("{release}: shadow beside KCM: {compared:?}");
    // KCM has written every HPA before it is switched off (six agreeing comparisons may be of
    // fewer HPAs: before 1.37 KCM first reconciles an HPA a sync period after it starts, and a
    // reconcile that changes nothing writes nothing).
    eventually(
        Duration::from_secs(60),
        "KCM has written every HPA's status",
        || async {
            let writes = writes_per_hpa(&c, &targets);
            let unwritten: Vec<_> = targets
                .values()
                .filter(|h| {
                    !writes
                        .get(*h)
                        .is_some_and(|w| w.iter().any(|x| x.user == KCM_USER))
                })
                .collect();
            if unwritten.is_empty() {
                Ok(())
            } else {
                Err(format!("not yet written by KCM: {unwritten:?}"))
            }
        },
    )
    .await;

    // Step 3: KCM's HPA controller off, then the chart's controller active.
    let kcm_stopped = Timestamp::now();
    c.stop_kcm().unwrap();
    helm(
        &c,
        &format!(
            "upgrade {RELEASE} CHART --namespace {NAMESPACE} --reuse-values \
             --set controller.enabled=true --set shadow.enabled=false"
        ),
    );
    kubelet.sync(&c).await;
    assert_eq!(kubelet.pods.len(), 2, "two active pods (leader election)");
    tokio::time::sleep(Duration::from_secs(4 * SYNC_SECONDS as u64)).await;

    // Step 4, the way back: the chart back to shadow mode, then KCM's HPA controller on.
    helm(
        &c,
        &format!(
            "upgrade {RELEASE} CHART --namespace {NAMESPACE} --reuse-values \
             --set controller.enabled=false --set shadow.enabled=true"
        ),
    );
    kubelet.sync(&c).await;
    let ours_stopped = Timestamp::now();
    c.start_kcm(std::slice::from_ref(&sync)).await.unwrap();
    tokio::time::sleep(Duration::from_secs(4 * SYNC_SECONDS as u64)).await;
    stop_tx.send(true).unwrap();
    mover.await.unwrap();
    // The audit log is written asynchronously in batches.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let writes = writes_per_hpa(&c, &targets);
    let limit = jiff::SignedDuration::from_secs(2 * SYNC_SECONDS);
    let mut worst = [jiff::SignedDuration::ZERO; 2];
    let mut since_stop = [jiff::SignedDuration::ZERO; 2];
    for hpa in targets.values() {
        let w = writes.get(hpa).map(Vec::as_slice).unwrap_or_default();
        let mut runs: Vec<(&str, usize)> = Vec::new();
        for x in w {
            match runs.last_mut() {
                Some((u, n)) if *u == x.user => *n += 1,
                _ => runs.push((x.user.as_str(), 1)),
            }
        }
        let shape: Vec<String> = runs
            .iter()
            .map(|(u, n)| format!("{}×{n}", short(u)))
            .collect();
        assert_eq!(
            runs.iter().map(|(u, _)| *u).collect::<Vec<_>>(),
            [KCM_USER, OUR_USER, KCM_USER],
            "{hpa}: its writers in order should be KCM, this controller, KCM; were {shape:?}:\n{}",
            show(w)
        );
        // The handovers: the outgoing controller's last write, the incoming one's first.
        let first_ours = runs[0].1;
        let first_kcm_again = runs[0].1 + runs[1].1;
        for (k, (i, stopped)) in [(first_ours, kcm_stopped), (first_kcm_again, ours_stopped)]
            .into_iter()
            .enumerate()
        {
            let gap = w[i].at.duration_since(w[i - 1].at);
            assert!(
                gap <= limit,
                "{hpa}: unreconciled for {gap:#} at switch {} (at most {limit:#}: one sync period beyond its cadence); {shape:?}",
                k + 1
            );
            worst[k] = worst[k].max(gap);
            since_stop[k] = since_stop[k].max(w[i].at.duration_since(stopped));
        }
        // No more than one period beyond the cadence anywhere else either.
        for pair in w.windows(2) {
            let gap = pair[1].at.duration_since(pair[0].at);
            assert!(
                gap <= limit,
                "{hpa}: {gap:#} between writes\n{}",
                show(pair)
            );
        }
    }
    for (hpa, w) in &writes {
        assert!(
            w.iter().all(|x| x.user != SHADOW_USER),
            "{hpa}: the shadow wrote\n{}",
            show(w)
        );
    }
    eprintln!(
        "{release}: switch to this controller: longest gap {:#} ({:#} after KCM stopped); \
         rollback: longest gap {:#} ({:#} after this controller stopped)",
        worst[0], since_stop[0], worst[1], since_stop[1]
    );
}
