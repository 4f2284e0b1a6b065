//! Integration tests of the extender: kube-scheduler's wire format from fixtures, filter,
//! prioritize and bind over a stand-in apiserver on loopback (list+watch reflectors, real
//! HTTP), concurrent binds, HAMi's conventions, and bodies that must not crash it.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{json, Value};
use tower::ServiceExt;

use dqngpu_k8s::api::{self, AppState, HttpConfig};
use dqngpu_k8s::apiserver::{ApiClient, ApiConfig, Token};
use dqngpu_k8s::bind::Binder;
use dqngpu_k8s::decide::Engine;
use dqngpu_k8s::devices::*;
use dqngpu_k8s::standin::StandIn;
use dqngpu_k8s::state::{Cluster, Profiles, StateConfig};
use dqngpu_k8s::wire::ExtenderBindingArgs;
use dqngpu_model::{AppInfo, AppProfile, Resources};

fn profile(app: &str, util: f64, mem_mib: f64) -> Arc<AppProfile> {
    let info = AppInfo { name: app.into(), ..Default::default() };
    Arc::new(AppProfile::new(info, 1.0, vec![Resources::new(util, mem_mib, util, 100.0); 600]).unwrap())
}

fn gpushare_node(name: &str, gpus: u32, gib: u32) -> Value {
    json!({"metadata": {"name": name, "labels": {PRODUCT_LABEL: "Tesla-V100-SXM2-16GB"}},
           "status": {"capacity": {GPUSHARE_COUNT: gpus.to_string(), GPUSHARE_MEM: gib.to_string()}}})
}

fn gpushare_pod(name: &str, gib: u32, app: Option<&str>, placed: Option<(&str, u32)>) -> Value {
    let mut p = json!({"metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"), "annotations": {}},
        "spec": {"containers": [{"name": "main", "resources": {"limits": {GPUSHARE_MEM: gib.to_string()}}}]},
        "status": {"phase": "Pending"}});
    if let Some(a) = app {
        p["metadata"]["annotations"][APP_ANNOTATION] = json!(a);
    }
    if let Some((node, idx)) = placed {
        p["spec"]["nodeName"] = json!(node);
        p["status"] = json!({"phase": "Running", "startTime": "2026-01-01T00:00:00Z"});
        p["metadata"]["annotations"][GPUSHARE_IDX] = json!(idx.to_string());
        p["metadata"]["annotations"][GPUSHARE_POD] = json!(gib.to_string());
    }
    p
}

struct World {
    api: Arc<StandIn>,
    engine: Arc<Engine>,
    binder: Arc<Binder>,
}

impl World {
    fn new(nodes: Vec<Value>, pods: Vec<Value>, profiles: &[Arc<AppProfile>]) -> World {
        Self::with_config(StateConfig { refresh_s: 0.0, ..Default::default() }, nodes, pods, profiles)
    }

    fn with_config(cfg: StateConfig, nodes: Vec<Value>, pods: Vec<Value>, profiles: &[Arc<AppProfile>]) -> World {
        let api = StandIn::new(Some("sekret-token".into()));
        for n in nodes {
            api.put_node(n);
        }
        for p in pods {
            api.put_pod(p);
        }
        let url = api.start().unwrap();
        let client =
            Arc::new(ApiClient::new(ApiConfig { server: url, token: Token::Static("sekret-token".into()), tls: None }));
        let mut pr = Profiles::default();
        for p in profiles {
            pr.library.insert(p.app.name.clone(), p.clone());
        }
        let cluster = Arc::new(Cluster::new(cfg, Arc::new(pr)));
        let policy = Arc::from(dqngpu_policy::by_name("greedy", 0).unwrap());
        let engine = Arc::new(Engine::new(cluster, policy));
        dqngpu_k8s::reflector::spawn(client.clone(), engine.clone());
        let w = World { api, binder: Arc::new(Binder::new(engine.clone(), client)), engine };
        w.wait(|w| w.engine.cluster.synced());
        w
    }

    fn wait(&self, f: impl Fn(&World) -> bool) {
        for _ in 0..1000 {
            if f(self) {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        panic!("condition not reached");
    }

    fn app(&self) -> axum::Router {
        let cfg = HttpConfig { prefix: "/gpushare-scheduler".into(), ..Default::default() };
        api::app(AppState { engine: self.engine.clone(), binder: Some(self.binder.clone()) }, &cfg)
    }

    fn bind(&self, pod: &str, node: &str) -> Result<(), String> {
        let a = ExtenderBindingArgs {
            pod_name: pod.into(),
            pod_namespace: "default".into(),
            pod_uid: format!("uid-{pod}"),
            node: node.into(),
        };
        self.binder.bind(&a).map_err(|e| e.to_string())
    }

    fn annotation(&self, pod: &str, key: &str) -> Option<String> {
        self.api.pod("default", pod)?["metadata"]["annotations"][key].as_str().map(str::to_string)
    }
}

async fn call(app: axum::Router, path: &str, body: &str) -> (StatusCode, Value) {
    let req =
        Request::post(path).header("content-type", "application/json").body(Body::from(body.to_string())).unwrap();
    let resp = app.oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX).await.unwrap();
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn small_cluster() -> World {
    let cpu = json!({"metadata": {"name": "cpu-only"}, "status": {"capacity": {"cpu": "8"}}});
    // gpu-a: 2 x 16 GiB, GPU 0 holds 14 GiB; gpu-b: 1 x 16 GiB, full.
    let pods = vec![gpushare_pod("r1", 14, None, Some(("gpu-a", 0))), gpushare_pod("r2", 16, None, Some(("gpu-b", 0)))];
    let mut pod = gpushare_pod("train-1", 4, None, None);
    pod["metadata"]["uid"] = json!("5f0c3c1e-0000-4000-8000-000000000001");
    let mut all = pods;
    all.push(pod);
    World::new(vec![gpushare_node("gpu-a", 2, 32), gpushare_node("gpu-b", 1, 16), cpu], all, &[])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filter_fixture_node_names_keeps_exactly_the_fitting_nodes() {
    let w = small_cluster();
    let (st, v) = call(w.app(), "/gpushare-scheduler/filter", &fixture("filter_args_node_names.json")).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["NodeNames"], json!(["gpu-a"]));
    assert_eq!(v["Nodes"], Value::Null);
    assert_eq!(v["Error"], json!(""));
    // A full GPU may free up (preemption may help); the others never fit.
    let failed = v["FailedNodes"].as_object().unwrap();
    assert_eq!(failed.len(), 1, "{v}");
    assert!(failed["gpu-b"].as_str().unwrap().contains("0 MiB free"), "{v}");
    let never = v["FailedAndUnresolvableNodes"].as_object().unwrap();
    assert_eq!(never.len(), 2, "{v}");
    assert!(never["cpu-only"].as_str().unwrap().contains("no shared GPUs"), "{v}");
    assert!(never["ghost"].as_str().unwrap().contains("not in the extender's cache"), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filter_fixture_full_nodes_answers_with_node_objects() {
    let w = small_cluster();
    let (st, v) = call(w.app(), "/gpushare-scheduler/filter", &fixture("filter_args_nodes.json")).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    // 12 GiB fits only gpu-a's empty GPU 1.
    assert_eq!(v["Nodes"]["items"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["Nodes"]["items"][0]["metadata"]["name"], json!("gpu-a"));
    assert_eq!(v["NodeNames"], Value::Null);
    assert!(v["FailedNodes"]["gpu-b"].is_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prioritize_scores_every_candidate_within_0_to_10() {
    let w = small_cluster();
    let body = fixture("filter_args_node_names.json");
    let (st, v) = call(w.app(), "/gpushare-scheduler/prioritize", &body).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let list = v.as_array().unwrap();
    assert_eq!(list.len(), 4);
    for h in list {
        let s = h["Score"].as_i64().unwrap();
        assert!((0..=10).contains(&s), "{h}");
    }
    assert_eq!(list[0]["Host"], json!("gpu-a"));
    assert!(list[0]["Score"].as_i64().unwrap() >= 1);
    assert_eq!(list[1]["Score"], json!(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_fixture_writes_gpushare_annotations_and_the_binding() {
    let w = small_cluster();
    let (st, v) = call(w.app(), "/gpushare-scheduler/bind", &fixture("bind_args.json")).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v, json!({"Error": ""}));
    // GPU 0 has 2 GiB free: memory forces GPU 1.
    let pod = w.api.pod("default", "train-1").unwrap();
    let a = &pod["metadata"]["annotations"];
    assert_eq!(a[GPUSHARE_IDX], json!("1"));
    assert_eq!(a[GPUSHARE_POD], json!("4"));
    assert_eq!(a[GPUSHARE_DEV], json!("16"));
    assert_eq!(a[GPUSHARE_ASSIGNED], json!("false"));
    assert!(a[GPUSHARE_ASSUME_TIME].as_str().unwrap().parse::<u128>().unwrap() > 1_000_000_000_000_000_000);
    assert_eq!(pod["spec"]["nodeName"], json!("gpu-a"));
    let reqs = w.api.requests();
    let patch = reqs.iter().find(|r| r.method == "PATCH").unwrap();
    assert_eq!(patch.content_type, "application/merge-patch+json");
    assert_eq!(patch.authorization, "Bearer sekret-token");
    let b = reqs.iter().find(|r| r.path.ends_with("/binding")).unwrap();
    assert_eq!(b.body["target"], json!({"apiVersion": "v1", "kind": "Node", "name": "gpu-a"}));
    assert_eq!(b.body["metadata"]["uid"], json!("5f0c3c1e-0000-4000-8000-000000000001"));
    // A second bind of the same pod is refused with a clear error, and the server keeps serving.
    let (st, v) = call(w.app(), "/gpushare-scheduler/bind", &fixture("bind_args.json")).await;
    assert_eq!(st, StatusCode::OK);
    // Refused from the cache, the assumption, or by the apiserver (409), by timing; the
    // first bind's assumption stays either way.
    let e = v["Error"].as_str().unwrap();
    assert!(e.contains("already bound") || e.contains("already being bound") || e.contains("409"), "{v}");
    assert_eq!(w.api.pod("default", "train-1").unwrap()["metadata"]["annotations"][GPUSHARE_IDX], json!("1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_in_any_case_and_bad_bodies_get_clear_errors() {
    let w = small_cluster();
    let lower =
        fixture("filter_args_node_names.json").replace("\"Pod\"", "\"pod\"").replace("\"NodeNames\"", "\"NODENAMES\"");
    let (st, v) = call(w.app(), "/gpushare-scheduler/filter", &lower).await;
    assert_eq!((st, &v["NodeNames"]), (StatusCode::OK, &json!(["gpu-a"])), "{v}");
    let (st, v) = call(w.app(), "/gpushare-scheduler/filter", "{not json").await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    assert!(v["Error"].as_str().unwrap().contains("not JSON"));
    let (st, v) = call(w.app(), "/gpushare-scheduler/filter", r#"{"Pod": {"metadata": {"name": 3}}}"#).await;
    assert_eq!(st, StatusCode::OK);
    assert!(v["Error"].as_str().unwrap().contains("Pod.metadata.name"), "{v}");
    let (st, v) = call(w.app(), "/gpushare-scheduler/prioritize", r#"{"Pod": {}, "NodeNames": [1]}"#).await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    assert!(v["Error"].as_str().unwrap().contains("NodeNames[0]"), "{v}");
    let (_, v) = call(w.app(), "/gpushare-scheduler/bind", r#"{"PodName": "nobody", "Node": "gpu-a"}"#).await;
    assert!(v["Error"].as_str().unwrap().contains("unknown pod default/nobody"), "{v}");
    let (_, v) = call(w.app(), "/gpushare-scheduler/bind", r#"{"podname": "train-1", "node": "nowhere"}"#).await;
    assert!(v["Error"].as_str().unwrap().contains("unknown node nowhere"), "{v}");
    let (st, _) = call(w.app(), "/gpushare-scheduler/healthz", "").await;
    assert_eq!(st, StatusCode::METHOD_NOT_ALLOWED);
    let resp = w.app().oneshot(Request::get("/gpushare-scheduler/healthz").body(Body::empty()).unwrap()).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
}

#[test]
fn where_memory_does_not_decide_a_heavy_app_goes_beside_a_light_one() {
    let heavy = profile("heavy", 80.0, 2048.0);
    let busy = profile("busy", 90.0, 2048.0);
    let light = profile("light", 10.0, 2048.0);
    for (first, second, want) in [("busy", "light", "1"), ("light", "busy", "0")] {
        let pods = vec![
            gpushare_pod("r0", 2, Some(first), Some(("n", 0))),
            gpushare_pod("r1", 2, Some(second), Some(("n", 1))),
            gpushare_pod("new", 2, Some("heavy"), None),
        ];
        let w = World::new(vec![gpushare_node("n", 2, 32)], pods, &[heavy.clone(), busy.clone(), light.clone()]);
        w.bind("new", "n").unwrap();
        assert_eq!(w.annotation("new", GPUSHARE_IDX).as_deref(), Some(want), "residents {first}, {second}");
    }
}

#[test]
fn concurrent_binds_never_double_book_a_gpu() {
    // One node, 2 GPUs x 16 GiB; 40 pods of 4 GiB bound from 16 threads: exactly 8 fit.
    let pods: Vec<Value> = (0..40).map(|i| gpushare_pod(&format!("p{i}"), 4, None, None)).collect();
    let w = Arc::new(World::new(vec![gpushare_node("n", 2, 32)], pods, &[]));
    let ok = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for t in 0..16 {
            let (w, ok) = (&w, &ok);
            s.spawn(move || {
                for i in (t..40).step_by(16) {
                    if w.bind(&format!("p{i}"), "n").is_ok() {
                        ok.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            });
        }
    });
    assert_eq!(ok.load(std::sync::atomic::Ordering::Relaxed), 8);
    let mut per_gpu = [0u32; 2];
    for p in w.api.pods() {
        if p["spec"]["nodeName"] == json!("n") {
            let idx: usize = p["metadata"]["annotations"][GPUSHARE_IDX].as_str().unwrap().parse().unwrap();
            per_gpu[idx] += 4;
        }
    }
    assert_eq!(per_gpu, [16, 16]);
    // Once the watch shows them all, nothing is left assumed and the node is full.
    w.wait(|w| w.engine.cluster.assumed_count() == 0);
    assert!(w.bind("p39", "n").is_err() || w.bind("p38", "n").is_err());
}

#[test]
fn hami_bind_writes_hami_annotations_and_takes_the_node_lock() {
    let reg = r#"[{"id":"GPU-aaa","index":0,"count":10,"devmem":16384,"devcore":100,"type":"NVIDIA-Tesla T4","numa":0,"mode":"hami-core","health":true},{"id":"GPU-bbb","index":1,"count":10,"devmem":16384,"devcore":100,"type":"NVIDIA-Tesla T4","health":true}]"#;
    let node = json!({"metadata": {"name": "h", "annotations": {HAMI_REGISTER: reg}}, "status": {}});
    let resident = json!({"metadata": {"name": "old", "namespace": "default", "uid": "uid-old", "annotations": {HAMI_ALLOCATED: "GPU-aaa,NVIDIA,12000,50:;"}},
        "spec": {"nodeName": "h", "containers": [{"name": "c", "resources": {"limits": {HAMI_GPU: "1", HAMI_MEM: "12000", HAMI_CORES: "50"}}}]},
        "status": {"phase": "Running"}});
    let pod = json!({"metadata": {"name": "new", "namespace": "default", "uid": "uid-new"},
        "spec": {"containers": [{"name": "sidecar"}, {"name": "c", "resources": {"limits": {HAMI_GPU: "1", HAMI_MEM: "8000", HAMI_CORES: "60"}}}]},
        "status": {"phase": "Pending"}});
    let w = World::new(vec![node], vec![resident, pod], &[]);
    w.bind("new", "h").unwrap();
    // GPU-aaa has 4384 MiB and 50% compute left: memory and cores force GPU-bbb.
    let dev = "GPU-bbb,NVIDIA,8000,60:";
    assert_eq!(w.annotation("new", HAMI_ALLOCATED).as_deref(), Some(format!(";{dev};").as_str()));
    assert_eq!(w.annotation("new", HAMI_TO_ALLOCATE), w.annotation("new", HAMI_ALLOCATED));
    assert_eq!(w.annotation("new", HAMI_BIND_PHASE).as_deref(), Some("allocating"));
    assert_eq!(w.annotation("new", HAMI_NODE).as_deref(), Some("h"));
    assert!(w.annotation("new", HAMI_BIND_TIME).is_some() && w.annotation("new", HAMI_TIME).is_some());
    let pod = w.api.pod("default", "new").unwrap();
    assert_eq!(pod["metadata"]["labels"][HAMI_NODE], json!("h"));
    assert_eq!(pod["spec"]["nodeName"], json!("h"));
    let lock = w.api.node("h").unwrap()["metadata"]["annotations"][HAMI_LOCK].as_str().unwrap().to_string();
    assert!(lock.ends_with(",default,new"), "{lock}");
    let lock_patch = w.api.requests().into_iter().find(|r| r.method == "PATCH" && r.path == "/api/v1/nodes/h").unwrap();
    assert!(lock_patch.body["metadata"]["resourceVersion"].is_string(), "the lock patch carries the precondition");
    // Another pod is refused while the device plugin has not released the lock.
    w.api.put_pod(json!({"metadata": {"name": "next", "namespace": "default", "uid": "uid-next"},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {HAMI_GPU: "1", HAMI_MEM: "1000"}}}]}, "status": {"phase": "Pending"}}));
    w.wait(|w| {
        w.engine.cluster.pod("default", "next").is_some()
            && w.engine.cluster.node("h").is_some_and(|n| n.annotations.contains_key(HAMI_LOCK))
    });
    let e = w.bind("next", "h").unwrap_err();
    assert!(e.contains("locked by HAMi"), "{e}");
}

#[test]
fn a_second_bind_of_a_pod_under_way_leaves_the_first_ones_hami_lock() {
    // kube-scheduler may retry a bind that timed out while the first is still running. The
    // retry must not take or release HAMi's node lock, which the first holds under the same
    // pod's name: releasing it would let HAMi's scheduler in before the device plugin ran.
    let node = hami_node("h", &[("GPU-a", 16384, "NVIDIA-Tesla T4", "hami-core")]);
    let pod = hami_pod("new", json!({HAMI_GPU: "1", HAMI_MEM: "1000"}), json!({}));
    let w = Arc::new(World::new(vec![node], vec![pod], &[]));
    // Hold the node's bind lock, so the first bind stops after taking HAMi's lock.
    let node_lock = w.engine.cluster.bind_lock("h");
    let held = node_lock.lock().unwrap();
    let first = std::thread::spawn({
        let w = w.clone();
        move || w.bind("new", "h")
    });
    let locked = |w: &World| w.api.node("h").is_some_and(|n| n["metadata"]["annotations"][HAMI_LOCK].is_string());
    w.wait(locked);
    let second = std::thread::spawn({
        let w = w.clone();
        move || w.bind("new", "h")
    });
    std::thread::sleep(Duration::from_millis(100));
    drop(held);
    let results = [first.join().unwrap(), second.join().unwrap()];
    assert!(results[0].is_ok(), "{results:?}");
    assert!(results[1].as_ref().is_err_and(|e| e.contains("already being bound")), "{results:?}");
    let lock = w.api.node("h").unwrap()["metadata"]["annotations"][HAMI_LOCK].clone();
    assert!(lock.as_str().is_some_and(|l| l.ends_with(",default,new")), "the first bind's lock is kept: {lock}");
    assert_eq!(w.annotation("new", HAMI_BIND_PHASE).as_deref(), Some("allocating"));
}

#[test]
fn a_retried_bind_after_the_first_ended_leaves_its_hami_lock() {
    // The first bind ended (the pod is assumed, HAMi's lock is held under its name until the
    // device plugin runs, the apiserver has it bound), but the watch has not shown the pod
    // bound yet when kube-scheduler retries. The retry must be refused without touching the
    // lock.
    let fresh = dqngpu_k8s::units::format_rfc3339(dqngpu_k8s::state::unix_now() as i64);
    let mut node = hami_node("h", &[("GPU-a", 16384, "NVIDIA-Tesla T4", "hami-core")]);
    node["metadata"]["annotations"][HAMI_LOCK] = json!(format!("{fresh},default,new"));
    let w = World::new(vec![node], vec![hami_pod("new", json!({HAMI_GPU: "1", HAMI_MEM: "1000"}), json!({}))], &[]);
    let pod = w.engine.cluster.pod("default", "new").unwrap();
    assert!(w.engine.cluster.assume(dqngpu_k8s::state::Assumed {
        pod,
        node: "h".into(),
        gpu_id: "GPU-a".into(),
        mem_mib: 1000.0,
        cores: 0.0,
        app: None,
        since_s: dqngpu_k8s::state::unix_now(),
    }));
    assert!(w.api.update_pod("default", "new", |p| p["spec"]["nodeName"] = json!("h")));
    let patches = |w: &World| w.api.requests().into_iter().filter(|r| r.method == "PATCH").count();
    let before = patches(&w);
    let e = w.bind("new", "h").unwrap_err();
    assert!(e.contains("already being bound") || e.contains("already bound to h"), "{e}");
    assert_eq!(patches(&w), before, "the retry neither took nor released the lock");
    let lock = w.api.node("h").unwrap()["metadata"]["annotations"][HAMI_LOCK].clone();
    assert!(lock.as_str().is_some_and(|l| l.ends_with(",default,new")), "the first bind's lock is kept: {lock}");
}

#[test]
fn oom_kill_puts_the_pair_on_the_avoid_list() {
    let a = profile("a", 20.0, 1024.0);
    let b = profile("b", 20.0, 1024.0);
    let pods = vec![
        gpushare_pod("ra", 2, Some("a"), Some(("n", 0))),
        gpushare_pod("rb", 2, Some("b"), Some(("n", 0))),
        gpushare_pod("new", 2, Some("a"), None),
    ];
    let w = World::new(vec![gpushare_node("n", 1, 16)], pods, &[a, b]);
    w.api.update_pod("default", "ra", |p| {
        p["status"]["containerStatuses"] = json!([{"name": "main", "restartCount": 1, "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}}]);
    });
    w.wait(|w| w.engine.metrics.oom_kills.load(std::sync::atomic::Ordering::Relaxed) == 1);
    assert_eq!(w.engine.cluster.profiles.avoid_of("a"), vec!["b".to_string()]);
    let e = w.bind("new", "n").unwrap_err();
    assert!(e.contains("OOM-killed beside `b`"), "{e}");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: dqngpu_model::testing::cases_or(64), ..proptest::prelude::ProptestConfig::default() })]
    #[test]
    fn no_body_crashes_the_extender(body in proptest::prelude::any::<Vec<u8>>(), route in 0usize..3, json_like in proptest::prelude::any::<bool>()) {
        let cluster = Arc::new(Cluster::new(StateConfig::default(), Arc::new(Profiles::default())));
        let engine = Arc::new(Engine::new(cluster, Arc::from(dqngpu_policy::by_name("tetris", 0).unwrap())));
        let app = api::app(AppState { engine, binder: None }, &HttpConfig::default());
        let path = ["/filter", "/prioritize", "/bind"][route];
        let text = if json_like {
            // Structured junk: right keys, arbitrary values.
            let s = String::from_utf8_lossy(&body).to_string();
            format!(r#"{{"Pod": {{"metadata": {{"name": {s:?}}}, "spec": {{"containers": [{{"resources": {{"limits": {{"aliyun.com/gpu-mem": {s:?}}}}}}}]}}}}, "NodeNames": [{s:?}], "PodName": {s:?}, "Node": {s:?}}}"#)
        } else {
            String::from_utf8_lossy(&body).to_string()
        };
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let (st, v) = rt.block_on(call(app, path, &text));
        proptest::prop_assert!(st == StatusCode::OK || st == StatusCode::BAD_REQUEST, "{st}");
        proptest::prop_assert!(v.is_object() || v.is_array());
    }
}

/// A HAMi node: one device per `(uuid, MiB, type, mode)`, 10 splits, 100 % compute each.
fn hami_node(name: &str, devs: &[(&str, u32, &str, &str)]) -> Value {
    let reg: Vec<Value> = devs
        .iter()
        .enumerate()
        .map(|(i, (id, mem, ty, mode))| json!({"id": id, "index": i, "count": 10, "devmem": mem, "devcore": 100, "type": ty, "mode": mode, "health": true}))
        .collect();
    json!({"metadata": {"name": name, "annotations": {HAMI_REGISTER: Value::Array(reg).to_string()}}, "status": {"capacity": {HAMI_GPU: "10"}}})
}

/// A pending HAMi pod named `name` whose main container has `limits`, with `ann` annotations.
fn hami_pod(name: &str, limits: Value, ann: Value) -> Value {
    json!({"metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"), "annotations": ann},
        "spec": {"containers": [{"name": "main", "resources": {"limits": limits}}]}, "status": {"phase": "Pending"}})
}

/// The filter as kube-scheduler sends it (`nodeCacheCapable`), for pod `pod` over `nodes`.
fn filter_now(w: &World, pod: &Value, nodes: &[&str]) -> Value {
    let body = json!({"Pod": pod, "NodeNames": nodes}).to_string();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (st, v) = rt.block_on(call(w.app(), "/gpushare-scheduler/filter", &body));
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["Error"], json!(""), "{v}");
    v
}

/// A pod HAMi's scheduler has assigned at filter time (`hami.io/vgpu-node`, devices) but not
/// bound yet holds its GPU: HAMi counts it at once, and so does the extender.
#[test]
fn hami_pods_assigned_but_not_yet_bound_hold_their_gpu() {
    let node = hami_node("h", &[("GPU-a", 16384, "NVIDIA-Tesla T4", "hami-core")]);
    let inflight = hami_pod(
        "inflight",
        json!({HAMI_GPU: "1", HAMI_MEM: "12000"}),
        json!({HAMI_NODE: "h", HAMI_ALLOCATED: "GPU-a,NVIDIA,12000,0:;"}),
    );
    let new = hami_pod("new", json!({HAMI_GPU: "1", HAMI_MEM: "8000"}), json!({}));
    let w = World::new(vec![node], vec![inflight, new.clone()], &[]);
    let v = filter_now(&w, &new, &["h"]);
    assert_eq!(v["NodeNames"], json!([]), "{v}");
    assert!(v["FailedNodes"]["h"].as_str().unwrap().contains("4384 MiB free"), "{v}");
    // The bind takes HAMi's lock first, finds no room on the state it then sees, and
    // releases the lock.
    let e = w.bind("new", "h").unwrap_err();
    assert!(e.contains("does not fit"), "{e}");
    let node_patches: Vec<Value> = w
        .api
        .requests()
        .into_iter()
        .filter(|r| r.method == "PATCH" && r.path == "/api/v1/nodes/h")
        .map(|r| r.body["metadata"]["annotations"][HAMI_LOCK].clone())
        .collect();
    assert_eq!(node_patches.len(), 2, "{node_patches:?}");
    assert!(node_patches[0].as_str().unwrap().ends_with(",default,new"));
    assert_eq!(node_patches[1], Value::Null);
    assert!(w.api.node("h").unwrap()["metadata"]["annotations"].get(HAMI_LOCK).is_none());
    // Once HAMi's pod finishes, its GPU is free again.
    w.api.update_pod("default", "inflight", |p| p["status"]["phase"] = json!("Succeeded"));
    w.wait(|w| w.engine.cluster.pod("default", "inflight").is_some_and(|p| p.finished()));
    w.wait(|w| w.engine.cluster.node("h").is_some_and(|n| !n.annotations.contains_key(HAMI_LOCK)));
    w.bind("new", "h").unwrap();
}

/// HAMi's Fit: `gpucores: 100` never on a card in use; `gpucores: 0` never on a full card.
#[test]
fn hami_exclusive_and_full_card_rules() {
    let t4 = "NVIDIA-Tesla T4";
    let resident = |name: &str, node: &str, gpu: &str, cores: u32| {
        let mut p = hami_pod(
            name,
            json!({HAMI_GPU: "1", HAMI_MEM: "2000", HAMI_CORES: cores.to_string()}),
            json!({HAMI_ALLOCATED: format!("{gpu},NVIDIA,2000,{cores}:;")}),
        );
        p["spec"]["nodeName"] = json!(node);
        p["status"]["phase"] = json!("Running");
        p
    };
    let w = World::new(
        vec![
            hami_node("h1", &[("GPU-1", 16384, t4, "hami-core")]),
            hami_node("h2", &[("GPU-2", 16384, t4, "hami-core")]),
        ],
        vec![resident("full", "h1", "GPU-1", 100), resident("light", "h2", "GPU-2", 0)],
        &[],
    );
    let zero = hami_pod("zero", json!({HAMI_GPU: "1", HAMI_MEM: "1000"}), json!({}));
    let v = filter_now(&w, &zero, &["h1", "h2"]);
    assert_eq!(v["NodeNames"], json!(["h2"]), "{v}");
    assert!(v["FailedNodes"]["h1"].as_str().unwrap().contains("no compute left"), "{v}");
    let alone = hami_pod("alone", json!({HAMI_GPU: "1", HAMI_MEM: "1000", HAMI_CORES: "100"}), json!({}));
    let v = filter_now(&w, &alone, &["h1", "h2"]);
    assert_eq!(v["NodeNames"], json!([]), "{v}");
    assert!(v["FailedNodes"]["h2"].as_str().unwrap().contains("asks for it alone"), "{v}");
}

/// Reasons no eviction can remove go in `FailedAndUnresolvableNodes`, per node; so does a
/// request dqngpu refuses by design, with no whole-request `Error`.
#[test]
fn unresolvable_reasons_go_per_node_in_failed_and_unresolvable_nodes() {
    let w = small_cluster();
    let v = filter_now(&w, &gpushare_pod("x", 4, None, None), &["gpu-a", "gpu-b", "cpu-only", "ghost"]);
    assert_eq!(v["NodeNames"], json!(["gpu-a"]), "{v}");
    assert_eq!(v["FailedNodes"].as_object().unwrap().keys().collect::<Vec<_>>(), ["gpu-b"], "{v}");
    let u = &v["FailedAndUnresolvableNodes"];
    assert!(u["cpu-only"].as_str().unwrap().contains("no shared GPUs"), "{v}");
    assert!(u["ghost"].as_str().unwrap().contains("not in the extender's cache"), "{v}");
    // A whole card's memory more than the card has: no eviction helps either.
    let v = filter_now(&w, &gpushare_pod("big", 20, None, None), &["gpu-a"]);
    assert!(v["FailedAndUnresolvableNodes"]["gpu-a"].as_str().unwrap().contains("needs 20480 MiB"), "{v}");
    // HAMi's resources on gpushare nodes; two vGPUs; both conventions at once.
    let two = hami_pod("two", json!({HAMI_GPU: "2", HAMI_MEM: "1000"}), json!({}));
    let both = hami_pod("both", json!({HAMI_GPU: "1", GPUSHARE_MEM: "1"}), json!({}));
    for (pod, why) in [(&two, "shared by gpushare"), (&both, "asks for both")] {
        let v = filter_now(&w, pod, &["gpu-a", "gpu-b"]);
        assert_eq!(v["NodeNames"], json!([]), "{v}");
        assert_eq!(v["FailedNodes"], Value::Null, "{v}");
        for n in ["gpu-a", "gpu-b"] {
            assert!(v["FailedAndUnresolvableNodes"][n].as_str().unwrap().contains(why), "{v}");
        }
    }
    let h = World::new(vec![hami_node("h", &[("GPU-a", 16384, "NVIDIA-Tesla T4", "")])], vec![], &[]);
    let v = filter_now(&h, &two, &["h"]);
    assert!(v["FailedAndUnresolvableNodes"]["h"].as_str().unwrap().contains("asks for 2 vGPUs"), "{v}");
}

/// HAMi's device list is positional over the init containers, then the regular ones; a GPU
/// asked for by an init container is placed there (HAMi's way) with HAMi's lock, and a
/// gpushare request in an init container is refused with a reason.
#[test]
fn init_containers_take_their_place_in_hamis_device_list() {
    let node = hami_node("h", &[("GPU-a", 16384, "NVIDIA-Tesla T4", "hami-core")]);
    let mut with_init = hami_pod("with-init", json!({HAMI_GPU: "1", HAMI_MEM: "8000"}), json!({}));
    with_init["spec"]["initContainers"] = json!([{"name": "setup"}]);
    let mut init_only = hami_pod("init-only", json!({}), json!({}));
    init_only["spec"]["initContainers"] =
        json!([{"name": "warm", "resources": {"limits": {HAMI_GPU: "1", HAMI_MEM: "2000"}}}]);
    let w = World::new(vec![node], vec![with_init, init_only.clone()], &[]);
    w.bind("with-init", "h").unwrap();
    assert_eq!(w.annotation("with-init", HAMI_ALLOCATED).as_deref(), Some(";GPU-a,NVIDIA,8000,0:;"));
    // The device plugin releases the lock after allocating.
    w.api.put_node(hami_node("h", &[("GPU-a", 16384, "NVIDIA-Tesla T4", "hami-core")]));
    w.wait(|w| w.engine.cluster.node("h").is_some_and(|n| !n.annotations.contains_key(HAMI_LOCK)));
    let v = filter_now(&w, &init_only, &["h"]);
    assert_eq!(v["NodeNames"], json!(["h"]), "{v}");
    w.bind("init-only", "h").unwrap();
    assert_eq!(w.annotation("init-only", HAMI_ALLOCATED).as_deref(), Some("GPU-a,NVIDIA,2000,0:;;"));
    assert_eq!(w.annotation("init-only", HAMI_BIND_PHASE).as_deref(), Some("allocating"));
    let lock = w.api.node("h").unwrap()["metadata"]["annotations"][HAMI_LOCK].clone();
    assert!(lock.as_str().unwrap().ends_with(",default,init-only"), "{lock}");
    // gpushare: init containers get no shared GPU from its device plugin.
    let g = small_cluster();
    let mut p = gpushare_pod("gs-init", 2, None, None);
    p["spec"]["initContainers"] = json!([{"name": "warm", "resources": {"limits": {GPUSHARE_MEM: "2"}}}]);
    let v = filter_now(&g, &p, &["gpu-a"]);
    assert!(v["FailedAndUnresolvableNodes"]["gpu-a"].as_str().unwrap().contains("init container `warm`"), "{v}");
}

/// An ordinary whole-GPU pod (`nvidia.com/gpu` alone) passes nodes neither plugin shares and
/// is bound with a plain Binding; HAMi's and gpushare's nodes still get their reasons.
#[test]
fn whole_gpu_pods_pass_nodes_no_plugin_shares() {
    let plain = json!({"metadata": {"name": "plain"}, "status": {"capacity": {HAMI_GPU: "4"}}});
    let hami = hami_node("h", &[("GPU-a", 16384, "NVIDIA-Tesla T4", "hami-core")]);
    let whole = hami_pod("whole", json!({HAMI_GPU: "2"}), json!({}));
    let w = World::new(vec![plain, hami, gpushare_node("gs", 1, 16)], vec![whole.clone()], &[]);
    let v = filter_now(&w, &whole, &["plain", "h", "gs"]);
    assert_eq!(v["NodeNames"], json!(["plain"]), "{v}");
    assert!(v["FailedAndUnresolvableNodes"]["h"].as_str().unwrap().contains("2 vGPUs"), "{v}");
    assert!(v["FailedAndUnresolvableNodes"]["gs"].as_str().unwrap().contains("shared by gpushare"), "{v}");
    w.bind("whole", "plain").unwrap();
    let reqs = w.api.requests();
    assert!(!reqs.iter().any(|r| r.method == "PATCH"), "a plain Binding only");
    assert_eq!(w.api.pod("default", "whole").unwrap()["spec"]["nodeName"], json!("plain"));
    // With HAMi's parameters it is a HAMi pod, which a plain node does not share.
    let shared = hami_pod("shared", json!({HAMI_GPU: "1", HAMI_MEM: "1000"}), json!({}));
    let v = filter_now(&w, &shared, &["plain", "h"]);
    assert_eq!(v["NodeNames"], json!(["h"]), "{v}");
    assert!(v["FailedAndUnresolvableNodes"]["plain"].as_str().unwrap().contains("no shared GPUs"), "{v}");
}

/// HAMi's per-pod device rules: GPU types and UUIDs to use or avoid, and the vGPU mode.
#[test]
fn hami_pod_annotations_choose_among_gpus() {
    let node = hami_node(
        "h",
        &[("GPU-t4", 16384, "NVIDIA-Tesla T4", "hami-core"), ("GPU-a100", 40960, "NVIDIA-A100-PCIE-40GB", "")],
    );
    let mig = hami_node("m", &[("GPU-mig", 40960, "NVIDIA-A100-PCIE-40GB", "mig")]);
    let w = World::new(vec![node, mig], vec![], &[]);
    let limits = json!({HAMI_GPU: "1", HAMI_MEM: "1000"});
    let cases = [
        (json!({HAMI_USE_TYPE: "a100"}), Some("GPU-a100")),
        (json!({HAMI_USE_TYPE: "V100,t4"}), Some("GPU-t4")),
        (json!({HAMI_USE_TYPE: "H100"}), None),
        (json!({HAMI_NOUSE_TYPE: "A100"}), Some("GPU-t4")),
        (json!({HAMI_USE_UUID: "GPU-x,GPU-a100"}), Some("GPU-a100")),
        (json!({HAMI_NOUSE_UUID: "GPU-t4"}), Some("GPU-a100")),
        (json!({HAMI_NOUSE_UUID: "GPU-t4,GPU-a100"}), None),
    ];
    for (i, (ann, want)) in cases.into_iter().enumerate() {
        let name = format!("p{i}");
        w.api.put_pod(hami_pod(&name, limits.clone(), ann.clone()));
        w.wait(|w| w.engine.cluster.pod("default", &name).is_some());
        let v = filter_now(&w, &hami_pod(&name, limits.clone(), ann.clone()), &["h", "m"]);
        assert!(v["FailedAndUnresolvableNodes"]["m"].is_string(), "{v}");
        match want {
            None => {
                assert_eq!(v["NodeNames"], json!([]), "{ann}: {v}");
                assert!(v["FailedAndUnresolvableNodes"]["h"].is_string(), "{ann}: {v}");
            }
            Some(gpu) => {
                assert_eq!(v["NodeNames"], json!(["h"]), "{ann}: {v}");
                w.bind(&name, "h").unwrap();
                let got = w.annotation(&name, HAMI_ALLOCATED).unwrap();
                assert!(got.starts_with(&format!("{gpu},")), "{ann}: {got}");
                w.api.put_node(hami_node(
                    "h",
                    &[
                        ("GPU-t4", 16384, "NVIDIA-Tesla T4", "hami-core"),
                        ("GPU-a100", 40960, "NVIDIA-A100-PCIE-40GB", ""),
                    ],
                ));
                w.wait(|w| w.engine.cluster.node("h").is_some_and(|n| !n.annotations.contains_key(HAMI_LOCK)));
            }
        }
    }
    let mps = hami_pod("mps", limits.clone(), json!({HAMI_VGPU_MODE: "mps"}));
    let v = filter_now(&w, &mps, &["h"]);
    assert!(v["FailedAndUnresolvableNodes"]["h"].as_str().unwrap().contains("vGPU mode `mps`"), "{v}");
    // The MIG-mode card is never a hami-core vGPU.
    let core = hami_pod("core", limits, json!({HAMI_VGPU_MODE: "hami-core"}));
    let v = filter_now(&w, &core, &["h", "m"]);
    assert_eq!(v["NodeNames"], json!(["h"]), "{v}");
    assert!(v["FailedAndUnresolvableNodes"]["m"].as_str().unwrap().contains("`mig` mode"), "{v}");
}

/// HAMi's node lock: a lock whose pod no longer exists is taken over (HAMi's dangling-lock
/// rule); one whose pod exists holds until the configured expiry.
#[test]
fn hami_lock_of_a_deleted_pod_is_taken_over() {
    let fresh = dqngpu_k8s::units::format_rfc3339(dqngpu_k8s::state::unix_now() as i64);
    let mut node = hami_node("h", &[("GPU-a", 16384, "NVIDIA-Tesla T4", "hami-core")]);
    node["metadata"]["annotations"][HAMI_LOCK] = json!(format!("{fresh},default,gone"));
    let limits = json!({HAMI_GPU: "1", HAMI_MEM: "1000"});
    let pods = vec![hami_pod("new", limits.clone(), json!({})), hami_pod("holder", limits.clone(), json!({}))];
    let w = World::new(vec![node.clone()], pods, &[]);
    w.bind("new", "h").unwrap();
    let lock = w.api.node("h").unwrap()["metadata"]["annotations"][HAMI_LOCK].clone();
    assert!(lock.as_str().unwrap().ends_with(",default,new"), "{lock}");
    // A live holder's lock is refused ...
    let mut held = node.clone();
    held["metadata"]["annotations"][HAMI_LOCK] = json!(format!("{fresh},default,holder"));
    let w = World::new(
        vec![held.clone()],
        vec![hami_pod("new", limits.clone(), json!({})), hami_pod("holder", limits.clone(), json!({}))],
        &[],
    );
    assert!(w.bind("new", "h").unwrap_err().contains("locked by HAMi"));
    // ... until it is older than the expiry (`HAMI_NODELOCK_EXPIRE`).
    let old = dqngpu_k8s::units::format_rfc3339(dqngpu_k8s::state::unix_now() as i64 - 10);
    held["metadata"]["annotations"][HAMI_LOCK] = json!(format!("{old},default,holder"));
    let cfg = StateConfig { refresh_s: 0.0, hami_lock_expire_s: 5.0, ..Default::default() };
    let pods = vec![hami_pod("new", limits.clone(), json!({})), hami_pod("holder", limits, json!({}))];
    let w = World::with_config(cfg, vec![held], pods, &[]);
    w.bind("new", "h").unwrap();
}

/// A running pod whose request the extender would refuse for a new placement (here
/// `gpucores: 150`, which HAMi's own scheduler clamps to 100 and places) still holds the GPU
/// its allocation annotation names: it was left out of the accounting, and a second pod was
/// let onto its full card. The same for a gpushare pod that asks in an init container.
#[test]
fn a_running_pod_the_extender_would_refuse_still_holds_its_gpu() {
    let node = hami_node("h", &[("GPU-a", 16384, "NVIDIA-Tesla T4", "hami-core")]);
    let mut running = hami_pod(
        "running",
        json!({HAMI_GPU: "1", HAMI_MEM: "16000", HAMI_CORES: "150"}),
        json!({HAMI_NODE: "h", HAMI_ALLOCATED: "GPU-a,NVIDIA,16000,150:;"}),
    );
    running["spec"]["nodeName"] = json!("h");
    running["status"] = json!({"phase": "Running", "startTime": "2026-01-01T00:00:00Z"});
    let new = hami_pod("new", json!({HAMI_GPU: "1", HAMI_MEM: "8000"}), json!({}));
    let w = World::new(vec![node], vec![running, new.clone()], &[]);
    let v = filter_now(&w, &new, &["h"]);
    assert_eq!(v["NodeNames"], json!([]), "{v}");
    assert!(v["FailedNodes"]["h"].as_str().unwrap().contains("384 MiB free"), "{v}");

    let mut init = gpushare_pod("init", 12, None, Some(("n", 0)));
    init["spec"]["initContainers"] = json!([{"name": "warm", "resources": {"limits": {GPUSHARE_MEM: "12"}}}]);
    init["spec"]["containers"][0]["resources"]["limits"] = json!({});
    let new = gpushare_pod("new-share", 8, None, None);
    let w = World::new(vec![gpushare_node("n", 1, 16)], vec![init, new.clone()], &[]);
    let v = filter_now(&w, &new, &["n"]);
    assert_eq!(v["NodeNames"], json!([]), "12 GiB held on a 16 GiB card: {v}");
}

/// An ordinary whole-GPU pod (`nvidia.com/gpu` alone) fits a plain node and a HAMi node: the
/// plain node, where it passes untouched and shares nothing, scores the top (it scored 0, so
/// such pods were steered onto HAMi's shared cards).
#[test]
fn whole_gpu_pods_score_plain_nodes_at_the_top() {
    let plain = json!({"metadata": {"name": "plain"}, "status": {"capacity": {HAMI_GPU: "4"}}});
    let hami = hami_node("h", &[("GPU-a", 16384, "NVIDIA-Tesla T4", "hami-core")]);
    let whole = hami_pod("whole", json!({HAMI_GPU: "1"}), json!({}));
    let w = World::new(vec![plain, hami], vec![whole.clone()], &[]);
    let v = filter_now(&w, &whole, &["plain", "h"]);
    assert_eq!(v["NodeNames"], json!(["plain", "h"]), "{v}");
    let pod = dqngpu_k8s::wire::PodInfo::from_value(&whole, "pod").unwrap();
    let scores = w.engine.prioritize(&pod, &["plain".to_string(), "h".to_string()]).unwrap();
    let score = |n: &str| scores.iter().find(|s| s.host == n).unwrap().score;
    assert_eq!(score("plain"), dqngpu_k8s::wire::MAX_EXTENDER_PRIORITY);
    assert!(score("plain") >= score("h"), "{scores:?}");
}

/// `unknown_app_pods_total` counts pods bound, not filter requests, and
/// `policy_fallbacks_total` binds, not prioritize's candidate nodes: a pod of no known app
/// filtered three times over two nodes and prioritized once counted 3 and 2 before its bind.
#[test]
fn the_pod_counters_count_binds_not_requests() {
    let anon = gpushare_pod("anon", 4, None, None);
    let w = World::new(vec![gpushare_node("n1", 1, 16), gpushare_node("n2", 1, 16)], vec![anon.clone()], &[]);
    for _ in 0..3 {
        filter_now(&w, &anon, &["n1", "n2"]);
    }
    let pod = dqngpu_k8s::wire::PodInfo::from_value(&anon, "pod").unwrap();
    w.engine.prioritize(&pod, &["n1".to_string(), "n2".to_string()]).unwrap();
    let m = &w.engine.metrics;
    let get = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!((get(&m.unknown_app), get(&m.policy_fallback)), (0, 0));
    w.bind("anon", "n1").unwrap();
    assert_eq!(get(&m.unknown_app), 1);
    assert!(get(&m.policy_fallback) <= 1);
}
