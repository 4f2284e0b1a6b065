//! The API's happy paths, through the Router.

use axum::http::StatusCode;

use crate::util::{call, profile_json, start, submit, wait_final, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submitted_job_runs_on_its_gpu_and_succeeds() {
    let t = start("titanxp:2", "tetris");
    let script = "echo $CUDA_VISIBLE_DEVICES > seen; echo $CUDA_DEVICE_ORDER > order; echo hello";
    let id = submit(&t.router, "echo-app", &["sh", "-c", script]).await;
    let v = wait_final(&t.router, id).await;
    assert_eq!(v["state"], "succeeded", "{v}");
    assert_eq!(v["exit_code"], 0);
    assert_eq!(v["attempts"], 1);
    let gpu = v["gpu"].as_u64().unwrap();
    let data = t.dir.path().join("data");
    let seen = std::fs::read_to_string(data.join(format!("jobs/{id}/work/seen"))).unwrap();
    assert_eq!(seen.trim(), gpu.to_string());
    // CUDA numbers the devices as NVML does (PCI bus order), not fastest first.
    let order = std::fs::read_to_string(data.join(format!("jobs/{id}/work/order"))).unwrap();
    assert_eq!(order.trim(), "PCI_BUS_ID");
    let (s, logs) = call(&t.router, "GET", &format!("/v1/jobs/{id}/logs"), None, &[]).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(logs["stdout"], "hello\n");
    // Its first run was exclusive and left an observed profile behind.
    assert_eq!(v["history"][0]["exclusive"], true);
    let (_, p) = call(&t.router, "GET", "/v1/profiles", None, &[]).await;
    let mine = p["profiles"].as_array().unwrap().iter().find(|p| p["app"] == "echo-app").cloned().unwrap();
    assert_eq!(mine["source"], "observed");
    t.service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_key_returns_the_same_job() {
    let t = start("titanxp:1", "tetris");
    let body = r#"{"app":"a","command":["true"]}"#;
    let (s1, v1) = call(&t.router, "POST", "/v1/jobs", Some(body), &[("idempotency-key", "k-1")]).await;
    let (s2, v2) = call(&t.router, "POST", "/v1/jobs", Some(body), &[("idempotency-key", "k-1")]).await;
    let (s3, v3) = call(&t.router, "POST", "/v1/jobs", Some(body), &[("idempotency-key", "k-2")]).await;
    assert_eq!((s1, s2, s3), (StatusCode::CREATED, StatusCode::OK, StatusCode::CREATED));
    assert_eq!(v1["id"], v2["id"]);
    assert_ne!(v1["id"], v3["id"]);
    // The same key with another request is a conflict, not the earlier job passed off as this one.
    let other = r#"{"app":"b","command":["true"]}"#;
    let (s4, v4) = call(&t.router, "POST", "/v1/jobs", Some(other), &[("idempotency-key", "k-1")]).await;
    assert_eq!(s4, StatusCode::CONFLICT, "{v4}");
    assert!(v4["error"]["message"].as_str().unwrap().contains("k-1"), "{v4}");
    let (_, all) = call(&t.router, "GET", "/v1/jobs", None, &[]).await;
    assert_eq!(all["jobs"].as_array().unwrap().len(), 2);
    t.service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_a_running_job_and_a_queued_one() {
    let t = start("titanxp:1", "fifo");
    // A known profile lets fifo place it; fifo runs one job per GPU, so the second waits.
    let (s, _) = call(&t.router, "POST", "/v1/profiles", Some(&profile_json("sleeper", 100.0, 10.0, 60)), &[]).await;
    assert_eq!(s, StatusCode::CREATED);
    let a = submit(&t.router, "sleeper", &["sleep", "30"]).await;
    let b = submit(&t.router, "sleeper", &["sleep", "30"]).await;
    wait_for(&t.router, a, |v| v["state"] == "running").await;
    let (s, v) = call(&t.router, "DELETE", &format!("/v1/jobs/{b}"), None, &[]).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["state"], "cancelled");
    let (s, _) = call(&t.router, "DELETE", &format!("/v1/jobs/{a}"), None, &[]).await;
    assert_eq!(s, StatusCode::ACCEPTED);
    let v = wait_final(&t.router, a).await;
    assert_eq!(v["state"], "cancelled", "{v}");
    assert_eq!(v["history"][0]["state"], "cancelled");
    let (s, v) = call(&t.router, "DELETE", &format!("/v1/jobs/{a}"), None, &[]).await;
    assert_eq!(s, StatusCode::CONFLICT, "{v}");
    let (_, q) = call(&t.router, "GET", "/v1/jobs?state=cancelled", None, &[]).await;
    assert_eq!(q["jobs"].as_array().unwrap().len(), 2);
    t.service.stop().await;
}

/// On a current-thread runtime the placement loop has not run yet when the first request is
/// answered: the cluster must already show its GPUs and its policy.
#[tokio::test(flavor = "current_thread")]
async fn the_cluster_is_shown_before_the_loop_first_runs() {
    let t = start("titanxp:2", "tetris");
    let (s, v) = call(&t.router, "GET", "/v1/cluster", None, &[]).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["policy"], "tetris", "{v}");
    assert_eq!(v["gpus"].as_array().map(Vec::len), Some(2), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_metrics_and_health_answer() {
    let t = start("titanxp:2", "tetris");
    let id = submit(&t.router, "x", &["true"]).await;
    wait_final(&t.router, id).await;
    let (s, c) = call(&t.router, "GET", "/v1/cluster", None, &[]).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(c["gpus"].as_array().unwrap().len(), 2);
    assert_eq!(c["gpus"][0]["memory_mib"], 12288.0);
    assert_eq!(c["policy"], "tetris");
    let (s, m) = call(&t.router, "GET", "/metrics", None, &[]).await;
    assert_eq!(s, StatusCode::OK);
    let m = m.as_str().unwrap().to_string();
    assert!(m.contains("dqngpu_jobs{state=\"succeeded\"} 1"), "{m}");
    assert!(m.contains("dqngpu_decision_latency_seconds_bucket{le=\"+Inf\"}"), "{m}");
    assert!(m.contains("dqngpu_submissions_total 1"), "{m}");
    // docs/openapi.yaml lists every series /metrics serves.
    let spec = include_str!("../../../../docs/openapi.yaml");
    for line in m.lines().filter(|l| l.starts_with("# TYPE ")) {
        let name = line.split_whitespace().nth(2).unwrap_or_default();
        assert!(spec.contains(name), "docs/openapi.yaml does not list the series `{name}`");
    }
    let (s, h) = call(&t.router, "GET", "/healthz", None, &[]).await;
    assert_eq!((s, h["status"].as_str()), (StatusCode::OK, Some("ok")));
    t.service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profiled_jobs_share_a_gpu_within_its_memory() {
    let t = start("titanxp:1", "tetris");
    // 5000 MiB each on a 12288 MiB card: at most two fit together.
    call(&t.router, "POST", "/v1/profiles", Some(&profile_json("half", 5000.0, 20.0, 60)), &[]).await;
    let ids: Vec<u64> = futures_ids(&t.router, 3).await;
    let a = wait_for(&t.router, ids[0], |v| v["state"] == "running").await;
    wait_for(&t.router, ids[1], |v| v["state"] == "running").await;
    // The third would exceed the card's memory: it waits although the policy may pack.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let (_, c) = call(&t.router, "GET", &format!("/v1/jobs/{}", ids[2]), None, &[]).await;
    assert_eq!(c["state"], "queued", "{c}");
    assert_eq!(a["history"][0]["exclusive"], false);
    for id in &ids {
        call(&t.router, "DELETE", &format!("/v1/jobs/{id}"), None, &[]).await;
    }
    t.service.stop().await;
}

async fn futures_ids(router: &axum::Router, n: usize) -> Vec<u64> {
    let mut v = Vec::new();
    for _ in 0..n {
        v.push(submit(router, "half", &["sleep", "30"]).await);
    }
    v
}

/// A batch is queued in one transaction and placed as one job set: under shortest-job-first
/// on one GPU, the batch's short job (second in it) starts first, and the long one waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_queued_at_once_and_placed_as_one_job_set() {
    let t = start("titanxp:1", "sjf");
    for (app, secs) in [("long", 120), ("short", 10)] {
        let (s, v) = call(&t.router, "POST", "/v1/profiles", Some(&profile_json(app, 1000.0, 50.0, secs)), &[]).await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
    }
    let body = serde_json::json!({ "jobs": [
        { "app": "long", "command": ["sleep", "30"] },
        { "app": "short", "command": ["sleep", "30"] },
    ] })
    .to_string();
    let (s, v) = call(&t.router, "POST", "/v1/jobs/batch", Some(&body), &[]).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let ids: Vec<u64> = v["jobs"].as_array().unwrap().iter().map(|j| j["id"].as_u64().unwrap()).collect();
    assert_eq!(ids.len(), 2);
    assert_eq!(ids[1], ids[0] + 1, "ids follow the batch's order: {v}");
    wait_for(&t.router, ids[1], |v| v["state"] == "running").await;
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let (_, long) = call(&t.router, "GET", &format!("/v1/jobs/{}", ids[0]), None, &[]).await;
    assert_eq!(long["state"], "queued", "{long}");
    for id in &ids {
        call(&t.router, "DELETE", &format!("/v1/jobs/{id}"), None, &[]).await;
    }
    t.service.stop().await;
}

/// All or nothing: one bad job refuses the batch, naming its index, and queues none; an empty
/// batch and unknown fields are refused by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_job_refuses_the_whole_batch_naming_it() {
    let t = start("titanxp:1", "sjf");
    let body = r#"{"jobs":[{"app":"googlenet","command":["true"]},{"app":"googlenet","command":[]}]}"#;
    let (s, v) = call(&t.router, "POST", "/v1/jobs/batch", Some(body), &[]).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    let msg = v["error"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("jobs[1]") && msg.contains("command"), "{msg}");
    let (_, all) = call(&t.router, "GET", "/v1/jobs", None, &[]).await;
    assert_eq!(all["jobs"].as_array().map(Vec::len), Some(0), "{all}");
    let (s, v) = call(&t.router, "POST", "/v1/jobs/batch", Some(r#"{"jobs":[]}"#), &[]).await;
    assert!(s == StatusCode::BAD_REQUEST && v["error"]["message"].as_str().unwrap_or_default().contains("jobs"), "{v}");
    let (s, v) = call(&t.router, "POST", "/v1/jobs/batch", Some(r#"{"jobs":[],"x":1}"#), &[]).await;
    assert!(s.is_client_error() && v["error"]["message"].as_str().unwrap_or_default().contains('x'), "{s} {v}");
    t.service.stop().await;
}

/// `GET /v1/jobs` is bounded in bytes, not only in jobs: jobs with ~1 MB argvs end a page
/// early (at most `MAX_PAGE_BYTES`), and `next_after` leads through every job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_of_jobs_is_capped_in_bytes_and_next_after_reaches_every_job() {
    let t = start("titanxp:1", "fifo");
    let arg = "x".repeat(16_000);
    let mut argv = vec!["true".to_string()];
    argv.extend(std::iter::repeat_n(arg, 60));
    let body = serde_json::json!({ "app": "big", "command": argv }).to_string();
    let mut ids = Vec::new();
    for _ in 0..10 {
        let (s, v) = call(&t.router, "POST", "/v1/jobs", Some(&body), &[]).await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
        ids.push(v["id"].as_u64().unwrap());
    }
    let max = dqngpu_service::api::MAX_PAGE_BYTES;
    let (mut seen, mut after, mut pages) = (Vec::new(), 0u64, 0);
    loop {
        let (s, v) = call(&t.router, "GET", &format!("/v1/jobs?limit=10000&after={after}"), None, &[]).await;
        assert_eq!(s, StatusCode::OK);
        let bytes = serde_json::to_string(&v).unwrap().len();
        assert!(bytes <= max, "a page of {bytes} bytes, over {max}");
        let page = v["jobs"].as_array().unwrap();
        assert!(!page.is_empty(), "an empty page while jobs remain: {}", v["next_after"]);
        seen.extend(page.iter().map(|j| j["id"].as_u64().unwrap()));
        pages += 1;
        match v["next_after"].as_u64() {
            Some(n) => {
                assert_eq!(Some(n), seen.last().copied(), "next_after is not the page's last id");
                after = n;
            }
            None => break,
        }
    }
    assert_eq!(seen, ids, "paging did not list every job once");
    assert!(pages >= 2, "10 jobs of ~1 MB fit one page");
    // A count limit gives a cursor too, and a page that reaches the end gives none.
    let (_, v) = call(&t.router, "GET", "/v1/jobs?limit=3", None, &[]).await;
    assert_eq!(v["next_after"].as_u64(), Some(ids[2]));
    let (_, v) = call(&t.router, "GET", &format!("/v1/jobs?limit=1&after={}", ids[8]), None, &[]).await;
    assert!(v["next_after"].is_null(), "{}", v["next_after"]);
    t.service.stop().await;
}

/// Posting an app's profile again replaces it and says so (200, `replaced`), where a new one
/// is created (201); before, both answered 201 and a client replaced a profile unawares. The
/// profile kept is the last one posted, in the store as in memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_posted_again_replaces_the_first_and_says_so() {
    let t = start("titanxp:1", "fifo");
    let (s, v) = call(&t.router, "POST", "/v1/profiles", Some(&profile_json("twice", 1000.0, 10.0, 5)), &[]).await;
    assert_eq!((s, v["replaced"].as_bool()), (StatusCode::CREATED, Some(false)), "{v}");
    let (s, v) = call(&t.router, "POST", "/v1/profiles", Some(&profile_json("twice", 2000.0, 10.0, 7)), &[]).await;
    assert_eq!((s, v["replaced"].as_bool()), (StatusCode::OK, Some(true)), "{v}");
    let (_, p) = call(&t.router, "GET", "/v1/profiles", None, &[]).await;
    let mine: Vec<_> = p["profiles"].as_array().unwrap().iter().filter(|p| p["app"] == "twice").collect();
    assert_eq!(mine.len(), 1, "{p}");
    assert_eq!(mine[0]["source"], "api");
    t.service.stop().await;
}

/// A library with two profiles of one app keys each by its file stem, and jobs name it so:
/// `GET /v1/profiles` gives that key as `profile` beside the app name (it listed `bert`
/// twice, and `profile show bert-h100 --server` could not find it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profiles_are_listed_with_the_keys_jobs_use() {
    let dir = tempfile::tempdir().unwrap();
    let lib_dir = dir.path().join("lib");
    std::fs::create_dir(&lib_dir).unwrap();
    for (file, mem) in [("bert-a100", 1000.0), ("bert-h100", 9000.0)] {
        std::fs::write(lib_dir.join(format!("{file}.json")), profile_json("bert", mem, 50.0, 3)).unwrap();
    }
    let mut cfg = crate::util::config(dir.path().join("data"), "titanxp:1");
    cfg.libraries = vec![dqngpu_model::library::resolve(lib_dir.to_str().unwrap()).unwrap()];
    let (svc, router) = crate::util::start_with(cfg, "tetris", None);
    let (_, v) = call(&router, "GET", "/v1/profiles", None, &[]).await;
    let mut keys: Vec<(String, String)> = v["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["app"].as_str().unwrap().to_string(), p["profile"].as_str().unwrap().to_string()))
        .collect();
    keys.sort();
    assert_eq!(keys, [("bert".into(), "bert-a100".into()), ("bert".into(), "bert-h100".into())]);
    svc.stop().await;
}
