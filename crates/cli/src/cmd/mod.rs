//! One module per command. Each has an `Args` (clap) and a `run`.

pub mod apps;
pub mod bench;
pub mod calibrate;
pub mod client;
pub mod deeprm;
pub mod experiment;
pub mod interference;
pub mod k8s;
pub mod profile;
pub mod serve;
pub mod simulate;
pub mod trace;
pub mod train;
pub mod workload;

use dqngpu_model::ModelError;

/// 2 when any error in the chain is a usage error (an unknown name), else 1. Each library's
/// error says for itself whether it is one (its `is_usage`), so commands return errors as
/// they come, with their sources, and no command maps them.
pub fn exit_code(e: &anyhow::Error) -> i32 {
    if e.chain().any(is_usage) {
        2
    } else {
        1
    }
}

/// True when `e` is a library error that is a usage error.
fn is_usage(e: &(dyn std::error::Error + 'static)) -> bool {
    if let Some(e) = e.downcast_ref::<ModelError>() {
        e.is_usage()
    } else if let Some(e) = e.downcast_ref::<dqngpu_sim::SimError>() {
        e.is_usage()
    } else if let Some(e) = e.downcast_ref::<dqngpu_rl::RlError>() {
        e.is_usage()
    } else if let Some(e) = e.downcast_ref::<dqngpu_experiment::ExperimentError>() {
        e.is_usage()
    } else if let Some(e) = e.downcast_ref::<dqngpu_profiler::ProfilerError>() {
        e.is_usage()
    } else if let Some(e) = e.downcast_ref::<dqngpu_trace::TraceError>() {
        e.is_usage()
    } else {
        false
    }
}

/// `dqngpu-plan`'s search settings, for every command that takes a scheduler.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct PlanArgs {
    /// dqngpu-plan: the scorer's best rows played out per choice [default: 4]; fewer are faster.
    #[arg(long)]
    pub plan_rows: Option<usize>,
    /// dqngpu-plan: the makespan guard's weight in a future's cost (the training's units)
    /// [default: 2]; 0: mean JCT alone.
    #[arg(long, allow_negative_numbers = true)]
    pub plan_guard: Option<f64>,
}

impl PlanArgs {
    /// The settings, checked; `None` when neither is given (the plan's defaults).
    pub fn config(&self) -> anyhow::Result<Option<dqngpu_rl::scorer::plan::PlanConfig>> {
        if self.plan_rows.is_none() && self.plan_guard.is_none() {
            return Ok(None);
        }
        let d = dqngpu_rl::scorer::plan::PlanConfig::default();
        Ok(Some(dqngpu_rl::scorer::plan::PlanConfig::new(
            self.plan_rows.unwrap_or(d.top_k),
            self.plan_guard.unwrap_or(d.makespan_guard),
        )?))
    }
}

/// Refuses an output (`flag` `output`) that is one of the command's input files (`inputs`, by
/// flag): writing it would replace the input before, or instead of, reading it, and a raw log
/// cannot be recorded again. Compared as files (the same file by another path counts too); an
/// output that does not exist yet is no input.
pub fn refuse_output_over_input(
    flag: &str,
    output: &std::path::Path,
    inputs: &[(&str, &std::path::Path)],
) -> anyhow::Result<()> {
    let Ok(out) = output.canonicalize() else { return Ok(()) };
    for (input_flag, input) in inputs {
        if input.canonicalize().is_ok_and(|i| i == out) {
            anyhow::bail!(
                "{flag} {} is the file {input_flag} reads; writing it would replace the input: choose another name",
                output.display()
            );
        }
    }
    Ok(())
}

/// A whole number from 1 to `max` of `what`, or an error saying so (clap names the flag).
fn parse_count(s: &str, max: usize, what: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("expected a whole number of {what} from 1 to {max}")),
    }
}

/// Parses a count of jobs to draw (`--n-jobs`, `workload --jobs`, `train --jobs`): 1 to
/// [`dqngpu_sim::MAX_DRAWN_JOBS`].
pub fn parse_job_count(s: &str) -> Result<usize, String> {
    parse_count(s, dqngpu_sim::MAX_DRAWN_JOBS, "jobs")
}

/// Parses `train --jobsets`: 1 to [`dqngpu_rl::reinforce::MAX_TRAIN_JOBSETS`].
pub fn parse_jobset_count(s: &str) -> Result<usize, String> {
    parse_count(s, dqngpu_rl::reinforce::MAX_TRAIN_JOBSETS, "job sets")
}

/// Parses `--max-slowdown PCT|off`: a percentage >= 0 as a fraction, or `None` for `off`.
pub fn parse_max_slowdown(s: &str) -> anyhow::Result<Option<f64>> {
    match s.trim() {
        "off" => Ok(None),
        pct => {
            let v: f64 =
                pct.parse().ok().filter(|v: &f64| v.is_finite() && *v >= 0.0).ok_or_else(|| {
                    anyhow::anyhow!("--max-slowdown: expected a percentage >= 0 or `off`, got `{pct}`")
                })?;
            Ok(Some(v / 100.0))
        }
    }
}

/// Output format shared by the commands that print results.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// Human-readable table.
    #[default]
    Table,
    /// JSON for scripts.
    Json,
}
