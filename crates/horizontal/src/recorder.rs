//! The event recorder: core/v1 Events on the HPA, with client-go's event correlation
//! (spec §2.6, §8).
//!
//! Mirrors client-go `tools/record` (`recorderImpl.makeEvent`, `generateEvent`,
//! `recordToSink`) and `tools/record/events_cache.go` (`EventCorrelator`: the similar-event
//! aggregator, the identical-event logger that turns a repeat into a PATCH of `count` and
//! `lastTimestamp`, and the per-object spam filter). Differences: events are written
//! synchronously, in emission order (upstream hands them to a broadcaster goroutine), there is
//! no retry of failed writes (upstream retries up to 12 times, 10s apart), and the caches are
//! unbounded maps (upstream uses 4096-entry LRUs). Every time read comes from the [`Clock`].

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use hpa_config::Clock;
use jiff::Timestamp;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};

use crate::events::{EVENT_SOURCE_COMPONENT, HpaEvent};

/// client-go's `defaultAggregateMaxEvents`: similar events before aggregation.
const AGGREGATE_MAX_EVENTS: usize = 10;
/// client-go's `defaultAggregateIntervalInSeconds`.
const AGGREGATE_INTERVAL_SECS: i64 = 600;
/// client-go's `defaultSpamBurst`.
const SPAM_BURST: f64 = 25.0;
/// client-go's `defaultSpamQPS`: one event per 5 minutes per source and object.
const SPAM_QPS: f64 = 1.0 / 300.0;

/// One emission, as the controller made it (before aggregation and spam filtering).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmittedEvent {
    /// `Normal` or `Warning`.
    pub type_: String,
    /// The reason.
    pub reason: String,
    /// The message.
    pub message: String,
    /// `namespace/name` of the HPA.
    pub regarding: String,
}

#[derive(Debug, Clone)]
struct Observation {
    count: i32,
    first_timestamp: Timestamp,
    name: String,
}

#[derive(Debug, Clone)]
struct AggregateRecord {
    local_keys: BTreeSet<String>,
    last_timestamp: Timestamp,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    last: Timestamp,
}

#[derive(Debug, Default)]
struct Correlator {
    aggregates: HashMap<String, AggregateRecord>,
    observations: HashMap<String, Observation>,
    spam: HashMap<String, Bucket>,
    last_name_nanos: i128,
}

/// Records events on HPAs.
pub struct Recorder {
    client: kube::Client,
    clock: Arc<dyn Clock>,
    correlator: Mutex<Correlator>,
    emissions: Option<Mutex<Vec<EmittedEvent>>>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder").finish_non_exhaustive()
    }
}

fn join_key(parts: &[&str]) -> String {
    parts.concat()
}

/// `involvedObject` for an HPA (`reference.GetReference`).
pub fn hpa_reference(hpa: &HorizontalPodAutoscaler) -> ObjectReference {
    ObjectReference {
        api_version: Some("autoscaling/v2".to_owned()),
        kind: Some("HorizontalPodAutoscaler".to_owned()),
        namespace: hpa.metadata.namespace.clone(),
        name: hpa.metadata.name.clone(),
        uid: hpa.metadata.uid.clone(),
        resource_version: hpa.metadata.resource_version.clone(),
        field_path: None,
    }
}

impl Recorder {
    /// A recorder writing through `client`. With `log_emissions`, every emission is also kept
    /// in memory for [`Recorder::emitted_since`] (the replay runner's expectations).
    pub fn new(client: kube::Client, clock: Arc<dyn Clock>, log_emissions: bool) -> Self {
        Recorder {
            client,
            clock,
            correlator: Mutex::new(Correlator::default()),
            emissions: log_emissions.then(|| Mutex::new(Vec::new())),
        }
    }

    /// The number of emissions logged so far (a mark for [`Recorder::emitted_since`]).
    pub fn emission_mark(&self) -> usize {
        self.emissions
            .as_ref()
            .map_or(0, |m| m.lock().unwrap_or_else(|p| p.into_inner()).len())
    }

    /// The emissions logged since `mark`, in order (empty without emission logging).
    pub fn emitted_since(&self, mark: usize) -> Vec<EmittedEvent> {
        self.emissions.as_ref().map_or_else(Vec::new, |m| {
            let g = m.lock().unwrap_or_else(|p| p.into_inner());
            g.get(mark..).map(<[_]>::to_vec).unwrap_or_default()
        })
    }

    /// Emits `event` on `hpa` and writes it (create, or patch of a repeated one).
    pub async fn record(&self, hpa: &HorizontalPodAutoscaler, event: &HpaEvent) {
        let type_ = event.event_type().as_str();
        let reason = event.reason();
        let message = event.message();
        let ns = hpa.metadata.namespace.clone().unwrap_or_default();
        let name = hpa.metadata.name.clone().unwrap_or_default();
        tracing::debug!(
            object = %format!("{ns}/{name}"),
            r#type = type_,
            reason,
            message = %message,
            "Event occurred"
        );
        if let Some(m) = &self.emissions {
            m.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(EmittedEvent {
                    type_: type_.to_owned(),
                    reason: reason.to_owned(),
                    message: message.clone(),
                    regarding: format!("{ns}/{name}"),
                });
        }
        let reference = hpa_reference(hpa);
        let Some(write) = self.correlate(&reference, type_, reason, &message) else {
            return;
        };
        let namespace = write.event.metadata.namespace.clone().unwrap_or_default();
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        let event_name = write.event.metadata.name.clone().unwrap_or_default();
        let result = match &write.patch {
            Some(patch) => {
                match api
                    .patch(
                        &event_name,
                        &PatchParams::default(),
                        &Patch::Strategic(patch),
                    )
                    .await
                {
                    Err(kube::Error::Api(s)) if s.code == 404 => {
                        let mut fresh = write.event.clone();
                        fresh.metadata.resource_version = None;
                        api.create(&PostParams::default(), &fresh).await
                    }
                    other => other,
                }
            }
            None => api.create(&PostParams::default(), &write.event).await,
        };
        if let Err(error) = result {
            tracing::error!(%error, event = %event_name, "Server rejected event (will not retry!)");
        }
    }

    fn correlate(
        &self,
        reference: &ObjectReference,
        type_: &str,
        reason: &str,
        message: &str,
    ) -> Option<CorrelatedWrite> {
        let now = self.clock.now();
        let mut c = self.correlator.lock().unwrap_or_else(|p| p.into_inner());
        c.correlate(reference, type_, reason, message, now)
    }
}

impl Correlator {
    /// client-go's `EventCorrelate`: aggregate, observe (dedupe), spam-filter. `None` when
    /// the spam filter drops the event.
    fn correlate(
        &mut self,
        reference: &ObjectReference,
        type_: &str,
        reason: &str,
        message: &str,
        now: Timestamp,
    ) -> Option<CorrelatedWrite> {
        let c = self;
        let obj_name = reference.name.as_deref().unwrap_or("");
        let namespace = reference
            .namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".to_owned());
        let kind = reference.kind.as_deref().unwrap_or("");
        let ref_ns = reference.namespace.as_deref().unwrap_or("");
        let uid = reference.uid.as_deref().unwrap_or("");
        let api_version = reference.api_version.as_deref().unwrap_or("");
        let field_path = reference.field_path.as_deref().unwrap_or("");

        let mut event = Event {
            metadata: ObjectMeta {
                name: Some(unique_name(c, obj_name, now)),
                namespace: Some(namespace.clone()),
                ..Default::default()
            },
            involved_object: reference.clone(),
            reason: Some(reason.to_owned()),
            message: Some(message.to_owned()),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            count: Some(1),
            type_: Some(type_.to_owned()),
            source: Some(EventSource {
                component: Some(EVENT_SOURCE_COMPONENT.to_owned()),
                host: None,
            }),
            ..Default::default()
        };

        // Aggregation of similar events (same object, type and reason; any message).
        let aggregate_key = join_key(&[
            EVENT_SOURCE_COMPONENT,
            "",
            kind,
            ref_ns,
            obj_name,
            uid,
            api_version,
            type_,
            reason,
            "",
            "",
        ]);
        let event_key = join_key(&[
            EVENT_SOURCE_COMPONENT,
            "",
            kind,
            ref_ns,
            obj_name,
            field_path,
            uid,
            api_version,
            type_,
            reason,
            message,
        ]);
        let record = c
            .aggregates
            .entry(aggregate_key.clone())
            .or_insert_with(|| AggregateRecord {
                local_keys: BTreeSet::new(),
                last_timestamp: now,
            });
        if now.duration_since(record.last_timestamp)
            > jiff::SignedDuration::from_secs(AGGREGATE_INTERVAL_SECS)
        {
            record.local_keys.clear();
        }
        record.local_keys.insert(message.to_owned());
        record.last_timestamp = now;
        let key = if record.local_keys.len() < AGGREGATE_MAX_EVENTS {
            event_key
        } else {
            if let Some(any) = record.local_keys.iter().next().cloned() {
                record.local_keys.remove(&any);
            }
            event.message = Some(format!("(combined from similar events): {message}"));
            event.metadata.name = Some(unique_name(c, obj_name, now));
            aggregate_key
        };

        // The logger: a repeat of an observed event becomes a patch.
        let mut patch = None;
        if let Some(last) = c.observations.get(&key).cloned() {
            event.metadata.name = Some(last.name.clone());
            event.first_timestamp = Some(Time(last.first_timestamp));
            event.count = Some(last.count + 1);
            patch = Some(serde_json::json!({
                "count": last.count + 1,
                "lastTimestamp": Time(now),
                "message": event.message.clone().unwrap_or_default(),
            }));
        }
        c.observations.insert(
            key,
            Observation {
                count: event.count.unwrap_or(1),
                first_timestamp: event.first_timestamp.as_ref().map_or(now, |t| t.0),
                name: event.metadata.name.clone().unwrap_or_default(),
            },
        );

        // The spam filter: a token bucket per source and object (burst 25, one per 5
        // minutes), client-go's `getSpamKey`.
        let spam_key = join_key(&[
            EVENT_SOURCE_COMPONENT,
            "",
            kind,
            ref_ns,
            obj_name,
            uid,
            api_version,
        ]);
        let bucket = c.spam.entry(spam_key).or_insert(Bucket {
            tokens: SPAM_BURST,
            last: now,
        });
        let elapsed = now.duration_since(bucket.last).as_secs_f64().max(0.0);
        bucket.tokens = (bucket.tokens + elapsed * SPAM_QPS).min(SPAM_BURST);
        bucket.last = now;
        if bucket.tokens < 1.0 {
            return None;
        }
        bucket.tokens -= 1.0;
        Some(CorrelatedWrite { event, patch })
    }
}

/// `<name>.<hex UnixNano>`, kept unique when the clock has not moved (a virtual clock).
fn unique_name(c: &mut Correlator, obj_name: &str, now: Timestamp) -> String {
    let mut nanos = now.as_nanosecond();
    if nanos <= c.last_name_nanos {
        nanos = c.last_name_nanos + 1;
    }
    c.last_name_nanos = nanos;
    format!("{obj_name}.{nanos:x}")
}

struct CorrelatedWrite {
    event: Event,
    patch: Option<serde_json::Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference() -> ObjectReference {
        ObjectReference {
            api_version: Some("autoscaling/v2".into()),
            kind: Some("HorizontalPodAutoscaler".into()),
            namespace: Some("default".into()),
            name: Some("web".into()),
            uid: Some("u1".into()),
            ..Default::default()
        }
    }

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_735_689_600 + secs).unwrap()
    }

    #[test]
    fn a_repeat_is_a_patch_of_count_and_last_timestamp() {
        let mut c = Correlator::default();
        let r = reference();
        let first = c
            .correlate(&r, "Warning", "FailedGetScale", "m", at(0))
            .unwrap();
        assert!(first.patch.is_none());
        assert_eq!(first.event.count, Some(1));
        assert_eq!(first.event.metadata.namespace.as_deref(), Some("default"));
        let second = c
            .correlate(&r, "Warning", "FailedGetScale", "m", at(15))
            .unwrap();
        assert_eq!(second.event.metadata.name, first.event.metadata.name);
        assert_eq!(
            second.patch,
            Some(
                serde_json::json!({"count": 2, "lastTimestamp": "2025-01-01T00:00:15Z", "message": "m"})
            )
        );
        // A different message is a different event.
        let other = c
            .correlate(&r, "Warning", "FailedGetScale", "n", at(15))
            .unwrap();
        assert!(other.patch.is_none());
    }

    #[test]
    fn the_tenth_similar_message_is_combined() {
        let mut c = Correlator::default();
        let r = reference();
        for i in 0..9 {
            let w = c
                .correlate(&r, "Warning", "R", &format!("m{i}"), at(i))
                .unwrap();
            assert_eq!(w.event.message, Some(format!("m{i}")));
        }
        let w = c.correlate(&r, "Warning", "R", "m9", at(9)).unwrap();
        assert_eq!(
            w.event.message.as_deref(),
            Some("(combined from similar events): m9")
        );
        let w = c.correlate(&r, "Warning", "R", "m10", at(10)).unwrap();
        assert_eq!(w.event.count, Some(2));
        assert!(w.patch.is_some());
    }

    #[test]
    fn spam_filter_allows_a_burst_of_25_then_one_per_5_minutes() {
        let mut c = Correlator::default();
        let r = reference();
        let passed = (0..30)
            .filter(|i| c.correlate(&r, "Normal", "R", "m", at(*i / 10)).is_some())
            .count();
        assert_eq!(passed, 25);
        assert!(c.correlate(&r, "Normal", "R", "m", at(299)).is_none());
        assert!(c.correlate(&r, "Normal", "R", "m", at(303)).is_some());
    }

    #[test]
    fn unique_names_at_one_instant() {
        let mut c = Correlator::default();
        let t: Timestamp = "2025-01-01T00:00:00Z".parse().unwrap();
        let a = unique_name(&mut c, "web", t);
        let b = unique_name(&mut c, "web", t);
        assert_eq!(a, format!("web.{:x}", t.as_nanosecond()));
        assert_ne!(a, b);
    }
}
