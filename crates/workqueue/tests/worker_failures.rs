//! Worker failures: an error or a panic in the processing function is logged and the worker
//! goes on. Alone in its test binary because tracing caches per-callsite interest process-wide,
//! which makes log capture flaky next to tests running in parallel without a subscriber.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::sync::{Arc, Mutex};

use hpa_workqueue::{Queue, QueueConfig, run_workers};

#[tokio::test(start_paused = true)]
async fn errors_and_panics_do_not_kill_the_pool() {
    let logs = Arc::new(Mutex::new(Vec::<u8>::new()));
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer({
            let logs = logs.clone();
            move || LogWriter(logs.clone())
        })
        .finish();
    // Current-thread runtime: the workers run on this thread and log to this subscriber.
    let _logging = tracing::subscriber::set_default(subscriber);
    let queue: Queue<String> = Queue::with_config(QueueConfig {
        name: "test".to_owned(),
        metrics: None,
    });
    let done = Arc::new(Mutex::new(Vec::new()));
    let pool = tokio::spawn(run_workers(queue.clone(), 1, {
        let done = done.clone();
        move |key: String| {
            let done = done.clone();
            async move {
                match key.as_str() {
                    "error" => return Err(format!("failed to reconcile {key}")),
                    "panic" => panic!("processing {key} panicked"),
                    _ => {}
                }
                done.lock().unwrap().push(key);
                Ok(())
            }
        }
    }));
    // One worker: every item goes through the same worker, so it must survive both failures.
    for key in ["error", "panic", "ok-1", "panic", "ok-2"] {
        queue.add(key.to_owned());
        // Let the worker take it before the next add (else "panic" would be de-duplicated).
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }
    queue.shut_down_with_drain().await;
    pool.await.unwrap();
    assert_eq!(*done.lock().unwrap(), ["ok-1", "ok-2"]);
    assert_eq!(queue.len(), 0);
    let logs = String::from_utf8(logs.lock().unwrap().clone()).unwrap();
    let lines: Vec<&str> = logs.lines().collect();
    assert_eq!(lines.len(), 3, "{logs}");
    assert!(lines[0].contains("ERROR"), "{logs}");
    assert!(lines[0].contains("Unhandled Error"), "{logs}");
    assert!(lines[0].contains("queue=\"test\""), "{logs}");
    assert!(lines[0].contains("item=\"error\""), "{logs}");
    assert!(
        lines[0].contains("error=failed to reconcile error"),
        "{logs}"
    );
    for line in &lines[1..] {
        assert!(line.contains("panic while processing item"), "{logs}");
        assert!(line.contains("item=\"panic\""), "{logs}");
    }
}

/// Collects formatted log lines.
struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
