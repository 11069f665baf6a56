//! client-go's work queue for the HPA controller: a de-duplicating FIFO, its delaying and
//! rate-limiting layers, client-go's rate limiters plus the HPA's fixed-interval limiter, an
//! async worker pool and the `workqueue_*` Prometheus metrics.
//!
//! Mirrors `staging/src/k8s.io/client-go/util/workqueue/` (`queue.go`, `delaying_queue.go`,
//! `rate_limiting_queue.go`, `default_rate_limiters.go`, `metrics.go`),
//! `staging/src/k8s.io/component-base/metrics/prometheus/workqueue/metrics.go` and
//! `pkg/controller/podautoscaler/rate_limiters.go`. Names follow client-go's in snake case
//! (`Add` → [`Queue::add`], `AddAfter` → [`DelayingQueue::add_after`], `AddRateLimited` →
//! [`RateLimitingQueue::add_rate_limited`], …).
//!
//! Without metrics (tests, hpactl): [`Queue::new`], [`DelayingQueue::new`],
//! [`RateLimitingQueue::new`]. With metrics: register one [`WorkqueueMetrics`] into the
//! process's [`prometheus::Registry`] and build each queue with [`QueueConfig::named`].
//!
//! Time is [`tokio::time::Instant`] throughout, so tests with Tokio's paused clock are exact.
//!
//! ```no_run
//! # async fn example() -> Result<(), prometheus::Error> {
//! use std::time::Duration;
//! use hpa_workqueue::{FixedItemIntervalRateLimiter, QueueConfig, RateLimitingQueue, WorkqueueMetrics};
//!
//! let registry = prometheus::Registry::new();
//! let metrics = WorkqueueMetrics::register(&registry)?;
//! let queue: RateLimitingQueue<String> = RateLimitingQueue::with_config(
//!     FixedItemIntervalRateLimiter::default_hpa(Duration::from_secs(15)),
//!     QueueConfig::named("horizontalpodautoscaler", metrics),
//! );
//! queue.add_rate_limited("default/web".to_owned());
//! # Ok(())
//! # }
//! ```

mod delaying;
mod metrics;
mod queue;
pub mod rate_limiters;
mod rate_limiting;
mod workers;

pub use delaying::DelayingQueue;
pub use metrics::{Stability, WorkqueueMetrics};
pub use queue::{Item, Queue, QueueConfig};
pub use rate_limiters::{
    BucketError, BucketRateLimiter, FixedItemIntervalRateLimiter,
    ItemExponentialFailureRateLimiter, ItemFastSlowRateLimiter, MaxOfRateLimiter, RateLimiter,
    WithMaxWaitRateLimiter, default_controller_rate_limiter, default_item_based_rate_limiter,
};
pub use rate_limiting::RateLimitingQueue;
pub use workers::run_workers;
