//! Reading and writing the scale target: kind → resources through discovery (a REST mapper)
//! and the `scale` subresource of any resource, CRDs included (spec §3.2 steps 3-5, §6.1).
//!
//! Mirrors what upstream `pkg/controller/podautoscaler/horizontal.go` uses for this:
//! `schema.ParseGroupVersion`, the KCM deferred discovery `RESTMapper` (`RESTMappings` of a
//! group and kind, every version, the preferred one first; rediscovered when a kind is
//! unknown), `scaleForResourceMappings`, and client-go's `scale` client (`Scales(ns).Get` /
//! `Update`, an `autoscaling/v1` `Scale` with optimistic concurrency). Error texts are the
//! ones those produce: the API's `Status` message for failed requests (client-go's
//! `StatusError`) and the RESTMapper's `NoKindMatchError`.

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;

use crate::gofmt::{GoArg, sprintf};

/// A failure of discovery or of a scale request; `Display` is the text upstream embeds in
/// events and conditions (`err.Error()`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ScaleError {
    /// The error text.
    pub message: String,
    /// The HTTP status, when the API answered with one.
    pub code: Option<u16>,
}

impl ScaleError {
    /// An error with a text and no HTTP status.
    pub fn new(message: impl Into<String>) -> Self {
        ScaleError {
            message: message.into(),
            code: None,
        }
    }
}

/// Upstream `schema.ParseGroupVersion`: `""` and `/` are the empty group-version, no slash
/// is a core version, one slash splits group and version, more is an error.
pub fn parse_group_version(gv: &str) -> Result<(String, String), ScaleError> {
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
pub fn no_kind_match(group: &str, kind: &str) -> ScaleError {
    ScaleError::new(sprintf(
        "no matches for kind %q in group %q",
        &[GoArg::str(kind), GoArg::str(group)],
    ))
}

/// One REST mapping of a kind: the resource serving it in one version.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResourceMapping {
    /// API group (`""` for core).
    pub group: String,
    /// API version.
    pub version: String,
    /// Plural resource name.
    pub resource: String,
    /// Whether the resource is namespaced.
    pub namespaced: bool,
}

impl ResourceMapping {
    /// `resource.group` (just `resource` for core), as client-go prints a GroupResource.
    pub fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }

    /// The path of the object's `scale` subresource.
    pub fn scale_path(&self, namespace: &str, name: &str) -> String {
        let prefix = if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        };
        if self.namespaced {
            format!(
                "{prefix}/namespaces/{namespace}/{}/{name}/scale",
                self.resource
            )
        } else {
            format!("{prefix}/{}/{name}/scale", self.resource)
        }
    }
}

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

    /// PUT `scale` (carrying the resourceVersion read) through `mapping`.
    async fn update_scale(
        &self,
        namespace: &str,
        mapping: &ResourceMapping,
        scale: &Scale,
    ) -> Result<Scale, ScaleError>;
}

/// Upstream `scaleForResourceMappings`: try each mapping in order; the first success wins;
/// if all fail, the *first* mapping's error; with no mappings, `unrecognized resource`.
pub async fn scale_for_resource_mappings(
    client: &dyn ScaleClient,
    namespace: &str,
    name: &str,
    mappings: &[ResourceMapping],
) -> Result<(Scale, ResourceMapping), ScaleError> {
    let mut first_err = None;
    for mapping in mappings {
        match client.get_scale(namespace, mapping, name).await {
            Ok(scale) => return Ok((scale, mapping.clone())),
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
pub fn kube_error_text(err: &kube::Error) -> ScaleError {
    match err {
        kube::Error::Api(status) => ScaleError {
            message: if status.message.is_empty() {
                status.reason.clone()
            } else {
                status.message.clone()
            },
            code: Some(status.code),
        },
        other => ScaleError::new(hpa_metrics::kube_error_message(other)),
    }
}

/// The production [`ScaleClient`]: discovery through `/api` and `/apis`, cached per group and
/// refreshed when a kind is unknown, and the `scale` subresource over a `kube::Client`.
pub struct KubeScaleClient {
    client: kube::Client,
    /// group → kind → mappings.
    groups: Mutex<HashMap<String, HashMap<String, Vec<ResourceMapping>>>>,
}

impl std::fmt::Debug for KubeScaleClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeScaleClient").finish_non_exhaustive()
    }
}

impl KubeScaleClient {
    /// A client with an empty discovery cache.
    pub fn new(client: kube::Client) -> Self {
        KubeScaleClient {
            client,
            groups: Mutex::new(HashMap::new()),
        }
    }

    fn cached(&self, group: &str, kind: &str) -> Option<Vec<ResourceMapping>> {
        let g = self.groups.lock().unwrap_or_else(|p| p.into_inner());
        g.get(group).and_then(|kinds| kinds.get(kind).cloned())
    }

    /// Discovers one group: its versions (preferred first) and each version's kinds.
    async fn discover_group(
        &self,
        group: &str,
    ) -> Result<HashMap<String, Vec<ResourceMapping>>, ScaleError> {
        let versions: Vec<String> = if group.is_empty() {
            self.client
                .list_core_api_versions()
                .await
                .map_err(|e| kube_error_text(&e))?
                .versions
        } else {
            let groups = self
                .client
                .list_api_groups()
                .await
                .map_err(|e| kube_error_text(&e))?;
            let Some(g) = groups.groups.into_iter().find(|g| g.name == group) else {
                return Ok(HashMap::new());
            };
            let preferred = g.preferred_version.map(|p| p.version);
            let mut vs: Vec<String> = Vec::new();
            if let Some(p) = &preferred {
                vs.push(p.clone());
            }
            for v in g.versions {
                if !vs.contains(&v.version) {
                    vs.push(v.version);
                }
            }
            vs
        };
        let mut kinds: HashMap<String, Vec<ResourceMapping>> = HashMap::new();
        for version in versions {
            let list: APIResourceList = if group.is_empty() {
                self.client.list_core_api_resources(&version).await
            } else {
                self.client
                    .list_api_group_resources(&format!("{group}/{version}"))
                    .await
            }
            .map_err(|e| kube_error_text(&e))?;
            for r in list.resources {
                if r.name.contains('/') {
                    continue;
                }
                kinds
                    .entry(r.kind.clone())
                    .or_default()
                    .push(ResourceMapping {
                        group: group.to_owned(),
                        version: version.clone(),
                        resource: r.name.clone(),
                        namespaced: r.namespaced,
                    });
            }
        }
        Ok(kinds)
    }

    async fn send_scale(&self, request: http::Request<Vec<u8>>) -> Result<Scale, ScaleError> {
        self.client
            .request::<Scale>(request)
            .await
            .map_err(|e| kube_error_text(&e))
    }
}

#[async_trait::async_trait]
impl ScaleClient for KubeScaleClient {
    async fn rest_mappings(
        &self,
        group: &str,
        kind: &str,
    ) -> Result<Vec<ResourceMapping>, ScaleError> {
        if let Some(m) = self.cached(group, kind) {
            return Ok(m);
        }
        // Unknown kind: rediscover the group (the deferred mapper's reset and retry).
        let kinds = self.discover_group(group).await?;
        let found = kinds.get(kind).cloned();
        self.groups
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(group.to_owned(), kinds);
        found
            .filter(|m| !m.is_empty())
            .ok_or_else(|| no_kind_match(group, kind))
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
            .map_err(|e| ScaleError::new(e.to_string()))?;
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
        let bytes = serde_json::to_vec(&body).map_err(|e| ScaleError::new(e.to_string()))?;
        let request = http::Request::put(mapping.scale_path(namespace, name))
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json")
            .body(bytes)
            .map_err(|e| ScaleError::new(e.to_string()))?;
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
