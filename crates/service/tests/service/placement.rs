//! The placement loop against misbehaving policies and awkward queues: whatever the policy
//! does, a waiting job that fits an idle GPU is started (the liveness rule), and the loop
//! outlives the policy.

use std::sync::Arc;

use axum::http::StatusCode;
use dqngpu_model::{ClusterView, Placement, Policy};
use dqngpu_service::{HttpConfig, Service};

use crate::util::{call, config, profile_json, submit, wait_final};

/// A policy that panics on every decision.
struct Panics;
impl Policy for Panics {
    fn name(&self) -> &str {
        "test-panics"
    }
    fn decide(&self, _view: &ClusterView<'_>) -> Vec<Placement> {
        panic!("the policy broke");
    }
}

/// A policy that panics is the policy's failure, not the service's: the loop lives on (it
/// died with the policy, and with it the data dir's lock, while the API kept taking jobs
/// that never ran), says so, and the liveness rule still starts waiting jobs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_that_panics_is_reported_and_the_loop_lives_on() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let svc = Service::start(config(data.clone(), "titanxp:1"), Arc::new(Panics), None).unwrap();
    let router = svc.router(&HttpConfig::default());
    let (s, _) = call(&router, "POST", "/v1/profiles", Some(&profile_json("p", 100.0, 10.0, 5)), &[]).await;
    assert_eq!(s, StatusCode::CREATED);
    for _ in 0..2 {
        let id = submit(&router, "p", &["true"]).await;
        assert_eq!(wait_final(&router, id).await["state"], "succeeded");
    }
    // A second server is still refused: the loop (which holds the lock) runs.
    let policy: Arc<dyn Policy> = Arc::new(Panics);
    assert!(Service::start(config(data.clone(), "titanxp:1"), policy, None).is_err());
    let (_, m) = call(&router, "GET", "/metrics", None, &[]).await;
    let m = m.as_str().unwrap().to_string();
    let invalid: u64 =
        m.lines().find_map(|l| l.strip_prefix("dqngpu_invalid_decisions_total ")).and_then(|v| v.parse().ok()).unwrap();
    assert!(invalid >= 2, "{m}");
    svc.stop().await;
    let db = rusqlite::Connection::open(data.join("dqngpu.sqlite")).unwrap();
    let detail: String = db
        .query_row("SELECT detail FROM events WHERE kind = 'policy_panic' ORDER BY id LIMIT 1", [], |r| r.get(0))
        .unwrap();
    assert!(detail.contains("test-panics") && detail.contains("the policy broke"), "{detail}");
}
