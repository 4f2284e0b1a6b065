//! Restarts on the same data dir: no accepted job lost, no finished attempt run again.
//! (The SIGKILL crash test with the real binary lives in crates/cli/tests/service_e2e.rs.)

use crate::util::{call, config, start_with, submit, wait_final, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_jobs_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (svc, router) = start_with(config(data.clone(), "titanxp:1"), "fifo", None);
    // An unprofiled app runs alone, one at a time: the others stay queued.
    let first = submit(&router, "slow", &["sleep", "30"]).await;
    let rest = [submit(&router, "slow", &["true"]).await, submit(&router, "slow", &["true"]).await];
    wait_for(&router, first, |v| v["state"] == "running").await;
    call(&router, "DELETE", &format!("/v1/jobs/{first}"), None, &[]).await;
    wait_final(&router, first).await;
    svc.stop().await;
    let (svc, router) = start_with(config(data, "titanxp:1"), "fifo", None);
    for id in rest {
        let v = wait_final(&router, id).await;
        assert_eq!(v["state"], "succeeded", "{v}");
    }
    svc.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempt_that_ended_while_down_is_finalised_not_rerun() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (svc, router) = start_with(config(data.clone(), "titanxp:1"), "fifo", None);
    // Runs until a flag file appears, counting its starts.
    let flag = dir.path().join("go");
    let script = format!("echo start >> ../starts; while [ ! -e {} ]; do sleep 0.05; done", flag.display());
    let id = submit(&router, "waiter", &["sh", "-c", &script]).await;
    wait_for(&router, id, |v| v["state"] == "running").await;
    // The service goes away (as in a crash, its loop no longer watches the child)...
    svc.stop().await;
    // ...the job finishes while it is down, and the exit status lands in exit.json.
    std::fs::write(&flag, "").unwrap();
    let exit = data.join(format!("jobs/{id}/attempt-1/exit.json"));
    for _ in 0..500 {
        if exit.exists() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let (svc, router) = start_with(config(data.clone(), "titanxp:1"), "fifo", None);
    let v = wait_final(&router, id).await;
    assert_eq!(v["state"], "succeeded", "{v}");
    assert_eq!(v["attempts"], 1, "{v}");
    let starts = std::fs::read_to_string(data.join(format!("jobs/{id}/starts"))).unwrap();
    assert_eq!(starts.lines().count(), 1);
    svc.stop().await;
}

/// A restart with fewer GPUs than a running attempt was placed on is refused, naming the job
/// and the GPU: booked on another GPU, its process (still on the old card) would share that
/// card with jobs the books place there. With the GPUs it had, the server starts again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_without_a_running_jobs_gpu_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (svc, router) = start_with(config(data.clone(), "titanxp:2"), "fifo", None);
    // Unprofiled apps run alone: the second goes to the second GPU.
    let ids = [submit(&router, "one", &["sleep", "30"]).await, submit(&router, "two", &["sleep", "30"]).await];
    for id in ids {
        wait_for(&router, id, |v| v["state"] == "running").await;
    }
    svc.stop().await;
    let policy: std::sync::Arc<dyn dqngpu_model::Policy> =
        std::sync::Arc::from(dqngpu_policy::by_name("fifo", 7).unwrap());
    let e = match dqngpu_service::Service::start(config(data.clone(), "titanxp:1"), policy, None) {
        Ok(_) => panic!("a server without GPU slot 1 started while a job runs there"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("GPU slot 1") && e.contains("1 GPU(s)"), "{e}");
    let (svc, router) = start_with(config(data, "titanxp:2"), "fifo", None);
    for id in ids {
        call(&router, "DELETE", &format!("/v1/jobs/{id}"), None, &[]).await;
        assert_eq!(wait_final(&router, id).await["state"], "cancelled");
    }
    svc.stop().await;
}

/// A database reset (or restored from a backup) numbers jobs from 1 again, while the data
/// directory keeps the old jobs' directories. The new job 1 ran in the old one's: the old
/// claim made the launch give up and the old `exit.json` (exit 0) became its result, its
/// program never run. Now the old job directory is moved aside, kept, and the new job runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_database_never_hands_a_new_job_an_old_jobs_directory() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let old = data.join("jobs/1/attempt-1");
    std::fs::create_dir_all(&old).unwrap();
    std::fs::create_dir_all(data.join("jobs/1/work")).unwrap();
    std::fs::write(old.join("owner"), r#"{"mode":"direct","pid":1,"start":0}"#).unwrap();
    std::fs::write(old.join("exit.json"), r#"{"exit_code":0}"#).unwrap();
    std::fs::write(data.join("jobs/1/work/old-file"), "the old job's").unwrap();
    let (svc, router) = start_with(config(data.clone(), "titanxp:1"), "fifo", None);
    let id = submit(&router, "fresh", &["sh", "-c", "echo RAN > ran; ls > listing; exit 7"]).await;
    assert_eq!(id, 1);
    let v = wait_final(&router, id).await;
    assert_eq!((v["state"].as_str(), v["exit_code"].as_i64()), (Some("failed"), Some(7)), "{v}");
    let work = data.join("jobs/1/work");
    assert_eq!(std::fs::read_to_string(work.join("ran")).unwrap().trim(), "RAN");
    assert!(
        !std::fs::read_to_string(work.join("listing")).unwrap().contains("old-file"),
        "the old work dir was reused"
    );
    let aside: Vec<_> = std::fs::read_dir(data.join("jobs"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("1.stale-"))
        .collect();
    assert_eq!(aside.len(), 1);
    assert!(aside[0].path().join("attempt-1/exit.json").exists() && aside[0].path().join("work/old-file").exists());
    svc.stop().await;
}

/// The shipped systemd unit signals the server alone on stop and restart, so running jobs are
/// adopted by the next start instead of lost and run again (systemd's default signals every
/// process of the unit, the supervisors and the jobs too).
#[test]
fn the_systemd_unit_stops_the_server_alone() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/systemd/dqngpu.service");
    let unit = std::fs::read_to_string(path).unwrap();
    let setting = |key: &str| {
        unit.lines().find_map(|l| l.trim().strip_prefix(key).and_then(|r| r.trim_start().strip_prefix('=')))
    };
    assert_eq!(setting("KillMode").map(str::trim), Some("process"));
    assert!(setting("ExecStart").is_some_and(|c| c.contains("dqngpu serve")), "{unit}");
}
