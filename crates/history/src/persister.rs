//! The leader's copy of every HPA's history, written to the ConfigMaps in batches and read
//! back by the next leader before its first decision.
//!
//! No upstream counterpart. The controller tells [`History::note`] what an HPA's history is
//! after each reconcile; a bucket whose histories changed is written by [`History::run`]:
//! within [`URGENT_DELAY`] when a scale event changed (what behavior policies limit, and what
//! a failover must not forget), otherwise at the next flush period (a recommendation's newer
//! time; one write per changed bucket per period, however many of its HPAs changed). A new
//! leader calls [`History::restore`] before its workers start and seeds its state with what
//! is still usable ([`crate::snapshot::HpaHistory::usable_at`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use jiff::Timestamp;
use prometheus::{IntCounterVec, IntGauge, Opts, Registry};
use tokio::sync::Notify;

use crate::snapshot::HpaHistory;
use crate::store::{BUCKETS, ConfigMapStore, StoreError, bucket_of};

/// How soon a changed scale event is written.
pub const URGENT_DELAY: Duration = Duration::from_millis(500);

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Dirty {
    Clean,
    /// A recommendation changed: written at the next flush period.
    Lazy,
    /// A scale event changed: written within [`URGENT_DELAY`].
    Urgent,
}

#[derive(Debug)]
struct Bucket {
    hpas: BTreeMap<String, HpaHistory>,
    resource_version: Option<String>,
    /// Whether the stored bucket was read (or found absent or unreadable): only then may it
    /// be written over.
    loaded: bool,
    dirty: Dirty,
    /// Counts changes, so that a write clears `dirty` only if nothing changed meanwhile.
    generation: u64,
}

impl Bucket {
    fn new() -> Self {
        Self {
            hpas: BTreeMap::new(),
            resource_version: None,
            loaded: false,
            dirty: Dirty::Clean,
            generation: 0,
        }
    }
}

/// The persister's Prometheus series (shared by the histories of every shard).
#[derive(Debug, Clone)]
pub struct HistoryMetrics {
    writes: IntCounterVec,
    restored: IntGauge,
}

impl HistoryMetrics {
    /// Registers `kube_hpa_controller_history_writes_total{result}` and
    /// `kube_hpa_controller_history_restored_hpas`.
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let writes = IntCounterVec::new(
            Opts::new(
                "kube_hpa_controller_history_writes_total",
                "Writes of the HPA history ConfigMaps, by result (success, error, too_large, fenced).",
            ),
            &["result"],
        )?;
        let restored = IntGauge::new(
            "kube_hpa_controller_history_restored_hpas",
            "HPAs whose stabilization and policy history this instance restored when it started leading (with --shards: over every shard it took).",
        )?;
        registry.register(Box::new(writes.clone()))?;
        registry.register(Box::new(restored.clone()))?;
        Ok(Self { writes, restored })
    }
}

/// Whether an error is the process's write fence refusing a write (it was never sent: this
/// instance may no longer lead, or is stopping).
pub type FencedCheck = fn(&(dyn std::error::Error + 'static)) -> bool;

/// Every HPA's history as this leader knows it, and its ConfigMaps.
#[derive(Debug)]
pub struct History {
    store: ConfigMapStore,
    buckets: Vec<Mutex<Bucket>>,
    urgent: Notify,
    metrics: HistoryMetrics,
    fenced: Option<FencedCheck>,
}

fn lock(m: &Mutex<Bucket>) -> MutexGuard<'_, Bucket> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl History {
    /// The history kept in `store`'s ConfigMaps; its series registered in `registry`.
    pub fn new(store: ConfigMapStore, registry: &Registry) -> Result<Self, prometheus::Error> {
        Ok(Self::with_metrics(
            store,
            HistoryMetrics::register(registry)?,
        ))
    }

    /// The history kept in `store`'s ConfigMaps, counted in `metrics` (one shard's, with
    /// `--shards`).
    pub fn with_metrics(store: ConfigMapStore, metrics: HistoryMetrics) -> Self {
        Self {
            store,
            buckets: (0..BUCKETS).map(|_| Mutex::new(Bucket::new())).collect(),
            urgent: Notify::new(),
            metrics,
            fenced: None,
        }
    }

    /// Tells a write the fence refused from a failed one: it is counted as `fenced` and
    /// logged at V(2), not as an error (it is expected once this instance stops leading).
    pub fn with_fenced_check(mut self, check: FencedCheck) -> Self {
        self.fenced = Some(check);
        self
    }

    fn bucket(&self, key: &str) -> &Mutex<Bucket> {
        // bucket_of is below BUCKETS, the length of `buckets`.
        &self.buckets[bucket_of(key) as usize]
    }

    /// Reads every bucket and returns the histories still usable at `now`, by HPA key, for
    /// the controller to seed its state with. A bucket that cannot be read is logged and
    /// read again before it is first written (so a passing API error loses nothing); one
    /// that holds something else than a history is written over.
    pub async fn restore(&self, now: Timestamp) -> BTreeMap<String, HpaHistory> {
        let mut restored = BTreeMap::new();
        for (i, slot) in (0..BUCKETS).zip(&self.buckets) {
            let loaded = self.store.load(i).await;
            let mut b = lock(slot);
            match loaded {
                Ok(l) => {
                    b.resource_version = l.resource_version;
                    b.loaded = true;
                    for (key, h) in l.hpas {
                        let usable = h.usable_at(now);
                        if !usable.is_empty() {
                            restored.insert(key.clone(), usable.clone());
                            b.hpas.insert(key, usable);
                        }
                    }
                }
                Err((rv, e @ StoreError::Decode { .. })) => {
                    tracing::error!(error = %e, "HPA history unreadable; it will be written over");
                    b.resource_version = rv;
                    b.loaded = true;
                }
                Err((_, e)) => {
                    tracing::error!(error = %e, "HPA history not read; reading it again before writing");
                }
            }
        }
        self.metrics
            .restored
            .add(i64::try_from(restored.len()).unwrap_or(i64::MAX));
        tracing::info!(
            hpas = restored.len(),
            namespace = self.store.namespace(),
            of = self.store.lease_name(),
            "restored the HPAs' stabilization and policy history"
        );
        restored
    }

    /// The history of `key` after a reconcile. A change of its scale events is written
    /// within [`URGENT_DELAY`], any other change at the next flush period; no change, no write.
    pub fn note(&self, key: &str, history: HpaHistory) {
        let urgent = {
            let mut b = lock(self.bucket(key));
            let before = b.hpas.get(key);
            let (changed, events_changed) = match before {
                None => (
                    !history.is_empty(),
                    !history.scale_up_events.is_empty() || !history.scale_down_events.is_empty(),
                ),
                Some(old) => (
                    *old != history,
                    old.scale_up_events != history.scale_up_events
                        || old.scale_down_events != history.scale_down_events,
                ),
            };
            if !changed {
                return;
            }
            if history.is_empty() {
                b.hpas.remove(key);
            } else {
                b.hpas.insert(key.to_string(), history);
            }
            let level = if events_changed {
                Dirty::Urgent
            } else {
                Dirty::Lazy
            };
            b.dirty = b.dirty.max(level);
            b.generation += 1;
            events_changed
        };
        if urgent {
            self.urgent.notify_one();
        }
    }

    /// Drops the history of `key` (its HPA is gone).
    pub fn forget(&self, key: &str) {
        let mut b = lock(self.bucket(key));
        if b.hpas.remove(key).is_some() {
            b.dirty = b.dirty.max(Dirty::Lazy);
            b.generation += 1;
        }
    }

    /// The number of HPAs with a history.
    pub fn len(&self) -> usize {
        self.buckets.iter().map(|b| lock(b).hpas.len()).sum()
    }

    /// No HPA has a history.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes the changed buckets (with `urgent_only`, those with a changed scale event),
    /// dropping at `now` what no window or period can use any more. Returns how many were
    /// written.
    pub async fn flush(&self, now: Timestamp, urgent_only: bool) -> usize {
        let mut written = 0;
        for (i, slot) in (0..BUCKETS).zip(&self.buckets) {
            let needs_load = {
                let b = lock(slot);
                let wanted = if urgent_only {
                    b.dirty == Dirty::Urgent
                } else {
                    b.dirty != Dirty::Clean
                };
                if !wanted {
                    continue;
                }
                !b.loaded
            };
            if needs_load && !self.load_before_write(i, slot, now).await {
                continue;
            }
            let (hpas, rv, generation) = {
                let mut b = lock(slot);
                let hpas: BTreeMap<String, HpaHistory> = std::mem::take(&mut b.hpas)
                    .into_iter()
                    .map(|(k, h)| (k, h.usable_at(now)))
                    .filter(|(_, h)| !h.is_empty())
                    .collect();
                b.hpas = hpas.clone();
                (hpas, b.resource_version.clone(), b.generation)
            };
            match self.store.write(i, rv, &hpas).await {
                Ok(rv) => {
                    self.metrics.writes.with_label_values(&["success"]).inc();
                    let mut b = lock(slot);
                    b.resource_version = rv;
                    if b.generation == generation {
                        b.dirty = Dirty::Clean;
                    }
                    written += 1;
                }
                Err(e) => {
                    let fenced = self.fenced.is_some_and(|check| check(&e));
                    let result = match e {
                        _ if fenced => "fenced",
                        StoreError::TooLarge { .. } => "too_large",
                        _ => "error",
                    };
                    self.metrics.writes.with_label_values(&[result]).inc();
                    if fenced {
                        tracing::debug!(v = 2, error = %e, "HPA history not written");
                    } else {
                        tracing::error!(error = %e, "HPA history not written; trying again at the next flush");
                    }
                }
            }
        }
        written
    }

    /// Reads a bucket not read at the start, keeping this leader's entries over the stored
    /// ones. False if it still cannot be read.
    async fn load_before_write(&self, bucket: u32, slot: &Mutex<Bucket>, now: Timestamp) -> bool {
        let loaded = self.store.load(bucket).await;
        let mut b = lock(slot);
        match loaded {
            Ok(l) => {
                for (key, h) in l.hpas {
                    let usable = h.usable_at(now);
                    if !usable.is_empty() {
                        b.hpas.entry(key).or_insert(usable);
                    }
                }
                b.resource_version = l.resource_version;
                b.loaded = true;
                true
            }
            Err((rv, StoreError::Decode { .. })) => {
                b.resource_version = rv;
                b.loaded = true;
                true
            }
            Err((_, e)) => {
                tracing::error!(error = %e, "HPA history not read; not written over");
                false
            }
        }
    }

    /// Writes changed buckets until `stop`: those with a changed scale event within
    /// [`URGENT_DELAY`], the others every `period`.
    pub async fn run(
        self: Arc<Self>,
        period: Duration,
        stop: impl std::future::Future<Output = ()>,
    ) {
        let mut stop = std::pin::pin!(stop);
        let mut tick = tokio::time::interval(period.max(Duration::from_secs(1)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tokio::select! {
                () = &mut stop => return,
                _ = tick.tick() => {
                    self.flush(Timestamp::now(), false).await;
                }
                () = self.urgent.notified() => {
                    tokio::select! {
                        () = &mut stop => return,
                        () = tokio::time::sleep(URGENT_DELAY) => {}
                    }
                    self.flush(Timestamp::now(), true).await;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use hpa_decision::recommendations::TimestampedRecommendation;
    use hpa_decision::scale_events::TimestampedScaleEvent;
    use jiff::SignedDuration;

    use super::*;

    fn history() -> History {
        // No request is made by `note` and `forget`: a client of an address nothing serves.
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        History::new(
            ConfigMapStore::new(client, "kube-system", "kube-hpa-controller"),
            &Registry::new(),
        )
        .unwrap()
    }

    fn h(rec: i32, up: &[i32]) -> HpaHistory {
        let t: Timestamp = "2026-11-27T12:00:00Z".parse().unwrap();
        HpaHistory {
            keep_for: SignedDuration::from_mins(5),
            recommendations: vec![TimestampedRecommendation {
                recommendation: rec,
                timestamp: t,
            }],
            scale_up_events: up
                .iter()
                .map(|&c| TimestampedScaleEvent {
                    replica_change: c,
                    timestamp: t,
                    outdated: false,
                })
                .collect(),
            scale_down_events: vec![],
        }
    }

    fn dirty(hist: &History, key: &str) -> (Dirty, u64) {
        let b = lock(hist.bucket(key));
        (b.dirty, b.generation)
    }

    #[tokio::test]
    async fn a_change_marks_its_bucket_and_a_scale_event_makes_it_urgent() {
        let hist = history();
        hist.note("ns/a", h(3, &[]));
        assert_eq!(dirty(&hist, "ns/a"), (Dirty::Lazy, 1));
        hist.note("ns/a", h(3, &[]));
        assert_eq!(
            dirty(&hist, "ns/a"),
            (Dirty::Lazy, 1),
            "no change, no new generation"
        );
        hist.note("ns/a", h(3, &[4]));
        assert_eq!(dirty(&hist, "ns/a"), (Dirty::Urgent, 2));
        // The urgent flush is woken.
        tokio::time::timeout(Duration::from_secs(1), hist.urgent.notified())
            .await
            .unwrap();
        assert_eq!(hist.len(), 1);
        hist.forget("ns/a");
        assert!(hist.is_empty());
        assert_eq!(dirty(&hist, "ns/a").1, 3, "forgetting is a change to write");
        hist.forget("ns/a");
        assert_eq!(dirty(&hist, "ns/a").1, 3, "forgetting nothing is none");
    }
}
