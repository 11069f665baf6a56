//! One reconcile: the I/O around the pure decision core, in upstream's step order.
//!
//! Mirrors upstream `pkg/controller/podautoscaler/horizontal.go`: `reconcileKey`,
//! `reconcileAutoscaler` (the scale target read and written in [`scale_target`], the
//! rescale, the status written in [`status`], its errors in [`error`]),
//! `computeReplicasForMetrics`'s per-metric loop (each metric in [`metrics`]) and
//! `validateAndParseSelector`. The branch choice, aggregation, normalization and rendering are
//! the pure [`hpa_decision::decision`] functions (`getUnableComputeReplicaCountCondition`, the
//! condition when no metric could be computed, is
//! [`MetricsOutcome::from_results`](hpa_decision::decision::MetricsOutcome::from_results) and
//! [`MetricsOutcome::selector_failure`](hpa_decision::decision::MetricsOutcome::selector_failure));
//! this module fetches and writes.

mod error;
mod metrics;
mod scale_target;
mod status;

use std::sync::Arc;
use std::time::Instant;

use dashmap::DashMap;
use hpa_config::Clock;
use hpa_metrics::Selector;
use hpa_replica_calculator::{PodLister as _, ReplicaCalculator, ReplicaQuery, Tolerances};
use jiff::Timestamp;
use k8s_openapi::api::autoscaling::v2::{HorizontalPodAutoscaler, HorizontalPodAutoscalerStatus};

use crate::caches::{Caches, split_key};
use crate::controller::ControllerConfig;
use crate::explain_metrics::ExplainMetrics;
use crate::monitor::Monitor;
use crate::recorder::Recorder;
use crate::scale_cache::ScaleCacheMetrics;
use crate::scale_client::{ReadSource, ScaleClient};
use crate::selectors::{HpaKey, HpaSelectorRegistry};
use crate::shadow::ShadowStore;
use crate::trace::TraceStore;
use hpa_decision::conditions::{HpaCondition, set_condition};
use hpa_decision::decision::{
    Branch, Decision, DecisionConfig, DecisionInput, MetricsOutcome, RescaleResult,
    SelectorFailure, decide, scale_target_reference,
};
use hpa_decision::error_source::ErrorSource;
use hpa_decision::events::HpaEvent;
use hpa_decision::labels::{ActionLabel, ErrorKind, ErrorLabel};
use hpa_decision::pod_selection::{PodOwnership, pod_selection_annotation};
use hpa_decision::state::HpaState;
use hpa_decision::status::status_semantically_equal;
use hpa_decision::tolerance::tolerances_for_hpa;

pub use error::ReconcileError;
pub use metrics::MetricComputer;
pub(crate) use status::StatusWriter;

use scale_target::{ScaleWrite, read_scale, update_scale_on_conflict};

/// What a reconcile reads and writes: the scale target, the calculator, the caches, the
/// per-HPA state, and where its results go (status, events, metrics, traces). The
/// controller's workers call [`Reconciler::reconcile_key`].
pub(crate) struct Reconciler {
    /// The scale subresource client.
    pub(crate) scale_client: Arc<dyn ScaleClient>,
    /// The replica calculator over the metrics client and the pod cache.
    pub(crate) calculator: ReplicaCalculator,
    /// The HPA and pod caches.
    pub(crate) caches: Caches,
    /// The owners of the pods, for the `OwnerReferences` pod selection strategy.
    pub(crate) pod_owners: crate::pod_owners::PodOwners,
    /// The per-HPA recommendations and scale events.
    pub(crate) state: HpaState,
    /// Every HPA's selector (the ambiguous-selector check).
    pub(crate) selectors: HpaSelectorRegistry,
    /// The event recorder.
    pub(crate) recorder: Recorder,
    /// The Prometheus metrics of upstream's `monitor` package.
    pub(crate) monitor: Monitor,
    /// The time source of every decision.
    pub(crate) clock: Arc<dyn Clock>,
    /// The flags.
    pub(crate) config: ControllerConfig,
    /// The decision's settings, from the flags.
    pub(crate) decision_config: DecisionConfig,
    /// The last decision of each HPA (with [`ControllerConfig::keep_last_decisions`]).
    pub(crate) last_decisions: DashMap<String, Decision>,
    /// The HPA status writes.
    pub(crate) status_writer: StatusWriter,
    /// The decision traces.
    pub(crate) traces: Arc<TraceStore>,
    /// Shadow mode's comparisons.
    pub(crate) shadow: Arc<ShadowStore>,
    /// The decision traces' dashboard series.
    pub(crate) explain_metrics: ExplainMetrics,
    /// Scale reads by source (and the scale target cache's states).
    pub(crate) scale_reads: ScaleCacheMetrics,
    /// Where the recommendations and scale events are persisted for the next leader
    /// (`--persist-hpa-history`), once set.
    pub(crate) history: std::sync::OnceLock<Arc<hpa_history::History>>,
    /// With `--shards`: the shards this replica owns and their histories, once set.
    pub(crate) sharded: std::sync::OnceLock<Arc<crate::shards::Sharded>>,
}

impl Reconciler {
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
            self.status_writer.forget(key);
            if let Some(history) = self.history_of(key) {
                history.forget(key);
            }
            return (true, Ok(()));
        };
        if let Err(e) = self.status_writer.ensure_observed_own_write(key, &hpa) {
            return (false, Err(e));
        }
        let result = self.reconcile_autoscaler(&hpa, key).await;
        self.note_history(key, &hpa);
        (false, result)
    }

    /// Where `key`'s history is persisted: the process's, or (with `--shards`) its shard's
    /// while this replica owns it.
    fn history_of(&self, key: &str) -> Option<Arc<hpa_history::History>> {
        match self.sharded.get() {
            Some(sharded) => sharded.history(key),
            None => self.history.get().cloned(),
        }
    }

    /// Hands what later decisions can still read of `key`'s history to the persister
    /// (nothing in shadow mode, which writes nothing).
    fn note_history(&self, key: &str, hpa: &HorizontalPodAutoscaler) {
        let Some(history) = self.history_of(key) else {
            return;
        };
        if self.config.shadow {
            return;
        }
        let behavior = hpa.spec.behavior.as_ref().map(|b| {
            hpa_decision::behavior::EffectiveBehavior::new(
                b,
                self.decision_config.downscale_stabilization_window,
            )
        });
        let keep_for = hpa_history::horizon(
            behavior.as_ref(),
            self.decision_config.downscale_stabilization_window,
        );
        history.note(
            key,
            hpa_history::HpaHistory::capture(
                &self.state.recommendations(key),
                &self.state.scale_up_events(key),
                &self.state.scale_down_events(key),
                keep_for,
                self.clock.now(),
            ),
        );
    }

    /// `reconcileAutoscaler` with its monitor wrapper.
    async fn reconcile_autoscaler(
        &self,
        shared: &Arc<HorizontalPodAutoscaler>,
        key: &str,
    ) -> Result<(), ReconcileError> {
        let start = Instant::now();
        let (action, result) = self.reconcile_steps(shared, key).await;
        let error = match &result {
            Ok(()) => ErrorLabel::None,
            Err(e) => e.kind.label(),
        };
        self.monitor
            .observe_reconciliation_result(action, error, start.elapsed());
        result
    }

    /// `reconcileAutoscaler` itself: the reconcile's steps, with the action label.
    async fn reconcile_steps(
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

        // Steps 3-5: the target's scale.
        let (mut scale, mapping, mut source) =
            match read_scale(self.scale_client.as_ref(), &hpa, &reference).await {
                Ok(read) => read,
                Err(failure) => {
                    self.fail_get_scale(&mut hpa, &original, &failure.message, now)
                        .await;
                    return (ActionLabel::None, Err(failure.error));
                }
            };
        self.scale_reads.observe_read(source);

        let tolerances = tolerances_for_hpa(
            &hpa,
            self.config.hpa.tolerance,
            self.config
                .gates
                .enabled(hpa_config::Feature::HpaConfigurableTolerance),
        )
        .unwrap_or(Tolerances::new(
            self.config.hpa.tolerance,
            self.config.hpa.tolerance,
        ));
        let shadow = self.config.shadow;
        // The recommendation history before deciding: put back if the decision has to be made
        // again from the live scale (see `ScaleWrite::Stale`) or its write never left (fence).
        let history = self.state.recommendations(key);
        // The same for the failures counted towards the metrics' fallbacks: a read made again
        // at the same time is counted once.
        let failures = self.state.metric_failures(key);
        // Shadow mode: decisions at the moment of the other side's last rescale.
        let mut at_their_moment = Vec::new();
        // At most twice: a second time only after a cached scale turned out to be behind.
        let (decision, current, status_replicas, rescale, rescale_error) = loop {
            let current = scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
            let status_replicas = scale.status.as_ref().map_or(0, |s| s.replicas);
            let selector_str = scale
                .status
                .as_ref()
                .and_then(|s| s.selector.clone())
                .unwrap_or_default();

            // A paused HPA is not compared with the other side (`hpa_decision::pause`): no
            // decision at its moment.
            if shadow && hpa_decision::pause::pause_annotations(&hpa).pause.is_none() {
                // Before the other side's rescale is stored as a scale event: decided from the
                // history as it stood before that rescale.
                at_their_moment = self
                    .decide_at_their_moment(
                        key,
                        &hpa,
                        &original,
                        TheirMomentInputs {
                            target_now: current,
                            status_replicas,
                            selector: &selector_str,
                            target_uid: scale.metadata.uid.as_deref().unwrap_or_default(),
                            tolerances,
                            now,
                        },
                    )
                    .await;
            }
            if shadow {
                self.observe_target_change(key, &hpa, &original, current, now);
            }
            let branch = Branch::for_hpa(&hpa, current, &self.decision_config);
            let metrics = if branch.needs_metrics() {
                Some(
                    self.compute_replicas_for_metrics(
                        key,
                        &hpa,
                        &namespace,
                        &name,
                        current,
                        status_replicas,
                        &selector_str,
                        scale.metadata.uid.as_deref().unwrap_or_default(),
                        tolerances,
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

            // A failed scale write, kept as the source of the reconcile's `failed to rescale`
            // error.
            let mut rescale_error = None;
            let rescale = if decision.rescale && shadow {
                // Shadow mode writes nothing; the decision is rendered as the active controller
                // renders it after a successful write, so that the two can be compared.
                RescaleResult::Shadowed
            } else if decision.rescale {
                match update_scale_on_conflict(
                    self.scale_client.as_ref(),
                    &namespace,
                    &mapping,
                    scale.clone(),
                    decision.desired_replicas,
                    source,
                )
                .await
                {
                    ScaleWrite::Written => RescaleResult::Succeeded,
                    ScaleWrite::Failed(e) => {
                        let failed = RescaleResult::Failed(e.message.clone());
                        rescale_error = Some(e);
                        failed
                    }
                    ScaleWrite::Stale(live) => {
                        self.state.set_recommendations(key, history.clone());
                        self.state.set_metric_failures(key, failures.clone());
                        scale = *live;
                        source = ReadSource::Api;
                        continue;
                    }
                }
            } else {
                RescaleResult::NotAttempted
            };
            break (decision, current, status_replicas, rescale, rescale_error);
        };
        if let Some(e) = &rescale_error
            && e.cause
                .as_ref()
                .is_some_and(|c| crate::fence::refused_by_fence(c.as_error()))
        {
            // The fence refused the scale write (this instance may no longer lead): it was
            // never sent. No event, condition or status write (they would be refused too, or
            // leave late once a renewal succeeds); the decision leaves no recommendation and
            // the HPA is requeued.
            self.state.set_recommendations(key, history);
            self.state.set_metric_failures(key, failures);
            return (
                ActionLabel::None,
                Err(ReconcileError::internal(format!(
                    "failed to rescale {reference}: {}",
                    e.message
                ))),
            );
        }
        if self.config.keep_last_decisions {
            self.last_decisions.insert(key.to_owned(), decision.clone());
        }
        // Events emitted while computing (selector, per-metric failures).
        for e in &decision.events {
            self.record_event(&hpa, e);
        }
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
            self.compare_with_active(key, now, &original, current, &at_their_moment);
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
        // "Proposing desired replicas" / "Decided not to scale": V(4) upstream.
        for line in decision.log_lines() {
            tracing::trace!(v = 4, "{line}");
        }
        self.monitor
            .observe_desired_replicas(&namespace, &name, outcome.desired_replicas);

        hpa.status = Some(outcome.status.clone());
        let status_result = if outcome.status_changed && !shadow {
            self.status_writer.update_status(&self.recorder, &hpa).await
        } else {
            Ok(())
        };
        for e in &outcome.events_after_status {
            self.record_event(&hpa, e);
        }
        let replaces = decision.failure.is_none() && rescale_error.is_none();
        // The decision's error: after a failed scale write it is `failed to rescale %s: %v`
        // around that write's error; otherwise `failed to compute desired number of replicas
        // ...` around the metrics' error (the first failed metric's, or the selector's).
        let metrics_error = decision
            .failure
            .as_ref()
            .and(decision.metrics.as_ref())
            .and_then(|m| m.error_source.clone());
        let decision_error = |message: String| match (rescale_error, metrics_error) {
            (Some(source), _) => ReconcileError::wrapping(ErrorKind::Internal, message, source),
            (None, Some(source)) => ReconcileError::caused_by(ErrorKind::Internal, message, source),
            (None, None) => ReconcileError::internal(message),
        };
        let result = match status_result {
            Err(err) if replaces => Err(err),
            Err(err) => {
                // `utilruntime.HandleError(err)` after `updateStatusIfNeeded`.
                tracing::error!(logger = "UnhandledError", HPA = key, error = %err, "Unhandled Error");
                outcome.error.map_or(Ok(()), |e| Err(decision_error(e)))
            }
            Ok(()) => outcome.error.map_or(Ok(()), |e| Err(decision_error(e))),
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
        set_condition(
            status.conditions.get_or_insert_with(Vec::new),
            &HpaCondition::FailedGetScale {
                err: err.to_owned(),
            },
            now,
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
            && let Err(e) = self.status_writer.update_status(&self.recorder, hpa).await
        {
            tracing::error!(logger = "UnhandledError", error = %e, "Unhandled Error");
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
        theirs: &HorizontalPodAutoscalerStatus,
        current: i32,
        now: Timestamp,
    ) {
        let Some(previous) = self.traces.latest_of(key).filter(|t| t.target.read) else {
            return;
        };
        if previous.target.spec_replicas == current {
            return;
        }
        // The other side's rescale, when its status already records it: stored when it
        // stored it (to the precision of its lastScaleTime), not when it was seen here.
        let at = crate::shadow::their_rescale(theirs, current, now)
            .filter(|r| r.from == previous.target.spec_replicas)
            .map_or(now, |r| r.scaled_at);
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
            at,
        );
    }

    /// Shadow mode: when the other side's status says it has just rescaled the target
    /// ([`crate::shadow::their_rescale`]) and no comparison with that status has been made
    /// yet, decide as it did: from the replicas it scaled from, with the metrics read now,
    /// at each moment it can have decided at, from the recommendations and scale events
    /// kept up to that moment. Nothing of it is kept: the history is put back as it was,
    /// the decisions are only compared, and the metric computations are not counted.
    async fn decide_at_their_moment(
        &self,
        key: &str,
        hpa: &HorizontalPodAutoscaler,
        theirs: &HorizontalPodAutoscalerStatus,
        inputs: TheirMomentInputs<'_>,
    ) -> Vec<crate::trace::DecisionTrace> {
        let Some(rescale) = crate::shadow::their_rescale(theirs, inputs.target_now, inputs.now)
        else {
            return Vec::new();
        };
        if self
            .shadow
            .is_decided(key, crate::shadow::status_fingerprint(theirs))
        {
            return Vec::new();
        }
        let namespace = hpa.metadata.namespace.as_deref().unwrap_or_default();
        let name = hpa.metadata.name.as_deref().unwrap_or_default();
        let Some(&latest) = rescale.moments.last() else {
            return Vec::new();
        };
        // The target's status.replicas as it read them (an average per pod over an Object or
        // External metric divides by them): as this controller last read them with the
        // target at the replicas it scaled from.
        let status_replicas = self
            .traces
            .get(key)
            .iter()
            .rev()
            .find(|t| t.target.read && t.target.spec_replicas == rescale.from)
            .map_or(inputs.status_replicas, |t| t.target.status_replicas);
        let branch = Branch::for_hpa(hpa, rescale.from, &self.decision_config);
        let metrics = if branch.needs_metrics() {
            Some(
                self.metrics_outcome(
                    key,
                    hpa,
                    namespace,
                    name,
                    rescale.from,
                    status_replicas,
                    inputs.selector,
                    inputs.target_uid,
                    inputs.tolerances,
                    latest,
                    false,
                )
                .await,
            )
        } else {
            None
        };
        let recommendations = self.state.recommendations(key);
        let up = self.state.scale_up_events(key);
        let down = self.state.scale_down_events(key);
        let mut decisions = Vec::with_capacity(rescale.moments.len());
        for &moment in &rescale.moments {
            let until = |t: Timestamp| t <= moment;
            self.state.set_recommendations(
                key,
                recommendations
                    .iter()
                    .filter(|r| until(r.timestamp))
                    .cloned()
                    .collect(),
            );
            self.state.set_scale_events(
                key,
                up.iter().filter(|e| until(e.timestamp)).cloned().collect(),
                down.iter()
                    .filter(|e| until(e.timestamp))
                    .cloned()
                    .collect(),
            );
            let decision = decide(
                &self.state,
                &self.decision_config,
                DecisionInput {
                    key,
                    hpa,
                    current_replicas: rescale.from,
                    now: moment,
                    tolerances: Some(inputs.tolerances),
                },
                metrics.clone(),
            );
            let outcome = decision.complete(&self.state, theirs, RescaleResult::Shadowed);
            decisions.push(crate::trace::DecisionTrace::new(
                &decision,
                &outcome,
                crate::trace::TraceContext {
                    hpa,
                    status_replicas,
                    rescale: &RescaleResult::Shadowed,
                    shadow: true,
                },
            ));
        }
        self.state.set_recommendations(key, recommendations);
        self.state.set_scale_events(key, up, down);
        decisions
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
        at_their_moment: &[crate::trace::DecisionTrace],
    ) {
        use crate::shadow::ShadowResult;
        let ours = self.traces.get(key);
        let comparison =
            crate::shadow::compare(key, now, theirs, target_now, &ours, at_their_moment);
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
                // One per reconcile: V(4), as upstream's per-reconcile lines are.
                tracing::trace!(v = 4, HPA = key, "shadow: {}", comparison.summary);
            }
        }
        let fingerprint = crate::shadow::status_fingerprint(theirs);
        for outcome in self.shadow.record_status(comparison, Some(fingerprint)) {
            self.explain_metrics.observe_shadow_status(outcome);
        }
    }

    /// Emit an event, unless in shadow mode (which writes nothing).
    fn record_event(&self, hpa: &HorizontalPodAutoscaler, event: &HpaEvent) {
        if !self.config.shadow {
            self.recorder.record(hpa, event);
        }
    }

    /// `computeReplicasForMetrics`: the selector checks, then every metric in order.
    #[allow(clippy::too_many_arguments)]
    async fn compute_replicas_for_metrics(
        &self,
        key: &str,
        hpa: &HorizontalPodAutoscaler,
        namespace: &str,
        name: &str,
        spec_replicas: i32,
        status_replicas: i32,
        selector_str: &str,
        target_uid: &str,
        tolerances: Tolerances,
        now: Timestamp,
    ) -> MetricsOutcome {
        self.metrics_outcome(
            key,
            hpa,
            namespace,
            name,
            spec_replicas,
            status_replicas,
            selector_str,
            target_uid,
            tolerances,
            now,
            true,
        )
        .await
    }

    /// [`compute_replicas_for_metrics`](Self::compute_replicas_for_metrics), its metric
    /// computations counted in the monitor's series, and the failures of the metrics with a
    /// fallback counted towards it (`hpa_decision::fallback`), only when `observed`.
    #[allow(clippy::too_many_arguments)]
    async fn metrics_outcome(
        &self,
        key: &str,
        hpa: &HorizontalPodAutoscaler,
        namespace: &str,
        name: &str,
        spec_replicas: i32,
        status_replicas: i32,
        selector_str: &str,
        target_uid: &str,
        tolerances: Tolerances,
        now: Timestamp,
        observed: bool,
    ) -> MetricsOutcome {
        let own_pods = pod_selection_annotation(hpa)
            .owner_references()
            .then_some(target_uid);
        let (selector, ownership) = match self
            .validate_and_parse_selector(namespace, name, selector_str, own_pods)
            .await
        {
            Ok(s) => s,
            Err(f) => return MetricsOutcome::selector_failure(f),
        };
        let ctx = ReplicaQuery {
            namespace,
            spec_replicas,
            status_replicas,
            selector: &selector,
            tolerances,
            now,
            ownership: ownership.as_ref().map(|(o, _)| o),
        };
        let previous_current = hpa
            .status
            .as_ref()
            .and_then(|s| s.current_replicas)
            .unwrap_or(0);
        let computer = MetricComputer {
            calculator: &self.calculator,
            selector_style: self.config.selector_style,
        };
        let mut outcome = computer
            .compute_replicas_for_metrics(hpa, key, &self.state, &ctx, observed, |spec, r, took| {
                if observed {
                    self.monitor.observe_metric_computation_result(
                        r.action_label(previous_current),
                        r.error_label(),
                        took,
                        &spec.type_,
                    );
                }
            })
            .await;
        outcome.excluded_pods = ownership.map(|(_, left_out)| left_out);
        outcome
    }

    /// `validateAndParseSelector`; with the `OwnerReferences` pod selection strategy
    /// (`own_pods`: the target's `uid`; `hpa_decision::pod_selection`), which pods the target
    /// owns and the names of those it does not, and the ambiguous-selector check on the pods
    /// it owns (KEP-5325's `validateAndFilterPods`).
    async fn validate_and_parse_selector(
        &self,
        namespace: &str,
        name: &str,
        selector_str: &str,
        own_pods: Option<&str>,
    ) -> Result<(Selector, Option<(PodOwnership, Vec<String>)>), SelectorFailure> {
        if selector_str.is_empty() {
            return Err(SelectorFailure::Missing);
        }
        let parsed: Selector = selector_str
            .parse()
            .map_err(|e: hpa_metrics::SelectorError| {
                SelectorFailure::Invalid(ErrorSource::new(e))
            })?;
        let key = HpaKey::new(namespace, name);
        self.selectors.update_if_present(&key, parsed.clone());
        let mut pods = self
            .caches
            .pod_lister()
            .list(namespace, &parsed)
            .map_err(|e| SelectorFailure::PodList(ErrorSource::new(e)))?;
        let ownership = match own_pods {
            None => None,
            Some(target_uid) => {
                let (ownership, left_out) = self
                    .pod_owners
                    .ownership(namespace, target_uid, &pods)
                    .await
                    .map_err(|e| SelectorFailure::PodList(ErrorSource::new(e)))?;
                pods.retain(|p| ownership.owns(p));
                Some((ownership, left_out))
            }
        };
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
        Ok((parsed, ownership))
    }
}

/// What [`Reconciler::decide_at_their_moment`] reads from the reconcile.
struct TheirMomentInputs<'a> {
    /// The target's `spec.replicas` as read now.
    target_now: i32,
    /// The target's `status.replicas` as read now.
    status_replicas: i32,
    /// The target's selector as read now.
    selector: &'a str,
    /// The target's `uid` as read now.
    target_uid: &'a str,
    /// The HPA's tolerances.
    tolerances: Tolerances,
    /// This reconcile's time.
    now: Timestamp,
}
