//! Reading and writing the scale target: kind → resources through discovery (a REST mapper)
//! and the `scale` subresource of any resource, CRDs included (`reconcileAutoscaler`'s scale read and update).
//!
//! Mirrors what upstream `pkg/controller/podautoscaler/horizontal.go` uses for this:
//! `schema.ParseGroupVersion`, the KCM deferred discovery `RESTMapper` (`RESTMappings` of a
//! group and kind, every version, the preferred one first; cached and reset every 30 s, see
//! [`hpa_metrics::restmapper`]), `scaleForResourceMappings`, and client-go's `scale` client (`Scales(ns).Get` /
//! `Update`, an `autoscaling/v1` `Scale` with optimistic concurrency). Error texts are the
//! ones those produce: the API's `Status` message for failed requests (client-go's
//! `StatusError`) and the RESTMapper's `NoKindMatchError`.

use hpa_metrics::{DeferredRestMapper, MappingError};
use k8s_openapi::api::autoscaling::v1::Scale;

use hpa_decision::error_source::ErrorSource;
use hpa_decision::gofmt::{GoArg, sprintf};

/// A failure of discovery or of a scale request; `Display` is the text upstream embeds in
/// events and conditions (`err.Error()`).
#[derive(Debug, Clone)]
pub struct ScaleError {
    /// The error text.
    pub message: String,
    /// The HTTP status, when the API answered with one.
    pub code: Option<u16>,
    /// The error behind `message` (the client's, the encoder's), when there is one: the
    /// error's `source()`.
    pub cause: Option<ErrorSource>,
}

impl ScaleError {
    /// An error with a text and no HTTP status.
    pub fn new(message: impl Into<String>) -> Self {
        ScaleError {
            message: message.into(),
            code: None,
            cause: None,
        }
    }

    /// An answer of the API server: its `Status` code and message.
    pub fn status(code: u16, message: impl Into<String>) -> Self {
        ScaleError {
            message: message.into(),
            code: Some(code),
            cause: None,
        }
    }

    /// An error with no HTTP status whose text is `message`, caused by `cause`.
    pub fn caused_by(
        message: impl Into<String>,
        cause: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        ScaleError {
            message: message.into(),
            code: None,
            cause: Some(ErrorSource::new(cause)),
        }
    }
}

impl std::fmt::Display for ScaleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ScaleError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause.as_ref().map(ErrorSource::as_error)
    }
}

/// Two scale errors are equal when they read the same and carry the same code.
impl PartialEq for ScaleError {
    fn eq(&self, other: &Self) -> bool {
        self.message == other.message && self.code == other.code
    }
}

impl Eq for ScaleError {}

/// Upstream `schema.ParseGroupVersion`: `""` and `/` are the empty group-version, no slash
/// is a core version, one slash splits group and version, more is an error.
pub(crate) fn parse_group_version(gv: &str) -> Result<(String, String), ScaleError> {
    if gv.is_empty() || gv == "/" {
        return Ok((String::new(), String::new()));
    }
    match gv.matches('/').count() {
        0 => Ok((String::new(), gv.to_owned())),
        1 => {
            let (g, v) = gv.split_once('/').unwrap_or(("", gv));
            Ok((g.to_owned(), v.to_owned()))
        }
        _ => Err(ScaleError::new(sprintf(
            "unexpected GroupVersion string: %v",
            &[GoArg::str(gv)],
        ))),
    }
}

/// The RESTMapper's `NoKindMatchError` for a search without versions:
/// `no matches for kind %q in group %q`.
pub(crate) fn no_kind_match(group: &str, kind: &str) -> ScaleError {
    ScaleError::new(sprintf(
        "no matches for kind %q in group %q",
        &[GoArg::str(kind), GoArg::str(group)],
    ))
}

pub use hpa_metrics::ResourceMapping;

/// Scale reads and writes behind a trait, so tests (and later a cache) can serve them without
/// touching the reconcile.
#[async_trait::async_trait]
pub trait ScaleClient: Send + Sync {
    /// Every mapping of `group`/`kind`, preferred version first (`RESTMappings`).
    async fn rest_mappings(
        &self,
        group: &str,
        kind: &str,
    ) -> Result<Vec<ResourceMapping>, ScaleError>;

    /// GET the scale of `name` through `mapping`.
    async fn get_scale(
        &self,
        namespace: &str,
        mapping: &ResourceMapping,
        name: &str,
    ) -> Result<Scale, ScaleError>;

    /// The scale of `name` through `mapping`, and where it came from (a cache answers only
    /// when it overrides this).
    async fn get_scale_from(
        &self,
        namespace: &str,
        mapping: &ResourceMapping,
        name: &str,
    ) -> Result<(Scale, ReadSource), ScaleError> {
        self.get_scale(namespace, mapping, name)
            .await
            .map(|scale| (scale, ReadSource::Api))
    }

    /// GET the scale of `name` from the API itself, never from a cache (the re-read after a
    /// conflicting write).
    async fn get_scale_live(
        &self,
        namespace: &str,
        mapping: &ResourceMapping,
        name: &str,
    ) -> Result<Scale, ScaleError> {
        self.get_scale(namespace, mapping, name).await
    }

    /// PUT `scale` (carrying the resourceVersion read) through `mapping`.
    async fn update_scale(
        &self,
        namespace: &str,
        mapping: &ResourceMapping,
        scale: &Scale,
    ) -> Result<Scale, ScaleError>;
}

/// Where a scale read was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadSource {
    /// The scale target cache (`--scale-target-cache`).
    Cache,
    /// A GET of the scale subresource.
    Api,
}

/// Upstream `scaleForResourceMappings`: try each mapping in order; the first success wins;
/// if all fail, the *first* mapping's error; with no mappings, `unrecognized resource`.
pub(crate) async fn scale_for_resource_mappings(
    client: &dyn ScaleClient,
    namespace: &str,
    name: &str,
    mappings: &[ResourceMapping],
) -> Result<(Scale, ResourceMapping, ReadSource), ScaleError> {
    let mut first_err = None;
    for mapping in mappings {
        match client.get_scale_from(namespace, mapping, name).await {
            Ok((scale, source)) => return Ok((scale, mapping.clone(), source)),
            Err(e) => {
                if first_err.is_none() {
                    first_err = Some(e);
                }
            }
        }
    }
    Err(first_err.unwrap_or_else(|| ScaleError::new("unrecognized resource")))
}

/// The text client-go's `StatusError` gives for a failed request: the `Status` message as
/// served.
pub(crate) fn kube_error_text(err: kube::Error) -> ScaleError {
    let message = hpa_metrics::kube_error_message(&err);
    let code = match &err {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    };
    ScaleError {
        message,
        code,
        cause: Some(ErrorSource::new(err)),
    }
}

/// The production [`ScaleClient`]: mappings from KCM's deferred discovery RESTMapper (cached,
/// reset every 30 s; [`DeferredRestMapper`]) and the `scale` subresource over a
/// `kube::Client`.
pub struct KubeScaleClient {
    client: kube::Client,
    mapper: DeferredRestMapper,
}

impl std::fmt::Debug for KubeScaleClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeScaleClient").finish_non_exhaustive()
    }
}

impl KubeScaleClient {
    /// A client with its own RESTMapper.
    pub fn new(client: kube::Client) -> Self {
        let mapper = DeferredRestMapper::new(client.clone());
        Self::with_rest_mapper(client, mapper)
    }

    /// A client sharing `mapper` (KCM shares one mapper between its clients).
    pub fn with_rest_mapper(client: kube::Client, mapper: DeferredRestMapper) -> Self {
        KubeScaleClient { client, mapper }
    }

    async fn send_scale(&self, request: http::Request<Vec<u8>>) -> Result<Scale, ScaleError> {
        self.client
            .request::<Scale>(request)
            .await
            .map_err(kube_error_text)
    }
}

#[async_trait::async_trait]
impl ScaleClient for KubeScaleClient {
    async fn rest_mappings(
        &self,
        group: &str,
        kind: &str,
    ) -> Result<Vec<ResourceMapping>, ScaleError> {
        self.mapper
            .rest_mappings(group, kind)
            .await
            .map_err(|e| match e {
                MappingError::NoKindMatch { group, kind } => no_kind_match(&group, &kind),
                MappingError::Discovery { message, code } => ScaleError {
                    message,
                    code,
                    cause: None,
                },
            })
    }

    async fn get_scale(
        &self,
        namespace: &str,
        mapping: &ResourceMapping,
        name: &str,
    ) -> Result<Scale, ScaleError> {
        let request = http::Request::get(mapping.scale_path(namespace, name))
            .header(http::header::ACCEPT, "application/json")
            .body(Vec::new())
            .map_err(|e| ScaleError::caused_by(e.to_string(), e))?;
        self.send_scale(request).await
    }

    async fn update_scale(
        &self,
        namespace: &str,
        mapping: &ResourceMapping,
        scale: &Scale,
    ) -> Result<Scale, ScaleError> {
        let name = scale.metadata.name.as_deref().unwrap_or("");
        let mut body = scale.clone();
        body.metadata
            .namespace
            .get_or_insert_with(|| namespace.to_owned());
        let bytes =
            serde_json::to_vec(&body).map_err(|e| ScaleError::caused_by(e.to_string(), e))?;
        let request = http::Request::put(mapping.scale_path(namespace, name))
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json")
            .body(bytes)
            .map_err(|e| ScaleError::caused_by(e.to_string(), e))?;
        self.send_scale(request).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_versions() {
        assert_eq!(
            parse_group_version("apps/v1").unwrap(),
            ("apps".into(), "v1".into())
        );
        assert_eq!(parse_group_version("v1").unwrap(), ("".into(), "v1".into()));
        assert_eq!(parse_group_version("").unwrap(), ("".into(), "".into()));
        assert_eq!(
            parse_group_version("a/b/c").unwrap_err().message,
            "unexpected GroupVersion string: a/b/c"
        );
    }

    /// A failed request reads as client-go's `StatusError` (the message, else the reason) and
    /// keeps the client's error, with the API's `Status`, as its source.
    #[test]
    fn a_failed_request_keeps_the_client_error_as_its_source() {
        use std::error::Error as _;
        let api_error = |message: &str| {
            let status: kube::core::Status = serde_json::from_value(serde_json::json!({
                "status": "Failure",
                "code": 409,
                "reason": "Conflict",
                "message": message,
            }))
            .unwrap();
            kube::Error::Api(Box::new(status))
        };
        let err = kube_error_text(api_error("the object has been modified"));
        assert_eq!(
            (err.message.as_str(), err.code),
            ("the object has been modified", Some(409))
        );
        let source = err.source().and_then(|e| e.downcast_ref::<kube::Error>());
        assert!(
            matches!(source, Some(kube::Error::Api(s)) if s.reason == "Conflict"),
            "{source:?}"
        );
        let err = kube_error_text(api_error(""));
        assert_eq!((err.message.as_str(), err.code), ("Conflict", Some(409)));
    }

    #[test]
    fn texts() {
        assert_eq!(
            no_kind_match("bar", "Foo").message,
            "no matches for kind \"Foo\" in group \"bar\""
        );
        let m = ResourceMapping {
            group: "apps".into(),
            version: "v1".into(),
            resource: "deployments".into(),
            namespaced: true,
        };
        assert_eq!(m.group_resource(), "deployments.apps");
        assert_eq!(
            m.scale_path("default", "web"),
            "/apis/apps/v1/namespaces/default/deployments/web/scale"
        );
    }
}
