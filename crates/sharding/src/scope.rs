//! What a write is for: the HPA (or shard) on whose behalf a request leaves the process.
//!
//! No upstream counterpart. The write fence sits in the clients' request layer, below
//! `kube::Api`, where a request no longer says which HPA it is for (a scale write names the
//! target, an event is a POST to the namespace). The controller runs each reconcile, each
//! event write and each history flush inside a [`WriteScope`] (a Tokio task-local), and the
//! fence reads it with [`current`] to find the shard whose Lease must be held.

use std::future::Future;
use std::sync::Arc;

use crate::hash::ShardBy;

/// On whose behalf a write is made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteScope {
    /// A write for the HPA `namespace/name` (its scale, status or events).
    Hpa(Arc<str>),
    /// A write for a whole shard (its history ConfigMaps).
    Shard(u32),
}

impl WriteScope {
    /// The shard the write belongs to among `shards`, HPAs sharded `by`.
    pub fn shard(&self, by: ShardBy, shards: u32) -> u32 {
        match self {
            WriteScope::Hpa(key) => by.shard(key, shards),
            WriteScope::Shard(s) => *s,
        }
    }
}

tokio::task_local! {
    static SCOPE: WriteScope;
}

/// Runs `f` with `scope` as the scope of every write it makes.
pub async fn with_scope<F: Future>(scope: WriteScope, f: F) -> F::Output {
    SCOPE.scope(scope, f).await
}

/// Runs `f` on behalf of the HPA `key`.
pub async fn for_hpa<F: Future>(key: &str, f: F) -> F::Output {
    with_scope(WriteScope::Hpa(Arc::from(key)), f).await
}

/// The scope of the running task, if it has one.
pub fn current() -> Option<WriteScope> {
    SCOPE.try_with(Clone::clone).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_scope_is_seen_across_awaits_and_only_inside() {
        assert_eq!(current(), None);
        let seen = for_hpa("ns/a", async {
            tokio::task::yield_now().await;
            current()
        })
        .await;
        assert_eq!(seen, Some(WriteScope::Hpa(Arc::from("ns/a"))));
        assert_eq!(current(), None);
        let shard = with_scope(WriteScope::Shard(3), async { current() }).await;
        assert_eq!(shard.map(|s| s.shard(ShardBy::Hpa, 8)), Some(3));
        assert_eq!(
            WriteScope::Hpa(Arc::from("ns/a")).shard(ShardBy::Hpa, 8),
            crate::hash::shard_of("ns/a", 8)
        );
        assert_eq!(
            WriteScope::Hpa(Arc::from("ns/a")).shard(ShardBy::Namespace, 8),
            crate::hash::shard_of("ns", 8)
        );
    }
}
