//! The error one reconcile returns: upstream's `reconcileAutoscaler` errors
//! (`pkg/controller/podautoscaler/horizontal.go`), their text as `fmt.Errorf` writes it and the
//! reconciliation `error` label's kind (`errSpec` or internal, `monitor/metrics.go`).

use hpa_decision::error_source::ErrorSource;
use hpa_decision::labels::ErrorKind;

/// An error a reconcile returns (logged by the worker; the key keeps its normal cadence).
/// `Display` is upstream's text; the error it wraps, if any, is its `source()` (its text is
/// already part of the message, as Go's `fmt.Errorf("...: %v", err)` puts it there).
#[derive(Debug, Clone)]
pub struct ReconcileError {
    /// The reconciliation `error` label's kind: `Spec` when upstream's error wraps `errSpec`.
    pub kind: ErrorKind,
    /// The error text, as upstream's.
    pub message: String,
    /// The error this one wraps.
    pub source: Option<ErrorSource>,
}

impl ReconcileError {
    /// An `internal` error with no underlying error.
    pub fn internal(message: impl Into<String>) -> Self {
        ReconcileError {
            kind: ErrorKind::Internal,
            message: message.into(),
            source: None,
        }
    }

    /// An error of `kind` whose text `message` wraps `source`.
    pub fn wrapping(
        kind: ErrorKind,
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::caused_by(kind, message, ErrorSource::new(source))
    }

    /// An error of `kind` whose text `message` wraps an error already kept as a source.
    pub fn caused_by(kind: ErrorKind, message: impl Into<String>, source: ErrorSource) -> Self {
        ReconcileError {
            kind,
            message: message.into(),
            source: Some(source),
        }
    }
}

impl std::fmt::Display for ReconcileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ReconcileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_ref().map(ErrorSource::as_error)
    }
}
