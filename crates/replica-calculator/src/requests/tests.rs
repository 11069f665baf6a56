use super::*;
use k8s_openapi::api::core::v1::{PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

fn list(entries: &[(&str, &str)]) -> Option<BTreeMap<String, Quantity>> {
    Some(
        entries
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
            .collect(),
    )
}

fn c(name: &str, requests: &[(&str, &str)], restartable: bool) -> Container {
    Container {
        name: name.to_owned(),
        resources: Some(ResourceRequirements {
            requests: list(requests),
            ..Default::default()
        }),
        restart_policy: restartable.then(|| "Always".to_owned()),
        ..Default::default()
    }
}

fn pod(
    pod_level: &[(&str, &str)],
    overhead: &[(&str, &str)],
    containers: Vec<Container>,
    init: Vec<Container>,
) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("p".to_owned()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            resources: (!pod_level.is_empty()).then(|| ResourceRequirements {
                requests: list(pod_level),
                ..Default::default()
            }),
            overhead: (!overhead.is_empty()).then(|| list(overhead)).flatten(),
            containers,
            init_containers: Some(init),
            ..Default::default()
        }),
        status: None,
    }
}

#[test]
fn pod_level_request_plus_overhead() {
    // `calculatePodLevelRequests`: pod-level cpu 800m + overhead 100m → 900m.
    let p = pod(&[("cpu", "800m")], &[("cpu", "100m")], vec![], vec![]);
    assert_eq!(calculate_pod_level_requests(&p, "cpu").unwrap(), 900);
}

#[test]
fn pod_level_memory_only_takes_cpu_from_the_aggregate() {
    let p = pod(
        &[("memory", "1Gi")],
        &[],
        vec![c("a", &[("cpu", "100m")], false), c("b", &[], false)],
        vec![],
    );
    assert!(is_pod_level_requests_set(&p));
    let requests = calculate_requests([&p], None, "cpu", true).unwrap();
    assert_eq!(requests["p"], 100);
}

#[test]
fn pod_level_without_the_resource_anywhere_is_an_error() {
    let p = pod(&[("memory", "1Gi")], &[], vec![c("a", &[], false)], vec![]);
    let err = calculate_requests([&p], None, "cpu", true).unwrap_err();
    assert_eq!(
        err.to_string(),
        "missing pod-level request for cpu in Pod p"
    );
}

#[test]
fn unsupported_pod_level_resources_do_not_count() {
    let p = pod(
        &[("ephemeral-storage", "1Gi")],
        &[],
        vec![c("a", &[], false)],
        vec![],
    );
    assert!(!is_pod_level_requests_set(&p));
    let hp = pod(&[("hugepages-2Mi", "2Mi")], &[], vec![], vec![]);
    assert!(is_pod_level_requests_set(&hp));
}

#[test]
fn sidecar_aggregation_takes_the_max_of_init_uses() {
    // containers 100m; sidecar 50m (runs throughout); a later ordinary init 500m needs
    // 500m + 50m = 550m, more than 100m + 50m.
    let p = pod(
        &[("memory", "1Gi")],
        &[],
        vec![c("a", &[("cpu", "100m")], false)],
        vec![
            c("side", &[("cpu", "50m")], true),
            c("init", &[("cpu", "500m")], false),
        ],
    );
    assert_eq!(pod_requests(&p, "cpu").unwrap(), Some(550));
    // An ordinary init container before the sidecar does not add the sidecar.
    let p = pod(
        &[],
        &[],
        vec![c("a", &[("cpu", "100m")], false)],
        vec![
            c("init", &[("cpu", "120m")], false),
            c("side", &[("cpu", "50m")], true),
        ],
    );
    assert_eq!(pod_requests(&p, "cpu").unwrap(), Some(150));
}

#[test]
fn container_requests_include_restartable_init_containers_and_round_up() {
    let p = pod(
        &[],
        &[],
        vec![c("a", &[("cpu", "0.0001")], false)],
        vec![c("side", &[("cpu", "1")], true)],
    );
    // MilliValue rounds 0.1m up to 1m.
    assert_eq!(
        calculate_pod_requests_from_containers(&p, None, "cpu").unwrap(),
        1001
    );
    assert_eq!(
        calculate_pod_requests_from_containers(&p, Some("side"), "cpu").unwrap(),
        1000
    );
    let err = calculate_pod_requests_from_containers(&p, None, "memory").unwrap_err();
    assert_eq!(
        err.to_string(),
        "missing request for memory in container a of Pod p"
    );
}

#[test]
fn unparsable_request_is_a_typed_error() {
    let p = pod(&[], &[], vec![c("a", &[("cpu", "lots")], false)], vec![]);
    let err = calculate_pod_requests_from_containers(&p, None, "cpu").unwrap_err();
    assert!(
        matches!(err, CalculatorError::InvalidRequest { .. }),
        "{err:?}"
    );
}
