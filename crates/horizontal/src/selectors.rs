//! The registry of every HPA's target selector, shared by all workers (`validateAndParseSelector`'s `hpaSelectors`).
//!
//! Mirrors `hpaSelectors` of upstream `pkg/controller/podautoscaler/horizontal.go` (the
//! `BiMultimap` of `pkg/controller/util/selectors/bimultimap.go` behind `hpaSelectorsMux`).
//! Here the map is a [`DashMap`], whose per-shard locks give the same per-key exclusion.

use std::collections::BTreeMap;
use std::fmt;

use dashmap::DashMap;

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
/// (`AmbiguousSelector`, `validateAndParseSelector`). Matching is namespace-scoped, so the registry is indexed
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
    #[cfg(test)]
    pub fn contains(&self, key: &HpaKey) -> bool {
        self.namespaces
            .get(&key.namespace)
            .is_some_and(|names| names.contains_key(&key.name))
    }

    /// The number of registered HPAs.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.namespaces.iter().map(|e| e.value().len()).sum()
    }

    /// The number of namespaces with registered HPAs.
    #[cfg(test)]
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
        // Each distinct label set once: the pods of one template share their labels, so a
        // check of every HPA of the namespace against ten pods is one against one label set.
        let mut pods: Vec<&BTreeMap<String, String>> = pods.into_iter().collect();
        pods.sort_unstable();
        pods.dedup();
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
    use super::*;

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
}
