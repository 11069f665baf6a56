//! A work queue that can add items after a delay.
//!
//! Mirrors client-go's `util/workqueue/delaying_queue.go` (`delayingType[T]`, `AddAfter`,
//! `waitingLoop`). Waiting items are kept ordered by ready time; a single timer task per queue
//! sleeps until the earliest one is due and adds every due item to the underlying queue, in
//! ready-time order.
//!
//! Rules kept from upstream:
//! * `add_after` counts one retry (metric `workqueue_retries_total`) for every call made before
//!   shutdown, including zero delays; a zero delay adds at once.
//! * An item waits at most once: adding an item that already waits only moves its ready time
//!   *earlier*, never later.
//! * On shutdown, waiting items are discarded.
//!
//! Differences in form: `add_after` records the entry directly under a lock (client-go sends it
//! over a 1000-slot channel to its waiting goroutine, which then applies the same rules), so an
//! entry is in place when `add_after` returns. client-go's 10s heartbeat, which only guards
//! against missed timer wake-ups, is not needed with Tokio's timer. Negative delays cannot be
//! expressed with [`Duration`]; callers computing one should saturate it to zero, which is what
//! upstream does with them (add at once). Ties between equal ready times are broken by call
//! order (upstream's heap leaves them unspecified).

use std::collections::{BTreeMap, HashMap};
use std::ops::Deref;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use crate::queue::{Item, Queue, QueueConfig};

/// About 30 years: the ready time used when `now + delay` does not fit in an [`Instant`].
const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

/// A work queue with [`DelayingQueue::add_after`] (client-go's `TypedDelayingInterface[T]`).
///
/// Dereferences to the underlying [`Queue`] for `add`, `get`, `done`, `len`, `shut_down`…;
/// shutting that queue down also stops the timer task. Cheap to clone: clones are handles to the
/// same queue.
pub struct DelayingQueue<T> {
    inner: Arc<Inner<T>>,
}

impl<T> Clone for DelayingQueue<T> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<T> std::fmt::Debug for DelayingQueue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DelayingQueue")
            .field("queue", &self.inner.queue)
            .finish_non_exhaustive()
    }
}

struct Inner<T> {
    queue: Queue<T>,
    waiting: Mutex<Waiting<T>>,
    /// Wakes the timer task when the earliest ready time moved earlier or the queue was dropped.
    wake: Arc<Notify>,
}

impl<T> Drop for Inner<T> {
    fn drop(&mut self) {
        // Let the timer task notice that the last handle is gone.
        self.wake.notify_one();
    }
}

/// Items waiting for their ready time: ordered by (ready time, call sequence) and indexed by item.
struct Waiting<T> {
    by_time: BTreeMap<(Instant, u64), T>,
    by_item: HashMap<T, (Instant, u64)>,
    next_seq: u64,
}

impl<T: Item> Waiting<T> {
    /// Inserts or moves the entry earlier; returns whether the earliest ready time changed.
    fn insert(&mut self, item: T, ready_at: Instant) -> bool {
        let key = (ready_at, self.next_seq);
        if let Some(existing) = self.by_item.get_mut(&item) {
            if ready_at >= existing.0 {
                return false;
            }
            let old = std::mem::replace(existing, key);
            self.by_time.remove(&old);
        } else {
            self.by_item.insert(item.clone(), key);
        }
        self.next_seq += 1;
        self.by_time.insert(key, item);
        self.by_time.first_key_value().map(|(k, _)| *k) == Some(key)
    }

    /// Removes and returns the entries due at `now`, earliest first, and the next ready time.
    fn take_due(&mut self, now: Instant) -> (Vec<T>, Option<Instant>) {
        let mut due = Vec::new();
        while let Some(entry) = self.by_time.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let item = entry.remove();
            self.by_item.remove(&item);
            due.push(item);
        }
        (due, self.by_time.first_key_value().map(|((at, _), _)| *at))
    }

    fn clear(&mut self) {
        self.by_time.clear();
        self.by_item.clear();
    }
}

impl<T: Item> Default for DelayingQueue<T> {
    /// Same as [`DelayingQueue::new`]; must be called within a Tokio runtime.
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Item> DelayingQueue<T> {
    /// An unnamed delaying queue without metrics (client-go's `NewTypedDelayingQueue`).
    ///
    /// # Panics
    /// Must be called within a Tokio runtime: it spawns the timer task.
    pub fn new() -> Self {
        Self::with_config(QueueConfig::default())
    }

    /// A delaying queue over a new [`Queue`] built from `config`
    /// (client-go's `NewTypedDelayingQueueWithConfig`).
    ///
    /// # Panics
    /// Must be called within a Tokio runtime: it spawns the timer task.
    pub fn with_config(config: QueueConfig) -> Self {
        Self::from_queue(Queue::with_config(config))
    }

    /// A delaying queue over an existing queue (client-go's `DelayingQueueConfig.Queue`). Retries
    /// are recorded in that queue's metrics.
    ///
    /// # Panics
    /// Must be called within a Tokio runtime: it spawns the timer task.
    pub fn from_queue(queue: Queue<T>) -> Self {
        let wake = Arc::new(Notify::new());
        let shutdown = queue.subscribe_shutdown();
        let inner = Arc::new(Inner {
            queue,
            waiting: Mutex::new(Waiting {
                by_time: BTreeMap::new(),
                by_item: HashMap::new(),
                next_seq: 0,
            }),
            wake: wake.clone(),
        });
        tokio::spawn(timer_loop(Arc::downgrade(&inner), wake, shutdown));
        Self { inner }
    }

    /// The underlying queue.
    pub fn queue(&self) -> &Queue<T> {
        &self.inner.queue
    }

    /// Adds `item` once `delay` has passed (client-go's `AddAfter`); a zero delay adds at once.
    ///
    /// Ignored once the queue is shutting down. If the item already waits, the earlier of the two
    /// ready times is kept.
    pub fn add_after(&self, item: T, delay: Duration) {
        let queue = &self.inner.queue;
        if queue.shutting_down() {
            return;
        }
        queue.record_retry();
        if delay.is_zero() {
            queue.add(item);
            return;
        }
        let now = Instant::now();
        let ready_at = now
            .checked_add(delay)
            .or_else(|| now.checked_add(FAR_FUTURE))
            .unwrap_or(now);
        if self.inner.lock_waiting().insert(item, ready_at) {
            self.inner.wake.notify_one();
        }
    }

    /// Number of items waiting for their ready time (not yet in the queue).
    pub fn waiting_len(&self) -> usize {
        self.inner.lock_waiting().by_item.len()
    }
}

impl<T> Inner<T> {
    fn lock_waiting(&self) -> MutexGuard<'_, Waiting<T>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<T> Deref for DelayingQueue<T> {
    type Target = Queue<T>;

    fn deref(&self) -> &Queue<T> {
        &self.inner.queue
    }
}

/// The single timer task of a delaying queue (client-go's `waitingLoop`). Holds the queue only
/// weakly so that dropping every handle ends it; shutting the queue down ends it too.
async fn timer_loop<T: Item>(
    inner: Weak<Inner<T>>,
    wake: Arc<Notify>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let next = {
            let Some(inner) = inner.upgrade() else {
                return;
            };
            if inner.queue.shutting_down() {
                inner.lock_waiting().clear();
                return;
            }
            let (due, next) = inner.lock_waiting().take_due(Instant::now());
            for item in due {
                inner.queue.add(item);
            }
            next
        };
        let sleep = async {
            match next {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = sleep => {}
            () = wake.notified() => {}
            changed = shutdown.changed() => {
                if changed.is_err() {
                    // The queue itself is gone.
                    return;
                }
            }
        }
    }
}
