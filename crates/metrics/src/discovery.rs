//! Custom-metrics version discovery and kind → resource mapping, mirroring upstream
//! `staging/src/k8s.io/metrics/pkg/client/custom_metrics/discovery.go` (`NewAvailableAPIsGetter`,
//! `PreferredVersion`, `Invalidate`, `PeriodicallyInvalidate`). The kind → resource mapping of
//! `versioned_client.go` (`qualResourceForKind`) goes through [`crate::restmapper`].

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIGroupList;
use tokio::sync::RwLock;

/// API group of the custom metrics API.
pub const CUSTOM_METRICS_GROUP: &str = "custom.metrics.k8s.io";

/// Group versions of the custom metrics API this client speaks, most preferred first
/// (upstream `MetricVersions`).
pub const KNOWN_CUSTOM_METRICS_VERSIONS: [&str; 2] = [
    "custom.metrics.k8s.io/v1beta2",
    "custom.metrics.k8s.io/v1beta1",
];

/// Cache of the custom metrics API's preferred version (upstream `apiVersionsGetter`), and of
/// the preferred version of each other group a metric is read from
/// (`kube-hpa-controller.io/metric-source`, after KEP-6382), by group. Cloning shares the
/// cache. Errors are never cached.
#[derive(Debug, Clone, Default)]
pub struct AvailableApis {
    preferred: Arc<RwLock<HashMap<String, String>>>,
}

impl AvailableApis {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Forgets the cached versions, so the next call rediscovers them (upstream `Invalidate`).
    pub async fn invalidate(&self) {
        self.preferred.write().await.clear();
    }

    /// The cached version of the custom metrics API, if any.
    pub async fn cached(&self) -> Option<String> {
        self.preferred
            .read()
            .await
            .get(CUSTOM_METRICS_GROUP)
            .cloned()
    }

    /// Returns the cached version of `group` (a custom metrics API) or runs `discover` (under
    /// the write lock, so concurrent callers share one discovery) and caches its success.
    pub(crate) async fn get_or_discover<F, Fut>(
        &self,
        group: &str,
        discover: F,
    ) -> Result<String, String>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<APIGroupList, String>>,
    {
        if let Some(v) = self.preferred.read().await.get(group).cloned() {
            return Ok(v);
        }
        let mut guard = self.preferred.write().await;
        if let Some(v) = guard.get(group).cloned() {
            return Ok(v);
        }
        let groups = discover().await?;
        let chosen = choose_metrics_version(&groups, group)?;
        guard.insert(group.to_owned(), chosen.clone());
        Ok(chosen)
    }

    /// Invalidates the cache every `period`, forever (upstream `PeriodicallyInvalidate`, run by
    /// kube-controller-manager with the HPA sync period). The first invalidation happens one
    /// period after the call, like a Go ticker. Drop the future to stop.
    pub async fn periodically_invalidate(&self, period: std::time::Duration) {
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        loop {
            ticker.tick().await;
            self.invalidate().await;
        }
    }
}

/// Picks the version as upstream's `PreferredVersion` does: the group's preferred version if
/// known, else the first known version in server order.
#[cfg(test)]
pub fn choose_custom_metrics_version(groups: &APIGroupList) -> Result<String, String> {
    choose_metrics_version(groups, CUSTOM_METRICS_GROUP)
}

/// [`choose_custom_metrics_version`] for a custom metrics API served under `name`: the
/// custom metrics group or another (KEP-6382), whose versions must be those the custom metrics
/// API has (`v1beta2`, `v1beta1`).
pub fn choose_metrics_version(groups: &APIGroupList, name: &str) -> Result<String, String> {
    let Some(group) = groups.groups.iter().find(|g| g.name == name) else {
        return Err(format!("no custom metrics API ({name}) registered"));
    };
    let known = |gv: &str| {
        gv.rsplit_once('/').is_some_and(|(g, v)| {
            g == name
                && KNOWN_CUSTOM_METRICS_VERSIONS
                    .iter()
                    .any(|k| k.rsplit_once('/').is_some_and(|(_, kv)| kv == v))
        })
    };
    if let Some(pref) = &group.preferred_version
        && !pref.group_version.is_empty()
        && known(&pref.group_version)
    {
        return Ok(version_of(&pref.group_version));
    }
    group
        .versions
        .iter()
        .find(|v| known(&v.group_version))
        .map(|v| version_of(&v.group_version))
        .ok_or_else(|| "no known available metric versions found".to_string())
}

fn version_of(group_version: &str) -> String {
    group_version
        .rsplit_once('/')
        .map_or(group_version, |(_, v)| v)
        .to_string()
}

/// Group and version of an `apiVersion` (Go `schema.ParseGroupVersion`; unparsable → empty).
pub fn parse_group_version(api_version: &str) -> (String, String) {
    match api_version.split('/').collect::<Vec<_>>().as_slice() {
        [""] => (String::new(), String::new()),
        [v] => (String::new(), (*v).to_string()),
        [g, v] => ((*g).to_string(), (*v).to_string()),
        _ => (String::new(), String::new()),
    }
}

/// Go `GroupKind.String()`: `Kind` or `Kind.group`.
pub fn group_kind_string(group: &str, kind: &str) -> String {
    if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{APIGroup, GroupVersionForDiscovery};

    fn group(preferred: Option<&str>, versions: &[&str]) -> APIGroupList {
        APIGroupList {
            groups: vec![APIGroup {
                name: CUSTOM_METRICS_GROUP.into(),
                preferred_version: preferred.map(|p| GroupVersionForDiscovery {
                    group_version: p.into(),
                    version: version_of(p),
                }),
                server_address_by_client_cidrs: None,
                versions: versions
                    .iter()
                    .map(|v| GroupVersionForDiscovery {
                        group_version: (*v).into(),
                        version: version_of(v),
                    })
                    .collect(),
            }],
        }
    }

    #[test]
    fn version_choice() {
        let b2 = "custom.metrics.k8s.io/v1beta2";
        let b1 = "custom.metrics.k8s.io/v1beta1";
        assert_eq!(
            choose_custom_metrics_version(&group(Some(b2), &[b2, b1])).unwrap(),
            "v1beta2"
        );
        assert_eq!(
            choose_custom_metrics_version(&group(Some(b1), &[b2, b1])).unwrap(),
            "v1beta1"
        );
        assert_eq!(
            choose_custom_metrics_version(&group(
                Some("custom.metrics.k8s.io/v2"),
                &["custom.metrics.k8s.io/v2", b1]
            ))
            .unwrap(),
            "v1beta1"
        );
        assert_eq!(
            choose_custom_metrics_version(&group(None, &["custom.metrics.k8s.io/v9"])).unwrap_err(),
            "no known available metric versions found"
        );
        assert_eq!(
            choose_custom_metrics_version(&APIGroupList { groups: vec![] }).unwrap_err(),
            "no custom metrics API (custom.metrics.k8s.io) registered"
        );
    }

    #[test]
    fn version_choice_for_another_group() {
        let mut list = group(
            Some("modelserver.example.com/v1beta1"),
            &[
                "modelserver.example.com/v1beta2",
                "modelserver.example.com/v1beta1",
            ],
        );
        list.groups[0].name = "modelserver.example.com".into();
        assert_eq!(
            choose_metrics_version(&list, "modelserver.example.com").unwrap(),
            "v1beta1"
        );
        // Another group's versions (or the custom metrics group's) are not this one's.
        assert_eq!(
            choose_metrics_version(&group(Some("custom.metrics.k8s.io/v1beta2"), &[]), "x.io")
                .unwrap_err(),
            "no custom metrics API (x.io) registered"
        );
        list.groups[0].preferred_version = None;
        list.groups[0].versions[0].group_version = "other.io/v1beta2".into();
        assert_eq!(
            choose_metrics_version(&list, "modelserver.example.com").unwrap(),
            "v1beta1"
        );
    }

    #[test]
    fn group_versions() {
        assert_eq!(parse_group_version("apps/v1"), ("apps".into(), "v1".into()));
        assert_eq!(parse_group_version("v1"), ("".into(), "v1".into()));
        assert_eq!(parse_group_version(""), ("".into(), "".into()));
        assert_eq!(parse_group_version("a/b/c"), ("".into(), "".into()));
        assert_eq!(group_kind_string("apps", "Deployment"), "Deployment.apps");
        assert_eq!(group_kind_string("", "Service"), "Service");
    }

    #[tokio::test(start_paused = true)]
    async fn periodic_invalidation_forgets_the_version() {
        let apis = AvailableApis::new();
        let v = apis
            .get_or_discover(CUSTOM_METRICS_GROUP, || async {
                Ok(group(Some("custom.metrics.k8s.io/v1beta2"), &[]))
            })
            .await
            .unwrap();
        assert_eq!(v, "v1beta2");
        let bg = apis.clone();
        let task = tokio::spawn(async move {
            bg.periodically_invalidate(std::time::Duration::from_secs(15))
                .await
        });
        tokio::time::sleep(std::time::Duration::from_secs(14)).await;
        assert_eq!(apis.cached().await.as_deref(), Some("v1beta2"));
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        assert_eq!(apis.cached().await, None);
        task.abort();
    }
}
