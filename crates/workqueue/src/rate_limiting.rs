//! A delaying work queue whose delays come from a rate limiter.
//!
//! Mirrors client-go's `util/workqueue/rate_limiting_queue.go`
//! (`TypedRateLimitingInterface[T]`, `NewTypedRateLimitingQueueWithConfig`):
//! `add_rate_limited` is `add_after(item, limiter.when(item))`, `forget` and `num_requeues` are
//! the limiter's. The HPA controller builds its queue as
//! `RateLimitingQueue::with_config(FixedItemIntervalRateLimiter::default_hpa(sync_period),
//! QueueConfig::named("horizontalpodautoscaler", metrics))`.

use std::ops::Deref;
use std::sync::Arc;

use crate::delaying::DelayingQueue;
use crate::queue::{Item, QueueConfig};
use crate::rate_limiters::RateLimiter;

/// A work queue with rate-limited re-adds (client-go's `TypedRateLimitingInterface[T]`).
///
/// Dereferences to [`DelayingQueue`] (and through it to [`Queue`](crate::Queue)). Cheap to clone:
/// clones are handles to the same queue and limiter.
pub struct RateLimitingQueue<T> {
    queue: DelayingQueue<T>,
    limiter: Arc<dyn RateLimiter<T>>,
}

impl<T> Clone for RateLimitingQueue<T> {
    fn clone(&self) -> Self {
        Self {
            queue: self.queue.clone(),
            limiter: self.limiter.clone(),
        }
    }
}

impl<T> std::fmt::Debug for RateLimitingQueue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimitingQueue")
            .field("queue", &self.queue)
            .finish_non_exhaustive()
    }
}

impl<T: Item> RateLimitingQueue<T> {
    /// An unnamed queue without metrics (client-go's `NewTypedRateLimitingQueue`).
    ///
    /// # Panics
    /// Must be called within a Tokio runtime (the delaying queue spawns its timer task).
    pub fn new(limiter: impl RateLimiter<T> + 'static) -> Self {
        Self::with_config(limiter, QueueConfig::default())
    }

    /// A queue with the given options (client-go's `NewTypedRateLimitingQueueWithConfig`).
    ///
    /// # Panics
    /// Must be called within a Tokio runtime (the delaying queue spawns its timer task).
    pub fn with_config(limiter: impl RateLimiter<T> + 'static, config: QueueConfig) -> Self {
        Self::from_delaying_queue(limiter, DelayingQueue::with_config(config))
    }

    /// A rate-limiting queue over an existing delaying queue
    /// (client-go's `TypedRateLimitingQueueConfig.DelayingQueue`).
    pub fn from_delaying_queue(
        limiter: impl RateLimiter<T> + 'static,
        queue: DelayingQueue<T>,
    ) -> Self {
        Self {
            queue,
            limiter: Arc::new(limiter),
        }
    }

    /// The rate limiter.
    pub fn rate_limiter(&self) -> &dyn RateLimiter<T> {
        self.limiter.as_ref()
    }

    /// Adds `item` after the delay its rate limiter says (client-go's `AddRateLimited`).
    /// The limiter is consulted, with its side effects, even when the queue is shutting down.
    pub fn add_rate_limited(&self, item: T) {
        let delay = self.limiter.when(&item);
        self.queue.add_after(item, delay);
    }

    /// Tells the rate limiter to stop tracking `item` (client-go's `Forget`). Does not touch the
    /// queue: [`Queue::done`](crate::Queue::done) is still needed.
    pub fn forget(&self, item: &T) {
        self.limiter.forget(item);
    }

    /// How many times `item` has been requeued, per the rate limiter (client-go's `NumRequeues`).
    pub fn num_requeues(&self, item: &T) -> usize {
        self.limiter.num_requeues(item)
    }
}

impl<T> Deref for RateLimitingQueue<T> {
    type Target = DelayingQueue<T>;

    fn deref(&self) -> &DelayingQueue<T> {
        &self.queue
    }
}
