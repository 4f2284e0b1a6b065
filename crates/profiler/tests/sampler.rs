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
use dqngpu_profiler::sampler::{
    interval_count, run_command, run_command_until, DeviceInfo, GpuReading, GpuSampler, ProcessMemory,
};
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

/// Whether `pid` has ended (gone, or a zombie no one reaped yet), asked until it has or for
/// at most 10 s: signals are delivered asynchronously.
fn ended(pid: u32) -> bool {
    for _ in 0..1000 {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| s.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next().map(str::to_string)));
        if state.as_deref().is_none_or(|s| s == "Z" || s == "X") {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// The pid a command wrote to `file`, once it has (asked for at most 10 s).
fn pid_in(file: &std::path::Path) -> u32 {
    for _ in 0..2000 {
        if let Some(pid) = std::fs::read_to_string(file).ok().and_then(|s| s.trim().parse().ok()) {
            return pid;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("the command never wrote its background process's pid to {}", file.display())
}

/// A command whose shell starts a long `sleep` in the background, writes its pid to `file`,
/// then runs `then`.
fn with_grandchild(file: &std::path::Path, then: &str) -> Vec<OsString> {
    argv(&["sh", "-c", &format!("sleep 30 & echo $! > {}.tmp && mv {0}.tmp {0}; {then}", file.display())])
}

/// A double whose driver fails once the command's grandchild is known and three readings are in.
struct FailingSampler {
    device: DeviceInfo,
    pid_file: std::path::PathBuf,
    reads: usize,
}

impl GpuSampler for FailingSampler {
    fn device(&self) -> &DeviceInfo {
        &self.device
    }
    fn read(&mut self) -> Result<GpuReading, ProfilerError> {
        self.reads += 1;
        if self.reads > 3 && self.pid_file.exists() {
            return Err(ProfilerError::Nvml { call: "nvmlDeviceGetUtilizationRates", message: "GPU is lost".into() });
        }
        Ok(whole_gpu(40.0, 2000.0))
    }
}

#[test]
fn a_failed_reading_ends_the_commands_whole_group_and_keeps_the_readings_so_far() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("grandchild");
    let mut s = FailingSampler { device: device(), pid_file: pid_file.clone(), reads: 0 };
    let out = run_command(&mut s, &with_grandchild(&pid_file, "wait"), Duration::from_millis(20)).unwrap();
    let why = out.cut_short.clone().unwrap_or_default();
    assert!(why.contains("GPU is lost"), "{why}");
    assert!(out.readings >= 3 && !out.samples.is_empty(), "{} readings", out.readings);
    assert!(!out.status.success());
    assert!(ended(pid_in(&pid_file)), "the command's background process outlived the run");
}

#[test]
fn a_stop_ends_the_commands_whole_group_and_keeps_the_readings_so_far() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("grandchild");
    let stop = std::sync::atomic::AtomicBool::new(false);
    let mut s = ReplaySampler::new(device(), vec![whole_gpu(10.0, 100.0)]);
    let out = std::thread::scope(|scope| {
        scope.spawn(|| {
            pid_in(&pid_file);
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        run_command_until(&mut s, &with_grandchild(&pid_file, "wait"), Duration::from_millis(20), &stop)
    });
    match out {
        Ok(out) => {
            assert!(out.cut_short.as_deref().is_some_and(|w| w.contains("stopped")), "{:?}", out.cut_short);
            assert!(!out.status.success());
        }
        // Stopped before the first tick: nothing to keep, and said so.
        Err(e) => assert!(matches!(e, ProfilerError::Stopped { .. }), "{e}"),
    }
    assert!(ended(pid_in(&pid_file)), "the command's background process outlived the stop");
}

#[test]
fn processes_the_command_leaves_behind_are_ended_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("grandchild");
    let mut s = ReplaySampler::new(device(), vec![whole_gpu(10.0, 100.0)]);
    let cmd = with_grandchild(&pid_file, "sleep 0.2");
    let out = run_command(&mut s, &cmd, Duration::from_millis(20)).unwrap();
    assert!(out.status.success() && out.cut_short.is_none(), "{:?} {:?}", out.status, out.cut_short);
    assert!(out.notes.iter().any(|n| n.contains("left processes")), "{:?}", out.notes);
    assert!(ended(pid_in(&pid_file)), "the leftover background process is still running");
}

/// A double that lists, with 1000 MiB each, every pid named in `pid_file` (one a line).
struct ListsPids {
    device: DeviceInfo,
    pid_file: std::path::PathBuf,
}

impl GpuSampler for ListsPids {
    fn device(&self) -> &DeviceInfo {
        &self.device
    }
    fn read(&mut self) -> Result<GpuReading, ProfilerError> {
        let pids: Vec<u32> = std::fs::read_to_string(&self.pid_file)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        Ok(GpuReading {
            gpu_util_pct: 50.0,
            mem_used_mib: 1000.0 * pids.len() as f64,
            processes: Some(pids.into_iter().map(|pid| ProcessMemory { pid, used_mib: Some(1000.0) }).collect()),
            ..Default::default()
        })
    }
}

/// The command's shell writes its own pid, then starts a worker from a subshell that exits at
/// once (a double fork: init adopts the worker, which stays in the command's process group).
/// Both hold 1000 MiB: the profile says 2000.
#[test]
fn a_reparented_worker_of_the_commands_own_group_counts_toward_its_memory() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let script =
        format!("echo $$ > {p}.tmp; ( sleep 3 & echo $! >> {p}.tmp ); mv {p}.tmp {p}; sleep 1", p = pids.display());
    let mut s = ListsPids { device: device(), pid_file: pids.clone() };
    let out = run_command(&mut s, &argv(&["sh", "-c", &script]), Duration::from_millis(50)).unwrap();
    assert_eq!(out.attribution.gpu_mem, Scope::ProcessTree);
    let peak = out.samples.iter().map(|x| x.gpu_mem_mib).fold(0.0, f64::max);
    assert_eq!(peak, 2000.0, "the worker of the command's own process group was not counted: {:?}", out.notes);
}
