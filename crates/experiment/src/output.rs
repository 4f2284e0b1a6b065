//! Writes an experiment's files into the out dir, each atomically (temporary name, then
//! rename), `results.json` and the reports last, so an interrupted run never leaves a
//! half-written file under a final name.

use std::path::{Path, PathBuf};

use dqngpu_model::error::write_file_atomic;
use dqngpu_model::ModelError;
use plotters::style::RGBColor;

use crate::config::CONFIG_HEADER;
use crate::error::ExperimentError;
use crate::plots::{write_chart, BarChart, BarPanel, CurveChart, CurveSeries, PlotFile, StackedChart, TimelineChart};
use crate::report::{self, Figure};
use crate::reported;
use crate::results::{row, summary_csv, ExperimentResults};

/// Names of the files written directly in the out dir.
pub const FILES: [&str; 6] = ["config.toml", "summary.csv", "league.csv", "results.json", "report.md", "report.html"];

fn colour_index(res: &ExperimentResults, scheduler: &str) -> usize {
    res.config.schedulers.names.iter().position(|n| n == scheduler).unwrap_or(0)
}

/// (iteration, mean of the finite objectives of the last `window` iterations), from the
/// first iteration with a full window.
fn rolling_mean(curve: &[crate::results::CurvePoint], window: usize) -> Vec<(f64, f64)> {
    // Start once a full window is in, so early points are not averages of fewer iterations.
    let first = if curve.len() >= window { window - 1 } else { 0 };
    (first..curve.len())
        .filter_map(|i| {
            let vals: Vec<f64> =
                curve[i.saturating_sub(window - 1)..=i].iter().filter_map(|p| p.mean_objective).collect();
            (!vals.is_empty()).then(|| (curve[i].iteration as f64, vals.iter().sum::<f64>() / vals.len() as f64))
        })
        .collect()
}

/// Draws every plot into `dir`: the [`Figure`]s the report shows, in its order.
pub fn write_plots(res: &ExperimentResults, dir: &Path) -> Result<Vec<PlotFile>, ExperimentError> {
    let mut plots = Vec::new();
    for class in &res.config.workloads.classes {
        plots.push(class_plot(res, dir, class)?);
    }
    plots.push(slowdown_plot(res, dir)?);
    plots.push(overhead_plot(res, dir)?);
    plots.push(cost_plot(res, dir)?);
    plots.push(tradeoff_plot(res, dir)?);
    for t in &res.timelines {
        let chart = TimelineChart {
            title: format!("{}: GPU utilisation and memory over time ({} seed {})", t.scheduler, t.workload, t.seed),
            t_s: t.t_s.clone(),
            gpu_util_pct: t.gpu_util_pct.clone(),
            gpu_mem_pct: t.gpu_mem_pct.clone(),
        };
        let fig = Figure::Timeline(t.scheduler.clone());
        let title = format!("{}: GPU utilisation and memory timeline", t.scheduler);
        plots.push(write_chart(&chart, dir, &fig.stem(), &title)?);
    }
    plots.push(curves_plot(res, dir)?);
    Ok(plots)
}

/// Makespan, GPU and memory utilisation of one class (thesis Figs. 10-14).
fn class_plot(res: &ExperimentResults, dir: &Path, class: &str) -> Result<PlotFile, ExperimentError> {
    let scheds = &res.schedulers;
    let present: Vec<String> = scheds.iter().filter(|s| row(&res.summary, class, s).is_some()).cloned().collect();
    let rows: Vec<_> = present.iter().filter_map(|s| row(&res.summary, class, s)).collect();
    let th = |f: fn(&reported::ReportedRun) -> Option<f64>| -> Vec<Option<f64>> {
        let thesis = reported::Figures::for_config(&res.config);
        present.iter().map(|s| thesis.run(class, s).and_then(f)).collect()
    };
    let chart = BarChart {
        schedulers: present.clone(),
        colours: present.iter().map(|s| colour_index(res, s)).collect(),
        panels: vec![
            BarPanel {
                title: format!("{class}: makespan"),
                y_desc: "makespan (s)".into(),
                values: rows.iter().map(|r| (r.makespan_s_mean, r.makespan_s_ci95)).collect(),
                thesis: th(|r| r.makespan_s),
                show_ci: true,
            },
            BarPanel {
                title: format!("{class}: average GPU utilisation"),
                y_desc: "GPU utilisation (%)".into(),
                values: rows.iter().map(|r| (r.avg_gpu_util_pct_mean, r.avg_gpu_util_pct_ci95)).collect(),
                thesis: th(|r| r.gpu_util_pct),
                show_ci: true,
            },
            BarPanel {
                title: format!("{class}: average GPU memory utilisation"),
                y_desc: "GPU memory utilisation (%)".into(),
                values: rows.iter().map(|r| (r.avg_gpu_mem_util_pct_mean, r.avg_gpu_mem_util_pct_ci95)).collect(),
                thesis: th(|r| r.gpu_mem_util_pct),
                show_ci: true,
            },
        ],
    };
    write_chart(
        &chart,
        dir,
        &Figure::Class(class.to_string()).stem(),
        &format!("{class}: makespan, GPU and memory utilisation (thesis Figs. 10-14)"),
    )
}

/// Jobs by slowdown on the focus class (Fig. 15).
fn slowdown_plot(res: &ExperimentResults, dir: &Path) -> Result<PlotFile, ExperimentError> {
    let focus = &res.config.workloads.focus;
    let slow = StackedChart {
        title: format!("{focus}: jobs by execution slowdown (mean over seeds)"),
        y_desc: "jobs per set".into(),
        schedulers: res.slowdown.iter().map(|s| s.scheduler.clone()).collect(),
        segments: vec!["no slowdown (<= 2%)".into(), "< 10%".into(), "10-20%".into(), ">= 20%".into()],
        segment_colours: vec![
            RGBColor(44, 160, 44),
            RGBColor(188, 189, 34),
            RGBColor(255, 127, 14),
            RGBColor(214, 39, 40),
        ],
        values: res.slowdown.iter().map(|s| s.values().to_vec()).collect(),
        markers: res
            .slowdown
            .iter()
            .map(|s| reported::Figures::for_config(&res.config).no_slowdown(&s.scheduler))
            .collect(),
        marker_label: "thesis: jobs with no slowdown".into(),
        reference: None,
    };
    write_chart(&slow, dir, &Figure::Slowdown.stem(), &format!("{focus}: slowdown buckets (thesis Fig. 15)"))
}

/// Makespan plus training time, normalised to the baseline (Fig. 16).
fn overhead_plot(res: &ExperimentResults, dir: &Path) -> Result<PlotFile, ExperimentError> {
    let (focus, base) = (&res.config.workloads.focus, &res.config.schedulers.baseline);
    let over = StackedChart {
        title: format!("{focus}: total time with training, normalised to {base}"),
        y_desc: format!("time / {base} makespan"),
        schedulers: res.training_overhead.iter().map(|o| o.scheduler.clone()).collect(),
        segments: vec!["makespan".into(), "training (wall clock)".into()],
        segment_colours: vec![RGBColor(31, 119, 180), RGBColor(214, 39, 40)],
        values: res.training_overhead.iter().map(|o| vec![o.exec_norm, o.train_norm]).collect(),
        markers: res
            .training_overhead
            .iter()
            .map(|o| reported::Figures::for_config(&res.config).overhead(&o.scheduler).and_then(|t| t.0))
            .collect(),
        marker_label: "thesis: total".into(),
        reference: Some(1.0),
    };
    write_chart(&over, dir, &Figure::TrainingOverhead.stem(), &format!("{focus}: training overhead (thesis Fig. 16)"))
}

/// Cost under each of the thesis's assumptions (Fig. 17).
fn cost_plot(res: &ExperimentResults, dir: &Path) -> Result<PlotFile, ExperimentError> {
    let (focus, base) = (&res.config.workloads.focus, &res.config.schedulers.baseline);
    let scheds = &res.schedulers;
    let assumptions: Vec<String> = res.config.cost.assumptions.iter().map(|a| a.name.clone()).collect();
    let cost_scheds: Vec<String> =
        scheds.iter().filter(|s| res.cost.iter().any(|c| &c.scheduler == *s)).cloned().collect();
    let cost = BarChart {
        schedulers: cost_scheds.clone(),
        colours: cost_scheds.iter().map(|s| colour_index(res, s)).collect(),
        panels: assumptions
            .iter()
            .map(|a| {
                let find = |s: &str| res.cost.iter().find(|c| &c.assumption == a && c.scheduler == s);
                let base_cost = find(base).map(|c| c.cost_usd);
                BarPanel {
                    title: format!(
                        "{focus}: {a} ({base} on dedicated instances, others on one shared {})",
                        res.config.cost.shared
                    ),
                    y_desc: "cost (US$)".into(),
                    values: cost_scheds.iter().map(|s| (find(s).map(|c| c.cost_usd).unwrap_or(0.0), 0.0)).collect(),
                    // The thesis's DqnGPU saving applied to our baseline cost.
                    thesis: cost_scheds
                        .iter()
                        .map(|s| {
                            let saving = reported::Figures::for_config(&res.config).cost_saving(s, a);
                            saving.zip(base_cost).map(|(p, b)| b * (1.0 - p / 100.0))
                        })
                        .collect(),
                    show_ci: false,
                }
            })
            .collect(),
    };
    write_chart(
        &cost,
        dir,
        &Figure::Cost.stem(),
        &format!("{focus}: cost (thesis Fig. 17); thesis marker = our baseline cost x (1 - its DqnGPU saving)"),
    )
}

/// Every policy's mean JCT ratio against its jobs' p95 slowdown, over every (cell, class).
fn tradeoff_plot(res: &ExperimentResults, dir: &Path) -> Result<PlotFile, ExperimentError> {
    let rows = res.all_rows();
    let standings = crate::league::standings(&crate::league::entries(&rows), &res.schedulers);
    let chart = crate::plots::ScatterChart {
        title: "What each policy trades: mean JCT vs p95 job slowdown, over every cell and class".into(),
        x_desc: "p95 execution slowdown (mean)".into(),
        y_desc: "mean JCT / best heuristic's (mean)".into(),
        points: standings
            .iter()
            .map(|s| (s.scheduler.clone(), colour_index(res, &s.scheduler), s.p95_slowdown, s.jct_ratio))
            .collect(),
    };
    write_chart(&chart, dir, &Figure::Tradeoff.stem(), "mean JCT (relative to the best heuristic) against p95 slowdown")
}

/// The agents' training curves.
fn curves_plot(res: &ExperimentResults, dir: &Path) -> Result<PlotFile, ExperimentError> {
    // Each iteration trains on a window of job sets that cycles through them, so one
    // iteration's objective is not comparable with the next; a mean over one full pass is
    // (each agent's own: the scorer trains on other sets than the thesis's agents).
    let curves = CurveChart {
        title: "Training curves: each agent's objective (report: Training), rolling mean over one pass of its sets"
            .into(),
        y_desc: "mean training objective (s)".into(),
        series: res
            .training
            .iter()
            .map(|t| CurveSeries {
                name: t.scheduler.clone(),
                colour: colour_index(res, &t.scheduler),
                points: rolling_mean(&t.curve, t.pass.max(1) as usize),
            })
            .collect(),
        empty_note: if res.skipped.is_empty() {
            "No scheduler needed training in this run.".into()
        } else {
            format!(
                "No agent was trained: {}",
                res.skipped.iter().map(|s| s.scheduler.as_str()).collect::<Vec<_>>().join(", ")
            )
        },
    };
    write_chart(&curves, dir, &Figure::TrainingCurves.stem(), "Training curves")
}

/// Makes `out` ready for [`write_all`] before an experiment runs, so that a bad `--out` fails
/// at once rather than after minutes of work: it is made (with `plots/`) if missing. A file
/// where the directory should be is refused, and so is a directory that holds a file of one of
/// [`FILES`]' names (or a plot's name in `plots/`) but is neither an earlier experiment's output (`results.json`, written
/// last) nor an interrupted one's (our `config.toml` and nothing the experiment does not
/// write): its files are the user's, and would be replaced.
pub fn prepare(out: &Path) -> Result<(), ExperimentError> {
    let refuse = |message: String| {
        ModelError::invalid(dqngpu_model::Location { path: Some(out.to_path_buf()), line: None, field: None }, message)
    };
    if out.exists() && !out.is_dir() {
        return Err(refuse("is a file; the experiment writes a directory there".into()).into());
    }
    if !out.join("results.json").is_file() && !is_interrupted_output(out) {
        // Plots too: the run removes the plot-named files of `plots/` (an earlier run's), and
        // `plots/timeline_2024_roadmap.png` of the user's went with them.
        let plot = std::fs::read_dir(out.join("plots")).ok().and_then(|entries| {
            entries.flatten().filter_map(|e| e.file_name().into_string().ok()).find(|n| is_plot_file(n))
        });
        let theirs =
            FILES.iter().map(|f| f.to_string()).find(|f| out.join(f).exists()).or(plot.map(|p| format!("plots/{p}")));
        if let Some(f) = theirs {
            return Err(refuse(format!(
                "holds `{f}` but no results.json of an earlier experiment; it would be replaced, so choose another --out"
            ))
            .into());
        }
    }
    let plots = out.join("plots");
    std::fs::create_dir_all(&plots).map_err(|source| ModelError::Io { path: plots, source })?;
    Ok(())
}

/// True when `out` is what an interrupted experiment leaves (it writes `config.toml` first and
/// `results.json` last): our `config.toml`, and nothing but [`FILES`], `plots/` with our plot
/// files, and temporaries of those.
fn is_interrupted_output(out: &Path) -> bool {
    let ours = std::fs::read_to_string(out.join("config.toml")).is_ok_and(|t| t.starts_with(CONFIG_HEADER));
    ours && only_entries(out, |name, is_dir| {
        if is_dir {
            name == "plots" && only_entries(&out.join("plots"), |n, d| !d && is_plot_file(untemp(n)))
        } else {
            FILES.contains(&untemp(name))
        }
    })
}

/// True when every entry of `dir` passes `keep(name, is_dir)`; false when it cannot be read.
fn only_entries(dir: &Path, keep: impl Fn(&str, bool) -> bool) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else { return false };
    entries.into_iter().all(|e| {
        e.is_ok_and(|e| {
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            e.file_name().to_str().is_some_and(|n| keep(n, is_dir))
        })
    })
}

/// The file a temporary sibling (`.NAME.tmpPID-K`, `write_file_atomic`'s) stands for; other
/// names as they are.
fn untemp(name: &str) -> &str {
    name.strip_prefix('.').and_then(|n| n.rsplit_once(".tmp")).map_or(name, |(n, _)| n)
}

/// True for a name the experiment gives a plot ([`Figure::stem`] with `.svg` or `.png`).
fn is_plot_file(name: &str) -> bool {
    let Some(stem) = name.strip_suffix(".svg").or_else(|| name.strip_suffix(".png")) else { return false };
    let fixed = [Figure::Slowdown, Figure::TrainingOverhead, Figure::Cost, Figure::TrainingCurves, Figure::Tradeoff];
    fixed.iter().any(|f| f.stem() == stem) || stem.starts_with("class_") || stem.starts_with("timeline_")
}

/// Removes from `plot_dir` the plots of an earlier experiment (only files named as the
/// experiment names them), so classes or schedulers this run lacks leave no stale plot.
fn remove_old_plots(plot_dir: &Path) -> Result<(), ExperimentError> {
    let entries = std::fs::read_dir(plot_dir).map_err(|source| ModelError::Io { path: plot_dir.into(), source })?;
    for e in entries.flatten() {
        let is_file = e.file_type().is_ok_and(|t| t.is_file());
        if is_file && e.file_name().to_str().is_some_and(is_plot_file) {
            std::fs::remove_file(e.path()).map_err(|source| ModelError::Io { path: e.path(), source })?;
        }
    }
    Ok(())
}

/// Writes config.toml, summary.csv, league.csv, plots/, report.md, report.html and, last, as
/// the marker of a complete experiment, results.json into `out`; returns the paths written.
pub fn write_all(res: &ExperimentResults, out: &Path) -> Result<Vec<PathBuf>, ExperimentError> {
    let io = |path: &Path| {
        let p = path.to_path_buf();
        move |source| ModelError::Io { path: p, source }
    };
    // An earlier run's marker and reports go first: a run stopped part way must not leave
    // them beside its own new CSVs, where the directory would look finished but mix two runs.
    for name in ["results.json", "report.md", "report.html"] {
        dqngpu_model::error::remove_file_if_present(&out.join(name))?;
    }
    let plot_dir = out.join("plots");
    std::fs::create_dir_all(&plot_dir).map_err(io(&plot_dir))?;
    remove_old_plots(&plot_dir)?;
    let mut written = Vec::new();
    let mut put = |name: &str, bytes: &[u8]| -> Result<(), ExperimentError> {
        let p = out.join(name);
        write_file_atomic(&p, bytes)?;
        written.push(p);
        Ok(())
    };
    put("config.toml", res.config.to_toml().as_bytes())?;
    let rows = res.all_rows();
    put("summary.csv", summary_csv(&rows, res.config.workloads.jobs).as_bytes())?;
    put("league.csv", crate::league::league_csv(&crate::league::entries(&rows)).as_bytes())?;
    let plots = write_plots(res, &plot_dir)?;
    let json = serde_json::to_vec_pretty(res)
        .map_err(|source| ExperimentError::Json { what: "serialising results.json".into(), source })?;
    let blocks = report::build(res);
    put("report.md", report::to_markdown(&blocks, &plots).as_bytes())?;
    put("report.html", report::to_html(&blocks, &plots).as_bytes())?;
    // Last: its presence says the experiment finished (`prepare` reads it so).
    put("results.json", &json)?;
    for p in plots {
        written.push(p.svg);
        written.push(p.png);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ExperimentConfig;
    use crate::results::tests::run;
    use crate::results::{self, CurvePoint, Skipped, Timeline, TrainingRecord};

    /// Synthetic results (test input): two schedulers, one class, two seeds, one trained agent.
    fn synthetic() -> ExperimentResults {
        let mut config = ExperimentConfig::default();
        config.workloads.classes = vec!["random".into()];
        config.schedulers.names = vec!["sjf".into(), "dqngpu".into(), "deeprm-max".into()];
        let runs = vec![
            run("random", "sjf", 1000, 2400.0, 60.0, &[1.0, 1.0, 1.0]),
            run("random", "sjf", 1001, 2500.0, 62.0, &[1.0, 1.0, 1.0]),
            run("random", "dqngpu", 1000, 2300.0, 70.0, &[1.0, 1.05, 1.3]),
            run("random", "dqngpu", 1001, 2350.0, 71.0, &[1.0, 1.0, 1.15]),
        ];
        let schedulers = vec!["sjf".to_string(), "dqngpu".to_string()];
        let curve = (1..=6)
            .map(|i| CurvePoint {
                iteration: i,
                mean_return: Some(-1.0),
                mean_objective: Some(3000.0 - 10.0 * i as f64),
            })
            .collect();
        let training = vec![TrainingRecord {
            scheduler: "dqngpu".into(),
            workloads: vec!["random".into()],
            seeds: vec![0, 1],
            iterations: 6,
            iterations_planned: 6,
            stopped_by_time_limit: false,
            train_s: 100.0,
            curve,
            pass: 2,
            scorer: None,
        }];
        let mut summary = results::summarise(&runs, &config.workloads.classes, &schedulers, &training);
        crate::cells::label(&mut summary, &crate::cells::main_cell(&config));
        // One more cell: the same rows, dqngpu's JCT 10% lower there.
        let mut cells = summary.clone();
        let other = crate::config::CellConfig {
            name: "other".into(),
            library: "generated:1001".into(),
            gpus: "4xtitanxp:2".into(),
            jobs: 120,
            arrival_rate: Some(0.1),
            max_slowdown_pct: Some(10.0),
        };
        crate::cells::label(&mut cells, &other);
        for r in cells.iter_mut().filter(|r| r.scheduler == "dqngpu") {
            r.mean_jct_s_mean *= 0.9;
        }
        let timelines = schedulers
            .iter()
            .map(|s| Timeline {
                workload: "random".into(),
                scheduler: s.clone(),
                seed: 1000,
                t_s: vec![0.0, 10.0, 20.0],
                gpu_util_pct: vec![50.0, 90.0, 0.0],
                gpu_mem_pct: vec![20.0, 40.0, 0.0],
            })
            .collect();
        ExperimentResults {
            version: "test".into(),
            commit: Some("0123456789ab".into()),
            quick: false,
            eval_seeds: vec![1000, 1001],
            training_seeds: vec![0, 1],
            slowdown: results::slowdown_means(&runs, "random", &schedulers),
            training_overhead: results::training_overhead(&summary, "random", "sjf"),
            cost: results::costs(&summary, "random", &config),
            skipped: vec![Skipped { scheduler: "deeprm-max".into(), reason: "synthetic reason".into() }],
            config,
            schedulers,
            runs,
            summary,
            timelines,
            training,
            wall_s: 1.0,
            cells,
        }
    }

    /// A run with no heuristic has no league: the report says so, rather than dividing by
    /// the best of an empty list; with one, the paragraph names only the heuristics that ran.
    #[test]
    fn the_league_names_the_heuristics_that_ran_or_says_none_did() {
        let text = |res: &ExperimentResults| {
            report::build(res)
                .into_iter()
                .filter_map(|b| match b {
                    report::Block::Para(p) => Some(p),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n")
        };
        let res = synthetic();
        let t = text(&res);
        assert!(t.contains("heuristic's there (sjf)") && !t.contains("No heuristic ran"), "{t}");
        let mut none = synthetic();
        none.schedulers.retain(|s| s != "sjf");
        let t = text(&none);
        assert!(t.contains("No heuristic ran") && !t.contains("heuristic's there ("), "{t}");
    }

    #[test]
    fn an_out_dir_is_prepared_only_where_nothing_of_the_users_would_be_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("new");
        prepare(&out).unwrap();
        assert!(out.join("plots").is_dir());
        // A file in the way, and a user's report.md with no earlier results beside it.
        let file = dir.path().join("afile");
        std::fs::write(&file, "x").unwrap();
        assert!(prepare(&file).unwrap_err().to_string().contains("is a file"));
        let mine = dir.path().join("mine");
        std::fs::create_dir(&mine).unwrap();
        std::fs::write(mine.join("report.md"), "my notes").unwrap();
        let e = prepare(&mine).unwrap_err().to_string();
        assert!(e.contains("report.md") && e.contains("mine"), "{e}");
        assert_eq!(std::fs::read_to_string(mine.join("report.md")).unwrap(), "my notes");
        // A user's plots/ with files named as the experiment names its plots (the run removes
        // those of an earlier experiment): refused, nothing removed.
        let theirs = dir.path().join("theirs");
        std::fs::create_dir_all(theirs.join("plots")).unwrap();
        std::fs::write(theirs.join("plots/timeline_2024_roadmap.png"), "mine").unwrap();
        let e = prepare(&theirs).unwrap_err().to_string();
        assert!(e.contains("plots/timeline_2024_roadmap.png"), "{e}");
        assert!(theirs.join("plots/timeline_2024_roadmap.png").exists());
        // An earlier experiment's output may be written over.
        write_all(&synthetic(), &out).unwrap();
        prepare(&out).unwrap();
    }

    /// An interrupted experiment leaves our config.toml, CSVs and plots but no results.json: a
    /// rerun into it goes ahead; anything else of the user's beside them still refuses it.
    #[test]
    fn an_interrupted_experiments_out_dir_is_taken_back_but_not_a_users() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        write_all(&synthetic(), &out).unwrap();
        std::fs::remove_file(out.join("results.json")).unwrap();
        std::fs::remove_file(out.join("report.html")).unwrap();
        std::fs::write(out.join(".summary.csv.tmp123-0"), "half").unwrap();
        prepare(&out).unwrap();
        std::fs::write(out.join("notes.txt"), "mine").unwrap();
        let e = prepare(&out).unwrap_err().to_string();
        assert!(e.contains("no results.json"), "{e}");
        std::fs::remove_file(out.join("notes.txt")).unwrap();
        std::fs::write(out.join("plots").join("mine.png"), "mine").unwrap();
        assert!(prepare(&out).is_err());
        // A config.toml that is not ours is the user's.
        let mine = dir.path().join("mine");
        std::fs::create_dir(&mine).unwrap();
        std::fs::write(mine.join("config.toml"), "library = 'thesis'\n").unwrap();
        assert!(prepare(&mine).unwrap_err().to_string().contains("config.toml"));
    }

    /// A rerun into a finished experiment's directory that stops part way (killed, a disk
    /// full, a plot that cannot be written) must not leave the earlier run's results.json, the
    /// marker of a finished experiment, beside its own new summary.csv: the directory would
    /// look complete while mixing two runs.
    #[test]
    fn a_rerun_stopped_part_way_leaves_no_earlier_marker_beside_its_new_files() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path();
        let first = synthetic();
        write_all(&first, out).unwrap();
        // The second run draws the same plots; one of them cannot be written (a directory
        // holds its name), so write_all stops after summary.csv and league.csv.
        std::fs::remove_file(out.join("plots").join("slowdown.png")).unwrap();
        std::fs::create_dir_all(out.join("plots").join("slowdown.png").join("x")).unwrap();
        let mut second = synthetic();
        second.config.evaluation.first_seed = 5000;
        for r in &mut second.summary {
            r.makespan_s_mean += 1000.0;
        }
        assert!(write_all(&second, out).is_err());
        let csv = std::fs::read_to_string(out.join("summary.csv")).unwrap();
        assert!(csv.lines().nth(1).unwrap().starts_with("random,sjf,2,3450.000,"), "{csv}");
        for f in ["results.json", "report.md", "report.html"] {
            assert!(!out.join(f).exists(), "{f} of the earlier run is left beside the new summary.csv");
        }
        // What is left is an interrupted run's output, which a rerun may take back.
        std::fs::remove_dir_all(out.join("plots").join("slowdown.png")).unwrap();
        prepare(out).unwrap();
        write_all(&second, out).unwrap();
        assert!(out.join("results.json").is_file());
    }

    /// A rerun removes the earlier experiment's plots it does not redraw, and nothing else.
    #[test]
    fn a_rerun_leaves_no_stale_plot_but_keeps_the_users_files() {
        let dir = tempfile::tempdir().unwrap();
        let plots = dir.path().join("plots");
        std::fs::create_dir(&plots).unwrap();
        for f in ["class_gpu_heavy.png", "class_gpu_heavy.svg", "timeline_fifo.svg", "notes.txt"] {
            std::fs::write(plots.join(f), "old").unwrap();
        }
        write_all(&synthetic(), dir.path()).unwrap();
        for f in ["class_gpu_heavy.png", "class_gpu_heavy.svg", "timeline_fifo.svg"] {
            assert!(!plots.join(f).exists(), "{f}");
        }
        assert_eq!(std::fs::read_to_string(plots.join("notes.txt")).unwrap(), "old");
        assert!(plots.join("class_random.png").is_file());
    }

    /// The header states the training seed and the main setting's budget; the league names
    /// the heuristics that ran, not every one; the training table names each curve's objective.
    #[test]
    fn the_report_states_its_setting_and_names_what_ran() {
        let mut res = synthetic();
        res.config.training.seed = 7;
        res.config.max_slowdown_pct = Some(10.0);
        let md = report::to_markdown(&report::build(&res), &[]);
        assert!(md.contains("slowdown budget 10%") && md.contains("training seed") && md.contains(" 7."), "{md}");
        let league = md.lines().find(|l| l.starts_with("Each (cell, class)")).unwrap();
        assert!(league.contains("(sjf)") && !league.contains("tetris"), "{league}");
        assert!(md.contains("| mean makespan (s) |") && !md.contains("first mean makespan"), "{md}");
        res.training[0].scorer = Some(Default::default());
        assert_eq!(report::objective_text(&res, &res.training[0]), "mean JCT + makespan guard (s)");
        res.config.training.scorer_makespan_guard = 0.0;
        assert_eq!(report::objective_text(&res, &res.training[0]), "mean JCT (s)");
    }

    /// The thesis's figures are of its setting: beside a run of another library (or cluster,
    /// job count, budget) the `thesis` columns are empty and the report says why; they were
    /// filled with the thesis's numbers whatever ran.
    #[test]
    fn the_thesis_figures_appear_only_beside_the_thesis_setting() {
        let slowdown_row = |res: &ExperimentResults| {
            let md = report::to_markdown(&report::build(res), &[]);
            let row = md.lines().filter(|l| l.starts_with("| dqngpu |")).find(|l| l.matches('|').count() == 7);
            (row.unwrap().to_string(), md)
        };
        let res = synthetic();
        let (row, md) = slowdown_row(&res);
        assert!(row.ends_with("| 20.00 |"), "{row}");
        assert!(!md.contains("not the thesis's"), "{md}");
        for change in [
            |c: &mut ExperimentConfig| c.library = "lucid".into(),
            |c: &mut ExperimentConfig| c.cluster.gpus = "rtx3090:1".into(),
            |c: &mut ExperimentConfig| c.max_slowdown_pct = Some(10.0),
            |c: &mut ExperimentConfig| c.workloads.jobs = 10,
        ] {
            let mut other = synthetic();
            change(&mut other.config);
            let (row, md) = slowdown_row(&other);
            assert!(row.ends_with("| - |"), "{row}");
            assert!(md.contains("not the thesis's"), "{md}");
        }
    }

    #[test]
    fn writes_every_file_and_the_report_carries_the_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let res = synthetic();
        let written = write_all(&res, dir.path()).unwrap();
        for f in FILES {
            assert!(dir.path().join(f).is_file(), "{f}");
        }
        for p in [
            "class_random",
            "slowdown",
            "training_overhead",
            "cost",
            "timeline_sjf",
            "timeline_dqngpu",
            "training_curves",
            "jct_vs_p95_slowdown",
        ] {
            assert!(dir.path().join("plots").join(format!("{p}.png")).is_file(), "{p}");
            assert!(written.contains(&dir.path().join("plots").join(format!("{p}.svg"))));
        }
        let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
        // sjf: mean 2450 s, CI t(0.975,1) * 70.71 / 1.414 = 635.3; dqngpu beside the thesis's 2481 s.
        assert!(md.contains("| sjf | 2450.0 | 635.3 | - |"), "{md}");
        assert!(md.contains("| dqngpu | 2325.0 | 317.7 | 2481.0 |"), "{md}");
        assert!(md.contains("| deeprm-max | synthetic reason |"));
        // The Training table's first and last pass (2 iterations each) of 2990, 2980, ..., 2940.
        assert!(md.contains("| 2985.0 | 2945.0 |") && md.contains("a pass is 2 iterations for dqngpu"), "{md}");
        assert!(md.contains("| dqngpu | 2325.0 | 0.949 | 100.0 | 0.041 | 0.990 | 1.081 | 1.027 |"), "{md}");
        let back: ExperimentResults =
            serde_json::from_slice(&std::fs::read(dir.path().join("results.json")).unwrap()).unwrap();
        assert_eq!(back, res);
        let csv = std::fs::read_to_string(dir.path().join("summary.csv")).unwrap();
        assert!(csv.lines().nth(2).unwrap().starts_with("random,dqngpu,2,2325.000,317.655,"), "{csv}");
        // The cell's rows follow the main ones, labelled, with their own jobs per set.
        let other: Vec<&str> = csv.lines().filter(|l| l.contains(",other,")).collect();
        assert_eq!(other.len(), res.summary.len(), "{csv}");
        assert!(other
            .iter()
            .all(|l| l.contains(",120,") && l.contains(",other,generated:1001,4xtitanxp:2,poisson 0.1/s,10%,")));
        // League: in cell `other` dqngpu's JCT is 0.9x its main-cell value.
        assert!(md.contains("## League table") && md.contains("### cell `other`"), "{md}");
        assert!(std::fs::read_dir(dir.path()).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .contains(".tmp")));
    }
}
