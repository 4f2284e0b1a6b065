//! Cluster state: nodes and GPU pods from the reflectors, pods this extender has bound and
//! holds as assumed until the watch shows them, and a per-node view built from both.
//!
//! One writer per source (the node and pod reflectors, the binder's `assume`/`forget`), many
//! readers. A node's [`NodeView`] is built on first read after a change and shared (`Arc`)
//! until the next change to that node or until it is `refresh_s` old (running jobs' progress
//! moves on), so a filter over 1,000 nodes reads cached views.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use dqngpu_model::{AppInfo, AppProfile, GpuState, Resources, RunningJob};

use crate::devices::{self, Allocation, Convention, DeviceGpu, GpuRequest};
use crate::wire::{NodeInfo, PodInfo};

/// Settings of the state.
#[derive(Debug, Clone)]
pub struct StateConfig {
    /// MiB per gpushare memory unit (1024 for GiB, 1 for MiB).
    pub unit_mib: f64,
    /// Seconds an assumed pod is held without the watch showing it, then dropped.
    pub assume_ttl_s: f64,
    /// Seconds a node's view is reused before it is rebuilt (running jobs' progress moves on;
    /// a change to the node or its pods rebuilds it at once). Rebuilding all 1,000 views of
    /// the benchmark cluster takes about 30 ms, so this stays long.
    pub refresh_s: f64,
    /// HAMi's `defaultMemory` and `defaultCores` (its scheduler's settings).
    pub hami_defaults: devices::HamiDefaults,
    /// Seconds before a HAMi node lock may be taken over (`HAMI_NODELOCK_EXPIRE`, 5 min).
    pub hami_lock_expire_s: f64,
}

impl Default for StateConfig {
    fn default() -> Self {
        StateConfig {
            unit_mib: 1024.0,
            assume_ttl_s: 300.0,
            refresh_s: 60.0,
            hami_defaults: devices::HamiDefaults::default(),
            hami_lock_expire_s: devices::HAMI_LOCK_TIMEOUT_S,
        }
    }
}

/// Profiles by app, the avoid list and observed runtimes (feedback from finished pods).
#[derive(Debug, Default)]
pub struct Profiles {
    /// The library's profiles by app name.
    pub library: BTreeMap<String, Arc<AppProfile>>,
    /// App → apps it was OOM-killed beside.
    pub avoid: RwLock<BTreeMap<String, BTreeSet<String>>>,
    /// App → (finished runs, total observed runtime s).
    pub observed: Mutex<BTreeMap<String, (u64, f64)>>,
}

impl Profiles {
    /// Profiles from libraries (later ones win on a name clash).
    pub fn new(libraries: &[dqngpu_model::AppLibrary]) -> Profiles {
        let mut library = BTreeMap::new();
        for l in libraries {
            for (k, p) in &l.apps {
                library.insert(k.clone(), p.clone());
            }
        }
        Profiles { library, ..Default::default() }
    }

    /// The apps `app` must not share a GPU with.
    pub fn avoid_of(&self, app: &str) -> Vec<String> {
        self.avoid
            .read()
            .map(|a| a.get(app).map(|s| s.iter().cloned().collect()).unwrap_or_default())
            .unwrap_or_default()
    }

    /// Records that `app` was OOM-killed beside `others` (both directions are checked).
    pub fn add_avoid(&self, app: &str, others: &[String]) {
        if let Ok(mut a) = self.avoid.write() {
            a.entry(app.to_string()).or_default().extend(others.iter().filter(|o| o.as_str() != app).cloned());
        }
    }

    /// Records a finished run of `app`.
    pub fn observe_runtime(&self, app: &str, runtime_s: f64) {
        if let Ok(mut o) = self.observed.lock() {
            let e = o.entry(app.to_string()).or_insert((0, 0.0));
            e.0 += 1;
            e.1 += runtime_s;
        }
    }
}

/// A pod that holds (or is assumed to hold) part of a GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct Resident {
    /// `namespace/name`.
    pub key: String,
    /// Pod UID.
    pub uid: String,
    /// Its dqngpu app, when it has one.
    pub app: Option<String>,
    /// Declared GPU memory, MiB.
    pub mem_mib: f64,
    /// Declared compute, percent.
    pub cores: f64,
    /// Started, Unix s.
    pub start_s: f64,
    /// True when held as assumed (bound by us, not yet seen by the watch).
    pub assumed: bool,
    /// What it holds of its slot's `reserved_mib`, MiB (the larger of its declared memory and
    /// its profile's remaining peak; set when the view is built).
    pub reserved_mib: f64,
}

/// One GPU of a node with what holds it.
#[derive(Debug, Clone)]
pub struct Slot {
    /// The device.
    pub device: DeviceGpu,
    /// Pods on it.
    pub residents: Vec<Resident>,
    /// Memory held, MiB: per resident the larger of its declared memory and its profile's
    /// remaining peak.
    pub reserved_mib: f64,
    /// Compute held, percent.
    pub cores_used: f64,
}

/// A node as the extender sees it.
#[derive(Debug, Clone)]
pub struct NodeView {
    /// Node name.
    pub name: String,
    /// The device plugin, or why the node has no shared GPU.
    pub devices: Result<Convention, String>,
    /// Its GPUs.
    pub slots: Vec<Slot>,
    /// The same GPUs for the policy, with residents as running jobs (index = slot).
    pub gpus: Vec<GpuState>,
    /// True when no device plugin of either convention announces the node's GPUs (a node
    /// of whole GPUs, or of none).
    pub plain: bool,
    /// When built, Unix s.
    pub built_s: f64,
}

#[derive(Debug, Clone)]
struct PodEntry {
    info: Arc<PodInfo>,
    req: GpuRequest,
    alloc: Option<Vec<Allocation>>,
}

/// A pod bound by this extender, held until the watch shows it on its node.
#[derive(Debug, Clone)]
pub struct Assumed {
    /// The pod.
    pub pod: Arc<PodInfo>,
    /// Node.
    pub node: String,
    /// GPU id (gpushare index or HAMi UUID).
    pub gpu_id: String,
    /// Memory, MiB.
    pub mem_mib: f64,
    /// Compute, percent.
    pub cores: f64,
    /// Its app.
    pub app: Option<String>,
    /// When assumed, Unix s.
    pub since_s: f64,
}

#[derive(Default)]
struct Inner {
    nodes: HashMap<String, Arc<NodeInfo>>,
    /// Each node's devices, parsed once per node change (not per view build).
    devices: HashMap<String, Arc<Result<devices::NodeDevices, String>>>,
    pods: HashMap<String, PodEntry>,
    by_node: HashMap<String, HashSet<String>>,
    by_key: HashMap<String, String>,
    assumed: HashMap<String, Assumed>,
    views: HashMap<String, Arc<NodeView>>,
}

impl Inner {
    fn invalidate(&mut self, node: &str) {
        self.views.remove(node);
    }

    fn remove_pod(&mut self, uid: &str) -> Option<PodEntry> {
        let e = self.pods.remove(uid)?;
        let node = counted_node(&e.info, &e.req);
        if let Some(s) = self.by_node.get_mut(node) {
            s.remove(uid);
        }
        if self.by_key.get(&e.info.key()).is_some_and(|u| u == uid) {
            self.by_key.remove(&e.info.key());
        }
        self.invalidate(node);
        Some(e)
    }
}

/// The node a GPU pod is counted on: its `spec.nodeName`, else, for a HAMi pod that HAMi's
/// scheduler has assigned at filter time but not bound yet, its `hami.io/vgpu-node`
/// annotation (HAMi's `onAddPod` rule: HAMi counts such a pod at once). "" for none.
pub fn counted_node<'a>(pod: &'a PodInfo, req: &GpuRequest) -> &'a str {
    if !pod.node_name.is_empty() {
        return &pod.node_name;
    }
    match (req, pod.annotations.get(devices::HAMI_NODE)) {
        (GpuRequest::Hami { .. }, Some(n)) if !pod.finished() => n,
        _ => "",
    }
}

/// Now, Unix s.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// The cluster state shared by the reflectors, the HTTP handlers and the binder.
pub struct Cluster {
    inner: RwLock<Inner>,
    bind_locks: Mutex<HashMap<String, Arc<Mutex<()>>>>,
    /// Settings.
    pub cfg: StateConfig,
    /// Profiles, avoid list, observed runtimes.
    pub profiles: Arc<Profiles>,
    nodes_synced: AtomicBool,
    pods_synced: AtomicBool,
}

/// Stable job id of a pod for the policy's view (FNV-1a of its UID).
pub fn job_id(uid: &str) -> u64 {
    uid.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// A constant profile for a pod of an unknown app: its declared memory and compute.
pub fn declared_profile(name: &str, mem_mib: f64, cores: f64) -> Arc<AppProfile> {
    let c = cores.clamp(0.0, 100.0);
    let s = Resources::new(c, mem_mib.max(0.0), c, 0.0);
    let info = AppInfo { name: name.to_string(), ..Default::default() };
    let p = AppProfile::new(info.clone(), 86_400.0, vec![s]).unwrap_or_else(|_| AppProfile {
        app: info,
        interval_s: 86_400.0,
        recorded_on: None,
        samples: vec![Resources::ZERO],
        source: None,
        derived: Default::default(),
    });
    Arc::new(p)
}

impl Cluster {
    /// An empty state.
    pub fn new(cfg: StateConfig, profiles: Arc<Profiles>) -> Cluster {
        Cluster {
            inner: RwLock::new(Inner::default()),
            bind_locks: Mutex::new(HashMap::new()),
            cfg,
            profiles,
            nodes_synced: AtomicBool::new(false),
            pods_synced: AtomicBool::new(false),
        }
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|p| p.into_inner())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    /// True once both reflectors have listed.
    pub fn synced(&self) -> bool {
        self.nodes_synced.load(Ordering::Acquire) && self.pods_synced.load(Ordering::Acquire)
    }

    /// Replaces every node (a fresh list).
    pub fn replace_nodes(&self, nodes: Vec<NodeInfo>) {
        let mut g = self.write();
        g.devices =
            nodes.iter().map(|n| (n.name.clone(), Arc::new(devices::node_devices(n, self.cfg.unit_mib)))).collect();
        g.nodes = nodes.into_iter().map(|n| (n.name.clone(), Arc::new(n))).collect();
        g.views.clear();
        self.nodes_synced.store(true, Ordering::Release);
    }

    /// Adds or replaces one node.
    pub fn upsert_node(&self, node: NodeInfo) {
        let mut g = self.write();
        let name = node.name.clone();
        g.devices.insert(name.clone(), Arc::new(devices::node_devices(&node, self.cfg.unit_mib)));
        g.nodes.insert(name.clone(), Arc::new(node));
        g.invalidate(&name);
    }

    /// Removes a node.
    pub fn delete_node(&self, name: &str) {
        let mut g = self.write();
        g.nodes.remove(name);
        g.devices.remove(name);
        g.invalidate(name);
    }

    /// The node object last seen.
    pub fn node(&self, name: &str) -> Option<Arc<NodeInfo>> {
        self.read().nodes.get(name).cloned()
    }

    /// Names of all nodes.
    pub fn node_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.read().nodes.keys().cloned().collect();
        v.sort();
        v
    }

    /// Replaces every pod (a fresh list); assumed pods stay.
    pub fn replace_pods(&self, pods: Vec<PodInfo>) {
        let mut g = self.write();
        g.pods.clear();
        g.by_node.clear();
        g.by_key.clear();
        g.views.clear();
        for p in pods {
            self.insert_pod(&mut g, p);
        }
        self.pods_synced.store(true, Ordering::Release);
    }

    /// Adds or replaces one pod; returns the previous version.
    pub fn upsert_pod(&self, pod: PodInfo) -> Option<Arc<PodInfo>> {
        let mut g = self.write();
        let prev = g.remove_pod(&pod.uid).map(|e| e.info);
        self.insert_pod(&mut g, pod);
        prev
    }

    /// Removes a pod (and its assumption).
    pub fn delete_pod(&self, uid: &str) {
        let mut g = self.write();
        g.remove_pod(uid);
        if let Some(a) = g.assumed.remove(uid) {
            g.invalidate(&a.node);
        }
    }

    fn insert_pod(&self, g: &mut Inner, pod: PodInfo) {
        // The watch shows a pod we bound on its node (or gone for good): stop assuming it.
        if let Some(a) = g.assumed.get(&pod.uid) {
            if pod.finished() || !pod.node_name.is_empty() {
                let node = a.node.clone();
                g.assumed.remove(&pod.uid);
                g.invalidate(&node);
            }
        }
        let req = match devices::pod_request(&pod, &self.cfg.hami_defaults) {
            Ok(GpuRequest::None) => return,
            Ok(r) => r,
            Err(e) => match devices::held_request(&pod) {
                Some(r) => {
                    tracing::warn!(pod = %pod.key(), error = %e, "pod's GPU request refused for placement; counted by its allocation annotations");
                    r
                }
                None => {
                    tracing::debug!(pod = %pod.key(), error = %e, "pod ignored: unreadable GPU request");
                    return;
                }
            },
        };
        let alloc = match devices::pod_allocations(&pod, &req, self.cfg.unit_mib) {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(pod = %pod.key(), error = %e, "pod's GPU annotation unreadable; not counted");
                None
            }
        };
        let uid = pod.uid.clone();
        let node = counted_node(&pod, &req).to_string();
        g.by_key.insert(pod.key(), uid.clone());
        if !node.is_empty() {
            g.by_node.entry(node.clone()).or_default().insert(uid.clone());
            g.invalidate(&node);
        }
        g.pods.insert(uid, PodEntry { info: Arc::new(pod), req, alloc });
    }

    /// A GPU pod by namespace and name, from the reflector.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<Arc<PodInfo>> {
        let g = self.read();
        let uid = g.by_key.get(&format!("{namespace}/{name}"))?;
        g.pods.get(uid).map(|e| e.info.clone())
    }

    /// A GPU pod by UID.
    pub fn pod_by_uid(&self, uid: &str) -> Option<Arc<PodInfo>> {
        self.read().pods.get(uid).map(|e| e.info.clone())
    }

    /// The apps of the other pods on the GPUs `pod` holds.
    pub fn apps_beside(&self, pod: &PodInfo) -> Vec<String> {
        let ids: Vec<String> = {
            let g = self.read();
            let Some(e) = g.pods.get(&pod.uid) else { return Vec::new() };
            e.alloc.iter().flatten().map(|a| a.gpu_id.clone()).collect()
        };
        let Some(v) = self.view(&pod.node_name) else { return Vec::new() };
        let mut out: Vec<String> = v
            .slots
            .iter()
            .filter(|s| ids.contains(&s.device.id))
            .flat_map(|s| s.residents.iter().filter(|r| r.uid != pod.uid).filter_map(|r| r.app.clone()))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// Holds `a` as assumed until the watch shows the pod bound (or `assume_ttl_s` passes).
    /// False (and nothing changes) when the pod is already assumed: a bind is in flight.
    pub fn assume(&self, a: Assumed) -> bool {
        let mut g = self.write();
        let now = unix_now();
        let ttl = self.cfg.assume_ttl_s;
        let expired: Vec<String> =
            g.assumed.iter().filter(|(_, x)| now - x.since_s > ttl).map(|(k, _)| k.clone()).collect();
        for uid in expired {
            if let Some(x) = g.assumed.remove(&uid) {
                tracing::warn!(pod = %x.pod.key(), node = %x.node, "assumed pod never showed up bound; dropped");
                g.invalidate(&x.node);
            }
        }
        if g.assumed.contains_key(&a.pod.uid) {
            return false;
        }
        let node = a.node.clone();
        g.assumed.insert(a.pod.uid.clone(), a);
        g.invalidate(&node);
        true
    }

    /// True when `uid` is held as assumed and not yet past `assume_ttl_s` (as [`Cluster::assume`]
    /// counts it): a bind of it has placed it here.
    pub fn is_assumed(&self, uid: &str) -> bool {
        let ttl = self.cfg.assume_ttl_s;
        self.read().assumed.get(uid).is_some_and(|a| unix_now() - a.since_s <= ttl)
    }

    /// Drops an assumption (a bind that failed).
    pub fn forget(&self, uid: &str) {
        let mut g = self.write();
        if let Some(a) = g.assumed.remove(uid) {
            g.invalidate(&a.node);
        }
    }

    /// Pods held as assumed.
    pub fn assumed_count(&self) -> usize {
        self.read().assumed.len()
    }

    /// Pods tracked (GPU pods only).
    pub fn pod_count(&self) -> usize {
        self.read().pods.len()
    }

    /// The per-node lock binds take while they choose a GPU and assume it.
    pub fn bind_lock(&self, node: &str) -> Arc<Mutex<()>> {
        let mut g = self.bind_locks.lock().unwrap_or_else(|p| p.into_inner());
        g.entry(node.to_string()).or_default().clone()
    }

    /// Views of `names` (None for nodes not in the cache), building stale ones.
    pub fn views(&self, names: &[String]) -> Vec<Option<Arc<NodeView>>> {
        let now = unix_now();
        let fresh = |v: &Arc<NodeView>| now - v.built_s <= self.cfg.refresh_s;
        {
            let g = self.read();
            let out: Vec<Option<Arc<NodeView>>> = names
                .iter()
                .map(|n| match g.views.get(n) {
                    Some(v) if fresh(v) => Some(Some(v.clone())),
                    _ if !g.nodes.contains_key(n) => Some(None),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()
                .unwrap_or_default();
            if out.len() == names.len() {
                return out;
            }
        }
        let mut g = self.write();
        names
            .iter()
            .map(|n| {
                if let Some(v) = g.views.get(n).filter(|v| fresh(v)) {
                    return Some(v.clone());
                }
                let v = Arc::new(self.build(&g, n, now)?);
                g.views.insert(n.clone(), v.clone());
                Some(v)
            })
            .collect()
    }

    /// The view of one node.
    pub fn view(&self, name: &str) -> Option<Arc<NodeView>> {
        self.views(std::slice::from_ref(&name.to_string())).pop().flatten()
    }

    /// One node's view: its devices, then each GPU's residents (watched and assumed) with
    /// their profiles and progress. One piece on purpose: one pass that fills the slots the
    /// residents are then added to; split, each half would need the other's half-built slots.
    fn build(&self, g: &Inner, name: &str, now: f64) -> Option<NodeView> {
        let node = g.nodes.get(name)?;
        let plain = !devices::shares_gpus(node);
        let parsed =
            g.devices.get(name).cloned().unwrap_or_else(|| Arc::new(devices::node_devices(node, self.cfg.unit_mib)));
        let devs = match &*parsed {
            Ok(d) => d.clone(),
            Err(e) => {
                let e = e.clone();
                return Some(NodeView {
                    name: name.into(),
                    devices: Err(e),
                    slots: Vec::new(),
                    gpus: Vec::new(),
                    plain,
                    built_s: now,
                });
            }
        };
        let mut slots: Vec<Slot> = devs
            .gpus
            .into_iter()
            .map(|d| Slot { device: d, residents: Vec::new(), reserved_mib: 0.0, cores_used: 0.0 })
            .collect();
        let mut add = |gpu_id: &str, r: Resident| {
            if let Some(s) = slots.iter_mut().find(|s| s.device.id == gpu_id) {
                s.residents.push(r);
            } else {
                tracing::debug!(node = name, gpu = gpu_id, pod = %r.key, "pod holds a GPU the node does not announce");
            }
        };
        let mut seen = HashSet::new();
        if let Some(uids) = g.by_node.get(name) {
            for uid in uids {
                let Some(e) = g.pods.get(uid) else { continue };
                if e.info.finished() {
                    continue;
                }
                let Some(allocs) = &e.alloc else { continue };
                seen.insert(uid.as_str());
                for a in allocs {
                    add(
                        &a.gpu_id,
                        Resident {
                            key: e.info.key(),
                            uid: uid.clone(),
                            app: devices::app_of(&e.info).map(str::to_string),
                            mem_mib: a.mem_mib,
                            cores: if a.cores > 0.0 { a.cores } else { e.req.cores() },
                            start_s: e.info.start_s.unwrap_or(now),
                            assumed: false,
                            reserved_mib: 0.0,
                        },
                    );
                }
            }
        }
        for (uid, a) in &g.assumed {
            if a.node != name || seen.contains(uid.as_str()) || now - a.since_s > self.cfg.assume_ttl_s {
                continue;
            }
            add(
                &a.gpu_id,
                Resident {
                    key: a.pod.key(),
                    uid: uid.clone(),
                    app: a.app.clone(),
                    mem_mib: a.mem_mib,
                    cores: a.cores,
                    start_s: a.since_s,
                    assumed: true,
                    reserved_mib: 0.0,
                },
            );
        }
        let mut gpus = Vec::with_capacity(slots.len());
        for s in &mut slots {
            let mut running = Vec::with_capacity(s.residents.len());
            let (mut mem, mut cores) = (0.0, 0.0);
            for r in &mut s.residents {
                let profile = r
                    .app
                    .as_deref()
                    .and_then(|a| self.profiles.library.get(a).cloned())
                    .unwrap_or_else(|| declared_profile(r.app.as_deref().unwrap_or(""), r.mem_mib, r.cores));
                let progress = profile.progress_after(now - r.start_s);
                let peak = profile.peak_from(profile.sample_index(progress)).gpu_mem_mib;
                r.reserved_mib = r.mem_mib.max(peak);
                mem += r.reserved_mib;
                cores += r.cores;
                running.push(RunningJob { id: job_id(&r.uid), profile, progress_s: progress, started_s: r.start_s });
            }
            s.reserved_mib = mem;
            s.cores_used = cores;
            gpus.push(GpuState {
                node: name.to_string(),
                index: s.device.index,
                spec: s.device.spec.clone(),
                running,
                measured: None,
            });
        }
        Some(NodeView { name: name.into(), devices: Ok(devs.convention), slots, gpus, plain, built_s: now })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ContainerInfo;

    fn node(name: &str) -> NodeInfo {
        let cap = [(devices::GPUSHARE_COUNT, "2"), (devices::GPUSHARE_MEM, "32")];
        NodeInfo {
            name: name.into(),
            capacity: cap.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            ..Default::default()
        }
    }

    pub(crate) fn gpushare_pod(name: &str, uid: &str, node: &str, units: u32, idx: Option<u32>) -> PodInfo {
        let mut p = PodInfo {
            namespace: "default".into(),
            name: name.into(),
            uid: uid.into(),
            node_name: node.into(),
            phase: "Running".into(),
            containers: vec![ContainerInfo {
                name: "c".into(),
                limits: [(devices::GPUSHARE_MEM.to_string(), units.to_string())].into_iter().collect(),
                ..Default::default()
            }],
            ..Default::default()
        };
        if let Some(i) = idx {
            p.annotations.insert(devices::GPUSHARE_IDX.into(), i.to_string());
            p.annotations.insert(devices::GPUSHARE_POD.into(), units.to_string());
        }
        p
    }

    #[test]
    fn views_count_pods_and_assumptions_once() {
        let c = Cluster::new(StateConfig::default(), Arc::new(Profiles::default()));
        c.replace_nodes(vec![node("n1")]);
        c.replace_pods(vec![gpushare_pod("a", "u-a", "n1", 4, Some(0))]);
        let v = c.view("n1").unwrap();
        assert_eq!(v.slots[0].reserved_mib, 4096.0);
        assert_eq!(v.slots[1].reserved_mib, 0.0);
        let b = gpushare_pod("b", "u-b", "", 8, None);
        c.assume(Assumed {
            pod: Arc::new(b.clone()),
            node: "n1".into(),
            gpu_id: "1".into(),
            mem_mib: 8192.0,
            cores: 0.0,
            app: None,
            since_s: unix_now(),
        });
        assert_eq!(c.view("n1").unwrap().slots[1].reserved_mib, 8192.0);
        // The annotation patch shows up, not yet bound: still assumed, counted once.
        let mut seen = gpushare_pod("b", "u-b", "", 8, Some(1));
        c.upsert_pod(seen.clone());
        assert_eq!(c.assumed_count(), 1);
        assert_eq!(c.view("n1").unwrap().slots[1].reserved_mib, 8192.0);
        seen.node_name = "n1".into();
        c.upsert_pod(seen);
        assert_eq!(c.assumed_count(), 0);
        assert_eq!(c.view("n1").unwrap().slots[1].reserved_mib, 8192.0);
        c.delete_pod("u-b");
        assert_eq!(c.view("n1").unwrap().slots[1].reserved_mib, 0.0);
        assert!(c.view("nope").is_none());
    }

    #[test]
    fn hami_pods_count_on_their_assigned_node_before_the_binding() {
        let reg = r#"[{"id":"GPU-a","index":0,"count":10,"devmem":16384,"devcore":100,"type":"T4","health":true}]"#;
        let n = NodeInfo {
            name: "h".into(),
            annotations: [(devices::HAMI_REGISTER.to_string(), reg.to_string())].into_iter().collect(),
            ..Default::default()
        };
        let c = Cluster::new(StateConfig::default(), Arc::new(Profiles::default()));
        c.replace_nodes(vec![n]);
        let mut p = PodInfo {
            namespace: "default".into(),
            name: "hami".into(),
            uid: "u-h".into(),
            phase: "Pending".into(),
            containers: vec![ContainerInfo {
                name: "c".into(),
                limits: [
                    (devices::HAMI_GPU.to_string(), "1".to_string()),
                    (devices::HAMI_MEM.to_string(), "12000".to_string()),
                ]
                .into_iter()
                .collect(),
                ..Default::default()
            }],
            ..Default::default()
        };
        p.annotations.insert(devices::HAMI_ALLOCATED.into(), "GPU-a,NVIDIA,12000,0:;".into());
        // Devices but no node: nothing to count it on.
        c.upsert_pod(p.clone());
        assert_eq!(c.view("h").unwrap().slots[0].reserved_mib, 0.0);
        p.annotations.insert(devices::HAMI_NODE.into(), "h".into());
        c.upsert_pod(p.clone());
        assert_eq!(c.view("h").unwrap().slots[0].reserved_mib, 12000.0);
        // Bound: counted once, on the same node.
        p.node_name = "h".into();
        c.upsert_pod(p.clone());
        assert_eq!(c.view("h").unwrap().slots[0].residents.len(), 1);
        p.node_name.clear();
        p.phase = "Failed".into();
        c.upsert_pod(p);
        assert_eq!(c.view("h").unwrap().slots[0].reserved_mib, 0.0);
        c.delete_pod("u-h");
        assert_eq!(c.view("h").unwrap().slots[0].residents.len(), 0);
    }
}
