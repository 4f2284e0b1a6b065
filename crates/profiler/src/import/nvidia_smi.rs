//! `nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits] [-l N | -lms N]` logs.
//!
//! Header fields look like `utilization.gpu [%]`; values like `45 %` (or `45` with
//! `nounits`), `[N/A]` or `[Not Supported]` when missing. Used fields: `timestamp`
//! (`YYYY/MM/DD HH:MM:SS.mmm`), `index` (absent: GPUs told apart by `uuid` or `pci.bus_id`,
//! numbered in order of first appearance; with neither, one GPU, 0), `utilization.gpu` (%),
//! `memory.used` (MiB); `name`, `memory.total` fill the recorded-on info. Other fields are
//! ignored (nvidia-smi has over a hundred) and named in a note. nvidia-smi has no SM-activity
//! or PCIe-throughput query field, so SM comes from GPU utilisation and PCIe is 0 (noted).
//! A header line repeated later (logs appended by several `-l` runs) is skipped; a different
//! header is an error.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use dqngpu_model::{ModelError, Resource};

use super::{invalid, parse_value, DeviceHint, ImportOptions, Limit, Parsed};
use crate::resample::{index_of, Observation};
use crate::time::parse_datetime;

/// Field name without its `[unit]` suffix, lower-cased.
fn field_name(h: &str) -> String {
    let h = h.trim();
    let base = match h.find('[') {
        Some(i) => &h[..i],
        None => h,
    };
    base.trim().to_ascii_lowercase()
}

/// A header field looks like `name.sub [unit]`, lower case first (a few query fields have
/// capitals later: `encoder.stats.sessionCount`); data never does (timestamps have digits
/// first, values are numbers, `[N/A]`, or words with a capital first and spaces: GPU names,
/// `P2`, `Enabled`).
fn looks_like_header(line: &str) -> bool {
    line.split(',').all(|f| {
        let f = f.trim();
        let base = match f.find(" [") {
            Some(i) if f.ends_with(']') => &f[..i],
            _ => f,
        };
        !base.is_empty()
            && base.starts_with(|c: char| c.is_ascii_lowercase())
            && base.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_')
    })
}

/// A header field's unit (`%` of `utilization.gpu [%]`).
fn field_unit(h: &str) -> Option<String> {
    let h = h.trim();
    let inner = h.strip_suffix(']')?;
    Some(inner[inner.rfind('[')? + 1..].trim().to_string())
}

/// Splits the unit a value carries (`45 %`, `1024 MiB`) from its number.
fn split_unit(v: &str) -> (&str, Option<&'static str>) {
    let v = v.trim();
    for unit in ["MiB", "%", "W", "MHz", "C"] {
        if let Some(s) = v.strip_suffix(unit) {
            if s.ends_with(' ') || unit == "%" {
                return (s.trim(), Some(unit));
            }
        }
    }
    (v, None)
}

/// The unit each used field must be in, as nvidia-smi writes it.
const UNITS: [(&str, &str); 3] = [("utilization.gpu", "%"), ("memory.used", "MiB"), ("memory.total", "MiB")];

struct Columns {
    names: Vec<String>,
    /// Each field's unit from the header (`None` for `--columns` without units).
    units: Vec<Option<String>>,
    timestamp: usize,
    index: Option<usize>,
    util: usize,
    mem: usize,
    name: Option<usize>,
    mem_total: Option<usize>,
    /// A field that tells GPUs apart where `index` is absent (`uuid`, else `pci.bus_id`).
    identity: Option<usize>,
}

fn columns(fields: &[&str], path: Option<&Path>, line: u64) -> Result<(Columns, Vec<String>), ModelError> {
    let names: Vec<String> = fields.iter().map(|f| field_name(f)).collect();
    let units: Vec<Option<String>> = fields.iter().map(|f| field_unit(f)).collect();
    for (name, unit) in names.iter().zip(&units) {
        let want = UNITS.iter().find(|(n, _)| n == name).map(|(_, u)| *u);
        if let (Some(want), Some(unit)) = (want, unit) {
            if unit != want {
                return Err(invalid(
                    path,
                    line,
                    Some(name),
                    format!("unit [{unit}]; nvidia-smi writes {name} in [{want}]"),
                ));
            }
        }
    }
    let find = |n: &str| names.iter().position(|h| h == n);
    let need = |n: &str| {
        find(n).ok_or_else(|| {
            invalid(path, line, Some(n), format!("missing field `{n}`; the log needs timestamp, utilization.gpu and memory.used (index when it has several GPUs)"))
        })
    };
    let known = ["timestamp", "index", "utilization.gpu", "memory.used", "name", "memory.total", "uuid", "pci.bus_id"];
    let ignored: Vec<String> = names.iter().filter(|n| !known.contains(&n.as_str())).cloned().collect();
    let c = Columns {
        timestamp: need("timestamp")?,
        util: need("utilization.gpu")?,
        mem: need("memory.used")?,
        index: find("index"),
        name: find("name"),
        mem_total: find("memory.total"),
        identity: find("uuid").or(find("pci.bus_id")),
        names,
        units,
    };
    Ok((c, ignored))
}

/// Parses the log.
///
/// One piece on purpose (about 100 lines): a single pass over the lines whose state (the
/// columns in force, the devices seen) every branch reads and updates; split, each part
/// would take and return all of it.
pub fn parse(text: &str, path: Option<&Path>, opts: &ImportOptions) -> Result<Parsed, ModelError> {
    let mut parsed = Parsed::default();
    let mut cols: Option<Columns> = None;
    if let Some(list) = &opts.columns {
        let fields: Vec<&str> = list.iter().flat_map(|c| c.split(',')).filter(|n| !field_name(n).is_empty()).collect();
        let (c, ignored) = columns(&fields, None, 0).map_err(|e| match e {
            ModelError::Invalid { mut at, message } => {
                at.line = None;
                at.field = Some("--columns".into());
                ModelError::Invalid { at, message }
            }
            other => other,
        })?;
        note_ignored(&mut parsed, &ignored);
        cols = Some(c);
    }
    let mut devices: BTreeMap<u32, DeviceHint> = BTreeMap::new();
    // Without `index`, each `uuid` (or bus id) gets the next number, in order of first sight.
    let mut identities: Vec<String> = Vec::new();
    let mut numbers: HashMap<String, u32> = HashMap::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i as u64 + 1;
        let l = raw.trim();
        if l.is_empty() {
            continue;
        }
        if looks_like_header(l) {
            let names: Vec<String> = l.split(',').map(field_name).collect();
            match &cols {
                Some(c) if c.names == names => continue,
                Some(_) if opts.columns.is_some() && parsed.observations.is_empty() => {
                    return Err(invalid(
                        path,
                        line,
                        None,
                        "this header does not match --columns; drop --columns for a log with a header",
                    ))
                }
                Some(_) => {
                    return Err(invalid(
                        path,
                        line,
                        None,
                        "the header changes here; split the log where the query fields change",
                    ))
                }
                None => {
                    let fields: Vec<&str> = l.split(',').collect();
                    let (c, ignored) = columns(&fields, path, line)?;
                    note_ignored(&mut parsed, &ignored);
                    cols = Some(c);
                    continue;
                }
            }
        }
        let Some(c) = &cols else {
            return Err(invalid(
                path,
                line,
                None,
                "expected the header line (`timestamp, index, utilization.gpu [%], memory.used [MiB]`); for a log written with `--format=csv,noheader` pass the --query-gpu field list with --columns",
            ));
        };
        let fields: Vec<&str> = l.split(',').collect();
        if fields.len() != c.names.len() {
            return Err(invalid(
                path,
                line,
                None,
                format!("truncated or malformed line: {} fields, the header has {}", fields.len(), c.names.len()),
            ));
        }
        let ts = fields[c.timestamp].trim();
        let t_s = parse_datetime(ts).ok_or_else(|| {
            invalid(path, line, Some("timestamp"), format!("`{ts}` is not a time like `2026/11/25 21:50:01.123`"))
        })?;
        let gpu = match (c.index, c.identity) {
            (Some(k), _) => {
                let v = fields[k].trim();
                v.parse::<u32>().map_err(|_| invalid(path, line, Some("index"), format!("`{v}` is not a GPU index")))?
            }
            (None, Some(k)) => {
                let id = fields[k].trim();
                match numbers.get(id) {
                    Some(&n) => n,
                    None => {
                        let n = identities.len() as u32;
                        numbers.insert(id.to_string(), n);
                        identities.push(id.to_string());
                        devices.entry(n).or_default().id = Some(id.to_string());
                        n
                    }
                }
            }
            (None, None) => 0,
        };
        let value = |k: usize, field: &str, limit: Limit| {
            let (number, unit) = split_unit(fields[k]);
            // Each field read here has nvidia-smi's one unit (a header giving another is refused
            // at the header): a value in another sits in the wrong column. Without a header, a
            // `--columns` list in another order than the query's (`30 %` read as memory.used
            // swapped the two).
            let own = UNITS.iter().find(|(n, _)| *n == field).map(|(_, u)| *u);
            if let (Some(unit), Some(own)) = (unit, own) {
                if unit != own {
                    let value = fields[k].trim();
                    let msg = if c.units.get(k).is_some_and(Option::is_some) {
                        format!("`{value}` is in {unit}, but the header gives this field in [{own}]")
                    } else {
                        format!("`{value}` is in {unit}, but {field} is in {own}: is the --columns list in the order of --query-gpu?")
                    };
                    return Err(invalid(path, line, Some(field), msg));
                }
            }
            parse_value(number, limit).map_err(|m| invalid(path, line, Some(field), m))
        };
        let mut values = [None; 4];
        values[index_of(Resource::GpuUtil)] = value(c.util, "utilization.gpu", Limit::Percent)?;
        values[index_of(Resource::GpuMem)] = value(c.mem, "memory.used", Limit::MemoryMib)?;
        let dev = devices.entry(gpu).or_default();
        if let Some(k) = c.name {
            let n = fields[k].trim();
            if !n.is_empty() && !n.starts_with('[') {
                dev.name = Some(n.to_string());
            }
        }
        if let Some(k) = c.mem_total {
            if let Some(v) = value(k, "memory.total", Limit::CardMemoryMib)? {
                dev.memory_total_mib = Some(v);
                // A card never holds more than it has: such a row is another card's, or the
                // columns are mixed up (it was found only when a library loaded the profile,
                // against the largest GPU, not this card).
                if let Some(used) = values[index_of(Resource::GpuMem)].filter(|&u| u > v + 1e-9) {
                    let msg = format!("{used} MiB used is more than the card's memory.total, {v} MiB");
                    return Err(invalid(path, line, Some("memory.used"), msg));
                }
            }
        }
        parsed.observations.push(Observation { t_s, line, gpu, values });
    }
    if let (true, Some(c)) = (identities.len() > 1, &cols) {
        let field = c.identity.map_or("uuid", |k| c.names[k].as_str());
        let list: Vec<String> = identities.iter().enumerate().map(|(k, id)| format!("{k} = {id}")).collect();
        parsed
            .notes
            .push(format!("no `index` field: GPUs numbered by first appearance of their {field}: {}", list.join(", ")));
    }
    parsed.devices = devices;
    Ok(parsed)
}

fn note_ignored(parsed: &mut Parsed, ignored: &[String]) {
    if !ignored.is_empty() {
        parsed.notes.push(format!("ignored nvidia-smi fields: {}", ignored.join(", ")));
    }
}
