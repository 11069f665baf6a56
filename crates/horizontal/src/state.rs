//! The controller's in-memory per-HPA state, shared by all workers (spec §2.5, §3.1, §3.4).
//!
//! Mirrors the maps and locks of upstream `pkg/controller/podautoscaler/horizontal.go`:
//! `recommendations` (`recommendationsLock`), `scaleUpEvents` / `scaleDownEvents`
//! (`scaleUpEventsLock` / `scaleDownEventsLock`), and `hpaSelectors` (the `BiMultimap` of
//! `pkg/controller/util/selectors/bimultimap.go` behind `hpaSelectorsMux`). Here each map is
//! a [`DashMap`], whose per-shard locks give the same per-key exclusion; nothing holds two
//! entries of one map at a time, so workers cannot deadlock.

use std::collections::BTreeMap;
use std::fmt;

use dashmap::DashMap;
use jiff::{SignedDuration, Timestamp};

use crate::behavior::EffectiveBehavior;
use crate::normalize::{
    Normalization, normalize_desired_replicas, normalize_desired_replicas_with_behaviors,
};
use crate::recommendations::{TimestampedRecommendation, record_initial_recommendation};
use crate::scale_events::{TimestampedScaleEvent, store_scale_event};

/// Recommendation history and scale events of every HPA, keyed by `namespace/name`.
///
/// State is lost on restart and on leadership change, as upstream (spec §13 item 11).
#[derive(Debug, Default)]
pub struct HpaState {
    recommendations: DashMap<String, Vec<TimestampedRecommendation>>,
    scale_up_events: DashMap<String, Vec<TimestampedScaleEvent>>,
    scale_down_events: DashMap<String, Vec<TimestampedScaleEvent>>,
}

impl HpaState {
    /// Empty state.
    pub fn new() -> Self {
        Self::default()
    }

    /// Upstream `recordInitialRecommendation`: seed the history of `key` with the current
    /// count when it has none.
    pub fn record_initial_recommendation(&self, key: &str, current_replicas: i32, now: Timestamp) {
        let mut entry = self.recommendations.entry(key.to_owned()).or_default();
        record_initial_recommendation(&mut entry, current_replicas, now);
    }

    /// Upstream `normalizeDesiredReplicas` for `key` (no behavior).
    #[allow(clippy::too_many_arguments)]
    pub fn normalize(
        &self,
        key: &str,
        current: i32,
        prenormalized: i32,
        min_replicas: i32,
        max_replicas: i32,
        downscale_window: SignedDuration,
        now: Timestamp,
    ) -> Normalization {
        let mut history = self.recommendations.entry(key.to_owned()).or_default();
        normalize_desired_replicas(
            &mut history,
            current,
            prenormalized,
            min_replicas,
            max_replicas,
            downscale_window,
            now,
        )
    }

    /// Upstream `normalizeDesiredReplicasWithBehaviors` for `key`.
    #[allow(clippy::too_many_arguments)]
    pub fn normalize_with_behaviors(
        &self,
        key: &str,
        behavior: &EffectiveBehavior,
        current: i32,
        prenormalized: i32,
        min_replicas: i32,
        max_replicas: i32,
        now: Timestamp,
    ) -> Normalization {
        // Snapshot the events first (upstream reads them under read locks after the
        // recommendation lock is released; the order does not matter for one key, which
        // only one worker processes at a time).
        let up = self.scale_up_events(key);
        let down = self.scale_down_events(key);
        let mut history = self.recommendations.entry(key.to_owned()).or_default();
        normalize_desired_replicas_with_behaviors(
            &mut history,
            &up,
            &down,
            behavior,
            current,
            prenormalized,
            min_replicas,
            max_replicas,
            now,
        )
    }

    /// Upstream `storeScaleEvent`, called after a successful scale update: nothing without
    /// a behavior; otherwise a scale-up stores `new - prev` in the up list (slots older than
    /// the longest scale-up policy period are reused), anything else `prev - new` in the
    /// down list.
    pub fn store_scale_event(
        &self,
        key: &str,
        behavior: Option<&EffectiveBehavior>,
        prev_replicas: i32,
        new_replicas: i32,
        now: Timestamp,
    ) {
        let Some(behavior) = behavior else { return };
        if new_replicas > prev_replicas {
            let mut events = self.scale_up_events.entry(key.to_owned()).or_default();
            store_scale_event(
                &mut events,
                &behavior.scale_up.policies,
                new_replicas.wrapping_sub(prev_replicas),
                now,
            );
        } else {
            let mut events = self.scale_down_events.entry(key.to_owned()).or_default();
            store_scale_event(
                &mut events,
                &behavior.scale_down.policies,
                prev_replicas.wrapping_sub(new_replicas),
                now,
            );
        }
    }

    /// Drop everything known about `key` (upstream does this when the lister no longer
    /// has the HPA).
    pub fn forget(&self, key: &str) {
        self.recommendations.remove(key);
        self.scale_up_events.remove(key);
        self.scale_down_events.remove(key);
    }

    /// The number of entries over the three per-HPA maps (recommendations, scale-up and
    /// scale-down events).
    pub fn entries(&self) -> usize {
        self.recommendations.len() + self.scale_up_events.len() + self.scale_down_events.len()
    }

    /// A copy of the recommendation history of `key`.
    pub fn recommendations(&self, key: &str) -> Vec<TimestampedRecommendation> {
        self.recommendations
            .get(key)
            .map(|v| v.clone())
            .unwrap_or_default()
    }

    /// A copy of the scale-up events of `key`.
    pub fn scale_up_events(&self, key: &str) -> Vec<TimestampedScaleEvent> {
        self.scale_up_events
            .get(key)
            .map(|v| v.clone())
            .unwrap_or_default()
    }

    /// A copy of the scale-down events of `key`.
    pub fn scale_down_events(&self, key: &str) -> Vec<TimestampedScaleEvent> {
        self.scale_down_events
            .get(key)
            .map(|v| v.clone())
            .unwrap_or_default()
    }

    /// Replace the recommendation history of `key` (simulation and replay seeding).
    pub fn set_recommendations(&self, key: &str, history: Vec<TimestampedRecommendation>) {
        self.recommendations.insert(key.to_owned(), history);
    }

    /// Replace the scale events of `key` (simulation and replay seeding).
    pub fn set_scale_events(
        &self,
        key: &str,
        up: Vec<TimestampedScaleEvent>,
        down: Vec<TimestampedScaleEvent>,
    ) {
        self.scale_up_events.insert(key.to_owned(), up);
        self.scale_down_events.insert(key.to_owned(), down);
    }
}

/// A namespaced HPA identity (`selectors.Key{Name, Namespace}` upstream).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HpaKey {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl HpaKey {
    /// A key from namespace and name.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        HpaKey {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for HpaKey {
    /// `namespace/name`, as upstream's `Key.String()`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A parsed label selector the registry can match pods against. Implemented by the
/// workspace's selector type (`labels.Selector` upstream).
pub trait LabelMatcher: Send + Sync {
    /// Whether the selector matches a pod's labels.
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool;
}

impl LabelMatcher for hpa_metrics::Selector {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        hpa_metrics::Selector::matches(self, labels)
    }
}

/// The registry over the workspace's parsed selectors (`labels.Selector`).
pub type HpaSelectorRegistry = SelectorRegistry<hpa_metrics::Selector>;

/// What the registry holds for one HPA.
#[derive(Debug, Clone, PartialEq)]
pub enum Registered<S> {
    /// `labels.Nothing()`: registered by the add/update handler, not yet reconciled.
    Nothing,
    /// The target's selector as last seen by a reconcile.
    Selector(S),
}

/// The selectors of every HPA, used to detect pods controlled by more than one HPA
/// (`AmbiguousSelector`, spec §3.4). Matching is namespace-scoped, so the registry is indexed
/// by namespace (namespace → name → selector): a check reads one namespace's HPAs, in name
/// order, never every HPA of the cluster. A namespace without HPAs has no entry.
#[derive(Debug)]
pub struct SelectorRegistry<S> {
    namespaces: DashMap<String, BTreeMap<String, Registered<S>>>,
}

impl<S> Default for SelectorRegistry<S> {
    fn default() -> Self {
        SelectorRegistry {
            namespaces: DashMap::new(),
        }
    }
}

impl<S: LabelMatcher> SelectorRegistry<S> {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// The add/update handler (`enqueueHPA`): register `key` with the `Nothing` selector if
    /// it has no entry. Returns whether it was added.
    pub fn register_if_absent(&self, key: HpaKey) -> bool {
        let mut names = self.namespaces.entry(key.namespace).or_default();
        match names.entry(key.name) {
            std::collections::btree_map::Entry::Occupied(_) => false,
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(Registered::Nothing);
                true
            }
        }
    }

    /// Reconcile (`validateAndParseSelector` step 3): replace the selector of `key` only if
    /// `key` is registered. Returns whether it was.
    pub fn update_if_present(&self, key: &HpaKey, selector: S) -> bool {
        match self
            .namespaces
            .get_mut(&key.namespace)
            .as_deref_mut()
            .and_then(|names| names.get_mut(&key.name))
        {
            Some(entry) => {
                *entry = Registered::Selector(selector);
                true
            }
            None => false,
        }
    }

    /// The delete handler: forget `key`. Returns whether it was registered.
    pub fn remove(&self, key: &HpaKey) -> bool {
        let removed = self
            .namespaces
            .get_mut(&key.namespace)
            .is_some_and(|mut names| names.remove(&key.name).is_some());
        // Drop the namespace's entry once its last HPA is gone.
        self.namespaces
            .remove_if(&key.namespace, |_, names| names.is_empty());
        removed
    }

    /// Whether `key` is registered.
    pub fn contains(&self, key: &HpaKey) -> bool {
        self.namespaces
            .get(&key.namespace)
            .is_some_and(|names| names.contains_key(&key.name))
    }

    /// The number of registered HPAs.
    pub fn len(&self) -> usize {
        self.namespaces.iter().map(|e| e.value().len()).sum()
    }

    /// Whether no HPA is registered.
    pub fn is_empty(&self) -> bool {
        self.namespaces.iter().all(|e| e.value().is_empty())
    }

    /// The number of namespaces with registered HPAs.
    pub fn namespaces(&self) -> usize {
        self.namespaces.len()
    }

    /// Upstream `hpasControllingPodsUnderSelector`: the HPAs of `namespace` whose selector
    /// matches at least one of the pods' label sets, de-duplicated. Upstream's order comes
    /// from a Go map and is unspecified; here it is by name.
    pub fn hpas_controlling_pods<'a>(
        &self,
        namespace: &str,
        pods: impl IntoIterator<Item = &'a BTreeMap<String, String>>,
    ) -> Vec<HpaKey> {
        let pods: Vec<&BTreeMap<String, String>> = pods.into_iter().collect();
        let Some(names) = self.namespaces.get(namespace) else {
            return Vec::new();
        };
        names
            .iter()
            .filter(|(_, registered)| match registered {
                Registered::Nothing => false,
                Registered::Selector(s) => pods.iter().any(|labels| s.matches(labels)),
            })
            .map(|(name, _)| HpaKey::new(namespace, name.clone()))
            .collect()
    }

    /// The ambiguity check of `validateAndParseSelector` step 6: `Some(keys)` (rendered
    /// `namespace/name`) when more than one HPA controls the pods.
    pub fn ambiguous_owners<'a>(
        &self,
        namespace: &str,
        pods: impl IntoIterator<Item = &'a BTreeMap<String, String>>,
    ) -> Option<Vec<String>> {
        let owners = self.hpas_controlling_pods(namespace, pods);
        (owners.len() > 1).then(|| owners.iter().map(HpaKey::to_string).collect())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::behavior::tests::generate_scaling_rules;

    fn now() -> Timestamp {
        "2025-06-01T12:00:00Z".parse().unwrap()
    }

    /// A test selector: equality on every listed label.
    struct Eq(BTreeMap<String, String>);

    impl LabelMatcher for Eq {
        fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
            self.0.iter().all(|(k, v)| labels.get(k) == Some(v))
        }
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn registry_lifecycle_and_ambiguity() {
        let reg: SelectorRegistry<Eq> = SelectorRegistry::new();
        let a = HpaKey::new("default", "hpa-a");
        let b = HpaKey::new("default", "hpa-b");
        let other_ns = HpaKey::new("other", "hpa-c");
        // Reconcile before registration does not add.
        assert!(!reg.update_if_present(&a, Eq(labels(&[("app", "web")]))));
        assert!(reg.register_if_absent(a.clone()));
        assert!(!reg.register_if_absent(a.clone()));
        assert!(reg.register_if_absent(b.clone()));
        assert!(reg.register_if_absent(other_ns.clone()));
        let pods = [labels(&[("app", "web"), ("tier", "fe")])];
        // Nothing selectors match nothing.
        assert!(reg.hpas_controlling_pods("default", &pods).is_empty());
        assert!(reg.update_if_present(&a, Eq(labels(&[("app", "web")]))));
        assert_eq!(reg.hpas_controlling_pods("default", &pods), vec![a.clone()]);
        assert_eq!(reg.ambiguous_owners("default", &pods), None);
        assert!(reg.update_if_present(&b, Eq(labels(&[("tier", "fe")]))));
        assert!(reg.update_if_present(&other_ns, Eq(labels(&[("app", "web")]))));
        assert_eq!(
            reg.ambiguous_owners("default", &pods),
            Some(vec!["default/hpa-a".to_owned(), "default/hpa-b".to_owned()])
        );
        assert!(reg.remove(&b));
        assert_eq!(reg.ambiguous_owners("default", &pods), None);
        assert_eq!(reg.len(), 2);
    }

    #[test]
    fn registry_with_parsed_selectors() {
        let reg = HpaSelectorRegistry::new();
        let a = HpaKey::new("ns", "a");
        let b = HpaKey::new("ns", "b");
        reg.register_if_absent(a.clone());
        reg.register_if_absent(b.clone());
        reg.update_if_present(&a, "app=web".parse().unwrap());
        reg.update_if_present(&b, "app in (web,api),tier!=db".parse().unwrap());
        let web = labels(&[("app", "web")]);
        let db = labels(&[("app", "web"), ("tier", "db")]);
        assert_eq!(
            reg.ambiguous_owners("ns", [&web]),
            Some(vec!["ns/a".to_owned(), "ns/b".to_owned()])
        );
        assert_eq!(reg.hpas_controlling_pods("ns", [&db]), vec![a]);
    }

    #[test]
    fn state_is_per_key_and_forgotten() {
        let s = HpaState::new();
        s.record_initial_recommendation("ns/a", 5, now());
        s.record_initial_recommendation("ns/a", 7, now());
        assert_eq!(s.recommendations("ns/a").len(), 1);
        let n = s.normalize("ns/a", 5, 2, 1, 10, SignedDuration::from_mins(5), now());
        assert_eq!(n.desired, 5, "held by the initial recommendation");
        assert_eq!(s.recommendations("ns/a").len(), 2);
        assert!(s.recommendations("ns/b").is_empty());

        let behavior = EffectiveBehavior {
            scale_up: generate_scaling_rules(4, 60, 0, 0, 0),
            scale_down: generate_scaling_rules(0, 0, 50, 60, 0),
            scale_up_window_seconds: 0,
            scale_down_window_seconds: 0,
        };
        s.store_scale_event("ns/a", None, 5, 8, now());
        assert!(
            s.scale_up_events("ns/a").is_empty(),
            "no behavior, no events"
        );
        s.store_scale_event("ns/a", Some(&behavior), 5, 8, now());
        s.store_scale_event("ns/a", Some(&behavior), 8, 6, now());
        assert_eq!(s.scale_up_events("ns/a")[0].replica_change, 3);
        assert_eq!(s.scale_down_events("ns/a")[0].replica_change, 2);
        // Scale-up limit now counts the +3 and the -2 of this period: start 6-3+2 = 5, +4 = 9.
        let n = s.normalize_with_behaviors("ns/a", &behavior, 6, 20, 1, 100, now());
        assert_eq!((n.desired, n.rate_limit), (9, Some(9)));
        s.forget("ns/a");
        assert!(s.recommendations("ns/a").is_empty());
        assert!(s.scale_up_events("ns/a").is_empty());
        assert!(s.scale_down_events("ns/a").is_empty());
    }

    #[test]
    fn concurrent_workers_on_distinct_keys() {
        let s = Arc::new(HpaState::new());
        let handles: Vec<_> = (0..4)
            .map(|w| {
                let s = Arc::clone(&s);
                std::thread::spawn(move || {
                    for i in 0..200 {
                        let key = format!("ns/hpa-{}", (w * 200 + i) % 16);
                        s.record_initial_recommendation(&key, 3, now());
                        s.normalize(&key, 3, 3, 1, 10, SignedDuration::from_mins(5), now());
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let total: usize = (0..16)
            .map(|i| s.recommendations(&format!("ns/hpa-{i}")).len())
            .sum();
        // 1 initial + 50 normalizations per key (800 calls over 16 keys).
        assert_eq!(total, 16 * 51);
    }
}
