//! The Leases of the shards and of the replicas: read them, renew what this replica holds,
//! and take or give up shards as [`crate::plan`] says.
//!
//! No upstream counterpart; each Lease is handled with client-go's leader-election rules
//! (`tools/leaderelection/leaderelection.go`: an optimistic update with the resourceVersion
//! last read, a holder kept until `leaseDurationSeconds` after this replica last saw its
//! record change, a release that empties the holder with a one-second duration). Every
//! retry period one round: one LIST of the group's Leases (by label) and one GET of the
//! unsharded Lease, a PUT of this replica's member Lease, a PUT per held shard, and one per
//! shard taken or given up. A shard whose renewals keep failing for the renew deadline is
//! lost (its fence had closed by then already). At shutdown every shard is released and the
//! member Lease deleted, so that the others take over at once.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams, Preconditions};
use prometheus::{IntCounterVec, IntGauge, Opts, Registry};
use tokio::time::Instant;

use crate::fence::ShardFences;
use crate::hash::{ShardBy, fnv1a64};
use crate::observe::Observer;
use crate::plan::{Member, PlanInput, Standby, plan};

/// The label every Lease of a shard group carries (value: the base Lease name).
pub const GROUP_LABEL: &str = "kube-hpa-controller.io/shard-group";
/// The label telling shard Leases (`shard`) from member Leases (`member`).
pub const ROLE_LABEL: &str = "kube-hpa-controller.io/shard-role";
/// The annotation holding the shard count a Lease was written with.
pub const SHARDS_ANNOTATION: &str = "kube-hpa-controller.io/shards";
/// The annotation holding the shard key (`--shard-by`) a Lease was written with (absent:
/// `hpa`).
pub const SHARD_BY_ANNOTATION: &str = "kube-hpa-controller.io/shard-by";
/// The member Lease's annotation holding the replica's secure serving address.
pub const ADDRESS_ANNOTATION: &str = "kube-hpa-controller.io/address";

/// The Lease of shard `shard` of the group `base`.
pub fn shard_lease_name(base: &str, shard: u32) -> String {
    format!("{base}-shard-{shard}")
}

/// The member Lease of the replica `identity` in the group `base` (a hash: identities are
/// host names with a UUID, too long and too free for a name).
pub fn member_lease_name(base: &str, identity: &str) -> String {
    format!("{base}-member-{:016x}", fnv1a64(identity.as_bytes()))
}

/// How the coordinator runs.
#[derive(Debug, Clone)]
pub struct CoordinatorConfig {
    /// The Leases' namespace (`--leader-elect-resource-namespace`).
    pub namespace: String,
    /// The base Lease name (`--leader-elect-resource-name`): shards are `NAME-shard-I`.
    pub name: String,
    /// This replica's identity.
    pub identity: String,
    /// `--shards`.
    pub shards: u32,
    /// `--shard-by`.
    pub by: ShardBy,
    /// `--leader-elect-lease-duration`.
    pub lease_duration: Duration,
    /// `--leader-elect-renew-deadline`.
    pub renew_deadline: Duration,
    /// `--leader-elect-retry-period`.
    pub retry_period: Duration,
    /// Where this replica serves `/debug` (written on its member Lease for `hpactl explain`).
    pub address: Option<String>,
}

/// What the controller does when this replica takes or gives up a shard. `acquired` must
/// not wait (the renewals of the other shards wait on it): start the restore and return.
pub trait ShardHandler: Send + Sync {
    /// The shard's Lease is held and its fence open: restore its history, reconcile its HPAs.
    fn acquired(&self, shard: u32);
    /// The shard's fence is closed: stop reconciling its HPAs and drop their state.
    fn released(&self, shard: u32);
}

/// The coordinator's series.
#[derive(Debug, Clone)]
pub struct ShardMetrics {
    held: IntGauge,
    replicas: IntGauge,
    transitions: IntCounterVec,
}

impl ShardMetrics {
    /// Registers `kube_hpa_controller_shards` (set to `shards`),
    /// `kube_hpa_controller_shards_held`, `kube_hpa_controller_shard_replicas` and
    /// `kube_hpa_controller_shard_transitions_total{event}`.
    pub fn register(registry: &Registry, shards: u32) -> Result<Self, prometheus::Error> {
        let total = IntGauge::new(
            "kube_hpa_controller_shards",
            "With --shards: the number of shards (the flag's value).",
        )?;
        total.set(i64::from(shards));
        let held = IntGauge::new(
            "kube_hpa_controller_shards_held",
            "With --shards: the shards whose Lease this replica holds.",
        )?;
        let replicas = IntGauge::new(
            "kube_hpa_controller_shard_replicas",
            "With --shards: the live replicas this replica counts (itself included), from their member Leases.",
        )?;
        let transitions = IntCounterVec::new(
            Opts::new(
                "kube_hpa_controller_shard_transitions_total",
                "With --shards: shards this replica took (acquired), gave up (released) or lost (renewals failed for the renew deadline).",
            ),
            &["event"],
        )?;
        for e in ["acquired", "released", "lost"] {
            transitions.with_label_values(&[e]);
        }
        registry.register(Box::new(total))?;
        registry.register(Box::new(held.clone()))?;
        registry.register(Box::new(replicas.clone()))?;
        registry.register(Box::new(transitions.clone()))?;
        Ok(Self {
            held,
            replicas,
            transitions,
        })
    }
}

/// One replica's side of the shard group.
pub struct Coordinator {
    api: Api<Lease>,
    config: CoordinatorConfig,
    fences: Arc<ShardFences>,
    observer: Observer,
    /// The last object seen or written of each Lease, by name (its resourceVersion is the
    /// precondition of the next update).
    leases: HashMap<String, Lease>,
    held: BTreeSet<u32>,
    /// The send time of each held shard's last successful renewal.
    renewed: HashMap<u32, Instant>,
    metrics: Option<ShardMetrics>,
    standby: Option<Standby>,
}

impl std::fmt::Debug for Coordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordinator")
            .field("config", &self.config)
            .field("held", &self.held)
            .finish_non_exhaustive()
    }
}

fn meta_str<'a>(map: Option<&'a BTreeMap<String, String>>, key: &str) -> Option<&'a str> {
    map.and_then(|m| m.get(key)).map(String::as_str)
}

fn holder_of(lease: &Lease) -> &str {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.as_deref())
        .unwrap_or("")
}

fn duration_of(lease: &Lease) -> Duration {
    let secs = lease
        .spec
        .as_ref()
        .and_then(|s| s.lease_duration_seconds)
        .unwrap_or(0);
    Duration::from_secs(u64::try_from(secs).unwrap_or(0))
}

impl Coordinator {
    /// A coordinator writing through `client` (the leader-election client: Lease writes are
    /// not fenced), opening and closing `fences`.
    pub fn new(client: kube::Client, config: CoordinatorConfig, fences: Arc<ShardFences>) -> Self {
        Self {
            api: Api::namespaced(client, &config.namespace),
            config,
            fences,
            observer: Observer::new(),
            leases: HashMap::new(),
            held: BTreeSet::new(),
            renewed: HashMap::new(),
            metrics: None,
            standby: None,
        }
    }

    /// Reports into `metrics`.
    pub fn with_metrics(mut self, metrics: ShardMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The shards held now.
    pub fn held(&self) -> &BTreeSet<u32> {
        &self.held
    }

    fn labels(&self, role: &str) -> BTreeMap<String, String> {
        BTreeMap::from([
            (GROUP_LABEL.to_string(), self.config.name.clone()),
            (ROLE_LABEL.to_string(), role.to_string()),
        ])
    }

    fn lease_seconds(&self) -> i32 {
        i32::try_from(self.config.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX)
    }

    /// Runs a round every retry period until `stop`, then releases everything.
    pub async fn run(mut self, handler: Arc<dyn ShardHandler>, stop: impl Future<Output = ()>) {
        tracing::info!(
            group = %format!("{}/{}", self.config.namespace, self.config.name),
            shards = self.config.shards,
            shard_by = self.config.by.as_str(),
            identity = %self.config.identity,
            "taking part in the shard group"
        );
        let mut stop = std::pin::pin!(stop);
        loop {
            tokio::select! {
                () = self.round(handler.as_ref()) => {}
                () = &mut stop => break,
            }
            tokio::select! {
                () = tokio::time::sleep(self.config.retry_period) => {}
                () = &mut stop => break,
            }
        }
        self.leave(handler.as_ref()).await;
    }

    /// Closes every fence, releases every held shard and deletes the member Lease.
    pub async fn leave(&mut self, handler: &dyn ShardHandler) {
        self.fences.close_all();
        let held: Vec<u32> = self.held.iter().copied().collect();
        for s in held {
            self.give_up(s, handler, "released").await;
        }
        let name = member_lease_name(&self.config.name, &self.config.identity);
        if let Err(e) = self.api.delete(&name, &DeleteParams::default()).await {
            tracing::debug!(v = 2, lease = %name, error = %e, "member Lease not deleted");
        }
    }

    async fn bounded<T, E: std::fmt::Display>(
        &self,
        what: &str,
        f: impl Future<Output = Result<T, E>>,
    ) -> Result<T, String> {
        match tokio::time::timeout(self.config.renew_deadline, f).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(format!("{what}: {e}")),
            Err(_) => Err(format!("{what}: context deadline exceeded")),
        }
    }

    /// One round: read, renew, plan, give up, take.
    pub async fn round(&mut self, handler: &dyn ShardHandler) {
        let lp = ListParams::default().labels(&format!("{GROUP_LABEL}={}", self.config.name));
        let listed = self.bounded("list Leases", self.api.list(&lp)).await;
        let single = self
            .bounded("get Lease", self.api.get_opt(&self.config.name))
            .await;
        let now = Instant::now();
        let read_ok = match &listed {
            Ok(list) => {
                let present: BTreeSet<String> = list
                    .items
                    .iter()
                    .filter_map(|l| l.metadata.name.clone())
                    .collect();
                for lease in &list.items {
                    self.see(lease, now);
                }
                let single_name = self.config.name.clone();
                self.observer
                    .retain(|n| present.contains(n) || n == single_name);
                self.leases
                    .retain(|n, _| present.contains(n) || *n == single_name);
                true
            }
            Err(e) => {
                tracing::error!(error = %e, "shard Leases not read");
                false
            }
        };
        // The unsharded Lease: held (stand down), or released or first seen less than a
        // lease duration ago (take nothing yet: a replica without --shards may still take it).
        let (single_leader, single_settling) = match single {
            Ok(Some(lease)) => {
                self.see(&lease, now);
                let holder = self
                    .observer
                    .live_holder(&self.config.name, now)
                    .map(str::to_string);
                let settling = holder.is_none()
                    && self.observer.changed_within(
                        &self.config.name,
                        now,
                        self.config.lease_duration,
                    );
                (holder, settling)
            }
            Ok(None) => (None, false),
            Err(e) => {
                tracing::error!(error = %e, "Lease not read");
                (None, true)
            }
        };

        self.renew_member().await;
        self.renew_held(handler).await;
        if !read_ok {
            return;
        }

        let now = Instant::now();
        let members: Vec<Member> = self
            .leases
            .values()
            .filter(|l| meta_str(l.metadata.labels.as_ref(), ROLE_LABEL) == Some("member"))
            .filter_map(|l| {
                let name = l.metadata.name.as_deref()?;
                let identity = self.observer.live_holder(name, now)?;
                let annotations = l.metadata.annotations.as_ref();
                let shards = meta_str(annotations, SHARDS_ANNOTATION)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                // An unknown key counts as different (nothing is taken while it runs).
                let by = match meta_str(annotations, SHARD_BY_ANNOTATION) {
                    None => Some(ShardBy::Hpa),
                    Some(v) => ShardBy::parse(v),
                };
                Some(Member {
                    identity: identity.to_string(),
                    shards: if by.is_some() { shards } else { 0 },
                    by: by.unwrap_or_default(),
                })
            })
            .collect();
        let holders: Vec<Option<String>> = (0..self.config.shards)
            .map(|s| {
                let name = shard_lease_name(&self.config.name, s);
                self.observer.live_holder(&name, now).map(str::to_string)
            })
            .collect();
        let p = plan(&PlanInput {
            me: &self.config.identity,
            shards: self.config.shards,
            by: self.config.by,
            members: &members,
            holders: &holders,
            held: &self.held,
            single_leader: single_leader.as_deref(),
            single_settling,
        });
        if let Some(m) = &self.metrics {
            m.replicas.set(i64::from(p.replicas));
        }
        if p.standby != self.standby {
            match &p.standby {
                Some(Standby::SingleLeader(h)) => tracing::warn!(
                    holder = %h,
                    lease = %format!("{}/{}", self.config.namespace, self.config.name),
                    "the unsharded Lease is held: taking no shard while it is"
                ),
                Some(Standby::SingleSettling) => tracing::info!(
                    lease = %format!("{}/{}", self.config.namespace, self.config.name),
                    "the unsharded Lease changed less than a lease duration ago: taking no shard until it has not"
                ),
                Some(Standby::OtherSharding {
                    identity,
                    shards,
                    by,
                }) => tracing::warn!(
                    replica = %identity,
                    its_shards = shards,
                    its_shard_by = by.as_str(),
                    shards = self.config.shards,
                    shard_by = self.config.by.as_str(),
                    "a replica runs with another --shards or --shard-by: taking no shard while it does"
                ),
                None => {}
            }
            self.standby = p.standby.clone();
        }
        for s in p.release {
            self.give_up(s, handler, "released").await;
        }
        for s in p.acquire {
            self.take(s, handler).await;
        }
        self.clean_up_members(now).await;
    }

    fn see(&mut self, lease: &Lease, now: Instant) {
        let Some(name) = lease.metadata.name.clone() else {
            return;
        };
        let version = lease.metadata.resource_version.clone().unwrap_or_default();
        self.observer
            .observe(&name, &version, holder_of(lease), duration_of(lease), now);
        self.leases.insert(name, lease.clone());
    }

    fn spec(&self, holder: &str, acquired: Option<MicroTime>, transitions: i32) -> LeaseSpec {
        let now = MicroTime(Timestamp::now());
        LeaseSpec {
            holder_identity: Some(holder.to_string()),
            lease_duration_seconds: Some(if holder.is_empty() {
                1
            } else {
                self.lease_seconds()
            }),
            acquire_time: Some(acquired.unwrap_or_else(|| now.clone())),
            renew_time: Some(now),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }

    fn new_lease(&self, name: &str, role: &str, spec: LeaseSpec) -> Lease {
        let mut annotations = BTreeMap::from([
            (
                SHARDS_ANNOTATION.to_string(),
                self.config.shards.to_string(),
            ),
            (
                SHARD_BY_ANNOTATION.to_string(),
                self.config.by.as_str().to_string(),
            ),
        ]);
        if role == "member"
            && let Some(a) = &self.config.address
        {
            annotations.insert(ADDRESS_ANNOTATION.to_string(), a.clone());
        }
        Lease {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some(self.config.namespace.clone()),
                labels: Some(self.labels(role)),
                annotations: Some(annotations),
                ..ObjectMeta::default()
            },
            spec: Some(spec),
        }
    }

    /// Creates `name` when it is not known, else updates it from the last object seen with
    /// `spec` (and this replica's labels and annotations). The written object is kept.
    async fn write(&mut self, name: &str, role: &str, spec: LeaseSpec) -> Result<(), String> {
        let fresh = self.new_lease(name, role, spec);
        let written = match self.leases.get(name) {
            None => {
                self.bounded(
                    "create Lease",
                    self.api.create(&PostParams::default(), &fresh),
                )
                .await?
            }
            Some(old) => {
                let mut lease = old.clone();
                lease.spec = fresh.spec;
                let labels = lease.metadata.labels.get_or_insert_with(BTreeMap::new);
                labels.extend(fresh.metadata.labels.unwrap_or_default());
                let annotations = lease.metadata.annotations.get_or_insert_with(BTreeMap::new);
                annotations.extend(fresh.metadata.annotations.unwrap_or_default());
                self.bounded(
                    "update Lease",
                    self.api.replace(name, &PostParams::default(), &lease),
                )
                .await?
            }
        };
        self.leases.insert(name.to_string(), written);
        Ok(())
    }

    async fn renew_member(&mut self) {
        let name = member_lease_name(&self.config.name, &self.config.identity);
        let (acquired, transitions) = self
            .leases
            .get(&name)
            .and_then(|l| l.spec.as_ref())
            .map(|s| (s.acquire_time.clone(), s.lease_transitions.unwrap_or(0)))
            .unwrap_or((None, 0));
        let spec = self.spec(&self.config.identity.clone(), acquired, transitions);
        if let Err(e) = self.write(&name, "member", spec).await {
            // A conflict (or a create that raced) is read again next round.
            self.leases.remove(&name);
            tracing::error!(lease = %name, error = %e, "member Lease not renewed");
        }
    }

    async fn renew_held(&mut self, handler: &dyn ShardHandler) {
        let held: Vec<u32> = self.held.iter().copied().collect();
        for s in held {
            let name = shard_lease_name(&self.config.name, s);
            let (acquired, transitions) = self
                .leases
                .get(&name)
                .and_then(|l| l.spec.as_ref())
                .map(|sp| (sp.acquire_time.clone(), sp.lease_transitions.unwrap_or(0)))
                .unwrap_or((None, 0));
            // Renewing a Lease someone else took over (seen in this round's list) would
            // write over its holder: it is lost.
            let holder = self.leases.get(&name).map(holder_of).unwrap_or("");
            let taken = !holder.is_empty() && holder != self.config.identity;
            let sent = Instant::now();
            let result = if taken {
                Err(format!("held by {holder}"))
            } else {
                let spec = self.spec(&self.config.identity.clone(), acquired, transitions);
                self.write(&name, "shard", spec).await
            };
            match result {
                Ok(()) => {
                    self.fences.renewed(s, sent);
                    self.renewed.insert(s, sent);
                    tracing::trace!(v = 5, lease = %name, "Successfully renewed lease");
                }
                Err(e) => {
                    let last = self.renewed.get(&s).copied().unwrap_or(sent);
                    if taken || sent.saturating_duration_since(last) >= self.config.renew_deadline {
                        tracing::info!(lease = %name, error = %e, "Failed to renew lease");
                        self.fences.close(s);
                        self.held.remove(&s);
                        self.renewed.remove(&s);
                        handler.released(s);
                        self.count("lost");
                    } else {
                        tracing::error!(lease = %name, error = %e, "Failed to update lease");
                    }
                }
            }
        }
        self.set_held_gauge();
    }

    async fn give_up(&mut self, s: u32, handler: &dyn ShardHandler, event: &str) {
        // The fence closes before the Lease is given up: no write for the shard after it.
        self.fences.close(s);
        self.held.remove(&s);
        self.renewed.remove(&s);
        handler.released(s);
        self.count(event);
        let name = shard_lease_name(&self.config.name, s);
        let transitions = self
            .leases
            .get(&name)
            .and_then(|l| l.spec.as_ref())
            .and_then(|sp| sp.lease_transitions)
            .unwrap_or(0);
        let spec = self.spec("", None, transitions);
        match self.write(&name, "shard", spec).await {
            Ok(()) => tracing::info!(lease = %name, "released the shard"),
            Err(e) => tracing::error!(lease = %name, error = %e, "Failed to release lease"),
        }
        self.set_held_gauge();
    }

    async fn take(&mut self, s: u32, handler: &dyn ShardHandler) {
        let name = shard_lease_name(&self.config.name, s);
        let transitions = self
            .leases
            .get(&name)
            .and_then(|l| l.spec.as_ref())
            .and_then(|sp| sp.lease_transitions)
            .map_or(0, |t| t.saturating_add(1));
        let spec = self.spec(&self.config.identity.clone(), None, transitions);
        let sent = Instant::now();
        match self.write(&name, "shard", spec).await {
            Ok(()) => {
                self.fences.renewed(s, sent);
                self.renewed.insert(s, sent);
                self.held.insert(s);
                self.count("acquired");
                self.set_held_gauge();
                tracing::info!(lease = %name, "Successfully acquired lease");
                handler.acquired(s);
            }
            Err(e) => {
                // Another replica won it (409), or the request failed: read again next round.
                self.leases.remove(&name);
                tracing::debug!(v = 4, lease = %name, error = %e, "Failed to acquire lease");
            }
        }
    }

    /// Deletes the member Leases of replicas gone for two lease durations (crashed: a
    /// replica that stops deletes its own).
    async fn clean_up_members(&mut self, now: Instant) {
        let stale: Vec<(String, Option<String>)> = self
            .leases
            .iter()
            .filter(|(_, l)| meta_str(l.metadata.labels.as_ref(), ROLE_LABEL) == Some("member"))
            .filter(|(name, _)| {
                self.observer
                    .expired_for(name, now)
                    .is_some_and(|d| d >= 2 * self.config.lease_duration)
            })
            .map(|(name, l)| (name.clone(), l.metadata.resource_version.clone()))
            .collect();
        for (name, rv) in stale {
            let dp = DeleteParams {
                preconditions: Some(Preconditions {
                    resource_version: rv,
                    uid: None,
                }),
                ..DeleteParams::default()
            };
            match self
                .bounded("delete Lease", self.api.delete(&name, &dp))
                .await
            {
                Ok(_) => {
                    tracing::info!(lease = %name, "deleted the member Lease of a replica gone");
                    self.leases.remove(&name);
                }
                Err(e) => {
                    tracing::debug!(v = 2, lease = %name, error = %e, "member Lease not deleted")
                }
            }
        }
    }

    fn count(&self, event: &str) {
        if let Some(m) = &self.metrics {
            m.transitions.with_label_values(&[event]).inc();
        }
    }

    fn set_held_gauge(&self) {
        if let Some(m) = &self.metrics {
            m.held
                .set(i64::try_from(self.held.len()).unwrap_or(i64::MAX));
        }
    }
}
