//! The `action` and `error` labels of the controller's metrics: upstream `ActionLabel` and
//! `ErrorLabel` in `pkg/controller/podautoscaler/monitor/monitor.go`. A decision says which
//! applies; the controller's Prometheus metrics (`hpa-horizontal`'s `monitor` module) carry them.

/// The `action` label (upstream `ActionLabel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ActionLabel {
    /// `scale_up`.
    ScaleUp,
    /// `scale_down`.
    ScaleDown,
    /// `none`.
    None,
}

impl ActionLabel {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ActionLabel::ScaleUp => "scale_up",
            ActionLabel::ScaleDown => "scale_down",
            ActionLabel::None => "none",
        }
    }

    /// The action for a proposal compared with a baseline: up if greater, down if lower.
    pub fn compare(proposal: i32, baseline: i32) -> Self {
        match proposal.cmp(&baseline) {
            std::cmp::Ordering::Greater => ActionLabel::ScaleUp,
            std::cmp::Ordering::Less => ActionLabel::ScaleDown,
            std::cmp::Ordering::Equal => ActionLabel::None,
        }
    }
}

/// The `error` label (upstream `ErrorLabel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorLabel {
    /// `spec`: an invalid HPA spec.
    Spec,
    /// `internal`: any other error.
    Internal,
    /// `none`.
    None,
}

/// What kind of error a reconcile or a metric computation returned, as upstream's
/// reconciliation and metric-computation `error` labels tell them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The error wraps upstream's `errSpec` (an invalid HPA spec): label `spec`.
    Spec,
    /// Any other error: label `internal`.
    Internal,
}

impl ErrorKind {
    /// The `error` label of an error of this kind.
    pub fn label(self) -> ErrorLabel {
        match self {
            ErrorKind::Spec => ErrorLabel::Spec,
            ErrorKind::Internal => ErrorLabel::Internal,
        }
    }
}

impl ErrorLabel {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorLabel::Spec => "spec",
            ErrorLabel::Internal => "internal",
            ErrorLabel::None => "none",
        }
    }
}
