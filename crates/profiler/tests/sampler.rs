//! The `profile run` loop with a real child process and recorded GPU readings.
//!
//! No GPU is available where this crate is developed, so the GPU side is a test double
//! ([`ReplaySampler`], or the tree-aware sampler below); the child process, its process tree,
//! the timing and the exit status are real.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::time::Duration;

use dqngpu_model::format::{read_profile, write_profile};
use dqngpu_model::library::read_dir_library;
use dqngpu_model::AppInfo;
use dqngpu_profiler::sampler::proc_tree::descendants;
use dqngpu_profiler::sampler::replay::ReplaySampler;
use dqngpu_profiler::sampler::{interval_count, run_command, DeviceInfo, GpuReading, GpuSampler, ProcessMemory};
use dqngpu_profiler::{ProfilerError, Scope};

fn device() -> DeviceInfo {
    DeviceInfo {
        index: 0,
        name: "NVIDIA TITAN Xp".into(),
        architecture: "Pascal".into(),
        memory_mib: 12288.0,
        cores: 3840,
        pcie_gbps: 15.76,
    }
}

fn argv(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

fn whole_gpu(util: f64, mem: f64) -> GpuReading {
    GpuReading {
        gpu_util_pct: util,
        mem_used_mib: mem,
        pcie_tx_kb_s: Some(2000.0),
        pcie_rx_kb_s: Some(6000.0),
        ..Default::default()
    }
}

#[test]
fn samples_a_real_child_until_it_exits_and_records_its_status() {
    let readings: Vec<GpuReading> = (0..100).map(|i| whole_gpu(f64::from(i % 100), 1000.0 + f64::from(i))).collect();
    let mut s = ReplaySampler::new(device(), readings);
    let out = run_command(&mut s, &argv(&["sh", "-c", "sleep 0.4; exit 3"]), Duration::from_millis(50)).unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(out.wall_s >= 0.4, "{}", out.wall_s);
    assert_eq!(out.samples.len(), interval_count(out.wall_s, 0.05));
    assert_eq!(out.readings, s.reads);
    assert!(out.readings >= 2, "{}", out.readings);
    // The driver of this double lists no processes: whole-GPU values, said so.
    assert_eq!(out.attribution.gpu_mem, Scope::WholeGpu);
    assert!(out.notes.iter().any(|n| n.contains("does not list")), "{:?}", out.notes);
    // PCIe: (2000 + 6000) KB/s = 8 MB/s.
    assert!(out.samples.iter().all(|x| x.pcie_mbps == 8.0));
    // Readings come in order: memory never decreases along the samples.
    assert!(out.samples.windows(2).all(|w| w[0].gpu_mem_mib <= w[1].gpu_mem_mib));

    // The profile it makes loads unchanged from a library directory.
    let dir = tempfile::tempdir().unwrap();
    let app = AppInfo { name: "sleepy".into(), ..Default::default() };
    let p = out.profile(app, &device(), "node-a").unwrap();
    write_profile(&p, &dir.path().join("sleepy.csv")).unwrap();
    write_profile(&p, &dir.path().join("sleepy-json.json")).unwrap();
    let lib = read_dir_library(dir.path()).unwrap();
    for key in ["sleepy", "sleepy-json"] {
        let back = lib.get(key).unwrap();
        assert_eq!(back.samples, p.samples);
        assert_eq!(back.app, p.app);
        assert_eq!(back.recorded_on, p.recorded_on);
    }
    assert_eq!(lib.reference_gpu.as_ref().map(|g| g.key.as_str()), Some("titanxp"));
    assert_eq!(read_profile(&dir.path().join("sleepy.csv")).unwrap().interval_s, 0.05);
}

/// A double whose "driver" lists every process under this test (the child's tree among them)
/// with 100 MiB each, plus a foreign process (pid 1) holding 5000 MiB.
struct TreeSampler {
    device: DeviceInfo,
    me: u32,
}

impl GpuSampler for TreeSampler {
    fn device(&self) -> &DeviceInfo {
        &self.device
    }
    fn read(&mut self) -> Result<GpuReading, ProfilerError> {
        let mut processes: Vec<ProcessMemory> =
            descendants(self.me).into_iter().map(|pid| ProcessMemory { pid, used_mib: Some(100.0) }).collect();
        processes.push(ProcessMemory { pid: 1, used_mib: Some(5000.0) });
        Ok(GpuReading {
            gpu_util_pct: 50.0,
            mem_used_mib: 9999.0,
            processes: Some(processes),
            process_sm: None,
            ..Default::default()
        })
    }
}

#[test]
fn attributes_memory_to_the_childs_process_tree() {
    let mut s = TreeSampler { device: device(), me: std::process::id() };
    // sh runs two background sleeps: the tree is sh plus its children.
    let out =
        run_command(&mut s, &argv(&["sh", "-c", "sleep 0.5 & sleep 0.5 & wait"]), Duration::from_millis(50)).unwrap();
    assert!(out.status.success());
    assert_eq!(out.attribution.gpu_mem, Scope::ProcessTree);
    assert_eq!(out.attribution.sm, Scope::WholeGpu, "no per-process SM from this double");
    let mems: BTreeSet<u64> = out.samples.iter().map(|x| x.gpu_mem_mib as u64).collect();
    // Never the foreign 5000 MiB nor the whole GPU's 9999; the sh and its sleeps at 100 each.
    assert!(mems.iter().all(|m| m % 100 == 0 && *m <= 300), "{mems:?}");
    assert!(mems.contains(&300), "sh + two sleeps were never seen together: {mems:?}");
}

#[test]
fn a_command_that_cannot_start_or_ends_before_the_first_sample_is_an_error() {
    let mut s = ReplaySampler::new(device(), vec![whole_gpu(1.0, 1.0)]);
    let e = run_command(&mut s, &argv(&["/nonexistent/dqngpu-test-binary"]), Duration::from_millis(50)).unwrap_err();
    assert!(e.to_string().contains("/nonexistent/dqngpu-test-binary"), "{e}");
    let e = run_command(&mut s, &argv(&["true"]), Duration::from_secs(5)).unwrap_err();
    assert!(matches!(e, ProfilerError::TooShort { .. }), "{e}");
    assert!(e.to_string().contains("--interval-ms"), "{e}");
}
