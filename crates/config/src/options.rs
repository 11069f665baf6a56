//! The command line: kube-controller-manager's flags that concern the HPA controller.
//!
//! Mirrors `cmd/kube-controller-manager/app/options/hpacontroller.go` (HPA flags),
//! `staging/src/k8s.io/controller-manager/options/generic.go` (`--controllers`, client
//! settings), component-base's leader-election options, and the apiserver secure-serving,
//! authentication and authorization options that KCM embeds. Names, defaults, help texts and
//! error words follow upstream so that an operator can move a KCM command line over as is.
//! Values parse with Go's rules (the `strconv` module, [`GoDuration`]); errors come out as
//! one line in pflag's words (`invalid argument "abc" for "--flag" flag: ...`).

use std::collections::BTreeMap;
use std::error::Error as _;
use std::ffi::OsString;
use std::net::IpAddr;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::parser::ValueSource;
use clap::{ArgAction, Args, CommandFactory, FromArgMatches, Parser};

use crate::duration::GoDuration;
use crate::feature_gates::{Feature, FeatureGateError, FeatureGates};
use crate::hpa::HpaControllerConfiguration;
use crate::strconv::{StrconvError, parse_bool, parse_float, parse_int};
use crate::version::KubeVersion;

/// The controller's name in `--controllers`, as `names.HorizontalPodAutoscalerController`.
pub const CONTROLLER_NAME: &str = "horizontal-pod-autoscaler-controller";
/// The alias KCM registers for it in `autoscaling.go`.
pub const CONTROLLER_ALIAS: &str = "horizontalpodautoscaling";
/// Default Lease name. Not KCM's `kube-controller-manager`: this process must not contend
/// for the lease that guards KCM's other controllers (see README).
pub const DEFAULT_LEASE_NAME: &str = "kube-hpa-controller";

/// The Lease of a `--shadow` instance when `--leader-elect-resource-name` is not given, so
/// that a shadow never competes with the active instance for its lease.
pub const DEFAULT_SHADOW_LEASE_NAME: &str = "kube-hpa-controller-shadow";
/// The Leases an active HPA controller holds: this controller's default and
/// kube-controller-manager's. A `--shadow` instance may not use them.
pub const ACTIVE_LEASE_NAMES: [&str; 2] = [DEFAULT_LEASE_NAME, "kube-controller-manager"];
/// pflag's deprecation notice for the two no-op delay flags.
pub const DELAY_FLAG_DEPRECATION: &str = "This flag is currently no-op and will be deleted.";

fn go_bool(s: &str) -> Result<bool, StrconvError> {
    parse_bool(s)
}
fn go_int32(s: &str) -> Result<i32, StrconvError> {
    // parse_int(.., 32) guarantees the range.
    parse_int(s, 32).map(|v| v as i32)
}
fn go_int(s: &str) -> Result<i64, StrconvError> {
    parse_int(s, 64)
}
fn go_float64(s: &str) -> Result<f64, StrconvError> {
    parse_float(s)
}
fn go_float32(s: &str) -> Result<f32, StrconvError> {
    let v = parse_float(s)?;
    if v.is_finite() && (v as f32).is_infinite() {
        // ParseFloat(s, 32) reports out of range; reuse the 64-bit message shape.
        return parse_float(&format!("{s}e400")).map(|_| f32::INFINITY);
    }
    Ok(v as f32)
}
fn go_duration(s: &str) -> Result<GoDuration, crate::duration::ParseDurationError> {
    s.parse()
}
fn go_ip(s: &str) -> Result<IpAddr, String> {
    s.trim()
        .parse()
        .map_err(|_| format!("failed to parse IP: {s:?}"))
}
fn feature_gate_value(s: &str) -> Result<FeatureGates, FeatureGateError> {
    FeatureGates::parse(s)
}

/// What `--version` asks for (component-base `verflag`): nothing, the version, or every
/// build field (`--version=raw`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum VersionFlag {
    /// `--version=false`, or no flag: run.
    #[default]
    False,
    /// `--version` or `--version=true`: print the version and quit.
    True,
    /// `--version=raw`: print every build field and quit.
    Raw,
}

impl VersionFlag {
    /// Parses a value as `verflag`'s `versionValue.Set`: `raw`, or a Go bool. `vX.Y.Z`,
    /// which sets the version kube-controller-manager reports, is refused: this binary reports
    /// the version it was built as.
    pub fn parse(s: &str) -> Result<VersionFlag, String> {
        if s == "raw" {
            return Ok(VersionFlag::Raw);
        }
        if s.starts_with('v') {
            return Err(
                "setting the reported version (--version=vX.Y.Z) is not supported; --version and --version=raw print the version this binary was built as".to_string(),
            );
        }
        match parse_bool(s) {
            Ok(true) => Ok(VersionFlag::True),
            Ok(false) => Ok(VersionFlag::False),
            Err(e) => Err(e.to_string()),
        }
    }
}

impl std::fmt::Display for VersionFlag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            VersionFlag::False => "false",
            VersionFlag::True => "true",
            VersionFlag::Raw => "raw",
        })
    }
}

/// `Global flags`: `--version` (component-base `verflag`).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Global flags")]
pub struct GlobalFlags {
    /// --version, --version=raw prints version information and quits
    #[arg(verbatim_doc_comment, long = "version", value_name = "version", num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", action = ArgAction::Set, value_parser = VersionFlag::parse)]
    pub version: VersionFlag,
}

/// `Horizontalpodautoscaling controller flags`.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Horizontalpodautoscaling controller flags")]
pub struct HpaFlags {
    /// The number of horizontal pod autoscaler objects that are allowed to sync concurrently. Larger number = more responsive horizontal pod autoscaler objects processing, but more CPU (and network) load.
    #[arg(verbatim_doc_comment, long = "concurrent-horizontal-pod-autoscaler-syncs", value_name = "int32", default_value = "5", value_parser = go_int32)]
    pub concurrent_syncs: i32,
    /// The period for which autoscaler will look backwards and not scale down below any recommendation it made during that period.
    #[arg(verbatim_doc_comment, long = "horizontal-pod-autoscaler-downscale-stabilization", value_name = "duration", default_value = "5m0s", value_parser = go_duration)]
    pub downscale_stabilization: GoDuration,
    /// The period after pod start when CPU samples might be skipped.
    #[arg(verbatim_doc_comment, long = "horizontal-pod-autoscaler-cpu-initialization-period", value_name = "duration", default_value = "5m0s", value_parser = go_duration)]
    pub cpu_initialization_period: GoDuration,
    /// The period after pod start during which readiness changes will be treated as initial readiness.
    #[arg(verbatim_doc_comment, long = "horizontal-pod-autoscaler-initial-readiness-delay", value_name = "duration", default_value = "30s", value_parser = go_duration)]
    pub initial_readiness_delay: GoDuration,
    /// The period for syncing the number of pods in horizontal pod autoscaler.
    #[arg(verbatim_doc_comment, long = "horizontal-pod-autoscaler-sync-period", value_name = "duration", default_value = "15s", value_parser = go_duration)]
    pub sync_period: GoDuration,
    /// The minimum change (from 1.0) in the desired-to-actual metrics ratio for the horizontal pod autoscaler to consider scaling.
    #[arg(verbatim_doc_comment, long = "horizontal-pod-autoscaler-tolerance", value_name = "float", default_value = "0.1", value_parser = go_float64)]
    pub tolerance: f64,
    /// (DEPRECATED: This flag is currently no-op and will be deleted.) The period since last upscale, before another upscale can be performed in horizontal pod autoscaler.
    #[arg(verbatim_doc_comment, long = "horizontal-pod-autoscaler-upscale-delay", value_name = "duration", default_value = "3m0s", value_parser = go_duration)]
    pub upscale_delay: GoDuration,
    /// (DEPRECATED: This flag is currently no-op and will be deleted.) The period since last downscale, before another downscale can be performed in horizontal pod autoscaler.
    #[arg(verbatim_doc_comment, long = "horizontal-pod-autoscaler-downscale-delay", value_name = "duration", default_value = "5m0s", value_parser = go_duration)]
    pub downscale_delay: GoDuration,
}

/// Flags of this controller that kube-controller-manager does not have: how it keeps its API
/// cost down. Their defaults keep upstream's decisions.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Cost flags (not in kube-controller-manager)")]
pub struct CostFlags {
    /// Read the scale of Deployments, StatefulSets, ReplicaSets and ReplicationControllers (and of custom resources whose list/watch RBAC allows) from watch caches instead of one GET of the scale subresource per HPA and sync. Writes stay PUTs of the scale subresource. false reads every scale with a GET, as kube-controller-manager does.
    #[arg(verbatim_doc_comment, long = "scale-target-cache", value_name = "true|false", num_args = 0..=1, require_equals = true, default_value = "true", default_missing_value = "true", action = ArgAction::Set, value_parser = go_bool)]
    pub scale_target_cache: bool,
    /// When above 0s, Resource and ContainerResource pod metrics are listed once per namespace per window, and Pods metrics once per namespace and metric name per window, and shared by every HPA reconciled in that window (metrics up to one window old; a custom metrics adapter must serve a list without a label selector). 0s fetches per HPA, as kube-controller-manager does.
    #[arg(verbatim_doc_comment, long = "metrics-batch-window", value_name = "duration", default_value = "0s", value_parser = go_duration)]
    pub metrics_batch_window: GoDuration,
}

/// `Generic flags`: controllers, client settings, feature gates.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Generic flags")]
pub struct GenericFlags {
    /// A list of controllers to enable. '*' enables all on-by-default controllers, 'foo' enables the controller named 'foo', '-foo' disables the controller named 'foo'.
    /// All controllers: horizontal-pod-autoscaler-controller (alias horizontalpodautoscaling)
    #[arg(
        verbatim_doc_comment,
        long = "controllers",
        value_name = "strings",
        value_delimiter = ',',
        default_value = "*"
    )]
    pub controllers: Vec<String>,
    /// The versions different components emulate their capabilities (APIs, features, ...) of.
    /// If set, the component will emulate the behavior of this version instead of the underlying binary version.
    /// Version format could only be major.minor, for example: '--emulated-version=wardle=1.2,kube=1.31'. Options are:
    /// kube=1.35..1.37 (default: the API server's version, read at start; older servers get 1.35, newer 1.37)
    /// If the component is not specified, defaults to "kube"
    #[arg(
        verbatim_doc_comment,
        long = "emulated-version",
        value_name = "strings",
        value_delimiter = ','
    )]
    pub emulated_version: Vec<String>,
    /// See the feature gate list below; filled in by [`Options::command`].
    #[arg(verbatim_doc_comment, long = "feature-gates", value_name = "mapStringBool", action = ArgAction::Append, value_parser = feature_gate_value)]
    pub feature_gates: Vec<FeatureGates>,
    /// Burst to use while talking with kubernetes apiserver.
    #[arg(verbatim_doc_comment, long = "kube-api-burst", value_name = "int32", default_value = "30", value_parser = go_int32)]
    pub kube_api_burst: i32,
    /// Content type of requests sent to apiserver.
    #[arg(
        verbatim_doc_comment,
        long = "kube-api-content-type",
        value_name = "string",
        default_value = "application/vnd.kubernetes.protobuf"
    )]
    pub kube_api_content_type: String,
    /// QPS to use while talking with kubernetes apiserver.
    #[arg(verbatim_doc_comment, long = "kube-api-qps", value_name = "float32", default_value = "20", value_parser = go_float32)]
    pub kube_api_qps: f32,
}

/// Leader election flags (component-base `BindLeaderElectionFlags`), in `Generic flags`.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Generic flags")]
pub struct LeaderElectionFlags {
    /// Start a leader election client and gain leadership before executing the main loop. Enable this when running replicated components for high availability.
    #[arg(verbatim_doc_comment, long = "leader-elect", value_name = "true|false", num_args = 0..=1, require_equals = true, default_value = "true", default_missing_value = "true", action = ArgAction::Set, value_parser = go_bool)]
    pub leader_elect: bool,
    /// The duration that non-leader candidates will wait after observing a leadership renewal until attempting to acquire leadership of a led but unrenewed leader slot. This is effectively the maximum duration that a leader can be stopped before it is replaced by another candidate. This is only applicable if leader election is enabled.
    #[arg(verbatim_doc_comment, long = "leader-elect-lease-duration", value_name = "duration", default_value = "15s", value_parser = go_duration)]
    pub lease_duration: GoDuration,
    /// The interval between attempts by the acting master to renew a leadership slot before it stops leading. This must be less than the lease duration. This is only applicable if leader election is enabled.
    #[arg(verbatim_doc_comment, long = "leader-elect-renew-deadline", value_name = "duration", default_value = "10s", value_parser = go_duration)]
    pub renew_deadline: GoDuration,
    /// The type of resource object that is used for locking during leader election. Supported options are 'leases'.
    #[arg(
        verbatim_doc_comment,
        long = "leader-elect-resource-lock",
        value_name = "string",
        default_value = "leases"
    )]
    pub resource_lock: String,
    /// The name of resource object that is used for locking during leader election.
    #[arg(verbatim_doc_comment, long = "leader-elect-resource-name", value_name = "string", default_value = DEFAULT_LEASE_NAME)]
    pub resource_name: String,
    /// The namespace of resource object that is used for locking during leader election.
    #[arg(
        verbatim_doc_comment,
        long = "leader-elect-resource-namespace",
        value_name = "string",
        default_value = "kube-system"
    )]
    pub resource_namespace: String,
    /// The duration the clients should wait between attempting acquisition and renewal of a leadership. This is only applicable if leader election is enabled.
    #[arg(verbatim_doc_comment, long = "leader-elect-retry-period", value_name = "duration", default_value = "2s", value_parser = go_duration)]
    pub retry_period: GoDuration,
}

/// `Secure serving flags` (apiserver `SecureServingOptions`).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Secure serving flags")]
pub struct ServingFlags {
    /// The IP address on which to listen for the --secure-port port. The associated interface(s) must be reachable by the rest of the cluster, and by CLI/web clients. If blank or an unspecified address (0.0.0.0 or ::), all interfaces and IP address families will be used.
    #[arg(verbatim_doc_comment, long = "bind-address", value_name = "ip", default_value = "0.0.0.0", value_parser = go_ip)]
    pub bind_address: IpAddr,
    /// The directory where the TLS certs are located. If --tls-cert-file and --tls-private-key-file are provided, this flag will be ignored.
    #[arg(
        verbatim_doc_comment,
        long = "cert-dir",
        value_name = "string",
        default_value = ""
    )]
    pub cert_dir: String,
    /// The port on which to serve HTTPS with authentication and authorization. If 0, don't serve HTTPS at all.
    #[arg(verbatim_doc_comment, long = "secure-port", value_name = "int", default_value = "10257", value_parser = go_int)]
    pub secure_port: i64,
    /// File containing the default x509 Certificate for HTTPS. (CA cert, if any, concatenated after server cert). If HTTPS serving is enabled, and --tls-cert-file and --tls-private-key-file are not provided, a self-signed certificate and key are generated for the public address and saved to the directory specified by --cert-dir.
    #[arg(
        verbatim_doc_comment,
        long = "tls-cert-file",
        value_name = "string",
        default_value = ""
    )]
    pub tls_cert_file: String,
    /// File containing the default x509 private key matching --tls-cert-file.
    #[arg(
        verbatim_doc_comment,
        long = "tls-private-key-file",
        value_name = "string",
        default_value = ""
    )]
    pub tls_private_key_file: String,
}

/// `Authentication flags` and `Authorization flags` (apiserver delegating options).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Authentication and authorization flags")]
pub struct AuthFlags {
    /// kubeconfig file pointing at the 'core' kubernetes server with enough rights to create tokenreviews.authentication.k8s.io. This is optional. If empty, all token requests are considered to be anonymous and no client CA is looked up in the cluster.
    #[arg(
        verbatim_doc_comment,
        long = "authentication-kubeconfig",
        value_name = "string",
        default_value = ""
    )]
    pub authentication_kubeconfig: String,
    /// A list of HTTP paths to skip during authorization, i.e. these are authorized without contacting the 'core' kubernetes server.
    #[arg(
        verbatim_doc_comment,
        long = "authorization-always-allow-paths",
        value_name = "strings",
        value_delimiter = ',',
        default_value = "/healthz,/readyz,/livez"
    )]
    pub authorization_always_allow_paths: Vec<String>,
    /// kubeconfig file pointing at the 'core' kubernetes server with enough rights to create subjectaccessreviews.authorization.k8s.io. This is optional. If empty, all requests not skipped by authorization are forbidden.
    #[arg(
        verbatim_doc_comment,
        long = "authorization-kubeconfig",
        value_name = "string",
        default_value = ""
    )]
    pub authorization_kubeconfig: String,
}

/// `Logs flags` (component-base logs options and klog's `-v`).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Logs flags")]
pub struct LoggingFlags {
    /// Sets the log format. Permitted formats: "json", "text".
    #[arg(
        verbatim_doc_comment,
        long = "logging-format",
        value_name = "string",
        default_value = "text"
    )]
    pub logging_format: String,
    /// number for the log level verbosity
    #[arg(verbatim_doc_comment, short = 'v', long = "v", value_name = "Level", default_value = "0", value_parser = go_int32)]
    pub verbosity: i32,
}

/// `Misc flags`: where the API server is.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Misc flags")]
pub struct MiscFlags {
    /// Path to kubeconfig file with authorization and master location information.
    #[arg(
        verbatim_doc_comment,
        long = "kubeconfig",
        value_name = "string",
        default_value = ""
    )]
    pub kubeconfig: String,
    /// The address of the Kubernetes API server (overrides any value in kubeconfig).
    #[arg(
        verbatim_doc_comment,
        long = "master",
        value_name = "string",
        default_value = ""
    )]
    pub master: String,
}

/// `Shadow flags` (no KCM counterpart): run beside the active controller, writing nothing.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Shadow flags")]
pub struct ShadowFlags {
    /// Run the whole controller but write nothing (no scale, no status, no event): compare every decision with what the active controller (kube-controller-manager) last wrote, export kube_hpa_controller_shadow_comparisons_total and keep the differences at /debug/shadow. The leader-election Lease defaults to kube-hpa-controller-shadow.
    #[arg(verbatim_doc_comment, long = "shadow", value_name = "true|false", num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", action = ArgAction::Set, value_parser = go_bool)]
    pub shadow: bool,
}

/// `History flags` (no KCM counterpart): the stabilization and policy history across a
/// failover or restart.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "History flags (not in kube-controller-manager)")]
pub struct HistoryFlags {
    /// Keep every HPA's recommendations (read by the stabilization windows) and scale events (read by the behavior policies' periods) in the ConfigMaps LEASE-history-0 to -15 beside the leader-election Lease LEASE: the leader writes what changed in batches, and the next leader reads them before its first decision, so that a failover or restart neither restarts the windows nor lets the policies' periods start over. false keeps them in memory only, as kube-controller-manager does.
    #[arg(verbatim_doc_comment, long = "persist-hpa-history", value_name = "true|false", num_args = 0..=1, require_equals = true, default_value = "true", default_missing_value = "true", action = ArgAction::Set, value_parser = go_bool)]
    pub persist_hpa_history: bool,
}

/// `Sharding flags` (no KCM counterpart): several active replicas, each reconciling a share
/// of the HPAs.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Sharding flags (not in kube-controller-manager)")]
pub struct ShardFlags {
    /// Split the HPAs into this many shards by a hash of namespace/name, each with its own Lease (LEASE-shard-0 ... beside the leader-election Lease LEASE), so that several replicas reconcile at once: each holds the shards whose Lease it wins, at most ceil(shards/replicas) while another replica holds fewer, and writes for an HPA only while it holds its shard. 1 is kube-controller-manager's single leader. Needs --leader-elect; every replica must run with the same value (a replica takes no shard while another runs with a different one).
    #[arg(
        verbatim_doc_comment,
        long = "shards",
        value_name = "int",
        default_value_t = 1
    )]
    pub shards: u32,
    /// With --shards: what an HPA's shard is computed from. hpa (its namespace/name) spreads the HPAs evenly whatever the namespaces; namespace puts all the HPAs of a namespace in one shard, so that with --metrics-batch-window each replica lists the PodMetrics of its own namespaces only (as even as the namespaces are). Every replica must run with the same value.
    #[arg(verbatim_doc_comment, long = "shard-by", value_name = "hpa|namespace", default_value = "hpa", value_parser = ["hpa", "namespace"])]
    pub shard_by: String,
}

/// The most shards `--shards` accepts.
pub const MAX_SHARDS: u32 = 1024;

/// Every flag of `kube-hpa-controller`.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "kube-hpa-controller",
    about = "The Kubernetes horizontal pod autoscaler controller, run on its own instead of inside kube-controller-manager.",
    long_about = "The Kubernetes horizontal pod autoscaler controller, run on its own instead of inside kube-controller-manager \
(start kube-controller-manager with --controllers=*,-horizontalpodautoscaling). It takes kube-controller-manager's flags \
for this controller, with the same names, defaults and meanings."
)]
pub struct Options {
    /// HPA flags.
    #[command(flatten)]
    pub hpa: HpaFlags,
    /// Scale target cache and metrics batching.
    #[command(flatten)]
    pub cost: CostFlags,
    /// Controllers, client, feature gates.
    #[command(flatten)]
    pub generic: GenericFlags,
    /// Leader election.
    #[command(flatten)]
    pub leader_election: LeaderElectionFlags,
    /// Secure serving.
    #[command(flatten)]
    pub serving: ServingFlags,
    /// Authentication and authorization of the serving endpoints.
    #[command(flatten)]
    pub auth: AuthFlags,
    /// Logging.
    #[command(flatten)]
    pub logging: LoggingFlags,
    /// API server location.
    #[command(flatten)]
    pub misc: MiscFlags,
    /// Shadow mode.
    #[command(flatten)]
    pub shadow: ShadowFlags,
    /// `--version`.
    #[command(flatten)]
    pub global: GlobalFlags,
    /// The persisted history.
    #[command(flatten)]
    pub history: HistoryFlags,
    /// Active-active shards.
    #[command(flatten)]
    pub sharding: ShardFlags,
}

/// Why parsing stopped: a request for help or the version (exit 0), or bad flags (exit 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlagError {
    /// `--help`: print the text to stdout, exit 0.
    #[error("{0}")]
    Help(String),
    /// `--version` or `--version=raw`: print the build's version (the binary knows it, this
    /// crate does not) to stdout, exit 0.
    #[error("--version={0}")]
    Version(VersionFlag),
    /// A flag or value that cannot be used; one line naming the flag and the problem.
    #[error("{0}")]
    Invalid(String),
}

impl FlagError {
    /// The process exit status for this outcome.
    pub fn exit_code(&self) -> i32 {
        match self {
            FlagError::Help(_) | FlagError::Version(_) => 0,
            FlagError::Invalid(_) => 2,
        }
    }
}

/// Parsed flags plus what parsing had to say (deprecation notices, printed once each).
#[derive(Debug, Clone)]
pub struct Parsed {
    /// The options.
    pub options: Options,
    /// pflag-style notices, e.g. `Flag --x has been deprecated, ...`.
    pub warnings: Vec<String>,
}

impl Options {
    /// The clap command with the feature-gate list filled into its help.
    pub fn command() -> clap::Command {
        <Options as CommandFactory>::command()
            // pflag: a repeated flag takes the last value.
            .args_override_self(true)
            .mut_arg("feature_gates", |a| a.help(FeatureGates::help()))
    }

    /// Parses a full argument vector (program name first) and validates it.
    pub fn parse_args<I, T>(args: I) -> Result<Parsed, FlagError>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let matches = Options::command()
            .try_get_matches_from(args)
            .map_err(|e| clap_error_line(&e))?;
        let mut options = Options::from_arg_matches(&matches).map_err(|e| clap_error_line(&e))?;
        // component-base's `PrintAndExitIfRequested` runs before any validation.
        if options.global.version != VersionFlag::False {
            return Err(FlagError::Version(options.global.version));
        }
        if options.shadow.shadow
            && matches.value_source("resource_name") != Some(ValueSource::CommandLine)
        {
            options.leader_election.resource_name = DEFAULT_SHADOW_LEASE_NAME.to_owned();
        }
        let mut warnings = Vec::new();
        for (id, flag) in [
            ("upscale_delay", "horizontal-pod-autoscaler-upscale-delay"),
            (
                "downscale_delay",
                "horizontal-pod-autoscaler-downscale-delay",
            ),
        ] {
            if matches.value_source(id) == Some(ValueSource::CommandLine) {
                warnings.push(format!(
                    "Flag --{flag} has been deprecated, {DELAY_FLAG_DEPRECATION}"
                ));
            }
        }
        if let Some(first) = options.validate().into_iter().next() {
            return Err(FlagError::Invalid(first));
        }
        Ok(Parsed { options, warnings })
    }

    /// Parses a scenario's `flags` map (names without `--`, values as on a command line).
    pub fn from_flag_map(flags: &BTreeMap<String, String>) -> Result<Parsed, FlagError> {
        let args = std::iter::once("kube-hpa-controller".to_string())
            .chain(flags.iter().map(|(k, v)| format!("--{k}={v}")));
        Options::parse_args(args)
    }

    /// Every validation error, each one line naming the flag, in upstream's words where
    /// upstream has them. Upstream validates in `KubeControllerManagerOptions.Validate`
    /// (HPA, generic, serving) and `leaderelection.NewLeaderElector` (timings).
    pub fn validate(&self) -> Vec<String> {
        let mut errs = self.hpa_configuration().validate();
        let le = &self.leader_election;
        if le.leader_elect {
            if le.resource_lock != "leases" {
                errs.push(format!(
                    "--leader-elect-resource-lock: resourceLock value must be \"leases\", got {:?}",
                    le.resource_lock
                ));
            }
            if le.lease_duration <= le.renew_deadline {
                errs.push(format!(
                    "--leader-elect-renew-deadline: leaseDuration must be greater than renewDeadline (lease duration {}, renew deadline {})",
                    le.lease_duration, le.renew_deadline
                ));
            }
            // client-go's JitterFactor is 1.2.
            if (le.renew_deadline.as_nanos() as f64) <= 1.2 * le.retry_period.as_nanos() as f64 {
                errs.push(format!(
                    "--leader-elect-retry-period: renewDeadline must be greater than retryPeriod*JitterFactor (renew deadline {}, retry period {})",
                    le.renew_deadline, le.retry_period
                ));
            }
            for (flag, d) in [
                ("--leader-elect-lease-duration", le.lease_duration),
                ("--leader-elect-renew-deadline", le.renew_deadline),
                ("--leader-elect-retry-period", le.retry_period),
            ] {
                if d.as_nanos() < 1 {
                    errs.push(format!("{flag}: must be greater than zero, got {d}"));
                }
            }
        }
        if self.shadow.shadow
            && le.leader_elect
            && ACTIVE_LEASE_NAMES.contains(&le.resource_name.as_str())
        {
            errs.push(format!(
                "--leader-elect-resource-name: a --shadow instance must not take {:?}, the Lease of an active controller: a shadow holding it would stop that controller's scaling; leave the flag unset ({DEFAULT_SHADOW_LEASE_NAME}) or name a Lease of its own",
                le.resource_name
            ));
        }
        for name in &self.generic.controllers {
            if name == "*" {
                continue;
            }
            let bare = name.strip_prefix('-').unwrap_or(name);
            if bare != CONTROLLER_NAME && bare != CONTROLLER_ALIAS {
                errs.push(format!(
                    "--controllers: {bare:?} is not in the list of known controllers"
                ));
            }
        }
        match KubeVersion::from_flag(&self.generic.emulated_version) {
            Err(e) => errs.push(format!("--emulated-version: {e}")),
            Ok(Some(v)) => {
                if let Err(e) = self.feature_gates().at_version(v) {
                    errs.push(format!("--feature-gates: {e}"));
                }
            }
            Ok(None) => {}
        }
        let shards = self.sharding.shards;
        if !(1..=MAX_SHARDS).contains(&shards) {
            errs.push(format!(
                "--shards: must be between 1 and {MAX_SHARDS}, got {shards}"
            ));
        } else if shards > 1 && !le.leader_elect {
            errs.push(
                "--shards: more than one shard needs --leader-elect=true (each shard is a Lease)"
                    .to_string(),
            );
        }
        if self.cost.metrics_batch_window.as_nanos() < 0 {
            errs.push(format!(
                "--metrics-batch-window: must be zero or positive, got {}",
                self.cost.metrics_batch_window
            ));
        }
        if !(0..=65535).contains(&self.serving.secure_port) {
            errs.push(format!(
                "--secure-port {} must be between 0 and 65535, inclusive. 0 for turning off secure port",
                self.serving.secure_port
            ));
        }
        if !matches!(self.logging.logging_format.as_str(), "text" | "json") {
            errs.push(format!(
                "--logging-format: format: Unsupported value: {:?}: supported values: \"json\", \"text\"",
                self.logging.logging_format
            ));
        }
        if self.serving.tls_cert_file.is_empty() != self.serving.tls_private_key_file.is_empty() {
            errs.push(
                "--tls-cert-file and --tls-private-key-file: both must be given, or neither"
                    .to_string(),
            );
        }
        errs
    }

    /// The HPA controller configuration these flags describe.
    pub fn hpa_configuration(&self) -> HpaControllerConfiguration {
        let h = &self.hpa;
        HpaControllerConfiguration {
            concurrent_syncs: h.concurrent_syncs,
            sync_period: h.sync_period,
            upscale_forbidden_window: h.upscale_delay,
            downscale_forbidden_window: h.downscale_delay,
            downscale_stabilization_window: h.downscale_stabilization,
            tolerance: h.tolerance,
            cpu_initialization_period: h.cpu_initialization_period,
            initial_readiness_delay: h.initial_readiness_delay,
        }
    }

    /// The effective feature gates: defaults, then every `--feature-gates` in order.
    pub fn feature_gates(&self) -> FeatureGates {
        let mut gates = FeatureGates::default();
        for g in &self.generic.feature_gates {
            gates.merge(g);
        }
        gates
    }

    /// The version `--emulated-version` names, if given (and valid: [`Options::validate`]
    /// refuses a bad one).
    pub fn emulated_version(&self) -> Option<KubeVersion> {
        KubeVersion::from_flag(&self.generic.emulated_version)
            .ok()
            .flatten()
    }

    /// The effective feature gates at `version` (defaults and lock-ins of that version, then
    /// every `--feature-gates`), with component-base's warnings to log.
    pub fn feature_gates_at(
        &self,
        version: KubeVersion,
    ) -> Result<(FeatureGates, Vec<String>), FeatureGateError> {
        self.feature_gates().at_version(version)
    }

    /// Whether `feature` is on.
    pub fn feature_enabled(&self, feature: Feature) -> bool {
        self.feature_gates().enabled(feature)
    }

    /// Whether `--controllers` enables the HPA controller (KCM's `IsControllerEnabled`: an
    /// explicit `-name` wins, then an explicit `name`, then `*` for on-by-default ones).
    pub fn hpa_controller_enabled(&self) -> bool {
        let names = &self.generic.controllers;
        let is_ours = |n: &str| n == CONTROLLER_NAME || n == CONTROLLER_ALIAS;
        if names
            .iter()
            .any(|n| n.strip_prefix('-').is_some_and(is_ours))
        {
            return false;
        }
        if names.iter().any(|n| is_ours(n)) {
            return true;
        }
        names.iter().any(|n| n == "*")
    }
}

/// Renders a clap error as the single line pflag/cobra would print (without `Error: `).
fn clap_error_line(err: &clap::Error) -> FlagError {
    let flag_of = |err: &clap::Error| -> String {
        match err.get(ContextKind::InvalidArg) {
            Some(ContextValue::String(s)) => s
                .split([' ', '=', '['])
                .find(|t| t.starts_with("--"))
                .or_else(|| s.split([' ', ',', '=']).next())
                .unwrap_or(s)
                .to_string(),
            _ => String::new(),
        }
    };
    let value_of = |err: &clap::Error| -> String {
        match err.get(ContextKind::InvalidValue) {
            Some(ContextValue::String(s)) => s.clone(),
            _ => String::new(),
        }
    };
    match err.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            FlagError::Help(err.render().to_string())
        }
        ErrorKind::DisplayVersion => FlagError::Version(VersionFlag::True),
        ErrorKind::ValueValidation | ErrorKind::InvalidValue => {
            let flag = flag_of(err);
            let value = value_of(err);
            let cause = err
                .source()
                .map(|s| s.to_string())
                .unwrap_or_else(|| "invalid value".to_string());
            if value.is_empty() && err.kind() == ErrorKind::InvalidValue {
                FlagError::Invalid(format!("flag needs an argument: {flag}"))
            } else {
                FlagError::Invalid(format!(
                    "invalid argument {value:?} for {flag:?} flag: {cause}"
                ))
            }
        }
        ErrorKind::UnknownArgument => {
            let arg = flag_of(err);
            if arg.starts_with("--") || arg.is_empty() {
                FlagError::Invalid(format!("unknown flag: {arg}"))
            } else {
                let c = arg.trim_start_matches('-').chars().next().unwrap_or('?');
                FlagError::Invalid(format!("unknown shorthand flag: '{c}' in {arg}"))
            }
        }
        ErrorKind::NoEquals => FlagError::Invalid(format!(
            "bad flag syntax: {} (a bool flag takes its value after '=')",
            flag_of(err)
        )),
        _ => {
            let rendered = err.render().to_string();
            let line = rendered
                .lines()
                .next()
                .unwrap_or("invalid flags")
                .trim_start_matches("error: ")
                .to_string();
            FlagError::Invalid(line)
        }
    }
}

#[cfg(test)]
mod tests;
