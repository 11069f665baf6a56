//! The ConfigMaps that hold the histories: `NAME-history-0` … `NAME-history-15` in the
//! leader-election Lease's namespace (`NAME` is the Lease's name; with `--shards`, each
//! shard's Lease `NAME-shard-I` has its own sixteen), each holding the HPAs whose key hashes
//! to it, as JSON in its `history` key ([`crate::snapshot`]).
//!
//! No upstream counterpart (upstream keeps the history in memory only). Why ConfigMaps: they
//! are in every cluster, need no CRD, are readable with `kubectl`, and one write replaces a
//! whole bucket, so a flush costs one request per changed bucket however many of its HPAs
//! changed. Sixteen buckets keep each under the API server's 1 MiB object limit up to about
//! 100,000 HPAs (a steady HPA takes about 60 bytes). The writes go through the controller's
//! client, so the write fence refuses them once this instance may no longer lead.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams};

use crate::snapshot::{DecodeError, HpaHistory, decode, encode};

/// The number of ConfigMaps the histories are spread over.
pub const BUCKETS: u32 = 16;

/// The ConfigMap key holding a bucket's JSON.
pub const DATA_KEY: &str = "history";

/// The label every history ConfigMap carries (value: the Lease's name).
pub const LABEL: &str = "kube-hpa-controller.io/history-of";

/// A bucket larger than this is not written (the API server refuses objects over 1 MiB).
pub const MAX_BUCKET_BYTES: usize = 900 * 1024;

/// The bucket of an HPA key: FNV-1a (64-bit) of the key's bytes, modulo [`BUCKETS`]. Fixed,
/// so that every version of this controller finds an HPA in the same bucket.
pub fn bucket_of(key: &str) -> u32 {
    let hash = hpa_sharding::fnv1a64(key.as_bytes());
    // The remainder is below BUCKETS.
    u32::try_from(hash % u64::from(BUCKETS)).unwrap_or(0)
}

/// Why a history ConfigMap could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The API server refused or failed the request.
    #[error("{verb} ConfigMap {namespace}/{name}: {source}")]
    Api {
        /// What was tried.
        verb: &'static str,
        /// The ConfigMap's namespace.
        namespace: String,
        /// The ConfigMap's name.
        name: String,
        /// The client's error.
        #[source]
        source: Box<kube::Error>,
    },
    /// The stored JSON could not be read.
    #[error("ConfigMap {namespace}/{name}: {source}")]
    Decode {
        /// The ConfigMap's namespace.
        namespace: String,
        /// The ConfigMap's name.
        name: String,
        /// Why.
        #[source]
        source: DecodeError,
    },
    /// The bucket would exceed the object size limit.
    #[error(
        "ConfigMap {namespace}/{name}: {bytes} bytes of history, over the {MAX_BUCKET_BYTES}-byte limit; not written"
    )]
    TooLarge {
        /// The ConfigMap's namespace.
        namespace: String,
        /// The ConfigMap's name.
        name: String,
        /// The encoded size.
        bytes: usize,
    },
}

/// One bucket as read: its histories and the resourceVersion to write over.
#[derive(Debug, Default)]
pub struct LoadedBucket {
    /// The histories by HPA key.
    pub hpas: BTreeMap<String, HpaHistory>,
    /// The ConfigMap's resourceVersion (`None`: it does not exist).
    pub resource_version: Option<String>,
}

/// The history ConfigMaps of one Lease.
#[derive(Clone)]
pub struct ConfigMapStore {
    api: Api<ConfigMap>,
    namespace: String,
    lease_name: String,
}

impl std::fmt::Debug for ConfigMapStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigMapStore")
            .field("namespace", &self.namespace)
            .field("lease_name", &self.lease_name)
            .finish()
    }
}

impl ConfigMapStore {
    /// The ConfigMaps of the Lease `namespace/lease_name`, through `client`.
    pub fn new(client: kube::Client, namespace: &str, lease_name: &str) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_string(),
            lease_name: lease_name.to_string(),
        }
    }

    /// The name of bucket `bucket`'s ConfigMap.
    pub fn name_of(&self, bucket: u32) -> String {
        format!("{}-history-{bucket}", self.lease_name)
    }

    /// The namespace of the ConfigMaps.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The Lease whose history this is (`NAME`, or `NAME-shard-I` with `--shards`).
    pub fn lease_name(&self) -> &str {
        &self.lease_name
    }

    fn api_error(&self, verb: &'static str, bucket: u32, source: kube::Error) -> StoreError {
        StoreError::Api {
            verb,
            namespace: self.namespace.clone(),
            name: self.name_of(bucket),
            source: Box::new(source),
        }
    }

    /// Reads bucket `bucket` (a missing ConfigMap is an empty bucket). A ConfigMap whose
    /// history cannot be read is reported with its resourceVersion, so that the caller can
    /// write over it.
    pub async fn load(&self, bucket: u32) -> Result<LoadedBucket, (Option<String>, StoreError)> {
        let name = self.name_of(bucket);
        let cm = match self.api.get_opt(&name).await {
            Ok(Some(cm)) => cm,
            Ok(None) => return Ok(LoadedBucket::default()),
            Err(e) => return Err((None, self.api_error("get", bucket, e))),
        };
        let resource_version = cm.metadata.resource_version.clone();
        let text = cm
            .data
            .as_ref()
            .and_then(|d| d.get(DATA_KEY))
            .map_or("", String::as_str);
        if text.is_empty() {
            return Ok(LoadedBucket {
                hpas: BTreeMap::new(),
                resource_version,
            });
        }
        match decode(text) {
            Ok(hpas) => Ok(LoadedBucket {
                hpas,
                resource_version,
            }),
            Err(source) => Err((
                resource_version,
                StoreError::Decode {
                    namespace: self.namespace.clone(),
                    name,
                    source,
                },
            )),
        }
    }

    /// Writes bucket `bucket` over `resource_version` (`None`: create it); on a conflict
    /// (someone else wrote it, e.g. a previous leader's late flush) reads the current
    /// version and writes once more. Returns the new resourceVersion.
    pub async fn write(
        &self,
        bucket: u32,
        resource_version: Option<String>,
        hpas: &BTreeMap<String, HpaHistory>,
    ) -> Result<Option<String>, StoreError> {
        let name = self.name_of(bucket);
        let text = encode(hpas);
        if text.len() > MAX_BUCKET_BYTES {
            return Err(StoreError::TooLarge {
                namespace: self.namespace.clone(),
                name,
                bytes: text.len(),
            });
        }
        let object = |rv: Option<String>| ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(self.namespace.clone()),
                resource_version: rv,
                labels: Some(BTreeMap::from([(
                    LABEL.to_string(),
                    self.lease_name.clone(),
                )])),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([(DATA_KEY.to_string(), text.clone())])),
            ..ConfigMap::default()
        };
        let pp = PostParams::default();
        let first = match &resource_version {
            Some(_) => self
                .api
                .replace(&name, &pp, &object(resource_version.clone()))
                .await
                .map_err(|e| ("update", e)),
            None => self
                .api
                .create(&pp, &object(None))
                .await
                .map_err(|e| ("create", e)),
        };
        let conflict = match first {
            Ok(cm) => return Ok(cm.metadata.resource_version),
            Err((_, kube::Error::Api(s))) if s.code == 409 || s.code == 404 => s,
            Err((verb, e)) => return Err(self.api_error(verb, bucket, e)),
        };
        tracing::debug!(
            bucket,
            code = conflict.code,
            "history ConfigMap changed since read; writing over the current version"
        );
        let current = self
            .api
            .get_opt(&name)
            .await
            .map_err(|e| self.api_error("get", bucket, e))?;
        let written = match current {
            Some(cm) => self
                .api
                .replace(&name, &pp, &object(cm.metadata.resource_version))
                .await
                .map_err(|e| self.api_error("update", bucket, e))?,
            None => self
                .api
                .create(&pp, &object(None))
                .await
                .map_err(|e| self.api_error("create", bucket, e))?,
        };
        Ok(written.metadata.resource_version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_fixed_and_spread() {
        // Fixed values: a change of the hash would lose every stored history.
        // FNV-1a 64 of "" is 0xcbf29ce484222325, of "a" 0xaf63dc4c8601ec8c, of
        // "default/web" 0x9d2ba50824d634bb.
        assert_eq!(bucket_of(""), 5);
        assert_eq!(bucket_of("a"), 12);
        assert_eq!(bucket_of("default/web"), 11);
        let mut counts = [0u32; BUCKETS as usize];
        for i in 0..1600 {
            counts[bucket_of(&format!("ns-{}/hpa-{i}", i % 7)) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (60..=140).contains(&c)),
            "{counts:?}"
        );
    }
}
