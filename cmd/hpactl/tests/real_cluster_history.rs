//! The persisted history (`--persist-hpa-history`, crates/history) on a real control plane:
//! upstream's kube-apiserver of each release in `KUBE_VERSIONS`, this controller's RBAC
//! (`config/rbac.yaml`: the history ConfigMaps beside the Lease), two replicas with leader
//! election, the leader killed with SIGKILL 10 s after a scale-up.
//!
//! Ignored by a plain `cargo test`: `hack/test.sh` runs it after `hack/kube.sh build`.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../../../hack/tests/real_cluster_common.rs"]
mod common;
#[path = "../../../hack/tests/sibling_binary.rs"]
mod sibling_binary;

use std::time::{Duration, Instant};

use common::{cluster_up, eventually, lease_holder, releases, repo, runtime};
use hpa_cluster::process::{self, ProcessRecord};
use hpa_cluster::{Cluster, KubeRelease};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(60);

fn start(cluster: &Cluster, name: &str) -> ProcessRecord {
    let controller =
        sibling_binary::sibling_binary(env!("CARGO_BIN_EXE_hpactl"), "kube-hpa-controller");
    let args: Vec<String> = [
        format!("--kubeconfig={}", cluster.controller_kubeconfig().display()),
        "--secure-port=0".into(),
        "--v=2".into(),
        "--horizontal-pod-autoscaler-sync-period=1s".into(),
        "--leader-elect=true".into(),
        "--leader-elect-lease-duration=4s".into(),
        "--leader-elect-renew-deadline=3s".into(),
        "--leader-elect-retry-period=500ms".into(),
    ]
    .into();
    process::spawn(cluster.dir(), name, &controller, &args, &[]).unwrap()
}

async fn replicas(client: &kube::Client, name: &str) -> i32 {
    Api::<Deployment>::namespaced(client.clone(), "default")
        .get_scale(name)
        .await
        .unwrap()
        .spec
        .and_then(|s| s.replicas)
        .unwrap_or_default()
}

/// `down`'s current External average as the leader last wrote it.
async fn down_average(client: &kube::Client) -> Option<String> {
    Api::<HorizontalPodAutoscaler>::namespaced(client.clone(), "default")
        .get("down")
        .await
        .unwrap()
        .status
        .and_then(|s| s.current_metrics)
        .and_then(|m| m.into_iter().next())
        .and_then(|m| m.external)
        .and_then(|e| e.current.average_value)
        .map(|q| q.0)
}

/// Issue 26, item 1: a scale-up of 4 under a policy of 4 pods per 60 s, the leader killed
/// 10 s later: the new leader adds no pod before the 60 s are over; and `down`'s 30 s
/// downscale window continues from the old leader's recommendations (it ends 30 s after the
/// metric dropped, not 30 s after the new leader took over).
#[test]
#[ignore = "real cluster: run by hack/test.sh after hack/kube.sh build"]
fn a_new_leader_keeps_the_policy_period_and_the_window_on_a_real_api_server() {
    let rt = runtime();
    for release in releases() {
        rt.block_on(failover(release));
    }
}

async fn failover(release: KubeRelease) {
    let c = cluster_up(release, "history").await;
    let scenario = hpa_fixtures::scenario::load_file(
        &repo().join("test-fixtures/real-cluster/history-failover.yaml"),
    )
    .unwrap();
    c.load(&scenario).await.unwrap();
    let client = c.admin_client().await.unwrap();

    let a = start(&c, "a");
    let a_id = eventually(WAIT, "A to take the Lease", || async {
        let h = lease_holder(&client).await;
        if h.is_empty() {
            Err("no holder".into())
        } else {
            Ok(h)
        }
    })
    .await;
    let scaled = eventually(WAIT, "A to scale `up` from 2 to 6", || async {
        match replicas(&client, "up").await {
            6 => Ok(Instant::now()),
            n => Err(format!("{n}")),
        }
    })
    .await;
    eventually(WAIT, "A to read `down`'s metric", || async {
        match down_average(&client).await {
            Some(a) if a == "100" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    // The metric of `down` drops: it asks for 1 from now on.
    let drop = json!({
        "apiVersion": "external.metrics.k8s.io/v1beta1", "kind": "ExternalMetricValue",
        "metadata": {"name": "queue-down", "namespace": "default"},
        "metricName": "queue_down", "timestamp": jiff::Timestamp::now().to_string(),
        "value": "100",
    });
    c.metrics_step(&json!({ "apply": [drop] })).await.unwrap();
    let dropped = Instant::now();
    eventually(WAIT, "A to read the drop", || async {
        match down_average(&client).await {
            Some(a) if a != "100" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let b = start(&c, "b");
    tokio::time::sleep(Duration::from_secs(10).saturating_sub(scaled.elapsed())).await;
    process::kill(&a);
    eventually(WAIT, "B to take the Lease", || async {
        let h = lease_holder(&client).await;
        if h.is_empty() || h == a_id {
            Err(h)
        } else {
            Ok(())
        }
    })
    .await;
    let took_over = Instant::now();
    let stored: Vec<String> = Api::<ConfigMap>::namespaced(client.clone(), "kube-system")
        .list(
            &ListParams::default().labels("kube-hpa-controller.io/history-of=kube-hpa-controller"),
        )
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
        "A's scale-up event is in its history ConfigMaps: {stored:?}"
    );

    let mut down_at = None;
    while scaled.elapsed() < Duration::from_secs(57) {
        assert!(
            process::alive(&b),
            "B exited: {}",
            process::log_tail(&b, 40)
        );
        let up = replicas(&client, "up").await;
        assert_eq!(
            up,
            6,
            "B scaled `up` {:?} after A did, within the policy's 60 s period",
            scaled.elapsed()
        );
        if down_at.is_none() && replicas(&client, "down").await < 6 {
            down_at = Some(Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eventually(WAIT, "B to add 4 pods once the period is over", || async {
        match replicas(&client, "up").await {
            10 => Ok(()),
            n => Err(format!("{n}")),
        }
    })
    .await;
    let down_at = down_at.expect("B scaled `down` within the 57 s");
    let after_drop = down_at.duration_since(dropped);
    let after_takeover = down_at.duration_since(took_over);
    eprintln!(
        "{release}: `down` scaled {after_drop:?} after its metric dropped, {after_takeover:?} \
         after B took over"
    );
    // A's last recommendation of 6 was just before it read the drop: the window ends 30 s
    // (and a sync) after the drop; B's own window would end 30 s after it took over.
    assert!(
        after_drop >= Duration::from_secs(28),
        "B scaled `down` {after_drop:?} after the drop: before the 30 s window ended"
    );
    assert!(
        after_takeover < Duration::from_secs(28),
        "B scaled `down` {after_takeover:?} after it took over: it restarted the window"
    );
}
