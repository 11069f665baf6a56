//! Pod classification for a replica calculation: upstream `groupPods` and `removeMetricsForPods`
//! in `pkg/controller/podautoscaler/replica_calculator.go`.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, PodCondition};

use hpa_decision::calculation::PodGroups;

use crate::PodMetricsInfo;

/// The resource name whose samples are subject to the readiness rules (`v1.ResourceCPU`).
pub const RESOURCE_CPU: &str = "cpu";

/// Go's zero `time.Time` (`0001-01-01T00:00:00Z`): what upstream sees for an unset
/// `lastTransitionTime` (a value field in Go, optional here).
pub const GO_ZERO_TIME: Timestamp = Timestamp::constant(-62_135_596_800, 0);

/// The two durations the readiness rules of CPU samples depend on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadinessConfig {
    /// `--horizontal-pod-autoscaler-cpu-initialization-period` (default 5m): while a pod is
    /// younger than this, its CPU sample is only trusted if the pod is ready and a full metric
    /// window has passed since its last readiness transition.
    pub cpu_initialization_period: Duration,
    /// `--horizontal-pod-autoscaler-initial-readiness-delay` (default 30s): after the
    /// initialization period, a not-ready pod is skipped only if it went not-ready within this
    /// delay after starting (it has never been ready).
    pub delay_of_initial_readiness_status: Duration,
}

/// Why a pod is ignored: it is being deleted.
pub const WHY_DELETED: &str = "being deleted";
/// Why a pod is ignored: its phase is Failed.
pub const WHY_FAILED: &str = "phase Failed";
/// Why a pod is unready: its phase is Pending.
pub const WHY_PENDING: &str = "phase Pending";
/// Why a pod is missing: no sample.
pub const WHY_NO_SAMPLE: &str = "no metric sample for this pod";
/// Why a CPU sample is untrusted: no Ready condition or no start time.
pub const WHY_NO_READINESS: &str = "cpu: no Ready condition or no start time";
/// Why a CPU sample is untrusted: not Ready during the initialization period.
pub const WHY_INITIALIZING_NOT_READY: &str =
    "cpu: not Ready within --horizontal-pod-autoscaler-cpu-initialization-period of starting";
/// Why a CPU sample is untrusted: Ready, but the sample's window began before it was.
pub const WHY_INITIALIZING_WINDOW: &str = "cpu: within --horizontal-pod-autoscaler-cpu-initialization-period, and the sample was taken less than a metric window after the pod became Ready";
/// Why a CPU sample is untrusted: the pod went not-Ready right after starting.
pub const WHY_NEVER_READY: &str = "cpu: not Ready, and it went not Ready within --horizontal-pod-autoscaler-initial-readiness-delay of starting (never Ready)";

fn pod_name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or_default()
}

fn pod_phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

/// The first `Ready` condition of the pod, like `podutil.GetPodCondition(&status, PodReady)`.
pub(crate) fn ready_condition(pod: &Pod) -> Option<&PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
}

/// `podutil.IsPodReady`: the first `Ready` condition exists and its status is `True`.
pub(crate) fn is_pod_ready(pod: &Pod) -> bool {
    ready_condition(pod).is_some_and(|c| c.status == "True")
}

/// `t + d`, saturating at the end of jiff's range (Go's `Time.Add` has no overflow in practice).
fn add(t: Timestamp, d: Duration) -> Timestamp {
    t.saturating_add(d).unwrap_or(Timestamp::MAX)
}

/// Whether (and why) the CPU sample of a running pod must be treated as unready.
fn cpu_sample_unready(
    pod: &Pod,
    metric_timestamp: Timestamp,
    metric_window: Duration,
    config: &ReadinessConfig,
    now: Timestamp,
) -> Option<&'static str> {
    let condition = ready_condition(pod);
    let start_time = pod.status.as_ref().and_then(|s| s.start_time.as_ref());
    let (Some(condition), Some(start_time)) = (condition, start_time) else {
        return Some(WHY_NO_READINESS);
    };
    let start_time = start_time.0;
    let last_transition = condition
        .last_transition_time
        .as_ref()
        .map_or(GO_ZERO_TIME, |t| t.0);
    let not_ready = condition.status == "False";
    if add(start_time, config.cpu_initialization_period) > now {
        // Still initialising: skip unless ready and one full window was sampled since the last
        // readiness transition.
        if not_ready {
            Some(WHY_INITIALIZING_NOT_READY)
        } else if metric_timestamp < add(last_transition, metric_window) {
            Some(WHY_INITIALIZING_WINDOW)
        } else {
            None
        }
    } else if not_ready
        && add(start_time, config.delay_of_initial_readiness_status) > last_transition
    {
        // Skip only a pod that went unready right after starting (never been ready).
        Some(WHY_NEVER_READY)
    } else {
        None
    }
}

/// Classify `pods` against the metric samples, in list order, first matching rule wins:
/// deleted or failed → ignored; pending → unready; no sample → missing; (for `cpu` only) an
/// untrusted sample → unready; otherwise ready.
///
/// `now` replaces upstream's `time.Now()`.
pub fn group_pods<'a>(
    pods: impl IntoIterator<Item = &'a Pod>,
    metrics: &PodMetricsInfo,
    resource: &str,
    config: &ReadinessConfig,
    now: Timestamp,
) -> PodGroups {
    let mut groups = PodGroups::default();
    for pod in pods {
        let name = pod_name(pod);
        let phase = pod_phase(pod);
        if pod.metadata.deletion_timestamp.is_some() || phase == "Failed" {
            groups.ignored_pods.insert(name.to_owned());
            let why = if pod.metadata.deletion_timestamp.is_some() {
                WHY_DELETED
            } else {
                WHY_FAILED
            };
            groups.reasons.insert(name.to_owned(), why);
            continue;
        }
        if phase == "Pending" {
            groups.unready_pods.insert(name.to_owned());
            groups.reasons.insert(name.to_owned(), WHY_PENDING);
            continue;
        }
        let Some(metric) = metrics.get(name) else {
            groups.missing_pods.insert(name.to_owned());
            groups.reasons.insert(name.to_owned(), WHY_NO_SAMPLE);
            continue;
        };
        if resource == RESOURCE_CPU
            && let Some(why) = cpu_sample_unready(pod, metric.timestamp, metric.window, config, now)
        {
            groups.unready_pods.insert(name.to_owned());
            groups.reasons.insert(name.to_owned(), why);
            continue;
        }
        groups.ready_pod_count += 1;
    }
    groups
}

/// Upstream `removeMetricsForPods`: drop the samples of the named pods.
pub fn remove_metrics_for_pods<'a>(
    metrics: &mut PodMetricsInfo,
    pods: impl IntoIterator<Item = &'a String>,
) {
    for pod in pods {
        metrics.remove(pod);
    }
}
