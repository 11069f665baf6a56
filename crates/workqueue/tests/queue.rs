//! Basic, delaying and rate-limiting queue semantics, after client-go's `queue_test.go`,
//! `delaying_queue_test.go` and `rate_limiting_queue_test.go`. Tokio's clock is paused:
//! "would block" is checked with a virtual-time timeout, which fires only when nothing else can
//! make progress.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::future::Future;
use std::time::Duration;

use hpa_workqueue::{
    DelayingQueue, FixedItemIntervalRateLimiter, ItemExponentialFailureRateLimiter, Queue,
    RateLimitingQueue,
};
use tokio::time::Instant;

/// Runs `future` until it completes or the runtime has nothing left to do for an hour of
/// virtual time; `None` means it would block.
async fn within_an_hour<F: Future>(future: F) -> Option<F::Output> {
    tokio::time::timeout(Duration::from_secs(3600), future)
        .await
        .ok()
}

/// Lets spawned tasks run until they block.
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

fn key(s: &str) -> String {
    s.to_owned()
}

// ---- basic queue -------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn add_deduplicates_waiting_items() {
    let q = Queue::new();
    q.add(key("foo"));
    assert_eq!(q.len(), 1);
    q.add(key("bar"));
    assert_eq!(q.len(), 2);
    q.add(key("foo"));
    assert_eq!(
        q.len(),
        2,
        "adding a waiting item again must not grow the queue"
    );

    assert_eq!(q.get().await.as_deref(), Some("foo"), "FIFO order");
    assert_eq!(q.get().await.as_deref(), Some("bar"));
    assert!(q.is_empty());
    assert_eq!(
        within_an_hour(q.get()).await,
        None,
        "get waits on an empty queue"
    );
}

#[tokio::test(start_paused = true)]
async fn add_while_processing_requeues_after_done() {
    let q = Queue::new();
    q.add(key("foo"));
    let item = q.get().await.unwrap();
    assert_eq!(item, "foo");

    q.add(item.clone());
    q.add(item.clone());
    assert_eq!(q.len(), 0, "an item being processed is only marked dirty");
    assert_eq!(
        within_an_hour(q.get()).await,
        None,
        "not handed out twice at once"
    );

    q.done(&item);
    assert_eq!(q.len(), 1, "done queues the dirty item again, once");
    let again = q.get().await.unwrap();
    assert_eq!(again, "foo");
    q.done(&again);
    assert_eq!(q.len(), 0);
    assert_eq!(within_an_hour(q.get()).await, None);
}

#[tokio::test(start_paused = true)]
async fn get_waits_for_an_add() {
    let q: Queue<String> = Queue::new();
    let getter = tokio::spawn({
        let q = q.clone();
        async move { q.get().await }
    });
    settle().await;
    assert!(
        !getter.is_finished(),
        "get must wait while the queue is empty"
    );
    q.add(key("foo"));
    assert_eq!(getter.await.unwrap().as_deref(), Some("foo"));
}

#[tokio::test(start_paused = true)]
async fn every_waiting_getter_gets_one_item() {
    let q: Queue<String> = Queue::new();
    let getters: Vec<_> = (0..3)
        .map(|_| {
            let q = q.clone();
            tokio::spawn(async move { q.get().await })
        })
        .collect();
    settle().await;
    for name in ["a", "b", "c"] {
        q.add(key(name));
    }
    let mut got = Vec::new();
    for getter in getters {
        got.push(getter.await.unwrap().unwrap());
    }
    got.sort();
    assert_eq!(got, ["a", "b", "c"]);
}

#[tokio::test(start_paused = true)]
async fn shut_down_wakes_getters_and_ignores_adds() {
    let q: Queue<String> = Queue::new();
    let getter = tokio::spawn({
        let q = q.clone();
        async move { q.get().await }
    });
    settle().await;
    assert!(!q.shutting_down());
    q.shut_down();
    assert!(q.shutting_down());
    assert_eq!(
        getter.await.unwrap(),
        None,
        "a waiting get reports shutdown"
    );
    q.add(key("added after shutdown!"));
    assert_eq!(q.len(), 0);
    assert_eq!(q.get().await, None);
}

#[tokio::test(start_paused = true)]
async fn items_queued_before_shutdown_are_still_handed_out() {
    let q = Queue::new();
    q.add(key("foo"));
    q.add(key("bar"));
    q.shut_down();
    assert_eq!(q.get().await.as_deref(), Some("foo"));
    assert_eq!(q.get().await.as_deref(), Some("bar"));
    assert_eq!(q.get().await, None);
}

#[tokio::test(start_paused = true)]
async fn shut_down_with_drain_waits_for_in_flight_items() {
    let q = Queue::new();
    q.add(key("foo"));
    q.add(key("bar"));
    let first = q.get().await.unwrap();
    let second = q.get().await.unwrap();

    let drain = tokio::spawn({
        let q = q.clone();
        async move { q.shut_down_with_drain().await }
    });
    settle().await;
    assert!(q.shutting_down());
    assert_eq!(q.get().await, None, "getters are told to stop at once");
    assert!(!drain.is_finished(), "two items are still processed");
    q.done(&first);
    settle().await;
    assert!(!drain.is_finished(), "one item is still processed");
    q.done(&second);
    drain.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn shut_down_ends_a_pending_drain() {
    let q = Queue::new();
    q.add(key("foo"));
    let _in_flight = q.get().await.unwrap();
    let drain = tokio::spawn({
        let q = q.clone();
        async move { q.shut_down_with_drain().await }
    });
    settle().await;
    assert!(!drain.is_finished());
    q.shut_down();
    drain.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn shut_down_with_drain_returns_at_once_when_idle() {
    let q: Queue<String> = Queue::new();
    assert_eq!(within_an_hour(q.shut_down_with_drain()).await, Some(()));
}

#[tokio::test(start_paused = true)]
async fn drain_with_a_dirty_item_hands_it_out_again() {
    // client-go's TestQueueDrainageUsingShutDownWithDrainWithDirtyItem.
    let q = Queue::new();
    q.add(key("foo"));
    let gotten = q.get().await.unwrap();
    q.add(key("foo"));
    let drain = tokio::spawn({
        let q = q.clone();
        async move { q.shut_down_with_drain().await }
    });
    settle().await;
    assert_eq!(
        q.get().await,
        None,
        "nothing queued: the dirty item waits for done"
    );
    q.done(&gotten);
    let again = q.get().await;
    assert_eq!(
        again.as_deref(),
        Some("foo"),
        "done re-queued the dirty item"
    );
    q.done(&key("foo"));
    assert_eq!(q.get().await, None);
    drain.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producers_and_consumers_with_re_adds() {
    // client-go's TestAddWhileProcessing: every consumer re-adds the item it is processing the
    // first time it sees it. Re-adds while processing coalesce; no item is ever processed by two
    // consumers at once, and the queue ends empty after a drained shutdown.
    let q: Queue<u32> = Queue::new();
    let producers: Vec<_> = (0..50)
        .map(|i| {
            let q = q.clone();
            tokio::spawn(async move { q.add(i) })
        })
        .collect();
    let in_flight = std::sync::Arc::new(std::sync::Mutex::new(std::collections::HashSet::new()));
    let consumers: Vec<_> = (0..10)
        .map(|_| {
            let q = q.clone();
            let in_flight = in_flight.clone();
            tokio::spawn(async move {
                let mut seen = std::collections::HashMap::<u32, u32>::new();
                while let Some(item) = q.get().await {
                    assert!(
                        in_flight.lock().unwrap().insert(item),
                        "{item} processed twice at once"
                    );
                    let count = seen.entry(item).or_default();
                    *count += 1;
                    if *count < 2 {
                        q.add(item);
                    }
                    tokio::task::yield_now().await;
                    in_flight.lock().unwrap().remove(&item);
                    q.done(&item);
                }
            })
        })
        .collect();
    for producer in producers {
        producer.await.unwrap();
    }
    q.shut_down_with_drain().await;
    for consumer in consumers {
        consumer.await.unwrap();
    }
    assert_eq!(q.len(), 0);
}

// ---- delaying queue ----------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn add_after_adds_when_the_delay_has_passed() {
    let q = DelayingQueue::new();
    let start = Instant::now();
    q.add_after(key("foo"), Duration::from_millis(50));
    assert_eq!(q.len(), 0, "not before its time");
    assert_eq!(q.waiting_len(), 1);

    assert_eq!(
        tokio::time::timeout(Duration::from_millis(49), q.get())
            .await
            .ok(),
        None,
        "not ready after 49ms"
    );
    let item = q.get().await;
    assert_eq!(item.as_deref(), Some("foo"));
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(50) && waited < Duration::from_millis(52),
        "ready after 50ms (timer granularity 1ms), waited {waited:?}"
    );
    assert_eq!(q.waiting_len(), 0);
    q.done(&key("foo"));
    assert_eq!(within_an_hour(q.get()).await, None, "added once only");
}

#[tokio::test(start_paused = true)]
async fn zero_delay_adds_at_once() {
    let q = DelayingQueue::new();
    q.add_after(key("foo"), Duration::ZERO);
    assert_eq!(q.len(), 1);
    assert_eq!(q.waiting_len(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_waiting_item_only_moves_earlier() {
    // client-go's TestDeduping.
    let q = DelayingQueue::new();
    let start = Instant::now();
    q.add_after(key("foo"), Duration::from_millis(50));
    q.add_after(key("foo"), Duration::from_millis(70));
    assert_eq!(q.waiting_len(), 1, "an item waits at most once");
    assert_eq!(q.get().await.as_deref(), Some("foo"));
    assert!(
        start.elapsed() < Duration::from_millis(52),
        "the later time was ignored"
    );
    q.done(&key("foo"));
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert_eq!(q.len(), 0, "the 70ms request was not kept separately");

    let start = Instant::now();
    q.add_after(key("foo"), Duration::from_millis(50));
    q.add_after(key("foo"), Duration::from_millis(30));
    assert_eq!(q.waiting_len(), 1);
    assert_eq!(q.get().await.as_deref(), Some("foo"));
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(30) && waited < Duration::from_millis(32),
        "the earlier time replaced the later one, waited {waited:?}"
    );
    q.done(&key("foo"));
    tokio::time::sleep(Duration::from_millis(40)).await;
    assert_eq!(q.len(), 0, "the 50ms request was dropped");
}

#[tokio::test(start_paused = true)]
async fn items_become_ready_in_ready_time_order() {
    // client-go's TestAddTwoFireEarly and TestCopyShifting.
    let q = DelayingQueue::new();
    q.add_after(key("foo"), Duration::from_secs(1));
    q.add_after(key("bar"), Duration::from_millis(500));
    q.add_after(key("baz"), Duration::from_millis(250));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(q.len(), 3);
    assert_eq!(q.get().await.as_deref(), Some("baz"));
    assert_eq!(q.get().await.as_deref(), Some("bar"));
    assert_eq!(q.get().await.as_deref(), Some("foo"));

    let q = DelayingQueue::new();
    q.add_after(key("first"), Duration::from_secs(1));
    q.add_after(key("second"), Duration::from_millis(50));
    tokio::time::sleep(Duration::from_millis(60)).await;
    assert_eq!(q.len(), 1);
    assert_eq!(q.get().await.as_deref(), Some("second"));
    q.add_after(key("third"), Duration::from_secs(2));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(q.len(), 1);
    assert_eq!(q.get().await.as_deref(), Some("first"));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(q.len(), 1);
    assert_eq!(q.get().await.as_deref(), Some("third"));
}

#[tokio::test(start_paused = true)]
async fn an_earlier_item_added_later_wakes_the_timer() {
    let q = DelayingQueue::new();
    let start = Instant::now();
    q.add_after(key("late"), Duration::from_secs(60));
    tokio::time::sleep(Duration::from_millis(10)).await;
    q.add_after(key("early"), Duration::from_millis(10));
    assert_eq!(q.get().await.as_deref(), Some("early"));
    assert!(start.elapsed() < Duration::from_millis(22));
}

#[tokio::test(start_paused = true)]
async fn a_delayed_item_already_queued_is_not_duplicated() {
    let q = DelayingQueue::new();
    q.add(key("foo"));
    q.add_after(key("foo"), Duration::from_millis(10));
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(q.len(), 1, "the basic queue de-duplicates the delayed add");
}

#[tokio::test(start_paused = true)]
async fn shut_down_discards_waiting_items_and_ignores_add_after() {
    let q = DelayingQueue::new();
    q.add_after(key("foo"), Duration::from_millis(10));
    q.shut_down();
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(q.len(), 0);
    assert_eq!(
        q.waiting_len(),
        0,
        "the timer task cleared the waiting items"
    );
    q.add_after(key("bar"), Duration::ZERO);
    q.add_after(key("baz"), Duration::from_millis(1));
    assert_eq!(q.len(), 0);
    assert_eq!(q.waiting_len(), 0);
    assert_eq!(q.get().await, None);
}

#[tokio::test(start_paused = true)]
async fn delaying_queue_over_an_existing_queue() {
    let base = Queue::new();
    let q = DelayingQueue::from_queue(base.clone());
    q.add_after(key("foo"), Duration::from_millis(5));
    assert_eq!(base.get().await.as_deref(), Some("foo"));
}

// ---- rate-limiting queue -----------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn rate_limited_adds_follow_the_limiter() {
    // client-go's TestRateLimitingQueue.
    let limiter =
        ItemExponentialFailureRateLimiter::new(Duration::from_millis(1), Duration::from_secs(1));
    let q = RateLimitingQueue::new(limiter);
    q.add_rate_limited(key("one"));
    q.add_rate_limited(key("one"));
    assert_eq!(q.waiting_len(), 1);
    assert_eq!(q.num_requeues(&key("one")), 2);

    q.add_rate_limited(key("two"));
    assert_eq!(q.waiting_len(), 2);
    assert_eq!(q.num_requeues(&key("two")), 1);

    q.forget(&key("one"));
    assert_eq!(q.num_requeues(&key("one")), 0);
    q.add_rate_limited(key("one"));
    assert_eq!(q.num_requeues(&key("one")), 1);
    assert_eq!(
        q.len(),
        0,
        "the forgotten item's new 1ms delay does not add it at once"
    );

    let start = Instant::now();
    let first = q.get().await.unwrap();
    let second = q.get().await.unwrap();
    let mut both = [first, second];
    both.sort();
    assert_eq!(both, ["one", "two"]);
    assert!(start.elapsed() < Duration::from_millis(3));
}

#[tokio::test(start_paused = true)]
async fn hpa_queue_reconciles_each_key_once_per_sync_period() {
    // The HPA controller's use (horizontal.go): informer events and the worker both call
    // add_rate_limited; the fixed 15s interval and the earliest-ready-time rule keep one
    // reconcile per key per period, and an update does not cause an immediate reconcile.
    let sync_period = Duration::from_secs(15);
    let q = RateLimitingQueue::new(FixedItemIntervalRateLimiter::default_hpa(sync_period));
    let start = Instant::now();
    q.add_rate_limited(key("default/web"));
    tokio::time::sleep(Duration::from_secs(5)).await;
    q.add_rate_limited(key("default/web")); // an update 5s later
    assert_eq!(q.waiting_len(), 1);

    let item = q.get().await.unwrap();
    let waited = start.elapsed();
    assert!(
        waited >= sync_period && waited < sync_period + Duration::from_millis(2),
        "{waited:?}"
    );
    q.add_rate_limited(item.clone()); // the worker re-adds after reconciling
    q.done(&item);
    q.forget(&item);
    assert_eq!(q.num_requeues(&item), 1, "fixed limiter: always 1");

    let next = q.get().await.unwrap();
    let waited = start.elapsed();
    assert!(
        waited >= 2 * sync_period && waited < 2 * sync_period + Duration::from_millis(4),
        "{waited:?}"
    );
    assert_eq!(next, "default/web");
}
