//! The controller's side of `--shards`: which HPAs this replica reconciles now, and what it
//! does when it takes or gives up a shard.
//!
//! No upstream counterpart (upstream has one leader; `Run` reconciles every HPA). The Leases
//! are the binary's business (`hpa-sharding`'s coordinator); here: a shard taken has its
//! history restored (its own ConfigMaps, `LEASE-shard-I-history-*`), then its HPAs are
//! queued at once; a shard given up has its HPAs' in-memory state dropped, and its queued
//! keys are skipped when a worker takes them. The caches stay cluster-wide: every replica
//! watches every HPA and Pod (a Pod is read by whichever shard's HPA selects it), so a shard
//! taken over is reconciled without waiting for a list.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use hpa_history::History;
use hpa_sharding::{ShardBy, WriteScope};

use crate::caches::{object_key, split_key};
use crate::controller::{ControllerState, HorizontalController};

/// Makes the history of a shard (its own ConfigMaps); called each time the shard is taken.
pub type HistoryFactory = Box<dyn Fn(u32) -> Arc<History> + Send + Sync>;

#[derive(Default)]
struct Slot {
    history: Option<Arc<History>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Moves at every acquisition and release: a restore started before the last of them
    /// does not mark the shard owned.
    generation: u64,
}

/// Which shards this replica owns, and their histories.
pub(crate) struct Sharded {
    shards: u32,
    by: ShardBy,
    owned: Vec<AtomicBool>,
    slots: Vec<Mutex<Slot>>,
    history: Option<HistoryFactory>,
}

impl std::fmt::Debug for Sharded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sharded")
            .field("shards", &self.shards)
            .field("owned", &self.owned_shards())
            .finish_non_exhaustive()
    }
}

fn lock(m: &Mutex<Slot>) -> MutexGuard<'_, Slot> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Sharded {
    pub(crate) fn new(shards: u32, by: ShardBy, history: Option<HistoryFactory>) -> Self {
        let shards = shards.max(1);
        Self {
            shards,
            by,
            owned: (0..shards).map(|_| AtomicBool::new(false)).collect(),
            slots: (0..shards).map(|_| Mutex::new(Slot::default())).collect(),
            history,
        }
    }

    /// The shard of `key`.
    pub(crate) fn shard(&self, key: &str) -> u32 {
        self.by.shard(key, self.shards)
    }

    /// Whether this replica reconciles `key` now.
    pub(crate) fn owns(&self, key: &str) -> bool {
        self.owned
            .get(self.shard(key) as usize)
            .is_some_and(|o| o.load(Ordering::Acquire))
    }

    /// The history of `key`'s shard, while owned.
    pub(crate) fn history(&self, key: &str) -> Option<Arc<History>> {
        let s = self.shard(key) as usize;
        if !self.owned.get(s)?.load(Ordering::Acquire) {
            return None;
        }
        lock(self.slots.get(s)?).history.clone()
    }

    pub(crate) fn owned_shards(&self) -> Vec<u32> {
        (0..self.shards)
            .filter(|s| self.owned[*s as usize].load(Ordering::Acquire))
            .collect()
    }
}

impl ControllerState {
    /// The cached HPAs of `shard`, by key.
    fn keys_of(&self, sharded: &Sharded, shard: u32) -> Vec<String> {
        self.reconciler
            .caches
            .hpas()
            .iter()
            .map(|h| object_key(h.as_ref()))
            .filter(|k| sharded.shard(k) == shard)
            .collect()
    }

    /// Drops what this replica knew of `key` (not its stored history: the shard's next
    /// owner reads it).
    fn drop_state(&self, key: &str) {
        let r = &self.reconciler;
        r.state.forget(key);
        r.last_decisions.remove(key);
        r.status_writer.forget(key);
        r.explain_metrics.forget_hpa(key);
    }
}

impl HorizontalController {
    /// Runs with `--shards=shards` (`--shard-by=by`): only the HPAs of the shards given to
    /// [`HorizontalController::shard_acquired`] are reconciled, each shard's history made by
    /// `history` (none: the history is not persisted). Set once, before
    /// [`HorizontalController::run`].
    pub fn set_shards(&self, shards: u32, by: ShardBy, history: Option<HistoryFactory>) {
        let _ = self
            .inner
            .reconciler
            .sharded
            .set(Arc::new(Sharded::new(shards, by, history)));
    }

    /// The shards this replica reconciles now (empty without `--shards`).
    pub fn owned_shards(&self) -> Vec<u32> {
        self.inner
            .reconciler
            .sharded
            .get()
            .map(|s| s.owned_shards())
            .unwrap_or_default()
    }

    /// This replica took `shard`: restore its history (in a task), then reconcile its HPAs.
    pub fn shard_acquired(&self, shard: u32) {
        let Some(sharded) = self.inner.reconciler.sharded.get().cloned() else {
            return;
        };
        let Some(slot) = sharded.slots.get(shard as usize) else {
            return;
        };
        let mut g = lock(slot);
        for t in g.tasks.drain(..) {
            t.abort();
        }
        g.history = None;
        g.generation += 1;
        let generation = g.generation;
        let inner = self.inner.clone();
        let s2 = sharded.clone();
        let task = tokio::spawn(async move {
            let sharded = s2;
            // State left from an earlier ownership is stale: the history is the truth.
            for key in inner.keys_of(&sharded, shard) {
                inner.drop_state(&key);
            }
            let mut restored_history = None;
            if let Some(make) = &sharded.history {
                let history = make(shard);
                let restored = history.restore(inner.reconciler.clock.now()).await;
                for (key, h) in restored {
                    let exists = sharded.shard(&key) == shard
                        && split_key(&key).is_ok_and(|(namespace, name)| {
                            inner.reconciler.caches.hpa(namespace, name).is_some()
                        });
                    if !exists {
                        // Gone, or of another shard since --shards changed.
                        history.forget(&key);
                        continue;
                    }
                    inner
                        .reconciler
                        .state
                        .set_recommendations(&key, h.recommendations);
                    inner.reconciler.state.set_scale_events(
                        &key,
                        h.scale_up_events,
                        h.scale_down_events,
                    );
                }
                restored_history = Some(history);
            }
            {
                // Owned only if neither released nor taken again meanwhile (checked and set
                // under the slot's lock, which a release takes first).
                let mut g = lock(&sharded.slots[shard as usize]);
                if g.generation != generation {
                    return;
                }
                if let Some(history) = restored_history {
                    let period = inner.reconciler.config.sync_period();
                    g.tasks.push(tokio::spawn(hpa_sharding::scope::with_scope(
                        WriteScope::Shard(shard),
                        history.clone().run(period, std::future::pending::<()>()),
                    )));
                    g.history = Some(history);
                }
                sharded.owned[shard as usize].store(true, Ordering::Release);
            }
            let keys = inner.keys_of(&sharded, shard);
            tracing::info!(
                shard,
                hpas = keys.len(),
                "reconciling the HPAs of the shard"
            );
            for key in keys {
                inner.queue.add(key);
            }
        });
        g.tasks.push(task);
    }

    /// This replica gave up `shard` (its fence is closed): its HPAs are no longer
    /// reconciled here and their state is dropped.
    pub fn shard_released(&self, shard: u32) {
        let Some(sharded) = self.inner.reconciler.sharded.get() else {
            return;
        };
        let Some(slot) = sharded.slots.get(shard as usize) else {
            return;
        };
        {
            let mut g = lock(slot);
            g.generation += 1;
            sharded.owned[shard as usize].store(false, Ordering::Release);
            for t in g.tasks.drain(..) {
                t.abort();
            }
            g.history = None;
        }
        let keys = self.inner.keys_of(sharded, shard);
        tracing::info!(
            shard,
            hpas = keys.len(),
            "no longer reconciling the HPAs of the shard"
        );
        for key in keys {
            self.inner.drop_state(&key);
        }
    }

    /// Stops every shard's history task (shutdown).
    pub(crate) fn stop_shards(&self) {
        if let Some(sharded) = self.inner.reconciler.sharded.get() {
            for slot in &sharded.slots {
                for t in lock(slot).tasks.drain(..) {
                    t.abort();
                }
            }
        }
    }
}

impl hpa_sharding::ShardHandler for HorizontalController {
    fn acquired(&self, shard: u32) {
        self.shard_acquired(shard);
    }

    fn released(&self, shard: u32) {
        self.shard_released(shard);
    }
}
