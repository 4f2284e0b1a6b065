//! A stand-in Kubernetes apiserver for tests and benchmarks: in-process, over real loopback
//! HTTP, serving what the extender uses of `/api/v1`: nodes and pods list and watch
//! (streamed JSON lines with resourceVersions), get, JSON merge patch (with the
//! resourceVersion precondition) and `pods/{name}/binding` (409 when already bound). It
//! records every request it receives. No real apiserver runs in this project's tests.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use tokio::sync::broadcast;

/// A request the stand-in received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// HTTP method.
    pub method: String,
    /// Path.
    pub path: String,
    /// Query string.
    pub query: String,
    /// `Content-Type`.
    pub content_type: String,
    /// `Authorization`.
    pub authorization: String,
    /// JSON body (Null when none).
    pub body: Value,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Node,
    Pod,
}

#[derive(Debug)]
struct Ev {
    rv: u64,
    kind: Kind,
    line: Bytes,
}

#[derive(Default)]
struct World {
    rv: u64,
    nodes: BTreeMap<String, Value>,
    pods: BTreeMap<String, Value>,
    events: Vec<Arc<Ev>>,
    log: Vec<Recorded>,
}

/// The stand-in apiserver.
pub struct StandIn {
    world: Mutex<World>,
    tx: broadcast::Sender<Arc<Ev>>,
    token: Option<String>,
}

fn status(code: StatusCode, reason: &str, message: String) -> Response {
    (code, Json(json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code.as_u16(), "reason": reason, "message": message}))).into_response()
}

/// RFC 7386 JSON merge patch.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    if let Value::Object(p) = patch {
        if !target.is_object() {
            *target = json!({});
        }
        if let Value::Object(t) = target {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
    } else {
        *target = patch.clone();
    }
}

fn pod_key(v: &Value) -> String {
    let m = &v["metadata"];
    format!("{}/{}", m["namespace"].as_str().unwrap_or("default"), m["name"].as_str().unwrap_or(""))
}

impl StandIn {
    /// An empty apiserver; with `token`, every request must carry `Bearer token`.
    pub fn new(token: Option<String>) -> Arc<StandIn> {
        let (tx, _) = broadcast::channel(65_536);
        Arc::new(StandIn { world: Mutex::new(World::default()), tx, token })
    }

    fn world(&self) -> std::sync::MutexGuard<'_, World> {
        self.world.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn emit(&self, w: &mut World, kind: Kind, ty: &str, obj: &mut Value) {
        w.rv += 1;
        obj["metadata"]["resourceVersion"] = Value::String(w.rv.to_string());
        let mut line = serde_json::to_vec(&json!({"type": ty, "object": obj})).unwrap_or_default();
        line.push(b'\n');
        let ev = Arc::new(Ev { rv: w.rv, kind, line: Bytes::from(line) });
        w.events.push(ev.clone());
        let _ = self.tx.send(ev);
    }

    /// Adds or replaces a node.
    pub fn put_node(&self, mut node: Value) {
        let mut w = self.world();
        let name = node["metadata"]["name"].as_str().unwrap_or("").to_string();
        let ty = if w.nodes.contains_key(&name) { "MODIFIED" } else { "ADDED" };
        self.emit(&mut w, Kind::Node, ty, &mut node);
        w.nodes.insert(name, node);
    }

    /// Adds or replaces a pod.
    pub fn put_pod(&self, mut pod: Value) {
        let mut w = self.world();
        let key = pod_key(&pod);
        let ty = if w.pods.contains_key(&key) { "MODIFIED" } else { "ADDED" };
        self.emit(&mut w, Kind::Pod, ty, &mut pod);
        w.pods.insert(key, pod);
    }

    /// Changes a pod in place (e.g. its status) and emits MODIFIED.
    pub fn update_pod(&self, ns: &str, name: &str, f: impl FnOnce(&mut Value)) -> bool {
        let mut w = self.world();
        let key = format!("{ns}/{name}");
        let Some(mut p) = w.pods.remove(&key) else { return false };
        f(&mut p);
        self.emit(&mut w, Kind::Pod, "MODIFIED", &mut p);
        w.pods.insert(key, p);
        true
    }

    /// A pod as stored.
    pub fn pod(&self, ns: &str, name: &str) -> Option<Value> {
        self.world().pods.get(&format!("{ns}/{name}")).cloned()
    }

    /// A node as stored.
    pub fn node(&self, name: &str) -> Option<Value> {
        self.world().nodes.get(name).cloned()
    }

    /// Every pod.
    pub fn pods(&self) -> Vec<Value> {
        self.world().pods.values().cloned().collect()
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.world().log.clone()
    }

    /// The router.
    pub fn router(self: &Arc<Self>) -> Router {
        Router::new()
            .route("/api/v1/nodes", get(list_nodes))
            .route("/api/v1/pods", get(list_pods))
            .route("/api/v1/nodes/{name}", get(get_node).patch(patch_node))
            .route("/api/v1/namespaces/{ns}/pods/{name}", get(get_pod).patch(patch_pod))
            .route("/api/v1/namespaces/{ns}/pods/{name}/binding", post(bind))
            .layer(middleware::from_fn_with_state(self.clone(), record))
            .with_state(self.clone())
    }

    /// Serves on a fresh loopback port from a background thread; returns its base URL.
    pub fn start(self: &Arc<Self>) -> std::io::Result<String> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let me = self.clone();
        std::thread::Builder::new().name("standin-apiserver".into()).spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build();
            let Ok(rt) = rt else { return };
            rt.block_on(async move {
                let Ok(l) = tokio::net::TcpListener::from_std(listener) else { return };
                let _ = axum::serve(l, me.router()).await;
            });
        })?;
        Ok(format!("http://{addr}"))
    }
}

async fn record(State(s): State<Arc<StandIn>>, req: Request, next: Next) -> Response {
    let (parts, body) = req.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 64 * 1024 * 1024).await else {
        return status(StatusCode::BAD_REQUEST, "BadRequest", "unreadable body".into());
    };
    let header = |n: &str| parts.headers.get(n).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let authorization = header("authorization");
    let rec = Recorded {
        method: parts.method.to_string(),
        path: parts.uri.path().to_string(),
        query: parts.uri.query().unwrap_or("").to_string(),
        content_type: header("content-type"),
        authorization: authorization.clone(),
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    };
    s.world().log.push(rec);
    if let Some(t) = &s.token {
        if authorization != format!("Bearer {t}") {
            return status(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized".into());
        }
    }
    next.run(Request::from_parts(parts, Body::from(bytes))).await
}

async fn list_or_watch(s: Arc<StandIn>, kind: Kind, q: BTreeMap<String, String>) -> Response {
    let watch = q.get("watch").is_some_and(|w| w == "true" || w == "1");
    if !watch {
        let w = s.world();
        let (items, list_kind): (Vec<Value>, &str) = match kind {
            Kind::Node => (w.nodes.values().cloned().collect(), "NodeList"),
            Kind::Pod => (w.pods.values().cloned().collect(), "PodList"),
        };
        return Json(json!({"kind": list_kind, "apiVersion": "v1", "metadata": {"resourceVersion": w.rv.to_string()}, "items": items})).into_response();
    }
    let since: u64 = q.get("resourceVersion").and_then(|r| r.parse().ok()).unwrap_or(0);
    let rx = s.tx.subscribe();
    let history: Vec<Arc<Ev>> = s.world().events.iter().filter(|e| e.kind == kind && e.rv > since).cloned().collect();
    let last = history.last().map_or(since, |e| e.rv);
    let state = (history.into_iter(), rx, last);
    let stream = futures_util::stream::unfold(state, move |(mut hist, mut rx, last)| async move {
        if let Some(e) = hist.next() {
            return Some((Ok::<Bytes, Infallible>(e.line.clone()), (hist, rx, last)));
        }
        loop {
            match rx.recv().await {
                Ok(e) if e.kind == kind && e.rv > last => {
                    let rv = e.rv;
                    return Some((Ok(e.line.clone()), (hist, rx, rv)));
                }
                Ok(_) => continue,
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    let gone = json!({"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}});
                    let mut line = serde_json::to_vec(&gone).unwrap_or_default();
                    line.push(b'\n');
                    return Some((Ok(Bytes::from(line)), (hist, rx, u64::MAX)));
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    Response::builder()
        .header("content-type", "application/json")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

async fn list_nodes(State(s): State<Arc<StandIn>>, Query(q): Query<BTreeMap<String, String>>) -> Response {
    list_or_watch(s, Kind::Node, q).await
}

async fn list_pods(State(s): State<Arc<StandIn>>, Query(q): Query<BTreeMap<String, String>>) -> Response {
    list_or_watch(s, Kind::Pod, q).await
}

async fn get_node(State(s): State<Arc<StandIn>>, Path(name): Path<String>) -> Response {
    match s.node(&name) {
        Some(n) => Json(n).into_response(),
        None => status(StatusCode::NOT_FOUND, "NotFound", format!("nodes \"{name}\" not found")),
    }
}

async fn get_pod(State(s): State<Arc<StandIn>>, Path((ns, name)): Path<(String, String)>) -> Response {
    match s.pod(&ns, &name) {
        Some(p) => Json(p).into_response(),
        None => status(StatusCode::NOT_FOUND, "NotFound", format!("pods \"{name}\" not found")),
    }
}

fn precondition(current: &Value, patch: &mut Value) -> Result<(), Box<Response>> {
    let want = patch.get_mut("metadata").and_then(|m| m.as_object_mut()).and_then(|m| m.remove("resourceVersion"));
    match want {
        Some(Value::String(rv)) if current["metadata"]["resourceVersion"].as_str() != Some(rv.as_str()) => Err(Box::new(status(
            StatusCode::CONFLICT,
            "Conflict",
            "Operation cannot be fulfilled: the object has been modified; please apply your changes to the latest version and try again".into(),
        ))),
        _ => Ok(()),
    }
}

async fn patch_node(State(s): State<Arc<StandIn>>, Path(name): Path<String>, body: Bytes) -> Response {
    let Ok(mut patch) = serde_json::from_slice::<Value>(&body) else {
        return status(StatusCode::BAD_REQUEST, "BadRequest", "not JSON".into());
    };
    let mut w = s.world();
    let Some(mut n) = w.nodes.get(&name).cloned() else {
        return status(StatusCode::NOT_FOUND, "NotFound", format!("nodes \"{name}\" not found"));
    };
    if let Err(r) = precondition(&n, &mut patch) {
        return *r;
    }
    merge_patch(&mut n, &patch);
    s.emit(&mut w, Kind::Node, "MODIFIED", &mut n);
    w.nodes.insert(name, n.clone());
    Json(n).into_response()
}

async fn patch_pod(State(s): State<Arc<StandIn>>, Path((ns, name)): Path<(String, String)>, body: Bytes) -> Response {
    let Ok(mut patch) = serde_json::from_slice::<Value>(&body) else {
        return status(StatusCode::BAD_REQUEST, "BadRequest", "not JSON".into());
    };
    let key = format!("{ns}/{name}");
    let mut w = s.world();
    let Some(mut p) = w.pods.get(&key).cloned() else {
        return status(StatusCode::NOT_FOUND, "NotFound", format!("pods \"{name}\" not found"));
    };
    if let Err(r) = precondition(&p, &mut patch) {
        return *r;
    }
    merge_patch(&mut p, &patch);
    s.emit(&mut w, Kind::Pod, "MODIFIED", &mut p);
    w.pods.insert(key, p.clone());
    Json(p).into_response()
}

async fn bind(State(s): State<Arc<StandIn>>, Path((ns, name)): Path<(String, String)>, body: Bytes) -> Response {
    let Ok(b) = serde_json::from_slice::<Value>(&body) else {
        return status(StatusCode::BAD_REQUEST, "BadRequest", "not JSON".into());
    };
    let Some(target) = b["target"]["name"].as_str().filter(|t| !t.is_empty()) else {
        return status(StatusCode::BAD_REQUEST, "BadRequest", "binding without target.name".into());
    };
    let key = format!("{ns}/{name}");
    let mut w = s.world();
    let Some(mut p) = w.pods.get(&key).cloned() else {
        return status(StatusCode::NOT_FOUND, "NotFound", format!("pods \"{name}\" not found"));
    };
    if let Some(uid) = b["metadata"]["uid"].as_str() {
        if p["metadata"]["uid"].as_str() != Some(uid) {
            return status(StatusCode::CONFLICT, "Conflict", format!("pod {key}: UID precondition failed"));
        }
    }
    if let Some(n) = p["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
        return status(StatusCode::CONFLICT, "Conflict", format!("pod {name} is already assigned to node \"{n}\""));
    }
    if !w.nodes.contains_key(target) {
        return status(StatusCode::NOT_FOUND, "NotFound", format!("nodes \"{target}\" not found"));
    }
    p["spec"]["nodeName"] = Value::String(target.to_string());
    s.emit(&mut w, Kind::Pod, "MODIFIED", &mut p);
    w.pods.insert(key, p);
    (StatusCode::CREATED, Json(json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201})))
        .into_response()
}
