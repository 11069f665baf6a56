//! The event recorder: core/v1 Events on the HPA, written as client-go's event broadcaster
//! writes them (client-go `tools/record`; the events themselves are `reconcileAutoscaler`'s).
//!
//! Mirrors client-go `tools/record/event.go`: `recorderImpl.generateEvent` / `makeEvent` (the
//! event is made, timestamped and handed over without waiting: `ActionOrDrop` into the
//! broadcaster's incoming queue of `maxQueuedEvents` = 1000, dropped with an error when it is
//! full), the broadcaster's distribution to its sink watcher (`watch.NewLongQueueBroadcaster`
//! with `DropIfChannelFull`: a watcher queue of 1000, an event that does not fit is dropped),
//! `eventBroadcasterImpl.recordToSink` (correlation, then up to `maxTriesPerEvent` = 12
//! tries, `sleepDuration` = 10 s apart, the first sleep randomised) and `recordEvent` (PATCH
//! of a repeat, CREATE otherwise or when the PATCH finds nothing; API `Status` errors and
//! request-construction errors are never retried, transport errors are); and
//! `tools/record/events_cache.go` (`EventCorrelator`: `EventAggregate`, `eventObserve`,
//! `updateState` and the `EventSourceObjectSpamFilter`, each an LRU of `maxLruCacheEntries`
//! = 4096 entries; the spam key includes the event type, as since kubernetes#124747), and
//! `tools/record/util.GenerateEventName` (a random name when `<name>.<hex nanos>` is not a
//! valid DNS subdomain). The source is KCM's `v1.EventSource{Component:
//! "horizontal-pod-autoscaler"}`: `reportingComponent` is that component and
//! `reportingInstance` the (empty) host.
//!
//! The emission log (replay's expectations) is written synchronously by [`Recorder::record`];
//! the API writes happen on a background task. [`Recorder::wait_idle`] waits until every
//! accepted event has been written, dropped or given up on. Every time read comes from the
//! [`Clock`]. One deliberate difference: an event name is kept unique when the clock has not
//! moved (a virtual clock), where client-go would produce a duplicate name.

use std::collections::BTreeSet;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hpa_config::Clock;
use jiff::Timestamp;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use lru::LruCache;
use tokio::sync::{mpsc, watch};

use hpa_decision::events::{EVENT_SOURCE_COMPONENT, HpaEvent};

/// client-go's `maxLruCacheEntries`: the size of each correlator cache.
pub(crate) const MAX_LRU_CACHE_ENTRIES: usize = 4096;
/// client-go's `maxQueuedEvents`: the broadcaster's incoming queue and each watcher's queue.
pub(crate) const MAX_QUEUED_EVENTS: usize = 1000;
/// client-go's `maxTriesPerEvent`.
pub(crate) const MAX_TRIES_PER_EVENT: u32 = 12;
/// client-go's `defaultSleepDuration` between tries.
pub(crate) const DEFAULT_SLEEP_DURATION: Duration = Duration::from_secs(10);
/// client-go's `defaultAggregateMaxEvents`: similar events before aggregation.
const AGGREGATE_MAX_EVENTS: usize = 10;
/// client-go's `defaultAggregateIntervalInSeconds`.
const AGGREGATE_INTERVAL_SECS: i64 = 600;
/// client-go's `defaultSpamBurst`.
const SPAM_BURST: f64 = 25.0;
/// client-go's `defaultSpamQPS` (a `float32`): one event per 5 minutes per key.
const SPAM_QPS: f32 = 1.0 / 300.0;
/// `metav1.NamespaceTerminatingCause`.
const NAMESPACE_TERMINATING_CAUSE: &str = "NamespaceTerminating";

/// One emission, as the controller made it (before aggregation and spam filtering).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmittedEvent {
    /// `Normal` or `Warning`.
    pub type_: String,
    /// The reason.
    pub reason: String,
    /// The message.
    pub message: String,
    /// `namespace/name` of the HPA.
    pub regarding: String,
}

/// Why a write to the event sink failed, classified as `recordEvent` classifies it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SinkError {
    /// The API answered with a `Status` (client-go's `*errors.StatusError`): never retried.
    #[error("{message}")]
    Status {
        /// The HTTP code.
        code: u16,
        /// The `Status` reason (`AlreadyExists`, `NotFound`, ...).
        reason: String,
        /// The `Status` message.
        message: String,
        /// Whether a cause is `NamespaceTerminating`.
        namespace_terminating: bool,
    },
    /// The request could not be built (`RequestConstructionError`): never retried.
    #[error("request construction: {0}")]
    RequestConstruction(String),
    /// Anything else (transport errors, unexpected answers): retried.
    #[error("{0}")]
    Transport(String),
}

impl SinkError {
    fn is_not_found(&self) -> bool {
        matches!(self, SinkError::Status { code: 404, .. })
    }
}

impl From<kube::Error> for SinkError {
    fn from(err: kube::Error) -> Self {
        match err {
            kube::Error::Api(status) => SinkError::Status {
                code: status.code,
                namespace_terminating: status.details.as_ref().is_some_and(|d| {
                    d.causes
                        .iter()
                        .any(|c| c.reason == NAMESPACE_TERMINATING_CAUSE)
                }),
                reason: status.reason,
                message: status.message,
            },
            kube::Error::BuildRequest(e) => SinkError::RequestConstruction(e.to_string()),
            kube::Error::HttpError(e) => SinkError::RequestConstruction(e.to_string()),
            other => SinkError::Transport(other.to_string()),
        }
    }
}

/// Where events are written (client-go's `EventSink`); `namespace` is the event's.
#[async_trait::async_trait]
pub(crate) trait EventSink: Send + Sync {
    /// POST the event.
    async fn create(&self, event: &Event) -> Result<Event, SinkError>;
    /// Strategic-merge PATCH of an existing event.
    async fn patch(&self, event: &Event, patch: &serde_json::Value) -> Result<Event, SinkError>;
}

/// The production sink: `core/v1` Events through a `kube::Client`.
pub(crate) struct KubeEventSink {
    client: kube::Client,
}

impl KubeEventSink {
    /// A sink writing through `client`.
    pub(crate) fn new(client: kube::Client) -> Self {
        KubeEventSink { client }
    }

    fn api(&self, event: &Event) -> Api<Event> {
        let ns = event.metadata.namespace.as_deref().unwrap_or("default");
        Api::namespaced(self.client.clone(), ns)
    }
}

#[async_trait::async_trait]
impl EventSink for KubeEventSink {
    async fn create(&self, event: &Event) -> Result<Event, SinkError> {
        Ok(self
            .api(event)
            .create(&PostParams::default(), event)
            .await?)
    }

    async fn patch(&self, event: &Event, patch: &serde_json::Value) -> Result<Event, SinkError> {
        let name = event.metadata.name.as_deref().unwrap_or("");
        Ok(self
            .api(event)
            .patch(name, &PatchParams::default(), &Patch::Strategic(patch))
            .await?)
    }
}

/// How the sink task retries (client-go's broadcaster `sleepDuration` and the randomisation
/// of the first sleep).
#[derive(Clone)]
pub(crate) struct RetryConfig {
    /// The sleep between tries (client-go: 10 s).
    pub(crate) sleep: Duration,
    /// A uniform random number in `[0, 1)` that scales the first sleep (`rand.Float64()`).
    pub(crate) jitter: Arc<dyn Fn() -> f64 + Send + Sync>,
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig {
            sleep: DEFAULT_SLEEP_DURATION,
            jitter: Arc::new(fastrand::f64),
        }
    }
}

impl std::fmt::Debug for RetryConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryConfig")
            .field("sleep", &self.sleep)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone)]
struct Observation {
    count: i32,
    first_timestamp: Option<Time>,
    name: String,
    resource_version: Option<String>,
}

#[derive(Debug, Clone)]
struct AggregateRecord {
    local_keys: BTreeSet<String>,
    last_timestamp: Timestamp,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    last: Timestamp,
}

/// client-go's `EventCorrelator`: three LRU caches of [`MAX_LRU_CACHE_ENTRIES`] entries.
#[derive(Debug)]
struct Correlator {
    aggregates: LruCache<String, AggregateRecord>,
    observations: LruCache<String, Observation>,
    spam: LruCache<String, Bucket>,
}

impl Correlator {
    fn new(capacity: NonZeroUsize) -> Self {
        Correlator {
            aggregates: LruCache::new(capacity),
            observations: LruCache::new(capacity),
            spam: LruCache::new(capacity),
        }
    }
}

/// The sizes of the correlator's caches (aggregates, observations, spam buckets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CorrelatorSizes {
    /// Entries of the aggregator's cache.
    pub aggregates: usize,
    /// Entries of the event logger's cache.
    pub observations: usize,
    /// Entries of the spam filter's cache.
    pub spam: usize,
}

/// What the [`Recorder`] handle shares with its two background tasks (the broadcaster's
/// distribution and the sink writer).
struct RecorderState {
    /// The time source of event timestamps, correlation and generated names.
    clock: Arc<dyn Clock>,
    /// client-go's `EventCorrelator`, used by the sink writer before each write.
    correlator: Mutex<Correlator>,
    /// The last `UnixNano` used in a generated name (uniqueness under a virtual clock).
    last_name_nanos: Mutex<i128>,
    /// Events accepted and not yet written, dropped or given up on.
    pending: watch::Sender<usize>,
    /// Set by [`Recorder::shutdown`]: retries stop (the broadcaster's cancellation).
    cancelled: watch::Sender<bool>,
}

impl RecorderState {
    /// One accepted event is settled (written, dropped or given up on).
    fn settle_one(&self) {
        self.pending.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// Records events on HPAs.
pub struct Recorder {
    shared: Arc<RecorderState>,
    incoming: mpsc::Sender<Event>,
    emissions: Option<Mutex<Vec<EmittedEvent>>>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder").finish_non_exhaustive()
    }
}

fn join_key(parts: &[&str]) -> String {
    parts.concat()
}

/// `involvedObject` for an HPA (`reference.GetReference`).
pub(crate) fn hpa_reference(hpa: &HorizontalPodAutoscaler) -> ObjectReference {
    ObjectReference {
        api_version: Some("autoscaling/v2".to_owned()),
        kind: Some("HorizontalPodAutoscaler".to_owned()),
        namespace: hpa.metadata.namespace.clone(),
        name: hpa.metadata.name.clone(),
        uid: hpa.metadata.uid.clone(),
        resource_version: hpa.metadata.resource_version.clone(),
        field_path: None,
    }
}

impl Recorder {
    /// A recorder writing through `client`, started on the current Tokio runtime. With
    /// `log_emissions`, every emission is also kept in memory for [`Recorder::emitted_since`]
    /// (the replay runner's expectations).
    pub fn new(client: kube::Client, clock: Arc<dyn Clock>, log_emissions: bool) -> Self {
        Self::with_sink(
            Arc::new(KubeEventSink::new(client)),
            clock,
            log_emissions,
            RetryConfig::default(),
        )
    }

    /// A recorder writing to `sink` with client-go's queue lengths and cache sizes.
    pub(crate) fn with_sink(
        sink: Arc<dyn EventSink>,
        clock: Arc<dyn Clock>,
        log_emissions: bool,
        retry: RetryConfig,
    ) -> Self {
        Self::with_limits(
            sink,
            clock,
            log_emissions,
            retry,
            MAX_QUEUED_EVENTS,
            MAX_LRU_CACHE_ENTRIES,
        )
    }

    fn with_limits(
        sink: Arc<dyn EventSink>,
        clock: Arc<dyn Clock>,
        log_emissions: bool,
        retry: RetryConfig,
        queue_length: usize,
        cache_entries: usize,
    ) -> Self {
        let capacity = NonZeroUsize::new(cache_entries).unwrap_or(NonZeroUsize::MIN);
        let shared = Arc::new(RecorderState {
            clock,
            correlator: Mutex::new(Correlator::new(capacity)),
            last_name_nanos: Mutex::new(i128::MIN),
            pending: watch::Sender::new(0),
            cancelled: watch::Sender::new(false),
        });
        let queue_length = queue_length.max(1);
        let (incoming, incoming_rx) = mpsc::channel(queue_length);
        let (watcher, watcher_rx) = mpsc::channel(queue_length);
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(distribute(shared.clone(), incoming_rx, watcher));
                rt.spawn(record_to_sink(shared.clone(), sink, watcher_rx, retry));
            }
            Err(_) => tracing::error!("no Tokio runtime: events will not be written"),
        }
        Recorder {
            shared,
            incoming,
            emissions: log_emissions.then(|| Mutex::new(Vec::new())),
        }
    }

    /// The number of emissions logged so far (a mark for [`Recorder::emitted_since`]).
    pub fn emission_mark(&self) -> usize {
        self.emissions
            .as_ref()
            .map_or(0, |m| m.lock().unwrap_or_else(|p| p.into_inner()).len())
    }

    /// The emissions logged since `mark`, in order (empty without emission logging).
    pub fn emitted_since(&self, mark: usize) -> Vec<EmittedEvent> {
        self.emissions.as_ref().map_or_else(Vec::new, |m| {
            let g = m.lock().unwrap_or_else(|p| p.into_inner());
            g.get(mark..).map(<[_]>::to_vec).unwrap_or_default()
        })
    }

    /// `generateEvent`: makes the event now and hands it to the broadcaster without waiting
    /// (dropped, with an error, when client-go's `maxQueuedEvents` (1000) are already queued).
    pub fn record(&self, hpa: &HorizontalPodAutoscaler, event: &HpaEvent) {
        let type_ = event.event_type().as_str();
        let reason = event.reason();
        let message = event.message();
        let ns = hpa.metadata.namespace.clone().unwrap_or_default();
        let name = hpa.metadata.name.clone().unwrap_or_default();
        if let Some(m) = &self.emissions {
            m.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(EmittedEvent {
                    type_: type_.to_owned(),
                    reason: reason.to_owned(),
                    message: message.clone(),
                    regarding: format!("{ns}/{name}"),
                });
        }
        let made = self.make_event(&hpa_reference(hpa), type_, reason, &message);
        self.shared.pending.send_modify(|n| *n += 1);
        match self.incoming.try_send(made) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(e)) => {
                self.shared.settle_one();
                tracing::error!(
                    event = ?e.metadata.name,
                    reason = e.reason.as_deref().unwrap_or(""),
                    "Unable to record event: too many queued events, dropped event"
                );
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                self.shared.settle_one();
                tracing::error!(
                    error = "broadcaster already stopped",
                    "Unable to record event (will not retry!)"
                );
            }
        }
    }

    /// `makeEvent`, plus the source and reporting fields `generateEvent` sets.
    fn make_event(
        &self,
        reference: &ObjectReference,
        type_: &str,
        reason: &str,
        message: &str,
    ) -> Event {
        let now = self.shared.clock.now();
        let namespace = reference
            .namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".to_owned());
        let obj_name = reference.name.as_deref().unwrap_or("");
        Event {
            metadata: ObjectMeta {
                name: Some(generate_event_name(&self.shared, obj_name, now)),
                namespace: Some(namespace),
                ..Default::default()
            },
            involved_object: reference.clone(),
            reason: Some(reason.to_owned()),
            message: Some(message.to_owned()),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            count: Some(1),
            type_: Some(type_.to_owned()),
            source: Some(EventSource {
                component: Some(EVENT_SOURCE_COMPONENT.to_owned()),
                host: None,
            }),
            reporting_component: Some(EVENT_SOURCE_COMPONENT.to_owned()),
            reporting_instance: Some(String::new()),
            ..Default::default()
        }
    }

    /// Waits until every event handed over so far has been written, dropped or given up on
    /// (no sleeps: it wakes when the sink task settles the last one).
    pub async fn wait_idle(&self) {
        let mut rx = self.shared.pending.subscribe();
        // The sender lives in `self.shared`, so the channel cannot close while we wait.
        let _ = rx.wait_for(|n| *n == 0).await;
    }

    /// The number of events handed over and not yet settled.
    pub fn pending(&self) -> usize {
        *self.shared.pending.borrow()
    }

    /// The sizes of the correlator's LRU caches.
    pub fn correlator_sizes(&self) -> CorrelatorSizes {
        let c = self
            .shared
            .correlator
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        CorrelatorSizes {
            aggregates: c.aggregates.len(),
            observations: c.observations.len(),
            spam: c.spam.len(),
        }
    }

    /// The broadcaster's `Shutdown`: an event being retried is given up on.
    pub fn shutdown(&self) {
        self.shared.cancelled.send_replace(true);
    }
}

/// The broadcaster's loop: each incoming event goes to the sink watcher's queue, or is
/// dropped when that queue is full (`DropIfChannelFull`). The structured-logging watcher
/// (`StartStructuredLogging(3)`) is folded in here.
async fn distribute(
    shared: Arc<RecorderState>,
    mut incoming: mpsc::Receiver<Event>,
    watcher: mpsc::Sender<Event>,
) {
    while let Some(event) = incoming.recv().await {
        let involved = &event.involved_object;
        tracing::debug!(
            v = 3,
            object = %format!(
                "{}/{}",
                involved.namespace.as_deref().unwrap_or(""),
                involved.name.as_deref().unwrap_or("")
            ),
            fieldPath = involved.field_path.as_deref().unwrap_or(""),
            kind = involved.kind.as_deref().unwrap_or(""),
            apiVersion = involved.api_version.as_deref().unwrap_or(""),
            r#type = event.type_.as_deref().unwrap_or(""),
            reason = event.reason.as_deref().unwrap_or(""),
            // Shown as `message` (a field named so would replace the line's own text).
            event_message = event.message.as_deref().unwrap_or(""),
            "Event occurred"
        );
        if watcher.try_send(event).is_err() {
            shared.settle_one();
        }
    }
}

/// `StartRecordingToSink`'s watcher: correlate and write each event in turn.
async fn record_to_sink(
    shared: Arc<RecorderState>,
    sink: Arc<dyn EventSink>,
    mut events: mpsc::Receiver<Event>,
    retry: RetryConfig,
) {
    while let Some(event) = events.recv().await {
        write_with_retries(&shared, sink.as_ref(), event, &retry).await;
        shared.settle_one();
    }
}

/// `recordToSink`: correlate, then up to [`MAX_TRIES_PER_EVENT`] tries.
async fn write_with_retries(
    shared: &RecorderState,
    sink: &dyn EventSink,
    event: Event,
    retry: &RetryConfig,
) {
    let now = shared.clock.now();
    let correlated = {
        let mut c = shared.correlator.lock().unwrap_or_else(|p| p.into_inner());
        correlate(&mut c, shared, event, now)
    };
    let Some(mut write) = correlated else {
        return;
    };
    // The write is on behalf of the HPA the event is about (the write fence per shard reads
    // it).
    let hpa = format!(
        "{}/{}",
        write
            .event
            .involved_object
            .namespace
            .as_deref()
            .unwrap_or(""),
        write.event.involved_object.name.as_deref().unwrap_or("")
    );
    let mut tries = 0;
    loop {
        if hpa_sharding::scope::for_hpa(&hpa, record_event(shared, sink, &mut write)).await {
            return;
        }
        tries += 1;
        if tries >= MAX_TRIES_PER_EVENT {
            tracing::error!(
                event = ?write.event.metadata.name,
                "Unable to write event (retry limit exceeded!)"
            );
            return;
        }
        // Randomise the first sleep so that clients do not retry in step.
        let delay = if tries == 1 {
            retry.sleep.mul_f64((retry.jitter)().clamp(0.0, 1.0))
        } else {
            retry.sleep
        };
        let mut cancelled = shared.cancelled.subscribe();
        tokio::select! {
            _ = cancelled.wait_for(|c| *c) => {
                tracing::error!(
                    event = ?write.event.metadata.name,
                    "Unable to write event (broadcaster is shut down)"
                );
                return;
            }
            () = tokio::time::sleep(delay) => {}
        }
    }
}

/// `recordEvent`: `true` when the event was written or is to be abandoned, `false` to retry.
async fn record_event(
    shared: &RecorderState,
    sink: &dyn EventSink,
    write: &mut CorrelatedWrite,
) -> bool {
    let update_existing = write.event.count.unwrap_or(1) > 1;
    let mut result = None;
    if update_existing && let Some(patch) = &write.patch {
        result = Some(sink.patch(&write.event, patch).await);
    }
    let needs_create = match &result {
        None => true,
        Some(Err(e)) => e.is_not_found(),
        Some(Ok(_)) => false,
    };
    if needs_create {
        write.event.metadata.resource_version = None;
        result = Some(sink.create(&write.event).await);
    }
    let name = write.event.metadata.name.clone().unwrap_or_default();
    match result {
        Some(Ok(written)) => {
            let mut c = shared.correlator.lock().unwrap_or_else(|p| p.into_inner());
            update_state(&mut c, &written);
            true
        }
        None => true,
        Some(Err(SinkError::RequestConstruction(error))) => {
            tracing::error!(event = %name, %error, "Unable to construct event (will not retry!)");
            true
        }
        Some(Err(SinkError::Status {
            reason,
            message,
            namespace_terminating,
            ..
        })) => {
            if reason == "AlreadyExists" || namespace_terminating {
                tracing::trace!(v = 5, event = %name, error = %message, "Server rejected event (will not retry!)");
            } else {
                tracing::error!(event = %name, error = %message, "Server rejected event (will not retry!)");
            }
            true
        }
        Some(Err(SinkError::Transport(error))) => {
            tracing::error!(event = %name, %error, "Unable to write event (may retry after sleeping)");
            false
        }
    }
}

/// client-go's `getEventKey`.
fn event_key(event: &Event) -> String {
    let source = event.source.clone().unwrap_or_default();
    let o = &event.involved_object;
    join_key(&[
        source.component.as_deref().unwrap_or(""),
        source.host.as_deref().unwrap_or(""),
        o.kind.as_deref().unwrap_or(""),
        o.namespace.as_deref().unwrap_or(""),
        o.name.as_deref().unwrap_or(""),
        o.field_path.as_deref().unwrap_or(""),
        o.uid.as_deref().unwrap_or(""),
        o.api_version.as_deref().unwrap_or(""),
        event.type_.as_deref().unwrap_or(""),
        event.reason.as_deref().unwrap_or(""),
        event.message.as_deref().unwrap_or(""),
    ])
}

/// client-go's `EventAggregatorByReasonFunc`: `(aggregateKey, localKey)`.
fn aggregate_key(event: &Event) -> (String, String) {
    let source = event.source.clone().unwrap_or_default();
    let o = &event.involved_object;
    (
        join_key(&[
            source.component.as_deref().unwrap_or(""),
            source.host.as_deref().unwrap_or(""),
            o.kind.as_deref().unwrap_or(""),
            o.namespace.as_deref().unwrap_or(""),
            o.name.as_deref().unwrap_or(""),
            o.uid.as_deref().unwrap_or(""),
            o.api_version.as_deref().unwrap_or(""),
            event.type_.as_deref().unwrap_or(""),
            event.reason.as_deref().unwrap_or(""),
            event.reporting_component.as_deref().unwrap_or(""),
            event.reporting_instance.as_deref().unwrap_or(""),
        ]),
        event.message.clone().unwrap_or_default(),
    )
}

/// client-go's `getSpamKey`: source, involved object and event type.
fn spam_key(event: &Event) -> String {
    let source = event.source.clone().unwrap_or_default();
    let o = &event.involved_object;
    join_key(&[
        source.component.as_deref().unwrap_or(""),
        source.host.as_deref().unwrap_or(""),
        o.kind.as_deref().unwrap_or(""),
        o.namespace.as_deref().unwrap_or(""),
        o.name.as_deref().unwrap_or(""),
        o.uid.as_deref().unwrap_or(""),
        o.api_version.as_deref().unwrap_or(""),
        event.type_.as_deref().unwrap_or(""),
    ])
}

/// client-go's `EventCorrelate`: aggregate, observe (dedupe), spam-filter. `None` when the
/// spam filter drops the event.
fn correlate(
    c: &mut Correlator,
    shared: &RecorderState,
    event: Event,
    now: Timestamp,
) -> Option<CorrelatedWrite> {
    // `EventAggregate`.
    let full_key = event_key(&event);
    let (agg_key, local_key) = aggregate_key(&event);
    let fresh = || AggregateRecord {
        local_keys: BTreeSet::new(),
        last_timestamp: now,
    };
    let mut record = c.aggregates.get(&agg_key).cloned().unwrap_or_else(fresh);
    if now.duration_since(record.last_timestamp)
        > jiff::SignedDuration::from_secs(AGGREGATE_INTERVAL_SECS)
    {
        record = fresh();
    }
    record.local_keys.insert(local_key);
    record.last_timestamp = now;
    let aggregate = record.local_keys.len() >= AGGREGATE_MAX_EVENTS;
    if aggregate && let Some(any) = record.local_keys.iter().next().cloned() {
        // Do not grow the local key set beyond the maximum (`PopAny`).
        record.local_keys.remove(&any);
    }
    c.aggregates.put(agg_key.clone(), record);
    let (mut event, key) = if aggregate {
        let obj_name = event.involved_object.name.clone().unwrap_or_default();
        let combined = Event {
            metadata: ObjectMeta {
                name: Some(generate_event_name(shared, &obj_name, now)),
                namespace: event.metadata.namespace.clone(),
                ..Default::default()
            },
            count: Some(1),
            first_timestamp: Some(Time(now)),
            involved_object: event.involved_object.clone(),
            last_timestamp: Some(Time(now)),
            message: Some(format!(
                "(combined from similar events): {}",
                event.message.as_deref().unwrap_or("")
            )),
            type_: event.type_.clone(),
            reason: event.reason.clone(),
            source: event.source.clone(),
            ..Default::default()
        };
        (combined, agg_key)
    } else {
        (event, full_key)
    };

    // `eventObserve`: a repeat of an observed event becomes a patch.
    let mut patch = None;
    if let Some(last) = c.observations.get(&key).cloned()
        && last.count > 0
    {
        event.metadata.name = Some(last.name.clone());
        event.metadata.resource_version = last.resource_version.clone();
        event.first_timestamp = last.first_timestamp.clone();
        event.count = Some(last.count + 1);
        patch = Some(serde_json::json!({
            "count": last.count + 1,
            "lastTimestamp": event.last_timestamp.clone(),
            "message": event.message.clone().unwrap_or_default(),
        }));
    }
    c.observations.put(key, observation_of(&event));

    // `EventSourceObjectSpamFilter.Filter`: a token bucket per spam key.
    let bucket_key = spam_key(&event);
    let mut bucket = c.spam.get(&bucket_key).copied().unwrap_or(Bucket {
        tokens: SPAM_BURST,
        last: now,
    });
    let elapsed = now.duration_since(bucket.last).as_secs_f64().max(0.0);
    bucket.tokens = (bucket.tokens + elapsed * f64::from(SPAM_QPS)).min(SPAM_BURST);
    bucket.last = now;
    let allowed = bucket.tokens >= 1.0;
    if allowed {
        bucket.tokens -= 1.0;
    }
    c.spam.put(bucket_key, bucket);
    allowed.then_some(CorrelatedWrite { event, patch })
}

fn observation_of(event: &Event) -> Observation {
    Observation {
        count: event.count.unwrap_or(0),
        first_timestamp: event.first_timestamp.clone(),
        name: event.metadata.name.clone().unwrap_or_default(),
        resource_version: event.metadata.resource_version.clone(),
    }
}

/// `UpdateState`: remember the server's copy under its full event key.
fn update_state(c: &mut Correlator, written: &Event) {
    c.observations
        .put(event_key(written), observation_of(written));
}

/// `util.GenerateEventName`: `<name>.<hex UnixNano>`, or a random UUID when that is not a
/// valid DNS subdomain (kubernetes#127594). The nanoseconds are kept increasing when the
/// clock has not moved (a virtual clock), so names stay unique.
fn generate_event_name(shared: &RecorderState, obj_name: &str, now: Timestamp) -> String {
    let nanos = {
        let mut last = shared
            .last_name_nanos
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let mut nanos = now.as_nanosecond();
        if nanos <= *last {
            nanos = *last + 1;
        }
        *last = nanos;
        nanos
    };
    let name = if nanos < 0 {
        // Go prints a negative int64 in hex with a sign.
        format!("{obj_name}.-{:x}", nanos.unsigned_abs())
    } else {
        format!("{obj_name}.{nanos:x}")
    };
    if is_dns_subdomain(&name) {
        name
    } else {
        uuid::Uuid::new_v4().to_string()
    }
}

/// `validation.IsDNS1123Subdomain`: at most 253 characters of dot-separated lowercase
/// alphanumeric labels with inner dashes.
fn is_dns_subdomain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            let b = label.as_bytes();
            let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
            match (b.first(), b.last()) {
                (Some(f), Some(l)) => {
                    alnum(f) && alnum(l) && b.iter().all(|c| alnum(c) || *c == b'-')
                }
                _ => false,
            }
        })
}

struct CorrelatedWrite {
    event: Event,
    patch: Option<serde_json::Value>,
}

#[cfg(test)]
mod tests;
