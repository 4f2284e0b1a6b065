//! Benchmarks of the extender (docs/BENCHMARKS.md):
//! 1. filter + prioritize for one pod over real loopback HTTP, 1,000 nodes x 8 GPUs with
//!    5,000 running pods (thesis apps and unknown ones), `nodeCacheCapable` node names;
//! 2. 1,000 binds through the extender's `/bind` against the stand-in apiserver (pod patch
//!    and Binding per bind, reflectors following the watch), from 16 client threads.
//!
//! `cargo run --release -p dqngpu-k8s --example k8s_bench [-- ITERATIONS]`

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use dqngpu_k8s::api::{AppState, HttpConfig};
use dqngpu_k8s::apiserver::{ApiClient, ApiConfig, Token};
use dqngpu_k8s::devices::*;
use dqngpu_k8s::standin::StandIn;
use dqngpu_k8s::state::{Profiles, StateConfig};

const NODES: usize = 1000;
const GPUS: usize = 8;
const RUNNING: usize = 5000;
const BINDS: usize = 1000;
const APPS: [&str; 6] = ["resnet50", "vgg16", "alexnet", "LAMMPS", "GROMACS", "other-app"];

fn node(i: usize) -> Value {
    json!({"metadata": {"name": format!("node-{i:04}"), "labels": {PRODUCT_LABEL: "NVIDIA-A100-SXM4-80GB"}},
           "status": {"capacity": {GPUSHARE_COUNT: GPUS.to_string(), GPUSHARE_MEM: (GPUS * 80).to_string()}}})
}

fn pod(name: &str, gib: u32, app: &str, placed: Option<(usize, usize)>) -> Value {
    let mut p = json!({"metadata": {"name": name, "namespace": "bench", "uid": format!("uid-{name}"), "annotations": {APP_ANNOTATION: app}},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {GPUSHARE_MEM: gib.to_string()}}}]}, "status": {"phase": "Pending"}});
    if let Some((n, g)) = placed {
        p["spec"]["nodeName"] = json!(format!("node-{n:04}"));
        p["status"] = json!({"phase": "Running", "startTime": "2026-01-01T00:00:00Z"});
        p["metadata"]["annotations"][GPUSHARE_IDX] = json!(g.to_string());
        p["metadata"]["annotations"][GPUSHARE_POD] = json!(gib.to_string());
    }
    p
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * q).round() as usize]
}

/// POST over a raw socket with TCP_NODELAY and the whole request in one write, as Go's
/// client sends it (ureq writes headers and body apart, which Nagle's algorithm delays).
fn post_raw(addr: std::net::SocketAddr, path: &str, body: &str) -> Value {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_nodelay(true).expect("nodelay");
    let req = format!("POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
    s.write_all(req.as_bytes()).expect("write");
    let mut out = Vec::new();
    s.read_to_end(&mut out).expect("read");
    let text = String::from_utf8_lossy(&out);
    let json = text.split("\r\n\r\n").nth(1).unwrap_or("");
    // Replies may be chunked: take the JSON between the first `{`/`[` and the last `}`/`]`.
    let start = json.find(['{', '[']).unwrap_or(0);
    let end = json.rfind(['}', ']']).map_or(json.len(), |e| e + 1);
    serde_json::from_str(&json[start..end]).expect("json reply")
}

fn post(agent: &ureq::Agent, url: &str, body: &str) -> Value {
    agent
        .post(url)
        .set("content-type", "application/json")
        .send_string(body)
        .expect("request")
        .into_json()
        .expect("json")
}

fn main() {
    let iterations: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(300);
    // Deterministic layout: pod k on node k % NODES, GPU (k / NODES) % GPUS.
    let api = StandIn::new(None);
    for i in 0..NODES {
        api.put_node(node(i));
    }
    for k in 0..RUNNING {
        api.put_pod(pod(&format!("run-{k}"), 10, APPS[k % APPS.len()], Some((k % NODES, (k / NODES) % GPUS))));
    }
    for b in 0..BINDS {
        api.put_pod(pod(&format!("new-{b}"), 8, APPS[b % APPS.len()], None));
    }
    let url = api.start().expect("stand-in");
    let client = ApiClient::new(ApiConfig { server: url, token: Token::None, tls: None });
    let lib = dqngpu_model::library::resolve("thesis").expect("thesis library");
    let policy_name = std::env::var("K8S_BENCH_POLICY").unwrap_or_else(|_| "greedy".into());
    let policy = Arc::from(dqngpu_policy::by_name(&policy_name, 0).expect("policy"));
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let state: AppState =
        rt.block_on(async { dqngpu_k8s::start(client, StateConfig::default(), Profiles::new(&[lib]), policy) });
    let engine = state.engine.clone();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    rt.spawn(async move {
        let _ = dqngpu_k8s::serve(state, &HttpConfig::default(), addr, std::future::pending()).await;
    });
    let t0 = Instant::now();
    while !(engine.cluster.synced() && engine.cluster.pod_count() == RUNNING + BINDS) {
        std::thread::sleep(Duration::from_millis(20));
    }
    println!("listed {NODES} nodes and {} pods in {:.2} s", RUNNING + BINDS, t0.elapsed().as_secs_f64());
    let base = format!("http://{addr}");
    let agent = ureq::AgentBuilder::new().build();
    while agent.get(&format!("{base}/healthz")).call().is_err() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let names: Vec<String> = (0..NODES).map(|i| format!("node-{i:04}")).collect();

    // 1a. The engine alone (no HTTP, no JSON).
    let mut eng = Vec::new();
    for i in 0..iterations + 20 {
        let v = pod(&format!("new-{}", i % BINDS), 8 + (i % 3) as u32 * 8, APPS[i % APPS.len()], None);
        let p = dqngpu_k8s::wire::PodInfo::from_value(&v, "pod").expect("pod");
        let t = Instant::now();
        let f = engine.filter(&p, &names);
        let pr = engine.prioritize(&p, &f.keep).expect("prioritize");
        let dt = t.elapsed().as_secs_f64() * 1000.0;
        assert_eq!(pr.len(), f.keep.len());
        if i == 0 {
            println!("first filter+prioritize (builds all {NODES} node views): {dt:.2} ms");
        }
        if i >= 20 {
            eng.push(dt);
        }
        if std::env::var_os("K8S_BENCH_TRACE").is_some() {
            eprintln!("{} {} {:.2}", APPS[i % APPS.len()], 8 + (i % 3) * 8, dt);
        }
    }
    eng.sort_by(f64::total_cmp);
    println!(
        "engine only (filter+prioritize calls): p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms",
        percentile(&eng, 0.5),
        percentile(&eng, 0.9),
        percentile(&eng, 0.99)
    );

    // The router without sockets (tower oneshot): handler + JSON cost.
    if std::env::var_os("K8S_BENCH_ONESHOT").is_some() {
        use tower::ServiceExt;
        let router = dqngpu_k8s::api::app(AppState { engine: engine.clone(), binder: None }, &HttpConfig::default());
        let mut one = Vec::new();
        for i in 0..120 {
            let p = pod(&format!("new-{}", i % BINDS), 8, APPS[i % APPS.len()], None);
            let body = json!({"Pod": p, "Nodes": null, "NodeNames": names}).to_string();
            let t = Instant::now();
            let req = axum::http::Request::post("/filter").body(axum::body::Body::from(body)).expect("req");
            let resp = rt.block_on(router.clone().oneshot(req)).expect("resp");
            let _ = rt.block_on(axum::body::to_bytes(resp.into_body(), usize::MAX));
            if i >= 20 {
                one.push(t.elapsed().as_secs_f64() * 1000.0);
            }
        }
        one.sort_by(f64::total_cmp);
        println!("filter via router, no sockets: p50 {:.2} ms", percentile(&one, 0.5));
        let mut f_only = Vec::new();
        for i in 0..120 {
            let v = pod(&format!("new-{}", i % BINDS), 8, APPS[i % APPS.len()], None);
            let p = dqngpu_k8s::wire::PodInfo::from_value(&v, "pod").expect("pod");
            let t = Instant::now();
            let _ = engine.filter(&p, &names);
            if i >= 20 {
                f_only.push(t.elapsed().as_secs_f64() * 1000.0);
            }
        }
        f_only.sort_by(f64::total_cmp);
        println!("filter engine only: p50 {:.2} ms", percentile(&f_only, 0.5));
    }

    // HTTP round trip alone (GET /healthz), for scale.
    let mut rt_ms: Vec<f64> = (0..300)
        .map(|_| {
            let t = Instant::now();
            let _ = agent.get(&format!("{base}/healthz")).call();
            t.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    rt_ms.sort_by(f64::total_cmp);
    println!("GET /healthz round trip: p50 {:.2} ms, p99 {:.2} ms", percentile(&rt_ms, 0.5), percentile(&rt_ms, 0.99));

    // 1b. filter + prioritize over HTTP.
    let mut lat = Vec::new();
    for i in 0..iterations + 20 {
        let p = pod(&format!("new-{}", i % BINDS), 8 + (i % 3) as u32 * 8, APPS[i % APPS.len()], None);
        let body = json!({"Pod": p, "Nodes": null, "NodeNames": names}).to_string();
        let t = Instant::now();
        let f = post(&agent, &format!("{base}/filter"), &body);
        let kept = f["NodeNames"].as_array().map_or(0, Vec::len);
        let body2 = json!({"Pod": p, "Nodes": null, "NodeNames": f["NodeNames"]}).to_string();
        let pr = post(&agent, &format!("{base}/prioritize"), &body2);
        let dt = t.elapsed().as_secs_f64() * 1000.0;
        assert_eq!(pr.as_array().map_or(0, Vec::len), kept);
        if i >= 20 {
            lat.push(dt);
        }
    }
    lat.sort_by(f64::total_cmp);
    let mut raw = Vec::new();
    for i in 0..iterations + 20 {
        let p = pod(&format!("new-{}", i % BINDS), 8 + (i % 3) as u32 * 8, APPS[i % APPS.len()], None);
        let body = json!({"Pod": p, "Nodes": null, "NodeNames": names}).to_string();
        let t = Instant::now();
        let f = post_raw(addr, "/filter", &body);
        let body2 = json!({"Pod": p, "Nodes": null, "NodeNames": f["NodeNames"]}).to_string();
        let pr = post_raw(addr, "/prioritize", &body2);
        let dt = t.elapsed().as_secs_f64() * 1000.0;
        assert_eq!(pr.as_array().map_or(0, Vec::len), f["NodeNames"].as_array().map_or(0, Vec::len));
        if i >= 20 {
            raw.push(dt);
        }
    }
    raw.sort_by(f64::total_cmp);
    println!(
        "filter+prioritize over HTTP, one-write requests with TCP_NODELAY (as Go sends): p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms",
        percentile(&raw, 0.5),
        percentile(&raw, 0.9),
        percentile(&raw, 0.99)
    );
    println!(
        "filter+prioritize over HTTP (ureq client), {NODES} nodes x {GPUS} GPUs, {RUNNING} running pods, {iterations} pods: p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        percentile(&lat, 0.5),
        percentile(&lat, 0.9),
        percentile(&lat, 0.99),
        lat[lat.len() - 1]
    );

    // 2. 1,000 binds from 16 threads through /bind.
    let t = Instant::now();
    let failures = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for th in 0..16 {
            let (base, failures) = (&base, &failures);
            s.spawn(move || {
                let agent = ureq::AgentBuilder::new().build();
                for b in (th..BINDS).step_by(16) {
                    let body = json!({"PodName": format!("new-{b}"), "PodNamespace": "bench", "PodUID": format!("uid-new-{b}"), "Node": format!("node-{:04}", (b * 7) % NODES)});
                    let r = post(&agent, &format!("{base}/bind"), &body.to_string());
                    if r["Error"] != json!("") {
                        failures.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        eprintln!("bind failed: {r}");
                    }
                }
            });
        }
    });
    let wall = t.elapsed().as_secs_f64();
    let bound = api
        .pods()
        .iter()
        .filter(|p| {
            p["metadata"]["name"].as_str().is_some_and(|n| n.starts_with("new-")) && p["spec"]["nodeName"].is_string()
        })
        .count();
    println!(
        "{BINDS} binds (16 threads, patch + Binding each, stand-in apiserver): {wall:.2} s, {:.0} binds/s, {} failed, {bound} bound",
        BINDS as f64 / wall,
        failures.load(std::sync::atomic::Ordering::Relaxed)
    );
}
