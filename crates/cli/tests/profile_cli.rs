//! `dqngpu profile` end to end with the real binary: no-driver failure, import -> library ->
//! ls/show/export -> `simulate --library`, and `--server` against the real service and a
//! loopback server that answers an error.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::{text, BIN};
use dqngpu_model::format::read_profile;
use dqngpu_model::library::read_dir_library;
use dqngpu_model::AppProfile;
use serde_json::Value;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../profiler/tests/data").join(name)
}

/// A fresh directory for test `name` (prefixed: the CLI's test binaries share one temp dir).
fn test_dir(name: &str) -> PathBuf {
    common::test_dir(&format!("profile-{name}"))
}

fn dqngpu(args: &[&str]) -> Output {
    Command::new(BIN).args(args).env_remove("DQNGPU_TOKEN").output().unwrap()
}

fn ok(args: &[&str]) -> String {
    let o = dqngpu(args);
    assert!(o.status.success(), "dqngpu {args:?} failed: {}", text(&o));
    text(&o)
}

/// [`ok`], standard output alone (JSON a warning on stderr must not follow).
fn ok_stdout(args: &[&str]) -> String {
    let o = dqngpu(args);
    assert!(o.status.success(), "dqngpu {args:?} failed: {}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn run_without_a_driver_names_what_it_looked_for_and_runs_nothing() {
    let d = test_dir("nodriver");
    let lib = d.join("missing/libnvidia-ml.so.1");
    let marker = d.join("ran");
    let o = Command::new(BIN)
        .args(["profile", "run", "--app", "x", "-o"])
        .arg(d.join("x.json"))
        .args(["--", "touch"])
        .arg(&marker)
        .env("DQNGPU_NVML_LIB", &lib)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("no NVIDIA driver") && t.contains(&lib.display().to_string()), "{t}");
    assert!(t.contains("DQNGPU_NVML_LIB"), "{t}");
    assert!(!marker.exists(), "the command ran although no GPU could be sampled");
    assert!(!d.join("x.json").exists());
}

#[test]
fn import_ls_show_export_and_simulate_from_the_library() {
    let d = test_dir("lib");
    let lib = d.join("lib");
    let lib_s = lib.to_str().unwrap();
    let smi = data("nvidia_smi_units.csv");
    let dmon = data("dmon_umt_dt.txt");
    let dcgm = data("dcgm_counters.prom");
    // Mixed GPUs without --gpu: exit 1 naming them.
    let o = dqngpu(&[
        "profile",
        "import",
        "--format",
        "nvidia-smi",
        smi.to_str().unwrap(),
        "--app",
        "resnet",
        "--store",
        lib_s,
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("several GPUs (0, 1)"), "{}", text(&o));
    let o = dqngpu(&[
        "profile",
        "import",
        "--format",
        "parquet",
        smi.to_str().unwrap(),
        "--app",
        "resnet",
        "--store",
        lib_s,
    ]);
    assert_eq!(o.status.code(), Some(2), "unknown format is a usage error: {}", text(&o));

    ok(&[
        "profile",
        "import",
        "--format",
        "nvidia-smi",
        smi.to_str().unwrap(),
        "--app",
        "resnet",
        "--kind",
        "ml",
        "--gpu",
        "0",
        "--store",
        lib_s,
    ]);
    ok(&[
        "profile",
        "import",
        "--format",
        "dmon",
        dmon.to_str().unwrap(),
        "--app",
        "resnet",
        "--kind",
        "ml",
        "--store",
        lib_s,
    ]);
    let lammps_csv = lib.join("lammps.csv");
    let import_lammps = [
        "profile",
        "import",
        "--format",
        "dcgm",
        dcgm.to_str().unwrap(),
        "--app",
        "lammps",
        "--kind",
        "hpc",
        "--pod",
        "lammps-md-0",
        "-o",
        lammps_csv.to_str().unwrap(),
    ];
    let t = ok(&import_lammps);
    assert!(t.contains("reset"), "{t}");
    assert!(t.contains("wrote") && !t.contains("replaced"), "{t}");
    assert!(
        lib.join("resnet.json").exists() && lib.join("resnet-2.json").exists() && lib.join("lammps.meta.json").exists()
    );
    // The same import again: `-o` replaces the profile, and says so.
    let again = ok(&import_lammps);
    assert!(again.contains(&format!("replaced {}", lammps_csv.display())), "{again}");

    let rows: Vec<Value> =
        serde_json::from_str(&ok(&["profile", "ls", "--library", lib_s, "--format", "json"])).unwrap();
    let apps: Vec<(&str, &str)> =
        rows.iter().map(|r| (r["app"].as_str().unwrap(), r["profile"].as_str().unwrap())).collect();
    assert_eq!(apps, [("lammps", "lammps"), ("resnet", "resnet"), ("resnet", "resnet-2")]);
    let lammps = read_profile(&lib.join("lammps.csv")).unwrap();
    assert_eq!(rows[0]["duration_s"].as_f64(), Some(lammps.summary().solo_s));
    assert_eq!(rows[0]["peak_gpu_mem_mib"].as_f64(), Some(lammps.summary().peak.gpu_mem_mib));

    // Two profiles of app `resnet`: by app name is ambiguous, by file stem is not.
    let o = dqngpu(&["profile", "show", "resnet-x", "--library", lib_s]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let png = d.join("lammps.png");
    let t = ok(&["profile", "show", "lammps", "--library", lib_s, "--png", png.to_str().unwrap()]);
    assert!(t.contains("PCIe TX+RX (MB/s)") && t.contains('█'), "{t}");
    assert_eq!(&std::fs::read(&png).unwrap()[..4], b"\x89PNG");
    // Its folder is made; a file that cannot be written is named with the OS's reason, not a
    // plotting library's debug dump.
    let deep = d.join("plots/deep/lammps.png");
    ok(&["profile", "show", "lammps", "--library", lib_s, "--png", deep.to_str().unwrap()]);
    assert!(deep.is_file());
    let dir_png = d.join("dir.png");
    std::fs::create_dir_all(&dir_png).unwrap();
    let o = dqngpu(&["profile", "show", "lammps", "--library", lib_s, "--png", dir_png.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(!text(&o).contains("ImageError") && text(&o).contains("cannot write it"), "{}", text(&o));
    let t = ok(&["profile", "show", "resnet-2", "--library", lib_s]);
    assert!(t.contains("resnet-2"), "{t}");
    let o = dqngpu(&["profile", "show", "resnet", "--library", lib_s]);
    assert!(o.status.success() && text(&o).contains("profile   resnet "), "{}", text(&o));

    // export: CSV -> JSON -> CSV keeps every number.
    let j = d.join("lammps.json");
    let c = d.join("lammps-again.csv");
    ok(&["profile", "export", lib.join("lammps.csv").to_str().unwrap(), "-o", j.to_str().unwrap()]);
    ok(&["profile", "export", "lammps", "--library", lib_s, "-o", c.to_str().unwrap()]);
    let (pj, pc) = (read_profile(&j).unwrap(), read_profile(&c).unwrap());
    assert_eq!(pj.samples, lammps.samples);
    assert_eq!(pc.samples, lammps.samples);
    assert_eq!((pj.app.clone(), pj.recorded_on.clone()), (lammps.app.clone(), lammps.recorded_on.clone()));

    // The directory is a library for `simulate --jobs ... --library DIR`.
    assert_eq!(read_dir_library(&lib).unwrap().apps.len(), 3);
    let jobs = d.join("jobs.csv");
    std::fs::write(&jobs, "id,app,submit_s\n0,lammps,0\n1,resnet,0\n2,resnet-2,5\n").unwrap();
    let out = ok_stdout(&[
        "simulate",
        "--jobs",
        jobs.to_str().unwrap(),
        "--library",
        lib_s,
        "--scheduler",
        "fifo",
        "--gpus",
        "titanxp:1",
        "--format",
        "json",
    ]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["completed"], true, "{out}");
    assert_eq!(v["jobs"].as_array().map(Vec::len), Some(3), "{out}");
    assert_eq!(v["jobs"][0]["app"], "lammps");
    assert_eq!(v["jobs"][0]["solo_s"].as_f64(), Some(lammps.solo_s()));
}

/// A loopback server that answers one request with `status` and `body`, and hands the request
/// body back.
fn one_shot_server(status: u16, body: &'static str) -> (String, std::thread::JoinHandle<String>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let h = std::thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut r = BufReader::new(s.try_clone().unwrap());
        let mut len = 0;
        let mut line = String::new();
        while r.read_line(&mut line).unwrap() > 0 && line != "\r\n" {
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().unwrap();
            }
            line.clear();
        }
        let mut req = vec![0; len];
        r.read_exact(&mut req).unwrap();
        let mut s = s;
        write!(s, "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()).unwrap();
        String::from_utf8(req).unwrap()
    });
    (url, h)
}

#[test]
fn server_errors_are_reported_with_status_and_message() {
    let (url, h) = one_shot_server(400, r#"{"error":{"message":"profile: app name too long"}}"#);
    let o = dqngpu(&[
        "profile",
        "import",
        "--format",
        "dmon",
        data("dmon_umt_dt.txt").to_str().unwrap(),
        "--app",
        "vgg",
        "--server",
        &url,
    ]);
    let sent: AppProfile = serde_json::from_str(&h.join().unwrap()).unwrap();
    assert_eq!(sent.app.name, "vgg");
    // Eight readings span seven intervals: the profile lasts as long as the log.
    assert_eq!(sent.samples.len(), 7);
    assert_eq!(o.status.code(), Some(1));
    let t = text(&o);
    assert!(t.contains("HTTP 400") && t.contains("app name too long") && t.contains("/v1/profiles"), "{t}");
}

#[test]
fn profiles_posted_to_the_real_service_are_listed_unchanged() {
    let d = test_dir("service");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut child = Command::new(BIN)
        .args([
            "serve",
            "--gpus",
            "titanxp:1",
            "--tick-ms",
            "50",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--data-dir",
        ])
        .arg(d.join("data"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let up = (0..500).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        ureq::get(&format!("{url}/healthz")).call().is_ok()
    });
    let result = std::panic::catch_unwind(|| {
        assert!(up, "the service did not come up");
        let local = d.join("vgg.json");
        ok(&[
            "profile",
            "import",
            "--format",
            "dmon",
            data("dmon_umt_dt.txt").to_str().unwrap(),
            "--app",
            "vgg",
            "-o",
            local.to_str().unwrap(),
        ]);
        ok(&[
            "profile",
            "import",
            "--format",
            "dmon",
            data("dmon_umt_dt.txt").to_str().unwrap(),
            "--app",
            "vgg",
            "--server",
            &url,
        ]);
        let rows: Vec<Value> =
            serde_json::from_str(&ok(&["profile", "ls", "--server", &url, "--format", "json"])).unwrap();
        let row = rows.iter().find(|r| r["app"] == "vgg").expect("vgg listed");
        let p = read_profile(&local).unwrap();
        let s = p.summary();
        assert_eq!(row["duration_s"].as_f64(), Some(s.solo_s));
        assert_eq!(row["mean_gpu_util_pct"].as_f64(), Some(s.mean.gpu_util_pct));
        assert_eq!(row["peak_gpu_mem_mib"].as_f64(), Some(s.peak.gpu_mem_mib));
        assert_eq!(row["samples"].as_u64(), Some(p.samples.len() as u64));
        // The service has summaries, no curves: shown with a note (exit 0), and a plot of it
        // is refused.
        let o = dqngpu(&["profile", "show", "vgg", "--server", &url]);
        assert!(o.status.success() && text(&o).contains("no curves"), "{}", text(&o));
        let o = dqngpu(&["profile", "show", "vgg", "--server", &url, "--png", "x.png"]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    });
    let _ = child.kill();
    let _ = child.wait();
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}

#[test]
fn an_app_with_several_profiles_must_be_named_by_file() {
    let d = test_dir("ambiguous");
    let lib = d.join("lib");
    for stem in ["bert-a100", "bert-h100"] {
        let out = lib.join(format!("{stem}.json"));
        ok(&[
            "profile",
            "import",
            "--format",
            "dmon",
            data("dmon_umt_dt.txt").to_str().unwrap(),
            "--app",
            "bert",
            "-o",
            out.to_str().unwrap(),
        ]);
    }
    let o = dqngpu(&["profile", "show", "bert", "--library", lib.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("app `bert` has 2 profiles (bert-a100, bert-h100)"), "{}", text(&o));
    ok(&["profile", "show", "bert-h100", "--library", lib.to_str().unwrap()]);
}

/// A profile beyond what any hardware has is refused by every command that reads profiles,
/// `apps` included, with file, line and field; the built-in `lucid` library lists its
/// configurations with no data folder beside the binary.
#[test]
fn impossible_profiles_are_refused_and_lucid_is_built_in() {
    let header = "t_s,gpu_util_pct,gpu_mem_mib,sm_pct,pcie_mbps\n";
    let cases = [
        ("mem", "1,50,1e308,50,100\n", "gpu_mem_mib", "largest GPU"),
        ("pcie", "1,50,1000,50,1e9\n", "pcie_mbps", "fastest PCIe link"),
        ("sm", "1,50,1000,150,100\n", "sm_pct", "above 100%"),
    ];
    for (name, row, field, why) in cases {
        let d = test_dir(&format!("impossible-{name}"));
        std::fs::write(d.join("ok.csv"), format!("{header}0,50,1000,50,100\n1,60,1200,55,100\n")).unwrap();
        std::fs::write(d.join("bad.csv"), format!("{header}0,50,1000,50,100\n{row}")).unwrap();
        let lib = d.display().to_string();
        for args in [
            vec!["apps", "--library", &lib],
            vec!["simulate", "--library", &lib, "--workload", "random", "--scheduler", "sjf", "--n-jobs", "3"],
        ] {
            let o = dqngpu(&args);
            let t = text(&o);
            assert_eq!(o.status.code(), Some(1), "{args:?}: {t}");
            assert!(
                t.contains("bad.csv") && t.contains("line 3") && t.contains(field) && t.contains(why),
                "{args:?}: {t}"
            );
        }
    }
    // Run from a folder with no shared data anywhere above it.
    let d = test_dir("lucid-builtin");
    let o = Command::new(BIN).args(["apps", "--library", "lucid"]).current_dir(&d).output().unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert_eq!(t.matches("-amp").count(), 66, "{t}");
    assert!(t.contains("ResNet50-ImageNet-bs128-amp0"), "{t}");
}

/// `simulate`'s table shows mean JCT and the share of jobs slowed over 10%, the same numbers
/// as its JSON.
#[test]
fn simulate_table_shows_mean_jct_and_slowed_share() {
    let args = ["simulate", "--workload", "gpu_light", "--scheduler", "tetris", "--n-jobs", "8", "--seed", "4"];
    let table = ok(&args);
    let header = table.lines().find(|l| l.starts_with("scheduler")).unwrap_or_else(|| panic!("{table}"));
    let cols: Vec<&str> = header.split_whitespace().collect();
    assert_eq!(&cols[..5], ["scheduler", "mean_jct_s", "jct/bnd", "makespan_s", "slowed>10%"], "{table}");
    let row: Vec<&str> = table.lines().find(|l| l.starts_with("tetris")).unwrap().split_whitespace().collect();
    let json: Value = serde_json::from_str(&ok(&[&args[..], &["--format", "json"]].concat())).unwrap();
    let r = &json;
    let jobs = r["jobs"].as_array().unwrap();
    let jct = jobs.iter().map(|j| j["finish_s"].as_f64().unwrap() - j["submit_s"].as_f64().unwrap()).sum::<f64>()
        / jobs.len() as f64;
    assert!((r["mean_jct_s"].as_f64().unwrap() - jct).abs() < 1e-9);
    assert_eq!(row[1], format!("{jct:.1}"));
    // Mean JCT over the mean-JCT bound, which is at least the jobs' mean solo time.
    let bound = r["jct_lower_bound_s"].as_f64().unwrap();
    let solo = jobs.iter().map(|j| j["solo_s"].as_f64().unwrap()).sum::<f64>() / jobs.len() as f64;
    assert!(bound >= solo - 1e-9 && jct >= bound - 1e-9, "{jct} {bound} {solo}");
    assert_eq!(row[2], format!("{:.3}", jct / bound));
    assert!(table.contains(&format!("mean-JCT lower bound {bound:.1} s")), "{table}");
    let slowed =
        100.0 * jobs.iter().filter(|j| j["exec_slowdown"].as_f64().unwrap() > 1.10).count() as f64 / jobs.len() as f64;
    assert_eq!(row[4], format!("{slowed:.1}%"));
}

/// data/real-vs-sim-h200: six real jobs on an H200, with the profiles recorded for them.
fn h200_data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/real-vs-sim-h200")
}

/// `dqngpu simulate` of the H200 job set on its profiles, one H200, `sched` under `model`
/// (JSON), with the jobs in id (submission) order.
fn simulate_h200(sched: &str, model: &str) -> (Value, Vec<Value>) {
    let root = h200_data();
    let (lib, jobs) = (root.join("lib"), root.join("jobs.csv"));
    let args = [
        "simulate",
        "--library",
        lib.to_str().unwrap(),
        "--jobs",
        jobs.to_str().unwrap(),
        "--gpus",
        "h200:1",
        "--interference",
        model,
        "--scheduler",
        sched,
        "--format",
        "json",
    ];
    let sim: Value = serde_json::from_str(&ok_stdout(&args)).unwrap();
    let mut js: Vec<Value> = sim["jobs"].as_array().unwrap().clone();
    js.sort_by_key(|j| j["id"].as_u64());
    (sim, js)
}

/// The profiles `dqngpu profile run` recorded on an H200 (data/real-vs-sim-h200) load as a library,
/// and the simulator starts the six jobs in the order the real service did under each rule: all
/// six at once under greedy, one at a time under sjf.
#[test]
fn h200_profiles_simulate_the_schedules_measured_on_the_card() {
    let root = h200_data();
    for sched in ["greedy", "sjf"] {
        let measured: Value =
            serde_json::from_str(&std::fs::read_to_string(root.join("run1").join(format!("{sched}.json"))).unwrap())
                .unwrap();
        let mut real: Vec<(u64, f64)> = measured["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| (j["id"].as_u64().unwrap() - 1, j["started_at"].as_f64().unwrap()))
            .collect();
        let (sim, js) = simulate_h200(sched, "contention-h100");
        let mut simulated: Vec<(u64, f64)> =
            js.iter().map(|j| (j["id"].as_u64().unwrap(), j["start_s"].as_f64().unwrap())).collect();
        assert_eq!(simulated.len(), 6, "{sched}: {sim}");
        // Order by start (ties by id), then compare which job started when relative to the first.
        for v in [&mut real, &mut simulated] {
            v.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
        }
        let together = |v: &[(u64, f64)]| v.iter().all(|j| j.1 - v[0].1 < 1.0);
        assert_eq!(together(&real), together(&simulated), "{sched}: measured {real:?}, simulated {simulated:?}");
        if !together(&real) {
            let order = |v: &[(u64, f64)]| v.iter().map(|j| j.0).collect::<Vec<_>>();
            assert_eq!(order(&real), order(&simulated), "{sched}: start order measured vs simulated");
        }
    }
}

/// The H100 fit predicts the execution slowdowns of the six jobs sharing the H200 (measured:
/// each job's run time in the six-way schedules over its run time alone under sjf, medians
/// over the runs) closer than the Lucid fit and than no slowdown at all (docs/SERVICE.md).
#[test]
fn the_h100_fit_predicts_the_six_way_h200_group_best() {
    let root = h200_data();
    // Each job's run time (finish - start) by submission order, for each complete schedule.
    let runs_of = |sched: &str| -> Vec<Vec<f64>> {
        (1..=3)
            .filter_map(|r| {
                let text = std::fs::read_to_string(root.join(format!("run{r}/{sched}.json"))).ok()?;
                let v: Value = serde_json::from_str(&text).unwrap();
                let mut jobs: Vec<&Value> = v["jobs"].as_array().unwrap().iter().collect();
                jobs.sort_by_key(|j| j["id"].as_u64());
                jobs.iter().all(|j| j["state"] == "succeeded").then(|| {
                    jobs.iter()
                        .map(|j| j["finished_at"].as_f64().unwrap() - j["started_at"].as_f64().unwrap())
                        .collect()
                })
            })
            .collect()
    };
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        }
    };
    let solo = runs_of("sjf");
    let shared: Vec<Vec<f64>> = [runs_of("greedy"), runs_of("dqngpu-plan")].concat();
    assert!(solo.len() >= 2 && shared.len() >= 6, "{} sjf and {} shared runs", solo.len(), shared.len());
    let measured: Vec<f64> = (0..6)
        .map(|k| median(shared.iter().map(|r| r[k]).collect()) / median(solo.iter().map(|r| r[k]).collect()))
        .collect();
    let error = |model: &str| -> f64 {
        let (sim, js) = simulate_h200("greedy", model);
        // Greedy starts all six at once in the simulator, as it did on the card.
        assert!(js.iter().all(|j| j["start_s"].as_f64() == Some(0.0)), "{model}: {sim}");
        let predicted = js.iter().map(|j| j["exec_s"].as_f64().unwrap() / j["solo_s"].as_f64().unwrap());
        predicted.zip(&measured).map(|(p, m)| (p - m).abs() / m).sum::<f64>() / 6.0
    };
    let (h100, lucid, none) = (error("contention-h100"), error("contention"), error("none"));
    assert!(h100 < lucid && h100 < none, "mean |error|: H100 fit {h100:.3}, Lucid fit {lucid:.3}, none {none:.3}");
}

/// `profile import` of the nvidia-smi log `log`, GPU 0, as app `app`, to `dest` (its flags).
fn import_smi(log: &Path, app: &str, dest: &[&str]) -> Output {
    let log = log.to_str().unwrap();
    dqngpu(&[&["profile", "import", "--format", "nvidia-smi", log, "--app", app, "--gpu", "0"], dest].concat())
}

#[test]
fn an_output_never_replaces_the_input_and_a_token_file_is_no_destination() {
    let d = test_dir("over");
    let log = d.join("smi.csv");
    std::fs::copy(data("nvidia_smi_units.csv"), &log).unwrap();
    let before = std::fs::read(&log).unwrap();
    let log_s = log.to_str().unwrap();
    let import = |out: &[&str]| import_smi(&log, "x", out);
    // The same file, and the same file by another path.
    let other_path = d.join(".").join("smi.csv");
    for out in [log_s, other_path.to_str().unwrap()] {
        let o = import(&["-o", out]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(text(&o).contains("replace the input"), "{}", text(&o));
    }
    assert_eq!(std::fs::read(&log).unwrap(), before, "the raw log is kept");
    // A token file alone sends the profile nowhere: refused before any work.
    let token = d.join("token");
    std::fs::write(&token, "secret-token-0123456789").unwrap();
    let o = import(&["--token-file", token.to_str().unwrap()]);
    assert_ne!(o.status.code(), Some(0), "{}", text(&o));
    // The usage line offers the three destinations, not the token file, as the choice.
    let help = ok(&["profile", "import", "--help"]);
    assert!(help.contains("<--output <OUTPUT>|--store <STORE>|--server <SERVER>>"), "{help}");
    // A leading dot in the app name would hide the stored file from the library reader.
    let lib = d.join("lib");
    let o = import_smi(&log, ".myapp", &["--store", lib.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let listed = read_dir_library(&lib).unwrap();
    assert!(listed.apps.values().any(|p| p.app.name == ".myapp"), "{:?}", listed.apps.keys().collect::<Vec<_>>());
    // simulate's event log over its job file, likewise.
    let jobs = d.join("jobs.csv");
    std::fs::write(&jobs, "id,app,submit_s\n0,alexnet,0\n").unwrap();
    let o = dqngpu(&[
        "simulate",
        "--jobs",
        jobs.to_str().unwrap(),
        "--scheduler",
        "fifo",
        "--events",
        jobs.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("--events") && text(&o).contains("--jobs"), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&jobs).unwrap(), "id,app,submit_s\n0,alexnet,0\n");
    // Drawing flags beside a job file would be ignored: refused.
    let o = dqngpu(&["simulate", "--jobs", jobs.to_str().unwrap(), "--n-jobs", "5"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

#[test]
fn built_in_libraries_are_listed_and_a_job_file_finds_its_directory_library_from_anywhere() {
    let t = ok(&["profile", "ls", "--library", "thesis"]);
    assert!(t.contains("alexnet"), "{t}");
    let o = dqngpu(&["apps", "--library", data("nvidia_smi_units.csv").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("is a file"), "{}", text(&o));
    ok(&["profile", "show", "alexnet", "--library", "thesis"]);
    let d = test_dir("libpath");
    let lib = d.join("L");
    let o = import_smi(&data("nvidia_smi_units.csv"), "mine", &["--store", lib.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    // Drawn with a relative library name, in the library's parent...
    let o = Command::new(BIN)
        .current_dir(&d)
        .args(["workload", "--library", "L", "--class", "random", "--jobs", "3", "-o", "sub/jobs.json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    // ...and simulated from elsewhere.
    let o = Command::new(BIN)
        .current_dir(std::env::temp_dir())
        .args(["simulate", "--scheduler", "fifo", "--jobs"])
        .arg(d.join("sub/jobs.json"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn a_model_where_no_agent_runs_is_refused_saying_why() {
    let o = dqngpu(&["simulate", "--scheduler", "all", "--model", "m.safetensors"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("`--scheduler all` runs the heuristics"), "{}", text(&o));
    let o = dqngpu(&["bench", "--schedulers", "dqngpu"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("decision_latency") && !text(&o).contains("pass --model"), "{}", text(&o));
}

#[test]
fn an_unknown_app_in_a_job_file_is_named_with_the_file_and_job() {
    let d = test_dir("unknown-app");
    let jobs = d.join("j.csv");
    std::fs::write(&jobs, "id,app,submit_s\n0,vgg16,0\n7,nosuchapp,0\n").unwrap();
    let o = dqngpu(&["simulate", "--scheduler", "sjf", "--jobs", jobs.to_str().unwrap()]);
    let t = text(&o);
    // A usage error (an unknown name) keeps its exit code and its list of valid names.
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("j.csv: job 7 (the job set's job 2 of 2)") && t.contains("nosuchapp"), "{t}");
    assert!(t.contains("alexnet"), "{t}");
}

/// A CSV job set replays as its JSON does (library, class and seed kept), and `simulate`'s
/// JSON states the settings that change its numbers, the job set's seed apart from `--seed`.
#[test]
fn a_csv_job_set_replays_with_its_provenance_and_the_output_states_its_settings() {
    let d = test_dir("provenance");
    let w = d.join("w.csv");
    let w = w.to_str().unwrap();
    ok(&["workload", "--class", "random", "--library", "generated:9:40", "--jobs", "10", "--seed", "6"]
        .into_iter()
        .chain(["--arrival-rate", "0.1", "-o", w])
        .collect::<Vec<_>>());
    let args = ["simulate", "--jobs", w, "--gpus", "2xtitanxp:2", "--scheduler", "sjf", "--seed", "5"];
    let o = dqngpu(&[&args[..], &["--format", "json", "--max-slowdown", "10", "--step-s", "2"]].concat());
    assert!(o.status.success(), "{}", text(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((v["seed"].as_u64(), v["settings"]["seed_flag"].as_u64()), (Some(6), Some(5)), "{v}");
    assert!(v["library"].as_str().unwrap().contains("generated:9"), "{v}");
    assert_eq!(v["settings"]["gpu_models"].as_array().map(Vec::len), Some(4));
    assert_eq!((v["settings"]["max_slowdown_pct"].as_f64(), v["settings"]["step_s"].as_f64()), (Some(10.0), Some(2.0)));
    // A step longer than the profiles' interval skips samples: said on stderr.
    assert!(String::from_utf8_lossy(&o.stderr).contains("skipped"), "{}", text(&o));
    let table = ok(&args);
    assert!(table.contains("drawn with seed 6") && table.contains("--seed 5"), "{table}");
}

/// An nvidia-smi log of GPU 0 with `n` readings `dt_ms` apart, util and memory rising with `k`.
fn smi_log(n: usize, dt_ms: u64, mem_base: u64) -> String {
    let mut s = String::from("timestamp, index, utilization.gpu [%], memory.used [MiB]\n");
    for k in 0..n as u64 {
        let ms = k * dt_ms;
        let (h, m, sec, milli) = (10 + ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000);
        s.push_str(&format!("2026/11/25 {h:02}:{m:02}:{sec:02}.{milli:03}, 0, {} %, {} MiB\n", k % 100, mem_base + k));
    }
    s
}

#[test]
fn a_csv_import_at_an_interval_of_no_whole_microseconds_reads_back() {
    let d = test_dir("third");
    let log = d.join("third.csv");
    // 30,000 readings a third of a second apart: past row 11,111 the old first-gap check failed.
    std::fs::write(&log, smi_log(30_000, 333, 1000)).unwrap();
    let out = d.join("out/third.csv");
    let o = import_smi(&log, "third", &["--interval-s", "0.3333333", "-o", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let p = read_profile(&out).unwrap();
    assert_eq!(p.interval_s, 0.3333333);
    assert!(p.samples.len() > 20_000, "{}", p.samples.len());
    // Without the sidecar the times alone still read back, within their rounding.
    std::fs::remove_file(d.join("out/third.meta.json")).unwrap();
    let bare = read_profile(&out).unwrap();
    assert!((bare.interval_s - 0.3333333).abs() < 1e-9, "{}", bare.interval_s);
    assert_eq!(bare.samples, p.samples);
    ok(&["profile", "show", out.to_str().unwrap()]);
}

#[test]
fn imports_racing_into_one_store_each_keep_their_profile() {
    let d = test_dir("race");
    let (log, store) = (d.join("s.csv"), d.join("store"));
    std::fs::write(&log, smi_log(5, 1000, 100)).unwrap();
    let n = 8;
    let children: Vec<_> = (0..n)
        .map(|k| {
            Command::new(BIN)
                .args(["profile", "import", "--format", "nvidia-smi", log.to_str().unwrap(), "--app", "same"])
                .args(["--params", &format!("run {k}"), "--store", store.to_str().unwrap()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let lib = read_dir_library(&store).unwrap();
    let mut params: Vec<String> = lib.apps.values().filter_map(|p| p.app.params.clone()).collect();
    params.sort();
    assert_eq!(params, (0..n).map(|k| format!("run {k}")).collect::<Vec<_>>(), "{:?}", lib.apps.keys());
}

#[test]
fn a_job_runs_the_profile_of_the_app_it_names_not_of_a_file_stem() {
    let d = test_dir("keys");
    let store = d.join("store");
    let store_s = store.to_str().unwrap();
    let (short, long) = (d.join("short.csv"), d.join("long.csv"));
    std::fs::write(&short, smi_log(11, 1000, 100)).unwrap();
    std::fs::write(&long, smi_log(41, 1000, 100)).unwrap();
    // `a b` is stored as a_b.json, and the app `a_b` after it as a_b-2.json.
    assert!(import_smi(&short, "a b", &["--store", store_s]).status.success());
    assert!(import_smi(&long, "a_b", &["--store", store_s]).status.success());
    assert!(store.join("a_b.json").exists() && store.join("a_b-2.json").exists());
    let solo = |app: &str| {
        let jobs = d.join("jobs.csv");
        std::fs::write(&jobs, format!("id,app,submit_s\n0,{app},0\n")).unwrap();
        let args = ["simulate", "--jobs", jobs.to_str().unwrap(), "--library", store_s, "--scheduler", "fifo"];
        let out = ok(&[&args[..], &["--gpus", "titanxp:1", "--format", "json"]].concat());
        let v: Value = serde_json::from_str(&out).unwrap();
        v["jobs"][0]["solo_s"].as_f64().unwrap()
    };
    assert_eq!(solo("a_b"), read_profile(&store.join("a_b-2.json")).unwrap().solo_s());
    assert_eq!(solo("a b"), read_profile(&store.join("a_b.json")).unwrap().solo_s());
    assert_ne!(solo("a_b"), solo("a b"));
    // An app with several profiles: a job naming the bare app is told the files to choose from.
    for stem in ["bert-a100", "bert-h100"] {
        let out = store.join(format!("{stem}.json"));
        assert!(import_smi(&short, "bert", &["-o", out.to_str().unwrap()]).status.success());
    }
    let jobs = d.join("bert.csv");
    std::fs::write(&jobs, "id,app,submit_s\n0,bert,0\n").unwrap();
    let o = dqngpu(&["simulate", "--jobs", jobs.to_str().unwrap(), "--library", store_s]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("2 profiles (bert-a100, bert-h100)"), "{}", text(&o));
}

#[test]
fn a_longer_interval_never_stretches_the_imported_job() {
    let d = test_dir("stretch");
    let log = d.join("s100.csv");
    std::fs::write(&log, smi_log(101, 1000, 100)).unwrap();
    for (dt, want) in [("60", 120.0), ("1", 100.0), ("30", 90.0)] {
        let out = d.join(format!("s{dt}.json"));
        let o = import_smi(&log, "s", &["--interval-s", dt, "-o", out.to_str().unwrap()]);
        assert!(o.status.success(), "{}", text(&o));
        let solo = read_profile(&out).unwrap().solo_s();
        assert_eq!(solo, want, "a 100 s log at {dt} s");
    }
    // 5 s of log at an hour would be an hour-long job: refused, naming the flag.
    let short = d.join("s5.csv");
    std::fs::write(&short, smi_log(6, 1000, 100)).unwrap();
    let o = import_smi(&short, "s", &["--interval-s", "3600", "-o", d.join("s5.json").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("--interval-s") && text(&o).contains("spans 5 s"), "{}", text(&o));
}

#[test]
fn a_one_reading_import_keeps_its_interval_as_csv() {
    let d = test_dir("one");
    let log = d.join("one.csv");
    std::fs::write(&log, smi_log(1, 1000, 100)).unwrap();
    let out = d.join("m.csv");
    assert!(import_smi(&log, "m", &["--interval-s", "0.1", "-o", out.to_str().unwrap()]).status.success());
    let p = read_profile(&out).unwrap();
    assert_eq!((p.samples.len(), p.interval_s), (1, 0.1));
}

#[test]
fn an_export_beside_its_twin_in_the_other_format_is_refused() {
    let d = test_dir("twin");
    let lib = d.join("lib");
    let log = d.join("s.csv");
    std::fs::write(&log, smi_log(5, 1000, 100)).unwrap();
    let csv = lib.join("one.csv");
    assert!(import_smi(&log, "one", &["-o", csv.to_str().unwrap()]).status.success());
    let json = lib.join("one.json");
    let o = dqngpu(&["profile", "export", csv.to_str().unwrap(), "-o", json.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("one.csv") && text(&o).contains("one.json"), "{}", text(&o));
    assert!(!json.exists());
    ok(&["profile", "ls", "--library", lib.to_str().unwrap()]);
    // An import's -o likewise.
    let o = import_smi(&log, "one", &["-o", json.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}

#[test]
fn run_without_a_driver_creates_no_output_directory_or_store() {
    let d = test_dir("nodriver-dirs");
    let lib = d.join("missing/libnvidia-ml.so.1");
    for dest in [["-o", "out/x.json"], ["--store", "store"]] {
        let o = Command::new(BIN)
            .current_dir(&d)
            .args(["profile", "run", "--app", "x", dest[0], dest[1], "--", "true"])
            .env("DQNGPU_NVML_LIB", &lib)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(text(&o).contains("no NVIDIA driver"), "{}", text(&o));
    }
    assert!(!d.join("out").exists() && !d.join("store").exists());
}

#[test]
fn an_output_named_like_a_sidecar_is_refused() {
    let d = test_dir("meta-out");
    let log = d.join("s.csv");
    std::fs::write(&log, smi_log(5, 1000, 100)).unwrap();
    let out = d.join("x.meta.json");
    let o = import_smi(&log, "x", &["-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("x.meta.json") && text(&o).contains("sidecar"), "{}", text(&o));
    assert!(!out.exists());
}

/// A fresh directory for test `name` holding `p.json`, a profile imported from a short
/// nvidia-smi log; (the directory, the profile).
fn with_profile(name: &str) -> (PathBuf, PathBuf) {
    let d = test_dir(name);
    let log = d.join("s.csv");
    std::fs::write(&log, smi_log(5, 1000, 100)).unwrap();
    let prof = d.join("p.json");
    assert!(import_smi(&log, "p", &["-o", prof.to_str().unwrap()]).status.success());
    (d, prof)
}

#[test]
fn show_png_never_truncates_a_file_that_is_no_png() {
    let (d, prof) = with_profile("png");
    let before = std::fs::read(&prof).unwrap();
    let prof_s = prof.to_str().unwrap();
    // The profile itself as the chart.
    let o = dqngpu(&["profile", "show", prof_s, "--png", prof_s]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("--png") && text(&o).contains("p.json"), "{}", text(&o));
    assert_eq!(std::fs::read(&prof).unwrap(), before, "the profile was overwritten");
    // Another file that is no .png.
    let notes = d.join("notes.txt");
    std::fs::write(&notes, "keep").unwrap();
    let o = dqngpu(&["profile", "show", prof_s, "--png", notes.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains(".png") && text(&o).contains("notes.txt"), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "keep");
    // A .PNG in any case is drawn.
    let chart = d.join("chart.PNG");
    ok(&["profile", "show", prof_s, "--png", chart.to_str().unwrap()]);
    assert_eq!(&std::fs::read(&chart).unwrap()[..4], b"\x89PNG");
}

#[test]
fn export_over_an_existing_file_says_replaced() {
    let (d, prof) = with_profile("export-replaced");
    let out = d.join("out.csv");
    let t = ok(&["profile", "export", prof.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert!(t.contains(&format!("wrote {}", out.display())), "{t}");
    let t = ok(&["profile", "export", prof.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert!(t.contains(&format!("replaced {}", out.display())), "{t}");
}

/// `--interference measured` knows only the pairs of its table (Lucid's configurations): a
/// run of apps it never saw gave `contention`'s figures to the last digit, labelled
/// "measured". stderr says how many of the job set's apps the table holds.
#[test]
fn simulate_says_how_much_of_a_job_set_measured_interference_knows() {
    let run = |lib: &str| {
        let o = dqngpu(&[
            "simulate",
            "--workload",
            "random",
            "--seed",
            "1",
            "--library",
            lib,
            "--scheduler",
            "sjf-bestfit",
            "--interference",
            "measured",
        ]);
        assert!(o.status.success(), "{}", text(&o));
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    assert!(run("thesis").contains("holds 0 of the 11 apps"), "{}", run("thesis"));
    let lucid = run("lucid");
    assert!(lucid.contains("of the 25 apps") && !lucid.contains("holds 0 of"), "{lucid}");
}
