//! The Lucid solo profiles: 66 DL training configurations measured alone on one RTX 3090
//! (the repository's `data/lucid/solo_profiles.csv`, compiled in), turned into steady profiles.
//!
//! Lucid measured GPU util, memory-bandwidth util and peak memory only. The SM column is set to
//! the GPU util and PCIe to 0 (both assumed; see docs/PROFILES.md). Durations are assumed from
//! Lucid's size label. The same [`steady_demand`] feeds the interference calibration, so the
//! fitted model sees exactly the demands the simulator will.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::AppLibrary;
use crate::error::{read_file, Location, ModelError, Result};
use crate::profile::{AppInfo, AppKind, AppProfile, RecordedOn};
use crate::resources::Resources;

/// Where the built-in solo file came from (shown in errors and reports); the text is
/// compiled in from the repository's `data/lucid/` (S-Lab License 1.0, see data/README.md).
pub const SOLO_FILE: &str = "data/lucid/solo_profiles.csv (built in)";

/// Where the built-in pairs file came from.
pub const PAIRS_FILE: &str = "data/lucid/colocate_pairs.csv (built in)";

/// The built-in copy of Lucid's solo profiles.
pub const SOLO_CSV: &str = include_str!("../../../../data/lucid/solo_profiles.csv");

/// The built-in copy of Lucid's measured pairs.
pub const PAIRS_CSV: &str = include_str!("../../../../data/lucid/colocate_pairs.csv");

/// Assumed solo duration per Lucid label (0, 1, 2), seconds: Lucid gives speeds in
/// iterations/s but not job lengths, so we pick lengths that grow with the label. The label
/// is Lucid's sharing score (how costly the model is to share), not a size (docs/PROFILES.md).
pub const DURATION_BY_LABEL_S: [f64; 3] = [300.0, 600.0, 1200.0];

/// One row of `solo_profiles.csv`.
#[derive(Debug, Clone, PartialEq)]
pub struct SoloConfig {
    /// Model name (`ResNet18`).
    pub model: String,
    /// Data set (`CIFAR-10`).
    pub dataset: String,
    /// Batch size.
    pub batchsize: u32,
    /// Mixed precision on (1) or off (0).
    pub amp: u8,
    /// Iterations per second alone (absolute), when given.
    pub speed: Option<f64>,
    /// Mean GPU utilisation alone, percent.
    pub gpu_util_pct: f64,
    /// Mean memory-bandwidth utilisation alone, percent, when given.
    pub gmem_util_pct: Option<f64>,
    /// Peak GPU memory, MiB.
    pub gmem_mib: f64,
    /// Lucid's size class 0/1/2, when given.
    pub label: Option<u8>,
    /// 1-based line in the source file.
    pub line: u64,
}

impl SoloConfig {
    /// The library key, as the pairs table uses it: `ResNet18-CIFAR-10-bs64-amp0`.
    pub fn key(&self) -> String {
        config_key(&self.model, &self.dataset, self.batchsize, self.amp)
    }
}

/// The key of a configuration: `MODEL-DATASET-bsBATCH-ampAMP`.
pub fn config_key(model: &str, dataset: &str, batchsize: u32, amp: u8) -> String {
    format!("{model}-{dataset}-bs{batchsize}-amp{amp}")
}

/// The steady demand of a configuration: GPU util and peak memory as measured; SM assumed equal
/// to GPU util; PCIe assumed 0 (not measured).
pub fn steady_demand(c: &SoloConfig) -> Resources {
    Resources::new(c.gpu_util_pct, c.gmem_mib, c.gpu_util_pct, 0.0)
}

/// Parses `solo_profiles.csv`. Required columns: model, dataset, batchsize, amp, gpu_util,
/// gmem; optional: speed, gmem_util, label. Errors name the file, line and field.
/// One piece on purpose: a flat, column-by-column read of one row, where each field's check
/// sits beside its column (the closures share the row and its line for the error locations).
pub fn parse_solo_csv(text: &str, path: Option<&Path>) -> Result<Vec<SoloConfig>> {
    let at = |line: Option<u64>, field: Option<&str>| Location {
        path: path.map(Path::to_path_buf),
        line,
        field: field.map(str::to_string),
    };
    let mut rdr = csv::ReaderBuilder::new().trim(csv::Trim::All).flexible(false).from_reader(text.as_bytes());
    let headers =
        rdr.headers().map_err(|e| ModelError::invalid(at(Some(1), None), format!("cannot read header: {e}")))?.clone();
    let col = |name: &str| headers.iter().position(|h| h == name);
    let required = ["model", "dataset", "batchsize", "amp", "gpu_util", "gmem"];
    let mut idx = [0usize; 6];
    for (k, name) in required.iter().enumerate() {
        idx[k] = col(name).ok_or_else(|| {
            ModelError::invalid(at(Some(1), Some(name)), format!("missing column; required: {}", required.join(",")))
        })?;
    }
    let (speed_c, gmem_util_c, label_c) = (col("speed"), col("gmem_util"), col("label"));
    let mut out: Vec<SoloConfig> = Vec::new();
    let mut seen = BTreeMap::new();
    for rec in rdr.records() {
        let rec = rec.map_err(|e| {
            ModelError::invalid(
                at(e.position().map(|p| crate::error::csv_line(text, p)), None),
                format!("malformed CSV: {e}"),
            )
        })?;
        let line = rec.position().map(|p| crate::error::csv_line(text, p)).unwrap_or(0);
        let field = |c: usize| rec.get(c).unwrap_or("");
        let text_field = |k: usize| -> Result<String> {
            let v = field(idx[k]);
            if v.is_empty() {
                return Err(ModelError::invalid(at(Some(line), Some(required[k])), "empty value"));
            }
            Ok(v.to_string())
        };
        let num = |c: usize, name: &str| -> Result<f64> {
            let raw = field(c);
            let v: f64 = raw
                .parse()
                .map_err(|_| ModelError::invalid(at(Some(line), Some(name)), format!("`{raw}` is not a number")))?;
            if !v.is_finite() || v < 0.0 {
                return Err(ModelError::invalid(
                    at(Some(line), Some(name)),
                    format!("`{raw}` must be a finite, non-negative number"),
                ));
            }
            Ok(v)
        };
        let model = text_field(0)?;
        let dataset = text_field(1)?;
        let raw_bs = field(idx[2]);
        let batchsize: u32 = raw_bs.parse().ok().filter(|b| *b > 0).ok_or_else(|| {
            ModelError::invalid(at(Some(line), Some("batchsize")), format!("`{raw_bs}` is not a positive integer"))
        })?;
        let raw_amp = field(idx[3]);
        let amp: u8 = match raw_amp {
            "0" => 0,
            "1" => 1,
            _ => return Err(ModelError::invalid(at(Some(line), Some("amp")), format!("`{raw_amp}` is not 0 or 1"))),
        };
        let gpu_util_pct = num(idx[4], "gpu_util")?;
        if gpu_util_pct > 100.0 {
            return Err(ModelError::invalid(at(Some(line), Some("gpu_util")), format!("{gpu_util_pct} is above 100%")));
        }
        let gmem_mib = num(idx[5], "gmem")?;
        let speed = speed_c.map(|c| num(c, "speed")).transpose()?;
        let gmem_util_pct = gmem_util_c.map(|c| num(c, "gmem_util")).transpose()?;
        let label = match label_c.map(field) {
            None => None,
            Some(raw) => Some(match raw {
                "0" => 0,
                "1" => 1,
                "2" => 2,
                _ => {
                    return Err(ModelError::invalid(at(Some(line), Some("label")), format!("`{raw}` is not 0, 1 or 2")))
                }
            }),
        };
        let c =
            SoloConfig { model, dataset, batchsize, amp, speed, gpu_util_pct, gmem_util_pct, gmem_mib, label, line };
        if let Some(first) = seen.insert(c.key(), line) {
            return Err(ModelError::invalid(
                at(Some(line), Some("model")),
                format!("configuration `{}` appears twice (first on line {first})", c.key()),
            ));
        }
        out.push(c);
    }
    if out.is_empty() {
        return Err(ModelError::invalid(at(Some(2), None), "no data rows"));
    }
    Ok(out)
}

/// Reads and parses a solo-profiles file.
pub fn read_solo(path: &Path) -> Result<Vec<SoloConfig>> {
    parse_solo_csv(&read_file(path)?, Some(path))
}

/// The steady profile of one configuration on the RTX 3090 (1 s samples).
pub fn profile_of(c: &SoloConfig, path: Option<&Path>) -> Result<AppProfile> {
    let duration = DURATION_BY_LABEL_S[c.label.unwrap_or(1) as usize];
    let info = AppInfo {
        name: c.key(),
        kind: AppKind::Ml,
        input_size_mb: None,
        params: Some(format!("{} on {}, batch size {}, amp {}", c.model, c.dataset, c.batchsize, c.amp)),
    };
    let mut p = AppProfile::new(info, 1.0, vec![steady_demand(c); duration as usize])
        .map_err(|e| e.with_path(path.unwrap_or(Path::new(SOLO_FILE))))?;
    p.recorded_on = Some(RecordedOn {
        node: "lucid".into(),
        gpu_name: "NVIDIA GeForce RTX 3090".into(),
        architecture: "Ampere".into(),
        memory_mib: 24576.0,
        cores: 10496,
        pcie_gbps: 32.0,
    });
    p.source = Some(Location { path: path.map(Path::to_path_buf), line: Some(c.line), field: None });
    Ok(p)
}

/// The built-in solo configurations.
pub fn builtin_solo() -> Result<Vec<SoloConfig>> {
    parse_solo_csv(SOLO_CSV, Some(Path::new(SOLO_FILE)))
}

/// Reads a solo-profiles file, or the built-in one when `path` is `None`; also returns the name
/// to show for it.
pub fn load_solo(path: Option<&Path>) -> Result<(Vec<SoloConfig>, String)> {
    match path {
        Some(p) => Ok((read_solo(p)?, p.display().to_string())),
        None => Ok((builtin_solo()?, SOLO_FILE.to_string())),
    }
}

/// The `lucid` library, read from `path` (a solo-profiles CSV) or the built-in copy.
/// Classes are derived with the thesis's thresholds against the RTX 3090's 24 GiB.
pub fn library(path: Option<&Path>) -> Result<AppLibrary> {
    let (configs, path) = match path {
        Some(p) => (read_solo(p)?, p.to_path_buf()),
        None => (builtin_solo()?, PathBuf::from(SOLO_FILE)),
    };
    let mut apps = BTreeMap::new();
    for c in &configs {
        apps.insert(c.key(), Arc::new(profile_of(c, Some(&path))?));
    }
    let reference = crate::gpu::lookup("rtx3090").ok();
    Ok(AppLibrary::with_derived_classes("lucid".into(), apps, reference))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const HEADER: &str = "model,dataset,batchsize,amp,speed,gpu_util,gmem_util,gmem,label\n";

    #[test]
    fn parses_rows_and_keys() {
        let text = format!("{HEADER}ResNet18,CIFAR-10,64,0,3711.9,80.667,47.0,2660.0,2\n");
        let c = parse_solo_csv(&text, None).unwrap();
        assert_eq!(c[0].key(), "ResNet18-CIFAR-10-bs64-amp0");
        assert_eq!(c[0].line, 2);
        let p = profile_of(&c[0], None).unwrap();
        assert_eq!(p.solo_s(), 1200.0);
        assert_eq!(p.summary().mean.gpu_mem_mib, 2660.0);
    }

    #[test]
    fn errors_name_line_and_field() {
        let p = Some(Path::new("solo.csv"));
        let cases = [
            ("model,dataset,batchsize,amp,gmem\nA,B,1,0,3\n", "line 1, field `gpu_util`", "missing column"),
            (&format!("{HEADER}A,B,32,0,1,abc,1,100,0\n") as &str, "line 2, field `gpu_util`", "not a number"),
            (&format!("{HEADER}A,B,32,0,1,50,1,NaN,0\n"), "line 2, field `gmem`", "finite"),
            (&format!("{HEADER}A,B,32,2,1,50,1,100,0\n"), "line 2, field `amp`", "0 or 1"),
            (&format!("{HEADER}A,B,32,0,1,150,1,100,0\n"), "line 2, field `gpu_util`", "above 100"),
            (&format!("{HEADER}A,B,32,0,1,50,1,100,0\nA,B,32,0,1,50,1,100,0\n"), "line 3", "twice"),
            (HEADER, "line 2", "no data rows"),
            (&format!("{HEADER}A,B,32,0,1,50,1,100\n"), "line 2", "malformed"),
        ];
        for (text, want_at, want_msg) in cases {
            let e = parse_solo_csv(text, p).unwrap_err().to_string();
            assert!(
                e.contains("solo.csv") && e.contains(want_at) && e.contains(want_msg),
                "{want_at} / {want_msg}: {e}"
            );
        }
    }

    #[test]
    fn builtin_library_has_66_configs() {
        let lib = library(None).unwrap();
        assert_eq!(lib.apps.len(), 66);
        let all = &lib.classes[&crate::job::WorkloadClass::Random];
        assert_eq!(all.len(), 66);
        assert!(lib.apps.contains_key("ResNet50-ImageNet-bs128-amp0"));
    }

    proptest! {
        #[test]
        fn solo_parser_never_panics(s in "\\PC{0,300}") {
            let _ = parse_solo_csv(&s, None);
        }

        #[test]
        fn solo_parser_never_panics_near_valid(rows in proptest::collection::vec(proptest::collection::vec("[-0-9.aNI]{0,5}", 0..10), 0..6)) {
            let mut text = String::from(HEADER);
            for r in rows { text.push_str(&r.join(",")); text.push('\n'); }
            if let Ok(cs) = parse_solo_csv(&text, None) {
                for c in &cs { prop_assert!(profile_of(c, None).is_ok()); }
            }
        }
    }
}
