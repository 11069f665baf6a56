//! The error a failure wraps, kept inside decision data: upstream's wrapped `error` values
//! (`fmt.Errorf("...: %w", err)` and the errors returned by the metrics clients and the
//! replica calculator, `pkg/controller/podautoscaler/replica_calculator.go`), which Go keeps
//! reachable through `errors.Unwrap`.
//!
//! Decisions are plain data: cloned into traces and compared in tests. An [`ErrorSource`] is
//! therefore shared (cloning it does not copy the error) and compares by its text, which is
//! all a decision shows of it; the typed error stays reachable through
//! [`std::error::Error::source`] of whatever holds it.

use std::error::Error;
use std::fmt;
use std::sync::Arc;

/// A shared, type-erased error that caused a failure (its `source()` chain included).
#[derive(Clone)]
pub struct ErrorSource(Arc<dyn Error + Send + Sync + 'static>);

impl ErrorSource {
    /// Keeps `error` (and, through it, the errors it wraps).
    pub fn new(error: impl Error + Send + Sync + 'static) -> Self {
        ErrorSource(Arc::new(error))
    }

    /// A test's stand-in for a client's failure: a text with no typed error behind it.
    #[cfg(test)]
    pub(crate) fn message(text: impl Into<String>) -> Self {
        ErrorSource::new(Message(text.into()))
    }

    /// The error itself, for `Error::source` implementations.
    pub fn as_error(&self) -> &(dyn Error + 'static) {
        &*self.0
    }
}

impl fmt::Debug for ErrorSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for ErrorSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

/// Two sources are equal when they read the same: the text is what a decision shows.
impl PartialEq for ErrorSource {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.to_string() == other.0.to_string()
    }
}

/// [`ErrorSource::message`]'s error: a text and nothing behind it.
#[cfg(test)]
#[derive(Debug)]
struct Message(String);

#[cfg(test)]
impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
impl Error for Message {}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Outer(ErrorSource);

    impl fmt::Display for Outer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "outer: {}", self.0)
        }
    }

    impl Error for Outer {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(self.0.as_error())
        }
    }

    #[test]
    fn keeps_the_chain_of_the_wrapped_error() {
        let inner = ErrorSource::message("connection refused");
        let kept = ErrorSource::new(Outer(inner));
        assert_eq!(kept.to_string(), "outer: connection refused");
        let next = kept.as_error().source().map(ToString::to_string);
        assert_eq!(next.as_deref(), Some("connection refused"));
    }

    #[test]
    fn compares_by_text() {
        assert_eq!(ErrorSource::message("a"), ErrorSource::message("a"));
        assert_ne!(ErrorSource::message("a"), ErrorSource::message("b"));
        let typed = ErrorSource::new(Outer(ErrorSource::message("x")));
        assert_eq!(typed, ErrorSource::message("outer: x"));
    }
}
