//! The real [`GpuSampler`]: NVML, loaded at run time through `nvml-wrapper`.
//!
//! Where NVML is looked for: only `$DQNGPU_NVML_LIB` when that is set; otherwise the sonames
//! `libnvidia-ml.so.1` and `libnvidia-ml.so` (the dynamic loader's search: `LD_LIBRARY_PATH`,
//! `ld.so.cache`) and then the usual driver locations of Debian/Ubuntu, RHEL, WSL and the
//! Kubernetes device plugin. Without a driver every attempt is named in
//! [`ProfilerError::NoDriver`].

use std::ffi::OsStr;

use nvml_wrapper::enum_wrappers::device::PcieUtilCounter;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;

use super::{DeviceInfo, GpuReading, GpuSampler, ProcessMemory, ProcessSm};
use crate::{LoadAttempt, ProfilerError};

/// The list lives in `dqngpu_model::gpu`, shared with the service.
pub use dqngpu_model::gpu::{
    nvml_candidates as candidates, NVML_DEFAULT_CANDIDATES as DEFAULT_CANDIDATES, NVML_LIB_ENV as LIB_ENV,
};

const MIB: f64 = 1024.0 * 1024.0;

/// Theoretical one-direction bandwidth per lane, GB/s, by PCIe generation (PCI-SIG
/// specifications: 2.5/5/8/16/32/64 GT/s with 8b/10b up to gen 2, 128b/130b after).
fn lane_gbps(gen: u32) -> f64 {
    match gen {
        1 => 0.25,
        2 => 0.5,
        3 => 0.985,
        4 => 1.969,
        5 => 3.938,
        6 => 7.563,
        _ => 0.0,
    }
}

/// Samples one GPU through NVML.
pub struct NvmlSampler {
    nvml: Nvml,
    device: DeviceInfo,
    last_seen_us: Option<u64>,
}

impl std::fmt::Debug for NvmlSampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvmlSampler").field("device", &self.device).finish_non_exhaustive()
    }
}

fn nvml_err(call: &'static str) -> impl Fn(NvmlError) -> ProfilerError {
    move |e| ProfilerError::Nvml { call, message: e.to_string() }
}

/// `Ok(None)` for a query the GPU or driver does not support.
fn optional<T>(r: Result<T, NvmlError>, call: &'static str) -> Result<Option<T>, ProfilerError> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(NvmlError::NotSupported | NvmlError::FunctionNotFound | NvmlError::FailedToLoadSymbol(_)) => Ok(None),
        Err(e) => Err(nvml_err(call)(e)),
    }
}

/// Loads NVML from the first candidate that works.
pub fn load(candidates: &[String]) -> Result<Nvml, ProfilerError> {
    let mut tried = Vec::new();
    for c in candidates {
        match Nvml::builder().lib_path(OsStr::new(c)).init() {
            Ok(n) => return Ok(n),
            Err(e) => {
                // "a libloading error occurred: PATH: cannot open ..." -> "cannot open ...".
                let msg = e.to_string();
                let msg = msg.strip_prefix("a libloading error occurred: ").unwrap_or(&msg);
                let msg = msg.strip_prefix(&format!("{c}: ")).unwrap_or(msg);
                tried.push(LoadAttempt { path: c.clone(), error: msg.to_string() })
            }
        }
    }
    Err(ProfilerError::NoDriver { tried })
}

impl NvmlSampler {
    /// Opens GPU `index`, loading NVML from [`candidates`].
    pub fn open(index: u32) -> Result<Self, ProfilerError> {
        Self::open_with(&candidates(), index)
    }

    /// Opens GPU `index`, loading NVML from the first of `candidates` that works.
    pub fn open_with(candidates: &[String], index: u32) -> Result<Self, ProfilerError> {
        let nvml = load(candidates)?;
        let count = nvml.device_count().map_err(nvml_err("nvmlDeviceGetCount"))?;
        if index >= count {
            return Err(dqngpu_model::ModelError::UnknownName {
                what: "GPU index",
                name: index.to_string(),
                valid: (0..count).map(|i| i.to_string()).collect(),
            }
            .into());
        }
        let d = nvml.device_by_index(index).map_err(nvml_err("nvmlDeviceGetHandleByIndex"))?;
        let mem = d.memory_info().map_err(nvml_err("nvmlDeviceGetMemoryInfo"))?;
        let gen = optional(d.max_pcie_link_gen(), "nvmlDeviceGetMaxPcieLinkGeneration")?.unwrap_or(0);
        let width = optional(d.max_pcie_link_width(), "nvmlDeviceGetMaxPcieLinkWidth")?.unwrap_or(0);
        let device = DeviceInfo {
            index,
            name: d.name().map_err(nvml_err("nvmlDeviceGetName"))?,
            architecture: optional(d.architecture(), "nvmlDeviceGetArchitecture")?
                .map(|a| a.to_string())
                .unwrap_or_default(),
            memory_mib: mem.total as f64 / MIB,
            cores: optional(d.num_cores(), "nvmlDeviceGetNumGpuCores")?.unwrap_or(0),
            pcie_gbps: lane_gbps(gen) * f64::from(width),
        };
        Ok(NvmlSampler { nvml, device, last_seen_us: None })
    }
}

impl GpuSampler for NvmlSampler {
    fn device(&self) -> &DeviceInfo {
        &self.device
    }

    fn read(&mut self) -> Result<GpuReading, ProfilerError> {
        let d = self.nvml.device_by_index(self.device.index).map_err(nvml_err("nvmlDeviceGetHandleByIndex"))?;
        let util = d.utilization_rates().map_err(nvml_err("nvmlDeviceGetUtilizationRates"))?;
        let mem = d.memory_info().map_err(nvml_err("nvmlDeviceGetMemoryInfo"))?;
        let compute = optional(d.running_compute_processes(), "nvmlDeviceGetComputeRunningProcesses")?;
        let graphics = optional(d.running_graphics_processes(), "nvmlDeviceGetGraphicsRunningProcesses")?;
        let processes = compute.map(|mut c| {
            c.extend(graphics.unwrap_or_default());
            c.into_iter()
                .map(|p| ProcessMemory {
                    pid: p.pid,
                    used_mib: match p.used_gpu_memory {
                        nvml_wrapper::enums::device::UsedGpuMemory::Used(b) => Some(b as f64 / MIB),
                        nvml_wrapper::enums::device::UsedGpuMemory::Unavailable => None,
                    },
                })
                .collect()
        });
        let process_sm = match d.process_utilization_stats(self.last_seen_us) {
            Ok(samples) => {
                if let Some(t) = samples.iter().map(|s| s.timestamp).max() {
                    self.last_seen_us = Some(t);
                }
                Some(samples.into_iter().map(|s| ProcessSm { pid: s.pid, sm_pct: f64::from(s.sm_util) }).collect())
            }
            // No process ran a kernel since the last reading.
            Err(NvmlError::NotFound) => Some(Vec::new()),
            Err(e) => optional::<Vec<ProcessSm>>(Err(e), "nvmlDeviceGetProcessUtilization")?,
        };
        let tx = optional(d.pcie_throughput(PcieUtilCounter::Send), "nvmlDeviceGetPcieThroughput")?;
        let rx = optional(d.pcie_throughput(PcieUtilCounter::Receive), "nvmlDeviceGetPcieThroughput")?;
        Ok(GpuReading {
            gpu_util_pct: f64::from(util.gpu),
            mem_used_mib: mem.used as f64 / MIB,
            processes,
            process_sm,
            pcie_tx_kb_s: tx.map(f64::from),
            pcie_rx_kb_s: rx.map(f64::from),
        })
    }
}

/// This machine's host name (`/proc/sys/kernel/hostname`, then `$HOSTNAME`), or `unknown`.
pub fn node_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_library_names_every_path_tried() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("libnvidia-ml.so.1").display().to_string();
        let b = dir.path().join("other/libnvidia-ml.so").display().to_string();
        let e = NvmlSampler::open_with(&[a.clone(), b.clone()], 0).unwrap_err();
        let ProfilerError::NoDriver { tried } = &e else { panic!("expected NoDriver, got {e}") };
        assert_eq!(tried.iter().map(|t| t.path.as_str()).collect::<Vec<_>>(), [a.as_str(), b.as_str()]);
        let msg = e.to_string();
        assert!(msg.contains(&a) && msg.contains(&b) && msg.contains(LIB_ENV), "{msg}");
    }

    #[test]
    fn pcie_bandwidth_from_link() {
        assert_eq!(lane_gbps(4) * 16.0, 31.504);
        assert_eq!(lane_gbps(99), 0.0);
    }
}
