//! DCGM exporter scrapes in Prometheus text format.
//!
//! Used metrics: `DCGM_FI_DEV_GPU_UTIL` (%), `DCGM_FI_DEV_FB_USED` (MiB),
//! `DCGM_FI_PROF_SM_ACTIVE` (a 0..1 ratio, stored as %), `DCGM_FI_PROF_PCIE_TX_BYTES` and
//! `DCGM_FI_PROF_PCIE_RX_BYTES`. dcgm-exporter publishes the PCIe ones as gauges holding a
//! rate in bytes/s, and they are read as rates; when the log declares them
//! `# TYPE ... counter` they are cumulative byte counters instead, turned into rates between
//! consecutive scrapes, a decrease being a counter reset (the new value is the bytes since the
//! reset, as Prometheus' `rate()` does), unless the series falls in at least two steps and a
//! fifth of them: then it holds rates after all (configs often declare DCGM's rate fields
//! `counter`), read as rates and noted. Other metrics are syntax-checked and ignored.
//!
//! Time: each sample's Prometheus timestamp (ms since the epoch) when it has one; otherwise
//! the latest `# scrape at T` comment before it (T in Unix seconds, or `YYYY-MM-DDTHH:MM:SS`).
//! Samples of one GPU at one time form one reading. Samples may come in any order (the
//! exposition format groups them by metric family); readings are put in time order, and only
//! a true conflict (one series with two different values at one time) is refused. Labels: `gpu` (required), `exported_pod`
//! or else `pod` (filtered by `--pod`; a Prometheus scrape renames the workload's `pod` to
//! `exported_pod` and sets `pod` to the exporter's), `exported_container` or else `container`
//! (`--container`),
//! `modelName` and `Hostname` (recorded-on info).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use dqngpu_model::{ModelError, Resource};

use super::{invalid, loc, DeviceHint, ImportOptions, Parsed};
use crate::resample::{index_of, Observation};
use crate::time::parse_datetime;

const UTIL: &str = "DCGM_FI_DEV_GPU_UTIL";
const FB_USED: &str = "DCGM_FI_DEV_FB_USED";
const SM_ACTIVE: &str = "DCGM_FI_PROF_SM_ACTIVE";
const PCIE_TX: &str = "DCGM_FI_PROF_PCIE_TX_BYTES";
const PCIE_RX: &str = "DCGM_FI_PROF_PCIE_RX_BYTES";
/// Free and total framebuffer, MiB: the card's memory (recorded-on), FB_USED + FB_FREE.
const FB_FREE: &str = "DCGM_FI_DEV_FB_FREE";
const FB_TOTAL: &str = "DCGM_FI_DEV_FB_TOTAL";

/// One sample line: `name{k="v",...} value [timestamp_ms]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Metric name.
    pub name: String,
    /// Labels in order.
    pub labels: Vec<(String, String)>,
    /// Value.
    pub value: f64,
    /// Timestamp, ms since the epoch.
    pub timestamp_ms: Option<i64>,
}

impl Sample {
    fn label(&self, k: &str) -> Option<&str> {
        self.labels.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str())
    }
}

fn is_name_char(c: char, first: bool) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':' || (!first && c.is_ascii_digit())
}

/// Parses one sample line of the Prometheus text format, or of a `promtool tsdb dump`
/// (`{__name__="NAME", k="v", ...} value timestamp_ms`: the name is a label).
pub fn parse_sample(l: &str) -> Result<Sample, String> {
    let l = l.trim();
    let name_end = l.char_indices().find(|&(i, c)| !is_name_char(c, i == 0)).map_or(l.len(), |(i, _)| i);
    if name_end == 0 && !l.starts_with('{') {
        return Err("expected a metric name".into());
    }
    let mut name = l[..name_end].to_string();
    let mut rest = &l[name_end..];
    let mut labels = Vec::new();
    if let Some(r) = rest.strip_prefix('{') {
        let mut chars = r.char_indices().peekable();
        let mut end = None;
        loop {
            while chars.peek().is_some_and(|(_, c)| c.is_whitespace() || *c == ',') {
                chars.next();
            }
            let Some(&(start, c)) = chars.peek() else { break };
            if c == '}' {
                end = Some(start + 1);
                break;
            }
            let mut key_end = start;
            while let Some(&(i, c)) = chars.peek() {
                if !is_name_char(c, i == start) {
                    break;
                }
                key_end = i + c.len_utf8();
                chars.next();
            }
            if key_end == start {
                return Err(format!("bad label name at `{}`", &r[start..]));
            }
            let key = r[start..key_end].to_string();
            if chars.next().map(|(_, c)| c) != Some('=') || chars.next().map(|(_, c)| c) != Some('"') {
                return Err(format!("label `{key}` needs =\"value\""));
            }
            let mut value = String::new();
            let mut closed = false;
            while let Some((_, c)) = chars.next() {
                match c {
                    '"' => {
                        closed = true;
                        break;
                    }
                    '\\' => match chars.next().map(|(_, c)| c) {
                        Some('n') => value.push('\n'),
                        Some(e) => value.push(e),
                        None => break,
                    },
                    c => value.push(c),
                }
            }
            if !closed {
                return Err(format!("label `{key}` value is not closed (truncated line?)"));
            }
            labels.push((key, value));
        }
        let Some(end) = end else { return Err("labels are not closed with `}` (truncated line?)".into()) };
        rest = &r[end..];
        if name.is_empty() {
            let at = labels.iter().position(|(k, _)| k == "__name__");
            let Some(at) = at else { return Err("expected a metric name, or a `__name__` label".into()) };
            name = labels.remove(at).1;
            if name.is_empty() || !name.char_indices().all(|(i, c)| is_name_char(c, i == 0)) {
                return Err(format!("`__name__` label `{name}` is not a metric name"));
            }
        }
    } else if rest.is_empty() {
        return Err("missing value (truncated line?)".into());
    } else if !rest.starts_with(char::is_whitespace) {
        return Err(format!("unexpected `{}` after the metric name", rest.chars().next().unwrap_or(' ')));
    }
    let mut parts = rest.split_whitespace();
    let v = parts.next().ok_or("missing value (truncated line?)")?;
    let value: f64 = v.parse().map_err(|_| format!("`{v}` is not a number"))?;
    let timestamp_ms = match parts.next() {
        Some(t) => Some(t.parse::<i64>().map_err(|_| format!("`{t}` is not a timestamp in ms"))?),
        None => None,
    };
    if let Some(extra) = parts.next() {
        return Err(format!("unexpected `{extra}` after the timestamp"));
    }
    Ok(Sample { name, labels, value, timestamp_ms })
}

/// A series' label set (name, value), in file order.
type Labels = Vec<(String, String)>;

/// One reading: the samples of one GPU at one time.
#[derive(Default)]
struct Group {
    gpu: u32,
    t_ms: i64,
    line: u64,
    values: [Option<f64>; 4],
    tx: Option<f64>,
    rx: Option<f64>,
    /// Per slot (the four values, TX, RX): the line that set it and its series' label set.
    origin: [Option<(u64, Labels)>; 6],
}

fn parse_scrape_time(s: &str) -> Option<i64> {
    let s = s.trim();
    let secs = match s.parse::<f64>() {
        Ok(v) => v,
        Err(_) => parse_datetime(s.trim_end_matches('Z'))?,
    };
    (secs.is_finite() && secs.abs() < 1e15).then(|| (secs * 1000.0).round() as i64)
}

/// The slot a used metric fills (the four resource values, then TX, RX); `None` for others.
fn slot_of(name: &str) -> Option<usize> {
    match name {
        UTIL => Some(index_of(Resource::GpuUtil)),
        FB_USED => Some(index_of(Resource::GpuMem)),
        SM_ACTIVE => Some(index_of(Resource::Sm)),
        PCIE_TX => Some(4),
        PCIE_RX => Some(5),
        _ => None,
    }
}

/// Checks a used metric's value range; NaN means "no value" and is passed through.
fn check_range(s: &Sample) -> Result<Option<f64>, String> {
    if s.value.is_nan() {
        return Ok(None);
    }
    let v = s.value;
    let max_mem = dqngpu_model::gpu::max_memory_mib();
    let (max, range) = match s.name.as_str() {
        UTIL => (Some(100.0), "0..100".to_string()),
        SM_ACTIVE => (Some(1.0), "0..1 (a ratio)".to_string()),
        FB_USED => (Some(max_mem), format!("0..{max_mem} MiB (the largest GPU's memory)")),
        _ => (None, ">= 0".to_string()),
    };
    if !v.is_finite() || v < 0.0 || max.is_some_and(|m| v > m + 1e-9) {
        return Err(format!("{} is outside {range}", dqngpu_model::error::compact(v)));
    }
    Ok(Some(if s.name == SM_ACTIVE { v * 100.0 } else { v }))
}

/// The readings being assembled. The exposition format groups samples by metric family, so a
/// file of many timestamped scrapes holds each family's whole history before the next family:
/// samples are grouped by (GPU, time) in any order and sorted by time at the end.
#[derive(Default)]
struct Readings {
    groups: Vec<Group>,
    open: HashMap<(u32, i64), usize>,
    devices: BTreeMap<u32, DeviceHint>,
    /// Per GPU label: the card it names (its host, its UUID) and the line that first said so.
    identity: HashMap<(u32, &'static str), (String, u64)>,
}

impl Readings {
    /// Adds one sample of a used metric (slot from [`slot_of`]) at `t_ms`.
    fn add(
        &mut self,
        s: &Sample,
        slot: usize,
        gpu: u32,
        t_ms: i64,
        line: u64,
        path: Option<&Path>,
    ) -> Result<(), ModelError> {
        // A GPU label names one card only with its host (and UUID): an export of several
        // machines has a GPU 0 on each, and their readings must not merge into one profile.
        for key in ["Hostname", "UUID"] {
            let Some(v) = s.label(key) else { continue };
            let (first, first_line) = self.identity.entry((gpu, key)).or_insert_with(|| (v.to_string(), line));
            if first != v {
                return Err(invalid(
                    path,
                    line,
                    Some(key),
                    format!(
                        "GPU {gpu} is `{v}` here and `{first}` on line {first_line}: the log holds several machines' \
                         GPUs under one index; import one machine's lines (those with {key}=\"{first}\", say)"
                    ),
                ));
            }
        }
        let dev = self.devices.entry(gpu).or_default();
        if let Some(m) = s.label("modelName") {
            dev.name = Some(m.to_string());
        }
        if let Some(h) = s.label("Hostname") {
            dev.node = Some(h.to_string());
        }
        let v = check_range(s).map_err(|m| invalid(path, line, Some(&s.name), m))?;
        let groups = &mut self.groups;
        let gi = *self.open.entry((gpu, t_ms)).or_insert_with(|| {
            groups.push(Group { gpu, t_ms, line, ..Default::default() });
            groups.len() - 1
        });
        let g = &mut groups[gi];
        let current = match slot {
            4 => &mut g.tx,
            5 => &mut g.rx,
            k => &mut g.values[k],
        };
        if let Some((first, labels)) = &g.origin[slot] {
            if *labels != s.labels {
                // MIG: each GPU instance is its own series of the GPU (`GPU_I_ID`), which no
                // pod or container filter tells apart.
                let mig = |ls: &Labels| ls.iter().find(|(k, _)| k == "GPU_I_ID").map(|(_, v)| v.clone());
                let why = match (mig(labels), mig(&s.labels)) {
                    (Some(a), Some(b)) if a != b => format!(
                        "MIG instances {a} and {b} of GPU {gpu} (label GPU_I_ID; line {first} too): a MIG slice's profile is not read; import a whole GPU's"
                    ),
                    _ => format!(
                        "{} appears twice for GPU {gpu} at one time (line {first} too: several pods or containers?); filter with --pod or --container",
                        s.name
                    ),
                };
                return Err(invalid(path, line, Some(&s.name), why));
            }
            // The same series at the same time again: a repeat is harmless, a new value a conflict.
            let same = match (*current, v) {
                (Some(a), Some(b)) => a == b,
                (a, b) => a.is_none() && b.is_none(),
            };
            if !same {
                return Err(invalid(
                    path,
                    line,
                    Some(&s.name),
                    format!(
                        "{} for GPU {gpu} at {t_ms} ms has two values: {} here, {} on line {first}",
                        s.name,
                        fmt_value(v),
                        fmt_value(*current)
                    ),
                ));
            }
            return Ok(());
        }
        *current = v;
        g.origin[slot] = Some((line, s.labels.clone()));
        g.line = g.line.min(line);
        Ok(())
    }

    /// The readings in time order (then GPU), each GPU's times distinct.
    fn into_sorted(mut self) -> (Vec<Group>, BTreeMap<u32, DeviceHint>) {
        self.groups.sort_by_key(|g| (g.t_ms, g.gpu));
        (self.groups, self.devices)
    }
}

fn fmt_value(v: Option<f64>) -> String {
    v.map_or_else(|| "NaN".to_string(), |v| v.to_string())
}

/// Each GPU's memory total: FB_TOTAL, or FB_USED + FB_FREE of one scrape (the largest seen;
/// a total no card has is left out).
fn card_memory(groups: &[Group], card_mem: &HashMap<(u32, i64, bool), f64>, devices: &mut BTreeMap<u32, DeviceHint>) {
    let used = index_of(Resource::GpuMem);
    for g in groups {
        let total = card_mem
            .get(&(g.gpu, g.t_ms, true))
            .copied()
            .or_else(|| g.values[used].zip(card_mem.get(&(g.gpu, g.t_ms, false))).map(|(u, f)| u + f));
        if let Some(t) = total.filter(|&t| t > 0.0 && t <= dqngpu_model::cluster::MAX_CUSTOM_MEMORY_MIB) {
            let d = devices.entry(g.gpu).or_default();
            d.memory_total_mib = Some(d.memory_total_mib.map_or(t, |m| m.max(t)));
        }
    }
}

/// Why no sample was kept: the filters given, and what the log has for each (containers of
/// the pod asked for, when a pod was).
fn no_match(opts: &ImportOptions, pods: &BTreeSet<String>, containers: &BTreeSet<String>) -> String {
    let seen = |set: &BTreeSet<String>| {
        if set.is_empty() {
            "none".to_string()
        } else {
            set.iter().cloned().collect::<Vec<_>>().join(", ")
        }
    };
    let mut filters = Vec::new();
    let mut lists = Vec::new();
    if let Some(p) = &opts.pod {
        filters.push(format!("pod `{p}`"));
        lists.push(format!("pods seen: {}", seen(pods)));
    }
    if let Some(c) = &opts.container {
        filters.push(format!("container `{c}`"));
        lists.push(format!("containers seen: {}", seen(containers)));
    }
    if filters.is_empty() {
        return "no DCGM_FI_DEV_GPU_UTIL / DCGM_FI_DEV_FB_USED samples found".to_string();
    }
    format!("no DCGM_FI_* samples matched the filter ({}); {}", filters.join(" and "), lists.join("; "))
}

/// Parses the scrapes.
pub fn parse(text: &str, path: Option<&Path>, opts: &ImportOptions) -> Result<Parsed, ModelError> {
    let mut types: HashMap<String, String> = HashMap::new();
    let mut scrape_ms: Option<i64> = None;
    let mut readings = Readings::default();
    let mut pods_seen = BTreeSet::new();
    let mut containers_seen = BTreeSet::new();
    let mut card_mem: HashMap<(u32, i64, bool), f64> = HashMap::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i as u64 + 1;
        let l = raw.trim();
        if l.is_empty() {
            continue;
        }
        if let Some(c) = l.strip_prefix('#') {
            let c = c.trim();
            // `dcgmi dmon`'s header (`#Entity   GPUTL  FBUSD ...`): a table, not Prometheus text.
            if c.split_whitespace().next().is_some_and(|w| w.eq_ignore_ascii_case("entity")) {
                return Err(invalid(
                    path,
                    line,
                    None,
                    "a `dcgmi dmon` table, which is not read; import dcgm-exporter's metrics (Prometheus text) instead",
                ));
            }
            if let Some(t) = c.strip_prefix("scrape at") {
                scrape_ms = Some(parse_scrape_time(t).ok_or_else(|| {
                    invalid(path, line, None, format!("`{}` is not a Unix time in seconds", t.trim()))
                })?);
            } else if let Some(t) = c.strip_prefix("TYPE") {
                let mut it = t.split_whitespace();
                if let (Some(n), Some(ty)) = (it.next(), it.next()) {
                    types.insert(n.to_string(), ty.to_ascii_lowercase());
                }
            }
            continue;
        }
        let s = parse_sample(l).map_err(|m| invalid(path, line, None, m))?;
        if s.name == FB_FREE || s.name == FB_TOTAL {
            let gpu = s.label("gpu").and_then(|g| g.parse::<u32>().ok());
            if let (Some(gpu), Some(t)) = (gpu, s.timestamp_ms.or(scrape_ms)) {
                if s.value.is_finite() && s.value >= 0.0 {
                    card_mem.insert((gpu, t, s.name == FB_TOTAL), s.value);
                }
            }
            continue;
        }
        let Some(slot) = slot_of(&s.name) else { continue };
        // Scraped by Prometheus, the exporter's own `pod`/`container` labels (the workload's)
        // are renamed `exported_*` when the target's labels clash (`honor_labels: false`, the
        // default), and `pod` is then the exporter's own pod: the workload's label goes first.
        let pod = s.label("exported_pod").or(s.label("pod")).filter(|p| !p.is_empty());
        if let Some(p) = pod {
            pods_seen.insert(p.to_string());
        }
        if opts.pod.as_deref().is_some_and(|want| pod != Some(want)) {
            continue;
        }
        let container = s.label("exported_container").or(s.label("container")).filter(|c| !c.is_empty());
        if let Some(c) = container {
            containers_seen.insert(c.to_string());
        }
        if opts.container.as_deref().is_some_and(|want| container != Some(want)) {
            continue;
        }
        let g =
            s.label("gpu").ok_or_else(|| invalid(path, line, Some("gpu"), format!("{} has no `gpu` label", s.name)))?;
        let gpu: u32 = g.parse().map_err(|_| invalid(path, line, Some("gpu"), format!("`{g}` is not a GPU index")))?;
        let t_ms = s.timestamp_ms.or(scrape_ms).ok_or_else(|| {
            invalid(
                path,
                line,
                None,
                "sample has no timestamp and no `# scrape at <unix seconds>` line comes before it",
            )
        })?;
        readings.add(&s, slot, gpu, t_ms, line, path)?;
    }
    let (mut groups, mut devices) = readings.into_sorted();
    card_memory(&groups, &card_mem, &mut devices);
    if groups.is_empty() {
        let why = no_match(opts, &pods_seen, &containers_seen);
        return Err(ModelError::invalid(loc(path, None, None), why));
    }
    let mut parsed = Parsed::default();
    pcie_rates(&mut groups, &types, &mut parsed.notes);
    parsed.observations = groups
        .iter()
        .map(|g| Observation { t_s: g.t_ms as f64 / 1000.0, line: g.line, gpu: g.gpu, values: g.values })
        .collect();
    parsed.devices = devices;
    Ok(parsed)
}

/// How often a series falls between consecutive readings of one GPU, and of how many steps.
fn falls(groups: &[Group], value: impl Fn(&Group) -> Option<f64>) -> (usize, usize) {
    let mut last: HashMap<u32, f64> = HashMap::new();
    let (mut falls, mut steps) = (0, 0);
    for g in groups {
        let Some(v) = value(g) else { continue };
        if let Some(prev) = last.insert(g.gpu, v) {
            steps += 1;
            falls += usize::from(v < prev);
        }
    }
    (falls, steps)
}

/// Fills the PCIe slot of each reading with TX+RX in MB/s (rates or counter differences).
/// With neither metric in the log the slot stays empty (the shared step records 0 and notes it).
fn pcie_rates(groups: &mut [Group], types: &HashMap<String, String>, notes: &mut Vec<String>) {
    let get = |g: &Group, d: usize| if d == 0 { g.tx } else { g.rx };
    let present = [0, 1].map(|d| groups.iter().any(|g| get(g, d).is_some()));
    if !present[0] && !present[1] {
        return;
    }
    let mut resets = 0;
    let mut rates: Vec<[Option<f64>; 2]> = vec![[None, None]; groups.len()];
    for (d, name) in [PCIE_TX, PCIE_RX].into_iter().enumerate() {
        if !present[d] {
            notes.push(format!("{name}: not in the log; taken as 0"));
            rates.iter_mut().for_each(|r| r[d] = Some(0.0));
            continue;
        }
        let declared = types.get(name).is_some_and(|t| t == "counter");
        let (falls, steps) = if declared { falls(groups, |g| get(g, d)) } else { (0, 0) };
        // DCGM's PROF_PCIE fields hold a rate in bytes/s whatever the exporter's config calls
        // them, and published configs often declare them `counter`: a cumulative counter falls
        // only when it resets, a rate about every other scrape. Read as counters, rates gave
        // differences of rates (20-380 MB/s for a steady 2.9 GB/s).
        let rates_after_all = declared && falls >= 2 && 5 * falls >= steps;
        if rates_after_all {
            notes.push(format!(
                "{name}: declared a counter, but it falls in {falls} of {steps} steps: read as a rate in bytes/s, as DCGM defines the field"
            ));
        }
        if !declared || rates_after_all {
            for (r, g) in rates.iter_mut().zip(groups.iter()) {
                r[d] = get(g, d);
            }
            continue;
        }
        notes.push(format!("{name}: declared a counter; rates taken between consecutive scrapes"));
        let mut prev: HashMap<u32, (i64, f64)> = HashMap::new();
        for (r, g) in rates.iter_mut().zip(groups.iter()) {
            let Some(v) = get(g, d) else { continue };
            if let Some(&(pt, pv)) = prev.get(&g.gpu) {
                // In floats: two timestamps from the file may be further apart than an i64 holds.
                let dt = (g.t_ms as f64 - pt as f64) / 1000.0;
                let delta = if v < pv {
                    resets += 1;
                    v
                } else {
                    v - pv
                };
                if dt > 0.0 {
                    r[d] = Some(delta / dt);
                }
            }
            prev.insert(g.gpu, (g.t_ms, v));
        }
    }
    if resets > 0 {
        notes.push(format!(
            "PCIe byte counters reset {resets} time(s) (TX and RX counted apart); bytes after a reset counted from 0"
        ));
    }
    let pcie = index_of(Resource::Pcie);
    for (g, r) in groups.iter_mut().zip(rates) {
        g.values[pcie] = r[0].zip(r[1]).map(|(tx, rx)| (tx + rx) / 1e6);
    }
}
