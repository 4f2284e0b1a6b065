//! The extender's decisions, as plain synchronous functions over the cluster state: which
//! nodes a pod fits (filter), how much the policy likes each (prioritize), and which GPU it
//! gets on the chosen node (bind). Every choice goes through one [`Policy`].
//!
//! A pod's app is known when the profile library has it: the configured policy decides.
//! A pod of an unknown app is placed by its declared memory alone, with GPU-memory best fit.
//! The policy's choice is checked against the extender's own fit rules (declared memory and
//! profile peaks, HAMi's split count and cores, the avoid list); a GPU the policy does not
//! choose or chooses wrongly is replaced by the fitting GPU with the least predicted
//! interference (contention model), then the least free memory.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use dqngpu_interference::{Contention, Interference, JobLoad};
use dqngpu_model::{AppProfile, ClusterView, Policy, QueuedJob, Resources};
use dqngpu_policy::BestFit;

use crate::devices::{self, Convention, GpuRequest};
use crate::state::{declared_profile, job_id, unix_now, Cluster, NodeView};
use crate::wire::{HostPriority, PodInfo, MAX_EXTENDER_PRIORITY};

/// Why a GPU pod fits no node and cannot be bound before the cache has both lists.
pub const NOT_SYNCED: &str =
    "the extender has not yet listed the cluster's nodes and pods (its cache is not synced; see /healthz); GPU pods wait until it has";

/// Counters for `/metrics`.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Filter requests answered.
    pub filter: AtomicU64,
    /// Prioritize requests answered.
    pub prioritize: AtomicU64,
    /// Bind requests that succeeded.
    pub bind_ok: AtomicU64,
    /// Bind requests that failed.
    pub bind_failed: AtomicU64,
    /// Requests whose body was not understood.
    pub bad_requests: AtomicU64,
    /// Pods of apps without a profile bound (placed by declared memory); counted at the
    /// bind, once a pod (at the filter it counted every request).
    pub unknown_app: AtomicU64,
    /// Binds where the policy declined or chose a GPU that does not fit (prioritize's
    /// choices, one per candidate node, are not counted).
    pub policy_fallback: AtomicU64,
    /// OOM kills seen (their apps went on the avoid list).
    pub oom_kills: AtomicU64,
    /// Failed containers seen (not OOM).
    pub failed_containers: AtomicU64,
    /// Finished pods whose runtime was recorded.
    pub finished: AtomicU64,
    /// Conflicts reported by the apiserver.
    pub conflicts: AtomicU64,
}

/// What a pod needs, read once per request.
#[derive(Debug, Clone)]
pub struct Demand {
    /// Its request.
    pub req: GpuRequest,
    /// Its app, when named.
    pub app: Option<String>,
    /// True when the library has the app's profile.
    pub known: bool,
    /// The job the policy sees.
    pub job: QueuedJob,
    /// Peak memory of the profile, MiB (0 when unknown).
    pub peak_mib: f64,
    /// Mean demand, for interference predictions.
    pub mean: Resources,
    /// HAMi's per-pod device rules, from its annotations.
    pub hami_rules: devices::HamiRules,
    /// The pod's UID: where its own annotations still count it on a GPU (a bind that failed
    /// after writing them), it is left out there, as HAMi's Filter removes the pod first.
    pub uid: String,
}

impl Demand {
    /// True when the pod passes node `v` untouched: an ordinary whole-GPU pod (`nvidia.com/gpu`
    /// alone) on a node that neither gpushare nor HAMi shares. kube-scheduler's own fit counts
    /// its whole GPUs, and the bind is a plain Binding.
    pub fn passes(&self, v: &NodeView) -> bool {
        matches!(self.req, GpuRequest::Hami { whole: true, .. }) && v.plain
    }
}

/// The GPU chosen on a node.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Choice {
    /// Slot index in the node's view.
    pub slot: usize,
    /// True when the policy chose it; false for the interference fallback.
    pub by_policy: bool,
    /// Lowest predicted progress rate on that GPU with the pod there (1 = no slowdown).
    pub rate: f64,
}

/// The decision engine: the cluster state, the policy and the interference model.
pub struct Engine {
    /// Cluster state.
    pub cluster: Arc<Cluster>,
    /// The policy for pods of known apps.
    pub policy: Arc<dyn Policy>,
    fallback: BestFit,
    interference: Contention,
    /// Counters.
    pub metrics: Metrics,
}

/// The filter's answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FilterOutcome {
    /// Nodes kept, in the order given.
    pub keep: Vec<String>,
    /// Node → reason, for nodes where the pod may fit once pods leave (kube-scheduler's
    /// `FailedNodes`: preemption may help).
    pub failed: BTreeMap<String, String>,
    /// Node → reason, for nodes where no eviction makes the pod fit (kube-scheduler's
    /// `FailedAndUnresolvableNodes`: no shared GPUs, the other convention, not in the cache,
    /// an unreadable annotation, a request dqngpu refuses by design).
    pub unresolvable: BTreeMap<String, String>,
}

/// Why a pod does not fit a node or one of its GPUs.
#[derive(Debug, Clone, PartialEq)]
pub struct Unfit {
    /// The reason, for people.
    pub reason: String,
    /// True when evicting pods cannot make it fit (preemption cannot help).
    pub unresolvable: bool,
}

impl Unfit {
    /// A reason that evicting pods may remove (memory, compute, the split count taken).
    pub fn full(reason: String) -> Unfit {
        Unfit { reason, unresolvable: false }
    }

    /// A reason no eviction removes.
    pub fn never(reason: String) -> Unfit {
        Unfit { reason, unresolvable: true }
    }
}

impl std::fmt::Display for Unfit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

impl Engine {
    /// An engine over `cluster` deciding with `policy`.
    pub fn new(cluster: Arc<Cluster>, policy: Arc<dyn Policy>) -> Engine {
        Engine {
            cluster,
            policy,
            fallback: BestFit::default(),
            interference: Contention::default(),
            metrics: Metrics::default(),
        }
    }

    /// Reads what `pod` needs; an error says why its request is unusable.
    pub fn demand(&self, pod: &PodInfo) -> Result<Demand, String> {
        let req = devices::pod_request(pod, &self.cluster.cfg.hami_defaults)?;
        if let (GpuRequest::Hami { .. }, Some(mode)) = (&req, pod.annotations.get(devices::HAMI_VGPU_MODE)) {
            if !mode.contains(devices::HAMI_CORE_MODE) {
                return Err(format!(
                    "annotation `{}` asks for vGPU mode `{mode}`; dqngpu places only {} vGPUs",
                    devices::HAMI_VGPU_MODE,
                    devices::HAMI_CORE_MODE
                ));
            }
        }
        let app = devices::app_of(pod).map(str::to_string);
        let library = app.as_deref().and_then(|a| self.cluster.profiles.library.get(a).cloned());
        let known = library.is_some();
        let profile: Arc<AppProfile> = match library {
            Some(p) => p,
            None => {
                declared_profile(app.as_deref().unwrap_or(""), req.mem_mib(0.0, self.cluster.cfg.unit_mib), req.cores())
            }
        };
        let peak_mib = if known { profile.peak_mem().0 } else { 0.0 };
        let mean = profile.summary().mean;
        let job = QueuedJob {
            id: job_id(&pod.uid),
            app: app.clone().unwrap_or_else(|| pod.key()),
            avoid_apps: app.as_deref().map(|a| self.cluster.profiles.avoid_of(a)).unwrap_or_default(),
            profile,
            submit_s: unix_now(),
            restarts: 0,
        };
        Ok(Demand {
            req,
            app,
            known,
            job,
            peak_mib,
            mean,
            hami_rules: devices::HamiRules::of(pod),
            uid: pod.uid.clone(),
        })
    }

    /// Memory the pod needs on a card of `card_mib`.
    fn need_mib(&self, d: &Demand, card_mib: f64) -> f64 {
        d.req.mem_mib(card_mib, self.cluster.cfg.unit_mib).max(d.peak_mib)
    }

    /// Why `d` does not fit slot `s` of `v`, or `Ok` when it does.
    pub fn fits_slot(&self, d: &Demand, v: &NodeView, s: usize) -> Result<(), Unfit> {
        let slot = &v.slots[s];
        let dev = &slot.device;
        let hami = matches!(d.req, GpuRequest::Hami { .. });
        if !dev.healthy {
            return Err(Unfit::never(format!("GPU {} unhealthy", dev.index)));
        }
        if hami {
            devices::hami_device_allowed(&d.hami_rules, dev).map_err(Unfit::never)?;
        }
        // The others on the slot: the pod itself is left out where it is still counted (a
        // failed bind's annotations stayed; it blocked its own retry).
        // No list is built: this runs for every slot of every node a request names.
        let own = |r: &&crate::state::Resident| r.uid == d.uid;
        let others = slot.residents.len() - slot.residents.iter().filter(own).count();
        let (reserved_mib, cores_used) = slot
            .residents
            .iter()
            .filter(own)
            .fold((slot.reserved_mib, slot.cores_used), |(m, c), r| (m - r.reserved_mib, c - r.cores));
        if others as u64 >= u64::from(dev.max_pods) {
            let why = format!("GPU {} already shared by {others} pods (its limit)", dev.index);
            return Err(if dev.max_pods == 0 { Unfit::never(why) } else { Unfit::full(why) });
        }
        let need = self.need_mib(d, dev.spec.memory_mib);
        let free = dev.spec.memory_mib - reserved_mib;
        if need > free + 1e-6 {
            let why = format!("GPU {} has {:.0} MiB free, the pod needs {:.0} MiB", dev.index, free.max(0.0), need);
            return Err(if need > dev.spec.memory_mib + 1e-6 { Unfit::never(why) } else { Unfit::full(why) });
        }
        let cores = d.req.cores();
        if cores_used + cores > dev.cores + 1e-6 {
            let why = format!(
                "GPU {} has {:.0}% compute left, the pod asks {:.0}%",
                dev.index,
                (dev.cores - cores_used).max(0.0),
                cores
            );
            return Err(if cores > dev.cores + 1e-6 { Unfit::never(why) } else { Unfit::full(why) });
        }
        // HAMi's Fit: `gpucores: 100` asks for the card alone, so never on a card in use; a
        // `gpucores: 0` pod never goes on a card whose compute is all taken.
        if hami && dev.cores == 100.0 && cores >= 100.0 && others > 0 {
            return Err(Unfit::full(format!(
                "GPU {} is in use by {} pods; the pod asks for it alone (`{}: 100`)",
                dev.index,
                others,
                devices::HAMI_CORES
            )));
        }
        if hami && dev.cores > 0.0 && cores == 0.0 && cores_used >= dev.cores - 1e-6 {
            return Err(Unfit::full(format!(
                "GPU {} has no compute left ({:.0}% taken); HAMi puts no `{}: 0` pod on a full card",
                dev.index,
                cores_used,
                devices::HAMI_CORES
            )));
        }
        if let Some(app) = &d.app {
            for r in slot.residents.iter().filter(|r| !own(r)) {
                let Some(other) = &r.app else { continue };
                let theirs = self.cluster.profiles.avoid_of(other);
                if d.job.avoid_apps.contains(other) || theirs.contains(app) {
                    return Err(Unfit::full(format!("GPU {}: app `{app}` was OOM-killed beside `{other}`", dev.index)));
                }
            }
        }
        Ok(())
    }

    /// The node's fitting slots, or why none fits. An empty list: the pod passes the node
    /// with no shared GPU ([`Demand::passes`]).
    pub fn fit_node(&self, d: &Demand, v: &NodeView) -> Result<Vec<usize>, Unfit> {
        if d.passes(v) {
            return Ok(Vec::new());
        }
        // Before both lists are in, every GPU looks empty (a pod list the apiserver refuses,
        // or a large cluster's slow first list, after every restart): a pod placed then could
        // land on a full card. No shared GPU fits until then; preemption could not help. (An
        // ordinary whole-GPU pod, above, needs nothing of the cache.)
        if !self.cluster.synced() {
            return Err(Unfit::never(NOT_SYNCED.into()));
        }
        let conv = match &v.devices {
            Err(e) => return Err(Unfit::never(e.clone())),
            Ok(c) => *c,
        };
        if let Some(want) = d.req.convention() {
            if want != conv {
                return Err(Unfit::never(format!(
                    "the pod asks for {}'s resources, the node's GPUs are shared by {}",
                    want.name(),
                    conv.name()
                )));
            }
        }
        if let GpuRequest::Hami { gpus, .. } = d.req {
            if gpus > 1 {
                return Err(Unfit::never(format!("asks for {gpus} vGPUs; dqngpu places a pod on one shared GPU")));
            }
        }
        let mut ok = Vec::new();
        let mut why = Vec::new();
        let mut never = true;
        for s in 0..v.slots.len() {
            match self.fits_slot(d, v, s) {
                Ok(()) => ok.push(s),
                Err(e) => {
                    never &= e.unresolvable;
                    why.push(e.reason);
                }
            }
        }
        if ok.is_empty() {
            why.truncate(8);
            return Err(Unfit { reason: format!("no GPU fits: {}", why.join("; ")), unresolvable: never });
        }
        Ok(ok)
    }

    /// Lowest predicted progress rate on slot `s` with the pod added.
    pub fn predicted_rate(&self, d: &Demand, v: &NodeView, s: usize) -> f64 {
        let gpu = &v.gpus[s];
        let mut demands: Vec<(&str, Resources)> =
            gpu.running.iter().map(|r| (r.profile.app.name.as_str(), *r.demand_now())).collect();
        demands.push((d.job.app.as_str(), d.mean));
        let loads: Vec<JobLoad<'_>> = demands.iter().map(|(a, r)| JobLoad { app: a, demand: r }).collect();
        let mut rates = vec![1.0; loads.len()];
        self.interference.rates(&gpu.spec, &loads, &mut rates);
        rates.into_iter().fold(1.0, f64::min)
    }

    /// The GPU for the pod on node `v` among `feasible` slots.
    pub fn choose(&self, d: &Demand, v: &NodeView, feasible: &[usize]) -> Option<Choice> {
        if feasible.is_empty() {
            return None;
        }
        let policy: &dyn Policy = if d.known { &*self.policy } else { &self.fallback };
        let view = ClusterView { now_s: unix_now(), gpus: &v.gpus, queue: std::slice::from_ref(&d.job) };
        let picked = policy
            .decide(&view)
            .into_iter()
            .find(|p| p.jobs.contains(&d.job.id))
            .map(|p| p.gpu)
            .filter(|g| feasible.contains(g));
        if let Some(slot) = picked {
            return Some(Choice { slot, by_policy: true, rate: self.predicted_rate(d, v, slot) });
        }
        let free = |s: usize| v.slots[s].device.spec.memory_mib - v.slots[s].reserved_mib;
        feasible
            .iter()
            .map(|&s| (s, self.predicted_rate(d, v, s)))
            .max_by(|(a, ra), (b, rb)| ra.total_cmp(rb).then(free(*b).total_cmp(&free(*a))).then(b.cmp(a)))
            .map(|(slot, rate)| Choice { slot, by_policy: false, rate })
    }

    /// Filter: the nodes of `names` where the pod fits, and a reason for every other, split
    /// by whether preemption could help. A request dqngpu cannot use fails every node with
    /// its reason, as unresolvable (not a whole-request error: kube-scheduler then reports
    /// the pod unschedulable with the reasons, rather than retrying an error).
    pub fn filter(&self, pod: &PodInfo, names: &[String]) -> FilterOutcome {
        self.metrics.filter.fetch_add(1, Ordering::Relaxed);
        let mut out = FilterOutcome::default();
        let d = match self.demand(pod) {
            Ok(d) => d,
            Err(e) => {
                out.unresolvable = names.iter().map(|n| (n.clone(), e.clone())).collect();
                return out;
            }
        };
        if d.req == GpuRequest::None {
            out.keep = names.to_vec();
            return out;
        }
        for (n, v) in names.iter().zip(self.cluster.views(names)) {
            let r = match v {
                None => Err(Unfit::never("node not in the extender's cache (not listed by the apiserver yet)".into())),
                Some(v) => self.fit_node(&d, &v).map(|_| ()),
            };
            match r {
                Ok(()) => out.keep.push(n.clone()),
                Err(e) if e.unresolvable => {
                    out.unresolvable.insert(n.clone(), e.reason);
                }
                Err(e) => {
                    out.failed.insert(n.clone(), e.reason);
                }
            }
        }
        out
    }

    /// Prioritize: a 0..=10 score per node. Nodes where the policy itself chooses a GPU
    /// score 5..=10 by the predicted slowdown there; nodes where only the fallback finds one
    /// score 0..=4 the same way; nodes an ordinary whole-GPU pod passes untouched
    /// ([`Demand::passes`]) score 10; nodes where the pod does not fit score 0.
    pub fn prioritize(&self, pod: &PodInfo, names: &[String]) -> Result<Vec<HostPriority>, String> {
        self.metrics.prioritize.fetch_add(1, Ordering::Relaxed);
        let d = self.demand(pod)?;
        if d.req == GpuRequest::None {
            return Ok(names.iter().map(|n| HostPriority { host: n.clone(), score: 0 }).collect());
        }
        let views = self.cluster.views(names);
        Ok(names
            .iter()
            .zip(views)
            .map(|(n, v)| {
                let score = v
                    .and_then(|v| {
                        // An ordinary whole-GPU pod on a node no plugin shares takes plain GPUs:
                        // no interference there, so the top score (it scored 0, and such pods
                        // were steered onto HAMi's shared cards).
                        if d.passes(&v) {
                            return Some(MAX_EXTENDER_PRIORITY);
                        }
                        let feasible = self.fit_node(&d, &v).ok()?;
                        self.choose(&d, &v, &feasible).map(score_of)
                    })
                    .unwrap_or(0);
                HostPriority { host: n.clone(), score }
            })
            .collect())
    }

    /// The convention of a node, when it has shared GPUs.
    pub fn convention(&self, v: &NodeView) -> Option<Convention> {
        v.devices.as_ref().ok().copied()
    }
}

/// The score of a choice: see [`Engine::prioritize`].
pub fn score_of(c: Choice) -> i64 {
    let r = c.rate.clamp(0.0, 1.0);
    let s = if c.by_policy { 5.0 + 5.0 * r } else { 4.0 * r };
    (s.round() as i64).clamp(0, MAX_EXTENDER_PRIORITY)
}
