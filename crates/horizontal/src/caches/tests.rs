use std::collections::BTreeSet;

use super::*;

#[test]
fn keys() {
    assert_eq!(split_key("default/web"), Ok(("default", "web")));
    assert_eq!(split_key("web"), Ok(("", "web")));
    assert!(split_key("a/b/c").is_err());
}

#[tokio::test(flavor = "current_thread")]
async fn concurrent_waiters_all_see_the_sync() {
    let (caches, writers) = Caches::new();
    let waiter = |c: Caches| tokio::spawn(async move { c.wait_for_sync().await });
    let a = waiter(caches.clone());
    let b = waiter(caches.clone());
    // Let both waiters poll (and park) before the caches become ready.
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(!a.is_finished() && !b.is_finished());
    writers.hpas.apply(watcher::Event::Init);
    writers.hpas.apply(watcher::Event::InitDone);
    writers.pods.apply(watcher::Event::Init);
    writers.pods.apply(watcher::Event::InitDone);
    let both = async { (a.await, b.await) };
    let (ra, rb) = tokio::time::timeout(std::time::Duration::from_secs(5), both)
        .await
        .expect("both waiters are woken");
    assert_eq!(ra.unwrap(), Ok(()));
    assert_eq!(rb.unwrap(), Ok(()));
}

fn pod(ns: &str, name: &str, app: &str) -> Pod {
    Pod {
        metadata: kube::api::ObjectMeta {
            namespace: Some(ns.into()),
            name: Some(name.into()),
            labels: Some([("app".to_owned(), app.to_owned())].into()),
            managed_fields: Some(vec![Default::default()]),
            resource_version: Some("1".into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[tokio::test]
async fn pods_are_cached_without_managed_fields_and_listed_per_namespace() {
    let (caches, writers) = Caches::new();
    let events = futures::stream::iter(vec![
        Ok(watcher::Event::Init),
        Ok(watcher::Event::InitApply(pod("a", "web-2", "web"))),
        Ok(watcher::Event::InitApply(pod("a", "web-1", "web"))),
        Ok(watcher::Event::InitApply(pod("a", "db-1", "db"))),
        Ok(watcher::Event::InitApply(pod("b", "web-1", "web"))),
        Ok(watcher::Event::InitDone),
        Ok(watcher::Event::Apply(pod("c", "web-1", "web"))),
        Ok(watcher::Event::Delete(pod("c", "web-1", "web"))),
    ]);
    run_pod_informer(events, writers.pods.clone()).await;
    let selector = hpa_metrics::Selector::from_label_selector(
        &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
            match_labels: Some([("app".to_owned(), "web".to_owned())].into()),
            ..Default::default()
        },
    )
    .unwrap();
    let listed = caches.pod_lister().list("a", &selector).unwrap();
    let names: Vec<_> = listed
        .iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["web-1", "web-2"]);
    assert!(listed.iter().all(|p| p.metadata.managed_fields.is_none()));
    // A namespace whose last pod left has no index entry.
    assert_eq!(writers.pods.namespaces(), 2);
    assert_eq!(caches.pod_versions().len(), 4);
}

fn hpa(name: &str) -> HorizontalPodAutoscaler {
    HorizontalPodAutoscaler {
        metadata: kube::api::ObjectMeta {
            namespace: Some("default".into()),
            name: Some(name.into()),
            managed_fields: Some(vec![Default::default()]),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Registers on add/update and unregisters on delete, as the controller's handler does;
/// remembers every call.
#[derive(Default)]
struct Registering {
    registered: std::sync::Mutex<BTreeSet<String>>,
    calls: std::sync::Mutex<Vec<String>>,
}

impl HpaEventHandler for Registering {
    fn on_add(&self, hpa: &HorizontalPodAutoscaler) {
        self.calls
            .lock()
            .unwrap()
            .push(format!("add {}", object_key(hpa)));
        self.registered.lock().unwrap().insert(object_key(hpa));
    }
    fn on_update(&self, _old_generation: Option<i64>, hpa: &HorizontalPodAutoscaler) {
        self.calls
            .lock()
            .unwrap()
            .push(format!("update {}", object_key(hpa)));
        self.registered.lock().unwrap().insert(object_key(hpa));
    }
    fn on_delete(&self, key: &str) {
        self.calls.lock().unwrap().push(format!("delete {key}"));
        self.registered.lock().unwrap().remove(key);
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_resync_never_re_registers_a_deleted_hpa() {
    let (caches, writers) = Caches::new();
    let handler = Arc::new(Registering::default());
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let events = tokio_stream_of(rx);
    let period = Duration::from_secs(15);
    let task = tokio::spawn(run_hpa_informer(
        events,
        writers.hpas,
        handler.clone(),
        period,
    ));
    for e in [
        watcher::Event::Init,
        watcher::Event::InitApply(hpa("a")),
        watcher::Event::InitApply(hpa("b")),
        watcher::Event::InitDone,
    ] {
        tx.send(Ok(e)).unwrap();
    }
    tokio::time::sleep(period - Duration::from_millis(1)).await;
    // The deletion arrives at the very instant the resync is due.
    tx.send(Ok(watcher::Event::Delete(hpa("a")))).unwrap();
    tokio::time::sleep(Duration::from_millis(1)).await;
    tokio::time::sleep(period * 3).await;
    let calls = handler.calls.lock().unwrap().clone();
    let deleted_at = calls.iter().position(|c| c == "delete default/a").unwrap();
    assert!(
        !calls[deleted_at..]
            .iter()
            .any(|c| c.ends_with(" default/a") && !c.starts_with("delete")),
        "{calls:?}"
    );
    assert_eq!(
        *handler.registered.lock().unwrap(),
        BTreeSet::from(["default/b".to_owned()])
    );
    // Resyncs keep coming for the HPA that is still there.
    assert!(calls.iter().filter(|c| *c == "update default/b").count() >= 3);
    assert_eq!(caches.hpas().len(), 1);
    // HPAs are cached without managedFields too (the factory's transform).
    assert!(
        caches
            .hpas()
            .iter()
            .all(|h| h.metadata.managed_fields.is_none())
    );
    task.abort();
}

fn tokio_stream_of<T: Send + 'static>(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<T>,
) -> impl Stream<Item = T> + Send {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

fn hpa_at(name: &str, rv: &str, generation: i64) -> HorizontalPodAutoscaler {
    let mut h = hpa(name);
    h.metadata.resource_version = Some(rv.into());
    h.metadata.generation = Some(generation);
    h
}

#[tokio::test(flavor = "current_thread")]
async fn a_relist_updates_the_hpa_cache_in_place_and_keeps_unchanged_hpas() {
    let (caches, writers) = Caches::new();
    let handler = Arc::new(Registering::default());
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let task = tokio::spawn(run_hpa_informer(
        tokio_stream_of(rx),
        writers.hpas,
        handler.clone(),
        Duration::ZERO,
    ));
    let send = |e| tx.send(Ok(e)).unwrap();
    send(watcher::Event::Init);
    send(watcher::Event::InitApply(hpa_at("same", "10", 1)));
    send(watcher::Event::InitApply(hpa_at("edited", "11", 1)));
    send(watcher::Event::InitApply(hpa_at("deleted", "12", 1)));
    send(watcher::Event::InitDone);
    caches.hpas.wait_until_ready().await.unwrap();
    let same = caches.hpa("default", "same").unwrap();

    // The watch ended with 410 Gone (an API server restart): the watcher relists.
    send(watcher::Event::Init);
    send(watcher::Event::InitApply(hpa_at("same", "10", 1)));
    send(watcher::Event::InitApply(hpa_at("edited", "20", 2)));
    send(watcher::Event::InitApply(hpa_at("new", "21", 1)));
    send(watcher::Event::InitDone);
    drop(tx);
    task.await.unwrap();

    // The unchanged HPA is the very object cached before; the edited one is the new one.
    assert!(Arc::ptr_eq(&same, &caches.hpa("default", "same").unwrap()));
    let edited = caches.hpa("default", "edited").unwrap();
    assert_eq!(edited.metadata.resource_version.as_deref(), Some("20"));
    assert!(edited.metadata.managed_fields.is_none());
    assert!(caches.hpa("default", "deleted").is_none());
    assert_eq!(caches.hpas().len(), 3);
    // client-go's handler calls for a relist: `UpdateFunc` for every listed HPA that was
    // cached (unchanged ones too), `AddFunc` for a new one, `DeleteFunc` for the unlisted.
    let calls = handler.calls.lock().unwrap().clone();
    assert_eq!(
        calls[3..],
        [
            "update default/same",
            "update default/edited",
            "add default/new",
            "delete default/deleted",
        ]
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_relist_keeps_unchanged_pods_and_drops_the_unlisted_at_its_end() {
    let (caches, writers) = Caches::new();
    let pods = writers.pods.clone();
    pods.apply(watcher::Event::Init);
    pods.apply(watcher::Event::InitApply(pod("a", "web-1", "web")));
    pods.apply(watcher::Event::InitApply(pod("a", "web-2", "web")));
    pods.apply(watcher::Event::InitDone);
    caches.pods.wait_until_ready().await.unwrap();
    let before = caches.pods.pods.get("a", "web-1").unwrap();

    pods.apply(watcher::Event::Init);
    pods.apply(watcher::Event::InitApply(pod("a", "web-1", "web")));
    let mut moved = pod("a", "web-3", "web");
    moved.metadata.resource_version = Some("2".into());
    pods.apply(watcher::Event::InitApply(moved));
    // Until the relist ends, the pod it has not listed is still there.
    assert!(caches.pods.contains("a", "web-2"));
    assert!(caches.pods.contains("a", "web-3"));
    pods.apply(watcher::Event::InitDone);

    assert!(Arc::ptr_eq(
        &before,
        &caches.pods.pods.get("a", "web-1").unwrap()
    ));
    assert!(!caches.pods.contains("a", "web-2"));
    assert_eq!(
        caches.pod_versions().into_iter().collect::<Vec<_>>(),
        [
            ("a/web-1".to_owned(), "1".to_owned()),
            ("a/web-3".to_owned(), "2".to_owned())
        ]
    );
}

#[tokio::test(flavor = "current_thread")]
async fn waiting_for_the_caches_fails_when_an_informer_stops_before_its_first_list() {
    let (caches, writers) = Caches::new();
    let events = futures::stream::iter(vec![Ok(watcher::Event::Init)]);
    run_pod_informer(events, writers.pods).await;
    writers.hpas.apply(watcher::Event::Init);
    writers.hpas.apply(watcher::Event::InitDone);
    let err = caches.wait_for_sync().await.unwrap_err();
    assert!(err.contains("Pod cache"), "{err}");
}

#[test]
fn a_cached_hpa_holds_no_spare_capacity_from_its_decoding() {
    // serde grows a decoded `Vec` from nothing (four `MetricSpec`s of room for one metric);
    // the cache keeps a copy sized to what it holds.
    let text = serde_json::json!({
        "metadata": {"namespace": "default", "name": "web", "resourceVersion": "7"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "maxReplicas": 10,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 50}}}]
        },
        "status": {"currentReplicas": 1, "desiredReplicas": 1, "conditions": [
            {"type": "AbleToScale", "status": "True"}
        ]}
    })
    .to_string();
    // From text, as a watch decodes it (a `Value` would tell serde each array's length).
    let decoded: HorizontalPodAutoscaler = serde_json::from_str(&text).unwrap();
    assert!(decoded.spec.metrics.as_ref().unwrap().capacity() > 1);
    let index = HpaIndex::default();
    let cached = index.apply(watcher::Event::Apply(decoded)).unwrap();
    assert_eq!(cached.spec.metrics.as_ref().unwrap().capacity(), 1);
    let conditions = cached.status.as_ref().unwrap().conditions.as_ref().unwrap();
    assert_eq!(conditions.capacity(), 1);
}
