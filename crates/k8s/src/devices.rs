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
                })
                .collect();
            Ok(NodeDevices { convention: Convention::Gpushare, gpus })
        }
        (Some(_), Some(_)) => Err(format!("capacity `{GPUSHARE_COUNT}` or `{GPUSHARE_MEM}` is zero")),
        _ => Err(format!(
            "no shared GPUs: neither `{GPUSHARE_COUNT}`/`{GPUSHARE_MEM}` capacity (gpushare) nor annotation `{HAMI_REGISTER}` (HAMi)"
        )),
    }
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
                Ok(DeviceGpu {
                    spec: gpu_spec(if ty.is_empty() { product } else { ty }, devmem as f64),
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
        out.push(DeviceGpu {
            id: f[0].trim().to_string(),
            index: u32::try_from(index).unwrap_or(u32::MAX),
            spec: gpu_spec(if f[4].is_empty() { product } else { f[4] }, devmem as f64),
            max_pods: u32::try_from(count).unwrap_or(u32::MAX),
            cores: devcore as f64,
            healthy,
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
        /// Index of the first container that asks (the one the devices go to).
        container: usize,
    },
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

/// Reads a pod's request from its containers' limits (requests when a limit is absent).
pub fn pod_request(pod: &PodInfo) -> Result<GpuRequest, String> {
    let mut units = 0.0;
    let mut share = false;
    let mut hami: Option<GpuRequest> = None;
    for (i, c) in pod.containers.iter().enumerate() {
        let get = |key: &str| -> Result<Option<f64>, String> {
            let from = if c.limits.contains_key(key) { &c.limits } else { &c.requests };
            quantity(from, key, &format!("container `{}` resource", c.name))
        };
        if let Some(u) = get(GPUSHARE_MEM)? {
            units += u;
            share = true;
        }
        if let Some(n) = get(HAMI_GPU)?.filter(|n| *n > 0.0) {
            let n = n.round().min(1024.0) as u32;
            let (mem, pct, cores) = (get(HAMI_MEM)?, get(HAMI_MEM_PCT)?, get(HAMI_CORES)?.unwrap_or(0.0));
            if pct.is_some_and(|p| p > 100.0) || cores > 100.0 {
                return Err(format!(
                    "container `{}`: `{HAMI_MEM_PCT}` and `{HAMI_CORES}` are percentages (<= 100)",
                    c.name
                ));
            }
            hami = Some(match hami {
                None => GpuRequest::Hami { gpus: n, mem_mib: mem, mem_pct: pct, cores, container: i },
                Some(GpuRequest::Hami { gpus, mem_mib, mem_pct, cores, container }) => {
                    GpuRequest::Hami { gpus: gpus + n, mem_mib, mem_pct, cores, container }
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
            let mem_units = match pod.annotations.get(GPUSHARE_POD) {
                Some(m) => m
                    .trim()
                    .parse::<f64>()
                    .map_err(|_| format!("annotation `{GPUSHARE_POD}`: `{m}` is not a number"))?,
                None => *units,
            };
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
        a.insert(GPUSHARE_DEV.to_string(), format_units(gpu.spec.memory_mib / unit_mib));
        a.insert(GPUSHARE_ASSIGNED.to_string(), "false".into());
        a.insert(GPUSHARE_ASSUME_TIME.to_string(), now_ns.to_string());
        BindPatch { annotations: a, labels: BTreeMap::new() }
    }

    /// HAMi's annotations and label: the device for the asking container (`;` per container).
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
        let devices: String = (0..pod.containers.len().max(container + 1))
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

    #[test]
    fn requests_and_allocations() {
        let p = pod(&[(GPUSHARE_MEM, "4")], &[(GPUSHARE_IDX, "1"), (GPUSHARE_POD, "4")]);
        let r = pod_request(&p).unwrap();
        assert_eq!(r, GpuRequest::Gpushare { units: 4.0 });
        let a = pod_allocations(&p, &r, 1024.0).unwrap().unwrap();
        assert_eq!(a, vec![Allocation { gpu_id: "1".into(), mem_mib: 4096.0, cores: 0.0 }]);
        let h = pod(
            &[(HAMI_GPU, "1"), (HAMI_MEM, "3000"), (HAMI_CORES, "30")],
            &[(HAMI_ALLOCATED, "GPU-a,NVIDIA,3000,30:;")],
        );
        let r = pod_request(&h).unwrap();
        assert_eq!(r.mem_mib(16384.0, 1.0), 3000.0);
        assert_eq!(pod_allocations(&h, &r, 1.0).unwrap().unwrap()[0].gpu_id, "GPU-a");
        let whole = pod_request(&pod(&[(HAMI_GPU, "1")], &[])).unwrap();
        assert_eq!(whole.mem_mib(16384.0, 1.0), 16384.0);
        assert_eq!(pod_request(&pod(&[("cpu", "1")], &[])).unwrap(), GpuRequest::None);
        assert!(pod_request(&pod(&[(GPUSHARE_MEM, "x")], &[])).is_err());
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

    proptest::proptest! {
        #[test]
        fn parsers_never_panic(s in ".{0,80}") {
            let _ = parse_hami_register(&s, "");
            let _ = parse_hami_devices(&s);
            let _ = gpu_spec(&s, 1.0);
        }
    }
}
