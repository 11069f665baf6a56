//! Logging set up from `--logging-format` and klog's `-v`.
//!
//! Mirrors component-base's `logs` options (`logs.ValidateAndApply`: the `text` and `json`
//! formats) and klog's verbosity: a message written at `V(n)` shows when `-v` ≥ n.
//!
//! klog levels map onto tracing levels as follows, and every `V(n)` message also carries the
//! field `v = n`:
//!
//! | klog            | tracing | used for (controller convention)          |
//! |-----------------|---------|-------------------------------------------|
//! | errors          | ERROR   | `klog.Error`, `utilruntime.HandleError`   |
//! | warnings        | WARN    | `klog.Warning`                            |
//! | V(0), V(1)      | INFO    | start-up, leadership, always-on messages  |
//! | V(2), V(3)      | DEBUG   | status writes, throttling waits (V(3))    |
//! | V(4) and above  | TRACE   | scaling decisions and per-sync detail     |
//!
//! The exact verbosity is kept too, so [`v!`](crate::v) at V(3) is silent with `-v=2` even
//! though both map to DEBUG. Write `v!(2, "msg")` or `v!(4, hpa = %key, "msg")`; guard costly
//! work with [`v_enabled`].
//!
//! Line formats follow klog / component-base:
//! - `text`: klog's header `Lmmdd hh:mm:ss.uuuuuu pid file:line] msg key="value" ...`
//!   (`I` for info, debug and trace, `W`, `E`), local time;
//! - `json`: component-base's JSON logger, one object per line:
//!   `{"ts":<unix seconds>,"caller":"dir/file.rs:line","msg":"...","v":<n>,...}` with the
//!   fields after it (`error` renamed `err`, as `klog.ErrorS` writes it); errors carry no
//!   `v`.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicI32, Ordering};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

static VERBOSITY: AtomicI32 = AtomicI32::new(0);

/// Why logging could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum LoggingError {
    /// `--logging-format` is neither `text` nor `json` (component-base's words).
    #[error(r#"format: Unsupported value: {0:?}: supported values: "json", "text""#)]
    Format(String),
    /// A global subscriber was already installed.
    #[error("logging already initialised: {0}")]
    AlreadySet(String),
}

/// The tracing level that `V(level)` messages are written at.
pub fn level_for(v: i32) -> tracing::Level {
    match v {
        i32::MIN..=1 => tracing::Level::INFO,
        2..=3 => tracing::Level::DEBUG,
        _ => tracing::Level::TRACE,
    }
}

/// Whether messages at `V(level)` are written (klog's `V(level).Enabled()`).
pub fn v_enabled(level: i32) -> bool {
    level <= VERBOSITY.load(Ordering::Relaxed)
}

/// The current `-v`.
pub fn verbosity() -> i32 {
    VERBOSITY.load(Ordering::Relaxed)
}

/// Sets `-v` without installing a subscriber (tests; [`init`] does it too).
pub fn set_verbosity(v: i32) {
    VERBOSITY.store(v, Ordering::Relaxed);
}

/// The filter for `-v`: this process's messages down to [`level_for`]`(v)`; the HTTP/TLS
/// libraries stay at INFO unless `-v` ≥ 6 (where client-go starts logging requests), and at
/// DEBUG below TRACE levels (`-v` ≥ 8 lets everything through).
///
/// Below `-v=6`, kube-client's per-request and per-watch lines are off, at every level:
/// its HTTP trace layer logs each 5xx answer as an error ("failed with status 503 Service
/// Unavailable"), its response decoding a warning with the whole body, its watch streams a
/// warning at each timeout or EOF, and kube-runtime's watcher a warning at each 403. client-go
/// writes none of these below V(6): it returns the error to its caller, which logs it as
/// upstream does ("Unhandled Error", "Failed to watch"), so a metrics API answering 503
/// wrote an error line per reconcile that kube-controller-manager does not. kube-client's TLS
/// and configuration warnings (a CA bundle that could not be reloaded, an insecure or
/// overridden server) stay.
pub fn filter_directives(v: i32) -> String {
    let level = level_for(v).to_string().to_lowercase();
    let libs = match v {
        i32::MIN..=5 => "info",
        6..=7 => "debug",
        _ => "trace",
    };
    let per_request = if v < 6 {
        ",kube_client::client=off,kube_client::client::tls=info,kube_runtime::watcher=off"
    } else {
        ""
    };
    format!(
        "{level},hyper={libs},hyper_util={libs},h2={libs},rustls={libs},tower={libs},tower_http={libs},kube_client={libs},kube_runtime={libs}{per_request}"
    )
}

/// Installs the global subscriber for `--logging-format` and `-v`, writing to stderr as klog
/// does.
pub fn init(opts: &hpa_config::options::LoggingFlags) -> Result<(), LoggingError> {
    let json = match opts.logging_format.as_str() {
        "text" => false,
        "json" => true,
        other => return Err(LoggingError::Format(other.to_string())),
    };
    set_verbosity(opts.verbosity);
    let filter = EnvFilter::new(filter_directives(opts.verbosity));
    let format = if json {
        KlogFormat::Json
    } else {
        KlogFormat::Text
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // klog never colours its lines; field names stay plain in a file or a terminal.
        .with_ansi(false)
        .event_format(format)
        .try_init()
        .map_err(|e| LoggingError::AlreadySet(e.to_string()))
}

/// The two line formats of `--logging-format`, as a `tracing-subscriber` event formatter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KlogFormat {
    /// klog's text lines.
    Text,
    /// component-base's JSON lines.
    Json,
}

/// An event's message and fields, in the order written.
#[derive(Default)]
struct Fields {
    msg: String,
    v: Option<i64>,
    rest: Vec<(String, serde_json::Value)>,
}

impl Fields {
    fn push(&mut self, field: &Field, value: serde_json::Value) {
        match (field.name(), &value) {
            ("message", serde_json::Value::String(m)) => self.msg = m.clone(),
            ("message", other) => self.msg = other.to_string(),
            ("v", serde_json::Value::Number(n)) if n.as_i64().is_some() => self.v = n.as_i64(),
            ("error", _) => self.rest.push(("err".to_string(), value)),
            // A field whose key is `message` cannot be written through tracing (`message` is
            // the line's own text): the event recorder writes the event's message as
            // `event_message`, shown as klog shows it, `message="..."`.
            ("event_message", _) => self.rest.push(("message".to_string(), value)),
            (name, _) => self.rest.push((name.to_string(), value)),
        }
    }
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.push(field, serde_json::Value::String(format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.push(field, serde_json::Value::String(value.to_string()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.push(field, value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.push(field, value.into());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.push(field, value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.push(field, value.into());
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.push(field, serde_json::Value::String(value.to_string()));
    }
}

/// The last `n` components of a source path, `/`-joined.
fn short_path(file: &str, n: usize) -> String {
    let parts: Vec<&str> = file.split(['/', '\\']).collect();
    parts[parts.len().saturating_sub(n)..].join("/")
}

impl KlogFormat {
    /// Formats one event as a line (without the newline), at time `now`.
    pub fn line(&self, event: &Event<'_>, now: &jiff::Zoned) -> String {
        let mut f = Fields::default();
        event.record(&mut f);
        self.line_of(event, f, now)
    }

    /// [`KlogFormat::line`] from the event's fields, already recorded.
    fn line_of(&self, event: &Event<'_>, f: Fields, now: &jiff::Zoned) -> String {
        let meta = event.metadata();
        let level = *meta.level();
        match self {
            KlogFormat::Json => {
                // Written by hand to keep component-base's key order: ts, caller, msg, v, ...
                let q = |v: &str| serde_json::Value::String(v.to_string()).to_string();
                let ts = now.timestamp().as_microsecond() as f64 / 1e6;
                let mut out = format!("{{\"ts\":{}", serde_json::Value::from(ts));
                if let (Some(file), Some(line)) = (meta.file(), meta.line()) {
                    let _ = write!(
                        out,
                        ",\"caller\":{}",
                        q(&format!("{}:{line}", short_path(file, 2)))
                    );
                }
                let _ = write!(out, ",\"msg\":{}", q(&f.msg));
                if level != Level::ERROR {
                    let _ = write!(out, ",\"v\":{}", f.v.unwrap_or(0));
                }
                for (k, v) in f.rest {
                    let _ = write!(out, ",{}:{v}", q(&k));
                }
                out.push('}');
                out
            }
            KlogFormat::Text => {
                let sev = match level {
                    Level::ERROR => 'E',
                    Level::WARN => 'W',
                    _ => 'I',
                };
                let mut out = format!(
                    "{sev}{} {:>7} {}:{}] {}",
                    now.strftime("%m%d %H:%M:%S%.6f"),
                    std::process::id(),
                    meta.file()
                        .map_or_else(|| meta.target().to_string(), |f| short_path(f, 1)),
                    meta.line().unwrap_or(0),
                    f.msg
                );
                for (k, v) in f.rest {
                    let _ = write!(out, " {k}={v}");
                }
                out
            }
        }
    }
}

impl<S, N> FormatEvent<S, N> for KlogFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        // A library's `V(n)` line carries `v = n` at the tracing level of n, and a level
        // spans two verbosities (DEBUG is V(2) and V(3)): the exact one decides, as klog's
        // `V(n).Enabled()` does.
        let mut f = Fields::default();
        event.record(&mut f);
        if f.v
            .is_some_and(|v| !v_enabled(i32::try_from(v).unwrap_or(i32::MAX)))
        {
            return Ok(());
        }
        writeln!(writer, "{}", self.line_of(event, f, &jiff::Zoned::now()))
    }
}

/// Logs at klog verbosity `V(n)`: written only when `-v` ≥ n, at the tracing level
/// [`level_for`]`(n)`, with the field `v = n`. Takes `tracing`'s field and message syntax
/// after the level: `v!(4, hpa = %key, "computed {} replicas", n)`.
#[macro_export]
macro_rules! v {
    ($lvl:expr, $($rest:tt)+) => {{
        let lvl: i32 = $lvl;
        if $crate::logging::v_enabled(lvl) {
            match $crate::logging::level_for(lvl) {
                ::tracing::Level::INFO => ::tracing::info!(v = lvl, $($rest)+),
                ::tracing::Level::DEBUG => ::tracing::debug!(v = lvl, $($rest)+),
                _ => ::tracing::trace!(v = lvl, $($rest)+),
            }
        }
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn klog_levels_map_to_tracing_levels() {
        assert_eq!(level_for(0), tracing::Level::INFO);
        assert_eq!(level_for(1), tracing::Level::INFO);
        assert_eq!(level_for(2), tracing::Level::DEBUG);
        assert_eq!(level_for(3), tracing::Level::DEBUG);
        assert_eq!(level_for(4), tracing::Level::TRACE);
        assert_eq!(level_for(10), tracing::Level::TRACE);
        assert!(filter_directives(0).starts_with("info,"));
        assert!(filter_directives(2).starts_with("debug,"));
        assert!(filter_directives(4).starts_with("trace,hyper=info"));
        assert!(filter_directives(6).contains("kube_client=debug"));
        for v in [0, 2, 4, 6, 9] {
            assert!(EnvFilter::try_new(filter_directives(v)).is_ok());
        }
    }

    /// The lines that kube-client and kube-runtime write per request or per watch show only
    /// from `-v=6`, where client-go logs requests; their TLS and configuration warnings, and
    /// this process's errors, at every `-v`.
    #[test]
    fn kube_clients_per_request_lines_show_from_v6_only() {
        use std::sync::{Arc, Mutex};
        let emitted = |v: i32| -> Vec<String> {
            let lines = Arc::new(Mutex::new(Vec::<u8>::new()));
            let sink = lines.clone();
            let subscriber = tracing_subscriber::fmt()
                .with_env_filter(EnvFilter::new(filter_directives(v)))
                .with_ansi(false)
                .with_writer(move || SharedVec(sink.clone()))
                .finish();
            tracing::subscriber::with_default(subscriber, || {
                tracing::error!(target: "kube_client::client::builder", "failed with status 503 Service Unavailable");
                tracing::warn!(target: "kube_client::client", "eof in poll");
                tracing::warn!(target: "kube_runtime::watcher", "watch list error with 403");
                tracing::warn!(target: "kube_client::client::tls", "failed to reload CA bundle; keeping stale roots");
                tracing::warn!(target: "kube_client::config", "overriding cluster URL");
                tracing::error!(target: "kube_hpa_controller::app", "Unhandled Error");
            });
            let text = String::from_utf8(lines.lock().unwrap().clone()).unwrap();
            text.lines().map(str::to_owned).collect()
        };
        for v in [0, 2, 4, 5] {
            let lines = emitted(v);
            let has = |m: &str| lines.iter().any(|l| l.contains(m));
            assert!(!has("failed with status"), "-v={v}: {lines:#?}");
            assert!(!has("eof in poll"), "-v={v}: {lines:#?}");
            assert!(!has("error with 403"), "-v={v}: {lines:#?}");
            assert!(has("failed to reload CA bundle"), "-v={v}: {lines:#?}");
            assert!(has("overriding cluster URL"), "-v={v}: {lines:#?}");
            assert!(has("Unhandled Error"), "-v={v}: {lines:#?}");
        }
        for v in [6, 8] {
            assert_eq!(emitted(v).len(), 6, "-v={v}");
        }
    }

    /// A `MakeWriter` target appending to a shared buffer.
    struct SharedVec(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for SharedVec {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn unsupported_format_is_refused_in_component_base_words() {
        let flags = hpa_config::options::LoggingFlags {
            logging_format: "xml".into(),
            verbosity: 0,
        };
        assert_eq!(
            init(&flags).unwrap_err().to_string(),
            r#"format: Unsupported value: "xml": supported values: "json", "text""#
        );
    }
}
