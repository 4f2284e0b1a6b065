//! The HTTP API under `/v1` (see docs/openapi.yaml). Handlers are adapters: they validate,
//! call the store, and wake the placement loop; no placement logic lives here.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::json;
use subtle::ConstantTimeEq;

use dqngpu_model::{AppProfile, JobId};

use crate::body::StrictJson;
use crate::error::ApiError;
use crate::exec;
use crate::jobs::{AttemptRecord, JobRecord, JobState, NewJob};
use crate::placement::LoopMsg;
use crate::profiles::ProfileSource;
use crate::store::CancelOutcome;
use crate::validate::{self, SubmitRequest};
use crate::{unix_now, Core};

/// Largest request body, bytes.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// Everything a handler needs: cheap to clone.
#[derive(Clone)]
pub struct AppState {
    /// The service.
    pub core: Arc<Core>,
    /// Bearer token every route but `/healthz` requires, when set.
    pub token: Option<Arc<str>>,
    /// Per-request time limit.
    pub request_timeout: Duration,
}

/// The router: `/v1/...`, `/healthz`, `/metrics`. Tests drive it without a socket.
pub fn app(state: AppState) -> Router {
    let timeout = state.request_timeout;
    Router::new()
        .route("/v1/jobs", get(list_jobs).post(submit))
        .route("/v1/jobs/batch", axum::routing::post(submit_batch))
        .route("/v1/jobs/{id}", get(get_job).delete(cancel))
        .route("/v1/jobs/{id}/logs", get(logs))
        .route("/v1/cluster", get(cluster))
        .route("/v1/profiles", get(list_profiles).post(post_profile))
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .fallback(|| async { ApiError::NotFound("no such route".into()) })
        // A known route asked with another method: 405 with the same JSON error body as the rest.
        .method_not_allowed_fallback(|method: axum::http::Method| async move {
            ApiError::Rejected {
                status: StatusCode::METHOD_NOT_ALLOWED,
                message: format!("method {method} is not allowed on this route"),
            }
        })
        .layer(middleware::from_fn(refuse_declared_oversize))
        // The token is checked before anything about the body.
        .layer(middleware::from_fn_with_state(state.clone(), auth))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn_with_state(timeout, time_limit))
        .layer(tower_http::trace::TraceLayer::new_for_http())
        .with_state(state)
}

/// Answers a request that runs past `limit` (a client that stalls sending its body) with 408
/// and the JSON error body every other error has.
async fn time_limit(State(limit): State<Duration>, req: Request, next: Next) -> Response {
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(resp) => resp,
        Err(_) => ApiError::Rejected {
            status: StatusCode::REQUEST_TIMEOUT,
            message: format!("the request took longer than {} s (its body was not sent in time?)", limit.as_secs_f64()),
        }
        .into_response(),
    }
}

/// Refuses a body whose declared length is over [`MAX_BODY_BYTES`] at once (413), rather than
/// waiting for it to arrive.
async fn refuse_declared_oversize(req: Request, next: Next) -> Response {
    let declared = req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return ApiError::Rejected {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            message: format!("the body is {} bytes; at most {MAX_BODY_BYTES}", declared.unwrap_or_default()),
        }
        .into_response();
    }
    next.run(req).await
}

/// Checks the bearer token in constant time on every route but `/healthz`.
async fn auth(State(s): State<AppState>, req: Request, next: Next) -> Response {
    let Some(token) = &s.token else { return next.run(req).await };
    if req.uri().path() == "/healthz" {
        return next.run(req).await;
    }
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        // The scheme's name is case-insensitive (RFC 9110, 11.1).
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map_or("", |(_, t)| t.trim_start_matches(' '));
    if bool::from(given.as_bytes().ct_eq(token.as_bytes())) {
        next.run(req).await
    } else {
        ApiError::Unauthorized.into_response()
    }
}

/// Reply to a submission.
#[derive(Debug, Serialize, Deserialize)]
pub struct Submitted {
    /// Job id.
    pub id: JobId,
    /// Its state.
    pub state: JobState,
}

async fn submit(
    State(s): State<AppState>,
    headers: HeaderMap,
    StrictJson(req): StrictJson<SubmitRequest>,
) -> Result<Response, ApiError> {
    let key = match headers.get("idempotency-key") {
        Some(v) => {
            let k = v.to_str().map_err(|_| ApiError::BadRequest("header `Idempotency-Key`: not ASCII".into()))?;
            validate::idempotency_key(k)?;
            Some(k.to_string())
        }
        None => None,
    };
    // A retry is answered with its job before the request is checked again: what the checks
    // look at (the program on PATH, the profiles) may have changed since the job was queued.
    if let Some(k) = key.as_deref() {
        if let Some(rec) = s.core.store.job_by_key(k)? {
            same_request(&rec, &NewJob::from(req), k)?;
            return Ok((StatusCode::OK, Json(Submitted { id: rec.id, state: rec.state })).into_response());
        }
    }
    let job = validate::submission(req)?;
    fits_a_gpu(&s, &job.app)?;
    let (rec, created) = s.core.store.insert_job(&job, key.as_deref(), unix_now())?;
    if !created {
        same_request(&rec, &job, key.as_deref().unwrap_or_default())?;
    }
    let status = if created {
        s.core.metrics.submissions.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        s.core.wake.notify_one();
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(Submitted { id: rec.id, state: rec.state })).into_response())
}

/// A key names one request: a retry sends the same body; another job must take another key.
fn same_request(rec: &JobRecord, sent: &NewJob, key: &str) -> Result<(), ApiError> {
    if rec.spec == *sent {
        return Ok(());
    }
    Err(ApiError::Conflict(format!(
        "header `Idempotency-Key`: `{key}` was used for job {} with another request; a retry sends the same body, a new job takes a new key",
        rec.id
    )))
}

/// Most jobs in one batch.
pub const MAX_BATCH: usize = 1000;

/// A batch submission: the jobs, queued together.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BatchRequest {
    /// The jobs, in order (their ids follow it).
    pub jobs: Vec<SubmitRequest>,
}

/// Queues every job of a batch in one transaction and wakes the placement loop once, so it
/// decides over the whole batch (a job set given at once, as `simulate` takes it), not the
/// first job alone. All or nothing: an invalid job refuses the batch, naming its index.
async fn submit_batch(
    State(s): State<AppState>,
    headers: HeaderMap,
    StrictJson(req): StrictJson<BatchRequest>,
) -> Result<Response, ApiError> {
    // Keys are per job (POST /v1/jobs); one ignored here would let a retried batch queue twice.
    if headers.contains_key("idempotency-key") {
        return Err(ApiError::BadRequest(
            "header `Idempotency-Key`: a batch takes none; submit jobs one by one to retry them safely".into(),
        ));
    }
    if req.jobs.is_empty() || req.jobs.len() > MAX_BATCH {
        return Err(ApiError::BadRequest(format!(
            "field `jobs`: {} jobs; a batch holds 1 to {MAX_BATCH}",
            req.jobs.len()
        )));
    }
    let jobs = req
        .jobs
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            let job = validate::submission(r).and_then(|job| fits_a_gpu(&s, &job.app).map(|()| job));
            job.map_err(|e| match e {
                ApiError::BadRequest(m) => ApiError::BadRequest(format!("jobs[{i}]: {m}")),
                ApiError::Unprocessable(m) => ApiError::Unprocessable(format!("jobs[{i}]: {m}")),
                other => other,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let recs = s.core.store.insert_jobs(&jobs, unix_now())?;
    s.core.metrics.submissions.fetch_add(recs.len() as u64, std::sync::atomic::Ordering::Relaxed);
    s.core.wake.notify_one();
    let out: Vec<Submitted> = recs.into_iter().map(|r| Submitted { id: r.id, state: r.state }).collect();
    Ok((StatusCode::CREATED, Json(json!({ "jobs": out }))).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    state: Option<String>,
    after: Option<JobId>,
    limit: Option<usize>,
}

async fn list_jobs(
    State(s): State<AppState>,
    q: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(q) = q?;
    let state = match q.state.as_deref() {
        None | Some("") => None,
        Some(st) => Some(JobState::parse(st).ok_or_else(|| {
            ApiError::BadRequest(format!(
                "query `state`: `{st}` is not a job state; valid: queued, running, succeeded, failed, cancelled"
            ))
        })?),
    };
    // The API's contract (docs/openapi.yaml): 1 to 10,000, not silently clamped into range.
    let limit = match q.limit {
        None => 1000,
        Some(n @ 1..=10_000) => n,
        Some(n) => return Err(ApiError::BadRequest(format!("query `limit`: {n} is not from 1 to 10000"))),
    };
    let body = jobs_page(&s, state, q.after.unwrap_or(0), limit)?;
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

/// Most bytes of job rows in one `GET /v1/jobs` page: past them the page ends early (with at
/// least one job) and `next_after` says where the next one starts. A job's argv and env may
/// each be near the 1 MiB body limit, so a count alone bounds neither the reply nor the
/// server's memory.
pub const MAX_PAGE_BYTES: usize = 8 * 1024 * 1024;

/// Jobs read from the store at a time while a page is built.
const PAGE_CHUNK: usize = 32;

/// One page of `GET /v1/jobs` as JSON, `{"jobs": [...], "next_after": ID|null}`: up to
/// `limit` jobs with ids above `after` (in `state`, when given), each serialized straight into
/// the reply, ending early past [`MAX_PAGE_BYTES`]. `next_after` is the last id listed when
/// more jobs follow, and null when the list is complete.
fn jobs_page(s: &AppState, state: Option<JobState>, after: JobId, limit: usize) -> Result<Vec<u8>, ApiError> {
    let mut out = b"{\"jobs\":[".to_vec();
    let (mut cursor, mut listed, mut more) = (after, 0usize, false);
    'pages: loop {
        // One more than the page still takes: the row past the end tells whether more follow.
        let want = (limit - listed + 1).min(PAGE_CHUNK);
        let chunk = s.core.store.jobs(state, cursor, want)?;
        let got = chunk.len();
        for job in chunk {
            if listed == limit {
                more = true;
                break 'pages;
            }
            let row = serde_json::to_vec(&job).map_err(crate::ServiceError::from)?;
            if listed > 0 && out.len() + 1 + row.len() > MAX_PAGE_BYTES {
                more = true;
                break 'pages;
            }
            if listed > 0 {
                out.push(b',');
            }
            out.extend_from_slice(&row);
            listed += 1;
            cursor = job.id;
        }
        if got < want {
            break;
        }
    }
    out.extend_from_slice(b"],\"next_after\":");
    out.extend_from_slice(if more { cursor.to_string() } else { "null".to_string() }.as_bytes());
    out.push(b'}');
    Ok(out)
}

/// A job with its attempts.
#[derive(Debug, Serialize, Deserialize)]
pub struct JobDetail {
    /// The job.
    #[serde(flatten)]
    pub job: JobRecord,
    /// Every attempt, oldest first.
    pub history: Vec<AttemptRecord>,
}

fn job_id(p: Result<Path<JobId>, PathRejection>) -> Result<JobId, ApiError> {
    Ok(p?.0)
}

async fn get_job(
    State(s): State<AppState>,
    id: Result<Path<JobId>, PathRejection>,
) -> Result<Json<JobDetail>, ApiError> {
    let id = job_id(id)?;
    let job = s.core.store.job(id)?.ok_or_else(|| ApiError::NotFound(format!("no job {id}")))?;
    let history = s.core.store.attempts(id)?;
    Ok(Json(JobDetail { job, history }))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LogsQuery {
    attempt: Option<u32>,
}

async fn logs(
    State(s): State<AppState>,
    id: Result<Path<JobId>, PathRejection>,
    q: Result<Query<LogsQuery>, QueryRejection>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let id = job_id(id)?;
    let Query(q) = q?;
    let job = s.core.store.job(id)?.ok_or_else(|| ApiError::NotFound(format!("no job {id}")))?;
    let n = q.attempt.unwrap_or(job.attempts);
    if n == 0 || n > job.attempts {
        return Err(ApiError::NotFound(format!("job {id} has no attempt {n} (it has {})", job.attempts)));
    }
    let dir = s.core.attempt_dir(id, n);
    const MAX: u64 = 256 * 1024;
    Ok(Json(json!({
        "id": id,
        "attempt": n,
        "stdout": exec::tail(&dir.join("stdout"), MAX),
        "stderr": exec::tail(&dir.join("stderr"), MAX),
    })))
}

async fn cancel(State(s): State<AppState>, id: Result<Path<JobId>, PathRejection>) -> Result<Response, ApiError> {
    let id = job_id(id)?;
    match s.core.store.cancel(id, unix_now())? {
        None => Err(ApiError::NotFound(format!("no job {id}"))),
        Some(CancelOutcome::Cancelled) => {
            Ok((StatusCode::OK, Json(json!({ "id": id, "state": "cancelled" }))).into_response())
        }
        Some(CancelOutcome::StopRunning) => {
            let _ = s.core.tx.send(LoopMsg::Cancel(id));
            Ok((StatusCode::ACCEPTED, Json(json!({ "id": id, "state": "running", "cancel_requested": true })))
                .into_response())
        }
        Some(CancelOutcome::AlreadyFinal(st)) => {
            Err(ApiError::Conflict(format!("job {id} already finished: {}", st.as_str())))
        }
    }
}

async fn cluster(State(s): State<AppState>) -> Result<Json<serde_json::Value>, ApiError> {
    let mut snap = s.core.snapshot.read().map(|g| g.clone()).map_err(|_| crate::ServiceError::Poisoned)?;
    // Every job waiting now, from the store: the loop's own count stops at its window and
    // dates from its last pass.
    snap.queued = s.core.store.count_by_state()?.get(&JobState::Queued).copied().unwrap_or(0) as usize;
    Ok(Json(serde_json::to_value(snap).map_err(crate::ServiceError::from)?))
}

async fn list_profiles(State(s): State<AppState>) -> Json<serde_json::Value> {
    let list: Vec<_> = s
        .core
        .profiles
        .all()
        .into_iter()
        .map(|(key, p, src)| {
            let sum = p.summary();
            // `profile`: the key a job names it by, which is not the app name where a library
            // has several profiles of one app (they were listed as `bert` twice).
            json!({ "app": p.app.name, "profile": key, "source": src, "solo_s": sum.solo_s, "mean": sum.mean,
                    "peak": sum.peak, "interval_s": p.interval_s, "samples": p.samples.len() })
        })
        .collect();
    Json(json!({ "profiles": list }))
}

async fn post_profile(State(s): State<AppState>, StrictJson(p): StrictJson<AppProfile>) -> Result<Response, ApiError> {
    validate::app_name(&p.app.name)?;
    validate::app_fields(p.app.input_size_mb, p.app.params.as_deref(), "app.")?;
    // A profile no GPU here can hold would leave every job of its app queued for ever: 422,
    // measured against this server's GPUs, whatever else is wrong with it (its peak can pass
    // the catalogue's largest card too).
    too_big_here(&s, &p).map_err(|m| ApiError::Unprocessable(format!("profile: {m}")))?;
    p.validate().map_err(|e| ApiError::BadRequest(format!("profile: {e}")))?;
    let replaced = s.core.store.put_profile(&p, ProfileSource::Api.as_str(), unix_now())?;
    let name = p.app.name.clone();
    s.core.profiles.put(p, ProfileSource::Api);
    s.core.wake.notify_one();
    // 201 for a new app's profile, 200 when it replaced one (posted or observed): the client
    // is told, not left to find out.
    let status = if replaced { StatusCode::OK } else { StatusCode::CREATED };
    Ok((status, Json(json!({ "app": name, "replaced": replaced }))).into_response())
}

/// The memory of the largest GPU this service places on, MiB.
fn largest_gpu_mib(s: &AppState) -> f64 {
    s.core.cfg.gpus.iter().map(|g| g.spec.memory_mib).fold(0.0, f64::max)
}

/// What is wrong when `p`'s peak memory is more than the largest GPU here has.
fn too_big_here(s: &AppState, p: &AppProfile) -> Result<(), String> {
    let (largest, (peak, i)) = (largest_gpu_mib(s), p.peak_mem());
    if peak > largest {
        return Err(format!(
            "app `{}` needs {peak} MiB of GPU memory at its peak (sample {i}), more than the largest GPU here ({largest} MiB)",
            p.app.name
        ));
    }
    Ok(())
}

/// Refuses a job whose app's profile needs more memory than any GPU here has: no policy
/// could place it, so it would wait for ever (the simulator refuses such a job set too).
fn fits_a_gpu(s: &AppState, app: &str) -> Result<(), ApiError> {
    match s.core.profiles.get(app) {
        Some(p) => too_big_here(s, &p).map_err(|m| ApiError::Unprocessable(format!("field `app`: {m}"))),
        None => Ok(()),
    }
}

async fn healthz() -> Json<serde_json::Value> {
    Json(json!({ "status": "ok" }))
}

async fn metrics(State(s): State<AppState>) -> Result<Response, ApiError> {
    use std::fmt::Write;
    let mut out = String::new();
    let counts = s.core.store.count_by_state()?;
    let _ = writeln!(out, "# HELP dqngpu_jobs Jobs by state.\n# TYPE dqngpu_jobs gauge");
    for (st, n) in counts {
        let _ = writeln!(out, "dqngpu_jobs{{state=\"{}\"}} {n}", st.as_str());
    }
    s.core.metrics.render(&mut out);
    if let Ok(snap) = s.core.snapshot.read() {
        let _ = writeln!(out, "# HELP dqngpu_gpu_jobs Jobs running per GPU.\n# TYPE dqngpu_gpu_jobs gauge");
        for g in &snap.gpus {
            let _ = writeln!(out, "dqngpu_gpu_jobs{{gpu=\"{}\"}} {}", g.index, g.jobs.len());
        }
        let _ = writeln!(
            out,
            "# HELP dqngpu_gpu_profile_mem_mib GPU memory the running jobs' profiles use now.\n# TYPE dqngpu_gpu_profile_mem_mib gauge"
        );
        for g in &snap.gpus {
            let _ = writeln!(out, "dqngpu_gpu_profile_mem_mib{{gpu=\"{}\"}} {}", g.index, g.profile_demand.gpu_mem_mib);
        }
        let _ = writeln!(out, "# HELP dqngpu_gpu_measured_util_pct GPU utilisation NVML measured.\n# TYPE dqngpu_gpu_measured_util_pct gauge");
        for g in &snap.gpus {
            if let Some(m) = g.measured {
                let _ = writeln!(out, "dqngpu_gpu_measured_util_pct{{gpu=\"{}\"}} {}", g.index, m.gpu_util_pct);
            }
        }
    }
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out).into_response())
}
