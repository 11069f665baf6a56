//! Rate limiters, with client-go's `default_rate_limiters_test.go` vectors and the HPA's
//! fixed-interval limiter (`pkg/controller/podautoscaler/rate_limiters.go`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::time::Duration;

use hpa_workqueue::rate_limiters::{
    DEFAULT_CONTROLLER_BASE_DELAY, DEFAULT_CONTROLLER_BURST, DEFAULT_CONTROLLER_MAX_DELAY,
    DEFAULT_CONTROLLER_QPS,
};
use hpa_workqueue::{
    BucketError, BucketRateLimiter, FixedItemIntervalRateLimiter,
    ItemExponentialFailureRateLimiter, ItemFastSlowRateLimiter, MaxOfRateLimiter, RateLimiter,
    WithMaxWaitRateLimiter, default_controller_rate_limiter, default_item_based_rate_limiter,
};

const MS: Duration = Duration::from_millis(1);

#[test]
fn item_exponential_failure() {
    let limiter = ItemExponentialFailureRateLimiter::new(MS, Duration::from_secs(1));
    for expected in [1, 2, 4, 8, 16] {
        assert_eq!(limiter.when(&"one"), expected * MS);
    }
    assert_eq!(limiter.num_requeues(&"one"), 5);
    assert_eq!(limiter.when(&"two"), MS);
    assert_eq!(limiter.when(&"two"), 2 * MS);
    assert_eq!(limiter.num_requeues(&"two"), 2);
    limiter.forget(&"one");
    assert_eq!(limiter.num_requeues(&"one"), 0);
    assert_eq!(limiter.when(&"one"), MS);
}

#[test]
fn item_exponential_failure_caps_and_overflow() {
    let limiter = ItemExponentialFailureRateLimiter::new(MS, Duration::from_secs(1000));
    for _ in 0..5 {
        limiter.when(&"one");
    }
    assert_eq!(limiter.when(&"one"), 32 * MS);
    for _ in 0..1000 {
        limiter.when(&"overflow1");
    }
    assert_eq!(limiter.when(&"overflow1"), Duration::from_secs(1000));

    let minute = Duration::from_secs(60);
    let limiter = ItemExponentialFailureRateLimiter::new(minute, 1000 * 60 * minute);
    for _ in 0..2 {
        limiter.when(&"two");
    }
    assert_eq!(limiter.when(&"two"), 4 * minute);
    for _ in 0..1000 {
        limiter.when(&"overflow2");
    }
    assert_eq!(limiter.when(&"overflow2"), 1000 * 60 * minute);
}

#[test]
fn item_fast_slow() {
    let limiter = ItemFastSlowRateLimiter::new(5 * MS, Duration::from_secs(10), 3);
    for expected in [
        5 * MS,
        5 * MS,
        5 * MS,
        Duration::from_secs(10),
        Duration::from_secs(10),
    ] {
        assert_eq!(limiter.when(&"one"), expected);
    }
    assert_eq!(limiter.num_requeues(&"one"), 5);
    assert_eq!(limiter.when(&"two"), 5 * MS);
    assert_eq!(limiter.when(&"two"), 5 * MS);
    assert_eq!(limiter.num_requeues(&"two"), 2);
    limiter.forget(&"one");
    assert_eq!(limiter.num_requeues(&"one"), 0);
    assert_eq!(limiter.when(&"one"), 5 * MS);
}

#[test]
fn max_of() {
    let limiter: MaxOfRateLimiter<&str> = MaxOfRateLimiter::new(vec![
        Box::new(ItemFastSlowRateLimiter::new(
            5 * MS,
            Duration::from_secs(3),
            3,
        )),
        Box::new(ItemExponentialFailureRateLimiter::new(
            MS,
            Duration::from_secs(1),
        )),
    ]);
    for expected in [
        5 * MS,
        5 * MS,
        5 * MS,
        Duration::from_secs(3),
        Duration::from_secs(3),
    ] {
        assert_eq!(limiter.when(&"one"), expected);
    }
    assert_eq!(limiter.num_requeues(&"one"), 5);
    assert_eq!(limiter.when(&"two"), 5 * MS);
    assert_eq!(limiter.when(&"two"), 5 * MS);
    assert_eq!(limiter.num_requeues(&"two"), 2);
    limiter.forget(&"one");
    assert_eq!(limiter.num_requeues(&"one"), 0);
    assert_eq!(limiter.when(&"one"), 5 * MS);
}

/// client-go's `StepRateLimiter` test helper: `base` for the first `threshold` calls (of any
/// item), `max` afterwards.
struct StepRateLimiter {
    count: std::sync::Mutex<usize>,
    threshold: usize,
    base: Duration,
    max: Duration,
}

impl RateLimiter<usize> for StepRateLimiter {
    fn when(&self, _item: &usize) -> Duration {
        let mut count = self.count.lock().unwrap();
        *count += 1;
        if *count <= self.threshold {
            self.base
        } else {
            self.max
        }
    }
    fn forget(&self, _item: &usize) {}
    fn num_requeues(&self, _item: &usize) -> usize {
        0
    }
}

#[test]
fn with_max_wait() {
    let step = StepRateLimiter {
        count: std::sync::Mutex::new(0),
        threshold: 100,
        base: 5 * MS,
        max: Duration::from_secs(1000),
    };
    let limiter = WithMaxWaitRateLimiter::new(step, Duration::from_secs(500));
    for i in 0..100 {
        assert_eq!(limiter.when(&i), 5 * MS);
    }
    for i in 100..200 {
        assert_eq!(limiter.when(&i), Duration::from_secs(500));
    }
}

#[test]
fn fixed_item_interval() {
    let limiter = FixedItemIntervalRateLimiter::default_hpa(Duration::from_secs(15));
    assert_eq!(limiter.interval(), Duration::from_secs(15));
    for _ in 0..3 {
        assert_eq!(
            RateLimiter::<String>::when(&limiter, &"ns/a".to_owned()),
            Duration::from_secs(15)
        );
    }
    assert_eq!(
        RateLimiter::<String>::num_requeues(&limiter, &"ns/a".to_owned()),
        1
    );
    assert_eq!(
        RateLimiter::<String>::num_requeues(&limiter, &"ns/never-seen".to_owned()),
        1
    );
    RateLimiter::<String>::forget(&limiter, &"ns/a".to_owned());
    assert_eq!(
        RateLimiter::<String>::num_requeues(&limiter, &"ns/a".to_owned()),
        1
    );
    assert_eq!(
        RateLimiter::<String>::when(&limiter, &"ns/a".to_owned()),
        Duration::from_secs(15)
    );
}

#[test]
fn default_constants_are_client_go_s() {
    assert_eq!(DEFAULT_CONTROLLER_BASE_DELAY, 5 * MS);
    assert_eq!(DEFAULT_CONTROLLER_MAX_DELAY, Duration::from_secs(1000));
    assert_eq!(DEFAULT_CONTROLLER_QPS, 10.0);
    assert_eq!(DEFAULT_CONTROLLER_BURST, 100);
    let item_based = default_item_based_rate_limiter();
    assert_eq!(item_based.when(&"x"), MS);
    assert_eq!(item_based.when(&"x"), 2 * MS);
}

#[test]
fn default_item_exponential_sequence() {
    // client-go `ItemExponentialFailureRateLimiter.When`: with 5ms/1000s the sequence is 5ms, 10ms, … 655.36s (exp 17), then 1000s.
    let limiter = ItemExponentialFailureRateLimiter::new(5 * MS, Duration::from_secs(1000));
    for exp in 0..=17u32 {
        assert_eq!(limiter.when(&"k"), 5 * MS * 2u32.pow(exp), "exp {exp}");
    }
    assert_eq!(limiter.when(&"k"), Duration::from_secs(1000));
    assert_eq!(limiter.num_requeues(&"k"), 19);
}

#[tokio::test(start_paused = true)]
async fn bucket_reserves_tokens_and_delays_grow() {
    let bucket = BucketRateLimiter::new(10.0, 100).unwrap();
    for i in 0..100 {
        assert_eq!(
            bucket.reserve(),
            Duration::ZERO,
            "token {i} of the initial burst"
        );
    }
    // Empty: each call reserves the next token, 100ms apart at 10 qps.
    assert_eq!(bucket.reserve(), 100 * MS);
    assert_eq!(bucket.reserve(), 200 * MS);
    assert_eq!(bucket.reserve(), 300 * MS);
    tokio::time::advance(150 * MS).await;
    // Tokens reserved at +100/+200/+300ms; the next is at +400ms, 250ms from now.
    assert_eq!(bucket.reserve(), 250 * MS);
    // Real time reaching reserved slots does not hand them out again.
    tokio::time::advance(250 * MS).await;
    assert_eq!(bucket.reserve(), 100 * MS);
    // After a long pause the bucket refills to its burst, no more.
    tokio::time::advance(Duration::from_secs(60)).await;
    for _ in 0..100 {
        assert_eq!(bucket.reserve(), Duration::ZERO);
    }
    assert_eq!(bucket.reserve(), 100 * MS);
}

#[tokio::test(start_paused = true)]
async fn bucket_is_shared_by_all_items() {
    let bucket = BucketRateLimiter::new(1.0, 1).unwrap();
    assert_eq!(bucket.when(&"a"), Duration::ZERO);
    assert_eq!(bucket.when(&"b"), Duration::from_secs(1));
    assert_eq!(bucket.when(&"c"), Duration::from_secs(2));
    assert_eq!(RateLimiter::<&str>::num_requeues(&bucket, &"a"), 0);
    RateLimiter::<&str>::forget(&bucket, &"a");
    assert_eq!(
        bucket.when(&"a"),
        Duration::from_secs(3),
        "forget does not refund"
    );
}

#[test]
fn bucket_rejects_bad_parameters() {
    assert_eq!(
        BucketRateLimiter::new(0.0, 1).unwrap_err(),
        BucketError::InvalidQps(0.0)
    );
    assert_eq!(
        BucketRateLimiter::new(-1.0, 1).unwrap_err(),
        BucketError::InvalidQps(-1.0)
    );
    assert!(matches!(
        BucketRateLimiter::new(f64::NAN, 1),
        Err(BucketError::InvalidQps(_))
    ));
    assert_eq!(
        BucketRateLimiter::new(10.0, 0).unwrap_err(),
        BucketError::ZeroBurst
    );
}

#[tokio::test(start_paused = true)]
async fn default_controller_limiter_is_max_of_exponential_and_bucket() {
    let limiter = default_controller_rate_limiter::<String>();
    // Burst of 100 distinct items: the bucket adds nothing, the exponential part gives 5ms.
    for i in 0..100 {
        assert_eq!(limiter.when(&format!("item-{i}")), 5 * MS);
    }
    // Bucket empty: the 101st and 102nd reservations wait 100ms and 200ms (more than 5ms).
    assert_eq!(limiter.when(&"item-100".to_owned()), 100 * MS);
    assert_eq!(limiter.when(&"item-101".to_owned()), 200 * MS);
    // Per item, the exponential part counts failures: item-0 failed twice now.
    tokio::time::advance(Duration::from_secs(60)).await;
    assert_eq!(limiter.when(&"item-0".to_owned()), 10 * MS);
    assert_eq!(limiter.num_requeues(&"item-0".to_owned()), 2);
    limiter.forget(&"item-0".to_owned());
    assert_eq!(limiter.num_requeues(&"item-0".to_owned()), 0);
}
