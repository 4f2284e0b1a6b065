//! End-to-end test of `dqngpu k8s extender`: the real binary, pointed by a token kubeconfig
//! at a stand-in apiserver on loopback (no real apiserver runs in this project's tests),
//! answering kube-scheduler's filter, prioritize and bind as kube-scheduler sends them.

mod common;

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use dqngpu_k8s::devices::*;
use dqngpu_k8s::standin::StandIn;

use common::BIN;

struct Extender(Child);

impl Drop for Extender {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn post(url: &str, body: &str) -> (u16, Value) {
    match ureq::post(url).set("content-type", "application/json").send_string(body) {
        Ok(r) => (r.status(), r.into_json().unwrap()),
        Err(ureq::Error::Status(c, r)) => (c, r.into_json().unwrap_or(Value::Null)),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn extender_against_a_stand_in_apiserver() {
    extender_places_a_pod("k8s-e2e", &[]);
}

/// The same with `dqngpu-plan` deciding (an untrained scorer from `train --iterations 0`):
/// the plan's promise begins an epoch for each node's view, and the pod lands where memory
/// lets it.
#[test]
fn the_plan_as_the_extenders_policy() {
    let model = common::untrained_model(&common::test_dir("k8s-plan-model"));
    let extra = ["--scheduler".as_ref(), "dqngpu-plan".as_ref(), "--model".as_ref(), model.as_os_str()];
    extender_places_a_pod("k8s-plan", &extra);
}

/// `dqngpu k8s extender` with `extra` flags against a stand-in apiserver: filter, prioritize,
/// bind as kube-scheduler sends them, and the pod bound to the GPU its memory leaves. Its
/// kubeconfig and log go to a directory of its own (`name`): the tests of this file run at
/// once in one process.
fn extender_places_a_pod(name: &str, extra: &[&std::ffi::OsStr]) {
    let api = StandIn::new(Some("e2e-token-123".into()));
    api.put_node(json!({"metadata": {"name": "gpu-a", "labels": {PRODUCT_LABEL: "Tesla-T4"}},
        "status": {"capacity": {GPUSHARE_COUNT: "2", GPUSHARE_MEM: "32"}}}));
    let reg = "GPU-1,10,16384,100,NVIDIA-Tesla T4,0,true:";
    api.put_node(json!({"metadata": {"name": "hami-1", "annotations": {HAMI_REGISTER: reg}}, "status": {}}));
    api.put_pod(json!({"metadata": {"name": "resident", "namespace": "ml", "uid": "u-res", "annotations": {GPUSHARE_IDX: "0", GPUSHARE_POD: "14", APP_ANNOTATION: "resnet50"}},
        "spec": {"nodeName": "gpu-a", "containers": [{"name": "c", "resources": {"limits": {GPUSHARE_MEM: "14"}}}]},
        "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"}}));
    let pod = json!({"metadata": {"name": "train", "namespace": "ml", "uid": "u-train", "annotations": {APP_ANNOTATION: "vgg16"}},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {GPUSHARE_MEM: "4"}}}]}, "status": {"phase": "Pending"}});
    api.put_pod(pod.clone());
    let server = api.start().unwrap();

    let dir = common::test_dir(name);
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: test\nclusters:\n- name: standin\n  cluster:\n    server: {server}\n\
             contexts:\n- name: test\n  context:\n    cluster: standin\n    user: ext\nusers:\n- name: ext\n  user:\n    token: e2e-token-123\n"
        ),
    )
    .unwrap();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}/gpushare-scheduler");
    let log = std::fs::File::create(dir.join("extender.log")).unwrap();
    let started = Instant::now();
    let child = Command::new(BIN)
        .args([
            "k8s",
            "extender",
            "--url-prefix",
            "/gpushare-scheduler",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--request-timeout-s",
            "3",
            "--kubeconfig",
        ])
        .arg(&kubeconfig)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let _guard = Extender(child);
    let mut synced = false;
    let mut first_answer = None;
    while started.elapsed() < Duration::from_secs(60) {
        if let Ok(r) = ureq::get(&format!("{base}/healthz")).call() {
            first_answer.get_or_insert(started.elapsed());
            let v: Value = r.into_json().unwrap();
            assert_eq!(v["status"], json!("ok"));
            if v["synced"] == json!(true) {
                synced = true;
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(synced, "the extender never listed the stand-in's nodes and pods");
    eprintln!("healthz first answered after {:?}", first_answer.unwrap());
    // A client that stalls in its request headers; checked at the end, after the others.
    let mut stalled = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stalled.write_all(b"POST /gpushare-scheduler/filter HTTP/1.1\r\nHost: x\r\n").unwrap();
    let stalled_at = Instant::now();

    let args = json!({"Pod": pod, "Nodes": null, "NodeNames": ["gpu-a", "hami-1"]}).to_string();
    let (st, v) = post(&format!("{base}/filter"), &args);
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["NodeNames"], json!(["gpu-a"]), "{v}");
    // The other convention: no eviction helps, so kube-scheduler does not try preemption.
    assert!(v["FailedAndUnresolvableNodes"]["hami-1"].as_str().unwrap().contains("HAMi"), "{v}");
    assert_eq!(v["FailedNodes"], Value::Null, "{v}");

    let (st, v) = post(&format!("{base}/prioritize"), &args);
    assert_eq!(st, 200, "{v}");
    assert_eq!(v[0]["Host"], json!("gpu-a"));
    assert!((1..=10).contains(&v[0]["Score"].as_i64().unwrap()), "{v}");
    assert_eq!(v[1], json!({"Host": "hami-1", "Score": 0}));

    let (st, v) = post(&format!("{base}/filter"), "{\"Pod\": ");
    assert_eq!(st, 400, "{v}");

    let bind = json!({"PodName": "train", "PodNamespace": "ml", "PodUID": "u-train", "Node": "gpu-a"}).to_string();
    let (st, v) = post(&format!("{base}/bind"), &bind);
    assert_eq!((st, &v), (200, &json!({"Error": ""})));
    let bound = api.pod("ml", "train").unwrap();
    assert_eq!(bound["spec"]["nodeName"], json!("gpu-a"));
    // GPU 0 holds 14 of 16 GiB: memory forces GPU 1.
    assert_eq!(bound["metadata"]["annotations"][GPUSHARE_IDX], json!("1"));
    assert_eq!(bound["metadata"]["annotations"][GPUSHARE_POD], json!("4"));
    let reqs = api.requests();
    assert!(reqs.iter().all(|r| r.authorization == "Bearer e2e-token-123"));
    assert!(
        reqs.iter().any(|r| r.path == "/api/v1/pods" && r.query.contains("watch=true")),
        "the extender watches pods"
    );
    assert!(reqs.iter().any(|r| r.path == "/api/v1/namespaces/ml/pods/train/binding"));

    // A bind of an unknown pod is a clear error, and the extender keeps serving.
    let (_, v) =
        post(&format!("{base}/bind"), &json!({"PodName": "ghost", "PodNamespace": "ml", "Node": "gpu-a"}).to_string());
    assert!(v["Error"].as_str().unwrap().contains("unknown pod ml/ghost"), "{v}");
    let m = ureq::get(&format!("{base}/metrics")).call().unwrap().into_string().unwrap();
    assert!(m.contains("dqngpu_k8s_binds_total 1"), "{m}");
    // The policy chose the GPU itself (the extender's own fallback did not).
    assert!(m.contains("dqngpu_k8s_policy_fallbacks_total 0"), "{m}");
    // The stalled client was cut off after the request timeout (3 s), with no answer.
    stalled.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut got = Vec::new();
    let closed = match stalled.read_to_end(&mut got) {
        Ok(_) => true,
        // A reset is closed too; a read that timed out is a connection still open.
        Err(e) => !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
    };
    assert!(closed, "the stalled connection was still open {:?} after it stalled", stalled_at.elapsed());
    assert!(!String::from_utf8_lossy(&got).contains("200 OK"), "{:?}", String::from_utf8_lossy(&got));
}

/// Settings out of range are refused naming the flag before the extender starts (before,
/// `--max-body-mib` past 2^44 overflowed into a nonsense limit and 0 was silently 1).
#[test]
fn extender_settings_out_of_range_are_refused() {
    for (flag, bad, code) in [
        ("--max-body-mib", "0", 2),
        ("--max-body-mib", "100000000000", 2),
        ("--assume-ttl-s", "0", 1),
        ("--assume-ttl-s", "nan", 1),
    ] {
        let o = Command::new(BIN)
            .args(["k8s", "extender", "--listen", "127.0.0.1:0", flag, bad])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{flag} {bad}: {err}");
        assert!(err.contains(flag), "{flag} {bad}: {err}");
    }
}

/// HAMi's defaults out of range, and a `HAMI_NODELOCK_EXPIRE` that is not a Go duration, are
/// refused before the extender starts, naming what is wrong.
#[test]
fn extender_hami_settings_out_of_range_are_refused() {
    let run = |args: &[&str], env: Option<&str>| {
        let mut c = Command::new(BIN);
        c.args(["k8s", "extender", "--listen", "127.0.0.1:0"]).args(args).stdin(Stdio::null());
        c.env_remove("HAMI_NODELOCK_EXPIRE");
        if let Some(v) = env {
            c.env("HAMI_NODELOCK_EXPIRE", v);
        }
        let o = c.output().unwrap();
        (o.status.code(), String::from_utf8_lossy(&o.stderr).to_string())
    };
    let (code, err) = run(&["--hami-default-cores", "101"], None);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--hami-default-cores"), "{err}");
    for bad in ["5 minutes", "300", "-1m"] {
        let (code, err) = run(&[], Some(bad));
        assert_eq!(code, Some(1), "{bad}: {err}");
        assert!(err.contains("HAMI_NODELOCK_EXPIRE") && err.contains(bad), "{bad}: {err}");
    }
}
