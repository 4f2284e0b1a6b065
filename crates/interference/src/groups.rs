//! Groups of two or more jobs measured sharing one GPU (`colocate_groups.csv`, written by
//! `bench/gpu-pairs/run.py --groups`): one row per job, `group_id` tying a group's rows
//! together, `speed` its progress rate relative to running alone in the same session. The
//! interference models are fitted on pairs, so groups of three and four test how they
//! extrapolate (docs/INTERFERENCE.md).

use std::collections::BTreeMap;
use std::path::Path;

use dqngpu_model::error::read_file;
use dqngpu_model::library::lucid::{config_key, steady_demand, SoloConfig};
use dqngpu_model::{GpuSpec, Location, ModelError, Resources};

use crate::{Interference, JobLoad};

/// Columns a groups file must have.
pub const GROUP_COLUMNS: [&str; 6] = ["group_id", "model", "dataset", "batchsize", "amp", "speed"];

/// One job of a measured group.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupJob {
    /// 1-based line in the file.
    pub line: u64,
    /// Configuration key (`ResNet18-CIFAR-10-bs64-amp0`), as the solo file's.
    pub key: String,
    /// Rate beside the group's other jobs, relative to alone.
    pub speed: f64,
}

/// A measured group: its id as written, and its jobs in file order.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// `group_id` as written.
    pub id: String,
    /// Its jobs (at least two).
    pub jobs: Vec<GroupJob>,
}

fn located(path: Option<&Path>, line: u64, field: &str, msg: String) -> ModelError {
    let at = Location { path: path.map(Path::to_path_buf), line: Some(line), field: Some(field.to_string()) };
    ModelError::invalid(at, msg)
}

/// One job's fields from a record, in [`GROUP_COLUMNS`] order via `idx`.
fn job_of(rec: &csv::StringRecord, idx: &[usize; 6], line: u64, path: Option<&Path>) -> Result<GroupJob, ModelError> {
    let field = |k: usize| rec.get(idx[k]).unwrap_or("");
    let fail = |k: usize, what: &str| located(path, line, GROUP_COLUMNS[k], format!("`{}` {what}", field(k)));
    for k in [0, 1, 2] {
        if field(k).is_empty() {
            return Err(located(path, line, GROUP_COLUMNS[k], "empty value".into()));
        }
    }
    let batch: u32 = field(3).parse().ok().filter(|b| *b > 0).ok_or_else(|| fail(3, "is not a positive integer"))?;
    let amp: u8 = match field(4) {
        "0" => 0,
        "1" => 1,
        _ => return Err(fail(4, "is not 0 or 1")),
    };
    let speed: f64 = field(5).parse().map_err(|_| fail(5, "is not a number"))?;
    if !(speed.is_finite() && speed > 0.0) {
        return Err(fail(5, "is not a positive, finite speed"));
    }
    Ok(GroupJob { line, key: config_key(field(1), field(2), batch, amp), speed })
}

/// Parses a groups CSV; groups keep the order their ids first appear in. Errors name the file,
/// line and field; a group of one job is an error (it measures no sharing).
pub fn parse_groups_csv(text: &str, path: Option<&Path>) -> Result<Vec<Group>, ModelError> {
    let mut rdr = csv::ReaderBuilder::new().trim(csv::Trim::All).from_reader(text.as_bytes());
    let headers = rdr.headers().map_err(|e| located(path, 1, "header", format!("cannot read header: {e}")))?.clone();
    let mut idx = [0usize; 6];
    for (slot, name) in idx.iter_mut().zip(GROUP_COLUMNS) {
        *slot = headers
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| located(path, 1, name, format!("missing column; required: {}", GROUP_COLUMNS.join(","))))?;
    }
    let mut groups: Vec<Group> = Vec::new();
    for rec in rdr.records() {
        let rec = rec.map_err(|e| {
            let line = e.position().map_or(0, |p| dqngpu_model::error::csv_line(text, p));
            located(path, line, "row", format!("malformed CSV: {e}"))
        })?;
        let line = rec.position().map_or(0, |p| dqngpu_model::error::csv_line(text, p));
        let job = job_of(&rec, &idx, line, path)?;
        let id = rec.get(idx[0]).unwrap_or("");
        match groups.iter_mut().find(|g| g.id == id) {
            Some(g) => g.jobs.push(job),
            None => groups.push(Group { id: id.to_string(), jobs: vec![job] }),
        }
    }
    if groups.is_empty() {
        return Err(located(path, 2, "row", "no data rows".into()));
    }
    if let Some(g) = groups.iter().find(|g| g.jobs.len() < 2) {
        return Err(located(path, g.jobs[0].line, "group_id", format!("group `{}` has one job; a group shares", g.id)));
    }
    Ok(groups)
}

/// Reads and parses a groups file.
pub fn read_groups(path: &Path) -> Result<Vec<Group>, ModelError> {
    parse_groups_csv(&read_file(path)?, Some(path))
}

/// Each job's steady demand, from the solo configuration with its key; an error names the job's
/// line when the solo file lacks it.
pub fn demands(group: &Group, solo: &[SoloConfig]) -> Result<Vec<Resources>, ModelError> {
    group
        .jobs
        .iter()
        .map(|j| {
            solo.iter().find(|c| c.key() == j.key).map(steady_demand).ok_or_else(|| {
                ModelError::invalid(
                    Location { path: None, line: Some(j.line), field: Some("model".into()) },
                    format!("{} has no row in the solo file", j.key),
                )
            })
        })
        .collect()
}

/// `model`'s predicted speed of each job of `group` on `gpu`.
pub fn predict_group(model: &dyn Interference, gpu: &GpuSpec, group: &Group, demands: &[Resources]) -> Vec<f64> {
    let jobs: Vec<JobLoad<'_>> =
        group.jobs.iter().zip(demands).map(|(j, d)| JobLoad { app: &j.key, demand: d }).collect();
    let mut rates = vec![1.0; jobs.len()];
    model.rates(gpu, &jobs, &mut rates);
    rates
}

/// MAPE (percent) of `predict`'s speeds by group size: size -> (MAPE, jobs).
pub fn mape_by_size(
    groups: &[Group],
    solo: &[SoloConfig],
    mut predict: impl FnMut(&Group, &[Resources]) -> Vec<f64>,
) -> Result<BTreeMap<usize, (f64, usize)>, ModelError> {
    let mut sums: BTreeMap<usize, (f64, usize)> = BTreeMap::new();
    for g in groups {
        let d = demands(g, solo)?;
        let entry = sums.entry(g.jobs.len()).or_insert((0.0, 0));
        for (p, j) in predict(g, &d).iter().zip(&g.jobs) {
            entry.0 += (p - j.speed).abs() / j.speed;
            entry.1 += 1;
        }
    }
    Ok(sums.into_iter().map(|(size, (sum, n))| (size, (100.0 * sum / n as f64, n))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibrate::lucid_gpu;
    use dqngpu_model::library::lucid::parse_solo_csv;
    use proptest::prelude::*;

    const HEADER: &str = "group_id,size,model,dataset,batchsize,amp,speed,gpu_util,gmem_util,gmem\n";

    #[test]
    fn groups_gather_their_rows_and_bad_rows_are_named() {
        let text = format!(
            "{HEADER}0,2,A,X,32,0,0.5,1,1,1\n1,2,B,X,8,1,0.9,1,1,1\n0,2,B,X,8,1,0.7,1,1,1\n1,2,A,X,32,0,0.8,1,1,1\n"
        );
        let g = parse_groups_csv(&text, None).unwrap();
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].jobs.iter().map(|j| j.key.as_str()).collect::<Vec<_>>(), ["A-X-bs32-amp0", "B-X-bs8-amp1"]);
        assert_eq!((g[0].jobs[1].speed, g[0].jobs[1].line), (0.7, 4));
        let bad = parse_groups_csv(&format!("{HEADER}0,2,A,X,32,0,0.5,1,1,1\n0,2,A,X,32,2,0.5,1,1,1\n"), None);
        let msg = bad.unwrap_err().to_string();
        assert!(msg.contains("line 3") && msg.contains("amp") && msg.contains("`2`"), "{msg}");
        let lone = parse_groups_csv(&format!("{HEADER}0,2,A,X,32,0,0.5,1,1,1\n"), None).unwrap_err().to_string();
        assert!(lone.contains("one job"), "{lone}");
        let missing = parse_groups_csv("group_id,model\n0,A\n", None).unwrap_err().to_string();
        assert!(missing.contains("dataset") && missing.contains("missing column"), "{missing}");
    }

    #[test]
    fn a_job_without_a_solo_row_is_an_error_naming_it() {
        let g = parse_groups_csv(&format!("{HEADER}0,2,A,X,32,0,0.5,1,1,1\n0,2,C,X,32,0,0.5,1,1,1\n"), None).unwrap();
        let solo = parse_solo_csv("model,dataset,batchsize,amp,gpu_util,gmem\nA,X,32,0,50,1000\n", None).unwrap();
        let e = demands(&g[0], &solo).unwrap_err().to_string();
        assert!(e.contains("C-X-bs32-amp0") && e.contains("line 3"), "{e}");
    }

    /// The H100 groups in the repository (measured 2026-11-27): the H100 fit, made from pairs
    /// only, predicts the held-out triples and quads better than fair sharing and than the
    /// RTX 3090 (Lucid) fit. docs/INTERFERENCE.md gives the figures.
    #[test]
    fn the_h100_fit_extrapolates_to_the_measured_triples_and_quads() {
        let groups = parse_groups_csv(include_str!("../../../data/gpu-groups-h100/colocate_groups.csv"), None).unwrap();
        let solo = parse_solo_csv(include_str!("../../../data/gpu-groups-h100/solo_profiles.csv"), None).unwrap();
        let gpu = lucid_gpu().unwrap();
        let h100 = crate::by_name("contention-h100").unwrap();
        let lucid = crate::by_name("contention").unwrap();
        let fitted = mape_by_size(&groups, &solo, |g, d| predict_group(h100.as_ref(), &gpu, g, d)).unwrap();
        let lucid_fit = mape_by_size(&groups, &solo, |g, d| predict_group(lucid.as_ref(), &gpu, g, d)).unwrap();
        let fair = mape_by_size(&groups, &solo, |_, d| vec![crate::calibrate::fair_share_rate(d); d.len()]).unwrap();
        for size in [3, 4] {
            let (f, n) = fitted[&size];
            assert!(n >= 8, "size {size}: {n} jobs");
            assert!(f < fair[&size].0 && f < lucid_fit[&size].0, "size {size}: {fitted:?} {fair:?} {lucid_fit:?}");
        }
    }

    proptest! {
        #[test]
        fn groups_parser_never_panics(s in "\\PC{0,300}") {
            let _ = parse_groups_csv(&s, None);
        }

        #[test]
        fn groups_parser_never_panics_near_valid(rows in proptest::collection::vec(proptest::collection::vec("[-0-9.aNI]{0,4}", 0..11), 0..6)) {
            let mut text = String::from(HEADER);
            for r in rows { text.push_str(&r.join(",")); text.push('\n'); }
            if let Ok(groups) = parse_groups_csv(&text, None) {
                for g in &groups {
                    prop_assert!(g.jobs.len() >= 2);
                    for j in &g.jobs { prop_assert!(j.speed > 0.0 && j.speed.is_finite()); }
                }
            }
        }
    }
}
