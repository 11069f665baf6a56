//! `config/shadow.yaml`: the shadow controller's RBAC grants no write beyond its own Lease
//! (and the reviews that protect its endpoints), and no event write at all; its Deployment
//! runs with `--shadow` on its own Lease.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use serde_json::Value;

const SHADOW: &str = include_str!("../../../config/shadow.yaml");
const WRITE_VERBS: [&str; 6] = [
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
    "*",
];

fn documents() -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(SHADOW).unwrap()
}

#[test]
fn the_shadow_rbac_writes_only_its_lease() {
    let docs = documents();
    let mut rules = 0;
    for doc in docs
        .iter()
        .filter(|d| d["kind"] == "ClusterRole" || d["kind"] == "Role")
    {
        for rule in doc["rules"].as_array().unwrap() {
            rules += 1;
            let list = |k: &str| -> Vec<&str> {
                rule[k]
                    .as_array()
                    .map(|a| a.iter().map(|v| v.as_str().unwrap()).collect())
                    .unwrap_or_default()
            };
            let (groups, resources, verbs) = (list("apiGroups"), list("resources"), list("verbs"));
            assert!(!resources.contains(&"events"), "{rule}");
            assert!(
                !resources.contains(&"*") || groups.iter().all(|g| g.ends_with("metrics.k8s.io")),
                "{rule}"
            );
            let writes: Vec<&&str> = verbs.iter().filter(|v| WRITE_VERBS.contains(v)).collect();
            if writes.is_empty() {
                continue;
            }
            let allowed = match (groups.as_slice(), resources.as_slice()) {
                (["coordination.k8s.io"], ["leases"]) => {
                    doc["kind"] == "Role"
                        && (verbs == ["create"]
                            || list("resourceNames") == ["kube-hpa-controller-shadow"])
                }
                (["authentication.k8s.io"], ["tokenreviews"])
                | (["authorization.k8s.io"], ["subjectaccessreviews"]) => verbs == ["create"],
                _ => false,
            };
            assert!(allowed, "a write the shadow must not have: {rule}");
        }
    }
    assert!(rules >= 8, "only {rules} rules read");
}

#[test]
fn the_shadow_deployment_runs_shadow_on_its_own_lease() {
    let docs = documents();
    let deployment = docs.iter().find(|d| d["kind"] == "Deployment").unwrap();
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(args.contains(&"--shadow"), "{args:?}");
    assert!(
        args.contains(&"--leader-elect-resource-name=kube-hpa-controller-shadow"),
        "{args:?}"
    );
    // The flags parse as the binary parses them.
    let parsed = hpa_config::Options::parse_args(
        std::iter::once("kube-hpa-controller").chain(args.iter().copied()),
    )
    .unwrap();
    assert!(parsed.options.shadow.shadow);
    assert_eq!(
        deployment["spec"]["template"]["spec"]["serviceAccountName"],
        "kube-hpa-controller-shadow"
    );
}
