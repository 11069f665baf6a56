use super::*;

fn parse(args: &[&str]) -> Result<Parsed, FlagError> {
    Options::parse_args(std::iter::once("kube-hpa-controller").chain(args.iter().copied()))
}

fn invalid(args: &[&str]) -> String {
    match parse(args) {
        Err(FlagError::Invalid(m)) => m,
        other => panic!("expected an invalid-flag error for {args:?}, got {other:?}"),
    }
}

#[test]
fn shadow_has_its_own_lease_unless_named() {
    let o = parse(&[]).unwrap().options;
    assert!(!o.shadow.shadow);
    let o = parse(&["--shadow"]).unwrap().options;
    assert!(o.shadow.shadow);
    assert_eq!(o.leader_election.resource_name, DEFAULT_SHADOW_LEASE_NAME);
    let o = parse(&["--shadow=true", "--leader-elect-resource-name=mine"])
        .unwrap()
        .options;
    assert_eq!(o.leader_election.resource_name, "mine");
    let o = parse(&["--shadow=false"]).unwrap().options;
    assert_eq!(o.leader_election.resource_name, DEFAULT_LEASE_NAME);
    assert!(matches!(
        parse(&["--shadow=maybe"]),
        Err(FlagError::Invalid(_))
    ));
}

/// A shadow that won the active controller's Lease would stop all scaling.
#[test]
fn a_shadow_may_not_take_an_active_controllers_lease() {
    for name in ["kube-hpa-controller", "kube-controller-manager"] {
        let flag = format!("--leader-elect-resource-name={name}");
        let m = invalid(&["--shadow", &flag]);
        assert!(
            m.starts_with("--leader-elect-resource-name: a --shadow instance must not take"),
            "{m}"
        );
        assert!(m.contains(&format!("{name:?}")), "{m}");
        // Not a shadow: either name is fine.
        assert!(parse(&[&flag]).is_ok());
    }
    assert!(parse(&["--shadow", "--leader-elect-resource-name=my-shadow"]).is_ok());
}

#[test]
fn defaults_equal_upstream() {
    let p = parse(&[]).unwrap();
    let o = p.options;
    assert!(p.warnings.is_empty());
    assert_eq!(o.hpa_configuration(), HpaControllerConfiguration::default());
    assert_eq!(o.generic.kube_api_qps, 20.0);
    assert_eq!(o.generic.kube_api_burst, 30);
    assert_eq!(
        o.generic.kube_api_content_type,
        "application/vnd.kubernetes.protobuf"
    );
    assert_eq!(o.generic.controllers, vec!["*"]);
    assert!(o.leader_election.leader_elect);
    assert_eq!(o.leader_election.lease_duration.to_string(), "15s");
    assert_eq!(o.leader_election.renew_deadline.to_string(), "10s");
    assert_eq!(o.leader_election.retry_period.to_string(), "2s");
    assert_eq!(o.leader_election.resource_lock, "leases");
    assert_eq!(o.leader_election.resource_name, DEFAULT_LEASE_NAME);
    assert_eq!(o.leader_election.resource_namespace, "kube-system");
    assert_eq!(o.serving.secure_port, 10257);
    assert_eq!(o.serving.bind_address.to_string(), "0.0.0.0");
    assert_eq!(o.serving.cert_dir, "");
    assert_eq!(
        o.auth.authorization_always_allow_paths,
        vec!["/healthz", "/readyz", "/livez"]
    );
    assert_eq!(o.logging.logging_format, "text");
    assert_eq!(o.logging.verbosity, 0);
    assert_eq!(o.misc.kubeconfig, "");
    assert_eq!(o.misc.master, "");
    let gates = o.feature_gates();
    assert!(gates.enabled(Feature::HpaConfigurableTolerance));
    assert!(!gates.enabled(Feature::HpaScaleToZero));
    assert!(gates.enabled(Feature::PodLevelResources));
    assert!(o.hpa_controller_enabled());
    assert!(o.cost.scale_target_cache);
    assert_eq!(o.cost.metrics_batch_window, GoDuration::ZERO);
}

#[test]
fn emulated_version_flag() {
    assert_eq!(parse(&[]).unwrap().options.emulated_version(), None);
    let o = parse(&["--emulated-version=1.37"]).unwrap().options;
    assert_eq!(o.emulated_version(), Some(KubeVersion::V1_37));
    let (g, _) = o.feature_gates_at(KubeVersion::V1_37).unwrap();
    assert!(g.enabled(Feature::HpaScaleToZero));
    assert_eq!(
        parse(&["--emulated-version=kube=1.36"])
            .unwrap()
            .options
            .emulated_version(),
        Some(KubeVersion::V1_36)
    );
    assert_eq!(
        invalid(&["--emulated-version=1.34"]),
        "--emulated-version: emulation version 1.34 is not between [1.35, 1.37]"
    );
    assert_eq!(
        invalid(&[
            "--emulated-version=1.37",
            "--feature-gates=HPAConfigurableTolerance=false"
        ]),
        "--feature-gates: cannot set feature gate HPAConfigurableTolerance to false, feature is locked to true"
    );
    assert_eq!(
        invalid(&[
            "--emulated-version=1.36",
            "--feature-gates=HPAGeneration=true"
        ]),
        "--feature-gates: cannot set feature gate HPAGeneration to true, feature is PreAlpha at emulated version 1.36"
    );
}

#[test]
fn cost_flags() {
    let o = parse(&["--scale-target-cache=false", "--metrics-batch-window=15s"])
        .unwrap()
        .options;
    assert!(!o.cost.scale_target_cache);
    assert_eq!(o.cost.metrics_batch_window, GoDuration::from_secs(15));
    assert!(
        parse(&["--scale-target-cache"])
            .unwrap()
            .options
            .cost
            .scale_target_cache
    );
    let err = parse(&["--metrics-batch-window=-1s"]).unwrap_err();
    assert_eq!(
        err,
        FlagError::Invalid("--metrics-batch-window: must be zero or positive, got -1s".into())
    );
    assert!(matches!(
        parse(&["--metrics-batch-window=soon"]),
        Err(FlagError::Invalid(_))
    ));
}

#[test]
fn every_flag_parses() {
    let p = parse(&[
        "--concurrent-horizontal-pod-autoscaler-syncs=10",
        "--horizontal-pod-autoscaler-sync-period=30s",
        "--horizontal-pod-autoscaler-downscale-stabilization=1m30s",
        "--horizontal-pod-autoscaler-tolerance",
        "0.05",
        "--horizontal-pod-autoscaler-cpu-initialization-period=3m",
        "--horizontal-pod-autoscaler-initial-readiness-delay=10s",
        "--horizontal-pod-autoscaler-upscale-delay=1m",
        "--horizontal-pod-autoscaler-downscale-delay=2m",
        "--kubeconfig=/etc/kubeconfig",
        "--master=https://10.0.0.1:6443",
        "--kube-api-qps=50",
        "--kube-api-burst=100",
        "--kube-api-content-type=application/json",
        "--leader-elect=false",
        "--leader-elect-lease-duration=30s",
        "--leader-elect-renew-deadline=20s",
        "--leader-elect-retry-period=5s",
        "--leader-elect-resource-lock=leases",
        "--leader-elect-resource-name=my-hpa",
        "--leader-elect-resource-namespace=autoscaling",
        "--secure-port=8443",
        "--bind-address=127.0.0.1",
        "--cert-dir=/var/run/certs",
        "--tls-cert-file=/tls/tls.crt",
        "--tls-private-key-file=/tls/tls.key",
        "--authentication-kubeconfig=/a",
        "--authorization-kubeconfig=/b",
        "--authorization-always-allow-paths=/healthz,/metrics",
        "--controllers=*,horizontalpodautoscaling",
        "--feature-gates=HPAScaleToZero=true",
        "--feature-gates=PodLevelResources=false",
        "-v",
        "4",
        "--logging-format=json",
    ])
    .unwrap();
    let o = &p.options;
    let c = o.hpa_configuration();
    assert_eq!(c.concurrent_syncs, 10);
    assert_eq!(c.sync_period, GoDuration::from_secs(30));
    assert_eq!(c.downscale_stabilization_window, GoDuration::from_secs(90));
    assert_eq!(c.tolerance, 0.05);
    assert_eq!(c.cpu_initialization_period, GoDuration::from_mins(3));
    assert_eq!(c.initial_readiness_delay, GoDuration::from_secs(10));
    assert_eq!(c.upscale_forbidden_window, GoDuration::from_mins(1));
    assert_eq!(c.downscale_forbidden_window, GoDuration::from_mins(2));
    assert_eq!(o.misc.kubeconfig, "/etc/kubeconfig");
    assert_eq!(o.misc.master, "https://10.0.0.1:6443");
    assert_eq!(o.generic.kube_api_qps, 50.0);
    assert_eq!(o.generic.kube_api_burst, 100);
    assert_eq!(o.generic.kube_api_content_type, "application/json");
    assert!(!o.leader_election.leader_elect);
    assert_eq!(o.leader_election.lease_duration, GoDuration::from_secs(30));
    assert_eq!(o.leader_election.renew_deadline, GoDuration::from_secs(20));
    assert_eq!(o.leader_election.retry_period, GoDuration::from_secs(5));
    assert_eq!(o.leader_election.resource_name, "my-hpa");
    assert_eq!(o.leader_election.resource_namespace, "autoscaling");
    assert_eq!(o.serving.secure_port, 8443);
    assert_eq!(o.serving.bind_address.to_string(), "127.0.0.1");
    assert_eq!(o.serving.cert_dir, "/var/run/certs");
    assert_eq!(o.serving.tls_cert_file, "/tls/tls.crt");
    assert_eq!(o.serving.tls_private_key_file, "/tls/tls.key");
    assert_eq!(o.auth.authentication_kubeconfig, "/a");
    assert_eq!(o.auth.authorization_kubeconfig, "/b");
    assert_eq!(
        o.auth.authorization_always_allow_paths,
        vec!["/healthz", "/metrics"]
    );
    assert!(o.feature_enabled(Feature::HpaScaleToZero));
    assert!(!o.feature_enabled(Feature::PodLevelResources));
    assert!(o.feature_enabled(Feature::HpaConfigurableTolerance));
    assert_eq!(o.logging.verbosity, 4);
    assert_eq!(o.logging.logging_format, "json");
    assert!(o.hpa_controller_enabled());
    assert_eq!(
        p.warnings,
        vec![
            "Flag --horizontal-pod-autoscaler-upscale-delay has been deprecated, This flag is currently no-op and will be deleted.",
            "Flag --horizontal-pod-autoscaler-downscale-delay has been deprecated, This flag is currently no-op and will be deleted.",
        ]
    );
}

#[test]
fn go_bool_flag_forms() {
    assert!(
        parse(&["--leader-elect"])
            .unwrap()
            .options
            .leader_election
            .leader_elect
    );
    assert!(
        !parse(&["--leader-elect=f"])
            .unwrap()
            .options
            .leader_election
            .leader_elect
    );
    assert_eq!(
        invalid(&["--leader-elect=maybe"]),
        r#"invalid argument "maybe" for "--leader-elect" flag: strconv.ParseBool: parsing "maybe": invalid syntax"#
    );
}

#[test]
fn repeated_deprecated_flag_warns_once() {
    let p = parse(&[
        "--horizontal-pod-autoscaler-upscale-delay=1m",
        "--horizontal-pod-autoscaler-upscale-delay=2m",
    ])
    .unwrap();
    assert_eq!(p.warnings.len(), 1);
    assert_eq!(p.options.hpa.upscale_delay, GoDuration::from_mins(2));
}

#[test]
fn bad_values_name_the_flag_in_upstream_words() {
    assert_eq!(
        invalid(&["--horizontal-pod-autoscaler-tolerance=abc"]),
        r#"invalid argument "abc" for "--horizontal-pod-autoscaler-tolerance" flag: strconv.ParseFloat: parsing "abc": invalid syntax"#
    );
    assert_eq!(
        invalid(&["--concurrent-horizontal-pod-autoscaler-syncs=0"]),
        "concurrent-horizontal-pod-autoscaler-syncs must be greater than 0, but got 0"
    );
    assert_eq!(
        invalid(&["--concurrent-horizontal-pod-autoscaler-syncs=x"]),
        r#"invalid argument "x" for "--concurrent-horizontal-pod-autoscaler-syncs" flag: strconv.ParseInt: parsing "x": invalid syntax"#
    );
    assert_eq!(
        invalid(&["--horizontal-pod-autoscaler-sync-period=15"]),
        r#"invalid argument "15" for "--horizontal-pod-autoscaler-sync-period" flag: time: missing unit in duration "15""#
    );
    assert_eq!(
        invalid(&["--leader-elect-renew-deadline=20s"]),
        "--leader-elect-renew-deadline: leaseDuration must be greater than renewDeadline (lease duration 15s, renew deadline 20s)"
    );
    assert_eq!(
        invalid(&["--leader-elect-retry-period=9s"]),
        "--leader-elect-retry-period: renewDeadline must be greater than retryPeriod*JitterFactor (renew deadline 10s, retry period 9s)"
    );
    assert_eq!(
        invalid(&["--feature-gates=Nope=true"]),
        r#"invalid argument "Nope=true" for "--feature-gates" flag: unrecognized feature gate: Nope"#
    );
    assert_eq!(
        invalid(&["--leader-elect-resource-lock=endpoints"]),
        r#"--leader-elect-resource-lock: resourceLock value must be "leases", got "endpoints""#
    );
    assert_eq!(invalid(&["--bogus=1"]), "unknown flag: --bogus");
    assert_eq!(
        invalid(&["--bind-address=nope"]),
        r#"invalid argument "nope" for "--bind-address" flag: failed to parse IP: "nope""#
    );
    assert_eq!(
        invalid(&["--secure-port=70000"]),
        "--secure-port 70000 must be between 0 and 65535, inclusive. 0 for turning off secure port"
    );
    assert_eq!(
        invalid(&["--logging-format=xml"]),
        r#"--logging-format: format: Unsupported value: "xml": supported values: "json", "text""#
    );
    assert_eq!(
        invalid(&["-v", "high"]),
        r#"invalid argument "high" for "--v" flag: strconv.ParseInt: parsing "high": invalid syntax"#
    );
    assert_eq!(
        invalid(&["--kube-api-qps=fast"]),
        r#"invalid argument "fast" for "--kube-api-qps" flag: strconv.ParseFloat: parsing "fast": invalid syntax"#
    );
}

#[test]
fn leader_election_timings_are_not_checked_when_disabled() {
    assert!(parse(&["--leader-elect=false", "--leader-elect-renew-deadline=20s"]).is_ok());
}

#[test]
fn controllers_flag() {
    for ok in [
        "*",
        "horizontalpodautoscaling",
        "horizontal-pod-autoscaler-controller",
        "-horizontalpodautoscaling",
        "*,-horizontal-pod-autoscaler-controller",
    ] {
        assert!(parse(&[&format!("--controllers={ok}")]).is_ok(), "{ok}");
    }
    assert_eq!(
        invalid(&["--controllers=*,-foo"]),
        r#"--controllers: "foo" is not in the list of known controllers"#
    );
    let enabled = |v: &str| {
        parse(&[&format!("--controllers={v}")])
            .unwrap()
            .options
            .hpa_controller_enabled()
    };
    assert!(enabled("*"));
    assert!(enabled("horizontalpodautoscaling"));
    assert!(!enabled("*,-horizontalpodautoscaling"));
    assert!(!enabled("-horizontal-pod-autoscaler-controller"));
    assert!(!enabled(
        "horizontalpodautoscaling,-horizontal-pod-autoscaler-controller"
    ));
}

#[test]
fn help_lists_every_flag_with_go_defaults() {
    let help = Options::command().render_long_help().to_string();
    for (flag, default) in [
        ("--concurrent-horizontal-pod-autoscaler-syncs", "5"),
        ("--horizontal-pod-autoscaler-sync-period", "15s"),
        (
            "--horizontal-pod-autoscaler-downscale-stabilization",
            "5m0s",
        ),
        ("--horizontal-pod-autoscaler-tolerance", "0.1"),
        (
            "--horizontal-pod-autoscaler-cpu-initialization-period",
            "5m0s",
        ),
        ("--horizontal-pod-autoscaler-initial-readiness-delay", "30s"),
        ("--horizontal-pod-autoscaler-upscale-delay", "3m0s"),
        ("--horizontal-pod-autoscaler-downscale-delay", "5m0s"),
        ("--kube-api-qps", "20"),
        ("--kube-api-burst", "30"),
        ("--leader-elect-lease-duration", "15s"),
        ("--leader-elect-renew-deadline", "10s"),
        ("--leader-elect-retry-period", "2s"),
        ("--secure-port", "10257"),
        ("--bind-address", "0.0.0.0"),
        ("--leader-elect-resource-namespace", "kube-system"),
    ] {
        assert!(help.contains(flag), "{flag} missing from help");
        assert!(
            help.contains(&format!("[default: {default}]")),
            "default {default} of {flag}"
        );
    }
    for flag in [
        "--kubeconfig",
        "--master",
        "--kube-api-content-type",
        "--leader-elect[=<true|false>]",
        "--leader-elect-resource-lock",
        "--leader-elect-resource-name",
        "--cert-dir",
        "--tls-cert-file",
        "--tls-private-key-file",
        "--authentication-kubeconfig",
        "--authorization-kubeconfig",
        "--authorization-always-allow-paths",
        "--controllers",
        "--feature-gates",
        "-v, --v",
        "--logging-format",
        "--emulated-version",
        "HPAGeneration=true|false (BETA - default=true)",
        "HPAScaleToZero=true|false (BETA - default=true)",
        "PodLevelResources=true|false (BETA - default=true)",
        "StaleControllerConsistencyHPA=true|false (BETA - default=true)",
        "The minimum change (from 1.0) in the desired-to-actual metrics ratio for the horizontal pod autoscaler to consider scaling.\n",
    ] {
        assert!(help.contains(flag), "{flag} missing from help");
    }
    // GA gates are left out, as component-base's KnownFeatures leaves them out.
    assert!(!help.contains("HPAConfigurableTolerance=true|false"));
}

#[test]
fn flag_map_as_in_scenarios() {
    let mut flags = BTreeMap::new();
    flags.insert(
        "horizontal-pod-autoscaler-downscale-stabilization".to_string(),
        "0s".to_string(),
    );
    flags.insert(
        "feature-gates".to_string(),
        "HPAConfigurableTolerance=false".to_string(),
    );
    let o = Options::from_flag_map(&flags).unwrap().options;
    assert_eq!(
        o.hpa_configuration().downscale_stabilization_window,
        GoDuration::ZERO
    );
    assert!(!o.feature_enabled(Feature::HpaConfigurableTolerance));
    flags.insert(
        "horizontal-pod-autoscaler-tolerance".to_string(),
        "x".to_string(),
    );
    assert!(matches!(
        Options::from_flag_map(&flags),
        Err(FlagError::Invalid(_))
    ));
}

/// `--version` as component-base's `verflag`: bare or a Go true prints the version, `raw`
/// every field, a Go false runs; it is answered before validation; `vX.Y.Z` is refused.
#[test]
fn version_flag_follows_verflag() {
    for (args, want) in [
        (&["--version"][..], VersionFlag::True),
        (&["--version=true"], VersionFlag::True),
        (&["--version=1"], VersionFlag::True),
        (&["--version=raw"], VersionFlag::Raw),
        // Before validation: an invalid value of another flag does not matter.
        (
            &[
                "--concurrent-horizontal-pod-autoscaler-syncs=0",
                "--version=raw",
            ],
            VersionFlag::Raw,
        ),
    ] {
        assert_eq!(
            parse(args).unwrap_err(),
            FlagError::Version(want),
            "{args:?}"
        );
    }
    let o = parse(&["--version=false"]).unwrap().options;
    assert_eq!(o.global.version, VersionFlag::False);
    assert_eq!(
        parse(&[]).unwrap().options.global.version,
        VersionFlag::False
    );
    assert_eq!(
        invalid(&["--version=yes"]),
        r#"invalid argument "yes" for "--version" flag: strconv.ParseBool: parsing "yes": invalid syntax"#
    );
    assert!(invalid(&["--version=v1.37.0"]).contains("is not supported"));
}
