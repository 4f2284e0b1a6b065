//! The real NVML sampler against a real GPU. Ignored by default (CI has no GPU); run on a GPU
//! machine with `cargo test --release -p dqngpu-profiler --test gpu -- --ignored --test-threads 1`
//! (scripts/device-gpu-check.sh runs the prebuilt binary).
//!
//! `sampled_command_shows_its_memory` starts a CUDA program: `$DQNGPU_GPU_TEST_CMD` (split on
//! whitespace) when set, else a PyTorch one-liner through `python3` that holds 2 GiB and runs
//! matmuls for 3 s.

use std::ffi::OsString;
use std::time::Duration;

use dqngpu_profiler::sampler::nvml::NvmlSampler;
use dqngpu_profiler::sampler::{run_command, GpuSampler};

const TORCH_ONE_LINER: &str = "import torch,time; x=torch.empty(2<<30,dtype=torch.uint8,device='cuda'); x.fill_(1); \
a=torch.randn(4096,4096,device='cuda'); t=time.time()\nwhile time.time()-t<3: a=(a@a)*1e-3; torch.cuda.synchronize()";

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn device_info_is_plausible() {
    let s = NvmlSampler::open(0).unwrap_or_else(|e| panic!("opening GPU 0 through NVML: {e}"));
    let d = s.device().clone();
    eprintln!("{d:?}");
    assert_eq!(d.index, 0);
    assert!(!d.name.trim().is_empty(), "empty GPU name: {d:?}");
    // The smallest CUDA GPU in use has far more than 256 MiB; no card has 1 TiB.
    assert!(d.memory_mib > 256.0 && d.memory_mib < 1024.0 * 1024.0, "memory total {} MiB", d.memory_mib);
    assert!(d.pcie_gbps >= 0.0 && d.pcie_gbps.is_finite(), "PCIe {} GB/s", d.pcie_gbps);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn readings_are_plausible() {
    let mut s = NvmlSampler::open(0).unwrap_or_else(|e| panic!("opening GPU 0 through NVML: {e}"));
    let total = s.device().memory_mib;
    for i in 0..5 {
        let r = s.read().unwrap_or_else(|e| panic!("reading {i}: {e}"));
        eprintln!("reading {i}: {r:?}");
        assert!((0.0..=100.0).contains(&r.gpu_util_pct), "util {}", r.gpu_util_pct);
        assert!(r.mem_used_mib >= 0.0 && r.mem_used_mib <= total, "used {} of {total} MiB", r.mem_used_mib);
        for p in r.processes.iter().flatten() {
            if let Some(m) = p.used_mib {
                assert!(m >= 0.0 && m <= total, "process {} uses {m} MiB", p.pid);
            }
        }
        for p in r.process_sm.iter().flatten() {
            assert!((0.0..=100.0).contains(&p.sm_pct), "process {} SM {}", p.pid, p.sm_pct);
        }
        for kb in [r.pcie_tx_kb_s, r.pcie_rx_kb_s].into_iter().flatten() {
            assert!(kb >= 0.0 && kb.is_finite(), "PCIe {kb} KB/s");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn opening_a_missing_gpu_lists_the_valid_ones() {
    let e = NvmlSampler::open(999).expect_err("GPU 999 should not exist");
    let msg = e.to_string();
    assert!(msg.contains("999") && msg.contains('0'), "{msg}");
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn sampled_command_shows_its_memory() {
    let argv: Vec<OsString> = match std::env::var("DQNGPU_GPU_TEST_CMD") {
        Ok(c) if !c.trim().is_empty() => c.split_whitespace().map(OsString::from).collect(),
        _ => ["python3", "-c", TORCH_ONE_LINER].into_iter().map(OsString::from).collect(),
    };
    let mut s = NvmlSampler::open(0).unwrap_or_else(|e| panic!("opening GPU 0 through NVML: {e}"));
    let out =
        run_command(&mut s, &argv, Duration::from_millis(250)).unwrap_or_else(|e| panic!("running {argv:?}: {e}"));
    eprintln!(
        "status {} wall {:.1} s, {} readings, attribution {:?}, notes {:?}",
        out.status, out.wall_s, out.readings, out.attribution, out.notes
    );
    assert!(out.status.success(), "{argv:?} {}", out.status);
    assert!(out.readings >= 4, "only {} readings in {:.1} s", out.readings, out.wall_s);
    let peak_mem = out.samples.iter().map(|r| r.gpu_mem_mib).fold(0.0, f64::max);
    let peak_util = out.samples.iter().map(|r| r.gpu_util_pct).fold(0.0, f64::max);
    eprintln!("peak memory {peak_mem:.0} MiB, peak util {peak_util:.0}%");
    // The default command holds 2 GiB; a custom one is expected to hold at least 1 GiB.
    assert!(peak_mem >= 1024.0, "peak memory {peak_mem} MiB");
    assert!(peak_util > 0.0, "GPU utilisation never above 0");
    assert!(out.samples.iter().all(|r| (0.0..=100.0).contains(&r.sm_pct)), "SM out of 0..=100");
}
