//! Profile files: CSV `t_s,gpu_util_pct,gpu_mem_mib,sm_pct,pcie_mbps` (header required, with an
//! optional sidecar `NAME.meta.json` for the prior info) and JSON (the [`AppProfile`] shape).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{
    probe_write, read_file, write_file_atomic, write_file_new, write_files_atomic, Location, ModelError, Result,
};
use crate::profile::{AppInfo, AppProfile, RecordedOn};
use crate::resources::Resources;

/// The CSV header, in order.
pub const CSV_COLUMNS: [&str; 5] = ["t_s", "gpu_util_pct", "gpu_mem_mib", "sm_pct", "pcie_mbps"];

/// Prior info and cluster info kept beside a CSV profile (`NAME.meta.json`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ProfileMeta {
    /// Prior info.
    pub app: AppInfo,
    /// Where it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded_on: Option<RecordedOn>,
    /// The sampling interval, s: the CSV's times hold it only to the microsecond, and a
    /// one-row CSV not at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_s: Option<f64>,
}

/// The keys a sidecar may have.
const SIDECAR_KEYS: [&str; 3] = ["app", "recorded_on", "interval_s"];

/// Profile file formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProfileFormat {
    /// CSV with header.
    Csv,
    /// JSON.
    Json,
}

impl ProfileFormat {
    /// From a path's extension.
    pub fn from_path(p: &Path) -> Result<Self> {
        match p.extension().and_then(|e| e.to_str()).map(|e| e.to_ascii_lowercase()).as_deref() {
            Some("csv") => Ok(ProfileFormat::Csv),
            Some("json") => Ok(ProfileFormat::Json),
            _ => Err(ModelError::invalid(
                Location { path: Some(p.to_path_buf()), ..Default::default() },
                "profile files must end in .csv or .json",
            )),
        }
    }
}

fn loc(path: Option<&Path>, line: Option<u64>, field: Option<&str>) -> Location {
    Location { path: path.map(Path::to_path_buf), line, field: field.map(str::to_string) }
}

/// Refuses a JSON object with a top-level key not in `known` (a misspelt `recorded_on` would
/// otherwise be dropped without a word). Text that is no JSON object is left to the parser.
/// (Checked on files only: the service's rows carry more keys.)
fn refuse_unknown_keys(text: &str, path: Option<&Path>, known: &[&str]) -> Result<()> {
    // Only the top-level keys are kept (the values are skipped, not built): a cheap first pass.
    type Keys = std::collections::BTreeMap<String, serde::de::IgnoredAny>;
    let Ok(map) = serde_json::from_str::<Keys>(text) else { return Ok(()) };
    if let Some(k) = map.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(ModelError::invalid(
            loc(path, None, Some(k)),
            format!("unknown key; a profile file has {}", known.join(", ")),
        ));
    }
    // And inside: `app.input_size`, `recorded_on.pcie_gbs`, `samples[0].gpu_mem_pct` were
    // dropped without a word (a misspelt field read as its default), where the service's API
    // refuses them. Values are skipped here too.
    match serde_json::from_str::<nested::Keys>(text) {
        Err(e) if e.is_data() => Err(ModelError::invalid(
            loc(path, Some(e.line() as u64), json_field_hint(&e).as_deref()),
            format!("unknown key: {e}"),
        )),
        _ => Ok(()),
    }
}

/// The keys a profile file's objects may hold, values skipped.
mod nested {
    use serde::de::IgnoredAny;

    #[derive(serde::Deserialize)]
    #[allow(dead_code)] // read by serde for their keys, never by the code
    pub(super) struct Keys {
        #[serde(default)]
        app: Option<App>,
        #[serde(default)]
        recorded_on: Option<RecordedOn>,
        #[serde(default)]
        samples: Option<Vec<Sample>>,
    }

    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)] // as above
    struct App {
        #[serde(default)]
        name: IgnoredAny,
        #[serde(default)]
        kind: IgnoredAny,
        #[serde(default)]
        input_size_mb: IgnoredAny,
        #[serde(default)]
        params: IgnoredAny,
    }

    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)] // as above
    struct RecordedOn {
        #[serde(default)]
        node: IgnoredAny,
        #[serde(default)]
        gpu_name: IgnoredAny,
        #[serde(default)]
        architecture: IgnoredAny,
        #[serde(default)]
        memory_mib: IgnoredAny,
        #[serde(default)]
        cores: IgnoredAny,
        #[serde(default)]
        pcie_gbps: IgnoredAny,
    }

    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)] // as above
    struct Sample {
        #[serde(default)]
        gpu_util_pct: IgnoredAny,
        #[serde(default)]
        gpu_mem_mib: IgnoredAny,
        #[serde(default)]
        sm_pct: IgnoredAny,
        #[serde(default)]
        pcie_mbps: IgnoredAny,
    }
}

/// Parses a CSV profile. `name` is used when no sidecar gives prior info; the interval is
/// inferred from the times (1 s for a single row).
pub fn parse_csv(text: &str, path: Option<&Path>, app: AppInfo) -> Result<AppProfile> {
    parse_csv_every(text, path, app, None)
}

/// Parses a CSV profile whose interval a sidecar gives (`interval`: the value and the
/// sidecar's path); the times must agree with it.
fn parse_csv_every(
    text: &str,
    path: Option<&Path>,
    app: AppInfo,
    interval: Option<(f64, &Path)>,
) -> Result<AppProfile> {
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .comment(Some(b'#'))
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    let headers = rdr
        .headers()
        .map_err(|e| ModelError::invalid(loc(path, Some(1), None), format!("cannot read header: {e}")))?
        .clone();
    let mut idx = [usize::MAX; 5];
    for (i, h) in headers.iter().enumerate() {
        match CSV_COLUMNS.iter().position(|c| *c == h) {
            Some(k) if idx[k] == usize::MAX => idx[k] = i,
            Some(_) => return Err(ModelError::invalid(loc(path, Some(1), Some(h)), "column appears twice")),
            None => {
                return Err(ModelError::invalid(
                    loc(path, Some(1), Some(h)),
                    format!("unknown column; expected {}", CSV_COLUMNS.join(",")),
                ))
            }
        }
    }
    if let Some(k) = idx.iter().position(|&i| i == usize::MAX) {
        return Err(ModelError::invalid(
            loc(path, Some(1), Some(CSV_COLUMNS[k])),
            format!("missing column; the header must have {}", CSV_COLUMNS.join(",")),
        ));
    }
    let mut times = Vec::new();
    let mut samples = Vec::new();
    let mut first_line = None;
    let mut lines = Vec::new();
    for rec in rdr.records() {
        let rec = rec.map_err(|e| {
            let line = e.position().map(|p| crate::error::csv_line_past_comments(text, p));
            ModelError::invalid(loc(path, line, None), format!("malformed CSV: {e}"))
        })?;
        let line = rec.position().map(|p| crate::error::csv_line_past_comments(text, p)).unwrap_or(0);
        first_line.get_or_insert(line);
        let mut vals = [0.0f64; 5];
        for k in 0..5 {
            let raw = rec.get(idx[k]).unwrap_or("");
            let v: f64 = raw.parse().map_err(|_| {
                ModelError::invalid(loc(path, Some(line), Some(CSV_COLUMNS[k])), format!("`{raw}` is not a number"))
            })?;
            if !v.is_finite() {
                return Err(ModelError::invalid(
                    loc(path, Some(line), Some(CSV_COLUMNS[k])),
                    format!("`{raw}` is not a finite number"),
                ));
            }
            if v < 0.0 {
                return Err(ModelError::invalid(
                    loc(path, Some(line), Some(CSV_COLUMNS[k])),
                    format!("{v} is negative"),
                ));
            }
            vals[k] = v;
        }
        times.push(vals[0]);
        lines.push(line);
        samples.push(Resources::new(vals[1], vals[2], vals[3], vals[4]));
    }
    if samples.is_empty() {
        return Err(ModelError::invalid(loc(path, Some(2), None), "profile has no data rows"));
    }
    let interval_s = match interval {
        Some((dt, meta)) => check_interval(&times, &lines, path, dt, meta)?,
        None => infer_interval(&times, &lines, path)?,
    };
    let p = AppProfile {
        app,
        interval_s,
        recorded_on: None,
        samples,
        source: Some(loc(path, first_line, None)),
        derived: Default::default(),
    };
    p.validate().map_err(|e| at_row_line(e, first_line, &lines))?;
    Ok(p)
}

/// `validate` names sample `i` at the first row's line + `i`; with comment or blank lines
/// between the rows that is another line: the row's own is put back.
fn at_row_line(e: ModelError, first: Option<u64>, lines: &[u64]) -> ModelError {
    match e {
        ModelError::Invalid { mut at, message } => {
            let row = at.line.zip(first).and_then(|(l, f)| usize::try_from(l.checked_sub(f)?).ok());
            if let Some(&own) = row.and_then(|i| lines.get(i)) {
                at.line = Some(own);
            }
            ModelError::Invalid { at, message }
        }
        other => other,
    }
}

/// How far a time may sit from its place on the grid: 1% of the interval, plus the 1 us the
/// writer's rounding can add (half a microsecond at the row, half at the row the grid is
/// measured from).
fn tolerance(dt: f64) -> f64 {
    0.01 * dt + 1e-6
}

/// The first row (index) whose time is off the grid `times[0] + i * dt`.
fn off_grid(times: &[f64], dt: f64) -> Option<usize> {
    (1..times.len()).find(|&i| (times[i] - (times[0] + dt * i as f64)).abs() > tolerance(dt))
}

/// The sampling interval of evenly spaced times (1 s for a single row). The interval is
/// measured over the whole file (first to last row), so the writer's rounding of each time to
/// the microsecond never adds up along a long file; a file spaced evenly from its first gap
/// within 1% is accepted as before.
fn infer_interval(times: &[f64], lines: &[u64], path: Option<&Path>) -> Result<f64> {
    let n = times.len();
    if n == 1 {
        return Ok(1.0);
    }
    let first = times[1] - times[0];
    if first <= 0.0 {
        return Err(ModelError::invalid(loc(path, Some(lines[1]), Some("t_s")), "t_s must increase"));
    }
    let whole = (times[n - 1] - times[0]) / (n - 1) as f64;
    if whole > 0.0 && off_grid(times, whole).is_none() {
        return Ok(rounded_if_exact(times, whole));
    }
    on_grid(times, lines, path, first, "", "`dqngpu profile import` resamples uneven logs")
}

/// `dt` when every time is on the grid `times[0] + i * dt`, else an error at the first row off
/// it; `whose` says where `dt` came from, `fix` what to do.
fn on_grid(times: &[f64], lines: &[u64], path: Option<&Path>, dt: f64, whose: &str, fix: &str) -> Result<f64> {
    match off_grid(times, dt) {
        None => Ok(dt),
        Some(i) => Err(ModelError::invalid(
            loc(path, Some(lines[i]), Some("t_s")),
            format!(
                "samples must be evenly spaced every {dt} s{whose} (expected t_s = {}, got {}); {fix}",
                times[0] + dt * i as f64,
                times[i]
            ),
        )),
    }
}

/// `dt` to the microsecond when that is exactly what [`to_csv`] would have written for these
/// times (an interval of 0.2 s measured as 0.19999999999999998), else `dt` as measured.
fn rounded_if_exact(times: &[f64], dt: f64) -> f64 {
    let us = (dt * 1e6).round() / 1e6;
    let exact = us > 0.0 && times.iter().enumerate().all(|(i, t)| (t - times[0] - csv_time(i, us)).abs() < 1e-9);
    if exact {
        us
    } else {
        dt
    }
}

/// Checks the times against the interval a sidecar gives.
fn check_interval(times: &[f64], lines: &[u64], path: Option<&Path>, dt: f64, meta: &Path) -> Result<f64> {
    let whose = format!(" (the interval_s of {})", meta.display());
    on_grid(times, lines, path, dt, &whose, "fix or remove one of them")
}

/// The time [`to_csv`] writes for row `i`: whole microseconds (`3 * 0.2` would print as
/// 0.6000000000000001).
fn csv_time(i: usize, dt: f64) -> f64 {
    (i as f64 * dt * 1e6).round() / 1e6
}

/// Writes a profile as CSV (the prior info goes in a sidecar; see [`write_profile`]).
pub fn to_csv(p: &AppProfile) -> String {
    let mut out = String::from("t_s,gpu_util_pct,gpu_mem_mib,sm_pct,pcie_mbps\n");
    for (i, s) in p.samples.iter().enumerate() {
        let t = csv_time(i, p.interval_s);
        out.push_str(&format!(
            "{},{},{},{},{}\n",
            fmt_num(t),
            fmt_num(s.gpu_util_pct),
            fmt_num(s.gpu_mem_mib),
            fmt_num(s.sm_pct),
            fmt_num(s.pcie_mbps)
        ));
    }
    out
}

fn fmt_num(v: f64) -> String {
    // Shortest round-trip form keeps files small and exact; -0 (an empty float sum) is 0.
    if v == 0.0 {
        return "0".to_string();
    }
    format!("{v}")
}

/// Parses a JSON profile.
pub fn parse_json(text: &str, path: Option<&Path>) -> Result<AppProfile> {
    // A byte-order mark, as job sets and CSV profiles skip it ("expected value at line 1").
    let text = crate::error::strip_bom(text);
    refuse_unknown_keys(text, path, &["app", "interval_s", "recorded_on", "samples"])?;
    let mut p: AppProfile = serde_json::from_str(text).map_err(|e| {
        let field = json_field_hint(&e);
        ModelError::invalid(loc(path, Some(e.line() as u64), field.as_deref()), format!("invalid profile JSON: {e}"))
    })?;
    p.source = Some(loc(path, None, None));
    p.validate().map_err(|e| match e {
        // JSON samples have no line; name the sample index instead.
        ModelError::Invalid { mut at, message } => {
            at.line = None;
            ModelError::Invalid { at, message }
        }
        other => other,
    })?;
    Ok(p)
}

fn json_field_hint(e: &serde_json::Error) -> Option<String> {
    let msg = e.to_string();
    let start = msg.find('`')?;
    let rest = &msg[start + 1..];
    let end = rest.find('`')?;
    Some(rest[..end].to_string())
}

/// The stem of a profile file's name (the app name a CSV profile without a sidecar gets).
fn stem_of(path: &Path) -> String {
    path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()
}

/// The sidecar beside a CSV profile `NAME.csv`: `NAME.meta.json`.
pub fn sidecar_path(path: &Path) -> std::path::PathBuf {
    path.with_file_name(format!("{}.meta.json", stem_of(path)))
}

/// Reads a profile file (CSV with optional `NAME.meta.json` sidecar, or JSON).
pub fn read_profile(path: &Path) -> Result<AppProfile> {
    let text = read_file(path)?;
    match ProfileFormat::from_path(path)? {
        ProfileFormat::Json => parse_json(&text, Some(path)),
        ProfileFormat::Csv => {
            let meta_path = sidecar_path(path);
            let meta = if meta_path.exists() {
                let t = read_file(&meta_path)?;
                let t = crate::error::strip_bom(&t);
                refuse_unknown_keys(t, Some(&meta_path), &SIDECAR_KEYS)?;
                serde_json::from_str::<ProfileMeta>(t).map_err(|e| {
                    ModelError::invalid(
                        loc(Some(&meta_path), Some(e.line() as u64), None),
                        format!("invalid sidecar JSON: {e}"),
                    )
                })?
            } else {
                ProfileMeta { app: AppInfo { name: stem_of(path), ..Default::default() }, ..Default::default() }
            };
            let interval = meta.interval_s.map(|dt| (dt, meta_path.as_path()));
            let mut p = parse_csv_every(&text, Some(path), meta.app, interval)?;
            p.recorded_on = meta.recorded_on;
            // The sidecar's card is checked as a JSON profile's is, against the sidecar: it
            // was attached after the checks, so `profile export` wrote a profile (memory -5
            // MiB) that it then refused to read.
            p.validate_recorded_on().map_err(|e| match e {
                ModelError::Invalid { mut at, message } => {
                    (at.path, at.line) = (Some(meta_path.clone()), None);
                    ModelError::Invalid { at, message }
                }
                other => other,
            })?;
            Ok(p)
        }
    }
}

/// A profile as JSON text (the `.json` profile format).
fn to_json(p: &AppProfile) -> String {
    serde_json::to_string_pretty(p).expect("profiles always serialise")
}

/// The file stem `--store` gives app `name`: characters other than ASCII letters, digits and
/// `-_.` become `_`, a leading dot (which would hide the file) gets a `_` before it, and a
/// final `.meta` (in any case) becomes `_meta` (`x.meta.json` is the sidecar of `x.csv` to a
/// library reader).
pub fn store_stem(name: &str) -> String {
    let mut stem: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect();
    if stem.starts_with('.') || stem.is_empty() {
        stem.insert(0, '_');
    }
    if stem.to_ascii_lowercase().ends_with(".meta") {
        let dot = stem.len() - ".meta".len();
        stem.replace_range(dot..=dot, "_");
    }
    stem
}

/// Refuses a profile file named `NAME.meta.json` (in any case): that is the name of a CSV
/// profile's sidecar, which a library reader skips (or reads as the sidecar of `NAME.csv`).
pub fn refuse_sidecar_name(path: &Path) -> Result<()> {
    let name = path.file_name().map(|n| n.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
    if name.ends_with(".meta.json") {
        return Err(ModelError::invalid(
            loc(Some(path), None, None),
            "a profile cannot be named NAME.meta.json: that is the name of the sidecar of a CSV profile NAME.csv, which a library reads as such and never as a profile; choose another name",
        ));
    }
    Ok(())
}

/// The stems of the profiles in the library directory `dir`: files ending in `.csv` or
/// `.json` in any case, as the library reads them (`BERT.CSV` takes `BERT`).
fn profile_stems(dir: &Path) -> std::collections::BTreeSet<String> {
    let Ok(rd) = std::fs::read_dir(dir) else { return Default::default() };
    rd.flatten()
        .filter_map(|e| {
            let path = e.path();
            let ext = path.extension()?.to_str()?.to_ascii_lowercase();
            (ext == "csv" || ext == "json").then(|| path.file_stem()?.to_str().map(str::to_string))?
        })
        .collect()
}

/// The names `--store` tries for app `name` in order: `STEM`, `STEM-2`, `STEM-3`, ...
fn store_names(name: &str) -> impl Iterator<Item = String> {
    let stem = store_stem(name);
    (1..=u32::MAX).map(move |n| if n == 1 { stem.clone() } else { format!("{stem}-{n}") })
}

/// Adds a profile to the library directory `dir` as `STEM.json`, or `STEM-2.json`,
/// `STEM-3.json`, ... when taken (by a `.json` or a `.csv`, extensions in any case), and
/// returns the path. The file is
/// created exclusively, so writers racing for one name never replace each other: the loser
/// takes the next free name.
pub fn store_profile(p: &AppProfile, dir: &Path) -> Result<std::path::PathBuf> {
    let text = to_json(p);
    let taken = profile_stems(dir);
    for name in store_names(&p.app.name) {
        if taken.contains(&name) {
            continue;
        }
        let path = dir.join(format!("{name}.json"));
        if write_file_new(&path, text.as_bytes())? {
            return Ok(path);
        }
    }
    Err(ModelError::invalid(
        loc(Some(dir), None, None),
        format!("no free file name for app `{}`", store_stem(&p.app.name)),
    ))
}

/// Checks, changing nothing, that [`store_profile`] can write a profile of app `app` into the
/// existing directory `dir` under the name it would take now, and returns that path: its
/// temporary file is created and removed ([`probe_write`]), so an unwritable directory or a
/// file name too long for the file system fails here, naming the path.
pub fn probe_store(app: &str, dir: &Path) -> Result<std::path::PathBuf> {
    let taken = profile_stems(dir);
    let name = store_names(app).find(|n| !taken.contains(n)).unwrap_or_else(|| store_stem(app));
    let path = dir.join(format!("{name}.json"));
    probe_write(&path)?;
    Ok(path)
}

/// Checks, changing nothing, that [`write_profile`] can write `path` (and a CSV's sidecar)
/// in its existing directory: each file's temporary file is created and removed
/// ([`probe_write`]). An error names the file.
pub fn probe_profile_write(path: &Path) -> Result<()> {
    refuse_sidecar_name(path)?;
    probe_write(path)?;
    if ProfileFormat::from_path(path)? == ProfileFormat::Csv {
        probe_write(&sidecar_path(path))?;
    }
    Ok(())
}

/// Writes a profile; CSV also writes the `NAME.meta.json` sidecar. Both atomically. A path
/// named like a sidecar is refused ([`refuse_sidecar_name`]).
pub fn write_profile(p: &AppProfile, path: &Path) -> Result<()> {
    refuse_sidecar_name(path)?;
    match ProfileFormat::from_path(path)? {
        ProfileFormat::Json => write_file_atomic(path, to_json(p).as_bytes()),
        ProfileFormat::Csv => {
            let meta =
                ProfileMeta { app: p.app.clone(), recorded_on: p.recorded_on.clone(), interval_s: Some(p.interval_s) };
            let text = serde_json::to_string_pretty(&meta).expect("metadata always serialises");
            // Both or neither: a CSV beside an old sidecar would read as another app.
            let (csv, meta_path) = (to_csv(p), sidecar_path(path));
            write_files_atomic(&[(path, csv.as_bytes()), (&meta_path, text.as_bytes())])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn info() -> AppInfo {
        AppInfo { name: "x".into(), ..Default::default() }
    }

    /// Errors name the row's own line with comment lines above or between the rows: a value
    /// that is no number, and a range checked after parsing (150% on line 5, blamed on line 4).
    #[test]
    fn csv_errors_name_the_rows_own_line_past_comments() {
        let info = || AppInfo { name: "x".into(), ..Default::default() };
        let p = Some(Path::new("p.csv"));
        let text = "t_s,gpu_util_pct,gpu_mem_mib,sm_pct,pcie_mbps\n# node-a\n0,1x0,100,5,0\n";
        let e = parse_csv(text, p, info()).unwrap_err().to_string();
        assert!(e.contains("line 3"), "{e}");
        let text = "t_s,gpu_util_pct,gpu_mem_mib,sm_pct,pcie_mbps\n0,10,100,5,0\n# c\n1,10,100,5,0\n2,150,100,5,0\n";
        let e = parse_csv(text, p, info()).unwrap_err().to_string();
        assert!(e.contains("line 5") && e.contains("gpu_util_pct"), "{e}");
    }

    #[test]
    fn csv_times_are_whole_microseconds_and_zero_has_no_sign() {
        let text = "t_s,gpu_util_pct,gpu_mem_mib,sm_pct,pcie_mbps\n0,0,0,0,0\n0.2,1,1,1,1\n0.4,1,1,1,1\n0.6,1,1,1,1\n";
        let mut p = parse_csv(text, None, info()).unwrap();
        p.samples[0].sm_pct = -0.0;
        let out = to_csv(&p);
        assert!(out.contains("\n0.6,1,1,1,1\n"), "{out}");
        assert!(out.contains("\n0,0,0,0,0\n"), "{out}");
        assert!(!out.contains("-0"), "{out}");
    }

    #[test]
    fn profile_files_with_unknown_keys_are_refused() {
        let text = "t_s,gpu_util_pct,gpu_mem_mib,sm_pct,pcie_mbps\n0,10,100,5,1\n0.5,20,200,6,2\n";
        let p = parse_csv(text, None, info()).unwrap();
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(parse_json(&json, None).unwrap().samples, p.samples);
        let typo = json.replacen('{', "{\"recorded_onn\": {},", 1);
        let e = parse_json(&typo, Some(Path::new("p.json"))).unwrap_err().to_string();
        assert!(e.contains("p.json") && e.contains("recorded_onn"), "{e}");
        // The sidecar beside a CSV profile likewise.
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.csv"), text).unwrap();
        std::fs::write(dir.path().join("a.meta.json"), r#"{"app": {"name": "a"}, "gpu": "x"}"#).unwrap();
        let e = read_profile(&dir.path().join("a.csv")).unwrap_err().to_string();
        assert!(e.contains("a.meta.json") && e.contains("gpu"), "{e}");
    }

    #[test]
    fn csv_round_trip() {
        let text = "t_s,gpu_util_pct,gpu_mem_mib,sm_pct,pcie_mbps\n0,10,100,5,1\n0.5,20,200,6,2\n";
        let p = parse_csv(text, None, info()).unwrap();
        assert_eq!(p.interval_s, 0.5);
        assert_eq!(p.samples.len(), 2);
        assert_eq!(p.solo_s(), 1.0);
        let back = parse_csv(&to_csv(&p), None, info()).unwrap();
        assert_eq!(back.samples, p.samples);
    }

    #[test]
    fn csv_errors_name_line_and_field() {
        let cases = [
            ("t_s,gpu_util_pct,gpu_mem_mib,sm_pct\n0,1,2,3\n", "pcie_mbps", "missing column"),
            (
                "t_s,gpu_util_pct,gpu_mem_mib,sm_pct,pcie_mbps\n0,1,abc,3,4\n",
                "line 2, field `gpu_mem_mib`",
                "not a number",
            ),
            (
                "t_s,gpu_util_pct,gpu_mem_mib,sm_pct,pcie_mbps\n0,1,2,3,4\n1,NaN,2,3,4\n",
                "line 3, field `gpu_util_pct`",
                "finite",
            ),
            ("t_s,gpu_util_pct,gpu_mem_mib,sm_pct,pcie_mbps\n0,1,2,-3,4\n", "line 2, field `sm_pct`", "negative"),
            ("t_s,gpu_util_pct,gpu_mem_mib,sm_pct,pcie_mbps\n", "line 2", "no data rows"),
            ("t_s,gpu_util_pct,gpu_mem_mib,sm_pct,pcie_mbps\n0,101,2,3,4\n", "gpu_util_pct", "above 100"),
            (
                "t_s,gpu_util_pct,gpu_mem_mib,sm_pct,pcie_mbps\n0,1,2,3,4\n2,1,2,3,4\n3,1,2,3,4\n",
                "line 4, field `t_s`",
                "evenly",
            ),
        ];
        for (text, want_at, want_msg) in cases {
            let e = parse_csv(text, Some(Path::new("p.csv")), info()).unwrap_err().to_string();
            assert!(e.contains("p.csv"), "{e}");
            assert!(e.contains(want_at), "want `{want_at}` in: {e}");
            assert!(e.contains(want_msg), "want `{want_msg}` in: {e}");
        }
    }

    #[test]
    fn json_round_trip_and_errors() {
        let p = AppProfile::new(info(), 2.0, vec![Resources::new(1.0, 2.0, 3.0, 4.0)]).unwrap();
        let text = serde_json::to_string(&p).unwrap();
        let back = parse_json(&text, None).unwrap();
        assert_eq!(back.samples, p.samples);
        let e = parse_json("{\"app\":{\"name\":\"a\"},\"interval_s\":1,\"samples\":[]}", Some(Path::new("a.json")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("a.json") && e.contains("samples"), "{e}");
    }

    fn steady(n: usize, dt: f64) -> AppProfile {
        let samples = (0..n).map(|i| Resources::new((i % 100) as f64, 1000.0 + i as f64, 1.5, 0.25)).collect();
        AppProfile::new(info(), dt, samples).unwrap()
    }

    #[test]
    fn a_long_csv_at_an_interval_of_no_whole_microseconds_reads_back() {
        // 30,000 rows at 0.3333333 s: each time is rounded to 1 us, the first gap alone is
        // 0.333333 and would put the last row 9 ms off (more than 1% of the interval).
        let p = steady(30_000, 0.3333333);
        let back = parse_csv(&to_csv(&p), None, info()).unwrap();
        assert!((back.interval_s - p.interval_s).abs() <= 1e-6 / 29_999.0 + 1e-15, "{}", back.interval_s);
        assert_eq!(back.samples, p.samples);
        // The file with its sidecar keeps the interval exactly.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.csv");
        write_profile(&p, &path).unwrap();
        assert_eq!(read_profile(&path).unwrap().interval_s, p.interval_s);
    }

    /// A sidecar's card (`recorded_on`) is checked as a JSON profile's is, naming the sidecar:
    /// it was attached unchecked, so `profile export` wrote a JSON profile (memory -5 MiB) that
    /// it then refused to read. A byte-order mark before a JSON profile or sidecar is skipped,
    /// as before a CSV.
    #[test]
    fn a_sidecars_card_is_checked_and_a_bom_before_json_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.csv");
        write_profile(&steady(2, 1.0), &path).unwrap();
        let meta = r#"{"app":{"name":"c"},"recorded_on":{"node":"n","gpu_name":"G","memory_mib":-5,"pcie_gbps":16}}"#;
        std::fs::write(sidecar_path(&path), meta).unwrap();
        let e = read_profile(&path).unwrap_err().to_string();
        assert!(e.contains("c.meta.json") && e.contains("recorded_on.memory_mib"), "{e}");
        std::fs::write(sidecar_path(&path), format!("\u{feff}{}", meta.replace("-5", "12288"))).unwrap();
        assert_eq!(read_profile(&path).unwrap().recorded_on.unwrap().memory_mib, 12288.0);
        let json = dir.path().join("j.json");
        write_profile(&steady(2, 1.0), &json).unwrap();
        let text = std::fs::read_to_string(&json).unwrap();
        std::fs::write(&json, format!("\u{feff}{text}")).unwrap();
        assert_eq!(read_profile(&json).unwrap().samples.len(), 2);
    }

    /// A misspelt key inside a profile's objects (`app.input_size`, `recorded_on.pcie_gbs`,
    /// `samples[0].gpu_mem_pct`) was dropped without a word and read as its default; the
    /// service's API refuses them, and so does a file now, naming the key and its line.
    #[test]
    fn unknown_keys_inside_a_profile_are_refused() {
        let good = r#"{"app":{"name":"a","input_size_mb":5},"interval_s":1,
            "recorded_on":{"node":"n","gpu_name":"G","memory_mib":12288,"pcie_gbps":16},
            "samples":[{"gpu_util_pct":50,"gpu_mem_mib":100,"sm_pct":50,"pcie_mbps":1}]}"#;
        parse_json(good, None).unwrap();
        for (from, to) in [
            ("\"input_size_mb\"", "\"input_size\""),
            ("\"pcie_gbps\"", "\"pcie_gbs\""),
            ("\"gpu_mem_mib\"", "\"gpu_mem_pct\""),
        ] {
            let e = parse_json(&good.replace(from, to), Some(Path::new("p.json"))).unwrap_err().to_string();
            assert!(e.contains("p.json") && e.contains(to.trim_matches('"')) && e.contains("unknown"), "{e}");
        }
        // The key lists are written by hand (read without building values): every key a
        // profile is written with must be among them, whatever field the types gain.
        let mut full = steady(2, 1.0);
        full.app =
            AppInfo { name: "f".into(), kind: crate::AppKind::Ml, input_size_mb: Some(1.0), params: Some("p".into()) };
        full.recorded_on =
            Some(crate::RecordedOn { node: "n".into(), gpu_name: "G".into(), memory_mib: 1.0, ..Default::default() });
        parse_json(&to_json(&full), None).unwrap();
    }

    #[test]
    fn a_one_row_csv_keeps_its_interval_in_the_sidecar() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("one.csv");
        let p = steady(1, 0.1);
        write_profile(&p, &path).unwrap();
        let back = read_profile(&path).unwrap();
        assert_eq!((back.interval_s, back.solo_s()), (p.interval_s, p.solo_s()));
        // Without the sidecar a single row cannot say its interval: 1 s, as documented.
        std::fs::remove_file(sidecar_path(&path)).unwrap();
        assert_eq!(read_profile(&path).unwrap().interval_s, 1.0);
    }

    #[test]
    fn times_that_disagree_with_the_sidecars_interval_are_refused_naming_both() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.csv");
        write_profile(&steady(4, 0.5), &path).unwrap();
        let meta = std::fs::read_to_string(sidecar_path(&path)).unwrap();
        std::fs::write(sidecar_path(&path), meta.replace("0.5", "0.25")).unwrap();
        let e = read_profile(&path).unwrap_err().to_string();
        assert!(e.contains("p.csv, line 3, field `t_s`") && e.contains("p.meta.json"), "{e}");
    }

    #[test]
    fn a_sidecar_that_cannot_be_written_leaves_neither_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.csv");
        std::fs::create_dir(sidecar_path(&path)).unwrap();
        assert!(write_profile(&steady(3, 1.0), &path).is_err());
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, [std::ffi::OsString::from("p.meta.json")], "only the directory that was there");
    }

    fn app(name: &str) -> AppProfile {
        let mut p = steady(2, 1.0);
        p.app.name = name.into();
        p
    }

    /// `x.meta.json` is the sidecar of `x.csv` to the library reader: `--store` never writes
    /// it (the profile would not be in the library, or would break the library holding `x.csv`),
    /// and `-o` refuses it.
    #[test]
    fn an_app_whose_name_ends_in_meta_is_stored_where_the_library_sees_it() {
        let d = tempfile::tempdir().unwrap();
        let path = store_profile(&app("x.meta"), d.path()).unwrap();
        assert_eq!(path.file_name().unwrap(), "x_meta.json");
        assert!(crate::library::read_dir_library(d.path()).unwrap().apps.contains_key("x.meta"));
        assert_eq!(store_stem("Y.META"), "Y_META");
        assert_eq!(store_stem(".meta"), "__meta");
        // Beside a sidecar-less x.csv.
        let d = tempfile::tempdir().unwrap();
        write_profile(&app("x"), &d.path().join("x.csv")).unwrap();
        std::fs::remove_file(d.path().join("x.meta.json")).unwrap();
        store_profile(&app("x.meta"), d.path()).unwrap();
        let lib = crate::library::read_dir_library(d.path()).unwrap();
        assert!(lib.apps.contains_key("x") && lib.apps.contains_key("x.meta"), "{:?}", lib.apps.keys());
        for name in ["p.meta.json", "P.Meta.JSON"] {
            let e = write_profile(&app("p"), &d.path().join(name)).unwrap_err().to_string();
            assert!(e.contains(name) && e.contains("sidecar"), "{e}");
            assert!(!d.path().join(name).exists());
        }
    }

    /// The library reads `BERT.CSV` (extensions in any case): the store never writes a
    /// `bert.json` beside `bert.CSV` (a directory holding both is no library).
    #[test]
    fn the_store_never_writes_a_json_twin_of_an_upper_case_csv_or_json() {
        let d = tempfile::tempdir().unwrap();
        write_profile(&app("bert"), &d.path().join("bert.CSV")).unwrap();
        std::fs::write(d.path().join("gpt.JSON"), to_json(&app("gpt"))).unwrap();
        assert_eq!(crate::library::read_dir_library(d.path()).unwrap().apps.len(), 2);
        assert_eq!(store_profile(&app("bert"), d.path()).unwrap().file_name().unwrap(), "bert-2.json");
        assert_eq!(store_profile(&app("gpt"), d.path()).unwrap().file_name().unwrap(), "gpt-2.json");
        assert_eq!(crate::library::read_dir_library(d.path()).unwrap().apps.len(), 4);
        // A stem of another case is another name.
        assert_eq!(store_profile(&app("BERT"), d.path()).unwrap().file_name().unwrap(), "BERT.json");
    }

    #[test]
    fn writers_racing_into_one_store_never_replace_each_other() {
        let dir = tempfile::tempdir().unwrap();
        let n = 24;
        let gate = std::sync::Barrier::new(n);
        let paths: Vec<_> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..n)
                .map(|k| {
                    let (gate, dir) = (&gate, dir.path());
                    s.spawn(move || {
                        let mut p = steady(2, 1.0);
                        p.app.name = "a b".into();
                        p.app.params = Some(k.to_string());
                        gate.wait();
                        (k, store_profile(&p, dir).unwrap())
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (k, path) in &paths {
            assert_eq!(read_profile(path).unwrap().app.params, Some(k.to_string()), "{}", path.display());
        }
        let mut names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        names.sort();
        assert_eq!(names.len(), n, "one file per writer, no temporaries left: {names:?}");
        assert!(names.contains(&"a_b.json".into()) && names.contains(&format!("a_b-{n}.json").into()), "{names:?}");
        // A name taken by a CSV profile is skipped too.
        std::fs::write(dir.path().join("c.csv"), "").unwrap();
        let mut p = steady(1, 1.0);
        p.app.name = "c".into();
        assert_eq!(store_profile(&p, dir.path()).unwrap(), dir.path().join("c-2.json"));
    }

    proptest! {
        #[test]
        fn csv_parser_never_panics(s in "\\PC{0,300}") {
            let _ = parse_csv(&s, None, info());
        }

        #[test]
        fn csv_parser_never_panics_on_near_valid(rows in proptest::collection::vec(proptest::collection::vec("[-0-9.eNaInf]{0,6}", 0..7), 0..8)) {
            let mut text = String::from("t_s,gpu_util_pct,gpu_mem_mib,sm_pct,pcie_mbps\n");
            for r in rows { text.push_str(&r.join(",")); text.push('\n'); }
            if let Ok(p) = parse_csv(&text, None, info()) {
                prop_assert!(p.validate().is_ok());
            }
        }

        /// What the product writes it reads back: any valid profile, as CSV alone (the interval
        /// within the times' rounding to 1 us) and with its sidecar (exactly).
        #[test]
        fn any_profile_written_as_csv_reads_back(
            n in 1usize..3000,
            log_dt in (1e-6f64).ln()..(3600f64).ln(),
            vals in proptest::collection::vec((0.0f64..=100.0, 0.0f64..143_000.0, 0.0f64..=100.0, 0.0f64..128_000.0), 1..20),
        ) {
            let dt = log_dt.exp().clamp(1e-6, 3600.0);
            let n = n.min((crate::profile::MAX_SOLO_S / dt) as usize).max(1);
            let samples = (0..n).map(|i| { let v = vals[i % vals.len()]; Resources::new(v.0, v.1, v.2, v.3) }).collect();
            let p = AppProfile::new(info(), dt, samples).unwrap();
            if n >= 2 {
                let back = parse_csv(&to_csv(&p), None, info()).unwrap();
                prop_assert!((back.interval_s - dt).abs() <= 1e-6 / (n - 1) as f64 + 1e-12 * dt, "{} vs {}", back.interval_s, dt);
                prop_assert_eq!(&back.samples, &p.samples);
            }
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("p.csv");
            write_profile(&p, &path).unwrap();
            let back = read_profile(&path).unwrap();
            prop_assert_eq!(back.interval_s, dt);
            prop_assert_eq!(&back.samples, &p.samples);
        }

        #[test]
        fn json_parser_never_panics(s in "\\PC{0,300}") {
            let _ = parse_json(&s, None);
        }
    }
}
