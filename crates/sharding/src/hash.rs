//! Which shard an HPA belongs to.
//!
//! No upstream counterpart. FNV-1a (64-bit) of the HPA's `namespace/name`, mixed by
//! MurmurHash3's 64-bit finalizer (FNV alone leaves keys that differ in their last
//! characters, as generated names do, unevenly spread in the upper bits); the shard is the
//! upper 32 bits of that modulo the shard count. Fixed, so that every replica and every
//! version of this controller agrees; mixed and from the upper half, so that a shard's HPAs
//! still spread over all sixteen history ConfigMaps, which take FNV's lower bits
//! (`hpa-history`'s `bucket_of`).

/// FNV-1a, 64-bit, of `bytes`.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// What an HPA's shard is computed from (`--shard-by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ShardBy {
    /// Its `namespace/name`: the HPAs spread evenly whatever the namespaces.
    #[default]
    Hpa,
    /// Its namespace: all the HPAs of a namespace in one shard, so that a replica's batched
    /// PodMetrics lists (`--metrics-batch-window`, one per namespace and window) cover only
    /// its own namespaces; as even as the namespaces are.
    Namespace,
}

impl ShardBy {
    /// The flag's and the Lease annotation's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            ShardBy::Hpa => "hpa",
            ShardBy::Namespace => "namespace",
        }
    }

    /// Reads the word [`ShardBy::as_str`] writes.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "hpa" => Some(ShardBy::Hpa),
            "namespace" => Some(ShardBy::Namespace),
            _ => None,
        }
    }

    /// The shard of the HPA `key` (`namespace/name`) among `shards`.
    pub fn shard(self, key: &str, shards: u32) -> u32 {
        match self {
            ShardBy::Hpa => shard_of(key, shards),
            ShardBy::Namespace => shard_of(key.split_once('/').map_or(key, |(ns, _)| ns), shards),
        }
    }
}

/// MurmurHash3's `fmix64`: every input bit reaches every output bit.
fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

/// The shard of the HPA `key` (`namespace/name`) among `shards` (0 when `shards` ≤ 1).
pub fn shard_of(key: &str, shards: u32) -> u32 {
    if shards <= 1 {
        return 0;
    }
    let high = fmix64(fnv1a64(key.as_bytes())) >> 32;
    // The remainder is below `shards`, a u32.
    u32::try_from(high % u64::from(shards)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_namespace_every_hpa_of_a_namespace_is_in_one_shard() {
        for ns in ["a", "kube-system", "ns-001"] {
            let shard = ShardBy::Namespace.shard(&format!("{ns}/x"), 8);
            assert_eq!(shard, shard_of(ns, 8));
            for i in 0..50 {
                assert_eq!(ShardBy::Namespace.shard(&format!("{ns}/hpa-{i}"), 8), shard);
            }
        }
        assert_eq!(ShardBy::Hpa.shard("a/b", 8), shard_of("a/b", 8));
        for by in [ShardBy::Hpa, ShardBy::Namespace] {
            assert_eq!(ShardBy::parse(by.as_str()), Some(by));
        }
        assert_eq!(ShardBy::parse("pod"), None);
    }

    #[test]
    fn known_values_never_change() {
        // FNV-1a's published test vectors.
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
        assert_eq!(shard_of("default/web", 1), 0);
        assert_eq!(shard_of("default/web", 0), 0);
    }

    #[test]
    fn hpas_spread_evenly_over_shards_and_within_a_shard_over_buckets() {
        for shards in [2u32, 3, 4, 8, 16] {
            let mut per_shard = vec![0usize; shards as usize];
            let mut per_bucket = vec![vec![0usize; 16]; shards as usize];
            let n = 32_000;
            for i in 0..n {
                let key = format!("ns-{}/hpa-{i}", i % 100);
                let s = shard_of(&key, shards) as usize;
                per_shard[s] += 1;
                per_bucket[s][(fnv1a64(key.as_bytes()) % 16) as usize] += 1;
            }
            let mean = n / shards as usize;
            for (s, count) in per_shard.iter().enumerate() {
                assert!(
                    count.abs_diff(mean) * 10 < mean,
                    "{shards} shards: shard {s} has {count}, mean {mean}"
                );
                let bucket_mean = count / 16;
                for (b, c) in per_bucket[s].iter().enumerate() {
                    assert!(
                        c.abs_diff(bucket_mean) * 2 < bucket_mean,
                        "{shards} shards: shard {s} bucket {b} has {c}, mean {bucket_mean}"
                    );
                }
            }
        }
    }
}
