//! Which shards a replica takes and which it gives up, from what it observed: pure.
//!
//! No upstream counterpart. Every replica computes the same cap, ⌈shards / live replicas⌉,
//! from the live member Leases, releases what it holds above the cap and takes free shards
//! (no live holder) up to it; so no replica holds more than the cap while another holds
//! fewer, and a lost replica's shards are taken once their Leases expire. A replica takes
//! nothing while a live member runs with another shard count or key (a rolling change of
//! `--shards` or `--shard-by`: the two would split the HPAs differently), gives up everything
//! while the unsharded Lease has a live holder (a replica running without `--shards` does all
//! the work), and takes nothing until the unsharded Lease has stayed unheld and unchanged for a
//! lease duration (a replica without `--shards` may still take a Lease just released). Ties between replicas racing for one shard are settled by the Lease's
//! resourceVersion: one update wins.

use std::collections::BTreeSet;

use crate::hash::{ShardBy, fnv1a64};

/// A replica seen alive through its member Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Its leader-election identity.
    pub identity: String,
    /// The `--shards` it runs with.
    pub shards: u32,
    /// The `--shard-by` it runs with.
    pub by: ShardBy,
}

/// What one replica knows when it plans.
#[derive(Debug, Clone)]
pub struct PlanInput<'a> {
    /// This replica's identity.
    pub me: &'a str,
    /// `--shards`.
    pub shards: u32,
    /// `--shard-by`.
    pub by: ShardBy,
    /// The live members (this replica is counted whether or not it is among them).
    pub members: &'a [Member],
    /// The live holder of each shard's Lease, by shard (`None`: free, released or expired).
    pub holders: &'a [Option<String>],
    /// The shards this replica holds.
    pub held: &'a BTreeSet<u32>,
    /// The live holder of the unsharded Lease, if any.
    pub single_leader: Option<&'a str>,
    /// The unsharded Lease, held by no one, changed less than a lease duration ago (released,
    /// or first seen): a replica running without `--shards` may still take it.
    pub single_settling: bool,
}

/// Why a replica takes no shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standby {
    /// The unsharded Lease is held: its holder reconciles every HPA.
    SingleLeader(String),
    /// The unsharded Lease was released (or first seen) less than a lease duration ago: a
    /// replica without `--shards` may still take it.
    SingleSettling,
    /// A live replica runs with another shard count or shard key.
    OtherSharding {
        /// That replica.
        identity: String,
        /// Its shard count.
        shards: u32,
        /// Its shard key.
        by: ShardBy,
    },
}

/// What to do this round.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Shards to give up.
    pub release: Vec<u32>,
    /// Shards to try to take, in order.
    pub acquire: Vec<u32>,
    /// Why nothing is taken, if so.
    pub standby: Option<Standby>,
    /// The most shards this replica may hold.
    pub cap: u32,
    /// The live replicas counted.
    pub replicas: u32,
}

/// ⌈shards / replicas⌉.
pub fn cap(shards: u32, replicas: u32) -> u32 {
    shards.div_ceil(replicas.max(1))
}

/// This replica's order of preference over the shards: from a point fixed by its identity
/// round the ring, so that replicas starting together try different shards first.
fn preference(me: &str, shards: u32) -> impl DoubleEndedIterator<Item = u32> {
    let start = u32::try_from(fnv1a64(me.as_bytes()) % u64::from(shards.max(1))).unwrap_or(0);
    (0..shards).map(move |i| (start + i) % shards.max(1))
}

/// The plan for this round.
pub fn plan(input: &PlanInput<'_>) -> Plan {
    let others = input
        .members
        .iter()
        .filter(|m| m.identity != input.me)
        .count();
    let replicas = u32::try_from(others + 1).unwrap_or(u32::MAX);
    let cap = cap(input.shards, replicas);
    let mut out = Plan {
        cap,
        replicas,
        ..Plan::default()
    };
    if let Some(holder) = input.single_leader {
        out.standby = Some(Standby::SingleLeader(holder.to_string()));
        out.release = input.held.iter().copied().collect();
        return out;
    }
    if input.single_settling {
        out.standby = Some(Standby::SingleSettling);
        return out;
    }
    if let Some(m) = input
        .members
        .iter()
        .find(|m| m.identity != input.me && (m.shards != input.shards || m.by != input.by))
    {
        out.standby = Some(Standby::OtherSharding {
            identity: m.identity.clone(),
            shards: m.shards,
            by: m.by,
        });
        return out;
    }
    let held = u32::try_from(input.held.len()).unwrap_or(u32::MAX);
    if held > cap {
        // The last in this replica's order go first.
        out.release = preference(input.me, input.shards)
            .rev()
            .filter(|s| input.held.contains(s))
            .take((held - cap) as usize)
            .collect();
        return out;
    }
    out.acquire = preference(input.me, input.shards)
        .filter(|s| !input.held.contains(s))
        .filter(|s| match input.holders.get(*s as usize) {
            Some(Some(h)) => h == input.me,
            _ => true,
        })
        .take((cap - held) as usize)
        .collect();
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn member(id: &str, shards: u32) -> Member {
        Member {
            identity: id.to_string(),
            shards,
            by: ShardBy::Hpa,
        }
    }

    /// Replicas planning in turn against one shared view until nothing changes: the
    /// assignment they settle on.
    fn settle(
        ids: &[&str],
        shards: u32,
        mut holders: Vec<Option<String>>,
    ) -> BTreeMap<String, BTreeSet<u32>> {
        let members: Vec<Member> = ids.iter().map(|i| member(i, shards)).collect();
        for _ in 0..50 {
            let mut changed = false;
            for id in ids {
                let held: BTreeSet<u32> = (0..shards)
                    .filter(|s| holders[*s as usize].as_deref() == Some(id))
                    .collect();
                let p = plan(&PlanInput {
                    me: id,
                    shards,
                    by: ShardBy::Hpa,
                    members: &members,
                    holders: &holders,
                    held: &held,
                    single_leader: None,
                    single_settling: false,
                });
                for s in p.release {
                    holders[s as usize] = None;
                    changed = true;
                }
                for s in p.acquire {
                    if holders[s as usize].is_none() {
                        holders[s as usize] = Some((*id).to_string());
                        changed = true;
                    }
                }
            }
            if !changed {
                break;
            }
        }
        let mut by: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
        for (s, h) in holders.iter().enumerate() {
            by.entry(h.clone().unwrap_or_default())
                .or_default()
                .insert(s as u32);
        }
        by
    }

    #[test]
    fn replicas_settle_on_an_even_spread_with_every_shard_held() {
        for (replicas, shards) in [(1, 4), (2, 4), (3, 6), (3, 8), (4, 16), (4, 3), (5, 16)] {
            let ids: Vec<String> = (0..replicas).map(|i| format!("r{i}")).collect();
            let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
            let by = settle(&refs, shards, vec![None; shards as usize]);
            assert!(
                !by.contains_key(""),
                "{replicas}×{shards}: a shard is unheld: {by:?}"
            );
            let c = cap(shards, replicas);
            for (id, s) in &by {
                assert!(
                    s.len() as u32 <= c,
                    "{replicas}×{shards}: {id} holds {s:?}, cap {c}"
                );
            }
        }
    }

    #[test]
    fn a_newcomer_gets_its_share_and_a_lost_replicas_shards_are_taken() {
        // r0 alone took all six; r1 and r2 join.
        let all_r0 = vec![Some("r0".to_string()); 6];
        let by = settle(&["r0", "r1", "r2"], 6, all_r0);
        assert!(by.values().all(|s| s.len() == 2), "{by:?}");
        // r2 is gone: its Leases expire (no live holder) and it is no longer a member.
        let holders: Vec<Option<String>> = (0..6u32)
            .map(|s| {
                by.iter()
                    .find(|(_, set)| set.contains(&s))
                    .map(|(id, _)| id.clone())
                    .filter(|id| id != "r2")
            })
            .collect();
        let by = settle(&["r0", "r1"], 6, holders);
        assert_eq!(by.get("r0").map(BTreeSet::len), Some(3), "{by:?}");
        assert_eq!(by.get("r1").map(BTreeSet::len), Some(3), "{by:?}");
    }

    #[test]
    fn a_live_single_leader_or_another_shard_count_stops_taking() {
        let held: BTreeSet<u32> = [0, 1].into();
        let members = [member("a", 4), member("b", 8)];
        let holders = vec![None; 4];
        let p = plan(&PlanInput {
            me: "a",
            shards: 4,
            by: ShardBy::Hpa,
            members: &members,
            holders: &holders,
            held: &held,
            single_leader: None,
            single_settling: false,
        });
        assert!(p.acquire.is_empty() && p.release.is_empty());
        assert_eq!(
            p.standby,
            Some(Standby::OtherSharding {
                identity: "b".into(),
                shards: 8,
                by: ShardBy::Hpa,
            })
        );
        // The same count, another key: as different.
        let by_ns = [
            member("a", 4),
            Member {
                by: ShardBy::Namespace,
                ..member("b", 4)
            },
        ];
        let p = plan(&PlanInput {
            me: "a",
            shards: 4,
            by: ShardBy::Hpa,
            members: &by_ns,
            holders: &holders,
            held: &held,
            single_leader: None,
            single_settling: false,
        });
        assert!(p.acquire.is_empty() && p.release.is_empty());
        assert!(matches!(p.standby, Some(Standby::OtherSharding { .. })));
        let p = plan(&PlanInput {
            me: "a",
            shards: 4,
            by: ShardBy::Hpa,
            members: &members[..1],
            holders: &holders,
            held: &held,
            single_leader: Some("kcm-like"),
            single_settling: false,
        });
        assert_eq!(p.release, vec![0, 1]);
        assert!(p.acquire.is_empty());
        assert_eq!(p.standby, Some(Standby::SingleLeader("kcm-like".into())));
        // Released a moment ago: nothing taken, nothing given up.
        let p = plan(&PlanInput {
            me: "a",
            shards: 4,
            by: ShardBy::Hpa,
            members: &members[..1],
            holders: &holders,
            held: &held,
            single_leader: None,
            single_settling: true,
        });
        assert!(p.acquire.is_empty() && p.release.is_empty());
        assert_eq!(p.standby, Some(Standby::SingleSettling));
    }

    #[test]
    fn a_shard_held_by_another_live_replica_is_not_taken() {
        let holders = vec![Some("b".to_string()), None, Some("a".to_string())];
        let members = [member("a", 3), member("b", 3)];
        let p = plan(&PlanInput {
            me: "a",
            shards: 3,
            by: ShardBy::Hpa,
            members: &members,
            holders: &holders,
            held: &BTreeSet::new(),
            single_leader: None,
            single_settling: false,
        });
        assert_eq!(p.cap, 2);
        let mut a = p.acquire.clone();
        a.sort_unstable();
        assert_eq!(a, vec![1, 2]);
    }
}
