//! Per-pod resource requests: upstream `calculateRequests`, `calculatePodLevelRequests` and
//! `calculatePodRequestsFromContainers` in `pkg/controller/podautoscaler/replica_calculator.go`,
//! plus the parts of `k8s.io/component-helpers/resource` (`IsPodLevelRequestsSet`, `PodRequests`
//! with default options) they rely on.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::error::CalculatorError;

/// `v1.ResourceHugePagesPrefix`: every `hugepages-*` resource is supported at pod level.
const HUGE_PAGES_PREFIX: &str = "hugepages-";

/// `IsSupportedPodLevelResource`: `cpu`, `memory` and `hugepages-*`.
fn is_supported_pod_level_resource(name: &str) -> bool {
    name == "cpu" || name == "memory" || name.starts_with(HUGE_PAGES_PREFIX)
}

/// `IsPodLevelRequestsSet`: `spec.resources.requests` names at least one supported resource.
pub fn is_pod_level_requests_set(pod: &Pod) -> bool {
    pod_level_requests(pod).is_some_and(|r| r.keys().any(|k| is_supported_pod_level_resource(k)))
}

fn pod_level_requests(pod: &Pod) -> Option<&BTreeMap<String, Quantity>> {
    pod.spec.as_ref()?.resources.as_ref()?.requests.as_ref()
}

fn pod_name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or_default()
}

fn container_request<'c>(c: &'c Container, resource: &str) -> Option<&'c Quantity> {
    c.resources.as_ref()?.requests.as_ref()?.get(resource)
}

fn is_restartable_init_container(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

/// The milli-value of a request (`Quantity.MilliValue()`, rounded up to whole milli-units).
fn milli_value(
    q: &Quantity,
    resource: &str,
    container: &str,
    pod: &str,
) -> Result<i64, CalculatorError> {
    hpa_metrics::Quantity::from_k8s(q)
        .map(|q| q.milli_value())
        .map_err(|e| CalculatorError::InvalidRequest {
            resource: resource.to_owned(),
            container: container.to_owned(),
            pod: pod.to_owned(),
            quantity: q.0.clone(),
            source: Box::new(e),
        })
}

/// Upstream `calculateRequests`: each pod's request for `resource`, in milli-units, keyed by pod
/// name. With `container` set, only that container counts (it wins over pod-level requests);
/// otherwise pod-level requests are used when `pod_level_resources_enabled` (feature gate
/// `PodLevelResources`) and the pod sets them, else the sum over containers and restartable init
/// containers. The first error aborts.
pub fn calculate_requests<'a>(
    pods: impl IntoIterator<Item = &'a Pod>,
    container: Option<&str>,
    resource: &str,
    pod_level_resources_enabled: bool,
) -> Result<HashMap<String, i64>, CalculatorError> {
    let container = container.filter(|c| !c.is_empty());
    let mut requests = HashMap::new();
    for pod in pods {
        let use_pod_level =
            pod_level_resources_enabled && is_pod_level_requests_set(pod) && container.is_none();
        let request = if use_pod_level {
            calculate_pod_level_requests(pod, resource)?
        } else {
            calculate_pod_requests_from_containers(pod, container, resource)?
        };
        requests.insert(pod_name(pod).to_owned(), request);
    }
    Ok(requests)
}

/// Upstream `calculatePodRequestsFromContainers`: the sum of the requests of the regular
/// containers and the restartable (`restartPolicy: Always`) init containers, or of the one named
/// `container`. A candidate without a request for `resource` is an error, as is a named
/// container that does not exist.
pub fn calculate_pod_requests_from_containers(
    pod: &Pod,
    container: Option<&str>,
    resource: &str,
) -> Result<i64, CalculatorError> {
    let container = container.filter(|c| !c.is_empty());
    let name = pod_name(pod);
    let (regular, init): (&[Container], &[Container]) = match pod.spec.as_ref() {
        Some(spec) => (
            &spec.containers,
            spec.init_containers.as_deref().unwrap_or_default(),
        ),
        None => (&[], &[]),
    };
    let candidates = regular
        .iter()
        .chain(init.iter().filter(|c| is_restartable_init_container(c)));
    let mut request: i64 = 0;
    for c in candidates {
        if container.is_none_or(|wanted| wanted == c.name) {
            let Some(q) = container_request(c, resource) else {
                return Err(CalculatorError::MissingRequest {
                    resource: resource.to_owned(),
                    container: c.name.clone(),
                    pod: name.to_owned(),
                });
            };
            // Go int64 addition wraps.
            request = request.wrapping_add(milli_value(q, resource, &c.name, name)?);
        }
        // Container names are unique inside a pod.
        if container == Some(c.name.as_str()) {
            return Ok(request);
        }
    }
    if let Some(wanted) = container {
        return Err(CalculatorError::ContainerNotFound {
            container: wanted.to_owned(),
            pod: name.to_owned(),
        });
    }
    Ok(request)
}

/// Upstream `calculatePodLevelRequests`: `PodRequests(pod, {})[resource].MilliValue()`, an error
/// when the resulting list has no entry for `resource`.
pub fn calculate_pod_level_requests(pod: &Pod, resource: &str) -> Result<i64, CalculatorError> {
    pod_requests(pod, resource)?.ok_or_else(|| CalculatorError::MissingPodLevelRequest {
        resource: resource.to_owned(),
        pod: pod_name(pod).to_owned(),
    })
}

/// Adds `b` into `a` with `addResourceList` presence semantics (absent + x = x).
fn add_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.wrapping_add(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// `maxResourceList` for one resource.
fn max_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// `resourcehelpers.PodRequests(pod, PodResourcesOptions{})` restricted to one resource, in
/// milli-units (`None` when the list would have no entry for it):
/// the sidecar-aware aggregate of container requests, replaced by the pod-level request when
/// `spec.resources.requests` is set (for supported resources), plus `spec.overhead`.
///
/// Quantities are added as milli-values (each rounded up) rather than exactly and then rounded;
/// the two differ only for requests with sub-milli precision.
pub fn pod_requests(pod: &Pod, resource: &str) -> Result<Option<i64>, CalculatorError> {
    let name = pod_name(pod);
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(None);
    };
    let request_of = |c: &Container| -> Result<Option<i64>, CalculatorError> {
        container_request(c, resource)
            .map(|q| milli_value(q, resource, &c.name, name))
            .transpose()
    };

    let mut total: Option<i64> = None;
    for c in &spec.containers {
        total = add_opt(total, request_of(c)?);
    }
    // Init containers: a restartable one runs for the pod's lifetime (added to the total and to
    // the running sidecar sum); an ordinary one only needs its own request plus the sidecars
    // started before it. The pod needs the maximum of those "init uses".
    let mut sidecars: Option<i64> = None;
    let mut init_max: Option<i64> = None;
    for c in spec.init_containers.as_deref().unwrap_or_default() {
        let own = request_of(c)?;
        let init_use = if is_restartable_init_container(c) {
            total = add_opt(total, own);
            sidecars = add_opt(sidecars, own);
            sidecars
        } else {
            add_opt(own, sidecars)
        };
        init_max = max_opt(init_max, init_use);
    }
    total = max_opt(total, init_max);

    if let Some(q) = pod_level_requests(pod)
        .filter(|_| is_pod_level_requests_set(pod) && is_supported_pod_level_resource(resource))
        .and_then(|r| r.get(resource))
    {
        total = Some(milli_value(q, resource, "", name)?);
    }
    if let Some(q) = spec.overhead.as_ref().and_then(|o| o.get(resource)) {
        total = add_opt(total, Some(milli_value(q, resource, "", name)?));
    }
    Ok(total)
}

#[cfg(test)]
mod tests;
