//! `hpactl cluster serve-metrics --dir DIR`: the process `cluster up` starts to serve the
//! metrics APIs behind the cluster's kube-apiserver: the fixture server's aggregated mode
//! (`hpa_fixtures::aggregated`) with the certificates and ports of `DIR`, on the wall clock,
//! its objects handed over through the control port.

use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;

use hpa_fixtures::aggregated::{AggregatedConfig, AggregatedServer};
use hpa_fixtures::store::Store;

use crate::control_plane::{Cluster, ClusterError};
use crate::pki::FRONT_PROXY_CLIENT_CN;

/// A second metrics provider ([`Cluster::add_metrics_provider`]): a metrics API served under
/// a group of its own (KEP-6382), on ports of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderOptions {
    /// The group it serves (`external.metrics.keda.sh`).
    pub group: String,
    /// The metrics API the group serves (`external.metrics.k8s.io` or
    /// `custom.metrics.k8s.io`).
    pub api: String,
    /// Its serving port.
    pub port: u16,
    /// Its control port (objects handed over, health).
    pub control_port: u16,
}

/// Serves the aggregated metrics APIs of the cluster in `dir` until `shutdown` completes; with
/// `provider`, as that second provider instead (its group, its ports).
pub async fn serve_metrics(
    dir: &Path,
    provider: Option<ProviderOptions>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ClusterError> {
    let cluster = Cluster::open(dir)?;
    let pki = cluster.pki();
    let read = |name: &str| {
        let path = pki.file(name);
        std::fs::read_to_string(&path).map_err(|source| ClusterError::File { path, source })
    };
    let ports = cluster.state().ports;
    let (port, control_port) = provider
        .as_ref()
        .map_or((ports.metrics, ports.metrics_control), |p| {
            (p.port, p.control_port)
        });
    let config = AggregatedConfig {
        addr: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
        serving_cert_pem: read("metrics-server.crt")?,
        serving_key_pem: read("metrics-server.key")?,
        requestheader_ca_pem: read("front-proxy-ca.crt")?,
        allowed_names: vec![FRONT_PROXY_CLIENT_CN.to_string()],
        username_headers: vec!["X-Remote-User".to_string()],
        control_addr: SocketAddr::from((Ipv4Addr::LOCALHOST, control_port)),
        control_token: cluster.state().metrics_control_token.clone(),
    };
    let store = Store::new(Arc::new(hpa_config::SystemClock));
    if let Some(p) = &provider {
        store.add_metrics_groups([(p.group.clone(), p.api.clone())].into());
    }
    let mut server =
        AggregatedServer::start(store, config)
            .await
            .map_err(|e| ClusterError::Manifest {
                what: "the aggregated metrics server",
                message: e.to_string(),
            })?;
    tokio::select! {
        () = shutdown => {}
        () = server.wait() => {}
    }
    server.stop().await;
    Ok(())
}
