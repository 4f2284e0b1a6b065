//! The device plugins' conventions: how gpushare and HAMi describe a node's GPUs, a pod's
//! request and a pod's assigned GPU, and the annotations their device plugins read at bind.
//!
//! gpushare (AliyunContainerService/gpushare-scheduler-extender): node capacity
//! `aliyun.com/gpu-count` and `aliyun.com/gpu-mem` (total over the node's GPUs, GiB unless the
//! device plugin runs with `--memory-unit=MiB`); a pod asks for `aliyun.com/gpu-mem` in its
//! limits and gets annotations `ALIYUN_COM_GPU_MEM_IDX` / `_POD` / `_DEV` / `_ASSIGNED` /
//! `_ASSUME_TIME`.
//!
//! HAMi (Project-HAMi/HAMi): node annotation `hami.io/node-nvidia-register` (a JSON array of
//! devices since v2.8, before that `id,count,devmem,devcore,type,numa,health[,index,mode]:` per
//! device); a pod asks for `nvidia.com/gpu` with `nvidia.com/gpumem` (MiB) or
//! `nvidia.com/gpumem-percentage`, and `nvidia.com/gpucores`; its devices are in
//! `hami.io/vgpu-devices-allocated` as `UUID,Type,mem,cores:` per device and `;` per container.

use std::collections::BTreeMap;

use dqngpu_model::{gpu, GpuSpec};
use serde_json::Value;

use crate::units::parse_quantity;
use crate::wire::{NodeInfo, PodInfo};

/// gpushare's resource: GPU memory, in the device plugin's unit.
pub const GPUSHARE_MEM: &str = "aliyun.com/gpu-mem";
/// gpushare's node capacity: number of GPUs.
pub const GPUSHARE_COUNT: &str = "aliyun.com/gpu-count";
/// gpushare: index of the GPU the pod was given.
pub const GPUSHARE_IDX: &str = "ALIYUN_COM_GPU_MEM_IDX";
/// gpushare: the pod's GPU memory.
pub const GPUSHARE_POD: &str = "ALIYUN_COM_GPU_MEM_POD";
/// gpushare: the GPU's memory.
pub const GPUSHARE_DEV: &str = "ALIYUN_COM_GPU_MEM_DEV";
/// gpushare: `"false"` until the device plugin has allocated the pod.
pub const GPUSHARE_ASSIGNED: &str = "ALIYUN_COM_GPU_MEM_ASSIGNED";
/// gpushare: when the extender assumed the pod, Unix ns.
pub const GPUSHARE_ASSUME_TIME: &str = "ALIYUN_COM_GPU_MEM_ASSUME_TIME";

/// HAMi's node annotation listing its GPUs.
pub const HAMI_REGISTER: &str = "hami.io/node-nvidia-register";
/// HAMi's resource: number of vGPUs.
pub const HAMI_GPU: &str = "nvidia.com/gpu";
/// HAMi: GPU memory per vGPU, MiB.
pub const HAMI_MEM: &str = "nvidia.com/gpumem";
/// HAMi: GPU memory per vGPU, percent of the card.
pub const HAMI_MEM_PCT: &str = "nvidia.com/gpumem-percentage";
/// HAMi: compute per vGPU, percent of the card.
pub const HAMI_CORES: &str = "nvidia.com/gpucores";
/// HAMi: the devices assigned (read by the device plugin and by schedulers).
pub const HAMI_ALLOCATED: &str = "hami.io/vgpu-devices-allocated";
/// HAMi: the devices the device plugin is to allocate.
pub const HAMI_TO_ALLOCATE: &str = "hami.io/vgpu-devices-to-allocate";
/// HAMi: the node chosen (annotation and label).
pub const HAMI_NODE: &str = "hami.io/vgpu-node";
/// HAMi: when the node was chosen, Unix s.
pub const HAMI_TIME: &str = "hami.io/vgpu-time";
/// HAMi: bind phase (`allocating`, then `success` or `failed` from the device plugin).
pub const HAMI_BIND_PHASE: &str = "hami.io/bind-phase";
/// HAMi: bind time, Unix s.
pub const HAMI_BIND_TIME: &str = "hami.io/bind-time";
/// HAMi's per-node lock annotation: `RFC3339,namespace,name`.
pub const HAMI_LOCK: &str = "hami.io/mutex.lock";
/// How long a HAMi node lock holds before others may take it over (HAMi's default).
pub const HAMI_LOCK_TIMEOUT_S: f64 = 300.0;
/// The environment variable HAMi reads the node lock's expiry from (a Go duration).
pub const HAMI_LOCK_EXPIRE_ENV: &str = "HAMI_NODELOCK_EXPIRE";
/// HAMi pod annotation: GPU types the pod may use (comma-separated, matched as substrings).
pub const HAMI_USE_TYPE: &str = "nvidia.com/use-gputype";
/// HAMi pod annotation: GPU types the pod must not use.
pub const HAMI_NOUSE_TYPE: &str = "nvidia.com/nouse-gputype";
/// HAMi pod annotation: GPU UUIDs the pod may use (comma-separated).
pub const HAMI_USE_UUID: &str = "nvidia.com/use-gpuuuid";
/// HAMi pod annotation: GPU UUIDs the pod must not use.
pub const HAMI_NOUSE_UUID: &str = "nvidia.com/nouse-gpuuuid";
/// HAMi pod annotation: the vGPU modes the pod accepts (`hami-core`, `mig`, `mps`).
pub const HAMI_VGPU_MODE: &str = "nvidia.com/vgpu-mode";
/// HAMi's default vGPU mode, the only one dqngpu places.
pub const HAMI_CORE_MODE: &str = "hami-core";

/// HAMi's node lock expiry: `HAMI_NODELOCK_EXPIRE` as a Go duration when set (HAMi reads the
/// same variable), else 5 minutes. `value` is the variable's value, `None` when unset.
pub fn hami_lock_expire_s(value: Option<&str>) -> Result<f64, String> {
    let Some(v) = value else { return Ok(HAMI_LOCK_TIMEOUT_S) };
    match crate::units::parse_go_duration(v) {
        Ok(s) if s > 0.0 => Ok(s),
        Ok(_) => Err(format!("{HAMI_LOCK_EXPIRE_ENV}=`{v}`: the node lock expiry must be positive")),
        Err(e) => Err(format!("{HAMI_LOCK_EXPIRE_ENV}=`{v}`: {e}")),
    }
}

/// The GPU product label of NVIDIA's GPU feature discovery.
pub const PRODUCT_LABEL: &str = "nvidia.com/gpu.product";
/// The pod annotation naming its dqngpu app.
pub const APP_ANNOTATION: &str = "dqngpu.io/app";
/// The label used when the annotation is absent.
pub const APP_LABEL: &str = "app.kubernetes.io/name";

/// Which device plugin shares a node's GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Convention {
    /// Alibaba's gpushare.
    Gpushare,
    /// HAMi.
    Hami,
}

impl Convention {
    /// Name as written in logs and reasons.
    pub fn name(self) -> &'static str {
        match self {
            Convention::Gpushare => "gpushare",
            Convention::Hami => "HAMi",
        }
    }
}

/// One shared GPU of a node, as its device plugin announces it.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceGpu {
    /// gpushare: the index as text; HAMi: the GPU UUID.
    pub id: String,
    /// Index on the node.
    pub index: u32,
    /// Model, with the memory the device plugin shares.
    pub spec: GpuSpec,
    /// Most pods that may share it (HAMi's split count; unbounded for gpushare).
    pub max_pods: u32,
    /// Compute units to hand out (HAMi's devcore, 100 for the whole card).
    pub cores: f64,
    /// False when the device plugin reports it unhealthy.
    pub healthy: bool,
    /// The type as announced (HAMi's `type`; the product label for gpushare).
    pub ty: String,
    /// HAMi's vGPU mode (`hami-core`, `mig`, `mps`; "" when not announced).
    pub mode: String,
}

/// The node's shared GPUs and which plugin shares them.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeDevices {
    /// The device plugin.
    pub convention: Convention,
    /// Its GPUs.
    pub gpus: Vec<DeviceGpu>,
}

/// Maps a product name (`NVIDIA-A100-SXM4-80GB`, `Tesla-T4`, `NVIDIA-Tesla V100-PCIE-32GB`)
/// and the memory the plugin shares to dqngpu's GPU catalogue; unknown products keep their
/// name and memory with generic compute figures.
pub fn gpu_spec(product: &str, memory_mib: f64) -> GpuSpec {
    let p: String = product.to_ascii_lowercase().chars().filter(|c| c.is_ascii_alphanumeric()).collect();
    let key = if p.contains("h100") {
        Some("h100")
    } else if p.contains("a100") {
        Some(if memory_mib > 50_000.0 || p.contains("80g") { "a100-80" } else { "a100-40" })
    } else if p.contains("v100") {
        Some(if memory_mib > 20_000.0 || p.contains("32g") { "v100-32" } else { "v100-16" })
    } else if p.contains("3090") {
        Some("rtx3090")
    } else if p.contains("titanxp") {
        Some("titanxp")
    } else if p.contains("m60") {
        Some("m60")
    } else if p.ends_with("t4") || p.contains("teslat4") || p.contains("nvidiat4") {
        Some("t4")
    } else {
        None
    };
    let mut spec = key.and_then(|k| gpu::lookup(k).ok()).unwrap_or_else(|| GpuSpec {
        key: "other".into(),
        name: if product.is_empty() { "unknown GPU".into() } else { product.to_string() },
        architecture: String::new(),
        memory_mib,
        cores: 0,
        pcie_gbps: 16.0,
    });
    if memory_mib > 0.0 {
        spec.memory_mib = memory_mib;
    }
    spec
}

fn quantity(map: &BTreeMap<String, String>, key: &str, what: &str) -> Result<Option<f64>, String> {
    match map.get(key) {
        None => Ok(None),
        Some(q) => parse_quantity(q).map(Some).map_err(|e| format!("{what} `{key}`: {e}")),
    }
}

/// The node's shared GPUs, or why it has none usable. `unit_mib` is gpushare's memory unit.
pub fn node_devices(node: &NodeInfo, unit_mib: f64) -> Result<NodeDevices, String> {
    let product = node.labels.get(PRODUCT_LABEL).map(String::as_str).unwrap_or("");
    if let Some(reg) = node.annotations.get(HAMI_REGISTER) {
        let gpus = parse_hami_register(reg, product).map_err(|e| format!("annotation `{HAMI_REGISTER}`: {e}"))?;
        return Ok(NodeDevices { convention: Convention::Hami, gpus });
    }
    let count = quantity(&node.capacity, GPUSHARE_COUNT, "capacity")?;
    let mem = quantity(&node.capacity, GPUSHARE_MEM, "capacity")?;
    match (count, mem) {
        (Some(c), Some(m)) if c >= 1.0 && m > 0.0 => {
            let c = c.floor().min(1024.0) as u32;
            let per_gpu = m * unit_mib / f64::from(c);
            let gpus = (0..c)
                .map(|i| DeviceGpu {
                    id: i.to_string(),
                    index: i,
                    spec: gpu_spec(product, per_gpu),
                    max_pods: u32::MAX,
                    cores: 100.0,
                    healthy: true,
                    ty: product.to_string(),
                    mode: String::new(),
                })
                .collect();
            Ok(NodeDevices { convention: Convention::Gpushare, gpus })
        }
        (Some(_), Some(_)) => Err(format!("capacity `{GPUSHARE_COUNT}` or `{GPUSHARE_MEM}` is zero")),
        // Half an announcement (gpushare's plugin sets both; one alone is a plugin starting
        // or failing): the node's GPUs cannot be read, and since a plugin claims them, they
        // are not plain whole GPUs either.
        (Some(_), None) => Err(format!("capacity `{GPUSHARE_COUNT}` without `{GPUSHARE_MEM}`: gpushare announces both")),
        (None, Some(_)) => Err(format!("capacity `{GPUSHARE_MEM}` without `{GPUSHARE_COUNT}`: gpushare announces both")),
        (None, None) => Err(format!(
            "no shared GPUs: neither `{GPUSHARE_COUNT}`/`{GPUSHARE_MEM}` capacity (gpushare) nor annotation `{HAMI_REGISTER}` (HAMi)"
        )),
    }
}

/// True when a device plugin of either convention announces the node's GPUs (even
/// unreadably): HAMi's register annotation or gpushare's capacity.
pub fn shares_gpus(node: &NodeInfo) -> bool {
    node.annotations.contains_key(HAMI_REGISTER)
        || node.capacity.contains_key(GPUSHARE_COUNT)
        || node.capacity.contains_key(GPUSHARE_MEM)
}

/// HAMi's per-pod device rules: the pod's `use`/`nouse` GPU type and UUID annotations, read
/// once per request (they are checked against every GPU slot of every node).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HamiRules {
    use_type: Option<String>,
    nouse_type: Option<String>,
    use_uuid: Option<String>,
    nouse_uuid: Option<String>,
}

impl HamiRules {
    /// The rules `pod`'s annotations set.
    pub fn of(pod: &PodInfo) -> Self {
        let get = |k: &str| pod.annotations.get(k).cloned();
        HamiRules {
            use_type: get(HAMI_USE_TYPE),
            nouse_type: get(HAMI_NOUSE_TYPE),
            use_uuid: get(HAMI_USE_UUID),
            nouse_uuid: get(HAMI_NOUSE_UUID),
        }
    }
}

/// Why HAMi's per-pod device rules keep a pod off `gpu` (HAMi `checkGPUtype`, `CheckUUID` and
/// the `nvidia.com/vgpu-mode` check), or `Ok`. Lists are comma-separated; types match as
/// HAMi's do (case-insensitive substring of the announced type), UUIDs exactly.
pub fn hami_device_allowed(rules: &HamiRules, gpu: &DeviceGpu) -> Result<(), String> {
    let type_in = |list: &str| {
        let ty = gpu.ty.to_uppercase();
        list.split(',').any(|t| ty.contains(&t.to_uppercase()))
    };
    if let Some(l) = &rules.use_type {
        if !type_in(l) {
            return Err(format!("GPU {} is a `{}`, not one of `{HAMI_USE_TYPE}` `{l}`", gpu.index, gpu.ty));
        }
    }
    if let Some(l) = &rules.nouse_type {
        if type_in(l) {
            return Err(format!("GPU {} is a `{}`, excluded by `{HAMI_NOUSE_TYPE}` `{l}`", gpu.index, gpu.ty));
        }
    }
    if let Some(l) = &rules.use_uuid {
        if !l.split(',').any(|u| u == gpu.id) {
            return Err(format!("GPU {} (`{}`) is not in `{HAMI_USE_UUID}`", gpu.index, gpu.id));
        }
    } else if let Some(l) = &rules.nouse_uuid {
        if l.split(',').any(|u| u == gpu.id) {
            return Err(format!("GPU {} (`{}`) is excluded by `{HAMI_NOUSE_UUID}`", gpu.index, gpu.id));
        }
    }
    if !gpu.mode.is_empty() && gpu.mode != HAMI_CORE_MODE {
        return Err(format!("GPU {} is in `{}` mode; dqngpu places only {HAMI_CORE_MODE} vGPUs", gpu.index, gpu.mode));
    }
    Ok(())
}

/// Reads HAMi's register annotation: a JSON array (v2.8+) or the older colon form.
pub fn parse_hami_register(text: &str, product: &str) -> Result<Vec<DeviceGpu>, String> {
    let t = text.trim();
    if t.starts_with('[') {
        let v: Value = serde_json::from_str(t).map_err(|e| format!("not JSON: {e}"))?;
        let Value::Array(items) = v else { return Err("expected a JSON array".into()) };
        return items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let o = crate::wire::Obj::new(item, format!("[{i}]")).map_err(|e| e.to_string())?;
                let num = |k: &str| o.i64(k).map(|v| v.unwrap_or(0)).map_err(|e| e.to_string());
                let id = o.str("id").map_err(|e| e.to_string())?.to_string();
                if id.is_empty() {
                    return Err(format!("device [{i}]: no `id`"));
                }
                let ty = o.str("type").map_err(|e| e.to_string())?;
                let devmem = num("devmem")?;
                let (count, devcore, index) = (num("count")?, num("devcore")?, num("index")?);
                if devmem <= 0 || count < 0 || devcore < 0 || index < 0 {
                    return Err(format!("device [{i}] `{id}`: devmem must be > 0 and count, devcore, index >= 0"));
                }
                let ty = if ty.is_empty() { product } else { ty };
                Ok(DeviceGpu {
                    ty: ty.to_string(),
                    mode: o.str("mode").map_err(|e| e.to_string())?.to_string(),
                    spec: gpu_spec(ty, devmem as f64),
                    id,
                    index: u32::try_from(index).unwrap_or(u32::MAX),
                    max_pods: u32::try_from(count).unwrap_or(u32::MAX),
                    cores: devcore as f64,
                    healthy: o.bool("health").map_err(|e| e.to_string())?,
                })
            })
            .collect();
    }
    let mut out = Vec::new();
    for (i, dev) in t.split(':').map(str::trim).filter(|d| !d.is_empty()).enumerate() {
        let f: Vec<&str> = dev.split(',').collect();
        if f.len() < 7 {
            return Err(format!("device {i} `{dev}`: expected id,count,devmem,devcore,type,numa,health[,index,mode]"));
        }
        let int = |k: usize, name: &str| -> Result<i64, String> {
            f[k].trim().parse::<i64>().map_err(|_| format!("device {i} field {name}: `{}` is not an integer", f[k]))
        };
        let (count, devmem, devcore) = (int(1, "count")?, int(2, "devmem")?, int(3, "devcore")?);
        if devmem <= 0 || count < 0 || devcore < 0 {
            return Err(format!("device {i} `{}`: devmem must be > 0 and count, devcore >= 0", f[0]));
        }
        let healthy = match f[6].trim() {
            "true" => true,
            "false" => false,
            other => return Err(format!("device {i} field health: `{other}` is not true or false")),
        };
        let index = if f.len() > 7 { int(7, "index")? } else { i as i64 };
        let ty = if f[4].is_empty() { product } else { f[4] };
        out.push(DeviceGpu {
            id: f[0].trim().to_string(),
            index: u32::try_from(index).unwrap_or(u32::MAX),
            spec: gpu_spec(ty, devmem as f64),
            max_pods: u32::try_from(count).unwrap_or(u32::MAX),
            cores: devcore as f64,
            healthy,
            ty: ty.to_string(),
            mode: f.get(8).map(|m| m.trim().to_string()).unwrap_or_default(),
        });
    }
    if out.is_empty() {
        return Err("no devices".into());
    }
    Ok(out)
}

/// What a pod asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum GpuRequest {
    /// No shared GPU: not the extender's business.
    None,
    /// gpushare: memory in the plugin's unit, summed over the containers.
    Gpushare {
        /// Memory, plugin units.
        units: f64,
    },
    /// HAMi.
    Hami {
        /// vGPUs asked for, over the containers.
        gpus: u32,
        /// Memory per vGPU, MiB, when given.
        mem_mib: Option<f64>,
        /// Memory per vGPU, percent of the card, when given (100 when neither is).
        mem_pct: Option<f64>,
        /// Compute per vGPU, percent.
        cores: f64,
        /// Position of the first container that asks (the one the devices go to), over the
        /// init containers and then the regular ones, as HAMi's device list is laid out.
        container: usize,
        /// True when the pod asks for `nvidia.com/gpu` alone (no `gpumem`,
        /// `gpumem-percentage` or `gpucores`): an ordinary whole-GPU pod to any other plugin.
        whole: bool,
    },
}

/// HAMi's scheduler settings `defaultMemory` and `defaultCores`: what a vGPU gets when the pod
/// does not say (HAMi's defaults: 0 MiB, meaning the whole card, and 0 %).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HamiDefaults {
    /// MiB per vGPU when neither `gpumem` nor `gpumem-percentage` is set (0: the whole card).
    pub memory_mib: f64,
    /// Compute per vGPU, percent, when `gpucores` is not set.
    pub cores: f64,
}

impl GpuRequest {
    /// The convention it follows.
    pub fn convention(&self) -> Option<Convention> {
        match self {
            GpuRequest::None => None,
            GpuRequest::Gpushare { .. } => Some(Convention::Gpushare),
            GpuRequest::Hami { .. } => Some(Convention::Hami),
        }
    }

    /// GPU memory it reserves on a card of `card_mib`, MiB.
    pub fn mem_mib(&self, card_mib: f64, unit_mib: f64) -> f64 {
        match self {
            GpuRequest::None => 0.0,
            GpuRequest::Gpushare { units } => units * unit_mib,
            GpuRequest::Hami { mem_mib: Some(m), .. } => *m,
            GpuRequest::Hami { mem_pct, .. } => card_mib * mem_pct.unwrap_or(100.0) / 100.0,
        }
    }

    /// Compute it reserves, percent (HAMi only).
    pub fn cores(&self) -> f64 {
        match self {
            GpuRequest::Hami { cores, .. } => *cores,
            _ => 0.0,
        }
    }
}

/// Reads a pod's request from its init containers' and containers' limits (requests when a
/// limit is absent). HAMi's requests are read over the init containers, then the regular
/// ones, as HAMi does; gpushare shares GPUs with regular containers only, so a gpushare
/// request in an init container is refused. `defaults` fill what a HAMi pod leaves unset.
pub fn pod_request(pod: &PodInfo, defaults: &HamiDefaults) -> Result<GpuRequest, String> {
    let mut units = 0.0;
    let mut share = false;
    let mut hami: Option<GpuRequest> = None;
    let all = pod.init_containers.iter().map(|c| (c, true)).chain(pod.containers.iter().map(|c| (c, false)));
    for (i, (c, init)) in all.enumerate() {
        let kind = if init { "init container" } else { "container" };
        let get = |key: &str| -> Result<Option<f64>, String> {
            let from = if c.limits.contains_key(key) { &c.limits } else { &c.requests };
            quantity(from, key, &format!("{kind} `{}` resource", c.name))
        };
        if let Some(u) = get(GPUSHARE_MEM)? {
            if init && u > 0.0 {
                return Err(format!(
                    "init container `{}` asks for `{GPUSHARE_MEM}`; gpushare shares GPUs with regular containers only",
                    c.name
                ));
            }
            units += u;
            share = true;
        }
        if let Some(n) = get(HAMI_GPU)?.filter(|n| *n > 0.0) {
            let n = n.round().min(1024.0) as u32;
            let (mem, pct, cores) = (get(HAMI_MEM)?, get(HAMI_MEM_PCT)?, get(HAMI_CORES)?);
            let whole = mem.is_none() && pct.is_none() && cores.is_none();
            if pct.is_some_and(|p| p > 100.0) || cores.is_some_and(|c| c > 100.0) {
                return Err(format!(
                    "{kind} `{}`: `{HAMI_MEM_PCT}` and `{HAMI_CORES}` are percentages (<= 100)",
                    c.name
                ));
            }
            // HAMi: no memory asked (0 counts as unset) takes `defaultMemory`, else the card.
            let mem = mem.filter(|m| *m > 0.0);
            let mem = if mem.is_none() && pct.is_none() && defaults.memory_mib > 0.0 {
                Some(defaults.memory_mib)
            } else {
                mem
            };
            let cores = cores.unwrap_or(defaults.cores);
            hami = Some(match hami {
                None => GpuRequest::Hami { gpus: n, mem_mib: mem, mem_pct: pct, cores, container: i, whole },
                // Whole GPUs only when every asking container asks for whole GPUs.
                Some(GpuRequest::Hami { gpus, mem_mib, mem_pct, cores, container, whole: first_whole }) => {
                    GpuRequest::Hami { gpus: gpus + n, mem_mib, mem_pct, cores, container, whole: first_whole && whole }
                }
                Some(other) => other,
            });
        }
    }
    match (share, hami) {
        (true, Some(_)) => Err(format!("asks for both `{GPUSHARE_MEM}` (gpushare) and `{HAMI_GPU}` (HAMi)")),
        (true, None) => Ok(GpuRequest::Gpushare { units }),
        (false, Some(h)) => Ok(h),
        (false, None) => Ok(GpuRequest::None),
    }
}

/// What a pod already placed holds, read from its allocation annotations alone, where
/// [`pod_request`] refuses its request (`gpucores` over 100, which HAMi clamps and places; a
/// gpushare request in an init container; both conventions at once). A pod the extender would
/// not place may still run on a GPU (placed by HAMi's or gpushare's own scheduler), and
/// left uncounted its GPU looked free. `None` when the annotations name no GPU.
pub fn held_request(pod: &PodInfo) -> Option<GpuRequest> {
    let hami = pod.annotations.get(HAMI_ALLOCATED).or_else(|| pod.annotations.get(HAMI_TO_ALLOCATE));
    if let Some(devs) = hami.and_then(|t| parse_hami_devices(t).ok()).filter(|d| !d.is_empty()) {
        let first = &devs[0];
        let (mem_mib, cores) = (Some(first.mem_mib), first.cores.min(100.0));
        return Some(GpuRequest::Hami {
            gpus: devs.len() as u32,
            mem_mib,
            mem_pct: None,
            cores,
            container: 0,
            whole: false,
        });
    }
    pod.annotations.get(GPUSHARE_IDX)?;
    // What every container asks; `pod_allocations` counts the written memory where more.
    let units: f64 = pod
        .init_containers
        .iter()
        .chain(&pod.containers)
        .filter_map(|c| c.limits.get(GPUSHARE_MEM).or_else(|| c.requests.get(GPUSHARE_MEM)))
        .filter_map(|q| parse_quantity(q).ok())
        .filter(|u| u.is_finite() && *u >= 0.0)
        .sum();
    Some(GpuRequest::Gpushare { units })
}

/// A GPU a pod holds, from its annotations.
#[derive(Debug, Clone, PartialEq)]
pub struct Allocation {
    /// gpushare index as text, or HAMi UUID.
    pub gpu_id: String,
    /// Memory held, MiB.
    pub mem_mib: f64,
    /// Compute held, percent.
    pub cores: f64,
}

/// The GPUs a pod holds per its annotations; `None` when it holds none (yet).
pub fn pod_allocations(pod: &PodInfo, req: &GpuRequest, unit_mib: f64) -> Result<Option<Vec<Allocation>>, String> {
    match req {
        GpuRequest::None => Ok(None),
        GpuRequest::Gpushare { units } => {
            let Some(idx) = pod.annotations.get(GPUSHARE_IDX) else { return Ok(None) };
            let i: u32 =
                idx.trim().parse().map_err(|_| format!("annotation `{GPUSHARE_IDX}`: `{idx}` is not a GPU index"))?;
            // The annotation as gpushare writes it (the pod's request), never counted below the
            // request: `NaN` or `-8` there counted the pod as 0 MiB and let a second pod share
            // its GPU past the card, and an unreadable one left it uncounted. The GPU index is
            // what places the pod; its memory is at least what it asked for.
            let written = pod.annotations.get(GPUSHARE_POD).and_then(|m| m.trim().parse::<f64>().ok());
            let mem_units = written.filter(|v| v.is_finite() && *v >= 0.0).map_or(*units, |v| v.max(*units));
            Ok(Some(vec![Allocation { gpu_id: i.to_string(), mem_mib: mem_units * unit_mib, cores: 0.0 }]))
        }
        GpuRequest::Hami { .. } => {
            let text = pod.annotations.get(HAMI_ALLOCATED).or_else(|| pod.annotations.get(HAMI_TO_ALLOCATE));
            let Some(text) = text else { return Ok(None) };
            let devs = parse_hami_devices(text).map_err(|e| format!("annotation `{HAMI_ALLOCATED}`: {e}"))?;
            Ok(if devs.is_empty() { None } else { Some(devs) })
        }
    }
}

/// Reads `UUID,Type,mem,cores:` per device, `;` per container.
pub fn parse_hami_devices(text: &str) -> Result<Vec<Allocation>, String> {
    let mut out = Vec::new();
    for dev in text.split(';').flat_map(|c| c.split(':')).map(str::trim).filter(|d| !d.is_empty()) {
        let f: Vec<&str> = dev.split(',').collect();
        if f.len() < 4 || f[0].is_empty() {
            return Err(format!("device `{dev}`: expected UUID,Type,mem,cores"));
        }
        let num = |k: usize, n: &str| {
            f[k].trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| format!("device `{dev}`: {n} `{}` is not a number", f[k]))
        };
        out.push(Allocation { gpu_id: f[0].trim().to_string(), mem_mib: num(2, "mem")?, cores: num(3, "cores")? });
    }
    Ok(out)
}

/// The annotations (and labels) that hand `gpu` on `node` to the pod, for its device plugin.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BindPatch {
    /// Pod annotations to set.
    pub annotations: BTreeMap<String, String>,
    /// Pod labels to set.
    pub labels: BTreeMap<String, String>,
}

impl BindPatch {
    /// gpushare's annotations: index, the pod's and the GPU's memory (plugin units),
    /// `ASSIGNED=false` and the assume time in Unix ns.
    pub fn gpushare(gpu: &DeviceGpu, pod_units: f64, unit_mib: f64, now_ns: u128) -> BindPatch {
        let mut a = BTreeMap::new();
        a.insert(GPUSHARE_IDX.to_string(), gpu.id.clone());
        a.insert(GPUSHARE_POD.to_string(), format_units(pod_units));
        // gpushare writes total / count in integer division.
        a.insert(GPUSHARE_DEV.to_string(), format_units((gpu.spec.memory_mib / unit_mib + 1e-9).floor()));
        a.insert(GPUSHARE_ASSIGNED.to_string(), "false".into());
        a.insert(GPUSHARE_ASSUME_TIME.to_string(), now_ns.to_string());
        BindPatch { annotations: a, labels: BTreeMap::new() }
    }

    /// HAMi's annotations and label: the device for the asking container (`;` per container,
    /// one slot per init container and then per regular container, empty slots kept, as
    /// HAMi's device plugin reads them by position).
    pub fn hami(
        pod: &PodInfo,
        container: usize,
        gpu: &DeviceGpu,
        node: &str,
        mem_mib: f64,
        cores: f64,
        now_s: u64,
    ) -> BindPatch {
        let dev = format!("{},NVIDIA,{},{}:", gpu.id, mem_mib.round() as i64, cores.round() as i64);
        let slots = pod.init_containers.len() + pod.containers.len();
        let devices: String = (0..slots.max(container + 1))
            .map(|i| if i == container { format!("{dev};") } else { ";".into() })
            .collect();
        let mut a = BTreeMap::new();
        a.insert(HAMI_TO_ALLOCATE.to_string(), devices.clone());
        a.insert(HAMI_ALLOCATED.to_string(), devices);
        a.insert(HAMI_NODE.to_string(), node.to_string());
        a.insert(HAMI_TIME.to_string(), now_s.to_string());
        a.insert(HAMI_BIND_PHASE.to_string(), "allocating".into());
        a.insert(HAMI_BIND_TIME.to_string(), now_s.to_string());
        let mut l = BTreeMap::new();
        l.insert(HAMI_NODE.to_string(), node.to_string());
        BindPatch { annotations: a, labels: l }
    }

    /// The JSON merge patch for the pod.
    pub fn to_merge_patch(&self) -> Value {
        let mut meta = serde_json::Map::new();
        meta.insert("annotations".into(), serde_json::to_value(&self.annotations).unwrap_or(Value::Null));
        if !self.labels.is_empty() {
            meta.insert("labels".into(), serde_json::to_value(&self.labels).unwrap_or(Value::Null));
        }
        serde_json::json!({ "metadata": meta })
    }
}

/// Plugin units as gpushare writes them: an integer when whole.
fn format_units(u: f64) -> String {
    if (u - u.round()).abs() < 1e-9 {
        format!("{}", u.round() as i64)
    } else {
        format!("{u}")
    }
}

/// The pod's dqngpu app: annotation `dqngpu.io/app`, else label `app.kubernetes.io/name`.
pub fn app_of(pod: &PodInfo) -> Option<&str> {
    pod.annotations
        .get(APP_ANNOTATION)
        .or_else(|| pod.labels.get(APP_LABEL))
        .map(String::as_str)
        .filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ContainerInfo;

    fn node(cap: &[(&str, &str)], ann: &[(&str, &str)], labels: &[(&str, &str)]) -> NodeInfo {
        let m = |x: &[(&str, &str)]| x.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        NodeInfo { name: "n".into(), capacity: m(cap), annotations: m(ann), labels: m(labels), ..Default::default() }
    }

    #[test]
    fn gpushare_node_divides_total_memory() {
        let n = node(&[(GPUSHARE_COUNT, "2"), (GPUSHARE_MEM, "32")], &[], &[(PRODUCT_LABEL, "Tesla-V100-SXM2-16GB")]);
        let d = node_devices(&n, 1024.0).unwrap();
        assert_eq!(d.convention, Convention::Gpushare);
        assert_eq!(d.gpus.len(), 2);
        assert_eq!(d.gpus[1].spec.memory_mib, 16384.0);
        assert_eq!(d.gpus[1].spec.key, "v100-16");
        let mib = node(&[(GPUSHARE_COUNT, "1"), (GPUSHARE_MEM, "15109")], &[], &[(PRODUCT_LABEL, "Tesla-T4")]);
        let d = node_devices(&mib, 1.0).unwrap();
        assert_eq!((d.gpus[0].spec.key.as_str(), d.gpus[0].spec.memory_mib), ("t4", 15109.0));
        let e = node_devices(&node(&[], &[], &[]), 1024.0).unwrap_err();
        assert!(e.contains("no shared GPUs"), "{e}");
    }

    #[test]
    fn half_a_gpushare_announcement_is_named_and_not_plain() {
        for (cap, missing) in [((GPUSHARE_COUNT, "2"), GPUSHARE_MEM), ((GPUSHARE_MEM, "32"), GPUSHARE_COUNT)] {
            let n = node(&[cap, ("nvidia.com/gpu", "2")], &[], &[]);
            let e = node_devices(&n, 1024.0).unwrap_err();
            assert!(e.contains(&format!("without `{missing}`")), "{e}");
            assert!(!e.contains("no shared GPUs"), "{e}");
            // A plugin claims the node's GPUs: whole-GPU pods are not passed through it.
            assert!(shares_gpus(&n));
        }
    }

    #[test]
    fn hami_register_both_forms() {
        let json = r#"[{"id":"GPU-a","index":0,"count":10,"devmem":32768,"devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB","numa":0,"mode":"hami-core","health":true},
                      {"id":"GPU-b","index":1,"count":10,"devmem":81920,"devcore":100,"type":"NVIDIA-A100-SXM4-80GB","health":true}]"#;
        let g = parse_hami_register(json, "").unwrap();
        assert_eq!(g.len(), 2);
        assert_eq!((g[0].spec.key.as_str(), g[0].max_pods, g[1].spec.key.as_str()), ("v100-32", 10, "a100-80"));
        let old = "GPU-a,10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true:GPU-b,4,24576,100,NVIDIA-GeForce RTX 3090,0,false,1,hami-core:";
        let g = parse_hami_register(old, "").unwrap();
        assert_eq!(
            (g[1].id.as_str(), g[1].index, g[1].healthy, g[1].spec.key.as_str()),
            ("GPU-b", 1, false, "rtx3090")
        );
        assert!(parse_hami_register("GPU-a,x,1,1,t,0,true:", "").unwrap_err().contains("count"));
        assert!(parse_hami_register("[{\"id\":\"a\"}]", "").is_err());
        assert!(parse_hami_register("", "").is_err());
    }

    fn pod(limits: &[(&str, &str)], ann: &[(&str, &str)]) -> PodInfo {
        let m = |x: &[(&str, &str)]| x.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        PodInfo {
            containers: vec![ContainerInfo { name: "c".into(), limits: m(limits), ..Default::default() }],
            annotations: m(ann),
            ..Default::default()
        }
    }

    fn pod_request_of(p: &PodInfo) -> Result<GpuRequest, String> {
        pod_request(p, &HamiDefaults::default())
    }

    #[test]
    fn requests_and_allocations() {
        let p = pod(&[(GPUSHARE_MEM, "4")], &[(GPUSHARE_IDX, "1"), (GPUSHARE_POD, "4")]);
        let r = pod_request(&p, &HamiDefaults::default()).unwrap();
        assert_eq!(r, GpuRequest::Gpushare { units: 4.0 });
        let a = pod_allocations(&p, &r, 1024.0).unwrap().unwrap();
        assert_eq!(a, vec![Allocation { gpu_id: "1".into(), mem_mib: 4096.0, cores: 0.0 }]);
        // A memory annotation that is no number, NaN, negative or below the request counts the
        // request; one above it counts itself.
        for (written, mib) in [("x", 4096.0), ("NaN", 4096.0), ("-8", 4096.0), ("2", 4096.0), ("6", 6144.0)] {
            let q = pod(&[(GPUSHARE_MEM, "4")], &[(GPUSHARE_IDX, "1"), (GPUSHARE_POD, written)]);
            assert_eq!(pod_allocations(&q, &r, 1024.0).unwrap().unwrap()[0].mem_mib, mib, "{written}");
        }
        let h = pod(
            &[(HAMI_GPU, "1"), (HAMI_MEM, "3000"), (HAMI_CORES, "30")],
            &[(HAMI_ALLOCATED, "GPU-a,NVIDIA,3000,30:;")],
        );
        let r = pod_request(&h, &HamiDefaults::default()).unwrap();
        assert_eq!(r.mem_mib(16384.0, 1.0), 3000.0);
        assert_eq!(pod_allocations(&h, &r, 1.0).unwrap().unwrap()[0].gpu_id, "GPU-a");
        let whole = pod_request_of(&pod(&[(HAMI_GPU, "1")], &[])).unwrap();
        assert_eq!(whole.mem_mib(16384.0, 1.0), 16384.0);
        assert_eq!(pod_request_of(&pod(&[("cpu", "1")], &[])).unwrap(), GpuRequest::None);
        assert!(pod_request_of(&pod(&[(GPUSHARE_MEM, "x")], &[])).is_err());
        assert!(pod_allocations(
            &pod(&[(GPUSHARE_MEM, "1")], &[(GPUSHARE_IDX, "a")]),
            &GpuRequest::Gpushare { units: 1.0 },
            1.0
        )
        .is_err());
    }

    #[test]
    fn bind_annotations() {
        let gpu = DeviceGpu {
            id: "2".into(),
            index: 2,
            spec: gpu_spec("Tesla-T4", 16384.0),
            max_pods: 9,
            cores: 100.0,
            healthy: true,
            ty: "Tesla-T4".into(),
            mode: String::new(),
        };
        let b = BindPatch::gpushare(&gpu, 4.0, 1024.0, 17);
        assert_eq!(b.annotations[GPUSHARE_IDX], "2");
        assert_eq!(b.annotations[GPUSHARE_POD], "4");
        assert_eq!(b.annotations[GPUSHARE_DEV], "16");
        assert_eq!(b.annotations[GPUSHARE_ASSIGNED], "false");
        assert_eq!(b.annotations[GPUSHARE_ASSUME_TIME], "17");
        let p = pod(&[(HAMI_GPU, "1")], &[]);
        let gpu = DeviceGpu { id: "GPU-x".into(), ..gpu };
        let h = BindPatch::hami(&p, 0, &gpu, "n1", 3000.0, 30.0, 5);
        assert_eq!(h.annotations[HAMI_ALLOCATED], "GPU-x,NVIDIA,3000,30:;");
        assert_eq!(h.annotations[HAMI_TO_ALLOCATE], h.annotations[HAMI_ALLOCATED]);
        assert_eq!(h.annotations[HAMI_BIND_PHASE], "allocating");
        assert_eq!(h.labels[HAMI_NODE], "n1");
        assert_eq!(parse_hami_devices(&h.annotations[HAMI_ALLOCATED]).unwrap()[0].mem_mib, 3000.0);
    }

    #[test]
    fn gpushare_dev_is_floored_as_gpushare_divides() {
        // 33 GiB over 2 GPUs: gpushare writes 33 / 2 = 16 (Go integer division).
        let n = node(&[(GPUSHARE_COUNT, "2"), (GPUSHARE_MEM, "33")], &[], &[]);
        let d = node_devices(&n, 1024.0).unwrap();
        let b = BindPatch::gpushare(&d.gpus[1], 4.0, 1024.0, 1);
        assert_eq!(b.annotations[GPUSHARE_DEV], "16");
    }

    #[test]
    fn hami_defaults_fill_what_the_pod_leaves_unset() {
        let defaults = HamiDefaults { memory_mib: 3000.0, cores: 20.0 };
        let r = pod_request(&pod(&[(HAMI_GPU, "1")], &[]), &defaults).unwrap();
        assert_eq!((r.mem_mib(16384.0, 1.0), r.cores()), (3000.0, 20.0));
        assert!(matches!(r, GpuRequest::Hami { whole: true, .. }));
        // What the pod sets wins; a percentage is not overridden by the default memory.
        let r = pod_request(&pod(&[(HAMI_GPU, "1"), (HAMI_MEM_PCT, "50"), (HAMI_CORES, "0")], &[]), &defaults).unwrap();
        assert_eq!((r.mem_mib(16384.0, 1.0), r.cores()), (8192.0, 0.0));
        assert!(matches!(r, GpuRequest::Hami { whole: false, .. }));
        // HAMi's own defaults: the whole card, no compute.
        let r = pod_request_of(&pod(&[(HAMI_GPU, "1"), (HAMI_MEM, "0")], &[])).unwrap();
        assert_eq!((r.mem_mib(16384.0, 1.0), r.cores()), (16384.0, 0.0));
        // Whole GPUs only when every asking container asks for whole GPUs, in either order.
        let whole = pod(&[(HAMI_GPU, "1")], &[]).containers.remove(0);
        let share = pod(&[(HAMI_GPU, "1"), (HAMI_MEM, "2000")], &[]).containers.remove(0);
        for containers in [vec![whole.clone(), share.clone()], vec![share, whole.clone()]] {
            let r = pod_request_of(&PodInfo { containers, ..Default::default() }).unwrap();
            assert!(matches!(r, GpuRequest::Hami { gpus: 2, whole: false, .. }), "{r:?}");
        }
        let r = pod_request_of(&PodInfo { containers: vec![whole.clone(), whole], ..Default::default() }).unwrap();
        assert!(matches!(r, GpuRequest::Hami { gpus: 2, whole: true, .. }), "{r:?}");
    }

    #[test]
    fn hami_lock_expiry_from_the_environment() {
        assert_eq!(hami_lock_expire_s(None).unwrap(), 300.0);
        assert_eq!(hami_lock_expire_s(Some("90s")).unwrap(), 90.0);
        assert_eq!(hami_lock_expire_s(Some("10m")).unwrap(), 600.0);
        for bad in ["300", "0", "-5m", "soon"] {
            let e = hami_lock_expire_s(Some(bad)).unwrap_err();
            assert!(e.contains(HAMI_LOCK_EXPIRE_ENV) && e.contains(bad), "{e}");
        }
    }

    proptest::proptest! {
        #[test]
        fn parsers_never_panic(s in ".{0,80}") {
            let _ = parse_hami_register(&s, "");
            let _ = parse_hami_devices(&s);
            let _ = gpu_spec(&s, 1.0);
        }
    }
}
