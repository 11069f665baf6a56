//! Work queue metrics as scraped: names, types, help texts, the `name` label, buckets and the
//! recording rules of client-go's `metrics.go` (checked against its `metrics_test.go` scenario:
//! adds counted once per non-duplicate add, latency from first add to get, work duration from get
//! to done, unfinished work as the sum of in-flight ages). Tokio's clock is paused, so every
//! duration is exact.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::time::Duration;

use hpa_workqueue::{
    DelayingQueue, FixedItemIntervalRateLimiter, Queue, QueueConfig, RateLimitingQueue, Stability,
    WorkqueueMetrics,
};
use prometheus::{Encoder, Registry, TextEncoder};

fn scrape(registry: &Registry) -> String {
    let mut out = Vec::new();
    TextEncoder::new()
        .encode(&registry.gather(), &mut out)
        .unwrap();
    String::from_utf8(out).unwrap()
}

/// The value of the sample whose name and labels are exactly `series`.
fn sample(text: &str, series: &str) -> f64 {
    let line = text
        .lines()
        .find(|line| {
            line.strip_prefix(series)
                .is_some_and(|rest| rest.starts_with(' '))
        })
        .unwrap_or_else(|| panic!("no sample {series} in\n{text}"));
    line[series.len()..].trim().parse().unwrap()
}

fn key(s: &str) -> String {
    s.to_owned()
}

#[tokio::test(start_paused = true)]
async fn alpha_stability_prefixes_every_help_text_with_alpha() {
    // Kubernetes 1.35's component-base: the workqueue metrics were still ALPHA.
    let registry = Registry::new();
    let metrics = WorkqueueMetrics::register_with(&registry, Stability::Alpha).unwrap();
    let _q: Queue<String> = Queue::with_config(QueueConfig::named("test", metrics));
    let text = scrape(&registry);
    let helps: Vec<&str> = text.lines().filter(|l| l.starts_with("# HELP ")).collect();
    assert_eq!(helps.len(), 7, "{text}");
    for line in helps {
        let help = line.splitn(4, ' ').nth(3).unwrap_or_default();
        assert!(help.starts_with("[ALPHA] "), "{line}");
    }
    assert!(text.contains("# HELP workqueue_depth [ALPHA] Current depth of workqueue\n"));
}

#[tokio::test(start_paused = true)]
async fn families_have_client_go_names_types_and_help() {
    let registry = Registry::new();
    let metrics = WorkqueueMetrics::register(&registry).unwrap();
    let _q: Queue<String> = Queue::with_config(QueueConfig::named("test", metrics));
    let text = scrape(&registry);
    let expected = [
        (
            "workqueue_depth",
            "gauge",
            "[BETA] Current depth of workqueue",
        ),
        (
            "workqueue_adds_total",
            "counter",
            "[BETA] Total number of adds handled by workqueue",
        ),
        (
            "workqueue_queue_duration_seconds",
            "histogram",
            "[BETA] How long in seconds an item stays in workqueue before being requested.",
        ),
        (
            "workqueue_work_duration_seconds",
            "histogram",
            "[BETA] How long in seconds processing an item from workqueue takes.",
        ),
        (
            "workqueue_unfinished_work_seconds",
            "gauge",
            "[BETA] How many seconds of work has done that is in progress and hasn't been observed \
             by work_duration. Large values indicate stuck threads. One can deduce the number of \
             stuck threads by observing the rate at which this increases.",
        ),
        (
            "workqueue_longest_running_processor_seconds",
            "gauge",
            "[BETA] How many seconds has the longest running processor for workqueue been running.",
        ),
        (
            "workqueue_retries_total",
            "counter",
            "[BETA] Total number of retries handled by workqueue",
        ),
    ];
    for (name, kind, help) in expected {
        assert!(
            text.contains(&format!("# HELP {name} {help}\n")),
            "help of {name} in\n{text}"
        );
        assert!(
            text.contains(&format!("# TYPE {name} {kind}\n")),
            "type of {name} in\n{text}"
        );
    }
    // Every series exists from the queue's construction on, labelled with its name.
    for series in [
        "workqueue_depth",
        "workqueue_adds_total",
        "workqueue_unfinished_work_seconds",
        "workqueue_longest_running_processor_seconds",
        "workqueue_retries_total",
        "workqueue_queue_duration_seconds_count",
        "workqueue_work_duration_seconds_count",
    ] {
        assert_eq!(
            sample(&text, &format!("{series}{{name=\"test\"}}")),
            0.0,
            "{series}"
        );
    }
    // Buckets: ExponentialBuckets(10e-7, 10, 10) plus +Inf.
    let bounds: Vec<f64> = text
        .lines()
        .filter(|l| l.starts_with("workqueue_queue_duration_seconds_bucket{"))
        .map(|l| {
            let le = l.split("le=\"").nth(1).unwrap().split('"').next().unwrap();
            if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().unwrap()
            }
        })
        .collect();
    let expected = [
        1e-6,
        1e-5,
        1e-4,
        1e-3,
        1e-2,
        0.1,
        1.0,
        10.0,
        100.0,
        1000.0,
        f64::INFINITY,
    ];
    assert_eq!(bounds.len(), expected.len(), "{bounds:?}");
    for (got, want) in bounds.iter().zip(expected) {
        assert!(
            got == &want || ((got - want) / want).abs() < 1e-9,
            "{got} vs {want}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn recording_follows_client_go() {
    let registry = Registry::new();
    let metrics = WorkqueueMetrics::register(&registry).unwrap();
    let q = Queue::with_config(QueueConfig::named("test", metrics));

    q.add(key("foo"));
    q.add(key("foo")); // duplicate: not counted
    q.add(key("bar"));
    let text = scrape(&registry);
    assert_eq!(sample(&text, r#"workqueue_adds_total{name="test"}"#), 2.0);
    assert_eq!(sample(&text, r#"workqueue_depth{name="test"}"#), 2.0);

    tokio::time::advance(Duration::from_secs(1)).await;
    let foo = q.get().await.unwrap();
    let text = scrape(&registry);
    assert_eq!(sample(&text, r#"workqueue_depth{name="test"}"#), 1.0);
    assert_eq!(
        sample(
            &text,
            r#"workqueue_queue_duration_seconds_count{name="test"}"#
        ),
        1.0
    );
    assert_eq!(
        sample(
            &text,
            r#"workqueue_queue_duration_seconds_sum{name="test"}"#
        ),
        1.0
    );
    assert_eq!(
        sample(
            &text,
            r#"workqueue_queue_duration_seconds_bucket{name="test",le="1"}"#
        ),
        1.0,
        "1s lands in the le=1 bucket"
    );
    assert_eq!(
        sample(
            &text,
            r#"workqueue_queue_duration_seconds_bucket{name="test",le="0.1"}"#
        ),
        0.0
    );

    tokio::time::advance(Duration::from_secs(2)).await;
    let text = scrape(&registry);
    assert_eq!(
        sample(&text, r#"workqueue_unfinished_work_seconds{name="test"}"#),
        2.0
    );
    assert_eq!(
        sample(
            &text,
            r#"workqueue_longest_running_processor_seconds{name="test"}"#
        ),
        2.0
    );

    let bar = q.get().await.unwrap();
    tokio::time::advance(Duration::from_secs(1)).await;
    let text = scrape(&registry);
    assert_eq!(
        sample(
            &text,
            r#"workqueue_queue_duration_seconds_sum{name="test"}"#
        ),
        4.0
    );
    assert_eq!(
        sample(&text, r#"workqueue_unfinished_work_seconds{name="test"}"#),
        4.0,
        "3s of foo plus 1s of bar"
    );
    assert_eq!(
        sample(
            &text,
            r#"workqueue_longest_running_processor_seconds{name="test"}"#
        ),
        3.0
    );

    q.done(&foo);
    let text = scrape(&registry);
    assert_eq!(
        sample(
            &text,
            r#"workqueue_work_duration_seconds_count{name="test"}"#
        ),
        1.0
    );
    assert_eq!(
        sample(&text, r#"workqueue_work_duration_seconds_sum{name="test"}"#),
        3.0
    );
    assert_eq!(
        sample(&text, r#"workqueue_unfinished_work_seconds{name="test"}"#),
        1.0
    );
    assert_eq!(
        sample(
            &text,
            r#"workqueue_longest_running_processor_seconds{name="test"}"#
        ),
        1.0
    );

    // Added while processing: counted as an add and in the depth (as upstream), though only
    // queued again by done.
    q.add(bar.clone());
    let text = scrape(&registry);
    assert_eq!(sample(&text, r#"workqueue_adds_total{name="test"}"#), 3.0);
    assert_eq!(sample(&text, r#"workqueue_depth{name="test"}"#), 1.0);
    assert_eq!(q.len(), 0);
    q.done(&bar);
    assert_eq!(q.len(), 1);
    let text = scrape(&registry);
    assert_eq!(sample(&text, r#"workqueue_depth{name="test"}"#), 1.0);
    assert_eq!(
        sample(&text, r#"workqueue_unfinished_work_seconds{name="test"}"#),
        0.0
    );
    assert_eq!(
        sample(
            &text,
            r#"workqueue_longest_running_processor_seconds{name="test"}"#
        ),
        0.0
    );
}

#[tokio::test(start_paused = true)]
async fn in_flight_gauges_freeze_after_shutdown() {
    let registry = Registry::new();
    let metrics = WorkqueueMetrics::register(&registry).unwrap();
    let q = Queue::with_config(QueueConfig::named("test", metrics));
    q.add(key("foo"));
    let _foo = q.get().await.unwrap();
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(
        sample(
            &scrape(&registry),
            r#"workqueue_unfinished_work_seconds{name="test"}"#
        ),
        1.0
    );
    q.shut_down();
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(
        sample(
            &scrape(&registry),
            r#"workqueue_unfinished_work_seconds{name="test"}"#
        ),
        1.0,
        "upstream's update loop stops at shutdown"
    );
}

#[tokio::test(start_paused = true)]
async fn retries_count_every_add_after_before_shutdown() {
    let registry = Registry::new();
    let metrics = WorkqueueMetrics::register(&registry).unwrap();
    let q = RateLimitingQueue::with_config(
        FixedItemIntervalRateLimiter::new(Duration::from_secs(15)),
        QueueConfig::named("horizontalpodautoscaler", metrics),
    );
    q.add_rate_limited(key("ns/a"));
    q.add_rate_limited(key("ns/a")); // coalesced into one waiting entry, still a retry
    q.add_after(key("ns/b"), Duration::ZERO);
    let text = scrape(&registry);
    assert_eq!(
        sample(
            &text,
            r#"workqueue_retries_total{name="horizontalpodautoscaler"}"#
        ),
        3.0
    );
    assert_eq!(
        sample(
            &text,
            r#"workqueue_adds_total{name="horizontalpodautoscaler"}"#
        ),
        1.0
    );
    q.shut_down();
    q.add_rate_limited(key("ns/c"));
    let text = scrape(&registry);
    assert_eq!(
        sample(
            &text,
            r#"workqueue_retries_total{name="horizontalpodautoscaler"}"#
        ),
        3.0
    );
}

#[tokio::test(start_paused = true)]
async fn several_queues_share_one_registry() {
    let registry = Registry::new();
    let metrics = WorkqueueMetrics::register(&registry).unwrap();
    let a = Queue::with_config(QueueConfig::named("a", metrics.clone()));
    let b = DelayingQueue::with_config(QueueConfig::named("b", metrics));
    a.add(1);
    b.add(1);
    b.add(2);
    let text = scrape(&registry);
    assert_eq!(sample(&text, r#"workqueue_depth{name="a"}"#), 1.0);
    assert_eq!(sample(&text, r#"workqueue_depth{name="b"}"#), 2.0);
}

#[tokio::test(start_paused = true)]
async fn unnamed_or_metric_less_queues_record_nothing() {
    let registry = Registry::new();
    let metrics = WorkqueueMetrics::register(&registry).unwrap();
    let unnamed = Queue::with_config(QueueConfig {
        name: String::new(),
        metrics: Some(metrics),
    });
    unnamed.add(1);
    let without = Queue::with_config(QueueConfig {
        name: "without".to_owned(),
        metrics: None,
    });
    without.add(1);
    let text = scrape(&registry);
    assert!(!text.contains("name=\""), "no series at all:\n{text}");
}
