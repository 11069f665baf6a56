//! The Helm chart `charts/kube-hpa-controller`, the kustomize base `config/`, the Grafana
//! dashboard and the Prometheus rules: helm lint; the chart's default render is the kustomize
//! base's objects (and its shadow render config/shadow.yaml's); the values interface renders
//! as documented; every render is accepted by a real kube-apiserver (server-side dry run, the
//! monitoring kinds against the Prometheus Operator's own CRDs) and `helm install`/`helm
//! upgrade` switch between shadow and active mode; every metric the dashboard and the rules
//! name is one this controller exports (scraped from the binary against a real cluster) or
//! kube-state-metrics'/Prometheus' own; promtool accepts the rules and their unit tests pass.
//!
//! The ones that need helm (`hack/helm.sh build`) or upstream's binaries (`hack/kube.sh
//! build`) are ignored by a plain `cargo test`; `hack/test.sh` runs them with `--ignored`.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../../../hack/tests/real_cluster_common.rs"]
mod common;
#[path = "../../../hack/tests/free_ports.rs"]
mod free_ports;
#[path = "../../../hack/tests/sibling_binary.rs"]
mod sibling_binary;

use free_ports::free_ports;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use common::{cluster_up, eventually, helm_binary, kubectl, releases, repo, run_ok, runtime};
use hpa_cluster::process;
use serde_json::Value;

const CHART: &str = "charts/kube-hpa-controller";
const RULES: &str = "charts/kube-hpa-controller/rules/kube-hpa-controller.rules.yaml";
/// `promtool test rules`'s unit tests of RULES.
const RULES_TESTS: &str = "charts/kube-hpa-controller/rules/kube-hpa-controller.rules.test.yaml";
const DASHBOARD: &str = "charts/kube-hpa-controller/dashboards/kube-hpa-controller.json";

/// Every optional object on (with both controllers).
const EVERYTHING_ON: &str = "shadow.enabled=true,metrics.serviceMonitor.enabled=true,\
    metrics.podMonitor.enabled=true,metrics.podMonitor.bearerTokenSecret.name=prometheus-token,\
    prometheusRule.enabled=true,dashboard.enabled=true";

/// Series the dashboard and the rules read that this controller does not export: Prometheus'
/// own `up` and kube-state-metrics' HPA series.
const NOT_OURS: [&str; 6] = [
    "up",
    "kube_horizontalpodautoscaler_status_current_replicas",
    "kube_horizontalpodautoscaler_status_desired_replicas",
    "kube_horizontalpodautoscaler_spec_min_replicas",
    "kube_horizontalpodautoscaler_spec_max_replicas",
    "kube_horizontalpodautoscaler_status_condition",
];

/// One object of a render, by apiVersion, kind, namespace and name.
type Key = (String, String, String, String);

fn objects(yaml: &str) -> BTreeMap<Key, Value> {
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(yaml).unwrap_or_else(|e| panic!("not YAML: {e}\n{yaml}"));
    let mut out = BTreeMap::new();
    for doc in docs.into_iter().filter(|d| !d.is_null()) {
        let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
        let key = (
            s(&doc["apiVersion"]),
            s(&doc["kind"]),
            s(&doc["metadata"]["namespace"]),
            s(&doc["metadata"]["name"]),
        );
        assert!(
            out.insert(key.clone(), doc).is_none(),
            "{key:?} twice in the render"
        );
    }
    out
}

/// The objects that differ between two renders, as text for a failure message.
fn differences(left: &BTreeMap<Key, Value>, right: &BTreeMap<Key, Value>) -> String {
    let mut out = String::new();
    for key in left.keys().chain(right.keys()).collect::<BTreeSet<_>>() {
        match (left.get(key), right.get(key)) {
            (Some(l), Some(r)) if l == r => {}
            (l, r) => out.push_str(&format!(
                "{key:?}:\n  left:  {}\n  right: {}\n",
                l.map_or("(none)".into(), Value::to_string),
                r.map_or("(none)".into(), Value::to_string)
            )),
        }
    }
    out
}

/// helm with its caches and configuration in a directory of its own.
fn helm_output(args: &[&str]) -> Output {
    let home = std::env::temp_dir().join(format!("hpa-helm-home-{}", std::process::id()));
    Command::new(helm_binary())
        .args(args)
        .current_dir(repo())
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .output()
        .unwrap()
}

fn helm(args: &[&str]) -> String {
    let out = helm_output(args);
    assert!(
        out.status.success(),
        "helm {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `helm template kube-hpa-controller charts/kube-hpa-controller --namespace NAMESPACE` with `set`.
fn render(namespace: &str, set: &[&str]) -> String {
    let mut args = vec![
        "template",
        "kube-hpa-controller",
        CHART,
        "--namespace",
        namespace,
    ];
    for s in set {
        args.extend(["--set", s]);
    }
    helm(&args)
}

/// The kubectl of the first release under test, as `hack/kube.sh build` built it.
fn kubectl_binary() -> PathBuf {
    let release = releases()[0];
    hpa_cluster::KubeBinaries::locate(release)
        .unwrap_or_else(|e| panic!("kubectl {release}: {e} (run: hack/kube.sh build {release})"))
        .path("kubectl")
}

fn args_of(objects: &BTreeMap<Key, Value>, deployment: &str) -> Vec<String> {
    let (_, d) = objects
        .iter()
        .find(|(k, _)| k.1 == "Deployment" && k.3 == deployment)
        .unwrap_or_else(|| panic!("no Deployment {deployment} in {:?}", objects.keys()));
    d["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

fn names_of_kind(objects: &BTreeMap<Key, Value>, kind: &str) -> Vec<String> {
    objects
        .keys()
        .filter(|k| k.1 == kind)
        .map(|k| k.3.clone())
        .collect()
}

/// The metric names a PromQL expression (or a Grafana `label_values(METRIC, LABEL)` query)
/// reads: each identifier directly followed by `{` (the dashboard and the rules write every
/// selector with braces), and the first argument of `label_values(`.
fn metric_names(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let chars: Vec<char> = expr.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':')
            {
                i += 1;
            }
            // Not a label value or a legend placeholder: the identifier starts a token.
            let starts_token = start == 0 || !matches!(chars[start - 1], '"' | '$' | '.');
            let before: String = chars[..start].iter().collect();
            if starts_token && (chars.get(i) == Some(&'{') || before.ends_with("label_values(")) {
                names.push(chars[start..i].iter().collect());
            }
        } else {
            i += 1;
        }
    }
    names
}

/// Every PromQL expression of the dashboard: its panels' targets and its query variables.
fn dashboard_exprs(dashboard: &Value) -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                for (k, v) in map {
                    if k == "expr" {
                        out.push(v.as_str().expect("expr is a string").to_string());
                    } else {
                        walk(v, out);
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|i| walk(i, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], &mut out);
    for var in dashboard["templating"]["list"].as_array().unwrap() {
        if var["type"] == "query" {
            let q = &var["query"];
            out.push(q["query"].as_str().or(q.as_str()).unwrap().to_string());
        }
    }
    out
}

fn rules_exprs(rules: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for group in rules["groups"].as_array().unwrap() {
        for rule in group["rules"].as_array().unwrap() {
            out.push(rule["expr"].as_str().unwrap().to_string());
        }
    }
    out
}

/// Every metric name of the dashboard and the rules, with where it is read.
fn referenced_metrics() -> BTreeMap<String, String> {
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(repo().join(DASHBOARD)).unwrap())
            .expect("the dashboard is JSON");
    let rules: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(repo().join(RULES)).unwrap())
            .expect("the rules file is YAML");
    let mut out = BTreeMap::new();
    for (source, exprs) in [
        (DASHBOARD, dashboard_exprs(&dashboard)),
        (RULES, rules_exprs(&rules)),
    ] {
        assert!(
            exprs.len() >= 8,
            "only {} expressions in {source}",
            exprs.len()
        );
        for expr in exprs {
            let names = metric_names(&expr);
            assert!(!names.is_empty(), "{source}: no metric{{...}} in {expr:?}");
            for name in names {
                out.entry(name)
                    .or_insert_with(|| format!("{source}: {expr}"));
            }
        }
    }
    out
}

#[test]
fn the_charts_app_version_is_the_workspace_version() {
    let chart: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(repo().join(CHART).join("Chart.yaml")).unwrap(),
    )
    .unwrap();
    assert_eq!(chart["apiVersion"], "v2");
    // hpactl's version is the workspace's (version.workspace = true).
    assert_eq!(chart["appVersion"], env!("CARGO_PKG_VERSION"));
    // config/'s image is the chart's default image.
    for file in ["config/deployment.yaml", "config/shadow.yaml"] {
        let text = std::fs::read_to_string(repo().join(file)).unwrap();
        let image = format!("image: kube-hpa-controller:{}", env!("CARGO_PKG_VERSION"));
        assert!(text.contains(&image), "{file} has no {image}");
    }
}

#[test]
fn the_dashboard_and_the_rules_parse_and_name_their_metrics() {
    let names = referenced_metrics();
    // The panels the dashboard promises, by the series they read.
    for needle in [
        "horizontal_pod_autoscaler_controller_reconciliations_total",
        "horizontal_pod_autoscaler_controller_reconciliation_duration_seconds_bucket",
        "workqueue_depth",
        "workqueue_queue_duration_seconds_bucket",
        "workqueue_unfinished_work_seconds",
        "workqueue_longest_running_processor_seconds",
        "rest_client_requests_total",
        "rest_client_request_duration_seconds_bucket",
        "rest_client_rate_limiter_duration_seconds_bucket",
        "leader_election_master_status",
        "kube_hpa_controller_scale_target_cache_state",
        "horizontal_pod_autoscaler_controller_desired_replicas",
        "kube_horizontalpodautoscaler_status_current_replicas",
        "kube_hpa_controller_winning_metric",
        "kube_hpa_controller_metric_proposal_replicas",
        "kube_horizontalpodautoscaler_status_condition",
        "kube_hpa_controller_shadow_comparisons_total",
    ] {
        assert!(names.contains_key(needle), "{needle} not read: {names:?}");
    }
    assert_eq!(
        metric_names(r#"sum(rate(a_total{job=~"$job", x="y{"}[5m])) / b{c="d"} + c"#),
        ["a_total", "b"]
    );
    assert_eq!(metric_names("label_values(m_total, job)"), ["m_total"]);
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(repo().join(DASHBOARD)).unwrap()).unwrap();
    let vars: Vec<(&str, &str)> = dashboard["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["name"].as_str().unwrap(), v["type"].as_str().unwrap()))
        .collect();
    for want in [
        ("datasource", "datasource"),
        ("namespace", "query"),
        ("hpa", "query"),
    ] {
        assert!(vars.contains(&want), "variable {want:?} missing: {vars:?}");
    }
    assert_eq!(
        dashboard["templating"]["list"][0]["query"], "prometheus",
        "the datasource variable's type"
    );
}

/// Every alert of the rules file has a unit test in which it fires.
#[test]
fn every_alert_has_a_firing_unit_test() {
    let rules: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(repo().join(RULES)).unwrap()).unwrap();
    let alerts: BTreeSet<String> = rules["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .filter_map(|r| r["alert"].as_str().map(str::to_string))
        .collect();
    let tests: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(repo().join(RULES_TESTS)).unwrap())
            .unwrap();
    let firing: BTreeSet<String> = tests["tests"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| t["alert_rule_test"].as_array().unwrap())
        .filter(|a| a["exp_alerts"].as_array().is_some_and(|e| !e.is_empty()))
        .map(|a| a["alertname"].as_str().unwrap().to_string())
        .collect();
    assert!(alerts.len() >= 10, "{alerts:?}");
    let untested: Vec<_> = alerts.difference(&firing).collect();
    assert!(
        untested.is_empty(),
        "alerts without a firing test in {RULES_TESTS}: {untested:?}"
    );
    let unknown: Vec<_> = firing.difference(&alerts).collect();
    assert!(
        unknown.is_empty(),
        "{RULES_TESTS} tests alerts {RULES} lacks: {unknown:?}"
    );
}

/// promtool (Debian package `prometheus`) when it is on PATH: the rules are valid, and their
/// unit tests (each alert firing on the series this controller exports, and silent where it
/// must be) pass.
#[test]
fn promtool_accepts_the_rules() {
    let Some(promtool) = on_path("promtool") else {
        println!("SKIPPED: promtool check rules {RULES}: no promtool on PATH");
        return;
    };
    let rules = repo().join(RULES);
    let out = run_ok(
        &promtool,
        &["check", "rules", rules.to_str().unwrap()],
        None,
    );
    let count = referenced_rule_count();
    assert!(
        out.contains(&format!("SUCCESS: {count} rules found")),
        "promtool: {out}"
    );
    let tests = repo().join(RULES_TESTS);
    let out = Command::new(&promtool)
        .args(["test", "rules", tests.to_str().unwrap()])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && text.contains("SUCCESS"),
        "promtool test rules {RULES_TESTS}: {}\n{text}",
        out.status
    );
}

fn referenced_rule_count() -> usize {
    let rules: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(repo().join(RULES)).unwrap()).unwrap();
    rules_exprs(&rules).len()
}

#[test]
#[ignore = "real cluster: run by hack/test.sh after hack/kube.sh build"]
fn helm_lint_passes_with_the_defaults_and_everything_on() {
    for set in [None, Some(EVERYTHING_ON)] {
        let mut args = vec!["lint", CHART, "--strict"];
        if let Some(s) = set {
            args.extend(["--set", s]);
        }
        let out = helm(&args);
        assert!(out.contains("0 chart(s) failed"), "helm {args:?}: {out}");
        assert!(
            !out.contains("[ERROR]") && !out.contains("[WARNING]"),
            "{out}"
        );
    }
}

/// The chart's default render is `kubectl kustomize config/`, object for object; its shadow-only
/// render is config/shadow.yaml with the FlowSchema and the reader ClusterRoles.
#[test]
#[ignore = "real cluster: run by hack/test.sh after hack/kube.sh build"]
fn the_kustomize_base_and_the_charts_default_render_are_the_same_objects() {
    let config = repo().join("config");
    let kustomized = objects(&run_ok(
        &kubectl_binary(),
        &["kustomize", config.to_str().unwrap()],
        None,
    ));
    let chart = objects(&render("kube-system", &[]));
    assert_eq!(
        kustomized.keys().collect::<Vec<_>>(),
        chart.keys().collect::<Vec<_>>(),
        "kustomize (left) and helm (right) render other objects"
    );
    assert!(
        kustomized == chart,
        "kustomize (left) and helm (right) differ:\n{}",
        differences(&kustomized, &chart)
    );
    assert_eq!(kustomized.len(), 11, "{:?}", kustomized.keys());

    let mut shadow = objects(&std::fs::read_to_string(config.join("shadow.yaml")).unwrap());
    for (key, object) in &kustomized {
        if key.1 == "FlowSchema"
            || key.3 == "kube-hpa-controller-metrics-reader"
            || key.3 == "kube-hpa-controller-debug-reader"
        {
            shadow.insert(key.clone(), object.clone());
        }
    }
    let chart_shadow = objects(&render(
        "kube-system",
        &["controller.enabled=false", "shadow.enabled=true"],
    ));
    assert!(
        shadow == chart_shadow,
        "config/shadow.yaml with the FlowSchema and readers (left) and helm's shadow-only render (right) differ:\n{}",
        differences(&shadow, &chart_shadow)
    );
}

/// The values the README and the migration guide use render what they say.
#[test]
#[ignore = "real cluster: run by hack/test.sh after hack/kube.sh build"]
fn the_values_interface_renders_as_documented() {
    // flags: sorted --NAME=VALUE, null leaves a flag out, extraArgs last; the shadow takes the
    // same flags on its own Lease.
    let o = objects(&render(
        "kube-system",
        &[
            "flags.v=null",
            "flags.kube-api-qps=50",
            "flags.horizontal-pod-autoscaler-tolerance=0.05",
            "extraArgs={--metrics-batch-window=15s}",
            "shadow.enabled=true",
        ],
    ));
    assert_eq!(
        args_of(&o, "kube-hpa-controller"),
        [
            "--concurrent-horizontal-pod-autoscaler-syncs=5",
            "--horizontal-pod-autoscaler-sync-period=15s",
            "--horizontal-pod-autoscaler-tolerance=0.05",
            "--kube-api-qps=50",
            "--leader-elect=true",
            "--leader-elect-resource-name=kube-hpa-controller",
            "--leader-elect-resource-namespace=kube-system",
            "--secure-port=10257",
            "--metrics-batch-window=15s",
        ]
    );
    assert_eq!(
        args_of(&o, "kube-hpa-controller-shadow"),
        [
            "--shadow",
            "--concurrent-horizontal-pod-autoscaler-syncs=5",
            "--horizontal-pod-autoscaler-sync-period=15s",
            "--horizontal-pod-autoscaler-tolerance=0.05",
            "--kube-api-qps=50",
            "--leader-elect=true",
            "--leader-elect-resource-name=kube-hpa-controller-shadow",
            "--leader-elect-resource-namespace=kube-system",
            "--secure-port=10257",
        ]
    );

    // Shadow beside KCM, active, and the two together.
    let modes = [
        (
            "controller.enabled=false,shadow.enabled=true",
            vec!["kube-hpa-controller-shadow"],
        ),
        (
            "controller.enabled=true,shadow.enabled=false",
            vec!["kube-hpa-controller"],
        ),
        (
            "controller.enabled=true,shadow.enabled=true",
            vec!["kube-hpa-controller", "kube-hpa-controller-shadow"],
        ),
    ];
    for (set, deployments) in modes {
        let o = objects(&render("kube-system", &[set]));
        assert_eq!(names_of_kind(&o, "Deployment"), deployments, "{set}");
        let accounts = names_of_kind(&o, "ServiceAccount");
        assert_eq!(accounts, deployments, "{set}: ServiceAccounts");
        assert_eq!(
            names_of_kind(&o, "FlowSchema"),
            ["kube-hpa-controller"],
            "{set}"
        );
        let pdb = names_of_kind(&o, "PodDisruptionBudget");
        assert_eq!(
            pdb.len(),
            usize::from(deployments.contains(&"kube-hpa-controller"))
        );
    }
    assert!(objects(&render("kube-system", &["controller.enabled=false"])).is_empty());

    // Another namespace: the objects, the ServiceAccounts the bindings and the FlowSchema name,
    // and the Lease (an empty leader-elect-resource-namespace) all follow it.
    let o = objects(&render("autoscaling", &["shadow.enabled=true"]));
    for (key, object) in &o {
        if !key.2.is_empty() {
            assert_eq!(key.2, "autoscaling", "{key:?}");
        }
        for subject in object["subjects"].as_array().into_iter().flatten() {
            assert_eq!(subject["namespace"], "autoscaling", "{key:?}");
        }
    }
    assert!(
        args_of(&o, "kube-hpa-controller")
            .contains(&"--leader-elect-resource-namespace=autoscaling".into())
    );
    let flow = o.iter().find(|(k, _)| k.1 == "FlowSchema").unwrap().1;
    for s in flow["spec"]["rules"][0]["subjects"].as_array().unwrap() {
        assert_eq!(s["serviceAccount"]["namespace"], "autoscaling");
    }

    // The PrometheusRule: the rules file's groups by mode, its selectors replaced by the values'.
    let groups = |set: &[&str]| -> Vec<String> {
        let o = objects(&render("kube-system", set));
        let rule = o.iter().find(|(k, _)| k.1 == "PrometheusRule").unwrap().1;
        rule["spec"]["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        groups(&["prometheusRule.enabled=true"]),
        ["kube-hpa-controller", "kube-hpa-controller-hpas"]
    );
    assert_eq!(
        groups(&[
            "prometheusRule.enabled=true,controller.enabled=false,shadow.enabled=true,prometheusRule.hpaAlerts=false"
        ]),
        ["kube-hpa-controller-shadow"]
    );
    let out = helm(&[
        "template",
        "kube-hpa-controller",
        CHART,
        "--namespace",
        "kube-system",
        "--set",
        "prometheusRule.enabled=true,shadow.enabled=true",
        "--set-string",
        r#"prometheusRule.selectors.controller=job="hpa",prometheusRule.selectors.kubeStateMetrics=job="ksm""#,
        "--show-only",
        "templates/prometheusrule.yaml",
    ]);
    assert!(out.contains(r#"absent(up{job="hpa"} == 1)"#), "{out}");
    assert!(
        out.contains(r#"kube_horizontalpodautoscaler_spec_max_replicas{job="ksm"}"#),
        "{out}"
    );
    assert!(
        out.contains(r#"up{job=~"(.*/)?kube-hpa-controller-shadow"}"#),
        "{out}"
    );
    assert!(
        !out.contains("kube-hpa-controller(-metrics)?") && !out.contains("kube-state-metrics\""),
        "{out}"
    );

    // The dashboard ConfigMap holds the dashboard file as it is.
    let o = objects(&render("kube-system", &["dashboard.enabled=true"]));
    let cm = o.iter().find(|(k, _)| k.1 == "ConfigMap").unwrap().1;
    assert_eq!(cm["metadata"]["labels"]["grafana_dashboard"], "1");
    let file = std::fs::read_to_string(repo().join(DASHBOARD)).unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(cm["data"]["kube-hpa-controller.json"].as_str().unwrap())
            .unwrap(),
        serde_json::from_str::<Value>(&file).unwrap()
    );
}

/// The Prometheus Operator's own CustomResourceDefinitions of the kinds the chart renders
/// (ServiceMonitor, PodMonitor, PrometheusRule), from its Go module (`hack/monitoring-crds.sh`):
/// the API server validates the chart's objects against the operator's schemas, strictly
/// (`kubectl apply` refuses unknown fields).
fn monitoring_crds() -> String {
    let out = Command::new(repo().join("hack/monitoring-crds.sh"))
        .output()
        .expect("run hack/monitoring-crds.sh");
    assert!(
        out.status.success(),
        "hack/monitoring-crds.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    let mut yaml = String::new();
    for plural in ["servicemonitors", "podmonitors", "prometheusrules"] {
        let file = dir.join(format!("monitoring.coreos.com_{plural}.yaml"));
        yaml.push_str("---\n");
        yaml.push_str(&std::fs::read_to_string(&file).unwrap_or_else(|e| {
            panic!("{}: {e}", file.display());
        }));
        yaml.push('\n');
    }
    yaml
}

/// Every render is accepted by the real API server (server-side dry run: admission, schema
/// validation, RBAC escalation checks); then helm installs the chart shadow-only, upgrades it to
/// active and back, as the migration guide does.
#[test]
#[ignore = "real cluster: run by hack/test.sh after hack/kube.sh build"]
fn the_api_server_accepts_the_chart_and_helm_switches_shadow_and_active() {
    let rt = runtime();
    for release in releases() {
        rt.block_on(async {
            let c = cluster_up(release, "chart").await;
            kubectl(&c, &["create", "namespace", "autoscaling"], None);
            kubectl(&c, &["create", "-f", "-"], Some(&monitoring_crds()));
            kubectl(
                &c,
                &[
                    "wait",
                    "--for=condition=Established",
                    "--timeout=60s",
                    "crd/servicemonitors.monitoring.coreos.com",
                    "crd/podmonitors.monitoring.coreos.com",
                    "crd/prometheusrules.monitoring.coreos.com",
                ],
                None,
            );
            for namespace in ["kube-system", "autoscaling"] {
                for set in [vec![], vec![EVERYTHING_ON]] {
                    let yaml = render(namespace, &set);
                    let count = objects(&yaml).len();
                    let out = kubectl(&c, &["apply", "--dry-run=server", "-f", "-"], Some(&yaml));
                    let applied = out
                        .lines()
                        .filter(|l| l.contains("(server dry run)"))
                        .count();
                    assert_eq!(applied, count, "{namespace} {set:?}: {out}");
                    eprintln!("chart: {namespace} {set:?}: {count} objects accepted (dry run)");
                }
            }

            // helm owns what it installs: the cluster's bootstrap applied config/'s RBAC and
            // FlowSchema, which helm would refuse to adopt.
            let config = repo().join("config");
            kubectl(
                &c,
                &[
                    "delete",
                    "--ignore-not-found",
                    "-k",
                    config.to_str().unwrap(),
                ],
                None,
            );
            let kubeconfig = c.admin_kubeconfig();
            let kubeconfig = kubeconfig.to_str().unwrap();
            let deployments = || -> Vec<String> {
                kubectl(
                    &c,
                    &["-n", "kube-system", "get", "deployments", "-o", "name"],
                    None,
                )
                .lines()
                .map(str::to_owned)
                .collect()
            };
            let step = |verb: &str, active: bool, shadow: bool| {
                helm(&[
                    verb,
                    "kube-hpa-controller",
                    CHART,
                    "--namespace",
                    "kube-system",
                    "--kubeconfig",
                    kubeconfig,
                    "--set",
                    &format!("controller.enabled={active}"),
                    "--set",
                    &format!("shadow.enabled={shadow}"),
                ]);
            };
            step("install", false, true);
            assert_eq!(
                deployments(),
                ["deployment.apps/kube-hpa-controller-shadow"]
            );
            kubectl(&c, &["get", "flowschema", "kube-hpa-controller"], None);
            step("upgrade", true, false);
            assert_eq!(deployments(), ["deployment.apps/kube-hpa-controller"]);
            let accounts = kubectl(
                &c,
                &["-n", "kube-system", "get", "serviceaccounts", "-o", "name"],
                None,
            );
            assert!(
                accounts.contains("serviceaccount/kube-hpa-controller\n"),
                "{accounts}"
            );
            assert!(
                !accounts.contains("kube-hpa-controller-shadow"),
                "{accounts}"
            );
            step("upgrade", false, true);
            assert_eq!(
                deployments(),
                ["deployment.apps/kube-hpa-controller-shadow"]
            );
            helm(&[
                "uninstall",
                "kube-hpa-controller",
                "--namespace",
                "kube-system",
                "--kubeconfig",
                kubeconfig,
            ]);
            assert!(deployments().is_empty());
        });
    }
}

/// GET /metrics of a controller serving on 127.0.0.1:`port` (self-signed certificate, /metrics
/// in --authorization-always-allow-paths).
async fn scrape(port: u16) -> Result<String, String> {
    let mut config = kube::Config::new(format!("https://127.0.0.1:{port}").parse().unwrap());
    config.accept_invalid_certs = true;
    let client = kube::Client::try_from(config).map_err(|e| e.to_string())?;
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .map_err(|e| e.to_string())?;
    client
        .request_text(request)
        .await
        .map_err(|e| e.to_string())
}

/// The sample names of a Prometheus text exposition.
fn exported(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap().to_string())
        .collect()
}

/// Every metric the dashboard and the rules read is exported by this controller (active and
/// shadow, scraped from the binary against a real cluster with HPAs of every metric type) or is
/// one of NOT_OURS; the label values they select on are the controller's.
#[test]
#[ignore = "real cluster: run by hack/test.sh after hack/kube.sh build"]
fn every_metric_the_dashboard_and_rules_read_is_exported() {
    let referenced = referenced_metrics();
    let rt = runtime();
    let release = releases()[0];
    rt.block_on(async {
        let c = cluster_up(release, "chart-metrics").await;
        let s = hpa_fixtures::scenario::load_file(
            &repo().join("test-fixtures/real-cluster/all-targets-all-metrics.json"),
        )
        .unwrap();
        c.load(&s).await.unwrap();
        let binary = sibling_binary::sibling_binary(env!("CARGO_BIN_EXE_hpactl"), "kube-hpa-controller");
        let kubeconfig = format!("--kubeconfig={}", c.controller_kubeconfig().display());
        let ports = free_ports(3);
        let (active_port, shadow_port, sharded_port) = (ports[0], ports[1], ports[2]);
        // The third, a sharded shadow, exports the shard series (only --shards registers them);
        // it takes no shard: config/rbac.yaml does not grant the Lease `list` that --shards
        // needs (the chart does when shards > 1), and the series are there regardless.
        for (name, port, extra) in [
            ("controller", active_port, vec![]),
            ("shadow", shadow_port, vec!["--shadow"]),
            ("sharded", sharded_port, vec!["--shadow", "--shards=2"]),
        ] {
            let mut args = vec![
                kubeconfig.clone(),
                "--bind-address=127.0.0.1".into(),
                // Delegated authorization otherwise (to the controller's ServiceAccount's API).
                "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics".into(),
                format!("--secure-port={port}"),
                "--horizontal-pod-autoscaler-sync-period=2s".into(),
                "--v=2".into(),
            ];
            args.extend(extra.into_iter().map(str::to_owned));
            process::spawn(c.dir(), name, &binary, &args, &[]).unwrap();
        }
        // Both have decided, the shadow has compared and settled a status of the active one.
        let needles = [
            (active_port, r#"leader_election_master_status{name="kube-hpa-controller"} 1"#),
            (active_port, r#"workqueue_depth{name="horizontalpodautoscaler"}"#),
            (active_port, "kube_hpa_controller_winning_metric{"),
            (active_port, r#"horizontal_pod_autoscaler_controller_reconciliations_total{action="scale_up",error="none"}"#),
            (shadow_port, r#"leader_election_master_status{name="kube-hpa-controller-shadow"} 1"#),
            (shadow_port, "kube_hpa_controller_shadow_comparisons_total{"),
            (shadow_port, "kube_hpa_controller_shadow_statuses_total{"),
            (sharded_port, "kube_hpa_controller_shards 2"),
        ];
        let (scraped, texts) = eventually(
            Duration::from_secs(120),
            "both controllers' /metrics with what the dashboard reads",
            || async {
                let active = scrape(active_port).await?;
                let shadow = scrape(shadow_port).await?;
                let sharded = scrape(sharded_port).await?;
                for (port, needle) in needles {
                    let text = match port {
                        p if p == active_port => &active,
                        p if p == shadow_port => &shadow,
                        _ => &sharded,
                    };
                    if !text.contains(needle) {
                        return Err(format!("no {needle} on port {port}"));
                    }
                }
                Ok((
                    [&active, &shadow, &sharded]
                        .into_iter()
                        .flat_map(|t| exported(t))
                        .collect::<BTreeSet<_>>(),
                    format!("{active}\n{shadow}\n{sharded}"),
                ))
            },
        )
        .await;
        match on_path("prometheus") {
            None => eprintln!(
                "SKIPPED: the dashboard's queries and the rules on Prometheus: no prometheus on PATH"
            ),
            Some(prometheus) => {
                let jobs = [
                    ("kube-hpa-controller", active_port),
                    ("kube-hpa-controller-shadow", shadow_port),
                    // Matched by neither the rules' controller nor shadow selector.
                    ("kube-hpa-controller-sharded", sharded_port),
                ];
                dashboard_and_rules_on_prometheus(&prometheus, c.dir(), &jobs, &scraped, &texts)
                    .await;
            }
        }
        let missing: Vec<_> = referenced
            .iter()
            .filter(|(name, _)| !scraped.contains(*name) && !NOT_OURS.contains(&name.as_str()))
            .collect();
        assert!(
            missing.is_empty(),
            "read by the dashboard or the rules but not exported:\n{missing:#?}\nexported: {scraped:#?}"
        );
        eprintln!(
            "chart-metrics: {} metric names referenced, {} exported by the controller",
            referenced.len(),
            referenced.keys().filter(|n| scraped.contains(*n)).count()
        );
    });
}

/// An executable named `name` on PATH.
fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// GET `path_and_query` of Prometheus' HTTP API on 127.0.0.1:`port`; the body as JSON
/// (Prometheus answers a bad query with a JSON error body too).
fn prometheus_get(port: u16, path_and_query: &str) -> Result<Value, String> {
    use std::io::{Read, Write};
    let mut stream =
        std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .map_err(|e| e.to_string())?;
    write!(
        stream,
        "GET {path_and_query} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).map_err(|e| e.to_string())?;
    let answer = String::from_utf8_lossy(&answer);
    let (_, body) = answer
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no HTTP body: {answer}"))?;
    serde_json::from_str(body).map_err(|e| format!("{e}: {body}"))
}

/// A query string's value, percent-encoded.
fn url_encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// A dashboard expression as Grafana sends it: its variables at "All" (a value of the label
/// required, as Grafana's multi-value "All" is a list of the values seen), a 30 s rate
/// interval (four times the 1 s scrape interval, at least, as Grafana's `$__rate_interval`),
/// and `label_values(METRIC{...}, LABEL)` as the series query it is, counted by LABEL.
fn as_promql(expr: &str) -> String {
    let expr = expr
        .replace("$__rate_interval", "30s")
        .replace("$__range", "2m")
        .replace("$job", "kube-hpa-controller.*")
        .replace("$namespace", ".+")
        .replace("$hpa", ".+");
    match label_values(&expr) {
        Some((selector, label)) => format!("count by ({label}) ({selector})"),
        None => expr,
    }
}

/// `label_values(SELECTOR, LABEL)`'s selector and label (a Grafana variable query).
fn label_values(expr: &str) -> Option<(&str, &str)> {
    let (selector, label) = expr
        .strip_prefix("label_values(")?
        .strip_suffix(')')?
        .rsplit_once(',')?;
    Some((selector, label.trim()))
}

/// The labels of an expression's `by (...)` clauses that its result keeps (not `le`, which
/// `histogram_quantile` consumes).
fn by_labels(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = expr;
    while let Some(at) = rest.find("by (") {
        rest = &rest[at + 4..];
        if let Some(end) = rest.find(')') {
            for label in rest[..end].split(',') {
                let label = label.trim();
                if !label.is_empty() && label != "le" {
                    out.insert(label.to_string());
                }
            }
            rest = &rest[end..];
        }
    }
    out
}

/// Prometheus (Debian's `prometheus`, the server promtool ships with) scrapes the controllers
/// as the chart's ServiceMonitor does (HTTPS, every second) and loads the chart's rules; then
/// every rule evaluates without error, and every dashboard query (its variables at "All")
/// is valid PromQL and, where the controllers export its metric, returns series that carry
/// the labels its `by` clauses and legends group by: label names the metrics do not have
/// would leave panels empty or merged, which the metric-name check above cannot see.
async fn dashboard_and_rules_on_prometheus(
    prometheus: &std::path::Path,
    dir: &std::path::Path,
    jobs: &[(&str, u16)],
    exported: &BTreeSet<String>,
    texts: &str,
) {
    let port = free_ports(1)[0];
    let mut config = format!(
        "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\nrule_files: [{:?}]\nscrape_configs:\n",
        repo().join(RULES).display().to_string()
    );
    for (job, target) in jobs {
        config.push_str(&format!(
            "  - {{job_name: {job}, scheme: https, tls_config: {{insecure_skip_verify: true}}, static_configs: [{{targets: [\"127.0.0.1:{target}\"]}}]}}\n"
        ));
    }
    let config_file = dir.join("prometheus.yml");
    std::fs::write(&config_file, config).unwrap();
    process::spawn(
        dir,
        "prometheus",
        prometheus,
        &[
            format!("--config.file={}", config_file.display()),
            format!(
                "--storage.tsdb.path={}",
                dir.join("prometheus-data").display()
            ),
            format!("--web.listen-address=127.0.0.1:{port}"),
        ],
        &[],
    )
    .unwrap();
    // Every target up, and 40 s of samples: a 30 s rate window holds many.
    eventually(
        Duration::from_secs(60),
        "Prometheus scraping every controller",
        || async {
            let up = prometheus_get(
                port,
                &format!("/api/v1/query?query={}", url_encode("up == 1")),
            )?;
            let n = up["data"]["result"].as_array().map_or(0, Vec::len);
            if n == jobs.len() {
                Ok(())
            } else {
                Err(format!("{n} of {} targets up: {up}", jobs.len()))
            }
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(40)).await;

    let rules = prometheus_get(port, "/api/v1/rules").unwrap();
    let mut evaluated = 0;
    for group in rules["data"]["groups"].as_array().unwrap() {
        for rule in group["rules"].as_array().unwrap() {
            assert_eq!(
                rule["health"], "ok",
                "rule {} of group {}: {}",
                rule["name"], group["name"], rule["lastError"]
            );
            evaluated += 1;
        }
    }
    assert_eq!(evaluated, referenced_rule_count(), "{rules}");

    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(repo().join(DASHBOARD)).unwrap()).unwrap();
    let mut checked = 0;
    for expr in dashboard_exprs(&dashboard) {
        let query = as_promql(&expr);
        let answer =
            prometheus_get(port, &format!("/api/v1/query?query={}", url_encode(&query))).unwrap();
        assert_eq!(answer["status"], "success", "{query}: {answer}");
        let names = metric_names(&expr);
        let ours = names
            .iter()
            .all(|m| exported.contains(m) && !NOT_OURS.contains(&m.as_str()));
        if !ours {
            continue;
        }
        let series = answer["data"]["result"].as_array().unwrap();
        assert!(!series.is_empty(), "no series for {query}");
        let mut labels = by_labels(&query);
        if let Some((_, label)) = label_values(&expr) {
            labels.insert(label.to_string());
        }
        // Each label is on some series (Prometheus drops a label whose value is empty, such
        // as `reason` of an `agree`), or the metric exports it, empty.
        for label in &labels {
            let on_a_series = series
                .iter()
                .any(|s| s["metric"][label].as_str().is_some_and(|v| !v.is_empty()));
            let exported_empty = texts.lines().any(|l| {
                names.iter().any(|n| l.starts_with(&format!("{n}{{")))
                    && l.contains(&format!("{label}=\"\""))
            });
            assert!(
                on_a_series || exported_empty,
                "{query}: no series has the label {label}: {series:?}"
            );
        }
        checked += 1;
    }
    assert!(checked >= 25, "only {checked} dashboard queries checked");
    eprintln!(
        "chart-metrics: Prometheus evaluated {evaluated} rules without error and answered {checked} dashboard queries with series"
    );
}
