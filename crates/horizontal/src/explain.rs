//! A [`DecisionTrace`] as text a person reads top to bottom: what was measured, what each
//! metric asked for, what held it back, what was written. Used by `hpactl explain`.
//!
//! No upstream counterpart.

use std::fmt::Write as _;

use k8s_openapi::api::autoscaling::v2::{MetricTarget, MetricValueStatus};

use crate::trace::DecisionTrace;

fn quantity(q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity) -> &str {
    q.0.as_str()
}

fn target_text(t: &MetricTarget) -> String {
    match (
        t.type_.as_str(),
        &t.average_utilization,
        &t.average_value,
        &t.value,
    ) {
        (_, Some(u), _, _) if t.type_ == "Utilization" => {
            format!("average utilization {u}% of request")
        }
        ("AverageValue", _, Some(v), _) => format!("average value {} per pod", quantity(v)),
        ("Value", _, _, Some(v)) => format!("value {}", quantity(v)),
        (ty, u, av, v) => {
            let mut parts = vec![format!("type {ty}")];
            if let Some(u) = u {
                parts.push(format!("averageUtilization {u}%"));
            }
            if let Some(av) = av {
                parts.push(format!("averageValue {}", quantity(av)));
            }
            if let Some(v) = v {
                parts.push(format!("value {}", quantity(v)));
            }
            parts.join(", ")
        }
    }
}

fn current_text(c: &MetricValueStatus) -> String {
    let mut parts = Vec::new();
    if let Some(u) = c.average_utilization {
        parts.push(format!("average utilization {u}%"));
    }
    if let Some(v) = &c.average_value {
        parts.push(format!("average value {}", quantity(v)));
    }
    if let Some(v) = &c.value {
        parts.push(format!("value {}", quantity(v)));
    }
    if parts.is_empty() {
        "nothing".to_owned()
    } else {
        parts.join(", ")
    }
}

/// `a, b (why); c (other why)`: pod names grouped by their reason, in order.
fn names(notes: &[crate::trace::PodNote]) -> String {
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    for n in notes {
        match groups.iter_mut().find(|(why, _)| *why == n.why) {
            Some((_, names)) => names.push(&n.name),
            None => groups.push((&n.why, vec![&n.name])),
        }
    }
    groups
        .iter()
        .map(|(why, names)| format!("{} ({why})", names.join(", ")))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Render `trace` for a terminal. `position` is `(index, count)` of the trace among the
/// kept decisions, when known.
pub fn render_text(trace: &DecisionTrace, position: Option<(usize, usize)>) -> String {
    let mut s = String::new();
    let _ = write!(s, "HPA {}: decision at {}", trace.hpa, trace.time);
    match position {
        Some((i, n)) => {
            let _ = writeln!(s, " (decision {} of the last {n} kept)", i + 1);
        }
        None => s.push('\n'),
    }
    if trace.without_history {
        let _ = writeln!(
            s,
            "  No history: computed now on the live cluster with the controller's code, writing nothing.\n  A running controller would also apply its stabilization window (earlier recommendations\n  can hold a scale-down, or a scale-up with a scale-up window) and the behavior policies'\n  periods over its recent scale events; both are empty here, so its answer can differ."
        );
    }
    if trace.without_history && trace.metrics.iter().any(|m| m.fallback.is_some()) {
        let _ = writeln!(
            s,
            "  Nor does it know a failing metric's earlier failed reads: a metric fallback\n  (kube-hpa-controller.io/metric-fallback) counts from this read only."
        );
    }
    if trace.write.shadow && !trace.without_history {
        let _ = writeln!(
            s,
            "  Shadow mode: this controller decided and wrote nothing."
        );
    }
    if !trace.target.read {
        let _ = writeln!(
            s,
            "Target {}: its scale could not be read; minReplicas {}, maxReplicas {}",
            trace.target.reference, trace.min_replicas, trace.max_replicas
        );
        s.push_str("\nWhat was measured\n  nothing: the reconcile stopped at the scale target\n");
        s.push_str("\nWhat was written\n  scale: not written\n");
        write_status_and_events(&mut s, trace);
        return s;
    }
    let _ = writeln!(
        s,
        "Target {}: spec.replicas {}, status.replicas {}; minReplicas {}, maxReplicas {}",
        trace.target.reference,
        trace.target.spec_replicas,
        trace.target.status_replicas,
        trace.min_replicas,
        trace.max_replicas
    );
    write_annotations(&mut s, trace);

    s.push_str("\nWhat was measured\n");
    match trace.branch.as_str() {
        "ScalingDisabled" if trace.min_replicas != 0 => {
            let _ = writeln!(
                s,
                "  nothing: the target has 0 replicas and minReplicas is not 0 (from Kubernetes 1.36: and no ScaledToZero=True condition says this HPA scaled it there), so autoscaling is disabled"
            );
        }
        "ScalingDisabled" => {
            let _ = writeln!(
                s,
                "  nothing: the target has 0 replicas and, from Kubernetes 1.36, no ScaledToZero=True condition with an Object or External metric says this HPA scaled it there, so autoscaling is disabled"
            );
        }
        "AboveMax" => {
            let _ = writeln!(
                s,
                "  nothing: the target has more replicas than maxReplicas ({} > {}), so metrics are not read",
                trace.target.spec_replicas, trace.max_replicas
            );
        }
        "BelowMin" => {
            let _ = writeln!(
                s,
                "  nothing: the target has fewer replicas than minReplicas ({} < {}), so metrics are not read",
                trace.target.spec_replicas, trace.min_replicas
            );
        }
        _ => {
            if let Some(t) = &trace.tolerance {
                let _ = writeln!(
                    s,
                    "  tolerance: a usage ratio within [{:.3}, {:.3}] keeps the current count",
                    t.low, t.high
                );
            }
            if trace.metrics.is_empty() {
                let _ = writeln!(s, "  no metric could be computed");
            }
            for (i, m) in trace.metrics.iter().enumerate() {
                let _ = writeln!(s, "  [{i}] {} {}", m.type_, m.name);
                if let Some(g) = &m.api_group {
                    let _ = writeln!(
                        s,
                        "      read from API group {g} (annotation {})",
                        hpa_decision::metric_source::METRIC_SOURCE
                    );
                }
                if let Some(t) = &m.target {
                    let _ = writeln!(s, "      target: {}", target_text(t));
                }
                if let Some(e) = &m.error {
                    let _ = writeln!(s, "      FAILED ({}): {}", e.reason, e.message);
                }
                if let Some(f) = &m.fallback {
                    let _ = writeln!(s, "      {}", fallback_text(f));
                }
                let fallback_value = m
                    .fallback
                    .as_ref()
                    .is_some_and(|f| f.in_effect && f.value.is_some());
                if m.error.is_some() && !fallback_value {
                    continue;
                }
                if let Some(c) = &m.current {
                    let _ = writeln!(s, "      read:   {}", current_text(c));
                }
                if !m.values_milli.is_empty() {
                    let values: Vec<String> =
                        m.values_milli.iter().map(|v| format!("{v}m")).collect();
                    let _ = writeln!(s, "      series: {}", values.join(", "));
                }
                if let Some(p) = &m.pods {
                    let _ = writeln!(
                        s,
                        "      pods:   {} ready, {} unready, {} missing, {} ignored",
                        p.ready, p.unready_count, p.missing_count, p.ignored_count
                    );
                    for (label, notes, count) in [
                        ("unready", &p.unready, p.unready_count),
                        ("missing", &p.missing, p.missing_count),
                        ("ignored", &p.ignored, p.ignored_count),
                    ] {
                        if !notes.is_empty() {
                            let more = count.saturating_sub(notes.len());
                            let _ = writeln!(
                                s,
                                "        {label}: {}{}",
                                names(notes),
                                if more > 0 {
                                    format!(" and {more} more")
                                } else {
                                    String::new()
                                }
                            );
                        }
                    }
                }
                if let Some(r) = m.ready_pods {
                    let _ = writeln!(s, "      ready pods: {r}");
                }
                if let Some(r) = m.usage_ratio {
                    let within = match m.within_tolerance {
                        Some(true) => " (within tolerance: keep the current count)",
                        Some(false) => " (outside tolerance)",
                        None => "",
                    };
                    let _ = writeln!(s, "      usage ratio {r:.3}{within}");
                }
                if let Some(r) = m.recomputed_usage_ratio {
                    let _ = writeln!(
                        s,
                        "      usage ratio {r:.3} after filling in missing/unready pods conservatively"
                    );
                }
            }
        }
    }

    s.push_str("\nWhat each metric asked for\n");
    let mut any = false;
    for (i, m) in trace.metrics.iter().enumerate() {
        if let Some(p) = m.proposal {
            any = true;
            let won = trace.winner.as_ref().is_some_and(|w| w.index == i);
            let _ = writeln!(
                s,
                "  [{i}] {}: {p} replicas{}",
                m.proposal_name.as_deref().unwrap_or(&m.name),
                if won { "  <- the largest, used" } else { "" }
            );
        }
    }
    if let Some(e) = &trace.metrics_error {
        any = true;
        let _ = writeln!(s, "  error: {e}");
    }
    match trace.branch.as_str() {
        "AboveMax" | "BelowMin" => {
            any = true;
            let _ = writeln!(
                s,
                "  no metric: the count is brought to {}",
                trace.desired_replicas
            );
        }
        "ScalingDisabled" => {
            any = true;
            let _ = writeln!(s, "  nothing");
        }
        _ => {}
    }
    if !any {
        let _ = writeln!(s, "  nothing");
    }
    if let Some(p) = trace.prenormalized {
        let _ = writeln!(s, "  => {p} replicas before stabilization and limits");
    }

    s.push_str("\nWhat held it back\n");
    let mut held = false;
    if let Some(p) = &trace.pause {
        held = true;
        match p.pinned_replicas {
            Some(n) => {
                let _ = writeln!(
                    s,
                    "  paused by {}: the target is brought to {n} replicas once, then left where it is; the metrics' proposals are not applied",
                    p.annotation
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    "  paused by {}: the scale is not written; the metrics' proposals are not applied",
                    p.annotation
                );
            }
        }
    }
    if let Some(st) = &trace.stabilization {
        let legacy = trace
            .rate_limit
            .as_ref()
            .is_some_and(|r| r.kind == "legacy");
        if legacy {
            let _ = writeln!(
                s,
                "  stabilization window (no spec.behavior: scale-down only, --horizontal-pod-autoscaler-downscale-stabilization): {}s",
                st.down_window_seconds
            );
        } else {
            let _ = writeln!(
                s,
                "  stabilization window: scale-up {}s, scale-down {}s",
                st.up_window_seconds, st.down_window_seconds
            );
        }
        for r in &st.recommendations {
            let mut windows = Vec::new();
            if r.in_up_window {
                windows.push("up window");
            }
            if r.in_down_window {
                windows.push("down window");
            }
            let _ = writeln!(
                s,
                "    {} replicas recommended at {}{}",
                r.replicas,
                r.time,
                if windows.is_empty() {
                    " (outside both windows)".to_owned()
                } else {
                    format!(" (in the {})", windows.join(" and "))
                }
            );
        }
        let _ = writeln!(s, "    applied: {} ({})", st.stabilized, st.reason);
        held |= Some(st.stabilized) != trace.prenormalized;
    }
    if let Some(rl) = &trace.rate_limit {
        if rl.kind == "legacy" {
            let _ = writeln!(
                s,
                "  scale-up limit (no spec.behavior): max(2 x current, 4) = {}",
                rl.limit
                    .map_or_else(|| "none".to_owned(), |l| l.to_string())
            );
        } else {
            let _ = writeln!(
                s,
                "  behavior {} policies (selectPolicy {}):",
                rl.direction,
                rl.select_policy.as_deref().unwrap_or("-")
            );
            if rl.policies.is_empty() {
                let _ = writeln!(s, "    none apply");
            }
            for p in &rl.policies {
                let _ = writeln!(
                    s,
                    "    {} {} per {}s: {} replicas at the period's start -> at most {}{}",
                    p.type_,
                    p.value,
                    p.period_seconds,
                    p.period_start,
                    p.limit.map_or_else(|| "n/a".to_owned(), |l| l.to_string()),
                    if p.selected { "  <- selected" } else { "" }
                );
            }
            if let Some(l) = rl.limit {
                let _ = writeln!(s, "    combined limit: {l}");
            }
        }
    }
    let _ = writeln!(
        s,
        "  bounds: minReplicas {}, maxReplicas {}{}",
        trace.clamp.min,
        trace.clamp.max,
        trace
            .clamp
            .bound_by
            .as_ref()
            .map(|b| format!(": {b}"))
            .unwrap_or_default()
    );
    if let Some(b) = &trace.clamp.bound_by
        && b != "DesiredWithinRange"
    {
        held = true;
        let _ = writeln!(s, "  the final count was bound by {b}");
    }
    if !held && trace.stabilization.is_some() {
        let _ = writeln!(s, "  nothing held it back");
    }
    let _ = writeln!(s, "  => desired replicas {}", trace.desired_replicas);

    s.push_str("\nWhat was written\n");
    let scale = match trace.write.scale.as_str() {
        "notAttempted" => format!(
            "scale: not written (stays at {})",
            trace.target.spec_replicas
        ),
        "shadow" => format!(
            "scale: {} -> {} decided, not written",
            trace.target.spec_replicas, trace.desired_replicas
        ),
        "succeeded" => format!(
            "scale: {} -> {}",
            trace.target.spec_replicas, trace.desired_replicas
        ),
        other => format!("scale: {other}"),
    };
    let _ = writeln!(s, "  {scale}");
    if !trace.rescale_reason.is_empty() {
        let _ = writeln!(s, "  reason: {}", trace.rescale_reason);
    }
    write_status_and_events(&mut s, trace);
    s
}

/// A metric's fallback (`kube-hpa-controller.io/metric-fallback`) at this read, one line.
fn fallback_text(f: &crate::trace::MetricFallbackTrace) -> String {
    let threshold = match (f.failure_duration_seconds, f.failures) {
        (Some(d), _) => format!(
            "after {} of failures",
            hpa_decision::fallback::go_seconds(jiff::SignedDuration::from_secs(d))
        ),
        (None, Some(n)) => format!("at {n} failed reads in a row"),
        (None, None) => String::new(),
    };
    let action = match (f.replicas, &f.value) {
        (Some(n), _) => format!("{n} replicas"),
        (None, Some(v)) => format!("the value {v} as if read"),
        (None, None) => String::new(),
    };
    let streak = f.first_failure.map_or_else(String::new, |t| {
        format!(
            "failing since {t} ({} failed read{} in a row)",
            f.failed_reads,
            if f.failed_reads == 1 { "" } else { "s" }
        )
    });
    match (f.in_effect, f.transition.as_deref()) {
        (true, Some("activated")) => {
            format!("fallback ({action}) in effect from this read: {streak}")
        }
        (true, _) => format!("fallback ({action}) in effect: {streak}"),
        (false, Some("cleared")) => {
            format!("fallback ({action} {threshold}): cleared, the metric was read again")
        }
        (false, _) if f.first_failure.is_some() => {
            format!("fallback ({action} {threshold}): not in effect yet, {streak}")
        }
        (false, _) => {
            format!("fallback ({action} {threshold}): not in effect, the metric was read")
        }
    }
}

/// The pause and the ignored annotations of this controller, under the target line.
fn write_annotations(s: &mut String, trace: &DecisionTrace) {
    if let Some(p) = &trace.pause {
        let _ = match (p.requested_replicas, p.pinned_replicas) {
            (Some(asked), Some(n)) if asked != n => writeln!(
                s,
                "Paused: {} {asked} pins the target to {n} replicas (clamped to [minReplicas, maxReplicas]); no stabilization window or policy applies, and none is kept until the pause ends",
                p.annotation
            ),
            (_, Some(n)) => writeln!(
                s,
                "Paused: {} pins the target to {n} replicas; no stabilization window or policy applies, and none is kept until the pause ends",
                p.annotation
            ),
            _ => writeln!(
                s,
                "Paused: {} is true, the scale is not written; no stabilization window or policy applies, and none is kept until the pause ends",
                p.annotation
            ),
        };
    }
    if let Some(secs) = trace.sync_period_seconds {
        let _ = writeln!(
            s,
            "Sync period: {secs}s by the annotation {}: reconciled again {secs}s after this decision instead of the global period (when, not how, it decides)",
            hpa_decision::sync_period::SYNC_PERIOD
        );
    }
    if let Some(p) = &trace.pod_selection {
        let annotation = hpa_decision::pod_selection::POD_SELECTION_STRATEGY;
        let _ = match (p.strategy.as_str(), p.excluded_pods.as_slice()) {
            ("OwnerReferences", _) if p.owners_unknown => writeln!(
                s,
                "Pod selection: OwnerReferences by the annotation {annotation}: only the target's own pods count; the pods' owners could not be read, so no metric was computed"
            ),
            ("OwnerReferences", []) => writeln!(
                s,
                "Pod selection: OwnerReferences by the annotation {annotation}: only the target's own pods count; every pod its selector matched is its own"
            ),
            ("OwnerReferences", left_out) => writeln!(
                s,
                "Pod selection: OwnerReferences by the annotation {annotation}: only the target's own pods count; left out, matched by its selector but not owned by it ({}): {}",
                left_out.len(),
                left_out.join(", ")
            ),
            (strategy, _) => writeln!(
                s,
                "Pod selection: {strategy} by the annotation {annotation}: every pod the target's selector matches counts (upstream's behaviour)"
            ),
        };
    }
    for a in &trace.invalid_annotations {
        let _ = writeln!(s, "Ignored: {}", a.message);
    }
}

/// The status, conditions, events and error lines of "What was written".
fn write_status_and_events(s: &mut String, trace: &DecisionTrace) {
    let _ = writeln!(
        s,
        "  status: {}",
        match (trace.write.status_changed, trace.write.shadow) {
            (true, false) => "updated",
            (true, true) => "would change (not written)",
            (false, _) => "unchanged",
        }
    );
    for c in &trace.conditions {
        let _ = writeln!(
            s,
            "  condition {}={} {}: {}",
            c.type_, c.status, c.reason, c.message
        );
    }
    if trace.events.is_empty() {
        let _ = writeln!(s, "  events: none");
    }
    for e in &trace.events {
        let _ = writeln!(
            s,
            "  event {} {}: {}{}",
            e.type_,
            e.reason,
            e.message,
            if trace.write.shadow {
                " (not emitted)"
            } else {
                ""
            }
        );
    }
    if let Some(e) = &trace.error {
        let _ = writeln!(s, "  error: {e}");
    }
}
