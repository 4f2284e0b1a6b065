//! Episodes and the task the scorer trains on, and how an episode is simulated: to the end
//! under a decision function, in parallel over many, or under a scorer.

use std::sync::Arc;

use dqngpu_interference::Interference;
use dqngpu_model::{AppLibrary, ClusterSpec, ClusterView, JobSet, Placement};
use dqngpu_sim::{SimConfig, SimResult, Simulator};

use super::guard::{cost, Guard};
use crate::error::RlError;
use crate::reinforce::Objective;
use crate::scorer::{costliest_first, decide_best, Caller, ScorerPolicy};

/// One training (or validation) episode: a job set on a cluster, drawn from a library.
#[derive(Debug, Clone)]
pub struct Episode {
    /// The cluster.
    pub cluster: ClusterSpec,
    /// The app library the job set draws from.
    pub library: Arc<AppLibrary>,
    /// The jobs.
    pub set: JobSet,
    /// A slowdown budget (a fraction) for this episode, beside the task's.
    pub max_slowdown: Option<f64>,
    /// The makespan guard training puts on this episode (none outside training, or with the
    /// guard off).
    pub guard: Option<Guard>,
}

impl Episode {
    /// `set` on `cluster`, drawn from `library`: no budget of its own, no guard.
    pub fn new(cluster: ClusterSpec, library: Arc<AppLibrary>, set: JobSet) -> Self {
        Episode { cluster, library, set, max_slowdown: None, guard: None }
    }
}

/// The budget an episode runs under: its own, else the task's.
pub(super) fn budget_of(task: &ScorerTask, ep: &Episode) -> Option<f64> {
    ep.max_slowdown.or(task.config.max_slowdown)
}

/// What the scorer's rows must respect in an episode: its budget, predicted with the task's
/// interference model (the simulator's).
pub(super) fn caller_of(task: &ScorerTask, ep: &Episode) -> Caller {
    Caller { max_slowdown: budget_of(task, ep), ..task_caller(task) }
}

/// The task's own caller (its budget and model), which the trained policy is handed.
pub(super) fn task_caller(task: &ScorerTask) -> Caller {
    Caller::for_config(&task.config, task.interference.clone())
}

/// The simulator settings of an episode.
pub(super) fn config_of(task: &ScorerTask, ep: &Episode) -> SimConfig {
    let max_slowdown = budget_of(task, ep);
    let config = SimConfig { max_slowdown, ..task.config.clone() };
    // Under a budget the scorer (and every rule told the budget) is asked at every tick
    // (`Caller::asks_every_tick`), so it trains and is measured against the rules that way.
    if max_slowdown.is_some() {
        SimConfig { tick_trigger: dqngpu_sim::TickTrigger::Always, ..config }
    } else {
        config
    }
}

/// What the scorer trains on.
pub struct ScorerTask {
    /// Training episodes (job sets; each may have its own cluster and library).
    pub train: Vec<Episode>,
    /// Validation episodes (seeds disjoint from training and evaluation).
    pub validation: Vec<Episode>,
    /// The interference model of the simulator.
    pub interference: Arc<dyn Interference>,
    /// Simulator settings (a slowdown budget here applies in training as in evaluation).
    pub config: SimConfig,
}

/// Runs `ep` to the end, asking `decide` at each decision; returns the objective.
pub(super) fn simulate(
    task: &ScorerTask,
    ep: &Episode,
    objective: Objective,
    decide: &mut dyn FnMut(&ClusterView<'_>) -> Vec<Placement>,
) -> Result<f64, RlError> {
    Ok(cost(objective, ep, &run(task, ep, decide)?))
}

/// Runs `ep` to the end, asking `decide` at each decision.
pub(super) fn run(
    task: &ScorerTask,
    ep: &Episode,
    decide: &mut dyn FnMut(&ClusterView<'_>) -> Vec<Placement>,
) -> Result<SimResult, RlError> {
    let mut sim = Simulator::new(&ep.cluster, &ep.library, &ep.set, task.interference.clone(), config_of(task, ep))?;
    while !sim.done() {
        if sim.needs_decision() {
            let d = decide(&sim.view());
            sim.apply(&d)?;
        }
        sim.step();
    }
    Ok(sim.finish())
}

/// A rough cost of simulating `ep` (for scheduling only): its jobs' solo time, times its
/// jobs (decisions), per GPU.
fn work(ep: &Episode) -> f64 {
    let solo: f64 = ep.set.jobs.iter().map(|j| ep.library.get(&j.app).map(|p| p.solo_s()).unwrap_or(0.0)).sum();
    solo * ep.set.jobs.len() as f64 / ep.cluster.gpus().len().max(1) as f64
}

/// `f` on each of `eps` in parallel (costliest first), results in order; the first error.
pub(super) fn par_episodes<T: Send>(
    eps: &[Episode],
    f: impl Fn(usize, &Episode) -> Result<T, RlError> + Sync,
) -> Result<Vec<T>, RlError> {
    costliest_first::map(eps, work, f).into_iter().collect()
}

/// The objective of `policy` (told each episode's budget) on each of `eps`, in parallel.
pub(super) fn costs(
    task: &ScorerTask,
    eps: &[Episode],
    objective: Objective,
    policy: &ScorerPolicy,
) -> Result<Vec<f64>, RlError> {
    par_episodes(eps, |_, ep| {
        let caller = caller_of(task, ep);
        simulate(task, ep, objective, &mut |v| decide_best(v, &policy.greedy, &caller, &policy.mlp))
    })
}
