//! Upstream's kube-controller-manager of the cluster's release, running only its HPA
//! controller against the cluster: `--controllers=horizontalpodautoscaling`, no leader election,
//! and, as kubeadm runs it, `--use-service-account-credentials=true` with a
//! `system:kube-controller-manager` client certificate, so the HPA controller acts as
//! `kube-system/horizontal-pod-autoscaler` under upstream's bootstrap role
//! `system:controller:horizontal-pod-autoscaler`.

use std::time::Duration;

use crate::control_plane::{Cluster, ClusterError};
use crate::process::{self, ProcessRecord};

/// The component name of kube-controller-manager in the cluster directory.
pub const KCM: &str = "kube-controller-manager";

impl Cluster {
    /// kube-controller-manager's command line: the harness's flags, then `flags` (later flags
    /// win, as with any Go flag set).
    pub fn kcm_args(&self, flags: &[String]) -> Vec<String> {
        let kubeconfig = self.kcm_kubeconfig().display().to_string();
        let mut args = vec![
            format!("--kubeconfig={kubeconfig}"),
            format!("--authentication-kubeconfig={kubeconfig}"),
            format!("--authorization-kubeconfig={kubeconfig}"),
            "--controllers=horizontalpodautoscaling".to_string(),
            "--leader-elect=false".to_string(),
            "--use-service-account-credentials=true".to_string(),
            "--bind-address=127.0.0.1".to_string(),
            format!("--secure-port={}", self.state().ports.controller_manager),
            format!("--cert-dir={}", self.dir().join("kcm-certs").display()),
            "--v=2".to_string(),
        ];
        args.extend(flags.iter().cloned());
        args
    }

    /// Starts kube-controller-manager (HPA controller only) with `flags` added, and waits for
    /// its `/healthz`. A running one is stopped first.
    pub async fn start_kcm(&self, flags: &[String]) -> Result<ProcessRecord, ClusterError> {
        self.stop_component(KCM, Duration::from_secs(10))?;
        let record = process::spawn(
            self.dir(),
            KCM,
            &self.binaries().path(KCM),
            &self.kcm_args(flags),
            &[],
        )?;
        let mut config = kube::Config::new(
            format!(
                "https://127.0.0.1:{}",
                self.state().ports.controller_manager
            )
            .parse()
            .map_err(|e: http::uri::InvalidUri| ClusterError::Api {
                what: "kube-controller-manager's address".into(),
                source: Box::new(kube::Error::Service(e.into())),
            })?,
        );
        // Its serving certificate is self-signed in --cert-dir; /healthz needs no credentials.
        config.accept_invalid_certs = true;
        let client = kube::Client::try_from(config).map_err(|source| ClusterError::Api {
            what: "a client for kube-controller-manager".into(),
            source: Box::new(source),
        })?;
        self.wait_until_ready(&record, || {
            let client = client.clone();
            async move {
                let req = http::Request::get("/healthz")
                    .body(Vec::new())
                    .map_err(|e| e.to_string())?;
                match client.request_text(req).await {
                    Ok(t) if t.trim() == "ok" => Ok(()),
                    Ok(t) => Err(format!("GET /healthz: {t}")),
                    Err(e) => Err(format!("GET /healthz: {e}")),
                }
            }
        })
        .await?;
        Ok(record)
    }

    /// Stops kube-controller-manager if it runs.
    pub fn stop_kcm(&self) -> Result<(), ClusterError> {
        self.stop_component(KCM, Duration::from_secs(10))
    }
}
