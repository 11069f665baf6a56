//! One reconcile: the I/O around the pure decision core (`reconcileKey`, `reconcileAutoscaler`, `computeReplicasForMetrics`, `updateStatusIfNeeded`).
//!
//! Mirrors upstream `pkg/controller/podautoscaler/horizontal.go`: `reconcileKey`,
//! `reconcileAutoscaler` (scale target through the RESTMapper and the scale subresource, the
//! rescale, `updateStatusIfNeeded` / `updateStatus`), `computeReplicasForMetrics`'s
//! per-metric loop, `computeReplicasForMetric` and `computeStatusFor{Object,Pods,Resource,
//! ContainerResource,External}Metric`, `validateAndParseSelector` and
//! `getUnableComputeReplicaCountCondition`. The branch choice, aggregation, normalization and
//! rendering are the pure [`hpa_decision::decision`] functions; this module fetches and writes.

use std::sync::Arc;
use std::time::Instant;

use hpa_metrics::{Quantity, Selector};
use hpa_replica_calculator::{
    CalculatorError, ExternalMetric, ObjectMetric, PodsMetric, ReplicaCalculator, ReplicaQuery,
    ResourceMetric, Tolerances,
};
use jiff::Timestamp;
use k8s_openapi::api::autoscaling::v2::{
    ContainerResourceMetricStatus, ExternalMetricStatus, HorizontalPodAutoscaler,
    HorizontalPodAutoscalerStatus, MetricIdentifier, MetricSpec, MetricStatus, MetricTarget,
    MetricValueStatus, ObjectMetricStatus, PodsMetricStatus, ResourceMetricStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::Api;
use kube::api::PostParams;

use crate::caches::split_key;
use crate::controller::{Inner, ReconcileError};
use crate::scale_client::{
    ResourceMapping, ScaleError, parse_group_version, scale_for_resource_mappings,
};
use crate::selectors::HpaKey;
use hpa_decision::conditions::{HpaCondition, MetricFailureReason, set_condition_observed};
use hpa_decision::decision::{
    Branch, DecisionInput, MetricFailure, MetricProposal, MetricResult, MetricsOutcome,
    RescaleResult, SelectorFailure, decide, metric_names, scale_target_reference,
    status_update_failure,
};
use hpa_decision::events::HpaEvent;
use hpa_decision::gofmt::{GoArg, sprintf};
use hpa_decision::labels::{ActionLabel, ErrorLabel};
use hpa_decision::status::status_semantically_equal;
use hpa_decision::tolerance::tolerances_for_hpa;
use k8s_openapi::api::autoscaling::v1::Scale;

/// What one metric computation needs from the reconcile: the calculator's shared query
/// (namespace, `scale.spec.replicas`, `scale.status.replicas`, pod selector, tolerances, time).
pub type MetricContext<'a> = ReplicaQuery<'a>;

/// The per-metric half of a reconcile (`computeReplicasForMetric` and the
/// `computeStatusFor*Metric` functions) over a replica calculator: shared by the controller
/// and by `hpactl simulate`, which feeds the calculator simulated pods and metrics.
#[derive(Debug, Clone, Copy)]
pub struct MetricComputer<'a> {
    /// The calculator the proposals come from.
    pub calculator: &'a ReplicaCalculator,
    /// How `%+v` of a `*LabelSelector` prints in External metric names.
    pub selector_style: hpa_decision::gofmt::SelectorStyle,
}

fn milli(q: &Quantity) -> i64 {
    q.milli_value()
}

fn quantity(q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity) -> Result<i64, String> {
    Quantity::from_k8s(q)
        .map(|q| milli(&q))
        .map_err(|e| e.to_string())
}

fn milli_quantity(v: i64) -> k8s_openapi::apimachinery::pkg::api::resource::Quantity {
    Quantity::from_milli(v).to_k8s()
}

/// `buildQuantity` (v1.34+, kubernetes#132351): resource metric values print in BinarySI for
/// memory (`156250Ki`) and DecimalSI otherwise.
fn resource_quantity(
    resource: &str,
    v: i64,
) -> k8s_openapi::apimachinery::pkg::api::resource::Quantity {
    let format = if resource == "memory" {
        hpa_metrics::Format::BinarySI
    } else {
        hpa_metrics::Format::DecimalSI
    };
    Quantity::from_milli_with_format(v, format).to_k8s()
}

fn failure(reason: MetricFailureReason, condition_error: String, error: String) -> MetricFailure {
    MetricFailure {
        reason,
        condition_error,
        error,
        spec_error: false,
    }
}

fn wrap(format: &str, args: &[GoArg<'_>]) -> String {
    sprintf(format, args)
}

/// A failed fetch of a named metric: the event and condition carry the calculator's error as
/// is, the returned error wraps it as `format` (e.g. `failed to get %s external metric: %v`)
/// and then in `outer`, as upstream's two `fmt.Errorf` layers do.
fn named_fetch_failure(
    reason: MetricFailureReason,
    format: &str,
    name: &str,
    err: impl ToString,
    outer: impl Fn(&str) -> String,
) -> MetricFailure {
    let e = err.to_string();
    let inner = wrap(format, &[GoArg::str(name), GoArg::error(e.as_str())]);
    failure(reason, e, outer(&inner))
}

fn identifier(name: &str, selector: Option<&LabelSelector>) -> MetricIdentifier {
    MetricIdentifier {
        name: name.to_owned(),
        selector: selector.cloned(),
    }
}

impl Inner {
    /// `reconcileKey`: `(deleted, result)`. A key whose HPA is gone from the cache drops its
    /// state and is not re-queued.
    pub(crate) async fn reconcile_key(&self, key: &str) -> (bool, Result<(), ReconcileError>) {
        let (namespace, name) = match split_key(key) {
            Ok(p) => p,
            Err(e) => return (true, Err(ReconcileError::internal(e))),
        };
        let Some(hpa) = self.caches.hpa(namespace, name) else {
            tracing::info!(HPA = key, "Horizontal Pod Autoscaler has been deleted");
            self.state.forget(key);
            self.last_decisions.remove(key);
            self.traces.forget(key);
            self.shadow.forget(key);
            self.explain_metrics.forget_hpa(key);
            self.monitor.forget_hpa(namespace, name);
            self.written.remove(key);
            return (true, Ok(()));
        };
        if let Err(e) = self.ensure_observed_own_write(key, &hpa) {
            return (false, Err(e));
        }
        (false, self.reconcile_autoscaler(&hpa, key).await)
    }

    /// `StaleControllerConsistencyHPA` (1.37, kubernetes#139025): the reconcile is deferred
    /// (an error, so the key keeps its rate-limited re-add) while the cached HPA is older than
    /// this controller's last status write to it. A resourceVersion that is not a number
    /// never defers (the comparison is not possible).
    fn ensure_observed_own_write(
        &self,
        key: &str,
        hpa: &HorizontalPodAutoscaler,
    ) -> Result<(), ReconcileError> {
        if !self
            .config
            .gates
            .enabled(hpa_config::Feature::StaleControllerConsistencyHpa)
        {
            return Ok(());
        }
        let Some(written) = self.written.get(key).map(|w| w.value().clone()) else {
            return Ok(());
        };
        let uid = hpa.metadata.uid.clone().unwrap_or_default();
        if uid != written.0 {
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
            Some(seen) if seen < written.1 => Err(ReconcileError::internal(format!(
                "HPA {key} is not ready for reconciliation: the informer has not yet observed this controller's status write (resourceVersion {}, cached {seen})",
                written.1
            ))),
            _ => Ok(()),
        }
    }

    /// `reconcileAutoscaler` with its monitor wrapper.
    async fn reconcile_autoscaler(
        &self,
        shared: &Arc<HorizontalPodAutoscaler>,
        key: &str,
    ) -> Result<(), ReconcileError> {
        let start = Instant::now();
        let (action, result) = self.reconcile_inner(shared, key).await;
        let error = match &result {
            Ok(()) => ErrorLabel::None,
            Err(e) if e.spec => ErrorLabel::Spec,
            Err(_) => ErrorLabel::Internal,
        };
        self.monitor
            .observe_reconciliation_result(action, error, start.elapsed());
        result
    }

    async fn reconcile_inner(
        &self,
        shared: &Arc<HorizontalPodAutoscaler>,
        key: &str,
    ) -> (ActionLabel, Result<(), ReconcileError>) {
        let now = self.clock.now();
        let mut hpa = HorizontalPodAutoscaler::clone(shared);
        if !self.decision_config.observed_generation
            && let Some(conditions) = hpa.status.as_mut().and_then(|s| s.conditions.as_mut())
        {
            // Before 1.37 (HPAGeneration) a condition has no observedGeneration in KCM's
            // types: one written by a newer controller is not seen, and not written back.
            for c in conditions {
                c.observed_generation = None;
            }
        }
        let original = hpa.status.clone().unwrap_or_default();
        let reference = scale_target_reference(&hpa);
        let namespace = hpa.metadata.namespace.clone().unwrap_or_default();
        let name = hpa.metadata.name.clone().unwrap_or_default();
        let target = hpa.spec.scale_target_ref.clone();

        // Steps 3-5: the target's scale.
        let (group, _version) =
            match parse_group_version(target.api_version.as_deref().unwrap_or("")) {
                Ok(gv) => gv,
                Err(e) => {
                    self.fail_get_scale(&mut hpa, &original, &e.message, now)
                        .await;
                    return (
                        ActionLabel::None,
                        Err(ReconcileError {
                            message: sprintf(
                                "invalid API version in scale target reference: %v",
                                &[GoArg::error(e.message.as_str())],
                            ),
                            spec: true,
                        }),
                    );
                }
            };
        let mappings = match self.scale_client.rest_mappings(&group, &target.kind).await {
            Ok(m) => m,
            Err(e) => {
                self.fail_get_scale(&mut hpa, &original, &e.message, now)
                    .await;
                return (
                    ActionLabel::None,
                    Err(ReconcileError::internal(sprintf(
                        "unable to determine resource for scale target reference: %v",
                        &[GoArg::error(e.message.as_str())],
                    ))),
                );
            }
        };
        let (scale, mapping) = match scale_for_resource_mappings(
            self.scale_client.as_ref(),
            &namespace,
            &target.name,
            &mappings,
        )
        .await
        {
            Ok(s) => s,
            Err(e) => {
                self.fail_get_scale(&mut hpa, &original, &e.message, now)
                    .await;
                return (
                    ActionLabel::None,
                    Err(ReconcileError::internal(sprintf(
                        "failed to query scale subresource for %s: %v",
                        &[
                            GoArg::str(reference.as_str()),
                            GoArg::error(e.message.as_str()),
                        ],
                    ))),
                );
            }
        };

        let current = scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
        let status_replicas = scale.status.as_ref().map_or(0, |s| s.replicas);
        let selector_str = scale
            .status
            .as_ref()
            .and_then(|s| s.selector.clone())
            .unwrap_or_default();
        let tolerances = tolerances_for_hpa(
            &hpa,
            self.config.hpa.tolerance,
            self.config
                .gates
                .enabled(hpa_config::Feature::HpaConfigurableTolerance),
        )
        .unwrap_or(hpa_decision::tolerance::HpaTolerances {
            scale_down: self.config.hpa.tolerance,
            scale_up: self.config.hpa.tolerance,
        });
        let calc_tolerances = Tolerances::new(tolerances.scale_down, tolerances.scale_up);

        if self.config.shadow {
            self.observe_target_change(key, &hpa, current, now);
        }
        let branch = Branch::for_hpa(&hpa, current, &self.decision_config);
        let metrics = if branch.needs_metrics() {
            Some(
                self.compute_replicas_for_metrics(
                    &hpa,
                    &namespace,
                    &name,
                    current,
                    status_replicas,
                    &selector_str,
                    calc_tolerances,
                    now,
                )
                .await,
            )
        } else {
            None
        };
        let decision = decide(
            &self.state,
            &self.decision_config,
            DecisionInput {
                key,
                hpa: &hpa,
                current_replicas: current,
                now,
                tolerances: Some(tolerances),
            },
            metrics,
        );
        if self.config.keep_last_decisions {
            self.last_decisions.insert(key.to_owned(), decision.clone());
        }
        // Events emitted while computing (selector, per-metric failures).
        for e in &decision.events {
            self.record_event(&hpa, e);
        }

        let shadow = self.config.shadow;
        let rescale = if decision.rescale && shadow {
            // Shadow mode writes nothing; the decision is rendered as the active controller
            // renders it after a successful write, so that the two can be compared.
            RescaleResult::Shadowed
        } else if decision.rescale {
            match self
                .update_scale_on_conflict(&namespace, &mapping, scale, decision.desired_replicas)
                .await
            {
                Ok(()) => RescaleResult::Succeeded,
                Err(e) => RescaleResult::Failed(e.message),
            }
        } else {
            RescaleResult::NotAttempted
        };
        let rescale_failed = matches!(rescale, RescaleResult::Failed(_));
        let outcome = decision.complete(&self.state, &original, rescale.clone());
        for e in outcome.events.iter().skip(decision.events.len()) {
            self.record_event(&hpa, e);
        }
        let trace = crate::trace::DecisionTrace::new(
            &decision,
            &outcome,
            crate::trace::TraceContext {
                hpa: &hpa,
                status_replicas,
                rescale: &rescale,
                shadow,
            },
        );
        self.explain_metrics.observe_trace(&trace);
        self.traces.record(trace);
        if shadow {
            self.compare_with_active(key, now, &original, current);
        }
        if rescale == RescaleResult::Succeeded && !shadow {
            tracing::info!(
                HPA = key,
                currentReplicas = current,
                desiredReplicas = decision.desired_replicas,
                reason = %decision.rescale_reason,
                "Successfully rescaled"
            );
        }
        for line in decision.log_lines() {
            tracing::debug!("{line}");
        }
        self.monitor
            .observe_desired_replicas(&namespace, &name, outcome.desired_replicas);

        hpa.status = Some(outcome.status.clone());
        let status_result = if outcome.status_changed && !shadow {
            self.update_status(&hpa).await
        } else {
            Ok(())
        };
        for e in &outcome.events_after_status {
            self.record_event(&hpa, e);
        }
        let replaces = decision.failure.is_none() && !rescale_failed;
        let result = match status_result {
            Err(err) if replaces => Err(err),
            Err(err) => {
                tracing::error!(HPA = key, error = %err, "updating status");
                outcome
                    .error
                    .map_or(Ok(()), |e| Err(ReconcileError::internal(e)))
            }
            Ok(()) => outcome
                .error
                .map_or(Ok(()), |e| Err(ReconcileError::internal(e))),
        };
        (outcome.action, result)
    }

    /// Steps 3-5 failure: Warning `FailedGetScale`, `AbleToScale=False`, status if changed.
    async fn fail_get_scale(
        &self,
        hpa: &mut HorizontalPodAutoscaler,
        original: &HorizontalPodAutoscalerStatus,
        err: &str,
        now: Timestamp,
    ) {
        let event = HpaEvent::FailedGetScale {
            err: err.to_owned(),
        };
        self.record_event(hpa, &event);
        let mut status = original.clone();
        set_condition_observed(
            status.conditions.get_or_insert_with(Vec::new),
            &HpaCondition::FailedGetScale {
                err: err.to_owned(),
            },
            now,
            self.decision_config
                .observed_generation
                .then(|| hpa.metadata.generation.unwrap_or(0)),
        );
        let changed = !status_semantically_equal(original, &status);
        self.traces
            .record(crate::trace::DecisionTrace::failed_get_scale(
                &crate::caches::object_key(hpa),
                hpa,
                now,
                err,
                &status,
                changed,
                &event,
                self.config.shadow,
            ));
        hpa.status = Some(status);
        if changed
            && !self.config.shadow
            && let Err(e) = self.update_status(hpa).await
        {
            tracing::error!(error = %e, "updating status");
        }
    }

    /// Shadow mode: the scale events the behavior policies count are the target's changes as
    /// this controller observes them between its decisions (the active controller's
    /// rescales, in effect), stored before deciding as upstream stores its own before its
    /// next decision. (This controller's own rescales are never written.)
    fn observe_target_change(
        &self,
        key: &str,
        hpa: &HorizontalPodAutoscaler,
        current: i32,
        now: Timestamp,
    ) {
        let Some(previous) = self.traces.latest_of(key).filter(|t| t.target.read) else {
            return;
        };
        if previous.target.spec_replicas == current {
            return;
        }
        let behavior = hpa.spec.behavior.as_ref().map(|b| {
            hpa_decision::behavior::EffectiveBehavior::new(
                b,
                self.decision_config.downscale_stabilization_window,
            )
        });
        self.state.store_scale_event(
            key,
            behavior.as_ref(),
            previous.target.spec_replicas,
            current,
            now,
        );
    }

    /// Shadow mode: compare the decisions kept for `key` with the status the active
    /// controller last wrote (`theirs`, as read before this reconcile), count and keep the
    /// result, and log a difference with both sides and the trace.
    fn compare_with_active(
        &self,
        key: &str,
        now: Timestamp,
        theirs: &HorizontalPodAutoscalerStatus,
        target_now: i32,
    ) {
        use crate::shadow::ShadowResult;
        let ours = self.traces.get(key);
        let comparison = crate::shadow::compare(key, now, theirs, target_now, &ours);
        self.explain_metrics.observe_shadow(&comparison);
        match comparison.result {
            ShadowResult::Differ => {
                let trace = comparison
                    .trace
                    .as_ref()
                    .and_then(|t| serde_json::to_string(t).ok())
                    .unwrap_or_default();
                tracing::warn!(
                    HPA = key,
                    ours = ?comparison.ours,
                    theirs = ?comparison.theirs,
                    trace = %trace,
                    "shadow: decision differs from the active controller's: {}",
                    comparison.summary
                );
            }
            ShadowResult::Agree | ShadowResult::Pending => {
                tracing::debug!(HPA = key, "shadow: {}", comparison.summary);
            }
        }
        self.shadow.record(comparison);
    }

    /// Emit an event, unless in shadow mode (which writes nothing).
    fn record_event(&self, hpa: &HorizontalPodAutoscaler, event: &HpaEvent) {
        if !self.config.shadow {
            self.recorder.record(hpa, event);
        }
    }

    /// `updateStatus`: PUT the whole object on `/status`; on error Warning
    /// `FailedUpdateStatus` and `failed to update status for %s: %v`.
    /// The scale write of v1.34+ (kubernetes#132007): `retry.RetryOnConflict(retry.DefaultRetry,
    /// ...)` around the update, re-reading the scale after every failed attempt so the next one
    /// carries the latest resourceVersion. At most five attempts, 10ms apart; only a 409
    /// Conflict is retried, and the error returned is the last update's.
    async fn update_scale_on_conflict(
        &self,
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
            let err = match self
                .scale_client
                .update_scale(namespace, mapping, &scale)
                .await
            {
                Ok(_) => return Ok(()),
                Err(e) => e,
            };
            // From the API, not a cache: the cache may be behind the version that conflicted.
            match self
                .scale_client
                .get_scale_live(namespace, mapping, &name)
                .await
            {
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

    async fn update_status(&self, hpa: &HorizontalPodAutoscaler) -> Result<(), ReconcileError> {
        let namespace = hpa.metadata.namespace.clone().unwrap_or_default();
        let name = hpa.metadata.name.clone().unwrap_or_default();
        let api: Api<HorizontalPodAutoscaler> = Api::namespaced(self.client.clone(), &namespace);
        match api.replace_status(&name, &PostParams::default(), hpa).await {
            Ok(updated) => {
                if self
                    .config
                    .gates
                    .enabled(hpa_config::Feature::StaleControllerConsistencyHpa)
                    && let Some(rv) = updated
                        .metadata
                        .resource_version
                        .as_deref()
                        .and_then(|rv| rv.parse::<u64>().ok())
                {
                    self.written.insert(
                        format!("{namespace}/{name}"),
                        (updated.metadata.uid.clone().unwrap_or_default(), rv),
                    );
                }
                tracing::debug!(HPA = %format!("{namespace}/{name}"), "Successfully updated status");
                Ok(())
            }
            Err(e) => {
                let text = crate::scale_client::kube_error_text(&e).message;
                let (event, error) = status_update_failure(&name, &text);
                self.recorder.record(hpa, &event);
                Err(ReconcileError::internal(error))
            }
        }
    }

    /// `computeReplicasForMetrics`: the selector checks, then every metric in order.
    #[allow(clippy::too_many_arguments)]
    async fn compute_replicas_for_metrics(
        &self,
        hpa: &HorizontalPodAutoscaler,
        namespace: &str,
        name: &str,
        spec_replicas: i32,
        status_replicas: i32,
        selector_str: &str,
        tolerances: Tolerances,
        now: Timestamp,
    ) -> MetricsOutcome {
        let selector = match self.validate_and_parse_selector(namespace, name, selector_str) {
            Ok(s) => s,
            Err(f) => return MetricsOutcome::selector_failure(f),
        };
        let ctx = MetricContext {
            namespace,
            spec_replicas,
            status_replicas,
            selector: &selector,
            tolerances,
            now,
        };
        let previous_current = hpa
            .status
            .as_ref()
            .and_then(|s| s.current_replicas)
            .unwrap_or(0);
        let specs: Vec<MetricSpec> = hpa.spec.metrics.clone().unwrap_or_default();
        let mut results = Vec::with_capacity(specs.len());
        for spec in &specs {
            let start = Instant::now();
            let computer = MetricComputer {
                calculator: &self.calculator,
                selector_style: self.config.selector_style,
            };
            let r = computer.compute_replicas_for_metric(spec, &ctx).await;
            self.monitor.observe_metric_computation_result(
                r.action_label(previous_current),
                r.error_label(),
                start.elapsed(),
                &spec.type_,
            );
            results.push(r);
        }
        MetricsOutcome::from_results(spec_replicas, results)
    }

    /// `validateAndParseSelector`.
    fn validate_and_parse_selector(
        &self,
        namespace: &str,
        name: &str,
        selector_str: &str,
    ) -> Result<Selector, SelectorFailure> {
        if selector_str.is_empty() {
            return Err(SelectorFailure::Missing);
        }
        let parsed: Selector = selector_str
            .parse()
            .map_err(|e: hpa_metrics::SelectorError| SelectorFailure::Invalid(e.to_string()))?;
        let key = HpaKey::new(namespace, name);
        self.selectors.update_if_present(&key, parsed.clone());
        let pods = self
            .caches
            .pod_lister()
            .list_pods(namespace, &parsed)
            .map_err(SelectorFailure::PodList)?;
        let empty = std::collections::BTreeMap::new();
        let labels = pods
            .iter()
            .map(|p| p.metadata.labels.as_ref().unwrap_or(&empty));
        if let Some(hpas) = self.selectors.ambiguous_owners(namespace, labels) {
            return Err(SelectorFailure::Ambiguous {
                selector: selector_str.to_owned(),
                hpas,
            });
        }
        Ok(parsed)
    }
}

impl MetricComputer<'_> {
    /// `computeReplicasForMetric`: one metric, with upstream's per-type error wrapping.
    pub async fn compute_replicas_for_metric(
        &self,
        spec: &MetricSpec,
        ctx: &MetricContext<'_>,
    ) -> MetricResult {
        let mut status = MetricStatus::default();
        let outcome = match spec.type_.as_str() {
            "Object" => self.object_metric(spec, ctx, &mut status).await,
            "Pods" => self.pods_metric(spec, ctx, &mut status).await,
            "Resource" => self.resource_metric(spec, ctx, &mut status, false).await,
            "ContainerResource" => self.resource_metric(spec, ctx, &mut status, true).await,
            "External" => self.external_metric(spec, ctx, &mut status).await,
            other => Err(MetricFailure::unknown_metric_source_type(other)),
        };
        if outcome.is_err() {
            status = MetricStatus::default();
        }
        MetricResult {
            metric_type: spec.type_.clone(),
            status,
            outcome,
        }
    }

    async fn object_metric(
        &self,
        spec: &MetricSpec,
        ctx: &MetricContext<'_>,
        status: &mut MetricStatus,
    ) -> Result<MetricProposal, MetricFailure> {
        const REASON: MetricFailureReason = MetricFailureReason::FailedGetObjectMetric;
        let outer = |e: &str| wrap("failed to get object metric value: %v", &[GoArg::error(e)]);
        let Some(src) = spec.object.as_ref() else {
            return Err(missing_source(REASON, outer));
        };
        let metric_selector = Selector::from_optional_label_selector(src.metric.selector.as_ref())
            .map_err(|e| {
                let e = e.to_string();
                failure(REASON, e.clone(), outer(&e))
            })?;
        let target = &src.target;
        if target.type_ == "Value"
            && let Some(v) = &target.value
        {
            let target_usage = quantity(v).map_err(|e| failure(REASON, e.clone(), outer(&e)))?;
            let r = self
                .calculator
                .get_object_metric_replicas(
                    ctx,
                    &ObjectMetric {
                        metric_name: &src.metric.name,
                        object_ref: &src.described_object,
                        metric_selector: &metric_selector,
                    },
                    target_usage,
                )
                .await
                .map_err(|e| {
                    let e = e.to_string();
                    failure(REASON, e.clone(), outer(&e))
                })?;
            *status = MetricStatus {
                type_: "Object".to_owned(),
                object: Some(ObjectMetricStatus {
                    described_object: src.described_object.clone(),
                    metric: identifier(&src.metric.name, src.metric.selector.as_ref()),
                    current: MetricValueStatus {
                        value: Some(milli_quantity(r.usage)),
                        ..Default::default()
                    },
                }),
                ..Default::default()
            };
            return Ok(MetricProposal {
                replicas: r.replica_count,
                metric_name: metric_names::object(&src.described_object.kind, &src.metric.name),
                timestamp: r.timestamp,
                detail: Some(r.detail),
            });
        }
        if target.type_ == "AverageValue"
            && let Some(v) = &target.average_value
        {
            let target_usage = quantity(v).map_err(|e| failure(REASON, e.clone(), outer(&e)))?;
            let r = self
                .calculator
                .get_object_per_pod_metric_replicas(
                    ctx,
                    &ObjectMetric {
                        metric_name: &src.metric.name,
                        object_ref: &src.described_object,
                        metric_selector: &metric_selector,
                    },
                    target_usage,
                )
                .await
                .map_err(|e| {
                    named_fetch_failure(
                        REASON,
                        "failed to get %s object metric: %v",
                        &src.metric.name,
                        e,
                        outer,
                    )
                })?;
            *status = MetricStatus {
                type_: "Object".to_owned(),
                object: Some(ObjectMetricStatus {
                    described_object: src.described_object.clone(),
                    metric: identifier(&src.metric.name, src.metric.selector.as_ref()),
                    current: MetricValueStatus {
                        average_value: Some(milli_quantity(r.usage)),
                        ..Default::default()
                    },
                }),
                ..Default::default()
            };
            return Ok(MetricProposal {
                replicas: r.replica_count,
                metric_name: metric_names::external(
                    &src.metric.name,
                    src.metric.selector.as_ref(),
                    self.selector_style,
                ),
                timestamp: r.timestamp,
                detail: Some(r.detail),
            });
        }
        let e = "invalid object metric source: neither a value target nor an average value target was set";
        Err(failure(REASON, e.to_owned(), outer(e)))
    }

    async fn pods_metric(
        &self,
        spec: &MetricSpec,
        ctx: &MetricContext<'_>,
        status: &mut MetricStatus,
    ) -> Result<MetricProposal, MetricFailure> {
        const REASON: MetricFailureReason = MetricFailureReason::FailedGetPodsMetric;
        let outer = |e: &str| wrap("failed to get pods metric value: %v", &[GoArg::error(e)]);
        let Some(src) = spec.pods.as_ref() else {
            return Err(missing_source(REASON, outer));
        };
        let metric_selector = Selector::from_optional_label_selector(src.metric.selector.as_ref())
            .map_err(|e| {
                let e = e.to_string();
                failure(REASON, e.clone(), outer(&e))
            })?;
        let target_usage = target_milli(&src.target, |t| t.average_value.as_ref())
            .map_err(|e| failure(REASON, e.clone(), outer(&e)))?;
        let r = self
            .calculator
            .get_metric_replicas(
                ctx,
                &PodsMetric {
                    metric_name: &src.metric.name,
                    metric_selector: &metric_selector,
                },
                target_usage,
            )
            .await
            .map_err(|e| {
                let e = e.to_string();
                failure(REASON, e.clone(), outer(&e))
            })?;
        *status = MetricStatus {
            type_: "Pods".to_owned(),
            pods: Some(PodsMetricStatus {
                metric: identifier(&src.metric.name, src.metric.selector.as_ref()),
                current: MetricValueStatus {
                    average_value: Some(milli_quantity(r.usage)),
                    ..Default::default()
                },
            }),
            ..Default::default()
        };
        Ok(MetricProposal {
            replicas: r.replica_count,
            metric_name: metric_names::pods(&src.metric.name),
            timestamp: r.timestamp,
            detail: Some(r.detail),
        })
    }

    async fn resource_metric(
        &self,
        spec: &MetricSpec,
        ctx: &MetricContext<'_>,
        status: &mut MetricStatus,
        container_metric: bool,
    ) -> Result<MetricProposal, MetricFailure> {
        let (reason, resource, container, target) = if container_metric {
            let Some(src) = spec.container_resource.as_ref() else {
                return Err(missing_source(
                    MetricFailureReason::FailedGetContainerResourceMetric,
                    |e| e.to_owned(),
                ));
            };
            (
                MetricFailureReason::FailedGetContainerResourceMetric,
                src.name.as_str(),
                Some(src.container.as_str()),
                &src.target,
            )
        } else {
            let Some(src) = spec.resource.as_ref() else {
                return Err(missing_source(
                    MetricFailureReason::FailedGetResourceMetric,
                    |e| e.to_owned(),
                ));
            };
            (
                MetricFailureReason::FailedGetResourceMetric,
                src.name.as_str(),
                None,
                &src.target,
            )
        };
        let outer = |e: &str| match container {
            Some(c) => wrap(
                "failed to get %s container metric value: %v",
                &[GoArg::str(c), GoArg::error(e)],
            ),
            None => wrap(
                "failed to get %s resource metric value: %v",
                &[GoArg::str(resource), GoArg::error(e)],
            ),
        };
        let fail = |inner: String| failure(reason, inner.clone(), outer(&inner));
        let (current, proposal) = if let Some(v) = &target.average_value {
            let target_usage = quantity(v).map_err(&fail)?;
            let r = self
                .calculator
                .get_raw_resource_replicas(
                    ctx,
                    &ResourceMetric {
                        resource,
                        container,
                    },
                    target_usage,
                )
                .await
                .map_err(|e| {
                    fail(wrap(
                        "failed to get %s usage: %v",
                        &[GoArg::str(resource), GoArg::error(e.to_string())],
                    ))
                })?;
            (
                MetricValueStatus {
                    average_value: Some(resource_quantity(resource, r.usage)),
                    ..Default::default()
                },
                MetricProposal {
                    replicas: r.replica_count,
                    metric_name: metric_names::resource(resource),
                    timestamp: r.timestamp,
                    detail: Some(r.detail),
                },
            )
        } else if let Some(u) = target.average_utilization {
            let r = self
                .calculator
                .get_resource_replicas(
                    ctx,
                    &ResourceMetric {
                        resource,
                        container,
                    },
                    u,
                )
                .await
                .map_err(|e: CalculatorError| {
                    fail(wrap(
                        "failed to get %s utilization: %v",
                        &[GoArg::str(resource), GoArg::error(e.to_string())],
                    ))
                })?;
            (
                MetricValueStatus {
                    average_utilization: Some(r.utilization),
                    average_value: Some(resource_quantity(resource, r.raw_utilization)),
                    value: None,
                },
                MetricProposal {
                    replicas: r.replica_count,
                    metric_name: if container.is_some() {
                        metric_names::container_resource_utilization(resource)
                    } else {
                        metric_names::resource_utilization(resource)
                    },
                    timestamp: Some(r.timestamp),
                    detail: Some(r.detail),
                },
            )
        } else {
            return Err(fail(
                "invalid resource metric source: neither an average utilization target nor an average value (usage) target was set".to_owned(),
            ));
        };
        *status = match container {
            Some(c) => MetricStatus {
                type_: "ContainerResource".to_owned(),
                container_resource: Some(ContainerResourceMetricStatus {
                    name: resource.to_owned(),
                    container: c.to_owned(),
                    current,
                }),
                ..Default::default()
            },
            None => MetricStatus {
                type_: "Resource".to_owned(),
                resource: Some(ResourceMetricStatus {
                    name: resource.to_owned(),
                    current,
                }),
                ..Default::default()
            },
        };
        Ok(proposal)
    }

    async fn external_metric(
        &self,
        spec: &MetricSpec,
        ctx: &MetricContext<'_>,
        status: &mut MetricStatus,
    ) -> Result<MetricProposal, MetricFailure> {
        const REASON: MetricFailureReason = MetricFailureReason::FailedGetExternalMetric;
        let Some(src) = spec.external.as_ref() else {
            return Err(missing_source(REASON, |e| e.to_owned()));
        };
        let name = src.metric.name.as_str();
        let outer = |e: &str| {
            wrap(
                "failed to get %s external metric value: %v",
                &[GoArg::str(name), GoArg::error(e)],
            )
        };
        let selector = src.metric.selector.as_ref();
        let metric_name = metric_names::external(name, selector, self.selector_style);
        if let Some(v) = &src.target.average_value {
            let target = quantity(v).map_err(|e| failure(REASON, e.clone(), outer(&e)))?;
            let r = self
                .calculator
                .get_external_per_pod_metric_replicas(
                    ctx,
                    &ExternalMetric {
                        metric_name: name,
                        metric_selector: selector,
                    },
                    target,
                )
                .await
                .map_err(|e| {
                    named_fetch_failure(
                        REASON,
                        "failed to get %s external metric: %v",
                        name,
                        e,
                        outer,
                    )
                })?;
            *status = external_status(
                name,
                selector,
                MetricValueStatus {
                    average_value: Some(milli_quantity(r.usage)),
                    ..Default::default()
                },
            );
            return Ok(MetricProposal {
                replicas: r.replica_count,
                metric_name,
                timestamp: r.timestamp,
                detail: Some(r.detail),
            });
        }
        if let Some(v) = &src.target.value {
            let target = quantity(v).map_err(|e| failure(REASON, e.clone(), outer(&e)))?;
            let r = self
                .calculator
                .get_external_metric_replicas(
                    ctx,
                    &ExternalMetric {
                        metric_name: name,
                        metric_selector: selector,
                    },
                    target,
                )
                .await
                .map_err(|e| {
                    named_fetch_failure(
                        REASON,
                        "failed to get external metric %s: %v",
                        name,
                        e,
                        outer,
                    )
                })?;
            *status = external_status(
                name,
                selector,
                MetricValueStatus {
                    value: Some(milli_quantity(r.usage)),
                    ..Default::default()
                },
            );
            return Ok(MetricProposal {
                replicas: r.replica_count,
                metric_name,
                timestamp: r.timestamp,
                detail: Some(r.detail),
            });
        }
        let e = "invalid external metric source: neither a value target nor an average value target was set";
        Err(failure(REASON, e.to_owned(), outer(e)))
    }
}

fn external_status(
    name: &str,
    selector: Option<&LabelSelector>,
    current: MetricValueStatus,
) -> MetricStatus {
    MetricStatus {
        type_: "External".to_owned(),
        external: Some(ExternalMetricStatus {
            metric: identifier(name, selector),
            current,
        }),
        ..Default::default()
    }
}

/// The metric's `type` names a source that is absent (API validation prevents this; Go would
/// dereference nil). Reported as a failure of that type.
fn missing_source(reason: MetricFailureReason, outer: impl Fn(&str) -> String) -> MetricFailure {
    let e = "must populate information for the given metric source";
    failure(reason, e.to_owned(), outer(e))
}

/// A target's quantity in milli-units; a missing one reads as zero (Go's nil `MilliValue`
/// would panic; API validation requires it).
fn target_milli(
    target: &MetricTarget,
    pick: impl Fn(&MetricTarget) -> Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
) -> Result<i64, String> {
    match pick(target) {
        Some(q) => quantity(q),
        None => Ok(0),
    }
}

impl crate::caches::CachePodLister {
    /// List with the error as text (the ambiguous-selector check's pod listing).
    pub(crate) fn list_pods(
        &self,
        namespace: &str,
        selector: &Selector,
    ) -> Result<Vec<Arc<k8s_openapi::api::core::v1::Pod>>, String> {
        use hpa_replica_calculator::PodLister as _;
        self.list(namespace, selector).map_err(|e| e.to_string())
    }
}
