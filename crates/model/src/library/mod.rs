//! App libraries: named sets of profiles that job sets draw from, with workload classes.
//!
//! Built in: `thesis` (the thesis's 11 apps on a Titan Xp) and `lucid` (66 measured RTX 3090
//! configurations, compiled in from data/lucid/). `generated:SEED[:COUNT]` generates apps
//! spanning those two (for evaluation on unseen apps). A directory of profile files is a
//! library too (`--library DIR`).

mod dir;
pub mod generated;
pub mod lucid;
pub mod thesis;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::error::{ModelError, Result};
use crate::gpu::GpuSpec;
use crate::job::WorkloadClass;
use crate::profile::AppProfile;

pub use dir::read_dir_library;
pub use generated::{generated, GENERATED_DEFAULT_COUNT, GENERATED_MAX_COUNT};

/// Names of the built-in libraries.
pub const BUILTIN: [&str; 2] = ["thesis", "lucid"];

/// The generated libraries' name forms, listed beside [`BUILTIN`] to users.
pub const GENERATED_FORMS: [&str; 2] = ["generated:SEED", "generated:SEED:COUNT"];

/// True when `name` names a built-in library (`thesis`, `lucid`, `generated:...`): [`resolve`]
/// takes it as such even where a directory of that name exists.
pub fn is_builtin(name: &str) -> bool {
    BUILTIN.contains(&name) || matches!(generated::parse_name(name), Ok(Some(_)))
}

/// A library `name` as written in a file in folder `dir` (a job file, a config): a relative
/// directory is found beside the file, so the file may be read from anywhere; a built-in name,
/// or anything else, is as written.
pub fn named_in(dir: &Path, name: &str) -> String {
    let beside = dir.join(name);
    if !is_builtin(name) && Path::new(name).is_relative() && beside.is_dir() {
        beside.display().to_string()
    } else {
        name.to_string()
    }
}

/// Every library name form `resolve` accepts besides a directory, for error messages.
pub fn valid_names() -> Vec<String> {
    BUILTIN.iter().chain(GENERATED_FORMS.iter()).map(|s| s.to_string()).collect()
}

/// A named set of app profiles.
#[derive(Debug, Clone)]
pub struct AppLibrary {
    /// Library name (`thesis`, `lucid`, or the directory).
    pub name: String,
    /// Profiles by app name (the key job sets use).
    pub apps: BTreeMap<String, Arc<AppProfile>>,
    /// Members of each workload class.
    pub classes: BTreeMap<WorkloadClass, Vec<String>>,
    /// The GPU the profiles were taken on, used for the memory-class threshold.
    pub reference_gpu: Option<GpuSpec>,
}

impl AppLibrary {
    /// Builds a library whose classes are derived from the thesis's thresholds
    /// (mean GPU util >= 40%; mean GPU memory >= 50% of the card: the one the profile says it
    /// was recorded on, where it gives the card's memory, else `reference_gpu`, else the
    /// library's largest peak).
    pub fn with_derived_classes(
        name: String,
        apps: BTreeMap<String, Arc<AppProfile>>,
        reference_gpu: Option<GpuSpec>,
    ) -> Self {
        let ref_mem = reference_gpu
            .as_ref()
            .map(|g| g.memory_mib)
            .unwrap_or_else(|| apps.values().map(|p| p.peak_mem().0).fold(0.0, f64::max).max(1.0));
        let mut classes: BTreeMap<WorkloadClass, Vec<String>> = BTreeMap::new();
        for (k, p) in &apps {
            let m = p.summary().mean;
            let gpu = if m.gpu_util_pct >= 40.0 { WorkloadClass::GpuHeavy } else { WorkloadClass::GpuLight };
            let card = p.recorded_on.as_ref().map(|r| r.memory_mib).filter(|&m| m > 0.0).unwrap_or(ref_mem);
            let mem = if m.gpu_mem_mib >= 0.5 * card { WorkloadClass::MemHeavy } else { WorkloadClass::MemLight };
            for c in [gpu, mem, WorkloadClass::Random] {
                classes.entry(c).or_default().push(k.clone());
            }
        }
        AppLibrary { name, apps, classes, reference_gpu }
    }

    /// The profile of `app`; an unknown app lists the valid names, and an app with several
    /// profiles (a directory library keys each by its file stem) lists those.
    pub fn get(&self, app: &str) -> Result<&Arc<AppProfile>> {
        if let Some(p) = self.apps.get(app) {
            return Ok(p);
        }
        let named: Vec<String> = self.apps.iter().filter(|(_, p)| p.app.name == app).map(|(k, _)| k.clone()).collect();
        if named.len() > 1 {
            return Err(ModelError::BadName {
                what: "app",
                name: app.to_string(),
                problem: format!("has {} profiles ({}); name one by its file stem", named.len(), named.join(", ")),
            });
        }
        Err(ModelError::UnknownName { what: "app", name: app.to_string(), valid: self.apps.keys().cloned().collect() })
    }

    /// The apps of a class; errors when the class is empty in this library.
    pub fn class_members(&self, class: WorkloadClass) -> Result<&[String]> {
        match self.classes.get(&class) {
            Some(v) if !v.is_empty() => Ok(v),
            _ => Err(ModelError::UnknownName {
                what: "workload class (for this library)",
                name: class.name().to_string(),
                valid: self.classes.iter().filter(|(_, v)| !v.is_empty()).map(|(c, _)| c.name().to_string()).collect(),
            }),
        }
    }
}

/// A built-in library by name, a generated one (`generated:SEED[:COUNT]`, any case, on the
/// thesis's Titan Xp), or a directory of profile files.
pub fn resolve(name_or_dir: &str) -> Result<AppLibrary> {
    match name_or_dir {
        "thesis" => Ok(thesis::library()),
        "lucid" => lucid::library(None),
        other => {
            if let Some((seed, count)) = generated::parse_name(other)? {
                return generated(seed, count, &crate::gpu::lookup(thesis::GPU_KEY)?);
            }
            let p = Path::new(other);
            if p.is_dir() {
                read_dir_library(p)
            } else if p.exists() {
                Err(ModelError::BadName {
                    what: "library",
                    name: other.to_string(),
                    problem: "is a file; a library is a built-in name or a directory of profile files".into(),
                })
            } else if other.trim().eq_ignore_ascii_case(generated::PREFIX) {
                Err(ModelError::BadName {
                    what: "library",
                    name: other.to_string(),
                    problem: "the seed is missing; write generated:SEED or generated:SEED:COUNT".into(),
                })
            } else {
                Err(ModelError::UnknownName {
                    what: "library (a built-in name or a directory)",
                    name: other.to_string(),
                    valid: valid_names(),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_in_a_file_finds_its_folder_beside_it_but_never_shadows_a_built_in() {
        let d = tempfile::tempdir().unwrap();
        for sub in ["mine", "thesis", "generated:3"] {
            std::fs::create_dir(d.path().join(sub)).unwrap();
        }
        assert_eq!(named_in(d.path(), "mine"), d.path().join("mine").display().to_string());
        assert_eq!(named_in(d.path(), "thesis"), "thesis");
        assert_eq!(named_in(d.path(), "generated:3"), "generated:3");
        assert_eq!(named_in(d.path(), "absent"), "absent");
        assert!(
            is_builtin("lucid") && is_builtin("generated:3:8") && !is_builtin("generated:x") && !is_builtin("mine")
        );
    }
}
