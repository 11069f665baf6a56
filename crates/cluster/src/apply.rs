//! Creating arbitrary objects in the cluster, as `kubectl create` / `kubectl replace` do:
//! the kind is resolved through discovery (`kube::discovery::pinned_kind`, cached per kind),
//! the object is created (or replaced when it exists), and its `status` is written through the
//! `status` subresource when the resource has one, since a create ignores it.

use std::collections::HashMap;

use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::{ApiCapabilities, Scope};
use serde_json::Value;

/// Why an object could not be created.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The object lacks `apiVersion`, `kind` or `metadata.name`.
    #[error("{what}: {message}")]
    Malformed {
        /// The object, as `KIND NAMESPACE/NAME`.
        what: String,
        /// What is missing.
        message: String,
    },
    /// The server does not serve the kind.
    #[error("{what}: the server does not serve {api_version} {kind}: {source}")]
    UnknownKind {
        /// The object.
        what: String,
        /// Its apiVersion.
        api_version: String,
        /// Its kind.
        kind: String,
        /// The discovery error.
        source: Box<kube::Error>,
    },
    /// The server refused the request.
    #[error("{what}: {verb}: {source}")]
    Api {
        /// The object.
        what: String,
        /// `create`, `replace` or `update status`.
        verb: &'static str,
        /// The server's answer.
        source: Box<kube::Error>,
    },
}

/// `KIND NAMESPACE/NAME` (or `KIND NAME`) for messages.
pub fn describe(obj: &Value) -> String {
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("?");
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("?");
    match obj.pointer("/metadata/namespace").and_then(Value::as_str) {
        Some(ns) if !ns.is_empty() => format!("{kind} {ns}/{name}"),
        _ => format!("{kind} {name}"),
    }
}

/// Creates objects through one client, resolving each kind once.
#[derive(Clone)]
pub struct Applier {
    client: kube::Client,
    kinds: HashMap<GroupVersionKind, (ApiResource, ApiCapabilities)>,
}

impl std::fmt::Debug for Applier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Applier")
            .field("kinds", &self.kinds.len())
            .finish_non_exhaustive()
    }
}

impl Applier {
    /// An applier with `client`'s credentials.
    pub fn new(client: kube::Client) -> Self {
        Applier {
            client,
            kinds: HashMap::new(),
        }
    }

    /// Forgets the resolved kinds (after a CRD is created).
    pub fn forget_kinds(&mut self) {
        self.kinds.clear();
    }

    async fn resolve(
        &mut self,
        obj: &Value,
    ) -> Result<(ApiResource, ApiCapabilities, Option<String>, String), ApplyError> {
        let what = describe(obj);
        let malformed = |message: &str| ApplyError::Malformed {
            what: what.clone(),
            message: message.to_string(),
        };
        let api_version = obj
            .get("apiVersion")
            .and_then(Value::as_str)
            .ok_or_else(|| malformed("no apiVersion"))?;
        let kind = obj
            .get("kind")
            .and_then(Value::as_str)
            .ok_or_else(|| malformed("no kind"))?;
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| malformed("no metadata.name"))?
            .to_string();
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        let gvk = GroupVersionKind::gvk(group, version, kind);
        if !self.kinds.contains_key(&gvk) {
            let found = kube::discovery::pinned_kind(&self.client, &gvk)
                .await
                .map_err(|source| ApplyError::UnknownKind {
                    what: what.clone(),
                    api_version: api_version.to_string(),
                    kind: kind.to_string(),
                    source: Box::new(source),
                })?;
            self.kinds.insert(gvk.clone(), found);
        }
        let Some((ar, caps)) = self.kinds.get(&gvk) else {
            return Err(malformed("kind not resolved"));
        };
        let namespace = match caps.scope {
            Scope::Namespaced => Some(
                obj.pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .filter(|n| !n.is_empty())
                    .unwrap_or("default")
                    .to_string(),
            ),
            Scope::Cluster => None,
        };
        Ok((ar.clone(), caps.clone(), namespace, name))
    }

    fn api(&self, ar: &ApiResource, namespace: Option<&str>) -> Api<DynamicObject> {
        match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, ar),
            None => Api::all_with(self.client.clone(), ar),
        }
    }

    /// Creates `obj`, or replaces it when it exists (a Pod: only its labels and annotations,
    /// its spec being immutable); then writes its `status` (when it has one and the resource
    /// has a `status` subresource). Server-set metadata in `obj` (uid,
    /// resourceVersion, creationTimestamp, generation, managedFields) is dropped first.
    /// Returns the object as the server last answered.
    pub async fn apply(&mut self, mut obj: Value) -> Result<Value, ApplyError> {
        let what = describe(&obj);
        let (ar, caps, namespace, name) = self.resolve(&obj).await?;
        if let Some(md) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            for f in [
                "uid",
                "resourceVersion",
                "creationTimestamp",
                "generation",
                "managedFields",
                "selfLink",
            ] {
                md.remove(f);
            }
            if let Some(ns) = &namespace {
                md.insert("namespace".into(), Value::String(ns.clone()));
            }
        }
        let status = obj.as_object_mut().and_then(|m| m.remove("status"));
        let api = self.api(&ar, namespace.as_deref());
        let dynamic: DynamicObject =
            serde_json::from_value(obj.clone()).map_err(|e| ApplyError::Malformed {
                what: what.clone(),
                message: e.to_string(),
            })?;
        let pp = PostParams::default();
        let created = match api.create(&pp, &dynamic).await {
            Ok(o) => o,
            Err(kube::Error::Api(s)) if s.code == 409 => {
                let current = api.get(&name).await.map_err(|source| ApplyError::Api {
                    what: what.clone(),
                    verb: "get",
                    source: Box::new(source),
                })?;
                let mut replacement = dynamic.clone();
                if ar.kind == "Pod" && ar.group.is_empty() {
                    // A pod's spec cannot change once created (and admission, e.g. the
                    // ServiceAccount plugin, added to it): a pod applied again keeps its
                    // spec; its labels and annotations are replaced, its status below.
                    replacement = current.clone();
                    replacement.metadata.labels = dynamic.metadata.labels.clone();
                    replacement.metadata.annotations = dynamic.metadata.annotations.clone();
                }
                replacement.metadata.resource_version = current.metadata.resource_version;
                api.replace(&name, &pp, &replacement)
                    .await
                    .map_err(|source| ApplyError::Api {
                        what: what.clone(),
                        verb: "replace",
                        source: Box::new(source),
                    })?
            }
            Err(source) => {
                return Err(ApplyError::Api {
                    what,
                    verb: "create",
                    source: Box::new(source),
                });
            }
        };
        let has_status = caps.subresources.iter().any(|(r, _)| r.plural == "status");
        let mut latest = created;
        if let Some(status) = status.filter(|s| s.as_object().is_some_and(|m| !m.is_empty()))
            && has_status
        {
            let mut with_status = latest.clone();
            with_status.data["status"] = status;
            latest = api
                .replace_status(&name, &pp, &with_status)
                .await
                .map_err(|source| ApplyError::Api {
                    what: what.clone(),
                    verb: "update status",
                    source: Box::new(source),
                })?;
        }
        serde_json::to_value(&latest).map_err(|e| ApplyError::Malformed {
            what,
            message: e.to_string(),
        })
    }
}
