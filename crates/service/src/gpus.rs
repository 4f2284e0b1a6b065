//! The machine's GPUs: discovered through NVML when a driver is present, else declared
//! (`--gpus titanxp:2`: virtual GPUs whose jobs still run as real processes).

use dqngpu_model::{GpuSlot, GpuSpec, Resources};
use nvml_wrapper::enum_wrappers::device::PcieUtilCounter;
use nvml_wrapper::Nvml;

/// Reads live usage of the real GPUs.
pub struct NvmlMonitor {
    nvml: Nvml,
}

impl std::fmt::Debug for NvmlMonitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NvmlMonitor")
    }
}

impl NvmlMonitor {
    /// Usage of GPU `index` now: utilisation, memory used, SM (NVML's utilisation rate stands
    /// in for SM activity, which NVML does not report directly) and PCIe TX+RX in MB/s.
    pub fn sample(&self, index: u32) -> Option<Resources> {
        let d = self.nvml.device_by_index(index).ok()?;
        let util = d.utilization_rates().ok()?;
        let mem = d.memory_info().ok()?;
        let kbps = |c| d.pcie_throughput(c).ok().map(f64::from).unwrap_or(0.0);
        let pcie_mbps = (kbps(PcieUtilCounter::Send) + kbps(PcieUtilCounter::Receive)) / 1000.0;
        Some(Resources::new(util.gpu as f64, mem.used as f64 / (1024.0 * 1024.0), util.gpu as f64, pcie_mbps))
    }
}

/// Where NVML is looked for: the list `dqngpu profile run` uses too (`$DQNGPU_NVML_LIB`
/// alone when set, else the loader's search and the usual driver folders).
pub use dqngpu_model::gpu::nvml_candidates;

/// The GPUs NVML sees (those the server's `CUDA_VISIBLE_DEVICES` names, when it is set: none
/// when it names none), with a monitor, or `None` when no driver is loaded.
pub fn discover_nvml() -> Option<(Vec<GpuSlot>, NvmlMonitor)> {
    let nvml = nvml_candidates().iter().find_map(|c| Nvml::builder().lib_path(std::ffi::OsStr::new(c)).init().ok())?;
    let n = nvml.device_count().ok()?;
    // NVML lists every GPU of the machine; a server started with `CUDA_VISIBLE_DEVICES` set
    // (to confine it to some cards) placed jobs on all of them.
    // Set but naming none of them (empty, `-1`, MIG devices, another machine's indices), the
    // list of slots comes back empty and `serve` refuses to start, saying so: falling back to
    // virtual GPUs on a machine with a driver put jobs on arbitrary real cards.
    let confined = std::env::var("CUDA_VISIBLE_DEVICES").ok();
    let mut slots = Vec::new();
    for i in 0..n {
        let d = nvml.device_by_index(i).ok()?;
        if let Some(list) = &confined {
            let uuid = d.uuid().unwrap_or_default();
            if !visible(list, i, &uuid) {
                continue;
            }
        }
        let name = d.name().unwrap_or_else(|_| format!("GPU {i}"));
        let memory_mib = d.memory_info().map(|m| m.total as f64 / (1024.0 * 1024.0)).unwrap_or(0.0);
        // Link rate per lane in GB/s by PCIe generation (nominal, after encoding).
        let per_lane = match d.max_pcie_link_gen().unwrap_or(3) {
            1 => 0.25,
            2 => 0.5,
            3 => 0.985,
            4 => 1.969,
            _ => 3.938,
        };
        let pcie_gbps = per_lane * d.max_pcie_link_width().unwrap_or(16) as f64;
        let spec = GpuSpec {
            key: name.to_ascii_lowercase().replace(' ', "-"),
            architecture: d.architecture().map(|a| a.to_string()).unwrap_or_default(),
            cores: d.num_cores().unwrap_or(0),
            name,
            memory_mib,
            pcie_gbps,
        };
        slots.push(GpuSlot { node: "local".into(), index: i, spec });
    }
    if slots.is_empty() && confined.is_none() {
        return None;
    }
    Some((slots, NvmlMonitor { nvml }))
}

/// Whether `CUDA_VISIBLE_DEVICES`'s `list` (comma-separated indices, in PCI bus order as the
/// service numbers them, or UUIDs, whole or a prefix of at least `GPU-` and one character)
/// names the GPU of NVML index `index` and UUID `uuid`.
pub fn visible(list: &str, index: u32, uuid: &str) -> bool {
    list.split(',').map(str::trim).any(|e| match e.parse::<u32>() {
        Ok(i) => i == index,
        Err(_) => e.len() > 4 && e.starts_with("GPU-") && uuid.starts_with(e),
    })
}

#[cfg(test)]
mod tests {
    use super::visible;

    /// The server's own `CUDA_VISIBLE_DEVICES` confines it: indices or UUIDs (a prefix will
    /// do, as CUDA takes them), nothing else.
    #[test]
    fn cuda_visible_devices_names_gpus_by_index_or_uuid() {
        let a = "GPU-0aa1b2c3-0000-0000-0000-000000000000";
        assert!(visible("2,3", 2, a) && visible(" 3 , 2 ", 3, a));
        assert!(!visible("2,3", 0, a));
        assert!(visible("GPU-0aa1", 7, a) && visible("1,GPU-0aa1b2c3-0000-0000-0000-000000000000", 7, a));
        assert!(!visible("GPU-0bb", 7, a) && !visible("GPU-", 7, a) && !visible("x", 0, a));
    }
}
