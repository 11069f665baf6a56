#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::VecDeque;

use hpa_config::VirtualClock;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;

use super::*;

fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(1_735_689_600 + secs).unwrap()
}

fn hpa(name: &str) -> HorizontalPodAutoscaler {
    HorizontalPodAutoscaler {
        metadata: ObjectMeta {
            namespace: Some("default".into()),
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn warning(err: &str) -> HpaEvent {
    HpaEvent::FailedGetScale { err: err.into() }
}

#[derive(Debug, Clone, PartialEq)]
enum Verb {
    Create,
    Patch,
}

/// One sink call: verb, event, patch, (tokio) time.
type Call = (Verb, Event, Option<serde_json::Value>, tokio::time::Instant);

#[derive(Default)]
struct FakeSink {
    calls: Mutex<Vec<Call>>,
    script: Mutex<VecDeque<Result<(), SinkError>>>,
    /// When set, every call waits forever (a hung API server).
    hang: bool,
}

impl FakeSink {
    fn scripted(results: Vec<Result<(), SinkError>>) -> Arc<Self> {
        Arc::new(FakeSink {
            script: Mutex::new(results.into()),
            ..Default::default()
        })
    }

    fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    async fn answer(
        &self,
        verb: Verb,
        event: &Event,
        patch: Option<&serde_json::Value>,
    ) -> Result<Event, SinkError> {
        self.calls.lock().unwrap().push((
            verb,
            event.clone(),
            patch.cloned(),
            tokio::time::Instant::now(),
        ));
        if self.hang {
            std::future::pending::<()>().await;
        }
        let next = self.script.lock().unwrap().pop_front().unwrap_or(Ok(()));
        next.map(|()| {
            let mut written = event.clone();
            written.metadata.resource_version = Some("7".into());
            written
        })
    }
}

#[async_trait::async_trait]
impl EventSink for FakeSink {
    async fn create(&self, event: &Event) -> Result<Event, SinkError> {
        self.answer(Verb::Create, event, None).await
    }
    async fn patch(&self, event: &Event, patch: &serde_json::Value) -> Result<Event, SinkError> {
        self.answer(Verb::Patch, event, Some(patch)).await
    }
}

fn retry_half() -> RetryConfig {
    RetryConfig {
        sleep: DEFAULT_SLEEP_DURATION,
        jitter: Arc::new(|| 0.5),
    }
}

fn recorder(sink: Arc<FakeSink>, clock: &VirtualClock) -> Recorder {
    Recorder::with_sink(sink, Arc::new(clock.clone()), true, retry_half())
}

fn transport() -> SinkError {
    SinkError::Transport("connection refused".into())
}

fn status(code: u16, reason: &str) -> SinkError {
    SinkError::Status {
        code,
        reason: reason.into(),
        message: format!("{reason} message"),
        namespace_terminating: false,
    }
}

fn shared(clock: &VirtualClock) -> RecorderState {
    RecorderState {
        clock: Arc::new(clock.clone()),
        correlator: Mutex::new(Correlator::new(NonZeroUsize::MIN)),
        last_name_nanos: Mutex::new(i128::MIN),
        pending: watch::Sender::new(0),
        cancelled: watch::Sender::new(false),
    }
}

fn event(type_: &str, reason: &str, message: &str, now: Timestamp) -> Event {
    Event {
        metadata: ObjectMeta {
            name: Some(format!("web.{:x}", now.as_nanosecond())),
            namespace: Some("default".into()),
            ..Default::default()
        },
        involved_object: hpa_reference(&hpa("web")),
        reason: Some(reason.into()),
        message: Some(message.into()),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        count: Some(1),
        type_: Some(type_.into()),
        source: Some(EventSource {
            component: Some(EVENT_SOURCE_COMPONENT.into()),
            host: None,
        }),
        reporting_component: Some(EVENT_SOURCE_COMPONENT.into()),
        reporting_instance: Some(String::new()),
        ..Default::default()
    }
}

fn big_correlator() -> Correlator {
    Correlator::new(NonZeroUsize::new(MAX_LRU_CACHE_ENTRIES).unwrap())
}

#[test]
fn a_repeat_is_a_patch_of_count_and_last_timestamp() {
    let clock = VirtualClock::new(at(0));
    let s = shared(&clock);
    let mut c = big_correlator();
    let first = correlate(
        &mut c,
        &s,
        event("Warning", "FailedGetScale", "m", at(0)),
        at(0),
    )
    .unwrap();
    assert!(first.patch.is_none());
    assert_eq!(first.event.count, Some(1));
    let second = correlate(
        &mut c,
        &s,
        event("Warning", "FailedGetScale", "m", at(15)),
        at(15),
    )
    .unwrap();
    assert_eq!(second.event.metadata.name, first.event.metadata.name);
    assert_eq!(
        second.patch,
        Some(
            serde_json::json!({"count": 2, "lastTimestamp": "2025-01-01T00:00:15Z", "message": "m"})
        )
    );
    let other = correlate(
        &mut c,
        &s,
        event("Warning", "FailedGetScale", "n", at(15)),
        at(15),
    )
    .unwrap();
    assert!(other.patch.is_none());
}

#[test]
fn the_tenth_similar_message_is_combined() {
    let clock = VirtualClock::new(at(0));
    let s = shared(&clock);
    let mut c = big_correlator();
    for i in 0..9 {
        let w = correlate(
            &mut c,
            &s,
            event("Warning", "R", &format!("m{i}"), at(i)),
            at(i),
        )
        .unwrap();
        assert_eq!(w.event.message, Some(format!("m{i}")));
    }
    let w = correlate(&mut c, &s, event("Warning", "R", "m9", at(9)), at(9)).unwrap();
    assert_eq!(
        w.event.message.as_deref(),
        Some("(combined from similar events): m9")
    );
    let w = correlate(&mut c, &s, event("Warning", "R", "m10", at(10)), at(10)).unwrap();
    assert_eq!(w.event.count, Some(2));
    assert!(w.patch.is_some());
}

#[test]
fn spam_filter_allows_a_burst_of_25_then_one_per_5_minutes() {
    let clock = VirtualClock::new(at(0));
    let s = shared(&clock);
    let mut c = big_correlator();
    let mut pass =
        |t: i64| correlate(&mut c, &s, event("Normal", "R", "m", at(t)), at(t)).is_some();
    let passed = (0..30).filter(|i| pass(*i / 10)).count();
    assert_eq!(passed, 25);
    assert!(!pass(299));
    assert!(pass(303));
}

#[test]
fn the_spam_key_includes_the_event_type() {
    // 25 Normal events exhaust the Normal bucket; a Warning about the same object still
    // passes (client-go's getSpamKey appends event.Type, kubernetes#124747).
    let clock = VirtualClock::new(at(0));
    let s = shared(&clock);
    let mut c = big_correlator();
    for i in 0..25 {
        assert!(
            correlate(
                &mut c,
                &s,
                event("Normal", "R", &format!("n{i}"), at(0)),
                at(0)
            )
            .is_some()
        );
    }
    assert!(correlate(&mut c, &s, event("Normal", "R", "more", at(0)), at(0)).is_none());
    assert!(correlate(&mut c, &s, event("Warning", "W", "w", at(0)), at(0)).is_some());
}

#[test]
fn the_correlator_caches_are_bounded_lrus() {
    let clock = VirtualClock::new(at(0));
    let s = shared(&clock);
    let mut c = big_correlator();
    for i in 0..(MAX_LRU_CACHE_ENTRIES + 500) {
        let mut e = event("Warning", "R", "m", at(0));
        e.involved_object.name = Some(format!("hpa-{i}"));
        e.involved_object.uid = Some(format!("uid-{i}"));
        correlate(&mut c, &s, e, at(0));
    }
    assert_eq!(c.aggregates.len(), MAX_LRU_CACHE_ENTRIES);
    assert_eq!(c.observations.len(), MAX_LRU_CACHE_ENTRIES);
    assert_eq!(c.spam.len(), MAX_LRU_CACHE_ENTRIES);
    // The most recent object is remembered, the oldest forgotten.
    let last = format!("hpa-{}", MAX_LRU_CACHE_ENTRIES + 499);
    let mut e = event("Warning", "R", "m", at(1));
    e.involved_object.name = Some(last);
    e.involved_object.uid = Some(format!("uid-{}", MAX_LRU_CACHE_ENTRIES + 499));
    assert!(correlate(&mut c, &s, e, at(1)).unwrap().patch.is_some());
    let mut e = event("Warning", "R", "m", at(1));
    e.involved_object.name = Some("hpa-0".into());
    e.involved_object.uid = Some("uid-0".into());
    assert!(correlate(&mut c, &s, e, at(1)).unwrap().patch.is_none());
}

#[test]
fn long_names_fall_back_to_a_generated_name() {
    let clock = VirtualClock::new(at(0));
    let s = shared(&clock);
    let short = generate_event_name(&s, "web", at(0));
    assert_eq!(short, format!("web.{:x}", at(0).as_nanosecond()));
    let long = "a".repeat(250);
    let name = generate_event_name(&s, &long, at(0));
    assert!(uuid::Uuid::parse_str(&name).is_ok(), "{name}");
    assert!(is_dns_subdomain(&format!(
        "{}.{:x}",
        "a".repeat(236),
        1u64 << 60
    )));
    assert!(!is_dns_subdomain("Web.1"));
}

#[test]
fn unique_names_at_one_instant() {
    let clock = VirtualClock::new(at(0));
    let s = shared(&clock);
    let a = generate_event_name(&s, "web", at(0));
    let b = generate_event_name(&s, "web", at(0));
    assert_ne!(a, b);
}

#[tokio::test(start_paused = true)]
async fn events_carry_the_source_and_reporting_fields_and_repeats_are_patched() {
    let clock = VirtualClock::new(at(0));
    let sink = FakeSink::scripted(vec![]);
    let r = recorder(sink.clone(), &clock);
    r.record(&hpa("web"), &warning("boom"));
    r.wait_idle().await;
    clock.advance(jiff::SignedDuration::from_secs(15));
    r.record(&hpa("web"), &warning("boom"));
    r.wait_idle().await;
    let calls = sink.calls();
    assert_eq!(calls.len(), 2);
    let (verb, first, _, _) = &calls[0];
    assert_eq!(*verb, Verb::Create);
    let json = serde_json::to_value(first).unwrap();
    assert_eq!(json["source"]["component"], "horizontal-pod-autoscaler");
    assert_eq!(json["reportingComponent"], "horizontal-pod-autoscaler");
    assert_eq!(json["reportingInstance"], "");
    assert_eq!(calls[1].0, Verb::Patch);
    assert_eq!(calls[1].1.metadata.name, first.metadata.name);
    // The observation was updated from the server's answer (`UpdateState`).
    assert_eq!(calls[1].1.metadata.resource_version.as_deref(), Some("7"));
    assert_eq!(r.emitted_since(0).len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_transport_failure_is_retried_10s_apart_with_a_random_first_sleep() {
    let clock = VirtualClock::new(at(0));
    let sink = FakeSink::scripted(vec![Err(transport()), Err(transport()), Ok(())]);
    let r = recorder(sink.clone(), &clock);
    let start = tokio::time::Instant::now();
    r.record(&hpa("web"), &warning("boom"));
    r.wait_idle().await;
    let offsets: Vec<Duration> = sink.calls().iter().map(|c| c.3 - start).collect();
    assert_eq!(
        offsets,
        vec![
            Duration::ZERO,
            Duration::from_secs(5),
            Duration::from_secs(15)
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_write_is_tried_at_most_12_times() {
    let clock = VirtualClock::new(at(0));
    let sink = FakeSink::scripted((0..20).map(|_| Err(transport())).collect());
    let r = recorder(sink.clone(), &clock);
    r.record(&hpa("web"), &warning("boom"));
    r.wait_idle().await;
    assert_eq!(sink.calls().len(), 12);
}

#[tokio::test(start_paused = true)]
async fn api_rejections_are_not_retried() {
    for err in [
        status(409, "AlreadyExists"),
        status(422, "Invalid"),
        status(500, "InternalError"),
        SinkError::RequestConstruction("bad".into()),
    ] {
        let clock = VirtualClock::new(at(0));
        let sink = FakeSink::scripted(vec![Err(err.clone())]);
        let r = recorder(sink.clone(), &clock);
        r.record(&hpa("web"), &warning("boom"));
        r.wait_idle().await;
        assert_eq!(sink.calls().len(), 1, "{err:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_patch_of_a_vanished_event_becomes_a_create() {
    let clock = VirtualClock::new(at(0));
    let sink = FakeSink::scripted(vec![Ok(()), Err(status(404, "NotFound"))]);
    let r = recorder(sink.clone(), &clock);
    r.record(&hpa("web"), &warning("boom"));
    r.record(&hpa("web"), &warning("boom"));
    r.wait_idle().await;
    let verbs: Vec<Verb> = sink.calls().into_iter().map(|c| c.0).collect();
    assert_eq!(verbs, vec![Verb::Create, Verb::Patch, Verb::Create]);
    assert_eq!(sink.calls()[2].1.metadata.resource_version, None);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn recording_never_waits_on_the_api_and_drops_beyond_the_queues() {
    let clock = VirtualClock::new(at(0));
    let sink = Arc::new(FakeSink {
        hang: true,
        ..Default::default()
    });
    let r = recorder(sink.clone(), &clock);
    // A hung API server: every record call still returns at once.
    for i in 0..2500 {
        r.record(&hpa(&format!("h{i}")), &warning("boom"));
    }
    assert_eq!(r.emitted_since(0).len(), 2500);
    // The incoming queue holds 1000; the rest were dropped.
    assert_eq!(r.pending(), MAX_QUEUED_EVENTS);
    // Let the broadcaster run until nothing moves any more (tokio's cooperative budget makes
    // it yield every 128 receives; extra turns are harmless: the sink is stuck).
    for _ in 0..1000 {
        tokio::task::yield_now().await;
    }
    // The broadcaster moved them to the sink watcher, whose writer is stuck on the first.
    assert_eq!(sink.calls().len(), 1);
    assert_eq!(r.pending(), MAX_QUEUED_EVENTS);
    for i in 0..1500 {
        r.record(&hpa(&format!("g{i}")), &warning("boom"));
    }
    for _ in 0..1000 {
        tokio::task::yield_now().await;
    }
    // 500 did not fit the incoming queue; of the 1000 that did, the one that fitted the
    // watcher queue stays, the other 999 were dropped (`DropIfChannelFull`): one being
    // written and a full watcher queue remain.
    assert_eq!(r.pending(), MAX_QUEUED_EVENTS + 1);
}

#[tokio::test(start_paused = true)]
async fn shutdown_stops_retrying() {
    let clock = VirtualClock::new(at(0));
    let sink = FakeSink::scripted((0..20).map(|_| Err(transport())).collect());
    let r = recorder(sink.clone(), &clock);
    r.record(&hpa("web"), &warning("boom"));
    tokio::time::sleep(Duration::from_secs(16)).await;
    r.shutdown();
    r.wait_idle().await;
    assert_eq!(sink.calls().len(), 3);
}
