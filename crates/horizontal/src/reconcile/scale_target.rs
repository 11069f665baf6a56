//! The scale target of one reconcile: reading its scale (`reconcileAutoscaler`'s steps 3-5:
//! the group version of `scaleTargetRef`, the RESTMapper's mappings, `scaleForResourceMappings`)
//! and writing the new replica count (`updateScale` inside `retry.RetryOnConflict`), as
//! upstream `pkg/controller/podautoscaler/horizontal.go` does.

use hpa_decision::gofmt::{GoArg, sprintf};
use hpa_decision::labels::ErrorKind;
use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;

use super::ReconcileError;
use crate::scale_client::{
    ReadSource, ResourceMapping, ScaleClient, ScaleError, parse_group_version,
    scale_for_resource_mappings,
};

/// A failed read of the target's scale: `message` is what the `FailedGetScale` event and
/// the `AbleToScale=False` condition show, `error` what the reconcile returns.
#[derive(Debug)]
pub(super) struct ScaleReadFailure {
    /// The underlying error's text.
    pub(super) message: String,
    /// The reconcile's error, wrapped as upstream wraps it.
    pub(super) error: ReconcileError,
}

impl ScaleReadFailure {
    /// `fmt.Errorf(format, args..., err)`: the reconcile's error of `kind` wraps `err`.
    fn new(kind: ErrorKind, format: &str, args: &[GoArg<'_>], err: ScaleError) -> Self {
        let mut all = args.to_vec();
        all.push(GoArg::error(err.message.as_str()));
        ScaleReadFailure {
            message: err.message.clone(),
            error: ReconcileError::wrapping(kind, sprintf(format, &all), err),
        }
    }
}

/// Reads the scale of `hpa`'s target (`reference` is its `kind/namespace/name`), with the
/// mapping it was read through (the one to write back through) and where it came from.
pub(super) async fn read_scale(
    client: &dyn ScaleClient,
    hpa: &HorizontalPodAutoscaler,
    reference: &str,
) -> Result<(Scale, ResourceMapping, ReadSource), ScaleReadFailure> {
    let target = &hpa.spec.scale_target_ref;
    let namespace = hpa.metadata.namespace.as_deref().unwrap_or_default();
    let (group, _version) = parse_group_version(target.api_version.as_deref().unwrap_or(""))
        .map_err(|e| {
            // Upstream wraps `errSpec` here: the reconciliation error label is `spec`.
            ScaleReadFailure::new(
                ErrorKind::Spec,
                "invalid API version in scale target reference: %v",
                &[],
                e,
            )
        })?;
    let mappings = client
        .rest_mappings(&group, &target.kind)
        .await
        .map_err(|e| {
            ScaleReadFailure::new(
                ErrorKind::Internal,
                "unable to determine resource for scale target reference: %v",
                &[],
                e,
            )
        })?;
    scale_for_resource_mappings(client, namespace, &target.name, &mappings)
        .await
        .map_err(|e| {
            ScaleReadFailure::new(
                ErrorKind::Internal,
                "failed to query scale subresource for %s: %v",
                &[GoArg::str(reference)],
                e,
            )
        })
}

/// How a scale write ended.
#[derive(Debug)]
pub(super) enum ScaleWrite {
    /// Written.
    Written,
    /// Refused; the last update's error.
    Failed(ScaleError),
    /// The scale the decision was made from came from the cache, the write conflicted, and
    /// the live scale differs in what the decision reads (replicas, status replicas,
    /// selector): nothing was written; decide again from this live scale.
    Stale(Box<Scale>),
}

/// What a decision reads from a scale: spec replicas, status replicas, selector.
fn decision_inputs(scale: &Scale) -> (Option<i32>, i32, Option<&str>) {
    (
        scale.spec.as_ref().and_then(|s| s.replicas),
        scale.status.as_ref().map_or(0, |s| s.replicas),
        scale.status.as_ref().and_then(|s| s.selector.as_deref()),
    )
}

/// The scale write of v1.34+ (kubernetes#132007): `retry.RetryOnConflict(retry.DefaultRetry,
/// ...)` around the update, re-reading the scale after every failed attempt so the next one
/// carries the latest resourceVersion. At most five attempts, 10ms apart; only a 409
/// Conflict is retried, and the error returned is the last update's.
///
/// Upstream's decision always rests on a GET made in the same reconcile. When `source` says
/// the scale came from the cache and the first write conflicts, the live scale is compared
/// with the one decided from: if the replicas, status replicas or selector moved, the
/// decision is not written over a count it was not made from ([`ScaleWrite::Stale`]: decide
/// again from the live scale); otherwise the retries go on as upstream's.
pub(super) async fn update_scale_on_conflict(
    client: &dyn ScaleClient,
    namespace: &str,
    mapping: &ResourceMapping,
    mut scale: Scale,
    replicas: i32,
    source: ReadSource,
) -> ScaleWrite {
    const STEPS: usize = 5;
    const BACKOFF: std::time::Duration = std::time::Duration::from_millis(10);
    let name = scale.metadata.name.clone().unwrap_or_default();
    let mut attempt = 1;
    loop {
        let decided_from = (attempt == 1 && source == ReadSource::Cache).then(|| scale.clone());
        scale.spec.get_or_insert_with(Default::default).replicas = Some(replicas);
        let err = match client.update_scale(namespace, mapping, &scale).await {
            Ok(_) => return ScaleWrite::Written,
            Err(e) => e,
        };
        // From the API, not a cache: the cache may be behind the version that conflicted.
        match client.get_scale_live(namespace, mapping, &name).await {
            Ok(latest) => {
                if err.code == Some(409)
                    && let Some(cached) = &decided_from
                    && decision_inputs(cached) != decision_inputs(&latest)
                {
                    tracing::debug!(
                        scale = %name,
                        "The cached scale was behind the live one; deciding again from the live scale"
                    );
                    return ScaleWrite::Stale(Box::new(latest));
                }
                scale = latest;
            }
            // `utilruntime.HandleError(fmt.Errorf("error getting latest scale for %s during
            // conflict retry: %w", ...))`; the reference here is the resource, not the kind.
            Err(get_err) => tracing::error!(
                logger = "UnhandledError",
                error = %format!(
                    "error getting latest scale for {}/{namespace}/{name} during conflict retry: {}",
                    mapping.group_resource(),
                    get_err.message
                ),
                "Unhandled Error"
            ),
        }
        if err.code != Some(409) || attempt >= STEPS {
            return ScaleWrite::Failed(err);
        }
        attempt += 1;
        tokio::time::sleep(BACKOFF).await;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::error::Error as _;

    use k8s_openapi::api::autoscaling::v2::CrossVersionObjectReference;
    use kube::api::ObjectMeta;

    use super::*;

    /// Discovery knows no kind; the scale subresource is never reached.
    struct NoKinds;

    #[async_trait::async_trait]
    impl ScaleClient for NoKinds {
        async fn rest_mappings(
            &self,
            group: &str,
            kind: &str,
        ) -> Result<Vec<ResourceMapping>, ScaleError> {
            Err(crate::scale_client::no_kind_match(group, kind))
        }

        async fn get_scale(
            &self,
            _namespace: &str,
            _mapping: &ResourceMapping,
            _name: &str,
        ) -> Result<Scale, ScaleError> {
            Err(ScaleError::new("get_scale is not reached"))
        }

        async fn update_scale(
            &self,
            _namespace: &str,
            _mapping: &ResourceMapping,
            _scale: &Scale,
        ) -> Result<Scale, ScaleError> {
            Err(ScaleError::new("update_scale is not reached"))
        }
    }

    fn hpa_targeting(api_version: &str) -> HorizontalPodAutoscaler {
        HorizontalPodAutoscaler {
            metadata: ObjectMeta {
                namespace: Some("ns".into()),
                name: Some("web".into()),
                ..Default::default()
            },
            spec: k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscalerSpec {
                scale_target_ref: CrossVersionObjectReference {
                    api_version: Some(api_version.into()),
                    kind: "Widget".into(),
                    name: "web".into(),
                },
                max_replicas: 3,
                ..Default::default()
            },
            status: None,
        }
    }

    /// A malformed `scaleTargetRef.apiVersion` is upstream's `errSpec` (label `spec`); the
    /// parse error is both the event's text and the reconcile error's source.
    #[tokio::test]
    async fn invalid_api_version_is_a_spec_error_wrapping_the_parse_error() {
        let f = read_scale(&NoKinds, &hpa_targeting("a/b/c"), "Widget/ns/web")
            .await
            .unwrap_err();
        assert_eq!(f.message, "unexpected GroupVersion string: a/b/c");
        assert_eq!(f.error.kind, ErrorKind::Spec);
        assert_eq!(
            f.error.to_string(),
            "invalid API version in scale target reference: unexpected GroupVersion string: a/b/c"
        );
        assert_eq!(
            f.error.source().map(ToString::to_string).as_deref(),
            Some("unexpected GroupVersion string: a/b/c")
        );
    }

    /// A kind discovery does not know is an `internal` error wrapping the RESTMapper's.
    #[tokio::test]
    async fn unknown_kind_is_an_internal_error_wrapping_the_mapper_error() {
        let f = read_scale(&NoKinds, &hpa_targeting("example.com/v1"), "Widget/ns/web")
            .await
            .unwrap_err();
        assert_eq!(f.error.kind, ErrorKind::Internal);
        assert_eq!(
            f.error.to_string(),
            "unable to determine resource for scale target reference: no matches for kind \"Widget\" in group \"example.com\""
        );
        assert_eq!(
            f.error.source().map(ToString::to_string).as_deref(),
            Some("no matches for kind \"Widget\" in group \"example.com\"")
        );
    }
}
