//! Leader election on a `coordination.k8s.io/v1` Lease with client-go's semantics.
//!
//! Mirrors `staging/src/k8s.io/client-go/tools/leaderelection/leaderelection.go`
//! (`tryAcquireOrRenew`, `acquire`, `renew`, `release`) and `resourcelock/leaselock.go`.
//! A candidate takes the lease when it is free or when its holder has not renewed it for
//! `leaseDuration` *as observed locally* (the record's times are not trusted across clocks);
//! the leader renews every `retryPeriod` and gives up when renewals keep failing for
//! `renewDeadline`. The decision logic works against the [`LeaseLock`] trait so it is
//! tested without a server; [`KubeLeaseLock`] is the real lock.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use hpa_config::Clock;
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::api::{Api, PostParams};
use prometheus::{IntCounterVec, IntGaugeVec, Opts, Registry};
use std::sync::Arc;

use crate::fence::WriteFence;

/// client-go's `JitterFactor` for the acquire loop.
pub const JITTER_FACTOR: f64 = 1.2;

/// The leader-election record kept in a Lease's spec (`resourcelock.LeaderElectionRecord`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LeaderElectionRecord {
    /// Who holds the lease; empty when released.
    pub holder_identity: String,
    /// How long the holder's claim lasts after its last renewal, in seconds.
    pub lease_duration_seconds: i32,
    /// When the current holder acquired it.
    pub acquire_time: Option<Timestamp>,
    /// When it was last renewed.
    pub renew_time: Option<Timestamp>,
    /// How many times the holder changed.
    pub leader_transitions: i32,
}

/// A failed call to the lock's API.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// The API answered with an error or could not be reached.
    #[error("{0}")]
    Api(#[from] kube::Error),
    /// The lock was updated before it was ever read.
    #[error("lease not initialized, call get or create first")]
    NotInitialized,
}

/// Storage for the election record (client-go's `resourcelock.Interface`).
pub trait LeaseLock: Send {
    /// Reads the record; `None` when the lock object does not exist. The string is the raw
    /// form used to notice any change, as client-go compares raw bytes.
    fn get(
        &mut self,
    ) -> impl Future<Output = Result<Option<(LeaderElectionRecord, String)>, LockError>> + Send;
    /// Creates the lock object with `record`.
    fn create(
        &mut self,
        record: &LeaderElectionRecord,
    ) -> impl Future<Output = Result<(), LockError>> + Send;
    /// Replaces the record, failing on a conflict with a newer version.
    fn update(
        &mut self,
        record: &LeaderElectionRecord,
    ) -> impl Future<Output = Result<(), LockError>> + Send;
    /// This candidate's identity.
    fn identity(&self) -> &str;
    /// `namespace/name` of the lock, for logs.
    fn describe(&self) -> String;
    /// Records a `LeaderElection` event on the lock object, `"<identity> <what>"`
    /// (`resourcelock.LeaseLock.RecordEvent`). Must not wait on the API.
    fn record_event(&mut self, _what: &str) {}
    /// Waits, at most `limit`, for the events recorded so far to be written.
    fn flush_events(&mut self, _limit: Duration) -> impl Future<Output = ()> + Send {
        async {}
    }
}

/// Leader-election timings and identity.
#[derive(Debug, Clone)]
pub struct ElectionConfig {
    /// `--leader-elect-lease-duration`.
    pub lease_duration: Duration,
    /// `--leader-elect-renew-deadline`.
    pub renew_deadline: Duration,
    /// `--leader-elect-retry-period`.
    pub retry_period: Duration,
    /// The lease name, used as the metrics' `name` label.
    pub name: String,
}

/// The `leader_election_*` metrics of client-go (component-base registry names).
#[derive(Debug, Clone)]
pub struct LeaderMetrics {
    master_status: IntGaugeVec,
    slowpath: IntCounterVec,
}

impl LeaderMetrics {
    /// Creates the metrics and registers them into `registry`.
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let master_status = IntGaugeVec::new(
            Opts::new(
                "leader_election_master_status",
                "[ALPHA] Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.",
            ),
            &["name"],
        )?;
        let slowpath = IntCounterVec::new(
            Opts::new(
                "leader_election_slowpath_total",
                "[ALPHA] Total number of slow path exercised in renewing leader leases. 'name' is the string used to identify the lease. Please make sure to group by name.",
            ),
            &["name"],
        )?;
        registry.register(Box::new(master_status.clone()))?;
        registry.register(Box::new(slowpath.clone()))?;
        Ok(LeaderMetrics {
            master_status,
            slowpath,
        })
    }

    fn set_leader(&self, name: &str, on: bool) {
        self.master_status
            .with_label_values(&[name])
            .set(i64::from(on));
    }
}

/// KCM's `leaderElection` healthz check (`leaderelection.NewLeaderHealthzAdaptor(20s)`):
/// unhealthy when this process leads but has not renewed its lease for more than the lease
/// duration plus the tolerance, i.e. when it should have stopped leading but did not.
#[derive(Debug, Clone)]
pub struct LeaderHealth {
    state: Arc<std::sync::Mutex<HealthState>>,
    tolerance: Duration,
}

#[derive(Debug, Default)]
struct HealthState {
    leading: bool,
    observed: Option<tokio::time::Instant>,
    lease_duration: Duration,
    name: String,
}

/// KCM's tolerance for an expired lease in the healthz check.
pub const HEALTHZ_TOLERANCE: Duration = Duration::from_secs(20);

impl Default for LeaderHealth {
    fn default() -> Self {
        Self::new(HEALTHZ_TOLERANCE)
    }
}

impl LeaderHealth {
    /// A check tolerating `tolerance` past the lease duration.
    pub fn new(tolerance: Duration) -> Self {
        LeaderHealth {
            state: Arc::default(),
            tolerance,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HealthState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn observe(&self, leading: bool, config: &ElectionConfig) {
        let mut s = self.lock();
        s.leading = leading;
        s.observed = Some(tokio::time::Instant::now());
        s.lease_duration = config.lease_duration;
        s.name.clone_from(&config.name);
    }

    /// `LeaderElector.Check`: the error text of a failing check.
    pub fn check(&self) -> Result<(), String> {
        let s = self.lock();
        if !s.leading {
            return Ok(());
        }
        let Some(observed) = s.observed else {
            return Ok(());
        };
        if observed.elapsed() > s.lease_duration + self.tolerance {
            return Err(format!(
                "failed election to renew leadership on lease {}",
                s.name
            ));
        }
        Ok(())
    }
}

/// Why the renew loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RenewOutcome {
    /// Renewals failed for `renewDeadline`: leadership is lost.
    Lost,
    /// Shutdown was requested while leading.
    Shutdown,
}

/// One candidate's view of the election (client-go's `LeaderElector`).
#[derive(Debug)]
pub struct LeaderElector<L> {
    lock: L,
    config: ElectionConfig,
    clock: Arc<dyn Clock>,
    metrics: Option<LeaderMetrics>,
    observed: LeaderElectionRecord,
    observed_raw: Option<String>,
    observed_time: Option<Timestamp>,
    jitter: RandomState,
    fence: Option<WriteFence>,
    health: Option<LeaderHealth>,
}

impl<L: LeaseLock> LeaderElector<L> {
    /// A candidate using `lock`.
    pub fn new(
        lock: L,
        config: ElectionConfig,
        clock: Arc<dyn Clock>,
        metrics: Option<LeaderMetrics>,
    ) -> Self {
        if let Some(m) = &metrics {
            m.set_leader(&config.name, false);
        }
        LeaderElector {
            lock,
            config,
            clock,
            metrics,
            observed: LeaderElectionRecord::default(),
            observed_raw: None,
            observed_time: None,
            jitter: RandomState::new(),
            fence: None,
            health: None,
        }
    }

    /// Opens `fence` for writes after each successful acquisition or renewal (see
    /// [`crate::fence`]) and closes it when leadership is lost.
    pub fn with_fence(mut self, fence: WriteFence) -> Self {
        self.fence = Some(fence);
        self
    }

    /// Reports to `health` (the `leaderElection` healthz check).
    pub fn with_health(mut self, health: LeaderHealth) -> Self {
        self.health = Some(health);
        self
    }

    /// One attempt bounded by `limit` (the renewal round's context in client-go): a hung
    /// call counts as a failed attempt. On success, the fence opens from the time the
    /// attempt began.
    async fn attempt(&mut self, limit: Option<Duration>) -> bool {
        let sent = tokio::time::Instant::now();
        let ok = match limit {
            Some(limit) => tokio::time::timeout(limit, self.try_acquire_or_renew())
                .await
                .unwrap_or_else(|_| {
                    tracing::error!(lock = %self.lock.describe(), err = "context deadline exceeded", "Failed to update lease");
                    false
                }),
            None => self.try_acquire_or_renew().await,
        };
        if ok {
            if let Some(f) = &self.fence {
                f.renewed(sent);
            }
            if let Some(h) = &self.health {
                h.observe(true, &self.config);
            }
        }
        ok
    }

    /// Whether the last observed holder is this candidate.
    pub fn is_leader(&self) -> bool {
        self.observed.holder_identity == self.lock.identity()
    }

    /// The last observed holder (empty if none).
    #[cfg(test)]
    pub fn leader(&self) -> &str {
        &self.observed.holder_identity
    }

    fn set_observed(&mut self, record: LeaderElectionRecord) {
        self.observed = record;
        self.observed_time = Some(self.clock.now());
    }

    fn lease_valid(&self, now: Timestamp) -> bool {
        let Some(seen) = self.observed_time else {
            return false;
        };
        let d = jiff::SignedDuration::from_secs(i64::from(self.observed.lease_duration_seconds));
        seen.checked_add(d).is_ok_and(|end| end > now)
    }

    /// One attempt to acquire or renew (`tryAcquireOrRenew`); true when this candidate
    /// holds the lease afterwards.
    pub async fn try_acquire_or_renew(&mut self) -> bool {
        let now = self.clock.now();
        let secs = i32::try_from(self.config.lease_duration.as_secs()).unwrap_or(i32::MAX);
        let mut record = LeaderElectionRecord {
            holder_identity: self.lock.identity().to_string(),
            lease_duration_seconds: secs,
            acquire_time: Some(now),
            renew_time: Some(now),
            leader_transitions: 0,
        };

        // 1. Fast path: the leader updates optimistically from what it saw last.
        if self.is_leader() && self.lease_valid(now) {
            record.acquire_time = self.observed.acquire_time;
            record.leader_transitions = self.observed.leader_transitions;
            match self.lock.update(&record).await {
                Ok(()) => {
                    self.set_observed(record);
                    return true;
                }
                Err(e) => crate::v!(
                    2,
                    lock = %self.lock.describe(),
                    err = %e,
                    "Failed to update lease optimistically, falling back to slow path"
                ),
            }
        }

        // 2. Read, or create when absent.
        let (old, raw) = match self.lock.get().await {
            Ok(Some(found)) => found,
            Ok(None) => {
                if let Err(e) = self.lock.create(&record).await {
                    tracing::error!(lock = %self.lock.describe(), error = %e, "Error initially creating lease lock");
                    return false;
                }
                self.set_observed(record);
                return true;
            }
            Err(e) => {
                tracing::error!(lock = %self.lock.describe(), error = %e, "Error retrieving lease lock");
                return false;
            }
        };

        // 3. A changed record restarts the local expiry clock.
        if self.observed_raw.as_deref() != Some(raw.as_str()) {
            self.set_observed(old.clone());
            self.observed_raw = Some(raw);
        }
        if !old.holder_identity.is_empty() && self.lease_valid(now) && !self.is_leader() {
            crate::v!(4, lock = %self.lock.describe(), holder = %old.holder_identity, "Lease is held by and has not yet expired");
            return false;
        }

        // 4. Take over or renew.
        if self.is_leader() {
            record.acquire_time = old.acquire_time;
            record.leader_transitions = old.leader_transitions;
            if let Some(m) = &self.metrics {
                m.slowpath.with_label_values(&[&self.config.name]).inc();
            }
        } else {
            record.leader_transitions = old.leader_transitions.saturating_add(1);
        }
        if let Err(e) = self.lock.update(&record).await {
            tracing::error!(lock = %self.lock.describe(), error = %e, "Failed to update lease");
            return false;
        }
        self.set_observed(record);
        true
    }

    fn jittered(&self, base: Duration) -> Duration {
        let mut h = self.jitter.build_hasher();
        h.write_u64(self.clock.now().as_nanosecond() as u64);
        let frac = (h.finish() % 10_000) as f64 / 10_000.0;
        base.mul_f64(1.0 + frac * JITTER_FACTOR)
    }

    /// Tries until this candidate leads (true) or `shutdown` resolves (false), waiting a
    /// jittered retry period between attempts (`acquire`).
    pub async fn acquire(&mut self, shutdown: &mut (impl Future<Output = ()> + Unpin)) -> bool {
        tracing::info!(lock = %self.lock.describe(), "Attempting to acquire leader lease...");
        loop {
            if self.attempt(Some(self.config.renew_deadline)).await {
                self.lock.record_event("became leader");
                tracing::info!(lock = %self.lock.describe(), "Successfully acquired lease");
                if let Some(m) = &self.metrics {
                    m.set_leader(&self.config.name, true);
                }
                return true;
            }
            crate::v!(4, lock = %self.lock.describe(), "Failed to acquire lease");
            let wait = self.jittered(self.config.retry_period);
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = &mut *shutdown => return false,
            }
        }
    }

    /// Renews every retry period until a renewal round fails for the whole renew deadline
    /// ([`RenewOutcome::Lost`]) or `shutdown` resolves (`renew`). Each round is bounded by
    /// the renew deadline, a hung attempt included (client-go's `timeoutCtx`); when it
    /// passes, the fence is closed at once. Records `stopped leading` when it returns.
    pub async fn renew(
        &mut self,
        shutdown: &mut (impl Future<Output = ()> + Unpin),
    ) -> RenewOutcome {
        let outcome = self.renew_rounds(shutdown).await;
        self.lock.record_event("stopped leading");
        outcome
    }

    async fn renew_rounds(
        &mut self,
        shutdown: &mut (impl Future<Output = ()> + Unpin),
    ) -> RenewOutcome {
        loop {
            let deadline = tokio::time::Instant::now() + self.config.renew_deadline;
            let renewed = loop {
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                let attempt = self.attempt(Some(left));
                let ok = tokio::select! {
                    ok = attempt => ok,
                    _ = &mut *shutdown => return RenewOutcome::Shutdown,
                };
                if ok {
                    crate::v!(5, lock = %self.lock.describe(), "Successfully renewed lease");
                    break true;
                }
                let now = tokio::time::Instant::now();
                if now >= deadline {
                    break false;
                }
                let wait = self.config.retry_period.min(deadline - now);
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = &mut *shutdown => return RenewOutcome::Shutdown,
                }
            };
            if !renewed {
                if let Some(f) = &self.fence {
                    f.close();
                }
                if let Some(m) = &self.metrics {
                    m.set_leader(&self.config.name, false);
                }
                if let Some(h) = &self.health {
                    h.observe(false, &self.config);
                }
                tracing::info!(lock = %self.lock.describe(), err = "context deadline exceeded", "Failed to renew lease");
                return RenewOutcome::Lost;
            }
            tokio::select! {
                _ = tokio::time::sleep(self.config.retry_period) => {}
                _ = &mut *shutdown => return RenewOutcome::Shutdown,
            }
        }
    }

    /// Waits, at most `limit`, for the `LeaderElection` events recorded so far to be
    /// written (before the process exits).
    pub async fn flush_events(&mut self, limit: Duration) {
        self.lock.flush_events(limit).await;
    }

    /// Gives the lease up if held (`release`): empty holder, a one-second duration.
    pub async fn release(&mut self) -> bool {
        if !self.is_leader() {
            return true;
        }
        let now = self.clock.now();
        let record = LeaderElectionRecord {
            holder_identity: String::new(),
            lease_duration_seconds: 1,
            acquire_time: Some(now),
            renew_time: Some(now),
            leader_transitions: self.observed.leader_transitions,
        };
        if let Err(e) = self.lock.update(&record).await {
            tracing::error!(lock = %self.lock.describe(), error = %e, "Failed to release lease");
            return false;
        }
        if let Some(m) = &self.metrics {
            m.set_leader(&self.config.name, false);
        }
        if let Some(h) = &self.health {
            h.observe(false, &self.config);
        }
        self.set_observed(record);
        true
    }
}

/// A Lease object as the lock (client-go's `LeaseLock`), updated with the resourceVersion
/// of the last read so that concurrent writers conflict.
#[derive(Debug)]
pub struct KubeLeaseLock {
    api: Api<Lease>,
    name: String,
    namespace: String,
    identity: String,
    lease: Option<Lease>,
    pending: Vec<tokio::task::JoinHandle<()>>,
    events: bool,
}

impl KubeLeaseLock {
    /// A lock on `namespace/name` for the candidate `identity`.
    pub fn new(client: kube::Client, namespace: &str, name: &str, identity: String) -> Self {
        KubeLeaseLock {
            api: Api::namespaced(client, namespace),
            name: name.to_string(),
            namespace: namespace.to_string(),
            identity,
            lease: None,
            pending: Vec::new(),
            events: true,
        }
    }

    /// Records no `LeaderElection` events (shadow mode writes nothing but its Lease).
    pub fn without_events(mut self) -> Self {
        self.events = false;
        self
    }
}

fn record_to_spec(r: &LeaderElectionRecord) -> LeaseSpec {
    LeaseSpec {
        holder_identity: Some(r.holder_identity.clone()),
        lease_duration_seconds: Some(r.lease_duration_seconds),
        acquire_time: r.acquire_time.map(MicroTime),
        renew_time: r.renew_time.map(MicroTime),
        lease_transitions: Some(r.leader_transitions),
        ..LeaseSpec::default()
    }
}

fn spec_to_record(spec: Option<&LeaseSpec>) -> LeaderElectionRecord {
    let Some(s) = spec else {
        return LeaderElectionRecord::default();
    };
    LeaderElectionRecord {
        holder_identity: s.holder_identity.clone().unwrap_or_default(),
        lease_duration_seconds: s.lease_duration_seconds.unwrap_or(0),
        acquire_time: s.acquire_time.as_ref().map(|t| t.0),
        renew_time: s.renew_time.as_ref().map(|t| t.0),
        leader_transitions: s.lease_transitions.unwrap_or(0),
    }
}

impl LeaseLock for KubeLeaseLock {
    async fn get(&mut self) -> Result<Option<(LeaderElectionRecord, String)>, LockError> {
        let Some(lease) = self.api.get_opt(&self.name).await? else {
            return Ok(None);
        };
        let record = spec_to_record(lease.spec.as_ref());
        // The raw form: the spec as the server returned it.
        let raw = format!("{:?}", lease.spec);
        self.lease = Some(lease);
        Ok(Some((record, raw)))
    }

    async fn create(&mut self, record: &LeaderElectionRecord) -> Result<(), LockError> {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(record_to_spec(record)),
        };
        self.lease = Some(self.api.create(&PostParams::default(), &lease).await?);
        Ok(())
    }

    async fn update(&mut self, record: &LeaderElectionRecord) -> Result<(), LockError> {
        let Some(mut lease) = self.lease.clone() else {
            return Err(LockError::NotInitialized);
        };
        lease.spec = Some(record_to_spec(record));
        self.lease = Some(
            self.api
                .replace(&self.name, &PostParams::default(), &lease)
                .await?,
        );
        Ok(())
    }

    fn identity(&self) -> &str {
        &self.identity
    }

    fn describe(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    fn record_event(&mut self, what: &str) {
        let message = format!("{} {what}", self.identity);
        // kube-controller-manager's own event broadcaster logs every event it records at V(0)
        // (`StartStructuredLogging(0)` in controllermanager.go).
        tracing::info!(
            object = %self.describe(),
            fieldPath = "",
            kind = "Lease",
            apiVersion = "coordination.k8s.io/v1",
            r#type = "Normal",
            reason = "LeaderElection",
            // Shown as `message` (a field named so would replace the line's own text).
            event_message = %message,
            "Event occurred"
        );
        if !self.events {
            return;
        }
        let event = lease_event(
            self.lease.as_ref(),
            &self.namespace,
            &self.name,
            &message,
            Timestamp::now(),
        );
        let api: Api<Event> = Api::namespaced(self.api.clone().into_client(), &self.namespace);
        // Asynchronous, as a client-go recorder is: the election never waits on it.
        self.pending.retain(|t| !t.is_finished());
        self.pending.push(tokio::spawn(async move {
            if let Err(e) = api.create(&PostParams::default(), &event).await {
                tracing::error!(error = %e, "Server rejected event (will not retry!)");
            }
        }));
    }

    async fn flush_events(&mut self, limit: Duration) {
        let pending = std::mem::take(&mut self.pending);
        let _ = tokio::time::timeout(limit, futures::future::join_all(pending)).await;
    }
}

/// The component name of this process's own events (KCM's is `kube-controller-manager`).
pub const EVENT_COMPONENT: &str = "kube-hpa-controller";

/// The `LeaderElection` event on the Lease, as client-go's recorder makes it (`makeEvent`:
/// name `<object>.<nanos in hex>`, count 1, `source.component` and `reportingComponent`
/// the component, `reportingInstance` the source host, empty here as in KCM).
pub fn lease_event(
    lease: Option<&Lease>,
    namespace: &str,
    name: &str,
    message: &str,
    now: Timestamp,
) -> Event {
    let meta = lease.map(|l| &l.metadata);
    let nanos = now.as_nanosecond();
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{name}.{nanos:x}")),
            namespace: Some(namespace.to_string()),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: Some("coordination.k8s.io/v1".to_string()),
            kind: Some("Lease".to_string()),
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            uid: meta.and_then(|m| m.uid.clone()),
            resource_version: meta.and_then(|m| m.resource_version.clone()),
            field_path: None,
        },
        reason: Some("LeaderElection".to_string()),
        message: Some(message.to_string()),
        type_: Some("Normal".to_string()),
        source: Some(EventSource {
            component: Some(EVENT_COMPONENT.to_string()),
            host: None,
        }),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        count: Some(1),
        reporting_component: Some(EVENT_COMPONENT.to_string()),
        reporting_instance: Some(String::new()),
        ..Event::default()
    }
}

/// KCM's identity: the host name, `_`, and a random UUID, so two processes on one host
/// never share an identity.
pub fn new_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".to_string());
    format!("{host}_{}", uuid::Uuid::new_v4())
}

#[cfg(test)]
mod tests;
