//! The importers on sample logs written from the tools' documented formats (tests/data/).

use std::path::{Path, PathBuf};

use dqngpu_model::{AppInfo, ModelError, Resource};
use dqngpu_profiler::{import_file, import_str, ImportFormat, ImportOptions, Imported};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

fn opts() -> ImportOptions {
    ImportOptions { app: AppInfo { name: "app".into(), ..Default::default() }, ..Default::default() }
}

fn with_gpu(g: u32) -> ImportOptions {
    ImportOptions { gpu: Some(g), ..opts() }
}

fn import(name: &str, format: ImportFormat, o: &ImportOptions) -> Result<Imported, ModelError> {
    import_file(&data(name), format, o)
}

fn col(i: &Imported, r: Resource) -> Vec<f64> {
    i.profile.samples.iter().map(|s| s.get(r)).collect()
}

fn has_note(i: &Imported, needle: &str) -> bool {
    i.notes.iter().any(|n| n.contains(needle))
}

#[test]
fn nvidia_smi_with_units_two_gpus_na_and_repeated_header() {
    let e = import("nvidia_smi_units.csv", ImportFormat::NvidiaSmi, &opts()).unwrap_err().to_string();
    assert!(e.contains("several GPUs (0, 1)") && e.contains("--gpu") && e.contains("nvidia_smi_units.csv"), "{e}");

    let e = import("nvidia_smi_units.csv", ImportFormat::NvidiaSmi, &with_gpu(5)).unwrap_err();
    assert!(e.is_usage(), "{e}");
    assert!(e.to_string().contains("valid: 0, 1"), "{e}");

    let i = import("nvidia_smi_units.csv", ImportFormat::NvidiaSmi, &with_gpu(0)).unwrap();
    assert_eq!(i.readings, 16);
    assert_eq!(i.profile.interval_s, 0.501); // the median gap of a -lms 500 log that drifts
                                             // 16 readings span 15 intervals: the profile lasts as long as the log.
    assert_eq!(i.profile.samples.len(), 15);
    // The [N/A] at reading 9 holds reading 8's 88 %, which the interval before reading 9
    // (sample 8) takes; memory's [N/A] holds 9812.
    let util = col(&i, Resource::GpuUtil);
    assert!((util[8] - 88.0).abs() < 1.0, "{util:?}");
    // Utilisation is over the period before its reading: the last reading (2 %) describes the
    // last sample (held forward it was dropped, and the last sample was the 40 % before it).
    assert!(util[14] < 5.0 && util[13] > 35.0, "{util:?}");
    assert_eq!(i.profile.summary().peak.gpu_mem_mib, 9812.0);
    assert_eq!(col(&i, Resource::Sm), util, "no SM field: SM is GPU util");
    assert!(col(&i, Resource::Pcie).iter().all(|&v| v == 0.0));
    for n in [
        "ignored nvidia-smi fields: pstate",
        "gpu_util_pct: 1 missing",
        "gpu_mem_mib: 1 missing",
        "sm_pct",
        "pcie_mbps",
    ] {
        assert!(has_note(&i, n), "missing note `{n}`: {:?}", i.notes);
    }
    let on = i.profile.recorded_on.as_ref().unwrap();
    assert_eq!((on.gpu_name.as_str(), on.architecture.as_str(), on.memory_mib), ("NVIDIA TITAN Xp", "Pascal", 12288.0));

    let other = import("nvidia_smi_units.csv", ImportFormat::NvidiaSmi, &with_gpu(1)).unwrap();
    assert!(col(&other, Resource::GpuMem).iter().all(|&m| m == 3000.0));
}

#[test]
fn nvidia_smi_nounits_across_midnight_and_noheader_with_columns() {
    let i = import("nvidia_smi_nounits.csv", ImportFormat::NvidiaSmi, &opts()).unwrap();
    assert_eq!(i.profile.samples.len(), 9);
    assert_eq!(i.profile.interval_s, 1.001);
    assert_eq!(i.profile.summary().peak.gpu_mem_mib, 1900.0);
    assert_eq!(i.profile.summary().peak.gpu_util_pct, 100.0);

    let e = import("nvidia_smi_noheader.csv", ImportFormat::NvidiaSmi, &opts()).unwrap_err().to_string();
    assert!(e.contains("line 1") && e.contains("--columns"), "{e}");
    let cols = ImportOptions {
        columns: Some(vec!["timestamp".into(), "index".into(), "utilization.gpu".into(), "memory.used".into()]),
        ..opts()
    };
    let n = import("nvidia_smi_noheader.csv", ImportFormat::NvidiaSmi, &cols).unwrap();
    assert_eq!(n.profile.samples, i.profile.samples);
    let e = import("nvidia_smi_units.csv", ImportFormat::NvidiaSmi, &ImportOptions { gpu: Some(0), ..cols.clone() })
        .unwrap_err()
        .to_string();
    assert!(e.contains("line 1") && e.contains("does not match --columns"), "{e}");
    let changed = "timestamp, utilization.gpu [%], memory.used [MiB]\n2026/11/25 21:50:00.000, 1 %, 1 MiB\ntimestamp, memory.used [MiB], utilization.gpu [%]\n";
    let e = import_str(changed, None, ImportFormat::NvidiaSmi, &opts()).unwrap_err().to_string();
    assert!(e.contains("line 3") && e.contains("header changes"), "{e}");
    let bad = ImportOptions { columns: Some(vec!["timestamp".into(), "index".into()]), ..opts() };
    let e = import("nvidia_smi_noheader.csv", ImportFormat::NvidiaSmi, &bad).unwrap_err().to_string();
    assert!(e.contains("--columns") && e.contains("utilization.gpu"), "{e}");
    // Values with units, --columns in another order than the query's: refused, not swapped.
    let swapped = ImportOptions {
        columns: Some(vec!["timestamp".into(), "index".into(), "memory.used".into(), "utilization.gpu".into()]),
        ..opts()
    };
    let text = "2026/11/25 21:50:00.000, 0, 30 %, 45 MiB\n2026/11/25 21:50:01.000, 0, 31 %, 45 MiB\n";
    let e = import_str(text, None, ImportFormat::NvidiaSmi, &swapped).unwrap_err().to_string();
    assert!(e.contains("line 1") && e.contains("utilization.gpu is in %") && e.contains("order"), "{e}");
    let right = ImportOptions { columns: cols.columns.clone(), ..opts() };
    let ok = import_str(text, None, ImportFormat::NvidiaSmi, &right).unwrap();
    // The second second's utilisation (over the period before its reading), memory the larger end.
    assert_eq!((ok.profile.samples[0].gpu_util_pct, ok.profile.samples[0].gpu_mem_mib), (31.0, 45.0));
}

#[test]
fn dmon_without_time_column_two_gpus_and_dashes() {
    let e = import("dmon_umt.txt", ImportFormat::Dmon, &opts()).unwrap_err().to_string();
    assert!(e.contains("several GPUs (0, 1)"), "{e}");
    let i = import("dmon_umt.txt", ImportFormat::Dmon, &with_gpu(0)).unwrap();
    assert_eq!(i.profile.interval_s, 1.0);
    // Ten rows a second apart span 9 s. Each second takes the utilisation of the row that ends
    // it (an average over the period before that row), so the first row (0 %) describes no
    // second and the last (12 %) the last; memory is the larger of the second's two ends.
    assert_eq!(col(&i, Resource::GpuUtil), [3.0, 41.0, 95.0, 97.0, 96.0, 98.0, 97.0, 95.0, 12.0]);
    assert_eq!(col(&i, Resource::GpuMem), [1830.0, 7410.0, 7410.0, 7412.0, 7412.0, 7412.0, 7412.0, 7412.0, 7412.0]);
    // rx + tx; row 6 has `-` for both and holds row 5's 305 + 118.
    assert_eq!(col(&i, Resource::Pcie), [890.0, 2305.0, 430.0, 423.0, 423.0, 417.0, 422.0, 417.0, 0.0]);
    assert!(has_note(&i, "no time column") && has_note(&i, "pcie_mbps: 1 missing"), "{:?}", i.notes);
    let slow =
        import("dmon_umt.txt", ImportFormat::Dmon, &ImportOptions { interval_s: Some(5.0), ..with_gpu(1) }).unwrap();
    assert_eq!((slow.profile.interval_s, slow.profile.samples.len()), (5.0, 9));
    assert_eq!(slow.profile.samples[0].pcie_mbps, 15.0);
    // A step shorter than the microsecond the times are kept to blames the flag, not the log.
    for dt in [1e-9, 1e5] {
        let e = import("dmon_umt.txt", ImportFormat::Dmon, &ImportOptions { interval_s: Some(dt), ..with_gpu(1) })
            .unwrap_err()
            .to_string();
        assert!(e.contains("--interval-s") && !e.contains("timestamp"), "{e}");
    }
}

#[test]
fn dmon_with_date_and_time() {
    let i = import("dmon_umt_dt.txt", ImportFormat::Dmon, &opts()).unwrap();
    assert_eq!(i.profile.interval_s, 2.0);
    assert_eq!(col(&i, Resource::GpuUtil), [60.0, 70.0, 72.0, 71.0, 70.0, 69.0, 8.0]);
    assert_eq!(col(&i, Resource::Pcie)[0], 930.0);
    assert!(!has_note(&i, "no time column"));
}

#[test]
fn dcgm_gauges_filtered_by_pod_or_gpu() {
    let e = import("dcgm_gauges.prom", ImportFormat::Dcgm, &opts()).unwrap_err().to_string();
    assert!(e.contains("several GPUs (0, 1)"), "{e}");
    let by_pod = ImportOptions { pod: Some("resnet50-train-7d9f".into()), ..opts() };
    let i = import("dcgm_gauges.prom", ImportFormat::Dcgm, &by_pod).unwrap();
    assert_eq!(i.gpu, 0);
    assert_eq!(i.profile.interval_s, 15.0);
    assert_eq!(i.profile.samples.len(), 8);
    // The interval from the second scrape to the third takes the third's rates.
    let s = &i.profile.samples[1];
    assert_eq!((s.gpu_util_pct, s.gpu_mem_mib), (92.0, 15800.0));
    assert!((s.sm_pct - 78.34).abs() < 1e-9, "SM_ACTIVE ratio 0.7834 -> {}", s.sm_pct);
    assert!((i.profile.samples[0].pcie_mbps - 2520.0).abs() < 1e-9); // (120e6 + 2400e6) B/s
    let by_gpu = import("dcgm_gauges.prom", ImportFormat::Dcgm, &with_gpu(1)).unwrap();
    assert!(col(&by_gpu, Resource::Sm).iter().all(|&v| (v - 35.0).abs() < 1e-9));
    let container = ImportOptions { container: Some("bert".into()), ..opts() };
    assert_eq!(import("dcgm_gauges.prom", ImportFormat::Dcgm, &container).unwrap().gpu, 1);
    let nope = ImportOptions { pod: Some("nope".into()), ..opts() };
    let e = import("dcgm_gauges.prom", ImportFormat::Dcgm, &nope).unwrap_err().to_string();
    assert!(e.contains("bert-infer-5c2a") && e.contains("resnet50-train-7d9f"), "{e}");
}

/// The exposition format's own layout: every sample of one metric family together (all
/// scrapes, with timestamps), then the next family. Same readings as scrape-by-scrape order.
#[test]
fn dcgm_grouped_by_metric_family_matches_scrape_order() {
    let text = std::fs::read_to_string(data("dcgm_gauges.prom")).unwrap();
    let mut families: Vec<(String, Vec<&str>)> = Vec::new();
    for l in text.lines().filter(|l| !l.trim().is_empty()) {
        let fam = match l.strip_prefix("# HELP ").or(l.strip_prefix("# TYPE ")) {
            Some(rest) => rest.split_whitespace().next().unwrap_or("").to_string(),
            None if l.starts_with('#') => continue,
            None => l.split(['{', ' ']).next().unwrap_or("").to_string(),
        };
        let is_meta = l.starts_with('#');
        match families.iter_mut().find(|(f, _)| *f == fam) {
            // HELP/TYPE once per family, as an exposition has them.
            Some(_) if is_meta => {}
            Some((_, ls)) => ls.push(l),
            None => families.push((fam, vec![l])),
        }
    }
    let grouped: String = families.iter().flat_map(|(_, ls)| ls.iter().map(|l| format!("{l}\n"))).collect();
    assert_ne!(grouped, text, "the regrouped file must differ in order");
    let by_pod = ImportOptions { pod: Some("resnet50-train-7d9f".into()), ..opts() };
    let a = import("dcgm_gauges.prom", ImportFormat::Dcgm, &by_pod).unwrap();
    let b = import_str(&grouped, Some(Path::new("grouped.prom")), ImportFormat::Dcgm, &by_pod).unwrap();
    assert_eq!(a.profile.samples, b.profile.samples);
    assert_eq!(a.profile.interval_s, b.profile.interval_s);
    // A repeated sample (same series, time and value) is harmless.
    let first_sample = text.lines().find(|l| l.starts_with("DCGM_FI_DEV_GPU_UTIL")).unwrap();
    let repeated = format!("{grouped}{first_sample}\n");
    let c = import_str(&repeated, Some(Path::new("grouped.prom")), ImportFormat::Dcgm, &by_pod).unwrap();
    assert_eq!(c.profile.samples, a.profile.samples);
}

#[test]
fn dcgm_counters_with_a_reset_and_scrape_separators() {
    let o = ImportOptions { pod: Some("lammps-md-0".into()), ..opts() };
    let i = import("dcgm_counters.prom", ImportFormat::Dcgm, &o).unwrap();
    assert_eq!(i.profile.interval_s, 5.0);
    assert_eq!(i.profile.samples.len(), 6);
    // 100 MB/s TX + 300 MB/s RX throughout, including across the exporter restart at scrape 5;
    // the first scrape has no previous one and takes the next rate.
    for (k, s) in i.profile.samples.iter().enumerate() {
        assert!((s.pcie_mbps - 400.0).abs() < 1e-9, "sample {k}: {}", s.pcie_mbps);
    }
    assert!(has_note(&i, "reset 2 time(s)"), "{:?}", i.notes);
    assert_eq!(i.profile.samples[1].sm_pct, 40.0, "NaN holds the previous 0.40 (the interval before it takes it)");
}

fn err(text: &str, format: ImportFormat) -> String {
    import_str(text, Some(Path::new("log.txt")), format, &opts()).unwrap_err().to_string()
}

#[test]
fn bad_input_names_the_line() {
    let smi = "timestamp, index, utilization.gpu [%], memory.used [MiB]\n\
               2026/11/25 21:50:00.000, 0, 10 %, 100 MiB\n\
               2026/11/25 21:50:01.000, 0, 1";
    let e = err(smi, ImportFormat::NvidiaSmi);
    assert!(e.contains("log.txt, line 3") && e.contains("truncated"), "{e}");

    let back = "timestamp, index, utilization.gpu [%], memory.used [MiB]\n\
                2026/11/25 21:50:01.000, 0, 10 %, 100 MiB\n\
                2026/11/25 21:50:00.500, 0, 10 %, 100 MiB\n";
    let e = err(back, ImportFormat::NvidiaSmi);
    assert!(e.contains("line 3") && e.contains("backwards") && e.contains("line 2"), "{e}");

    let over = "timestamp, utilization.gpu [%], memory.used [MiB]\n2026/11/25 21:50:01.000, 120 %, 100 MiB\n";
    let e = err(over, ImportFormat::NvidiaSmi);
    assert!(e.contains("line 2, field `utilization.gpu`") && e.contains("above 100"), "{e}");

    let badts = "timestamp, utilization.gpu [%], memory.used [MiB]\n21:50:01, 12 %, 100 MiB\n";
    assert!(err(badts, ImportFormat::NvidiaSmi).contains("line 2, field `timestamp`"));

    let dmon = "# gpu sm mem fb rxpci txpci\n# Idx % % MB MB/s MB/s\n 0 10 1 100 1 1\n 0 10 1\n";
    let e = err(dmon, ImportFormat::Dmon);
    assert!(e.contains("line 4") && e.contains("truncated"), "{e}");
    assert!(err(" 0 10 1 100 1 1\n", ImportFormat::Dmon).contains("before the `# gpu"));
    let dmon_back =
        "#Date Time gpu sm fb\n#YYYYMMDD HH:MM:SS Idx % MB\n 20261125 10:00:02 0 1 1\n 20261125 10:00:01 0 1 1\n";
    assert!(err(dmon_back, ImportFormat::Dmon).contains("line 4, field `timestamp`"));

    let dcgm = "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 10 1000\nDCGM_FI_DEV_FB_USED{gpu=\"0\",pod=\"a";
    let e = err(dcgm, ImportFormat::Dcgm);
    assert!(e.contains("line 2") && e.contains("truncated"), "{e}");
    let e = err("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 10\n", ImportFormat::Dcgm);
    assert!(e.contains("line 1") && e.contains("scrape at"), "{e}");
    let e = err(
        "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 10 2000\nDCGM_FI_DEV_FB_USED{gpu=\"0\"} 5 2000\nDCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 12 2000\n",
        ImportFormat::Dcgm,
    );
    assert!(
        e.contains("line 3, field `DCGM_FI_DEV_GPU_UTIL`") && e.contains("two values") && e.contains("line 1"),
        "{e}"
    );
    let e = err("DCGM_FI_PROF_SM_ACTIVE{gpu=\"0\"} 45 1000\n", ImportFormat::Dcgm);
    assert!(e.contains("0..1"), "{e}");
    let dup = "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",pod=\"a\"} 10 1000\nDCGM_FI_DEV_GPU_UTIL{gpu=\"0\",pod=\"b\"} 20 1000\n";
    assert!(err(dup, ImportFormat::Dcgm).contains("--pod"));
    let no_mem = "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 10 1000\n";
    assert!(err(no_mem, ImportFormat::Dcgm).contains("gpu_mem_mib"));

    let e = "parquet".parse::<ImportFormat>().unwrap_err();
    assert!(e.is_usage() && e.to_string().contains("nvidia-smi, dmon, dcgm"));
}

#[test]
fn the_profiles_own_checks_name_the_log() {
    let log = "timestamp, name, index, utilization.gpu [%], memory.used [MiB]\n\
               2026/11/25 21:50:00.0, NVIDIA TITAN Xp, 0, 10 %, 1000000000000 MiB\n\
               2026/11/25 21:50:01.0, NVIDIA TITAN Xp, 0, 10 %, 1000 MiB\n";
    let path = Path::new("big.csv");
    let e = import_str(log, Some(path), ImportFormat::NvidiaSmi, &opts()).unwrap_err().to_string();
    // Named at the log's line and column, the number in exponent form.
    assert!(e.contains("big.csv, line 2, field `memory.used`: 1e12 MiB"), "{e}");
    // Readings two hours apart: the spacing is the log's, not an interval the user gave.
    let apart = "timestamp, name, index, utilization.gpu [%], memory.used [MiB]\n\
                 2026/11/25 21:00:00.0, NVIDIA TITAN Xp, 0, 10 %, 1000 MiB\n\
                 2026/11/25 23:00:00.0, NVIDIA TITAN Xp, 0, 10 %, 1000 MiB\n";
    let e = import_str(apart, Some(path), ImportFormat::NvidiaSmi, &opts()).unwrap_err().to_string();
    assert!(e.contains("big.csv") && e.contains("timestamp") && e.contains("7200 s apart"), "{e}");
}

const SMI_HEADER: &str = "timestamp, index, utilization.gpu [%], memory.used [MiB]\n";

#[test]
fn nvidia_smi_refuses_impossible_dates_and_swapped_units_and_reads_past_a_bom() {
    let feb31 = format!("{SMI_HEADER}2026/02/28 23:59:59.000, 0, 5 %, 1 MiB\n2026/02/31 00:00:00.000, 0, 5 %, 1 MiB\n");
    let e = err(&feb31, ImportFormat::NvidiaSmi);
    assert!(e.contains("line 3, field `timestamp`") && e.contains("2026/02/31"), "{e}");
    // Values whose units are not the header's: a `%` column holding MiB.
    let swapped = format!("{SMI_HEADER}2026/11/25 10:00:00.000, 0, 5 MiB, 10 %\n");
    let e = err(&swapped, ImportFormat::NvidiaSmi);
    assert!(e.contains("line 2, field `utilization.gpu`") && e.contains("MiB") && e.contains("[%]"), "{e}");
    // A header that gives a used field in another unit.
    let e = err("timestamp, utilization.gpu [%], memory.used [MB]\n", ImportFormat::NvidiaSmi);
    assert!(e.contains("line 1, field `memory.used`") && e.contains("[MiB]"), "{e}");
    // A byte-order mark before the header is no part of it.
    let rows = "2026/11/25 10:00:00.000, 0, 5 %, 1 MiB\n2026/11/25 10:00:01.000, 0, 7 %, 2 MiB\n";
    let plain = import_str(&format!("{SMI_HEADER}{rows}"), None, ImportFormat::NvidiaSmi, &opts()).unwrap();
    let bom = import_str(&format!("\u{feff}{SMI_HEADER}{rows}"), None, ImportFormat::NvidiaSmi, &opts()).unwrap();
    assert_eq!(bom.profile.samples, plain.profile.samples);
}

#[test]
fn values_no_profile_can_hold_are_refused_at_the_logs_line_and_column() {
    let smi =
        format!("{SMI_HEADER}2026/11/25 10:00:00.000, 0, 5 %, 1000 MiB\n2026/11/25 10:00:01.000, 0, 5 %, 150000 MiB\n");
    let e = err(&smi, ImportFormat::NvidiaSmi);
    assert!(e.contains("line 3, field `memory.used`: 150000 MiB is more memory"), "{e}");
    let dmon = "# gpu sm fb rxpci txpci\n 0 10 1e300 0 0\n";
    let e = err(dmon, ImportFormat::Dmon);
    assert!(e.contains("line 2, field `fb`: 1e300 MiB") && e.len() < 200, "{e}");
    let e = err("# gpu sm fb rxpci txpci\n 0 10 100 99000 0\n", ImportFormat::Dmon);
    assert!(e.contains("line 2, field `rxpci`"), "{e}");
    let dcgm = "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 10 1000\nDCGM_FI_DEV_FB_USED{gpu=\"0\"} 1e300 1000\n";
    let e = err(dcgm, ImportFormat::Dcgm);
    assert!(e.contains("line 2, field `DCGM_FI_DEV_FB_USED`: 1e300 is outside"), "{e}");
}

#[test]
fn dmon_with_one_pcie_direction_uses_it_and_says_so() {
    let rx_only =
        "# gpu sm fb rxpci txpci\n# Idx % MB MB/s MB/s\n 0 10 1000 100 -\n 0 10 1000 200 -\n 0 10 1000 300 -\n";
    let i = import_str(rx_only, None, ImportFormat::Dmon, &opts()).unwrap();
    assert_eq!(col(&i, Resource::Pcie), [200.0, 300.0]);
    assert!(has_note(&i, "no txpci values; PCIe is rxpci alone") && !has_note(&i, "no PCIe"), "{:?}", i.notes);
    let tx_only = rx_only.replace(" 100 -", " - 100").replace(" 200 -", " - 200").replace(" 300 -", " - 300");
    let i = import_str(&tx_only, None, ImportFormat::Dmon, &opts()).unwrap();
    assert_eq!(col(&i, Resource::Pcie), [200.0, 300.0]);
    assert!(has_note(&i, "no rxpci values; PCIe is txpci alone"), "{:?}", i.notes);
}

#[test]
fn dcgm_container_filter_that_matches_nothing_lists_the_containers() {
    let o = ImportOptions { container: Some("nope".into()), ..opts() };
    let e = import("dcgm_gauges.prom", ImportFormat::Dcgm, &o).unwrap_err().to_string();
    assert!(e.contains("container `nope`") && e.contains("containers seen: bert, resnet50"), "{e}");
    let o = ImportOptions { pod: Some("bert-infer-5c2a".into()), container: Some("resnet50".into()), ..opts() };
    let e = import("dcgm_gauges.prom", ImportFormat::Dcgm, &o).unwrap_err().to_string();
    assert!(e.contains("pod `bert-infer-5c2a` and container `resnet50`") && e.contains("containers seen: bert"), "{e}");
}

#[test]
fn recorded_on_keeps_the_logs_card_name_host_and_memory_and_finds_its_catalogue_entry() {
    let a100 = "timestamp, name, index, utilization.gpu [%], memory.used [MiB], memory.total [MiB]\n\
                2026/11/25 10:00:00.000, NVIDIA A100-SXM4-40GB, 0, 20 %, 2048 MiB, 40960 MiB\n\
                2026/11/25 10:00:01.000, NVIDIA A100-SXM4-40GB, 0, 20 %, 2048 MiB, 40960 MiB\n";
    let i = import_str(a100, None, ImportFormat::NvidiaSmi, &opts()).unwrap();
    let on = i.profile.recorded_on.clone().unwrap();
    assert_eq!((on.gpu_name.as_str(), on.architecture.as_str()), ("NVIDIA A100-SXM4-40GB", "Ampere"));
    // More used than the card's own total: refused at its line, not found later against the
    // largest GPU of a library.
    let over = a100.replacen("2048 MiB", "45000 MiB", 2).replacen("45000 MiB", "2048 MiB", 1);
    let e = import_str(&over, None, ImportFormat::NvidiaSmi, &opts()).unwrap_err().to_string();
    assert!(e.contains("line 3") && e.contains("memory.used") && e.contains("40960"), "{e}");
    assert_eq!((on.memory_mib, on.cores), (40960.0, 6912));
    // A card the catalogue has no entry for is kept as the log names it, and said so.
    let b200 = a100.replace("NVIDIA A100-SXM4-40GB", "NVIDIA B200").replace("40960 MiB", "183359 MiB");
    let i = import_str(&b200, None, ImportFormat::NvidiaSmi, &opts()).unwrap();
    let on = i.profile.recorded_on.clone().unwrap();
    assert_eq!((on.gpu_name.as_str(), on.memory_mib, on.cores), ("NVIDIA B200", 183359.0, 0));
    assert!(has_note(&i, "no catalogue GPU matches `NVIDIA B200`"), "{:?}", i.notes);
    // DCGM: the model and host labels, and the card's memory as FB_USED + FB_FREE.
    let dcgm = "# scrape at 1764107400\n\
        DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"node-1\"} 10\n\
        DCGM_FI_DEV_FB_USED{gpu=\"0\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"node-1\"} 1000\n\
        DCGM_FI_DEV_FB_FREE{gpu=\"0\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"node-1\"} 80559\n\
        # scrape at 1764107401\n\
        DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"node-1\"} 10\n\
        DCGM_FI_DEV_FB_USED{gpu=\"0\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"node-1\"} 1000\n";
    let i = import_str(dcgm, None, ImportFormat::Dcgm, &opts()).unwrap();
    let on = i.profile.recorded_on.clone().unwrap();
    assert_eq!((on.gpu_name.as_str(), on.node.as_str(), on.memory_mib), ("NVIDIA H100 80GB HBM3", "node-1", 81559.0));
    assert_eq!(on.architecture, "Hopper");
}

/// An export of several machines has a GPU 0 on each: their readings are refused, naming the
/// two hosts and the lines, not merged into one profile that alternates between two cards.
/// One machine's lines import.
#[test]
fn dcgm_gpus_of_two_hosts_under_one_index_are_refused_not_merged() {
    let a = "{gpu=\"0\",UUID=\"GPU-aaaa\",Hostname=\"node-a\",modelName=\"NVIDIA A100-SXM4-40GB\"}";
    let b = "{gpu=\"0\",UUID=\"GPU-bbbb\",Hostname=\"node-b\",modelName=\"Tesla T4\"}";
    let mut text = String::new();
    for k in 0..4u64 {
        let t = 1_700_000_000_000 + 1000 * k;
        text += &format!("DCGM_FI_DEV_GPU_UTIL{a} 95 {t}\nDCGM_FI_DEV_FB_USED{a} 30000 {t}\n");
        text += &format!("DCGM_FI_DEV_GPU_UTIL{b} 5 {}\nDCGM_FI_DEV_FB_USED{b} 200 {}\n", t + 500, t + 500);
    }
    let e = import_str(&text, None, ImportFormat::Dcgm, &opts()).unwrap_err().to_string();
    assert!(e.contains("node-b") && e.contains("node-a") && e.contains("line 3") && e.contains("line 1"), "{e}");
    let one: String = text.lines().filter(|l| l.contains("node-a")).map(|l| format!("{l}\n")).collect();
    let i = import_str(&one, None, ImportFormat::Dcgm, &opts()).unwrap();
    assert!(col(&i, Resource::GpuUtil).iter().all(|&u| u == 95.0));
}

/// Two PCIe counter readings further apart than an i64 of milliseconds holds: an error, never
/// an overflow (which panicked in debug builds).
#[test]
fn dcgm_counters_at_extreme_timestamps_do_not_overflow() {
    let text = "# TYPE DCGM_FI_PROF_PCIE_TX_BYTES counter\n\
        DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 50 -9000000000000000000\n\
        DCGM_FI_DEV_FB_USED{gpu=\"0\"} 100 -9000000000000000000\n\
        DCGM_FI_PROF_PCIE_TX_BYTES{gpu=\"0\"} 1 -9000000000000000000\n\
        DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 50 9000000000000000000\n\
        DCGM_FI_DEV_FB_USED{gpu=\"0\"} 100 9000000000000000000\n\
        DCGM_FI_PROF_PCIE_TX_BYTES{gpu=\"0\"} 2 9000000000000000000\n";
    assert!(import_str(text, None, ImportFormat::Dcgm, &opts()).is_err());
}

/// Readings an hour apart in a log of seconds (local times across a summer-time jump) are
/// held across the gap: the import says so, naming the lines, instead of a silent 3,603 s
/// job. Evenly spaced readings get no such note.
#[test]
fn a_long_silence_in_a_log_is_noted_with_its_lines() {
    let text = "timestamp, index, utilization.gpu [%], memory.used [MiB]\n\
        2026/03/29 01:59:58.000, 0, 50 %, 1000 MiB\n\
        2026/03/29 01:59:59.000, 0, 50 %, 1000 MiB\n\
        2026/03/29 03:00:00.000, 0, 50 %, 1000 MiB\n\
        2026/03/29 03:00:01.000, 0, 50 %, 1000 MiB\n";
    let i = import_str(text, None, ImportFormat::NvidiaSmi, &opts()).unwrap();
    assert!(has_note(&i, "3601 s between lines 3 and 4"), "{:?}", i.notes);
    let even = import("nvidia_smi_nounits.csv", ImportFormat::NvidiaSmi, &opts()).unwrap();
    assert!(!has_note(&even, "far apart"), "{:?}", even.notes);
}

/// A Prometheus scrape of dcgm-exporter renames the workload's `pod` and `container` labels
/// to `exported_pod` and `exported_container`, and `pod` becomes the exporter's own pod: the
/// filters match the workload's, so the exporter's pod name (the same on every series)
/// neither hides the workload nor merges two of them.
#[test]
fn dcgm_filters_read_the_workloads_exported_labels_first() {
    let series = |gpu: u32, pod: &str, container: &str| {
        format!(
            "{{gpu=\"{gpu}\",pod=\"nvidia-dcgm-exporter-7xk2p\",container=\"nvidia-dcgm-exporter\",\
             exported_pod=\"{pod}\",exported_container=\"{container}\"}}"
        )
    };
    let (a, b) = (series(0, "bert-train-0", "bert"), series(1, "resnet-0", "resnet"));
    let mut text = String::new();
    for k in 0..4u64 {
        let t = 1_700_000_000_000 + 1000 * k;
        text += &format!("DCGM_FI_DEV_GPU_UTIL{a} 95 {t}\nDCGM_FI_DEV_FB_USED{a} 30000 {t}\n");
        text += &format!("DCGM_FI_DEV_GPU_UTIL{b} 5 {t}\nDCGM_FI_DEV_FB_USED{b} 200 {t}\n");
    }
    let by_pod = ImportOptions { pod: Some("bert-train-0".into()), ..opts() };
    let i = import_str(&text, None, ImportFormat::Dcgm, &by_pod).unwrap();
    assert_eq!(i.gpu, 0);
    assert!(col(&i, Resource::GpuUtil).iter().all(|&u| u == 95.0));
    let by_container = ImportOptions { container: Some("resnet".into()), ..opts() };
    assert_eq!(import_str(&text, None, ImportFormat::Dcgm, &by_container).unwrap().gpu, 1);
    let exporter = ImportOptions { pod: Some("nvidia-dcgm-exporter-7xk2p".into()), ..opts() };
    let e = import_str(&text, None, ImportFormat::Dcgm, &exporter).unwrap_err().to_string();
    assert!(e.contains("bert-train-0") && e.contains("resnet-0"), "{e}");
}

/// An nvidia-smi log of two GPUs queried without `index` (`--query-gpu=timestamp,uuid,...`):
/// the GPUs are told apart by `uuid` (or `pci.bus_id`), not merged into one profile that
/// alternates between a busy card and an idle one every few milliseconds.
#[test]
fn nvidia_smi_without_index_tells_gpus_apart_by_uuid_or_bus_id() {
    for (field, a, b) in [("uuid", "GPU-0aa1", "GPU-0bb2"), ("pci.bus_id", "00000000:3B:00.0", "00000000:AF:00.0")] {
        let mut text = format!("timestamp, name, {field}, utilization.gpu [%], memory.used [MiB]\n");
        for k in 0..6 {
            text += &format!("2026/11/25 21:50:{:02}.000, NVIDIA A100-SXM4-40GB, {a}, 95 %, 30000 MiB\n", k);
            text += &format!("2026/11/25 21:50:{:02}.003, NVIDIA A100-SXM4-40GB, {b}, 5 %, 200 MiB\n", k);
        }
        let e = import_str(&text, None, ImportFormat::NvidiaSmi, &opts()).unwrap_err().to_string();
        assert!(e.contains(&format!("0 = {a}")) && e.contains(&format!("1 = {b}")) && e.contains("--gpu"), "{e}");
        let busy = import_str(&text, None, ImportFormat::NvidiaSmi, &with_gpu(0)).unwrap();
        assert_eq!(busy.readings, 6);
        assert!(col(&busy, Resource::GpuUtil).iter().all(|&u| u == 95.0), "{field}");
        assert!(has_note(&busy, &format!("0 = {a}")), "{:?}", busy.notes);
        let idle = import_str(&text, None, ImportFormat::NvidiaSmi, &with_gpu(1)).unwrap();
        assert_eq!(idle.profile.summary().peak.gpu_mem_mib, 200.0);
    }
}

/// DCGM's PROF_PCIE fields hold rates in bytes/s, and exporter configs often declare them
/// `counter`. A steady ~2.9 GB/s read as counter differences gave 20-380 MB/s and "counter
/// resets"; a series that falls about every other scrape is read as rates, and said so. A
/// true counter with one reset (tests/data/dcgm_counters.prom) is still read as a counter.
#[test]
fn dcgm_pcie_rates_declared_counters_are_read_as_rates() {
    let mut text =
        String::from("# TYPE DCGM_FI_PROF_PCIE_TX_BYTES counter\n# TYPE DCGM_FI_PROF_PCIE_RX_BYTES counter\n");
    for (k, (tx, rx)) in [(1.40e9, 1.50e9), (1.38e9, 1.52e9), (1.41e9, 1.49e9), (1.39e9, 1.51e9), (1.40e9, 1.50e9)]
        .into_iter()
        .enumerate()
    {
        let t = 1_700_000_000_000u64 + 1000 * k as u64;
        text += &format!(
            "DCGM_FI_DEV_GPU_UTIL{{gpu=\"0\"}} 50 {t}\nDCGM_FI_DEV_FB_USED{{gpu=\"0\"}} 1000 {t}\n\
             DCGM_FI_PROF_PCIE_TX_BYTES{{gpu=\"0\"}} {tx} {t}\nDCGM_FI_PROF_PCIE_RX_BYTES{{gpu=\"0\"}} {rx} {t}\n"
        );
    }
    let i = import_str(&text, None, ImportFormat::Dcgm, &opts()).unwrap();
    for s in &i.profile.samples {
        assert!((s.pcie_mbps - 2900.0).abs() < 30.0, "{}", s.pcie_mbps);
    }
    assert!(has_note(&i, "read as a rate"), "{:?}", i.notes);
    assert!(!has_note(&i, "reset"), "{:?}", i.notes);
}

/// A `promtool tsdb dump` names each series by its `__name__` label (`{__name__="...",
/// gpu="0"} 95 1700000000000`), which docs/PROFILER.md said could be imported and could not
/// ("expected a metric name"); a bare name cut off before its value says so.
#[test]
fn dcgm_reads_promtool_dumps_and_names_a_missing_value() {
    let mut text = String::new();
    for k in 0..3u64 {
        let t = 1_700_000_000_000 + 1000 * k;
        text += &format!("{{__name__=\"DCGM_FI_DEV_GPU_UTIL\", gpu=\"0\", Hostname=\"n\"}} 9.5e+01 {t}\n");
        text += &format!("{{__name__=\"DCGM_FI_DEV_FB_USED\", gpu=\"0\", Hostname=\"n\"}} 3000 {t}\n");
    }
    let i = import_str(&text, None, ImportFormat::Dcgm, &opts()).unwrap();
    assert!(col(&i, Resource::GpuUtil).iter().all(|&u| u == 95.0));
    assert_eq!(i.profile.summary().peak.gpu_mem_mib, 3000.0);
    let e = err("{gpu=\"0\"} 1 1000\n", ImportFormat::Dcgm);
    assert!(e.contains("__name__"), "{e}");
    let e = err("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 10 1000\nDCGM_FI_DEV_FB_USED\n", ImportFormat::Dcgm);
    assert!(e.contains("line 2") && e.contains("missing value"), "{e}");
}

/// A header with a query field that has capitals after its first letter
/// (`encoder.stats.sessionCount`, in `nvidia-smi --help-query-gpu`) is a header, not data.
#[test]
fn nvidia_smi_header_fields_may_have_capitals_after_the_first_letter() {
    let text = "timestamp, utilization.gpu [%], memory.used [MiB], encoder.stats.sessionCount\n\
        2026/11/25 21:50:00.000, 10 %, 100 MiB, 0\n2026/11/25 21:50:01.000, 20 %, 200 MiB, 0\n";
    let i = import_str(text, None, ImportFormat::NvidiaSmi, &opts()).unwrap();
    assert_eq!(col(&i, Resource::GpuUtil), [20.0]);
    assert!(has_note(&i, "encoder.stats.sessioncount"), "{:?}", i.notes);
}

/// A dmon log without a time column: `--interval-s` alone is both the rows' spacing and the
/// output's (a `-d 5` log), while `--dmon-delay-s` sets the spacing, so a `-d 1` log can be
/// resampled to 5 s without its job stretched five times (95 s for 19 s, as it was).
#[test]
fn dmon_delay_sets_the_rows_spacing_apart_from_the_output_interval() {
    let with = |delay: Option<f64>, interval: Option<f64>| {
        let o = ImportOptions { dmon_delay_s: delay, interval_s: interval, ..with_gpu(0) };
        import("dmon_umt.txt", ImportFormat::Dmon, &o).unwrap().profile
    };
    let solo = |p: &dqngpu_model::AppProfile| p.interval_s * p.samples.len() as f64;
    assert_eq!(solo(&with(None, None)), 9.0);
    assert_eq!(solo(&with(None, Some(5.0))), 45.0, "rows 5 s apart, as dmon -d 5 writes them");
    let resampled = with(Some(1.0), Some(5.0));
    assert_eq!((resampled.interval_s, solo(&resampled)), (5.0, 10.0));
    assert_eq!(solo(&with(Some(2.0), None)), 18.0);
    let e = import("dmon_umt.txt", ImportFormat::Dmon, &ImportOptions { dmon_delay_s: Some(0.0), ..with_gpu(0) })
        .unwrap_err()
        .to_string();
    assert!(e.contains("--dmon-delay-s"), "{e}");
}

/// Formats the DCGM importer does not read say what they are: a `dcgmi dmon` table (it was
/// "unexpected ` ` after the metric name" or "no samples found") and MIG slices of one GPU
/// (it asked for a --pod filter that cannot tell them apart).
#[test]
fn dcgm_says_which_unread_format_it_was_given() {
    let table = "#Entity   GPUTL  FBUSD  SMACT  PCITX  PCIRX\nID\nGPU 0     45     1234   0.400  100    200\n";
    let e = err(table, ImportFormat::Dcgm);
    assert!(e.contains("line 1") && e.contains("dcgmi dmon"), "{e}");
    let mut mig = String::new();
    for (k, gi) in [(0u64, "1"), (0, "2")] {
        let t = 1_700_000_000_000 + 1000 * k;
        mig += &format!("DCGM_FI_DEV_GPU_UTIL{{gpu=\"0\",GPU_I_ID=\"{gi}\",GPU_I_PROFILE=\"1g.10gb\"}} 50 {t}\n");
    }
    let e = err(&mig, ImportFormat::Dcgm);
    assert!(e.contains("line 2") && e.contains("MIG") && e.contains("GPU_I_ID"), "{e}");
}

/// A log begun before its job and ended after it: `--trim-idle` drops the idle readings at
/// both ends (the last leading one stays, the start of the first busy second), so the job's
/// solo time is its own, not the log's; without the flag the log is the job.
#[test]
fn trim_idle_drops_the_idle_readings_around_the_job() {
    let mut text = String::from("timestamp, utilization.gpu [%], memory.used [MiB]\n");
    let rows = [(0, 2), (0, 3), (0, 2), (0, 400), (50, 3000), (60, 3000), (55, 2900), (0, 2), (0, 2)];
    for (k, (u, m)) in rows.iter().enumerate() {
        text += &format!("2026/11/25 21:50:{k:02}.000, {u} %, {m} MiB\n");
    }
    let whole = import_str(&text, None, ImportFormat::NvidiaSmi, &opts()).unwrap();
    assert_eq!(whole.profile.samples.len(), 8);
    let o = ImportOptions { trim_idle: true, ..opts() };
    let t = import_str(&text, None, ImportFormat::NvidiaSmi, &o).unwrap();
    // Readings 2..=6 stay: 4 s, from the last idle reading before the job to its last busy one
    // (reading 3, 0 % with 400 MiB held, is the job's start: busy by its memory).
    assert_eq!(col(&t, Resource::GpuUtil), [0.0, 50.0, 60.0, 55.0]);
    assert!(has_note(&t, "2 idle reading(s) before the job and 2 after"), "{:?}", t.notes);
    // A trim that leaves one reading keeps the log's spacing (it fell back to 1 s).
    let mut late = String::from("timestamp, utilization.gpu [%], memory.used [MiB]\n");
    for (k, (u, m)) in [(95, 3000), (0, 2), (0, 2), (0, 2)].iter().enumerate() {
        late += &format!("2026/11/25 21:50:{:02}.000, {u} %, {m} MiB\n", 5 * k);
    }
    let one = import_str(&late, None, ImportFormat::NvidiaSmi, &o).unwrap();
    assert_eq!(one.profile.interval_s, 5.0);
    let idle = "timestamp, utilization.gpu [%], memory.used [MiB]\n2026/11/25 21:50:00.000, 0 %, 2 MiB\n2026/11/25 21:50:01.000, 0 %, 2 MiB\n";
    let kept = import_str(idle, None, ImportFormat::NvidiaSmi, &o).unwrap();
    assert_eq!(kept.profile.samples.len(), 1);
    assert!(has_note(&kept, "every reading is idle"), "{:?}", kept.notes);
}
