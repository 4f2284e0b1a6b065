//! List+watch of nodes and pods into the [`Cluster`](crate::state::Cluster), one thread each, and the feedback the
//! pod watch carries: OOM-killed containers put their app pair on the avoid list; finished
//! pods' runtimes are recorded.
//!
//! Each reflector lists, then watches from the list's resourceVersion; a watch that ends is
//! resumed from the last resourceVersion seen (bookmarks included); `410 Gone` or an error
//! relists after a short back-off.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::apiserver::ApiClient;
use crate::decide::Engine;
use crate::devices;
use crate::wire::{NodeInfo, PodInfo};

/// Which resource a reflector follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    /// `/api/v1/nodes`.
    Nodes,
    /// `/api/v1/pods`.
    Pods,
}

impl Resource {
    fn path(self) -> &'static str {
        match self {
            Resource::Nodes => "/api/v1/nodes",
            Resource::Pods => "/api/v1/pods",
        }
    }
}

fn rv_of(v: &Value) -> Option<&str> {
    v.get("metadata")?.get("resourceVersion")?.as_str()
}

/// Starts both reflectors on their own threads.
pub fn spawn(client: Arc<ApiClient>, engine: Arc<Engine>) {
    for r in [Resource::Nodes, Resource::Pods] {
        let (c, e) = (client.clone(), engine.clone());
        let _ = std::thread::Builder::new().name(format!("reflector-{r:?}")).spawn(move || run(&c, &e, r));
    }
}

/// Runs one reflector forever.
pub fn run(client: &ApiClient, engine: &Engine, res: Resource) {
    let mut backoff = Duration::from_millis(200);
    loop {
        let (items, mut rv) = match client.list(res.path()) {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!(error = %e, "list failed; retrying");
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(Duration::from_secs(10));
                continue;
            }
        };
        backoff = Duration::from_millis(200);
        match res {
            Resource::Nodes => engine.cluster.replace_nodes(items.iter().filter_map(parse_node).collect()),
            Resource::Pods => engine.cluster.replace_pods(items.iter().filter_map(parse_pod).collect()),
        }
        loop {
            let mut gone = false;
            let from = rv.clone();
            let r = client.watch(res.path(), &from, |ev| {
                if let Some(v) = rv_of(&ev.object) {
                    rv = v.to_string();
                }
                match ev.kind.as_str() {
                    "ADDED" | "MODIFIED" => apply(engine, res, &ev.object, false),
                    "DELETED" => apply(engine, res, &ev.object, true),
                    "BOOKMARK" => {}
                    _ => {
                        let code = ev.object.get("code").and_then(Value::as_i64);
                        tracing::info!(?code, "watch error event; relisting");
                        gone = true;
                        return false;
                    }
                }
                true
            });
            match r {
                Ok(()) if !gone => continue,
                Ok(()) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "watch failed; relisting");
                    std::thread::sleep(backoff);
                    break;
                }
            }
        }
    }
}

fn parse_node(v: &Value) -> Option<NodeInfo> {
    NodeInfo::from_value(v, "node").map_err(|e| tracing::warn!(error = %e, "node ignored")).ok()
}

fn parse_pod(v: &Value) -> Option<PodInfo> {
    PodInfo::from_value(v, "pod").map_err(|e| tracing::warn!(error = %e, "pod ignored")).ok()
}

fn apply(engine: &Engine, res: Resource, obj: &Value, deleted: bool) {
    match res {
        Resource::Nodes => {
            let Some(n) = parse_node(obj) else { return };
            if deleted {
                engine.cluster.delete_node(&n.name);
            } else {
                engine.cluster.upsert_node(n);
            }
        }
        Resource::Pods => {
            let Some(p) = parse_pod(obj) else { return };
            if deleted {
                engine.cluster.delete_pod(&p.uid);
                return;
            }
            let uid = p.uid.clone();
            let prev = engine.cluster.upsert_pod(p);
            if let Some(now) = engine.cluster.pod_by_uid(&uid) {
                feedback(engine, prev.as_deref(), &now);
            }
        }
    }
}

/// Learns from a pod's change: a container newly OOM-killed puts its app and the apps on its
/// GPU on each other's avoid list; another failure is counted; a pod that newly succeeded
/// records its runtime.
pub fn feedback(engine: &Engine, prev: Option<&PodInfo>, now: &PodInfo) {
    let ends = |p: &PodInfo| -> Vec<(String, i64, String)> {
        p.statuses
            .iter()
            .flat_map(|s| {
                let mut v = Vec::new();
                if let Some(t) = &s.terminated {
                    v.push((s.name.clone(), s.restart_count, t.reason.clone()));
                }
                if let Some(t) = &s.last_terminated {
                    v.push((s.name.clone(), s.restart_count - 1, t.reason.clone()));
                }
                v
            })
            .collect()
    };
    let before = prev.map(ends).unwrap_or_default();
    let app = devices::app_of(now).map(str::to_string);
    for end in ends(now) {
        if before.contains(&end) {
            continue;
        }
        if end.2 == "OOMKilled" {
            engine.metrics.oom_kills.fetch_add(1, Ordering::Relaxed);
            let Some(app) = &app else { continue };
            let others = engine.cluster.apps_beside(now);
            if !others.is_empty() {
                tracing::warn!(pod = %now.key(), app, ?others, "OOM-killed: avoiding these apps on its GPU from now on");
                engine.cluster.profiles.add_avoid(app, &others);
                for o in &others {
                    engine.cluster.profiles.add_avoid(o, std::slice::from_ref(app));
                }
            }
        } else if end.2 != "Completed" {
            engine.metrics.failed_containers.fetch_add(1, Ordering::Relaxed);
        }
    }
    let newly_done = now.phase == "Succeeded" && prev.is_none_or(|p| p.phase != "Succeeded");
    if newly_done {
        let start = now.start_s;
        let end = now
            .statuses
            .iter()
            .filter_map(|s| s.terminated.as_ref()?.finished_s)
            .fold(None, |a: Option<f64>, b| Some(a.map_or(b, |a| a.max(b))));
        if let (Some(app), Some(s), Some(e)) = (&app, start, end) {
            engine.cluster.profiles.observe_runtime(app, (e - s).max(0.0));
            engine.metrics.finished.fetch_add(1, Ordering::Relaxed);
        }
    }
}
