//! Importers for the logs operators already keep, and the shared steps after parsing:
//! choose one GPU, check that time moves forward, fill gaps, resample, build the profile.
//!
//! Choices shared by all formats (see docs/PROFILER.md):
//! - a log with several GPUs needs `--gpu`; the error lists the GPUs seen;
//! - a reading whose time is not after the previous reading of the same GPU is an error
//!   naming its line (logs are appended in time order; a jump back means two logs were
//!   concatenated or the clock was reset, and guessing would silently corrupt the profile);
//! - a line with the wrong number of fields (a truncated write) is an error naming the line;
//! - missing values (`[N/A]`, `-`, `NaN`) hold the previous reading; a resource the log never
//!   has is derived (SM from GPU util) or 0 (PCIe), and the [`Imported::notes`] say so.

pub mod dcgm;
pub mod dmon;
pub mod nvidia_smi;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use dqngpu_model::error::read_file;
use dqngpu_model::profile::{MAX_INTERVAL_S, MIN_INTERVAL_S};
use dqngpu_model::{AppInfo, AppProfile, Location, ModelError, RecordedOn, Resource};

use crate::resample::{index_of, median_gap, resample, Observation, Refused, MAX_SAMPLES};

/// The log formats `profile import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportFormat {
    /// `nvidia-smi --query-gpu=timestamp,index,utilization.gpu,memory.used --format=csv [-l N | -lms N]`.
    NvidiaSmi,
    /// `nvidia-smi dmon -s umt [-o DT]`.
    Dmon,
    /// DCGM exporter scrapes in Prometheus text format.
    Dcgm,
}

impl ImportFormat {
    /// The names accepted on the command line.
    pub const NAMES: [&'static str; 3] = ["nvidia-smi", "dmon", "dcgm"];
}

impl std::str::FromStr for ImportFormat {
    type Err = ModelError;
    fn from_str(s: &str) -> Result<Self, ModelError> {
        match s.to_ascii_lowercase().as_str() {
            "nvidia-smi" | "smi" => Ok(ImportFormat::NvidiaSmi),
            "dmon" => Ok(ImportFormat::Dmon),
            "dcgm" => Ok(ImportFormat::Dcgm),
            _ => Err(ModelError::UnknownName {
                what: "import format",
                name: s.to_string(),
                valid: Self::NAMES.iter().map(|n| n.to_string()).collect(),
            }),
        }
    }
}

/// What to import and how.
#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// Prior info of the app (name, kind, input size, parameters).
    pub app: AppInfo,
    /// Keep only this GPU (required when the log has several).
    pub gpu: Option<u32>,
    /// DCGM: keep only series whose `exported_pod` label (or else `pod`) is this.
    pub pod: Option<String>,
    /// DCGM: keep only series whose `exported_container` label (or else `container`) is this.
    pub container: Option<String>,
    /// Output interval, s (default: the median gap between readings). For dmon logs without
    /// a time column it is also the time between readings, unless `dmon_delay_s` says.
    pub interval_s: Option<f64>,
    /// dmon logs without a time column: the time between rows (dmon's `-d`), s; default
    /// `interval_s`, else 1 s (dmon's default). Given, `interval_s` only sets the output.
    pub dmon_delay_s: Option<f64>,
    /// nvidia-smi: the `--query-gpu` field list of a log written with `noheader`.
    pub columns: Option<Vec<String>>,
    /// Drop the idle readings before the job and after it: GPU util 0% and memory within
    /// 64 MiB of the log's least (`profile import --trim-idle`; docs/PROFILER.md).
    pub trim_idle: bool,
}

/// What a parser found in a log before selection and resampling.
#[derive(Debug, Default)]
pub struct Parsed {
    /// Readings of every GPU in the log, in file order.
    pub observations: Vec<Observation>,
    /// Facts about the GPUs the log names (name, memory, node), by index.
    pub devices: BTreeMap<u32, DeviceHint>,
    /// Remarks for the user (ignored columns, assumed intervals).
    pub notes: Vec<String>,
    /// The interval the log was taken at, when the log says it only implicitly.
    pub interval_hint: Option<f64>,
}

/// What a log says about a GPU.
#[derive(Debug, Clone, Default)]
pub struct DeviceHint {
    /// Card name (`NVIDIA A100-SXM4-40GB`).
    pub name: Option<String>,
    /// Total memory, MiB.
    pub memory_total_mib: Option<f64>,
    /// Node (host) name.
    pub node: Option<String>,
    /// What told this GPU apart in a log without GPU indices (nvidia-smi's `uuid`).
    pub id: Option<String>,
}

/// An imported profile with what happened on the way.
#[derive(Debug, Clone)]
pub struct Imported {
    /// The profile, resampled to a fixed interval.
    pub profile: AppProfile,
    /// The GPU it was taken from.
    pub gpu: u32,
    /// Readings used (before resampling).
    pub readings: usize,
    /// Remarks: derived or zeroed resources, filled gaps, ignored columns.
    pub notes: Vec<String>,
}

pub(crate) fn loc(path: Option<&Path>, line: Option<u64>, field: Option<&str>) -> Location {
    Location { path: path.map(Path::to_path_buf), line, field: field.map(str::to_string) }
}

pub(crate) fn invalid(path: Option<&Path>, line: u64, field: Option<&str>, msg: impl Into<String>) -> ModelError {
    ModelError::invalid(loc(path, Some(line), field), msg)
}

/// The most a log's value may be: what the profile it goes into may hold, checked while the
/// log's line and column are known (the profile's own check, after resampling, knows neither).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Limit {
    /// A percentage.
    Percent,
    /// GPU memory, MiB: the largest GPU in the catalogue.
    MemoryMib,
    /// One direction of PCIe, MB/s: half of what a profile's TX+RX may hold.
    PcieOneWayMbps,
    /// A card's total memory, MiB: what recorded-on info may hold (a card need not be in the
    /// catalogue).
    CardMemoryMib,
}

impl Limit {
    /// The error for `v` above the limit, if it is.
    fn check(self, v: f64) -> Result<(), String> {
        let c = dqngpu_model::error::compact(v);
        let (max, msg) = match self {
            Limit::Percent => (100.0, format!("{c} is above 100%")),
            Limit::MemoryMib => {
                let m = dqngpu_model::gpu::max_memory_mib();
                (m, format!("{c} MiB is more memory than the largest GPU has ({m} MiB)"))
            }
            Limit::CardMemoryMib => {
                let m = dqngpu_model::cluster::MAX_CUSTOM_MEMORY_MIB;
                (m, format!("{c} MiB is not a GPU's memory (at most {} MiB)", dqngpu_model::error::compact(m)))
            }
            Limit::PcieOneWayMbps => {
                let m = dqngpu_model::gpu::max_pcie_mbps() / 2.0;
                (m, format!("{c} MB/s is above one direction of the fastest PCIe link ({m} MB/s)"))
            }
        };
        if v > max + 1e-9 {
            Err(msg)
        } else {
            Ok(())
        }
    }
}

/// Parses a number that must be finite, non-negative and within `limit`; `None` is returned
/// for the missing-value markers of the tools (`[N/A]`, `[Not Supported]`, any `[...]`, `N/A`,
/// `-`, `NaN`, empty).
pub(crate) fn parse_value(raw: &str, limit: Limit) -> Result<Option<f64>, String> {
    let s = raw.trim();
    if s.is_empty() || s == "-" || s.eq_ignore_ascii_case("n/a") || (s.starts_with('[') && s.ends_with(']')) {
        return Ok(None);
    }
    let v: f64 = s.parse().map_err(|_| format!("`{}` is not a number", dqngpu_model::error::shortened(s)))?;
    if v.is_nan() {
        return Ok(None);
    }
    if !v.is_finite() {
        return Err(format!("`{}` is not a finite number", dqngpu_model::error::shortened(s)));
    }
    if v < 0.0 {
        return Err(format!("{} is negative", dqngpu_model::error::compact(v)));
    }
    limit.check(v)?;
    Ok(Some(v))
}

/// Imports a log file.
pub fn import_file(path: &Path, format: ImportFormat, opts: &ImportOptions) -> Result<Imported, ModelError> {
    let text = read_file(path)?;
    import_str(&text, Some(path), format, opts)
}

/// Imports a log from text; `path` only names the source in errors.
pub fn import_str(
    text: &str,
    path: Option<&Path>,
    format: ImportFormat,
    opts: &ImportOptions,
) -> Result<Imported, ModelError> {
    if let Some(d) = opts.dmon_delay_s {
        if !(MIN_INTERVAL_S..=MAX_INTERVAL_S).contains(&d) {
            return Err(ModelError::invalid(
                loc(None, None, Some("--dmon-delay-s")),
                format!("must be {MIN_INTERVAL_S} to {MAX_INTERVAL_S} seconds between rows, got {d}"),
            ));
        }
    }
    if let Some(dt) = opts.interval_s {
        if !(dt.is_finite() && dt > 0.0) {
            return Err(ModelError::invalid(
                loc(None, None, Some("--interval-s")),
                format!("must be a positive number of seconds, got {dt}"),
            ));
        }
        // A profile's own range, checked here so that the flag is named rather than the log's
        // times (a dmon log without a time column takes its times from the flag, and times
        // are kept to the microsecond, so a shorter step would read as repeated times).
        if !(MIN_INTERVAL_S..=MAX_INTERVAL_S).contains(&dt) {
            return Err(ModelError::invalid(
                loc(None, None, Some("--interval-s")),
                format!(
                    "must be from {MIN_INTERVAL_S:e} s to {MAX_INTERVAL_S} s (a profile's sampling interval), got {dt}"
                ),
            ));
        }
    }
    // A UTF-8 byte-order mark (Windows editors write one) is no part of the first line.
    let text = dqngpu_model::error::strip_bom(text);
    let parsed = match format {
        ImportFormat::NvidiaSmi => nvidia_smi::parse(text, path, opts)?,
        ImportFormat::Dmon => dmon::parse(text, path, opts)?,
        ImportFormat::Dcgm => dcgm::parse(text, path, opts)?,
    };
    finish(parsed, path, opts)
}

fn finish(parsed: Parsed, path: Option<&Path>, opts: &ImportOptions) -> Result<Imported, ModelError> {
    let Parsed { observations, devices, mut notes, interval_hint } = parsed;
    let gpus: BTreeSet<u32> = observations.iter().map(|o| o.gpu).collect();
    let gpu = match (opts.gpu, gpus.len()) {
        (_, 0) => return Err(ModelError::invalid(loc(path, None, None), "the log has no readings")),
        (Some(g), _) if !gpus.contains(&g) => {
            return Err(ModelError::UnknownName {
                what: "GPU index (in this log)",
                name: g.to_string(),
                valid: gpus.iter().map(u32::to_string).collect(),
            })
        }
        (Some(g), _) => g,
        (None, 1) => *gpus.iter().next().unwrap_or(&0),
        (None, _) => {
            let named = |g: &u32| match devices.get(g).and_then(|d| d.id.as_deref()) {
                Some(id) => format!("{g} = {id}"),
                None => g.to_string(),
            };
            let list: Vec<String> = gpus.iter().map(named).collect();
            return Err(ModelError::invalid(
                loc(path, None, Some("gpu")),
                format!("the log has readings from several GPUs ({}); choose one with --gpu INDEX", list.join(", ")),
            ));
        }
    };
    let mut obs: Vec<Observation> = observations.into_iter().filter(|o| o.gpu == gpu).collect();
    // Times relative to the first reading, rounded to 1 us: epoch seconds in an f64 carry
    // ~0.2 us of noise that would otherwise show in the interval (0.500999927 s).
    let t0 = obs.first().map_or(0.0, |o| o.t_s);
    for o in &mut obs {
        o.t_s = ((o.t_s - t0) * 1e6).round() / 1e6;
    }
    for w in obs.windows(2) {
        if w[1].t_s <= w[0].t_s {
            let what = if w[1].t_s == w[0].t_s { "repeats" } else { "goes backwards" };
            return Err(invalid(
                path,
                w[1].line,
                Some("timestamp"),
                format!(
                    "time {what} for GPU {gpu} ({:.3} s after the reading on line {}); logs must be in time order",
                    w[1].t_s - w[0].t_s,
                    w[0].line
                ),
            ));
        }
    }
    let mut values = fill_missing(&obs, path, gpu, &mut notes)?;
    // The log's own spacing, before any trimming: a trim that leaves one reading had no gap
    // to measure, and the profile fell back to 1 s (a 5 s job became 1 s).
    let untrimmed_gap = opts.trim_idle.then(|| median_gap(&obs.iter().map(|o| o.t_s).collect::<Vec<f64>>())).flatten();
    if opts.trim_idle {
        let (from, to) = trim_idle(&values, &mut notes);
        obs = obs[from..to].to_vec();
        values = values[from..to].to_vec();
    }
    let times: Vec<f64> = obs.iter().map(|o| o.t_s).collect();
    let dt = opts
        .interval_s
        .or_else(|| median_gap(&times).or(untrimmed_gap).map(|g| (g * 1e6).round() / 1e6))
        .or(interval_hint)
        .unwrap_or(1.0);
    // A reading held across a long silence stretches the job by it (a summer-time jump in a
    // log of local times, a paused exporter): said, with the lines on either side, so the
    // solo time is not taken on trust.
    let gaps: Vec<String> = obs
        .windows(2)
        .filter(|w| w[1].t_s - w[0].t_s > 10.0 * dt && w[1].t_s - w[0].t_s > 60.0)
        .map(|w| format!("{:.0} s between lines {} and {}", w[1].t_s - w[0].t_s, w[0].line, w[1].line))
        .collect();
    if !gaps.is_empty() {
        notes.push(format!(
            "readings far apart, each held across the gap (the job's solo time includes them): {}{}",
            gaps.iter().take(3).cloned().collect::<Vec<_>>().join("; "),
            if gaps.len() > 3 { format!(" and {} more", gaps.len() - 3) } else { String::new() }
        ));
    }
    let samples = resample(&times, &readings_over_intervals(&values), dt).map_err(|e| match e {
        Refused::TooManySamples => ModelError::invalid(
            loc(path, None, Some("--interval-s")),
            format!("resampling every {dt} s would make more than {MAX_SAMPLES} samples; use a longer --interval-s"),
        ),
        Refused::ShorterThanInterval { span_s } => ModelError::invalid(
            loc(path, None, Some("--interval-s")),
            format!(
                "the log spans {span_s} s, less than half of the {dt} s interval: one sample would make a {dt} s job; use a shorter --interval-s"
            ),
        ),
    })?;
    // The profile's own checks know no file: name the log, and the readings' spacing where
    // the interval came from it rather than from --interval-s.
    let mut profile = AppProfile::new(opts.app.clone(), dt, samples).map_err(|e| match e {
        ModelError::Invalid { mut at, message } if at.path.is_none() => {
            at.path = path.map(Path::to_path_buf);
            let from_log = opts.interval_s.is_none() && at.field.as_deref() == Some("interval_s");
            if from_log {
                at.field = Some("timestamp".into());
            }
            let message = if from_log { format!("the readings are {dt} s apart: {message}") } else { message };
            ModelError::Invalid { at, message }
        }
        other => other,
    })?;
    profile.recorded_on = devices.get(&gpu).and_then(|d| recorded_on(d, &mut notes));
    Ok(Imported { profile, gpu, readings: obs.len(), notes })
}

/// The values each reading's interval to the next holds, for [`resample`] (which holds a
/// value from its time to the next): GPU util, SM and PCIe are averages over the period
/// *before* their reading (nvidia-smi's `utilization.gpu`: "over the past sample period";
/// dmon's and DCGM's the same), so the interval from reading k to k + 1 takes reading
/// k + 1's, as `profile run` reads its own samples; memory is a level at its instant, so the
/// interval takes the larger of its two ends (an OOM depends on the peak). Held forward, a
/// log's reading from before the job became the profile's first second and its last busy
/// second was dropped.
fn readings_over_intervals(values: &[[f64; 4]]) -> Vec<[f64; 4]> {
    let mem = index_of(Resource::GpuMem);
    let mut out = values.to_vec();
    for (k, w) in values.windows(2).enumerate() {
        out[k] = w[1];
        out[k][mem] = w[0][mem].max(w[1][mem]);
    }
    out
}

/// Memory within this of the log's least reading counts as the card's idle level, MiB.
const IDLE_MEM_SLACK_MIB: f64 = 64.0;

/// The readings to keep of a log whose job starts after it and ends before it: a reading is
/// idle when its GPU utilisation is 0 and its memory within [`IDLE_MEM_SLACK_MIB`] of the
/// log's least. Trailing idle readings go; of the leading ones the last stays, as the start
/// of the first busy interval (a reading's utilisation is over the period before it). A log
/// with no busy reading is kept whole. The log's span is the job's solo time, so a log begun
/// half a minute before the job made it half a minute longer.
fn trim_idle(values: &[[f64; 4]], notes: &mut Vec<String>) -> (usize, usize) {
    let (util, mem) = (index_of(Resource::GpuUtil), index_of(Resource::GpuMem));
    let least = values.iter().map(|v| v[mem]).fold(f64::INFINITY, f64::min);
    let idle = |v: &[f64; 4]| v[util] <= 0.0 && v[mem] <= least + IDLE_MEM_SLACK_MIB;
    let Some(first_busy) = values.iter().position(|v| !idle(v)) else {
        notes.push("--trim-idle: every reading is idle; the log is kept whole".into());
        return (0, values.len());
    };
    let last_busy = values.iter().rposition(|v| !idle(v)).unwrap_or(first_busy);
    let (from, to) = (first_busy.saturating_sub(1), last_busy + 1);
    if from > 0 || to < values.len() {
        notes.push(format!(
            "--trim-idle: {from} idle reading(s) before the job and {} after it dropped (GPU util 0%, memory within {IDLE_MEM_SLACK_MIB} MiB of the log's least)",
            values.len() - to
        ));
    }
    (from, to)
}

/// Hold-previous gap filling; derived values for resources the log never has.
fn fill_missing(
    obs: &[Observation],
    path: Option<&Path>,
    gpu: u32,
    notes: &mut Vec<String>,
) -> Result<Vec<[f64; 4]>, ModelError> {
    let mut out = vec![[0.0; 4]; obs.len()];
    let util = index_of(Resource::GpuUtil);
    for r in Resource::ALL {
        let k = index_of(r);
        let first = obs.iter().find_map(|o| o.values[k]);
        let Some(first) = first else {
            match r {
                Resource::GpuUtil | Resource::GpuMem => {
                    return Err(ModelError::invalid(
                        loc(path, None, Some(r.column())),
                        format!("the log has no {} values for GPU {gpu}", r.column()),
                    ))
                }
                Resource::Sm => {
                    notes.push("sm_pct: the log has no SM activity; GPU utilisation used instead (an upper bound: the share of time any kernel ran)".into());
                    for (row, _) in out.iter_mut().zip(obs) {
                        row[k] = f64::NAN; // filled from util below
                    }
                }
                Resource::Pcie => notes.push("pcie_mbps: the log has no PCIe throughput; recorded as 0".into()),
            }
            continue;
        };
        let mut held = first;
        let mut filled = 0;
        for (row, o) in out.iter_mut().zip(obs) {
            match o.values[k] {
                Some(v) => held = v,
                None => filled += 1,
            }
            row[k] = held;
        }
        if filled > 0 {
            notes.push(format!("{}: {filled} missing value(s) held from the previous reading", r.column()));
        }
    }
    let sm = index_of(Resource::Sm);
    for row in &mut out {
        if row[sm].is_nan() {
            row[sm] = row[util];
        }
    }
    Ok(out)
}

/// What the log says about the GPU, as recorded-on info: the card's name, host and memory
/// total as the log gives them, with architecture, cores and PCIe from the catalogue entry the
/// name is a board of (`NVIDIA A100-SXM4-40GB`: `a100-40`), noted when none is.
fn recorded_on(hint: &DeviceHint, notes: &mut Vec<String>) -> Option<RecordedOn> {
    if hint.name.is_none() && hint.node.is_none() && hint.memory_total_mib.is_none() {
        return None;
    }
    let name = hint.name.clone().unwrap_or_default();
    let spec = hint.name.as_deref().and_then(|n| dqngpu_model::gpu::find_by_name(n, hint.memory_total_mib));
    if spec.is_none() {
        let what = if name.is_empty() {
            "the log names no GPU model".to_string()
        } else {
            format!("no catalogue GPU matches `{name}`")
        };
        notes.push(format!(
            "recorded_on: {what}; kept as the log gives it, with architecture, cores and PCIe unknown (0)"
        ));
    }
    Some(RecordedOn {
        node: hint.node.clone().unwrap_or_default(),
        gpu_name: name,
        architecture: spec.as_ref().map(|s| s.architecture.clone()).unwrap_or_default(),
        memory_mib: hint.memory_total_mib.or(spec.as_ref().map(|s| s.memory_mib)).unwrap_or(0.0),
        cores: spec.as_ref().map(|s| s.cores).unwrap_or(0),
        pcie_gbps: spec.as_ref().map(|s| s.pcie_gbps).unwrap_or(0.0),
    })
}
