//! The bodies of the fuzz targets under `fuzz/` (run with `hack/fuzz.sh`, docs/fuzzing.md):
//! each takes arbitrary bytes, feeds them to one reader of outside input as production does,
//! and checks what must hold for every input. A panic is the finding; an `Err` is a correct
//! answer to bad input.
//!
//! The targets live here, in the workspace, so that `cargo test` replays every input the
//! fuzzer ever found (`crates/fuzz/regressions/TARGET/`) on the stable toolchain, and the
//! `fuzz/` package only wraps them for libFuzzer.
//!
//! | target | reader | upstream counterpart |
//! |---|---|---|
//! | `quantity` | [`hpa_quantity::Quantity`]'s parser and printer | `resource.ParseQuantity`, `Quantity.String` |
//! | `label_selector` | [`hpa_metrics::Selector`]'s parser and printer | `labels.Parse`, `Selector.String` |
//! | `go_duration` | [`hpa_config::GoDuration`]'s parser and printer | `time.ParseDuration`, `Duration.String` |
//! | `scenario` | the scenario loader ([`hpa_fixtures::scenario::load_str_with_limits`]) | none |
//! | `resource_metrics` | a `metrics.k8s.io` answer, decoded and read as `GetResourceMetric` does | `resourceMetricsClient` |
//! | `custom_metrics` | a `custom.metrics.k8s.io` answer, as `GetRawMetric` and `GetObjectMetric` | `customMetricsClient` |
//! | `external_metrics` | an `external.metrics.k8s.io` answer, as `GetExternalMetric` | `externalMetricsClient` |

use hpa_config::GoDuration;
use hpa_fixtures::scenario::{YamlLimits, load_str_with_limits};
use hpa_metrics::wire::{ExternalMetricValueList, MetricValueList, PodMetricsList};
use hpa_metrics::{
    Selector, check_custom_list, decode_answer, external_metric_result, object_metric_result,
    raw_metric_result, resource_metric_result,
};
use hpa_quantity::Quantity;

/// The names of the targets, as `fuzz/` and `hack/fuzz.sh` know them.
pub const TARGETS: &[&str] = &[
    "quantity",
    "label_selector",
    "go_duration",
    "scenario",
    "resource_metrics",
    "custom_metrics",
    "external_metrics",
];

/// Runs the target named `name` on `data`; `false` for an unknown name.
pub fn run(name: &str, data: &[u8]) -> bool {
    match name {
        "quantity" => quantity(data),
        "label_selector" => label_selector(data),
        "go_duration" => go_duration(data),
        "scenario" => scenario(data),
        "resource_metrics" => resource_metrics(data),
        "custom_metrics" => custom_metrics(data),
        "external_metrics" => external_metrics(data),
        _ => return false,
    }
    true
}

/// A quantity parses or is refused; its integer and float views are defined; below 10^18 in
/// magnitude it prints in canonical form, which parses back to an equal quantity printing the
/// same. (Beyond, Go's printer has no suffix for the exponent and drops it:
/// `ParseQuantity("1000E").String()` is `"1"` in apimachinery too, and so here.)
pub fn quantity(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(q) = text.parse::<Quantity>() else {
        return;
    };
    let _ = (q.milli_value(), q.value(), q.as_approximate_f64(), q.sign());
    assert_eq!(q.is_zero(), q.sign() == 0, "{text:?}");
    if q.as_approximate_f64().abs() >= 1e18 {
        return;
    }
    let printed = q.to_string();
    let again: Quantity = match printed.parse() {
        Ok(again) => again,
        Err(e) => panic!("{text:?} printed as {printed:?}, which does not parse: {e}"),
    };
    assert_eq!(again, q, "{text:?} printed as {printed:?}");
    assert_eq!(again.to_string(), printed, "{text:?}");
}

/// A label selector parses or is refused; a parsed one prints as text that parses back to a
/// selector printing the same, and matching labels is defined.
pub fn label_selector(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(selector) = text.parse::<Selector>() else {
        return;
    };
    let printed = selector.to_string();
    let again: Selector = match printed.parse() {
        Ok(again) => again,
        Err(e) => panic!("{text:?} printed as {printed:?}, which does not parse: {e}"),
    };
    assert_eq!(again.to_string(), printed, "{text:?}");
    let labels = selector
        .requirements()
        .iter()
        .filter_map(|r| Some((r.key().to_owned(), r.values().first()?.clone())))
        .collect();
    assert_eq!(
        selector.matches(&labels),
        again.matches(&labels),
        "{text:?} and its printed form {printed:?} match {labels:?} differently"
    );
}

/// A Go duration parses or is refused with Go's message; a parsed one prints as Go prints it,
/// which parses back to the same duration.
pub fn go_duration(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(d) = text.parse::<GoDuration>() else {
        return;
    };
    let printed = d.to_string();
    match printed.parse::<GoDuration>() {
        Ok(again) => assert_eq!(again, d, "{text:?} printed as {printed:?}"),
        Err(e) => panic!("{text:?} printed as {printed:?}, which does not parse: {e}"),
    }
    let _ = (d.as_secs_f64(), d.to_std());
}

/// Scenario text loads or is refused, as YAML under the loader's default limits and as JSON.
pub fn scenario(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = load_str_with_limits(text, "fuzz.yaml", YamlLimits::default());
    let _ = load_str_with_limits(text, "fuzz.json", YamlLimits::default());
}

/// The first byte of a metrics answer's input picks the HTTP status and content type; the rest
/// is the body.
fn answer(data: &[u8]) -> (u16, Option<&'static str>, &[u8]) {
    let Some((&head, body)) = data.split_first() else {
        return (200, Some("application/json"), data);
    };
    const STATUSES: [u16; 8] = [200, 200, 200, 200, 404, 500, 503, 403];
    const TYPES: [Option<&str>; 4] = [
        Some("application/json"),
        Some("text/plain; charset=utf-8"),
        None,
        Some("TEXT/PLAIN"),
    ];
    (
        STATUSES[usize::from(head & 7)],
        TYPES[usize::from((head >> 3) & 3)],
        body,
    )
}

/// A `metrics.k8s.io` answer, decoded and read per pod and per container.
pub fn resource_metrics(data: &[u8]) {
    let (status, content_type, body) = answer(data);
    let Ok(list) =
        decode_answer::<PodMetricsList>(status, content_type, body, "pods.metrics.k8s.io", "")
    else {
        return;
    };
    for container in [None, Some("app")] {
        for resource in ["cpu", "memory"] {
            if let Ok((metrics, _)) = resource_metric_result(&list.items, resource, container) {
                assert!(metrics.len() <= list.items.len());
            }
        }
    }
}

/// A `custom.metrics.k8s.io` answer, decoded and read as a Pods metric and as an Object metric.
pub fn custom_metrics(data: &[u8]) {
    let (status, content_type, body) = answer(data);
    let Ok(list) = decode_answer::<MetricValueList>(
        status,
        content_type,
        body,
        "pods.custom.metrics.k8s.io",
        "*",
    ) else {
        return;
    };
    if check_custom_list(&list, true).is_err() {
        return;
    }
    if let Ok((metrics, _)) = raw_metric_result(&list.items) {
        assert!(metrics.len() <= list.items.len());
    }
    let _ = object_metric_result(&list.items);
}

/// An `external.metrics.k8s.io` answer, decoded and read.
pub fn external_metrics(data: &[u8]) {
    let (status, content_type, body) = answer(data);
    let Ok(list) = decode_answer::<ExternalMetricValueList>(
        status,
        content_type,
        body,
        "queue_length.external.metrics.k8s.io",
        "",
    ) else {
        return;
    };
    if let Ok((values, _)) = external_metric_result(&list.items) {
        assert_eq!(values.len(), list.items.len());
    }
}
