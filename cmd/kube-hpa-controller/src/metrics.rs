//! Process metrics, client-go's REST client metrics, and the build and feature-gate metrics.
//!
//! Mirrors `staging/src/k8s.io/component-base/metrics/prometheus/restclient/metrics.go`
//! (the adapters that client-go's `tools/metrics` hooks report into), the Go process
//! collector that component-base's legacy registry carries, `.../prometheus/version`
//! (`kubernetes_build_info`) and `.../prometheus/feature` with `featuregate.AddMetrics`
//! (`kubernetes_feature_enabled`). Names, label names, help texts (with component-base's
//! `[ALPHA] `/`[BETA] ` prefix) and buckets follow upstream.

use hpa_build_info::{BuildInfo, METRIC_LABELS};
use hpa_config::FeatureGates;
use hpa_workqueue::Stability;
use prometheus::{GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};

/// client-go's latency buckets for `rest_client_request_duration_seconds` and
/// `rest_client_rate_limiter_duration_seconds`.
pub const LATENCY_BUCKETS: [f64; 12] = [
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
];

/// client-go's size buckets for `rest_client_request_size_bytes` and
/// `rest_client_response_size_bytes`: 64 bytes to 16 MiB.
pub const SIZE_BUCKETS: [f64; 11] = [
    64.0,
    256.0,
    512.0,
    1024.0,
    4096.0,
    16384.0,
    65536.0,
    262_144.0,
    1_048_576.0,
    4_194_304.0,
    16_777_216.0,
];

/// The code label of a request that got no HTTP response (client-go's `sanitize`).
pub const ERROR_CODE: &str = "<error>";

/// The REST client metrics, shared by every request of one client.
#[derive(Debug, Clone)]
pub struct RestClientMetrics {
    /// `rest_client_requests_total{code,method,host}`.
    pub requests: IntCounterVec,
    /// `rest_client_request_duration_seconds{verb,host}`.
    pub request_duration: HistogramVec,
    /// `rest_client_rate_limiter_duration_seconds{verb,host}`.
    pub rate_limiter_duration: HistogramVec,
    /// `rest_client_request_size_bytes{verb,host}`: each attempt's body length.
    pub request_size: HistogramVec,
    /// `rest_client_response_size_bytes{verb,host}`: the final response's body length.
    pub response_size: HistogramVec,
}

impl RestClientMetrics {
    /// Creates the metrics and registers them into `registry`.
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let requests = IntCounterVec::new(
            Opts::new(
                "rest_client_requests_total",
                "[ALPHA] Number of HTTP requests, partitioned by status code, method, and host.",
            ),
            &["code", "method", "host"],
        )?;
        let request_duration = HistogramVec::new(
            HistogramOpts::new(
                "rest_client_request_duration_seconds",
                "[ALPHA] Request latency in seconds. Broken down by verb, and host.",
            )
            .buckets(LATENCY_BUCKETS.to_vec()),
            &["verb", "host"],
        )?;
        let rate_limiter_duration = HistogramVec::new(
            HistogramOpts::new(
                "rest_client_rate_limiter_duration_seconds",
                "[ALPHA] Client side rate limiter latency in seconds. Broken down by verb, and host.",
            )
            .buckets(LATENCY_BUCKETS.to_vec()),
            &["verb", "host"],
        )?;
        let request_size = HistogramVec::new(
            HistogramOpts::new(
                "rest_client_request_size_bytes",
                "[ALPHA] Request size in bytes. Broken down by verb and host.",
            )
            .buckets(SIZE_BUCKETS.to_vec()),
            &["verb", "host"],
        )?;
        let response_size = HistogramVec::new(
            HistogramOpts::new(
                "rest_client_response_size_bytes",
                "[ALPHA] Response size in bytes. Broken down by verb and host.",
            )
            .buckets(SIZE_BUCKETS.to_vec()),
            &["verb", "host"],
        )?;
        registry.register(Box::new(requests.clone()))?;
        registry.register(Box::new(request_duration.clone()))?;
        registry.register(Box::new(rate_limiter_duration.clone()))?;
        registry.register(Box::new(request_size.clone()))?;
        registry.register(Box::new(response_size.clone()))?;
        Ok(RestClientMetrics {
            requests,
            request_duration,
            rate_limiter_duration,
            request_size,
            response_size,
        })
    }
}

/// Registers `kubernetes_build_info`: a gauge of 1 labelled with the build's fields, as
/// component-base's `version` package does at init. Its stability is `[ALPHA]` up to
/// Kubernetes 1.35 and `[BETA]` from 1.36, the same step as the workqueue metrics'.
pub fn register_build_info(
    registry: &Registry,
    info: &BuildInfo,
    stability: Stability,
) -> Result<(), prometheus::Error> {
    let gauge = GaugeVec::new(
        Opts::new(
            "kubernetes_build_info",
            format!(
                "{}A metric with a constant '1' value labeled by major, minor, git version, git commit, git tree state, build date, Go version, and compiler from which Kubernetes was built, and platform on which it is running.",
                stability.prefix()
            ),
        ),
        &METRIC_LABELS,
    )?;
    gauge.with_label_values(&info.metric_values()).set(1.0);
    registry.register(Box::new(gauge))
}

/// Registers `kubernetes_feature_enabled{name,stage}` (`[BETA]` since Kubernetes 1.28): 1 or
/// 0 for every gate this controller knows that exists at the gates' version, with its stage
/// there (`ALPHA`, `BETA`, empty for GA), as component-base's `featuregate.AddMetrics`
/// records them. kube-controller-manager lists every gate of the binary; this controller
/// lists those it reads.
pub fn register_feature_gates(
    registry: &Registry,
    gates: &FeatureGates,
) -> Result<(), prometheus::Error> {
    let gauge = GaugeVec::new(
        Opts::new(
            "kubernetes_feature_enabled",
            "[BETA] This metric records the data about the stage and enablement of a k8s feature.",
        ),
        &["name", "stage"],
    )?;
    for (feature, stage, enabled) in gates.states() {
        gauge
            .with_label_values(&[feature.name(), stage.as_str()])
            .set(if enabled { 1.0 } else { 0.0 });
    }
    registry.register(Box::new(gauge))
}

/// Registers the process collector (`process_cpu_seconds_total`, `process_open_fds`,
/// `process_max_fds`, `process_resident_memory_bytes`, `process_virtual_memory_bytes`,
/// `process_start_time_seconds`, `process_threads`) for this process, read from `/proc`.
/// On other systems than Linux it registers nothing.
pub fn register_process_metrics(registry: &Registry) -> Result<(), prometheus::Error> {
    #[cfg(target_os = "linux")]
    registry.register(Box::new(
        prometheus::process_collector::ProcessCollector::for_self(),
    ))?;
    #[cfg(not(target_os = "linux"))]
    let _ = registry;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::Encoder;

    fn text(registry: &Registry) -> String {
        let mut out = Vec::new();
        prometheus::TextEncoder::new()
            .encode(&registry.gather(), &mut out)
            .unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn names_labels_and_help_follow_component_base() {
        let registry = Registry::new();
        let m = RestClientMetrics::new(&registry).unwrap();
        m.requests.with_label_values(&["200", "GET", "h:1"]).inc();
        m.request_duration
            .with_label_values(&["GET", "h:1"])
            .observe(0.01);
        m.rate_limiter_duration
            .with_label_values(&["GET", "h:1"])
            .observe(0.0);
        let t = text(&registry);
        assert!(t.contains(
            "# HELP rest_client_requests_total [ALPHA] Number of HTTP requests, partitioned by status code, method, and host."
        ));
        assert!(t.contains(r#"rest_client_requests_total{code="200",host="h:1",method="GET"} 1"#));
        assert!(t.contains(
            r#"rest_client_request_duration_seconds_bucket{host="h:1",verb="GET",le="0.025"} 1"#
        ));
        assert!(t.contains(
            r#"rest_client_request_duration_seconds_bucket{host="h:1",verb="GET",le="60"} 1"#
        ));
        assert!(t.contains(
            "# HELP rest_client_rate_limiter_duration_seconds [ALPHA] Client side rate limiter latency in seconds. Broken down by verb, and host."
        ));
        // Registering twice in one registry is refused, not silently duplicated.
        assert!(RestClientMetrics::new(&registry).is_err());
    }

    #[test]
    fn size_histograms_follow_component_base() {
        let registry = Registry::new();
        let m = RestClientMetrics::new(&registry).unwrap();
        m.request_size
            .with_label_values(&["GET", "h:1"])
            .observe(0.0);
        m.response_size
            .with_label_values(&["GET", "h:1"])
            .observe(300.0);
        let t = text(&registry);
        for line in [
            "# HELP rest_client_request_size_bytes [ALPHA] Request size in bytes. Broken down by verb and host.",
            "# TYPE rest_client_request_size_bytes histogram",
            r#"rest_client_request_size_bytes_bucket{host="h:1",verb="GET",le="64"} 1"#,
            r#"rest_client_request_size_bytes_sum{host="h:1",verb="GET"} 0"#,
            r#"rest_client_request_size_bytes_count{host="h:1",verb="GET"} 1"#,
            "# HELP rest_client_response_size_bytes [ALPHA] Response size in bytes. Broken down by verb and host.",
            "# TYPE rest_client_response_size_bytes histogram",
            r#"rest_client_response_size_bytes_bucket{host="h:1",verb="GET",le="256"} 0"#,
            r#"rest_client_response_size_bytes_bucket{host="h:1",verb="GET",le="512"} 1"#,
            r#"rest_client_response_size_bytes_bucket{host="h:1",verb="GET",le="16777216"} 1"#,
            r#"rest_client_response_size_bytes_bucket{host="h:1",verb="GET",le="+Inf"} 1"#,
            r#"rest_client_response_size_bytes_sum{host="h:1",verb="GET"} 300"#,
        ] {
            assert!(t.lines().any(|l| l == line), "{line} missing:\n{t}");
        }
        let buckets = t
            .lines()
            .filter(|l| l.starts_with("rest_client_response_size_bytes_bucket"))
            .count();
        assert_eq!(buckets, SIZE_BUCKETS.len() + 1, "{t}");
    }

    #[test]
    fn build_info_is_one_gauge_of_1_with_every_field() {
        let info = BuildInfo {
            major: "0",
            minor: "1",
            git_version: "v0.1.0",
            git_commit: "abc",
            git_tree_state: "clean",
            build_date: "2026-01-02T03:04:05Z",
            go_version: "rustc 1.95.0",
            compiler: "rustc",
            platform: "linux/amd64",
        };
        for (stability, prefix) in [(Stability::Alpha, "[ALPHA]"), (Stability::Beta, "[BETA]")] {
            let registry = Registry::new();
            register_build_info(&registry, &info, stability).unwrap();
            assert_eq!(
                text(&registry),
                format!(
                    "# HELP kubernetes_build_info {prefix} A metric with a constant '1' value labeled by major, minor, git version, git commit, git tree state, build date, Go version, and compiler from which Kubernetes was built, and platform on which it is running.\n\
                     # TYPE kubernetes_build_info gauge\n\
                     kubernetes_build_info{{build_date=\"2026-01-02T03:04:05Z\",compiler=\"rustc\",git_commit=\"abc\",git_tree_state=\"clean\",git_version=\"v0.1.0\",go_version=\"rustc 1.95.0\",major=\"0\",minor=\"1\",platform=\"linux/amd64\"}} 1\n"
                )
            );
        }
    }

    #[test]
    fn feature_gates_as_component_base_records_them() {
        let (gates, _) = FeatureGates::parse("HPAScaleToZero=false")
            .unwrap()
            .at_version(hpa_config::KubeVersion::V1_37)
            .unwrap();
        let registry = Registry::new();
        register_feature_gates(&registry, &gates).unwrap();
        assert_eq!(
            text(&registry),
            "# HELP kubernetes_feature_enabled [BETA] This metric records the data about the stage and enablement of a k8s feature.\n\
             # TYPE kubernetes_feature_enabled gauge\n\
             kubernetes_feature_enabled{name=\"HPAConfigurableTolerance\",stage=\"\"} 1\n\
             kubernetes_feature_enabled{name=\"HPAGeneration\",stage=\"BETA\"} 1\n\
             kubernetes_feature_enabled{name=\"HPAScaleToZero\",stage=\"BETA\"} 0\n\
             kubernetes_feature_enabled{name=\"PodLevelResources\",stage=\"BETA\"} 1\n\
             kubernetes_feature_enabled{name=\"StaleControllerConsistencyHPA\",stage=\"BETA\"} 1\n"
        );
        // At 1.35 the gates 1.37 introduced are not listed, and HPAScaleToZero is alpha.
        let registry = Registry::new();
        register_feature_gates(&registry, &FeatureGates::default()).unwrap();
        let t = text(&registry);
        assert!(!t.contains("HPAGeneration"), "{t}");
        assert!(
            t.contains("kubernetes_feature_enabled{name=\"HPAScaleToZero\",stage=\"ALPHA\"} 0\n"),
            "{t}"
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn process_metrics_are_exported() {
        let registry = Registry::new();
        register_process_metrics(&registry).unwrap();
        let t = text(&registry);
        for name in [
            "process_cpu_seconds_total",
            "process_open_fds",
            "process_resident_memory_bytes",
            "process_start_time_seconds",
        ] {
            assert!(
                t.contains(&format!("# TYPE {name} ")),
                "{name} missing:\n{t}"
            );
        }
    }
}
