//! The RESTMapper the HPA's scale client and custom-metrics client use: group and kind →
//! every served resource mapping, the preferred version first.
//!
//! Mirrors what kube-controller-manager builds in
//! `cmd/kube-controller-manager/app/controllermanager.go` (`CreateControllerContext`):
//! `restmapper.NewDeferredDiscoveryRESTMapper(cacheddiscovery.NewMemCacheClient(discovery))`
//! with `go wait.Until(func() { restMapper.Reset() }, 30*time.Second, stop)`, and client-go's
//! `restmapper/discovery.go` (`DeferredDiscoveryRESTMapper.RESTMappings`: the delegate is built
//! from discovery on first use; a miss rediscovers only when the cached discovery is not
//! `Fresh()`, and the memory cache is fresh as soon as it is filled, so an unknown kind is
//! rediscovered only after the next reset) and `NewDiscoveryRESTMapper` (a group's preferred
//! version first, then its other versions in the order served).
//!
//! Differences: discovery is per group and lazy (client-go's delegate discovers every group at
//! once), so a lookup costs the requests of one group; the 30 s reset is kept as epochs of
//! the mapper's age on its [`Clock`] (a lookup in a new epoch starts from an empty cache), which
//! is what a reset every 30 s from the mapper's creation does, without a background task, and
//! follows a virtual clock deterministically. A failed discovery
//! is not cached (client-go keeps no delegate when discovery fails).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use hpa_config::{Clock, SystemClock};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;

use crate::selector::go_quote;

/// KCM's reset period of the shared RESTMapper.
pub const RESET_PERIOD: Duration = Duration::from_secs(30);

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

    /// The path of an object's `scale` subresource through this mapping.
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

/// Why a group and kind could not be mapped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MappingError {
    /// The RESTMapper's `NoKindMatchError` for a search without versions.
    #[error("no matches for kind {} in group {}", go_quote(kind), go_quote(group))]
    NoKindMatch {
        /// The group searched.
        group: String,
        /// The kind searched.
        kind: String,
    },
    /// Discovery failed: the API's message (client-go's `StatusError`) or the transport error.
    #[error("{message}")]
    Discovery {
        /// The error text.
        message: String,
        /// The HTTP status, when the API answered with one.
        code: Option<u16>,
    },
}

/// The kinds one group serves: kind → mappings, preferred version first.
pub type GroupKinds = HashMap<String, Vec<ResourceMapping>>;

/// Discovery of one API group (the memory-cached discovery client's source).
#[async_trait::async_trait]
pub trait GroupDiscovery: Send + Sync {
    /// Every kind `group` serves in every version, preferred version first; empty when the
    /// group is not served.
    async fn discover_group(&self, group: &str) -> Result<GroupKinds, MappingError>;
}

/// Discovery through `/api` and `/apis` over a `kube::Client`.
pub struct KubeGroupDiscovery {
    client: kube::Client,
}

impl KubeGroupDiscovery {
    /// Discovery through `client`.
    pub fn new(client: kube::Client) -> Self {
        KubeGroupDiscovery { client }
    }
}

fn discovery_error(err: &kube::Error) -> MappingError {
    MappingError::Discovery {
        message: crate::kube_error_message(err),
        code: match err {
            kube::Error::Api(status) => Some(status.code),
            _ => None,
        },
    }
}

#[async_trait::async_trait]
impl GroupDiscovery for KubeGroupDiscovery {
    async fn discover_group(&self, group: &str) -> Result<GroupKinds, MappingError> {
        let versions: Vec<String> = if group.is_empty() {
            self.client
                .list_core_api_versions()
                .await
                .map_err(|e| discovery_error(&e))?
                .versions
        } else {
            let groups = self
                .client
                .list_api_groups()
                .await
                .map_err(|e| discovery_error(&e))?;
            let Some(g) = groups.groups.into_iter().find(|g| g.name == group) else {
                return Ok(HashMap::new());
            };
            let mut vs: Vec<String> = Vec::new();
            if let Some(p) = g.preferred_version {
                vs.push(p.version);
            }
            for v in g.versions {
                if !vs.contains(&v.version) {
                    vs.push(v.version);
                }
            }
            vs
        };
        let mut kinds = GroupKinds::new();
        for version in versions {
            let list: APIResourceList = if group.is_empty() {
                self.client.list_core_api_resources(&version).await
            } else {
                self.client
                    .list_api_group_resources(&format!("{group}/{version}"))
                    .await
            }
            .map_err(|e| discovery_error(&e))?;
            for r in list.resources {
                if r.name.contains('/') {
                    continue;
                }
                kinds.entry(r.kind).or_default().push(ResourceMapping {
                    group: group.to_owned(),
                    version: version.clone(),
                    resource: r.name,
                    namespaced: r.namespaced,
                });
            }
        }
        Ok(kinds)
    }
}

struct State {
    epoch: i128,
    groups: HashMap<String, Arc<GroupKinds>>,
}

/// The deferred, cached discovery RESTMapper, reset every `RESET_PERIOD` (30 s). Cloning shares
/// the cache.
#[derive(Clone)]
pub struct DeferredRestMapper {
    discovery: Arc<dyn GroupDiscovery>,
    period: Duration,
    clock: Arc<dyn Clock>,
    created: Timestamp,
    state: Arc<tokio::sync::Mutex<State>>,
}

impl std::fmt::Debug for DeferredRestMapper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeferredRestMapper")
            .field("period", &self.period)
            .finish_non_exhaustive()
    }
}

impl DeferredRestMapper {
    /// A mapper discovering through `client`, reset every 30 s of wall-clock time.
    pub fn new(client: kube::Client) -> Self {
        Self::with_clock(client, Arc::new(SystemClock))
    }

    /// A mapper discovering through `client`, reset every 30 s of `clock` (a virtual clock
    /// makes the resets deterministic).
    pub fn with_clock(client: kube::Client, clock: Arc<dyn Clock>) -> Self {
        Self::with_discovery(
            Arc::new(KubeGroupDiscovery::new(client)),
            RESET_PERIOD,
            clock,
        )
    }

    /// A mapper over any discovery, reset every `period` of `clock` (never when zero).
    pub fn with_discovery(
        discovery: Arc<dyn GroupDiscovery>,
        period: Duration,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let created = clock.now();
        DeferredRestMapper {
            discovery,
            period,
            clock,
            created,
            state: Arc::new(tokio::sync::Mutex::new(State {
                epoch: 0,
                groups: HashMap::new(),
            })),
        }
    }

    /// Which reset period the clock is in (periods counted from the mapper's creation).
    fn epoch(&self) -> i128 {
        let period = self.period.as_nanos() as i128;
        if period == 0 {
            return 0;
        }
        let age = self.clock.now().as_nanosecond() - self.created.as_nanosecond();
        age.div_euclid(period)
    }

    /// `Reset`: forget everything discovered.
    pub async fn reset(&self) {
        self.state.lock().await.groups.clear();
    }

    /// `RESTMappings(GroupKind{group, kind})`: every mapping of the kind in any served
    /// version, the preferred version first.
    pub async fn rest_mappings(
        &self,
        group: &str,
        kind: &str,
    ) -> Result<Vec<ResourceMapping>, MappingError> {
        let kinds = {
            // Held across discovery, as client-go's `initMu` is.
            let mut state = self.state.lock().await;
            let epoch = self.epoch();
            if state.epoch != epoch {
                state.epoch = epoch;
                state.groups.clear();
            }
            match state.groups.get(group) {
                Some(kinds) => kinds.clone(),
                None => {
                    tracing::trace!(v = 4, group, "Discovering API group for the REST mapper");
                    let kinds = Arc::new(self.discovery.discover_group(group).await?);
                    state.groups.insert(group.to_owned(), kinds.clone());
                    kinds
                }
            }
        };
        kinds
            .get(kind)
            .filter(|m| !m.is_empty())
            .cloned()
            .ok_or_else(|| MappingError::NoKindMatch {
                group: group.to_owned(),
                kind: kind.to_owned(),
            })
    }

    /// `RESTMapping(GroupKind{group, kind})`: the preferred mapping.
    pub async fn rest_mapping(
        &self,
        group: &str,
        kind: &str,
    ) -> Result<ResourceMapping, MappingError> {
        let mut all = self.rest_mappings(group, kind).await?;
        Ok(all.remove(0))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Mutex;

    use hpa_config::VirtualClock;

    use super::*;

    /// Serves `example.com` (v2 preferred, then v1; `Widget` only in v1) and counts calls.
    #[derive(Default)]
    struct Counting {
        calls: Mutex<Vec<String>>,
    }

    #[async_trait::async_trait]
    impl GroupDiscovery for Counting {
        async fn discover_group(&self, group: &str) -> Result<GroupKinds, MappingError> {
            self.calls.lock().unwrap().push(group.to_owned());
            if group != "example.com" {
                return Ok(GroupKinds::new());
            }
            let m = |version: &str, resource: &str| ResourceMapping {
                group: group.into(),
                version: version.into(),
                resource: resource.into(),
                namespaced: true,
            };
            Ok(GroupKinds::from([
                (
                    "Gadget".to_owned(),
                    vec![m("v2", "gadgets"), m("v1", "gadgets")],
                ),
                ("Widget".to_owned(), vec![m("v1", "widgets")]),
            ]))
        }
    }

    fn clock() -> VirtualClock {
        VirtualClock::new("2025-01-01T00:00:00Z".parse().unwrap())
    }

    #[tokio::test]
    async fn an_unknown_kind_is_rediscovered_only_after_the_reset_period() {
        let discovery = Arc::new(Counting::default());
        let clock = clock();
        let mapper = DeferredRestMapper::with_discovery(
            discovery.clone(),
            RESET_PERIOD,
            Arc::new(clock.clone()),
        );
        let err = mapper
            .rest_mappings("example.com", "Nope")
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "no matches for kind \"Nope\" in group \"example.com\""
        );
        for _ in 0..5 {
            clock.advance(jiff::SignedDuration::from_secs(5));
            assert!(mapper.rest_mappings("example.com", "Nope").await.is_err());
        }
        assert_eq!(discovery.calls.lock().unwrap().len(), 1);
        // 30 s after creation the mapper has been reset: one more discovery.
        clock.advance(jiff::SignedDuration::from_secs(5));
        assert!(mapper.rest_mappings("example.com", "Nope").await.is_err());
        assert!(mapper.rest_mappings("example.com", "Gadget").await.is_ok());
        assert_eq!(discovery.calls.lock().unwrap().len(), 2);
    }

    #[tokio::test]
    async fn a_kind_maps_in_any_served_version_preferred_first() {
        let mapper = DeferredRestMapper::with_discovery(
            Arc::new(Counting::default()),
            RESET_PERIOD,
            Arc::new(clock()),
        );
        let gadgets = mapper.rest_mappings("example.com", "Gadget").await.unwrap();
        let versions: Vec<&str> = gadgets.iter().map(|m| m.version.as_str()).collect();
        assert_eq!(versions, ["v2", "v1"]);
        let widget = mapper.rest_mapping("example.com", "Widget").await.unwrap();
        assert_eq!(widget.version, "v1");
        assert_eq!(widget.group_resource(), "widgets.example.com");
    }

    #[tokio::test]
    async fn an_explicit_reset_forgets_everything() {
        let discovery = Arc::new(Counting::default());
        let mapper =
            DeferredRestMapper::with_discovery(discovery.clone(), RESET_PERIOD, Arc::new(clock()));
        mapper.rest_mappings("example.com", "Gadget").await.unwrap();
        mapper.reset().await;
        mapper.rest_mappings("example.com", "Gadget").await.unwrap();
        assert_eq!(discovery.calls.lock().unwrap().len(), 2);
    }
}
