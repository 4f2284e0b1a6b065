//! Binds against an apiserver that fails: the stand-in apiserver (no real Kubernetes can
//! run here) behind a layer that answers errors on chosen requests, after running them
//! (a write that commits and then times out) or instead of them. From a code review of the
//! extender's error paths (2026-11-29).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::IntoResponse;
use serde_json::{json, Value};

use dqngpu_k8s::apiserver::{ApiClient, ApiConfig, Token};
use dqngpu_k8s::bind::Binder;
use dqngpu_k8s::decide::Engine;
use dqngpu_k8s::devices::*;
use dqngpu_k8s::standin::StandIn;
use dqngpu_k8s::state::{Cluster, Profiles, StateConfig};
use dqngpu_k8s::wire::{ExtenderBindingArgs, NodeInfo, PodInfo};

/// What the fault layer does to a request.
#[derive(Clone, Copy, PartialEq)]
enum Fault {
    /// Pass through.
    None,
    /// Run the request (it commits), then answer 504 (apiserver: "the request did not
    /// complete within the timeout", the write may have happened).
    CommitThen504,
    /// Answer 500 without running it.
    Fail500,
}

type Rule = Arc<dyn Fn(&str, &str) -> Fault + Send + Sync>;

/// Serves the stand-in behind a fault layer; returns its URL.
fn start(api: &Arc<StandIn>, rule: Rule) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let router = api.router().layer(middleware::from_fn(move |req: Request, next: Next| {
        let rule = rule.clone();
        async move {
            let f = rule(req.method().as_str(), req.uri().path());
            match f {
                Fault::None => next.run(req).await,
                Fault::Fail500 => (StatusCode::INTERNAL_SERVER_ERROR, axum::Json(json!({"kind": "Status", "code": 500, "message": "etcdserver: request timed out"}))).into_response(),
                Fault::CommitThen504 => {
                    let _ = next.run(req).await;
                    (StatusCode::GATEWAY_TIMEOUT, axum::Json(json!({"kind": "Status", "code": 504, "message": "Timeout: request did not complete within requested timeout"}))).into_response()
                }
            }
        }
    }));
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(async move {
            let l = tokio::net::TcpListener::from_std(listener).unwrap();
            let _: Result<(), _> = axum::serve(l, router).await;
        });
    });
    format!("http://{addr}")
}

fn client(url: String) -> Arc<ApiClient> {
    Arc::new(ApiClient::new(ApiConfig { server: url, token: Token::None, tls: None }))
}

fn engine(cfg: StateConfig) -> Arc<Engine> {
    let cluster = Arc::new(Cluster::new(cfg, Arc::new(Profiles::default())));
    Arc::new(Engine::new(cluster, Arc::from(dqngpu_policy::by_name("greedy", 0).unwrap())))
}

/// Loads the cache from the stand-in's current objects (a list, with no watch after it:
/// the watch's lag made indefinite).
fn load(e: &Engine, api: &StandIn, nodes: &[&str]) {
    e.cluster
        .replace_nodes(nodes.iter().map(|n| NodeInfo::from_value(&api.node(n).unwrap(), "node").unwrap()).collect());
    e.cluster.replace_pods(api.pods().iter().map(|p| PodInfo::from_value(p, "pod").unwrap()).collect());
}

fn gpushare_node(name: &str, gpus: u32, gib: u32) -> Value {
    json!({"metadata": {"name": name, "labels": {PRODUCT_LABEL: "Tesla-V100-SXM2-16GB"}},
           "status": {"capacity": {GPUSHARE_COUNT: gpus.to_string(), GPUSHARE_MEM: gib.to_string()}}})
}

fn gpushare_pod(name: &str, gib: u32) -> Value {
    json!({"metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"), "annotations": {}},
        "spec": {"containers": [{"name": "main", "resources": {"limits": {GPUSHARE_MEM: gib.to_string()}}}]},
        "status": {"phase": "Pending"}})
}

/// A gpushare pod running on GPU 0 of `node`, its memory annotation reading `gib`.
fn running_gpushare_pod(name: &str, request_gib: u32, node: &str, gib: &str) -> Value {
    let mut p = gpushare_pod(name, request_gib);
    p["spec"]["nodeName"] = json!(node);
    p["status"] = json!({"phase": "Running"});
    p["metadata"]["annotations"] = json!({GPUSHARE_IDX: "0", GPUSHARE_POD: gib});
    p
}

fn args(pod: &str, node: &str) -> ExtenderBindingArgs {
    ExtenderBindingArgs {
        pod_name: pod.into(),
        pod_namespace: "default".into(),
        pod_uid: format!("uid-{pod}"),
        node: node.into(),
    }
}

fn gib_on(api: &StandIn, node: &str) -> std::collections::BTreeMap<String, u32> {
    let mut m = std::collections::BTreeMap::new();
    for p in api.pods() {
        if p["spec"]["nodeName"] == json!(node) {
            let idx = p["metadata"]["annotations"][GPUSHARE_IDX].as_str().unwrap().to_string();
            *m.entry(idx).or_default() +=
                p["metadata"]["annotations"][GPUSHARE_POD].as_str().unwrap().parse::<u32>().unwrap();
        }
    }
    m
}

/// A Binding that commits but answers 504 (an overloaded apiserver) is asked about: the pod
/// is bound, so the bind succeeds and the pod stays counted. It was forgotten, and until the
/// watch showed it bound a second pod was bound onto its GPU: 24 GiB on a 16 GiB card.
#[test]
fn a_binding_that_commits_and_answers_504_keeps_its_pod_counted() {
    let api = StandIn::new(None);
    api.put_node(gpushare_node("n", 1, 16));
    api.put_pod(gpushare_pod("p", 12));
    api.put_pod(gpushare_pod("q", 12));
    let rule: Rule = Arc::new(|m, path| {
        if m == "POST" && path == "/api/v1/namespaces/default/pods/p/binding" {
            Fault::CommitThen504
        } else {
            Fault::None
        }
    });
    let e = engine(StateConfig { refresh_s: 0.0, ..Default::default() });
    load(&e, &api, &["n"]);
    let b = Binder::new(e.clone(), client(start(&api, rule)));
    let r1 = b.bind(&args("p", "n"));
    eprintln!(
        "bind p -> {:?}; p.nodeName in apiserver = {}",
        r1.as_ref().map_err(|e| e.to_string()),
        api.pod("default", "p").unwrap()["spec"]["nodeName"]
    );
    assert!(r1.is_ok(), "p is bound, and kube-scheduler is told so: {r1:?}");
    assert_eq!(api.pod("default", "p").unwrap()["spec"]["nodeName"], json!("n"));
    eprintln!("assumed after the failure: {}", e.cluster.assumed_count());
    let r2 = b.bind(&args("q", "n"));
    eprintln!("bind q -> {:?}", r2.as_ref().map_err(|e| e.to_string()));
    // The watch catches up.
    load(&e, &api, &["n"]);
    let used = gib_on(&api, "n");
    eprintln!(
        "GiB per GPU on n (16 GiB card): {used:?}; extender view reserved MiB: {}",
        e.cluster.view("n").unwrap().slots[0].reserved_mib
    );
    assert!(r2.is_err(), "q was bound onto the GPU p holds: {used:?}");
}

fn hami_node(name: &str, mib: u32) -> Value {
    let reg = json!([{"id": "GPU-a", "index": 0, "count": 10, "devmem": mib, "devcore": 100, "type": "NVIDIA-Tesla T4", "mode": "hami-core", "health": true}]);
    json!({"metadata": {"name": name, "annotations": {HAMI_REGISTER: reg.to_string()}}, "status": {"capacity": {HAMI_GPU: "10"}}})
}

fn hami_pod(name: &str, mib: u32) -> Value {
    json!({"metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"), "annotations": {}},
        "spec": {"containers": [{"name": "main", "resources": {"limits": {HAMI_GPU: "1", HAMI_MEM: mib.to_string()}}}]}, "status": {"phase": "Pending"}})
}

/// A HAMi bind whose Binding fails (500) after the annotation patch leaves
/// `hami.io/vgpu-node` and the devices on the pod, and the state counts the unbound pod on
/// the node. Its own retry there leaves it out, as HAMi's Filter does (`s.delPod(args.Pod)`):
/// it was refused, not fitting beside itself, on the only GPU it fits.
#[test]
fn a_failed_hami_binding_does_not_block_the_pods_own_retry() {
    let api = StandIn::new(None);
    api.put_node(hami_node("h", 16384));
    api.put_pod(hami_pod("p", 10000));
    let fails = Arc::new(AtomicUsize::new(1));
    let f2 = fails.clone();
    let rule: Rule = Arc::new(move |m, path| {
        if m == "POST"
            && path.ends_with("/pods/p/binding")
            && f2.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok()
        {
            Fault::Fail500
        } else {
            Fault::None
        }
    });
    let url = start(&api, rule);
    let e = engine(StateConfig { refresh_s: 0.0, ..Default::default() });
    let c = client(url);
    dqngpu_k8s::reflector::spawn(c.clone(), e.clone());
    for _ in 0..400 {
        if e.cluster.synced() && e.cluster.pod("default", "p").is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let b = Binder::new(e.clone(), c);
    let r1 = b.bind(&args("p", "h"));
    eprintln!("first bind -> {:?}", r1.as_ref().map_err(|e| e.to_string()));
    assert!(r1.is_err());
    // Let the watch deliver the annotation patch and the lock release.
    std::thread::sleep(Duration::from_millis(300));
    let v = e.cluster.view("h").unwrap();
    eprintln!(
        "after the failed bind: assumed={} residents={:?} reserved={}",
        e.cluster.assumed_count(),
        v.slots[0].residents.iter().map(|r| (&r.key, r.assumed)).collect::<Vec<_>>(),
        v.slots[0].reserved_mib
    );
    let pod = PodInfo::from_value(&api.pod("default", "p").unwrap(), "pod").unwrap();
    let out = e.filter(&pod, &["h".to_string()]);
    eprintln!("filter of p itself on h: keep={:?} failed={:?}", out.keep, out.failed);
    let r2 = b.bind(&args("p", "h"));
    eprintln!("retry bind -> {:?}", r2.as_ref().map_err(|e| e.to_string()));
    assert!(
        r2.is_ok() && out.keep == vec!["h".to_string()],
        "p cannot be placed on the only GPU it fits, beside its own phantom"
    );
}

/// A running gpushare pod whose memory annotation reads `NaN` counts its 12 GiB request, not
/// 0: a second 12 GiB pod does not fit beside it on a 16 GiB GPU (it did).
#[test]
fn a_gpushare_pods_unreadable_memory_annotation_counts_its_request() {
    let api = StandIn::new(None);
    api.put_node(gpushare_node("n", 1, 16));
    api.put_pod(running_gpushare_pod("r", 12, "n", "NaN"));
    let new = gpushare_pod("new", 12);
    api.put_pod(new.clone());
    let e = engine(StateConfig { refresh_s: 0.0, ..Default::default() });
    load(&e, &api, &["n"]);
    let v = e.cluster.view("n").unwrap();
    let out = e.filter(&PodInfo::from_value(&new, "pod").unwrap(), &["n".to_string()]);
    eprintln!("reserved on GPU 0 with a 12 GiB resident: {} MiB; filter keep={:?}", v.slots[0].reserved_mib, out.keep);
    assert!(out.keep.is_empty(), "a 12 GiB pod fits beside a 12 GiB pod on a 16 GiB GPU");
}

/// A retried bind made on a cache that has not seen the first bind (the pod unbound, its
/// resourceVersion old) leaves the bound pod's device annotations as they are: the patch
/// carries the resourceVersion it read and gets 409. It rewrote them, setting gpushare's
/// `ASSIGNED` back to "false" on a running pod.
#[test]
fn a_retried_bind_on_a_stale_cache_leaves_a_bound_pods_annotations() {
    let api = StandIn::new(None);
    api.put_node(gpushare_node("n", 2, 32));
    api.put_pod(gpushare_pod("p", 12));
    let before_bind = api.pods();
    let e = engine(StateConfig { refresh_s: 0.0, ..Default::default() });
    load(&e, &api, &["n"]);
    let b = Binder::new(e.clone(), client(start(&api, Arc::new(|_, _| Fault::None))));
    b.bind(&args("p", "n")).unwrap();
    // The device plugin allocated it.
    api.update_pod("default", "p", |p| p["metadata"]["annotations"][GPUSHARE_ASSIGNED] = json!("true"));
    let bound = api.pod("default", "p").unwrap()["metadata"]["annotations"].clone();
    // Another extender replica, whose cache is from before the first bind.
    let stale = engine(StateConfig { refresh_s: 0.0, ..Default::default() });
    stale.cluster.replace_nodes(vec![NodeInfo::from_value(&api.node("n").unwrap(), "node").unwrap()]);
    stale.cluster.replace_pods(before_bind.iter().map(|p| PodInfo::from_value(p, "pod").unwrap()).collect());
    let b2 = Binder::new(stale.clone(), client(start(&api, Arc::new(|_, _| Fault::None))));
    let r = b2.bind(&args("p", "n"));
    assert!(r.is_err(), "a bound pod was bound again");
    assert_eq!(api.pod("default", "p").unwrap()["metadata"]["annotations"], bound, "its annotations were rewritten");
}

/// Until the pods are listed every GPU looks empty: with the apiserver refusing the pod list
/// (a missing RBAC rule) the extender kept a node whose one card a running pod fills, scored
/// it 10 and bound a second pod onto it. Now, until both lists are in, a GPU pod fits no node
/// (as unresolvable: preemption cannot help) and its bind is refused; once the pods are
/// listed the node fails on memory instead.
#[test]
fn before_the_pods_are_listed_no_gpu_pod_is_placed() {
    let api = StandIn::new(None);
    api.put_node(gpushare_node("n", 1, 16));
    api.put_pod(running_gpushare_pod("full", 16, "n", "16"));
    api.put_pod(gpushare_pod("new", 8));
    let refuse = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let r = refuse.clone();
    let rule: Rule = Arc::new(move |m, path| {
        if m == "GET" && path == "/api/v1/pods" && r.load(Ordering::SeqCst) {
            Fault::Fail500
        } else {
            Fault::None
        }
    });
    let c = client(start(&api, rule));
    let e = engine(StateConfig { refresh_s: 0.0, ..Default::default() });
    dqngpu_k8s::reflector::spawn(c.clone(), e.clone());
    let wait = |f: &dyn Fn() -> bool| {
        for _ in 0..200 {
            if f() {
                return;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!("timed out");
    };
    wait(&|| e.cluster.view("n").is_some());
    assert!(!e.cluster.synced());
    let pod = PodInfo::from_value(&api.pod("default", "new").unwrap(), "pod").unwrap();
    let names = vec!["n".to_string()];
    let f = e.filter(&pod, &names);
    assert!(f.keep.is_empty() && f.unresolvable.get("n").is_some_and(|r| r.contains("not synced")), "{:?}", f.keep);
    assert_eq!(e.prioritize(&pod, &names).unwrap()[0].score, 0);
    let b = Binder::new(e.clone(), c);
    let bound = b.bind(&args("new", "n"));
    assert!(
        bound.as_ref().is_err_and(|e| e.to_string().contains("not synced")),
        "{:?}",
        bound.map_err(|e| e.to_string())
    );
    assert_eq!(api.pod("default", "new").unwrap()["spec"]["nodeName"], Value::Null);

    refuse.store(false, Ordering::SeqCst);
    wait(&|| e.cluster.synced());
    let f = e.filter(&pod, &names);
    assert!(f.keep.is_empty() && f.failed.contains_key("n"), "the card is full: {:?}", f.failed);
    assert!(b.bind(&args("new", "n")).is_err());
}

/// A HAMi bind whose Binding and the check after it both fail (503: the outcome unknown)
/// keeps the pod assumed and keeps HAMi's node lock (the device plugin finds the pod by it,
/// if it is bound). kube-scheduler's retry asks the apiserver: the pod is unbound, so the
/// Binding did not commit, and the retry binds it. It was refused as "already being bound"
/// until the assumption expired (`--assume-ttl-s`, 300 s), and the lock was released while
/// the pod might have been bound.
#[test]
fn a_bind_of_unknown_outcome_keeps_the_lock_and_its_retry_binds() {
    let api = StandIn::new(None);
    api.put_node(hami_node("h", 16384));
    api.put_pod(hami_pod("p", 10000));
    let down = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let d = down.clone();
    let rule: Rule = Arc::new(move |m, path| {
        let pod_call = path.ends_with("/pods/p/binding") || (m == "GET" && path == "/api/v1/namespaces/default/pods/p");
        if pod_call && d.load(Ordering::SeqCst) {
            Fault::Fail500
        } else {
            Fault::None
        }
    });
    let c = client(start(&api, rule));
    let e = engine(StateConfig { refresh_s: 0.0, ..Default::default() });
    load(&e, &api, &["h"]);
    let b = Binder::new(e.clone(), c);
    assert!(b.bind(&args("p", "h")).is_err());
    assert_eq!(e.cluster.assumed_count(), 1);
    let lock = api.node("h").unwrap()["metadata"]["annotations"][HAMI_LOCK].clone();
    assert!(lock.as_str().is_some_and(|l| l.ends_with(",default,p")), "the lock is kept: {lock}");
    assert_eq!(api.pod("default", "p").unwrap()["spec"]["nodeName"], Value::Null);

    down.store(false, Ordering::SeqCst);
    let r = b.bind(&args("p", "h"));
    assert!(r.is_ok(), "{:?}", r.map_err(|e| e.to_string()));
    assert_eq!(api.pod("default", "p").unwrap()["spec"]["nodeName"], json!("h"));
}
