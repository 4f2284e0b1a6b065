//! Jobs and job-set files (`id,app,submit_s` CSV or JSON), so the same set replays anywhere.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{read_file, write_file_atomic, Location, ModelError, Result};

/// A job's identifier, unique within a job set or a service.
pub type JobId = u64;

/// The thesis's five workload classes (Section V.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkloadClass {
    /// Average GPU utilisation >= 40%.
    GpuHeavy,
    /// Average GPU utilisation < 40%.
    GpuLight,
    /// Average GPU memory >= 50% of the card.
    MemHeavy,
    /// Average GPU memory < 50% of the card.
    MemLight,
    /// Every app.
    Random,
}

impl WorkloadClass {
    /// All five, in the thesis's order.
    pub const ALL: [WorkloadClass; 5] = [
        WorkloadClass::GpuHeavy,
        WorkloadClass::GpuLight,
        WorkloadClass::MemHeavy,
        WorkloadClass::MemLight,
        WorkloadClass::Random,
    ];

    /// The CLI spelling.
    pub fn name(self) -> &'static str {
        match self {
            WorkloadClass::GpuHeavy => "gpu_heavy",
            WorkloadClass::GpuLight => "gpu_light",
            WorkloadClass::MemHeavy => "mem_heavy",
            WorkloadClass::MemLight => "mem_light",
            WorkloadClass::Random => "random",
        }
    }
}

impl std::fmt::Display for WorkloadClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for WorkloadClass {
    type Err = ModelError;
    fn from_str(s: &str) -> Result<Self> {
        let l = s.trim().to_ascii_lowercase().replace('-', "_");
        let alias = match l.as_str() {
            "gpu_memory_heavy" => "mem_heavy",
            "gpu_memory_light" => "mem_light",
            other => other,
        };
        WorkloadClass::ALL.into_iter().find(|c| c.name() == alias).ok_or_else(|| ModelError::UnknownName {
            what: "workload class",
            name: s.to_string(),
            valid: WorkloadClass::ALL.iter().map(|c| c.name().to_string()).collect(),
        })
    }
}
/// The latest a job may be submitted, s (about 31.7 years): past it a job's few hundred
/// seconds are lost in the clock's rounding (at 10^18 s an f64 steps by 128 s), so its
/// completion time, and every metric over it, would be wrong.
pub const MAX_SUBMIT_S: f64 = 1e9;

/// One job of a job set: an app (a key of the library) submitted at a time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    /// Identifier.
    pub id: JobId,
    /// App name (library key).
    pub app: String,
    /// Submission time, s.
    #[serde(default)]
    pub submit_s: f64,
}

/// A set of jobs, with where it came from. Unknown keys are refused (a misspelt `submit_s`
/// would otherwise submit every job at 0).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSet {
    /// Library the apps come from, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library: Option<String>,
    /// Workload class it was drawn from, when drawn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<WorkloadClass>,
    /// Seed it was drawn with, when drawn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// The jobs.
    pub jobs: Vec<JobSpec>,
}

/// The provenance a job CSV's leading comment lines record (`# library: X`, `# class: C`,
/// `# seed: N`, written by [`JobSet::to_csv`]); other comments are free text.
type Provenance = (Option<String>, Option<WorkloadClass>, Option<u64>);

fn csv_provenance(text: &str, path: Option<&Path>) -> Result<Provenance> {
    let (mut library, mut class, mut seed) = (None, None, None);
    let body = crate::error::strip_bom(text);
    for (k, line) in body.lines().enumerate().take_while(|(_, l)| l.trim_start().starts_with('#')) {
        let at = |field: &str| Location {
            path: path.map(Path::to_path_buf),
            line: Some(k as u64 + 1),
            field: Some(field.to_string()),
        };
        let Some((key, value)) = line.trim_start().trim_start_matches('#').split_once(':') else { continue };
        let value = value.trim();
        match key.trim() {
            "library" if !value.is_empty() => library = Some(value.to_string()),
            "class" => {
                class = Some(
                    value
                        .parse()
                        .map_err(|_| ModelError::invalid(at("class"), format!("`{value}` is not a workload class")))?,
                )
            }
            "seed" => {
                seed = Some(value.parse().map_err(|_| {
                    ModelError::invalid(at("seed"), format!("`{value}` is not a seed (a non-negative integer)"))
                })?)
            }
            _ => {}
        }
    }
    Ok((library, class, seed))
}

impl JobSet {
    /// A job set with no provenance.
    pub fn new(jobs: Vec<JobSpec>) -> Self {
        JobSet { library: None, class: None, seed: None, jobs }
    }

    /// Checks ids are unique and times within 0..=[`MAX_SUBMIT_S`].
    pub fn validate(&self, path: Option<&Path>) -> Result<()> {
        let mut seen = std::collections::HashSet::new();
        for (i, j) in self.jobs.iter().enumerate() {
            let at = |f: &str| Location {
                path: path.map(Path::to_path_buf),
                line: None,
                field: Some(format!("jobs[{i}].{f}")),
            };
            if !seen.insert(j.id) {
                return Err(ModelError::invalid(at("id"), format!("job id {} appears twice", j.id)));
            }
            if !(j.submit_s.is_finite() && (0.0..=MAX_SUBMIT_S).contains(&j.submit_s)) {
                return Err(ModelError::invalid(
                    at("submit_s"),
                    format!("{:?} is not a time from 0 to {MAX_SUBMIT_S:?} s", j.submit_s),
                ));
            }
            if j.app.trim().is_empty() {
                return Err(ModelError::invalid(at("app"), "app name is empty"));
            }
        }
        if self.jobs.is_empty() {
            return Err(ModelError::invalid(
                Location { path: path.map(Path::to_path_buf), line: None, field: Some("jobs".into()) },
                "job set has no jobs",
            ));
        }
        Ok(())
    }

    /// Parses CSV `id,app,submit_s` (header required; `submit_s` optional, default 0).
    pub fn parse_csv(text: &str, path: Option<&Path>) -> Result<Self> {
        let at = |line: Option<u64>, field: Option<&str>| Location {
            path: path.map(Path::to_path_buf),
            line,
            field: field.map(str::to_string),
        };
        let mut rdr = csv::ReaderBuilder::new().comment(Some(b'#')).trim(csv::Trim::All).from_reader(text.as_bytes());
        let headers = rdr
            .headers()
            .map_err(|e| ModelError::invalid(at(Some(1), None), format!("cannot read header: {e}")))?
            .clone();
        let col = |name: &str| headers.iter().position(|h| h == name);
        for (k, h) in headers.iter().enumerate() {
            if !["id", "app", "submit_s"].contains(&h) {
                return Err(ModelError::invalid(at(Some(1), Some(h)), "unknown column; expected id,app,submit_s"));
            }
            if col(h) != Some(k) {
                return Err(ModelError::invalid(at(Some(1), Some(h)), "the column appears twice"));
            }
        }
        let (id_c, app_c) = match (col("id"), col("app")) {
            (Some(a), Some(b)) => (a, b),
            (None, _) => return Err(ModelError::invalid(at(Some(1), Some("id")), "missing column")),
            (_, None) => return Err(ModelError::invalid(at(Some(1), Some("app")), "missing column")),
        };
        let sub_c = col("submit_s");
        let provenance = csv_provenance(text, path)?;
        let mut jobs = Vec::new();
        let mut lines = Vec::new();
        for rec in rdr.records() {
            let rec = rec.map_err(|e| {
                ModelError::invalid(
                    at(e.position().map(|p| crate::error::csv_line_past_comments(text, p)), None),
                    format!("malformed CSV: {e}"),
                )
            })?;
            let line = rec.position().map(|p| crate::error::csv_line_past_comments(text, p));
            let raw_id = rec.get(id_c).unwrap_or("");
            let id: JobId = raw_id.parse().map_err(|_| {
                ModelError::invalid(
                    at(line, Some("id")),
                    format!("`{raw_id}` is not a job id (a non-negative integer)"),
                )
            })?;
            let app = rec.get(app_c).unwrap_or("").to_string();
            let submit_s = match sub_c.map(|c| rec.get(c).unwrap_or("")) {
                None | Some("") => 0.0,
                Some(raw) => {
                    // Its range is `validate`'s, below (its errors are pointed at this line).
                    raw.parse().map_err(|_| {
                        ModelError::invalid(at(line, Some("submit_s")), format!("`{raw}` is not a number"))
                    })?
                }
            };
            if app.is_empty() {
                return Err(ModelError::invalid(at(line, Some("app")), "app name is empty"));
            }
            lines.push(line);
            jobs.push(JobSpec { id, app, submit_s });
        }
        let (library, class, seed) = provenance;
        let set = JobSet { library, class, seed, jobs };
        set.validate(path).map_err(|e| match e {
            // Point at the CSV line rather than the JSON-style index.
            ModelError::Invalid { at: a, message } => {
                let idx = a
                    .field
                    .as_deref()
                    .and_then(|f| f.strip_prefix("jobs["))
                    .and_then(|f| f.split(']').next())
                    .and_then(|n| n.parse::<usize>().ok());
                let line = idx.and_then(|i| lines.get(i).copied().flatten()).or(a.line);
                let field = a.field.as_deref().and_then(|f| f.rsplit('.').next()).map(str::to_string).or(a.field);
                ModelError::Invalid { at: Location { path: a.path, line, field }, message }
            }
            other => other,
        })?;
        Ok(set)
    }

    /// Parses the JSON form (a UTF-8 byte-order mark before it is skipped, as CSV's is).
    pub fn parse_json(text: &str, path: Option<&Path>) -> Result<Self> {
        let text = crate::error::strip_bom(text);
        let set: JobSet = serde_json::from_str(text).map_err(|e| {
            ModelError::invalid(
                Location { path: path.map(Path::to_path_buf), line: Some(e.line() as u64), field: None },
                format!("invalid job set JSON: {e}"),
            )
        })?;
        set.validate(path)?;
        Ok(set)
    }

    /// Reads a job-set file: `.csv` is CSV, `.json` JSON; any other name is JSON when its text
    /// begins with `{`, else CSV.
    pub fn read(path: &Path) -> Result<Self> {
        let text = read_file(path)?;
        let ext = |x: &str| path.extension().is_some_and(|e| e.eq_ignore_ascii_case(x));
        let json = ext("json") || (!ext("csv") && text.trim_start_matches('\u{feff}').trim_start().starts_with('{'));
        if json {
            Self::parse_json(&text, Some(path))
        } else {
            Self::parse_csv(&text, Some(path))
        }
    }

    /// The CSV form (an app name with a comma or a quote is quoted, so it reads back), after
    /// `# library: ...`, `# class: ...` and `# seed: ...` comment lines for what is known, so
    /// that a CSV replays as its JSON does.
    pub fn to_csv(&self) -> String {
        let mut head = String::new();
        let lines = [
            ("library", self.library.clone()),
            ("class", self.class.map(|c| c.name().to_string())),
            ("seed", self.seed.map(|s| s.to_string())),
        ];
        for (key, value) in lines {
            if let Some(v) = value.filter(|v| !v.contains(['\n', '\r'])) {
                head.push_str(&format!("# {key}: {v}\n"));
            }
        }
        let mut w = csv::Writer::from_writer(Vec::new());
        let rows = std::iter::once(["id".to_string(), "app".into(), "submit_s".into()])
            .chain(self.jobs.iter().map(|j| [j.id.to_string(), j.app.clone(), j.submit_s.to_string()]));
        for row in rows {
            // Writing to memory cannot fail.
            let _ = w.write_record(&row);
        }
        head + &w.into_inner().map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default()
    }

    /// Writes the set (`.csv` or JSON by extension), atomically.
    pub fn write(&self, path: &Path) -> Result<()> {
        let text = if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("csv")) {
            self.to_csv()
        } else {
            serde_json::to_string_pretty(self).expect("job sets always serialise")
        };
        write_file_atomic(path, text.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn csv_and_json_round_trip() {
        let set = JobSet::parse_csv("id,app,submit_s\n0,vgg16,0\n1,alexnet,2.5\n", None).unwrap();
        assert_eq!(set.jobs[1].submit_s, 2.5);
        assert_eq!(JobSet::parse_csv(&set.to_csv(), None).unwrap(), set);
        let json = serde_json::to_string(&set).unwrap();
        assert_eq!(JobSet::parse_json(&json, None).unwrap(), set);
    }

    #[test]
    fn a_csv_keeps_the_library_class_and_seed_as_json_does() {
        let mut set = JobSet::parse_csv("id,app,submit_s\n0,gen9-19,0\n1,gen9-3,2.5\n", None).unwrap();
        (set.library, set.class, set.seed) = (Some("generated:9:40".into()), Some(WorkloadClass::GpuHeavy), Some(6));
        let text = set.to_csv();
        assert!(text.starts_with("# library: generated:9:40\n# class: gpu_heavy\n# seed: 6\nid,app"), "{text}");
        assert_eq!(JobSet::parse_csv(&text, None).unwrap(), set);
        // Other comments are free text; a recorded seed that is no seed is named with its line.
        let free = "# drawn by hand\n# note: none\nid,app\n0,vgg16\n";
        assert_eq!(JobSet::parse_csv(free, None).unwrap().seed, None);
        let e = JobSet::parse_csv("# library: thesis\n# seed: six\nid,app\n0,vgg16\n", Some(Path::new("j.csv")));
        let e = e.unwrap_err().to_string();
        assert!(e.contains("j.csv, line 2, field `seed`") && e.contains("six"), "{e}");
    }

    #[test]
    fn odd_app_names_round_trip_and_nonsense_keys_or_columns_are_refused() {
        let set = JobSet::new(vec![
            JobSpec { id: 0, app: "a,b".into(), submit_s: 0.0 },
            JobSpec { id: 1, app: "say \"hi\"".into(), submit_s: 1.5 },
        ]);
        assert_eq!(JobSet::parse_csv(&set.to_csv(), None).unwrap(), set);
        let p = Some(Path::new("jobs.json"));
        // A misspelt key would submit the job at 0 without a word.
        let e = JobSet::parse_json(r#"{"jobs": [{"id": 1, "app": "alexnet", "submit": 500}]}"#, p).unwrap_err();
        assert!(e.to_string().contains("jobs.json") && e.to_string().contains("submit"), "{e}");
        assert!(JobSet::parse_json(r#"{"jobs": [], "jobz": 1}"#, p).unwrap_err().to_string().contains("jobz"));
        let e = JobSet::parse_csv("id,app,submit_s,id\n0,a,0,1\n", Some(Path::new("j.csv"))).unwrap_err().to_string();
        assert!(e.contains("line 1, field `id`") && e.contains("twice"), "{e}");
        // A byte-order mark is skipped in JSON as in CSV.
        let json = format!("\u{feff}{}", serde_json::to_string(&set).unwrap());
        assert_eq!(JobSet::parse_json(&json, None).unwrap(), set);
        // A file named neither .csv nor .json is read by its text.
        let dir = tempfile::tempdir().unwrap();
        let txt = dir.path().join("jobs.txt");
        std::fs::write(&txt, set.to_csv()).unwrap();
        assert_eq!(JobSet::read(&txt).unwrap(), set);
        std::fs::write(&txt, serde_json::to_string(&set).unwrap()).unwrap();
        assert_eq!(JobSet::read(&txt).unwrap(), set);
    }

    #[test]
    fn csv_errors_name_the_same_line_in_windows_files() {
        let p = Some(Path::new("jobs.csv"));
        for (text, line) in [
            ("id,app,submit_s\n0,a,0\n1,a,NaN\n", "line 3"),
            ("id,app,submit_s\r\n0,a,0\r\n1,a,NaN\r\n", "line 3"),
            ("id,app,submit_s\r\n0,a,0\r\n\r\n\r\n1,a,NaN\r\n", "line 5"),
            ("id,app,submit_s\n\n0,a,0\n1,a,NaN\n", "line 4"),
            // Comment lines count too (the row after one was blamed on the comment's line).
            ("id,app,submit_s\n# a note\n0,a,0\n# two\n# notes\n1,a,NaN\n", "line 6"),
            ("id,app,submit_s\r\n0,a,0\r\n# note\r\n\r\n1,a,NaN\r\n", "line 5"),
        ] {
            let e = JobSet::parse_csv(text, p).unwrap_err().to_string();
            assert!(e.contains(&format!("jobs.csv, {line}, field `submit_s`")), "{text:?}: {e}");
        }
    }

    #[test]
    fn csv_errors_name_line_and_field() {
        let p = Some(Path::new("jobs.csv"));
        let e = JobSet::parse_csv("id,app\n0,a\n0,b\n", p).unwrap_err().to_string();
        assert!(e.contains("jobs.csv, line 3, field `id`") && e.contains("twice"), "{e}");
        let e = JobSet::parse_csv("id,app,submit_s\n0,a,NaN\n", p).unwrap_err().to_string();
        assert!(e.contains("line 2, field `submit_s`"), "{e}");
        // Past the latest submission time a job's seconds are lost in the clock's rounding.
        let e = JobSet::parse_csv("id,app,submit_s\n0,a,1e18\n", p).unwrap_err().to_string();
        assert!(e.contains("line 2, field `submit_s`") && e.contains("1000000000"), "{e}");
        let mut late = JobSet::parse_csv("id,app,submit_s\n0,a,1e9\n", p).unwrap();
        assert!(late.validate(None).is_ok(), "the limit itself is a valid time");
        late.jobs[0].submit_s = 1e300;
        let e = late.validate(None).unwrap_err().to_string();
        assert!(e.contains("jobs[0].submit_s"), "{e}");
        let e = JobSet::parse_csv("id,submit_s\n0,1\n", p).unwrap_err().to_string();
        assert!(e.contains("`app`") && e.contains("missing"), "{e}");
        let e = JobSet::parse_csv("id,app\n", p).unwrap_err().to_string();
        assert!(e.contains("no jobs"), "{e}");
    }

    #[test]
    fn class_names() {
        assert_eq!("gpu_memory_light".parse::<WorkloadClass>().unwrap(), WorkloadClass::MemLight);
        let e = "heavy".parse::<WorkloadClass>().unwrap_err();
        assert!(e.is_usage() && e.to_string().contains("gpu_heavy"));
    }

    proptest! {
        #[test]
        fn job_parsers_never_panic(s in "\\PC{0,200}") {
            let _ = JobSet::parse_csv(&s, None);
            let _ = JobSet::parse_json(&s, None);
        }
    }
}
