//! The worker pool: N workers until shutdown, never one key in two workers at once, failures
//! (errors and panics) logged without killing the pool.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hpa_workqueue::{FixedItemIntervalRateLimiter, Queue, RateLimitingQueue, run_workers};

/// Records which keys are being processed and fails the test if one is entered twice.
#[derive(Default)]
struct Tracker {
    in_flight: Mutex<HashSet<String>>,
    processed: Mutex<HashMap<String, usize>>,
    max_parallel: AtomicUsize,
    /// Times a key was entered while already in flight. Counted, not asserted: a panic inside
    /// the processing function would be caught (and only logged) by the pool.
    overlaps: AtomicUsize,
}

impl Tracker {
    fn enter(&self, key: &str) {
        let mut in_flight = self.in_flight.lock().unwrap();
        if !in_flight.insert(key.to_owned()) {
            self.overlaps.fetch_add(1, Ordering::Relaxed);
        }
        self.max_parallel
            .fetch_max(in_flight.len(), Ordering::Relaxed);
    }

    fn leave(&self, key: &str) {
        self.in_flight.lock().unwrap().remove(key);
        *self
            .processed
            .lock()
            .unwrap()
            .entry(key.to_owned())
            .or_default() += 1;
    }
}

async fn hammer(queue: Queue<String>, workers: usize) -> Arc<Tracker> {
    let tracker = Arc::new(Tracker::default());
    let pool = tokio::spawn(run_workers(queue.clone(), workers, {
        let tracker = tracker.clone();
        let queue = queue.clone();
        move |key: String| {
            let tracker = tracker.clone();
            let queue = queue.clone();
            async move {
                tracker.enter(&key);
                // Re-add the key being processed and its neighbour while working on it.
                queue.add(key.clone());
                let n: usize = key.trim_start_matches("key-").parse().unwrap();
                queue.add(format!("key-{}", (n + 1) % 8));
                for _ in 0..3 {
                    tokio::task::yield_now().await;
                }
                tracker.leave(&key);
                Ok::<(), String>(())
            }
        }
    }));
    for round in 0..200 {
        queue.add(format!("key-{}", round % 8));
        if round % 10 == 0 {
            tokio::task::yield_now().await;
        }
    }
    // Stop the endless re-adding after some work, then drain.
    let mut spins = 0;
    while tracker.processed.lock().unwrap().values().sum::<usize>() < 500 {
        spins += 1;
        assert!(spins < 1_000_000, "workers stalled");
        tokio::task::yield_now().await;
    }
    queue.shut_down();
    pool.await.unwrap();
    tracker
}

#[tokio::test(start_paused = true)]
async fn many_workers_never_share_a_key_single_thread() {
    let queue = Queue::new();
    let tracker = hammer(queue.clone(), 6).await;
    assert_eq!(
        tracker.overlaps.load(Ordering::Relaxed),
        0,
        "a key was processed twice at once"
    );
    assert!(tracker.in_flight.lock().unwrap().is_empty());
    let processed = tracker.processed.lock().unwrap();
    assert_eq!(processed.len(), 8, "every key was processed");
    assert!(
        tracker.max_parallel.load(Ordering::Relaxed) > 1,
        "workers did run in parallel"
    );
    assert!(processed.values().sum::<usize>() >= 500);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_workers_never_share_a_key_multi_thread() {
    let queue = Queue::new();
    let tracker = hammer(queue.clone(), 8).await;
    assert_eq!(
        tracker.overlaps.load(Ordering::Relaxed),
        0,
        "a key was processed twice at once"
    );
    assert!(tracker.in_flight.lock().unwrap().is_empty());
    assert_eq!(tracker.processed.lock().unwrap().len(), 8);
}

#[tokio::test(start_paused = true)]
async fn a_failed_item_is_still_marked_done() {
    let queue: Queue<String> = Queue::new();
    let attempts = Arc::new(AtomicUsize::new(0));
    let pool = tokio::spawn(run_workers(queue.clone(), 2, {
        let attempts = attempts.clone();
        move |_key: String| {
            let attempts = attempts.clone();
            async move {
                attempts.fetch_add(1, Ordering::Relaxed);
                Err::<(), _>("boom")
            }
        }
    }));
    queue.add("ns/a".to_owned());
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    // Had done been skipped, this add would only mark the key dirty and never run it again.
    queue.add("ns/a".to_owned());
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert_eq!(attempts.load(Ordering::Relaxed), 2);
    queue.shut_down();
    pool.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn hpa_style_workers_reconcile_once_per_period() {
    // horizontal.go's worker: get, reconcile, add_rate_limited again, done. Over 60s of virtual
    // time with a 15s period, each of three keys is reconciled 4 times (at 15, 30, 45, 60s).
    let period = Duration::from_secs(15);
    let queue = RateLimitingQueue::new(FixedItemIntervalRateLimiter::default_hpa(period));
    let reconciles = Arc::new(Mutex::new(HashMap::<String, Vec<Duration>>::new()));
    let start = tokio::time::Instant::now();
    let pool = tokio::spawn(run_workers(queue.queue().clone(), 5, {
        let reconciles = reconciles.clone();
        let queue = queue.clone();
        move |key: String| {
            let reconciles = reconciles.clone();
            let queue = queue.clone();
            async move {
                reconciles
                    .lock()
                    .unwrap()
                    .entry(key.clone())
                    .or_default()
                    .push(start.elapsed());
                queue.add_rate_limited(key);
                Ok::<(), String>(())
            }
        }
    }));
    for key in ["ns/a", "ns/b", "ns/c"] {
        queue.add_rate_limited(key.to_owned());
    }
    tokio::time::sleep(Duration::from_secs(61)).await;
    queue.shut_down();
    pool.await.unwrap();
    let reconciles = reconciles.lock().unwrap();
    assert_eq!(reconciles.len(), 3);
    for (key, times) in reconciles.iter() {
        assert_eq!(times.len(), 4, "{key}: {times:?}");
        for (n, at) in times.iter().enumerate() {
            let due = period * (n as u32 + 1);
            assert!(
                *at >= due && *at < due + Duration::from_millis(10),
                "{key}: {times:?}"
            );
        }
    }
}
