//! The thesis's 11 applications on a Titan Xp (Section V, Table 3), as time-varying profiles
//! generated in code, deterministically, in the shapes Section III.1 describes:
//! - ML (TensorFlow benchmarks): a data-loading phase, then steady GPU and memory use;
//! - LAMMPS: ~40% GPU on average, memory ramping ~363 -> ~8,499 MB, GPU 100% at peak memory;
//! - QMCPACK: GPU in three rising steps, memory ~0 until ~95 s, then ~5,135 MB.
//!
//! Classes are the thesis's lists, not derived. Every number is in docs/PROFILES.md with its
//! source ("thesis" or "assumed"); durations are chosen so SJF's makespans land near the
//! thesis's (see that doc for the arithmetic and why the three targets cannot all be met).

use std::collections::BTreeMap;
use std::f64::consts::PI;
use std::sync::Arc;

use super::AppLibrary;
use crate::job::WorkloadClass;
use crate::profile::{AppInfo, AppKind, AppProfile, RecordedOn};
use crate::resources::Resources;

/// The thesis's GPU (Table 4).
pub const GPU_KEY: &str = "titanxp";

/// Titan Xp memory, MiB (12 GB card).
const CARD_MIB: f64 = 12288.0;

/// Solo durations, seconds (assumed; chosen for the SJF makespans, see docs/PROFILES.md).
pub const DURATIONS_S: [(&str, usize); 11] = [
    ("LAMMPS", 147),
    ("GROMACS", 93),
    ("QMCPACK", 130),
    ("HOOMD", 100),
    ("googlenet", 8),
    ("alexnet", 22),
    ("vgg11", 100),
    ("vgg16", 148),
    ("resnet50", 100),
    ("resnet101", 101),
    ("resnet152", 137),
];

/// The thesis's workload classes (Section V.1), exactly as listed there.
pub const CLASSES: [(WorkloadClass, &[&str]); 5] = [
    (WorkloadClass::GpuHeavy, &["vgg11", "vgg16", "resnet50", "resnet101", "resnet152", "QMCPACK", "HOOMD", "LAMMPS"]),
    (WorkloadClass::GpuLight, &["alexnet", "GROMACS"]),
    (WorkloadClass::MemHeavy, &["vgg11", "vgg16", "resnet50", "resnet101", "resnet152"]),
    (WorkloadClass::MemLight, &["alexnet", "googlenet", "QMCPACK", "HOOMD", "GROMACS"]),
    (
        WorkloadClass::Random,
        &[
            "LAMMPS",
            "GROMACS",
            "QMCPACK",
            "HOOMD",
            "googlenet",
            "alexnet",
            "vgg11",
            "vgg16",
            "resnet50",
            "resnet101",
            "resnet152",
        ],
    ),
];

/// Steady-phase parameters of a TensorFlow-benchmark app (all assumed but memory ordering).
struct MlShape {
    /// GPU util in the steady phase, %.
    util: f64,
    /// GPU memory in the steady phase, MiB.
    mem_mib: f64,
    /// PCIe in the steady phase, MB/s (input batches).
    pcie_mbps: f64,
}

/// ML steady phases. Memory-heavy apps sit above half the card (>= 6,144 MiB on average);
/// alexnet's 5,700 MiB makes two alexnets and one GROMACS total the thesis's 11,755 MB.
fn ml_shape(name: &str) -> Option<MlShape> {
    let (util, mem_mib, pcie_mbps) = match name {
        "googlenet" => (62.0, 2900.0, 900.0),
        "alexnet" => (34.0, 5700.0, 1600.0),
        "vgg11" => (84.0, 6600.0, 700.0),
        "vgg16" => (90.0, 6800.0, 600.0),
        "resnet50" => (86.0, 6600.0, 800.0),
        "resnet101" => (89.0, 6700.0, 650.0),
        "resnet152" => (91.0, 6900.0, 550.0),
        _ => return None,
    };
    Some(MlShape { util, mem_mib, pcie_mbps })
}

/// A small deterministic ripple (zero mean over a period) so profiles are not flat lines.
fn ripple(t: usize, period: f64, amplitude: f64) -> f64 {
    amplitude * (2.0 * PI * t as f64 / period).sin()
}

fn clamp_pct(v: f64) -> f64 {
    v.clamp(0.0, 100.0)
}

/// Loading phase (12% of the run, at least 2 s): low GPU, memory filling, PCIe busy; then steady.
fn ml_samples(s: &MlShape, n: usize) -> Vec<Resources> {
    let load = ((0.12 * n as f64).round() as usize).max(2).min(n);
    (0..n)
        .map(|t| {
            if t < load {
                let f = (t + 1) as f64 / load as f64;
                let mem = 300.0 + (s.mem_mib - 300.0) * f;
                Resources::new(8.0, mem, 5.0, 3000.0)
            } else {
                let util = clamp_pct(s.util + ripple(t, 7.0, 4.0));
                Resources::new(util, s.mem_mib, clamp_pct(0.9 * util), s.pcie_mbps + ripple(t, 5.0, 100.0))
            }
        })
        .collect()
}

/// LAMMPS: memory 363 -> 8,499 MiB, growing with progress^2.5; GPU util follows
/// progress^1.35 so it reaches 100% when memory peaks and averages ~42%.
fn lammps_samples(n: usize) -> Vec<Resources> {
    (0..n)
        .map(|t| {
            let f = (t + 1) as f64 / n as f64;
            let mem = 363.0 + (8499.0 - 363.0) * f.powf(2.5);
            let util = clamp_pct(100.0 * f.powf(1.35));
            Resources::new(util, mem, clamp_pct(0.8 * util), 200.0 + 600.0 * f)
        })
        .collect()
}

/// QMCPACK: GPU in three steps (35%, 60%, 90% over thirds of the run); memory 0 until 95 s,
/// then 5,135 MiB.
fn qmcpack_samples(n: usize) -> Vec<Resources> {
    (0..n)
        .map(|t| {
            let third = 3 * t / n;
            let util = [35.0, 60.0, 90.0][third.min(2)];
            let mem = if t < 95 { 0.0 } else { 5135.0 };
            Resources::new(util, mem, 0.85 * util, if t < 95 { 150.0 } else { 900.0 })
        })
        .collect()
}

/// HOOMD: 6 s setup, then ~80% GPU with a short low-GPU output step every 20 s; ~600 MiB.
fn hoomd_samples(n: usize) -> Vec<Resources> {
    (0..n)
        .map(|t| {
            let (util, pcie) = if t < 6 {
                (15.0, 1200.0)
            } else if t % 20 == 19 {
                (30.0, 1500.0)
            } else {
                (84.0 + ripple(t, 9.0, 3.0), 300.0)
            };
            let mem = if t < 6 { 150.0 + 75.0 * t as f64 } else { 610.0 };
            Resources::new(clamp_pct(util), mem, clamp_pct(0.85 * util), pcie)
        })
        .collect()
}

/// GROMACS: GPU offload of the non-bonded forces, ~30% GPU in a 10 s cycle (CPU-bound
/// neighbour-search steps dip it); 355 MiB, little memory as the thesis says.
fn gromacs_samples(n: usize) -> Vec<Resources> {
    (0..n)
        .map(|t| {
            let util = if t < 3 {
                5.0
            } else if t % 10 == 0 {
                12.0
            } else {
                33.0 + ripple(t, 6.0, 3.0)
            };
            let mem = if t < 3 { 100.0 * (t + 1) as f64 } else { 355.0 };
            Resources::new(clamp_pct(util), mem, clamp_pct(0.75 * util), 450.0)
        })
        .collect()
}

fn samples_of(name: &str, n: usize) -> Vec<Resources> {
    match name {
        "LAMMPS" => lammps_samples(n),
        "QMCPACK" => qmcpack_samples(n),
        "HOOMD" => hoomd_samples(n),
        "GROMACS" => gromacs_samples(n),
        // Every other name in DURATIONS_S is an ML app; fall back to a flat 50% profile.
        other => match ml_shape(other) {
            Some(s) => ml_samples(&s, n),
            None => vec![Resources::new(50.0, 1000.0, 45.0, 500.0); n],
        },
    }
}

/// The recording machine (thesis Table 4).
fn titan_xp() -> RecordedOn {
    RecordedOn {
        node: "thesis-node".into(),
        gpu_name: "NVIDIA TITAN Xp".into(),
        architecture: "Pascal".into(),
        memory_mib: CARD_MIB,
        cores: 3840,
        pcie_gbps: 32.0,
    }
}

/// The `thesis` library.
pub fn library() -> AppLibrary {
    let mut apps = BTreeMap::new();
    for (name, n) in DURATIONS_S {
        let kind = if ["LAMMPS", "GROMACS", "QMCPACK", "HOOMD"].contains(&name) { AppKind::Hpc } else { AppKind::Ml };
        let source = if kind == AppKind::Hpc { "NGC container" } else { "TensorFlow benchmarks" };
        let info = AppInfo { name: name.into(), kind, input_size_mb: None, params: Some(source.into()) };
        let samples = samples_of(name, n);
        // Generated numbers are finite and in range; build directly rather than unwrap.
        let p = AppProfile {
            app: info,
            interval_s: 1.0,
            recorded_on: Some(titan_xp()),
            samples,
            source: None,
            derived: Default::default(),
        };
        debug_assert!(p.validate().is_ok(), "generated profile {name} is invalid");
        apps.insert(name.to_string(), Arc::new(p));
    }
    let classes = CLASSES.iter().map(|(c, members)| (*c, members.iter().map(|s| s.to_string()).collect())).collect();
    AppLibrary { name: "thesis".into(), apps, classes, reference_gpu: crate::gpu::lookup(GPU_KEY).ok() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Thesis SJF makespans (Section V.3) that durations can meet within 25%: GPU_heavy and
    /// GPU_light, as stated.
    const SJF_TARGETS: [(WorkloadClass, f64); 2] =
        [(WorkloadClass::GpuHeavy, 4807.0), (WorkloadClass::GpuLight, 2295.0)];

    /// Random's SJF makespan, derived: DqnGPU's 2,481 s is 1.081 x SJF including 123 s of
    /// training (0.054; 1.027 without it), so SJF = 2,481 / 1.081 = 2,295 s (docs/PROFILES.md).
    const RANDOM_SJF_TARGET: f64 = 2295.0;

    /// How far random misses it (mean of seeds 0..9): +31.5%, outside the 25% band. No choice
    /// of durations meets all three targets within 25% (docs/PROFILES.md), so this is the
    /// documented gap, not a band.
    const RANDOM_SJF_ERROR: f64 = 0.315;

    /// Uniform draw of `n` jobs from a class with ChaCha8Rng(seed), one `gen_range` per job.
    fn draw(lib: &AppLibrary, class: WorkloadClass, n: usize, seed: u64) -> Vec<String> {
        let members = lib.class_members(class).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..n).map(|_| members[rng.gen_range(0..members.len())].clone()).collect()
    }

    /// SJF runs one job at a time on one GPU, so its makespan is the sum of the solo times and
    /// its utilisations are the time-weighted means of the jobs' profiles.
    fn sjf(lib: &AppLibrary, class: WorkloadClass, seed: u64) -> (f64, f64, f64) {
        let (mut t, mut util, mut mem) = (0.0, 0.0, 0.0);
        for app in draw(lib, class, 30, seed) {
            let p = lib.get(&app).unwrap();
            let s = p.summary();
            t += s.solo_s;
            util += s.mean.gpu_util_pct * s.solo_s;
            mem += s.mean.gpu_mem_mib * s.solo_s;
        }
        (t, util / t, 100.0 * mem / t / CARD_MIB)
    }

    #[test]
    fn every_profile_is_valid_and_fits_the_card() {
        let lib = library();
        assert_eq!(lib.apps.len(), 11);
        for p in lib.apps.values() {
            p.validate().unwrap();
            p.check_fits_memory(CARD_MIB).unwrap();
        }
    }

    #[test]
    fn class_thresholds_hold() {
        let lib = library();
        let mean = |a: &str| lib.get(a).unwrap().summary().mean;
        for a in &lib.classes[&WorkloadClass::GpuHeavy] {
            assert!(mean(a).gpu_util_pct >= 40.0, "{a}: {}", mean(a).gpu_util_pct);
        }
        for a in &lib.classes[&WorkloadClass::GpuLight] {
            assert!(mean(a).gpu_util_pct < 40.0, "{a}: {}", mean(a).gpu_util_pct);
        }
        for a in &lib.classes[&WorkloadClass::MemHeavy] {
            assert!(mean(a).gpu_mem_mib >= 0.5 * CARD_MIB, "{a}: {}", mean(a).gpu_mem_mib);
        }
        for a in &lib.classes[&WorkloadClass::MemLight] {
            assert!(mean(a).gpu_mem_mib < 0.5 * CARD_MIB, "{a}: {}", mean(a).gpu_mem_mib);
        }
        assert_eq!(lib.classes[&WorkloadClass::Random].len(), 11);
    }

    #[test]
    fn shapes_follow_the_thesis() {
        let lib = library();
        let lammps = lib.get("LAMMPS").unwrap();
        let s = lammps.summary();
        assert!((s.mean.gpu_util_pct - 40.0).abs() < 5.0, "LAMMPS mean GPU {}", s.mean.gpu_util_pct);
        assert!((lammps.samples[0].gpu_mem_mib - 363.0).abs() < 150.0);
        assert_eq!(s.peak.gpu_mem_mib, 8499.0);
        let (_, at) = lammps.peak_mem();
        assert_eq!(lammps.samples[at].gpu_util_pct, 100.0, "GPU reaches 100% at peak memory");
        let q = lib.get("QMCPACK").unwrap();
        assert!(q.samples[..95].iter().all(|r| r.gpu_mem_mib < 1.0));
        assert_eq!(q.samples[95].gpu_mem_mib, 5135.0);
        let mut steps: Vec<f64> = q.samples.iter().map(|r| r.gpu_util_pct).collect();
        steps.dedup();
        assert_eq!(steps.len(), 3, "three GPU steps");
        assert!(steps.windows(2).all(|w| w[1] > w[0]));
        for ml in ["vgg16", "resnet50", "alexnet"] {
            let p = lib.get(ml).unwrap();
            let last = p.samples.last().unwrap();
            assert!(p.samples[0].gpu_util_pct < 0.5 * last.gpu_util_pct, "{ml} loads first");
        }
        // Two alexnets and one GROMACS: the thesis's 11,755 MB peak on one card.
        let peak = |a: &str| lib.get(a).unwrap().summary().peak.gpu_mem_mib;
        assert_eq!(2.0 * peak("alexnet") + peak("GROMACS"), 11755.0);
    }

    #[test]
    fn generation_is_deterministic() {
        assert_eq!(library().apps, library().apps);
    }

    /// What docs/PROFILES.md claims: SJF makespans within 25% of the thesis's for GPU_heavy and
    /// GPU_light, random +31.5% over it (mean of seeds 0..9, 30 jobs), and GPU_heavy's SJF
    /// utilisations near the thesis's 70.50% and 36.44%.
    #[test]
    fn sjf_makespans_near_the_thesis() {
        let lib = library();
        let error = |class, target: f64| {
            let mean = (0..10).map(|s| sjf(&lib, class, s).0).sum::<f64>() / 10.0;
            (mean, (mean - target) / target)
        };
        for (class, target) in SJF_TARGETS {
            let (mean, err) = error(class, target);
            assert!(err.abs() <= 0.25, "{class}: SJF {mean:.0} s vs thesis {target} s ({:+.1}%)", 100.0 * err);
        }
        let (mean, err) = error(WorkloadClass::Random, RANDOM_SJF_TARGET);
        assert!(
            (err - RANDOM_SJF_ERROR).abs() < 0.0005,
            "random: SJF {mean:.1} s vs thesis {RANDOM_SJF_TARGET} s ({:+.2}%); docs/PROFILES.md says +31.5%",
            100.0 * err
        );
        let (util, mem) = (0..10).fold((0.0, 0.0), |(u, m), s| {
            let (_, su, sm) = sjf(&lib, WorkloadClass::GpuHeavy, s);
            (u + su / 10.0, m + sm / 10.0)
        });
        assert!((util - 70.50).abs() < 5.0, "GPU_heavy SJF GPU util {util:.2}%");
        assert!((mem - 36.44).abs() < 5.0, "GPU_heavy SJF memory util {mem:.2}%");
    }
}
