//! Why a write was refused by the process's write fence, and how a reconcile recognises it.
//!
//! No upstream counterpart: client-go's leader election has no fence (see the binary's
//! `fence` module, which enforces it in the clients' request layer). The error type lives here,
//! below that layer, so that the reconcile can tell a write the fence refused from one the API
//! server refused: a fenced write was never sent, and upstream, having no fence, would have
//! made no `FailedRescale` or `FailedUpdateStatus` event for it. The reconcile requeues
//! without an event instead (a renewal that succeeds late must not leave such events behind).

use std::time::Duration;

/// Why a write was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FenceError {
    /// The lease was not renewed recently enough: another instance may hold it.
    #[error(
        "write refused: this instance may no longer hold the leader lease (last renewal {0:?} ago, renew deadline {1:?})"
    )]
    NotLeading(Duration, Duration),
    /// The lease was never acquired.
    #[error("write refused: this instance has not acquired the leader lease")]
    NeverLed,
    /// The process is shutting down.
    #[error("write refused: the controller is shutting down")]
    ShuttingDown,
    /// Shadow mode: this instance writes nothing.
    #[error("write refused: this instance runs in shadow mode (--shadow) and writes nothing")]
    Shadow,
    /// With `--shards`: this replica does not hold the Lease of the write's shard.
    #[error("write refused: this replica does not hold shard {shard} of {shards}")]
    ShardNotHeld {
        /// The write's shard.
        shard: u32,
        /// `--shards`.
        shards: u32,
    },
    /// With `--shards`: the write was made outside any HPA or shard, so no shard's Lease
    /// covers it.
    #[error("write refused: with --shards, a write must be made for an HPA or a shard")]
    Unscoped,
}

/// Whether `err`, or an error it wraps, is a [`FenceError`].
pub fn refused_by_fence(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(err);
    while let Some(e) = cur {
        if e.downcast_ref::<FenceError>().is_some() {
            return true;
        }
        cur = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("PUT \"url\": {0}")]
    struct Wrapped(#[source] FenceError);

    #[test]
    fn found_anywhere_in_the_chain() {
        let e = Wrapped(FenceError::NeverLed);
        assert!(refused_by_fence(&e));
        assert!(refused_by_fence(&FenceError::ShuttingDown));
        let other = std::io::Error::other("write refused: look-alike text");
        assert!(!refused_by_fence(&other));
    }
}
