//! The scale target of one reconcile: reading its scale (`reconcileAutoscaler`'s steps 3-5:
//! the group version of `scaleTargetRef`, the RESTMapper's mappings, `scaleForResourceMappings`)
//! and writing the new replica count (`updateScale` inside `retry.RetryOnConflict`), as
//! upstream `pkg/controller/podautoscaler/horizontal.go` does.

use hpa_decision::gofmt::{GoArg, sprintf};
use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;

use crate::controller::ReconcileError;
use crate::scale_client::{
    ResourceMapping, ScaleClient, ScaleError, parse_group_version, scale_for_resource_mappings,
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

/// Reads the scale of `hpa`'s target (`reference` is its `kind/namespace/name`), with the
/// mapping it was read through (the one to write back through).
pub(super) async fn read_scale(
    client: &dyn ScaleClient,
    hpa: &HorizontalPodAutoscaler,
    reference: &str,
) -> Result<(Scale, ResourceMapping), ScaleReadFailure> {
    let target = &hpa.spec.scale_target_ref;
    let namespace = hpa.metadata.namespace.as_deref().unwrap_or_default();
    let (group, _version) = parse_group_version(target.api_version.as_deref().unwrap_or(""))
        .map_err(|e| ScaleReadFailure {
            error: ReconcileError {
                message: sprintf(
                    "invalid API version in scale target reference: %v",
                    &[GoArg::error(e.message.as_str())],
                ),
                spec: true,
            },
            message: e.message,
        })?;
    let mappings = client
        .rest_mappings(&group, &target.kind)
        .await
        .map_err(|e| ScaleReadFailure {
            error: ReconcileError::internal(sprintf(
                "unable to determine resource for scale target reference: %v",
                &[GoArg::error(e.message.as_str())],
            )),
            message: e.message,
        })?;
    scale_for_resource_mappings(client, namespace, &target.name, &mappings)
        .await
        .map_err(|e| ScaleReadFailure {
            error: ReconcileError::internal(sprintf(
                "failed to query scale subresource for %s: %v",
                &[GoArg::str(reference), GoArg::error(e.message.as_str())],
            )),
            message: e.message,
        })
}

/// The scale write of v1.34+ (kubernetes#132007): `retry.RetryOnConflict(retry.DefaultRetry,
/// ...)` around the update, re-reading the scale after every failed attempt so the next one
/// carries the latest resourceVersion. At most five attempts, 10ms apart; only a 409
/// Conflict is retried, and the error returned is the last update's.
pub(super) async fn update_scale_on_conflict(
    client: &dyn ScaleClient,
    namespace: &str,
    mapping: &ResourceMapping,
    mut scale: Scale,
    replicas: i32,
) -> Result<(), ScaleError> {
    const STEPS: usize = 5;
    const BACKOFF: std::time::Duration = std::time::Duration::from_millis(10);
    let name = scale.metadata.name.clone().unwrap_or_default();
    let mut attempt = 1;
    loop {
        scale.spec.get_or_insert_with(Default::default).replicas = Some(replicas);
        let err = match client.update_scale(namespace, mapping, &scale).await {
            Ok(_) => return Ok(()),
            Err(e) => e,
        };
        // From the API, not a cache: the cache may be behind the version that conflicted.
        match client.get_scale_live(namespace, mapping, &name).await {
            Ok(latest) => scale = latest,
            Err(get_err) => tracing::error!(
                error = %get_err.message,
                "failed to get the latest scale after a failed update"
            ),
        }
        if err.code != Some(409) || attempt >= STEPS {
            return Err(err);
        }
        attempt += 1;
        tokio::time::sleep(BACKOFF).await;
    }
}
