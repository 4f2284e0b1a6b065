//! The service's NVML discovery and live sampling against a real GPU, ignored by default (CI
//! has no GPU); run on a GPU machine with
//! `cargo test --release -p dqngpu-service --test gpu -- --ignored --test-threads 1`
//! (scripts/device-gpu-check.sh runs the prebuilt binary). One test, on where NVML is looked
//! for, needs no GPU and runs everywhere.

use std::time::Duration;

use dqngpu_service::discover_nvml;

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn discovers_the_gpus_and_samples_them() {
    let (slots, monitor) = discover_nvml().expect("NVML should load and list at least one GPU");
    for (i, s) in slots.iter().enumerate() {
        eprintln!("{s:?}");
        assert_eq!(s.index as usize, i, "slots in NVML order");
        assert!(!s.spec.name.trim().is_empty() && !s.spec.key.contains(' '), "{:?}", s.spec);
        assert!(s.spec.memory_mib > 256.0 && s.spec.memory_mib < 1024.0 * 1024.0, "{:?}", s.spec);
        assert!(s.spec.pcie_gbps > 0.0 && s.spec.pcie_gbps.is_finite(), "{:?}", s.spec);
        for k in 0..3 {
            let r = monitor.sample(s.index).unwrap_or_else(|| panic!("sampling GPU {} ({k})", s.index));
            eprintln!("GPU {} sample {k}: {r:?}", s.index);
            assert!((0.0..=100.0).contains(&r.gpu_util_pct), "util {}", r.gpu_util_pct);
            assert!((0.0..=100.0).contains(&r.sm_pct), "sm {}", r.sm_pct);
            assert!(r.gpu_mem_mib >= 0.0 && r.gpu_mem_mib <= s.spec.memory_mib, "used {} MiB", r.gpu_mem_mib);
            assert!(r.pcie_mbps >= 0.0 && r.pcie_mbps.is_finite(), "PCIe {} MB/s", r.pcie_mbps);
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    let past_the_end = u32::try_from(slots.len()).expect("few GPUs");
    assert!(monitor.sample(past_the_end).is_none(), "GPU {past_the_end} does not exist");
}

/// Runs without a GPU: `$DQNGPU_NVML_LIB` is the only place looked in when set, so a path that
/// does not exist means no GPUs, even on a machine with a driver. (The only test here that
/// sets the variable; the GPU test above is ignored, so they never run at once by default.)
#[test]
fn nvml_lib_variable_is_the_only_place_looked_in() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("libnvidia-ml.so.1");
    std::env::set_var("DQNGPU_NVML_LIB", &missing);
    assert_eq!(dqngpu_service::gpus::nvml_candidates(), vec![missing.display().to_string()]);
    assert!(discover_nvml().is_none(), "found GPUs through a library that does not exist");
    std::env::remove_var("DQNGPU_NVML_LIB");
    assert!(dqngpu_service::gpus::nvml_candidates().len() > 1, "the defaults are back");
}
