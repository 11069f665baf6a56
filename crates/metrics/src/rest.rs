//! The REST `MetricsClient`, mirroring upstream `pkg/controller/podautoscaler/metrics/client.go`
//! (`restMetricsClient`: `resourceMetricsClient`, `customMetricsClient`,
//! `externalMetricsClient`) together with the request building of the client libraries it uses:
//! the generated `metrics.k8s.io/v1beta1` clientset, `custom_metrics` (`multi_client.go`,
//! `versioned_client.go`) and `external_metrics/client.go`.
//!
//! Requests go through one `kube::Client`. Paths and parameters follow upstream exactly
//! (`labelSelector`, `metricLabelSelector`, empty ones omitted); the wildcard object name is sent
//! as a literal `*`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::autoscaling::v2::CrossVersionObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{APIGroupList, Time};
use serde::de::DeserializeOwned;

use crate::client::MetricsClient;
use crate::discovery::{
    AvailableApis, CUSTOM_METRICS_GROUP, group_kind_string, parse_group_version,
};
use crate::error::{FetchError, MetricsError, generic_server_response};
use crate::restmapper::DeferredRestMapper;
use crate::selector::Selector;
use crate::types::{PodMetric, PodMetricsInfo};
use crate::wire::{
    ExternalMetricValue, ExternalMetricValueList, MetricValue, MetricValueList, PodMetrics,
    PodMetricsList, Status, go_zero_time,
};
use hpa_quantity::Quantity;

/// Window assumed for custom metrics that report none (upstream
/// `metricServerDefaultMetricWindow`).
pub const METRIC_SERVER_DEFAULT_METRIC_WINDOW: Duration = Duration::from_secs(60);

const RESOURCE_METRICS_GROUP: &str = "metrics.k8s.io";
const EXTERNAL_METRICS_GROUP: &str = "external.metrics.k8s.io";

/// `MetricsClient` over the Kubernetes API (upstream `NewRESTMetricsClient`).
///
/// Build the `kube::Client`s with `Config::default_retry = false` to behave like client-go: kube
/// retries 429/503/504 answers by default (up to 15 times with backoff), client-go does not
/// (without a `Retry-After` header), and the HPA expects the error right away.
///
/// As in kube-controller-manager (`startHPAControllerWithMetricsClient`), each of the three
/// APIs may have a client of its own ([`RestMetricsClient::with_clients`]), so each has its
/// own client-side token bucket.
#[derive(Clone)]
pub struct RestMetricsClient {
    clients: MetricsApiClients,
    available_apis: AvailableApis,
    mapper: DeferredRestMapper,
    /// The group the custom metrics API is read from (`custom.metrics.k8s.io`, or another for
    /// a client routed by [`MetricsClient::for_api_group`]).
    custom_group: Arc<str>,
    /// The group the external metrics API is read from.
    external_group: Arc<str>,
    /// The clients routed to other groups, most recently used last (at most [`MAX_ROUTES`]).
    routes: Arc<Mutex<Routes>>,
}

/// The routed clients by group, most recently used last.
type Routes = Vec<(String, Arc<RestMetricsClient>)>;

/// How many routed groups' clients are kept (KEP-6382's bound: 20, least recently used
/// dropped first).
pub const MAX_ROUTES: usize = 20;

/// The clients of the three metrics APIs (upstream: `resourceclient.NewForConfigOrDie`,
/// `custom_metrics.NewForConfig` and `external_metrics.NewForConfigOrDie`, one REST client
/// each).
#[derive(Clone)]
pub struct MetricsApiClients {
    /// `metrics.k8s.io` (PodMetrics).
    pub resource: kube::Client,
    /// `custom.metrics.k8s.io` (and the discovery of its version and of kinds).
    pub custom: kube::Client,
    /// `external.metrics.k8s.io`.
    pub external: kube::Client,
}

impl MetricsApiClients {
    /// One client for all three APIs.
    pub fn shared(client: kube::Client) -> Self {
        MetricsApiClients {
            resource: client.clone(),
            custom: client.clone(),
            external: client,
        }
    }
}

#[derive(Clone, Copy)]
enum Api {
    Resource,
    Custom,
    External,
}

impl std::fmt::Debug for RestMetricsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestMetricsClient").finish_non_exhaustive()
    }
}

impl RestMetricsClient {
    /// A client with its own custom-metrics version cache.
    pub fn new(client: kube::Client) -> Self {
        Self::with_available_apis(client, AvailableApis::new())
    }

    /// A client sharing the given version cache (so its owner can invalidate it, e.g. with
    /// [`AvailableApis::periodically_invalidate`] every sync period).
    pub fn with_available_apis(client: kube::Client, available_apis: AvailableApis) -> Self {
        let mapper = DeferredRestMapper::new(client.clone());
        Self::with_parts(MetricsApiClients::shared(client), available_apis, mapper)
    }

    /// A client sharing the given version cache and RESTMapper (KCM gives the custom metrics
    /// client the controller manager's shared, periodically reset mapper).
    pub fn with_rest_mapper(
        client: kube::Client,
        available_apis: AvailableApis,
        mapper: DeferredRestMapper,
    ) -> Self {
        Self::with_parts(MetricsApiClients::shared(client), available_apis, mapper)
    }

    /// A client with one `kube::Client` per metrics API (kinds discovered through the custom
    /// metrics one), sharing the given version cache.
    pub fn with_clients(clients: MetricsApiClients, available_apis: AvailableApis) -> Self {
        let mapper = DeferredRestMapper::new(clients.custom.clone());
        Self::with_parts(clients, available_apis, mapper)
    }

    /// A client with one `kube::Client` per metrics API, the given version cache and the
    /// given RESTMapper: how kube-controller-manager builds it.
    pub fn with_parts(
        clients: MetricsApiClients,
        available_apis: AvailableApis,
        mapper: DeferredRestMapper,
    ) -> Self {
        RestMetricsClient {
            clients,
            available_apis,
            mapper,
            custom_group: Arc::from(CUSTOM_METRICS_GROUP),
            external_group: Arc::from(EXTERNAL_METRICS_GROUP),
            routes: Arc::default(),
        }
    }

    /// The custom-metrics version cache.
    pub fn available_apis(&self) -> &AvailableApis {
        &self.available_apis
    }

    /// GET `path_and_query`, decoding a 2xx body as `T`; other answers become client-go's error
    /// text for `(get <qualified_resource> <name>)`.
    async fn get_json<T: DeserializeOwned>(
        &self,
        api: Api,
        path_and_query: &str,
        qualified_resource: &str,
        name: &str,
    ) -> Result<T, FetchError> {
        let request = http::Request::get(path_and_query)
            .header(http::header::ACCEPT, "application/json")
            .body(kube::client::Body::empty())
            .map_err(|e| FetchError::caused_by(e.to_string(), e))?;
        let client = match api {
            Api::Resource => &self.clients.resource,
            Api::Custom => &self.clients.custom,
            Api::External => &self.clients.external,
        };
        let response = client
            .send(request)
            .await
            .map_err(|e| FetchError::caused_by(crate::kube_error_message(&e), e))?;
        let status = response.status();
        let content_type = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = response
            .into_body()
            .collect_bytes()
            .await
            .map_err(|e| FetchError::caused_by(e.to_string(), e))?;
        decode_answer(
            status.as_u16(),
            content_type.as_deref(),
            &body,
            qualified_resource,
            name,
        )
    }

    /// This client reading the custom and external metrics APIs from `group` (KEP-6382):
    /// same clients, version cache (by group) and RESTMapper.
    fn routed(&self, group: &str) -> RestMetricsClient {
        RestMetricsClient {
            clients: self.clients.clone(),
            available_apis: self.available_apis.clone(),
            mapper: self.mapper.clone(),
            custom_group: Arc::from(group),
            external_group: Arc::from(group),
            routes: Arc::default(),
        }
    }

    /// The custom metrics API version to use (cached; rediscovered after invalidation).
    async fn custom_metrics_version(&self) -> Result<String, FetchError> {
        self.available_apis
            .get_or_discover(&self.custom_group, || async {
                self.get_json::<APIGroupList>(Api::Custom, "/apis", "", "")
                    .await
                    .map_err(|e| e.message)
            })
            .await
            .map_err(FetchError::other)
    }

    /// Go `qualResourceForKind`: the RESTMapper's preferred mapping of the object's group and
    /// kind (any served version, not only the one written in the HPA), printed as a
    /// GroupResource (`deployments.apps`, `pods`).
    async fn qualified_resource_for_kind(
        &self,
        group: &str,
        kind: &str,
    ) -> Result<String, FetchError> {
        match self.mapper.rest_mapping(group, kind).await {
            Ok(mapping) => Ok(mapping.group_resource()),
            Err(e) => Err(FetchError::other(format!(
                "unable to map kind {} to resource: {e}",
                group_kind_string(group, kind),
            ))),
        }
    }

    /// The PodMetrics of `namespace` matching `selector` (all of them for `""`), unchecked.
    async fn pod_metrics_list(
        &self,
        namespace: &str,
        selector: &str,
    ) -> Result<Vec<PodMetrics>, MetricsError> {
        let url = format!(
            "/apis/{RESOURCE_METRICS_GROUP}/v1beta1/namespaces/{}/pods{}",
            escape_path(namespace),
            encode_query(&[("labelSelector", selector.to_owned())])
        );
        let list: PodMetricsList = self
            .get_json(
                Api::Resource,
                &url,
                &format!("pods.{RESOURCE_METRICS_GROUP}"),
                "",
            )
            .await
            .map_err(MetricsError::ResourceFetch)?;
        Ok(list.items)
    }

    /// The values of the Pods metric `metric_name` for the pods of `namespace` matching
    /// `selector` (all of them for `""`); `check_values` fails on a value that does not parse
    /// (the per-HPA call; the batched list checks the values an HPA selects).
    async fn pods_custom_metric_list(
        &self,
        metric_name: &str,
        namespace: &str,
        selector: &str,
        metric_selector: &Selector,
        check_values: bool,
    ) -> Result<Vec<MetricValue>, MetricsError> {
        let path = format!(
            "/namespaces/{}/pods/*/{}",
            escape_path(namespace),
            escape_path(metric_name)
        );
        self.custom_metric_list_checked(
            &path,
            &[
                ("labelSelector", selector.to_owned()),
                ("metricLabelSelector", metric_selector.to_string()),
            ],
            "pods",
            "*",
            check_values,
        )
        .await
        .map(|list| list.items)
        .map_err(MetricsError::CustomFetch)
    }

    async fn custom_metric_list(
        &self,
        path_after_version: &str,
        query: &[(&str, String)],
        qualified_resource: &str,
        name: &str,
    ) -> Result<MetricValueList, FetchError> {
        self.custom_metric_list_checked(path_after_version, query, qualified_resource, name, true)
            .await
    }

    async fn custom_metric_list_checked(
        &self,
        path_after_version: &str,
        query: &[(&str, String)],
        qualified_resource: &str,
        name: &str,
        check_values: bool,
    ) -> Result<MetricValueList, FetchError> {
        let version = self.custom_metrics_version().await?;
        let group = &self.custom_group;
        let url = format!(
            "/apis/{group}/{version}{path_after_version}{}",
            encode_query(query)
        );
        let list: MetricValueList = self
            .get_json(
                Api::Custom,
                &url,
                &format!("{qualified_resource}.{group}"),
                name,
            )
            .await?;
        check_custom_list(&list, check_values)?;
        Ok(list)
    }
}

/// An answer of a metrics API as client-go's REST client turns it into a value or an error:
/// a non-2xx status is the server's `Status` message when the body is a failure `Status`, else
/// upstream's generic message for the code (quoting a `text/plain` body); a 2xx body must decode
/// as `T`. Pure, so that every answer a server can send is tested (and fuzzed) without one.
pub fn decode_answer<T: DeserializeOwned>(
    status: u16,
    content_type: Option<&str>,
    body: &[u8],
    qualified_resource: &str,
    name: &str,
) -> Result<T, FetchError> {
    if !(200..300).contains(&status) {
        if let Ok(st) = serde_json::from_slice::<Status>(body)
            && st.kind.as_deref().is_none_or(|k| k == "Status")
            && st.status.as_deref() == Some("Failure")
        {
            return Err(FetchError::status(status, st.message.unwrap_or_default()));
        }
        let is_text = content_type
            .and_then(|v| v.split(';').next())
            .is_some_and(|m| m.trim().eq_ignore_ascii_case("text/plain"));
        let server_message = if is_text {
            let text = String::from_utf8_lossy(&body[..body.len().min(1024)]);
            text.trim().to_string()
        } else {
            "unknown".to_string()
        };
        return Err(FetchError::status(
            status,
            generic_server_response(status, qualified_resource, name, &server_message),
        ));
    }
    serde_json::from_slice(body).map_err(|e| FetchError::caused_by(e.to_string(), e))
}

/// Upstream `customMetricsClient`'s checks of a `MetricValueList` answer: its kind, when
/// given, is `MetricValueList`, and (`check_values`) every value parses.
pub fn check_custom_list(list: &MetricValueList, check_values: bool) -> Result<(), FetchError> {
    if let Some(kind) = list.kind.as_deref()
        && kind != "MetricValueList"
    {
        return Err(FetchError::other(format!(
            "the custom metrics API server didn't return MetricValueList, the type is {kind}"
        )));
    }
    if check_values {
        for item in &list.items {
            parse_quantity(&item.value)?;
        }
    }
    Ok(())
}

/// Upstream `customMetricsClient.GetObjectMetric` after its request: exactly one value, in
/// milli-units, with its timestamp.
pub fn object_metric_result(items: &[MetricValue]) -> Result<(i64, jiff::Timestamp), MetricsError> {
    let [item] = items else {
        return Err(MetricsError::CustomFetch(FetchError::other(format!(
            "the custom metrics API server returned {} results when we asked for exactly one",
            items.len()
        ))));
    };
    Ok((milli(&item.value), timestamp(item.timestamp.as_ref())))
}

/// Upstream `externalMetricsClient.GetExternalMetric` after its request: every value must
/// parse, an empty answer is an error, the timestamp is the first item's.
pub fn external_metric_result(
    items: &[ExternalMetricValue],
) -> Result<(Vec<i64>, jiff::Timestamp), MetricsError> {
    for item in items {
        parse_quantity(&item.value).map_err(MetricsError::ExternalFetch)?;
    }
    let Some(first) = items.first() else {
        return Err(MetricsError::NoExternalMetrics);
    };
    let values = items.iter().map(|m| milli(&m.value)).collect();
    Ok((values, timestamp(first.timestamp.as_ref())))
}

/// Upstream `resourceMetricsClient.GetResourceMetric` after its request: every quantity of
/// the answer must parse (Go decodes them all), an empty answer is an error, the timestamp is
/// the first item's, and the values are per pod (summed) or of one container.
pub fn resource_metric_result<'a>(
    items: impl IntoIterator<Item = &'a PodMetrics> + Clone,
    resource: &str,
    container: Option<&str>,
) -> Result<(PodMetricsInfo, jiff::Timestamp), MetricsError> {
    for q in items
        .clone()
        .into_iter()
        .flat_map(|m| m.containers.iter().flat_map(|c| c.usage.values()))
    {
        parse_quantity(q).map_err(MetricsError::ResourceFetch)?;
    }
    let Some(first) = items.clone().into_iter().next() else {
        return Err(MetricsError::NoResourceMetrics);
    };
    let ts = timestamp(first.timestamp.as_ref());
    let metrics = match container.filter(|c| !c.is_empty()) {
        Some(c) => container_metrics(items, resource, c),
        None => pod_sum_metrics(items, resource),
    };
    Ok((metrics, ts))
}

/// Upstream `customMetricsClient.GetRawMetric` after its request: an empty answer is an
/// error, the timestamp is the first item's, one value per described pod. Every value must
/// parse (the per-HPA request checks them while decoding).
pub fn raw_metric_result<'a>(
    items: impl IntoIterator<Item = &'a MetricValue> + Clone,
) -> Result<(PodMetricsInfo, jiff::Timestamp), MetricsError> {
    for m in items.clone() {
        parse_quantity(&m.value).map_err(MetricsError::CustomFetch)?;
    }
    let mut iter = items.into_iter().peekable();
    let Some(first) = iter.peek() else {
        return Err(MetricsError::NoCustomMetrics);
    };
    let ts = timestamp(first.timestamp.as_ref());
    let mut res = PodMetricsInfo::with_capacity(iter.size_hint().0);
    for m in iter {
        res.insert(
            m.described_object.name.clone(),
            PodMetric {
                timestamp: timestamp(m.timestamp.as_ref()),
                window: custom_window(m),
                value: milli(&m.value),
            },
        );
    }
    Ok((res, ts))
}

fn timestamp(t: Option<&Time>) -> jiff::Timestamp {
    t.map_or_else(go_zero_time, |t| t.0)
}

fn parse_quantity(
    q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity,
) -> Result<Quantity, FetchError> {
    Quantity::from_k8s(q).map_err(|e| FetchError::caused_by(e.to_string(), e))
}

fn milli(q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity) -> i64 {
    parse_quantity(q).map_or(0, |q| q.milli_value())
}

fn pod_window(m: &PodMetrics) -> Duration {
    m.window
        .as_deref()
        .and_then(|w| w.parse::<hpa_config::GoDuration>().ok())
        .map_or(Duration::ZERO, hpa_config::GoDuration::to_std)
}

fn custom_window(m: &MetricValue) -> Duration {
    match m.window_seconds() {
        None => METRIC_SERVER_DEFAULT_METRIC_WINDOW,
        Some(s) => Duration::from_secs(u64::try_from(s).unwrap_or(0)),
    }
}

/// Upstream `getPodMetrics`: per pod, the sum over all containers; a pod with no containers or
/// with a container lacking the resource is left out.
pub fn pod_sum_metrics<'a>(
    items: impl IntoIterator<Item = &'a PodMetrics>,
    resource: &str,
) -> PodMetricsInfo {
    let items = items.into_iter();
    let mut res = PodMetricsInfo::with_capacity(items.size_hint().0);
    for m in items {
        let name = m.metadata.name.clone().unwrap_or_default();
        let mut sum: i64 = 0;
        let mut missing = m.containers.is_empty();
        for c in &m.containers {
            match c.usage.get(resource) {
                Some(q) => sum = sum.wrapping_add(milli(q)),
                None => {
                    missing = true;
                    tracing::debug!(resource_metric = resource, pod = %name, "Missing resource metric");
                    break;
                }
            }
        }
        if !missing {
            res.insert(
                name,
                PodMetric {
                    timestamp: timestamp(m.timestamp.as_ref()),
                    window: pod_window(m),
                    value: sum,
                },
            );
        }
    }
    res
}

/// Upstream `getContainerMetrics`: per pod, the named container's usage; a pod without that
/// container, or whose container lacks the resource, is left out.
pub fn container_metrics<'a>(
    items: impl IntoIterator<Item = &'a PodMetrics>,
    resource: &str,
    container: &str,
) -> PodMetricsInfo {
    let items = items.into_iter();
    let mut res = PodMetricsInfo::with_capacity(items.size_hint().0);
    for m in items {
        let name = m.metadata.name.clone().unwrap_or_default();
        match m.containers.iter().find(|c| c.name == container) {
            Some(c) => {
                if let Some(q) = c.usage.get(resource) {
                    res.insert(
                        name,
                        PodMetric {
                            timestamp: timestamp(m.timestamp.as_ref()),
                            window: pod_window(m),
                            value: milli(q),
                        },
                    );
                }
            }
            None => {
                tracing::debug!(container, pod = %name, "Missing container metric");
            }
        }
    }
    res
}

#[async_trait::async_trait]
impl MetricsClient for RestMetricsClient {
    async fn get_resource_metric<'a>(
        &self,
        resource: &str,
        namespace: &str,
        selector: &Selector,
        container: Option<&'a str>,
    ) -> Result<(PodMetricsInfo, jiff::Timestamp), MetricsError> {
        let list = self
            .pod_metrics_list(namespace, &selector.to_string())
            .await?;
        resource_metric_result(&list, resource, container)
    }

    async fn get_raw_metric(
        &self,
        metric_name: &str,
        namespace: &str,
        selector: &Selector,
        metric_selector: &Selector,
    ) -> Result<(PodMetricsInfo, jiff::Timestamp), MetricsError> {
        let list = self
            .pods_custom_metric_list(
                metric_name,
                namespace,
                &selector.to_string(),
                metric_selector,
                true,
            )
            .await?;
        raw_metric_result(&list)
    }

    async fn list_namespace_pod_metrics(
        &self,
        namespace: &str,
    ) -> Result<Option<Vec<PodMetrics>>, MetricsError> {
        self.pod_metrics_list(namespace, "").await.map(Some)
    }

    fn for_api_group(&self, api_group: &str) -> Option<Arc<dyn MetricsClient>> {
        let mut routes = self.routes.lock().unwrap_or_else(|p| p.into_inner());
        let client = match routes.iter().position(|(g, _)| g == api_group) {
            Some(i) => {
                let kept = routes.remove(i);
                let client = Arc::clone(&kept.1);
                routes.push(kept);
                client
            }
            None => {
                if routes.len() >= MAX_ROUTES {
                    let (dropped, _) = routes.remove(0);
                    tracing::warn!(
                        group = %dropped,
                        "metrics clients of more than {MAX_ROUTES} API groups: the least recently used one is dropped"
                    );
                }
                let client = Arc::new(self.routed(api_group));
                routes.push((api_group.to_owned(), Arc::clone(&client)));
                client
            }
        };
        Some(client)
    }

    async fn list_namespace_raw_metric(
        &self,
        metric_name: &str,
        namespace: &str,
        metric_selector: &Selector,
    ) -> Result<Option<Vec<MetricValue>>, MetricsError> {
        self.pods_custom_metric_list(metric_name, namespace, "", metric_selector, false)
            .await
            .map(Some)
    }

    async fn get_object_metric(
        &self,
        metric_name: &str,
        namespace: &str,
        object: &CrossVersionObjectReference,
        metric_selector: &Selector,
    ) -> Result<(i64, jiff::Timestamp), MetricsError> {
        let api_version = object.api_version.as_deref().unwrap_or_default();
        let (group, _) = parse_group_version(api_version);
        let kind = object.kind.as_str();
        let query = [("metricLabelSelector", metric_selector.to_string())];
        let list = if kind == "Namespace" && group.is_empty() {
            // Root-scoped namespace metrics; the object's name is ignored on purpose.
            let path = format!(
                "/namespaces/{}/metrics/{}",
                escape_path(namespace),
                escape_path(metric_name)
            );
            self.custom_metric_list(&path, &query, "metrics", metric_name)
                .await
        } else {
            // Upstream resolves the preferred version before mapping the kind.
            let mapped = match self.custom_metrics_version().await {
                Err(e) => Err(e),
                Ok(_) => self.qualified_resource_for_kind(&group, kind).await,
            };
            match mapped {
                Err(e) => Err(e),
                Ok(resource) => {
                    let path = format!(
                        "/namespaces/{}/{}/{}/{}",
                        escape_path(namespace),
                        escape_path(&resource),
                        escape_path(&object.name),
                        escape_path(metric_name)
                    );
                    self.custom_metric_list(&path, &query, &resource, &object.name)
                        .await
                }
            }
        }
        .map_err(MetricsError::CustomFetch)?;
        object_metric_result(&list.items)
    }

    async fn get_external_metric(
        &self,
        metric_name: &str,
        namespace: &str,
        selector: &Selector,
    ) -> Result<(Vec<i64>, jiff::Timestamp), MetricsError> {
        let group = &self.external_group;
        let url = format!(
            "/apis/{group}/v1beta1/namespaces/{}/{}{}",
            escape_path(namespace),
            escape_path(metric_name),
            encode_query(&[("labelSelector", selector.to_string())])
        );
        let list: ExternalMetricValueList = self
            .get_json(Api::External, &url, &format!("{metric_name}.{group}"), "")
            .await
            .map_err(MetricsError::ExternalFetch)?;
        external_metric_result(&list.items)
    }
}

/// Go `url.Values.Encode()` of the non-empty parameters (sorted by key), with a leading `?`.
fn encode_query(params: &[(&str, String)]) -> String {
    let sorted: BTreeMap<&str, &str> = params
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (*k, v.as_str()))
        .collect();
    if sorted.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = sorted
        .iter()
        .map(|(k, v)| format!("{}={}", query_escape(k), query_escape(v)))
        .collect();
    format!("?{}", parts.join("&"))
}

/// Go `url.QueryEscape` (a space is `+`).
pub fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// Go's path escaping (`url.URL.EscapedPath`), keeping `*` literal for the wildcard name.
fn escape_path(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z'
            | b'a'..=b'z'
            | b'0'..=b'9'
            | b'-'
            | b'_'
            | b'.'
            | b'~'
            | b'$'
            | b'&'
            | b'+'
            | b','
            | b'/'
            | b':'
            | b';'
            | b'='
            | b'@'
            | b'*' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_encoding_matches_go() {
        assert_eq!(encode_query(&[("labelSelector", String::new())]), "");
        assert_eq!(
            encode_query(&[
                ("metricLabelSelector", "a=b".into()),
                ("labelSelector", "app=web,tier in (a,b)".into()),
            ]),
            "?labelSelector=app%3Dweb%2Ctier+in+%28a%2Cb%29&metricLabelSelector=a%3Db"
        );
        assert_eq!(escape_path("deployments.apps"), "deployments.apps");
        assert_eq!(escape_path("a b?"), "a%20b%3F");
    }
}
