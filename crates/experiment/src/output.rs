//! Writes an experiment's files into the out dir, each atomically (temporary name, then
//! rename), `results.json` and the reports last, so an interrupted run never leaves a
//! half-written file under a final name.

use std::path::{Path, PathBuf};

use dqngpu_model::error::write_file_atomic;
use dqngpu_model::ModelError;
use plotters::style::RGBColor;

use crate::error::ExperimentError;
use crate::plots::{write_chart, BarChart, BarPanel, CurveChart, PlotFile, StackedChart, TimelineChart};
use crate::reported;
use crate::results::{row, summary_csv, ExperimentResults};
use crate::report;

/// Names of the files written directly in the out dir.
pub const FILES: [&str; 5] = ["config.toml", "summary.csv", "results.json", "report.md", "report.html"];

fn colour_index(res: &ExperimentResults, scheduler: &str) -> usize {
    res.config.schedulers.names.iter().position(|n| n == scheduler).unwrap_or(0)
}

/// Draws every plot into `dir`.
pub fn write_plots(res: &ExperimentResults, dir: &Path) -> Result<Vec<PlotFile>, ExperimentError> {
    let mut plots = Vec::new();
    let scheds = &res.schedulers;
    for class in &res.config.workloads.classes {
        let present: Vec<String> = scheds.iter().filter(|s| row(&res.summary, class, s).is_some()).cloned().collect();
        let rows: Vec<_> = present.iter().filter_map(|s| row(&res.summary, class, s)).collect();
        let th = |f: fn(&reported::ReportedRun) -> Option<f64>| -> Vec<Option<f64>> {
            present.iter().map(|s| reported::run(class, s).and_then(f)).collect()
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
        plots.push(write_chart(&chart, dir, &format!("class_{class}"), &format!("{class}: makespan, GPU and memory utilisation (thesis Figs. 10-14)"))?);
    }

    let focus = &res.config.workloads.focus;
    let slow = StackedChart {
        title: format!("{focus}: jobs by execution slowdown (mean over seeds)"),
        y_desc: "jobs per set".into(),
        schedulers: res.slowdown.iter().map(|s| s.scheduler.clone()).collect(),
        segments: vec!["no slowdown (<= 2%)".into(), "< 10%".into(), "10-20%".into(), ">= 20%".into()],
        segment_colours: vec![RGBColor(44, 160, 44), RGBColor(188, 189, 34), RGBColor(255, 127, 14), RGBColor(214, 39, 40)],
        values: res.slowdown.iter().map(|s| s.values().to_vec()).collect(),
        markers: res.slowdown.iter().map(|s| reported::no_slowdown(&s.scheduler)).collect(),
        marker_label: "thesis: jobs with no slowdown".into(),
        reference: None,
    };
    plots.push(write_chart(&slow, dir, "slowdown", &format!("{focus}: slowdown buckets (thesis Fig. 15)"))?);

    let base = &res.config.schedulers.baseline;
    let over = StackedChart {
        title: format!("{focus}: total time with training, normalised to {base}"),
        y_desc: format!("time / {base} makespan"),
        schedulers: res.training_overhead.iter().map(|o| o.scheduler.clone()).collect(),
        segments: vec!["makespan".into(), "training (wall clock)".into()],
        segment_colours: vec![RGBColor(31, 119, 180), RGBColor(214, 39, 40)],
        values: res.training_overhead.iter().map(|o| vec![o.exec_norm, o.train_norm]).collect(),
        markers: res.training_overhead.iter().map(|o| reported::overhead(&o.scheduler).and_then(|t| t.0)).collect(),
        marker_label: "thesis: total".into(),
        reference: Some(1.0),
    };
    plots.push(write_chart(&over, dir, "training_overhead", &format!("{focus}: training overhead (thesis Fig. 16)"))?);

    let assumptions: Vec<String> = res.config.cost.assumptions.iter().map(|a| a.name.clone()).collect();
    let cost_scheds: Vec<String> = scheds.iter().filter(|s| res.cost.iter().any(|c| &c.scheduler == *s)).cloned().collect();
    let cost = BarChart {
        schedulers: cost_scheds.clone(),
        colours: cost_scheds.iter().map(|s| colour_index(res, s)).collect(),
        panels: assumptions
            .iter()
            .map(|a| {
                let find = |s: &str| res.cost.iter().find(|c| &c.assumption == a && c.scheduler == s);
                let base_cost = find(base).map(|c| c.cost_usd);
                BarPanel {
                    title: format!("{focus}: {a} ({base} on dedicated instances, others on one shared {})", res.config.cost.shared),
                    y_desc: "cost (US$)".into(),
                    values: cost_scheds.iter().map(|s| (find(s).map(|c| c.cost_usd).unwrap_or(0.0), 0.0)).collect(),
                    // The thesis's DqnGPU saving applied to our baseline cost.
                    thesis: cost_scheds
                        .iter()
                        .map(|s| if s == "dqngpu" { reported::cost_saving(a).zip(base_cost).map(|(p, b)| b * (1.0 - p / 100.0)) } else { None })
                        .collect(),
                    show_ci: false,
                }
            })
            .collect(),
    };
    plots.push(write_chart(&cost, dir, "cost", &format!("{focus}: cost (thesis Fig. 17); thesis marker = our baseline cost x (1 - its DqnGPU saving)"))?);

    for t in &res.timelines {
        let chart = TimelineChart {
            title: format!("{}: GPU utilisation and memory over time ({} seed {})", t.scheduler, t.workload, t.seed),
            t_s: t.t_s.clone(),
            gpu_util_pct: t.gpu_util_pct.clone(),
            gpu_mem_pct: t.gpu_mem_pct.clone(),
        };
        plots.push(write_chart(&chart, dir, &format!("timeline_{}", t.scheduler), &format!("{}: GPU utilisation and memory timeline", t.scheduler))?);
    }

    let curves = CurveChart {
        title: "Training curves: mean makespan of each iteration's episodes".into(),
        y_desc: "mean makespan (s)".into(),
        series: res
            .training
            .iter()
            .map(|t| {
                (t.scheduler.clone(), colour_index(res, &t.scheduler), t.curve.iter().map(|p| (p.iteration as f64, p.mean_makespan_s)).collect())
            })
            .collect(),
        empty_note: if res.skipped.is_empty() {
            "No scheduler needed training in this run.".into()
        } else {
            format!("No agent was trained: {}", res.skipped.iter().map(|s| s.scheduler.as_str()).collect::<Vec<_>>().join(", "))
        },
    };
    plots.push(write_chart(&curves, dir, "training_curves", "Training curves")?);
    Ok(plots)
}

/// Writes config.toml, summary.csv, plots/, results.json, report.md and report.html into
/// `out`; returns the paths written.
pub fn write_all(res: &ExperimentResults, out: &Path) -> Result<Vec<PathBuf>, ExperimentError> {
    let io = |path: &Path| {
        let p = path.to_path_buf();
        move |source| ModelError::Io { path: p, source }
    };
    let plot_dir = out.join("plots");
    std::fs::create_dir_all(&plot_dir).map_err(io(&plot_dir))?;
    let mut written = Vec::new();
    let mut put = |name: &str, bytes: &[u8]| -> Result<(), ExperimentError> {
        let p = out.join(name);
        write_file_atomic(&p, bytes)?;
        written.push(p);
        Ok(())
    };
    put("config.toml", res.config.to_toml().as_bytes())?;
    put("summary.csv", summary_csv(&res.summary, res.config.workloads.jobs).as_bytes())?;
    let plots = write_plots(res, &plot_dir)?;
    let json = serde_json::to_vec_pretty(res).map_err(|e| ExperimentError::Run { what: "results.json".into(), message: e.to_string() })?;
    put("results.json", &json)?;
    let blocks = report::build(res);
    put("report.md", report::to_markdown(&blocks, &plots).as_bytes())?;
    put("report.html", report::to_html(&blocks, &plots).as_bytes())?;
    for p in plots {
        written.push(p.svg);
        written.push(p.png);
    }
    Ok(written)
}
