//! End to end: the real `dqngpu experiment --quick` writes every file, each parses, the
//! numbers agree across results.json, summary.csv and report.md, and the same seeds give the
//! same results.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_dqngpu");

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!("dqngpu-experiment-e2e-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn run_quick(out: &Path) -> Value {
    let o = Command::new(BIN).args(["experiment", "--quick", "--no-progress", "--out"]).arg(out).output().unwrap();
    assert!(o.status.success(), "experiment --quick failed: {}", String::from_utf8_lossy(&o.stderr));
    // The terminal table leads with what users ask first.
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("mean_jct_s") && stdout.contains("slowed>10%"), "{stdout}");
    let text = std::fs::read_to_string(out.join("results.json")).unwrap();
    serde_json::from_str(&text).expect("results.json parses")
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}"))
}

/// Drops the wall-clock keys, which differ run to run by nature.
fn strip_wall_clock(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for k in ["train_s", "wall_s", "train_norm", "total_norm", "stage_s"] {
                m.remove(k);
            }
            m.values_mut().for_each(strip_wall_clock);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_wall_clock),
        _ => {}
    }
}

/// Rows of the markdown table that follows the heading `### {class}`.
fn class_table<'a>(md: &'a str, class: &str) -> Vec<Vec<&'a str>> {
    let start = md.find(&format!("\n### {class}\n")).unwrap_or_else(|| panic!("no section for {class}"));
    md[start..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .map(|l| l.trim_matches('|').split('|').map(str::trim).collect())
        .collect()
}

#[test]
fn quick_experiment_writes_consistent_files_and_replays() {
    let a = TempDir::new("a");
    let res = run_quick(&a.0);

    // Every file exists and parses.
    for name in ["config.toml", "summary.csv", "results.json", "report.md", "report.html"] {
        assert!(a.0.join(name).is_file(), "{name} missing");
    }
    let cfg_text = std::fs::read_to_string(a.0.join("config.toml")).unwrap();
    let cfg = dqngpu_experiment::ExperimentConfig::from_toml(&cfg_text, None).expect("config.toml parses");
    assert_eq!(cfg.evaluation.seeds, 2, "the written config is the effective (quick) one");
    let classes: Vec<String> =
        res["config"]["workloads"]["classes"].as_array().unwrap().iter().map(|c| s(c).to_string()).collect();
    assert_eq!(classes.len(), 5);
    let schedulers: Vec<String> = res["schedulers"].as_array().unwrap().iter().map(|c| s(c).to_string()).collect();
    assert!(schedulers.iter().any(|x| x == "sjf"));
    // Each agent's iterations are within what its recipe plans (the scorer's policy gradient
    // runs once per improvement round too), and all of them ran: no time limit is set.
    for t in res["training"].as_array().unwrap() {
        let (done, planned) = (t["iterations"].as_u64().unwrap(), t["iterations_planned"].as_u64().unwrap());
        assert_eq!(done, planned, "{}: {done} of {planned}", t["scheduler"]);
    }
    let mut plots: Vec<String> = classes.iter().map(|c| format!("class_{c}")).collect();
    plots.extend(["slowdown", "training_overhead", "cost", "jct_vs_p95_slowdown", "training_curves"].map(String::from));
    plots.extend(schedulers.iter().map(|x| format!("timeline_{x}")));
    let html = std::fs::read_to_string(a.0.join("report.html")).unwrap();
    let md = std::fs::read_to_string(a.0.join("report.md")).unwrap();
    for p in &plots {
        let png =
            std::fs::read(a.0.join("plots").join(format!("{p}.png"))).unwrap_or_else(|_| panic!("{p}.png missing"));
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && &png[12..16] == b"IHDR", "{p}.png is not a PNG");
        let svg = std::fs::read_to_string(a.0.join("plots").join(format!("{p}.svg"))).unwrap();
        assert!(svg.contains("<svg") && svg.trim_end().ends_with("</svg>"), "{p}.svg is not a whole SVG");
        assert!(md.contains(&format!("(plots/{p}.png)")), "report.md does not show {p}");
    }
    // The HTML is self-contained: one embedded PNG per plot, no links to files.
    assert_eq!(html.matches("src=\"data:image/png;base64,").count(), plots.len());
    assert!(!html.contains("src=\"plots/") && !html.contains("src=\"http"));
    assert!(html.trim_end().ends_with("</html>"));
    // Skipped schedulers are said, not silent.
    for sk in res["skipped"].as_array().unwrap() {
        assert!(md.contains(s(&sk["scheduler"])) && md.contains(s(&sk["reason"])));
    }

    // summary.csv: the required columns, one row per class and scheduler, equal to results.json.
    let csv = std::fs::read_to_string(a.0.join("summary.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let required = [
        "workload",
        "scheduler",
        "seeds",
        "makespan_s_mean",
        "makespan_s_ci95",
        "lower_bound_s_mean",
        "avg_gpu_util_pct_mean",
        "avg_gpu_mem_util_pct_mean",
        "oom_kills_mean",
        "no_slowdown_jobs_mean",
        "train_s",
    ];
    assert_eq!(&header[..required.len()], &required);
    let all_rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let summary = res["summary"].as_array().unwrap();
    let cells = res["cells"].as_array().unwrap();
    // The scorer with search at decision time runs beside it, on the same training.
    assert!(schedulers.iter().any(|x| x == "dqngpu-plan"), "{schedulers:?}");
    let train_of = |name: &str| summary.iter().find(|r| s(&r["scheduler"]) == name).map(|r| f(&r["train_s"]));
    assert!(train_of("dqngpu").is_some_and(|t| t > 0.0));
    assert_eq!(train_of("dqngpu-plan"), train_of("dqngpu"));
    // The main setting's rows, then every cell's (issue 10), each labelled.
    assert_eq!(all_rows.len(), summary.len() + cells.len());
    assert_eq!(summary.len(), classes.len() * schedulers.len());
    let cell_names: Vec<&str> = res["config"]["cells"].as_array().unwrap().iter().map(|c| s(&c["name"])).collect();
    assert_eq!(cells.len(), cell_names.len() * classes.len() * schedulers.len(), "{cell_names:?}");
    let cell_col = header.iter().position(|h| *h == "cell").unwrap();
    let p95_col = header.iter().position(|h| *h == "p95_exec_slowdown_mean").unwrap();
    for (row, js) in all_rows[summary.len()..].iter().zip(cells) {
        assert!(cell_names.contains(&row[cell_col]) && row[cell_col] == s(&js["cell"]), "{row:?}");
        let p95: f64 = row[p95_col].parse().unwrap();
        assert!(p95 >= 1.0 - 1e-9 && (p95 - f(&js["p95_exec_slowdown_mean"])).abs() < 1e-4, "{row:?}");
    }
    assert!(md.contains("## League table") && cell_names.iter().all(|c| md.contains(&format!("### cell `{c}`"))));
    // Each league row says how much room the bound leaves there: the best heuristic's mean JCT
    // over the bound, never below 1.
    let league = std::fs::read_to_string(a.0.join("league.csv")).unwrap();
    assert!(league.lines().next().unwrap().ends_with(",jct_room") && md.contains("Room: in "));
    for l in league.lines().skip(1) {
        let room: f64 = l.rsplit(',').next().unwrap().parse().unwrap();
        assert!(room >= 1.0 - 1e-3 && room.is_finite(), "{l}");
    }
    let csv_rows = &all_rows[..summary.len()];
    let runs = res["runs"].as_array().unwrap();
    for (row, js) in csv_rows.iter().zip(summary) {
        assert_eq!((row[0], row[1]), (s(&js["workload"]), s(&js["scheduler"])));
        for (i, col) in required.iter().enumerate().skip(2) {
            let c: f64 = row[i].parse().unwrap_or_else(|_| panic!("{col}: `{}` is not a number", row[i]));
            assert!((c - f(&js[*col])).abs() <= 0.0005 + 1e-9, "{col}: csv {c} vs json {}", js[*col]);
        }
        // The summary is the mean of the runs it claims.
        let mine: Vec<&Value> =
            runs.iter().filter(|r| r["workload"] == js["workload"] && r["scheduler"] == js["scheduler"]).collect();
        assert_eq!(mine.len() as f64, f(&js["seeds"]));
        let mean = mine.iter().map(|r| f(&r["makespan_s"])).sum::<f64>() / mine.len() as f64;
        assert!((mean - f(&js["makespan_s_mean"])).abs() < 1e-6);
        // Mean JCT (finish - submit) from the jobs themselves, and the share slowed over 10%.
        let jct = |r: &Value| {
            let js: Vec<f64> =
                r["jobs"].as_array().unwrap().iter().map(|j| f(&j["finish_s"]) - f(&j["submit_s"])).collect();
            js.iter().sum::<f64>() / js.len() as f64
        };
        let mean_jct = mine.iter().map(|r| jct(r)).sum::<f64>() / mine.len() as f64;
        assert!((mean_jct - f(&js["mean_jct_s_mean"])).abs() < 1e-6, "{mean_jct} vs {}", js["mean_jct_s_mean"]);
        let slowed = |r: &Value| {
            let j = r["jobs"].as_array().unwrap();
            100.0 * j.iter().filter(|j| f(&j["exec_slowdown"]) > 1.10).count() as f64 / j.len() as f64
        };
        let mean_slowed = mine.iter().map(|r| slowed(r)).sum::<f64>() / mine.len() as f64;
        assert!((mean_slowed - f(&js["slowed_over_10_pct_mean"])).abs() < 1e-6);
        for r in &mine {
            assert_eq!(
                r["jobs"].as_array().unwrap().len() as u64,
                res["config"]["workloads"]["jobs"].as_u64().unwrap()
            );
            // No run, learned or not, ends below the mean-JCT bound of its job set (a
            // simulator or bound fault would show here), and the bound is at least the mean
            // solo time.
            let bound = f(&r["jct_lower_bound_s"]);
            let solo = r["jobs"].as_array().unwrap().iter().map(|j| f(&j["solo_s"])).sum::<f64>()
                / r["jobs"].as_array().unwrap().len() as f64;
            assert!(
                bound >= solo - 1e-9 && jct(r) >= bound - 1e-9,
                "{} {}: {} < {bound}",
                js["workload"],
                js["scheduler"],
                jct(r)
            );
        }
        let bound = mine.iter().map(|r| f(&r["jct_lower_bound_s"])).sum::<f64>() / mine.len() as f64;
        assert!((bound - f(&js["jct_lower_bound_s_mean"])).abs() < 1e-6);
    }

    // report.md: every class table shows the same numbers as results.json.
    for class in &classes {
        let table = class_table(&md, class);
        assert_eq!(table.len(), schedulers.len(), "{class}: {table:?}");
        for cells in table {
            let js = summary.iter().find(|r| s(&r["workload"]) == class && s(&r["scheduler"]) == cells[0]).unwrap();
            assert_eq!(cells[1], format!("{:.1}", f(&js["makespan_s_mean"])), "{class} {} makespan", cells[0]);
            assert_eq!(cells[2], format!("{:.1}", f(&js["makespan_s_ci95"])));
            assert_eq!(cells[4], format!("{:.1}", f(&js["lower_bound_s_mean"])));
            assert_eq!(cells[5], format!("{:.3}", f(&js["ratio_to_lower_bound_mean"])));
            assert_eq!(cells[6], format!("{:.2}", f(&js["avg_gpu_util_pct_mean"])));
            assert_eq!(cells[9], format!("{:.2}", f(&js["avg_gpu_mem_util_pct_mean"])));
            assert_eq!(cells[12], format!("{:.2}", f(&js["oom_kills_mean"])));
            assert_eq!(cells[13], format!("{:.2}", f(&js["no_slowdown_jobs_mean"])));
        }
    }
    // The thesis's figures are of 30 jobs a set: beside --quick's sets of at most 10 they are
    // left out, and the report says why (beside the default setting they stand: the unit
    // test the_thesis_figures_appear_only_beside_the_thesis_setting).
    let heavy = class_table(&md, "gpu_heavy");
    assert_eq!(heavy.iter().find(|c| c[0] == "sjf").unwrap()[3], "-");
    assert!(md.contains("not the thesis's"), "{md}");

    // Same seeds, same numbers.
    let b = TempDir::new("b");
    let mut res_b = run_quick(&b.0);
    let mut res_a = res.clone();
    strip_wall_clock(&mut res_a);
    strip_wall_clock(&mut res_b);
    assert!(res_a == res_b, "two runs with the same seeds differ");
}

/// `dqngpu-plan` searches over the `dqngpu` scorer: listed alone, the scorer is trained for it
/// (and not evaluated); with the thesis's image agent as `dqngpu` there is no scorer, and the
/// plan is skipped with the reason said.
#[test]
fn the_plan_trains_the_scorer_it_needs_or_is_skipped_saying_why() {
    let d = TempDir::new("plan");
    let run = |name: &str, toml: &str| -> Value {
        let cfg = d.0.join(format!("{name}.toml"));
        std::fs::write(&cfg, toml).unwrap();
        let out = d.0.join(name);
        let o = Command::new(BIN)
            .args(["experiment", "--quick", "--no-progress", "--config"])
            .arg(&cfg)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap()
    };
    let names =
        |r: &Value| -> Vec<String> { r["schedulers"].as_array().unwrap().iter().map(|c| s(c).to_string()).collect() };
    let alone = run("alone", "[schedulers]\nnames = ['sjf', 'dqngpu-plan']\n");
    assert_eq!(names(&alone), ["sjf", "dqngpu-plan"]);
    assert_eq!(alone["training"][0]["scheduler"], "dqngpu");
    assert!(alone["skipped"].as_array().unwrap().is_empty());
    let thesis = run("thesis", "[schedulers]\nnames = ['sjf', 'dqngpu-plan']\n[training]\nalgorithm = 'thesis'\n");
    assert_eq!(names(&thesis), ["sjf"]);
    let skipped = thesis["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert_eq!(skipped[0]["scheduler"], "dqngpu-plan");
    assert!(s(&skipped[0]["reason"]).contains("scorer"), "{skipped:?}");
}

#[test]
fn unknown_scheduler_in_config_is_a_usage_error() {
    let d = TempDir::new("bad");
    let cfg = d.0.join("exp.toml");
    std::fs::write(&cfg, "[schedulers]\nnames = ['sjf', 'nosuch']\n").unwrap();
    let o = Command::new(BIN)
        .args(["experiment", "--quick", "--no-progress", "--config"])
        .arg(&cfg)
        .arg("--out")
        .arg(d.0.join("out"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("nosuch") && err.contains("tetris") && err.contains("dqngpu"), "{err}");
    assert!(!d.0.join("out").join("results.json").exists());
}

#[test]
fn bad_config_names_file_and_line() {
    let d = TempDir::new("badline");
    let cfg = d.0.join("exp.toml");
    std::fs::write(&cfg, "library = 'thesis'\n\n[evaluation]\nseeds = 'ten'\n").unwrap();
    let o = Command::new(BIN)
        .args(["experiment", "--no-progress", "--config"])
        .arg(&cfg)
        .arg("--out")
        .arg(d.0.join("out"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("exp.toml") && err.contains("line 4"), "{err}");
}

#[test]
fn a_bad_cell_or_out_dir_fails_before_any_work_even_under_quick() {
    let d = TempDir::new("early");
    let experiment = |cfg: Option<&Path>, out: &Path| {
        let mut c = Command::new(BIN);
        c.args(["experiment", "--quick", "--no-progress", "--out"]).arg(out);
        if let Some(cfg) = cfg {
            c.arg("--config").arg(cfg);
        }
        c.output().unwrap()
    };
    // A cell `--quick` drops (it keeps two by name) is still checked.
    let cfg = d.0.join("exp.toml");
    let cells = "[[cells]]\nname = 'bogus'\nlibrary = 'thesis'\ngpus = 'nosuchgpu:1'\njobs = 10\n";
    std::fs::write(&cfg, cells).unwrap();
    let o = experiment(Some(&cfg), &d.0.join("out"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "an unknown GPU model is a usage error: {err}");
    assert!(err.contains("exp.toml") && err.contains("cells[0].gpus") && err.contains("nosuchgpu"), "{err}");
    assert!(!d.0.join("out").exists(), "no work and no output before the check");
    // An out path that is a file, and a directory of the user's with a report.md of its own.
    let file = d.0.join("afile");
    std::fs::write(&file, "x").unwrap();
    let o = experiment(None, &file);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("is a file"), "{}", String::from_utf8_lossy(&o.stderr));
    let mine = d.0.join("mine");
    std::fs::create_dir(&mine).unwrap();
    std::fs::write(mine.join("report.md"), "my notes").unwrap();
    let o = experiment(None, &mine);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("report.md"), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read_to_string(mine.join("report.md")).unwrap(), "my notes");
}

/// A small experiment of heuristics only (no training): one class, two rules, six jobs.
const SMALL: &str = "step_s = 60.0\ncells = []\n[workloads]\nclasses = ['random']\nfocus = 'random'\njobs = 6\n\
                     [schedulers]\nnames = ['sjf', 'fifo']\n";

fn experiment_in(d: &Path, cfg_text: &str, extra: &[&str], out: &Path) -> std::process::Output {
    let cfg = d.join("small.toml");
    std::fs::write(&cfg, cfg_text).unwrap();
    Command::new(BIN)
        .args(["experiment", "--no-progress", "--config"])
        .arg(&cfg)
        .args(extra)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

/// `--quick --seeds 3` evaluates 3 seeds; `--quick` warns of the config's cells it leaves out;
/// a step past the profiles' interval is warned of.
#[test]
fn quick_keeps_an_explicit_seeds_and_names_the_cells_it_drops() {
    let d = TempDir::new("quickseeds");
    let cells = "[[cells]]\nname = 'mine'\nlibrary = 'thesis'\ngpus = 'titanxp:1'\njobs = 6\n";
    let out = d.0.join("out");
    let text = format!("{}{cells}", SMALL.replace("cells = []\n", ""));
    let o = experiment_in(&d.0, &text, &["--quick", "--seeds", "3"], &out);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let res: Value = serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(res["eval_seeds"].as_array().unwrap().len(), 3);
    assert!(err.contains("--quick") && err.contains("mine"), "{err}");
    // Neither quick cell is in this config: the warning says none runs (not the two it lacks).
    assert!(err.contains("no cell, only the main setting") && !err.contains("heldout-1gpu"), "{err}");
    assert!(err.contains("step_s 60") && err.contains("profile interval"), "{err}");
}

/// An experiment interrupted before results.json (written last) is rerun into the same
/// --out; a stranger's file there still refuses it.
#[test]
fn an_interrupted_experiment_is_rerun_into_its_out_dir() {
    let d = TempDir::new("interrupted");
    let out = d.0.join("out");
    assert!(experiment_in(&d.0, SMALL, &[], &out).status.success());
    std::fs::remove_file(out.join("results.json")).unwrap();
    let o = experiment_in(&d.0, SMALL, &[], &out);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.join("results.json").is_file());
    std::fs::remove_file(out.join("results.json")).unwrap();
    std::fs::write(out.join("notes.md"), "mine").unwrap();
    let o = experiment_in(&d.0, SMALL, &[], &out);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no results.json"));
}

/// Config names unknown anywhere name the file and field and exit 2.
#[test]
fn unknown_names_in_the_config_name_file_and_field() {
    let d = TempDir::new("fields");
    for (text, field) in [
        ("interference = 'bogus'\n", "interference"),
        ("library = 'nolib'\n", "library"),
        ("[cluster]\ngpus = 'bogus:1'\n", "cluster.gpus"),
        ("[workloads]\nfocus = 'heavy'\n", "workloads.focus"),
    ] {
        let o = experiment_in(&d.0, text, &["--quick"], &d.0.join("out"));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{text}: {err}");
        assert!(err.contains("small.toml") && err.contains(field), "{text}: {err}");
    }
}

/// `deeprm eval` refuses the model's own training seed for its evaluation sets.
#[test]
fn deeprm_eval_refuses_the_models_training_seed() {
    let d = TempDir::new("deeprmseed");
    let run = |args: &[&str]| Command::new(BIN).current_dir(&d.0).args(args).output().unwrap();
    let o = run(&["deeprm", "train", "--iterations", "0", "--jobsets", "1", "--quiet", "-o", "d.safetensors"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let meta: Value = serde_json::from_str(&std::fs::read_to_string(d.0.join("d.json")).unwrap()).unwrap();
    // The sidecar records the checksum of the weights it was saved with.
    assert_eq!(meta["weights_fnv1a64"].as_str().map(str::len), Some(16), "{meta}");
    let seed = meta["train"]["seed"].as_u64().unwrap().to_string();
    let o = run(&["deeprm", "eval", "--model", "d.safetensors", "--jobsets", "1", "--seed", &seed]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("--seed") && err.contains("d.json"), "{err}");
    let other = (meta["train"]["seed"].as_u64().unwrap() + 1).to_string();
    assert!(run(&["deeprm", "eval", "--model", "d.safetensors", "--jobsets", "1", "--seed", &other]).status.success());
}
