//! Scale-up / scale-down tolerances: the `Tolerances` type of upstream
//! `pkg/controller/podautoscaler/replica_calculator.go` (KEP-4951, configurable tolerance).

use std::fmt;

/// The tolerances applied to a usage ratio: a ratio inside
/// `[1 - scale_down, 1 + scale_up]` (both bounds inclusive) is "close enough" and keeps the
/// current replica count.
///
/// `scale_down` only bounds ratios below 1, `scale_up` only ratios above 1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerances {
    /// Tolerance below a ratio of 1.0 (e.g. `0.1` = 10%).
    pub scale_down: f64,
    /// Tolerance above a ratio of 1.0.
    pub scale_up: f64,
}

impl Tolerances {
    /// The upstream default tolerance (`--horizontal-pod-autoscaler-tolerance`), 0.1.
    pub const DEFAULT_TOLERANCE: f64 = 0.1;

    /// Tolerances with distinct scale-down and scale-up values (upstream's positional
    /// `Tolerances{scaleDown, scaleUp}`).
    pub const fn new(scale_down: f64, scale_up: f64) -> Self {
        Self {
            scale_down,
            scale_up,
        }
    }

    /// The same tolerance in both directions (the global flag without per-HPA overrides).
    pub const fn uniform(tolerance: f64) -> Self {
        Self::new(tolerance, tolerance)
    }

    /// Upstream `isWithin`: `(1.0 - scaleDown) <= ratio && ratio <= (1.0 + scaleUp)`, computed in
    /// float64 exactly as written (bounds first, then the comparisons). NaN is never within.
    pub fn is_within(&self, usage_ratio: f64) -> bool {
        (1.0 - self.scale_down) <= usage_ratio && usage_ratio <= (1.0 + self.scale_up)
    }
}

impl Default for Tolerances {
    fn default() -> Self {
        Self::uniform(Self::DEFAULT_TOLERANCE)
    }
}

impl fmt::Display for Tolerances {
    /// Upstream `String()`: `[down:%.1f%%, up:%.1f%%]` of the percentages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[down:{:.1}%, up:{:.1}%]",
            self.scale_down * 100.,
            self.scale_up * 100.
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_matches_upstream_format() {
        assert_eq!(
            Tolerances::new(0.1, 0.1).to_string(),
            "[down:10.0%, up:10.0%]"
        );
        assert_eq!(
            Tolerances::new(0.36, 2.0).to_string(),
            "[down:36.0%, up:200.0%]"
        );
    }

    #[test]
    fn bounds_are_inclusive_and_per_direction() {
        let t = Tolerances::new(0.5, 0.25);
        assert!(t.is_within(0.5));
        assert!(t.is_within(1.25));
        assert!(!t.is_within(0.49));
        assert!(!t.is_within(1.26));
        assert!(!t.is_within(f64::NAN));
        assert!(!t.is_within(f64::INFINITY));
        // 1 - 0.1 is 0.9 in float64; 0.9 itself is within.
        assert!(Tolerances::default().is_within(0.9));
        assert!(Tolerances::default().is_within(1.1 - 1e-16));
    }
}
