//! The placement loop against misbehaving policies and awkward queues: whatever the policy
//! does, a waiting job that fits an idle GPU is started (the liveness rule), and the loop
//! outlives the policy.

use std::sync::Arc;

use axum::http::StatusCode;
use dqngpu_model::{ClusterView, Placement, Policy};
use dqngpu_service::{HttpConfig, Service};

use crate::util::{call, config, profile_json, submit, wait_final, wait_for};

/// A shell command that runs until `flag` exists (at most a minute: a failed test leaves no
/// process behind for long).
fn until(flag: &std::path::Path) -> String {
    format!("i=0; while [ ! -e {} ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done", flag.display())
}

/// Places every waiting job on GPU 0, whatever runs there.
struct AllOnZero;
impl Policy for AllOnZero {
    fn name(&self) -> &str {
        "test-all-on-zero"
    }
    fn decide(&self, view: &ClusterView<'_>) -> Vec<Placement> {
        if view.queue.is_empty() {
            return Vec::new();
        }
        vec![Placement { gpu: 0, jobs: view.queue.iter().map(|q| q.id).collect() }]
    }
}

/// A decision the service's memory guard holds back whole places nothing: the liveness rule
/// applies to what starts, so a job that fits an idle GPU is started there (it waited, with
/// GPU 1 idle, for as long as GPU 0's job ran).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_the_guard_holds_back_whole_still_gets_the_liveness_rule() {
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::start(config(dir.path().join("data"), "titanxp:2"), Arc::new(AllOnZero), None).unwrap();
    let router = svc.router(&HttpConfig::default());
    // Two of these cannot share a 12 GB card.
    let (s, _) = call(&router, "POST", "/v1/profiles", Some(&profile_json("big", 8000.0, 10.0, 5)), &[]).await;
    assert_eq!(s, StatusCode::CREATED);
    let flag = dir.path().join("go");
    let long = submit(&router, "big", &["sh", "-c", &until(&flag)]).await;
    let v = wait_for(&router, long, |v| v["state"] == "running").await;
    assert_eq!(v["gpu"], 0, "{v}");
    let short = submit(&router, "big", &["true"]).await;
    let v = wait_final(&router, short).await;
    assert_eq!((v["state"].as_str(), v["gpu"].as_u64()), (Some("succeeded"), Some(1)), "{v}");
    // The long job still ran while the short one started beside it on the idle GPU.
    let (_, l) = call(&router, "GET", &format!("/v1/jobs/{long}"), None, &[]).await;
    assert_eq!(l["state"], "running", "{l}");
    std::fs::write(&flag, "").unwrap();
    assert_eq!(wait_final(&router, long).await["state"], "succeeded");
    svc.stop().await;
}

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

/// A service on `gpus` with a queue window of `window` jobs and profiles of 100 MiB at the
/// given utilisation posted.
async fn windowed(
    gpus: &str,
    window: usize,
    policy: &str,
    profiles: &[(&str, f64)],
) -> (tempfile::TempDir, dqngpu_service::Service, axum::Router) {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path().join("data"), gpus);
    cfg.queue_window = window;
    let (svc, router) = crate::util::start_with(cfg, policy, None);
    for (app, util) in profiles {
        let (s, _) = call(&router, "POST", "/v1/profiles", Some(&profile_json(app, 100.0, *util, 5)), &[]).await;
        assert_eq!(s, StatusCode::CREATED);
    }
    (dir, svc, router)
}

/// Jobs of an app being profiled (they wait for its one exclusive run) do not fill the
/// loop's window: a profiled job behind them starts on the idle GPU (it waited for the
/// profiling run to end, the policy shown no job at all).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_waiting_for_their_apps_profiling_run_do_not_hide_the_rest_of_the_queue() {
    let (dir, svc, router) = windowed("titanxp:2", 2, "fifo", &[("known", 10.0)]).await;
    let flag = dir.path().join("go");
    let first = submit(&router, "new", &["sh", "-c", &until(&flag)]).await;
    wait_for(&router, first, |v| v["state"] == "running").await;
    let waiting = [submit(&router, "new", &["true"]).await, submit(&router, "new", &["true"]).await];
    let known = submit(&router, "known", &["true"]).await;
    let v = wait_final(&router, known).await;
    assert_eq!(v["state"], "succeeded", "{v}");
    for id in waiting {
        let (_, w) = call(&router, "GET", &format!("/v1/jobs/{id}"), None, &[]).await;
        assert_eq!(w["state"], "queued", "{w}");
    }
    std::fs::write(&flag, "").unwrap();
    for id in [first, waiting[0], waiting[1]] {
        assert_eq!(wait_final(&router, id).await["state"], "succeeded");
    }
    svc.stop().await;
}

/// Jobs of an app without a profile whose exclusive run cannot start yet (no GPU is idle)
/// filled a full queue window, and a profiled job behind them was never shown to the policy,
/// beside a card with room, until a GPU went idle. Only the oldest of such an app's jobs
/// takes a place in the window now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_of_an_app_not_yet_profiled_do_not_hide_the_rest_of_the_queue() {
    let (dir, svc, router) = windowed("titanxp:1", 3, "bestfit", &[("heavy", 60.0), ("tiny", 10.0)]).await;
    let flag = dir.path().join("go");
    let heavy = submit(&router, "heavy", &["sh", "-c", &until(&flag)]).await;
    wait_for(&router, heavy, |v| v["state"] == "running").await;
    // Two such apps, each filling the window on its own: the window is read past both.
    let mut unknown = Vec::new();
    for app in ["foo", "bar"] {
        for _ in 0..4 {
            unknown.push(submit(&router, app, &["true"]).await);
        }
    }
    let tiny = submit(&router, "tiny", &["true"]).await;
    let v = wait_final(&router, tiny).await;
    assert_eq!(v["state"], "succeeded", "{v}");
    let (_, h) = call(&router, "GET", &format!("/v1/jobs/{heavy}"), None, &[]).await;
    assert_eq!(h["state"], "running", "tiny ran beside heavy, not after it: {h}");
    std::fs::write(&flag, "").unwrap();
    for id in unknown {
        assert_eq!(wait_final(&router, id).await["state"], "succeeded");
    }
    svc.stop().await;
}
