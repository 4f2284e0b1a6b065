//! A launch while the service is out of file descriptors (idle connections can hold them
//! all): the job is queued again, not failed for good, and runs once descriptors are back.
//! Its own test binary: it lowers the process's descriptor limit, which no other test may see.

#[path = "service/util.rs"]
#[allow(dead_code)]
mod util;

use std::time::Duration;

use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

use util::{call, start, submit, wait_final};

/// Opens `/dev/null` until the process is out of descriptors; returns what it opened.
fn exhaust_descriptors() -> Vec<std::fs::File> {
    let mut held = Vec::new();
    loop {
        match std::fs::File::open("/dev/null") {
            Ok(f) => held.push(f),
            Err(e) => {
                assert!(dqngpu_service::exec::is_transient(&e), "not out of descriptors: {e}");
                return held;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launch_out_of_file_descriptors_is_queued_again_not_failed() {
    let t = start("titanxp:1", "fifo");
    // A low limit, so that exhausting it is quick and touches no system-wide table.
    let old = getrlimit(Resource::Nofile);
    let open_now = std::fs::read_dir("/proc/self/fd").unwrap().count() as u64;
    setrlimit(Resource::Nofile, Rlimit { current: Some(open_now + 64), maximum: old.maximum }).unwrap();
    let held = exhaust_descriptors();

    let id = submit(&t.router, "a", &["true"]).await;
    // Its first launches fail for want of a descriptor.
    let mut seen = serde_json::Value::Null;
    for _ in 0..500 {
        let (_, v) = call(&t.router, "GET", &format!("/v1/jobs/{id}"), None, &[]).await;
        if v["attempts"].as_u64().unwrap_or(0) >= 1 && v["state"] != "running" {
            seen = v;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    drop(held);
    setrlimit(Resource::Nofile, old).unwrap();
    assert_eq!(seen["state"], "queued", "a launch out of descriptors did not queue the job again: {seen}");
    let err = seen["error"].as_str().unwrap_or_default();
    assert!(err.contains("open files"), "the reason is not given: {seen}");
    assert_eq!(seen["failures"].as_u64(), Some(0), "counted as the job's failure: {seen}");

    let v = wait_final(&t.router, id).await;
    assert_eq!(v["state"], "succeeded", "{v}");
    t.service.stop().await;
}
