//! The HPA controller's own configuration.
//!
//! Mirrors `pkg/controller/podautoscaler/config/types.go` (`HPAControllerConfiguration`) and
//! the defaults of `pkg/controller/podautoscaler/config/v1alpha1/defaults.go`
//! (`RecommendedDefaultHPAControllerConfiguration`), with the validation of
//! `cmd/kube-controller-manager/app/options/hpacontroller.go`.

use crate::duration::GoDuration;

/// What the horizontal controller needs to know, with upstream's field meanings.
#[derive(Debug, Clone, PartialEq)]
pub struct HpaControllerConfiguration {
    /// Worker count (`--concurrent-horizontal-pod-autoscaler-syncs`).
    pub concurrent_syncs: i32,
    /// Requeue interval of every HPA, handler resync and custom-metrics discovery
    /// invalidation period (`--horizontal-pod-autoscaler-sync-period`).
    pub sync_period: GoDuration,
    /// Deprecated no-op (`--horizontal-pod-autoscaler-upscale-delay`); stored, never read.
    pub upscale_forbidden_window: GoDuration,
    /// Deprecated no-op (`--horizontal-pod-autoscaler-downscale-delay`); stored, never read.
    pub downscale_forbidden_window: GoDuration,
    /// Look-back window for scale-down recommendations without `behavior`, and the default
    /// scale-down stabilization with it (`--horizontal-pod-autoscaler-downscale-stabilization`).
    pub downscale_stabilization_window: GoDuration,
    /// Cluster-wide tolerance around a usage ratio of 1.0
    /// (`--horizontal-pod-autoscaler-tolerance`). Not validated, as upstream.
    pub tolerance: f64,
    /// How long after pod start CPU samples may be skipped
    /// (`--horizontal-pod-autoscaler-cpu-initialization-period`).
    pub cpu_initialization_period: GoDuration,
    /// How long after pod start readiness changes count as initial readiness
    /// (`--horizontal-pod-autoscaler-initial-readiness-delay`).
    pub initial_readiness_delay: GoDuration,
}

impl Default for HpaControllerConfiguration {
    /// `RecommendedDefaultHPAControllerConfiguration`.
    fn default() -> Self {
        HpaControllerConfiguration {
            concurrent_syncs: 5,
            sync_period: GoDuration::from_secs(15),
            upscale_forbidden_window: GoDuration::from_mins(3),
            downscale_forbidden_window: GoDuration::from_mins(5),
            downscale_stabilization_window: GoDuration::from_mins(5),
            tolerance: 0.1,
            cpu_initialization_period: GoDuration::from_mins(5),
            initial_readiness_delay: GoDuration::from_secs(30),
        }
    }
}

impl HpaControllerConfiguration {
    /// Upstream's `HPAControllerOptions.Validate`: only the worker count is checked.
    pub fn validate(&self) -> Vec<String> {
        let mut errs = Vec::new();
        if self.concurrent_syncs < 1 {
            errs.push(format!(
                "concurrent-horizontal-pod-autoscaler-syncs must be greater than 0, but got {}",
                self.concurrent_syncs
            ));
        }
        errs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_equal_upstream() {
        let c = HpaControllerConfiguration::default();
        assert_eq!(c.concurrent_syncs, 5);
        assert_eq!(c.sync_period.to_string(), "15s");
        assert_eq!(c.downscale_stabilization_window.to_string(), "5m0s");
        assert_eq!(c.tolerance, 0.1);
        assert_eq!(c.cpu_initialization_period.to_string(), "5m0s");
        assert_eq!(c.initial_readiness_delay.to_string(), "30s");
        assert_eq!(c.upscale_forbidden_window.to_string(), "3m0s");
        assert_eq!(c.downscale_forbidden_window.to_string(), "5m0s");
        assert!(c.validate().is_empty());
    }

    #[test]
    fn zero_workers_is_refused() {
        let c = HpaControllerConfiguration {
            concurrent_syncs: 0,
            ..Default::default()
        };
        assert_eq!(
            c.validate(),
            vec!["concurrent-horizontal-pod-autoscaler-syncs must be greater than 0, but got 0"]
        );
    }
}
