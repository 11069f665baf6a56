//! The `/debug/hpa` and `/debug/shadow` endpoints: the controller's decision traces and shadow
//! comparisons as JSON (shape in `docs/decision-trace.md`).
//!
//! No upstream counterpart. The routes sit behind the same delegated authentication and
//! authorization as `/metrics` (a SubjectAccessReview on the non-resource path, e.g.
//! `get /debug/hpa/default/web`; `--authorization-always-allow-paths` applies as to any path).

use std::sync::{Arc, OnceLock};

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use hpa_horizontal::{
    DecisionTrace, HorizontalController, ShadowRecord, ShadowStore, TRACE_VERSION, TraceStore,
};
use http::StatusCode;
use serde::{Deserialize, Serialize};

/// Where the endpoints read from: set once the controller is built.
#[derive(Debug, Clone, Default)]
pub struct DebugStores {
    stores: Arc<OnceLock<Stores>>,
}

#[derive(Debug)]
struct Stores {
    traces: Arc<TraceStore>,
    shadow: Arc<ShadowStore>,
    shadow_mode: bool,
}

impl DebugStores {
    /// Nothing to serve yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Serve `controller`'s traces and comparisons (the first call wins).
    pub fn set(&self, controller: &HorizontalController) {
        let _ = self.stores.set(Stores {
            traces: controller.traces(),
            shadow: controller.shadow_comparisons(),
            shadow_mode: controller.is_shadow(),
        });
    }
}

/// `GET /debug/hpa`: a summary of the latest decision of every HPA (the traces themselves
/// are at `/debug/hpa/NAMESPACE/NAME`, so that the list stays small with many HPAs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TraceList {
    /// The trace format version (`hpa.trace/v1`).
    pub version: String,
    /// One entry per HPA, sorted by `namespace/name`.
    pub items: Vec<TraceListItem>,
}

/// One HPA in [`TraceList`]: its latest decision in brief.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TraceListItem {
    /// `namespace/name`.
    pub hpa: String,
    /// How many decisions are kept (at most 10).
    pub decisions: usize,
    /// When the latest decision was made.
    pub time: jiff::Timestamp,
    /// Its branch (`FromMetrics`, ...).
    pub branch: String,
    /// The target's replicas it read.
    pub current_replicas: i32,
    /// The desired replicas it wrote.
    pub desired_replicas: i32,
    /// The metric used, if any.
    pub winner: Option<String>,
    /// What bound the final count (`ScalingLimited` reason), if normalization ran.
    pub bound_by: Option<String>,
    /// The reconcile's error, if any.
    pub error: Option<String>,
}

/// `GET /debug/hpa/NAMESPACE/NAME`: the last decisions of one HPA, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HpaTraces {
    /// The trace format version.
    pub version: String,
    /// `namespace/name`.
    pub hpa: String,
    /// The decisions, oldest first; the last is the latest.
    pub decisions: Vec<DecisionTrace>,
}

/// `GET /debug/shadow`: every HPA's last comparison and differences.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShadowList {
    /// The trace format version.
    pub version: String,
    /// Whether this instance runs with `--shadow`.
    pub shadow: bool,
    /// One entry per HPA.
    pub items: Vec<ShadowItem>,
}

/// One HPA in [`ShadowList`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShadowItem {
    /// `namespace/name`.
    pub hpa: String,
    /// Its record.
    #[serde(flatten)]
    pub record: ShadowRecord,
}

fn not_found(message: String) -> Response {
    (
        StatusCode::NOT_FOUND,
        Json(serde_json::json!({ "version": TRACE_VERSION, "error": message })),
    )
        .into_response()
}

/// `GET /debug/hpa`.
pub async fn list(State(stores): State<DebugStores>) -> Response {
    let items = stores
        .stores
        .get()
        .map(|s| {
            s.traces
                .keys()
                .into_iter()
                .filter_map(|k| {
                    let traces = s.traces.get(&k);
                    let decisions = traces.len();
                    traces.into_iter().last().map(|latest| TraceListItem {
                        hpa: k,
                        decisions,
                        time: latest.time,
                        branch: latest.branch,
                        current_replicas: latest.target.spec_replicas,
                        desired_replicas: latest.desired_replicas,
                        winner: latest.winner.map(|w| w.name),
                        bound_by: latest.clamp.bound_by,
                        error: latest.error,
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    Json(TraceList {
        version: TRACE_VERSION.to_owned(),
        items,
    })
    .into_response()
}

/// `GET /debug/hpa/{namespace}/{name}`.
pub async fn one(
    State(stores): State<DebugStores>,
    Path((namespace, name)): Path<(String, String)>,
) -> Response {
    let key = format!("{namespace}/{name}");
    let decisions = stores
        .stores
        .get()
        .map(|s| s.traces.get(&key))
        .unwrap_or_default();
    if decisions.is_empty() {
        return not_found(format!(
            "no decision recorded for {key}: the HPA does not exist, has not been synced yet, or this instance is not the leader"
        ));
    }
    Json(HpaTraces {
        version: TRACE_VERSION.to_owned(),
        hpa: key,
        decisions,
    })
    .into_response()
}

/// `GET /debug/shadow`.
pub async fn shadow(State(stores): State<DebugStores>) -> Response {
    let (shadow, items) = stores
        .stores
        .get()
        .map(|s| {
            (
                s.shadow_mode,
                s.shadow
                    .all()
                    .into_iter()
                    .map(|(hpa, record)| ShadowItem { hpa, record })
                    .collect(),
            )
        })
        .unwrap_or_default();
    Json(ShadowList {
        version: TRACE_VERSION.to_owned(),
        shadow,
        items,
    })
    .into_response()
}
