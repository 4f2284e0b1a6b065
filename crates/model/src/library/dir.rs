//! A directory of profile files as a library: `NAME.csv` (with optional `NAME.meta.json`) or
//! `NAME.json`, one app per file; the file stem is the app's key.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use super::AppLibrary;
use crate::error::{Location, ModelError, Result};
use crate::format::read_profile;

/// Reads every profile in `dir`; any bad file fails the whole read, naming the file.
pub fn read_dir_library(dir: &Path) -> Result<AppLibrary> {
    let io = |source| ModelError::Io { path: dir.to_path_buf(), source };
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .map_err(io)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            !n.starts_with('.') && !n.ends_with(".meta.json") && (n.ends_with(".csv") || n.ends_with(".json"))
        })
        .collect();
    paths.sort();
    let mut apps = BTreeMap::new();
    for p in &paths {
        let key = p.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        if apps.contains_key(&key) {
            return Err(ModelError::invalid(
                Location { path: Some(p.clone()), ..Default::default() },
                format!("app `{key}` has both a .csv and a .json profile; keep one"),
            ));
        }
        apps.insert(key, Arc::new(read_profile(p)?));
    }
    if apps.is_empty() {
        return Err(ModelError::invalid(
            Location { path: Some(dir.to_path_buf()), ..Default::default() },
            "no profile files (*.csv, *.json) in this directory",
        ));
    }
    let reference = apps
        .values()
        .find_map(|p| p.recorded_on.as_ref())
        .and_then(|r| crate::gpu::catalogue().into_iter().find(|g| g.name == r.gpu_name));
    Ok(AppLibrary::with_derived_classes(dir.display().to_string(), apps, reference))
}
