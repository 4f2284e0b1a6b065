//! GPU specifications and the built-in catalogue.

use serde::{Deserialize, Serialize};

use crate::error::{ModelError, Result};
use crate::resources::Resources;

/// A GPU model (thesis Table 2, cluster info; Table 4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSpec {
    /// Catalogue key, as written on the command line (`titanxp`).
    pub key: String,
    /// Marketing name.
    pub name: String,
    /// Architecture.
    pub architecture: String,
    /// Memory, MiB.
    pub memory_mib: f64,
    /// CUDA cores.
    pub cores: u32,
    /// Host link bandwidth, GB/s.
    pub pcie_gbps: f64,
}

impl GpuSpec {
    /// Capacity as a resource vector: 100% GPU, all memory, 100% SM, PCIe in MB/s.
    pub fn capacity(&self) -> Resources {
        Resources::new(100.0, self.memory_mib, 100.0, self.pcie_gbps * 1000.0)
    }
}

/// (key, name, architecture, memory MiB, cores, PCIe GB/s, source).
/// Memory is the board's nominal size in MiB; PCIe is the link's nominal one-way rate,
/// except the Titan Xp, whose 32 GB/s is what the thesis's Table 4 states.
const CATALOGUE: &[(&str, &str, &str, f64, u32, f64)] = &[
    ("titanxp", "NVIDIA TITAN Xp", "Pascal", 12288.0, 3840, 32.0),
    ("m60", "NVIDIA Tesla M60 (one GPU)", "Maxwell", 8192.0, 2048, 16.0),
    ("rtx3090", "NVIDIA GeForce RTX 3090", "Ampere", 24576.0, 10496, 32.0),
    ("t4", "NVIDIA T4", "Turing", 16384.0, 2560, 16.0),
    ("v100-16", "NVIDIA V100 16GB", "Volta", 16384.0, 5120, 16.0),
    ("v100-32", "NVIDIA V100 32GB", "Volta", 32768.0, 5120, 16.0),
    ("a100-40", "NVIDIA A100 40GB", "Ampere", 40960.0, 6912, 32.0),
    ("a100-80", "NVIDIA A100 80GB", "Ampere", 81920.0, 6912, 32.0),
    ("h100", "NVIDIA H100 80GB", "Hopper", 81920.0, 16896, 64.0),
    // 143,771 MiB is what NVML reports for the H200's 141 GB.
    ("h200", "NVIDIA H200", "Hopper", 143771.0, 16896, 64.0),
];

/// The most GPU memory any catalogue GPU has, MiB: a profile above it is not physical.
pub fn max_memory_mib() -> f64 {
    CATALOGUE.iter().map(|c| c.3).fold(0.0, f64::max)
}

/// The most PCIe throughput a profile can show, MB/s: both directions of the fastest link in the
/// catalogue (profiles sum send and receive).
pub fn max_pcie_mbps() -> f64 {
    2.0 * 1000.0 * CATALOGUE.iter().map(|c| c.5).fold(0.0, f64::max)
}

/// Short aliases accepted on the command line.
const ALIASES: &[(&str, &str)] =
    &[("titan-xp", "titanxp"), ("3090", "rtx3090"), ("v100", "v100-16"), ("a100", "a100-40"), ("h100-80", "h100")];

/// Every catalogue entry.
pub fn catalogue() -> Vec<GpuSpec> {
    CATALOGUE.iter().map(spec_of).collect()
}

fn spec_of(&(key, name, arch, mem, cores, pcie): &(&str, &str, &str, f64, u32, f64)) -> GpuSpec {
    GpuSpec { key: key.into(), name: name.into(), architecture: arch.into(), memory_mib: mem, cores, pcie_gbps: pcie }
}

/// Looks a model up by key or alias (case-insensitive); an unknown name lists the valid ones.
pub fn lookup(name: &str) -> Result<GpuSpec> {
    let lower = name.trim().to_ascii_lowercase();
    let key = ALIASES.iter().find(|(a, _)| *a == lower).map(|(_, k)| *k).unwrap_or(&lower);
    // Builds only the spec asked for: lookups sit on hot paths (the k8s extender's node views).
    CATALOGUE.iter().find(|c| c.0 == key).map(spec_of).ok_or_else(|| ModelError::UnknownName {
        what: "GPU model",
        name: name.to_string(),
        valid: CATALOGUE.iter().map(|c| c.0.to_string()).collect(),
    })
}

/// The words of a card name that tell models apart: lower case, split at anything not a
/// letter or digit, without the vendor and product-line words (`NVIDIA`, `Tesla`, `GeForce`).
fn model_words(name: &str) -> Vec<String> {
    name.split(|c: char| !c.is_ascii_alphanumeric())
        .map(str::to_ascii_lowercase)
        .filter(|w| !w.is_empty() && !["nvidia", "tesla", "geforce"].contains(&w.as_str()))
        .collect()
}

/// A memory-size word such as `40gb`.
fn is_size_word(w: &str) -> bool {
    w.strip_suffix("gb").is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The catalogue entry a card name as a driver or a log writes it (`NVIDIA A100-SXM4-40GB`,
/// `NVIDIA H100 80GB HBM3`, `Tesla T4`) is a board of: every word of the entry's name is in
/// the card's (form-factor words such as `SXM4` or `HBM3` may be extra); where the card's name
/// gives no size, `memory_mib` (the card's total, when known) picks the entry within 10%.
/// `None` when no entry, or more than one, fits.
pub fn find_by_name(name: &str, memory_mib: Option<f64>) -> Option<GpuSpec> {
    let words = model_words(name);
    let near = |m: f64| memory_mib.is_none_or(|t| t <= 0.0 || (t - m).abs() <= 0.1 * m);
    let fits: Vec<&(&str, &str, &str, f64, u32, f64)> = CATALOGUE
        .iter()
        .filter(|c| {
            // A note in parentheses (`(one GPU)`) is no part of the card's name.
            let entry = model_words(c.1.split('(').next().unwrap_or(c.1));
            let sized_apart = words.iter().any(|w| is_size_word(w) && !entry.contains(w));
            entry.iter().all(|w| words.contains(w) || (is_size_word(w) && !words.iter().any(|x| is_size_word(x))))
                && !sized_apart
                && near(c.3)
        })
        .collect();
    match fits.as_slice() {
        [one] => Some(spec_of(one)),
        _ => None,
    }
}

/// Environment variable that names the one NVML library to load (profiler and service).
pub const NVML_LIB_ENV: &str = "DQNGPU_NVML_LIB";

/// Where NVML (`libnvidia-ml`) is looked for by default, in order: the sonames (the dynamic
/// loader's search: `LD_LIBRARY_PATH`, `ld.so.cache`), then the usual driver folders of
/// Debian/Ubuntu, RHEL, WSL and the Kubernetes device plugin.
pub const NVML_DEFAULT_CANDIDATES: [&str; 6] = [
    "libnvidia-ml.so.1",
    "libnvidia-ml.so",
    "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
    "/usr/lib64/libnvidia-ml.so.1",
    "/usr/lib/wsl/lib/libnvidia-ml.so.1",
    "/usr/local/nvidia/lib64/libnvidia-ml.so.1",
];

/// The NVML candidates for this process: `$DQNGPU_NVML_LIB` alone when set, else the
/// defaults. One list, so `profile run` and `serve` find the driver on the same machines.
pub fn nvml_candidates() -> Vec<String> {
    match std::env::var(NVML_LIB_ENV) {
        Ok(p) if !p.trim().is_empty() => vec![p],
        _ => NVML_DEFAULT_CANDIDATES.iter().map(|s| s.to_string()).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn card_names_as_drivers_write_them_find_their_catalogue_entry() {
        let key = |name: &str, mem: Option<f64>| find_by_name(name, mem).map(|g| g.key);
        assert_eq!(key("NVIDIA A100-SXM4-40GB", Some(40960.0)).as_deref(), Some("a100-40"));
        assert_eq!(key("NVIDIA A100-SXM4-80GB", None).as_deref(), Some("a100-80"));
        assert_eq!(key("NVIDIA H100 80GB HBM3", Some(81559.0)).as_deref(), Some("h100"));
        assert_eq!(key("NVIDIA H100 PCIe", Some(81559.0)).as_deref(), Some("h100"));
        assert_eq!(key("Tesla V100-SXM2-32GB", None).as_deref(), Some("v100-32"));
        assert_eq!(key("Tesla T4", None).as_deref(), Some("t4"));
        assert_eq!(key("Tesla M60", Some(8192.0)).as_deref(), Some("m60"));
        assert_eq!(key("NVIDIA TITAN Xp", Some(12288.0)).as_deref(), Some("titanxp"));
        assert_eq!(key("NVIDIA H200", None).as_deref(), Some("h200"));
        // No size in the name and no total: the A100s cannot be told apart.
        assert_eq!(key("NVIDIA A100-PCIE", None), None);
        // A board of another size than its entry (H100 NVL, 94 GB) is no entry.
        assert_eq!(key("NVIDIA H100 NVL", Some(95830.0)), None);
        assert_eq!(key("NVIDIA B200", Some(183359.0)), None);
        assert_eq!(key("NVIDIA A10", None), None);
    }

    #[test]
    fn lookup_keys_and_aliases() {
        assert_eq!(lookup("TitanXp").unwrap().memory_mib, 12288.0);
        assert_eq!(lookup("a100").unwrap().key, "a100-40");
        let e = lookup("gtx480").unwrap_err();
        assert!(e.is_usage());
        assert!(e.to_string().contains("titanxp") && e.to_string().contains("h100"));
    }
}
