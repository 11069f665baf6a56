//! What this replica saw of each Lease, and when: client-go's rule that a Lease is held
//! while its record keeps changing, timed on the observer's own clock.
//!
//! Mirrors `tryAcquireOrRenew` in client-go's `tools/leaderelection/leaderelection.go`
//! (`observedRecord`, `observedTime`): a record's times are never compared with this
//! replica's clock; a Lease is held by its holder until `leaseDurationSeconds` after this
//! replica last saw the record change. A Lease seen for the first time counts as just renewed.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

#[derive(Debug, Clone)]
struct Seen {
    version: String,
    holder: String,
    duration: Duration,
    changed_at: Instant,
}

/// The Leases seen so far, by name.
#[derive(Debug, Default)]
pub struct Observer {
    seen: HashMap<String, Seen>,
}

impl Observer {
    /// An observer that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// The Lease `name` was seen at `now` with `version` (anything that changes with every
    /// write: its resourceVersion), `holder` and `duration`.
    pub fn observe(
        &mut self,
        name: &str,
        version: &str,
        holder: &str,
        duration: Duration,
        now: Instant,
    ) {
        match self.seen.get_mut(name) {
            Some(s) if s.version == version => {}
            Some(s) => {
                s.version = version.to_string();
                s.holder = holder.to_string();
                s.duration = duration;
                s.changed_at = now;
            }
            None => {
                self.seen.insert(
                    name.to_string(),
                    Seen {
                        version: version.to_string(),
                        holder: holder.to_string(),
                        duration,
                        changed_at: now,
                    },
                );
            }
        }
    }

    /// The holder of `name` if it still holds it at `now` (a non-empty holder whose record
    /// changed less than its duration ago).
    pub fn live_holder(&self, name: &str, now: Instant) -> Option<&str> {
        let s = self.seen.get(name)?;
        (!s.holder.is_empty() && now < s.changed_at + s.duration).then_some(s.holder.as_str())
    }

    /// Whether `name` was seen to change less than `within` before `now` (a Lease seen for the
    /// first time counts as just changed).
    pub fn changed_within(&self, name: &str, now: Instant, within: Duration) -> bool {
        self.seen
            .get(name)
            .is_some_and(|s| now < s.changed_at + within)
    }

    /// How long ago `name`'s holder stopped holding it (`None`: still held, or never seen).
    pub fn expired_for(&self, name: &str, now: Instant) -> Option<Duration> {
        let s = self.seen.get(name)?;
        let end = s.changed_at + s.duration;
        (now >= end).then(|| now - end)
    }

    /// Forgets every Lease for which `keep` is false (deleted ones).
    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.seen.retain(|name, _| keep(name));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_lease_is_held_until_its_duration_after_it_last_changed_here() {
        let mut o = Observer::new();
        let d = Duration::from_secs(10);
        o.observe("l", "1", "a", d, Instant::now());
        assert_eq!(o.live_holder("l", Instant::now()), Some("a"));
        tokio::time::advance(Duration::from_secs(9)).await;
        // Seen again unchanged: the clock is not restarted.
        o.observe("l", "1", "a", d, Instant::now());
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(o.live_holder("l", Instant::now()), None);
        assert_eq!(o.expired_for("l", Instant::now()), Some(Duration::ZERO));
        // A renewal restarts it.
        o.observe("l", "2", "a", d, Instant::now());
        assert_eq!(o.live_holder("l", Instant::now()), Some("a"));
        assert_eq!(o.expired_for("l", Instant::now()), None);
        // Released: free at once, and changed just now.
        o.observe("l", "3", "", Duration::from_secs(1), Instant::now());
        assert_eq!(o.live_holder("l", Instant::now()), None);
        assert!(o.changed_within("l", Instant::now(), d));
        tokio::time::advance(d).await;
        assert!(!o.changed_within("l", Instant::now(), d));
        assert!(!o.changed_within("other", Instant::now(), d));
        o.retain(|n| n != "l");
        assert_eq!(o.expired_for("l", Instant::now()), None);
    }
}
