//! The basic de-duplicating work queue.
//!
//! Mirrors client-go's `util/workqueue/queue.go` (`Typed[T]`, `TypedQueueConfig`): a FIFO of
//! items to process, a *dirty* set (items that need processing) and a *processing* set (items
//! handed out by `get` whose `done` has not been called yet). Together they give the two
//! guarantees controllers rely on:
//!
//! * an item is queued at most once however often it is added before a worker picks it up, and
//! * an item is never handed to two workers at once: adding it while it is processed only marks
//!   it dirty, and `done` queues it again.
//!
//! Differences in form, not in behaviour: `get` is async and returns `None` where client-go
//! returns `shutdown == true`; `shut_down_with_drain` is async. The pluggable `Queue[T]` storage
//! of client-go (whose only upstream implementation is the FIFO used here) is not offered.

use std::collections::{HashSet, VecDeque};
use std::hash::Hash;
use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use crate::metrics::{InFlight, ItemTimes, QueueMetrics, WorkqueueMetrics};

/// Bounds every queued item satisfies: the controller uses `String` keys `namespace/name`.
pub trait Item: Clone + Eq + Hash + Send + Sync + 'static {}

impl<T: Clone + Eq + Hash + Send + Sync + 'static> Item for T {}

/// Options of a queue (client-go's `TypedQueueConfig`, `TypedDelayingQueueConfig` and
/// `TypedRateLimitingQueueConfig` share these).
#[derive(Debug, Clone, Default)]
pub struct QueueConfig {
    /// Name of the queue, the value of the metrics' `name` label. Empty: no metrics.
    pub name: String,
    /// Metric families to record into. `None`: no metrics (client-go's no-op provider).
    pub metrics: Option<WorkqueueMetrics>,
}

impl QueueConfig {
    /// A named queue recording into `metrics`.
    pub fn named(name: impl Into<String>, metrics: WorkqueueMetrics) -> Self {
        Self {
            name: name.into(),
            metrics: Some(metrics),
        }
    }
}

/// A de-duplicating FIFO work queue (client-go's `TypedInterface[T]`).
///
/// Cheap to clone: clones are handles to the same queue.
pub struct Queue<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Clone for Queue<T> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<T> std::fmt::Debug for Queue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("name", &self.shared.name)
            .finish_non_exhaustive()
    }
}

struct Shared<T> {
    name: String,
    state: Mutex<State<T>>,
    /// Wakes one `get` per queued item; all of them on shutdown.
    item_ready: Notify,
    /// Wakes `shut_down_with_drain` when the processing set empties or draining is cancelled.
    drained: Notify,
    /// Flips to `true` once, on shutdown; the delaying queue's timer task listens to it.
    shutdown: watch::Sender<bool>,
    metrics: Option<QueueMetrics>,
}

struct State<T> {
    /// Order of work. Every element is dirty and not processing.
    queue: VecDeque<T>,
    /// Items that need processing.
    dirty: HashSet<T>,
    /// Items handed out by `get` and not yet `done`.
    processing: HashSet<T>,
    shutting_down: bool,
    drain: bool,
    /// Only filled when the queue has metrics.
    times: ItemTimes<T>,
}

impl<T: Item> Default for Queue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Item> Queue<T> {
    /// An unnamed queue without metrics (client-go's `NewTyped`).
    pub fn new() -> Self {
        Self::with_config(QueueConfig::default())
    }

    /// A queue with the given options (client-go's `NewTypedWithConfig`). It records metrics
    /// only if it has both a non-empty name and metric families.
    pub fn with_config(config: QueueConfig) -> Self {
        let metrics = match (&config.metrics, config.name.is_empty()) {
            (Some(metrics), false) => Some(metrics),
            _ => None,
        };
        let shared = Arc::new(Shared {
            name: config.name.clone(),
            state: Mutex::new(State {
                queue: VecDeque::new(),
                dirty: HashSet::new(),
                processing: HashSet::new(),
                shutting_down: false,
                drain: false,
                times: ItemTimes::new(),
            }),
            item_ready: Notify::new(),
            drained: Notify::new(),
            shutdown: watch::Sender::new(false),
            metrics: metrics.map(|m| m.for_queue(&config.name)),
        });
        if let Some(metrics) = metrics {
            let source: Weak<dyn InFlight> = Arc::downgrade(&shared) as Weak<dyn InFlight>;
            metrics.track_in_flight(&config.name, source);
        }
        Self { shared }
    }

    /// The queue's name (empty for unnamed queues).
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.shared.lock()
    }

    /// Marks `item` as needing processing (client-go's `Add`).
    ///
    /// Ignored once the queue is shutting down. An item already waiting is not queued twice; an
    /// item being processed is only marked dirty and is queued again by [`Queue::done`].
    pub fn add(&self, item: T) {
        let mut state = self.lock();
        if state.shutting_down || state.dirty.contains(&item) {
            return;
        }
        if let Some(metrics) = &self.shared.metrics {
            metrics.add(&mut state.times, &item);
        }
        state.dirty.insert(item.clone());
        if state.processing.contains(&item) {
            return;
        }
        state.queue.push_back(item);
        drop(state);
        self.shared.item_ready.notify_one();
    }

    /// Number of items waiting to be handed out (client-go's `Len`). Items marked dirty while
    /// being processed are not counted. Informational only: do not gate `add`/`get` on it.
    pub fn len(&self) -> usize {
        self.lock().queue.len()
    }

    /// Whether no item waits to be handed out.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Waits for the next item (client-go's `Get`); `None` means the queue is shut down and the
    /// caller (a worker) should stop.
    ///
    /// After a shutdown the items still queued are handed out first; `None` comes only once the
    /// queue is empty. Every item returned must be passed to [`Queue::done`] after processing.
    /// Cancel-safe: dropping the future before it completes takes no item.
    pub async fn get(&self) -> Option<T> {
        loop {
            let mut notified = pin!(self.shared.item_ready.notified());
            // Register before looking at the state so that no add or shutdown is missed.
            notified.as_mut().enable();
            {
                let mut state = self.lock();
                if let Some(item) = state.queue.pop_front() {
                    if let Some(metrics) = &self.shared.metrics {
                        metrics.get(&mut state.times, &item);
                    }
                    state.processing.insert(item.clone());
                    state.dirty.remove(&item);
                    return Some(item);
                }
                if state.shutting_down {
                    return None;
                }
            }
            notified.await;
        }
    }

    /// Marks `item` as processed (client-go's `Done`). If it was added again meanwhile, it is
    /// queued again now.
    ///
    /// Contract (as upstream): call it exactly once per item obtained from [`Queue::get`].
    pub fn done(&self, item: &T) {
        let mut state = self.lock();
        if let Some(metrics) = &self.shared.metrics {
            metrics.done(&mut state.times, item);
        }
        state.processing.remove(item);
        let requeue = state.dirty.contains(item);
        if requeue {
            state.queue.push_back(item.clone());
        }
        let idle = state.processing.is_empty();
        drop(state);
        if requeue {
            self.shared.item_ready.notify_one();
        }
        if idle {
            // `shut_down_with_drain` waits exactly for an empty processing set.
            self.shared.drained.notify_waiters();
        }
    }

    /// Stops the queue at once (client-go's `ShutDown`): new adds are ignored, waiting `get`s
    /// return (after the items still queued are handed out), and a pending
    /// [`Queue::shut_down_with_drain`] stops waiting.
    pub fn shut_down(&self) {
        {
            let mut state = self.lock();
            state.drain = false;
            state.shutting_down = true;
        }
        self.wake_all();
    }

    /// Stops the queue and waits until every item handed out has been marked done
    /// (client-go's `ShutDownWithDrain`).
    ///
    /// Waits forever if workers never call `done`; a later [`Queue::shut_down`] ends the wait.
    pub async fn shut_down_with_drain(&self) {
        {
            let mut state = self.lock();
            state.drain = true;
            state.shutting_down = true;
        }
        self.wake_all();
        loop {
            let mut notified = pin!(self.shared.drained.notified());
            notified.as_mut().enable();
            {
                let state = self.lock();
                if state.processing.is_empty() || !state.drain {
                    return;
                }
            }
            notified.await;
        }
    }

    /// Whether the queue is shutting down (client-go's `ShuttingDown`).
    pub fn shutting_down(&self) -> bool {
        self.lock().shutting_down
    }

    fn wake_all(&self) {
        self.shared.item_ready.notify_waiters();
        self.shared.drained.notify_waiters();
        self.shared.shutdown.send_replace(true);
    }

    /// A receiver that sees `true` once the queue shuts down.
    pub(crate) fn subscribe_shutdown(&self) -> watch::Receiver<bool> {
        self.shared.shutdown.subscribe()
    }

    /// Counts one `add_after` call in the retries metric.
    pub(crate) fn record_retry(&self) {
        if let Some(metrics) = &self.shared.metrics {
            metrics.retry();
        }
    }
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<T: Item> InFlight for Shared<T> {
    fn in_flight_ages(&self, now: Instant) -> Option<(f64, f64)> {
        let state = self.lock();
        if state.shutting_down {
            return None;
        }
        Some(state.times.in_flight_ages(now))
    }
}
