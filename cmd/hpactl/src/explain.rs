//! `hpactl explain NAMESPACE/NAME`: why an HPA did what it did.
//!
//! No upstream counterpart. With `--controller https://HOST:PORT` it reads the running
//! controller's last decisions from `/debug/hpa/NAMESPACE/NAME` (bearer token from the
//! kubeconfig's user or `--token`; TLS checked against `--certificate-authority`, or not at
//! all with `--insecure-skip-tls-verify`, as kubectl names them). Without `--controller` it
//! computes a decision now on the cluster of the kubeconfig, with the controller's own code
//! in shadow mode (nothing is written), and says that it had no history.
//!
//! With `--lease NAMESPACE/NAME` it finds the running controller through its Leases: with
//! `--shards`, the replica holding the Lease of the HPA's shard, at the address its member
//! Lease names (`hpa-sharding`'s coordinator writes it); without shards, it names the leader.
//!
//! Installed as `kubectl-hpa_explain` (a copy or link of `hpactl`), it is the kubectl plugin
//! `kubectl hpa-explain NAMESPACE/NAME ...`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, ValueEnum};
use hpa_horizontal::{
    ControllerConfig, ControllerParts, DecisionTrace, HorizontalController, KubeScaleClient,
    TRACE_VERSION, render_text, resolve_version,
};
use kube::config::{AuthInfo, KubeConfigOptions, Kubeconfig};
use serde::Deserialize;

/// How long the fresh computation waits for the HPA and Pod caches to fill.
const CACHE_WAIT: Duration = Duration::from_secs(60);

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Text to read top to bottom.
    Text,
    /// The trace JSON (`hpa.trace/v1`).
    Json,
}

/// `hpactl explain` arguments.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The HPA, NAMESPACE/NAME (or NAME with --namespace).
    #[arg(value_name = "NAMESPACE/NAME")]
    pub hpa: String,
    /// The namespace when the HPA is given as NAME.
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// A running controller's secure address (https://HOST:PORT); its last decisions are
    /// shown. Without it, a decision is computed now on the cluster (no history).
    #[arg(long, value_name = "https://HOST:PORT", conflicts_with = "lease")]
    pub controller: Option<String>,
    /// Find the running controller through its leader-election Lease NAMESPACE/NAME (e.g.
    /// kube-system/kube-hpa-controller): with --shards, the replica that owns the HPA.
    #[arg(long, value_name = "NAMESPACE/NAME")]
    pub lease: Option<String>,
    /// Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// Bearer token for the controller (instead of the kubeconfig user's credentials).
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Do not check the controller's serving certificate.
    #[arg(long)]
    pub insecure_skip_tls_verify: bool,
    /// A PEM file of the CA that signed the controller's serving certificate.
    #[arg(long, value_name = "FILE")]
    pub certificate_authority: Option<PathBuf>,
    /// Show every kept decision (at most 10), oldest first, not only the latest.
    #[arg(long)]
    pub all: bool,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// Controller flags for the fresh computation (e.g. -- --horizontal-pod-autoscaler-tolerance=0.2).
    #[arg(last = true, value_name = "CONTROLLER FLAGS")]
    pub controller_flags: Vec<String>,
}

/// What `/debug/hpa/NAMESPACE/NAME` answers.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct HpaTraces {
    version: String,
    decisions: Vec<DecisionTrace>,
}

/// Why explaining failed.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    /// Bad arguments.
    #[error("{0}")]
    Usage(String),
    /// The kubeconfig or the client could not be set up.
    #[error("{0}")]
    Config(String),
    /// The controller or the cluster answered with an error.
    #[error("{0}")]
    Request(String),
}

impl ExplainError {
    fn exit_code(&self) -> ExitCode {
        match self {
            ExplainError::Usage(_) => ExitCode::from(2),
            _ => ExitCode::from(1),
        }
    }
}

/// Runs `hpactl explain`.
pub fn run(args: ExplainArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: starting the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(explain(&args)) {
        Ok(text) => {
            crate::out::text(&text);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            e.exit_code()
        }
    }
}

fn key_of(args: &ExplainArgs) -> Result<String, ExplainError> {
    match (args.hpa.split_once('/'), &args.namespace) {
        (Some((ns, name)), _) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok(format!("{ns}/{name}"))
        }
        (None, Some(ns)) if !args.hpa.is_empty() => Ok(format!("{ns}/{}", args.hpa)),
        (None, None) if !args.hpa.is_empty() => Ok(format!("default/{}", args.hpa)),
        _ => Err(ExplainError::Usage(format!(
            "expected NAMESPACE/NAME, got {:?}",
            args.hpa
        ))),
    }
}

async fn explain(args: &ExplainArgs) -> Result<String, ExplainError> {
    let key = key_of(args)?;
    let owner = match &args.lease {
        Some(lease) => Some(find_owner(args, lease, &key).await?),
        None => None,
    };
    let url = owner
        .as_ref()
        .map(|o| &o.address)
        .or(args.controller.as_ref());
    let (traces, comparison) = match url {
        Some(url) => from_controller(args, url, &key).await?,
        None => (vec![fresh(args, &key).await?], None),
    };
    if let Some(o) = &owner {
        // On stderr: the output stays the trace.
        eprintln!(
            "{key} is shard {} of {}, held by {} at {}",
            o.shard, o.shards, o.identity, o.address
        );
    }
    let mut out = render(args, &traces)?;
    if args.output == Output::Text
        && let Some(c) = comparison
    {
        out.push_str(&c);
    }
    Ok(out)
}

fn render(args: &ExplainArgs, traces: &[DecisionTrace]) -> Result<String, ExplainError> {
    let shown: Vec<(usize, &DecisionTrace)> = if args.all {
        traces.iter().enumerate().collect()
    } else {
        traces.iter().enumerate().next_back().into_iter().collect()
    };
    match args.output {
        Output::Json => {
            let value: Vec<&DecisionTrace> = shown.iter().map(|(_, t)| *t).collect();
            let text = if args.all {
                serde_json::to_string_pretty(&value)
            } else {
                serde_json::to_string_pretty(&value.first())
            }
            .map_err(|e| ExplainError::Request(e.to_string()))?;
            Ok(format!("{text}\n"))
        }
        Output::Text => {
            let n = traces.len();
            let with_position = args.controller.is_some();
            Ok(shown
                .iter()
                .map(|(i, t)| render_text(t, with_position.then_some((*i, n))))
                .collect::<Vec<_>>()
                .join("\n"))
        }
    }
}

/// The replica that owns an HPA.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Owner {
    shard: u32,
    shards: u32,
    identity: String,
    address: String,
}

/// Finds the replica holding the shard of `key` from the Leases of the group `lease`.
async fn find_owner(args: &ExplainArgs, lease: &str, key: &str) -> Result<Owner, ExplainError> {
    use hpa_sharding::coordinator::GROUP_LABEL;
    use k8s_openapi::api::coordination::v1::Lease;
    let Some((namespace, name)) = lease
        .split_once('/')
        .filter(|(n, l)| !n.is_empty() && !l.is_empty())
    else {
        return Err(ExplainError::Usage(format!(
            "--lease: expected NAMESPACE/NAME, got {lease:?}"
        )));
    };
    let config = load_config(args).await.map_err(ExplainError::Config)?;
    let client = kube::Client::try_from(config).map_err(|e| ExplainError::Config(e.to_string()))?;
    let api = kube::Api::<Lease>::namespaced(client, namespace);
    let leases = api
        .list(&kube::api::ListParams::default().labels(&format!("{GROUP_LABEL}={name}")))
        .await
        .map_err(|e| ExplainError::Request(format!("listing the Leases of {lease}: {e}")))?
        .items;
    owner_in(&leases, name, key).ok_or_else(|| {
        ExplainError::Request(match leases.is_empty() {
            true => format!(
                "{lease} has no shard Leases (is the controller running with --shards?); give the leader's address with --controller"
            ),
            false => format!(
                "no live replica of {lease} holds the shard of {key} now, or it names no address"
            ),
        })
    })
}

/// The owner of `key` among the Leases of the group `name` (`None`: no shard Lease, its
/// shard unheld, or its holder's member Lease naming no address).
fn owner_in(
    leases: &[k8s_openapi::api::coordination::v1::Lease],
    name: &str,
    key: &str,
) -> Option<Owner> {
    use hpa_sharding::coordinator::{
        ADDRESS_ANNOTATION, ROLE_LABEL, SHARD_BY_ANNOTATION, SHARDS_ANNOTATION, shard_lease_name,
    };
    let role = |l: &k8s_openapi::api::coordination::v1::Lease| {
        l.metadata
            .labels
            .as_ref()
            .and_then(|m| m.get(ROLE_LABEL))
            .cloned()
    };
    let holder = |l: &k8s_openapi::api::coordination::v1::Lease| {
        l.spec
            .as_ref()
            .and_then(|s| s.holder_identity.clone())
            .filter(|h| !h.is_empty())
    };
    let shards: u32 = leases
        .iter()
        .filter(|l| role(l).as_deref() == Some("shard") && holder(l).is_some())
        .filter_map(|l| {
            l.metadata
                .annotations
                .as_ref()?
                .get(SHARDS_ANNOTATION)?
                .parse()
                .ok()
        })
        .max()?;
    let by = leases
        .iter()
        .filter(|l| role(l).as_deref() == Some("shard") && holder(l).is_some())
        .find_map(|l| l.metadata.annotations.as_ref()?.get(SHARD_BY_ANNOTATION))
        .map_or(Some(hpa_sharding::ShardBy::Hpa), |v| {
            hpa_sharding::ShardBy::parse(v)
        })?;
    let shard = by.shard(key, shards);
    let wanted = shard_lease_name(name, shard);
    let identity = leases
        .iter()
        .find(|l| l.metadata.name.as_deref() == Some(wanted.as_str()))
        .and_then(holder)?;
    let address = leases
        .iter()
        .filter(|l| role(l).as_deref() == Some("member"))
        .find(|l| holder(l).as_deref() == Some(identity.as_str()))?
        .metadata
        .annotations
        .as_ref()?
        .get(ADDRESS_ANNOTATION)?
        .clone();
    Some(Owner {
        shard,
        shards,
        identity,
        address,
    })
}

/// The kubeconfig of `--kubeconfig` (and `--context`), else `$KUBECONFIG` or
/// `~/.kube/config`, else the in-cluster service account.
async fn load_config(args: &ExplainArgs) -> Result<kube::Config, String> {
    let options = KubeConfigOptions {
        context: args.context.clone(),
        ..KubeConfigOptions::default()
    };
    match &args.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path).map_err(|e| e.to_string())?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .map_err(|e| e.to_string())
        }
        None if args.context.is_some() => kube::Config::from_kubeconfig(&options)
            .await
            .map_err(|e| e.to_string()),
        None => kube::Config::infer().await.map_err(|e| e.to_string()),
    }
}

fn read_ca(path: &Path) -> Result<Vec<Vec<u8>>, ExplainError> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let certs: Result<Vec<Vec<u8>>, _> = CertificateDer::pem_file_iter(path)
        .map_err(|e| {
            ExplainError::Config(format!("--certificate-authority {}: {e}", path.display()))
        })?
        .map(|c| c.map(|c| c.to_vec()))
        .collect();
    let certs = certs.map_err(|e| {
        ExplainError::Config(format!("--certificate-authority {}: {e}", path.display()))
    })?;
    if certs.is_empty() {
        return Err(ExplainError::Config(format!(
            "--certificate-authority {}: no certificate in the file",
            path.display()
        )));
    }
    Ok(certs)
}

/// A client for the controller's secure port: the kubeconfig user's credentials (or
/// `--token`), the controller's URL and the TLS flags.
async fn controller_client(args: &ExplainArgs, url: &str) -> Result<kube::Client, ExplainError> {
    let uri: http::Uri = url
        .parse()
        .map_err(|e| ExplainError::Usage(format!("--controller {url:?}: {e}")))?;
    if uri.scheme_str() != Some("https") || uri.authority().is_none() {
        return Err(ExplainError::Usage(format!(
            "--controller {url:?}: expected https://HOST:PORT"
        )));
    }
    let mut config = match load_config(args).await {
        Ok(c) => c,
        Err(_) if args.token.is_some() => kube::Config::new(uri.clone()),
        Err(e) => {
            return Err(ExplainError::Config(format!(
                "no credentials for the controller: {e} (give --kubeconfig or --token)"
            )));
        }
    };
    config.cluster_url = uri;
    // The kubeconfig's CA is the API server's, not the controller's.
    config.root_cert = None;
    config.root_cert_file = None;
    config.tls_server_name = None;
    config.accept_invalid_certs = args.insecure_skip_tls_verify;
    config.default_retry = false;
    config.read_timeout = Some(Duration::from_secs(30));
    if let Some(path) = &args.certificate_authority {
        config.root_cert = Some(read_ca(path)?);
    }
    if let Some(token) = &args.token {
        config.auth_info = AuthInfo::default();
        let value = http::HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|e| ExplainError::Usage(format!("--token: {e}")))?;
        config.headers.push((http::header::AUTHORIZATION, value));
    }
    kube::Client::try_from(config).map_err(|e| ExplainError::Config(e.to_string()))
}

/// GETs `path` from the controller: the body of a success, or the server's reason.
async fn get_text(client: &kube::Client, url: &str, path: &str) -> Result<String, ExplainError> {
    let request = http::Request::get(path)
        .body(kube::client::Body::empty())
        .map_err(|e| ExplainError::Request(e.to_string()))?;
    let response = client.send(request).await.map_err(|e| {
        ExplainError::Request(format!(
            "{url}{path}: {} (is the controller's secure port there? a self-signed serving certificate needs --certificate-authority FILE or --insecure-skip-tls-verify)",
            hpa_metrics::kube_error_message(&e)
        ))
    })?;
    let status = response.status();
    let body = response
        .into_body()
        .collect_bytes()
        .await
        .map_err(|e| ExplainError::Request(format!("{url}{path}: {e}")))?;
    let text = String::from_utf8_lossy(&body).into_owned();
    if !status.is_success() {
        let detail = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_owned))
            .unwrap_or_else(|| text.trim().to_owned());
        return Err(ExplainError::Request(format!(
            "{url}{path}: {status}: {detail}"
        )));
    }
    Ok(text)
}

/// The kept decisions of `key`, and (from a shadow controller) its last comparison with the
/// active controller as text.
async fn from_controller(
    args: &ExplainArgs,
    url: &str,
    key: &str,
) -> Result<(Vec<DecisionTrace>, Option<String>), ExplainError> {
    let client = controller_client(args, url).await?;
    let text = get_text(&client, url, &format!("/debug/hpa/{key}")).await?;
    let answer: HpaTraces = serde_json::from_str(&text).map_err(|e| {
        ExplainError::Request(format!("{url}/debug/hpa/{key}: not a trace list: {e}"))
    })?;
    if answer.version != TRACE_VERSION {
        return Err(ExplainError::Request(format!(
            "{url}/debug/hpa/{key}: trace version {:?}, this hpactl reads {TRACE_VERSION:?}",
            answer.version
        )));
    }
    if answer.decisions.is_empty() {
        return Err(ExplainError::Request(format!(
            "{url}/debug/hpa/{key}: no decision recorded"
        )));
    }
    let shadow = answer.decisions.last().is_some_and(|t| t.write.shadow);
    let comparison = if shadow {
        // Best effort: the decisions are the answer; the comparison adds to it.
        get_text(&client, url, "/debug/shadow")
            .await
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| shadow_text(&v, key))
    } else {
        None
    };
    Ok((answer.decisions, comparison))
}

/// The "Compared with the active controller" section of `key` in a `/debug/shadow` answer.
fn shadow_text(answer: &serde_json::Value, key: &str) -> Option<String> {
    let item = answer
        .get("items")?
        .as_array()?
        .iter()
        .find(|i| i.get("hpa").and_then(|h| h.as_str()) == Some(key))?;
    let latest = item.get("latest")?;
    let str_of = |v: &serde_json::Value, k: &str| {
        v.get(k)
            .and_then(|x| x.as_str())
            .unwrap_or_default()
            .to_owned()
    };
    let mut s = format!(
        "\nCompared with the active controller (shadow mode)\n  {} at {}: {}\n",
        str_of(latest, "result"),
        str_of(latest, "time"),
        str_of(latest, "summary")
    );
    let differences = item
        .get("differences")
        .and_then(|d| d.as_array())
        .map_or(0, Vec::len);
    if differences > 0 {
        s.push_str(&format!(
            "  {differences} difference(s) kept at /debug/shadow\n"
        ));
    }
    Some(s)
}

/// One decision computed now with the controller's code in shadow mode: nothing written.
async fn fresh(args: &ExplainArgs, key: &str) -> Result<DecisionTrace, ExplainError> {
    let mut flags = vec!["kube-hpa-controller".to_owned(), "--shadow".to_owned()];
    flags.extend(args.controller_flags.iter().cloned());
    let parsed = hpa_config::Options::parse_args(flags)
        .map_err(|e| ExplainError::Usage(format!("controller flags: {e}")))?;
    let mut config = load_config(args)
        .await
        .map_err(|e| ExplainError::Config(format!("kubeconfig: {e}")))?;
    config.default_retry = false;
    let client = kube::Client::try_from(config).map_err(|e| ExplainError::Config(e.to_string()))?;
    let apis = hpa_metrics::AvailableApis::new();
    let mapper = hpa_metrics::DeferredRestMapper::new(client.clone());
    let metrics = hpa_metrics::RestMetricsClient::with_rest_mapper(
        client.clone(),
        apis.clone(),
        mapper.clone(),
    );
    let scale = KubeScaleClient::with_rest_mapper(client.clone(), mapper);
    // The version the controller would behave as against this cluster.
    let resolved = resolve_version(&parsed.options, &client)
        .await
        .map_err(|e| ExplainError::Config(e.to_string()))?;
    let (controller_config, _) = ControllerConfig::for_resolved(&parsed.options, &resolved)
        .map_err(|e| ExplainError::Usage(format!("controller flags: --feature-gates: {e}")))?;
    if !controller_config.shadow {
        return Err(ExplainError::Usage(
            "controller flags: --shadow=false is not allowed here (explain writes nothing)"
                .to_owned(),
        ));
    }
    let controller = HorizontalController::new(ControllerParts {
        client,
        metrics_client: Arc::new(metrics),
        available_apis: Some(apis),
        scale_client: Some(Arc::new(scale)),
        config: controller_config,
        clock: Arc::new(hpa_config::SystemClock),
        registry: prometheus::Registry::new(),
        workqueue_metrics: None,
        log_emissions: false,
    })
    .map_err(|e| ExplainError::Config(e.to_string()))?;
    controller.start_caches();
    let synced = tokio::time::timeout(CACHE_WAIT, controller.wait_for_cache_sync()).await;
    let result = match synced {
        Ok(Ok(())) => Ok(controller.reconcile_key(key).await),
        Ok(Err(e)) => Err(ExplainError::Request(e.to_string())),
        Err(_) => Err(ExplainError::Request(format!(
            "the HPA and Pod lists did not arrive within {CACHE_WAIT:?}"
        ))),
    };
    let traces = controller.traces().get(key);
    controller.stop();
    let reconciled = result?;
    let Some(mut trace) = traces.into_iter().last() else {
        return Err(ExplainError::Request(match reconciled {
            Err(e) => format!("{key}: {e}"),
            Ok(()) => format!("{key}: no such HorizontalPodAutoscaler"),
        }));
    };
    trace.without_history = true;
    Ok(trace)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: ExplainArgs,
    }

    fn parse(args: &[&str]) -> ExplainArgs {
        Cli::try_parse_from(std::iter::once("explain").chain(args.iter().copied()))
            .map(|c| c.args)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn hpa_names() {
        assert_eq!(key_of(&parse(&["ns/web"])).unwrap(), "ns/web");
        assert_eq!(key_of(&parse(&["web", "-n", "prod"])).unwrap(), "prod/web");
        assert_eq!(key_of(&parse(&["web"])).unwrap(), "default/web");
        for bad in ["ns/", "/web", "a/b/c"] {
            assert!(matches!(
                key_of(&parse(&[bad])),
                Err(ExplainError::Usage(_))
            ));
        }
    }

    #[test]
    fn the_shadow_comparison_reads_as_a_section() {
        let answer = serde_json::json!({"version": "hpa.trace/v1", "shadow": true, "items": [
            {"hpa": "ns/web", "latest": {"result": "differ", "time": "T",
             "summary": "same inputs, different decision: desiredReplicas: ours 4, theirs 2"},
             "differences": [{}]}
        ]});
        let text = shadow_text(&answer, "ns/web").unwrap();
        assert!(text.contains("differ at T: same inputs"), "{text}");
        assert!(
            text.contains("1 difference(s) kept at /debug/shadow"),
            "{text}"
        );
        assert!(shadow_text(&answer, "ns/other").is_none());
    }

    #[test]
    fn the_owner_is_the_holder_of_the_shard_at_its_member_address() {
        use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
        use kube::api::ObjectMeta;
        let lease =
            |name: &str, role: &str, holder: &str, address: Option<&str>| Lease {
                metadata: ObjectMeta {
                    name: Some(name.to_string()),
                    labels: Some(
                        [(
                            "kube-hpa-controller.io/shard-role".to_string(),
                            role.to_string(),
                        )]
                        .into(),
                    ),
                    annotations: Some(
                        [("kube-hpa-controller.io/shards".to_string(), "2".to_string())]
                            .into_iter()
                            .chain(address.map(|a| {
                                ("kube-hpa-controller.io/address".to_string(), a.to_string())
                            }))
                            .collect(),
                    ),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(holder.to_string()),
                    ..LeaseSpec::default()
                }),
            };
        let key = (0..100)
            .map(|i| format!("ns/h{i}"))
            .find(|k| hpa_sharding::shard_of(k, 2) == 1)
            .unwrap();
        let leases = vec![
            lease("khc-shard-0", "shard", "a", None),
            lease("khc-shard-1", "shard", "b", None),
            lease(
                "khc-member-1",
                "member",
                "a",
                Some("https://10.0.0.1:10257"),
            ),
            lease(
                "khc-member-2",
                "member",
                "b",
                Some("https://10.0.0.2:10257"),
            ),
        ];
        assert_eq!(
            owner_in(&leases, "khc", &key),
            Some(Owner {
                shard: 1,
                shards: 2,
                identity: "b".into(),
                address: "https://10.0.0.2:10257".into()
            })
        );
        // Unheld shard, or no member Lease with an address: no owner.
        let mut unheld = leases.clone();
        unheld[1] = lease("khc-shard-1", "shard", "", None);
        assert_eq!(owner_in(&unheld, "khc", &key), None);
        assert_eq!(owner_in(&leases[..3], "khc", &key), None);
        assert_eq!(owner_in(&[], "khc", &key), None);
        // Sharded by namespace: the shard of the namespace.
        let mut by_ns = leases.clone();
        for l in &mut by_ns {
            l.metadata.annotations.as_mut().unwrap().insert(
                "kube-hpa-controller.io/shard-by".to_string(),
                "namespace".to_string(),
            );
        }
        let shard = hpa_sharding::shard_of("ns", 2);
        assert_eq!(
            owner_in(&by_ns, "khc", &key).map(|o| (o.shard, o.identity)),
            Some((shard, ["a", "b"][shard as usize].to_string()))
        );
    }

    #[test]
    fn controller_flags_follow_a_double_dash() {
        let a = parse(&["ns/web", "--", "--horizontal-pod-autoscaler-tolerance=0.2"]);
        assert_eq!(
            a.controller_flags,
            vec!["--horizontal-pod-autoscaler-tolerance=0.2"]
        );
    }
}
