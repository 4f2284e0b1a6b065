//! End-to-end tests of `dqngpu serve` with the real binary on loopback, virtual GPUs, a real
//! SQLite file and real child processes (issue 5 acceptance: end-to-end and crash tests).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{alive, fake_nvml, BIN};
use serde_json::{json, Value};

/// A fresh directory for service test `name`.
fn test_dir(name: &str) -> PathBuf {
    common::test_dir(&format!("service-{name}"))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

struct Server {
    child: Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(data: &Path, port: u16, scheduler: &str) -> Server {
    serve_with(data, port, scheduler, &[])
}

/// [`serve`] with more flags (a model, ...).
fn serve_with(data: &Path, port: u16, scheduler: &str, extra: &[&std::ffi::OsStr]) -> Server {
    serve_from(Path::new(BIN), data, port, scheduler, extra, None)
}

/// [`serve_with`], the server started from the binary at `bin`, under the fake NVML `nvml`
/// where given (`tests/data/fake_nvml.c`: one A100).
fn serve_from(
    bin: &Path,
    data: &Path,
    port: u16,
    scheduler: &str,
    extra: &[&std::ffi::OsStr],
    nvml: Option<&Path>,
) -> Server {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(data.with_extension("log")).unwrap();
    let mut command = Command::new(bin);
    if let Some(lib) = nvml {
        command.env("DQNGPU_NVML_LIB", lib);
    }
    let child = command
        .args(["serve", "--gpus", "titanxp:2", "--tick-ms", "50", "--scheduler", scheduler])
        .args(extra)
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--data-dir")
        .arg(data)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    // Owned by `Server` at once, so its Drop reaps the child on every path.
    let server = Server { child, url: format!("http://127.0.0.1:{port}") };
    for _ in 0..500 {
        if ureq::get(&format!("{}/healthz", server.url)).call().is_ok() {
            return server;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("the service did not come up");
}

fn get(url: &str) -> Value {
    ureq::get(url).call().unwrap().into_json().unwrap()
}

fn post(url: &str, body: Value) -> Value {
    match ureq::post(url).send_json(body) {
        Ok(r) => r.into_json().unwrap(),
        Err(ureq::Error::Status(c, r)) => panic!("{c}: {}", r.into_string().unwrap_or_default()),
        Err(e) => panic!("{e}"),
    }
}

fn profile(app: &str, mem_mib: f64, util: f64) -> Value {
    let s = json!({ "gpu_util_pct": util, "gpu_mem_mib": mem_mib, "sm_pct": util, "pcie_mbps": 10.0 });
    json!({ "app": { "name": app }, "interval_s": 1.0, "samples": vec![s; 30] })
}

fn all_jobs(url: &str) -> Vec<Value> {
    get(&format!("{url}/v1/jobs?limit=10000"))["jobs"].as_array().unwrap().clone()
}

fn wait_all_final(url: &str, n: usize) -> Vec<Value> {
    for _ in 0..3000 {
        let jobs = all_jobs(url);
        if jobs.len() == n
            && jobs.iter().all(|j| matches!(j["state"].as_str(), Some("succeeded" | "failed" | "cancelled")))
        {
            return jobs;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("jobs did not finish");
}

/// Submits job `i` of app `app` (idempotency key `job-I`) running `script` in `sh`.
fn submit(url: &str, app: &str, i: usize, script: &str) {
    let out = Command::new(BIN)
        .args(["submit", "--app", app, "--server", url, "--idempotency-key", &format!("job-{i}")])
        .args(["--", "sh", "-c", script])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Per GPU, the (start, finish) of every run of `jobs` there, from each job's history.
fn runs_by_gpu(url: &str, jobs: &[Value]) -> BTreeMap<u64, Vec<(f64, f64)>> {
    let mut runs: BTreeMap<u64, Vec<(f64, f64)>> = BTreeMap::new();
    for j in jobs {
        for a in get(&format!("{url}/v1/jobs/{}", j["id"]))["history"].as_array().unwrap() {
            let (s, e) = (a["started_at"].as_f64().unwrap(), a["finished_at"].as_f64().unwrap());
            runs.entry(a["gpu"].as_u64().unwrap()).or_default().push((s, e));
        }
    }
    runs
}

/// The most runs that were ever on one GPU at once (counted at each run's start).
fn most_together(runs: &BTreeMap<u64, Vec<(f64, f64)>>) -> usize {
    let at = |runs: &[(f64, f64)], t: f64| runs.iter().filter(|&&(s, e)| s <= t && t < e).count();
    runs.values().flat_map(|r| r.iter().map(|&(start, _)| at(r, start))).max().unwrap_or(0)
}

#[test]
fn twenty_jobs_run_on_the_gpus_the_service_reports() {
    let dir = test_dir("e2e");
    let data = dir.join("data");
    let server = serve(&data, free_port(), "tetris");
    // 5000 MiB each on 12288 MiB cards: two fit on a GPU together, three do not.
    post(&format!("{}/v1/profiles", server.url), profile("recorder", 5000.0, 20.0));
    for i in 0..20 {
        submit(&server.url, "recorder", i, "echo $CUDA_VISIBLE_DEVICES > seen; sleep 0.4");
    }
    let jobs = wait_all_final(&server.url, 20);
    // The CLI lists the same jobs.
    let out = Command::new(BIN).args(["jobs", "--format", "json", "--server", &server.url]).output().unwrap();
    let listed: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed.len(), 20);
    for j in &jobs {
        let id = j["id"].as_u64().unwrap();
        assert_eq!(j["state"], "succeeded", "{j}");
        let gpu = j["gpu"].as_u64().unwrap();
        let seen = std::fs::read_to_string(data.join(format!("jobs/{id}/work/seen"))).unwrap();
        assert_eq!(seen.trim(), gpu.to_string(), "job {id} saw another GPU than reported");
    }
    // At no time do the profiles of the jobs sharing a GPU exceed its memory.
    let runs = runs_by_gpu(&server.url, &jobs);
    let together = most_together(&runs);
    assert!(together as f64 * 5000.0 <= 12288.0, "{together} jobs of 5000 MiB shared a 12288 MiB GPU");
    assert_eq!(together, 2, "the jobs should have shared GPUs (two fit)");
    assert_eq!(runs.len(), 2, "both GPUs should have been used");
}

/// `dqngpu-plan` in the service (an untrained scorer from `train --iterations 0`): one
/// instance for the service's life, its promise carried from decision to decision, and each
/// wave of arrivals beginning a new epoch. Real jobs in two waves all succeed, and the jobs
/// sharing a GPU never hold more memory than it has.
#[test]
fn the_plan_places_real_jobs_arriving_in_waves() {
    let dir = test_dir("plan");
    let model = common::untrained_model(&dir);
    let data = dir.join("data");
    let server = serve_with(&data, free_port(), "dqngpu-plan", &["--model".as_ref(), model.as_os_str()]);
    assert_eq!(get(&format!("{}/v1/cluster", server.url))["policy"], "dqngpu-plan");
    // 4000 MiB each on 12288 MiB cards: three fit on a GPU together, four do not.
    post(&format!("{}/v1/profiles", server.url), profile("wave", 4000.0, 30.0));
    (0..6).for_each(|i| submit(&server.url, "wave", i, "sleep 0.3"));
    std::thread::sleep(Duration::from_millis(400));
    (6..12).for_each(|i| submit(&server.url, "wave", i, "sleep 0.3"));
    let jobs = wait_all_final(&server.url, 12);
    for j in &jobs {
        assert_eq!(j["state"], "succeeded", "{j}");
    }
    let together = most_together(&runs_by_gpu(&server.url, &jobs));
    assert!(together as f64 * 4000.0 <= 12288.0, "{together} jobs of 4000 MiB shared a 12288 MiB GPU");
}

#[test]
fn kill_9_restarts_lose_no_job_and_rerun_none() {
    let dir = test_dir("crash");
    let data = dir.join("data");
    let effects = dir.join("effects");
    let port = free_port();
    let mut server = serve(&data, port, "tetris");
    let url = server.url.clone();
    post(&format!("{url}/v1/profiles"), profile("crashy", 1000.0, 10.0));
    let script = format!("echo $DQNGPU_JOB_ID:$DQNGPU_ATTEMPT >> {}; sleep 0.5", effects.display());
    for i in 0..200 {
        let body = json!({ "app": "crashy", "command": ["sh", "-c", script] });
        let r = ureq::post(&format!("{url}/v1/jobs")).set("Idempotency-Key", &format!("c{i}")).send_json(body).unwrap();
        assert_eq!(r.status(), 201);
    }
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(800));
        let jobs = all_jobs(&url);
        let done = jobs.iter().filter(|j| j["state"] == "succeeded").count();
        let running = jobs.iter().filter(|j| j["state"] == "running").count();
        assert!(done < 200 && running > 0, "the kill must land while jobs run ({done} done, {running} running)");
        server.child.kill().unwrap(); // SIGKILL
        server.child.wait().unwrap();
        server = serve(&data, port, "tetris");
    }
    let jobs = wait_all_final(&url, 200);
    let text = std::fs::read_to_string(&effects).unwrap();
    let mut effects_of: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for line in text.lines() {
        let (j, a) = line.split_once(':').unwrap();
        effects_of.entry(j.parse().unwrap()).or_default().push(a.parse().unwrap());
    }
    for j in &jobs {
        let id = j["id"].as_u64().unwrap();
        assert_eq!(j["state"], "succeeded", "{j}");
        let d = get(&format!("{url}/v1/jobs/{id}"));
        let ok: Vec<u64> = d["history"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["state"] == "succeeded")
            .map(|a| a["n"].as_u64().unwrap())
            .collect();
        assert_eq!(ok.len(), 1, "job {id}: {d}");
        assert_eq!(effects_of.get(&id), Some(&ok), "job {id}: side effects vs successful attempts; {d}");
    }
}

/// The pid in `path` once it is written (`None` after ~10 s).
fn wait_pid(path: &Path) -> Option<u32> {
    for _ in 0..500 {
        if let Some(p) = std::fs::read_to_string(path).ok().and_then(|t| t.trim().parse().ok()) {
            return Some(p);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// A server on a fresh data dir for test `name`, with a profile of `app`, and a folder for
/// its jobs' pids.
struct Watched {
    dir: PathBuf,
    data: PathBuf,
    port: u16,
    server: Server,
    pids: PathBuf,
}

fn watched(name: &str, app: &str) -> Watched {
    let dir = test_dir(name);
    let data = dir.join("data");
    let port = free_port();
    let server = serve(&data, port, "tetris");
    post(&format!("{}/v1/profiles", server.url), profile(app, 1000.0, 10.0));
    let pids = dir.join("pids");
    std::fs::create_dir_all(&pids).unwrap();
    Watched { dir, data, port, server, pids }
}

/// Submits `script` (run by `sh -c`) as a job of `app`; its id.
fn submit_script(url: &str, app: &str, script: &str) -> u64 {
    post(&format!("{url}/v1/jobs"), json!({ "app": app, "command": ["sh", "-c", script] }))["id"].as_u64().unwrap()
}

/// When a job's supervisor dies (SIGKILL, the OOM killer), the job is re-run, and the first
/// attempt's process is ended: it must not run beside its re-run. A job's background children
/// end with the job.
#[test]
fn a_lost_attempt_never_runs_beside_its_rerun_and_leftovers_end_with_the_job() {
    let Watched { server, pids, .. } = watched("lost", "lonely");
    let url = server.url.clone();
    let script = format!("echo $$ > {}/attempt-$DQNGPU_ATTEMPT; exec sleep 60", pids.display());
    let id = submit_script(&url, "lonely", &script);
    // Its supervisor is its parent: kill it as the OOM killer would.
    let (first, shim) = supervisor_of(&pids.join("attempt-1"));
    Command::new("kill").args(["-9", &shim.to_string()]).status().unwrap();
    let second = wait_pid(&pids.join("attempt-2")).expect("the job was not re-run");
    let gone = (0..250).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        !alive(first)
    });
    assert!(gone, "attempt 1 ({first}) still runs beside attempt 2 ({second})");
    assert!(alive(second));
    ureq::delete(&format!("{url}/v1/jobs/{id}")).call().unwrap();
    // A job that leaves a child behind: the child ends when the job does.
    let script = format!("sleep 60 & echo $! > {}/bg; exit 0", pids.display());
    post(&format!("{url}/v1/jobs"), json!({ "app": "lonely", "command": ["sh", "-c", script] }));
    let bg = wait_pid(&pids.join("bg")).expect("the second job never started");
    let gone = (0..250).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        !alive(bg)
    });
    assert!(gone, "the job's background child {bg} outlived it");
    wait_all_final(&url, 2);
}

/// (the job's pid, its supervisor's pid): the pid the job wrote to `pid_file`, and its parent.
fn supervisor_of(pid_file: &Path) -> (u32, i32) {
    let job = wait_pid(pid_file).expect("the job never started");
    let stat = std::fs::read_to_string(format!("/proc/{job}/stat")).unwrap();
    let shim: i32 = stat[stat.rfind(')').unwrap() + 1..].split_whitespace().nth(1).unwrap().parse().unwrap();
    (job, shim)
}

/// A server and a job's supervisor killed together (a host's OOM killer, a power cut of the
/// server's cgroup): at the restart the job's process, which ignores SIGTERM, is ended and
/// waited for before the job runs again, so its two attempts never run at once.
#[test]
fn after_a_crash_a_lost_attempt_that_ignores_sigterm_ends_before_its_rerun() {
    let Watched { data, port, mut server, pids, .. } = watched("lost-restart", "stubborn");
    let url = server.url.clone();
    let script =
        format!("trap '' TERM; echo $$ > {}/attempt-$DQNGPU_ATTEMPT; while :; do sleep 0.05; done", pids.display());
    let id = submit_script(&url, "stubborn", &script);
    let (first, shim) = supervisor_of(&pids.join("attempt-1"));
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    Command::new("kill").args(["-9", &shim.to_string()]).status().unwrap();
    assert!(alive(first), "the job must outlive its supervisor for this test");
    let server = serve(&data, port, "tetris");
    let second = wait_pid(&pids.join("attempt-2")).expect("the job was not re-run");
    // By the time attempt 2 has started, attempt 1 has been killed (SIGKILL after the grace).
    assert!(!alive(first), "attempt 1 ({first}) still runs beside attempt 2 ({second})");
    ureq::delete(&format!("{url}/v1/jobs/{id}")).call().unwrap();
    wait_all_final(&server.url, 1);
}

/// A cancel accepted (202) just before the server is killed, inside the job's grace: the stop
/// died with the server, so the restarted server stops the adopted job again; it does not run
/// to its end.
#[test]
fn a_cancel_accepted_before_a_crash_still_stops_the_job() {
    let Watched { dir, data, port, mut server, pids } = watched("cancel-crash", "slow");
    let url = server.url.clone();
    let done = dir.join("ran-to-the-end");
    let script = format!("trap '' TERM; echo $$ > {}/job; sleep 6; touch {}", pids.display(), done.display());
    let id = submit_script(&url, "slow", &script);
    let (pid, _) = supervisor_of(&pids.join("job"));
    let r = ureq::delete(&format!("{url}/v1/jobs/{id}")).call().unwrap();
    assert_eq!(r.status(), 202);
    server.child.kill().unwrap(); // before the 3 s grace ends in a SIGKILL
    server.child.wait().unwrap();
    let _server = serve(&data, port, "tetris");
    let gone = (0..300).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        !alive(pid)
    });
    assert!(gone, "the cancelled job ({pid}) still runs after the restart");
    let jobs = wait_all_final(&url, 1);
    assert_eq!(jobs[0]["state"], "cancelled", "{}", jobs[0]);
    assert!(!done.exists(), "the cancelled job ran to its end");
}

/// A placement loop blocked in a file read (here the job's stderr, replaced by a FIFO no one
/// writes; a slow disk or NFS in life) holds up only itself: the API, `/healthz` included,
/// still answers (it stalled with the loop when the loop ran on the API's threads).
#[test]
fn the_api_answers_while_the_placement_loop_is_blocked() {
    let dir = test_dir("blocked-loop");
    let data = dir.join("data");
    let server = serve(&data, free_port(), "tetris");
    let url = server.url.clone();
    let script = "if [ $DQNGPU_ATTEMPT = 1 ]; then rm ../attempt-1/stderr; mkfifo ../attempt-1/stderr; exit 1; fi";
    let job = post(&format!("{url}/v1/jobs"), json!({ "app": "fifo", "command": ["sh", "-c", script] }));
    let id = job["id"].as_u64().unwrap();
    let fifo = data.join(format!("jobs/{id}/attempt-1/stderr"));
    let made = (0..250).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        std::fs::symlink_metadata(&fifo).is_ok_and(|m| std::os::unix::fs::FileTypeExt::is_fifo(&m.file_type()))
    });
    assert!(made, "the job never made its FIFO");
    // The job has exited; the loop now blocks reading its stderr.
    std::thread::sleep(Duration::from_millis(500));
    let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(2)).build();
    let started = std::time::Instant::now();
    let health = agent.get(&format!("{url}/healthz")).call();
    assert!(health.is_ok(), "/healthz did not answer while the loop was blocked: {health:?}");
    assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
    // Unblock the loop (a writer opens the FIFO and closes it): the job's end is recorded.
    std::fs::write(&fifo, b"done\n").unwrap();
    let jobs = wait_all_final(&url, 1);
    assert_eq!(jobs[0]["state"], "succeeded", "{}", jobs[0]);
}

/// A second `dqngpu serve` on a data dir in use exits non-zero at once, naming the dir and the
/// first server's pid (two would overbook the GPUs and adopt each other's jobs); once the
/// first is SIGKILLed, the dir is free again (the OS drops a dead process's lock).
#[test]
fn a_second_server_on_one_data_dir_is_refused_until_the_first_dies() {
    let data = test_dir("two-servers").join("data");
    let mut first = serve(&data, free_port(), "tetris");
    let mut second = Command::new(BIN)
        .args(["serve", "--gpus", "titanxp:2", "--tick-ms", "50", "--listen"])
        .arg(format!("127.0.0.1:{}", free_port()))
        .arg("--data-dir")
        .arg(&data)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Bounded wait: a second server that started would serve forever.
    let status = (0..500).find_map(|_| {
        std::thread::sleep(Duration::from_millis(20));
        second.try_wait().unwrap()
    });
    let Some(status) = status else {
        let _ = second.kill();
        let _ = second.wait();
        panic!("a second server started on a data dir in use");
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut second.stderr.take().unwrap(), &mut err).unwrap();
    assert!(!status.success(), "{err}");
    let dir = data.canonicalize().unwrap();
    assert!(err.contains(&dir.display().to_string()) && err.contains("another dqngpu serve"), "{err}");
    assert!(err.contains(&format!("pid {}", first.child.id())), "{err}");
    first.child.kill().unwrap(); // SIGKILL: no cleanup runs, the OS releases the lock
    first.child.wait().unwrap();
    let again = serve(&data, free_port(), "tetris");
    assert!(all_jobs(&again.url).is_empty());
}

/// `serve --interference` takes the names `simulate` does, and an unknown one is refused before
/// anything starts, naming the flag and the valid names.
#[test]
fn an_unknown_interference_model_is_refused_naming_the_valid_ones() {
    let data = test_dir("bad-interference");
    let out = Command::new(BIN)
        .args(["serve", "--gpus", "titanxp:1", "--max-slowdown", "10", "--interference", "contention-a100"])
        .arg("--data-dir")
        .arg(&data)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--interference") && err.contains("contention-h100"), "{err}");
    assert!(!data.join("dqngpu.sqlite").exists(), "nothing should start: {err}");
}

/// `serve --request-timeout-s` past a day is refused before anything starts, naming the flag
/// (once, hyper panicked on every connection with such a header timeout); so is the config
/// file's `request_timeout_s`, naming the file and the field.
#[test]
fn a_request_timeout_past_a_day_is_refused_naming_the_flag() {
    /// Runs `serve` with `args`; its stderr, once it has exited (a server that starts instead
    /// is killed and the test fails, rather than waiting on it for ever).
    fn refused(data: &Path, args: &[&std::ffi::OsStr]) -> String {
        let port = free_port().to_string();
        let mut child = Command::new(BIN)
            .args(["serve", "--listen"])
            .arg(format!("127.0.0.1:{port}"))
            .args(args)
            .arg("--data-dir")
            .arg(data)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        for _ in 0..200 {
            if let Some(status) = child.try_wait().unwrap() {
                let mut err = String::new();
                std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
                assert!(!status.success(), "{err}");
                assert!(!data.join("dqngpu.sqlite").exists(), "nothing should start: {err}");
                return err;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("serve {args:?} started instead of refusing");
    }
    let data = test_dir("huge-timeout");
    let os = |s: &'static str| std::ffi::OsStr::new(s);
    let err = refused(&data, &[os("--gpus"), os("titanxp:1"), os("--request-timeout-s"), os("9223372036854775807")]);
    assert!(err.contains("--request-timeout-s") && err.contains("86400"), "{err}");
    let cfg = data.with_extension("toml");
    std::fs::write(&cfg, "gpus = \"titanxp:1\"\nrequest_timeout_s = 86401\n").unwrap();
    let err = refused(&data, &[os("--config"), cfg.as_os_str()]);
    assert!(err.contains("`request_timeout_s`") && err.contains("86400"), "{err}");
}

/// `dqngpu submit-batch FILE` against a real server on loopback: the file's jobs are queued as
/// one batch and run, their ids printed in order; a file that is not JSON, or a batch with a
/// bad job, is refused naming the file (and the job's index) and queues nothing.
#[test]
fn submit_batch_queues_a_file_of_jobs_and_refuses_a_bad_one_whole() {
    let dir = test_dir("batch");
    let server = serve(&dir.join("data"), free_port(), "sjf");
    post(&format!("{}/v1/profiles", server.url), profile("short", 1000.0, 20.0));
    let submit =
        |file: &Path| Command::new(BIN).args(["submit-batch", "--server", &server.url]).arg(file).output().unwrap();
    let bad = dir.join("bad.json");
    std::fs::write(&bad, r#"{"jobs": [{"app": "short", "command": ["true"]}, {"app": "short", "command": []}]}"#)
        .unwrap();
    let out = submit(&bad);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("bad.json") && err.contains("jobs[1]"), "{err}");
    let broken = dir.join("broken.json");
    std::fs::write(&broken, "[{\"app\": \"short\",\n \"command\": [\"true\"]").unwrap();
    let out = submit(&broken);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("broken.json") && err.contains("line 2"), "{err}");
    assert!(all_jobs(&server.url).is_empty(), "a refused batch queues nothing");
    let good = dir.join("jobs.json");
    let jobs: Vec<Value> = (0..3).map(|_| json!({ "app": "short", "command": ["true"] })).collect();
    std::fs::write(&good, serde_json::to_string(&jobs).unwrap()).unwrap();
    let out = submit(&good);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let ids: Vec<u64> = String::from_utf8_lossy(&out.stdout).lines().map(|l| l.trim().parse().unwrap()).collect();
    assert_eq!(ids, vec![1, 2, 3]);
    let done = wait_all_final(&server.url, 3);
    assert!(done.iter().all(|j| j["state"] == "succeeded"), "{done:?}");
}

/// A config file reads as a user writes it: a budget as a number, one library as a string,
/// paths relative to the file (not to where `serve` runs); and flags win, so `--scheduler
/// fifo` drops the file's agent model instead of refusing it.
#[test]
fn a_config_file_reads_as_written_and_flags_win() {
    let dir = test_dir("config");
    let conf = dir.join("conf");
    std::fs::create_dir_all(&conf).unwrap();
    let text = "scheduler = \"dqngpu\"\nmodel = \"nope.safetensors\"\ndata_dir = \"data\"\nlibrary = \"thesis\"\nmax_slowdown = 10\ngpus = \"titanxp:1\"\n";
    std::fs::write(conf.join("serve.toml"), text).unwrap();
    let port = free_port();
    let elsewhere = dir.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let child = Command::new(BIN)
        .current_dir(&elsewhere)
        .args(["serve", "--scheduler", "fifo", "--listen", &format!("127.0.0.1:{port}"), "--config"])
        .arg(conf.join("serve.toml"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("serve.log")).unwrap())
        .spawn()
        .unwrap();
    let server = Server { child, url: format!("http://127.0.0.1:{port}") };
    let up = (0..500).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        ureq::get(&format!("{}/healthz", server.url)).call().is_ok()
    });
    assert!(up, "serve did not come up: {}", std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default());
    let cluster = get(&format!("{}/v1/cluster", server.url));
    assert_eq!(cluster["policy"], "fifo", "{cluster}");
    assert!(conf.join("data").is_dir(), "the data dir is beside the config file");
    assert!(!elsewhere.join("data").exists());
}

/// A cancel sends the job's group SIGTERM once and spares its supervisor, which records the
/// end (before, the supervisor died of the same SIGTERM and its death signalled the job again
/// and killed it after the 2 s leftover grace, not the documented 3 s). `dqngpu jobs` lists
/// every job, past the API's page of 1,000, and `/v1/cluster` counts every queued job.
#[test]
fn a_cancel_signals_the_job_once_and_the_client_lists_every_job() {
    let dir = test_dir("cancel-once");
    let data = dir.join("data");
    let server = serve(&data, free_port(), "fifo");
    let url = server.url.clone();
    post(&format!("{url}/v1/profiles"), profile("stubborn", 1000.0, 10.0));
    let marks = dir.join("terms");
    let script =
        format!("trap 'echo term >> {m}' TERM; echo $$ > {m}.pid; while :; do sleep 0.05; done", m = marks.display());
    let job = post(&format!("{url}/v1/jobs"), json!({ "app": "stubborn", "command": ["sh", "-c", script] }));
    let id = job["id"].as_u64().unwrap();
    let pid = wait_pid(&dir.join("terms.pid")).expect("the job never started");
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let shim: u32 = stat[stat.rfind(')').unwrap() + 1..].split_whitespace().nth(1).unwrap().parse().unwrap();
    ureq::delete(&format!("{url}/v1/jobs/{id}")).call().unwrap();
    // Within the grace the job has its SIGTERM and both still run.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(alive(pid) && alive(shim), "job {pid} or its supervisor {shim} ended within the grace");
    let jobs = wait_all_final(&url, 1);
    assert_eq!(jobs[0]["state"], "cancelled", "{:?}", jobs[0]);
    let terms = std::fs::read_to_string(&marks).unwrap_or_default();
    assert_eq!(terms.lines().count(), 1, "SIGTERMs the job got: {terms:?}");
    // 1,005 jobs queued behind one that runs (fifo, one job per GPU, two GPUs).
    let holder = |i: usize| json!({ "app": "stubborn", "command": ["sleep", "60"], "params": i.to_string() });
    for part in [0..1000, 1000..1005] {
        let batch: Vec<Value> = part.map(holder).collect();
        post(&format!("{url}/v1/jobs/batch"), json!({ "jobs": batch }));
    }
    let cluster = (0..100)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(50));
            get(&format!("{url}/v1/cluster"))
        })
        .find(|c| c["gpus"].as_array().is_some_and(|g| g.iter().all(|g| !g["jobs"].as_array().unwrap().is_empty())))
        .expect("fifo never filled both GPUs");
    assert_eq!(cluster["queued"], 1003, "{cluster}");
    let o = Command::new(BIN).args(["jobs", "--server", &url, "--format", "json"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let listed: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(listed.len(), 1006);
    let ids: Vec<u64> = listed.iter().map(|j| j["id"].as_u64().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids out of order or repeated");
    let o = Command::new(BIN).args(["jobs", "--server", &url, "--state", "queued&limit=1"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    let o = Command::new(BIN)
        .args(["submit", "--server", &url, "--app", "x", "--input-size-mb", "nan", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--input-size-mb"));
}

/// A bad setting in serve's config file is named by its file and field, not by a flag the
/// user never gave; an unknown name there stays a usage error (exit 2).
#[test]
fn a_bad_config_setting_is_named_by_file_and_field() {
    let dir = test_dir("config-fields");
    for (text, field, code) in [
        ("max_slowdown = \"abc\"\n", "field `max_slowdown`", 1),
        ("gpus = \"titanxpp:1\"\n", "field `gpus`", 2),
        ("interference = \"nosuch\"\n", "field `interference`", 2),
    ] {
        let cfg = dir.join("serve.toml");
        std::fs::write(&cfg, text).unwrap();
        let o = Command::new(BIN)
            .args(["serve", "--config"])
            .arg(&cfg)
            .arg("--data-dir")
            .arg(dir.join("data"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{text}: {err}");
        assert!(err.contains("serve.toml") && err.contains(field) && !err.contains("--"), "{text}: {err}");
    }
}

/// The binary a server was started from is removed while it runs (an upgrade that replaces
/// it, an uninstall): its jobs still start, under the server's own binary as their
/// supervisor (each failed for good, "cannot start the job's supervisor": the supervisor was
/// started by the path the server was started from).
#[test]
fn jobs_still_start_after_the_servers_binary_is_removed() {
    let dir = test_dir("binary-removed");
    let data = dir.join("data");
    let copy = dir.join("dqngpu-copy");
    std::fs::copy(BIN, &copy).unwrap();
    let server = serve_from(&copy, &data, free_port(), "tetris", &[], None);
    std::fs::remove_file(&copy).unwrap();
    let id = submit_script(&server.url, "after-upgrade", "exit 0");
    let job = wait_all_final(&server.url, 1).remove(0);
    assert_eq!(job["id"], id);
    assert_eq!(job["state"], "succeeded", "{job}");
}

/// An app's exclusive run that the server adopted after a restart is not observed: the NVML
/// readings before the restart are lost, and the rest spread over its whole wall time would
/// profile a heavy app as light (before, such a profile was recorded). The app's next job
/// runs alone again and is observed whole.
#[test]
fn a_profiling_run_adopted_after_a_restart_is_not_observed_from_its_tail() {
    let dir = test_dir("observe-restart");
    let Some(lib) = fake_nvml(&dir) else { return };
    let data = dir.join("data");
    let port = free_port();
    let mut server = serve_from(Path::new(BIN), &data, port, "tetris", &[], Some(&lib));
    let url = server.url.clone();
    let started = dir.join("started");
    submit_script(&url, "fresh", &format!("touch {}; sleep 3", started.display()));
    let up = (0..1000).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        started.exists()
    });
    assert!(up, "the job never started");
    server.child.kill().unwrap(); // SIGKILL: the job's supervisor outlives the server
    server.child.wait().unwrap();
    let _server = serve_from(Path::new(BIN), &data, port, "tetris", &[], Some(&lib));
    let jobs = wait_all_final(&url, 1);
    assert_eq!(jobs[0]["state"], "succeeded", "{}", jobs[0]);
    let observed = |url: &str| {
        let list = get(&format!("{url}/v1/profiles"));
        list["profiles"].as_array().unwrap().iter().find(|p| p["app"] == "fresh").cloned()
    };
    assert_eq!(observed(&url), None, "a profile was observed from the run's tail");
    submit_script(&url, "fresh", "sleep 1");
    let jobs = wait_all_final(&url, 2);
    assert!(jobs.iter().all(|j| j["state"] == "succeeded"), "{jobs:?}");
    let p = observed(&url).expect("the app's next run was not observed");
    assert_eq!(p["source"], "observed", "{p}");
}
