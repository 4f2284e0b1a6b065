//! `profile run`: start a command as a child process, sample its GPU every interval until it
//! exits, and turn the readings into a profile.
//!
//! The NVML calls sit behind [`GpuSampler`] so that the logic here (attribution to the
//! command's process tree, PCIe TX+RX in MB/s, per-process SM where the driver gives it,
//! interval handling, wall time) is tested with recorded readings through
//! [`replay::ReplaySampler`], a test double written because no GPU was available where this
//! crate was developed. [`nvml::NvmlSampler`] is the real implementation.

pub mod group;
pub mod nvml;
pub mod proc_tree;
pub mod replay;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use dqngpu_model::{AppInfo, AppProfile, Location, ModelError, RecordedOn, Resources};

use crate::ProfilerError;

/// The GPU being sampled (cluster info of thesis Table 2).
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceInfo {
    /// NVML index.
    pub index: u32,
    /// Card name.
    pub name: String,
    /// Architecture (`Hopper`).
    pub architecture: String,
    /// Total memory, MiB.
    pub memory_mib: f64,
    /// CUDA cores (0 when the driver does not say).
    pub cores: u32,
    /// Host link bandwidth, GB/s, one direction (0 when unknown).
    pub pcie_gbps: f64,
}

/// GPU memory one process holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcessMemory {
    /// Process id, as the driver sees it.
    pub pid: u32,
    /// Used memory, MiB (`None` where the driver does not say, e.g. under WDDM).
    pub used_mib: Option<f64>,
}

/// One per-process SM utilisation sample of the driver.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcessSm {
    /// Process id.
    pub pid: u32,
    /// SM utilisation, percent of the GPU.
    pub sm_pct: f64,
}

/// What one look at the GPU returns. Whole-GPU values are always there; the per-process
/// lists are `None` when the driver cannot give them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GpuReading {
    /// Whole-GPU utilisation, percent (NVML `utilization.gpu`).
    pub gpu_util_pct: f64,
    /// Whole-GPU memory used, MiB.
    pub mem_used_mib: f64,
    /// Compute and graphics processes on the GPU with their memory.
    pub processes: Option<Vec<ProcessMemory>>,
    /// Per-process SM samples since the previous reading (only processes that ran).
    pub process_sm: Option<Vec<ProcessSm>>,
    /// PCIe transmit throughput, KB/s (NVML's unit).
    pub pcie_tx_kb_s: Option<f64>,
    /// PCIe receive throughput, KB/s.
    pub pcie_rx_kb_s: Option<f64>,
}

/// Reads a GPU. [`nvml::NvmlSampler`] reads a real one; [`replay::ReplaySampler`] is a test double.
pub trait GpuSampler {
    /// The GPU being read.
    fn device(&self) -> &DeviceInfo;
    /// Reads it now.
    fn read(&mut self) -> Result<GpuReading, ProfilerError>;
}

/// Whether a resource's numbers are the command's own or the whole GPU's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Summed over the command's process tree.
    ProcessTree,
    /// The whole GPU (the driver cannot attribute it, or the command's processes were not
    /// visible to it, e.g. in another PID namespace).
    WholeGpu,
}

/// Where each resource's numbers come from. GPU utilisation and PCIe are always whole-GPU:
/// NVML has no per-process figure for them; `profile run` expects the command alone on the GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Attribution {
    /// GPU utilisation.
    pub gpu_util: Scope,
    /// GPU memory.
    pub gpu_mem: Scope,
    /// SM activity.
    pub sm: Scope,
    /// PCIe throughput.
    pub pcie: Scope,
}

/// A reading taken at tick `tick` (time `tick * interval`), describing the interval before it,
/// with the process tree of the command known at that time.
#[derive(Debug, Clone, PartialEq)]
pub struct TickReading {
    /// Tick number, 1-based.
    pub tick: u64,
    /// The reading.
    pub reading: GpuReading,
    /// The pids of the command's process tree (every pid seen in it so far) that the reading
    /// names.
    pub tree: BTreeSet<u32>,
}

/// The pids of `tree` that `reading` names (its processes' memory, their SM samples): all a
/// reading is ever looked up with. Kept whole per reading, the tree (every pid the command
/// ever had) made memory grow with readings x processes started (session 29's review: 9.6 ->
/// 21.8 MB over 5 -> 20 s of a command that keeps starting processes, at 2 ms).
fn tree_in(reading: &GpuReading, tree: &BTreeSet<u32>) -> BTreeSet<u32> {
    let memory = reading.processes.iter().flatten().map(|p| p.pid);
    let sm = reading.process_sm.iter().flatten().map(|p| p.pid);
    memory.chain(sm).filter(|pid| tree.contains(pid)).collect()
}

/// The result of sampling a command.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// One sample per interval of the command's wall time.
    pub samples: Vec<Resources>,
    /// Sampling interval, s.
    pub interval_s: f64,
    /// Where each resource's numbers come from.
    pub attribution: Attribution,
    /// How the command ended.
    pub status: ExitStatus,
    /// Wall time from start to exit, s.
    pub wall_s: f64,
    /// Readings taken.
    pub readings: usize,
    /// Ticks missed because a reading took longer than the interval (filled by the next one).
    pub missed_ticks: u64,
    /// Remarks for the user.
    pub notes: Vec<String>,
    /// Why the run ended before the command did (a reading failed, the profiler was told to
    /// stop); the samples are the readings so far.
    pub cut_short: Option<String>,
}

impl RunOutcome {
    /// The profile: prior info, these samples and the GPU as cluster info.
    pub fn profile(&self, app: AppInfo, device: &DeviceInfo, node: &str) -> Result<AppProfile, ProfilerError> {
        let mut p = AppProfile::new(app, self.interval_s, self.samples.clone())?;
        p.recorded_on = Some(RecordedOn {
            node: node.to_string(),
            gpu_name: device.name.clone(),
            architecture: device.architecture.clone(),
            memory_mib: device.memory_mib,
            cores: device.cores,
            pcie_gbps: device.pcie_gbps,
        });
        Ok(p)
    }
}

/// Refuses, before anything runs, a GPU with more memory than a profile may hold (the
/// largest GPU in the catalogue): a recording of a job that uses it could not be kept.
pub fn check_device(d: &DeviceInfo) -> Result<(), ProfilerError> {
    let max = dqngpu_model::gpu::max_memory_mib();
    if d.memory_mib > max {
        return Err(ModelError::invalid(
            Location { field: Some("--gpu".into()), ..Default::default() },
            format!(
                "GPU {} ({}) has {} MiB of memory, more than a profile may hold ({max} MiB, the largest GPU in the catalogue); nothing was run",
                d.index, d.name, d.memory_mib
            ),
        )
        .into());
    }
    Ok(())
}

/// Number of intervals covering `wall_s` (at least one).
pub fn interval_count(wall_s: f64, interval_s: f64) -> usize {
    let n = (wall_s / interval_s - 1e-9).ceil();
    if n.is_finite() && n >= 1.0 {
        n as usize
    } else {
        1
    }
}

/// Turns readings into `n` samples and says where each resource's numbers come from.
///
/// Interval `i` (`[i*dt, (i+1)*dt)`) takes the first reading at tick `> i` (a late reading
/// covers the ticks it missed); intervals after the last reading hold it. Memory is the sum
/// over the command's process tree when the driver lists processes in every reading and the
/// tree was seen among them at least once; otherwise the whole GPU's. A reading in which the
/// driver gives no memory for a process of the tree holds the whole GPU's memory, noted, and
/// the memory's attribution is then the whole GPU's. SM is the sum of the
/// tree's per-process SM (mean per pid within the reading, capped at 100) under the same
/// condition plus per-process SM support in every reading; otherwise the whole GPU's
/// utilisation. PCIe is TX+RX converted from KB/s to MB/s (10^3 KB = 1 MB).
pub fn assemble(readings: &[TickReading], n: usize) -> (Vec<Resources>, Attribution, Vec<String>) {
    let mut notes = Vec::new();
    let listed_always = readings.iter().all(|r| r.reading.processes.is_some());
    let tree_seen = readings
        .iter()
        .any(|r| r.reading.processes.as_ref().is_some_and(|ps| ps.iter().any(|p| r.tree.contains(&p.pid))));
    let per_process_mem = listed_always && tree_seen;
    let per_process_sm = per_process_mem && readings.iter().all(|r| r.reading.process_sm.is_some());
    // A process of the tree whose memory the driver does not give (NVML_VALUE_NOT_AVAILABLE,
    // e.g. under WDDM): the tree's sum is unknown, not that process's 0.
    let tree_mem_unknown = |r: &TickReading| {
        r.reading
            .processes
            .as_ref()
            .is_some_and(|ps| ps.iter().any(|p| r.tree.contains(&p.pid) && p.used_mib.is_none()))
    };
    let unknown = if per_process_mem { readings.iter().filter(|r| tree_mem_unknown(r)).count() } else { 0 };
    if unknown > 0 {
        notes.push(format!(
            "the driver gave no per-process memory for a process of the command's tree in {unknown} of {} readings; {} the whole GPU's memory",
            readings.len(),
            if unknown == readings.len() { "memory is" } else { "those readings hold" }
        ));
    }
    if !listed_always {
        notes.push("the driver does not list GPU processes; memory is the whole GPU's".into());
    } else if !tree_seen {
        notes.push(
            "the command's processes never appeared in the driver's process list (another PID namespace, or no CUDA context); memory and SM are the whole GPU's".into(),
        );
    }
    if per_process_mem && !per_process_sm {
        notes.push("the driver gives no per-process SM utilisation; SM is the whole GPU's utilisation".into());
    }
    let pcie_missing = readings.iter().all(|r| r.reading.pcie_tx_kb_s.is_none() && r.reading.pcie_rx_kb_s.is_none());
    if pcie_missing {
        notes.push("the driver gives no PCIe throughput for this GPU; recorded as 0".into());
    }
    let per_reading: Vec<Resources> = readings
        .iter()
        .map(|r| {
            let g = &r.reading;
            let mem = if per_process_mem && !tree_mem_unknown(r) {
                g.processes
                    .as_ref()
                    .map(|ps| ps.iter().filter(|p| r.tree.contains(&p.pid)).filter_map(|p| p.used_mib).sum())
                    .unwrap_or(0.0)
            } else {
                g.mem_used_mib
            };
            let sm =
                if per_process_sm { tree_sm(g.process_sm.as_deref().unwrap_or(&[]), &r.tree) } else { g.gpu_util_pct };
            let pcie = (g.pcie_tx_kb_s.unwrap_or(0.0) + g.pcie_rx_kb_s.unwrap_or(0.0)) / 1000.0;
            Resources::new(g.gpu_util_pct.clamp(0.0, 100.0), mem.max(0.0), sm.clamp(0.0, 100.0), pcie.max(0.0))
        })
        .collect();
    let mut samples = Vec::with_capacity(n);
    let mut j = 0;
    for i in 0..n as u64 {
        while j + 1 < readings.len() && readings[j].tick <= i {
            j += 1;
        }
        samples.push(per_reading.get(j).copied().unwrap_or(Resources::ZERO));
    }
    let scope = |b: bool| if b { Scope::ProcessTree } else { Scope::WholeGpu };
    let attribution = Attribution {
        gpu_util: Scope::WholeGpu,
        gpu_mem: scope(per_process_mem && unknown == 0),
        sm: scope(per_process_sm),
        pcie: Scope::WholeGpu,
    };
    (samples, attribution, notes)
}

/// Sum over the tree of each pid's mean SM within the reading, capped at 100.
fn tree_sm(samples: &[ProcessSm], tree: &BTreeSet<u32>) -> f64 {
    let mut per_pid: BTreeMap<u32, (f64, u32)> = BTreeMap::new();
    for s in samples.iter().filter(|s| tree.contains(&s.pid)) {
        let e = per_pid.entry(s.pid).or_insert((0.0, 0));
        e.0 += s.sm_pct;
        e.1 += 1;
    }
    // fold from +0: an empty f64 sum is -0, which the profile CSV would print as "-0".
    per_pid.values().map(|(sum, k)| sum / f64::from(*k)).fold(0.0, |a, b| a + b).min(100.0)
}

/// The longest sampling interval [`run_command`] accepts.
pub const MAX_INTERVAL: Duration = Duration::from_secs(86_400);

/// Runs `argv` (program and arguments, no shell) as a child process and reads `sampler` every
/// `interval` until it exits (see [`run_command_until`]).
pub fn run_command<S: GpuSampler + ?Sized>(
    sampler: &mut S,
    argv: &[OsString],
    interval: Duration,
) -> Result<RunOutcome, ProfilerError> {
    run_command_until(sampler, argv, interval, &AtomicBool::new(false))
}

/// Runs `argv` (program and arguments, no shell) as the leader of a process group of its own
/// and reads `sampler` every `interval` until it exits or `stop` is set (a signal to the
/// profiler). However the run ends, the group is ended ([`group::end`]): what the command left
/// behind, or all of it when a reading failed or `stop` was set. A failed reading or a stop
/// after some readings returns them with [`RunOutcome::cut_short`] saying why; before any, an
/// error.
pub fn run_command_until<S: GpuSampler + ?Sized>(
    sampler: &mut S,
    argv: &[OsString],
    interval: Duration,
    stop: &AtomicBool,
) -> Result<RunOutcome, ProfilerError> {
    let program = argv.first().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
    if argv.is_empty() || interval.is_zero() || interval > MAX_INTERVAL {
        return Err(ProfilerError::Spawn {
            program,
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "need a command and an interval between 1 ns and one day",
            ),
        });
    }
    let spawn_err = |source| ProfilerError::Spawn { program: program.clone(), source };
    let start = Instant::now();
    let mut child = Command::new(&argv[0]).args(&argv[1..]).process_group(0).spawn().map_err(spawn_err)?;
    let root = child.id();
    let mut tree = BTreeSet::from([root]);
    let mut readings = Vec::new();
    let mut missed_ticks = 0;
    let mut tick: u64 = 1;
    let mut cut: Option<ProfilerError> = None;
    loop {
        // Ticks of at most a day each never overflow an Instant within any real run.
        let deadline = start + interval.saturating_mul(u32::try_from(tick).unwrap_or(u32::MAX));
        let exited = loop {
            match child.try_wait() {
                Ok(Some(_)) => break true,
                Ok(None) => {}
                Err(e) => {
                    cut = Some(spawn_err(e));
                    break true;
                }
            }
            if stop.load(Ordering::Relaxed) {
                cut = Some(ProfilerError::Stopped { program: program.clone() });
                break true;
            }
            let now = Instant::now();
            if now >= deadline {
                break false;
            }
            std::thread::sleep((deadline - now).min(Duration::from_millis(10)));
        };
        if exited {
            break;
        }
        // The command leads a group of its own, whose id is its pid.
        tree.extend(proc_tree::command_tree(root, root));
        match sampler.read() {
            Ok(reading) => {
                let tree = tree_in(&reading, &tree);
                readings.push(TickReading { tick, reading, tree });
            }
            Err(e) => {
                cut = Some(e);
                break;
            }
        }
        let due = (start.elapsed().as_secs_f64() / interval.as_secs_f64()).floor() as u64 + 1;
        if due > tick + 1 {
            missed_ticks += due - tick - 1;
        }
        tick = due.max(tick + 1);
    }
    let wall_s = start.elapsed().as_secs_f64();
    let (status, leftovers) = group::end(&mut child, group::GRACE).map_err(spawn_err)?;
    let interval_s = interval.as_secs_f64();
    if readings.is_empty() {
        return Err(cut.unwrap_or(ProfilerError::TooShort { program, wall_s, interval_s }));
    }
    let (samples, attribution, mut notes) = assemble(&readings, interval_count(wall_s, interval_s));
    if missed_ticks > 0 {
        notes.push(format!("{missed_ticks} tick(s) missed because a reading took longer than the interval"));
    }
    if leftovers && cut.is_none() {
        notes.push("the command left processes of its group running; they were ended".into());
    }
    Ok(RunOutcome {
        samples,
        interval_s,
        attribution,
        status,
        wall_s,
        readings: readings.len(),
        missed_ticks,
        notes,
        cut_short: cut.map(|e| e.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(util: f64, mem: f64, procs: Option<Vec<(u32, f64)>>, sm: Option<Vec<(u32, f64)>>) -> GpuReading {
        GpuReading {
            gpu_util_pct: util,
            mem_used_mib: mem,
            processes: procs.map(|v| v.into_iter().map(|(pid, m)| ProcessMemory { pid, used_mib: Some(m) }).collect()),
            process_sm: sm.map(|v| v.into_iter().map(|(pid, sm_pct)| ProcessSm { pid, sm_pct }).collect()),
            pcie_tx_kb_s: Some(1500.0),
            pcie_rx_kb_s: Some(500.0),
        }
    }

    fn tick(tick: u64, reading: GpuReading, tree: &[u32]) -> TickReading {
        TickReading { tick, reading, tree: tree.iter().copied().collect() }
    }

    #[test]
    fn no_sm_sample_of_the_tree_is_plus_zero() {
        // NVML gave samples only for another process: the tree's SM is 0, not -0.
        let other = [ProcessSm { pid: 99, sm_pct: 40.0 }];
        let tree: BTreeSet<u32> = [10].into_iter().collect();
        let sm = tree_sm(&other, &tree);
        assert!(sm == 0.0 && sm.is_sign_positive(), "{sm}");
    }

    #[test]
    fn attributes_memory_and_sm_to_the_process_tree() {
        // pid 7 is another user's job; 10 and 11 are ours (11 a child that appears later).
        let rs = [
            tick(
                1,
                reading(
                    50.0,
                    9000.0,
                    Some(vec![(7, 4000.0), (10, 1000.0)]),
                    Some(vec![(7, 30.0), (10, 20.0), (10, 40.0)]),
                ),
                &[10],
            ),
            tick(
                2,
                reading(
                    80.0,
                    9500.0,
                    Some(vec![(7, 4000.0), (10, 1000.0), (11, 500.0)]),
                    Some(vec![(11, 25.0), (10, 10.0)]),
                ),
                &[10, 11],
            ),
        ];
        let (s, a, notes) = assemble(&rs, 2);
        assert_eq!(a.gpu_mem, Scope::ProcessTree);
        assert_eq!(a.sm, Scope::ProcessTree);
        assert_eq!(a.gpu_util, Scope::WholeGpu);
        assert_eq!(s[0].gpu_mem_mib, 1000.0);
        assert_eq!(s[0].sm_pct, 30.0); // mean of pid 10's two samples
        assert_eq!(s[1].gpu_mem_mib, 1500.0);
        assert_eq!(s[1].sm_pct, 35.0);
        assert_eq!(s[1].gpu_util_pct, 80.0);
        assert_eq!(s[0].pcie_mbps, 2.0); // 1500 + 500 KB/s
        assert!(notes.is_empty(), "{notes:?}");
    }

    #[test]
    fn falls_back_to_whole_gpu_and_says_so() {
        // Processes listed but ours never among them (container PID namespace).
        let rs = [tick(1, reading(60.0, 3000.0, Some(vec![(99, 2900.0)]), Some(vec![(99, 55.0)])), &[10])];
        let (s, a, notes) = assemble(&rs, 1);
        assert_eq!((a.gpu_mem, a.sm), (Scope::WholeGpu, Scope::WholeGpu));
        assert_eq!(s[0].gpu_mem_mib, 3000.0);
        assert_eq!(s[0].sm_pct, 60.0);
        assert!(notes.iter().any(|n| n.contains("never appeared")), "{notes:?}");
        // Processes visible but no per-process SM support.
        let rs = [tick(1, reading(60.0, 3000.0, Some(vec![(10, 2900.0)]), None), &[10])];
        let (s, a, notes) = assemble(&rs, 1);
        assert_eq!((a.gpu_mem, a.sm), (Scope::ProcessTree, Scope::WholeGpu));
        assert_eq!(s[0].sm_pct, 60.0);
        assert!(notes.iter().any(|n| n.contains("per-process SM")), "{notes:?}");
    }

    #[test]
    fn memory_the_driver_cannot_give_for_the_tree_is_the_whole_gpus_not_zero() {
        let mut none = reading(80.0, 6000.0, Some(vec![(7, 4000.0), (10, 0.0)]), None);
        none.processes.as_mut().unwrap()[1].used_mib = None;
        // Tick 1: pid 10 (ours) has no memory figure; tick 2: it has 1000 MiB.
        let rs = [
            tick(1, none.clone(), &[10]),
            tick(2, reading(80.0, 6000.0, Some(vec![(7, 4000.0), (10, 1000.0)]), None), &[10]),
        ];
        let (s, a, notes) = assemble(&rs, 2);
        assert_eq!(s[0].gpu_mem_mib, 6000.0);
        assert_eq!(s[1].gpu_mem_mib, 1000.0);
        assert_eq!(a.gpu_mem, Scope::WholeGpu);
        assert!(
            notes.iter().any(|n| n.contains("no per-process memory") && n.contains("1 of 2 readings")),
            "{notes:?}"
        );
        // Another process's missing figure changes nothing.
        let mut other = reading(80.0, 6000.0, Some(vec![(7, 0.0), (10, 1000.0)]), None);
        other.processes.as_mut().unwrap()[0].used_mib = None;
        let (s, a, notes) = assemble(&[tick(1, other, &[10])], 1);
        assert_eq!((s[0].gpu_mem_mib, a.gpu_mem), (1000.0, Scope::ProcessTree));
        assert!(!notes.iter().any(|n| n.contains("no per-process memory")), "{notes:?}");
        // Never given: all whole-GPU.
        let (s, a, notes) = assemble(&[tick(1, none, &[10])], 1);
        assert_eq!((s[0].gpu_mem_mib, a.gpu_mem), (6000.0, Scope::WholeGpu));
        assert!(notes.iter().any(|n| n.contains("memory is the whole GPU's")), "{notes:?}");
    }

    #[test]
    fn late_readings_cover_missed_ticks_and_the_tail_holds() {
        let rs = [
            tick(1, reading(10.0, 1.0, None, None), &[1]),
            tick(4, reading(40.0, 1.0, None, None), &[1]),
            tick(5, reading(50.0, 1.0, None, None), &[1]),
        ];
        let (s, _, notes) = assemble(&rs, 7);
        let util: Vec<f64> = s.iter().map(|r| r.gpu_util_pct).collect();
        assert_eq!(util, [10.0, 40.0, 40.0, 40.0, 50.0, 50.0, 50.0]);
        assert!(notes.iter().any(|n| n.contains("does not list")));
    }

    #[test]
    fn a_gpu_with_more_memory_than_a_profile_may_hold_is_refused_up_front() {
        let d = |memory_mib| DeviceInfo {
            index: 0,
            name: "NVIDIA B200".into(),
            architecture: "Blackwell".into(),
            memory_mib,
            cores: 0,
            pcie_gbps: 0.0,
        };
        let e = check_device(&d(183_359.0)).unwrap_err().to_string();
        assert!(e.contains("NVIDIA B200") && e.contains("183359 MiB") && e.contains("nothing was run"), "{e}");
        assert!(check_device(&d(dqngpu_model::gpu::max_memory_mib())).is_ok());
    }

    #[test]
    fn interval_count_rounds_up() {
        assert_eq!(interval_count(1.0, 0.5), 2);
        assert_eq!(interval_count(1.01, 0.5), 3);
        assert_eq!(interval_count(0.0, 0.5), 1);
    }

    /// A reading keeps only the tree's pids it names, and assembles to the same samples as
    /// with the whole tree (which grew without bound over a long run).
    #[test]
    fn a_reading_keeps_only_the_tree_pids_it_names() {
        let r = reading(80.0, 9500.0, Some(vec![(7, 4000.0), (10, 1000.0)]), Some(vec![(11, 25.0), (10, 10.0)]));
        let tree: BTreeSet<u32> = (10..500).collect();
        assert_eq!(tree_in(&r, &tree), BTreeSet::from([10, 11]));
        let none = GpuReading { processes: None, process_sm: None, ..r.clone() };
        assert!(tree_in(&none, &tree).is_empty());
        let whole = [TickReading { tick: 1, reading: r.clone(), tree: tree.clone() }];
        let kept = [TickReading { tick: 1, reading: r.clone(), tree: tree_in(&r, &tree) }];
        let (a, b) = (assemble(&whole, 1), assemble(&kept, 1));
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
    }
}
