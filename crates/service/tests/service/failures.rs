//! Failures: OOM re-queues and avoids its neighbours; other failures retry up to the limit.

use crate::util::{call, start, submit, wait_final};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_job_retries_then_fails_keeping_each_attempt() {
    let t = start("titanxp:1", "tetris");
    // max_retries = 1 in the test config: two attempts in all.
    let id = submit(&t.router, "bad", &["sh", "-c", "echo $DQNGPU_ATTEMPT >> ../tries; exit 7"]).await;
    let v = wait_final(&t.router, id).await;
    assert_eq!(v["state"], "failed", "{v}");
    assert_eq!(v["exit_code"], 7);
    assert_eq!(v["attempts"], 2);
    let h = v["history"].as_array().unwrap();
    assert_eq!(h.len(), 2);
    assert!(h.iter().all(|a| a["state"] == "failed" && a["exit_code"] == 7), "{v}");
    let tries = std::fs::read_to_string(t.dir.path().join(format!("data/jobs/{id}/tries"))).unwrap();
    assert_eq!(tries, "1\n2\n");
    t.service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_memory_is_recorded_as_oom_and_retried() {
    let t = start("titanxp:1", "tetris");
    let script = "if [ \"$DQNGPU_ATTEMPT\" = 1 ]; then echo 'CUDA error: out of memory' >&2; exit 1; fi; exit 0";
    let id = submit(&t.router, "oomy", &["sh", "-c", script]).await;
    let v = wait_final(&t.router, id).await;
    assert_eq!(v["state"], "succeeded", "{v}");
    assert_eq!(v["history"][0]["state"], "oom");
    assert_eq!(v["history"][1]["state"], "succeeded");
    let (_, m) = call(&t.router, "GET", "/metrics", None, &[]).await;
    assert!(m.as_str().unwrap().contains("dqngpu_oom_kills_total 1"));
    t.service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn program_that_cannot_start_fails_at_once() {
    let t = start("titanxp:1", "tetris");
    // The API refuses missing programs; one that vanishes after acceptance reaches the
    // executor, which records the spawn error and does not retry.
    let job = dqngpu_service::jobs::NewJob {
        app: "gone".into(),
        command: vec!["/nonexistent/dqngpu-test-prog".into()],
        env: Default::default(),
        input_size_mb: None,
        params: None,
    };
    let (rec, created) = t.service.core().store.insert_job(&job, None, 0.0).unwrap();
    assert!(created);
    t.service.core().wake.notify_one();
    let v = wait_final(&t.router, rec.id).await;
    assert_eq!(v["state"], "failed", "{v}");
    assert_eq!(v["attempts"], 1);
    // Counted as the failed attempt it is (it was 0: a failed job with no failure).
    assert_eq!(v["failures"], 1, "{v}");
    assert!(v["error"].as_str().unwrap().contains("cannot start"), "{v}");
    t.service.stop().await;
}

/// A policy that never places anything.
struct Holder;
impl dqngpu_model::Policy for Holder {
    fn name(&self) -> &str {
        "test-holder"
    }
    fn decide(&self, _view: &dqngpu_model::ClusterView<'_>) -> Vec<dqngpu_model::Placement> {
        Vec::new()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_that_never_places_is_overruled_by_the_liveness_rule() {
    use crate::util::{call, config, profile_json};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let service =
        dqngpu_service::Service::start(config(data.clone(), "titanxp:1"), std::sync::Arc::new(Holder), None).unwrap();
    let router = service.router(&dqngpu_service::HttpConfig::default());
    // A profiled app goes through the policy (an unprofiled one would run alone first).
    let (s, _) = call(&router, "POST", "/v1/profiles", Some(&profile_json("held", 100.0, 10.0, 5)), &[]).await;
    assert_eq!(s, axum::http::StatusCode::CREATED);
    let a = submit(&router, "held", &["true"]).await;
    let b = submit(&router, "held", &["true"]).await;
    for id in [a, b] {
        let v = wait_final(&router, id).await;
        assert_eq!(v["state"], "succeeded", "{v}");
        assert_eq!(v["history"][0]["exclusive"], false, "{v}");
    }
    let (_, m) = call(&router, "GET", "/metrics", None, &[]).await;
    assert!(m.as_str().unwrap().contains("dqngpu_liveness_starts_total 2"), "{m}");
    service.stop().await;
    let db = rusqlite::Connection::open(data.join("dqngpu.sqlite")).unwrap();
    let mut q = db.prepare("SELECT job_id FROM events WHERE kind = 'liveness_start' ORDER BY id").unwrap();
    let jobs: Vec<i64> = q.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
    assert_eq!(jobs, vec![a as i64, b as i64]);
}

/// A policy that places the oldest waiting job on GPU 0 whenever it is idle, whatever its
/// memory (as DeepRM Mean does, reading mean memory).
struct OnGpuZero;
impl dqngpu_model::Policy for OnGpuZero {
    fn name(&self) -> &str {
        "test-on-gpu-zero"
    }
    fn decide(&self, view: &dqngpu_model::ClusterView<'_>) -> Vec<dqngpu_model::Placement> {
        match (view.gpus[0].is_idle(), view.queue.first()) {
            (true, Some(q)) => vec![dqngpu_model::Placement { gpu: 0, jobs: vec![q.id] }],
            _ => Vec::new(),
        }
    }
}

/// A group with a job whose peak alone passes its GPU's memory is dropped (logged as
/// `unfit_placement`), as the simulator drops it, and the job runs where it fits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_placement_that_can_never_fit_is_dropped_and_the_job_runs_where_it_fits() {
    use crate::util::{call, config, profile_json};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let cfg = config(data.clone(), "m60,titanxp");
    let service = dqngpu_service::Service::start(cfg, std::sync::Arc::new(OnGpuZero), None).unwrap();
    let router = service.router(&dqngpu_service::HttpConfig::default());
    let (s, _) = call(&router, "POST", "/v1/profiles", Some(&profile_json("big", 10_000.0, 10.0, 5)), &[]).await;
    assert_eq!(s, axum::http::StatusCode::CREATED);
    let id = submit(&router, "big", &["true"]).await;
    let v = wait_final(&router, id).await;
    assert_eq!((v["state"].as_str(), v["gpu"].as_u64()), (Some("succeeded"), Some(1)), "{v}");
    assert_eq!(v["failures"], 0, "{v}");
    service.stop().await;
    let db = rusqlite::Connection::open(data.join("dqngpu.sqlite")).unwrap();
    let n: i64 = db.query_row("SELECT COUNT(*) FROM events WHERE kind = 'unfit_placement'", [], |r| r.get(0)).unwrap();
    assert!(n > 0);
}

/// A policy that starts every waiting job on GPU 0 at once.
struct PackAll;
impl dqngpu_model::Policy for PackAll {
    fn name(&self) -> &str {
        "test-pack-all"
    }
    fn decide(&self, view: &dqngpu_model::ClusterView<'_>) -> Vec<dqngpu_model::Placement> {
        if view.queue.is_empty() {
            return Vec::new();
        }
        vec![dqngpu_model::Placement { gpu: 0, jobs: view.queue.iter().map(|q| q.id).collect() }]
    }
}

/// Two jobs of a GPU-saturating app, submitted together (before the loop's next pass, so the
/// policy sees both at once), under `PackAll` and a 10% budget predicted by `model` (`None`:
/// the default). Returns both jobs' final views, the metrics text and the data directory.
async fn two_busy_jobs_packed(
    dir: &std::path::Path,
    model: Option<std::sync::Arc<dyn dqngpu_interference::Interference>>,
) -> (serde_json::Value, serde_json::Value, String, std::path::PathBuf) {
    use crate::util::{call, config, profile_json};
    let data = dir.join("data");
    let mut cfg = config(data.clone(), "titanxp:1");
    cfg.max_slowdown = Some(0.10);
    if let Some(m) = model {
        cfg.budget_model = m;
    }
    let service = dqngpu_service::Service::start(cfg, std::sync::Arc::new(PackAll), None).unwrap();
    let router = service.router(&dqngpu_service::HttpConfig::default());
    let (s, _) = call(&router, "POST", "/v1/profiles", Some(&profile_json("busy", 1000.0, 100.0, 30)), &[]).await;
    assert_eq!(s, axum::http::StatusCode::CREATED);
    let a = submit(&router, "busy", &["sleep", "0.3"]).await;
    let b = submit(&router, "busy", &["sleep", "0.3"]).await;
    let va = wait_final(&router, a).await;
    let vb = wait_final(&router, b).await;
    assert_eq!((va["state"].as_str(), vb["state"].as_str()), (Some("succeeded"), Some("succeeded")), "{va} {vb}");
    let (_, m) = call(&router, "GET", "/metrics", None, &[]).await;
    service.stop().await;
    (va, vb, m.as_str().unwrap().to_string(), data)
}

/// The budget refusals the metrics text counts.
fn budget_refusals(metrics: &str) -> u64 {
    metrics.lines().find_map(|l| l.strip_prefix("dqngpu_budget_refusals_total ")).and_then(|v| v.parse().ok()).unwrap()
}

/// Issue 10 item 2: `serve --max-slowdown` applies the simulator's budget to every policy. Two
/// GPU-saturating jobs packed together would each run at about half speed: the group is
/// refused (counted, logged), the liveness rule starts the older alone, and the other runs
/// after it, never beside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slowdown_budget_keeps_a_slowing_group_from_starting() {
    let dir = tempfile::tempdir().unwrap();
    let (va, vb, m, data) = two_busy_jobs_packed(dir.path(), None).await;
    let (a_end, b_start) =
        (va["history"][0]["finished_at"].as_f64().unwrap(), vb["history"][0]["started_at"].as_f64().unwrap());
    assert!(b_start >= a_end - 1e-3, "b started at {b_start} beside a (ended {a_end})");
    assert!(vb["history"][0]["co_apps"].as_array().unwrap().is_empty(), "{vb}");
    assert!(budget_refusals(&m) >= 1, "{m}");
    let db = rusqlite::Connection::open(data.join("dqngpu.sqlite")).unwrap();
    let n: i64 = db.query_row("SELECT COUNT(*) FROM events WHERE kind = 'budget_refusal'", [], |r| r.get(0)).unwrap();
    assert!(n >= 1);
}

/// `serve --interference`: the budget predicts with the model it is given. With `none` (no job
/// slows another), the same pair the contention model refuses above starts together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_budget_predicts_with_the_model_it_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let none = dqngpu_interference::by_name("none").unwrap().into();
    let (_, vb, m, _) = two_busy_jobs_packed(dir.path(), Some(none)).await;
    assert_eq!(vb["history"][0]["co_apps"].as_array().unwrap().len(), 1, "b ran beside a: {vb}");
    assert_eq!(budget_refusals(&m), 0, "{m}");
}

/// Makes the service's database refuse `what` (a trigger that aborts it, as a full disk or an
/// I/O error would) until the returned connection drops the trigger.
fn refuse(data: &std::path::Path, what: &str) -> rusqlite::Connection {
    let db = rusqlite::Connection::open(data.join("dqngpu.sqlite")).unwrap();
    db.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
    db.execute_batch(&format!(
        "CREATE TRIGGER refuse BEFORE {what} BEGIN SELECT RAISE(ABORT, 'injected failure'); END;"
    ))
    .unwrap();
    db
}

/// The store fails to record a job's end: the end is kept and recorded at a later pass once
/// the store works again (it was dropped, leaving the job `running` until a restart).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_end_the_store_failed_to_record_is_recorded_once_it_works() {
    let t = start("titanxp:1", "tetris");
    let db = refuse(&t.dir.path().join("data"), "UPDATE OF finished_at ON attempts");
    let id = submit(&t.router, "quick", &["true"]).await;
    crate::util::wait_for(&t.router, id, |v| v["state"] == "running").await;
    // It ends at once; its end cannot be recorded while the store refuses.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let (_, v) = call(&t.router, "GET", &format!("/v1/jobs/{id}"), None, &[]).await;
    assert_eq!(v["state"], "running", "{v}");
    db.execute_batch("DROP TRIGGER refuse;").unwrap();
    let v = wait_final(&t.router, id).await;
    assert_eq!((v["state"].as_str(), v["attempts"].as_u64()), (Some("succeeded"), Some(1)), "{v}");
    t.service.stop().await;
}

/// The store fails to record a started job's pid: the job is still watched (its end recorded)
/// and its GPU still booked, instead of running off the books.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_whose_pid_could_not_be_recorded_is_still_watched_and_booked() {
    let t = start("titanxp:1", "tetris");
    let db = refuse(&t.dir.path().join("data"), "UPDATE OF pid ON attempts");
    // Long enough to be still running when the cluster is read on a loaded box (0.5 s was not).
    let id = submit(&t.router, "watched", &["sh", "-c", "sleep 3"]).await;
    crate::util::wait_for(&t.router, id, |v| v["state"] == "running").await;
    let (_, c) = call(&t.router, "GET", "/v1/cluster", None, &[]).await;
    assert_eq!(c["gpus"][0]["jobs"][0]["id"], id, "the running job is off the GPU's books: {c}");
    let v = wait_final(&t.router, id).await;
    assert_eq!(v["state"], "succeeded", "{v}");
    drop(db);
    t.service.stop().await;
}

/// A supervisor that cannot start is named as what failed, not the job's own program.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_supervisor_that_cannot_start_is_named_not_the_jobs_program() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = crate::util::config(dir.path().join("data"), "titanxp:1");
    cfg.supervisor = dqngpu_service::Supervisor::Shim {
        program: "/nonexistent/dqngpu-supervisor".into(),
        args: vec!["serve".into(), "job-shim".into()],
    };
    let (svc, router) = crate::util::start_with(cfg, "tetris", None);
    let id = submit(&router, "shimless", &["true"]).await;
    let v = wait_final(&router, id).await;
    let error = v["error"].as_str().unwrap_or_default();
    assert!(error.contains("supervisor") && error.contains("/nonexistent/dqngpu-supervisor"), "{v}");
    assert!(!error.contains("`true`"), "{v}");
    svc.stop().await;
}

/// A job the service cannot prepare (its directory cannot be made) fails naming why and where,
/// not "the service could not prepare the job" alone (the cause was only in the server log).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_cannot_be_prepared_says_why_and_where() {
    let t = start("titanxp:1", "tetris");
    // The jobs' directory is taken by a file. (A file where the first job's own directory
    // goes is moved aside as another database's leftover, and the job runs.)
    std::fs::write(t.dir.path().join("data/jobs"), "not a directory").unwrap();
    let id = submit(&t.router, "unprepared", &["true"]).await;
    assert_eq!(id, 1);
    let v = wait_final(&t.router, id).await;
    let error = v["error"].as_str().unwrap_or_default();
    assert!(error.contains("could not prepare the job") && error.contains("jobs/1"), "{v}");
    t.service.stop().await;
}
