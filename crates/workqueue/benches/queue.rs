//! Benchmarks of the work queue: add/get/done over 10k keys, and `add_after` of 10k delayed items
//! (after client-go's `BenchmarkDelayingQueue_AddAfter`: random delays up to 10 minutes, then
//! the clock stepped 11 minutes in one jump and every item taken). Delays run on Tokio's paused
//! clock, so the 10 minutes are virtual.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use hpa_workqueue::{DelayingQueue, Queue};
use tokio::runtime::{Builder, Runtime};

const KEYS: usize = 10_000;

fn keys() -> Vec<String> {
    (0..KEYS)
        .map(|i| format!("namespace-{}/hpa-{i}", i % 100))
        .collect()
}

/// Deterministic pseudo-random delays below 10 minutes (a 64-bit LCG).
fn delays() -> Vec<Duration> {
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    (0..KEYS)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            Duration::from_nanos((state >> 11) % 600_000_000_000)
        })
        .collect()
}

fn paused_runtime() -> Runtime {
    Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

fn add_get_done(c: &mut Criterion) {
    let rt = Builder::new_current_thread().enable_time().build().unwrap();
    let keys = keys();
    let mut group = c.benchmark_group("queue");
    group.throughput(Throughput::Elements(KEYS as u64));
    group.bench_function("add_get_done_10k_keys", |b| {
        b.iter_batched(
            || keys.clone(),
            |keys| {
                rt.block_on(async {
                    let q = Queue::new();
                    for key in keys {
                        q.add(key);
                    }
                    while !q.is_empty() {
                        let key = q.get().await.unwrap();
                        q.done(black_box(&key));
                    }
                })
            },
            BatchSize::LargeInput,
        );
    });
    group.bench_function("add_10k_keys_twice_dedup", |b| {
        b.iter_batched(
            || (keys.clone(), keys.clone()),
            |(first, second)| {
                let q = Queue::new();
                for key in first.into_iter().chain(second) {
                    q.add(key);
                }
                black_box(q.len())
            },
            BatchSize::LargeInput,
        );
    });
    group.finish();
}

fn add_after(c: &mut Criterion) {
    let rt = paused_runtime();
    let keys = keys();
    let delays = delays();
    let mut group = c.benchmark_group("delaying_queue");
    group.throughput(Throughput::Elements(KEYS as u64));
    group.bench_function("add_after_10k_items", |b| {
        b.iter_batched(
            || keys.clone(),
            |keys| {
                rt.block_on(async {
                    let q = DelayingQueue::new();
                    for (key, delay) in keys.into_iter().zip(&delays) {
                        q.add_after(key, *delay);
                    }
                    black_box(q.waiting_len());
                    q.shut_down();
                })
            },
            BatchSize::LargeInput,
        );
    });
    group.bench_function("add_after_fire_get_done_10k_items", |b| {
        b.iter_batched(
            || keys.clone(),
            |keys| {
                rt.block_on(async {
                    let q = DelayingQueue::new();
                    for (key, delay) in keys.into_iter().zip(&delays) {
                        q.add_after(key, *delay);
                    }
                    tokio::time::advance(Duration::from_secs(11 * 60)).await;
                    for _ in 0..KEYS {
                        let key = q.get().await.unwrap();
                        q.done(&key);
                    }
                    q.shut_down();
                })
            },
            BatchSize::LargeInput,
        );
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = add_get_done, add_after
}
criterion_main!(benches);
