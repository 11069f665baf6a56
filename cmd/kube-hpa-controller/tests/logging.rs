//! klog-style verbosity: `v!(n, ...)` is written only when `-v` ≥ n, at the documented
//! tracing level and with the field `v = n`; `init` installs the global subscriber once.
//! (One test function: the verbosity is process-wide.)

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use common::Capture;

use kube_hpa_controller::logging::{self, KlogFormat, LoggingError, set_verbosity, v_enabled};
use kube_hpa_controller::v;

fn captured(verbosity: i32, f: impl FnOnce()) -> String {
    captured_as(None, verbosity, f)
}

fn captured_as(format: Option<KlogFormat>, verbosity: i32, f: impl FnOnce()) -> String {
    set_verbosity(verbosity);
    let cap = Capture::default();
    let writer = cap.clone();
    let builder = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone());
    let subscriber: Box<dyn tracing::Subscriber + Send + Sync> = match format {
        Some(k) => Box::new(builder.event_format(k).finish()),
        None => Box::new(builder.finish()),
    };
    tracing::subscriber::with_default(subscriber, f);
    cap.text()
}

#[test]
fn verbosity_gates_and_maps_levels_and_init_installs_once() {
    let out = captured(2, || {
        v!(0, "always");
        v!(2, hpa = "ns/name", "status written");
        v!(3, "too detailed");
        v!(4, "decision");
    });
    assert!(
        out.contains(" INFO ") && out.contains("always") && out.contains("v=0"),
        "{out}"
    );
    assert!(
        out.contains(" DEBUG ") && out.contains("status written"),
        "{out}"
    );
    assert!(
        out.contains("v=2") && out.contains("hpa=\"ns/name\""),
        "{out}"
    );
    assert!(!out.contains("too detailed"), "{out}");
    assert!(!out.contains("decision"), "{out}");
    assert!(v_enabled(2) && !v_enabled(3));

    let out = captured(4, || v!(4, replicas = 3, "decision"));
    assert!(
        out.contains(" TRACE ") && out.contains("decision") && out.contains("v=4"),
        "{out}"
    );

    // component-base JSON lines.
    let out = captured_as(Some(KlogFormat::Json), 4, || {
        v!(4, hpa = "ns/a", replicas = 3_i64, "decision");
        tracing::error!(error = "boom", "failed to sync");
    });
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{out}");
    // component-base's key order: ts, caller, msg, v, then the fields.
    let first = out.lines().next().unwrap();
    let pos = |k: &str| first.find(&format!("\"{k}\":")).unwrap();
    assert!(first.starts_with("{\"ts\":"), "{first}");
    assert!(pos("caller") < pos("msg") && pos("msg") < pos("v") && pos("v") < pos("hpa"));
    assert!(lines[0]["ts"].as_f64().unwrap() > 1.6e9);
    assert!(
        lines[0]["caller"]
            .as_str()
            .unwrap()
            .starts_with("tests/logging.rs:"),
        "{out}"
    );
    assert_eq!(lines[0]["msg"], "decision");
    assert_eq!(lines[0]["v"], 4);
    assert_eq!(lines[0]["hpa"], "ns/a");
    assert_eq!(lines[0]["replicas"], 3);
    assert_eq!(lines[1]["msg"], "failed to sync");
    assert_eq!(lines[1]["err"], "boom");
    assert!(lines[1].get("v").is_none(), "{out}");

    // klog text lines: `Immdd hh:mm:ss.uuuuuu pid file:line] msg key="value"`.
    let out = captured_as(Some(KlogFormat::Text), 2, || {
        v!(2, hpa = "ns/a", "status written");
        tracing::warn!("careful");
    });
    let mut lines = out.lines();
    let first = lines.next().unwrap();
    let re_ok = first.len() > 30
        && first.starts_with('I')
        && first[1..5].chars().all(|c| c.is_ascii_digit())
        && first.as_bytes()[5] == b' '
        && first[6..21].chars().filter(|c| *c == ':').count() == 2
        && first.as_bytes()[14] == b'.';
    assert!(re_ok, "{first}");
    assert!(
        first.contains(&format!(" {} logging.rs:", std::process::id())),
        "{first}"
    );
    assert!(first.ends_with("] status written hpa=\"ns/a\""), "{first}");
    assert!(lines.next().unwrap().starts_with('W'), "{out}");

    let flags = |format: &str, v: i32| hpa_config::options::LoggingFlags {
        logging_format: format.into(),
        verbosity: v,
    };
    logging::init(&flags("json", 3)).unwrap();
    assert_eq!(logging::verbosity(), 3);
    assert!(matches!(
        logging::init(&flags("text", 0)),
        Err(LoggingError::AlreadySet(_))
    ));
}
