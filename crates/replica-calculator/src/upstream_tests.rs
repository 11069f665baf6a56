//! Ports of every test case of upstream
//! `pkg/controller/podautoscaler/replica_calculator_test.go` (the version with
//! `TestReplicaCalcResourceScale`, `TestReplicaCalcConfigurableTolerance`, the overflow tests and
//! `TestCalculateRequests`). Expected values are upstream's.
//!
//! Harness (as upstream's fake clients): pods `test-pod-<i>` labelled `name=test-pod`, each with
//! containers `container1` and `container2`; the per-pod request is set on *both* containers; a
//! single `Ready` condition (default `True`) with an unset last-transition time; `startTime` set
//! (Go's zero time unless given); phase `Running` unless given. Resource samples have one level
//! per container, Go-zero timestamps and a one-minute window; the metrics client drops a pod
//! whose containers do not all report the resource (pod-sum mode) or that lacks the named
//! container (container mode). "Hot" = started now, "cool" = started three minutes ago.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{
    Container, Pod, PodCondition, PodSpec, PodStatus, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use crate::PodGroups;
use crate::group_pods::{GO_ZERO_TIME, ReadinessConfig, group_pods};
use crate::replicas::{
    CalculatorConfig, PodSample, ResourceTarget, external_metric_replicas,
    external_per_pod_metric_replicas, object_metric_replicas, object_per_pod_metric_replicas,
    plain_metric_replicas, ready_pods_count, resource_replicas,
};
use crate::requests::{calculate_pod_requests_from_containers, calculate_requests};
use crate::{CalculatorError, PodMetric, PodMetricsInfo};
use hpa_decision::tolerance::Tolerances;

pub(crate) const TEST_NAMESPACE: &str = "test-namespace";
pub(crate) const POD_NAME_PREFIX: &str = "test-pod";
const DEFAULT_TESTING_TOLERANCE: f64 = 0.1;

/// A fixed evaluation time (upstream uses the wall clock).
pub(crate) fn now() -> Timestamp {
    Timestamp::constant(1_767_225_600, 0) // 2026-01-01T00:00:00Z
}

pub(crate) fn test_config() -> CalculatorConfig {
    CalculatorConfig {
        readiness: ReadinessConfig {
            cpu_initialization_period: Duration::from_secs(2 * 60),
            delay_of_initial_readiness_status: Duration::from_secs(10),
        },
        pod_level_resources_enabled: true,
        object_metric_error_fixed: false,
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Start {
    Hot,
    Cool,
}

impl Start {
    fn time(self) -> Timestamp {
        match self {
            Start::Hot => now(),
            Start::Cool => now() - SignedDuration::from_mins(3),
        }
    }
}

const T: &str = "True";
const F: &str = "False";
const RUNNING: &str = "Running";
const PENDING: &str = "Pending";
const FAILED: &str = "Failed";

/// The pods and samples of a case (upstream `calcScenario` / `replicaCalcTestCase`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Scenario {
    pub current_replicas: i32,
    pub requests: Vec<&'static str>,
    pub levels: Vec<Vec<i64>>,
    pub pod_names: Vec<&'static str>,
    pub container: Option<&'static str>,
    pub readiness: Vec<&'static str>,
    pub start: Vec<Start>,
    pub phase: Vec<&'static str>,
    pub deleted: Vec<bool>,
    /// Custom / external metric values (one per pod, or the object value, or external values).
    pub metric_levels: Vec<i64>,
}

fn q(s: &str) -> Quantity {
    Quantity(s.to_owned())
}

fn cpu(s: &str) -> Option<ResourceRequirements> {
    Some(ResourceRequirements {
        requests: Some(BTreeMap::from([("cpu".to_owned(), q(s))])),
        ..Default::default()
    })
}

fn container(name: &str, request: Option<&str>) -> Container {
    Container {
        name: name.to_owned(),
        resources: request.and_then(cpu),
        ..Default::default()
    }
}

pub(crate) fn pod_name(i: usize) -> String {
    format!("{POD_NAME_PREFIX}-{i}")
}

impl Scenario {
    /// Upstream `buildFakePod`.
    fn pod(&self, i: usize) -> Pod {
        let readiness = self.readiness.get(i).copied().unwrap_or(T);
        let start = self.start.get(i).map_or(GO_ZERO_TIME, |s| s.time());
        let phase = self.phase.get(i).copied().unwrap_or(RUNNING);
        let deleted = self.deleted.get(i).copied().unwrap_or(false);
        let request = self.requests.get(i).copied();
        Pod {
            metadata: ObjectMeta {
                name: Some(pod_name(i)),
                namespace: Some(TEST_NAMESPACE.to_owned()),
                labels: Some(BTreeMap::from([(
                    "name".to_owned(),
                    POD_NAME_PREFIX.to_owned(),
                )])),
                deletion_timestamp: deleted.then(|| Time(now())),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![
                    container("container1", request),
                    container("container2", request),
                ],
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some(phase.to_owned()),
                start_time: Some(Time(start)),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".to_owned(),
                    status: readiness.to_owned(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    /// Upstream's pod list: `currentReplicas` pods, or `len(podPhase)` if longer.
    pub fn pods(&self) -> Vec<Arc<Pod>> {
        let count = usize::try_from(self.current_replicas)
            .unwrap_or(0)
            .max(self.phase.len());
        (0..count).map(|i| Arc::new(self.pod(i))).collect()
    }

    /// What the REST metrics client makes of the fake `PodMetricsList`; `None` for an empty
    /// list (upstream: `no metrics returned from resource metrics API`).
    pub fn resource_metrics(&self) -> Option<PodMetricsInfo> {
        if self.levels.is_empty() {
            return None;
        }
        let mut metrics = PodMetricsInfo::new();
        for (i, levels) in self.levels.iter().enumerate() {
            let name = self
                .pod_names
                .get(i)
                .map_or_else(|| pod_name(i), |n| (*n).to_owned());
            // Two container entries; those without a level have no usage.
            let value = match self.container {
                None if levels.len() >= 2 => Some(levels.iter().sum()),
                None => None,
                Some(c) => {
                    let index: usize = c
                        .trim_start_matches("container")
                        .parse::<usize>()
                        .expect("containerN")
                        - 1;
                    levels.get(index).copied()
                }
            };
            if let Some(value) = value {
                metrics.insert(
                    name,
                    PodMetric {
                        timestamp: GO_ZERO_TIME,
                        window: Duration::from_secs(60),
                        value,
                    },
                );
            }
        }
        Some(metrics)
    }

    /// What the custom metrics client makes of the fake Pods metric list.
    pub fn pods_metrics(&self) -> PodMetricsInfo {
        self.metric_levels
            .iter()
            .enumerate()
            .map(|(i, &value)| {
                (
                    pod_name(i),
                    PodMetric {
                        timestamp: GO_ZERO_TIME,
                        window: Duration::from_secs(60),
                        value,
                    },
                )
            })
            .collect()
    }
}

pub(crate) fn cpu_requests(n: usize, value: &'static str) -> Vec<&'static str> {
    vec![value; n]
}

pub(crate) fn levels(per_container: &[i64]) -> Vec<Vec<i64>> {
    per_container.iter().map(|&l| vec![l, l]).collect()
}

/// A `GetResourceReplicas` case.
#[derive(Debug, Clone)]
pub(crate) struct ResourceCase {
    pub name: &'static str,
    pub scenario: Scenario,
    pub target_utilization: i32,
    pub tolerances: Option<Tolerances>,
    /// `Ok((replicas, utilization, raw))` or `Err(substring of the error)`.
    pub expected: Result<(i32, i32, i64), &'static str>,
}

pub(crate) fn run_resource_pure(case: &ResourceCase) -> Result<(i32, i32, i64), String> {
    let Some(metrics) = case.scenario.resource_metrics() else {
        return Err(
            "unable to get metrics for resource cpu: no metrics returned from resource metrics API"
                .to_owned(),
        );
    };
    let pods = case.scenario.pods();
    let target = ResourceTarget {
        resource: "cpu",
        container: case.scenario.container,
        target_utilization: case.target_utilization,
    };
    resource_replicas(
        case.scenario.current_replicas,
        &target,
        case.tolerances.unwrap_or_default(),
        PodSample {
            pods: &pods,
            metrics,
            now: now(),
        },
        &test_config(),
    )
    .map(|p| (p.replica_count, p.utilization, p.raw_utilization))
    .map_err(|e| e.to_string())
}

/// `None` when `got` matches the case's expectation, else a description of the mismatch.
pub(crate) fn resource_mismatch(
    case: &ResourceCase,
    got: &Result<(i32, i32, i64), String>,
) -> Option<String> {
    let ok = match (&case.expected, got) {
        (Ok(want), Ok(got)) => want == got,
        (Err(want), Err(got)) => got.contains(want),
        _ => false,
    };
    (!ok).then(|| format!("{}: want {:?}, got {got:?}", case.name, case.expected))
}

/// Panics listing every failed case, so one run reports all mismatches.
pub(crate) fn assert_no_failures(failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{} case(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Upstream `TestReplicaCalcResourceScale` plus every standalone resource test.
pub(crate) fn resource_cases() -> Vec<ResourceCase> {
    let c = |name, scenario, target_utilization, expected| ResourceCase {
        name,
        scenario,
        target_utilization,
        tolerances: None,
        expected: Ok(expected),
    };
    let mut cases = vec![
        c(
            "scale up",
            Scenario {
                current_replicas: 3,
                requests: cpu_requests(3, "1.0"),
                levels: levels(&[300, 500, 700]),
                ..Default::default()
            },
            30,
            (5, 50, 2 * 500),
        ),
        c(
            "scale up: container metric",
            Scenario {
                current_replicas: 3,
                container: Some("container2"),
                requests: cpu_requests(3, "1.0"),
                levels: vec![vec![1000, 300], vec![1000, 500], vec![1000, 700]],
                ..Default::default()
            },
            30,
            (5, 50, 500),
        ),
        c(
            "scale up: unready pod scales less",
            Scenario {
                current_replicas: 3,
                readiness: vec![F, T, T],
                requests: cpu_requests(3, "1.0"),
                levels: levels(&[300, 500, 700]),
                ..Default::default()
            },
            30,
            (4, 60, 2 * 600),
        ),
        c(
            "scale up: hot-CPU container scales less",
            Scenario {
                current_replicas: 3,
                start: vec![Start::Hot, Start::Cool, Start::Cool],
                container: Some("container2"),
                requests: cpu_requests(3, "1.0"),
                levels: vec![vec![0, 300], vec![0, 500], vec![0, 700]],
                ..Default::default()
            },
            30,
            (4, 60, 600),
        ),
        c(
            "scale up: hot-CPU pod scales less",
            Scenario {
                current_replicas: 3,
                start: vec![Start::Hot, Start::Cool, Start::Cool],
                requests: cpu_requests(3, "1.0"),
                levels: levels(&[300, 500, 700]),
                ..Default::default()
            },
            30,
            (4, 60, 2 * 600),
        ),
        c(
            "no scale: unready pods ignored",
            Scenario {
                current_replicas: 3,
                readiness: vec![T, F, F],
                requests: cpu_requests(3, "1.0"),
                levels: levels(&[400, 500, 700]),
                ..Default::default()
            },
            30,
            (3, 40, 2 * 400),
        ),
        c(
            "no scale: hot-CPU pods ignored",
            Scenario {
                current_replicas: 3,
                readiness: vec![T, F, F],
                start: vec![Start::Cool, Start::Hot, Start::Hot],
                requests: cpu_requests(3, "1.0"),
                levels: levels(&[400, 500, 700]),
                ..Default::default()
            },
            30,
            (3, 40, 2 * 400),
        ),
        c(
            "scale up: failed pods ignored",
            Scenario {
                current_replicas: 2,
                readiness: vec![T, T, F, F],
                phase: vec![RUNNING, RUNNING, FAILED, FAILED],
                requests: cpu_requests(4, "1.0"),
                levels: levels(&[500, 700]),
                ..Default::default()
            },
            30,
            (4, 60, 2 * 600),
        ),
        c(
            "scale up: failed pods ignored with missing container metric",
            Scenario {
                current_replicas: 2,
                readiness: vec![T, T, F, F],
                phase: vec![RUNNING, RUNNING, FAILED, FAILED],
                container: Some("container2"),
                requests: cpu_requests(4, "1.0"),
                levels: vec![vec![1000, 500], vec![9000, 700], vec![1000], vec![9000]],
                ..Default::default()
            },
            30,
            (4, 60, 600),
        ),
        c(
            "scale up: container metrics with failed pods ignored",
            Scenario {
                current_replicas: 2,
                readiness: vec![T, T, F, F],
                phase: vec![RUNNING, RUNNING, FAILED, FAILED],
                container: Some("container2"),
                requests: cpu_requests(4, "1.0"),
                levels: vec![vec![1000, 500], vec![9000, 700]],
                ..Default::default()
            },
            30,
            (4, 60, 600),
        ),
        c(
            "scale up: pods being deleted are ignored",
            Scenario {
                current_replicas: 2,
                readiness: vec![T, T, F, F],
                phase: vec![RUNNING; 4],
                deleted: vec![false, false, true, true],
                requests: cpu_requests(4, "1.0"),
                levels: levels(&[500, 700]),
                ..Default::default()
            },
            30,
            (4, 60, 2 * 600),
        ),
        c(
            "scale up: container metrics with pods being deleted ignored",
            Scenario {
                current_replicas: 2,
                readiness: vec![T, T, F, F],
                phase: vec![RUNNING; 4],
                deleted: vec![false, false, true, true],
                container: Some("container1"),
                requests: cpu_requests(4, "1.0"),
                levels: levels(&[500, 700]),
                ..Default::default()
            },
            30,
            (4, 60, 600),
        ),
        c(
            "scale down",
            Scenario {
                current_replicas: 5,
                requests: cpu_requests(5, "1.0"),
                levels: levels(&[100, 300, 500, 250, 250]),
                ..Default::default()
            },
            50,
            (3, 28, 2 * 280),
        ),
        c(
            "scale down: container metric",
            Scenario {
                current_replicas: 5,
                container: Some("container2"),
                requests: cpu_requests(5, "1.0"),
                levels: vec![
                    vec![1000, 100],
                    vec![1000, 300],
                    vec![1000, 500],
                    vec![1000, 250],
                    vec![1000, 250],
                ],
                ..Default::default()
            },
            50,
            (3, 28, 280),
        ),
        c(
            "scale down: exclude unready pods",
            Scenario {
                current_replicas: 5,
                readiness: vec![T, T, T, F, F],
                requests: cpu_requests(5, "1.0"),
                levels: levels(&[100, 300, 500, 250, 250]),
                ..Default::default()
            },
            50,
            (2, 30, 2 * 300),
        ),
        c(
            "scale down: container metric excludes unready pods",
            Scenario {
                current_replicas: 5,
                readiness: vec![T, T, T, F, F],
                container: Some("container2"),
                requests: cpu_requests(5, "1.0"),
                levels: vec![
                    vec![1000, 100],
                    vec![1000, 300],
                    vec![1000, 500],
                    vec![1000, 250],
                    vec![1000, 250],
                ],
                ..Default::default()
            },
            50,
            (2, 30, 300),
        ),
        c(
            "scale down: exclude unscheduled pods",
            Scenario {
                current_replicas: 5,
                readiness: vec![T, F, F, F, F],
                phase: vec![RUNNING, PENDING, PENDING, PENDING, PENDING],
                requests: cpu_requests(5, "1.0"),
                levels: levels(&[100]),
                ..Default::default()
            },
            50,
            (1, 10, 2 * 100),
        ),
        c(
            "scale down: container metric excludes unscheduled pods",
            Scenario {
                current_replicas: 5,
                readiness: vec![T, F, F, F, F],
                phase: vec![RUNNING, PENDING, PENDING, PENDING, PENDING],
                container: Some("container2"),
                requests: cpu_requests(5, "1.0"),
                levels: vec![
                    vec![1000, 100],
                    vec![1000, 300],
                    vec![1000, 500],
                    vec![1000, 250],
                    vec![1000, 250],
                ],
                ..Default::default()
            },
            50,
            (1, 10, 100),
        ),
        c(
            "scale down: ignore hot-CPU pods",
            Scenario {
                current_replicas: 5,
                start: vec![
                    Start::Cool,
                    Start::Cool,
                    Start::Cool,
                    Start::Hot,
                    Start::Hot,
                ],
                requests: cpu_requests(5, "1.0"),
                levels: levels(&[100, 300, 500, 250, 250]),
                ..Default::default()
            },
            50,
            (2, 30, 2 * 300),
        ),
        c(
            "scale down: container metric ignores hot-CPU pods",
            Scenario {
                current_replicas: 5,
                start: vec![
                    Start::Cool,
                    Start::Cool,
                    Start::Cool,
                    Start::Hot,
                    Start::Hot,
                ],
                container: Some("container2"),
                requests: cpu_requests(5, "1.0"),
                levels: vec![
                    vec![1000, 100],
                    vec![1000, 300],
                    vec![1000, 500],
                    vec![1000, 1000],
                    vec![1000, 1000],
                ],
                ..Default::default()
            },
            50,
            (2, 30, 300),
        ),
        c(
            "scale down: failed pods ignored",
            Scenario {
                current_replicas: 5,
                readiness: vec![T, T, T, T, T, F, F],
                phase: vec![RUNNING, RUNNING, RUNNING, RUNNING, RUNNING, FAILED, FAILED],
                requests: cpu_requests(7, "1.0"),
                levels: levels(&[100, 300, 500, 250, 250]),
                ..Default::default()
            },
            50,
            (3, 28, 2 * 280),
        ),
        c(
            "scale down: container metric with failed pods ignored",
            Scenario {
                current_replicas: 5,
                readiness: vec![T, T, T, T, T, F, F],
                phase: vec![RUNNING, RUNNING, RUNNING, RUNNING, RUNNING, FAILED, FAILED],
                container: Some("container2"),
                requests: cpu_requests(7, "1.0"),
                levels: vec![
                    vec![1000, 100],
                    vec![1000, 300],
                    vec![1000, 500],
                    vec![1000, 250],
                    vec![1000, 250],
                ],
                ..Default::default()
            },
            50,
            (3, 28, 280),
        ),
        c(
            "scale down: pods being deleted are ignored",
            Scenario {
                current_replicas: 5,
                readiness: vec![T, T, T, T, T, F, F],
                phase: vec![RUNNING; 7],
                deleted: vec![false, false, false, false, false, true, true],
                requests: cpu_requests(7, "1.0"),
                levels: levels(&[100, 300, 500, 250, 250]),
                ..Default::default()
            },
            50,
            (3, 28, 2 * 280),
        ),
        c(
            "scale down: still-running pods being deleted are ignored",
            Scenario {
                current_replicas: 5,
                readiness: vec![T, T, T, T, T, F, F],
                phase: vec![RUNNING; 7],
                deleted: vec![false, false, false, false, false, true, true],
                container: Some("container2"),
                requests: cpu_requests(7, "1.0"),
                levels: vec![
                    vec![1000, 100],
                    vec![1000, 300],
                    vec![1000, 500],
                    vec![1000, 250],
                    vec![1000, 250],
                ],
                ..Default::default()
            },
            50,
            (3, 28, 280),
        ),
        // TestReplicaCalcTolerance
        c(
            "TestReplicaCalcTolerance",
            Scenario {
                current_replicas: 3,
                requests: vec!["0.9", "1.0", "1.1"],
                levels: levels(&[1010, 1030, 1020]),
                ..Default::default()
            },
            100,
            (3, 102, 2 * 1020),
        ),
        // TestReplicaCalcSuperfluousMetrics
        c(
            "TestReplicaCalcSuperfluousMetrics",
            Scenario {
                current_replicas: 4,
                requests: cpu_requests(4, "1.0"),
                levels: levels(&[4000, 9500, 3000, 7000, 3200, 2000]),
                ..Default::default()
            },
            100,
            (24, 587, 2 * 5875),
        ),
        // TestReplicaCalcMissingMetrics
        c(
            "TestReplicaCalcMissingMetrics",
            Scenario {
                current_replicas: 4,
                requests: cpu_requests(4, "1.0"),
                levels: levels(&[400, 95]),
                ..Default::default()
            },
            100,
            (3, 24, 495),
        ),
        c(
            "TestReplicaCalcMissingMetricsNoChangeEq",
            Scenario {
                current_replicas: 2,
                requests: cpu_requests(2, "1.0"),
                levels: levels(&[1000]),
                ..Default::default()
            },
            100,
            (2, 100, 2 * 1000),
        ),
        c(
            "TestReplicaCalcMissingMetricsNoChangeGt",
            Scenario {
                current_replicas: 2,
                requests: cpu_requests(2, "1.0"),
                levels: levels(&[1900]),
                ..Default::default()
            },
            100,
            (2, 190, 2 * 1900),
        ),
        c(
            "TestReplicaCalcMissingMetricsNoChangeLt",
            Scenario {
                current_replicas: 2,
                requests: cpu_requests(2, "1.0"),
                levels: levels(&[600]),
                ..Default::default()
            },
            100,
            (2, 60, 2 * 600),
        ),
        c(
            "TestReplicaCalcMissingMetricsUnreadyChange",
            Scenario {
                current_replicas: 3,
                readiness: vec![F, T, T],
                requests: cpu_requests(3, "1.0"),
                levels: levels(&[100, 450]),
                ..Default::default()
            },
            50,
            (3, 45, 2 * 450),
        ),
        c(
            "TestReplicaCalcMissingMetricsHotCpuNoChange",
            Scenario {
                current_replicas: 3,
                start: vec![Start::Hot, Start::Cool, Start::Cool],
                requests: cpu_requests(3, "1.0"),
                levels: levels(&[100, 450]),
                ..Default::default()
            },
            50,
            (3, 45, 2 * 450),
        ),
        c(
            "TestReplicaCalcMissingMetricsUnreadyScaleUp",
            Scenario {
                current_replicas: 3,
                readiness: vec![F, T, T],
                requests: cpu_requests(3, "1.0"),
                levels: levels(&[100, 2000]),
                ..Default::default()
            },
            50,
            (4, 200, 2 * 2000),
        ),
        c(
            "TestReplicaCalcMissingMetricsHotCpuScaleUp",
            Scenario {
                current_replicas: 3,
                readiness: vec![F, T, T],
                start: vec![Start::Hot, Start::Cool, Start::Cool],
                requests: cpu_requests(3, "1.0"),
                levels: levels(&[100, 2000]),
                ..Default::default()
            },
            50,
            (4, 200, 2 * 2000),
        ),
        c(
            "TestReplicaCalcMissingMetricsUnreadyScaleDown",
            Scenario {
                current_replicas: 4,
                readiness: vec![F, T, T, T],
                requests: cpu_requests(4, "1.0"),
                levels: levels(&[100, 100, 100]),
                ..Default::default()
            },
            50,
            (3, 10, 2 * 100),
        ),
        c(
            "TestReplicaCalcMissingMetricsScaleDownTargetOver100",
            Scenario {
                current_replicas: 4,
                readiness: vec![F, T, T, T],
                requests: vec!["1.0", "1.0", "2.0", "2.0"],
                levels: levels(&[200, 100, 100]),
                ..Default::default()
            },
            300,
            (2, 6, 2 * 100),
        ),
        c(
            "TestReplicaCalcDuringRollingUpdateWithMaxSurge",
            Scenario {
                current_replicas: 2,
                phase: vec![RUNNING; 3],
                requests: cpu_requests(3, "1.0"),
                levels: levels(&[100, 100]),
                ..Default::default()
            },
            50,
            (2, 10, 2 * 100),
        ),
    ];
    // TestReplicaCalcConfigurableTolerance
    let tolerance_case = |name, tolerances, lv: &[i64], expected| ResourceCase {
        name,
        scenario: Scenario {
            current_replicas: 3,
            requests: vec!["0.9", "1.0", "1.1"],
            levels: levels(lv),
            ..Default::default()
        },
        target_utilization: 100,
        tolerances: Some(tolerances),
        expected: Ok(expected),
    };
    cases.extend([
        tolerance_case(
            "Outside of a 0% tolerance",
            Tolerances::new(0., 0.),
            &[909, 1010, 1111],
            (4, 101, 2 * 1010),
        ),
        tolerance_case(
            "Within a 200% scale-up tolerance",
            Tolerances::new(DEFAULT_TESTING_TOLERANCE, 2.),
            &[1890, 1910, 1900],
            (3, 190, 2 * 1900),
        ),
        tolerance_case(
            "Outside 8% scale-up tolerance (and superfuous scale-down tolerance)",
            Tolerances::new(2., 0.08),
            &[1100, 1080, 1090],
            (4, 109, 2 * 1090),
        ),
        tolerance_case(
            "Within a 36% scale-down tolerance",
            Tolerances::new(0.36, DEFAULT_TESTING_TOLERANCE),
            &[660, 640, 650],
            (3, 65, 2 * 650),
        ),
        tolerance_case(
            "Outside a 34% scale-down tolerance",
            Tolerances::new(0.34, DEFAULT_TESTING_TOLERANCE),
            &[660, 640, 650],
            (2, 65, 2 * 650),
        ),
    ]);
    // Error cases.
    cases.extend([
        ResourceCase {
            name: "TestReplicaCalcDisjointResourcesMetrics",
            scenario: Scenario {
                current_replicas: 1,
                requests: vec!["1.0"],
                levels: levels(&[100]),
                pod_names: vec!["an-older-pod-name"],
                ..Default::default()
            },
            target_utilization: 100,
            tolerances: None,
            expected: Err("no metrics returned matched known pods"),
        },
        ResourceCase {
            name: "TestReplicaCalcEmptyMetrics",
            scenario: Scenario {
                current_replicas: 4,
                requests: cpu_requests(3, "1.0"),
                levels: vec![],
                ..Default::default()
            },
            target_utilization: 100,
            tolerances: None,
            expected: Err(
                "unable to get metrics for resource cpu: no metrics returned from resource metrics API",
            ),
        },
        ResourceCase {
            name: "TestReplicaCalcEmptyCPURequest",
            scenario: Scenario {
                current_replicas: 1,
                requests: vec![],
                levels: levels(&[200]),
                ..Default::default()
            },
            target_utilization: 100,
            tolerances: None,
            expected: Err("missing request for"),
        },
    ]);
    cases.extend(computed_tolerance_cases());
    cases
}

/// Upstream `TestReplicaCalcComputedToleranceAlgImplementation`, with its expectations computed
/// by upstream's own formulas.
fn computed_tolerance_cases() -> Vec<ResourceCase> {
    let start_pods: i32 = 10;
    let total_used_cpu_of_all_pods = i64::from(start_pods * 150);
    let total_requested_cpu_of_all_pods = (2 * total_used_cpu_of_all_pods) as i32;
    let requested_to_used =
        f64::from(total_requested_cpu_of_all_pods / total_used_cpu_of_all_pods as i32);
    let per_pod_requested = total_requested_cpu_of_all_pods / start_pods;

    let target = (1.0 / (requested_to_used * (1.0 - DEFAULT_TESTING_TOLERANCE))).abs() + 0.01;
    let final_cpu_percent_target = (target * 100.0) as i32;
    let resources_used_ratio =
        total_used_cpu_of_all_pods as f64 / (f64::from(total_requested_cpu_of_all_pods) * target);
    let final_pods = (resources_used_ratio * f64::from(start_pods)).ceil() as i32;

    let requests: Vec<&'static str> = [100, -100, 10, -10, 2, -2, 1, -1, 0, 0]
        .iter()
        .map(|d| &*Box::leak(format!("{}m", per_pod_requested + d).into_boxed_str()))
        .collect();
    let scenario = Scenario {
        current_replicas: start_pods,
        requests,
        levels: levels(&[total_used_cpu_of_all_pods / 10; 10]),
        ..Default::default()
    };
    let expected_utilization =
        (total_used_cpu_of_all_pods * 100) as i32 / total_requested_cpu_of_all_pods;
    let expected_value = 2 * total_used_cpu_of_all_pods / 10;

    let target2 = (1.0 / (requested_to_used * (1.0 - DEFAULT_TESTING_TOLERANCE))).abs() + 0.004;
    vec![
        ResourceCase {
            name: "TestReplicaCalcComputedToleranceAlgImplementation: scale",
            scenario: scenario.clone(),
            target_utilization: final_cpu_percent_target,
            tolerances: None,
            expected: Ok((final_pods, expected_utilization, expected_value)),
        },
        ResourceCase {
            name: "TestReplicaCalcComputedToleranceAlgImplementation: no scale",
            scenario,
            target_utilization: (target2 * 100.0) as i32,
            tolerances: None,
            expected: Ok((start_pods, expected_utilization, expected_value)),
        },
    ]
}

#[test]
fn resource_replicas_upstream_cases() {
    let failures: Vec<String> = resource_cases()
        .iter()
        .filter_map(|case| resource_mismatch(case, &run_resource_pure(case)))
        .collect();
    assert_no_failures(&failures);
}

/// Which calculator method a metric case exercises (upstream `metricType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MetricType {
    Object,
    ObjectPerPod,
    External,
    ExternalPerPod,
    Pods,
}

/// A metric (non-resource) case.
#[derive(Debug, Clone)]
pub(crate) struct MetricCase {
    pub name: &'static str,
    pub scenario: Scenario,
    pub metric_type: MetricType,
    /// `targetUsage` for Value / Pods cases, `perPodTargetUsage` for per-pod cases.
    pub target: i64,
    pub tolerances: Option<Tolerances>,
    /// (replicas, usage).
    pub expected: (i32, i64),
}

pub(crate) fn run_metric_pure(case: &MetricCase) -> Result<(i32, i64), CalculatorError> {
    let s = &case.scenario;
    let pods = s.pods();
    let tolerances = case.tolerances.unwrap_or_default();
    let ready = || ready_pods_count(&pods);
    let proposal = match case.metric_type {
        MetricType::Object => object_metric_replicas(
            s.current_replicas,
            case.target,
            s.metric_levels[0],
            tolerances,
            ready,
        )?,
        MetricType::ObjectPerPod => object_per_pod_metric_replicas(
            s.current_replicas,
            case.target,
            s.metric_levels[0],
            tolerances,
        ),
        MetricType::External => external_metric_replicas(
            s.current_replicas,
            case.target,
            &s.metric_levels,
            tolerances,
            ready,
        )?,
        MetricType::ExternalPerPod => external_per_pod_metric_replicas(
            s.current_replicas,
            case.target,
            &s.metric_levels,
            tolerances,
        ),
        MetricType::Pods => plain_metric_replicas(
            s.current_replicas,
            case.target,
            "",
            tolerances,
            PodSample {
                pods: &pods,
                metrics: s.pods_metrics(),
                now: now(),
            },
            &test_config(),
        )?,
    };
    Ok((proposal.replica_count, proposal.usage))
}

/// Every upstream test of Pods, Object and External metrics.
pub(crate) fn metric_cases() -> Vec<MetricCase> {
    use MetricType::*;
    let c =
        |name, current_replicas, metric_levels: &[i64], metric_type, target, expected| MetricCase {
            name,
            scenario: Scenario {
                current_replicas,
                metric_levels: metric_levels.to_vec(),
                ..Default::default()
            },
            metric_type,
            target,
            tolerances: None,
            expected,
        };
    let with = |mut case: MetricCase, f: &dyn Fn(&mut MetricCase)| {
        f(&mut case);
        case
    };
    let up_tol = Some(Tolerances::new(DEFAULT_TESTING_TOLERANCE, 0.01));
    vec![
        c(
            "TestReplicaCalcScaleUpOverflow",
            3,
            &[i64::MAX],
            Object,
            1,
            (i32::MAX, i64::MAX),
        ),
        c(
            "TestExternalPerPodMetricReplicaOverflow",
            1,
            &[i64::MAX],
            ExternalPerPod,
            1,
            (i32::MAX, i64::MAX),
        ),
        c(
            "TestExternalPerPodMetricUsageOverflow",
            1,
            &[i64::MAX],
            ExternalPerPod,
            i64::MAX,
            (1, i64::MAX),
        ),
        c(
            "TestReplicaCalcScaleUpCM",
            3,
            &[20000, 10000, 30000],
            Pods,
            15000,
            (4, 20000),
        ),
        with(
            c(
                "TestReplicaCalcScaleUpCMUnreadyHotCpuNoLessScale",
                3,
                &[50000, 10000, 30000],
                Pods,
                15000,
                (6, 30000),
            ),
            &|c| {
                c.scenario.readiness = vec![T, T, F];
                c.scenario.start = vec![Start::Cool, Start::Cool, Start::Hot];
            },
        ),
        with(
            c(
                "TestReplicaCalcScaleUpCMUnreadyHotCpuScaleWouldScaleDown",
                3,
                &[50000, 15000, 30000],
                Pods,
                15000,
                (7, 31666),
            ),
            &|c| {
                c.scenario.readiness = vec![F, T, F];
                c.scenario.start = vec![Start::Hot, Start::Cool, Start::Hot];
            },
        ),
        c(
            "TestReplicaCalcScaleUpCMObject",
            3,
            &[20000],
            Object,
            15000,
            (4, 20000),
        ),
        c(
            "TestReplicaCalcScaleUpCMPerPodObject",
            3,
            &[20000],
            ObjectPerPod,
            5000,
            (4, 6667),
        ),
        with(
            c(
                "TestReplicaCalcScaleUpCMObjectIgnoresUnreadyPods",
                3,
                &[50000],
                Object,
                10000,
                (5, 50000),
            ),
            &|c| c.scenario.readiness = vec![F, T, F],
        ),
        with(
            c(
                "TestReplicaCalcScaleUpCMExternalIgnoresUnreadyPods",
                3,
                &[8600],
                External,
                4400,
                (2, 8600),
            ),
            &|c| c.scenario.readiness = vec![F, T, F],
        ),
        c(
            "TestReplicaCalcScaleUpPerPodCMExternal",
            3,
            &[8600],
            ExternalPerPod,
            2150,
            (4, 2867),
        ),
        c(
            "TestReplicaCalcScaleDownCM",
            5,
            &[12000; 5],
            Pods,
            20000,
            (3, 12000),
        ),
        c(
            "TestReplicaCalcScaleDownPerPodCMObject",
            5,
            &[6000],
            ObjectPerPod,
            2000,
            (3, 1200),
        ),
        c(
            "TestReplicaCalcScaleDownCMObject",
            5,
            &[12000],
            Object,
            20000,
            (3, 12000),
        ),
        c(
            "TestReplicaCalcScaleDownCMExternal",
            5,
            &[8600],
            External,
            14334,
            (3, 8600),
        ),
        c(
            "TestReplicaCalcScaleDownPerPodCMExternal",
            5,
            &[8600],
            ExternalPerPod,
            2867,
            (3, 1720),
        ),
        c(
            "TestReplicaCalcToleranceCM",
            3,
            &[20000, 21000, 21000],
            Pods,
            20000,
            (3, 20666),
        ),
        c(
            "TestReplicaCalcToleranceCMObject",
            3,
            &[20666],
            Object,
            20000,
            (3, 20666),
        ),
        c(
            "TestReplicaCalcTolerancePerPodCMObject",
            4,
            &[20166],
            ObjectPerPod,
            5000,
            (4, 5042),
        ),
        c(
            "TestReplicaCalcToleranceCMExternal",
            3,
            &[8600],
            External,
            8888,
            (3, 8600),
        ),
        c(
            "TestReplicaCalcTolerancePerPodCMExternal",
            3,
            &[8600],
            ExternalPerPod,
            2900,
            (3, 2867),
        ),
        with(
            c(
                "TestReplicaCalcConfigurableToleranceCM",
                3,
                &[20000, 21000, 21000],
                Pods,
                20000,
                (4, 20666),
            ),
            &|c| c.tolerances = up_tol,
        ),
        with(
            c(
                "TestReplicaCalcConfigurableToleranceCMObject",
                3,
                &[20666],
                Object,
                20000,
                (4, 20666),
            ),
            &|c| c.tolerances = up_tol,
        ),
        with(
            c(
                "TestReplicaCalcConfigurableTolerancePerPodCMObject",
                4,
                &[20208],
                ObjectPerPod,
                5000,
                (5, 5052),
            ),
            &|c| c.tolerances = up_tol,
        ),
        with(
            c(
                "TestReplicaCalcConfigurableToleranceCMExternal",
                3,
                &[8900],
                External,
                8800,
                (4, 8900),
            ),
            &|c| c.tolerances = up_tol,
        ),
        with(
            c(
                "TestReplicaCalcConfigurableTolerancePerPodCMExternal",
                3,
                &[8600],
                ExternalPerPod,
                2800,
                (4, 2867),
            ),
            &|c| c.tolerances = up_tol,
        ),
        c(
            "TestPlainMetricReplicaCalcMissingMetricsNoChangeEq",
            5,
            &[20000, 19000, 21000],
            Pods,
            20000,
            (5, 20000),
        ),
        with(
            c(
                "TestReplicaCalcDuringRollingUpdateWithMaxSurgeCM",
                2,
                &[10000, 10000],
                Pods,
                17000,
                (2, 10000),
            ),
            &|c| c.scenario.phase = vec![RUNNING; 3],
        ),
        c(
            "TestReplicaCalcExternalMetricUsageOverflow",
            3,
            &[i64::MAX / 2 + 1, i64::MAX / 2 + 1],
            External,
            i64::MAX,
            (3, i64::MAX),
        ),
    ]
}

#[test]
fn metric_replicas_upstream_cases() {
    let failures: Vec<String> = metric_cases()
        .iter()
        .filter_map(|case| {
            let got = run_metric_pure(case).map_err(|e| e.to_string());
            (got != Ok(case.expected))
                .then(|| format!("{}: want {:?}, got {got:?}", case.name, case.expected))
        })
        .collect();
    assert_no_failures(&failures);
}

// ---------------------------------------------------------------------------------------------
// TestGroupPods

struct GroupCase {
    name: &'static str,
    pods: Vec<Pod>,
    metrics: PodMetricsInfo,
    resource: &'static str,
    expect_ready: usize,
    expect_unready: &'static [&'static str],
    expect_missing: &'static [&'static str],
    expect_ignored: &'static [&'static str],
}

fn group_pod(
    name: &str,
    phase: &str,
    start: Option<Timestamp>,
    ready: Option<(&str, Timestamp)>,
) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        spec: None,
        status: Some(PodStatus {
            phase: Some(phase.to_owned()),
            start_time: start.map(Time),
            conditions: ready.map(|(status, transition)| {
                vec![PodCondition {
                    type_: "Ready".to_owned(),
                    status: status.to_owned(),
                    last_transition_time: Some(Time(transition)),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        }),
    }
}

fn sample(value: i64, timestamp: Timestamp, window: Duration) -> PodMetric {
    PodMetric {
        timestamp,
        window,
        value,
    }
}

fn value_only(value: i64) -> PodMetric {
    sample(value, GO_ZERO_TIME, Duration::ZERO)
}

fn ago(d: SignedDuration) -> Timestamp {
    now() - d
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn group_pods_upstream_cases() {
    let mins = SignedDuration::from_mins;
    let secs = SignedDuration::from_secs;
    const SUCCEEDED: &str = "Succeeded";
    let cases = vec![
        GroupCase {
            name: "void",
            pods: vec![],
            metrics: PodMetricsInfo::new(),
            resource: "cpu",
            expect_ready: 0,
            expect_unready: &[],
            expect_missing: &[],
            expect_ignored: &[],
        },
        GroupCase {
            name: "count in a ready pod - memory",
            pods: vec![group_pod("bentham", SUCCEEDED, None, None)],
            metrics: HashMap::from([(
                "bentham".to_owned(),
                sample(1, now(), Duration::from_secs(60)),
            )]),
            resource: "memory",
            expect_ready: 1,
            expect_unready: &[],
            expect_missing: &[],
            expect_ignored: &[],
        },
        GroupCase {
            name: "unready a pod without ready condition - CPU",
            pods: vec![group_pod("lucretius", SUCCEEDED, Some(now()), None)],
            metrics: HashMap::from([("lucretius".to_owned(), value_only(1))]),
            resource: "cpu",
            expect_ready: 0,
            expect_unready: &["lucretius"],
            expect_missing: &[],
            expect_ignored: &[],
        },
        GroupCase {
            name: "count in a ready pod with fresh metrics during initialization period - CPU",
            pods: vec![group_pod(
                "bentham",
                SUCCEEDED,
                Some(ago(mins(1))),
                Some((T, ago(secs(30)))),
            )],
            metrics: HashMap::from([(
                "bentham".to_owned(),
                sample(1, now(), Duration::from_secs(30)),
            )]),
            resource: "cpu",
            expect_ready: 1,
            expect_unready: &[],
            expect_missing: &[],
            expect_ignored: &[],
        },
        GroupCase {
            name: "unready a ready pod without fresh metrics during initialization period - CPU",
            pods: vec![group_pod(
                "bentham",
                SUCCEEDED,
                Some(ago(mins(1))),
                Some((T, ago(secs(30)))),
            )],
            metrics: HashMap::from([(
                "bentham".to_owned(),
                sample(1, now(), Duration::from_secs(60)),
            )]),
            resource: "cpu",
            expect_ready: 0,
            expect_unready: &["bentham"],
            expect_missing: &[],
            expect_ignored: &[],
        },
        GroupCase {
            name: "unready an unready pod during initialization period - CPU",
            pods: vec![group_pod(
                "lucretius",
                SUCCEEDED,
                Some(ago(mins(10))),
                Some((F, ago(mins(9) + secs(54)))),
            )],
            metrics: HashMap::from([("lucretius".to_owned(), value_only(1))]),
            resource: "cpu",
            expect_ready: 0,
            expect_unready: &["lucretius"],
            expect_missing: &[],
            expect_ignored: &[],
        },
        GroupCase {
            name: "count in a ready pod without fresh metrics after initialization period - CPU",
            pods: vec![group_pod(
                "bentham",
                SUCCEEDED,
                Some(ago(mins(3))),
                Some((T, ago(mins(3)))),
            )],
            metrics: HashMap::from([(
                "bentham".to_owned(),
                sample(1, ago(mins(2)), Duration::from_secs(60)),
            )]),
            resource: "cpu",
            expect_ready: 1,
            expect_unready: &[],
            expect_missing: &[],
            expect_ignored: &[],
        },
        GroupCase {
            name: "count in an unready pod that was ready after initialization period - CPU",
            pods: vec![group_pod(
                "lucretius",
                SUCCEEDED,
                Some(ago(mins(10))),
                Some((F, ago(mins(9)))),
            )],
            metrics: HashMap::from([("lucretius".to_owned(), value_only(1))]),
            resource: "cpu",
            expect_ready: 1,
            expect_unready: &[],
            expect_missing: &[],
            expect_ignored: &[],
        },
        GroupCase {
            name: "unready pod that has never been ready after initialization period - CPU",
            pods: vec![group_pod(
                "lucretius",
                SUCCEEDED,
                Some(ago(mins(10))),
                Some((F, ago(mins(9) + secs(50)))),
            )],
            metrics: HashMap::from([("lucretius".to_owned(), value_only(1))]),
            resource: "cpu",
            // Upstream expects the pod to be counted in: start+10s equals the transition time,
            // which is not strictly after it.
            expect_ready: 1,
            expect_unready: &[],
            expect_missing: &[],
            expect_ignored: &[],
        },
        GroupCase {
            name: "a missing pod",
            pods: vec![group_pod("epicurus", SUCCEEDED, Some(ago(mins(3))), None)],
            metrics: PodMetricsInfo::new(),
            resource: "cpu",
            expect_ready: 0,
            expect_unready: &[],
            expect_missing: &["epicurus"],
            expect_ignored: &[],
        },
        GroupCase {
            name: "several pods",
            pods: vec![
                group_pod("lucretius", SUCCEEDED, Some(now()), None),
                group_pod(
                    "niccolo",
                    SUCCEEDED,
                    Some(ago(mins(3))),
                    Some((T, ago(mins(3)))),
                ),
                group_pod("epicurus", SUCCEEDED, Some(ago(mins(3))), None),
            ],
            metrics: HashMap::from([
                ("lucretius".to_owned(), value_only(1)),
                ("niccolo".to_owned(), value_only(1)),
            ]),
            resource: "cpu",
            expect_ready: 1,
            expect_unready: &["lucretius"],
            expect_missing: &["epicurus"],
            expect_ignored: &[],
        },
        GroupCase {
            name: "pending pods are unreadied",
            pods: vec![group_pod("unscheduled", PENDING, None, None)],
            metrics: PodMetricsInfo::new(),
            resource: "cpu",
            expect_ready: 0,
            expect_unready: &["unscheduled"],
            expect_missing: &[],
            expect_ignored: &[],
        },
        GroupCase {
            name: "ignore pods with deletion timestamps",
            pods: vec![{
                let mut p = group_pod("deleted", PENDING, None, None);
                p.metadata.deletion_timestamp = Some(Time(Timestamp::constant(1, 0)));
                p
            }],
            metrics: HashMap::from([("deleted".to_owned(), value_only(1))]),
            resource: "cpu",
            expect_ready: 0,
            expect_unready: &[],
            expect_missing: &[],
            expect_ignored: &["deleted"],
        },
        GroupCase {
            name: "ignore pods in a failed state",
            pods: vec![group_pod("failed", FAILED, None, None)],
            metrics: HashMap::from([("failed".to_owned(), value_only(1))]),
            resource: "cpu",
            expect_ready: 0,
            expect_unready: &[],
            expect_missing: &[],
            expect_ignored: &["failed"],
        },
    ];
    for case in cases {
        let got = group_pods(
            case.pods.iter(),
            &case.metrics,
            case.resource,
            &test_config().readiness,
            now(),
        );
        let want = PodGroups {
            ready_pod_count: case.expect_ready,
            unready_pods: set(case.expect_unready),
            missing_pods: set(case.expect_missing),
            ignored_pods: set(case.expect_ignored),
            reasons: got.reasons.clone(),
        };
        assert_eq!(want, got, "{}", case.name);
        // Every pod not counted as ready has its reason.
        let noted: BTreeSet<&String> = got.reasons.keys().collect();
        let grouped: BTreeSet<&String> = got
            .unready_pods
            .iter()
            .chain(&got.missing_pods)
            .chain(&got.ignored_pods)
            .collect();
        assert_eq!(noted, grouped, "{}", case.name);
    }
}

// ---------------------------------------------------------------------------------------------
// TestCalculateRequests and TestCalculatePodRequestsFromContainers_NonExistentContainer

fn requests_pod(
    pod_level: Option<&str>,
    containers: Vec<Container>,
    init_containers: Vec<Container>,
) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("test-pod".to_owned()),
            namespace: Some(TEST_NAMESPACE.to_owned()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            resources: pod_level.and_then(cpu),
            containers,
            init_containers: (!init_containers.is_empty()).then_some(init_containers),
            ..Default::default()
        }),
        status: None,
    }
}

#[test]
fn calculate_requests_upstream_cases() {
    let two = || {
        vec![
            container("container1", Some("100m")),
            container("container2", Some("50m")),
        ]
    };
    let first_missing = || {
        vec![
            container("container1", None),
            container("container2", Some("50m")),
        ]
    };
    let mut restartable = container("restartable-container1", Some("50m"));
    restartable.restart_policy = Some("Always".to_owned());
    type Expected = Result<HashMap<String, i64>, &'static str>;
    struct Case {
        name: &'static str,
        pods: Vec<Pod>,
        container: Option<&'static str>,
        pod_level_resources_enabled: bool,
        expected: Expected,
    }
    let ok = |v: i64| -> Expected { Ok(HashMap::from([("test-pod".to_owned(), v)])) };
    let cases = vec![
        Case {
            name: "void",
            pods: vec![],
            container: None,
            pod_level_resources_enabled: false,
            expected: Ok(HashMap::new()),
        },
        Case {
            name: "Sum container requests if pod-level feature is disabled",
            pods: vec![requests_pod(None, two(), vec![])],
            container: None,
            pod_level_resources_enabled: false,
            expected: ok(150),
        },
        Case {
            name: "Pod-level resources are enabled, but not set: fallback to sum container requests",
            pods: vec![requests_pod(None, two(), vec![])],
            container: None,
            pod_level_resources_enabled: true,
            expected: ok(150),
        },
        Case {
            name: "Pod-level resources override container requests when feature enabled and pod resources specified",
            pods: vec![requests_pod(Some("800m"), two(), vec![])],
            container: None,
            pod_level_resources_enabled: true,
            expected: ok(800),
        },
        Case {
            name: "Fail if at least one of the containers is missing requests and pod-level feature/requests are not set",
            pods: vec![requests_pod(None, first_missing(), vec![])],
            container: None,
            pod_level_resources_enabled: false,
            expected: Err("missing request for cpu in container container1 of Pod test-pod"),
        },
        Case {
            name: "Pod-level resources override missing container requests when feature enabled and pod resources specified",
            pods: vec![requests_pod(Some("800m"), first_missing(), vec![])],
            container: None,
            pod_level_resources_enabled: true,
            expected: ok(800),
        },
        Case {
            name: "Container: if a container name is specified, calculate requests only for that container",
            pods: vec![requests_pod(None, two(), vec![])],
            container: Some("container1"),
            pod_level_resources_enabled: false,
            expected: ok(100),
        },
        Case {
            name: "Container: if a container name is specified, calculate requests only for that container and ignore pod-level requests",
            pods: vec![requests_pod(Some("800m"), two(), vec![])],
            container: Some("container1"),
            pod_level_resources_enabled: true,
            expected: ok(100),
        },
        Case {
            name: "pod with restartable init containers",
            pods: vec![requests_pod(
                None,
                vec![container("container1", Some("100m"))],
                vec![container("init-container1", Some("20m")), restartable],
            )],
            container: None,
            pod_level_resources_enabled: false,
            expected: ok(150),
        },
    ];
    for c in cases {
        let name = c.name;
        let got = calculate_requests(
            c.pods.iter(),
            c.container,
            "cpu",
            c.pod_level_resources_enabled,
        );
        match (c.expected, got) {
            (Ok(want), Ok(got)) => assert_eq!(want, got, "{name}"),
            (Err(want), Err(got)) => assert_eq!(want, got.to_string(), "{name}"),
            (want, got) => panic!("{name}: want {want:?}, got {got:?}"),
        }
    }
}

#[test]
fn calculate_pod_requests_from_containers_non_existent_container() {
    let pod = requests_pod(None, vec![container("container1", Some("100m"))], vec![]);
    let err = calculate_pod_requests_from_containers(&pod, Some("non-existent-container"), "cpu")
        .expect_err("expected error for non-existent container");
    assert_eq!(
        "container non-existent-container not found in Pod test-pod",
        err.to_string()
    );
}
