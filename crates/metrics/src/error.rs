//! Errors of the metrics clients, with upstream's texts from
//! `pkg/controller/podautoscaler/metrics/client.go` and the client-go REST error rendering
//! (`staging/src/k8s.io/apimachinery/pkg/api/errors/errors.go` `NewGenericServerResponse`).

use std::sync::Arc;

/// A failed metrics call. `Display` gives upstream's exact text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetricsError {
    /// The `metrics.k8s.io` request failed.
    #[error("unable to fetch metrics from resource metrics API: {0}")]
    ResourceFetch(#[source] FetchError),
    /// `metrics.k8s.io` answered with an empty list.
    #[error("no metrics returned from resource metrics API")]
    NoResourceMetrics,
    /// The `custom.metrics.k8s.io` request (or its version discovery) failed.
    #[error("unable to fetch metrics from custom metrics API: {0}")]
    CustomFetch(#[source] FetchError),
    /// `custom.metrics.k8s.io` answered with an empty list for a pods metric.
    #[error("no metrics returned from custom metrics API")]
    NoCustomMetrics,
    /// The `external.metrics.k8s.io` request failed.
    #[error("unable to fetch metrics from external metrics API: {0}")]
    ExternalFetch(#[source] FetchError),
    /// `external.metrics.k8s.io` answered with an empty list.
    #[error("no metrics returned from external metrics API")]
    NoExternalMetrics,
}

/// The cause of a failed request, rendered as client-go renders it (e.g. `the server could not
/// find the requested resource (get pods.metrics.k8s.io)`).
#[derive(Debug, Clone)]
pub struct FetchError {
    /// HTTP status code, when the server answered.
    pub status: Option<u16>,
    /// The text.
    pub message: String,
    /// The error behind `message` (the transport's, the decoder's), when there is one: the
    /// error's `source()`.
    pub cause: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for FetchError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl FetchError {
    /// An error without an HTTP status (transport, decoding, discovery).
    pub fn other(message: impl Into<String>) -> Self {
        FetchError {
            status: None,
            message: message.into(),
            cause: None,
        }
    }

    /// An answer of the server: its HTTP status and client-go's text for it.
    pub fn status(status: u16, message: impl Into<String>) -> Self {
        FetchError {
            status: Some(status),
            message: message.into(),
            cause: None,
        }
    }

    /// An error without an HTTP status whose text is `message`, caused by `cause`.
    pub fn caused_by(
        message: impl Into<String>,
        cause: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        FetchError {
            status: None,
            message: message.into(),
            cause: Some(Arc::new(cause)),
        }
    }
}

/// Two fetch errors are equal when they read the same and carry the same status.
impl PartialEq for FetchError {
    fn eq(&self, other: &Self) -> bool {
        self.status == other.status && self.message == other.message
    }
}

impl Eq for FetchError {}

/// Go `errors.NewGenericServerResponse(code, "GET", qualifiedResource, name, serverMessage, …)`:
/// the text client-go produces for a non-2xx answer whose body is not a `Status`.
pub(crate) fn generic_server_response(
    code: u16,
    qualified_resource: &str,
    name: &str,
    server_message: &str,
) -> String {
    let message = match code {
        409 => "the server reported a conflict".to_string(),
        404 => "the server could not find the requested resource".to_string(),
        400 => "the server rejected our request for an unknown reason".to_string(),
        401 => "the server has asked for the client to provide credentials".to_string(),
        403 => "the server does not allow access to the requested resource".to_string(),
        406 => "the server was unable to respond with a content type that the client supports"
            .to_string(),
        415 => "the server was unable to respond with a content type that the client supports"
            .to_string(),
        405 => "the server does not allow this method on the requested resource".to_string(),
        422 => "the server rejected our request due to an error in our request".to_string(),
        503 => "the server is currently unable to handle the request".to_string(),
        504 => "the server was unable to return a response in the time allotted, but may still be processing the request".to_string(),
        429 => "the server has received too many requests and has asked us to try again later"
            .to_string(),
        c if c >= 500 => format!(
            "an error on the server ({}) has prevented the request from succeeding",
            crate::selector::go_quote(server_message)
        ),
        c => format!("the server responded with the status code {c} but did not return more information"),
    };
    match (qualified_resource.is_empty(), name.is_empty()) {
        (false, false) => format!("{message} (get {qualified_resource} {name})"),
        (false, true) => format!("{message} (get {qualified_resource})"),
        _ => message,
    }
}

/// Error of the utilization helpers (upstream `GetResourceUtilizationRatio`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UtilizationError {
    /// No metric belonged to a pod with a known request (or all requests were zero).
    #[error("no metrics returned matched known pods")]
    NoMatchingPods,
}

/// The text of a failed API call as client-go's errors read, for every client of the process
/// (metrics, scale, discovery, informers, version): an API `Status` gives its message (its
/// reason when the message is empty); a transport failure gives what the client's transport
/// layer said (the process's client layer words it as Go's `*url.Error`, `Get "URL": dial tcp
/// ...`), without kube's `ServiceError: ` prefix; anything else as kube words it.
pub fn kube_error_message(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) if status.message.is_empty() => status.reason.clone(),
        kube::Error::Api(status) => status.message.clone(),
        kube::Error::Service(inner) => inner.to_string(),
        kube::Error::HyperError(inner) => inner.to_string(),
        other => other.to_string(),
    }
}
