//! Bad input gets a 4xx with a JSON error naming the problem, and the server keeps serving.

use axum::http::StatusCode;
use axum::Router;
use proptest::prelude::*;

use crate::util::{call, config, start, start_with};

/// Valid requests changed in one place, and arbitrary paths and queries.
#[path = "bad_input_mutated.rs"]
mod mutated;

/// One check: the status, a JSON error whose message contains `needle`, and a healthy server.
async fn check(
    router: &Router,
    method: &str,
    uri: &str,
    body: Option<&str>,
    headers: &[(&str, &str)],
    want: StatusCode,
    needle: &str,
) {
    let (s, v) = call(router, method, uri, body, headers).await;
    assert_eq!(s, want, "{method} {uri} {body:?}: {v}");
    let msg = v["error"]["message"].as_str().unwrap_or_else(|| panic!("no JSON error: {v}"));
    assert!(msg.contains(needle), "`{msg}` should mention `{needle}`");
    let (s, _) = call(router, "GET", "/healthz", None, &[]).await;
    assert_eq!(s, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_submissions_name_the_problem() {
    let t = start("titanxp:1", "tetris");
    let r = &t.router;
    let post =
        |b: &'static str, want, needle| async move { check(r, "POST", "/v1/jobs", Some(b), &[], want, needle).await };
    post("{\"app\": \"a\", ", StatusCode::BAD_REQUEST, "EOF").await;
    post("not json", StatusCode::BAD_REQUEST, "expected").await;
    post(r#"{"app":"a","command":"ls"}"#, StatusCode::UNPROCESSABLE_ENTITY, "command: invalid type").await;
    post(r#"{"app":5,"command":["ls"]}"#, StatusCode::UNPROCESSABLE_ENTITY, "app: invalid type").await;
    post(r#"{"command":["ls"]}"#, StatusCode::UNPROCESSABLE_ENTITY, "missing field `app`").await;
    post(r#"{"app":"a","command":[]}"#, StatusCode::BAD_REQUEST, "argv is empty").await;
    post(r#"{"app":"a","command":[""]}"#, StatusCode::BAD_REQUEST, "program is empty").await;
    post(r#"{"app":"a","command":["no-such-program-xyz"]}"#, StatusCode::UNPROCESSABLE_ENTITY, "not found").await;
    post(r#"{"app":"a","command":["./rel/prog"]}"#, StatusCode::UNPROCESSABLE_ENTITY, "relative path").await;
    // The job starts with its own PATH: a program not on it is refused now, not at its start.
    post(
        r#"{"app":"a","command":["true"],"env":{"PATH":"/nonexistent"}}"#,
        StatusCode::UNPROCESSABLE_ENTITY,
        "job's PATH",
    )
    .await;
    post(r#"{"app":"a b","command":["ls"]}"#, StatusCode::BAD_REQUEST, "field `app`").await;
    post(r#"{"app":"a","command":["ls"],"cwd":"/etc"}"#, StatusCode::UNPROCESSABLE_ENTITY, "unknown field `cwd`").await;
    post(r#"{"app":"a","command":["ls"],"env":{"1BAD":"x"}}"#, StatusCode::BAD_REQUEST, "`1BAD`").await;
    post(r#"{"app":"a","command":["ls"],"env":{"A=B":"x"}}"#, StatusCode::BAD_REQUEST, "`A=B`").await;
    // A name given twice is ambiguous: refused, not the last value kept.
    post(
        r#"{"app":"a","command":["ls"],"env":{"A":"1","A":"2"}}"#,
        StatusCode::UNPROCESSABLE_ENTITY,
        "`env.A` is given twice",
    )
    .await;
    post(
        r#"{"app":"a","command":["ls"],"env":{"CUDA_VISIBLE_DEVICES":"3"}}"#,
        StatusCode::BAD_REQUEST,
        "set by the service",
    )
    .await;
    // The service numbers GPUs in PCI bus order; a job may not have CUDA count them otherwise.
    post(
        r#"{"app":"a","command":["ls"],"env":{"CUDA_DEVICE_ORDER":"FASTEST_FIRST"}}"#,
        StatusCode::BAD_REQUEST,
        "`CUDA_DEVICE_ORDER` is set by the service",
    )
    .await;
    post(r#"{"app":"a","command":["ls"],"input_size_mb":-1}"#, StatusCode::BAD_REQUEST, "input_size_mb").await;
    check(
        r,
        "POST",
        "/v1/jobs",
        Some(r#"{"app":"a","command":["ls"]}"#),
        &[("idempotency-key", "")],
        StatusCode::BAD_REQUEST,
        "Idempotency-Key",
    )
    .await;
    // Without a JSON content type.
    let (s, v) = call(r, "GET", "/v1/jobs?state=bogus", None, &[]).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(v["error"]["message"].as_str().unwrap().contains("bogus"));
    check(r, "GET", "/v1/jobs/abc", None, &[], StatusCode::BAD_REQUEST, "abc").await;
    check(r, "GET", "/v1/jobs/999", None, &[], StatusCode::NOT_FOUND, "no job 999").await;
    check(r, "GET", "/v1/nope", None, &[], StatusCode::NOT_FOUND, "no such route").await;
    // The list's limit is 1 to 10,000, as the API says, not clamped into it.
    for bad in ["0", "10001"] {
        check(r, "GET", &format!("/v1/jobs?limit={bad}"), None, &[], StatusCode::BAD_REQUEST, "limit").await;
    }
    let (s, v) = call(r, "GET", "/v1/jobs?limit=10000", None, &[]).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    // A known route with another method: 405, with the JSON error body every error has.
    let (s, v) = call(r, "PUT", "/v1/jobs", None, &[]).await;
    assert_eq!((s, v["error"]["code"].as_str()), (StatusCode::METHOD_NOT_ALLOWED, Some("method_not_allowed")), "{v}");
    check(
        r,
        "POST",
        "/v1/profiles",
        Some(r#"{"app":{"name":"p"},"interval_s":0,"samples":[]}"#),
        &[],
        StatusCode::BAD_REQUEST,
        "interval",
    )
    .await;
    t.service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_bodies_are_refused() {
    let t = start("titanxp:1", "tetris");
    let big = format!(r#"{{"app":"a","command":["{}"]}}"#, "x".repeat(2 * 1024 * 1024));
    let (s, v) = call(&t.router, "POST", "/v1/jobs", Some(&big), &[]).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{v}");
    assert_eq!(v["error"]["code"], "payload_too_large");
    let (s, _) = call(&t.router, "GET", "/healthz", None, &[]).await;
    assert_eq!(s, StatusCode::OK);
    t.service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_required_everywhere_but_healthz() {
    let dir = tempfile::tempdir().unwrap();
    let token = "0123456789abcdef-secret";
    let (svc, r) = start_with(config(dir.path().join("data"), "titanxp:1"), "tetris", Some(token));
    let good = format!("Bearer {token}");
    for (hdrs, want) in [
        (vec![], StatusCode::UNAUTHORIZED),
        (vec![("authorization", "Bearer wrong")], StatusCode::UNAUTHORIZED),
        (vec![("authorization", "0123456789abcdef-secret")], StatusCode::UNAUTHORIZED),
        (vec![("authorization", good.as_str())], StatusCode::OK),
    ] {
        for uri in ["/v1/jobs", "/v1/cluster", "/metrics", "/v1/profiles"] {
            let (s, v) = call(&r, "GET", uri, None, &hdrs).await;
            assert_eq!(s, want, "{uri} {hdrs:?}: {v}");
            if want == StatusCode::UNAUTHORIZED {
                assert_eq!(v["error"]["code"], "unauthorized");
            }
        }
    }
    let (s, _) = call(&r, "POST", "/v1/jobs", Some(r#"{"app":"a","command":["true"]}"#), &[]).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let (s, _) = call(&r, "GET", "/healthz", None, &[]).await;
    assert_eq!(s, StatusCode::OK);
    svc.stop().await;
}

#[test]
fn non_loopback_needs_a_token() {
    let mut http = dqngpu_service::HttpConfig { listen: "0.0.0.0:7070".parse().unwrap(), ..Default::default() };
    let e = dqngpu_service::check_listen(&http).unwrap_err();
    assert!(e.to_string().contains("--token-file"), "{e}");
    http.token = Some("long-enough-token".into());
    assert!(dqngpu_service::check_listen(&http).is_ok());
    http.listen = "[::1]:7070".parse().unwrap();
    http.token = None;
    assert!(dqngpu_service::check_listen(&http).is_ok());
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        "[a-z/._ -]{0,12}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            prop::collection::btree_map(
                prop_oneof![
                    Just("app".to_string()),
                    Just("command".to_string()),
                    Just("env".to_string()),
                    "[a-z]{1,6}"
                ],
                inner,
                0..4
            )
            .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: dqngpu_model::testing::cases_or(96), ..ProptestConfig::default() })]
    /// Random bodies (JSON-shaped or raw bytes) never get a 5xx, and every error is JSON.
    #[test]
    fn random_bodies_never_break_the_api(body in prop_oneof![
        json_value().prop_map(|v| v.to_string()),
        prop::collection::vec(any::<u8>(), 0..64).prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        prop::collection::vec(json_value(), 0..4).prop_map(|v| serde_json::json!({ "jobs": v }).to_string()),
    ], route in 0usize..3) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        rt.block_on(async {
            let t = shared();
            let uri = ["/v1/jobs", "/v1/profiles", "/v1/jobs/batch"][route];
            let (s, v) = call(&t, "POST", uri, Some(&body), &[]).await;
            prop_assert!(s.is_success() || s.is_client_error(), "{s} for {body}: {v}");
            if s.is_client_error() {
                prop_assert!(v["error"]["message"].is_string(), "{v}");
            }
            let (s, _) = call(&t, "GET", "/healthz", None, &[]).await;
            prop_assert_eq!(s, StatusCode::OK);
            Ok(())
        })?;
    }
}

/// The Router of a service whose placement loop is not running: the proptest only drives
/// the HTTP side, and a fresh runtime per case cannot host a loop across cases.
fn shared() -> Router {
    use std::sync::OnceLock;
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    let dir = DIR.get_or_init(|| tempfile::tempdir().unwrap());
    router_without_loop(dir.path(), std::time::Duration::from_secs(5))
}

/// The Router of a service on `dir` whose placement loop is not running, with this request
/// time limit.
fn router_without_loop(dir: &std::path::Path, request_timeout: std::time::Duration) -> Router {
    let cfg = config(dir.join("data"), "titanxp:1");
    let store = dqngpu_service::store::Store::open(&{
        std::fs::create_dir_all(&cfg.data_dir).unwrap();
        cfg.data_dir.join("dqngpu.sqlite")
    })
    .unwrap();
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let core = std::sync::Arc::new(dqngpu_service::Core {
        profiles: dqngpu_service::profiles::ProfileBook::new(&[], vec![]),
        cfg,
        store,
        metrics: Default::default(),
        snapshot: Default::default(),
        wake: Default::default(),
        tx,
        started_unix: 0.0,
    });
    dqngpu_service::app(dqngpu_service::AppState { core, token: None, request_timeout })
}

/// A body that never arrives is answered, after the time limit, with 408 and the JSON error
/// body every error has (it was an empty body).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_body_gets_a_json_408() {
    use tower::ServiceExt;
    let dir = tempfile::tempdir().unwrap();
    let r = router_without_loop(dir.path(), std::time::Duration::from_millis(200));
    let never = futures_util::stream::pending::<Result<Vec<u8>, std::io::Error>>();
    let req = axum::http::Request::post("/v1/jobs")
        .header("content-type", "application/json")
        .body(axum::body::Body::from_stream(never))
        .unwrap();
    let resp = r.oneshot(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::REQUEST_TIMEOUT);
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX).await.unwrap();
    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(v["error"]["code"], "request_timeout", "{v}");
}

/// A job no GPU here could hold would wait for ever: its profile is refused, and so is a job
/// of an app whose (library) profile needs more memory than the largest GPU.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_no_gpu_could_hold_is_refused_not_queued_for_ever() {
    let t = start("titanxp:2", "tetris");
    let big = crate::util::profile_json("bigmem", 20_000.0, 50.0, 5);
    check(&t.router, "POST", "/v1/profiles", Some(&big), &[], StatusCode::UNPROCESSABLE_ENTITY, "20000").await;
    t.service.stop().await;
    // The same profile from a library the service was started with.
    let dir = tempfile::tempdir().unwrap();
    let p: dqngpu_model::AppProfile = serde_json::from_str(&big).unwrap();
    let apps = std::iter::once(("bigmem".to_string(), std::sync::Arc::new(p))).collect();
    let lib = dqngpu_model::AppLibrary::with_derived_classes("big".into(), apps, None);
    let mut cfg = config(dir.path().join("data"), "titanxp:2");
    cfg.libraries = vec![lib];
    let (svc, r) = start_with(cfg, "tetris", None);
    let job = r#"{"app":"bigmem","command":["true"]}"#;
    check(&r, "POST", "/v1/jobs", Some(job), &[], StatusCode::UNPROCESSABLE_ENTITY, "12288").await;
    let batch = format!(r#"{{"jobs":[{{"app":"x","command":["true"]}},{job}]}}"#);
    check(&r, "POST", "/v1/jobs/batch", Some(&batch), &[], StatusCode::UNPROCESSABLE_ENTITY, "jobs[1]").await;
    // A key on a batch would be ignored, and a retried batch queued twice: refused.
    let ok = r#"{"jobs":[{"app":"x","command":["true"]}]}"#;
    check(&r, "POST", "/v1/jobs/batch", Some(ok), &[("idempotency-key", "b1")], StatusCode::BAD_REQUEST, "batch").await;
    let (_, v) = call(&r, "GET", "/v1/jobs", None, &[]).await;
    assert_eq!(v["jobs"].as_array().unwrap().len(), 0, "nothing was queued: {v}");
    svc.stop().await;
}

/// The second audit of the API against docs/openapi.yaml: a query or path that does not parse
/// is a `bad_request`, an `after` past the largest id lists nothing (it wrapped to a negative
/// id and listed every job), a declared oversize body is refused before it is sent, the
/// bearer scheme is case-insensitive, a profile too big for this server's GPUs is a 422 that
/// names this server's largest GPU, and a too-long env name says what its limit is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_paths_sizes_and_schemes_answer_as_the_spec_says() {
    let dir = tempfile::tempdir().unwrap();
    let token = "0123456789abcdef-secret";
    let (svc, r) = start_with(config(dir.path().join("data"), "titanxp:1"), "tetris", Some(token));
    let auth = format!("bearer {token}");
    let h = [("authorization", auth.as_str())];
    for uri in
        ["/v1/jobs?limit=abc", "/v1/jobs?after=-1", "/v1/jobs?foo=1", "/v1/jobs/abc", "/v1/jobs/1/logs?attempt=x"]
    {
        let (s, v) = call(&r, "GET", uri, None, &h).await;
        assert_eq!((s, v["error"]["code"].as_str()), (StatusCode::BAD_REQUEST, Some("bad_request")), "{uri}: {v}");
    }
    let id = crate::util::submit_with(&r, "a", &["true"], &h).await;
    for after in ["9223372036854775807", "9223372036854775808", "18446744073709551615"] {
        let (s, v) = call(&r, "GET", &format!("/v1/jobs?after={after}"), None, &h).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        assert_eq!(v["jobs"].as_array().map(Vec::len), Some(0), "after={after} lists job {id}: {v}");
    }
    let (s, v) = call(&r, "POST", "/v1/jobs", Some("{}"), &[h[0], ("content-length", "5000000")]).await;
    assert_eq!((s, v["error"]["code"].as_str()), (StatusCode::PAYLOAD_TOO_LARGE, Some("payload_too_large")), "{v}");
    // The token is still checked first.
    let (s, _) = call(&r, "POST", "/v1/jobs", Some("{}"), &[("content-length", "5000000")]).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    // 200,000 MiB passes the catalogue's largest card too: still this server's 422.
    for mib in [20_000.0, 200_000.0] {
        let big = crate::util::profile_json("bigmem", mib, 50.0, 5);
        let (s, v) = call(&r, "POST", "/v1/profiles", Some(&big), &h).await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{mib}: {v}");
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(msg.contains("12288") && !msg.contains("143771"), "{msg}");
    }
    let long = "A".repeat(129);
    let body = format!(r#"{{"app":"a","command":["true"],"env":{{"{long}":"x"}}}}"#);
    let (s, v) = call(&r, "POST", "/v1/jobs", Some(&body), &h).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(v["error"]["message"].as_str().unwrap().contains("at most 128 characters"), "{v}");
    svc.stop().await;
}

/// A retry with its key is answered with its job even where the request would now be refused
/// (its program gone from PATH), and a key reused for another request is still a conflict.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_gets_its_job_even_when_its_program_has_gone() {
    let t = start("titanxp:1", "tetris");
    let bin = t.dir.path().join("prog");
    std::fs::write(&bin, "#!/bin/sh\nsleep 30\n").unwrap();
    std::fs::set_permissions(&bin, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let body = serde_json::json!({ "app": "a", "command": [bin.to_str().unwrap()] }).to_string();
    let key = [("idempotency-key", "retry-1")];
    let (s, v) = call(&t.router, "POST", "/v1/jobs", Some(&body), &key).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let id = v["id"].as_u64().unwrap();
    std::fs::remove_file(&bin).unwrap();
    let (s, v) = call(&t.router, "POST", "/v1/jobs", Some(&body), &key).await;
    assert_eq!((s, v["id"].as_u64()), (StatusCode::OK, Some(id)), "{v}");
    let other = serde_json::json!({ "app": "b", "command": [bin.to_str().unwrap()] }).to_string();
    let (s, v) = call(&t.router, "POST", "/v1/jobs", Some(&other), &key).await;
    assert_eq!(s, StatusCode::CONFLICT, "{v}");
    // Without the key the program is looked for again.
    let (s, _) = call(&t.router, "POST", "/v1/jobs", Some(&body), &[]).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    t.service.stop().await;
}

/// `POST /v1/profiles` names a bad sample by its index (among thousands, the client could not
/// find it otherwise), refuses a field a profile has no place for (a misspelt `recorded_on`,
/// dropped without a word before), and checks the app's fields as `POST /v1/jobs` does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_profile_names_its_sample_and_unknown_fields_and_bad_sizes_are_refused() {
    let t = crate::util::start("titanxp:1", "tetris");
    let r = &t.router;
    let ok = serde_json::json!({ "gpu_util_pct": 10.0, "gpu_mem_mib": 100.0, "sm_pct": 10.0, "pcie_mbps": 1.0 });
    let mut samples = vec![ok.clone(); 50];
    samples[37]["gpu_util_pct"] = serde_json::json!(-1.0);
    let body = serde_json::json!({ "app": { "name": "p" }, "interval_s": 1.0, "samples": samples }).to_string();
    check(r, "POST", "/v1/profiles", Some(&body), &[], StatusCode::BAD_REQUEST, "`samples[37].gpu_util_pct`").await;
    let typo = serde_json::json!({ "app": { "name": "p" }, "interval_s": 1.0, "recorded_onn": {}, "samples": [ok] });
    check(r, "POST", "/v1/profiles", Some(&typo.to_string()), &[], StatusCode::UNPROCESSABLE_ENTITY, "`recorded_onn`")
        .await;
    let mut inner = ok.clone();
    inner["gpu_utl"] = serde_json::json!(5);
    let typo = serde_json::json!({ "app": { "name": "p" }, "interval_s": 1.0, "samples": [ok, inner] });
    check(
        r,
        "POST",
        "/v1/profiles",
        Some(&typo.to_string()),
        &[],
        StatusCode::UNPROCESSABLE_ENTITY,
        "`samples[1].gpu_utl`",
    )
    .await;
    let neg = serde_json::json!({ "app": { "name": "q", "input_size_mb": -5.0 }, "interval_s": 1.0, "samples": [ok] });
    check(r, "POST", "/v1/profiles", Some(&neg.to_string()), &[], StatusCode::BAD_REQUEST, "`app.input_size_mb`").await;
    // A null optional field is absent, and a good profile is still taken.
    let fine = serde_json::json!({ "app": { "name": "q", "params": null }, "interval_s": 1.0, "recorded_on": null, "samples": [ok] });
    let (s, v) = crate::util::call(r, "POST", "/v1/profiles", Some(&fine.to_string()), &[]).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    t.service.stop().await;
}
