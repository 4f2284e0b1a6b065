//! Imported profiles load unchanged as a library directory (`--library DIR`).

use std::path::Path;

use dqngpu_model::format::write_profile;
use dqngpu_model::library::read_dir_library;
use dqngpu_model::{AppInfo, AppKind};
use dqngpu_profiler::{import_file, ImportFormat, ImportOptions};

#[test]
fn imported_profiles_load_through_read_dir_library() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("nvidia_smi_units.csv", ImportFormat::NvidiaSmi, Some(0), None, "resnet", "resnet-titanxp.csv"),
        ("dmon_umt.txt", ImportFormat::Dmon, Some(0), None, "vgg", "vgg.json"),
        ("dmon_umt_dt.txt", ImportFormat::Dmon, None, None, "vgg", "vgg-2.csv"),
        ("dcgm_gauges.prom", ImportFormat::Dcgm, None, Some("resnet50-train-7d9f"), "resnet", "resnet-a100.json"),
        ("dcgm_counters.prom", ImportFormat::Dcgm, None, None, "lammps", "lammps.csv"),
    ];
    let mut written = Vec::new();
    for (file, format, gpu, pod, app, out) in cases {
        let opts = ImportOptions {
            app: AppInfo {
                name: app.into(),
                kind: AppKind::Ml,
                input_size_mb: Some(140.0),
                params: Some("bs=64".into()),
            },
            gpu,
            pod: pod.map(str::to_string),
            ..Default::default()
        };
        let i = import_file(&data.join(file), format, &opts).unwrap();
        write_profile(&i.profile, &dir.path().join(out)).unwrap();
        written.push((out.rsplit_once('.').unwrap().0.to_string(), i.profile));
    }
    let lib = read_dir_library(dir.path()).unwrap();
    assert_eq!(lib.apps.len(), written.len());
    for (key, p) in &written {
        let back = lib.get(key).unwrap();
        assert_eq!(back.samples, p.samples, "{key}");
        assert_eq!(back.interval_s, p.interval_s, "{key}");
        assert_eq!(back.app, p.app, "{key}");
        assert_eq!(back.recorded_on, p.recorded_on, "{key}");
        assert_eq!(back.summary(), p.summary(), "{key}");
    }
    // Two profiles of one app under different file stems.
    assert_eq!(lib.apps.values().filter(|p| p.app.name == "resnet").count(), 2);
}
