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
        let cluster = Arc::new(Cluster::new(StateConfig { refresh_s: 0.0, ..Default::default() }, Arc::new(pr)));
        let policy = Arc::from(dqngpu_policy::by_name("greedy", 0).unwrap());
        let engine = Arc::new(Engine::new(cluster, policy));
        dqngpu_k8s::reflector::spawn(client.clone(), engine.clone());
        let w = World { api, binder: Arc::new(Binder { engine: engine.clone(), client }), engine };
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
    let failed = v["FailedNodes"].as_object().unwrap();
    assert_eq!(failed.len(), 3, "{v}");
    assert!(failed["gpu-b"].as_str().unwrap().contains("0 MiB free"), "{v}");
    assert!(failed["cpu-only"].as_str().unwrap().contains("no shared GPUs"), "{v}");
    assert!(failed["ghost"].as_str().unwrap().contains("not in the extender's cache"), "{v}");
    assert_eq!(v["FailedAndUnresolvableNodes"], Value::Null);
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
