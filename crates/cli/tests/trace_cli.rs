//! `dqngpu trace replay` with the real binary on small fixtures: JSON curves and output files,
//! bad rows refused naming file, line and field (exit 1), unknown policies exit 2, and pods
//! no node could ever hold counted failed with a warning.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_dqngpu");

fn test_dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("trace-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn fixture(d: &Path, pods: &str) -> (PathBuf, PathBuf) {
    let n = d.join("nodes.csv");
    let p = d.join("pods.csv");
    std::fs::write(&n, "sn,cpu_milli,memory_mib,gpu,model\na,64000,262144,4,T4\nb,32000,131072,2,A10\n").unwrap();
    std::fs::write(&p, format!("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n{pods}")).unwrap();
    (n, p)
}

fn replay(n: &Path, p: &Path, extra: &[&str]) -> Output {
    Command::new(BIN).args(["trace", "replay", "--nodes"]).arg(n).arg("--pods").arg(p).args(extra).output().unwrap()
}

#[test]
fn replay_writes_json_curves_and_files() {
    let d = test_dir("ok");
    let (n, p) = fixture(&d, "p0,4000,8192,1,500,\np1,4000,8192,1,1000,\np2,8000,8192,2,1000,A10\np3,2000,1024,0,0,\n");
    let out = d.join("out");
    let o = replay(&n, &p, &["--policy", "bestfit", "--seed", "7", "--format", "json", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["allocation_pct"].as_array().unwrap().len(), 131);
    assert_eq!(v["fragmentation_pct"].as_array().unwrap().len(), 131);
    assert!(v["pods_placed"].as_u64().unwrap() > 0);
    for f in ["curves.csv", "result.json", "allocation.svg", "allocation.png"] {
        assert!(out.join(f).is_file(), "{f}");
    }
    let csv = std::fs::read_to_string(out.join("curves.csv")).unwrap();
    assert_eq!(csv.lines().count(), 132, "header and 131 points");
}

#[test]
fn bad_rows_and_names_exit_with_clear_errors() {
    let d = test_dir("bad");
    let (n, p) = fixture(&d, "p0,4000,8192,1,500,\np1,4000,8192,1,1200,\n");
    let o = replay(&n, &p, &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("pods.csv") && err.contains("line 3") && err.contains("gpu_milli"), "{err}");
    let (n, p) = fixture(&d, "p0,4000,8192,1,500,\n");
    let o = replay(&n, &p, &["--policy", "tetris"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("fgd"));
}

#[test]
fn pods_no_node_can_hold_are_warned_about_and_failed() {
    let d = test_dir("never");
    let (n, p) = fixture(&d, "ok,4000,8192,1,500,\nbig,4000,8192,8,1000,\nh100,1000,1024,1,1000,H100\n");
    let o = replay(&n, &p, &["--tune", "0", "--format", "json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("big") && err.contains("h100"), "{err}");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["pods_failed"], 2);
    assert_eq!(v["pods_placed"], 1);
}

#[test]
fn timed_replay_and_comparison_report_waits() {
    let d = test_dir("timed");
    let n = d.join("nodes.csv");
    let p = d.join("pods.csv");
    std::fs::write(&n, "sn,cpu_milli,memory_mib,gpu,model\na,64000,262144,1,T4\n").unwrap();
    std::fs::write(
        &p,
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n\
         p0,1000,1024,1,1000,,LS,Running,0,100,0\np1,1000,1024,1,1000,,LS,Running,10,50,10\n",
    )
    .unwrap();
    let o = replay(&n, &p, &["--timed", "--load", "trace", "--format", "json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["max_wait_s"], 90.0);
    assert_eq!(v["pods_waited"], 1);
    let out = d.join("cmp");
    let o = Command::new(BIN)
        .args(["trace", "timed", "--nodes"])
        .arg(&n)
        .arg("--pods")
        .arg(&p)
        .args(["--load", "1.5", "--seeds", "2", "--policies", "fgd,bestfit", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(text.contains("FGD") && text.contains("BestFit") && text.contains("peak GPU demand 200.0%"), "{text}");
    for f in ["summary.csv", "curves.csv", "results.json", "allocation_over_time.svg", "allocation_over_time.png"] {
        assert!(out.join(f).is_file(), "{f}");
    }
    let summary = std::fs::read_to_string(out.join("summary.csv")).unwrap();
    assert_eq!(summary.lines().count(), 3, "{summary}");
    // A bad load is a usage error naming the value.
    let o = replay(&n, &p, &["--timed", "--load", "-1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("`-1`"));
    // A reservation: p1 has waited 90 s when p0 leaves, so one is made at 100 s.
    let o = replay(&n, &p, &["--timed", "--load", "trace", "--reserve-after", "30", "--format", "json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((v["reservations"].as_u64(), v["max_wait_s"].as_f64()), (Some(1), Some(90.0)));
    assert!(summary.starts_with("policy,") && summary.lines().next().unwrap().ends_with(",reservations"));
    let o = replay(&n, &p, &["--timed", "--reserve-after", "soon"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("`soon`"));
}

/// Seed counts, seed ranges and worker counts out of range are refused naming the flag,
/// before any replay (before: `--seeds 100000000000` aborted on an allocation of 800 GB, and
/// `--seed` near the largest seed overflowed); `bench --runs` the same; a policy named twice
/// to `trace timed` (before: replayed twice and pooled, its rows claiming twice the seeds).
#[test]
fn seed_worker_and_run_counts_out_of_range_are_refused() {
    let d = test_dir("bounds");
    let out = d.join("out");
    let out = out.to_str().unwrap();
    let cases: [(&[&str], &str); 8] = [
        (&["trace", "experiment", "--out", out, "--seeds", "100000000000"], "--seeds"),
        (&["trace", "experiment", "--out", out, "--seeds", "0"], "--seeds"),
        (&["trace", "experiment", "--out", out, "--seed", "18446744073709551615", "--seeds", "2"], "--seed"),
        (&["trace", "experiment", "--out", out, "--jobs", "100000"], "--jobs"),
        (&["trace", "timed", "--out", out, "--seeds", "100000000000"], "--seeds"),
        (&["trace", "timed", "--out", out, "--policies", "fgd, fgd"], "--policies"),
        (&["bench", "--runs", "100000000000"], "--runs"),
        (&["bench", "--runs", "0"], "--runs"),
    ];
    for (args, flag) in cases {
        let o = Command::new(BIN).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(flag) && err.contains("expected") || err.contains("past the largest"), "{args:?}: {err}");
        assert!(!Path::new(out).exists(), "{args:?} wrote results");
    }
}

/// `trace train` settings that would train on nothing or on no numbers are refused naming
/// the flag, and nothing is written (`--sigma nan` wrote weights "from sigma NaN").
#[test]
fn trace_train_settings_that_learn_nothing_are_refused() {
    let d = test_dir("train-flags");
    let out = d.join("w.json");
    for (flag, value) in
        [("--sigma", "nan"), ("--sigma", "0"), ("--step", "-1"), ("--sequences", "0"), ("--pairs", "0")]
    {
        let o = Command::new(BIN)
            .args(["trace", "train", "--iterations", "1", "--validation", "0", flag, value, "-o"])
            .arg(&out)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{flag} {value}: {err}");
        assert!(err.contains(flag), "{flag} {value}: {err}");
        assert!(!out.exists(), "{flag} {value} wrote weights");
    }
}

#[test]
fn the_shipped_trace_is_found_from_any_working_directory() {
    let d = test_dir("cwd");
    let o = Command::new(BIN)
        .current_dir(&d)
        .args(["trace", "replay", "--policy", "bestfit", "--seed", "42", "--format", "json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["allocation_pct"].as_array().unwrap().len(), 131);
    // A file that is nowhere says where the trace ships.
    let o = Command::new(BIN).current_dir(&d).args(["trace", "replay", "--pods", "nosuch.csv"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("nosuch.csv") && err.contains("--pods"), "{err}");
    // A list with a header and no pods names its file.
    let (n, p) = fixture(&d, "");
    let o = replay(&n, &p, &["--policy", "bestfit"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("pods.csv") && err.contains("no pods"), "{err}");
}

#[test]
fn warnings_carry_no_colour_codes_off_a_terminal_and_negative_waits_are_named() {
    let d = test_dir("plain");
    // A pod no node can hold draws a warning; stderr here is a pipe, as in `kubectl logs`.
    let (n, p) = fixture(&d, "p0,4000,8192,8,1000,\n");
    let o = replay(&n, &p, &["--policy", "bestfit"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("WARN") && !err.contains('\u{1b}'), "{err:?}");
    let o = Command::new(BIN).args(["trace", "timed", "--reserve-after", "-5"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("number of seconds >= 0"));
}

/// Pods no node can hold are left out of the load the timed replay scales arrivals to: on one
/// 2-GPU node, a 4-GPU pod neither sets the peak nor makes every load impossible.
#[test]
fn the_timed_load_is_the_placeable_pods() {
    let d = test_dir("timedfit");
    let n = d.join("nodes.csv");
    let p = d.join("pods.csv");
    std::fs::write(&n, "sn,cpu_milli,memory_mib,gpu,model\na,64000,262144,2,T4\n").unwrap();
    let head = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n";
    let rows = "big,1000,1024,4,1000,,LS,Running,0,100,0\np1,1000,1024,1,1000,,LS,Running,10,200,10\np2,1000,1024,1,500,,LS,Running,50,300,50\n";
    std::fs::write(&p, format!("{head}{rows}")).unwrap();
    let timed = |load: &str| {
        let o = Command::new(BIN)
            .args(["trace", "timed", "--seeds", "1", "--load", load, "--nodes"])
            .arg(&n)
            .arg("--pods")
            .arg(&p)
            .arg("--out")
            .arg(d.join(format!("out-{load}")))
            .output()
            .unwrap();
        (o.status.code(), format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
    };
    let (code, text) = timed("0.5");
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("can never fit") && text.contains("peak GPU demand 50.0%"), "{text}");
    // The placeable pods at once ask 75% (1 + 0.5 of 2 GPUs): a higher peak is impossible.
    let (code, text) = timed("1.0");
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("75.0%"), "{text}");
}

/// `trace train` on a list no node can hold any pod of has nothing to learn from: refused,
/// naming both files, and no weights are written.
#[test]
fn training_on_pods_no_node_can_hold_is_refused() {
    let d = test_dir("trainfit");
    let (n, p) = fixture(&d, "p0,4000,8192,8,1000,\np1,4000,8192,8,1000,\n");
    let out = d.join("w.json");
    let o = Command::new(BIN)
        .args([
            "trace",
            "train",
            "--iterations",
            "1",
            "--pairs",
            "1",
            "--sequences",
            "1",
            "--validation",
            "1",
            "--nodes",
        ])
        .arg(&n)
        .arg("--pods")
        .arg(&p)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("nothing to learn") && err.contains("pods.csv") && err.contains("nodes.csv"), "{err}");
    assert!(!out.exists());
}
