//! The extender's HTTP routes: `POST {prefix}/filter`, `{prefix}/prioritize`,
//! `{prefix}/bind`, and `GET {prefix}/healthz`, `{prefix}/metrics` (also at the root).
//!
//! Handlers are adapters: they decode the wire type, call the synchronous engine or binder,
//! and put failures inside the protocol reply (`Error`). A body that is not JSON gets a 400
//! with `{"Error": ..}`; a body with wrong types, or an unknown pod or node, gets a 200 with
//! `Error` set (kube-scheduler reports it). Nothing in a body can crash the server.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::bind::Binder;
use crate::decide::Engine;
use crate::wire::{ExtenderArgs, ExtenderBindingArgs, ExtenderBindingResult, ExtenderFilterResult, NodeList};

/// Everything a handler needs: cheap to clone.
#[derive(Clone)]
pub struct AppState {
    /// The decision engine.
    pub engine: Arc<Engine>,
    /// The binder (absent: `/bind` answers an error).
    pub binder: Option<Arc<Binder>>,
}

/// HTTP settings.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Route prefix, e.g. `/gpushare-scheduler` ("" for none).
    pub prefix: String,
    /// Largest body, bytes (full `Nodes` lists of big clusters are large).
    pub max_body_bytes: usize,
    /// Per-request time limit.
    pub request_timeout: Duration,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig { prefix: String::new(), max_body_bytes: 64 * 1024 * 1024, request_timeout: Duration::from_secs(30) }
    }
}

/// Normalises a prefix: leading `/`, no trailing `/`, "" for none.
pub fn normalise_prefix(p: &str) -> String {
    let t = p.trim().trim_matches('/');
    if t.is_empty() {
        String::new()
    } else {
        format!("/{t}")
    }
}

/// The router. Tests drive it without a socket.
pub fn app(state: AppState, cfg: &HttpConfig) -> Router {
    let p = normalise_prefix(&cfg.prefix);
    let mut r = Router::new()
        .route(&format!("{p}/filter"), post(filter))
        .route(&format!("{p}/prioritize"), post(prioritize))
        .route(&format!("{p}/bind"), post(bind))
        .route(&format!("{p}/healthz"), get(healthz))
        .route(&format!("{p}/metrics"), get(metrics));
    if !p.is_empty() {
        r = r.route("/healthz", get(healthz)).route("/metrics", get(metrics));
    }
    r.fallback(|| async { (StatusCode::NOT_FOUND, Json(json!({"Error": "no such route"}))) })
        .layer(DefaultBodyLimit::max(cfg.max_body_bytes))
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, cfg.request_timeout))
        .with_state(state)
}

fn parse(s: &AppState, body: &Bytes) -> Result<Value, Box<Response>> {
    serde_json::from_slice::<Value>(body).map_err(|e| {
        s.engine.metrics.bad_requests.fetch_add(1, Ordering::Relaxed);
        Box::new(
            (StatusCode::BAD_REQUEST, Json(json!({"Error": format!("request body is not JSON: {e}")}))).into_response(),
        )
    })
}

fn filter_error(s: &AppState, msg: String) -> Response {
    s.engine.metrics.bad_requests.fetch_add(1, Ordering::Relaxed);
    Json(ExtenderFilterResult { error: msg, ..Default::default() }).into_response()
}

async fn filter(State(s): State<AppState>, body: Bytes) -> Response {
    let v = match parse(&s, &body) {
        Ok(v) => v,
        Err(r) => return *r,
    };
    let args = match ExtenderArgs::from_value(&v) {
        Ok(a) => a,
        Err(e) => return filter_error(&s, e.to_string()),
    };
    let names = match args.candidate_names() {
        Ok(n) => n,
        Err(e) => return filter_error(&s, e.to_string()),
    };
    // About a millisecond of CPU for 1,000 nodes (docs/BENCHMARKS.md): run inline rather than
    // pay a thread hand-off per request.
    let out = s.engine.filter(&args.pod, &names);
    let some = |m: std::collections::BTreeMap<String, String>| if m.is_empty() { None } else { Some(m) };
    let (failed, unresolvable) = (some(out.failed), some(out.unresolvable));
    let mut reply = ExtenderFilterResult {
        failed_nodes: failed,
        failed_and_unresolvable_nodes: unresolvable,
        ..Default::default()
    };
    // The kept nodes as the request gave its candidates: names, or whole Node objects.
    if args.node_names.is_some() || args.nodes.is_none() {
        reply.node_names = Some(out.keep);
    } else {
        let keep: std::collections::HashSet<&String> = out.keep.iter().collect();
        let items = args.nodes.unwrap_or_default();
        let names = ExtenderArgs { pod: Default::default(), nodes: Some(items.clone()), node_names: None }
            .candidate_names()
            .unwrap_or_default();
        let items = items.into_iter().zip(names).filter(|(_, n)| keep.contains(n)).map(|(v, _)| v).collect();
        reply.nodes = Some(NodeList { items });
    }
    Json(reply).into_response()
}

async fn prioritize(State(s): State<AppState>, body: Bytes) -> Response {
    let v = match parse(&s, &body) {
        Ok(v) => v,
        Err(r) => return *r,
    };
    let bad = |msg: String| {
        s.engine.metrics.bad_requests.fetch_add(1, Ordering::Relaxed);
        (StatusCode::BAD_REQUEST, Json(json!({"Error": msg}))).into_response()
    };
    let args = match ExtenderArgs::from_value(&v) {
        Ok(a) => a,
        Err(e) => return bad(e.to_string()),
    };
    let names = match args.candidate_names() {
        Ok(n) => n,
        Err(e) => return bad(e.to_string()),
    };
    match s.engine.prioritize(&args.pod, &names) {
        Ok(list) => Json(list).into_response(),
        Err(e) => bad(format!("pod {}: {e}", args.pod.key())),
    }
}

async fn bind(State(s): State<AppState>, body: Bytes) -> Response {
    let v = match parse(&s, &body) {
        Ok(v) => v,
        Err(r) => return *r,
    };
    let fail = |msg: String| {
        s.engine.metrics.bind_failed.fetch_add(1, Ordering::Relaxed);
        Json(ExtenderBindingResult { error: msg }).into_response()
    };
    let args = match ExtenderBindingArgs::from_value(&v) {
        Ok(a) => a,
        Err(e) => return fail(e.to_string()),
    };
    let Some(binder) = s.binder.clone() else { return fail("this extender has no apiserver to bind with".into()) };
    match tokio::task::spawn_blocking(move || binder.bind(&args)).await {
        Ok(Ok(())) => {
            s.engine.metrics.bind_ok.fetch_add(1, Ordering::Relaxed);
            Json(ExtenderBindingResult::default()).into_response()
        }
        Ok(Err(e)) => fail(e.to_string()),
        Err(_) => fail("internal error".into()),
    }
}

async fn healthz(State(s): State<AppState>) -> Json<Value> {
    Json(json!({"status": "ok", "synced": s.engine.cluster.synced(), "policy": s.engine.policy.name()}))
}

async fn metrics(State(s): State<AppState>) -> Response {
    let m = &s.engine.metrics;
    let c = &s.engine.cluster;
    let mut out = String::new();
    let mut line = |name: &str, help: &str, kind: &str, v: f64| {
        out.push_str(&format!(
            "# HELP dqngpu_k8s_{name} {help}\n# TYPE dqngpu_k8s_{name} {kind}\ndqngpu_k8s_{name} {v}\n"
        ));
    };
    let get = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed) as f64;
    line("filter_requests_total", "Filter requests answered.", "counter", get(&m.filter));
    line("prioritize_requests_total", "Prioritize requests answered.", "counter", get(&m.prioritize));
    line("binds_total", "Binds that succeeded.", "counter", get(&m.bind_ok));
    line("bind_failures_total", "Binds that failed.", "counter", get(&m.bind_failed));
    line("bad_requests_total", "Requests whose body was not understood.", "counter", get(&m.bad_requests));
    line(
        "unknown_app_pods_total",
        "Pods of apps without a profile bound, placed by declared memory.",
        "counter",
        get(&m.unknown_app),
    );
    line(
        "policy_fallbacks_total",
        "Binds whose GPU the policy declined or got wrong.",
        "counter",
        get(&m.policy_fallback),
    );
    line("oom_kills_total", "OOM-killed containers seen.", "counter", get(&m.oom_kills));
    line("failed_containers_total", "Failed containers seen (not OOM).", "counter", get(&m.failed_containers));
    line("finished_pods_total", "Finished pods whose runtime was recorded.", "counter", get(&m.finished));
    line("conflicts_total", "Conflicts the apiserver reported.", "counter", get(&m.conflicts));
    line("assumed_pods", "Pods bound and not yet seen by the watch.", "gauge", c.assumed_count() as f64);
    line("gpu_pods", "GPU pods in the cache.", "gauge", c.pod_count() as f64);
    line("synced", "1 once nodes and pods are listed.", "gauge", if c.synced() { 1.0 } else { 0.0 });
    ([("content-type", "text/plain; version=0.0.4")], out).into_response()
}
