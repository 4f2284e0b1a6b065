//! Profile files: CSV `t_s,gpu_util_pct,gpu_mem_mib,sm_pct,pcie_mbps` (header required, with an
//! optional sidecar `NAME.meta.json` for the prior info) and JSON (the [`AppProfile`] shape).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{read_file, write_file_atomic, Location, ModelError, Result};
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
}

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
    match map.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(ModelError::invalid(
            loc(path, None, Some(k)),
            format!("unknown key; a profile file has {}", known.join(", ")),
        )),
        None => Ok(()),
    }
}

/// Parses a CSV profile. `name` is used when no sidecar gives prior info.
pub fn parse_csv(text: &str, path: Option<&Path>, app: AppInfo) -> Result<AppProfile> {
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
            let line = e.position().map(|p| crate::error::csv_line(text, p));
            ModelError::invalid(loc(path, line, None), format!("malformed CSV: {e}"))
        })?;
        let line = rec.position().map(|p| crate::error::csv_line(text, p)).unwrap_or(0);
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
    let interval_s = infer_interval(&times, &lines, path)?;
    let p = AppProfile {
        app,
        interval_s,
        recorded_on: None,
        samples,
        source: Some(loc(path, first_line, None)),
        derived: Default::default(),
    };
    p.validate()?;
    Ok(p)
}

/// The sampling interval of evenly spaced times starting at 0 (1 s for a single row).
fn infer_interval(times: &[f64], lines: &[u64], path: Option<&Path>) -> Result<f64> {
    if times.len() == 1 {
        return Ok(1.0);
    }
    let dt = times[1] - times[0];
    if dt <= 0.0 {
        return Err(ModelError::invalid(loc(path, Some(lines[1]), Some("t_s")), "t_s must increase"));
    }
    for i in 1..times.len() {
        let expect = times[0] + dt * i as f64;
        if (times[i] - expect).abs() > 0.01 * dt + 1e-6 {
            return Err(ModelError::invalid(
                loc(path, Some(lines[i]), Some("t_s")),
                format!(
                    "samples must be evenly spaced every {dt} s (expected t_s = {expect}, got {}); `dqngpu profile import` resamples uneven logs",
                    times[i]
                ),
            ));
        }
    }
    Ok(dt)
}

/// Writes a profile as CSV (the prior info goes in a sidecar; see [`write_profile`]).
pub fn to_csv(p: &AppProfile) -> String {
    let mut out = String::from("t_s,gpu_util_pct,gpu_mem_mib,sm_pct,pcie_mbps\n");
    for (i, s) in p.samples.iter().enumerate() {
        // Whole microseconds: `3 * 0.2` would print as 0.6000000000000001.
        let t = (i as f64 * p.interval_s * 1e6).round() / 1e6;
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
                refuse_unknown_keys(&t, Some(&meta_path), &["app", "recorded_on"])?;
                serde_json::from_str::<ProfileMeta>(&t).map_err(|e| {
                    ModelError::invalid(
                        loc(Some(&meta_path), Some(e.line() as u64), None),
                        format!("invalid sidecar JSON: {e}"),
                    )
                })?
            } else {
                ProfileMeta { app: AppInfo { name: stem_of(path), ..Default::default() }, recorded_on: None }
            };
            let mut p = parse_csv(&text, Some(path), meta.app)?;
            p.recorded_on = meta.recorded_on;
            Ok(p)
        }
    }
}

/// Writes a profile; CSV also writes the `NAME.meta.json` sidecar. Both atomically.
pub fn write_profile(p: &AppProfile, path: &Path) -> Result<()> {
    match ProfileFormat::from_path(path)? {
        ProfileFormat::Json => {
            let text = serde_json::to_string_pretty(p).expect("profiles always serialise");
            write_file_atomic(path, text.as_bytes())
        }
        ProfileFormat::Csv => {
            write_file_atomic(path, to_csv(p).as_bytes())?;
            let meta = ProfileMeta { app: p.app.clone(), recorded_on: p.recorded_on.clone() };
            let text = serde_json::to_string_pretty(&meta).expect("metadata always serialises");
            write_file_atomic(&sidecar_path(path), text.as_bytes())
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

        #[test]
        fn json_parser_never_panics(s in "\\PC{0,300}") {
            let _ = parse_json(&s, None);
        }
    }
}
