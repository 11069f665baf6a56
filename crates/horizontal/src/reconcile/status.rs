//! The HPA status write of one reconcile: upstream `updateStatus` in
//! `pkg/controller/podautoscaler/horizontal.go` (PUT the whole object on `/status`; on error
//! the Warning `FailedUpdateStatus` event and `failed to update status for %s: %v`), and the
//! `StaleControllerConsistencyHPA` check (1.37, kubernetes#139025) that the informer has seen
//! this controller's last write before the HPA is reconciled again.

use dashmap::DashMap;
use hpa_decision::decision::status_update_failure;
use hpa_decision::labels::ErrorKind;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::Api;
use kube::api::PostParams;

use super::ReconcileError;
use crate::recorder::Recorder;

/// Writes HPA statuses and, with `StaleControllerConsistencyHPA`, remembers each HPA's last
/// write: per HPA key, the uid and resourceVersion the write came back with.
pub(crate) struct StatusWriter {
    client: kube::Client,
    /// `StaleControllerConsistencyHPA` is enabled: writes are remembered and checked.
    consistency: bool,
    written: DashMap<String, (String, u64)>,
}

impl StatusWriter {
    /// A writer through `client`; `consistency` is the `StaleControllerConsistencyHPA` gate.
    pub(crate) fn new(client: kube::Client, consistency: bool) -> Self {
        StatusWriter {
            client,
            consistency,
            written: DashMap::new(),
        }
    }

    /// Remembers that this controller's write to `key` (object `uid`) came back as
    /// `resource_version`.
    pub(crate) fn remember_write(&self, key: &str, uid: String, resource_version: u64) {
        self.written.insert(key.to_owned(), (uid, resource_version));
    }

    /// Forgets `key`'s last write (the HPA is gone).
    pub(crate) fn forget(&self, key: &str) {
        self.written.remove(key);
    }

    /// `StaleControllerConsistencyHPA` (1.37, kubernetes#139025): the reconcile is deferred
    /// (an error, so the key keeps its rate-limited re-add) while the cached HPA is older than
    /// this controller's last status write to it. A resourceVersion that is not a number
    /// never defers (the comparison is not possible).
    pub(crate) fn ensure_observed_own_write(
        &self,
        key: &str,
        hpa: &HorizontalPodAutoscaler,
    ) -> Result<(), ReconcileError> {
        if !self.consistency {
            return Ok(());
        }
        let uid = hpa.metadata.uid.as_deref().unwrap_or_default();
        // Read under the map's guard, which must be dropped before a removal.
        let Some((same_object, written)) = self.written.get(key).map(|w| (w.0 == uid, w.1)) else {
            return Ok(());
        };
        if !same_object {
            // Another object of the same name: our write was to its predecessor.
            self.written.remove(key);
            return Ok(());
        }
        let seen = hpa
            .metadata
            .resource_version
            .as_deref()
            .and_then(|rv| rv.parse::<u64>().ok());
        match seen {
            Some(seen) if seen < written => Err(ReconcileError::internal(format!(
                "HPA {key} is not ready for reconciliation: the informer has not yet observed this controller's status write (resourceVersion {written}, cached {seen})"
            ))),
            _ => Ok(()),
        }
    }

    /// `updateStatus`: PUT the whole object on `/status`; on error Warning
    /// `FailedUpdateStatus` (through `recorder`) and `failed to update status for %s: %v`.
    pub(crate) async fn update_status(
        &self,
        recorder: &Recorder,
        hpa: &HorizontalPodAutoscaler,
    ) -> Result<(), ReconcileError> {
        let namespace = hpa.metadata.namespace.clone().unwrap_or_default();
        let name = hpa.metadata.name.clone().unwrap_or_default();
        let api: Api<HorizontalPodAutoscaler> = Api::namespaced(self.client.clone(), &namespace);
        match api.replace_status(&name, &PostParams::default(), hpa).await {
            Ok(updated) => {
                if self.consistency
                    && let Some(rv) = updated
                        .metadata
                        .resource_version
                        .as_deref()
                        .and_then(|rv| rv.parse::<u64>().ok())
                {
                    self.remember_write(
                        &format!("{namespace}/{name}"),
                        updated.metadata.uid.clone().unwrap_or_default(),
                        rv,
                    );
                }
                tracing::debug!(HPA = %format!("{namespace}/{name}"), "Successfully updated status");
                Ok(())
            }
            Err(e) => {
                let text = hpa_metrics::kube_error_message(&e);
                let (event, error) = status_update_failure(&name, &text);
                // A write the fence refused was never sent: no event (the reconcile is
                // requeued), as upstream, which has no fence, would have made none.
                if !crate::fence::refused_by_fence(&e) {
                    recorder.record(hpa, &event);
                }
                Err(ReconcileError::wrapping(ErrorKind::Internal, error, e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use kube::api::ObjectMeta;

    use super::*;

    /// A writer that remembers writes; its client is never called.
    fn writer() -> StatusWriter {
        let service = tower::service_fn(|_req: http::Request<kube::client::Body>| async {
            Err::<http::Response<kube::client::Body>, _>(std::io::Error::other("not called"))
        });
        StatusWriter::new(kube::Client::new(service, "default"), true)
    }

    fn cached(uid: &str, resource_version: &str) -> HorizontalPodAutoscaler {
        HorizontalPodAutoscaler {
            metadata: ObjectMeta {
                uid: Some(uid.into()),
                resource_version: Some(resource_version.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// The check defers while the cache is older than the write, and forgets a write made to
    /// a predecessor of the same name (another uid) instead of deferring.
    #[tokio::test]
    async fn a_write_is_awaited_only_for_the_object_it_went_to() {
        let w = writer();
        w.remember_write("ns/web", "uid-1".into(), 7);
        assert!(
            w.ensure_observed_own_write("ns/web", &cached("uid-1", "6"))
                .is_err()
        );
        assert!(
            w.ensure_observed_own_write("ns/web", &cached("uid-1", "7"))
                .is_ok()
        );
        // A resourceVersion that is not a number never defers.
        assert!(
            w.ensure_observed_own_write("ns/web", &cached("uid-1", "x"))
                .is_ok()
        );
        // A new object of the same name: the old write is forgotten, even once the old uid is
        // seen again.
        assert!(
            w.ensure_observed_own_write("ns/web", &cached("uid-2", "3"))
                .is_ok()
        );
        assert!(
            w.ensure_observed_own_write("ns/web", &cached("uid-1", "6"))
                .is_ok()
        );
        // Without the gate nothing is checked.
        let off = StatusWriter {
            consistency: false,
            ..writer()
        };
        off.remember_write("ns/web", "uid-1".into(), 7);
        assert!(
            off.ensure_observed_own_write("ns/web", &cached("uid-1", "6"))
                .is_ok()
        );
    }
}
