//! Load generator for the placement service: submissions per second and latency
//! percentiles over real HTTP on loopback, and the decision latency p99 from `/metrics`.
//!
//! ```text
//! cargo run --release -p dqngpu-service --example loadgen -- [--url URL] [--requests N] [--concurrency C]
//! ```
//! Without `--url` it starts a service in this process on a loopback port (2 virtual Titan Xp
//! GPUs, `tetris`, a fresh data dir) and drives it through the socket like any client.

use std::sync::Arc;
use std::time::{Duration, Instant};

use dqngpu_model::ClusterSpec;
use dqngpu_service::{HttpConfig, Service, ServiceConfig, Supervisor};

struct Opts {
    url: Option<String>,
    requests: usize,
    concurrency: usize,
    seed: u64,
}

fn parse() -> Result<Opts, String> {
    let mut o = Opts { url: None, requests: 20_000, concurrency: 8, seed: 0 };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut val = || it.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--url" => o.url = Some(val()?),
            "--requests" => o.requests = val()?.parse().map_err(|e| format!("--requests: {e}"))?,
            "--concurrency" => o.concurrency = val()?.parse().map_err(|e| format!("--concurrency: {e}"))?,
            "--seed" => o.seed = val()?.parse().map_err(|e| format!("--seed: {e}"))?,
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(o)
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * q).round() as usize]
}

/// The p-quantile of a Prometheus histogram: the upper bound of the bucket that holds it.
fn histogram_quantile(metrics: &str, name: &str, q: f64) -> Option<f64> {
    let mut buckets: Vec<(f64, f64)> = Vec::new();
    for line in metrics.lines() {
        let Some(rest) = line.strip_prefix(&format!("{name}_bucket{{le=\"")) else { continue };
        let (le, count) = rest.split_once("\"} ")?;
        let le = if le == "+Inf" { f64::INFINITY } else { le.parse().ok()? };
        buckets.push((le, count.trim().parse().ok()?));
    }
    let total = buckets.last()?.1;
    buckets.into_iter().find(|(_, c)| *c >= q * total).map(|(le, _)| le)
}

fn main() {
    let o = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    // Kept alive to the end: dropping the Service stops its placement loop.
    let mut keep: Option<(tempfile::TempDir, Service)> = None;
    let url = match &o.url {
        Some(u) => u.clone(),
        None => {
            let tmp = tempfile::tempdir().expect("temp dir");
            let gpus = ClusterSpec::parse_gpus("titanxp:2").expect("gpus").gpus();
            let cfg = ServiceConfig::new(tmp.path().join("data"), gpus, Supervisor::Direct);
            let policy: Arc<dyn dqngpu_model::Policy> =
                Arc::from(dqngpu_policy::by_name("tetris", o.seed).expect("policy"));
            let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).expect("bind");
            let addr = listener.local_addr().expect("addr");
            let service = rt.block_on(async { Service::start(cfg, policy, None) }).expect("service");
            let router = service.router(&HttpConfig::default());
            rt.spawn(async move { axum::serve(listener, router).await });
            keep = Some((tmp, service));
            format!("http://{addr}")
        }
    };
    // Two of these fit on a Titan Xp: jobs run and finish while submissions stream in.
    let s = serde_json::json!({ "gpu_util_pct": 50.0, "gpu_mem_mib": 6000.0, "sm_pct": 50.0, "pcie_mbps": 10.0 });
    let profile = serde_json::json!({ "app": { "name": "bench" }, "interval_s": 1.0, "samples": vec![s; 2] });
    ureq::post(&format!("{url}/v1/profiles")).send_json(profile).expect("posting the bench profile");
    let per = o.requests / o.concurrency.max(1);
    let t0 = Instant::now();
    let handles: Vec<_> = (0..o.concurrency.max(1))
        .map(|w| {
            let url = url.clone();
            std::thread::spawn(move || {
                let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(10)).build();
                let mut lat = Vec::with_capacity(per);
                let mut errors = 0usize;
                for i in 0..per {
                    let body = serde_json::json!({ "app": "bench", "command": ["sleep", "0.2"], "params": format!("{w}-{i}") });
                    let t = Instant::now();
                    match agent.post(&format!("{url}/v1/jobs")).send_json(body) {
                        Ok(r) if r.status() == 201 => lat.push(t.elapsed().as_secs_f64()),
                        _ => errors += 1,
                    }
                }
                (lat, errors)
            })
        })
        .collect();
    let mut lat = Vec::new();
    let mut errors = 0;
    for h in handles {
        let (l, e) = h.join().expect("worker");
        lat.extend(l);
        errors += e;
    }
    let wall = t0.elapsed().as_secs_f64();
    lat.sort_by(f64::total_cmp);
    let metrics =
        ureq::get(&format!("{url}/metrics")).call().ok().and_then(|r| r.into_string().ok()).unwrap_or_default();
    let decision_p99 = histogram_quantile(&metrics, "dqngpu_decision_latency_seconds", 0.99);
    let decisions = metrics.lines().find_map(|l| l.strip_prefix("dqngpu_decisions_total ")).unwrap_or("?");
    println!("requests: {} ok, {errors} errors, concurrency {}", lat.len(), o.concurrency);
    println!("throughput: {:.0} submissions/s over {wall:.2} s", lat.len() as f64 / wall);
    println!(
        "latency: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        percentile(&lat, 0.5) * 1e3,
        percentile(&lat, 0.99) * 1e3,
        lat.last().copied().unwrap_or(f64::NAN) * 1e3
    );
    match decision_p99 {
        Some(p) => {
            println!("decisions: {decisions}, decision latency p99 <= {:.3} ms (histogram bucket bound)", p * 1e3)
        }
        None => println!("decisions: {decisions}, no decision histogram found"),
    }
    drop(keep);
}
