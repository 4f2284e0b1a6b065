//! `report.md` and `report.html`, both rendered from one document model so they say the same
//! thing; the HTML embeds the PNG plots as base64 data URIs (self-contained).

use base64::Engine;

use crate::plots::PlotFile;
use crate::reported;
use crate::results::{row, ExperimentResults, TrainingRecord};

/// A block of the report.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// A heading of a level (1..=3).
    Heading(u8, String),
    /// A paragraph (inline code in backticks is kept).
    Para(String),
    /// A table.
    Table {
        /// Column headers.
        headers: Vec<String>,
        /// Rows of cells.
        rows: Vec<Vec<String>>,
    },
    /// A plot (`plots/STEM.png`).
    Plot(Figure),
}

/// A figure of the experiment: [`crate::output::write_plots`] draws it under its
/// [`stem`](Figure::stem) and the report shows it there, so the two cannot disagree on names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Figure {
    /// Makespan and utilisation of one workload class (thesis Figs. 10-14).
    Class(String),
    /// Jobs by slowdown (Fig. 15).
    Slowdown,
    /// Total time with training (Fig. 16).
    TrainingOverhead,
    /// Cost (Fig. 17).
    Cost,
    /// One scheduler's usage timeline.
    Timeline(String),
    /// The agents' training curves.
    TrainingCurves,
    /// Mean JCT against p95 slowdown, every policy over every cell (issue 10).
    Tradeoff,
}

impl Figure {
    /// The file stem under `plots/`.
    pub fn stem(&self) -> String {
        match self {
            Figure::Class(c) => format!("class_{c}"),
            Figure::Slowdown => "slowdown".into(),
            Figure::TrainingOverhead => "training_overhead".into(),
            Figure::Cost => "cost".into(),
            Figure::Timeline(s) => format!("timeline_{s}"),
            Figure::TrainingCurves => "training_curves".into(),
            Figure::Tradeoff => "jct_vs_p95_slowdown".into(),
        }
    }
}

/// Number formats, shared with the end-to-end test's reading of the report.
pub mod fmt {
    /// Seconds.
    pub fn secs(v: f64) -> String {
        format!("{v:.1}")
    }
    /// Percentages.
    pub fn pct(v: f64) -> String {
        format!("{v:.2}")
    }
    /// Ratios and normalised times.
    pub fn ratio(v: f64) -> String {
        format!("{v:.3}")
    }
    /// Mean counts.
    pub fn count(v: f64) -> String {
        format!("{v:.2}")
    }
    /// Dollars.
    pub fn usd(v: f64) -> String {
        format!("{v:.4}")
    }
    /// An optional thesis figure, or a dash.
    pub fn opt(v: Option<f64>, f: fn(f64) -> String) -> String {
        v.map(f).unwrap_or_else(|| "-".into())
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn seeds_text(seeds: &[u64]) -> String {
    match (seeds.first(), seeds.last()) {
        (Some(a), Some(b)) if seeds.len() > 1 => format!("{a}..={b} ({} seeds)", seeds.len()),
        (Some(a), _) => format!("{a} (1 seed)"),
        _ => "none".into(),
    }
}

/// The report as blocks: one section per figure of the thesis, in its order.
pub fn build(res: &ExperimentResults) -> Vec<Block> {
    let mut b = Vec::new();
    intro(res, &mut b);
    per_class(res, &mut b);
    slowdown(res, &mut b);
    training_overhead(res, &mut b);
    cost(res, &mut b);
    league(res, &mut b);
    timelines(res, &mut b);
    training(res, &mut b);
    b.push(Block::Para(format!(
        "Files: `results.json` (every run and job), `summary.csv`, `config.toml` (the effective configuration), \
         `plots/` (SVG and PNG). Whole experiment: {:.1} s wall clock.",
        res.wall_s
    )));
    b
}

/// What ran: version, library, cluster, seeds, schedulers evaluated and skipped.
fn intro(res: &ExperimentResults, b: &mut Vec<Block>) {
    let cfg = &res.config;
    b.push(Block::Heading(1, "dqngpu experiment: the thesis's Section V".into()));
    let main = crate::cells::main_cell(cfg);
    b.push(Block::Para(format!(
        "dqngpu {}{}{}. Library `{}`, cluster `{}`, interference `{}`, step {} s, decision tick {} s, {} jobs per \
         set, arrivals {}, slowdown budget {}. Evaluation job sets: seeds {} per class, never used in training. \
         The thesis's agents' training job sets: classes {}, seeds {} (the scorer's: Training, below); training \
         seed (initial weights, sampled actions, the scorer's sets) {}. \
         Means over seeds with the half-width of the 95% confidence interval (Student t, n - 1 degrees of freedom; `-` with one seed, where there is none).",
        res.version,
        res.commit.as_deref().map(|c| format!(" (commit {c})")).unwrap_or_default(),
        if res.quick { " (--quick: a small run for smoke tests; do not compare its numbers with the thesis)" } else { "" },
        cfg.library,
        main.gpus,
        cfg.interference,
        cfg.step_s,
        dqngpu_sim::SimConfig::default().decision_tick_s,
        cfg.workloads.jobs,
        main.arrivals(),
        main.budget(),
        seeds_text(&res.eval_seeds),
        cfg.training.workloads.join(", "),
        seeds_text(&res.training_seeds),
        cfg.training.seed,
    )));
    b.push(Block::Para(format!(
        "Schedulers evaluated: {}.",
        res.schedulers.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", ")
    )));
    if res.skipped.is_empty() {
        b.push(Block::Para("Schedulers skipped: none.".into()));
    } else {
        b.push(Block::Heading(2, "Skipped schedulers".into()));
        b.push(Block::Table {
            headers: strings(&["scheduler", "why"]),
            rows: res.skipped.iter().map(|s| vec![s.scheduler.clone(), s.reason.clone()]).collect(),
        });
    }
}

/// Makespan, utilisation and the thesis's figures per workload class (Figs. 10-14).
fn per_class(res: &ExperimentResults, b: &mut Vec<Block>) {
    let cfg = &res.config;
    b.push(Block::Heading(2, "Per workload class (thesis Figs. 10-14)".into()));
    b.push(Block::Para(
        "Makespan is the time the last job finishes; GPU and GPU memory utilisation are averaged over the GPUs and \
         [0, makespan]. `LB ratio` is makespan / util bound (max of the longest job and total GPU-util work over \
         100% per GPU). Utilisation is not a hard capacity (measured pairs overlap their kernels and reach \
         1.4x combined speed at 175-200% summed utilisation), so sharing can finish below it (ratio < 1); \
         see docs/SIMULATOR.md. `thesis` columns give the figure the thesis's text states, `-` where it \
         gives none (its Figs. 10-14 are bar charts; the text quotes only some bars)."
            .into(),
    ));
    if !reported::Figures::for_config(cfg).setting() {
        b.push(Block::Para(NOT_THESIS.into()));
    }
    for class in &cfg.workloads.classes {
        b.push(Block::Heading(3, class.clone()));
        let mut rows = Vec::new();
        for s in &res.schedulers {
            let Some(r) = row(&res.summary, class, s) else { continue };
            let th = reported::Figures::for_config(cfg).run(class, s);
            rows.push(vec![
                s.clone(),
                fmt::secs(r.makespan_s_mean),
                fmt::opt(r.ci(r.makespan_s_ci95), fmt::secs),
                fmt::opt(th.and_then(|t| t.makespan_s), fmt::secs),
                fmt::secs(r.lower_bound_s_mean),
                fmt::ratio(r.ratio_to_lower_bound_mean),
                fmt::pct(r.avg_gpu_util_pct_mean),
                fmt::opt(r.ci(r.avg_gpu_util_pct_ci95), fmt::pct),
                fmt::opt(th.and_then(|t| t.gpu_util_pct), fmt::pct),
                fmt::pct(r.avg_gpu_mem_util_pct_mean),
                fmt::opt(r.ci(r.avg_gpu_mem_util_pct_ci95), fmt::pct),
                fmt::opt(th.and_then(|t| t.gpu_mem_util_pct), fmt::pct),
                fmt::count(r.oom_kills_mean),
                fmt::count(r.no_slowdown_jobs_mean),
            ]);
        }
        b.push(Block::Table {
            headers: strings(&[
                "scheduler",
                "makespan (s)",
                "± 95% CI",
                "thesis makespan (s)",
                "lower bound (s)",
                "LB ratio",
                "GPU util (%)",
                "± 95% CI",
                "thesis GPU util (%)",
                "GPU mem util (%)",
                "± 95% CI",
                "thesis GPU mem (%)",
                "OOM kills",
                "no-slowdown jobs",
            ]),
            rows,
        });
        b.push(Block::Plot(Figure::Class(class.clone())));
    }
    if cfg.workloads.classes.iter().any(|c| c == "mem_heavy") {
        b.push(Block::Para(
            "The thesis's GPU memory_heavy paragraph repeats the GPU_light figures (1,214 s, 89.31%, 88.42%) word for \
             word, so no thesis figure is cited for mem_heavy."
                .into(),
        ));
    }
}

/// Said where the thesis's figures are left out.
const NOT_THESIS: &str = "This run's main setting is not the thesis's (library `thesis` on one Titan Xp, 30 jobs a \
     set at t = 0, no budget, `contention`; for Figs. 15-17 also the `random` class): the `thesis` columns and \
     markers are left empty, since the thesis's figures are of its setting, not this one.";

/// Jobs by execution slowdown on the focus class (Fig. 15).
fn slowdown(res: &ExperimentResults, b: &mut Vec<Block>) {
    let cfg = &res.config;
    let focus = &cfg.workloads.focus;
    let n_jobs = cfg.workloads.jobs;
    b.push(Block::Heading(2, format!("Slowdown of each job on `{focus}` (thesis Fig. 15)")));
    b.push(Block::Para(format!(
        "Mean number of the {n_jobs} jobs per set by execution slowdown (execution time / solo time): none = within 2%, \
         then < 10%, 10-20%, >= 20%. Thesis (random, 30 jobs): DqnGPU 20 jobs with no slowdown, Tetris and DeepRM Max \
         14; DeepRM Mean {} jobs at >= 10%.",
        reported::DEEPRM_MEAN_GE10_JOBS
    )));
    if !reported::Figures::for_config(cfg).focus() {
        b.push(Block::Para(NOT_THESIS.into()));
    }
    b.push(Block::Table {
        headers: strings(&["scheduler", "none (<= 2%)", "< 10%", "10-20%", ">= 20%", "thesis: none"]),
        rows: res
            .slowdown
            .iter()
            .map(|s| {
                let v = s.values();
                vec![
                    s.scheduler.clone(),
                    fmt::count(v[0]),
                    fmt::count(v[1]),
                    fmt::count(v[2]),
                    fmt::count(v[3]),
                    fmt::opt(reported::Figures::for_config(cfg).no_slowdown(&s.scheduler), fmt::count),
                ]
            })
            .collect(),
    });
    b.push(Block::Plot(Figure::Slowdown));
}

/// Makespan plus training time, normalised to the baseline (Fig. 16).
fn training_overhead(res: &ExperimentResults, b: &mut Vec<Block>) {
    let cfg = &res.config;
    let (focus, base) = (&cfg.workloads.focus, &cfg.schedulers.baseline);
    b.push(Block::Heading(2, format!("Training overhead on `{focus}` (thesis Fig. 16)")));
    b.push(Block::Para(format!(
        "Total time = mean makespan + wall-clock training time, normalised to `{base}`'s mean makespan (= 1). Training \
         time is measured on this machine (it is not reproducible run to run); the thesis trained DqnGPU in {} s.",
        reported::DQNGPU_TRAIN_S
    )));
    b.push(Block::Table {
        headers: strings(&[
            "scheduler",
            "makespan (s)",
            "makespan / baseline",
            "training (s)",
            "training / baseline",
            "total / baseline",
            "thesis total",
            "thesis without training",
        ]),
        rows: res
            .training_overhead
            .iter()
            .map(|o| {
                let th = reported::Figures::for_config(cfg).overhead(&o.scheduler);
                vec![
                    o.scheduler.clone(),
                    fmt::secs(o.makespan_s),
                    fmt::ratio(o.exec_norm),
                    fmt::secs(o.train_s),
                    fmt::ratio(o.train_norm),
                    fmt::ratio(o.total_norm),
                    fmt::opt(th.and_then(|t| t.0), fmt::ratio),
                    fmt::opt(th.and_then(|t| t.2), fmt::ratio),
                ]
            })
            .collect(),
    });
    b.push(Block::Plot(Figure::TrainingOverhead));
}

/// The thesis's cost assumptions and each scheduler's cost and saving (Fig. 17).
fn cost(res: &ExperimentResults, b: &mut Vec<Block>) {
    let cfg = &res.config;
    let (focus, base) = (&cfg.workloads.focus, &cfg.schedulers.baseline);
    b.push(Block::Heading(2, format!("Cost on `{focus}` (thesis Fig. 17, prices of its Table 5)")));
    let shared = cfg.cost.instance(&cfg.cost.shared);
    b.push(Block::Para(format!(
        "cost = instances x price (US$/h) x makespan (s) / 3600. The baseline `{base}` runs on dedicated instances and \
         is billed for the `replaces` dedicated instances one shared `{}` (US$ {}/h) stands for; every other scheduler \
         shares one `{}`. saving = 100 x (1 - cost / baseline cost). Training time is not billed. This is the form \
         under which the thesis's two savings (29.86% and 49.98%) both follow from one DqnGPU/SJF time ratio (0.874); \
         the thesis does not say which run gave that ratio.",
        cfg.cost.shared,
        shared.map(|s| s.usd_per_hour).unwrap_or(f64::NAN),
        cfg.cost.shared,
    )));
    b.push(Block::Table {
        headers: strings(&["assumption", "basis", "dedicated instance", "replaces"]),
        rows: cfg
            .cost
            .assumptions
            .iter()
            .map(|a| vec![a.name.clone(), a.basis.clone(), a.dedicated.clone(), a.replaces.to_string()])
            .collect(),
    });
    b.push(Block::Table {
        headers: strings(&[
            "assumption",
            "scheduler",
            "instance",
            "instances",
            "US$/h",
            "makespan (s)",
            "cost (US$)",
            "saving vs baseline (%)",
            "thesis saving, DqnGPU (%)",
        ]),
        rows: res
            .cost
            .iter()
            .map(|c| {
                let th = reported::Figures::for_config(&res.config).cost_saving(&c.scheduler, &c.assumption);
                vec![
                    c.assumption.clone(),
                    c.scheduler.clone(),
                    c.instance.clone(),
                    c.instances.to_string(),
                    format!("{}", c.usd_per_hour),
                    fmt::secs(c.makespan_s),
                    fmt::usd(c.cost_usd),
                    fmt::pct(c.saving_vs_baseline_pct),
                    fmt::opt(th, fmt::pct),
                ]
            })
            .collect(),
    });
    b.push(Block::Plot(Figure::Cost));
}

/// The league table: every policy against the best heuristic in every cell and class.
///
/// One piece on purpose (about 90 lines): the standings and the per-cell tables are one
/// section of the report, in the order it reads.
fn league(res: &ExperimentResults, b: &mut Vec<Block>) {
    use crate::league;
    let rows = res.all_rows();
    let entries = league::entries(&rows);
    b.push(Block::Heading(2, "League table: every setting, against the best heuristic".into()));
    let heuristics: Vec<&str> =
        league::HEURISTICS.iter().filter(|h| res.schedulers.iter().any(|s| s.as_str() == **h)).copied().collect();
    if heuristics.is_empty() {
        b.push(Block::Para(format!(
            "No heuristic ran ({} are the league's), so there is no best heuristic to compare with.",
            league::HEURISTICS.join(", ")
        )));
        return;
    }
    b.push(Block::Para(format!(
        "Each (cell, class): a policy's mean JCT and makespan over the {} evaluation seeds, divided by the best \
         heuristic's there ({}); below 1 beats every rule. `within` counts pairs with JCT <= 1.01x and makespan \
         <= 1.02x the best heuristic's; `>=5% better` pairs with JCT at most 0.95x. p95 slowdown: the 95th \
         percentile of the jobs' execution slowdown, mean over seeds. The trained agents are trained once (main \
         setting's cluster) and run unchanged in every cell; the budget cells apply the budget to every policy.",
        res.eval_seeds.len(),
        heuristics.join(", ")
    )));
    let pairs = league::pairs(&entries);
    let conflicting: Vec<String> = pairs.iter().filter(|p| !p.2).map(|p| format!("{} {}", p.0, p.1)).collect();
    b.push(Block::Para(format!(
        "`beaten outright`: pairs where some heuristic has both a mean JCT and a makespan more than 1% below the \
         policy's. In {} of the {} pairs no heuristic is itself within both lines (the best JCT and the best \
         makespan come from rules that trade one for the other){}.",
        conflicting.len(),
        pairs.len(),
        if conflicting.is_empty() { String::new() } else { format!(": {}", conflicting.join(", ")) }
    )));
    let no_room: Vec<String> =
        league::pairs_without_room(&entries).iter().map(|p| format!("{} {}", p.0, p.1)).collect();
    b.push(Block::Para(format!(
        "Room: in {} of the {} pairs no policy can have a mean JCT 5% below the best heuristic's, which is within 5% \
         of the mean-JCT lower bound there (jobs' solo times, their memory held over the cluster's memory, and jobs \
         that can share a GPU with none served shortest first; docs/SIMULATOR.md){}. `jct_room` in league.csv is the best heuristic's mean JCT over \
         the bound.",
        no_room.len(),
        pairs.len(),
        if no_room.is_empty() { String::new() } else { format!(": {}", no_room.join(", ")) }
    )));
    let standings = league::standings(&entries, &res.schedulers);
    b.push(Block::Table {
        headers: strings(&[
            "scheduler",
            "pairs",
            "JCT / best",
            "makespan / best",
            "p95 slowdown",
            "within",
            ">=5% better",
            "beaten outright",
        ]),
        rows: standings
            .iter()
            .map(|s| {
                vec![
                    s.scheduler.clone(),
                    s.pairs.to_string(),
                    fmt::ratio(s.jct_ratio),
                    fmt::ratio(s.makespan_ratio),
                    fmt::ratio(s.p95_slowdown),
                    format!("{}/{}", s.within, s.pairs),
                    format!("{}/{}", s.better_by_5pct, s.pairs),
                    format!("{}/{}", s.beaten_on_both, s.pairs),
                ]
            })
            .collect(),
    });
    b.push(Block::Plot(Figure::Tradeoff));
    let mut cells: Vec<String> = Vec::new();
    for e in &entries {
        if !cells.contains(&e.cell) {
            cells.push(e.cell.clone());
        }
    }
    for cell in cells {
        let first = rows.iter().find(|r| r.cell == cell);
        b.push(Block::Heading(3, format!("cell `{cell}`")));
        if let Some(r) = first {
            b.push(Block::Para(format!(
                "library `{}`, cluster `{}`, arrivals {}, budget {}; cells are JCT / makespan ratios.",
                r.library, r.cluster, r.arrivals, r.max_slowdown
            )));
        }
        let mut headers = vec!["class".to_string()];
        headers.extend(res.schedulers.iter().cloned());
        let mut classes: Vec<&str> = Vec::new();
        for e in entries.iter().filter(|e| e.cell == cell) {
            if !classes.contains(&e.class.as_str()) {
                classes.push(&e.class);
            }
        }
        let table_rows = classes
            .iter()
            .map(|class| {
                let mut row = vec![class.to_string()];
                for s in &res.schedulers {
                    row.push(
                        entries
                            .iter()
                            .find(|e| e.cell == cell && e.class == *class && &e.scheduler == s)
                            .map(|e| format!("{} / {}", fmt::ratio(e.jct_ratio), fmt::ratio(e.makespan_ratio)))
                            .unwrap_or_else(|| "-".into()),
                    );
                }
                row
            })
            .collect();
        b.push(Block::Table { headers, rows: table_rows });
    }
}

/// One usage timeline per scheduler.
fn timelines(res: &ExperimentResults, b: &mut Vec<Block>) {
    let focus = &res.config.workloads.focus;
    b.push(Block::Heading(2, "GPU utilisation and memory over time".into()));
    b.push(Block::Para(format!(
        "One run per scheduler (class `{focus}`, seed {}): GPU utilisation (sum over the GPU's jobs of util demand x \
         progress rate, capped at 100%) and GPU memory in use, averaged over the cluster's GPUs.",
        res.timelines.first().map(|t| t.seed.to_string()).unwrap_or_else(|| "-".into())
    )));
    for t in &res.timelines {
        b.push(Block::Plot(Figure::Timeline(t.scheduler.clone())));
    }
}

/// How each agent trained.
fn training(res: &ExperimentResults, b: &mut Vec<Block>) {
    b.push(Block::Heading(2, "Training".into()));
    if res.training.is_empty() {
        b.push(Block::Para("No scheduler needed training in this run.".into()));
    } else {
        b.push(Block::Table {
            headers: strings(&[
                "agent",
                "classes",
                "training seeds",
                "iterations",
                "stopped by time limit",
                "training (s)",
                "objective",
                "first pass (mean)",
                "last pass (mean)",
            ]),
            rows: res
                .training
                .iter()
                .map(|t| {
                    let (first, last) = crate::results::pass_means(&t.curve, t.pass);
                    vec![
                        t.scheduler.clone(),
                        t.workloads.join(", "),
                        seeds_text(&t.seeds),
                        format!("{} of {}", t.iterations, t.iterations_planned),
                        if t.stopped_by_time_limit { "yes".into() } else { "no".into() },
                        fmt::secs(t.train_s),
                        objective_text(res, t),
                        fmt::opt(first, fmt::secs),
                        fmt::opt(last, fmt::secs),
                    ]
                })
                .collect(),
        });
    }
    if !res.training.is_empty() {
        let passes: Vec<String> = res
            .training
            .iter()
            .enumerate()
            .map(|(k, t)| {
                let unit = if k == 0 {
                    if t.pass == 1 {
                        " iteration"
                    } else {
                        " iterations"
                    }
                } else {
                    ""
                };
                format!("{}{unit} for {}", t.pass, t.scheduler)
            })
            .collect();
        b.push(Block::Para(format!(
            "Each iteration trains on a few of an agent's training sets in turn, so one iteration's objective says more \
             about which sets it drew than about the agent; `first pass` and `last pass` are the mean objective over \
             the first and the last pass over all of its sets (a pass is {}), and the plot's rolling mean spans one \
             pass.",
            passes.join(", ")
        )));
    }
    for (t, r) in res.training.iter().filter_map(|t| Some((t, t.scorer.as_ref()?))) {
        b.push(Block::Para(format!(
            "The scorer's curve (`{}`) numbers its policy-gradient iterations on from one phase to the next (the first \
             training, then each improvement round). Its sets come from the libraries and clusters of \
             `training.scorer_settings` (the training seeds above are per library), and it trains with its own fixed \
             network and learning rate \
             (`training.lr` and `training.hidden` are the thesis's agents'). On its validation sets (the mean over \
             sets of its objective / the best rule's there; 1 = as good as the best rule everywhere): the best single \
             rule {:.4}, the untrained network {:.4}, after imitation {:.4}, the kept weights {:.4} ({}); teachers: {}.",
            t.scheduler,
            r.expert_validation,
            r.untrained_validation,
            r.imitation_validation,
            r.final_validation,
            r.kept,
            r.expert,
        )));
    }
    if res.training.iter().any(|t| t.stopped_by_time_limit) {
        b.push(Block::Para(format!(
            "`training.time_limit_s` = {} s cut training short where the table says so.",
            res.config.training.time_limit_s.unwrap_or(f64::NAN)
        )));
    }
    b.push(Block::Plot(Figure::TrainingCurves));
}

/// What `t`'s training curve holds: the mean over the iteration's episodes of the objective
/// it minimised (the scorer's own, with its makespan guard), in seconds.
pub fn objective_text(res: &ExperimentResults, t: &TrainingRecord) -> String {
    let tc = &res.config.training;
    match (t.scorer.is_some(), tc.scorer_objective) {
        (true, dqngpu_rl::reinforce::Objective::Jct) if tc.scorer_makespan_guard > 0.0 => {
            "mean JCT + makespan guard (s)".into()
        }
        (true, o) => format!("mean {} (s)", objective_word(o)),
        (false, _) => format!("mean {} (s)", objective_word(tc.objective)),
    }
}

fn objective_word(o: dqngpu_rl::reinforce::Objective) -> &'static str {
    match o {
        dqngpu_rl::reinforce::Objective::Jct => "JCT",
        dqngpu_rl::reinforce::Objective::Makespan => "makespan",
    }
}

fn md_cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// Markdown.
pub fn to_markdown(blocks: &[Block], plots: &[PlotFile]) -> String {
    let mut out = String::new();
    for bl in blocks {
        match bl {
            Block::Heading(l, t) => out.push_str(&format!("{} {t}\n\n", "#".repeat(usize::from(*l).clamp(1, 6)))),
            Block::Para(t) => out.push_str(&format!("{t}\n\n")),
            Block::Table { headers, rows } => {
                out.push_str(&format!("| {} |\n", headers.iter().map(|h| md_cell(h)).collect::<Vec<_>>().join(" | ")));
                out.push_str(&format!("|{}\n", " --- |".repeat(headers.len())));
                for r in rows {
                    out.push_str(&format!("| {} |\n", r.iter().map(|c| md_cell(c)).collect::<Vec<_>>().join(" | ")));
                }
                out.push('\n');
            }
            Block::Plot(fig) => {
                let name = fig.stem();
                if let Some(p) = plots.iter().find(|p| p.name == name) {
                    out.push_str(&format!("![{}](plots/{name}.png)\n\n", p.title));
                }
            }
        }
    }
    out
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Inline code spans (`x`) to <code>.
fn inline(s: &str) -> String {
    let mut out = String::new();
    for (i, part) in esc(s).split('`').enumerate() {
        if i % 2 == 1 {
            out.push_str(&format!("<code>{part}</code>"));
        } else {
            out.push_str(part);
        }
    }
    out
}

/// Self-contained HTML: PNGs embedded as base64 data URIs, no external resources.
pub fn to_html(blocks: &[Block], plots: &[PlotFile]) -> String {
    let mut out = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>dqngpu experiment</title>\n<style>\n\
         body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}\n\
         table{border-collapse:collapse;margin:1em 0;font-size:14px}\n\
         th,td{border:1px solid #bbb;padding:3px 7px;text-align:right}\n\
         th{background:#eee}td:first-child,th:first-child{text-align:left}\n\
         img{max-width:100%;border:1px solid #ddd;margin:0.5em 0}\ncode{background:#f3f3f3;padding:0 3px}\n\
         </style>\n</head>\n<body>\n",
    );
    let b64 = base64::engine::general_purpose::STANDARD;
    for bl in blocks {
        match bl {
            Block::Heading(l, t) => {
                let l = (*l).clamp(1, 6);
                out.push_str(&format!("<h{l}>{}</h{l}>\n", inline(t)));
            }
            Block::Para(t) => out.push_str(&format!("<p>{}</p>\n", inline(t))),
            Block::Table { headers, rows } => {
                out.push_str("<table>\n<tr>");
                for h in headers {
                    out.push_str(&format!("<th>{}</th>", esc(h)));
                }
                out.push_str("</tr>\n");
                for r in rows {
                    out.push_str("<tr>");
                    for c in r {
                        out.push_str(&format!("<td>{}</td>", esc(c)));
                    }
                    out.push_str("</tr>\n");
                }
                out.push_str("</table>\n");
            }
            Block::Plot(fig) => {
                if let Some(p) = plots.iter().find(|p| p.name == fig.stem()) {
                    out.push_str(&format!(
                        "<figure><img alt=\"{}\" src=\"data:image/png;base64,{}\"><figcaption>{}</figcaption></figure>\n",
                        esc(&p.title),
                        b64.encode(&p.png_bytes),
                        esc(&p.title)
                    ));
                }
            }
        }
    }
    out.push_str("</body>\n</html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_and_html_render_the_same_blocks() {
        let blocks = vec![
            Block::Heading(2, "A <b>".into()),
            Block::Para("use `dqngpu`".into()),
            Block::Table { headers: vec!["x".into(), "y|z".into()], rows: vec![vec!["1".into(), "2".into()]] },
            Block::Plot(Figure::Cost),
            Block::Plot(Figure::Slowdown),
        ];
        let plots = vec![PlotFile {
            name: Figure::Cost.stem(),
            title: "P".into(),
            svg: "p.svg".into(),
            png: "p.png".into(),
            png_bytes: vec![0x89, b'P', b'N', b'G'],
        }];
        let md = to_markdown(&blocks, &plots);
        assert!(md.contains("## A <b>") && md.contains("| x | y\\|z |") && md.contains("| 1 | 2 |"), "{md}");
        assert!(md.contains("![P](plots/cost.png)") && !md.contains("slowdown"), "{md}");
        let html = to_html(&blocks, &plots);
        assert!(html.contains("<h2>A &lt;b&gt;</h2>") && html.contains("<code>dqngpu</code>"), "{html}");
        assert!(html.contains("src=\"data:image/png;base64,iVBORw==\""), "{html}");
        assert!(!html.contains("src=\"http") && !html.contains("plots/"));
    }
}
