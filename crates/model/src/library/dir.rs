//! A directory of profile files as a library: `NAME.csv` (with optional `NAME.meta.json`) or
//! `NAME.json`. Each profile is keyed by its app name, the name inside the file (a CSV without
//! a sidecar is named by its file stem), so that `--store`'s file names (`a b` stored as
//! `a_b.json`) never decide which app a job runs. An app with several profiles (input sizes,
//! GPUs) is keyed by each file's stem instead, and a job must name one of them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::AppLibrary;
use crate::error::{Location, ModelError, Result};
use crate::format::read_profile;
use crate::profile::AppProfile;

fn at(path: &Path) -> Location {
    Location { path: Some(path.to_path_buf()), ..Default::default() }
}

fn stem(path: &Path) -> String {
    path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()
}

/// Reads every profile in `dir`; any bad file fails the whole read, naming the file. Two
/// files that would answer to one key are an error naming both.
pub fn read_dir_library(dir: &Path) -> Result<AppLibrary> {
    let io = |source| ModelError::Io { path: dir.to_path_buf(), source };
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .map_err(io)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            // Extensions in any case, as `ProfileFormat::from_path` reads them (`BERT.CSV` was
            // skipped without a word).
            let n = p.file_name().map(|n| n.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
            !n.starts_with('.') && !n.ends_with(".meta.json") && (n.ends_with(".csv") || n.ends_with(".json"))
        })
        .collect();
    paths.sort();
    let mut by_stem: BTreeMap<String, &PathBuf> = BTreeMap::new();
    for p in &paths {
        if let Some(other) = by_stem.insert(stem(p), p) {
            return Err(ModelError::invalid(
                at(p),
                format!("`{}` has both a .csv and a .json profile; keep one", other.display()),
            ));
        }
    }
    let mut profiles = Vec::with_capacity(paths.len());
    for p in paths {
        let profile = read_profile(&p)?;
        profiles.push((p, profile));
    }
    let mut apps = BTreeMap::new();
    let mut files: BTreeMap<String, PathBuf> = BTreeMap::new();
    for (key, path, profile) in keyed(profiles) {
        if let Some(other) = files.get(&key) {
            return Err(ModelError::invalid(
                at(&path),
                format!("answers to app `{key}` as {} does; rename one file or change its app name", other.display()),
            ));
        }
        files.insert(key.clone(), path);
        apps.insert(key, Arc::new(profile));
    }
    if apps.is_empty() {
        return Err(ModelError::invalid(at(dir), "no profile files (*.csv, *.json) in this directory"));
    }
    let reference = apps
        .values()
        .find_map(|p| p.recorded_on.as_ref())
        .and_then(|r| crate::gpu::find_by_name(&r.gpu_name, Some(r.memory_mib)));
    Ok(AppLibrary::with_derived_classes(dir.display().to_string(), apps, reference))
}

/// Each profile's key: its app name, or its file stem where several files share the name.
fn keyed(profiles: Vec<(PathBuf, AppProfile)>) -> Vec<(String, PathBuf, AppProfile)> {
    let mut count: BTreeMap<String, usize> = BTreeMap::new();
    for (_, p) in &profiles {
        *count.entry(p.app.name.clone()).or_default() += 1;
    }
    profiles
        .into_iter()
        .map(|(path, p)| {
            let key = if count.get(&p.app.name).copied().unwrap_or(0) > 1 { stem(&path) } else { p.app.name.clone() };
            (key, path, p)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{store_profile, write_profile};
    use crate::{AppInfo, Resources};

    fn profile(app: &str, mem: f64) -> AppProfile {
        let info = AppInfo { name: app.into(), ..Default::default() };
        AppProfile::new(info, 1.0, vec![Resources::new(50.0, mem, 40.0, 0.0)]).unwrap()
    }

    #[test]
    fn profiles_are_keyed_by_the_app_name_inside_the_file_not_the_stored_file_name() {
        let d = tempfile::tempdir().unwrap();
        // `a b` is stored as a_b.json; a later app `a_b` as a_b-2.json.
        assert_eq!(store_profile(&profile("a b", 100.0), d.path()).unwrap(), d.path().join("a_b.json"));
        assert_eq!(store_profile(&profile("a_b", 200.0), d.path()).unwrap(), d.path().join("a_b-2.json"));
        let lib = read_dir_library(d.path()).unwrap();
        assert_eq!(lib.apps.keys().collect::<Vec<_>>(), ["a b", "a_b"]);
        for app in ["a b", "a_b"] {
            assert_eq!(lib.get(app).unwrap().app.name, app);
        }
    }

    /// Extensions are read in any case, as a single profile file's are (`BERT.JSON` was
    /// skipped without a word, and `profile import -o W.CSV` wrote a file its library missed).
    #[test]
    fn profiles_with_upper_case_extensions_are_read() {
        let d = tempfile::tempdir().unwrap();
        write_profile(&profile("bert", 100.0), &d.path().join("BERT.JSON")).unwrap();
        write_profile(&profile("gpt", 100.0), &d.path().join("gpt.json")).unwrap();
        let lib = read_dir_library(d.path()).unwrap();
        assert_eq!(lib.apps.keys().collect::<Vec<_>>(), ["bert", "gpt"]);
    }

    #[test]
    fn an_app_with_several_profiles_is_keyed_by_file_and_asking_for_it_by_name_lists_them() {
        let d = tempfile::tempdir().unwrap();
        for stem in ["bert-a100", "bert-h100"] {
            write_profile(&profile("bert", 100.0), &d.path().join(format!("{stem}.json"))).unwrap();
        }
        write_profile(&profile("gpt", 100.0), &d.path().join("x.json")).unwrap();
        let lib = read_dir_library(d.path()).unwrap();
        assert_eq!(lib.apps.keys().collect::<Vec<_>>(), ["bert-a100", "bert-h100", "gpt"]);
        let e = lib.get("bert").unwrap_err();
        assert!(e.is_usage() && e.to_string().contains("2 profiles (bert-a100, bert-h100)"), "{e}");
        assert!(lib.get("x").is_err(), "a unique app answers to its name, not its file stem");
    }

    #[test]
    fn memory_classes_are_judged_against_the_card_each_profile_was_recorded_on() {
        let d = tempfile::tempdir().unwrap();
        let on =
            |name: &str, mib: f64| crate::RecordedOn { gpu_name: name.into(), memory_mib: mib, ..Default::default() };
        // 30,000 MiB is most of an A100 40GB but less than half of an H200.
        let mut small = profile("a100-job", 30_000.0);
        small.recorded_on = Some(on("NVIDIA A100-SXM4-40GB", 40960.0));
        let mut big = profile("h200-job", 30_000.0);
        big.recorded_on = Some(on("NVIDIA H200", 143_771.0));
        for p in [&small, &big] {
            write_profile(p, &d.path().join(format!("{}.json", p.app.name))).unwrap();
        }
        let lib = read_dir_library(d.path()).unwrap();
        let members = |c| lib.classes.get(&c).cloned().unwrap_or_default();
        assert_eq!(members(crate::WorkloadClass::MemHeavy), ["a100-job"]);
        assert_eq!(members(crate::WorkloadClass::MemLight), ["h200-job"]);
        // The card's name as the driver writes it finds its catalogue entry.
        assert_eq!(lib.reference_gpu.map(|g| g.key).as_deref(), Some("a100-40"));
    }

    #[test]
    fn two_files_answering_to_one_key_are_refused_naming_both() {
        let d = tempfile::tempdir().unwrap();
        // a.json and b.json share app `z`, so they are `a` and `b`; c.json's app is `a`.
        for (stem, app) in [("a", "z"), ("b", "z"), ("c", "a")] {
            write_profile(&profile(app, 100.0), &d.path().join(format!("{stem}.json"))).unwrap();
        }
        let e = read_dir_library(d.path()).unwrap_err().to_string();
        assert!(e.contains("a.json") && e.contains("c.json") && e.contains("app `a`"), "{e}");
        // A .csv and a .json of one stem, likewise.
        let d = tempfile::tempdir().unwrap();
        write_profile(&profile("one", 100.0), &d.path().join("one.csv")).unwrap();
        write_profile(&profile("one", 100.0), &d.path().join("one.json")).unwrap();
        let e = read_dir_library(d.path()).unwrap_err().to_string();
        assert!(e.contains("one.csv") && e.contains("one.json"), "{e}");
    }
}
