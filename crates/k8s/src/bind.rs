//! Bind: choose the GPU on the node kube-scheduler chose, hold the pod as assumed, write the
//! annotations its device plugin reads, then create the Binding.
//!
//! The GPU is chosen and assumed under the node's bind lock, so concurrent binds to one node
//! see each other and never double-book a GPU; the apiserver calls run outside the lock. A
//! failed call drops the assumption and is reported in the reply; a conflict is counted.
//! For HAMi nodes the extender takes HAMi's node lock (`hami.io/mutex.lock`, as HAMi's own
//! scheduler does, with the node's resourceVersion as precondition); HAMi's device plugin
//! releases it after allocating, and a failed bind releases it.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use crate::apiserver::{urlencode, ApiCallError, ApiClient};
use crate::decide::{Demand, Engine};
use crate::devices::{self, BindPatch, Convention, GpuRequest};
use crate::state::{unix_now, Assumed};
use crate::units;
use crate::wire::{ExtenderBindingArgs, NodeInfo, PodInfo};

/// A bind failed; the message goes into `ExtenderBindingResult.Error`.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// The pod or node is unknown or unusable.
    #[error("{0}")]
    Rejected(String),
    /// An apiserver call failed.
    #[error("{0}")]
    Api(#[from] ApiCallError),
}

/// Binds pods.
pub struct Binder {
    /// The engine (state, policy, metrics).
    pub engine: Arc<Engine>,
    /// The apiserver.
    pub client: Arc<ApiClient>,
    /// Pods whose bind is under way here. With the pods assumed (placed by a bind that ended,
    /// not yet seen bound by the watch), a second bind of one of them (kube-scheduler's retry)
    /// is refused before it can take or release HAMi's node lock, which the first holds under
    /// the same pod's name until the device plugin runs.
    in_flight: Mutex<HashSet<String>>,
}

/// Takes a pod out of [`Binder::in_flight`] when its bind ends, however it ends.
struct InFlight<'a> {
    set: &'a Mutex<HashSet<String>>,
    key: String,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.set.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.key);
    }
}

fn pod_path(ns: &str, name: &str) -> String {
    format!("/api/v1/namespaces/{}/pods/{}", urlencode(ns), urlencode(name))
}

impl Binder {
    /// A binder over `engine`'s state, calling `client`.
    pub fn new(engine: Arc<Engine>, client: Arc<ApiClient>) -> Self {
        Binder { engine, client, in_flight: Mutex::default() }
    }

    /// Marks `key` as being bound; `None` when a bind of it is already under way.
    fn start(&self, key: String) -> Option<InFlight<'_>> {
        let fresh = self.in_flight.lock().unwrap_or_else(|p| p.into_inner()).insert(key.clone());
        fresh.then_some(InFlight { set: &self.in_flight, key })
    }

    fn lookup_pod(&self, a: &ExtenderBindingArgs) -> Result<Arc<PodInfo>, BindError> {
        let ns = if a.pod_namespace.is_empty() { "default" } else { &a.pod_namespace };
        let pod = match self.engine.cluster.pod(ns, &a.pod_name) {
            Some(p) if a.pod_uid.is_empty() || p.uid == a.pod_uid => p,
            _ => match self.client.get(&pod_path(ns, &a.pod_name)) {
                Ok(v) => Arc::new(
                    PodInfo::from_value(&v, "pod")
                        .map_err(|e| BindError::Rejected(format!("pod {ns}/{}: {e}", a.pod_name)))?,
                ),
                Err(e) if e.status() == Some(404) => {
                    return Err(BindError::Rejected(format!("unknown pod {ns}/{}", a.pod_name)))
                }
                Err(e) => return Err(e.into()),
            },
        };
        if !a.pod_uid.is_empty() && pod.uid != a.pod_uid {
            return Err(BindError::Rejected(format!("pod {ns}/{} has UID {}, not {}", a.pod_name, pod.uid, a.pod_uid)));
        }
        if !pod.node_name.is_empty() {
            return Err(BindError::Rejected(format!("pod {} is already bound to {}", pod.key(), pod.node_name)));
        }
        Ok(pod)
    }

    /// A bind of a pod still assumed here: an earlier bind that ended with its outcome unknown
    /// (the Binding and the check after it both failed), or one that succeeded before the
    /// watch showed it. The apiserver is asked: unbound, the earlier Binding did not commit,
    /// so the assumption is dropped and this bind goes on with the pod as the apiserver has it
    /// (it was refused until the assumption expired, `--assume-ttl-s`); bound, or not
    /// answering, it is refused.
    fn settle_assumed(&self, pod: &PodInfo) -> Result<PodInfo, BindError> {
        let busy = || BindError::Rejected(format!("pod {} is already being bound", pod.key()));
        let v = self.client.get(&pod_path(&pod.namespace, &pod.name)).map_err(|_| busy())?;
        let now = PodInfo::from_value(&v, "pod").map_err(|_| busy())?;
        if now.uid != pod.uid {
            return Err(busy());
        }
        if !now.node_name.is_empty() {
            return Err(BindError::Rejected(format!("pod {} is already bound to {}", pod.key(), now.node_name)));
        }
        self.engine.cluster.forget(&pod.uid);
        Ok(now)
    }

    /// Whether `pod` is bound to `node` now, as the apiserver says (`None`: it could not be
    /// asked).
    fn bound_to(&self, pod: &PodInfo, node: &str) -> Option<bool> {
        let v = self.client.get(&pod_path(&pod.namespace, &pod.name)).ok()?;
        let now = PodInfo::from_value(&v, "pod").ok()?;
        Some(now.uid == pod.uid && now.node_name == node)
    }

    /// Binds one pod (blocking: call from a blocking thread).
    ///
    /// On a HAMi node HAMi's node lock is taken first, and the GPU is chosen after it, on the
    /// state as it stands then (a pod HAMi's scheduler assigned meanwhile is counted); a
    /// failure after the lock releases it.
    pub fn bind(&self, a: &ExtenderBindingArgs) -> Result<(), BindError> {
        let pod = self.lookup_pod(a)?;
        let engine = &self.engine;
        let Some(_started) = self.start(pod.key()) else {
            return Err(BindError::Rejected(format!("pod {} is already being bound", pod.key())));
        };
        let pod = if engine.cluster.is_assumed(&pod.uid) { Arc::new(self.settle_assumed(&pod)?) } else { pod };
        let d = engine.demand(&pod).map_err(|e| BindError::Rejected(format!("pod {}: {e}", pod.key())))?;
        if d.req == GpuRequest::None {
            return self.create_binding(&pod, &a.node);
        }
        let node = a.node.as_str();
        let v = engine.cluster.view(node).ok_or_else(|| BindError::Rejected(format!("unknown node {node}")))?;
        if d.passes(&v) {
            return self.create_binding(&pod, node);
        }
        // `fit_node` refuses it too (in `place`), but only after HAMi's node lock was taken.
        if !engine.cluster.synced() {
            return Err(BindError::Rejected(format!("pod {}: {}", pod.key(), crate::decide::NOT_SYNCED)));
        }
        let locked = engine.convention(&v) == Some(Convention::Hami);
        if locked {
            self.hami_lock(&pod, node)?;
        }
        let mut unknown = false;
        let r = self.place(&pod, &d, node).and_then(|patch| {
            // On the pod as this bind read it (the resourceVersion a precondition): a retry
            // made on a stale cache gets 409 instead of rewriting the device annotations of a
            // pod already bound and running (gpushare's plugin would match it to the next
            // allocation again).
            let mut body = patch.to_merge_patch();
            if !pod.resource_version.is_empty() {
                body["metadata"]["resourceVersion"] = serde_json::Value::String(pod.resource_version.clone());
            }
            let r = self
                .client
                .merge_patch(&pod_path(&pod.namespace, &pod.name), &body)
                .map_err(BindError::from)
                .and_then(|_| self.create_binding(&pod, node));
            let Err(e) = r else { return Ok(()) };
            // A refusal (4xx) did not bind; a 5xx or a lost answer (an overloaded apiserver's
            // 504) may have: the pod itself says. Forgotten while it is in fact bound, its
            // GPU share looked free until the watch caught up, and a second pod took it.
            let ambiguous = matches!(&e, BindError::Api(a) if a.status().is_none_or(|s| s >= 500));
            match ambiguous.then(|| self.bound_to(&pod, node)) {
                // Bound here after all: kept, and kube-scheduler told the truth.
                Some(Some(true)) => Ok(()),
                // Cannot tell: kept (the watch settles it, a retry asks again, or the
                // assumption expires), and so is HAMi's lock, which its device plugin reads
                // to find the pod if it is bound.
                Some(None) => {
                    unknown = true;
                    Err(e)
                }
                _ => {
                    engine.cluster.forget(&pod.uid);
                    Err(e)
                }
            }
        });
        if let Err(e) = &r {
            if locked && !unknown {
                self.hami_unlock(node);
            }
            if matches!(e, BindError::Api(a) if a.status() == Some(409)) {
                engine.metrics.conflicts.fetch_add(1, Ordering::Relaxed);
            }
        } else if !d.known {
            engine.metrics.unknown_app.fetch_add(1, Ordering::Relaxed);
        }
        r
    }

    /// Chooses the GPU and assumes the pod under the node's bind lock (concurrent binds see
    /// each other); the annotations to write.
    fn place(&self, pod: &Arc<PodInfo>, d: &Demand, node: &str) -> Result<BindPatch, BindError> {
        let engine = &self.engine;
        let lock = engine.cluster.bind_lock(node);
        let _held = lock.lock().unwrap_or_else(|p| p.into_inner());
        let v = engine.cluster.view(node).ok_or_else(|| BindError::Rejected(format!("unknown node {node}")))?;
        let feasible = engine
            .fit_node(d, &v)
            .map_err(|e| BindError::Rejected(format!("pod {} does not fit node {node}: {e}", pod.key())))?;
        let choice = engine.choose(d, &v, &feasible).ok_or_else(|| BindError::Rejected(format!("no GPU on {node}")))?;
        if !choice.by_policy {
            engine.metrics.policy_fallback.fetch_add(1, Ordering::Relaxed);
        }
        let slot = &v.slots[choice.slot];
        let mem = d.req.mem_mib(slot.device.spec.memory_mib, engine.cluster.cfg.unit_mib);
        let now = unix_now();
        let patch = match &d.req {
            GpuRequest::Gpushare { units } => {
                let ns = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos())
                    .unwrap_or(0);
                BindPatch::gpushare(&slot.device, *units, engine.cluster.cfg.unit_mib, ns)
            }
            GpuRequest::Hami { container, .. } => {
                BindPatch::hami(pod, *container, &slot.device, node, mem, d.req.cores(), now as u64)
            }
            GpuRequest::None => BindPatch::default(),
        };
        let fresh = engine.cluster.assume(Assumed {
            pod: pod.clone(),
            node: node.to_string(),
            gpu_id: slot.device.id.clone(),
            mem_mib: mem.max(d.peak_mib),
            cores: d.req.cores(),
            app: d.app.clone(),
            since_s: now,
        });
        if !fresh {
            return Err(BindError::Rejected(format!("pod {} is already being bound", pod.key())));
        }
        tracing::info!(pod = %pod.key(), node, gpu = %slot.device.id, by_policy = choice.by_policy, rate = choice.rate, "bind");
        Ok(patch)
    }

    /// Releases HAMi's node lock (best effort: it expires anyway).
    fn hami_unlock(&self, node: &str) {
        let _ = self.client.merge_patch(
            &format!("/api/v1/nodes/{}", urlencode(node)),
            &json!({"metadata": {"annotations": {devices::HAMI_LOCK: null}}}),
        );
    }

    fn create_binding(&self, pod: &PodInfo, node: &str) -> Result<(), BindError> {
        let mut meta = json!({"name": pod.name, "namespace": pod.namespace});
        if !pod.uid.is_empty() {
            meta["uid"] = Value::String(pod.uid.clone());
        }
        let body = json!({"apiVersion": "v1", "kind": "Binding", "metadata": meta, "target": {"apiVersion": "v1", "kind": "Node", "name": node}});
        self.client.post(&format!("{}/binding", pod_path(&pod.namespace, &pod.name)), &body)?;
        Ok(())
    }

    /// Takes HAMi's node lock: refuses a lock younger than the expiry held for another pod
    /// that still exists (a lock whose pod is gone is taken over, HAMi's dangling-lock
    /// rule), patches with the node's resourceVersion, and on a conflict reads the node again
    /// once.
    fn hami_lock(&self, pod: &PodInfo, node: &str) -> Result<(), BindError> {
        let path = format!("/api/v1/nodes/{}", urlencode(node));
        let mut cached = self.engine.cluster.node(node).map(|n| (*n).clone());
        for attempt in 0..2 {
            let n: NodeInfo = match cached.take() {
                Some(n) => n,
                None => NodeInfo::from_value(&self.client.get(&path)?, "node")
                    .map_err(|e| BindError::Rejected(format!("node {node}: {e}")))?,
            };
            if let Some(lock) = n.annotations.get(devices::HAMI_LOCK) {
                self.lock_free(lock, pod, node)?;
            }
            let value = format!("{},{},{}", units::format_rfc3339(unix_now() as i64), pod.namespace, pod.name);
            let body = json!({"metadata": {"annotations": {devices::HAMI_LOCK: value}, "resourceVersion": n.resource_version}});
            match self.client.merge_patch(&path, &body) {
                Ok(_) => return Ok(()),
                Err(e) if e.status() == Some(409) && attempt == 0 => {
                    self.engine.metrics.conflicts.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(BindError::Rejected(format!("node {node}: HAMi node lock conflicted twice")))
    }

    /// `Ok` when `pod` may take over HAMi's node lock `lock` (`RFC3339,namespace,name`): it
    /// is ours, expired, unreadable, or its pod no longer exists.
    fn lock_free(&self, lock: &str, pod: &PodInfo, node: &str) -> Result<(), BindError> {
        let mut parts = lock.split(',');
        let t = parts.next().and_then(|t| units::parse_rfc3339(t).ok()).unwrap_or(0.0);
        let (ns, name) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        if unix_now() - t >= self.engine.cluster.cfg.hami_lock_expire_s || (ns == pod.namespace && name == pod.name) {
            return Ok(());
        }
        if !ns.is_empty() && !name.is_empty() {
            match self.client.get(&pod_path(ns, name)) {
                Err(e) if e.status() == Some(404) => {
                    tracing::info!(node, lock, "HAMi node lock's pod is gone; taking the lock over");
                    return Ok(());
                }
                Ok(_) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Err(BindError::Rejected(format!("node {node} is locked by HAMi (`{lock}`); kube-scheduler will retry")))
    }
}
