//! For the tests of `--shards` (included with `#[path]` by
//! `cmd/kube-hpa-controller/tests/shards.rs` on the fixture server and
//! `cmd/hpactl/tests/real_cluster_shards.rs` on a real API server): who holds which shard of
//! the group `kube-hpa-controller`, and where each replica serves.

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ListParams};

/// Shard → holder, and holder → the port in its member Lease's address, from the group's
/// Leases in `namespace` (nothing when they cannot be listed).
pub async fn leases(
    client: &kube::Client,
    namespace: &str,
) -> (BTreeMap<u32, String>, BTreeMap<String, u16>) {
    let list = Api::<Lease>::namespaced(client.clone(), namespace)
        .list(
            &ListParams::default().labels("kube-hpa-controller.io/shard-group=kube-hpa-controller"),
        )
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let mut shards = BTreeMap::new();
    let mut ports = BTreeMap::new();
    for l in list {
        let name = l.metadata.name.clone().unwrap_or_default();
        let holder = l
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.clone())
            .unwrap_or_default();
        if holder.is_empty() {
            continue;
        }
        if let Some(i) = name
            .strip_prefix("kube-hpa-controller-shard-")
            .and_then(|i| i.parse().ok())
        {
            shards.insert(i, holder);
        } else if let Some(port) = l
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("kube-hpa-controller.io/address"))
            .and_then(|a| a.rsplit(':').next())
            .and_then(|p| p.parse().ok())
        {
            ports.insert(holder, port);
        }
    }
    (shards, ports)
}
