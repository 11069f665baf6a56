//! A namespaced object index updated in place, as client-go's informer indexer is.
//!
//! client-go's reflector hands a relist to its `DeltaFIFO` (`Replace`: a `Replaced` delta per
//! listed object, then a `Deleted` tombstone for every key the list no longer holds), and the
//! informer's `processDeltas` applies each delta to the indexer as it pops it: during a relist
//! the cache is updated object by object, and the objects gone from the list leave it at the
//! end. This index does the same. Each entry remembers the relist that last saw it; `Init`
//! opens a relist, every listed object is stored with that mark, and `InitDone` drops the
//! entries the relist did not see.
//!
//! An object listed again with the `resourceVersion` its entry already holds is the same object
//! (a `resourceVersion` is the store's revision of that object), so its entry is kept as it is:
//! nothing is allocated for it. After an API server restart every watch relists, and almost
//! every object comes back unchanged; building a second copy of each cache (kube-runtime's
//! reflector store keeps the old one until `InitDone`) would raise the process's peak memory by
//! the size of its caches and leave the new copies scattered among the list's transient
//! allocations.

use std::collections::{BTreeMap, HashMap};
use std::sync::RwLock;

/// What an index entry must tell: the `resourceVersion` it was made from.
pub(crate) trait Versioned {
    /// The `resourceVersion`; empty when the object had none.
    fn resource_version(&self) -> &str;
}

/// One cached object and the relist that last saw it.
struct Slot<V> {
    listed: u64,
    value: V,
}

/// namespace → name → object, with the relist in progress.
struct Inner<V> {
    by_namespace: HashMap<String, BTreeMap<String, Slot<V>>>,
    /// The current relist's mark (incremented by each `Init`).
    relist: u64,
}

/// An index of namespaced objects, by namespace then name (name order, so a namespace's
/// objects are listed sorted). A namespace without objects has no entry.
pub(crate) struct NamespacedIndex<V> {
    inner: RwLock<Inner<V>>,
}

impl<V> Default for NamespacedIndex<V> {
    fn default() -> Self {
        NamespacedIndex {
            inner: RwLock::new(Inner {
                by_namespace: HashMap::new(),
                relist: 0,
            }),
        }
    }
}

impl<V: Versioned + Clone> NamespacedIndex<V> {
    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Inner<V>> {
        self.inner.write().unwrap_or_else(|p| p.into_inner())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner<V>> {
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Stores `namespace/name` at `resource_version` (a watch event or a listed object): the
    /// entry is kept when it already holds that (non-empty) `resourceVersion`, replaced by
    /// `make()` otherwise. Returns the value now stored.
    pub(crate) fn upsert(
        &self,
        namespace: &str,
        name: &str,
        resource_version: &str,
        make: impl FnOnce() -> V,
    ) -> V {
        let mut g = self.write();
        let relist = g.relist;
        let names = match g.by_namespace.get_mut(namespace) {
            Some(names) => names,
            None => g.by_namespace.entry(namespace.to_owned()).or_default(),
        };
        match names.get_mut(name) {
            Some(slot)
                if !resource_version.is_empty()
                    && slot.value.resource_version() == resource_version =>
            {
                slot.listed = relist;
                slot.value.clone()
            }
            Some(slot) => {
                slot.listed = relist;
                slot.value = make();
                slot.value.clone()
            }
            None => {
                let value = make();
                names.insert(
                    name.to_owned(),
                    Slot {
                        listed: relist,
                        value: value.clone(),
                    },
                );
                value
            }
        }
    }

    /// Removes `namespace/name` (a watch's deletion).
    pub(crate) fn remove(&self, namespace: &str, name: &str) -> Option<V> {
        let mut g = self.write();
        let names = g.by_namespace.get_mut(namespace)?;
        let removed = names.remove(name).map(|s| s.value);
        if names.is_empty() {
            g.by_namespace.remove(namespace);
        }
        removed
    }

    /// A relist begins (`Init`): what it lists from now on is marked as seen by it. A relist
    /// that begins before the previous one ended supersedes it.
    pub(crate) fn begin_relist(&self) {
        self.write().relist += 1;
    }

    /// The relist is complete (`InitDone`): every entry it did not list is removed and
    /// returned as `(namespace, name, value)`.
    pub(crate) fn end_relist(&self) -> Vec<(String, String, V)> {
        let mut g = self.write();
        let relist = g.relist;
        let mut gone = Vec::new();
        g.by_namespace.retain(|ns, names| {
            names.retain(|name, slot| {
                let keep = slot.listed == relist;
                if !keep {
                    gone.push((ns.clone(), name.clone(), slot.value.clone()));
                }
                keep
            });
            !names.is_empty()
        });
        gone
    }

    /// `namespace/name`, if cached.
    pub(crate) fn get(&self, namespace: &str, name: &str) -> Option<V> {
        self.read()
            .by_namespace
            .get(namespace)?
            .get(name)
            .map(|s| s.value.clone())
    }

    /// Whether `namespace/name` is cached.
    pub(crate) fn contains(&self, namespace: &str, name: &str) -> bool {
        self.read()
            .by_namespace
            .get(namespace)
            .is_some_and(|names| names.contains_key(name))
    }

    /// Calls `f` with each object of `namespace`, in name order, under the read lock.
    pub(crate) fn for_each_in(&self, namespace: &str, mut f: impl FnMut(&str, &V)) {
        if let Some(names) = self.read().by_namespace.get(namespace) {
            for (name, slot) in names {
                f(name, &slot.value);
            }
        }
    }

    /// Calls `f` with each object, namespace by namespace, under the read lock.
    pub(crate) fn for_each(&self, mut f: impl FnMut(&str, &str, &V)) {
        for (ns, names) in &self.read().by_namespace {
            for (name, slot) in names {
                f(ns, name, &slot.value);
            }
        }
    }

    /// Every object.
    pub(crate) fn values(&self) -> Vec<V> {
        let g = self.read();
        let mut out = Vec::with_capacity(g.by_namespace.values().map(BTreeMap::len).sum());
        for names in g.by_namespace.values() {
            out.extend(names.values().map(|s| s.value.clone()));
        }
        out
    }

    /// The number of namespaces holding objects.
    #[cfg(test)]
    pub(crate) fn namespaces(&self) -> usize {
        self.read().by_namespace.len()
    }
}

/// Where an informer is: listing for the first time, synced, or stopped before it synced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Listing,
    Synced,
    Stopped,
}

/// Whether an informer's first list is complete (`HasSynced`), for any number of waiters.
pub(crate) struct Readiness(tokio::sync::watch::Sender<Phase>);

impl Default for Readiness {
    fn default() -> Self {
        Readiness(tokio::sync::watch::Sender::new(Phase::Listing))
    }
}

impl Readiness {
    /// The first list is complete.
    pub(crate) fn synced(&self) {
        self.0.send_if_modified(|p| {
            let changed = *p != Phase::Synced;
            *p = Phase::Synced;
            changed
        });
    }

    /// The informer stopped; waiters for a first list that never came are told so.
    fn stopped(&self) {
        self.0.send_if_modified(|p| {
            let changed = *p == Phase::Listing;
            if changed {
                *p = Phase::Stopped;
            }
            changed
        });
    }

    /// Marks the informer stopped when the returned guard is dropped (its task ended or was
    /// aborted).
    pub(crate) fn stop_on_drop(&self) -> StopOnDrop<'_> {
        StopOnDrop(self)
    }

    /// Waits for the first list; an error if the informer stopped before it.
    pub(crate) async fn wait(&self) -> Result<(), Stopped> {
        let mut rx = self.0.subscribe();
        match rx.wait_for(|p| *p != Phase::Listing).await.map(|p| *p) {
            Ok(Phase::Synced) => Ok(()),
            _ => Err(Stopped),
        }
    }
}

/// The informer stopped before its first list was complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the informer stopped before its first list was complete")]
pub(crate) struct Stopped;

/// See [`Readiness::stop_on_drop`].
pub(crate) struct StopOnDrop<'a>(&'a Readiness);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.stopped();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[derive(Debug, PartialEq, Eq)]
    struct Obj {
        rv: String,
        data: u32,
    }

    impl Versioned for Arc<Obj> {
        fn resource_version(&self) -> &str {
            &self.rv
        }
    }

    fn obj(rv: &str, data: u32) -> Arc<Obj> {
        Arc::new(Obj {
            rv: rv.into(),
            data,
        })
    }

    fn names(index: &NamespacedIndex<Arc<Obj>>) -> Vec<String> {
        let mut out = Vec::new();
        index.for_each(|ns, name, _| out.push(format!("{ns}/{name}")));
        out.sort();
        out
    }

    #[test]
    fn a_relist_keeps_unchanged_entries_replaces_changed_ones_and_drops_the_unlisted() {
        let index = NamespacedIndex::default();
        index.begin_relist();
        let kept = index.upsert("a", "kept", "1", || obj("1", 1));
        let changed = index.upsert("a", "changed", "2", || obj("2", 2));
        index.upsert("b", "gone", "3", || obj("3", 3));
        assert!(index.end_relist().is_empty());

        index.begin_relist();
        let again = index.upsert("a", "kept", "1", || panic!("an unchanged object is kept"));
        assert!(Arc::ptr_eq(&again, &kept));
        let newer = index.upsert("a", "changed", "5", || obj("5", 20));
        assert!(!Arc::ptr_eq(&newer, &changed));
        // Updated in place, as client-go's indexer: readers see the newer object at once,
        // and the unlisted one until the relist ends.
        assert_eq!(index.get("a", "changed").unwrap().data, 20);
        assert!(index.contains("b", "gone"));
        let gone = index.end_relist();
        assert_eq!(gone.len(), 1);
        assert_eq!((gone[0].0.as_str(), gone[0].1.as_str()), ("b", "gone"));
        assert_eq!(names(&index), ["a/changed", "a/kept"]);
        assert_eq!(index.namespaces(), 1);
    }

    #[test]
    fn a_relist_superseded_by_another_drops_what_only_the_first_listed() {
        let index = NamespacedIndex::default();
        index.begin_relist();
        index.upsert("a", "x", "1", || obj("1", 1));
        index.end_relist();
        index.begin_relist();
        index.upsert("a", "only-in-first", "2", || obj("2", 2));
        // The list failed part way; the watcher starts over.
        index.begin_relist();
        index.upsert("a", "x", "1", || obj("1", 1));
        let gone = index.end_relist();
        assert_eq!(gone.len(), 1);
        assert_eq!(gone[0].1, "only-in-first");
        assert_eq!(names(&index), ["a/x"]);
    }

    #[test]
    fn objects_without_a_resource_version_are_always_replaced() {
        let index = NamespacedIndex::default();
        index.upsert("a", "x", "", || obj("", 1));
        assert_eq!(index.upsert("a", "x", "", || obj("", 2)).data, 2);
        assert_eq!(index.get("a", "x").unwrap().data, 2);
    }

    #[test]
    fn removing_the_last_object_of_a_namespace_drops_the_namespace() {
        let index = NamespacedIndex::default();
        index.upsert("a", "x", "1", || obj("1", 1));
        index.upsert("a", "y", "1", || obj("1", 1));
        assert_eq!(index.remove("a", "x").unwrap().data, 1);
        assert_eq!(index.namespaces(), 1);
        index.remove("a", "y");
        assert_eq!(index.namespaces(), 0);
        assert!(index.remove("a", "y").is_none());
        assert!(index.values().is_empty());
    }

    #[test]
    fn apply_events_outside_a_relist_survive_the_next_one_only_if_listed() {
        let index = NamespacedIndex::default();
        index.begin_relist();
        index.end_relist();
        index.upsert("a", "watched", "7", || obj("7", 7));
        index.begin_relist();
        index.upsert("a", "watched", "7", || panic!("kept"));
        assert!(index.end_relist().is_empty());
        index.begin_relist();
        assert_eq!(index.end_relist().len(), 1);
        assert!(index.values().is_empty());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn waiters_learn_of_the_first_list_or_of_a_stop_before_it() {
        let ready = Arc::new(Readiness::default());
        let waiter = |r: Arc<Readiness>| tokio::spawn(async move { r.wait().await });
        let (a, b) = (waiter(ready.clone()), waiter(ready.clone()));
        tokio::task::yield_now().await;
        assert!(!a.is_finished() && !b.is_finished());
        ready.synced();
        drop(ready.stop_on_drop());
        assert_eq!(a.await.unwrap(), Ok(()));
        assert_eq!(b.await.unwrap(), Ok(()));
        // A stop after the first list changes nothing.
        assert_eq!(ready.wait().await, Ok(()));

        let never = Arc::new(Readiness::default());
        let w = waiter(never.clone());
        tokio::task::yield_now().await;
        drop(never.stop_on_drop());
        assert_eq!(w.await.unwrap(), Err(Stopped));
    }
}
