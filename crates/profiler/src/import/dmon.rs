//! `nvidia-smi dmon -s umt [-o DT] [-d SECS]` output.
//!
//! dmon prints a `# gpu sm mem ... fb ... rxpci txpci` names line and a `# Idx % % ... MB/s`
//! units line (repeated every screenful), then one whitespace-separated row per GPU per
//! interval; `-` marks a value the GPU does not report. Used columns: `gpu` (index), `sm`
//! (dmon's SM column is NVML's GPU utilisation, so it feeds both util and SM), `fb` (memory
//! used, MiB: dmon labels it MB but reports MiB), `rxpci` + `txpci` (MB/s). With `-o D`/`-o T`
//! the `Date` (`YYYYMMDD`) and `Time` (`HH:MM:SS`) columns give the time; a `Time` without
//! `Date` that jumps back by more than 12 h is taken as midnight. Without them, the k-th row
//! of a GPU is at `k * --interval-s` (default 1 s, dmon's `-d` default), noted.

use std::path::Path;

use dqngpu_model::{ModelError, Resource};

use super::{invalid, parse_value, ImportOptions, Limit, Parsed};
use crate::resample::{index_of, Observation};
use crate::time::{parse_date, parse_time_of_day};

struct Columns {
    names: Vec<String>,
    gpu: usize,
    sm: Option<usize>,
    fb: Option<usize>,
    rx: Option<usize>,
    tx: Option<usize>,
    date: Option<usize>,
    time: Option<usize>,
}

impl Columns {
    fn new(names: Vec<String>, path: Option<&Path>, line: u64) -> Result<Self, ModelError> {
        let find = |n: &str| names.iter().position(|h| h == n);
        let gpu = find("gpu").ok_or_else(|| invalid(path, line, Some("gpu"), "the dmon header has no `gpu` column"))?;
        Ok(Columns {
            gpu,
            sm: find("sm"),
            fb: find("fb"),
            rx: find("rxpci"),
            tx: find("txpci"),
            date: find("date"),
            time: find("time"),
            names,
        })
    }
}

/// Parses the output.
///
/// One piece on purpose (about 110 lines): a single pass over the lines whose state (the
/// header in force, the day offset of a clock that wraps at midnight, rows per GPU) every
/// branch reads and updates; split, each part would take and return all of it.
pub fn parse(text: &str, path: Option<&Path>, opts: &ImportOptions) -> Result<Parsed, ModelError> {
    let mut parsed = Parsed::default();
    let mut cols: Option<Columns> = None;
    let step = opts.dmon_delay_s.or(opts.interval_s).unwrap_or(1.0);
    let mut rows_per_gpu: std::collections::BTreeMap<u32, u64> = Default::default();
    let mut day_offset = 0.0;
    let mut last_tod: Option<f64> = None;
    let mut pcie = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i as u64 + 1;
        let l = raw.trim();
        if l.is_empty() {
            continue;
        }
        if let Some(h) = l.strip_prefix('#') {
            let names: Vec<String> = h.split_whitespace().map(str::to_ascii_lowercase).collect();
            if !names.iter().any(|n| n == "gpu") {
                continue; // the units line (`# Idx % ...`) or a comment
            }
            match &cols {
                Some(c) if c.names == names => {}
                Some(_) => {
                    return Err(invalid(
                        path,
                        line,
                        None,
                        "the dmon columns change here; split the log where they change",
                    ))
                }
                None => {
                    let c = Columns::new(names, path, line)?;
                    if c.time.is_none() {
                        parsed.notes.push(format!(
                            "the log has no time column (dmon without -o T): rows taken as every {step} s; pass --dmon-delay-s if dmon ran with another -d"
                        ));
                        parsed.interval_hint = Some(step);
                    }
                    parsed
                        .notes
                        .push("sm_pct: dmon's `sm` column is the GPU utilisation; used for both util and SM".into());
                    if c.fb.is_none() {
                        return Err(invalid(
                            path,
                            line,
                            Some("fb"),
                            "the dmon header has no `fb` column; record with `dmon -s umt`",
                        ));
                    }
                    cols = Some(c);
                }
            }
            continue;
        }
        let Some(c) = &cols else {
            return Err(invalid(path, line, None, "data before the `# gpu sm mem ...` header line"));
        };
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() != c.names.len() {
            return Err(invalid(
                path,
                line,
                None,
                format!("truncated or malformed row: {} columns, the header has {}", f.len(), c.names.len()),
            ));
        }
        let gpu: u32 = f[c.gpu]
            .parse()
            .map_err(|_| invalid(path, line, Some("gpu"), format!("`{}` is not a GPU index", f[c.gpu])))?;
        let count = rows_per_gpu.entry(gpu).or_insert(0);
        let t_s = match c.time {
            Some(k) => {
                let tod = parse_time_of_day(f[k]).ok_or_else(|| {
                    invalid(path, line, Some("time"), format!("`{}` is not a time like 21:50:01", f[k]))
                })?;
                match c.date {
                    Some(d) => {
                        let days = parse_date(f[d]).ok_or_else(|| {
                            invalid(path, line, Some("date"), format!("`{}` is not a date like 20261125", f[d]))
                        })?;
                        days as f64 * 86_400.0 + tod
                    }
                    None => {
                        if last_tod.is_some_and(|p| tod + 43_200.0 < p) {
                            day_offset += 86_400.0;
                        }
                        last_tod = Some(tod);
                        day_offset + tod
                    }
                }
            }
            None => *count as f64 * step,
        };
        *count += 1;
        let value = |k: Option<usize>, field: &str, limit: Limit| match k {
            Some(k) => parse_value(f[k], limit).map_err(|m| invalid(path, line, Some(field), m)),
            None => Ok(None),
        };
        let sm = value(c.sm, "sm", Limit::Percent)?;
        let mut values = [None; 4];
        values[index_of(Resource::GpuUtil)] = sm;
        values[index_of(Resource::Sm)] = sm;
        values[index_of(Resource::GpuMem)] = value(c.fb, "fb", Limit::MemoryMib)?;
        pcie.push((value(c.rx, "rxpci", Limit::PcieOneWayMbps)?, value(c.tx, "txpci", Limit::PcieOneWayMbps)?));
        parsed.observations.push(Observation { t_s, line, gpu, values });
    }
    add_pcie(&mut parsed, &pcie);
    Ok(parsed)
}

/// PCIe is rxpci + txpci. A direction the log never has (a driver that reports `-` for it
/// throughout) is left out, with a note, rather than losing the other; where both are
/// reported, a row missing either holds the previous sum.
fn add_pcie(parsed: &mut Parsed, pcie: &[(Option<f64>, Option<f64>)]) {
    let (has_rx, has_tx) = (pcie.iter().any(|p| p.0.is_some()), pcie.iter().any(|p| p.1.is_some()));
    for (missing, used, present) in [("txpci", "rxpci", has_rx && !has_tx), ("rxpci", "txpci", has_tx && !has_rx)] {
        if present {
            parsed.notes.push(format!("pcie_mbps: the log has no {missing} values; PCIe is {used} alone"));
        }
    }
    for (o, &(rx, tx)) in parsed.observations.iter_mut().zip(pcie) {
        o.values[index_of(Resource::Pcie)] = match (has_rx, has_tx) {
            (true, true) => rx.zip(tx).map(|(r, t)| r + t),
            (true, false) => rx,
            (false, _) => tx,
        };
    }
}
