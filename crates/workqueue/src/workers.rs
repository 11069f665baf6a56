//! A pool of async workers draining a queue.
//!
//! Mirrors the worker pattern of client-go controllers, here the HPA controller's `Run`,
//! `worker` and `processNextWorkItem` (`pkg/controller/podautoscaler/horizontal.go`): N workers
//! each loop `get` → process → `done` until the queue shuts down. Upstream restarts a worker
//! (`wait.UntilWithContext`, every second) if it returns, and `HandleError` logs a failed
//! reconcile; here a worker never dies: the processing function runs in its own task, so an error
//! *or a panic* is logged and the worker moves on, and `done` is always called (upstream's
//! `defer Done(key)`). In the `kube-hpa-controller` binary a panic never gets that far: its panic
//! hook ends the process first, as upstream's `HandleCrash` (which panics again) ends KCM.
//!
//! The queue guarantees that one item is never processed by two workers at once (see
//! [`Queue`]). Re-adding after processing (the HPA's `AddRateLimited` when the object was not
//! deleted) is the processing function's business, as upstream.

use std::fmt::{Debug, Display};
use std::future::Future;
use std::sync::Arc;

use tokio::task::JoinSet;

use crate::queue::{Item, Queue};

/// Runs `workers` workers over `queue`, each calling `process` for one item at a time, and
/// returns once all of them have stopped, i.e. once the queue is shut down and empty.
///
/// Errors returned by `process` and panics inside it are logged (with the queue's name and the
/// item) and do not stop the worker. Dropping the returned future aborts the workers and
/// cancels the processing in flight (its future is dropped at its next await, so its API calls
/// are cancelled); items they were processing then never get `done`. To drain instead, shut
/// the queue down and let this future finish.
pub async fn run_workers<T, F, Fut, E>(queue: Queue<T>, workers: usize, process: F)
where
    T: Item + Debug,
    F: Fn(T) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: Display + Send + 'static,
{
    let process = Arc::new(process);
    let mut pool = JoinSet::new();
    for worker in 0..workers {
        pool.spawn(worker_loop(queue.clone(), worker, process.clone()));
    }
    while pool.join_next().await.is_some() {}
}

/// A processing task that is cancelled when its worker is: dropping the pool (e.g. at
/// shutdown) cancels the work in flight, as a cancelled context does in Go.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One worker: `get`, process in a separate task, `done`, until `get` reports shutdown.
async fn worker_loop<T, F, Fut, E>(queue: Queue<T>, worker: usize, process: Arc<F>)
where
    T: Item + Debug,
    F: Fn(T) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: Display + Send + 'static,
{
    while let Some(item) = queue.get().await {
        let mut task = {
            let process = process.clone();
            let item = item.clone();
            // Calling `process` inside the task also catches panics of its synchronous part.
            AbortOnDrop(tokio::spawn(async move { process(item).await }))
        };
        match (&mut task.0).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                // `utilruntime.HandleError(err)` in the controller's worker.
                tracing::error!(logger = "UnhandledError", queue = queue.name(), worker, ?item, %error, "Unhandled Error");
            }
            Err(join_error) if join_error.is_panic() => {
                tracing::error!(
                    queue = queue.name(),
                    worker,
                    ?item,
                    "panic while processing item"
                );
            }
            Err(join_error) => {
                tracing::error!(queue = queue.name(), worker, ?item, %join_error, "processing task cancelled");
            }
        }
        queue.done(&item);
    }
}
