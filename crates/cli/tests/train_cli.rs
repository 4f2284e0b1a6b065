//! `dqngpu train` (and `deeprm`) with the real binary: the thesis agent's slowdown guard
//! reaches the checkpoint, bad values and sizes are refused naming them before any work, and
//! the default scorer trains, saves, loads and places.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_dqngpu");

fn test_dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("train-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs the binary with `args` in `dir`: its exit code and stderr.
fn run_in(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let o = Command::new(BIN).current_dir(dir).args(args).output().unwrap();
    (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
}

fn train(dir: &Path, guard: &str) -> Output {
    Command::new(BIN)
        .args(["train", "--agent", "dqngpu", "--algorithm", "thesis", "--iterations", "1", "--jobsets", "1"])
        .args(["--jobsets-per-iter", "1"])
        .args(["--episodes", "1", "--quiet", "--max-slowdown", guard, "-o"])
        .arg(dir.join("m.safetensors"))
        .output()
        .unwrap()
}

/// The metadata of the checkpoint `dir/m.safetensors`.
fn meta_of(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("m.json")).unwrap()).unwrap()
}

/// What that checkpoint says it was trained on.
fn trained_on(dir: &Path) -> String {
    meta_of(dir)["trained_on"].as_str().unwrap_or_default().to_string()
}

fn guard_of(dir: &Path) -> Value {
    meta_of(dir)["encoding"]["guard"].clone()
}

#[test]
fn max_slowdown_reaches_the_checkpoint() {
    let d = test_dir("guard");
    let o = train(&d, "5");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let g = guard_of(&d);
    assert!((g["max_slowdown"].as_f64().unwrap() - 0.05).abs() < 1e-12, "{g}");
    let o = train(&d, "off");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(guard_of(&d).is_null(), "off: no guard");
}

#[test]
fn a_bad_max_slowdown_is_refused_naming_the_flag() {
    let d = test_dir("bad");
    for bad in ["abc", "NaN", "inf"] {
        let o = train(&d, bad);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{bad} accepted");
        assert!(err.contains("--max-slowdown") && err.contains(bad), "{bad}: {err}");
        assert!(!d.join("m.safetensors").exists(), "nothing written for {bad}");
    }
}

fn simulate(args: &[&str], model: &Path) -> Output {
    Command::new(BIN)
        .args(["simulate", "--workload", "random", "--n-jobs", "4", "--format", "json"])
        .args(args)
        .arg("--model")
        .arg(model)
        .output()
        .unwrap()
}

/// Issue 13 item 5: scheduler names are read case-insensitively everywhere, `--model` included.
#[test]
fn scheduler_names_ignore_case_with_a_model() {
    let d = test_dir("case");
    let o = train(&d, "off");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let m = d.join("m.safetensors");
    for spelling in ["DQNGPU", "DqnGpu", "dqngpu"] {
        let o = simulate(&["--scheduler", spelling], &m);
        assert!(o.status.success(), "{spelling}: {}", String::from_utf8_lossy(&o.stderr));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["scheduler"], "dqngpu", "{spelling}: {v}");
    }
    // A heuristic in any case takes no model; an unknown name lists the valid ones (exit 2).
    let o = simulate(&["--scheduler", "SJF"], &m);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("heuristic"), "{err}");
    let o = simulate(&["--scheduler", "nosuch"], &m);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("nosuch") && err.contains("tetris") && err.contains("deeprm-max"), "{err}");
    // The plan searches with a scorer: the thesis's agent is named in words, not as a Rust
    // structure, with the command that makes what is needed.
    let o = simulate(&["--scheduler", "dqngpu-plan"], &m);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("dqngpu train -o MODEL"), "{err}");
    assert!(err.contains("--algorithm thesis --agent dqngpu") && !err.contains("GpuEncoding"), "{err}");
}

/// A job count of 0, past the cap or not a number is refused by every command that draws
/// job sets, naming the flag (exit 2), before any work.
#[test]
fn job_counts_out_of_range_are_refused_naming_the_flag() {
    let d = test_dir("counts");
    let cases: [(&[&str], &str); 4] = [
        (&["simulate", "--n-jobs"], "--n-jobs"),
        (&["bench", "--n-jobs"], "--n-jobs"),
        (&["workload", "--jobs"], "--jobs"),
        (&["train", "-o", "m.safetensors", "--jobs"], "--jobs"),
    ];
    for (args, flag) in cases {
        for bad in ["0", "1000001", "1000000000000", "ten"] {
            let (code, err) = run_in(&d, &[args, &[bad]].concat());
            assert_eq!(code, Some(2), "{args:?} {bad}: {err}");
            assert!(err.contains(flag) && err.contains(bad) && err.contains("1 to 1000000"), "{args:?} {bad}: {err}");
        }
    }
    assert!(!d.join("m.safetensors").exists(), "nothing trained");
}

/// Training settings that would train nothing useful or could not be allocated are refused
/// before any work, naming what is wrong; nothing is written. (Before: `--lr nan` trained the
/// scorer and silently kept its untrained weights; `--hidden 100000000000` and `--jobsets
/// 100000000000` aborted on an allocation of terabytes; `--time-limit-s 0` was ignored.)
#[test]
fn training_settings_out_of_range_are_refused_before_any_work() {
    let d = test_dir("settings");
    let cases: [(&[&str], &str); 8] = [
        (&["--lr", "nan"], "--lr"),
        (&["--lr", "0"], "--lr"),
        (&["--episodes", "0"], "--episodes"),
        (&["--jobsets-per-iter", "0"], "--jobsets-per-iter"),
        (&["--hidden", "100000000000"], "--hidden"),
        (&["--jobsets", "100000000000"], "--jobsets"),
        (&["--time-limit-s", "0"], "--time-limit-s"),
        (&["--algorithm", "thesis", "--horizon", "1000000000"], "time horizon"),
    ];
    for (args, named) in cases {
        let (code, err) =
            run_in(&d, &[&["train", "--iterations", "1", "--quiet", "-o", "m.safetensors"], args].concat());
        assert!(matches!(code, Some(1 | 2)), "{args:?}: {code:?} {err}");
        assert!(err.contains(named), "{args:?}: {err}");
        assert!(!d.join("m.safetensors").exists(), "{args:?} wrote a model");
    }
}

/// A negative value after a flag reaches the flag's own check, which names the flag and what
/// is wrong (before, clap read `-1` as an unknown argument).
#[test]
fn negative_values_get_the_flags_own_error() {
    let d = test_dir("negative");
    let cases: [(&[&str], &str); 4] = [
        (&["simulate", "--arrival-rate", "-1"], "--arrival-rate"),
        (&["simulate", "--max-slowdown", "-5"], "--max-slowdown"),
        (&["train", "-o", "m.safetensors", "--lr", "-1"], "--lr"),
        (&["deeprm", "eval", "--load", "-3"], "--load"),
    ];
    for (args, flag) in cases {
        let (code, err) = run_in(&d, args);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(err.contains(flag) && !err.contains("unexpected argument"), "{args:?}: {err}");
    }
}

/// `deeprm train` and `deeprm eval` refuse sizes that could not be allocated, naming them,
/// before any work (before: each of these aborted on an allocation of terabytes).
#[test]
fn deeprm_sizes_out_of_range_are_refused_before_any_work() {
    let d = test_dir("deeprm");
    let huge = "100000000000";
    let cases: [(&[&str], &str); 7] = [
        (&["train", "-o", "d.safetensors", "--jobsets", huge], "at most 200000"),
        (&["train", "-o", "d.safetensors", "--val-jobsets", huge], "at most 200000"),
        (&["train", "-o", "d.safetensors", "--hidden", huge], "4096"),
        (&["train", "-o", "d.safetensors", "--slots", huge], "at most 1000"),
        (&["eval", "--simu-len", huge], "at most 10000"),
        (&["eval", "--jobsets", huge], "--jobsets"),
        (&["eval", "--tetris-knob", "nan"], "--tetris-knob"),
    ];
    for (args, named) in cases {
        let (code, err) = run_in(&d, &[&["deeprm"], args].concat());
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(err.contains(named) && !err.contains("memory allocation"), "{args:?}: {err}");
        assert!(!d.join("d.safetensors").exists(), "{args:?} wrote a model");
    }
}

/// Issue 10: `train --iterations 0 -o M` writes the untrained agent (same architecture and
/// masks as a trained one), `simulate --model M` loads it, and with the liveness rule it
/// finishes the case that stalled a trained agent (gpu_heavy, seed 1003, 4 x 2 Titan Xp,
/// 120 Poisson jobs at 0.1/s).
#[test]
fn zero_iterations_write_an_untrained_model_that_simulate_runs() {
    let d = test_dir("untrained");
    let m0 = d.join("m0.safetensors");
    let o = Command::new(BIN).args(["train", "--iterations", "0", "--quiet", "-o"]).arg(&m0).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("untrained"));
    let meta0: Value = serde_json::from_str(&std::fs::read_to_string(d.join("m0.json")).unwrap()).unwrap();
    assert_eq!(meta0["iterations_done"], 0);
    // A trained model's metadata: the same encoding and layers.
    let o = scorer(&d, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let meta1 = meta_of(&d);
    assert_eq!(meta0["encoding"], meta1["encoding"]);
    assert_eq!(meta0["hidden"], meta1["hidden"]);
    let o = Command::new(BIN)
        .args(["simulate", "--workload", "gpu_heavy", "--seed", "1003", "--gpus", "4xtitanxp:2", "--n-jobs", "120"])
        .args(["--arrival-rate", "0.1", "--scheduler", "dqngpu", "--format", "json", "--model"])
        .arg(&m0)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["completed"], true);
    assert_eq!(r["jobs"].as_array().unwrap().len(), 120);
    assert!(r["mean_jct_s"].as_f64().unwrap() > 0.0, "{}", r["mean_jct_s"]);
    assert!(r["liveness_starts"].as_u64().is_some());
}

/// The default scorer, trained small: one library, short job sets.
fn scorer(dir: &Path, extra: &[&str]) -> Output {
    Command::new(BIN)
        .args(["train", "--iterations", "1", "--library", "thesis", "--jobsets", "2", "--jobs", "6"])
        .args(["--episodes", "2", "--jobsets-per-iter", "1", "--workload", "gpu_light", "--quiet"])
        .args(extra)
        .arg("-o")
        .arg(dir.join("m.safetensors"))
        .output()
        .unwrap()
}

/// Issue 10 item 4: `train` (default algorithm) writes a scorer checkpoint that says what it
/// was trained on, and `simulate` places with it on a cluster and library it never saw.
#[test]
fn the_default_scorer_trains_saves_and_places_on_unseen_apps() {
    let d = test_dir("scorer");
    let o = scorer(&d, &["--max-slowdown", "10"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("teachers"), "{err}");
    let meta = meta_of(&d);
    assert_eq!(meta["encoding"]["kind"], "scorer", "{meta}");
    assert_eq!(meta["agent"], "dqngpu");
    let on = trained_on(&d);
    assert!(on.contains("budget 10") && on.contains("libraries thesis"), "{on}");
    let o = Command::new(BIN)
        .args(["simulate", "--workload", "random", "--library", "generated:1001", "--n-jobs", "12"])
        .args(["--gpus", "2xtitanxp:1", "--arrival-rate", "0.05", "--scheduler", "dqngpu", "--format", "json"])
        .arg("--model")
        .arg(d.join("m.safetensors"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["completed"], true);
    assert_eq!(r["jobs"].as_array().unwrap().len(), 12);
    // The same model with search at decision time, under a budget: it keeps it and finishes.
    let o = Command::new(BIN)
        .args(["simulate", "--workload", "random", "--library", "generated:1001", "--n-jobs", "12"])
        .args(["--gpus", "2xtitanxp:1", "--arrival-rate", "0.05", "--scheduler", "DQNGPU-plan", "--format", "json"])
        .args(["--max-slowdown", "10", "--model"])
        .arg(d.join("m.safetensors"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((r["scheduler"].as_str(), r["completed"].as_bool()), (Some("dqngpu-plan"), Some(true)));
    assert_eq!(r["budget_refusals"], 0);
    assert!(r["jobs"].as_array().unwrap().iter().all(|j| j["exec_slowdown"].as_f64().unwrap() <= 1.10 + 1e-9));
    // Without a model it is refused, naming what it needs.
    let o = Command::new(BIN).args(["simulate", "--scheduler", "dqngpu-plan", "--n-jobs", "3"]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("dqngpu-plan") && err.contains("model"), "{err}");
    // Its search settings: taken by it, refused when bad and for any other scheduler.
    let plan = |args: &[&str]| {
        Command::new(BIN)
            .args(["simulate", "--workload", "random", "--n-jobs", "6", "--format", "json", "--model"])
            .arg(d.join("m.safetensors"))
            .args(args)
            .output()
            .unwrap()
    };
    let o = plan(&["--scheduler", "dqngpu-plan", "--plan-rows", "2", "--plan-guard", "0"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(serde_json::from_slice::<Value>(&o.stdout).unwrap()["completed"], true);
    for (args, named) in [
        (&["--scheduler", "dqngpu-plan", "--plan-rows", "0"][..], "--plan-rows"),
        (&["--scheduler", "dqngpu-plan", "--plan-guard=-1"][..], "--plan-guard"),
        (&["--scheduler", "dqngpu", "--plan-rows", "2"][..], "the scheduler is dqngpu"),
    ] {
        let o = plan(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(named), "{args:?}: {err}");
    }
}

/// `--improvement-rounds`: one more look-ahead round and policy gradient after the first,
/// reported among the stages; refused for the thesis's agent, which has no look-ahead.
#[test]
fn improvement_rounds_run_for_the_scorer_and_are_refused_for_the_thesis_agent() {
    let d = test_dir("improve");
    let o = scorer(&d, &["--improvement-rounds", "1"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("improvement 1"), "{err}");
    assert!(d.join("m.safetensors").is_file());
    thesis_agent_refuses(&d, &["--improvement-rounds", "1"]);
}

/// `train --algorithm thesis` with a scorer-only flag (`args[0]`, and its value) fails, names
/// the flag and writes no model.
fn thesis_agent_refuses(d: &Path, args: &[&str]) {
    let flag = args[0];
    let o = Command::new(BIN)
        .args(["train", "--algorithm", "thesis", "--iterations", "1"])
        .args(args)
        .arg("-o")
        .arg(d.join("t.safetensors"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains(flag), "{err}");
    assert!(!d.join("t.safetensors").exists());
}

/// `--makespan-guard`: the scorer names its guard, in its report and its checkpoint (and
/// trains without it at 0); a weight that is not a number >= 0 is refused before training,
/// and so is the flag for the thesis's agent, which has no look-ahead.
#[test]
fn the_makespan_guard_is_named_refused_when_bad_and_refused_for_the_thesis_agent() {
    let d = test_dir("guard");
    let o = scorer(&d, &["--makespan-guard", "2"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && err.contains("makespan guard 2"), "{err}");
    let on = trained_on(&d);
    assert!(on.contains("makespan guard 2"), "{on}");
    let o = scorer(&d, &["--makespan-guard", "0"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && !err.contains("makespan guard"), "{err}");
    std::fs::remove_file(d.join("m.safetensors")).unwrap();
    for bad in ["-1", "NaN", "inf"] {
        let o = scorer(&d, &["--makespan-guard", bad]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains("--makespan-guard"), "{bad}: {err}");
        assert!(!d.join("m.safetensors").exists(), "{bad}");
    }
    thesis_agent_refuses(&d, &["--makespan-guard", "1"]);
}

/// `--restarts`: the scorer trains again from other initial weights and keeps the one best on
/// validation, naming the restarts in its report and checkpoint; 0 is refused before
/// training, and so is the flag for the thesis's agent.
#[test]
fn restarts_are_named_refused_at_zero_and_refused_for_the_thesis_agent() {
    let d = test_dir("restarts");
    let o = scorer(&d, &["--restarts", "2"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && err.contains("restart 1 imitation"), "{err}");
    let on = trained_on(&d);
    assert!(on.contains("restarts 2 (validation "), "{on}");
    std::fs::remove_file(d.join("m.safetensors")).unwrap();
    let o = scorer(&d, &["--restarts", "0"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("--restarts"), "{err}");
    assert!(!d.join("m.safetensors").exists());
    thesis_agent_refuses(&d, &["--restarts", "2"]);
}

/// `--improvement-near-tie PCT`: recorded in the checkpoint as a percentage; outside 0-100, or
/// for the thesis's agent, refused by name before anything is written.
#[test]
fn the_improvement_near_tie_is_recorded_and_refused_when_bad() {
    let d = test_dir("near-tie");
    let o = scorer(&d, &["--improvement-near-tie", "0"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let on = trained_on(&d);
    assert!(on.contains("improvement rounds 1 (near-tie 0%)"), "{on}");
    std::fs::remove_file(d.join("m.safetensors")).unwrap();
    for bad in ["-1", "101", "NaN"] {
        let o = scorer(&d, &["--improvement-near-tie", bad]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains("--improvement-near-tie"), "{bad}: {err}");
        assert!(!d.join("m.safetensors").exists());
    }
    thesis_agent_refuses(&d, &["--improvement-near-tie", "1"]);
}

/// `--add-to-defaults`: the caller's setting joins the default distribution (the checkpoint
/// lists both, and --jobsets sizes the caller's only); without a setting of the caller's, or
/// for the thesis's agent, it is refused by name.
#[test]
fn add_to_defaults_trains_on_the_callers_setting_and_the_default_distribution() {
    let d = test_dir("add");
    let train = |extra: &[&str]| {
        Command::new(BIN)
            .args(["train", "--iterations", "0", "--quiet"])
            .args(extra)
            .arg("-o")
            .arg(d.join("m.safetensors"))
            .output()
            .unwrap()
    };
    let mine = "libraries generated:5 on titanxp:1, 2 sets of 6 jobs";
    let o = train(&["--library", "generated:5", "--jobs", "6", "--jobsets", "2", "--add-to-defaults"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let on = trained_on(&d);
    assert!(on.contains(mine), "{on}");
    assert!(on.contains("libraries lucid on rtx3090:1, 5 sets of 30 jobs"), "{on}");
    assert!(on.contains("libraries thesis on titanxp:1, 5 sets of 30 jobs"), "{on}");
    let o = train(&["--library", "generated:5", "--jobs", "6", "--jobsets", "2"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let on = trained_on(&d);
    assert!(on.contains(mine) && !on.contains("lucid"), "{on}");
    std::fs::remove_file(d.join("m.safetensors")).unwrap();
    let o = train(&["--add-to-defaults"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("--add-to-defaults") && err.contains("--library"), "{err}");
    assert!(!d.join("m.safetensors").exists());
    thesis_agent_refuses(&d, &["--add-to-defaults"]);
}

#[test]
fn an_unknown_algorithm_is_refused_with_the_valid_ones() {
    let d = test_dir("algo");
    let o = scorer(&d, &["--algorithm", "magic"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("magic") && err.contains("scorer") && err.contains("thesis"), "{err}");
    assert!(!d.join("m.safetensors").exists());
    // The scorer asked for by name is dqngpu's alone: DeepRM would silently train as the
    // thesis. Without --algorithm, DeepRM trains as before.
    let m = d.join("m.safetensors");
    let deeprm = |extra: &[&str]| {
        Command::new(BIN)
            .args(["train", "--agent", "deeprm-max", "--iterations", "0", "--quiet", "-o"])
            .arg(&m)
            .args(extra)
            .output()
            .unwrap()
    };
    let o = deeprm(&["--algorithm", "scorer"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("--algorithm scorer trains dqngpu only"), "{err}");
    assert!(!m.exists());
    let o = deeprm(&[]);
    assert!(o.status.success() && m.exists(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A model path that cannot be saved is refused before any training: the paper's DeepRM
/// recipe runs 29 minutes, and used to fail only when saving at the end.
#[test]
fn an_unsavable_model_path_is_refused_before_training() {
    let d = test_dir("path");
    let blocker = d.join("file");
    std::fs::write(&blocker, "not a folder").unwrap();
    let cases: [(Vec<&str>, PathBuf, &str); 3] = [
        (vec!["deeprm", "train"], d.join("m.json"), "must not end in .json"),
        (vec!["train", "--iterations", "1000000"], d.join("m.json"), "must not end in .json"),
        (vec!["deeprm", "train"], blocker.join("m.safetensors"), "file"),
    ];
    for (args, path, says) in cases {
        // Were the path checked only when saving, these runs would train first (a million
        // iterations; DeepRM's 29-minute recipe) and this test would not finish.
        let o = Command::new(BIN).args(&args).arg("-o").arg(&path).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} {}", path.display());
        assert!(err.contains("--output") && err.contains(says), "{args:?}: {err}");
    }
}

/// Printing into a closed pipe (`dqngpu simulate ... | head -1`) ends quietly with status 141
/// (as a process killed by SIGPIPE), not with a panic.
#[test]
fn a_closed_pipe_ends_quietly() {
    use std::io::Read;
    let mut child = Command::new(BIN)
        // About 1 MB of JSON: far more than a pipe holds, so the write meets the closed pipe.
        .args(["simulate", "--scheduler", "all", "--format", "json", "--n-jobs", "300"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 1];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    // The read end is dropped here: later writes hit a closed pipe.
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.code(), Some(141), "{err}");
}

/// A DeepRM model may be evaluated at another load (the load shapes the workload, not the
/// network); a setting that changes the network is refused naming the field.
#[test]
fn deeprm_eval_takes_a_model_at_another_load_and_names_a_real_mismatch() {
    let d = test_dir("deeprm-load");
    let (code, err) = run_in(
        &d,
        &["deeprm", "train", "--iterations", "0", "--jobsets", "1", "--load", "70", "--quiet", "-o", "d.safetensors"],
    );
    assert_eq!(code, Some(0), "{err}");
    let (code, err) = run_in(&d, &["deeprm", "eval", "--model", "d.safetensors", "--load", "110", "--jobsets", "1"]);
    assert_eq!(code, Some(0), "{err}");
    let (code, err) = run_in(&d, &["deeprm", "eval", "--model", "d.safetensors", "--slots", "7", "--jobsets", "1"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("num_nw: 10 (needed 7)"), "{err}");
}
