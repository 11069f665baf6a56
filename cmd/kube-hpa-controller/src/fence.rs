//! The write fence: no write (scale, status, event) leaves the process unless it may still be
//! leading.
//!
//! client-go's leader election (`tools/leaderelection/leaderelection.go`) has no fencing: a
//! leader whose renewals hang, or whose process was frozen, goes on writing until its
//! `OnStoppedLeading` runs, even after a standby took the lease over. This goes one step
//! beyond it. The leader opens the fence after each successful renewal until
//! `send time of that renewal + renewDeadline`, measured on the monotonic clock: a standby
//! can take the lease over no earlier than `leaseDuration` after it saw that renewal, and
//! `renewDeadline < leaseDuration` (the flags are validated so), so every write that passes
//! the fence leaves before any standby can hold the lease. The check runs in the clients'
//! request layer after the client-side throttle, the last moment before the request is
//! handed to the connection. Shutdown closes the fence for good.
//!
//! Without leader election the fence is open until shutdown. With `--shards`, each shard has
//! a fence of its own ([`hpa_sharding::ShardFences`], opened by the shard's Lease renewals)
//! and a write passes only the fence of the shard of the HPA it is made for
//! ([`hpa_sharding::scope`]); a write made for no HPA or shard is refused.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use hpa_sharding::{ShardFences, ShardRefusal};
use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{Gauge, IntCounterVec, IntGauge, Opts, Registry};
use tokio::time::Instant;

/// Why a write was refused (the type the reconcile recognises, so that it requeues a fenced
/// write without a `FailedRescale` or `FailedUpdateStatus` event).
pub use hpa_horizontal::FenceError;

#[derive(Debug)]
struct State {
    origin: Instant,
    /// Nanoseconds since `origin` until which writes may leave.
    open_until: AtomicU64,
    /// Nanoseconds since `origin` of the send time of the last successful renewal.
    renewed_at: AtomicU64,
    renew_deadline: Duration,
    leased: bool,
    read_only: bool,
    ever_renewed: AtomicBool,
    closed: AtomicBool,
    /// `kube_hpa_controller_write_fence_refusals_total`, once registered.
    refusals: OnceLock<IntCounterVec>,
    /// With `--shards`: the fence of each shard.
    shards: Option<Arc<ShardFences>>,
}

/// A shared handle on the fence. Cheap to clone.
#[derive(Debug, Clone)]
pub struct WriteFence {
    state: Arc<State>,
}

impl WriteFence {
    fn with(leased: bool, renew_deadline: Duration) -> Self {
        Self::build(leased, false, renew_deadline)
    }

    fn build(leased: bool, read_only: bool, renew_deadline: Duration) -> Self {
        Self::build_with(leased, read_only, renew_deadline, None)
    }

    fn build_with(
        leased: bool,
        read_only: bool,
        renew_deadline: Duration,
        shards: Option<Arc<ShardFences>>,
    ) -> Self {
        WriteFence {
            state: Arc::new(State {
                origin: Instant::now(),
                open_until: AtomicU64::new(0),
                renewed_at: AtomicU64::new(0),
                renew_deadline,
                leased,
                read_only,
                ever_renewed: AtomicBool::new(false),
                closed: AtomicBool::new(false),
                refusals: OnceLock::new(),
                shards,
            }),
        }
    }

    /// A fence that is open until [`WriteFence::close`] (no leader election).
    pub fn open() -> Self {
        Self::with(false, Duration::ZERO)
    }

    /// A fence that never opens (shadow mode): every write of the fenced clients is refused,
    /// whatever the lease.
    pub fn read_only() -> Self {
        Self::build(false, true, Duration::ZERO)
    }

    /// With `--shards`: a write passes only the fence of its shard (`read_only`: shadow mode,
    /// none passes).
    pub fn sharded(shards: Arc<ShardFences>, read_only: bool) -> Self {
        Self::build_with(false, read_only, Duration::ZERO, Some(shards))
    }

    /// The fences of the shards, with `--shards`.
    pub fn shard_fences(&self) -> Option<&Arc<ShardFences>> {
        self.state.shards.as_ref()
    }

    /// A fence that opens only for `renew_deadline` after each renewal.
    pub fn leased(renew_deadline: Duration) -> Self {
        Self::with(true, renew_deadline)
    }

    fn nanos_since_origin(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.state.origin).as_nanos())
            .unwrap_or(u64::MAX)
    }

    /// A renewal (or the acquisition) whose request was sent at `sent` succeeded: writes may
    /// leave until `sent + renewDeadline`. Never moves the fence back.
    pub fn renewed(&self, sent: Instant) {
        let at = self.nanos_since_origin(sent);
        let until = at.saturating_add(
            u64::try_from(self.state.renew_deadline.as_nanos()).unwrap_or(u64::MAX),
        );
        self.state.renewed_at.fetch_max(at, Ordering::AcqRel);
        self.state.open_until.fetch_max(until, Ordering::AcqRel);
        self.state.ever_renewed.store(true, Ordering::Release);
    }

    /// Closes the fence for good (shutdown, or leadership lost).
    pub fn close(&self) {
        self.state.closed.store(true, Ordering::Release);
    }

    /// Whether the fence was closed for good.
    pub fn is_closed(&self) -> bool {
        self.state.closed.load(Ordering::Acquire)
    }

    /// Whether a write may leave now.
    pub fn check(&self) -> Result<(), FenceError> {
        if self.state.read_only {
            return Err(FenceError::Shadow);
        }
        if self.is_closed() {
            return Err(FenceError::ShuttingDown);
        }
        if let Some(fences) = &self.state.shards {
            let Some(scope) = hpa_sharding::scope::current() else {
                return Err(FenceError::Unscoped);
            };
            let shard = fences.shard_of(&scope);
            return fences.check(shard).map_err(|r| match r {
                ShardRefusal::Expired { since, deadline } => {
                    FenceError::NotLeading(since, deadline)
                }
                ShardRefusal::NotHeld | ShardRefusal::OutOfRange => FenceError::ShardNotHeld {
                    shard,
                    shards: fences.shards(),
                },
            });
        }
        if !self.state.leased {
            return Ok(());
        }
        if !self.state.ever_renewed.load(Ordering::Acquire) {
            return Err(FenceError::NeverLed);
        }
        let renewed = self.state.renewed_at.load(Ordering::Acquire);
        let now = self.nanos_since_origin(Instant::now());
        if now < self.state.open_until.load(Ordering::Acquire) {
            Ok(())
        } else {
            Err(FenceError::NotLeading(
                Duration::from_nanos(now.saturating_sub(renewed)),
                self.state.renew_deadline,
            ))
        }
    }

    /// [`WriteFence::check`] for a write about to be sent: a refusal is counted in
    /// `kube_hpa_controller_write_fence_refusals_total{reason}` (once
    /// [`FenceMetrics::register`]ed).
    pub fn check_write(&self) -> Result<(), FenceError> {
        let result = self.check();
        if let (Err(e), Some(refusals)) = (&result, self.state.refusals.get()) {
            let reason = match e {
                FenceError::NotLeading(..) => "not_leading",
                FenceError::NeverLed => "never_led",
                FenceError::ShuttingDown => "shutting_down",
                FenceError::Shadow => "shadow",
                FenceError::ShardNotHeld { .. } => "shard_not_held",
                FenceError::Unscoped => "unscoped",
            };
            refusals.with_label_values(&[reason]).inc();
        }
        result
    }

    /// Whether some write may leave now (with `--shards`: the fence of some shard is open).
    pub fn is_open(&self) -> bool {
        match &self.state.shards {
            Some(fences) => {
                !self.state.read_only && !self.is_closed() && !fences.open_shards().is_empty()
            }
            None => self.check().is_ok(),
        }
    }

    /// How long writes may still leave (`None`: no limit but shutdown, or `--shards`, whose
    /// fences each have their own).
    pub fn remaining(&self) -> Option<Duration> {
        if !self.state.leased {
            return None;
        }
        let now = self.nanos_since_origin(Instant::now());
        Some(Duration::from_nanos(
            self.state
                .open_until
                .load(Ordering::Acquire)
                .saturating_sub(now),
        ))
    }
}

/// The fence's series (no upstream counterpart: KCM has no fence), read at each scrape:
/// `kube_hpa_controller_write_fence_open` (1 while a write may leave now),
/// `kube_hpa_controller_write_fence_remaining_seconds` (with leader election: how long writes
/// may still leave without another renewal) and
/// `kube_hpa_controller_write_fence_refusals_total{reason}` (writes refused: `not_leading`,
/// `never_led`, `shutting_down`, `shadow`).
#[derive(Clone)]
pub struct FenceMetrics {
    fence: WriteFence,
    open: IntGauge,
    remaining: Gauge,
    refusals: IntCounterVec,
}

impl FenceMetrics {
    /// Registers the series of `fence` into `registry`.
    pub fn register(fence: &WriteFence, registry: &Registry) -> Result<(), prometheus::Error> {
        let refusals = IntCounterVec::new(
            Opts::new(
                "kube_hpa_controller_write_fence_refusals_total",
                "Writes of the scale, HPA status, event and history clients the write fence refused, by reason (not_leading, never_led, shutting_down, shadow; with --shards also shard_not_held, unscoped).",
            ),
            &["reason"],
        )?;
        let metrics = FenceMetrics {
            fence: fence.clone(),
            open: IntGauge::new(
                "kube_hpa_controller_write_fence_open",
                "1 while the write fence lets a write leave (this instance leads and renewed its Lease within the renew deadline, or runs without leader election; with --shards, it holds some shard within its renew deadline), 0 otherwise.",
            )?,
            remaining: Gauge::new(
                "kube_hpa_controller_write_fence_remaining_seconds",
                "With leader election: how long writes may still leave without another renewal of the Lease (0 when the fence is shut).",
            )?,
            refusals: refusals.clone(),
        };
        // Every reason from the start, at 0, so that a rate is defined before the first refusal.
        for reason in [
            "not_leading",
            "never_led",
            "shutting_down",
            "shadow",
            "shard_not_held",
            "unscoped",
        ] {
            refusals.with_label_values(&[reason]);
        }
        registry.register(Box::new(metrics))?;
        let _ = fence.state.refusals.set(refusals);
        Ok(())
    }
}

impl Collector for FenceMetrics {
    fn desc(&self) -> Vec<&Desc> {
        let mut d = self.open.desc();
        d.extend(self.remaining.desc());
        d.extend(self.refusals.desc());
        d
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let open = self.fence.is_open();
        self.open.set(i64::from(open));
        let mut out = self.open.collect();
        if let Some(remaining) = self.fence.remaining() {
            self.remaining
                .set(if open { remaining.as_secs_f64() } else { 0.0 });
            out.extend(self.remaining.collect());
        }
        out.extend(self.refusals.collect());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn its_series_follow_the_fence() {
        let registry = Registry::new();
        let f = WriteFence::leased(Duration::from_secs(10));
        FenceMetrics::register(&f, &registry).unwrap();
        let text = || {
            let mut buf = Vec::new();
            prometheus::Encoder::encode(
                &prometheus::TextEncoder::new(),
                &registry.gather(),
                &mut buf,
            )
            .unwrap();
            String::from_utf8(buf).unwrap()
        };
        assert!(text().contains("kube_hpa_controller_write_fence_open 0\n"));
        assert_eq!(f.check_write(), Err(FenceError::NeverLed));
        f.renewed(Instant::now());
        tokio::time::advance(Duration::from_secs(4)).await;
        let t = text();
        assert!(
            t.contains("kube_hpa_controller_write_fence_open 1\n"),
            "{t}"
        );
        assert!(
            t.contains("kube_hpa_controller_write_fence_remaining_seconds 6\n"),
            "{t}"
        );
        tokio::time::advance(Duration::from_secs(7)).await;
        assert!(f.check_write().is_err());
        f.close();
        assert_eq!(f.check_write(), Err(FenceError::ShuttingDown));
        let t = text();
        assert!(
            t.contains("kube_hpa_controller_write_fence_open 0\n"),
            "{t}"
        );
        assert!(
            t.contains("kube_hpa_controller_write_fence_remaining_seconds 0\n"),
            "{t}"
        );
        for reason in ["never_led", "not_leading", "shutting_down"] {
            assert!(
                t.contains(&format!(
                    "kube_hpa_controller_write_fence_refusals_total{{reason=\"{reason}\"}} 1\n"
                )),
                "{reason}: {t}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_sharded_fence_lets_a_write_pass_only_for_a_shard_held() {
        let fences = Arc::new(ShardFences::new(4, Duration::from_secs(10)));
        let f = WriteFence::sharded(fences.clone(), false);
        assert!(!f.is_open());
        // No scope: refused, whatever is held.
        fences.renewed(0, Instant::now());
        assert_eq!(f.check(), Err(FenceError::Unscoped));
        assert!(f.is_open());
        let (held, other) = {
            let keys: Vec<String> = (0..64).map(|i| format!("ns/hpa-{i}")).collect();
            let held = keys
                .iter()
                .find(|k| hpa_sharding::shard_of(k, 4) == 0)
                .cloned()
                .unwrap();
            let other = keys
                .iter()
                .find(|k| hpa_sharding::shard_of(k, 4) == 2)
                .cloned()
                .unwrap();
            (held, other)
        };
        let check = |key: String| {
            let f = f.clone();
            async move { hpa_sharding::scope::for_hpa(&key, async { f.check_write() }).await }
        };
        assert_eq!(check(held.clone()).await, Ok(()));
        assert_eq!(
            check(other.clone()).await,
            Err(FenceError::ShardNotHeld {
                shard: 2,
                shards: 4
            })
        );
        let history = hpa_sharding::scope::with_scope(hpa_sharding::WriteScope::Shard(0), async {
            f.check()
        })
        .await;
        assert_eq!(history, Ok(()));
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(matches!(
            check(held.clone()).await,
            Err(FenceError::NotLeading(..))
        ));
        fences.renewed(0, Instant::now());
        assert_eq!(check(held.clone()).await, Ok(()));
        fences.close(0);
        assert!(matches!(
            check(held.clone()).await,
            Err(FenceError::ShardNotHeld { .. })
        ));
        fences.renewed(0, Instant::now());
        f.close();
        assert_eq!(check(held).await, Err(FenceError::ShuttingDown));
        let shadow = WriteFence::sharded(fences, true);
        assert_eq!(shadow.check(), Err(FenceError::Shadow));
    }

    #[tokio::test(start_paused = true)]
    async fn read_only_fence_never_opens() {
        let f = WriteFence::read_only();
        assert_eq!(f.check(), Err(FenceError::Shadow));
        f.renewed(Instant::now());
        assert_eq!(f.check(), Err(FenceError::Shadow));
    }

    #[tokio::test(start_paused = true)]
    async fn open_fence_refuses_only_after_close() {
        let f = WriteFence::open();
        assert_eq!(f.check(), Ok(()));
        tokio::time::advance(Duration::from_secs(3600)).await;
        assert_eq!(f.check(), Ok(()));
        f.close();
        assert_eq!(f.check(), Err(FenceError::ShuttingDown));
    }

    #[tokio::test(start_paused = true)]
    async fn leased_fence_opens_for_the_renew_deadline_from_the_send_time() {
        let f = WriteFence::leased(Duration::from_secs(10));
        assert_eq!(f.check(), Err(FenceError::NeverLed));
        let sent = Instant::now();
        tokio::time::advance(Duration::from_secs(2)).await;
        f.renewed(sent);
        assert_eq!(f.check(), Ok(()));
        assert_eq!(f.remaining(), Some(Duration::from_secs(8)));
        tokio::time::advance(Duration::from_millis(7_999)).await;
        assert_eq!(f.check(), Ok(()));
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(matches!(f.check(), Err(FenceError::NotLeading(_, _))));
        // An older renewal never moves it back; a newer one reopens it.
        f.renewed(sent);
        assert!(f.check().is_err());
        f.renewed(Instant::now());
        assert_eq!(f.check(), Ok(()));
        f.close();
        assert_eq!(f.check(), Err(FenceError::ShuttingDown));
    }
}
