//! Rate limiters deciding how long an item waits before it is queued again.
//!
//! Mirrors client-go's `util/workqueue/default_rate_limiters.go` (`TypedRateLimiter` and its
//! implementations) and the HPA's `pkg/controller/podautoscaler/rate_limiters.go`
//! (`FixedItemIntervalRateLimiter`, `NewDefaultHPARateLimiter`).
//!
//! # The bucket limiter on `governor`
//!
//! client-go's `TypedBucketRateLimiter.When` is `rate.Limiter.Reserve().Delay()`: it *always*
//! takes a token, letting the bucket go into debt, and returns how long until that token exists.
//! Consecutive calls on an empty bucket therefore return growing delays (with 10 qps: 100ms,
//! 200ms, 300ms…). governor implements the same token bucket as GCRA (its state is the
//! "theoretical arrival time"), but its `check` only takes a cell when one is available now and
//! otherwise answers `NotUntil(t)` without taking anything. A reservation is reproduced by
//! asking again *at* `t`: [`BucketRateLimiter`] drives governor with its own clock, a cell it sets
//! before each `check`:
//!
//! 1. set the clock to now and `check`; on success the delay is zero;
//! 2. on `NotUntil(t)`, set the clock to `t` and `check` again; at `t` the cell conforms, so
//!    governor takes it and moves its arrival time one emission interval further, exactly as a
//!    reservation does; the delay is `t − now`.
//!
//! Tokens reserved this way are not handed out again when real time reaches `t`, because
//! governor's state already accounts for them. Both steps run under one mutex. "Now" is
//! [`tokio::time::Instant::now`], so the limiter follows Tokio's paused clock in tests.
//! Delays can differ from Go's by a nanosecond (Go converts float token counts to durations).

use std::collections::HashMap;
use std::hash::Hash;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use governor::clock::Clock;
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter as Governor};
use tokio::time::Instant;

/// Decides the delay before an item is processed again (client-go's `TypedRateLimiter[T]`).
pub trait RateLimiter<T>: Send + Sync {
    /// How long `item` should wait before it is added again. May record a failure.
    fn when(&self, item: &T) -> Duration;
    /// Stops tracking `item` (it succeeded or was deleted). Does not touch the queue.
    fn forget(&self, item: &T);
    /// How many times `item` has been requeued (semantics vary per limiter).
    fn num_requeues(&self, item: &T) -> usize;
}

impl<T, R: RateLimiter<T> + ?Sized> RateLimiter<T> for Box<R> {
    fn when(&self, item: &T) -> Duration {
        (**self).when(item)
    }
    fn forget(&self, item: &T) {
        (**self).forget(item);
    }
    fn num_requeues(&self, item: &T) -> usize {
        (**self).num_requeues(item)
    }
}

impl<T, R: RateLimiter<T> + ?Sized> RateLimiter<T> for Arc<R> {
    fn when(&self, item: &T) -> Duration {
        (**self).when(item)
    }
    fn forget(&self, item: &T) {
        (**self).forget(item);
    }
    fn num_requeues(&self, item: &T) -> usize {
        (**self).num_requeues(item)
    }
}

fn lock<M>(mutex: &Mutex<M>) -> MutexGuard<'_, M> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Base delay of [`default_controller_rate_limiter`]'s exponential part.
pub const DEFAULT_CONTROLLER_BASE_DELAY: Duration = Duration::from_millis(5);
/// Maximum delay of [`default_controller_rate_limiter`]'s exponential part.
pub const DEFAULT_CONTROLLER_MAX_DELAY: Duration = Duration::from_secs(1000);
/// Overall rate, in items per second, of [`default_controller_rate_limiter`]'s bucket.
pub const DEFAULT_CONTROLLER_QPS: f64 = 10.0;
/// Burst of [`default_controller_rate_limiter`]'s bucket.
pub const DEFAULT_CONTROLLER_BURST: u32 = 100;
/// Base delay of [`default_item_based_rate_limiter`].
pub const DEFAULT_ITEM_BASED_BASE_DELAY: Duration = Duration::from_millis(1);
/// Maximum delay of [`default_item_based_rate_limiter`].
pub const DEFAULT_ITEM_BASED_MAX_DELAY: Duration = Duration::from_secs(1000);

/// client-go's `DefaultTypedControllerRateLimiter`: the larger of a per-item exponential backoff
/// (5ms doubling up to 1000s) and an overall 10 qps bucket with a burst of 100.
pub fn default_controller_rate_limiter<T: Eq + Hash + Clone + Send + 'static>()
-> MaxOfRateLimiter<T> {
    const BURST: NonZeroU32 = match NonZeroU32::new(DEFAULT_CONTROLLER_BURST) {
        Some(burst) => burst,
        None => NonZeroU32::MIN,
    };
    // 10 qps: one token every 100ms.
    let quota = Quota::with_period(Duration::from_millis(100))
        .unwrap_or_else(|| Quota::per_second(NonZeroU32::MIN))
        .allow_burst(BURST);
    MaxOfRateLimiter::new(vec![
        Box::new(ItemExponentialFailureRateLimiter::new(
            DEFAULT_CONTROLLER_BASE_DELAY,
            DEFAULT_CONTROLLER_MAX_DELAY,
        )),
        Box::new(BucketRateLimiter::from_quota(quota)),
    ])
}

/// client-go's `DefaultTypedItemBasedRateLimiter`: per-item exponential backoff, 1ms doubling up
/// to 1000s.
pub fn default_item_based_rate_limiter<T: Eq + Hash + Clone + Send>()
-> ItemExponentialFailureRateLimiter<T> {
    ItemExponentialFailureRateLimiter::new(
        DEFAULT_ITEM_BASED_BASE_DELAY,
        DEFAULT_ITEM_BASED_MAX_DELAY,
    )
}

/// Per-item exponential backoff (client-go's `TypedItemExponentialFailureRateLimiter`):
/// the n-th `when` for an item (from 0) returns `min(base × 2ⁿ, max)`.
#[derive(Debug)]
pub struct ItemExponentialFailureRateLimiter<T> {
    failures: Mutex<HashMap<T, usize>>,
    base_delay: Duration,
    max_delay: Duration,
}

impl<T: Eq + Hash + Clone> ItemExponentialFailureRateLimiter<T> {
    /// A limiter starting at `base_delay` and capped at `max_delay`.
    pub fn new(base_delay: Duration, max_delay: Duration) -> Self {
        Self {
            failures: Mutex::new(HashMap::new()),
            base_delay,
            max_delay,
        }
    }
}

impl<T: Eq + Hash + Clone + Send> RateLimiter<T> for ItemExponentialFailureRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        let exp = {
            let mut failures = lock(&self.failures);
            let count = failures.entry(item.clone()).or_insert(0);
            let exp = *count;
            *count += 1;
            exp
        };
        // As upstream: computed in float nanoseconds, capped where it no longer fits an int64.
        let exponent = i32::try_from(exp).unwrap_or(i32::MAX);
        let backoff = self.base_delay.as_nanos() as f64 * 2f64.powi(exponent);
        if backoff > i64::MAX as f64 {
            return self.max_delay;
        }
        // Float to integer conversion truncates, as Go's `time.Duration(backoff)`.
        let calculated = Duration::from_nanos(backoff as u64);
        calculated.min(self.max_delay)
    }

    fn forget(&self, item: &T) {
        lock(&self.failures).remove(item);
    }

    fn num_requeues(&self, item: &T) -> usize {
        lock(&self.failures).get(item).copied().unwrap_or(0)
    }
}

/// Per-item fast then slow retries (client-go's `TypedItemFastSlowRateLimiter`): the first
/// `max_fast_attempts` calls return `fast_delay`, later ones `slow_delay`.
#[derive(Debug)]
pub struct ItemFastSlowRateLimiter<T> {
    failures: Mutex<HashMap<T, usize>>,
    fast_delay: Duration,
    slow_delay: Duration,
    max_fast_attempts: usize,
}

impl<T: Eq + Hash + Clone> ItemFastSlowRateLimiter<T> {
    /// A limiter returning `fast_delay` for the first `max_fast_attempts` tries of an item.
    pub fn new(fast_delay: Duration, slow_delay: Duration, max_fast_attempts: usize) -> Self {
        Self {
            failures: Mutex::new(HashMap::new()),
            fast_delay,
            slow_delay,
            max_fast_attempts,
        }
    }
}

impl<T: Eq + Hash + Clone + Send> RateLimiter<T> for ItemFastSlowRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        let mut failures = lock(&self.failures);
        let count = failures.entry(item.clone()).or_insert(0);
        *count += 1;
        if *count <= self.max_fast_attempts {
            self.fast_delay
        } else {
            self.slow_delay
        }
    }

    fn forget(&self, item: &T) {
        lock(&self.failures).remove(item);
    }

    fn num_requeues(&self, item: &T) -> usize {
        lock(&self.failures).get(item).copied().unwrap_or(0)
    }
}

/// The most restrictive of several limiters (client-go's `TypedMaxOfRateLimiter`). Every call is
/// forwarded to all of them, so all side effects happen.
pub struct MaxOfRateLimiter<T> {
    limiters: Vec<Box<dyn RateLimiter<T>>>,
}

impl<T> std::fmt::Debug for MaxOfRateLimiter<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MaxOfRateLimiter")
            .field("limiters", &self.limiters.len())
            .finish()
    }
}

impl<T> MaxOfRateLimiter<T> {
    /// Combines `limiters`.
    pub fn new(limiters: Vec<Box<dyn RateLimiter<T>>>) -> Self {
        Self { limiters }
    }
}

impl<T> RateLimiter<T> for MaxOfRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        self.limiters
            .iter()
            .map(|limiter| limiter.when(item))
            .fold(Duration::ZERO, Duration::max)
    }

    fn forget(&self, item: &T) {
        for limiter in &self.limiters {
            limiter.forget(item);
        }
    }

    fn num_requeues(&self, item: &T) -> usize {
        self.limiters
            .iter()
            .map(|limiter| limiter.num_requeues(item))
            .fold(0, usize::max)
    }
}

/// Caps another limiter's delay (client-go's `TypedWithMaxWaitRateLimiter`).
#[derive(Debug)]
pub struct WithMaxWaitRateLimiter<R> {
    limiter: R,
    max_delay: Duration,
}

impl<R> WithMaxWaitRateLimiter<R> {
    /// `limiter` with its delays capped at `max_delay`.
    pub fn new(limiter: R, max_delay: Duration) -> Self {
        Self { limiter, max_delay }
    }
}

impl<T, R: RateLimiter<T>> RateLimiter<T> for WithMaxWaitRateLimiter<R> {
    fn when(&self, item: &T) -> Duration {
        self.limiter.when(item).min(self.max_delay)
    }

    fn forget(&self, item: &T) {
        self.limiter.forget(item);
    }

    fn num_requeues(&self, item: &T) -> usize {
        self.limiter.num_requeues(item)
    }
}

/// The HPA controller's limiter (`FixedItemIntervalRateLimiter` in
/// `pkg/controller/podautoscaler/rate_limiters.go`): every item always waits the same interval,
/// the sync period; `num_requeues` is always 1 and `forget` does nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedItemIntervalRateLimiter {
    interval: Duration,
}

impl FixedItemIntervalRateLimiter {
    /// A limiter returning `interval` for every item (`NewFixedItemIntervalRateLimiter`).
    pub const fn new(interval: Duration) -> Self {
        Self { interval }
    }

    /// The HPA controller's limiter for a sync period (`NewDefaultHPARateLimiter`): just the
    /// fixed interval, as upstream (no max-of with the default controller limiter).
    pub const fn default_hpa(interval: Duration) -> Self {
        Self::new(interval)
    }

    /// The interval returned by `when`.
    pub const fn interval(&self) -> Duration {
        self.interval
    }
}

impl<T> RateLimiter<T> for FixedItemIntervalRateLimiter {
    fn when(&self, _item: &T) -> Duration {
        self.interval
    }

    fn forget(&self, _item: &T) {}

    fn num_requeues(&self, _item: &T) -> usize {
        1
    }
}

/// Why a [`BucketRateLimiter`] could not be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BucketError {
    /// The rate is zero, negative, not finite, or too high to express one token's interval.
    #[error("invalid bucket rate limiter qps {0}: must be a positive, finite number")]
    InvalidQps(f64),
    /// The burst is zero: no token could ever be taken.
    #[error("invalid bucket rate limiter burst 0: must be positive")]
    ZeroBurst,
}

/// The clock governor reads: a cell [`BucketRateLimiter`] sets, under its mutex, to the instant
/// it wants a decision for (nanoseconds since the limiter's creation).
#[derive(Debug, Clone, Default)]
struct DecisionClock(Arc<AtomicU64>);

impl DecisionClock {
    fn set(&self, at: Duration) {
        let nanos = u64::try_from(at.as_nanos()).unwrap_or(u64::MAX);
        self.0.store(nanos, Ordering::Relaxed);
    }
}

impl Clock for DecisionClock {
    type Instant = Duration;

    fn now(&self) -> Duration {
        Duration::from_nanos(self.0.load(Ordering::Relaxed))
    }
}

type DirectLimiter = Governor<NotKeyed, InMemoryState, DecisionClock, NoOpMiddleware<Duration>>;

/// An overall token bucket shared by all items (client-go's `TypedBucketRateLimiter` over
/// `rate.NewLimiter(qps, burst)`): starts full with `burst` tokens, refills at `qps` per
/// second, and every `when` reserves one token, returning how long until it exists. See the
/// module documentation for how this maps onto governor.
pub struct BucketRateLimiter {
    limiter: DirectLimiter,
    clock: DecisionClock,
    /// Tokio instant matching governor time zero; the mutex serialises the two-step reservation.
    origin: Mutex<Instant>,
}

impl std::fmt::Debug for BucketRateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BucketRateLimiter").finish_non_exhaustive()
    }
}

impl BucketRateLimiter {
    /// A bucket refilling at `qps` tokens per second holding at most `burst` tokens.
    pub fn new(qps: f64, burst: u32) -> Result<Self, BucketError> {
        if !qps.is_finite() || qps <= 0.0 {
            return Err(BucketError::InvalidQps(qps));
        }
        let burst = NonZeroU32::new(burst).ok_or(BucketError::ZeroBurst)?;
        let period =
            Duration::try_from_secs_f64(1.0 / qps).map_err(|_| BucketError::InvalidQps(qps))?;
        let quota = Quota::with_period(period).ok_or(BucketError::InvalidQps(qps))?;
        Ok(Self::from_quota(quota.allow_burst(burst)))
    }

    /// A bucket with a governor quota (one token per `replenish_interval`, `burst_size` tokens).
    pub fn from_quota(quota: Quota) -> Self {
        let clock = DecisionClock::default();
        Self {
            limiter: Governor::direct_with_clock(quota, clock.clone()),
            clock,
            origin: Mutex::new(Instant::now()),
        }
    }

    /// Reserves one token and returns how long until it is available (`Reserve().Delay()`).
    pub fn reserve(&self) -> Duration {
        let origin = lock(&self.origin);
        let now = Instant::now().saturating_duration_since(*origin);
        self.clock.set(now);
        let Err(not_until) = self.limiter.check() else {
            return Duration::ZERO;
        };
        let available_at = not_until.earliest_possible();
        self.clock.set(available_at);
        // At `available_at` the cell conforms: this takes it, as a reservation would.
        let _taken = self.limiter.check();
        available_at.saturating_sub(now)
    }
}

impl<T> RateLimiter<T> for BucketRateLimiter {
    fn when(&self, _item: &T) -> Duration {
        self.reserve()
    }

    fn forget(&self, _item: &T) {}

    fn num_requeues(&self, _item: &T) -> usize {
        0
    }
}
