//! Process metrics and client-go's REST client metrics.
//!
//! Mirrors `staging/src/k8s.io/component-base/metrics/prometheus/restclient/metrics.go`
//! (the adapters that client-go's `tools/metrics` hooks report into) and the Go process
//! collector that component-base's legacy registry carries. Names, label names, help texts
//! (with component-base's `[ALPHA] ` prefix) and buckets follow upstream.

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};

/// client-go's latency buckets for `rest_client_request_duration_seconds` and
/// `rest_client_rate_limiter_duration_seconds`.
pub const LATENCY_BUCKETS: [f64; 12] = [
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
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
        registry.register(Box::new(requests.clone()))?;
        registry.register(Box::new(request_duration.clone()))?;
        registry.register(Box::new(rate_limiter_duration.clone()))?;
        Ok(RestClientMetrics {
            requests,
            request_duration,
            rate_limiter_duration,
        })
    }
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
