//! Work queue metrics with client-go's names, types, labels and buckets.
//!
//! Mirrors client-go's `util/workqueue/metrics.go` (what is recorded and when) and
//! component-base's `metrics/prometheus/workqueue/metrics.go` (the Prometheus families: subsystem
//! `workqueue`, one label `name` holding the queue's name, and the stability level, which
//! component-base writes in front of every help text: `[ALPHA] ` up to Kubernetes 1.35,
//! `[BETA] ` from 1.36 (kubernetes#135522); see [`Stability`]).
//!
//! [`WorkqueueMetrics`] plays the role of client-go's `MetricsProvider`: build it once per
//! [`prometheus::Registry`] and hand it to every queue through
//! [`QueueConfig`](crate::QueueConfig); each queue takes the children labelled with its name.
//!
//! # Unfinished work and longest-running processor
//!
//! client-go refreshes `workqueue_unfinished_work_seconds` and
//! `workqueue_longest_running_processor_seconds` from a goroutine ticking every 500ms. Here both
//! gauges are refreshed by a custom [`Collector`] at scrape time instead: the values are exact at
//! the moment they are read (upstream's are up to 500ms old), no background task has to be
//! started, stopped or kept alive per queue, and paused-time tests see exact figures. As upstream,
//! a queue stops updating them once it is shutting down (its last values stay exported).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{
    Gauge, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry,
};
use tokio::time::Instant;

/// Metrics subsystem of every work queue metric (`WorkQueueSubsystem`).
pub const WORK_QUEUE_SUBSYSTEM: &str = "workqueue";
/// Name of the depth gauge within the subsystem (`DepthKey`).
pub const DEPTH_KEY: &str = "depth";
/// Name of the adds counter within the subsystem (`AddsKey`).
pub const ADDS_KEY: &str = "adds_total";
/// Name of the queue latency histogram within the subsystem (`QueueLatencyKey`).
pub const QUEUE_LATENCY_KEY: &str = "queue_duration_seconds";
/// Name of the work duration histogram within the subsystem (`WorkDurationKey`).
pub const WORK_DURATION_KEY: &str = "work_duration_seconds";
/// Name of the unfinished work gauge within the subsystem (`UnfinishedWorkKey`).
pub const UNFINISHED_WORK_KEY: &str = "unfinished_work_seconds";
/// Name of the longest running processor gauge within the subsystem
/// (`LongestRunningProcessorKey`).
pub const LONGEST_RUNNING_PROCESSOR_KEY: &str = "longest_running_processor_seconds";
/// Name of the retries counter within the subsystem (`RetriesKey`).
pub const RETRIES_KEY: &str = "retries_total";
/// The single label of every work queue metric; its value is the queue's name.
pub const NAME_LABEL: &str = "name";

const DEPTH_HELP: &str = "Current depth of workqueue";
const ADDS_HELP: &str = "Total number of adds handled by workqueue";
const QUEUE_LATENCY_HELP: &str =
    "How long in seconds an item stays in workqueue before being requested.";
const WORK_DURATION_HELP: &str = "How long in seconds processing an item from workqueue takes.";
const UNFINISHED_WORK_HELP: &str = "How many seconds of work has done that is in progress \
     and hasn't been observed by work_duration. Large values indicate stuck threads. One can \
     deduce the number of stuck threads by observing the rate at which this increases.";
const LONGEST_RUNNING_PROCESSOR_HELP: &str =
    "How many seconds has the longest running processor for workqueue been running.";
const RETRIES_HELP: &str = "Total number of retries handled by workqueue";

/// A metric's stability level, written in front of its help text (component-base's
/// `StabilityLevel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Stability {
    /// `[ALPHA] `: the workqueue metrics up to Kubernetes 1.35.
    Alpha,
    /// `[BETA] `: the workqueue metrics from Kubernetes 1.36 (kubernetes#135522).
    #[default]
    Beta,
}

impl Stability {
    /// The help-text prefix.
    pub fn prefix(self) -> &'static str {
        match self {
            Stability::Alpha => "[ALPHA] ",
            Stability::Beta => "[BETA] ",
        }
    }
}

/// Buckets of the two duration histograms: component-base's `ExponentialBuckets(10e-7, 10, 10)`,
/// i.e. 1µs, 10µs, … 1000s.
pub fn duration_buckets() -> Vec<f64> {
    // Same repeated multiplication as Go's `ExponentialBuckets`, so the bounds are bit-identical.
    let mut bound = 10e-7_f64;
    let mut buckets = Vec::with_capacity(10);
    for _ in 0..10 {
        buckets.push(bound);
        bound *= 10.0;
    }
    buckets
}

/// The metric families of all work queues of a process (client-go's `MetricsProvider` backed by
/// component-base's Prometheus families).
///
/// Cheap to clone; clones share the families. Build one per registry with
/// [`WorkqueueMetrics::register`] and pass it to each queue's [`QueueConfig`](crate::QueueConfig).
#[derive(Clone)]
pub struct WorkqueueMetrics {
    depth: IntGaugeVec,
    adds: IntCounterVec,
    latency: HistogramVec,
    work_duration: HistogramVec,
    retries: IntCounterVec,
    in_flight: Arc<InFlightCollector>,
}

impl std::fmt::Debug for WorkqueueMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkqueueMetrics").finish_non_exhaustive()
    }
}

impl WorkqueueMetrics {
    /// Creates the seven families and registers them into `registry`.
    ///
    /// Fails (with prometheus' error) if the registry already holds families with these names,
    /// e.g. when called twice for the same registry: share one `WorkqueueMetrics` instead.
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        Self::register_with(registry, Stability::Beta)
    }

    /// [`WorkqueueMetrics::register`] at a given stability level (`[ALPHA] ` help texts to
    /// behave as Kubernetes 1.35).
    pub fn register_with(
        registry: &Registry,
        stability: Stability,
    ) -> Result<Self, prometheus::Error> {
        let metrics = Self::unregistered(stability)?;
        registry.register(Box::new(metrics.depth.clone()))?;
        registry.register(Box::new(metrics.adds.clone()))?;
        registry.register(Box::new(metrics.latency.clone()))?;
        registry.register(Box::new(metrics.work_duration.clone()))?;
        registry.register(Box::new(SharedInFlightCollector(metrics.in_flight.clone())))?;
        registry.register(Box::new(metrics.retries.clone()))?;
        Ok(metrics)
    }

    fn unregistered(stability: Stability) -> Result<Self, prometheus::Error> {
        let help_of = |help: &str| format!("{}{help}", stability.prefix());
        let opts =
            |name: &str, help: &str| Opts::new(name, help_of(help)).subsystem(WORK_QUEUE_SUBSYSTEM);
        let histogram = |name: &str, help: &str| {
            HistogramOpts::new(name, help_of(help))
                .subsystem(WORK_QUEUE_SUBSYSTEM)
                .buckets(duration_buckets())
        };
        let labels = &[NAME_LABEL];
        Ok(Self {
            depth: IntGaugeVec::new(opts(DEPTH_KEY, DEPTH_HELP), labels)?,
            adds: IntCounterVec::new(opts(ADDS_KEY, ADDS_HELP), labels)?,
            latency: HistogramVec::new(histogram(QUEUE_LATENCY_KEY, QUEUE_LATENCY_HELP), labels)?,
            work_duration: HistogramVec::new(
                histogram(WORK_DURATION_KEY, WORK_DURATION_HELP),
                labels,
            )?,
            retries: IntCounterVec::new(opts(RETRIES_KEY, RETRIES_HELP), labels)?,
            in_flight: Arc::new(InFlightCollector {
                unfinished: GaugeVec::new(opts(UNFINISHED_WORK_KEY, UNFINISHED_WORK_HELP), labels)?,
                longest: GaugeVec::new(
                    opts(
                        LONGEST_RUNNING_PROCESSOR_KEY,
                        LONGEST_RUNNING_PROCESSOR_HELP,
                    ),
                    labels,
                )?,
                sources: Mutex::new(Vec::new()),
            }),
        })
    }

    /// The children of one queue (client-go's `newQueueMetrics`), created at once so that the
    /// queue's series are exported (as zero) from its construction on.
    pub(crate) fn for_queue(&self, name: &str) -> QueueMetrics {
        let label = &[name];
        QueueMetrics {
            depth: self.depth.with_label_values(label),
            adds: self.adds.with_label_values(label),
            latency: self.latency.with_label_values(label),
            work_duration: self.work_duration.with_label_values(label),
            retries: self.retries.with_label_values(label),
        }
    }

    /// Registers a queue whose in-flight items feed the unfinished-work and longest-running
    /// gauges at scrape time.
    pub(crate) fn track_in_flight(&self, name: &str, source: Weak<dyn InFlight>) {
        let label = &[name];
        let unfinished = self.in_flight.unfinished.with_label_values(label);
        let longest = self.in_flight.longest.with_label_values(label);
        let mut sources = self
            .in_flight
            .sources
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        sources.retain(|s| s.source.strong_count() > 0);
        sources.push(TrackedQueue {
            unfinished,
            longest,
            source,
        });
    }
}

/// Per-queue metric children, the Rust side of client-go's `defaultQueueMetrics`.
#[derive(Clone)]
pub(crate) struct QueueMetrics {
    depth: IntGauge,
    adds: IntCounter,
    latency: Histogram,
    work_duration: Histogram,
    retries: IntCounter,
}

/// Per-item timestamps a metrics-enabled queue keeps under its lock (client-go's `addTimes` and
/// `processingStartTimes`).
pub(crate) struct ItemTimes<T> {
    added: HashMap<T, Instant>,
    processing: HashMap<T, Instant>,
}

impl<T: Eq + Hash + Clone> ItemTimes<T> {
    pub(crate) fn new() -> Self {
        Self {
            added: HashMap::new(),
            processing: HashMap::new(),
        }
    }

    /// Sum and maximum of the ages, in seconds, of the items being processed.
    pub(crate) fn in_flight_ages(&self, now: Instant) -> (f64, f64) {
        self.processing
            .values()
            .map(|start| now.saturating_duration_since(*start).as_secs_f64())
            .fold((0.0, 0.0), |(total, oldest), age| {
                (total + age, if age > oldest { age } else { oldest })
            })
    }
}

impl QueueMetrics {
    /// A non-duplicate add: counts it, grows the depth, remembers the first add time.
    pub(crate) fn add<T: Eq + Hash + Clone>(&self, times: &mut ItemTimes<T>, item: &T) {
        self.adds.inc();
        self.depth.inc();
        if !times.added.contains_key(item) {
            times.added.insert(item.clone(), Instant::now());
        }
    }

    /// An item handed out by `get`: shrinks the depth, observes its time in the queue.
    pub(crate) fn get<T: Eq + Hash + Clone>(&self, times: &mut ItemTimes<T>, item: &T) {
        let now = Instant::now();
        self.depth.dec();
        times.processing.insert(item.clone(), now);
        if let Some(added) = times.added.remove(item) {
            self.latency
                .observe(now.saturating_duration_since(added).as_secs_f64());
        }
    }

    /// An item finished: observes how long it was processed.
    pub(crate) fn done<T: Eq + Hash + Clone>(&self, times: &mut ItemTimes<T>, item: &T) {
        if let Some(start) = times.processing.remove(item) {
            self.work_duration.observe(
                Instant::now()
                    .saturating_duration_since(start)
                    .as_secs_f64(),
            );
        }
    }

    /// One `add_after` call (client-go's retry metric).
    pub(crate) fn retry(&self) {
        self.retries.inc();
    }
}

/// A queue that can report its in-flight work; `None` once it is shutting down.
pub(crate) trait InFlight: Send + Sync {
    /// Sum and maximum age in seconds of the items being processed at `now`.
    fn in_flight_ages(&self, now: Instant) -> Option<(f64, f64)>;
}

struct TrackedQueue {
    unfinished: Gauge,
    longest: Gauge,
    source: Weak<dyn InFlight>,
}

/// Owns the two in-flight gauges and refreshes them from the live queues when scraped.
struct InFlightCollector {
    unfinished: GaugeVec,
    longest: GaugeVec,
    sources: Mutex<Vec<TrackedQueue>>,
}

impl InFlightCollector {
    fn refresh(&self) {
        let now = Instant::now();
        let mut sources = self.sources.lock().unwrap_or_else(PoisonError::into_inner);
        sources.retain(|tracked| {
            let Some(source) = tracked.source.upgrade() else {
                return false;
            };
            if let Some((total, oldest)) = source.in_flight_ages(now) {
                tracked.unfinished.set(total);
                tracked.longest.set(oldest);
            }
            true
        });
    }
}

/// The registered form of [`InFlightCollector`] (the registry wants an owned box).
struct SharedInFlightCollector(Arc<InFlightCollector>);

impl Collector for SharedInFlightCollector {
    fn desc(&self) -> Vec<&Desc> {
        let mut descs = self.0.unfinished.desc();
        descs.extend(self.0.longest.desc());
        descs
    }

    fn collect(&self) -> Vec<MetricFamily> {
        self.0.refresh();
        let mut families = self.0.unfinished.collect();
        families.extend(self.0.longest.collect());
        families
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_component_base_exponential_buckets() {
        let buckets = duration_buckets();
        let expected = [1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1000.0];
        assert_eq!(buckets.len(), expected.len());
        for (got, want) in buckets.iter().zip(expected) {
            assert!((got - want).abs() <= want * 1e-9, "{got} vs {want}");
        }
        assert_eq!(
            buckets,
            prometheus::exponential_buckets(10e-7, 10.0, 10).unwrap()
        );
    }

    #[test]
    fn registering_twice_into_one_registry_fails() {
        let registry = Registry::new();
        WorkqueueMetrics::register(&registry).unwrap();
        assert!(WorkqueueMetrics::register(&registry).is_err());
    }
}
