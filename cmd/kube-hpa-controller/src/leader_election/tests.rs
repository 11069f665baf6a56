use super::*;
use hpa_config::VirtualClock;
use std::sync::Mutex;

/// An in-memory lock shared by several candidates, with a version for conflicts.
#[derive(Debug, Default)]
struct Shared {
    record: Option<LeaderElectionRecord>,
    version: u64,
    fail: bool,
    hang: bool,
    events: Vec<String>,
}

#[derive(Debug)]
struct MemLock {
    shared: Arc<Mutex<Shared>>,
    seen_version: Option<u64>,
    id: String,
}

impl LeaseLock for MemLock {
    async fn get(&mut self) -> Result<Option<(LeaderElectionRecord, String)>, LockError> {
        let s = self.shared.lock().unwrap();
        if s.fail {
            return Err(LockError::NotInitialized);
        }
        self.seen_version = Some(s.version);
        Ok(s.record
            .clone()
            .map(|r| (r.clone(), format!("{}:{r:?}", s.version))))
    }
    async fn create(&mut self, r: &LeaderElectionRecord) -> Result<(), LockError> {
        let mut s = self.shared.lock().unwrap();
        s.version += 1;
        s.record = Some(r.clone());
        self.seen_version = Some(s.version);
        Ok(())
    }
    async fn update(&mut self, r: &LeaderElectionRecord) -> Result<(), LockError> {
        if self.shared.lock().unwrap().hang {
            std::future::pending::<()>().await;
        }
        let mut s = self.shared.lock().unwrap();
        if s.fail || self.seen_version != Some(s.version) {
            return Err(LockError::NotInitialized);
        }
        s.version += 1;
        s.record = Some(r.clone());
        self.seen_version = Some(s.version);
        Ok(())
    }
    fn identity(&self) -> &str {
        &self.id
    }
    fn describe(&self) -> String {
        "kube-system/test".into()
    }
    fn record_event(&mut self, what: &str) {
        self.shared
            .lock()
            .unwrap()
            .events
            .push(format!("{} {what}", self.id));
    }
}

fn cfg() -> ElectionConfig {
    ElectionConfig {
        lease_duration: Duration::from_secs(15),
        renew_deadline: Duration::from_secs(10),
        retry_period: Duration::from_secs(2),
        name: "test".into(),
    }
}

fn candidate(
    shared: &Arc<Mutex<Shared>>,
    id: &str,
    clock: &VirtualClock,
) -> LeaderElector<MemLock> {
    LeaderElector::new(
        MemLock {
            shared: shared.clone(),
            seen_version: None,
            id: id.into(),
        },
        cfg(),
        Arc::new(clock.clone()),
        None,
    )
}

#[tokio::test]
async fn first_candidate_creates_and_second_waits_for_expiry() {
    let clock = VirtualClock::new("2025-01-01T00:00:00Z".parse().unwrap());
    let shared = Arc::new(Mutex::new(Shared::default()));
    let mut a = candidate(&shared, "a", &clock);
    let mut b = candidate(&shared, "b", &clock);
    assert!(a.try_acquire_or_renew().await);
    assert!(a.is_leader());
    assert!(!b.try_acquire_or_renew().await);
    assert_eq!(b.leader(), "a");
    // a renews at 10s: b sees a changed record and restarts its expiry clock.
    clock.advance(jiff::SignedDuration::from_secs(10));
    assert!(a.try_acquire_or_renew().await);
    assert!(!b.try_acquire_or_renew().await);
    // a stops renewing; 14s after b last saw a change, still held.
    clock.advance(jiff::SignedDuration::from_secs(14));
    assert!(!b.try_acquire_or_renew().await);
    // 16s after: expired, b takes over with one more transition.
    clock.advance(jiff::SignedDuration::from_secs(2));
    assert!(b.try_acquire_or_renew().await);
    let r = shared.lock().unwrap().record.clone().unwrap();
    assert_eq!(r.holder_identity, "b");
    assert_eq!(r.leader_transitions, 1);
    assert_eq!(r.lease_duration_seconds, 15);
    // a's optimistic renewal conflicts, and the slow path sees b holding a valid lease.
    assert!(!a.try_acquire_or_renew().await);
    assert!(!a.is_leader());
}

#[tokio::test]
async fn renewal_keeps_acquire_time_and_release_frees_the_lease() {
    let clock = VirtualClock::new("2025-01-01T00:00:00Z".parse().unwrap());
    let shared = Arc::new(Mutex::new(Shared::default()));
    let mut a = candidate(&shared, "a", &clock);
    assert!(a.try_acquire_or_renew().await);
    let acquired = shared.lock().unwrap().record.clone().unwrap().acquire_time;
    clock.advance(jiff::SignedDuration::from_secs(2));
    assert!(a.try_acquire_or_renew().await);
    let r = shared.lock().unwrap().record.clone().unwrap();
    assert_eq!(r.acquire_time, acquired);
    assert_eq!(r.renew_time, Some(clock.now()));
    assert!(a.release().await);
    let r = shared.lock().unwrap().record.clone().unwrap();
    assert_eq!(r.holder_identity, "");
    assert_eq!(r.lease_duration_seconds, 1);
    // A released lease is taken at once by another candidate.
    let mut b = candidate(&shared, "b", &clock);
    assert!(b.try_acquire_or_renew().await);
    assert_eq!(
        shared
            .lock()
            .unwrap()
            .record
            .clone()
            .unwrap()
            .leader_transitions,
        1
    );
}

#[tokio::test(start_paused = true)]
async fn renew_gives_up_after_the_deadline() {
    let clock = VirtualClock::new("2025-01-01T00:00:00Z".parse().unwrap());
    let shared = Arc::new(Mutex::new(Shared::default()));
    let registry = Registry::new();
    let metrics = LeaderMetrics::new(&registry).unwrap();
    let mut a = LeaderElector::new(
        MemLock {
            shared: shared.clone(),
            seen_version: None,
            id: "a".into(),
        },
        cfg(),
        Arc::new(clock.clone()),
        Some(metrics.clone()),
    );
    let mut never = std::pin::pin!(std::future::pending::<()>());
    assert!(a.acquire(&mut never).await);
    assert_eq!(metrics.master_status.with_label_values(&["test"]).get(), 1);
    shared.lock().unwrap().fail = true;
    let started = tokio::time::Instant::now();
    assert_eq!(a.renew(&mut never).await, RenewOutcome::Lost);
    let waited = started.elapsed();
    assert!(
        waited <= Duration::from_secs(12),
        "gave up after {waited:?}"
    );
    assert!(waited >= Duration::from_secs(8), "gave up after {waited:?}");
    assert_eq!(metrics.master_status.with_label_values(&["test"]).get(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_hung_lease_update_ends_leadership_at_the_renew_deadline_and_closes_the_fence() {
    let clock = VirtualClock::new("2025-01-01T00:00:00Z".parse().unwrap());
    let shared = Arc::new(Mutex::new(Shared::default()));
    let fence = WriteFence::leased(cfg().renew_deadline);
    let health = LeaderHealth::default();
    let mut a = candidate(&shared, "a", &clock)
        .with_fence(fence.clone())
        .with_health(health.clone());
    let mut never = std::pin::pin!(std::future::pending::<()>());
    assert!(a.acquire(&mut never).await);
    assert!(fence.check().is_ok());
    assert_eq!(shared.lock().unwrap().events, ["a became leader"]);
    // Let one renewal succeed, then make every update hang.
    let renewed_at = tokio::time::Instant::now();
    shared.lock().unwrap().hang = true;
    let outcome = tokio::time::timeout(Duration::from_secs(60), a.renew(&mut never))
        .await
        .expect("a hung update kept the process leading");
    assert_eq!(outcome, RenewOutcome::Lost);
    // Lost within retry period + renew deadline of the last success.
    let lost_after = renewed_at.elapsed();
    assert!(lost_after <= Duration::from_secs(12), "{lost_after:?}");
    assert!(fence.check().is_err());
    assert_eq!(
        shared.lock().unwrap().events,
        ["a became leader", "a stopped leading"]
    );
    // The healthz check fails once the lease is long expired but we still lead.
    assert!(health.check().is_ok());
}

#[tokio::test(start_paused = true)]
async fn the_fence_closes_before_any_standby_could_take_the_lease() {
    let clock = VirtualClock::new("2025-01-01T00:00:00Z".parse().unwrap());
    let shared = Arc::new(Mutex::new(Shared::default()));
    let fence = WriteFence::leased(cfg().renew_deadline);
    let mut a = candidate(&shared, "a", &clock).with_fence(fence.clone());
    let mut never = std::pin::pin!(std::future::pending::<()>());
    assert!(a.acquire(&mut never).await);
    let acquired = tokio::time::Instant::now();
    // Frozen: no renewal at all. Writes stop at the renew deadline, before the lease
    // duration after which a standby may take over.
    tokio::time::advance(cfg().renew_deadline - Duration::from_millis(1)).await;
    assert!(fence.check().is_ok());
    tokio::time::advance(Duration::from_millis(1)).await;
    assert!(fence.check().is_err());
    assert!(acquired.elapsed() < cfg().lease_duration);
}

#[tokio::test(start_paused = true)]
async fn healthz_fails_when_leading_past_the_lease_plus_tolerance() {
    let health = LeaderHealth::new(Duration::from_secs(20));
    assert!(health.check().is_ok());
    health.observe(true, &cfg());
    tokio::time::advance(Duration::from_secs(35)).await;
    assert!(health.check().is_ok());
    tokio::time::advance(Duration::from_millis(1)).await;
    assert_eq!(
        health.check(),
        Err("failed election to renew leadership on lease test".to_string())
    );
    health.observe(false, &cfg());
    assert!(health.check().is_ok());
}

#[test]
fn lease_events_are_made_as_client_go_makes_them() {
    let now: Timestamp = "2025-01-01T00:00:00Z".parse().unwrap();
    let lease = Lease {
        metadata: ObjectMeta {
            uid: Some("u1".into()),
            resource_version: Some("7".into()),
            ..ObjectMeta::default()
        },
        spec: None,
    };
    let e = lease_event(
        Some(&lease),
        "kube-system",
        "kube-hpa-controller",
        "h_1 became leader",
        now,
    );
    assert_eq!(
        e.metadata.name.as_deref(),
        Some(format!("kube-hpa-controller.{:x}", now.as_nanosecond()).as_str())
    );
    assert_eq!(e.reason.as_deref(), Some("LeaderElection"));
    assert_eq!(e.type_.as_deref(), Some("Normal"));
    assert_eq!(e.involved_object.kind.as_deref(), Some("Lease"));
    assert_eq!(e.involved_object.uid.as_deref(), Some("u1"));
    assert_eq!(e.reporting_component.as_deref(), Some(EVENT_COMPONENT));
    assert_eq!(e.count, Some(1));
}

#[tokio::test(start_paused = true)]
async fn shutdown_stops_the_acquire_loop() {
    let clock = VirtualClock::new("2025-01-01T00:00:00Z".parse().unwrap());
    let shared = Arc::new(Mutex::new(Shared::default()));
    let mut holder = candidate(&shared, "holder", &clock);
    assert!(holder.try_acquire_or_renew().await);
    let mut b = candidate(&shared, "b", &clock);
    let mut stop = std::pin::pin!(tokio::time::sleep(Duration::from_secs(5)));
    assert!(!b.acquire(&mut stop).await);
}

#[test]
fn identity_is_host_and_unique_suffix() {
    let a = new_identity();
    let b = new_identity();
    assert_ne!(a, b);
    assert!(a.contains('_'));
}
