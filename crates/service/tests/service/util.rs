//! Shared helpers: a service on a temporary data dir, and one `call` for every request.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use serde_json::Value;
use tower::ServiceExt;

use dqngpu_model::ClusterSpec;
use dqngpu_service::{HttpConfig, Service, ServiceConfig, Supervisor};

/// A running in-process service.
pub struct TestService {
    pub service: Service,
    pub router: Router,
    pub dir: tempfile::TempDir,
}

pub fn config(dir: PathBuf, gpus: &str) -> ServiceConfig {
    let gpus = ClusterSpec::parse_gpus(gpus).unwrap().gpus();
    let mut cfg = ServiceConfig::new(dir, gpus, Supervisor::Direct);
    cfg.tick = Duration::from_millis(20);
    cfg.adopt_poll = Duration::from_millis(20);
    cfg.max_retries = 1;
    cfg
}

pub fn start_with(cfg: ServiceConfig, policy: &str, token: Option<&str>) -> (Service, Router) {
    let policy: Arc<dyn dqngpu_model::Policy> = Arc::from(dqngpu_policy::by_name(policy, 7).unwrap());
    let service = Service::start(cfg, policy, None).unwrap();
    let http = HttpConfig { token: token.map(str::to_string), ..HttpConfig::default() };
    let router = service.router(&http);
    (service, router)
}

pub fn start(gpus: &str, policy: &str) -> TestService {
    let dir = tempfile::tempdir().unwrap();
    let (service, router) = start_with(config(dir.path().join("data"), gpus), policy, None);
    TestService { service, router, dir }
}

/// Sends one request; returns the status and the body parsed as JSON (or a JSON string).
pub async fn call(
    router: &Router,
    method: &str,
    uri: &str,
    body: Option<&str>,
    headers: &[(&str, &str)],
) -> (StatusCode, Value) {
    let mut b = Request::builder().method(method).uri(uri);
    if body.is_some() {
        b = b.header("content-type", "application/json");
    }
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let req = b.body(body.map(|s| Body::from(s.to_string())).unwrap_or_else(Body::empty)).unwrap();
    let resp = router.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX).await.unwrap();
    let v = serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()));
    (status, v)
}

/// Submits a job; returns its id.
pub async fn submit(router: &Router, app: &str, argv: &[&str]) -> u64 {
    submit_with(router, app, argv, &[]).await
}

/// Submits a job with these headers; returns its id.
pub async fn submit_with(router: &Router, app: &str, argv: &[&str], headers: &[(&str, &str)]) -> u64 {
    let body = serde_json::json!({ "app": app, "command": argv }).to_string();
    let (s, v) = call(router, "POST", "/v1/jobs", Some(&body), headers).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    v["id"].as_u64().unwrap()
}

/// Polls a job until its state is final (bounded, so a bug fails instead of hanging).
pub async fn wait_final(router: &Router, id: u64) -> Value {
    for _ in 0..1500 {
        let (s, v) = call(router, "GET", &format!("/v1/jobs/{id}"), None, &[]).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        if matches!(v["state"].as_str(), Some("succeeded" | "failed" | "cancelled")) {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("job {id} did not finish");
}

/// Polls until `pred` holds for the job.
pub async fn wait_for(router: &Router, id: u64, pred: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..1500 {
        let (_, v) = call(router, "GET", &format!("/v1/jobs/{id}"), None, &[]).await;
        if pred(&v) {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("job {id} never reached the expected state");
}

/// A profile JSON body with constant demand.
pub fn profile_json(app: &str, mem_mib: f64, util: f64, secs: usize) -> String {
    let s = serde_json::json!({ "gpu_util_pct": util, "gpu_mem_mib": mem_mib, "sm_pct": util, "pcie_mbps": 10.0 });
    serde_json::json!({ "app": { "name": app }, "interval_s": 1.0, "samples": vec![s; secs] }).to_string()
}
