//! An application's resource-usage history (thesis Table 2): prior info plus samples of the
//! four resources over the app's own progress time, and the cluster info it was recorded on.

use serde::{Deserialize, Serialize};

use crate::error::{Location, ModelError, Result};
use crate::resources::{Resource, Resources};

/// Whether an app is an HPC code or an ML training job (thesis Table 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AppKind {
    /// HPC application (LAMMPS, GROMACS, ...): usage changes with its phases.
    Hpc,
    /// ML training: a loading phase, then steady use.
    Ml,
    /// Not said.
    #[default]
    Unknown,
}

impl std::str::FromStr for AppKind {
    type Err = ModelError;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "hpc" => Ok(AppKind::Hpc),
            "ml" => Ok(AppKind::Ml),
            "unknown" => Ok(AppKind::Unknown),
            _ => Err(ModelError::UnknownName {
                what: "app kind",
                name: s.to_string(),
                valid: vec!["hpc".into(), "ml".into(), "unknown".into()],
            }),
        }
    }
}

/// Prior info given at submission (thesis Table 2, first group).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AppInfo {
    /// Application name.
    pub name: String,
    /// HPC or ML.
    #[serde(default)]
    pub kind: AppKind,
    /// Input file size, MB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_size_mb: Option<f64>,
    /// Input parameters, free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<String>,
}

/// Cluster info of the machine a profile was recorded on (thesis Table 2, third group).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RecordedOn {
    /// Node name.
    pub node: String,
    /// GPU card name.
    pub gpu_name: String,
    /// GPU architecture.
    #[serde(default)]
    pub architecture: String,
    /// GPU memory, MiB.
    pub memory_mib: f64,
    /// Number of GPU cores.
    #[serde(default)]
    pub cores: u32,
    /// PCIe bandwidth, GB/s.
    #[serde(default)]
    pub pcie_gbps: f64,
}

/// A usage profile: samples every `interval_s` seconds of the app's own progress time.
///
/// Sample `i` holds the demand over progress time `[i*interval_s, (i+1)*interval_s)`, so the
/// solo execution time is `samples.len() * interval_s`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppProfile {
    /// Prior info.
    pub app: AppInfo,
    /// Sampling interval, seconds.
    pub interval_s: f64,
    /// Where it was recorded, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded_on: Option<RecordedOn>,
    /// The samples.
    pub samples: Vec<Resources>,
    /// The file and first data line this profile was read from (for error messages).
    #[serde(skip)]
    pub source: Option<Location>,
    /// Tables derived from the samples, built on first use (policies ask for the peaks at
    /// every decision, the simulator for the totals at the end of every run).
    #[serde(skip)]
    pub derived: Derived,
}

/// Lazily built tables of a profile: the component-wise peak of samples `i..` for every `i`,
/// its [`ProfileTotals`], its mean sample and where each run of equal samples ends.
///
/// Each is computed from `samples` the first time it is read, so a profile's samples must not
/// change after that (profiles are shared behind `Arc` and never mutated in place).
#[derive(Debug, Clone, Default)]
pub struct Derived {
    peaks: std::sync::OnceLock<std::sync::Arc<[Resources]>>,
    totals: std::sync::OnceLock<ProfileTotals>,
    mean: std::sync::OnceLock<Resources>,
    /// For each sample, the last of the run of equal samples it is in.
    run_ends: std::sync::OnceLock<std::sync::Arc<[usize]>>,
}

impl PartialEq for Derived {
    /// A cache never makes two profiles differ.
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// Integrals and least values over a profile's solo run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProfileTotals {
    /// GPU-util work: util x time over the run, percent x s.
    pub util_work: f64,
    /// Memory work: memory x time over the run, MiB x s.
    pub mem_work: f64,
    /// The least memory of any sample, MiB (infinite with no samples).
    pub min_mem_mib: f64,
}

/// Mean, peak and duration, derived from the samples (never stored twice).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ProfileSummary {
    /// Solo execution time, s.
    pub solo_s: f64,
    /// Time-weighted mean demand.
    pub mean: Resources,
    /// Component-wise peak demand.
    pub peak: Resources,
}

/// The longest sampling interval a profile may have: an hour between samples (nvidia-smi,
/// dmon and DCGM sample every second to minutes). A typo such as `--interval-s 1e300` would
/// make one job outlast every simulation.
pub const MAX_INTERVAL_S: f64 = 3600.0;
/// The shortest sampling interval a profile may have: a microsecond, the resolution CSV
/// profiles keep their times in (a shorter one is a typo, and makes a job of no length).
pub const MIN_INTERVAL_S: f64 = 1e-6;

/// How close to a sample boundary progress counts as on it, in samples (relative above one).
const SAMPLE_SNAP: f64 = 1e-9;
/// The longest a profiled job may run alone: 10^7 s, about 116 days (far past any training
/// run in the data here; the longest built-in app runs 1,200 s). Simulations and the plan's
/// look-ahead step through a job's whole profile.
pub const MAX_SOLO_S: f64 = 1e7;

impl AppProfile {
    /// Builds and validates a profile.
    pub fn new(app: AppInfo, interval_s: f64, samples: Vec<Resources>) -> Result<Self> {
        let p = AppProfile { app, interval_s, recorded_on: None, samples, source: None, derived: Derived::default() };
        p.validate()?;
        Ok(p)
    }

    /// Solo execution time, s.
    pub fn solo_s(&self) -> f64 {
        self.samples.len() as f64 * self.interval_s
    }

    /// Progress of a job still running `elapsed_s` after it started, as a live placer estimates
    /// it (rate 1). A job still running past its profile's length has not finished: it is taken
    /// to start its profile again (training jobs repeat epochs), so a placer looking ahead sees
    /// it demand a whole profile more rather than nothing; where in a repetition it is cannot be
    /// known, and guessing it from the wall clock made placements depend on the time of day.
    pub fn progress_after(&self, elapsed_s: f64) -> f64 {
        let e = elapsed_s.max(0.0);
        if e >= self.solo_s() {
            0.0
        } else {
            e
        }
    }

    /// The demand at progress time `progress_s` (clamped to the last sample).
    #[inline]
    pub fn demand_at(&self, progress_s: f64) -> &Resources {
        &self.samples[self.sample_index(progress_s)]
    }

    /// Index of the sample in force at `progress_s`. Progress summed from `rate x dt` over
    /// steps cut at arrivals and finishes lands a few ulps short of a sample boundary
    /// (15.999999999999979 for 16): within a billionth of a sample of the boundary counts as
    /// on it, or the job would run the earlier sample for a whole step and every later one a
    /// step late, and never reach its last (often its memory peak).
    #[inline]
    pub fn sample_index(&self, progress_s: f64) -> usize {
        let x = progress_s / self.interval_s;
        ((x + SAMPLE_SNAP * (1.0 + x)) as usize).min(self.samples.len() - 1)
    }

    /// A progress (s of its own time) below which the demand is still sample `i`'s (the
    /// samples from `i` to there are equal), a little short of where it changes (within a
    /// ten-millionth); infinite when it never does. Steppers use it to know, without dividing,
    /// that a demand still holds. O(1) after the first call.
    #[inline]
    pub fn demand_held_below(&self, i: usize) -> f64 {
        let ends = self.derived.run_ends.get_or_init(|| {
            let mut out = vec![0; self.samples.len()];
            for k in (0..self.samples.len()).rev() {
                out[k] =
                    if k + 1 < self.samples.len() && self.samples[k + 1] == self.samples[k] { out[k + 1] } else { k };
            }
            out.into()
        });
        let last = ends.get(i).copied().unwrap_or(i);
        if last + 1 >= self.samples.len() {
            f64::INFINITY
        } else {
            // sample_index snaps up within SAMPLE_SNAP x (1 + x) of a boundary; 1e-7 is far
            // wider than that and than rounding.
            (last + 1) as f64 * self.interval_s * (1.0 - 1e-7)
        }
    }

    /// Mean, peak and duration; O(1) after the first call (policies ask at every decision).
    pub fn summary(&self) -> ProfileSummary {
        let mean = *self.derived.mean.get_or_init(|| {
            let sum = self.samples.iter().fold(Resources::ZERO, |acc, s| acc.add(s));
            sum.scale(1.0 / self.samples.len().max(1) as f64)
        });
        ProfileSummary { solo_s: self.solo_s(), mean, peak: self.peak_from(0) }
    }

    /// Component-wise peak of samples `i..` (zero past the end); O(1) after the first call.
    #[inline]
    pub fn peak_from(&self, i: usize) -> Resources {
        let table = self.derived.peaks.get_or_init(|| {
            let mut out = vec![Resources::ZERO; self.samples.len()];
            let mut running = Resources::ZERO;
            for (k, s) in self.samples.iter().enumerate().rev() {
                running = running.max(s);
                out[k] = running;
            }
            out.into()
        });
        table.get(i).copied().unwrap_or(Resources::ZERO)
    }

    /// Util work, memory work and least memory over the samples; O(1) after the first call.
    pub fn totals(&self) -> ProfileTotals {
        *self.derived.totals.get_or_init(|| {
            let (mut util, mut mem, mut min_mem) = (0.0, 0.0, f64::INFINITY);
            for s in &self.samples {
                util += s.gpu_util_pct;
                mem += s.gpu_mem_mib;
                min_mem = f64::min(min_mem, s.gpu_mem_mib);
            }
            ProfileTotals { util_work: util * self.interval_s, mem_work: mem * self.interval_s, min_mem_mib: min_mem }
        })
    }

    /// Peak memory, MiB, and the index of the first sample at that peak.
    pub fn peak_mem(&self) -> (f64, usize) {
        let mut best = (0.0, 0);
        for (i, s) in self.samples.iter().enumerate() {
            if s.gpu_mem_mib > best.0 {
                best = (s.gpu_mem_mib, i);
            }
        }
        best
    }

    /// The location of sample `i`, with `field`: its line in a CSV source, else (a JSON file,
    /// an API body, no source) the field as `samples[i].field`, so the sample is named always.
    pub fn sample_location(&self, i: usize, field: &str) -> Location {
        let mut at = self.source.clone().unwrap_or_default();
        match at.line {
            Some(l) => {
                at.line = Some(l + i as u64);
                at.field = Some(field.to_string());
            }
            None => at.field = Some(format!("samples[{i}].{field}")),
        }
        at
    }

    /// Checks the invariants: a name, a positive interval of at most [`MAX_INTERVAL_S`], at
    /// least one sample, a solo time of at most [`MAX_SOLO_S`], every value finite and
    /// non-negative and physically possible: utilisation and SM within 0..=100,
    /// memory within the largest GPU in the catalogue, PCIe within the fastest link's two
    /// directions.
    pub fn validate(&self) -> Result<()> {
        let (max_mem, max_pcie) = (crate::gpu::max_memory_mib(), crate::gpu::max_pcie_mbps());
        let at = |field: &str| {
            let mut l = self.source.clone().unwrap_or_default();
            l.field = Some(field.to_string());
            l
        };
        if self.app.name.trim().is_empty() {
            return Err(ModelError::invalid(at("app.name"), "app name is empty"));
        }
        if !(self.interval_s.is_finite() && self.interval_s > 0.0) {
            return Err(ModelError::invalid(
                at("interval_s"),
                format!("sampling interval must be a positive number, got {}", self.interval_s),
            ));
        }
        if !(MIN_INTERVAL_S..=MAX_INTERVAL_S).contains(&self.interval_s) {
            return Err(ModelError::invalid(
                at("interval_s"),
                format!(
                    "sampling interval must be at least {MIN_INTERVAL_S:e} s and at most {MAX_INTERVAL_S} s, got {:?}",
                    self.interval_s
                ),
            ));
        }
        if self.samples.is_empty() {
            return Err(ModelError::invalid(at("samples"), "profile has no samples"));
        }
        if self.solo_s() > MAX_SOLO_S {
            return Err(ModelError::invalid(
                at("samples"),
                format!(
                    "{} samples every {:?} s run {:?} s alone, past the longest a profile may run ({MAX_SOLO_S:?} s)",
                    self.samples.len(),
                    self.interval_s,
                    self.solo_s()
                ),
            ));
        }
        for (i, s) in self.samples.iter().enumerate() {
            for r in Resource::ALL {
                let v = s.get(r);
                let c = crate::error::compact(v);
                let bad = if !v.is_finite() {
                    Some(format!("{c} is not a finite number"))
                } else if v < 0.0 {
                    Some(format!("{c} is negative"))
                } else if matches!(r, Resource::GpuUtil | Resource::Sm) && v > 100.0 + 1e-9 {
                    Some(format!("{c} is above 100%"))
                } else if r == Resource::GpuMem && v > max_mem {
                    Some(format!("{c} MiB is more memory than the largest GPU has ({max_mem} MiB)"))
                } else if r == Resource::Pcie && v > max_pcie {
                    Some(format!("{c} MB/s is above the fastest PCIe link ({max_pcie} MB/s, both directions)"))
                } else {
                    None
                };
                if let Some(msg) = bad {
                    return Err(ModelError::invalid(self.sample_location(i, r.column()), msg));
                }
            }
        }
        self.validate_recorded_on()
    }

    /// Checks where it was recorded (`recorded_on`; part of [`Self::validate`]): 0 is "not
    /// known"; below that, or no number, is no GPU. Alone for a card attached after the
    /// samples were checked (a CSV profile's sidecar).
    pub fn validate_recorded_on(&self) -> Result<()> {
        let at = |field: &str| {
            let mut l = self.source.clone().unwrap_or_default();
            l.field = Some(field.to_string());
            l
        };
        if let Some(on) = &self.recorded_on {
            let max = crate::cluster::MAX_CUSTOM_MEMORY_MIB;
            if !(on.memory_mib.is_finite() && (0.0..=max).contains(&on.memory_mib)) {
                return Err(ModelError::invalid(
                    at("recorded_on.memory_mib"),
                    format!("{} is not a GPU's memory (0 to {max:e} MiB; 0: not known)", on.memory_mib),
                ));
            }
            if !(on.pcie_gbps.is_finite() && (0.0..=crate::cluster::MAX_CUSTOM_PCIE_GBPS).contains(&on.pcie_gbps)) {
                return Err(ModelError::invalid(
                    at("recorded_on.pcie_gbps"),
                    format!("{} is not a link's bandwidth in GB/s (0: not known)", on.pcie_gbps),
                ));
            }
        }
        Ok(())
    }

    /// Errors when the profile's peak memory exceeds `max_gpu_mem_mib`, naming the sample.
    pub fn check_fits_memory(&self, max_gpu_mem_mib: f64) -> Result<()> {
        let (peak, i) = self.peak_mem();
        if peak > max_gpu_mem_mib {
            return Err(ModelError::invalid(
                self.sample_location(i, Resource::GpuMem.column()),
                format!(
                    "app `{}` needs {peak} MiB of GPU memory at its peak, more than the largest GPU ({max_gpu_mem_mib} MiB)",
                    self.app.name
                ),
            ));
        }
        Ok(())
    }

    /// A profile with every sample replaced by a constant vector (DeepRM Max / Mean inputs).
    pub fn constant(&self, demand: Resources) -> AppProfile {
        AppProfile { samples: vec![demand; self.samples.len()], derived: Derived::default(), ..self.clone() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A profile from a JSON body (an API request: no file, no line) names its bad sample by
    /// index; one from a CSV file by its line.
    #[test]
    fn a_bad_sample_is_named_by_its_index_without_a_line() {
        let ok = Resources::new(10.0, 100.0, 10.0, 1.0);
        let mut samples = vec![ok; 50];
        samples[37].gpu_util_pct = -1.0;
        let info = AppInfo { name: "p".into(), ..Default::default() };
        let mut p = AppProfile {
            app: info,
            interval_s: 1.0,
            recorded_on: None,
            samples,
            source: None,
            derived: Derived::default(),
        };
        let e = p.validate().unwrap_err().to_string();
        assert!(e.contains("field `samples[37].gpu_util_pct`"), "{e}");
        p.source = Some(Location { path: Some("p.csv".into()), line: Some(2), field: None });
        let e = p.validate().unwrap_err().to_string();
        assert!(e.contains("p.csv, line 39, field `gpu_util_pct`"), "{e}");
    }

    #[test]
    fn a_demand_is_held_until_the_samples_change() {
        let s = |u| Resources::new(u, 100.0, u, 0.0);
        let info = AppInfo { name: "p".into(), ..Default::default() };
        let p = AppProfile::new(info, 2.0, vec![s(10.0), s(10.0), s(10.0), s(50.0), s(10.0), s(10.0)]).unwrap();
        // Samples 0-2 (progress 0 to 6 s) are equal: held to just short of 6 s, wherever in the run.
        for i in 0..3 {
            let below = p.demand_held_below(i);
            assert!(below < 6.0 && below > 6.0 - 1e-5, "{i}: {below}");
            assert_eq!(p.sample_index(below), 2);
        }
        assert!(p.demand_held_below(3) < 8.0 && p.demand_held_below(3) > 8.0 - 1e-5);
        // The last run holds to the end and past it.
        assert_eq!((p.demand_held_below(4), p.demand_held_below(5)), (f64::INFINITY, f64::INFINITY));
        // Summaries are cached, and the same as computed afresh.
        let mean = Resources::new(100.0 / 6.0, 100.0, 100.0 / 6.0, 0.0);
        let (a, b) = (p.summary(), p.summary());
        assert_eq!(a, b);
        assert!((a.mean.gpu_util_pct - mean.gpu_util_pct).abs() < 1e-9, "{:?}", a.mean);
    }

    #[test]
    fn peak_from_is_the_suffix_maximum() {
        let s = |u, m| Resources::new(u, m, 0.0, 0.0);
        let info = AppInfo { name: "p".into(), ..Default::default() };
        let p = AppProfile::new(info, 1.0, vec![s(10.0, 500.0), s(90.0, 100.0), s(20.0, 300.0)]).unwrap();
        assert_eq!(p.peak_from(0), s(90.0, 500.0));
        assert_eq!(p.peak_from(1), s(90.0, 300.0));
        assert_eq!(p.peak_from(2), s(20.0, 300.0));
        assert_eq!(p.peak_from(3), Resources::ZERO);
        assert_eq!(p.summary().peak, p.peak_from(0));
        // Live progress: clamped below; past the end a running job starts its profile again.
        assert_eq!((p.progress_after(-1.0), p.progress_after(2.5), p.progress_after(4.0)), (0.0, 2.5, 0.0));
        // A constant copy gets its own table, not the original's.
        let c = p.constant(s(1.0, 1.0));
        assert_eq!(c.peak_from(0), s(1.0, 1.0));
    }

    #[test]
    fn totals_integrate_the_samples_and_a_copy_with_new_samples_recomputes_them() {
        let s = |u, m| Resources::new(u, m, 0.0, 0.0);
        let info = AppInfo { name: "p".into(), ..Default::default() };
        let p = AppProfile::new(info, 2.0, vec![s(10.0, 500.0), s(90.0, 100.0), s(20.0, 300.0)]).unwrap();
        let t = p.totals();
        assert_eq!((t.util_work, t.mem_work, t.min_mem_mib), (240.0, 1800.0, 100.0));
        assert_eq!(p.totals(), t, "read again from the cache");
        let c = p.constant(s(1.0, 7.0));
        assert_eq!((c.totals().util_work, c.totals().mem_work, c.totals().min_mem_mib), (6.0, 42.0, 7.0));
    }

    #[test]
    fn where_a_profile_was_recorded_must_be_a_gpu() {
        let info = AppInfo { name: "p".into(), ..Default::default() };
        let mut p = AppProfile::new(info, 1.0, vec![Resources::new(10.0, 500.0, 0.0, 0.0)]).unwrap();
        let on = RecordedOn { node: "n".into(), gpu_name: "G".into(), memory_mib: 12288.0, ..Default::default() };
        p.recorded_on = Some(on.clone());
        p.validate().unwrap();
        for (bad, field) in [
            (RecordedOn { memory_mib: -5.0, ..on.clone() }, "recorded_on.memory_mib"),
            (RecordedOn { memory_mib: f64::NAN, ..on.clone() }, "recorded_on.memory_mib"),
            (RecordedOn { pcie_gbps: f64::INFINITY, ..on.clone() }, "recorded_on.pcie_gbps"),
        ] {
            p.recorded_on = Some(bad);
            let e = p.validate().unwrap_err().to_string();
            assert!(e.contains(field), "{e}");
        }
        // 0 is "not known", as an import without a driver writes it.
        p.recorded_on = Some(RecordedOn { memory_mib: 0.0, ..on });
        p.validate().unwrap();
    }

    #[test]
    fn a_profile_no_simulation_could_finish_is_refused_naming_the_field() {
        let info = AppInfo { name: "p".into(), ..Default::default() };
        let one = vec![Resources::new(10.0, 500.0, 0.0, 0.0)];
        // The limits themselves are allowed: an hour between samples, 10^7 s alone.
        assert!(AppProfile::new(info.clone(), MAX_INTERVAL_S, one.clone()).is_ok());
        let longest = vec![one[0]; (MAX_SOLO_S / MAX_INTERVAL_S) as usize];
        assert!(AppProfile::new(info.clone(), MAX_INTERVAL_S, longest.clone()).is_ok());
        for (interval, samples, field) in [
            (1e300, one.clone(), "interval_s"),
            (MAX_INTERVAL_S * 1.001, one.clone(), "interval_s"),
            (MIN_INTERVAL_S / 10.0, one.clone(), "interval_s"),
            (MAX_INTERVAL_S, [longest, one].concat(), "samples"),
        ] {
            let e = AppProfile::new(info.clone(), interval, samples).unwrap_err().to_string();
            assert!(e.contains(field) && (e.contains("at most") || e.contains("longest")), "{e}");
        }
    }
}
