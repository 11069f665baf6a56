//! A write fence per shard: a write for a shard leaves only while this replica holds the
//! shard's Lease within its renew deadline.
//!
//! No upstream counterpart (client-go's leader election has no fence; the binary's `fence`
//! module explains the single-Lease one, which this extends). Each shard's fence opens after
//! a successful acquisition or renewal of its Lease, until `send time + renewDeadline` on the
//! monotonic clock: another replica can take the Lease over no earlier than `leaseDuration`
//! after it saw that renewal, and `renewDeadline < leaseDuration`, so no write for the shard
//! leaves after another replica may hold it. Releasing a shard closes its fence before the
//! Lease is given up.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use crate::hash::ShardBy;
use crate::scope::WriteScope;

/// Why a write for a shard was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShardRefusal {
    /// This replica does not hold the shard (never took it, or released it).
    NotHeld,
    /// The shard's last renewal is older than the renew deadline: another replica may hold it.
    Expired {
        /// Time since the send time of the last successful renewal.
        since: Duration,
        /// The renew deadline.
        deadline: Duration,
    },
    /// No such shard.
    OutOfRange,
}

#[derive(Debug)]
struct Slot {
    /// Nanoseconds since `origin` until which writes may leave (0: closed).
    open_until: AtomicU64,
    /// Nanoseconds since `origin` of the send time of the last successful renewal (0: never).
    renewed_at: AtomicU64,
}

/// The fences of every shard. Shared (`Arc`) between the coordinator, which opens and closes
/// them, and the clients' request layer, which checks them.
#[derive(Debug)]
pub struct ShardFences {
    by: ShardBy,
    origin: Instant,
    renew_deadline: Duration,
    slots: Vec<Slot>,
}

impl ShardFences {
    /// `shards` closed fences, each opening for `renew_deadline` after a renewal; HPAs
    /// sharded by [`ShardBy::Hpa`] (see [`ShardFences::sharded_by`]).
    pub fn new(shards: u32, renew_deadline: Duration) -> Self {
        Self {
            by: ShardBy::Hpa,
            // One nanosecond before now, so that a renewal sent now is not at 0 (closed).
            origin: Instant::now()
                .checked_sub(Duration::from_nanos(1))
                .unwrap_or_else(Instant::now),
            renew_deadline,
            slots: (0..shards)
                .map(|_| Slot {
                    open_until: AtomicU64::new(0),
                    renewed_at: AtomicU64::new(0),
                })
                .collect(),
        }
    }

    /// HPAs sharded `by`.
    pub fn sharded_by(mut self, by: ShardBy) -> Self {
        self.by = by;
        self
    }

    /// The shard a write made in `scope` belongs to.
    pub fn shard_of(&self, scope: &WriteScope) -> u32 {
        scope.shard(self.by, self.shards())
    }

    /// The number of shards.
    pub fn shards(&self) -> u32 {
        u32::try_from(self.slots.len()).unwrap_or(u32::MAX)
    }

    fn nanos(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.origin).as_nanos()).unwrap_or(u64::MAX)
    }

    /// An acquisition or renewal of `shard`'s Lease sent at `sent` succeeded.
    pub fn renewed(&self, shard: u32, sent: Instant) {
        let Some(slot) = self.slots.get(shard as usize) else {
            return;
        };
        let at = self.nanos(sent).max(1);
        let deadline = u64::try_from(self.renew_deadline.as_nanos()).unwrap_or(u64::MAX);
        slot.renewed_at.fetch_max(at, Ordering::AcqRel);
        slot.open_until
            .fetch_max(at.saturating_add(deadline), Ordering::AcqRel);
    }

    /// Closes `shard`'s fence (released or lost) until its next acquisition.
    pub fn close(&self, shard: u32) {
        if let Some(slot) = self.slots.get(shard as usize) {
            slot.open_until.store(0, Ordering::Release);
            slot.renewed_at.store(0, Ordering::Release);
        }
    }

    /// Closes every shard's fence.
    pub fn close_all(&self) {
        for s in 0..self.shards() {
            self.close(s);
        }
    }

    /// Whether a write for `shard` may leave now.
    pub fn check(&self, shard: u32) -> Result<(), ShardRefusal> {
        let Some(slot) = self.slots.get(shard as usize) else {
            return Err(ShardRefusal::OutOfRange);
        };
        let until = slot.open_until.load(Ordering::Acquire);
        if until == 0 {
            return Err(ShardRefusal::NotHeld);
        }
        let now = self.nanos(Instant::now());
        if now < until {
            return Ok(());
        }
        let renewed = slot.renewed_at.load(Ordering::Acquire);
        Err(ShardRefusal::Expired {
            since: Duration::from_nanos(now.saturating_sub(renewed)),
            deadline: self.renew_deadline,
        })
    }

    /// The shards whose fence is open now.
    pub fn open_shards(&self) -> Vec<u32> {
        (0..self.shards())
            .filter(|s| self.check(*s).is_ok())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn each_shard_opens_for_the_renew_deadline_from_its_own_renewal() {
        let f = ShardFences::new(3, Duration::from_secs(10));
        assert_eq!(f.check(0), Err(ShardRefusal::NotHeld));
        assert_eq!(f.check(3), Err(ShardRefusal::OutOfRange));
        let sent = Instant::now();
        tokio::time::advance(Duration::from_secs(2)).await;
        f.renewed(1, sent);
        assert_eq!(f.check(1), Ok(()));
        assert_eq!(f.check(0), Err(ShardRefusal::NotHeld));
        assert_eq!(f.open_shards(), vec![1]);
        tokio::time::advance(Duration::from_millis(7_999)).await;
        assert_eq!(f.check(1), Ok(()));
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(matches!(f.check(1), Err(ShardRefusal::Expired { .. })));
        f.renewed(1, Instant::now());
        assert_eq!(f.check(1), Ok(()));
        f.close(1);
        assert_eq!(f.check(1), Err(ShardRefusal::NotHeld));
        f.renewed(2, Instant::now());
        f.close_all();
        assert!(f.open_shards().is_empty());
    }
}
