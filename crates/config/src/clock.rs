//! The time source every decision reads.
//!
//! Upstream's controller reads `time.Now()` in a few places (stabilization windows, scale
//! events, `lastScaleTime`, pod readiness). Here every such read goes through [`Clock`], so
//! production uses the system clock and scenario replays use a [`VirtualClock`] that moves
//! only when the test says so.

use std::fmt::Debug;
use std::sync::{Arc, RwLock};

use jiff::{SignedDuration, Timestamp};

/// A source of the current time.
pub trait Clock: Debug + Send + Sync {
    /// The current instant.
    fn now(&self) -> Timestamp;
}

/// The real wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A clock that stands still until it is set or advanced; clones share the same time.
#[derive(Debug, Clone)]
pub struct VirtualClock {
    now: Arc<RwLock<Timestamp>>,
}

impl VirtualClock {
    /// A virtual clock reading `start`.
    pub fn new(start: Timestamp) -> Self {
        VirtualClock {
            now: Arc::new(RwLock::new(start)),
        }
    }

    /// Sets the clock to `t` (it may move backwards; scenario steps never ask it to).
    pub fn set(&self, t: Timestamp) {
        match self.now.write() {
            Ok(mut g) => *g = t,
            Err(poisoned) => *poisoned.into_inner() = t,
        }
    }

    /// Moves the clock forward by `d`, saturating at the largest timestamp.
    pub fn advance(&self, d: SignedDuration) {
        let t = self.now();
        self.set(t.checked_add(d).unwrap_or(Timestamp::MAX));
    }
}

impl Clock for VirtualClock {
    fn now(&self) -> Timestamp {
        match self.now.read() {
            Ok(g) => *g,
            Err(poisoned) => *poisoned.into_inner(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn virtual_clock_moves_only_when_told() {
        let start: Timestamp = "2025-01-01T00:00:00Z".parse().unwrap();
        let c = VirtualClock::new(start);
        let shared = c.clone();
        assert_eq!(c.now(), start);
        c.advance(SignedDuration::from_secs(30));
        assert_eq!(shared.now().to_string(), "2025-01-01T00:00:30Z");
        shared.set(start);
        assert_eq!(c.now(), start);
    }

    #[test]
    fn system_clock_is_recent() {
        let now = SystemClock.now();
        assert!(now > "2024-01-01T00:00:00Z".parse().unwrap());
    }
}
